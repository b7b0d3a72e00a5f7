"""A change stamp of what lineage walks read (SQLite only): the table ``lineage_stamp`` and its triggers.

``SQLStore``'s walks remember what they verified while this stamp is unchanged (``VerifiedAgents``,
``docs/store.md``). One row, ``(n, token)``: every change that could alter a remembered walk or a
verified agent moves it -- ``n`` up by one, ``token`` sixteen fresh random bytes (so a state a rolled-back
transaction showed, its own writes' stamp included, is never shown again by a committed one):

* ``agents`` and ``lineage_edges``: every INSERT (one that replaces a row included: the insert's own
  trigger fires), UPDATE and DELETE. A new agent too: a walk down reads the agents whose lineage names a
  reached node, and an id a walk met as no agent may become one.
* ``elixir_versions``: every UPDATE and DELETE, and an INSERT when a row of that key exists (``INSERT OR
  REPLACE`` deletes it without firing a delete trigger unless ``recursive_triggers`` is on) or when a
  lineage edge names that version as a parent (a verification compares a parent's stored hash when it is
  there). Any other new version (a library elixir's edit, a new agent's persona before its agent row)
  changes nothing a walk read.

The stamp row only moves forward: an UPDATE that does not raise ``n``, a DELETE or an INSERT of it is
refused, so a program cannot put back the stamp a process remembered after forging a row; dropping a
trigger changes the schema cookie, which the store reads with the stamp.

PostgreSQL: nothing (its walks remember nothing, every walk reads and verifies in full). Not in the
SQLAlchemy metadata: it is no data (no snapshot, no move from DuckDB copies it).

Revision ID: 0004
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_BUMP = "UPDATE lineage_stamp SET n = n + 1, token = randomblob(16);"
_REPLACED_OR_NAMED = (
    "EXISTS (SELECT 1 FROM elixir_versions WHERE id = NEW.id AND version = NEW.version)"
    " OR EXISTS (SELECT 1 FROM lineage_edges WHERE parent = NEW.id AND parent_version = NEW.version)"
)
# (name, when and on what, condition or None): each bumps the stamp
_TRIGGERS = (
    ("agents_stamp_insert", "AFTER INSERT ON agents", None),
    ("agents_stamp_update", "AFTER UPDATE ON agents", None),
    ("agents_stamp_delete", "AFTER DELETE ON agents", None),
    ("lineage_edges_stamp_insert", "AFTER INSERT ON lineage_edges", None),
    ("lineage_edges_stamp_update", "AFTER UPDATE ON lineage_edges", None),
    ("lineage_edges_stamp_delete", "AFTER DELETE ON lineage_edges", None),
    ("elixir_versions_stamp_insert", "BEFORE INSERT ON elixir_versions", _REPLACED_OR_NAMED),
    ("elixir_versions_stamp_update", "AFTER UPDATE ON elixir_versions", None),
    ("elixir_versions_stamp_delete", "AFTER DELETE ON elixir_versions", None),
)
# the stamp row's own guards (created after its one row is inserted)
_GUARDS = (
    ("lineage_stamp_forward", "BEFORE UPDATE ON lineage_stamp", "NEW.n <= OLD.n"),
    ("lineage_stamp_kept", "BEFORE DELETE ON lineage_stamp", None),
    ("lineage_stamp_single", "BEFORE INSERT ON lineage_stamp", None),
)


def _trigger(name: str, event: str, condition: str | None, body: str) -> str:
    when = f" WHEN {condition}" if condition else ""
    return f"CREATE TRIGGER {name} {event} FOR EACH ROW{when} BEGIN {body} END"


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        "CREATE TABLE lineage_stamp (only_row INTEGER PRIMARY KEY CHECK (only_row = 1),"
        " n INTEGER NOT NULL, token BLOB NOT NULL)"
    )
    op.execute("INSERT INTO lineage_stamp (only_row, n, token) VALUES (1, 0, randomblob(16))")
    for name, event, condition in _TRIGGERS:
        op.execute(_trigger(name, event, condition, _BUMP))
    for name, event, condition in _GUARDS:
        op.execute(_trigger(name, event, condition, "SELECT RAISE(ABORT, 'lineage_stamp only moves forward');"))


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for name, _, _ in (*_TRIGGERS, *_GUARDS):
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS lineage_stamp")
