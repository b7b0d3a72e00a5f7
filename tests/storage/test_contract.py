"""The ElixirStore contract, run against MemoryStore and SQLStore (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC
from typing import Any

import pytest

from furnace.domain.agent import Agent, agent_id_for
from furnace.domain.elixir import ElixirRef, edit
from furnace.domain.errors import InputError, LineageError, NotFound
from furnace.domain.lineage import Lineage
from furnace.storage.memory import MemoryStore
from furnace.storage.store import ElixirSummary

from .conftest import make_elixir

# --- helpers -------------------------------------------------------------


def make_agent(parents: list[ElixirRef], *, operator: str = "crossover", seed: int = 0, name: str = "Child") -> Agent:
    lineage = Lineage(parents=tuple(parents), operator=operator, params={"seed": seed}, op_version="1")
    return Agent(
        id=agent_id_for(lineage.lineage_hash),
        elixir=make_elixir(name, expertise=["writing", "fusion"]),
        lineage=lineage,
        system_prompt=f"You are {name}.",
        tools=("search",),
        members=tuple(parents),
    )


def tamper_lineage(store: Any, agent_id: str, change: Callable[[dict], None]) -> None:
    """Alter a stored lineage record behind the store's back."""
    if isinstance(store, MemoryStore):
        change(store._agents[agent_id]["lineage"])
        return
    rows = store.db.query("SELECT lineage FROM agents WHERE id = ?", [agent_id])
    data = json.loads(rows[0][0])
    change(data)
    store.db.execute("UPDATE agents SET lineage = ? WHERE id = ?", [json.dumps(data), agent_id])


# --- immutable versions --------------------------------------------------


def test_first_save_is_version_one_with_utc_timestamp(store: Any) -> None:
    ref = store.save_elixir(make_elixir("Editor"))
    assert (ref.id, ref.version) == ("editor", 1)
    got = store.get_elixir("editor")
    assert got.ref == ref
    assert got.created_at is not None and got.created_at.tzinfo is not None
    assert got.created_at.utcoffset() == UTC.utcoffset(None)
    assert got.deleted_at is None


def test_changed_content_stores_next_version_and_keeps_old(store: Any) -> None:
    v1 = store.save_elixir(make_elixir("Editor"))
    v2 = store.save_elixir(edit(make_elixir("Editor"), identity="You are a stricter editor."))
    assert v2.version == 2 and v2.content_hash != v1.content_hash
    assert store.get_elixir("editor", 1).identity == "You are Editor."
    assert store.get_elixir("editor").identity == "You are a stricter editor."
    assert store.get_elixir("editor", 1).content_hash == v1.content_hash


def test_identical_content_is_a_noop_returning_existing_ref(store: Any) -> None:
    v1 = store.save_elixir(make_elixir("Editor"))
    store.save_elixir(edit(make_elixir("Editor"), priority=5))
    again = store.save_elixir(edit(make_elixir("Editor"), priority=5))
    assert again.version == 2
    assert len(store.history("editor")) == 2
    assert v1.version == 1


def test_version_on_input_is_ignored(store: Any) -> None:
    ref = store.save_elixir(make_elixir("Editor", version=7))
    assert ref.version == 1
    ref2 = store.save_elixir(make_elixir("Editor", version=1, priority=3))
    assert ref2.version == 2


def test_model_copy_edit_rehashes(store: Any) -> None:
    base = make_elixir("Editor")
    store.save_elixir(base)
    ref = store.save_elixir(base.model_copy(update={"style_notes": "Dry."}))
    assert ref.version == 2
    assert store.get_elixir("editor").style_notes == "Dry."


def test_history_oldest_first(store: Any) -> None:
    for i in range(3):
        store.save_elixir(make_elixir("Editor", priority=10 + i))
    assert [e.version for e in store.history("editor")] == [1, 2, 3]
    assert [e.priority for e in store.history("editor")] == [10, 11, 12]


def test_get_by_ref_checks_content_hash(store: Any) -> None:
    ref = store.save_elixir(make_elixir("Editor"))
    assert store.get_by_ref(ref).id == "editor"
    bad = ElixirRef(id="editor", version=1, content_hash="0" * 64)
    with pytest.raises(LineageError, match="content_hash mismatch"):
        store.get_by_ref(bad)


