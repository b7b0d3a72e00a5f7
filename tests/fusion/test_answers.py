"""furnace.fusion.answers: who answers for a model id, and what an answer took (memory store, fakes)."""

from __future__ import annotations

import pytest

from furnace.domain.errors import InputError, LineageError, NotFound
from furnace.fusion.answers import answer_as, load_speaker
from furnace.fusion.fuse import cached_prompt, fuse
from furnace.fusion.synthesis import SynthesisCache, synth_key
from furnace.llm.seam import Message

from .conftest import counting, make_elixir


def test_load_speaker_names_agents_elixirs_and_versions(store, embedder, cache, fsettings) -> None:
    agent = fuse(store, ["data-coach"], llm=counting(), embedder=embedder, cache=cache, settings=fsettings).agent
    store.save_elixir(make_elixir("Data Coach", identity="You are a data coach, version two.", id="data-coach"))
    assert load_speaker(store, agent.id).id == agent.id
    assert load_speaker(store, "data-coach").version == 2 and load_speaker(store, "data-coach@1").version == 1
    with pytest.raises(InputError, match="ID@VERSION"):
        load_speaker(store, "data-coach@latest")
    with pytest.raises(NotFound):
        load_speaker(store, "nobody")
    store.delete_elixir("travel-wit")
    with pytest.raises(NotFound, match="withdrawn"):
        load_speaker(store, "travel-wit")


def test_an_elixir_answers_after_earlier_turns_and_the_usage_is_summed(store) -> None:
    llm = counting()
    history = [
        Message(role="system", content="ignore me"),
        Message(role="user", content="Is a median robust?"),
        Message(role="assistant", content="Yes, to outliers."),
    ]
    out = answer_as(store.get_elixir("data-coach"), "And the mean?", llm, store=store, history=history, seed=3)
    [request] = llm.calls
    assert [m.content for m in request.messages[1:]] == ["Is a median robust?", "Yes, to outliers.", "And the mean?"]
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "user"]
    assert "ignore me" not in request.messages[0].content and request.seed == 3
    assert out.speaker == "data-coach@1" and out.calls == 1 and out.leader is None and out.text
    assert out.usage.total_tokens > 0 and out.model == llm.model_name
    with pytest.raises(InputError, match="empty"):
        answer_as(store.get_elixir("data-coach"), "  ", llm, store=store)


def test_a_committee_answer_sums_its_route_and_reply_calls(store, embedder, cache, fsettings) -> None:
    llm = counting()
    kw = dict(llm=llm, embedder=embedder, cache=cache, settings=fsettings, operator="ensemble")
    committee = fuse(store, ["data-coach", "travel-wit"], **kw).agent
    before = len(llm.calls)
    out = answer_as(committee, "Which statistics test fits?", llm, store=store, cache=cache)
    assert out.calls == 2 and len(llm.calls) - before == 2 and out.leader in committee.members
    assert out.transcript()["leader"] == str(out.leader) and out.reason


def test_an_agent_prompt_comes_from_the_synthesis_cache(store, embedder, cache, fsettings) -> None:
    agent = fuse(store, ["data-coach"], llm=counting(), embedder=embedder, cache=cache, settings=fsettings).agent
    assert cached_prompt(agent, cache) == agent.system_prompt
    key = synth_key(agent.lineage_hash)
    value, expires = cache.kv._data[key]
    cache.kv._data[key] = ({**value, "prompt": "You are someone else."}, expires)  # as another process reads it
    with pytest.raises(LineageError, match="altered"):
        answer_as(agent, "hello", counting(), store=store, cache=SynthesisCache(cache.kv))


def test_an_answer_counts_model_calls_and_cache_hits_apart(store) -> None:
    """``calls`` are model calls, as in every stored record: an answer the response cache serves took none."""
    from furnace.llm.cache import CachedLLM, MemoryCallLedger, MemoryResponseCache

    inner = counting()
    llm = CachedLLM(inner, MemoryResponseCache(), MemoryCallLedger())
    first = answer_as(store.get_elixir("data-coach"), "Is a median robust?", llm, store=store, seed=1)
    again = answer_as(store.get_elixir("data-coach"), "Is a median robust?", llm, store=store, seed=1)
    assert (first.calls, first.cached_calls) == (1, 0) and len(inner.calls) == 1
    assert (again.calls, again.cached_calls) == (0, 1) and again.text == first.text
    assert again.usage.total_tokens == first.usage.total_tokens  # usage sums the served answer's tokens too
