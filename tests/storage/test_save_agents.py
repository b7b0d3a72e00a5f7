"""SQLStore.save_agents: many agents in one transaction, one statement per table."""

from __future__ import annotations

from pathlib import Path

from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.store import SQLStore

from .conftest import TickClock, make_elixir
from .test_contract import make_agent


def _store(path: Path) -> SQLStore:
    store = SQLStore(SQLDatabase(f"sqlite:///{path}", home=path.parent), clock=TickClock())
    store.save_elixir(make_elixir("Editor"))
    store.save_elixir(make_elixir("Coach"))
    return store


def test_many_agents_cost_the_statements_of_one(tmp_path: Path) -> None:
    one, two, many = (_store(tmp_path / f"{n}.sqlite") for n in ("one", "two", "many"))
    parents = [one.get_elixir("editor").ref, one.get_elixir("coach").ref]
    agents = [make_agent(parents, seed=s, name=f"Child {s}") for s in range(6)]

    before = one.db.statements
    assert one.save_agents(agents[:1]) == [True]
    single = one.db.statements - before
    before = two.db.statements
    assert two.save_agents(agents[:2]) == [True] * 2
    pair = two.db.statements - before
    before = many.db.statements
    assert many.save_agents(agents) == [True] * 6
    assert many.db.statements - before == pair == single  # one statement per table, however many agents
    assert one.db.query("SELECT count(*) FROM lineage_edges") == [(2,)]

    for agent in agents:  # each stored in full: child elixir, edges, seal (get_agent verifies them)
        stored = many.get_agent(agent.id)
        assert stored.lineage.lineage_hash == agent.lineage.lineage_hash
        assert stored.elixir.content_hash == agent.elixir.content_hash
        assert {n.id for n in many.ancestors(agent.id)} == {"editor", "coach"}


def test_existing_and_repeated_agents_are_kept_as_stored(tmp_path: Path) -> None:
    store = _store(tmp_path / "f.sqlite")
    parents = [store.get_elixir("editor").ref]
    first, second = make_agent(parents, seed=1, name="First"), make_agent(parents, seed=2, name="Second")
    assert store.save_agent(first) is True
    assert store.save_agents([first, second, second]) == [False, True, False]
    assert store.save_agents([first, second]) == [False, False]
    assert store.db.query("SELECT count(*) FROM agents") == [(2,)]
    assert store.db.query("SELECT count(*) FROM elixir_versions WHERE id IN (?, ?)", [first.id, second.id]) == [(2,)]
    assert store.db.query("SELECT count(*) FROM lineage_edges") == [(2,)]


def test_parents_read_ahead_are_what_load_for_fusion_gives_and_never_a_failing_one(tmp_path: Path) -> None:
    store = _store(tmp_path / "f.sqlite")
    store.save_elixir(make_elixir("Critic"))
    editor, coach, critic = (store.get_elixir(i).ref for i in ("editor", "coach", "critic"))
    agent = make_agent([editor, coach], seed=1, name="Child")
    store.save_agent(agent)
    child = store.get_agent(agent.id).elixir.ref
    stale = editor.model_copy(update={"content_hash": "0" * 64})  # no such content at that version

    one_by_one = [store.load_for_fusion(r) for r in (editor, coach, child)]
    assert store.load_many_for_fusion([editor, coach, child, stale]) == one_by_one

    store.delete_elixir("critic")  # withdrawn: left out, and its own load says why
    assert [e.ref for e in store.load_many_for_fusion([editor, critic])] == [editor]

    store.db.execute("UPDATE agents SET system_prompt = 'tampered' WHERE id = ?", [agent.id])
    assert store.load_many_for_fusion([editor, child]) == []  # a tampered agent among them: nothing read ahead
    assert store.child_ids(["editor", "coach", "critic"]) == {
        "editor": {agent.id},
        "coach": {agent.id},
        "critic": set(),
    }


def test_a_new_agent_whose_id_already_has_rows_is_saved_by_the_general_path(tmp_path: Path) -> None:
    store = _store(tmp_path / "f.sqlite")
    parents = [store.get_elixir("editor").ref, store.get_elixir("coach").ref]
    edged, versioned = make_agent(parents, seed=1, name="Edged"), make_agent(parents, seed=2, name="Versioned")
    # rows under the agents' ids that no agent row explains: an edge already there, a persona version
    store.add_edge("editor", edged.id, operator="crossover", op_version="1", parent_version=parents[0].version)
    store.save_elixir(make_elixir("Versioned").model_copy(update={"id": versioned.id}), origin="agent")
    assert store.save_agent(edged) is True  # a plain insert of its edges would have collided
    assert store.save_agent(versioned) is True
    assert store.save_agent(edged) is False
    edges = store.db.query(
        "SELECT parent, count(*) FROM lineage_edges WHERE child = ? GROUP BY parent ORDER BY parent", [edged.id]
    )
    assert edges == [("coach", 1), ("editor", 1)]
    assert store.get_agent(versioned.id).elixir.version == 2  # after the version that was there
    assert store.get_agent(edged.id).elixir.version == 1