# --- list / search -------------------------------------------------------


def test_list_and_search(store: Any) -> None:
    store.save_elixir(make_elixir("Go Reviewer", expertise=["Go", "code review"]))
    store.save_elixir(make_elixir("Lifestyle Blogger", expertise=["travel", "food"]))
    store.save_elixir(make_elixir("学术编辑", id="academic-editor", language="zh", expertise=["学术写作"]))
    assert [e.id for e in store.list_elixirs()] == ["academic-editor", "go-reviewer", "lifestyle-blogger"]
    assert [e.id for e in store.list_elixirs(query="REVIEW")] == ["go-reviewer"]  # name, any case
    assert [e.id for e in store.list_elixirs(query="travel")] == ["lifestyle-blogger"]  # expertise
    assert [e.id for e in store.list_elixirs(query="academic")] == ["academic-editor"]  # id
    assert [e.id for e in store.list_elixirs(query="学术")] == ["academic-editor"]
    assert store.list_elixirs(query="nothing-like-this") == []
    assert len(store.list_elixirs(limit=2)) == 2
    # summaries: the same selection and order, the listing's fields read without decoding bodies
    store.delete_elixir("lifestyle-blogger")
    for kwargs in ({}, {"query": "学术"}, {"include_deleted": True}, {"limit": 1}, {"query": "travel"}):
        full = store.list_elixirs(**kwargs)
        assert store.list_summaries(**kwargs) == [ElixirSummary.of(e) for e in full], kwargs
    [zh] = store.list_summaries(query="academic")
    assert (zh.language, zh.expertise, zh.deleted) == ("zh", ("学术写作",), False)
    assert [s.deleted for s in store.list_summaries(include_deleted=True) if s.id == "lifestyle-blogger"] == [True]


def test_list_returns_latest_versions(store: Any) -> None:
    store.save_elixir(make_elixir("Editor"))
    store.save_elixir(make_elixir("Editor", priority=1))
    (only,) = store.list_elixirs()
    assert only.version == 2 and only.priority == 1


# --- soft delete ---------------------------------------------------------


def test_soft_delete(store: Any) -> None:
    store.save_elixir(make_elixir("Editor"))
    store.save_elixir(make_elixir("Editor", priority=1))
    store.save_elixir(make_elixir("Coach"))
    store.delete_elixir("editor")
    assert [e.id for e in store.list_elixirs()] == ["coach"]
    assert [e.id for e in store.list_elixirs(include_deleted=True)] == ["coach", "editor"]
    history = store.history("editor")
    assert [e.version for e in history] == [1, 2] and all(e.withdrawn for e in history)
    assert store.get_elixir("editor", 1).withdrawn
    with pytest.raises(LineageError, match="agent depends on withdrawn elixir editor v2"):
        store.load_for_fusion("editor")
    with pytest.raises(LineageError, match="withdrawn elixir editor v1"):
        store.load_for_fusion(history[0].ref)
    assert store.load_for_fusion("coach").id == "coach"
    store.delete_elixir("editor")  # again: no-op


def test_save_elixirs_is_all_or_nothing(store: Any) -> None:
    refs = store.save_elixirs([make_elixir("Alpha"), make_elixir("Beta")])
    assert [(r.id, r.version) for r in refs] == [("alpha", 1), ("beta", 1)]
    store.delete_elixir("beta")
    changed = edit(make_elixir("Alpha"), identity="You are a changed alpha.")
    with pytest.raises(InputError):
        store.save_elixirs([changed, make_elixir("Gamma"), make_elixir("Beta")])
    assert store.get_elixir("alpha").version == 1  # the batch left nothing behind
    with pytest.raises(NotFound):
        store.get_elixir("gamma")


def test_saving_a_deleted_id_is_refused(store: Any) -> None:
    store.save_elixir(make_elixir("Editor"))
    store.delete_elixir("editor")
    with pytest.raises(InputError, match="deleted"):
        store.save_elixir(make_elixir("Editor", priority=1))
    assert len(store.history("editor")) == 1


