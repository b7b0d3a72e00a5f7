"""Running the units of a generation (one unit = one individual: fuse, answer probes, score).

The default runner is a bounded thread pool inside the process. The Prefect
flows pass a runner that submits each unit as a task (see ``flows/evolution.py``),
so the same loop runs on Prefect's task runners (threads or Dask).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Unit:
    """One unit of work: ``key`` is its content key (experiment, generation, slot, what to make,
    operator/scorer versions); ``run()`` returns the individual's record in this process, and
    ``args`` are the picklable inputs of ``Evolution.evaluate_unit`` for runners in other workers."""

    key: str
    slot: int
    run: Callable[[], Any]
    args: tuple[Any, ...] = ()  # plain data (generation, plan, population, known) for remote runners


class UnitRunner(Protocol):
    """Runs units and yields ``(unit, result)`` as they finish; the first error propagates."""

    def __call__(self, units: Sequence[Unit]) -> Iterator[tuple[Unit, Any]]: ...


class ThreadUnitRunner:
    """A bounded thread pool (the model concurrency itself is bounded by the metered LLM)."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)

    def __call__(self, units: Sequence[Unit]) -> Iterator[tuple[Unit, Any]]:
        if not units:
            return
        pool = ThreadPoolExecutor(max_workers=min(self.workers, len(units)), thread_name_prefix="furnace-unit")
        try:
            futures = {pool.submit(u.run): u for u in units}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for fut in sorted(done, key=lambda f: futures[f].slot):
                    error = fut.exception()
                    if error is not None:
                        raise error
                    yield futures[fut], fut.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
