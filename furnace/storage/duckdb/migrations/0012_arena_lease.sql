-- One process drives an arena run at a time (furnace/arena/lease.py): the run's lease.
CREATE TABLE IF NOT EXISTS arena_leases (
    run_id      VARCHAR PRIMARY KEY,
    token       VARCHAR NOT NULL,
    host        VARCHAR NOT NULL,
    pid         INTEGER NOT NULL,
    expires_at  TIMESTAMP NOT NULL
);
