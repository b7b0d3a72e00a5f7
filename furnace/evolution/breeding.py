"""The breeder that makes children through the furnace (``furnace.fusion.fuse.fuse``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from furnace.domain.elixir import ElixirRef
from furnace.domain.errors import FurnaceError, StoreError
from furnace.evolution.engine import Bred
from furnace.evolution.writer import NewAgent
from furnace.llm.seam import LLM
from furnace.settings import FurnaceSettings


class FusionBreeder:
    """Calls ``fuse(store, parents, operator=..., seed=..., params=...)`` with the run's
    metered model, so fusion calls count against the budget and hit the caches."""

    retries = 3

    def __init__(self, store: Any, *, embedder: Any, cache: Any, settings: FurnaceSettings | None = None) -> None:
        self.store, self.embedder, self.cache, self.settings = store, embedder, cache, settings

    def for_run(self, queue: Callable[[NewAgent], None]) -> FusionBreeder:
        """This breeder as one run uses it: parents read once, new agents handed to ``queue`` (the
        run's record writer) instead of written by the unit (``furnace.evolution.runstore``)."""
        from furnace.evolution.runstore import RunStore

        return FusionBreeder(
            RunStore(self.store, queue), embedder=self.embedder, cache=self.cache, settings=self.settings
        )

    def prefetch(self, refs: Sequence[ElixirRef]) -> None:
        """Read ahead parents the run will use (its seeds), when the store view can (``RunStore``)."""
        ahead = getattr(self.store, "prefetch", None)
        if callable(ahead):
            ahead(refs)

    def __call__(
        self, parents: Sequence[ElixirRef], operator: str, seed: int, params: dict[str, Any], llm: LLM
    ) -> Bred:
        from furnace.fusion.fuse import fuse

        for attempt in range(self.retries + 1):
            try:
                result = fuse(
                    self.store,
                    list(parents),
                    llm=llm,
                    embedder=self.embedder,
                    cache=self.cache,
                    operator=operator,
                    seed=seed,
                    params=params,
                    settings=self.settings,
                )
                break
            except FurnaceError:
                raise
            except Exception as err:  # a storage race between threads: fuse is idempotent, so retry
                if attempt == self.retries:
                    raise StoreError(
                        f"fusion storage failed after {attempt + 1} attempts: "
                        f"{err.__class__.__name__}: {str(err)[:160]}"
                    ) from None
        agent = result.agent
        return Bred(agent.id, agent.elixir, agent.system_prompt, agent.lineage_hash)
