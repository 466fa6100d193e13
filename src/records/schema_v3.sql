-- Metrics store, schema version 3: subagents.

-- Where a subagent session came from; NULL (depth 0) for a top-level session.
ALTER TABLE episodes ADD COLUMN parent_episode TEXT;
ALTER TABLE episodes ADD COLUMN parent_call TEXT;
ALTER TABLE episodes ADD COLUMN agent_role TEXT;       -- the role, or '(inline)'
ALTER TABLE episodes ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;

-- Each `agent` tool call: the role asked for, and the subagent it started or why none was.
CREATE TABLE subagents (
    run_id        TEXT NOT NULL,
    episode_id    TEXT NOT NULL,           -- the calling session
    call_id       TEXT NOT NULL,
    role          TEXT NOT NULL,
    agent_episode TEXT,                    -- NULL: none started
    refused       TEXT,                    -- why none started; NULL when one did
    at            TEXT NOT NULL,
    PRIMARY KEY (run_id, episode_id, call_id)
);
