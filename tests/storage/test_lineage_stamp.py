"""The change stamp of what lineage walks read (SQLite, migration 0004): a commit that cannot change a walk's
answer or its verification (a cached answer, a ledger row, an elixir's new version) leaves the walk
remembered; every change that can -- an edited, replaced, deleted or added row of an agent, an edge or an
elixir version a walk read -- moves it, written by another program through the stdlib ``sqlite3`` module
(its own connection, ``recursive_triggers`` off as SQLite's default), and the next walk reads again and
refuses a forgery. The stamp row itself only moves forward, and an existing home is upgraded to it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from furnace.domain.errors import LineageError, SealError
from furnace.llm.cache import CachedLLM
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import Completion, TaskKind, Usage, system_user
from furnace.storage.sql.db import HEAD_REVISION, SQLDatabase, migrations_config, sqlite_url
from furnace.storage.sql.kv import SQLKV
from furnace.storage.sql.llm_calls import SQLCallLedger, SQLResponseCache
from furnace.storage.sql.store import _SQLITE_STAMP, SQLStore

from .conftest import make_elixir
from .test_lineage_verification import _chain
from .test_verified_walks import _sql_of

_TABLES = ("agents", "lineage_edges", "elixir_versions")


def _raw(store: SQLStore, *statements: str | tuple[str, list[Any]]) -> None:
    """``statements`` committed in one transaction by another program (``sqlite3`` on the file)."""
    con = sqlite3.connect(store.db.path, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        for statement in statements:
            sql, params = (statement, []) if isinstance(statement, str) else statement
            con.execute(sql, params)
        con.execute("COMMIT")
    finally:
        con.close()


def _reads_lineage(ran: list[str]) -> bool:
    return any(table in sql for sql in ran for table in _TABLES)


def _remembered(store: SQLStore, walk: Callable[[], Any]) -> tuple[Any, bool]:
    """What ``walk`` returns, and whether it was answered from memory (it read no lineage table)."""
    found, ran = _sql_of(store, walk)
    assert any("lineage_stamp" in sql for sql in ran)  # the stamp is read on every walk
    return found, not _reads_lineage(ran)


def _llm_call(store: SQLStore) -> None:
    """A paid model call: its answer cached and its ledger row, in one commit."""
    db = store.db
    ledger = SQLCallLedger(db)
    answer = Completion(text="hi", usage=Usage(prompt_tokens=3, completion_tokens=1), cost_usd=0.001, model="fake")
    CachedLLM(FakeLLM(respond=lambda r: answer), SQLResponseCache(db, ledger=ledger), ledger).complete(
        system_user(TaskKind.REPLY, "sys", "a question")
    )


_UNRELATED: dict[str, Callable[[SQLStore, list[str]], None]] = {
    "an elixir saved": lambda s, ids: s.save_elixir(make_elixir("Bystander")) and None,
    "a new version of the walked library elixir": lambda s, ids: (
        s.save_elixir(make_elixir("Root", principles=["Be brief."])) and None
    ),
    "a model call cached and in the ledger": lambda s, ids: _llm_call(s),
    "a KV entry": lambda s, ids: SQLKV(s.db).put_if_absent("k", {"v": 1}) and None,
    "a KV row by another program": lambda s, ids: _raw(
        s, ("INSERT INTO kv (key, value, created_at) VALUES ('other', '{}', '2026-01-01 00:00:00')", [])
    ),
}


@pytest.mark.parametrize("commit", list(_UNRELATED))
@pytest.mark.parametrize("up", [True, False])
def test_a_commit_that_cannot_change_a_walk_leaves_it_remembered(
    line: tuple[SQLStore, list[str]], commit: str, up: bool
) -> None:
    store, ids = line
    walk = (lambda: store.ancestors(ids[-1])) if up else (lambda: store.descendants(ids[0]))
    first = walk()
    assert _remembered(store, walk) == (first, True)
    before = store.db.query("SELECT n FROM lineage_stamp")
    _UNRELATED[commit](store, ids)
    assert store.db.query("SELECT n FROM lineage_stamp") == before
    assert _remembered(store, walk) == (first, True)  # no lineage table read, nothing verified again


def _forged_body(store: SQLStore, id: str) -> str:
    """``id``'s persona body with another identity (its stored hash and seal kept)."""
    body = json.loads(store.db.query("SELECT body FROM elixir_versions WHERE id = ?", [id])[0][0])
    body["identity"] = "You are EvilBot."
    return json.dumps(body)


