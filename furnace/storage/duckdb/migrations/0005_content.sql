-- Content, revision chat and preference-learning marks (owner: revision).
-- Timestamps are naive UTC. Messages are light (read per session); revisions
-- are heavy (full before/after text) and read on demand.

CREATE TABLE IF NOT EXISTS contents (
    id              VARCHAR PRIMARY KEY,
    persona_id      VARCHAR NOT NULL,
    persona_version INTEGER NOT NULL,
    topic           VARCHAR NOT NULL,
    language        VARCHAR NOT NULL,
    created_at      TIMESTAMP NOT NULL
);
CREATE INDEX IF NOT EXISTS contents_persona ON contents (persona_id);

CREATE TABLE IF NOT EXISTS content_versions (
    content_id  VARCHAR NOT NULL,
    version     INTEGER NOT NULL,
    title       VARCHAR NOT NULL,
    body        VARCHAR NOT NULL,
    word_count  INTEGER NOT NULL,
    source      VARCHAR NOT NULL,            -- generate | revise | rollback
    revision_id VARCHAR,
    note        VARCHAR NOT NULL DEFAULT '',
    created_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (content_id, version)
);

CREATE TABLE IF NOT EXISTS chat_sessions (
    id          VARCHAR PRIMARY KEY,
    content_id  VARCHAR NOT NULL UNIQUE,
    persona_id  VARCHAR NOT NULL,
    created_at  TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS chat_messages (
    id          VARCHAR PRIMARY KEY,         -- {session_id}-m{seq}
    session_id  VARCHAR NOT NULL,
    seq         INTEGER NOT NULL,
    role        VARCHAR NOT NULL,            -- system | user | assistant
    kind        VARCHAR NOT NULL,            -- welcome | suggestion | noted | revision | unchanged | failure | rollback
    content     VARCHAR NOT NULL,
    revision_id VARCHAR,
    created_at  TIMESTAMP NOT NULL,
    UNIQUE (session_id, seq)
);

CREATE TABLE IF NOT EXISTS revisions (
    id              VARCHAR PRIMARY KEY,     -- rev-{content_id}-v{to_version}
    content_id      VARCHAR NOT NULL,
    session_id      VARCHAR NOT NULL,
    persona_id      VARCHAR NOT NULL,
    persona_version INTEGER NOT NULL,
    suggestions     JSON NOT NULL,
    from_version    INTEGER NOT NULL,
    to_version      INTEGER NOT NULL,
    original_title  VARCHAR NOT NULL,
    original_body   VARCHAR NOT NULL,
    revised_title   VARCHAR NOT NULL,
    revised_body    VARCHAR NOT NULL,
    model           VARCHAR NOT NULL DEFAULT '',
    created_at      TIMESTAMP NOT NULL
);
CREATE INDEX IF NOT EXISTS revisions_content ON revisions (content_id);

CREATE TABLE IF NOT EXISTS processed_revisions (
    revision_id     VARCHAR PRIMARY KEY,
    persona_id      VARCHAR NOT NULL,
    persona_version INTEGER,
    preferences     JSON NOT NULL,           -- the preferences extracted from this revision
    status          VARCHAR NOT NULL,        -- learned | nothing | already
    processed_at    TIMESTAMP NOT NULL DEFAULT current_timestamp
);
