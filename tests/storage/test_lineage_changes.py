"""The change log of the lineage tables (SQLite, migration 0005): after a lineage commit that touches none
of a walk's records -- a new agent bred off the walk, an edge elsewhere -- the walk is still answered from
memory; a commit that does touch it (an edge into a walked node for a walk up, out of one for a walk down,
a forged row, edge or persona written by another program through the stdlib ``sqlite3`` module) changes or
refuses the next walk exactly as a store that remembers nothing would. Whenever the log cannot vouch for
every change since a reader's last stamp (pruned, a gap, a rolled-back write's stamp) the reader forgets
everything, as it did before the log. The log itself only grows at its end."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Set
from pathlib import Path
from typing import Any

import pytest

from furnace.domain.agent import Agent
from furnace.domain.errors import LineageError, SealError
from furnace.storage.sql.db import HEAD_REVISION, SQLDatabase, sqlite_url
from furnace.storage.sql.lineage_log import Changes
from furnace.storage.sql.store import RememberedWalk, SQLStore

from .test_contract import make_agent
from .test_lineage_stamp import _FORGERIES, _raw, home_at
from .test_lineage_verification import _chain
from .test_verified_walks import _sql_of, count_verified

KEEP = 10_000  # the moves the log keeps at least (migration 0005)


def _bred(store: SQLStore, parent: str, seed: int) -> Agent:
    """A new agent bred from the stored agent ``parent`` and the library elixir ``root``, saved."""
    stored = store.get_agent(parent)
    agent = make_agent(
        [stored.elixir.model_copy(update={"id": parent}).ref, store.get_elixir("root").ref], seed=seed, name="Late"
    )
    assert store.save_agent(agent)
    return agent


def _outcome(walk: Callable[[], Any]) -> Any:
    """What a walk gives: its nodes, or the kind and words of its refusal."""
    try:
        return [(n.id, n.depth) for n in walk()]
    except (LineageError, SealError) as err:
        return (type(err).__name__, str(err))


def _watched(
    store: SQLStore, walk: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[str], list[str]]:
    """What ``walk`` returns, the statements it ran and the agents it verified in full."""
    check = store._verified_row
    verified = count_verified(store, monkeypatch)
    try:
        found, ran = _sql_of(store, walk)
    finally:
        monkeypatch.setattr(store, "_verified_row", check)
    return found, ran, verified


def _reads_walk_tables(ran: list[str]) -> bool:
    """True when a statement read the edges or the elixir versions (the stamp, the log and the rows of the
    logged agents are read once per move)."""
    return any("lineage_edges" in sql or "elixir_versions" in sql for sql in ran)


@pytest.mark.parametrize("by", ["the store", "another program"])
def test_a_walk_after_a_lineage_commit_off_it_is_answered_from_memory(
    line: tuple[SQLStore, list[str]], monkeypatch: pytest.MonkeyPatch, by: str
) -> None:
    """A new agent bred from a walked node is off the walk up from the line's end (and off the walk down
    from the node after it): both are answered without reading an edge or verifying an agent."""
    store, ids = line
    up, down = (lambda: store.ancestors(ids[-1])), (lambda: store.descendants(ids[3]))
    first_up, first_down = up(), down()
    before = store.db.query("SELECT n FROM lineage_stamp")[0][0]
    if by == "the store":
        _bred(store, ids[2], seed=50)
    else:
        _raw(store, ("INSERT INTO lineage_edges VALUES ('root', 'late-child', 'promote', '', 0)", []))
    assert store.db.query("SELECT n FROM lineage_stamp")[0][0] > before  # a lineage commit: the stamp moved
    statements = []
    for walk, first in ((up, first_up), (down, first_down)):
        found, ran, verified = _watched(store, walk, monkeypatch)
        assert found == first
        assert not _reads_walk_tables(ran) and verified == []
        statements += ran
    assert sum("lineage_changes" in sql for sql in statements) == 1  # the log said what changed, read once


def _walks(store: SQLStore, ids: list[str]) -> dict[str, Callable[[], Any]]:
    """Walks of the line, by name: up and down, whole and depth-limited."""
    return {
        "down from the first": lambda: store.descendants(ids[0]),
        "down from the third": lambda: store.descendants(ids[2]),
        "down from the third, one level": lambda: store.descendants(ids[2], max_depth=1),
        "down from the fourth": lambda: store.descendants(ids[3]),
        "up from the end": lambda: store.ancestors(ids[-1]),
        "up from the end, two levels": lambda: store.ancestors(ids[-1], max_depth=2),
        "up from the third": lambda: store.ancestors(ids[2]),
        "up from the root": lambda: store.ancestors("root"),
    }


def test_walks_a_new_agent_changes_see_it_and_the_others_are_kept(
    line: tuple[SQLStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new agent bred from the third: every walk down through the third finds it (it alone verified in
    full), every other walk is answered from memory; all as a store that remembers nothing answers."""
    store, ids = line
    walks = _walks(store, ids)
    first = {name: walk() for name, walk in walks.items()}
    late = _bred(store, ids[2], seed=51)
    fresh = _walks(SQLStore(store.db), ids)  # nothing remembered
    verified_in_full = []
    for name, walk in walks.items():
        found, ran, verified = _watched(store, walk, monkeypatch)
        assert _outcome(lambda found=found: found) == _outcome(fresh[name])
        verified_in_full += verified
        if name in ("down from the first", "down from the third", "down from the third, one level"):
            assert late.id in {n.id for n in found} and late.id not in {n.id for n in first[name]}
        else:
            assert found == first[name] and not _reads_walk_tables(ran) and verified == []
    assert verified_in_full == [late.id]  # the new agent alone verified in full, once


