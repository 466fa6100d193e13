-- Metrics store, schema version 4: lost audit records.

-- Audit records the kernel lost while the call ran (its `tool_result`'s `lost_records`): the
-- call's `denials` may then be incomplete.
ALTER TABLE tool_calls ADD COLUMN lost_records INTEGER NOT NULL DEFAULT 0;