# --- not found -----------------------------------------------------------


def test_not_found(store: Any) -> None:
    store.save_elixir(make_elixir("Editor"))
    with pytest.raises(NotFound, match="no elixir 'ghost'"):
        store.get_elixir("ghost")
    with pytest.raises(NotFound, match="no version 9"):
        store.get_elixir("editor", 9)
    with pytest.raises(NotFound):
        store.history("ghost")
    with pytest.raises(NotFound):
        store.delete_elixir("ghost")
    with pytest.raises(NotFound):
        store.get_agent("agt-ghost")
    with pytest.raises(NotFound):
        store.load_for_fusion(ElixirRef(id="ghost", version=1, content_hash="x"))


# --- agents --------------------------------------------------------------


def test_agent_round_trip_and_idempotent_save(store: Any) -> None:
    a = store.save_elixir(make_elixir("Editor"))
    b = store.save_elixir(make_elixir("Coach"))
    agent = make_agent([a, b])
    assert store.save_agent(agent) is True
    assert store.save_agent(agent) is False
    got = store.get_agent(agent.id)
    assert got.lineage == agent.lineage and got.lineage_hash == agent.lineage_hash
    assert (got.system_prompt, got.tools, got.members) == (agent.system_prompt, ("search",), (a, b))
    assert got.elixir.id == agent.id and got.elixir.version == 1
    assert got.elixir.content_hash == agent.elixir.content_hash
    assert got.created_at is not None
    # the child is an elixir of origin 'agent', usable as a parent, not listed in the library
    assert store.load_for_fusion(agent.id).id == agent.id
    assert [e.id for e in store.list_elixirs()] == ["coach", "editor"]
    assert [e.id for e in store.list_elixirs(origin="agent")] == [agent.id]
    assert len(store.history(agent.id)) == 1
    assert {(n.id, n.depth) for n in store.ancestors(agent.id)} == {("editor", 1), ("coach", 1)}


def test_list_agents_newest_first(store: Any) -> None:
    a = store.save_elixir(make_elixir("Editor"))
    b = store.save_elixir(make_elixir("Coach"))
    first, second = make_agent([a, b], seed=1), make_agent([a, b], seed=2)
    store.save_agent(first)
    store.save_agent(second)
    assert [x.id for x in store.list_agents()] == [second.id, first.id]
    assert [x.id for x in store.list_agents(limit=1)] == [second.id]


def test_tampered_lineage_hash_raises(store: Any) -> None:
    a = store.save_elixir(make_elixir("Editor"))
    b = store.save_elixir(make_elixir("Coach"))
    agent = make_agent([a, b])
    store.save_agent(agent)
    tamper_lineage(store, agent.id, lambda d: d["params"].update(seed=99))
    with pytest.raises(LineageError, match=f"agent {agent.id}: lineage_hash mismatch"):
        store.get_agent(agent.id)
    with pytest.raises(LineageError):
        store.list_agents()


def test_tampered_lineage_with_recomputed_hash_still_raises(store: Any) -> None:
    a = store.save_elixir(make_elixir("Editor"))
    b = store.save_elixir(make_elixir("Coach"))
    agent = make_agent([a, b])
    store.save_agent(agent)

    def forge(d: dict) -> None:
        d["operator"] = "mutation"
        d["lineage_hash"] = Lineage.model_validate({k: v for k, v in d.items() if k != "lineage_hash"}).lineage_hash

    tamper_lineage(store, agent.id, forge)
    with pytest.raises(LineageError, match="id does not match"):
        store.get_agent(agent.id)


def test_parent_ref_hash_must_match_stored_version(store: Any) -> None:
    a = store.save_elixir(make_elixir("Editor"))
    b = store.save_elixir(make_elixir("Coach"))
    forged = ElixirRef(id="editor", version=1, content_hash="f" * 64)
    agent = make_agent([forged, b])  # consistent lineage hash, wrong parent hash
    store.save_agent(agent)
    with pytest.raises(LineageError, match=r"parent editor@1 content_hash mismatch"):
        store.get_agent(agent.id)
    assert a.content_hash != forged.content_hash


