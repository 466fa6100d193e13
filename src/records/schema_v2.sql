-- Metrics store, schema version 2: how each model call ended.

-- end_turn | tool_use | max_tokens | refusal | content_filter | pause | error | unknown(<raw>);
-- NULL: the call failed (see error), or its transcript predates version 2.
ALTER TABLE model_calls ADD COLUMN stop_reason TEXT;
-- The category of a failed call: auth | not-found | rate-limit | overloaded | server |
-- network | protocol; NULL: the call did not fail.
ALTER TABLE model_calls ADD COLUMN error TEXT;