_COMMITS: dict[str, Callable[[SQLStore, list[str]], None]] = {  # lineage commits by another program
    "an edge into a walked library elixir": lambda s, ids: _raw(
        s, "INSERT INTO lineage_edges VALUES ('ancient', 'root', 'promote', '', 0)"
    ),
    "an edge out of a walked agent": lambda s, ids: _raw(
        s, ("INSERT INTO lineage_edges VALUES (?, 'late-child', 'promote', '', 0)", [ids[3]])
    ),
    "an edge into a walked agent": lambda s, ids: _raw(
        s, ("INSERT INTO lineage_edges VALUES ('intruder', ?, 'crossover', '1', 1)", [ids[1]])
    ),
    "an edge deleted": lambda s, ids: _raw(
        s, ("DELETE FROM lineage_edges WHERE child = ? AND parent = 'root'", [ids[3]])
    ),
    "an edge moved to another child": lambda s, ids: _raw(
        s, ("UPDATE lineage_edges SET child = 'elsewhere' WHERE child = ? AND parent = 'root'", [ids[2]])
    ),
    "an agent deleted": lambda s, ids: _raw(s, ("DELETE FROM agents WHERE id = ?", [ids[4]])),
    "an agent row given another id": lambda s, ids: _raw(
        s, ("UPDATE agents SET id = 'renamed' WHERE id = ?", [ids[3]])
    ),
    "a persona's version deleted": lambda s, ids: _raw(s, ("DELETE FROM elixir_versions WHERE id = ?", [ids[2]])),
    "the library elixir deleted": lambda s, ids: _raw(s, "DELETE FROM elixir_versions WHERE id = 'root'"),
    "a parent's stored hash changed": lambda s, ids: _raw(
        s, ("UPDATE elixir_versions SET content_hash = ? WHERE id = ?", ["0" * 64, ids[1]])
    ),
    "the library elixir's stored hash changed": lambda s, ids: _raw(
        s, ("UPDATE elixir_versions SET content_hash = ? WHERE id = 'root'", ["0" * 64])
    ),
    "a no-agent id made an agent": lambda s, ids: _raw(
        s,
        (
            "INSERT INTO agents SELECT 'root', lineage, lineage_hash, elixir_version, system_prompt, tools, members,"
            " created_at, seal FROM agents WHERE id = ?",
            [ids[0]],
        ),
    ),
    "an agent naming a walked node without its edges": lambda s, ids: _raw(
        s,
        (
            "INSERT INTO agents SELECT 'hidden-child', lineage, lineage_hash, elixir_version, system_prompt, tools,"
            " members, created_at, seal FROM agents WHERE id = ?",
            [ids[3]],
        ),
    ),
}


@pytest.mark.parametrize("commit", list(_COMMITS))
def test_after_a_lineage_commit_every_walk_is_what_a_store_remembering_nothing_gives(
    line: tuple[SQLStore, list[str]], commit: str
) -> None:
    store, ids = line
    walks = _walks(store, ids)
    for _ in range(2):  # remembered
        for walk in walks.values():
            _outcome(walk)
    _COMMITS[commit](store, ids)
    after = {name: _outcome(walk) for name, walk in walks.items()}
    fresh = {name: _outcome(walk) for name, walk in _walks(SQLStore(store.db), ids).items()}
    assert after == fresh


