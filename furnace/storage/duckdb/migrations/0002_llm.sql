-- LLM seam: response cache (by content key) and per-call accounting.
-- Neither table holds request messages, keys or headers.

CREATE TABLE IF NOT EXISTS llm_responses (
    cache_key   VARCHAR PRIMARY KEY,      -- sha256 of the request content (LLMRequest.cache_key)
    model       VARCHAR NOT NULL,
    task        VARCHAR NOT NULL,
    completion  JSON NOT NULL,            -- the Completion as JSON (text, parsed, usage, cost, model, latency)
    created_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS llm_calls (
    id                VARCHAR PRIMARY KEY,
    run_id            VARCHAR,
    task              VARCHAR NOT NULL,
    model             VARCHAR NOT NULL,
    cache_key         VARCHAR NOT NULL,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd          DOUBLE NOT NULL DEFAULT 0,
    latency_s         DOUBLE NOT NULL DEFAULT 0,
    cached            BOOLEAN NOT NULL DEFAULT false,
    status            VARCHAR NOT NULL DEFAULT 'ok',
    created_at        TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE INDEX IF NOT EXISTS llm_calls_run ON llm_calls (run_id);