def test_agent_with_unknown_parent_version_loads(store: Any) -> None:
    elsewhere = ElixirRef(id="imported", version=3, content_hash="a" * 64)
    agent = make_agent([elsewhere])
    store.save_agent(agent)
    assert store.get_agent(agent.id).lineage.parents == (elsewhere,)


# --- lineage DAG ---------------------------------------------------------
#
#   a   b        x
#    \ / \       |
#     c   d      y
#     |\ /
#     | e
#      \|
#       f      (f <- c directly and f <- e <- c/d)


@pytest.fixture()
def dag(store: Any) -> Any:
    for parent, child, op in [
        ("a", "c", "crossover"),
        ("b", "c", "crossover"),
        ("b", "d", "mutation"),
        ("c", "e", "crossover"),
        ("d", "e", "crossover"),
        ("e", "f", "mutation"),
        ("c", "f", "ensemble"),
        ("x", "y", "mutation"),
    ]:
        store.add_edge(parent, child, operator=op, op_version="1")
    store.add_edge("a", "c", operator="crossover", op_version="1")  # idempotent
    return store


def test_ancestors_with_shortest_depth(dag: Any) -> None:
    nodes = dag.ancestors("f")
    assert [(n.id, n.depth) for n in nodes] == [("c", 1), ("e", 1), ("a", 2), ("b", 2), ("d", 2)]
    by_id = {n.id: n for n in nodes}
    assert (by_id["c"].operator, by_id["c"].via) == ("ensemble", "f")
    assert (by_id["b"].via, by_id["d"].via) == ("c", "e")
    assert [n.id for n in dag.ancestors("f", max_depth=1)] == ["c", "e"]
    assert dag.ancestors("a") == []
    assert dag.ancestors("unknown") == []


def test_descendants_with_shortest_depth(dag: Any) -> None:
    assert [(n.id, n.depth) for n in dag.descendants("b")] == [("c", 1), ("d", 1), ("e", 2), ("f", 2)]
    assert [n.id for n in dag.descendants("a", max_depth=1)] == ["c"]
    assert dag.descendants("f") == []


def test_common_ancestors_and_same_blood(dag: Any) -> None:
    assert dag.common_ancestors("e", "f") == ["a", "b", "c", "d"]
    assert dag.common_ancestors("c", "d") == ["b"]
    assert dag.common_ancestors("f", "y") == []
    assert dag.same_blood("c", "d")  # shared parent b
    assert dag.same_blood("a", "f")  # a is an ancestor of f
    assert dag.same_blood("f", "a")
    assert not dag.same_blood("f", "y")
    assert not dag.same_blood("a", "b")  # two roots with common descendants only
    assert dag.same_blood("x", "x")


def _sql_store(tmp_path: Any) -> Any:
    from furnace.storage.sql.db import SQLDatabase, sqlite_url
    from furnace.storage.sql.store import SQLStore

    return SQLStore(SQLDatabase(sqlite_url(tmp_path), home=tmp_path))


def test_both_stores_agree_on_a_random_dag(tmp_path: Any) -> None:
    import random

    from furnace.storage.sql.schema import lineage_edges

    rng = random.Random(7)
    mem, sql = MemoryStore(), _sql_store(tmp_path)
    edges = set()
    for child in range(1, 60):
        for parent in rng.sample(range(child), k=min(child, rng.randint(1, 3))):
            edges.add((f"n{parent}", f"n{child}", rng.choice(["crossover", "mutation"])))
    for p, c, op in edges:
        mem.add_edge(p, c, operator=op)
    with sql.db.transaction() as conn:
        conn.execute(lineage_edges.insert(), [{"parent": p, "child": c, "operator": op} for p, c, op in edges])
    for node in ["n59", "n30", "n5"]:
        assert sql.ancestors(node) == mem.ancestors(node)
        assert sql.ancestors(node, max_depth=2) == mem.ancestors(node, max_depth=2)
    assert sql.descendants("n3") == mem.descendants("n3")
    assert sql.common_ancestors("n40", "n41") == mem.common_ancestors("n40", "n41")


