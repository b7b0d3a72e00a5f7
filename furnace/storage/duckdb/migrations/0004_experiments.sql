-- Experiments: evolution runs, their generations, individuals and per-probe scores.
-- Natural keys make every write idempotent (resume never duplicates a row).

CREATE TABLE IF NOT EXISTS experiments (
    experiment_id VARCHAR PRIMARY KEY,          -- exp-<name>-<hash of config + model>
    name          VARCHAR NOT NULL,
    config        JSON NOT NULL,
    seed          BIGINT NOT NULL,
    model         VARCHAR NOT NULL,
    status        VARCHAR NOT NULL DEFAULT 'running',
    summary       JSON,
    created_at    TIMESTAMP NOT NULL DEFAULT current_timestamp,
    updated_at    TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE TABLE IF NOT EXISTS experiment_generations (
    experiment_id    VARCHAR NOT NULL,
    generation       INTEGER NOT NULL,
    survivors        JSON NOT NULL,              -- agent ids, fittest first
    best_fitness     DOUBLE NOT NULL,
    mean_fitness     DOUBLE NOT NULL,
    operator_weights JSON NOT NULL,
    calls            INTEGER NOT NULL DEFAULT 0, -- non-cached model calls made for it
    cached_calls     INTEGER NOT NULL DEFAULT 0,
    tokens           BIGINT NOT NULL DEFAULT 0,
    cost_usd         DOUBLE NOT NULL DEFAULT 0,
    finished_at      TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (experiment_id, generation)
);

CREATE TABLE IF NOT EXISTS experiment_individuals (
    experiment_id   VARCHAR NOT NULL,
    generation      INTEGER NOT NULL,
    agent_id        VARCHAR NOT NULL,
    slot            INTEGER NOT NULL,
    operator        VARCHAR NOT NULL,
    parents         JSON NOT NULL,
    lineage_hash    VARCHAR,
    elixir          JSON NOT NULL,
    system_prompt   VARCHAR NOT NULL,
    fitness         DOUBLE NOT NULL,
    objectives      JSON NOT NULL,
    failures        INTEGER NOT NULL DEFAULT 0,
    failure_reasons JSON NOT NULL,
    calls           INTEGER NOT NULL DEFAULT 0,
    tokens          BIGINT NOT NULL DEFAULT 0,
    cost_usd        DOUBLE NOT NULL DEFAULT 0,
    created_at      TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (experiment_id, generation, agent_id)
);

CREATE TABLE IF NOT EXISTS experiment_scores (
    experiment_id VARCHAR NOT NULL,
    generation    INTEGER NOT NULL,
    agent_id      VARCHAR NOT NULL,
    probe         VARCHAR NOT NULL,                -- '*' for per-agent scorers (diversity)
    scorer        VARCHAR NOT NULL,
    value         DOUBLE NOT NULL,
    reason        VARCHAR NOT NULL,
    failed        BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (experiment_id, generation, agent_id, probe, scorer)
);
