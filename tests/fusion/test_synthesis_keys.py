"""The synthesis cache key (the lineage hash) holds what shapes a fused agent: the offline rules
version for the offline engine, the prompt-template version for a model that reads the prose."""

from __future__ import annotations

from furnace.fusion.embedding import HashEmbedder
from furnace.fusion.fuse import fuse
from furnace.fusion.operators import prompts
from furnace.fusion.synthesis import MemoryKV, SynthesisCache
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline.engine import RULES_VERSION, OfflineEngine

PAIR = ["data-coach", "travel-wit"]


def _real_model() -> FakeLLM:
    """Answers like the offline engine but, for keys, reads only the messages (as a real model does)."""
    return FakeLLM(respond=OfflineEngine().complete, model_name="openai/local", reads_inputs=False)


def _fuse(store, kv, llm, settings):
    return fuse(
        store, PAIR, llm=llm, embedder=HashEmbedder(), cache=SynthesisCache(kv), operator="crossover", settings=settings
    )


def test_lineage_params_name_the_rules_version_offline_and_the_templates_for_a_real_model(store, fsettings) -> None:
    offline = _fuse(store, MemoryKV(), OfflineEngine(), fsettings).agent.lineage.params
    assert offline["engine"] == f"rules-{RULES_VERSION}" and "prompts" not in offline
    real = _fuse(store, MemoryKV(), _real_model(), fsettings).agent.lineage.params
    assert real["prompts"] == prompts.templates_version() and "engine" not in real


def test_a_changed_prompt_template_misses_the_synthesis_cache(store, fsettings, monkeypatch) -> None:
    kv = MemoryKV()
    first = _fuse(store, kv, _real_model(), fsettings)
    again = _fuse(store, kv, _real_model(), fsettings)
    assert again.from_cache and again.agent.id == first.agent.id
    original = prompts.build_identity_request

    def reworded(*args, **kwargs):
        request = original(*args, **kwargs)
        system = request.messages[0].model_copy(update={"content": request.messages[0].content + " Be vivid."})
        return request.model_copy(update={"messages": (system, *request.messages[1:])})

    monkeypatch.setattr(prompts, "build_identity_request", reworded)
    prompts.templates_version.cache_clear()
    try:
        changed = _fuse(store, kv, _real_model(), fsettings)
    finally:
        prompts.templates_version.cache_clear()
    assert not changed.from_cache and changed.agent.lineage_hash != first.agent.lineage_hash


def test_a_changed_rules_version_misses_the_synthesis_cache(store, fsettings, monkeypatch) -> None:
    kv = MemoryKV()
    first = _fuse(store, kv, OfflineEngine(), fsettings)
    monkeypatch.setattr(OfflineEngine, "engine_version", "rules-edited")
    second = _fuse(store, kv, OfflineEngine(), fsettings)
    assert not second.from_cache and second.agent.lineage_hash != first.agent.lineage_hash