def test_random_lineage_commits_leave_every_walk_as_a_store_remembering_nothing_gives(tmp_path: Path) -> None:
    """New agents bred from random stored ones by the store, edges off and onto walks by another program,
    walks up and down from every node in between: the remembering store answers as a fresh one."""
    db = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)
    store = SQLStore(db)
    ids = _chain(store, 4)
    rng = random.Random(7)
    try:
        for step in range(12):
            nodes = ["root", *ids]
            choice = rng.random()
            if choice < 0.5:
                ids.append(_bred(store, rng.choice(ids), seed=100 + step).id)
            elif choice < 0.75:  # a parent that is no agent (the walk up gains it; no agent's record names it)
                _raw(store, ("INSERT INTO lineage_edges VALUES (?, 'root', 'promote', '', 0)", [f"ancient-{step}"]))
            else:  # a child that is no agent (the walk down gains it)
                _raw(
                    store,
                    ("INSERT INTO lineage_edges VALUES (?, ?, 'promote', '', 0)", [rng.choice(nodes), f"leaf-{step}"]),
                )
            fresh = SQLStore(db)
            for node in rng.sample(nodes, 3):
                for depth in (None, 1):
                    for up in (True, False):
                        walks = [(s.ancestors if up else s.descendants) for s in (store, fresh)]
                        found = [_outcome(lambda w=w: w(node, max_depth=depth)) for w in walks]  # noqa: B023
                        assert found[0] == found[1], (step, node, depth, up)
    finally:
        db.close()


@pytest.mark.parametrize("forgery", list(_FORGERIES))
def test_a_forgery_after_a_lineage_commit_off_the_walk_is_refused(
    line: tuple[SQLStore, list[str]], forgery: str
) -> None:
    """The log names what a forgery touched: the walk remembered through commits off it is read again and
    the forged record refused."""
    store, ids = line
    store.ancestors(ids[-1])
    _bred(store, ids[0], seed=52)  # off the walk: the walk stays remembered
    assert store.ancestors(ids[-1])
    _raw(store, _FORGERIES[forgery](store, ids[1], ids[0]))
    with pytest.raises((LineageError, SealError)) as err:
        store.ancestors(ids[-1])
    assert ids[1][:12] in str(err.value)


def test_the_log_only_grows_at_its_end(line: tuple[SQLStore, list[str]]) -> None:
    """A program cannot hide the row of a change it made from a reader that has not read it: rows are
    never updated, inserted only as the stamp's current move and once, deleted only when old."""
    store, ids = line
    forge = ("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?", [ids[1]])
    for hide in (
        "UPDATE lineage_changes SET id = 'elsewhere' WHERE seq = (SELECT max(seq) FROM lineage_changes)",
        "DELETE FROM lineage_changes WHERE seq = (SELECT max(seq) FROM lineage_changes)",
        "INSERT OR REPLACE INTO lineage_changes SELECT n, token, 'agent', 'elsewhere', NULL, NULL FROM lineage_stamp",
        "INSERT INTO lineage_changes SELECT n + 1, token, 'agent', 'elsewhere', NULL, NULL FROM lineage_stamp",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="only grows at its end"):
            _raw(store, forge, hide)
    assert store.ancestors(ids[-1])  # nothing was committed


def test_a_change_hidden_past_the_kept_rows_is_a_gap_and_everything_is_read_again(
    line: tuple[SQLStore, list[str]],
) -> None:
    """Jumping the stamp forward makes a forgery's row old enough to delete: the reader finds rows missing
    since its stamp and forgets everything."""
    store, ids = line
    store.ancestors(ids[-1])
    _raw(
        store,
        ("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?", [ids[1]]),
        f"UPDATE lineage_stamp SET n = n + {KEEP}, token = randomblob(16)",
        f"DELETE FROM lineage_changes WHERE seq > (SELECT n FROM lineage_stamp) - {2 * KEEP}",
    )
    with pytest.raises(LineageError, match="system prompt does not match"):
        store.ancestors(ids[-1])


@pytest.mark.parametrize("forged", [False, True])
def test_a_pruned_log_forgets_everything(line: tuple[SQLStore, list[str]], forged: bool) -> None:
    """More moves than the log keeps since a reader's stamp: the log is pruned past it (bounded), and the
    next walk reads its agents again (a forgery among the moves refused)."""
    store, ids = line
    first = store.ancestors(ids[-1])
    (start,) = store.db.query("SELECT n FROM lineage_stamp")[0]
    many = (
        f"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {KEEP + 1500})"
        " INSERT INTO lineage_edges SELECT 'spare', 'late-' || i, 'mutation', '', 0 FROM c"
    )
    forge = ("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?", [ids[1]])
    _raw(store, *([forge] if forged else []), many)
    ((rows, oldest, newest),) = store.db.query("SELECT count(*), min(seq), max(seq) FROM lineage_changes")
    assert oldest > start + 1 and newest - oldest + 1 == rows and KEEP <= rows <= KEEP + 1000  # pruned, bounded
    if forged:
        with pytest.raises(LineageError, match="system prompt does not match"):
            store.ancestors(ids[-1])
        return
    found, ran = _sql_of(store, lambda: store.ancestors(ids[-1]))
    assert found == first and any("FROM agents" in sql for sql in ran)  # read again, confirmed by its bytes


