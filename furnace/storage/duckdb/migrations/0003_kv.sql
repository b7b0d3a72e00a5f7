-- Content-addressed key-value cache (synthesis cache, fusion sub-results).
CREATE TABLE IF NOT EXISTS kv (
    key        VARCHAR PRIMARY KEY,
    value      JSON NOT NULL,
    created_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP
);
