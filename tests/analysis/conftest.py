"""A small home for the reader and registry tests: two library elixirs and three agents in its live store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from furnace import resources

LIBRARY_DIR = resources.LIBRARY_DIR


@dataclass
class Lab:
    settings: Any
    runtime: Any
    store: Any
    llm: Any
    crossover: Any
    mutant: Any
    grandchild: Any

    def analysis(self) -> Any:
        """What the readers read: a fresh snapshot of the live store (as ``furnace snapshot`` takes)."""
        from furnace.storage.duckdb import snapshot

        snapshot.refresh(self.runtime.sql)
        return self.runtime.analysis


@pytest.fixture()
def lab(settings) -> Lab:
    from furnace.fusion.embedding import HashEmbedder
    from furnace.fusion.fuse import fuse
    from furnace.interop.importers import import_file
    from furnace.runtime import Runtime

    rt = Runtime(settings)
    store, llm = rt.store, rt.llm
    for name in ("data-science-mentor", "viral-copywriter"):
        import_file(LIBRARY_DIR / f"{name}.yaml", store)
    kw = dict(llm=llm, embedder=HashEmbedder(), cache=rt.synthesis_cache, settings=settings)
    cross = fuse(store, ["data-science-mentor", "viral-copywriter"], operator="crossover", **kw).agent
    mutant = fuse(store, ["data-science-mentor"], operator="mutation", seed=3, **kw).agent
    grandchild = fuse(store, [cross.id], operator="mutation", seed=5, **kw).agent
    return Lab(settings, rt, store, llm, cross, mutant, grandchild)
