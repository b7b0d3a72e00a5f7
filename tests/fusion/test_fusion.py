"""fuse(): conflicts, lineage determinism, the synthesis cache, promote, pre-warm."""

from __future__ import annotations

import logging

import pytest

from furnace.domain.agent import agent_id_for
from furnace.domain.errors import ConflictError, InputError, LineageError
from furnace.fusion.fuse import fuse, prewarm, promote
from furnace.fusion.operators import OPERATORS
from furnace.fusion.synthesis import MemoryKV, SynthesisCache, synth_key
from furnace.llm.fakes import SlowLLM
from furnace.llm.offline.engine import OfflineEngine
from furnace.storage.memory import MemoryStore

from .conftest import COACH, WIT, all_at_once, counting, make_elixir

PAIR = ["data-coach", "travel-wit"]


def run(store, cache, llm=None, embedder=None, settings=None, **kw):
    from furnace.fusion.embedding import HashEmbedder

    return fuse(
        store,
        kw.pop("parents", PAIR),
        llm=llm or counting(),
        embedder=embedder or HashEmbedder(),
        cache=cache,
        settings=settings,
        **kw,
    )


def test_hard_conflict_is_refused_and_nothing_is_stored(fsettings) -> None:
    store = MemoryStore()
    store.save_elixir(make_elixir("Data Coach", **COACH, conflicts_with=["Travel Wit"]))
    store.save_elixir(make_elixir("Travel Wit", **WIT))
    kv = MemoryKV()
    llm = counting()
    with pytest.raises(ConflictError) as err:
        run(store, SynthesisCache(kv), llm=llm, operator="crossover", settings=fsettings)
    assert "data-coach" in str(err.value) and "travel-wit" in str(err.value)
    assert store.list_agents() == [] and len(kv) == 0 and llm.calls == []


def test_soft_conflicts_are_resolved_with_notes(store, cache, fsettings) -> None:
    agent = run(store, cache, operator="crossover", settings=fsettings).agent
    notes = {n.field: n for n in agent.lineage.resolution_notes}
    assert notes["constraints.max_length"].chose.startswith("200")
    assert notes["constraints.must_use_markdown"].chose == "no markdown"
    assert "formality" in notes["principles"].reason
    assert store.get_agent(agent.id).lineage.resolution_notes == agent.lineage.resolution_notes


def test_same_inputs_same_lineage_hash_and_a_cache_hit_with_zero_model_calls(store, fsettings) -> None:
    kv = MemoryKV()
    first_llm, second_llm = counting(), counting()
    first = run(store, SynthesisCache(kv), llm=first_llm, operator="crossover", seed=5, settings=fsettings)
    assert not first.from_cache and len(first_llm.calls) >= 1
    second = run(store, SynthesisCache(kv), llm=second_llm, operator="crossover", seed=5, settings=fsettings)
    assert second.from_cache and second_llm.calls == [] and second.model_calls == 0
    assert second.agent.lineage_hash == first.agent.lineage_hash
    assert first.agent.id == agent_id_for(first.agent.lineage_hash)
    assert synth_key(first.agent.lineage_hash) in kv._data
    # another store and cache altogether: the same lineage hash (it is content, not state)
    other = MemoryStore()
    other.save_elixir(make_elixir("Data Coach", **COACH))
    other.save_elixir(make_elixir("Travel Wit", **WIT))
    third = run(other, SynthesisCache(MemoryKV()), operator="crossover", seed=5, settings=fsettings)
    assert third.agent.lineage_hash == first.agent.lineage_hash
    assert third.agent.elixir.content_hash == first.agent.elixir.content_hash


def test_params_shape_the_lineage(store, cache, fsettings) -> None:
    agent = run(store, cache, parents=["data-coach"], seed=3, params={"rate": 0.1}, settings=fsettings).agent
    p = agent.lineage.params
    assert agent.lineage.operator == "mutation"
    assert p == {"seed": 3, "model": OfflineEngine.model_name, "rate": 0.1, "temperature": 0.7, "moves": []}
    cross = run(store, cache, operator="crossover", settings=fsettings).agent.lineage.params
    assert {"seed", "model", "embedder", "similarity_threshold", "ensemble_threshold", "temperature"} <= set(cross)
    with pytest.raises(InputError, match="unknown param"):
        run(store, cache, operator="crossover", params={"rate": 0.2}, settings=fsettings)


def test_new_parent_version_or_op_version_gives_a_new_key(store, cache, fsettings, monkeypatch) -> None:
    base = run(store, cache, operator="crossover", settings=fsettings).agent
    coach = store.get_elixir("data-coach")
    store.save_elixir(coach.model_copy(update={"style_notes": "Now with notes."}))
    newer = run(store, cache, operator="crossover", settings=fsettings)
    assert not newer.from_cache and newer.agent.lineage_hash != base.lineage_hash
    assert newer.agent.lineage.parents[0].version == 2
    pinned = run(store, cache, parents=["data-coach@1", "travel-wit"], operator="crossover", settings=fsettings)
    assert pinned.from_cache and pinned.agent.id == base.id
    monkeypatch.setattr(OPERATORS["crossover"], "op_version", OPERATORS["crossover"].op_version + ".1")
    bumped = run(store, cache, parents=["data-coach@1", "travel-wit"], operator="crossover", settings=fsettings)
    assert not bumped.from_cache and bumped.agent.lineage_hash != base.lineage_hash


