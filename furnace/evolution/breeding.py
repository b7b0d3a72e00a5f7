"""The breeder that makes children through the furnace (``furnace.fusion.fuse.fuse``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from furnace.domain.elixir import ElixirRef
from furnace.domain.errors import FurnaceError, StoreError
from furnace.domain.guarded import Guarded, serialized
from furnace.evolution.engine import Bred
from furnace.evolution.runstore import RunStore
from furnace.evolution.writer import NewAgent
from furnace.llm.seam import LLM
from furnace.settings import FurnaceSettings
from furnace.storage.protocols import KV


class RunKV(Guarded):
    """The synthesis cache's key-value store as the units of one run read it: what it held before the run,
    never what another unit of the run stored since. A fusion sub-result two units need (a crossover's
    identity sentence for the same parents) is then asked of the model by each of them — the response
    cache answers the second for free — instead of being read by whichever unit ran second, so which
    requests a unit makes, and what it is credited with (``metering.CallBook``), never depends on which
    unit ran first. Writes go through (a later run reads them)."""

    def __init__(self, inner: KV) -> None:
        self.inner = inner
        self._written: set[str] = set()

    @serialized
    def _hidden(self, key: str) -> bool:
        return key in self._written

    @serialized
    def _hide(self, keys: Sequence[str]) -> None:
        self._written.update(keys)

    def get(self, key: str) -> dict[str, Any] | None:
        return None if self._hidden(key) else self.inner.get(key)

    def put_if_absent(self, key: str, value: dict[str, Any], ttl_s: float | None = None) -> dict[str, Any]:
        self._hide([key])
        return self.inner.put_if_absent(key, value, ttl_s)

    def put_many_if_absent(self, items: Sequence[tuple[str, dict[str, Any], float | None]]) -> list[dict[str, Any]]:
        self._hide([key for key, _, _ in items])
        return self.inner.put_many_if_absent(items)


class FusionBreeder:
    """Calls ``fuse(store, parents, operator=..., seed=..., params=...)`` with the run's
    metered model, so fusion calls count against the budget and hit the caches."""

    retries = 3

    def __init__(self, store: Any, *, embedder: Any, cache: Any, settings: FurnaceSettings | None = None) -> None:
        self.store, self.embedder, self.cache, self.settings = store, embedder, cache, settings

    def for_run(self, queue: Callable[[NewAgent], None]) -> FusionBreeder:
        """This breeder as one run uses it: parents read once, new agents handed to ``queue`` (the
        run's record writer) instead of written by the unit (``furnace.evolution.runstore``), and the
        synthesis cache as it was before the run (:class:`RunKV`)."""
        from furnace.fusion.synthesis import SynthesisCache

        cache = self.cache
        if isinstance(cache, SynthesisCache):
            cache = SynthesisCache(RunKV(cache.kv), cache.ttl_s)
        return FusionBreeder(RunStore(self.store, queue), embedder=self.embedder, cache=cache, settings=self.settings)

    def prefetch(self, refs: Sequence[ElixirRef]) -> None:
        """Read ahead parents the run will use (its seeds), when the store is a run's view (``RunStore``)."""
        if isinstance(self.store, RunStore):
            self.store.prefetch(refs)

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