@pytest.mark.parametrize("moves", [1, 2])
def test_a_rolled_back_writes_log_is_never_taken_for_a_committed_one(
    line: tuple[SQLStore, list[str]], moves: int
) -> None:
    """Inside a write transaction a walk's reader moves to the stamp of the transaction's own writes; rolled
    back, another program commits as many moves (or one more: the forgery's, then one off the walk): the
    reader's stamp is not confirmed by the committed log, it forgets everything and refuses the forgery."""
    store, ids = line
    store.ancestors(ids[-1])
    with pytest.raises(RuntimeError), store.unit():
        store.add_edge(ids[0], "orphan", operator="crossover")
        assert store.ancestors(ids[-1])
        store.verify_agents(ids)
        raise RuntimeError("roll back")
    forge = ("INSERT INTO lineage_edges VALUES ('intruder', ?, 'crossover', '1', 1)", [ids[1]])
    off_the_walk = "INSERT INTO lineage_edges VALUES ('spare', 'late-child', 'promote', '', 0)"
    _raw(store, forge, *([off_the_walk] if moves == 2 else []))
    with pytest.raises(LineageError, match="intruder"):
        store.ancestors(ids[-1])


def test_a_home_at_0004_is_upgraded_to_the_log(tmp_path: Path) -> None:
    """A SQLite home made at revision 0004 (the stamp without its log) is brought to the head on its first
    open: its rows kept, a walk remembered through a lineage commit off it, a forgery refused."""
    url, old = home_at(tmp_path, "0004")
    ids = _chain(SQLStore(old), 3)
    found = SQLStore(old).ancestors(ids[-1])
    old.close()
    db = SQLDatabase(url, home=tmp_path)
    try:
        assert db.revision() == HEAD_REVISION
        assert db.query("SELECT seq, kind FROM lineage_changes") == [
            (db.query("SELECT n FROM lineage_stamp")[0][0], "start")
        ]
        store = SQLStore(db)
        assert store.ancestors(ids[-1]) == found
        _bred(store, ids[0], seed=53)
        walked, ran = _sql_of(store, lambda: store.ancestors(ids[-1]))
        assert walked == found and not _reads_walk_tables(ran)
        _raw(store, ("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?", [ids[1]]))
        with pytest.raises(LineageError, match="system prompt does not match"):
            store.ancestors(ids[-1])
    finally:
        db.close()


def _changes(
    agents: Set[str] = frozenset(),
    edges: Set[tuple[str, str]] = frozenset(),  # (child, parent)
    elixirs: Set[tuple[str, int]] = frozenset(),
    naming: Set[str] | None = frozenset(),
) -> Changes:
    """What a run of stamp moves touched, as the log reads it."""
    return Changes(
        frozenset(agents),
        frozenset(c for c, _ in edges),
        frozenset(p for _, p in edges),
        frozenset(elixirs),
        None if naming is None else frozenset(naming),
    )


# a walk up from "c" that reached "b" and "a" (whose parent "lib" is past its depth limit), and a walk down
# from "a" that reached "b" and found "c" naming "b"
_UP = RememberedWalk((), frozenset({"c", "b", "a", "lib"}))
_DOWN = RememberedWalk((), frozenset({"a", "b", "c", "lib"}), frozenset({"a", "b"}))


@pytest.mark.parametrize(
    ("changes", "up", "down"),
    [
        (_changes(edges={("new", "a")}), False, True),  # a new child of a walked node
        (_changes(edges={("b", "intruder")}), True, True),  # a new parent of a walked node
        (_changes(edges={("new", "elsewhere")}), False, False),
        (_changes(agents={"new"}, naming={"elsewhere"}), False, False),  # a new agent bred off both walks
        (_changes(agents={"new"}, naming={"b"}), False, True),  # an agent naming a walked node (edges or not)
        (_changes(agents={"new"}, naming=None), False, True),  # its lineage unreadable, or not read
        (_changes(agents={"lib"}), True, True),  # an id met as no agent becomes one
        (_changes(elixirs={("lib", 1)}), True, True),  # a parent's stored hash, past the depth limit too
        (_changes(elixirs={("other", 1)}), False, False),
    ],
)
def test_a_remembered_walk_is_touched_by_what_it_read(changes: Changes, up: bool, down: bool) -> None:
    assert _UP.touched_by(True, changes) is up
    assert _DOWN.touched_by(False, changes) is down
