"""Which tables changed in place since an analysis snapshot (SQLite only): the table ``snapshot_stamps``.

A snapshot refresh copies only the rows added since the snapshot before it, when that is all that changed
(``furnace.storage.sql.parquet``, docs/store.md). Rows are added with a growing ``rowid``; what an append
cannot show is a row changed or removed in place. One row per data table, ``(name, n, token)``: every
UPDATE and DELETE of a row of that table moves it -- ``n`` up by one, ``token`` sixteen fresh random
bytes (so a state a rolled-back transaction showed is never shown again by a committed one) -- and a
refresh that sees another stamp than its base snapshot recorded copies that table in full. An INSERT
fires nothing: the hot paths (a model call's ledger row and answer) pay no trigger. An ``INSERT OR
REPLACE`` removes a row without a delete trigger; the refresh's own count of the rows up to the base's
``rowid`` catches that (and a ``VACUUM`` that renumbered them).

The tables are the data tables at this revision. A later migration that adds a table adds its row and
triggers; a table without a row is always copied in full. PostgreSQL: nothing (it has no ``rowid``: its
snapshots are always full copies). Not in the SQLAlchemy metadata: it is no data (no snapshot copies it).

Revision ID: 0006
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLES = (
    "agents",
    "arena_checkpoints",
    "arena_leases",
    "arena_members",
    "arena_replies",
    "arena_runs",
    "arena_sessions",
    "assistant_sessions",
    "chat_messages",
    "chat_sessions",
    "content_versions",
    "contents",
    "elixir_versions",
    "embeddings",
    "experiment_generations",
    "experiment_individuals",
    "experiment_scores",
    "experiments",
    "human_picks",
    "kv",
    "lineage_edges",
    "llm_calls",
    "llm_responses",
    "processed_revisions",
    "revisions",
)
_EVENTS = ("update", "delete")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("CREATE TABLE snapshot_stamps (name TEXT PRIMARY KEY, n INTEGER NOT NULL, token BLOB NOT NULL)")
    for table in TABLES:
        op.execute(f"INSERT INTO snapshot_stamps (name, n, token) VALUES ('{table}', 0, randomblob(16))")
        for event in _EVENTS:
            op.execute(
                f"CREATE TRIGGER {table}_snapshot_{event} AFTER {event.upper()} ON {table} FOR EACH ROW BEGIN"
                f" UPDATE snapshot_stamps SET n = n + 1, token = randomblob(16) WHERE name = '{table}'; END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in TABLES:
        for event in _EVENTS:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_snapshot_{event}")
    op.execute("DROP TABLE IF EXISTS snapshot_stamps")
