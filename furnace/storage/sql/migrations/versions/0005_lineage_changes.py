"""Which keys each move of the lineage stamp touched (SQLite only): the table ``lineage_changes``.

Migration 0004's triggers move ``lineage_stamp`` on every change that could alter a remembered walk; a
reader that saw another stamp forgot everything it remembered. Here the same triggers also append, for
every move, one row naming what it touched, so a reader can forget only the walks, edges and agents those
keys reach (``VerifiedAgents``, ``docs/store.md``):

* ``seq``: the stamp's ``n`` after the move, ``token``: its token then (every move is one row, so the rows
  after the seq a reader saw are exactly ``n_seen + 1 .. n_now``, each with the token of that state: a
  state a rolled-back transaction showed is never confirmed by a committed row);
* ``kind`` and the keys: ``agent`` (``id``), ``edge`` (``id`` the child, ``other`` the parent), ``elixir``
  (``id``, ``version``); an UPDATE moves the stamp twice, once for the old keys and once for the new.

The log only grows at its end and is kept short: every 1,000th row deletes the rows more than
:data:`KEEP` moves old (a reader whose last seq is gone forgets everything, as before). Its own guards: a
row is inserted only as the stamp's current ``(n, token)`` and only once (an ``INSERT OR REPLACE`` of a
logged row is refused), never updated, and deleted only once it is :data:`KEEP` moves old -- so a program
cannot hide the row of a change it made from a reader that has not read it yet. The triggers of 0004 are
dropped and made again with the log (the schema cookie moves, so every reader forgets once).

Revision ID: 0005
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

KEEP = 10_000  # moves of the stamp the log keeps at least
_PRUNE_EVERY = 1_000

_BUMP = "UPDATE lineage_stamp SET n = n + 1, token = randomblob(16);"


def _logged(kind: str, id: str, other: str = "NULL", version: str = "NULL") -> str:
    """One move of the stamp and its row in the log."""
    return (
        f"{_BUMP} INSERT INTO lineage_changes (seq, token, kind, id, other, version)"
        f" SELECT n, token, '{kind}', {id}, {other}, {version} FROM lineage_stamp;"
    )


def _agent(row: str) -> str:
    return _logged("agent", f"{row}.id")


def _edge(row: str) -> str:
    return _logged("edge", f"{row}.child", f"{row}.parent")


def _elixir(row: str) -> str:
    return _logged("elixir", f"{row}.id", version=f"{row}.version")


_REPLACED_OR_NAMED = (
    "EXISTS (SELECT 1 FROM elixir_versions WHERE id = NEW.id AND version = NEW.version)"
    " OR EXISTS (SELECT 1 FROM lineage_edges WHERE parent = NEW.id AND parent_version = NEW.version)"
)
# (name, when and on what, condition or None, body): the triggers of 0004, each now logging what it touched
_TRIGGERS = (
    ("agents_stamp_insert", "AFTER INSERT ON agents", None, _agent("NEW")),
    ("agents_stamp_update", "AFTER UPDATE ON agents", None, _agent("OLD") + " " + _agent("NEW")),
    ("agents_stamp_delete", "AFTER DELETE ON agents", None, _agent("OLD")),
    ("lineage_edges_stamp_insert", "AFTER INSERT ON lineage_edges", None, _edge("NEW")),
    ("lineage_edges_stamp_update", "AFTER UPDATE ON lineage_edges", None, _edge("OLD") + " " + _edge("NEW")),
    ("lineage_edges_stamp_delete", "AFTER DELETE ON lineage_edges", None, _edge("OLD")),
    ("elixir_versions_stamp_insert", "BEFORE INSERT ON elixir_versions", _REPLACED_OR_NAMED, _elixir("NEW")),
    ("elixir_versions_stamp_update", "AFTER UPDATE ON elixir_versions", None, _elixir("OLD") + " " + _elixir("NEW")),
    ("elixir_versions_stamp_delete", "AFTER DELETE ON elixir_versions", None, _elixir("OLD")),
)
_REFUSE = "SELECT RAISE(ABORT, 'lineage_changes only grows at its end');"
_STAMP = "(SELECT {} FROM lineage_stamp)"
# the log's own triggers (name, when and on what, condition or None, body)
_LOG_TRIGGERS = (
    (
        "lineage_changes_appended",
        "BEFORE INSERT ON lineage_changes",
        f"NEW.seq IS NOT {_STAMP.format('n')} OR NEW.token IS NOT {_STAMP.format('token')}"
        " OR EXISTS (SELECT 1 FROM lineage_changes WHERE seq = NEW.seq)",
        _REFUSE,
    ),
    ("lineage_changes_kept", "BEFORE UPDATE ON lineage_changes", None, _REFUSE),
    (
        "lineage_changes_old_only",
        "BEFORE DELETE ON lineage_changes",
        f"OLD.seq > {_STAMP.format('n')} - {KEEP}",
        _REFUSE,
    ),
    (
        "lineage_changes_prune",
        "AFTER INSERT ON lineage_changes",
        f"NEW.seq % {_PRUNE_EVERY} = 0",
        f"DELETE FROM lineage_changes WHERE seq <= NEW.seq - {KEEP};",
    ),
)


def _trigger(name: str, event: str, condition: str | None, body: str) -> str:
    when = f" WHEN {condition}" if condition else ""
    return f"CREATE TRIGGER {name} {event} FOR EACH ROW{when} BEGIN {body} END"


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        "CREATE TABLE lineage_changes (seq INTEGER PRIMARY KEY, token BLOB NOT NULL, kind TEXT NOT NULL,"
        " id TEXT, other TEXT, version INTEGER)"
    )
    for name, *_ in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    for name, event, condition, body in (*_TRIGGERS, *_LOG_TRIGGERS):
        op.execute(_trigger(name, event, condition, body))
    # the current state's row (it touched nothing): the first move after the upgrade is read as a change
    op.execute("INSERT INTO lineage_changes (seq, token, kind) SELECT n, token, 'start' FROM lineage_stamp")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for name, *_ in (*_TRIGGERS, *_LOG_TRIGGERS):
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS lineage_changes")
    bump = "UPDATE lineage_stamp SET n = n + 1, token = randomblob(16);"
    for name, event, condition, _ in _TRIGGERS:  # 0004's triggers: the stamp alone
        op.execute(_trigger(name, event, condition, bump))
