"""DuckDBStore.save_agents: many agents in one transaction, one statement per table."""

from __future__ import annotations

from pathlib import Path

from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.store import DuckDBStore

from .conftest import TickClock, make_elixir
from .test_contract import make_agent


def _store(path: Path) -> DuckDBStore:
    store = DuckDBStore(Database(path), clock=TickClock())
    store.save_elixir(make_elixir("Editor"))
    store.save_elixir(make_elixir("Coach"))
    return store


def test_many_agents_cost_the_statements_of_one(tmp_path: Path) -> None:
    one, many = _store(tmp_path / "one.duckdb"), _store(tmp_path / "many.duckdb")
    parents = [one.get_elixir("editor").ref, one.get_elixir("coach").ref]
    agents = [make_agent(parents, seed=s, name=f"Child {s}") for s in range(6)]

    before = one.db.statements
    assert one.save_agents(agents[:1]) == [True]
    single = one.db.statements - before
    before = many.db.statements
    assert many.save_agents(agents) == [True] * 6
    assert many.db.statements - before == single

    for agent in agents:  # each stored in full: child elixir, edges, seal (get_agent verifies them)
        stored = many.get_agent(agent.id)
        assert stored.lineage.lineage_hash == agent.lineage.lineage_hash
        assert stored.elixir.content_hash == agent.elixir.content_hash
        assert {n.id for n in many.ancestors(agent.id)} == {"editor", "coach"}


def test_existing_and_repeated_agents_are_kept_as_stored(tmp_path: Path) -> None:
    store = _store(tmp_path / "f.duckdb")
    parents = [store.get_elixir("editor").ref]
    first, second = make_agent(parents, seed=1, name="First"), make_agent(parents, seed=2, name="Second")
    assert store.save_agent(first) is True
    assert store.save_agents([first, second, second]) == [False, True, False]
    assert store.save_agents([first, second]) == [False, False]
    assert store.db.query("SELECT count(*) FROM agents") == [(2,)]
    assert store.db.query("SELECT count(*) FROM elixir_versions WHERE id IN (?, ?)", [first.id, second.id]) == [(2,)]
    assert store.db.query("SELECT count(*) FROM lineage_edges") == [(2,)]