def _replaced_persona(store: SQLStore, id: str) -> tuple[str, list[Any]]:
    """``INSERT OR REPLACE`` of ``id``'s persona row with a forged body."""
    cols = "id, version, origin, name, content_hash, body, created_at, deleted_at, language, expertise, seal"
    picked = cols.replace("body", "?")
    sql = f"INSERT OR REPLACE INTO elixir_versions ({cols}) SELECT {picked} FROM elixir_versions WHERE id = ?"
    return sql, [_forged_body(store, id), id]


_AGENT_COLS = "id, lineage, lineage_hash, elixir_version, system_prompt, tools, members, created_at, seal"

_FORGERIES: dict[str, Callable[[SQLStore, str, str], tuple[str, list[Any]]]] = {  # (store, agent, its parent)
    "an updated agent row": lambda s, id, parent: (
        "UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?",
        [id],
    ),
    "an updated edge": lambda s, id, parent: (
        "UPDATE lineage_edges SET parent = 'evil-twin' WHERE child = ? AND parent = ?",
        [id, parent],
    ),
    "an updated persona": lambda s, id, parent: (
        "UPDATE elixir_versions SET body = ? WHERE id = ?",
        [_forged_body(s, id), id],
    ),
    "a replaced agent row": lambda s, id, parent: (
        f"INSERT OR REPLACE INTO agents ({_AGENT_COLS}) SELECT "
        + _AGENT_COLS.replace("system_prompt", "'You are EvilBot.'")
        + " FROM agents WHERE id = ?",
        [id],
    ),
    "a replaced persona row": lambda s, id, parent: _replaced_persona(s, id),
    "a deleted edge": lambda s, id, parent: (
        "DELETE FROM lineage_edges WHERE child = ? AND parent = ?",
        [id, parent],
    ),
}


@pytest.mark.parametrize("forgery", list(_FORGERIES))
@pytest.mark.parametrize("forged", [1, 4])  # an ancestor (its child's edge names its persona), the start (none)
def test_a_forgery_by_another_program_after_a_remembered_walk_is_refused(
    line: tuple[SQLStore, list[str]], forgery: str, forged: int
) -> None:
    store, ids = line
    first = store.ancestors(ids[-1])
    assert _remembered(store, lambda: store.ancestors(ids[-1])) == (first, True)
    _raw(store, _FORGERIES[forgery](store, ids[forged], ids[forged - 1]))
    with pytest.raises((LineageError, SealError)) as err:
        store.ancestors(ids[-1])
    assert ids[forged][:12] in str(err.value)


def test_a_parent_version_put_back_forged_is_refused(line: tuple[SQLStore, list[str]]) -> None:
    """A plain INSERT of a new key moves the stamp when a lineage edge names that version: the library
    elixir every agent names, deleted (a walk accepts a parent version not in the store) and put back
    with another content hash, is refused on the next walk."""
    store, ids = line
    saved = "id, version, origin, name, content_hash, body, created_at, deleted_at, language, expertise, seal"
    row = store.db.query(f"SELECT {saved} FROM elixir_versions WHERE id = 'root'")[0]
    _raw(store, "DELETE FROM elixir_versions WHERE id = 'root'")
    found = store.ancestors(ids[-1])
    assert _remembered(store, lambda: store.ancestors(ids[-1])) == (found, True)
    forged = list(row)
    forged[4] = "0" * 64
    _raw(store, (f"INSERT INTO elixir_versions ({saved}) VALUES ({', '.join('?' * len(forged))})", forged))
    with pytest.raises(LineageError, match="content"):
        store.ancestors(ids[-1])


def test_a_new_edge_into_a_walked_node_changes_the_next_walks(line: tuple[SQLStore, list[str]]) -> None:
    store, ids = line
    for _ in range(2):
        up, down = store.ancestors(ids[-1]), store.descendants(ids[0])
    _raw(
        store,
        "INSERT INTO lineage_edges VALUES ('ancient', 'root', 'promote', '', 0)",
        ("INSERT INTO lineage_edges VALUES (?, 'late-child', 'promote', '', 0)", [ids[-1]]),
    )
    new_up, new_down = store.ancestors(ids[-1]), store.descendants(ids[0])
    fresh = SQLStore(store.db)  # nothing remembered
    assert (new_up, new_down) == (fresh.ancestors(ids[-1]), fresh.descendants(ids[0]))
    assert {n.id for n in new_up} == {n.id for n in up} | {"ancient"}
    assert {n.id for n in new_down} == {n.id for n in down} | {"late-child"}


