-- People's picks between two candidates' replies to one probe (furnace pick, docs/evaluation.md).
-- Insert-only: undoing a pick sets undone_at and keeps the row; each pick has its own id, so two
-- people picking at once add two rows. agent_a was shown as A, agent_b as B (the blind order,
-- drawn with order_seed). Each row carries a keyed seal, checked on every read.

CREATE TABLE IF NOT EXISTS human_picks (
    pick_id       VARCHAR PRIMARY KEY,
    experiment_id VARCHAR NOT NULL,
    probe         VARCHAR NOT NULL,
    agent_a       VARCHAR NOT NULL,
    generation_a  INTEGER NOT NULL,
    agent_b       VARCHAR NOT NULL,
    generation_b  INTEGER NOT NULL,
    choice        VARCHAR NOT NULL CHECK (choice IN ('A', 'B', 'tie')),
    who           VARCHAR NOT NULL,
    reason        VARCHAR NOT NULL DEFAULT '',
    order_seed    BIGINT NOT NULL DEFAULT 0,
    created_at    TIMESTAMP NOT NULL,
    undone_at     TIMESTAMP,
    seal          VARCHAR,                      -- keyed seal of the pick as made (docs/reliability.md)
    undo_seal     VARCHAR                       -- keyed seal of its undo, when undone
);