def test_full_elixir_round_trips_with_its_hash(store: Any) -> None:
    rich = make_elixir(
        "学术编辑",
        id="academic-editor-zh",
        language="zh",
        expertise=["学术写作", "引用规范"],
        principles=["先指出论证漏洞。", 'Use "quotes" and back\\slashes literally.'],
        tone={"formality": 0.95, "conciseness": 0.3, "humor": 0.05, "empathy": 0.4},
        constraints={"max_length": 1200, "forbidden_topics": ["政治"], "must_use_markdown": True},
        few_shots=[{"input": "帮我改这段。", "output": "## 修改\n- 删去冗余"}],
        tools=["search"],
        priority=150,
        conflicts_with=["lifestyle-blogger"],
        style_notes="保持克制。",
        style_preferences=[{"dimension": "tone", "value": "formal", "weight": 0.7}],
        extensions={"card": {"spec": "chara_card_v2", "data": {"x": [1, 2.5, None]}}},
    )
    ref = store.save_elixir(rich)
    got = store.get_elixir(ref.id)
    assert got.content_hash == rich.content_hash == ref.content_hash
    assert got.content() == rich.content()


def test_origin_is_fixed_by_the_first_save(store: Any) -> None:
    store.save_elixir(make_elixir("Draft"), origin="agent")
    store.save_elixir(make_elixir("Draft", priority=7), origin="library")
    assert store.list_elixirs() == []
    assert [(e.id, e.version) for e in store.list_elixirs(origin="agent")] == [("draft", 2)]


@pytest.mark.parametrize("seed", [1, 2])
def test_both_stores_agree_on_random_operation_sequences(tmp_path: Any, seed: int) -> None:
    """Model-based check: the same random saves/deletes give the same observable results."""
    import random

    rng = random.Random(seed)
    stores = [MemoryStore(), _sql_store(tmp_path)]

    def outcome(action: Callable[[Any], Any]) -> list[Any]:
        results = []
        for s in stores:
            try:
                results.append(action(s))
            except (InputError, LineageError) as err:
                results.append(type(err).__name__)
        return results

    for _ in range(14):
        name = rng.choice(["Alpha", "Beta", "Gamma"])
        key = name.lower()
        op = rng.random()
        if op < 0.6:
            elixir = make_elixir(name, priority=rng.choice([100, 101, 102]), expertise=[rng.choice(["go", "rust"])])
            res = outcome(lambda s, elixir=elixir: s.save_elixir(elixir))
        elif op < 0.75:
            res = outcome(lambda s, key=key: s.delete_elixir(key))
        elif op < 0.9:
            res = outcome(lambda s, key=key: [(e.ref, e.withdrawn) for e in s.history(key)])
        else:
            res = outcome(lambda s, key=key: s.load_for_fusion(key).ref)
        assert res[0] == res[1], (name, op)
    listed = outcome(lambda s: [e.ref for e in s.list_elixirs(include_deleted=True)])
    assert listed[0] == listed[1]


def test_batch_methods_agree_with_their_one_at_a_time_twins(store: Any) -> None:
    a, b = store.save_elixir(make_elixir("Alpha")), store.save_elixir(make_elixir("Beta"))
    first, second = make_agent([a, b], seed=1), make_agent([a, b], seed=2)
    assert store.save_agents([first, second, first]) == [True, True, False]
    assert store.save_agents([first]) == [False]
    assert store.child_ids(["alpha", "nobody"]) == {"alpha": {first.id, second.id}, "nobody": set()}
    assert store.stored_child(first.id, [a, b]) == store.get_agent(first.id)
    with pytest.raises(NotFound):
        store.stored_child("agt-00000000000000000000", [a, b])
    stale = ElixirRef(id="alpha", version=1, content_hash="0" * 64)
    store.delete_elixir("beta")
    loaded = store.load_many_for_fusion([a, b, stale, ElixirRef(id="ghost", version=1, content_hash="0" * 64)])
    assert [e.ref for e in loaded] == [a]  # withdrawn, altered and missing refs are left out

    def half_then_fail() -> None:
        store.save_elixir(make_elixir("Gamma"))
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        store.atomically(half_then_fail)
    with pytest.raises(NotFound):
        store.get_elixir("gamma")  # nothing of the failed work stays