def test_a_new_agent_naming_a_walked_node_is_read_by_the_next_walk_down(line: tuple[SQLStore, list[str]]) -> None:
    """A walk down reads the agents whose lineage names a reached node (a child hidden by a missing edge is
    refused): an agent row added without its edges moves the stamp too."""
    store, ids = line
    store.descendants(ids[0])
    store.descendants(ids[0])
    copied = _AGENT_COLS.replace("id,", "'hidden-child',", 1)
    _raw(store, (f"INSERT INTO agents ({_AGENT_COLS}) SELECT {copied} FROM agents WHERE id = ?", [ids[1]]))
    with pytest.raises(LineageError, match="hidden-child"):
        store.descendants(ids[0])


def test_the_stamp_row_only_moves_forward(line: tuple[SQLStore, list[str]]) -> None:
    """A program cannot put back the stamp a process remembered after a forgery: lowering it, deleting it
    or replacing it is refused; dropping a trigger moves the schema cookie the stamp is read with."""
    store, ids = line
    store.ancestors(ids[-1])
    ((n, token),) = store.db.query("SELECT n, token FROM lineage_stamp")
    forge = ("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?", [ids[1]])
    for put_back in (
        ("UPDATE lineage_stamp SET n = ?, token = ?", [n, token]),
        "DELETE FROM lineage_stamp",
        ("INSERT OR REPLACE INTO lineage_stamp (only_row, n, token) VALUES (1, ?, ?)", [n, token]),
    ):
        with pytest.raises(sqlite3.IntegrityError, match="only moves forward"):
            _raw(store, forge, put_back)
    assert store.ancestors(ids[-1])  # nothing was committed
    _raw(store, "DROP TRIGGER agents_stamp_update", forge)
    with pytest.raises(LineageError, match="system prompt does not match"):
        store.ancestors(ids[-1])


def test_a_rolled_back_writes_stamp_is_never_shown_again(line: tuple[SQLStore, list[str]]) -> None:
    """The stamp a write transaction's own writes show (its walks verify in that epoch) differs from that of
    any committed state, even one with as many changes."""
    store, ids = line
    with pytest.raises(RuntimeError), store.unit():
        store.add_edge(ids[0], "orphan", operator="crossover")
        with store.db.connect() as conn:
            inside = tuple(conn.exec_driver_sql(_SQLITE_STAMP).one())
        raise RuntimeError("roll back")
    _raw(store, ("INSERT INTO lineage_edges VALUES (?, 'orphan', 'crossover', '', 0)", [ids[0]]))
    committed = tuple(store.db.query(_SQLITE_STAMP)[0])
    assert committed[0] == inside[0]  # as many changes
    assert committed != inside


def test_without_its_stamp_a_walk_remembers_nothing(line: tuple[SQLStore, list[str]]) -> None:
    store, ids = line
    store.ancestors(ids[-1])
    _raw(
        store,
        *(f"DROP TRIGGER {t}" for (t,) in store.db.query("SELECT name FROM sqlite_master WHERE type = 'trigger'")),
    )
    _raw(store, "DROP TABLE lineage_stamp")
    first = store.ancestors(ids[-1])
    assert _sql_of(store, lambda: store.ancestors(ids[-1]))[0] == first
    assert _reads_lineage(_sql_of(store, lambda: store.ancestors(ids[-1]))[1])  # read and verified again


def home_at(tmp_path: Path, revision: str) -> tuple[str, SQLDatabase]:
    """A SQLite home in ``tmp_path`` migrated up to ``revision`` only (as an older furnace left it): its
    URL and the database, open without migrating further."""
    from alembic import command

    url = sqlite_url(tmp_path)
    old = SQLDatabase(url, home=tmp_path, migrate=False)
    config = migrations_config()
    with old.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    assert old.revision() == revision
    return url, old


def test_an_existing_home_is_upgraded_to_the_stamp_on_first_open(tmp_path: Path) -> None:
    """A SQLite home made at revision 0003 (walks remembered nothing there: no stamp) is brought to the head
    on its first open: its rows are kept, walks are remembered, a forgery is refused."""
    url, old = home_at(tmp_path, "0003")
    ids = _chain(SQLStore(old), 3)
    found = SQLStore(old).ancestors(ids[-1])
    old.close()
    db = SQLDatabase(url, home=tmp_path)
    assert db.revision() == HEAD_REVISION
    store = SQLStore(db)
    assert store.ancestors(ids[-1]) == found
    assert _remembered(store, lambda: store.ancestors(ids[-1])) == (found, True)
    _raw(store, ("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?", [ids[1]]))
    with pytest.raises(LineageError, match="system prompt does not match"):
        store.ancestors(ids[-1])
    db.close()
