-- The elixir library, agents and the lineage DAG (owner: store).
-- Timestamps are UTC (TIMESTAMP without zone; the store converts).

CREATE TABLE IF NOT EXISTS elixir_versions (
    id           VARCHAR NOT NULL,
    version      INTEGER NOT NULL,
    origin       VARCHAR NOT NULL DEFAULT 'library',  -- 'library' | 'agent'
    name         VARCHAR NOT NULL,
    content_hash VARCHAR NOT NULL,
    body         JSON NOT NULL,                        -- content fields + name, language
    created_at   TIMESTAMP NOT NULL,
    deleted_at   TIMESTAMP,
    PRIMARY KEY (id, version)
);
CREATE INDEX IF NOT EXISTS elixir_versions_hash ON elixir_versions (content_hash);

CREATE TABLE IF NOT EXISTS agents (
    id             VARCHAR PRIMARY KEY,
    lineage        JSON NOT NULL,                      -- Lineage incl. lineage_hash
    lineage_hash   VARCHAR NOT NULL,
    elixir_version INTEGER NOT NULL,                   -- the child in elixir_versions (id = agent id)
    system_prompt  VARCHAR NOT NULL,
    tools          JSON NOT NULL,
    members        JSON NOT NULL,
    created_at     TIMESTAMP NOT NULL
);
CREATE INDEX IF NOT EXISTS agents_lineage_hash ON agents (lineage_hash);

-- parent_version 0 = not pinned to a version
CREATE TABLE IF NOT EXISTS lineage_edges (
    parent         VARCHAR NOT NULL,
    child          VARCHAR NOT NULL,
    operator       VARCHAR NOT NULL,
    op_version     VARCHAR NOT NULL DEFAULT '',
    parent_version INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (parent, child, operator, op_version, parent_version)
);
CREATE INDEX IF NOT EXISTS lineage_edges_child ON lineage_edges (child);
CREATE INDEX IF NOT EXISTS lineage_edges_parent ON lineage_edges (parent);
