"""An all-in-memory experiment setup (no database, no MLflow): for tests, benchmarks, notebooks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from furnace.domain.elixir import Elixir
from furnace.evolution.breeding import FusionBreeder
from furnace.evolution.config import ExperimentConfig
from furnace.evolution.engine import Evolution
from furnace.evolution.records import ExperimentResults, MemoryResults
from furnace.llm.seam import LLM
from furnace.scoring.probes import ProbeSet, load_probe_set


def memory_evolution(
    config: ExperimentConfig,
    seeds: Sequence[Elixir],
    *,
    llm: LLM | None = None,
    probes: ProbeSet | None = None,
    results: ExperimentResults | None = None,
    store: Any = None,
    embedder: Any = None,
    **kwargs: Any,
) -> Evolution:
    """An :class:`Evolution` over a MemoryStore holding ``seeds``, the offline engine behind a
    memory response cache (unless ``llm`` is given), the hash embedder and a memory synthesis cache."""
    from furnace.fusion.embedding import HashEmbedder
    from furnace.fusion.synthesis import SynthesisCache
    from furnace.llm.cache import CachedLLM
    from furnace.llm.offline import OfflineEngine
    from furnace.storage.memory import MemoryStore

    if store is None:
        store = MemoryStore()
        for elixir in seeds:
            store.save_elixir(elixir)
    stored = [store.get_elixir(e.id) for e in seeds]
    embedder = embedder or HashEmbedder()
    llm = llm or CachedLLM(OfflineEngine())
    probes = probes or load_probe_set(config.probes.set).head(config.probes.limit)
    breeder = FusionBreeder(store, embedder=embedder, cache=SynthesisCache())
    return Evolution(
        config,
        probes,
        stored,
        llm,
        breeder,
        results if results is not None else MemoryResults(),
        embedder=embedder,
        **kwargs,
    )
