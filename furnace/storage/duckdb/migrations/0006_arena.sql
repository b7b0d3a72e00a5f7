-- Group-chat arena: sessions, members, runs (with their plan), replies, checkpoints.
CREATE TABLE IF NOT EXISTS arena_sessions (
    session_id  VARCHAR PRIMARY KEY,
    title       VARCHAR NOT NULL DEFAULT '',
    model       VARCHAR NOT NULL,
    created_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS arena_members (
    session_id  VARCHAR NOT NULL,
    position    INTEGER NOT NULL,
    member_id   VARCHAR NOT NULL,
    PRIMARY KEY (session_id, position)
);

-- plan is set once (UPDATE ... WHERE plan IS NULL): a resumed run never re-plans.
CREATE TABLE IF NOT EXISTS arena_runs (
    run_id            VARCHAR PRIMARY KEY,
    session_id        VARCHAR NOT NULL,
    turn              INTEGER NOT NULL,
    message           VARCHAR NOT NULL,
    directive         VARCHAR NOT NULL,
    plan              JSON,
    status            VARCHAR NOT NULL DEFAULT 'running',   -- running | finished | cancelled
    cancel_requested  BOOLEAN NOT NULL DEFAULT false,
    created_at        TIMESTAMP NOT NULL DEFAULT current_timestamp,
    updated_at        TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS arena_replies (
    reply_id        VARCHAR PRIMARY KEY,
    run_id          VARCHAR NOT NULL,
    session_id      VARCHAR NOT NULL,
    speaker_index   INTEGER NOT NULL,
    member_id       VARCHAR NOT NULL,
    member_name     VARCHAR NOT NULL,
    member_version  INTEGER,
    text            VARCHAR NOT NULL,
    ordinal         INTEGER,
    corrected       BOOLEAN NOT NULL DEFAULT false,
    created_at      TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS arena_checkpoints (
    run_id          VARCHAR NOT NULL,
    speaker_index   INTEGER NOT NULL,
    status          VARCHAR NOT NULL,      -- done | failed
    reply_id        VARCHAR,
    error           VARCHAR,
    attempts        INTEGER NOT NULL DEFAULT 1,
    created_at      TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (run_id, speaker_index)
);