def test_withdrawn_parent_is_refused(store, cache, fsettings) -> None:
    store.delete_elixir("travel-wit")
    with pytest.raises(LineageError, match="withdrawn elixir travel-wit v1"):
        run(store, cache, operator="crossover", settings=fsettings)


def test_operator_is_chosen_by_expertise_distance(store, cache, fsettings) -> None:
    assert run(store, cache, settings=fsettings).agent.lineage.operator == "crossover"  # share "python data analysis"
    store.save_elixir(make_elixir("Poet", expertise=["classical poetry"]))
    far = run(store, cache, parents=["data-coach", "poet"], settings=fsettings).agent
    assert far.lineage.operator == "ensemble" and len(far.members) == 2


def test_64_concurrent_fusions_build_once(store, fsettings) -> None:
    cache = SynthesisCache(MemoryKV())
    llm = SlowLLM(OfflineEngine(), 0.05)
    results = all_at_once(64, lambda: run(store, cache, llm=llm, operator="crossover", settings=fsettings))
    assert cache.builds == 1
    assert len({r.agent.id for r in results}) == 1
    assert sum(not r.from_cache for r in results) == 1
    assert llm.calls == 1  # one identity call, for the one build
    assert len(store.list_agents()) == 1


def test_tampered_cache_row_raises(store, fsettings) -> None:
    kv = MemoryKV()
    agent = run(store, SynthesisCache(kv), operator="crossover", settings=fsettings).agent
    key = synth_key(agent.lineage_hash)
    value, expires = kv._data[key]
    kv._data[key] = ({**value, "prompt": "You are evil."}, expires)
    with pytest.raises(LineageError, match="altered"):
        run(store, SynthesisCache(kv), operator="crossover", settings=fsettings)


def test_promote_keeps_the_lineage_link(store, cache, fsettings) -> None:
    agent = run(store, cache, operator="crossover", settings=fsettings).agent
    ref = promote(store, agent.id, "Coach Wit")
    assert ref.id == "coach-wit" and store.get_elixir("coach-wit").name == "Coach Wit"
    assert agent.id in {n.id for n in store.ancestors("coach-wit")}
    assert "data-coach" in {n.id for n in store.ancestors("coach-wit")}
    assert promote(store, agent.id, "Coach Wit") == ref  # idempotent
    with pytest.raises(InputError, match="already exists"):
        promote(store, agent.id, "Data Coach")


def test_prewarm_never_raises_and_fills_the_cache(store, fsettings, caplog) -> None:
    agent = run(store, SynthesisCache(MemoryKV()), operator="crossover", settings=fsettings).agent
    cache = SynthesisCache(MemoryKV())
    with caplog.at_level(logging.WARNING):
        prewarm(store, ["agt-missing", agent.id], cache).join(5)
    assert cache.get(agent.lineage_hash)["prompt"] == agent.system_prompt
    assert "agt-missing" in caplog.text


def test_an_agent_can_be_a_parent_and_lineage_spans_generations(store, cache, fsettings) -> None:
    child = run(store, cache, operator="crossover", settings=fsettings).agent
    grandchild = run(store, cache, parents=[child.id], seed=1, settings=fsettings).agent
    assert grandchild.lineage.operator == "mutation" and grandchild.lineage.parents[0].id == child.id
    ancestors = {n.id: n.depth for n in store.ancestors(grandchild.id)}
    assert ancestors == {child.id: 1, "data-coach": 2, "travel-wit": 2}
    assert store.same_blood(grandchild.id, "travel-wit")


def test_default_settings_do_not_read_the_environment(store, cache, monkeypatch) -> None:
    monkeypatch.setenv("FURNACE_SIMILARITY_THRESHOLD", "0.99")
    agent = run(store, cache, operator="crossover").agent
    assert agent.lineage.params["similarity_threshold"] == 0.55


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda value: {k: v for k, v in value.items() if k != "agent"},  # the agent is missing
        lambda value: {**value, "agent": {"id": 7}},  # not an agent
        lambda value: {**value, "agent": None},
    ],
    ids=["no agent", "not an agent", "null agent"],
)
def test_corrupted_cache_entry_is_a_miss(store, fsettings, corrupt) -> None:
    kv = MemoryKV()
    first = run(store, SynthesisCache(kv), operator="crossover", settings=fsettings).agent
    key = synth_key(first.lineage_hash)
    value, expires = kv._data[key]
    kv._data[key] = (corrupt(value), expires)
    again = run(store, SynthesisCache(kv), operator="crossover", settings=fsettings)
    assert again.from_cache is False and again.agent.lineage_hash == first.lineage_hash
