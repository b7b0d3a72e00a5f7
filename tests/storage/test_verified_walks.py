"""Lineage walks remember the agents they verified and the walks themselves (``VerifiedAgents``) while
SQLite's change stamp shows no commit; a forged ancestor -- edited row, edited edge, swapped seal --
written by another process after warm walks (a commit: the stamp moves) is still refused on the next walk,
on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.pool import NullPool

from furnace.domain.errors import LineageError
from furnace.storage.sql.store import SQLStore, Verified, VerifiedAgents

from .conftest import make_elixir
from .test_contract import make_agent


@pytest.fixture
def chain(sql_db: Any) -> Iterator[tuple[SQLStore, list[str]]]:
    """A line of five agents, each bred from the previous one and a library elixir."""
    store = SQLStore(sql_db)
    library = store.save_elixir(make_elixir("Root"))
    parent, ids = library, []
    for i in range(5):
        agent = make_agent([parent, library], seed=i, name=f"Child {i}")
        store.save_agent(agent)
        ids.append(agent.id)
        parent = agent.elixir.model_copy(update={"id": agent.id}).ref
    yield store, ids


def _elsewhere(store: SQLStore, *statements: tuple[str, dict[str, Any]]) -> None:
    """Run ``statements`` in one transaction on a connection of its own (as another process would)."""
    engine = create_engine(store.db.engine.url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            for sql, params in statements:
                conn.execute(text(sql), params)
    finally:
        engine.dispose()


def _swap(table: str, column: str, a: str, b: str) -> Callable[[SQLStore], None]:
    def swap(store: SQLStore) -> None:
        pick = f"SELECT {column} FROM {table} WHERE id = :id"
        with store.db.connect() as conn:
            first, second = (conn.execute(text(pick), {"id": i}).scalar_one() for i in (a, b))
        put = f"UPDATE {table} SET {column} = :v WHERE id = :id"
        _elsewhere(store, (put, {"v": second, "id": a}), (put, {"v": first, "id": b}))

    return swap


def _forgeries(ids: list[str]) -> dict[str, tuple[Callable[[SQLStore], None], str]]:
    """Each forgery of the ancestor ``ids[1]`` (two generations above the walk's start) and the words of
    the refusal."""
    deep = ids[1]
    return {
        "edited row": (
            lambda s: _elsewhere(
                s, ("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = :id", {"id": deep})
            ),
            "system prompt does not match",
        ),
        "edited edge": (
            lambda s: _elsewhere(
                s,
                (
                    "UPDATE lineage_edges SET parent = 'evil-twin' WHERE child = :c AND parent = :p",
                    {"c": deep, "p": ids[0]},
                ),
            ),
            "lineage edges do not match",
        ),
        "added edge": (
            lambda s: _elsewhere(
                s,
                (
                    "INSERT INTO lineage_edges (parent, child, operator, op_version, parent_version)"
                    " VALUES ('intruder', :c, 'crossover', '1', 1)",
                    {"c": deep},
                ),
            ),
            "unexpected intruder",
        ),
        "swapped agent seal": (_swap("agents", "seal", deep, ids[2]), "does not match the record hash"),
        "swapped persona seal": (_swap("elixir_versions", "seal", deep, ids[2]), "does not match its keyed seal"),
    }


@pytest.mark.parametrize(
    "forgery", ["edited row", "edited edge", "added edge", "swapped agent seal", "swapped persona seal"]
)
def test_a_forged_ancestor_is_refused_after_warm_walks(chain: tuple[SQLStore, list[str]], forgery: str) -> None:
    store, ids = chain
    clean = [(n.id, n.depth) for n in store.ancestors(ids[-1])]
    assert store.ancestors(ids[-1]) == store.ancestors(ids[-1])  # warm: remembered where the store can
    forge, refusal = _forgeries(ids)[forgery]
    forge(store)
    with pytest.raises(LineageError) as err:
        store.ancestors(ids[-1])
    assert refusal in str(err.value)
    assert ids[1] in str(err.value) or ids[2] in str(err.value)
    assert clean  # the walk reached the forged ancestor before


def test_warm_walks_verify_nothing_again_on_sqlite_and_everything_on_postgresql(
    chain: tuple[SQLStore, list[str]],
) -> None:
    store, ids = chain
    counts = []
    for _ in range(3):
        before = store.db.statements
        store.ancestors(ids[-1])
        counts.append(store.db.statements - before)
    if store.db.dialect == "sqlite":
        assert counts[1] == counts[2] < counts[0]  # the agents' rows are not read again
    else:
        assert counts[0] == counts[1] == counts[2]  # no change stamp: every walk verifies in full


def test_a_commit_of_this_process_forgets_too(chain: tuple[SQLStore, list[str]]) -> None:
    """A tamper through the store's own database object (its own connections) is seen as well."""
    store, ids = chain
    store.ancestors(ids[-1])
    store.ancestors(ids[-1])
    store.db.execute("UPDATE agents SET tools = ? WHERE id = ?", [json.dumps(["shell"]), ids[1]])
    with pytest.raises(LineageError, match="tools does not match"):
        store.ancestors(ids[-1])


def test_a_warm_walk_is_answered_from_memory_until_the_change_stamp_moves(
    chain: tuple[SQLStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is remembered: the walk itself (its nodes), while the change stamp says nothing was committed
    since it was verified. Forced to say "unchanged", the stamp hides an edge edited meanwhile -- the walk
    is answered from memory, by design (an unchanged stamp means no commit); the real stamp moves with
    that edit, and the walk reads and verifies again and refuses it."""
    store, ids = chain
    clean = store.ancestors(ids[-1])
    reads: list[str] = []
    reach = store._reach

    def counted(conn: Any, id: str, *, up: bool) -> Any:
        reads.append(id)
        return reach(conn, id, up=up)

    monkeypatch.setattr(store, "_reach", counted)
    assert store.ancestors(ids[-1]) == clean
    assert reads == ([] if store.db.dialect == "sqlite" else [ids[-1]])  # PostgreSQL: no stamp, every walk reads
    real_begin = store._verified.begin
    current = store._verified._epoch
    monkeypatch.setattr(store._verified, "begin", lambda conn, dialect: current if dialect == "sqlite" else None)
    _elsewhere(
        store,
        ("UPDATE lineage_edges SET parent = 'evil-twin' WHERE child = :c AND parent = :p", {"c": ids[1], "p": ids[0]}),
    )
    if store.db.dialect == "sqlite":
        assert store.ancestors(ids[-1]) == clean  # the stamp forced to lie: the remembered walk
    monkeypatch.setattr(store._verified, "begin", real_begin)
    with pytest.raises(LineageError, match="lineage edges do not match"):
        store.ancestors(ids[-1])


def test_a_walk_inside_a_write_transaction_is_not_remembered(chain: tuple[SQLStore, list[str]]) -> None:
    """Rows a transaction wrote and then rolled back leave the change stamp where the writes moved it: a walk
    that read them must not be answered again."""
    store, ids = chain
    assert store.ancestors("orphan") == []
    assert store.ancestors("orphan") == []  # remembered on SQLite
    with pytest.raises(RuntimeError), store.unit():
        store.add_edge(ids[0], "orphan", operator="crossover", op_version="1", parent_version=1)
        assert ids[0] in {n.id for n in store.ancestors("orphan")}
        assert ids[0] in {n.id for n in store.ancestors("orphan")}
        raise RuntimeError("roll back")
    assert store.ancestors("orphan") == []
    assert store.ancestors("orphan") == []


def test_verified_agents_remember_only_reads_of_the_current_epoch() -> None:
    verified = VerifiedAgents(limit=3)
    edges = frozenset({("p", "crossover", "1", 1)})
    verified.remember(0, {"a": Verified(0, b"digest", edges, (("p", 1),))})
    assert verified.holds("a", 0, edges)
    assert not verified.holds("a", 0, frozenset())  # other edges into it: verify again
    assert not verified.holds("a", 1, edges)  # a read of another epoch than the current one: read again
    assert not verified.holds("b", 0, frozenset())  # never verified
    verified.remember(0, {"b": Verified(0)})
    assert verified.holds("b", 0, {("x", "promote", "", 0)})  # no agent: nothing of it to verify
    verified._epoch = 1  # a change seen by another read meanwhile
    verified.remember(0, {"c": Verified(0, b"d", edges)})  # confirmed in the older read: not remembered
    assert verified.get("c") is None
    verified.remember(1, {"c": Verified(1, b"d", edges), "d": Verified(1, b"d", edges)})  # past the limit
    assert verified.get("a") is None  # everything before is forgotten
    assert verified.holds("c", 1, edges) and verified.holds("d", 1, edges)


def count_verified(store: SQLStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, the ids of the agents ``store`` verifies in full, in order (appended as they are)."""
    verified: list[str] = []
    check = store._verified_row

    def counted(conn: Any, row: Any, *args: Any) -> Any:
        verified.append(row[0])
        return check(conn, row, *args)

    monkeypatch.setattr(store, "_verified_row", counted)
    return verified


def test_after_a_commit_elsewhere_unchanged_agents_are_confirmed_by_their_bytes(
    chain: tuple[SQLStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that touches none of the walk's records (another process saving an elixir) costs a read of
    the walk's rows, not a verification in full; a forged row among them still is verified, and refused."""
    store, ids = chain
    store.ancestors(ids[-1])
    verified = count_verified(store, monkeypatch)
    _elsewhere(
        store,
        (
            "UPDATE elixir_versions SET name = 'Renamed' WHERE id = :id",  # not an agent the walk reaches
            {"id": store.save_elixir(make_elixir("Bystander")).id},
        ),
    )
    store.ancestors(ids[-1])
    expected = [] if store.db.dialect == "sqlite" else ids  # PostgreSQL: every walk in full, its start too
    assert sorted(verified) == sorted(expected)
    _elsewhere(store, ("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = :id", {"id": ids[1]}))
    with pytest.raises(LineageError, match="system prompt does not match"):
        store.ancestors(ids[-1])


@pytest.fixture
def branched(chain: tuple[SQLStore, list[str]]) -> tuple[SQLStore, list[str], str]:
    """The line of five agents and a sibling of its last one (bred from the fourth), not walked yet."""
    store, ids = chain
    library = store.list_elixirs()[0].ref
    fourth = store.get_agent(ids[-2])
    sibling = make_agent([fourth.elixir.model_copy(update={"id": fourth.id}).ref, library], seed=9, name="Sibling")
    store.save_agent(sibling)
    return store, ids, sibling.id


def _sql_of(store: SQLStore, walk: Callable[[], Any]) -> tuple[Any, list[str]]:
    """What ``walk`` returns and the statements it ran."""
    ran: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        ran.append(statement)

    event.listen(store.db.engine, "before_cursor_execute", seen)
    try:
        return walk(), ran
    finally:
        event.remove(store.db.engine, "before_cursor_execute", seen)


@pytest.mark.parametrize("up", [True, False])
def test_a_walk_from_a_new_start_follows_the_edges_warm_walks_read(
    branched: tuple[SQLStore, list[str], str], up: bool
) -> None:
    """After warm walks of other starts, a walk from a start not walked before reads only the edges at the
    nodes no walk read (no recursive query on SQLite), and finds what a store with nothing remembered finds."""
    store, ids, sibling = branched
    walk = store.ancestors if up else store.descendants
    warm, new = (ids[-1], sibling) if up else (ids[0], ids[1])
    walk(warm)
    walk(warm)
    found, ran = _sql_of(store, lambda: walk(new))
    fresh = SQLStore(store.db)  # nothing remembered: the recursive query and every agent verified in full
    assert found == (fresh.ancestors(new) if up else fresh.descendants(new))
    assert {n.id for n in found} >= ({ids[-2], ids[0]} if up else {ids[-1]})
    recursive = [sql for sql in ran if "RECURSIVE" in sql.upper()]
    if store.db.dialect == "sqlite":
        assert recursive == []
    else:
        assert len(recursive) == 1  # PostgreSQL: no change stamp, every walk reads as a fresh one


@pytest.mark.parametrize("start", ["walked", "new"])
@pytest.mark.parametrize(
    "forgery", ["edited row", "edited edge", "added edge", "swapped agent seal", "swapped persona seal"]
)
def test_a_forgery_committed_elsewhere_is_refused_on_a_walk_from_any_start(
    branched: tuple[SQLStore, list[str], str], forgery: str, start: str
) -> None:
    """The edges remembered are forgotten with the change stamp: a walk from a start no walk began at,
    after warm walks that read the forged ancestor's edges, reads and refuses it too."""
    store, ids, sibling = branched
    store.ancestors(ids[-1])
    store.ancestors(ids[-1])
    forge, refusal = _forgeries(ids)[forgery]
    forge(store)
    with pytest.raises(LineageError) as err:
        store.ancestors(ids[-1] if start == "walked" else sibling)
    assert refusal in str(err.value)


def test_verified_agents_remember_the_edges_of_the_current_epoch_only() -> None:
    verified = VerifiedAgents(walk_limit=4)
    link = ("p", "crossover", "1", 1)
    verified.remember_links(0, True, {"a": (link,)})
    assert verified.links(0, True, ["a", "b"]) == {"a": (link,)}  # "b" never read
    assert verified.links(0, False, ["a"]) == {}  # the other direction is its own memory
    assert verified.links(1, True, ["a"]) == {}  # another epoch: nothing
    verified.remember_links(0, True, {"b": (link, link), "c": ()})  # past the bound: forgotten first
    assert verified.links(0, True, ["a", "b", "c"]) == {"b": (link, link), "c": ()}
    verified._epoch = 1
    verified.remember_links(0, True, {"d": ()})  # read in an older epoch: not remembered
    assert verified.links(1, True, ["d"]) == {}


def test_a_commit_forgets_the_edges_walks_read(chain: tuple[SQLStore, list[str]]) -> None:
    """A child saved after warm walks (by this process or another) is found by the next walk down from any
    of its ancestors: the children remembered are forgotten with the change stamp."""
    store, ids = chain
    for start in (ids[0], ids[1]):
        store.descendants(start)
        store.descendants(start)
    library = store.list_elixirs()[0].ref
    second = store.get_agent(ids[1])
    late = make_agent([second.elixir.model_copy(update={"id": second.id}).ref, library], seed=7, name="Late")
    store.save_agent(late)
    assert late.id in {n.id for n in store.descendants(ids[0])}
    assert late.id in {n.id for n in store.descendants(ids[1])}
