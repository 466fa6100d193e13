-- Metrics store, schema version 1. Timestamps are RFC 3339 UTC text with milliseconds;
-- durations are milliseconds; money is US dollars; token counts are tokens.

CREATE TABLE runs (
    run_id     TEXT PRIMARY KEY,
    started_at TEXT NOT NULL
);

CREATE TABLE episodes (
    run_id        TEXT NOT NULL,
    episode_id    TEXT NOT NULL,
    scenario      TEXT,
    model         TEXT,
    provider      TEXT,
    policy_source TEXT,             -- NULL: no policy
    enforcement   TEXT,             -- 'kernel' | 'host'
    workspace     TEXT,
    started_at    TEXT,
    finished_at   TEXT,             -- NULL: no episode_finished (yet)
    outcome       TEXT,             -- passed | failed | limit | provider-error | interrupted | enforcement-unavailable
    success_check INTEGER,          -- 1 passed, 0 failed, NULL not run
    limit_hit     TEXT,             -- turns | tokens | wall | cost
    wall_ms       INTEGER,
    last_seq      INTEGER NOT NULL DEFAULT 0,   -- the last transcript event taken in
    PRIMARY KEY (run_id, episode_id)
);

CREATE TABLE model_calls (
    run_id              TEXT NOT NULL,
    episode_id          TEXT NOT NULL,
    call_index          INTEGER NOT NULL,   -- 1, 2, … within the episode
    model               TEXT,
    input_tokens        INTEGER,            -- NULL: no usage reported for this call
    cached_input_tokens INTEGER,
    output_tokens       INTEGER,
    reasoning_tokens    INTEGER,
    cost_usd            REAL,               -- NULL when price_source is 'unknown'
    price_source        TEXT,               -- 'shipped table <edition>' | 'override' | 'unknown'
    first_token_ms      INTEGER,
    total_ms            INTEGER,
    at                  TEXT,
    PRIMARY KEY (run_id, episode_id, call_index)
);

CREATE TABLE tool_calls (
    run_id           TEXT NOT NULL,
    episode_id       TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    tool             TEXT,
    state            TEXT,                  -- completed | could_not_run | failed; NULL: no result
    exit_code        INTEGER,
    exit_signal      INTEGER,
    duration_ms      INTEGER,
    output_truncated INTEGER,
    denials          INTEGER NOT NULL DEFAULT 0,
    at               TEXT,
    PRIMARY KEY (run_id, episode_id, call_id)
);

CREATE TABLE denials (
    run_id      TEXT NOT NULL,
    episode_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,           -- the denial event's sequence number
    call_id     TEXT NOT NULL,
    hook        TEXT NOT NULL,
    explanation TEXT NOT NULL,
    target_kind TEXT NOT NULL,              -- 'path' | 'peer'
    target      TEXT NOT NULL,
    missing     TEXT NOT NULL,              -- fs.read | fs.write | exec.allow | net.allow | net.unix
    at          TEXT NOT NULL,
    PRIMARY KEY (run_id, episode_id, seq)
);

CREATE INDEX model_calls_model ON model_calls (model);
CREATE INDEX tool_calls_tool ON tool_calls (tool);
