"""Fusion benchmarks (offline engine behind a 50 ms latency-injected fake).

1. overhead: wall time of a full crossover fusion with nothing cached beyond
   the model's own latency, as a share of it (target < 5%);
2. cache hit: latency of repeating a finished fusion on one synthesis cache, as
   a running app or experiment does (target < 1 ms);
3. single-flight: 64 threads asking for one new fusion → exactly 1 build.

Each fusion is ``furnace fuse``'s: on the stack the command builds (:mod:`bench.stack`: the runtime's
store, synthesis cache, embedder and the response cache and call ledger behind the model, on a
temporary home), the model replaced at furnace's LLM seam. A cold fusion gets a fresh home. Beside
the overhead, furnace's CPU per model call over the cold fusions (:class:`bench.stack.CpuWindow`).
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from bench.stack import CPU_TARGET_MS, CpuWindow, Stack, main_for, record, stack
from furnace import resources
from furnace.fusion.fuse import fuse
from furnace.interop.importers import load_elixir_file
from furnace.llm.fakes import SlowLLM
from furnace.llm.offline.engine import OfflineEngine

LATENCY_S = 0.05
ROUNDS = 20  # cold fusions
HIT_TARGET_MS = 1.0  # a cache hit is a lookup
LIBRARY = resources.LIBRARY_DIR
PARENTS = ["data-science-mentor", "socratic-math-tutor"]


class Timed:
    """Sums the time spent inside the model (the model's own latency, sleep overshoot included)."""

    def __init__(self, inner: SlowLLM) -> None:
        self.inner, self.model_name, self.seconds = inner, inner.model_name, 0.0
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        return self.inner.calls

    def complete(self, request):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return self.inner.complete(request)
        finally:
            with self._lock:
                self.seconds += time.perf_counter() - started


def _parents(built: Stack) -> Stack:
    """The stack with PARENTS in its store."""
    for name in PARENTS:
        for elixir in load_elixir_file(LIBRARY / f"{name}.yaml"):
            built.runtime.store.save_elixir(elixir)
    return built


def _crossover(built: Stack, *, seed: int = 0) -> Any:
    """The bench's fusion: a crossover of PARENTS, as ``furnace fuse`` calls it."""
    rt = built.runtime
    return fuse(
        rt.store,
        PARENTS,
        llm=rt.llm,
        embedder=rt.embedder,
        cache=rt.synthesis_cache,
        operator="crossover",
        seed=seed,
        settings=rt.settings,
    )


def _statements(built: Stack) -> int:
    return built.runtime.sql.statements


def _overhead(llm: Timed) -> tuple[float, float, int, float, int, CpuWindow]:
    """(median ms of our own work per cold fusion, median ms inside the model, model calls, median ms of
    CPU of the fusing thread, statements per cold fusion, furnace's CPU window over them) over
    ROUNDS fusions, each on a fresh home (nothing cached). The CPU and the statements do not depend on the load."""
    walls, inside, cpus, statements = [], [], [], 0
    total = CpuWindow()
    for seed in range(1, ROUNDS + 1):
        with stack(lambda name: llm) as built:
            _parents(built)
            built.runtime.llm  # noqa: B018  (opened before the clock, as a running command has it)
            before_s, before_statements = llm.seconds, _statements(built)
            cpu, started = time.thread_time(), time.perf_counter()
            with built.measure() as window:
                _crossover(built, seed=seed)
            walls.append(time.perf_counter() - started)
            cpus.append(time.thread_time() - cpu)
            inside.append(llm.seconds - before_s)
            statements = _statements(built) - before_statements
            total.add(window)
    # Per-fusion medians: robust to a scheduling hiccup on a shared machine.
    extra_ms = statistics.median(w - m for w, m in zip(walls, inside, strict=False)) * 1000
    return (
        extra_ms,
        statistics.median(inside) * 1000,
        total.model_calls,
        statistics.median(cpus) * 1000,
        statements,
        total,
    )


def _hits(built: Stack, llm: Timed) -> list[float]:
    """Seconds of 200 repeated fusions on one synthesis cache (a running app or experiment), none calling the model."""
    first = _crossover(built)
    before, hits = llm.calls, []
    for _ in range(200):
        started = time.perf_counter()
        result = _crossover(built)
        hits.append(time.perf_counter() - started)
        assert result.from_cache and result.agent.id == first.agent.id
    assert llm.calls == before, "a cache hit must not call the model"
    return hits


def run() -> bool:
    """Print the figures; True when every target is met."""
    llm = Timed(SlowLLM(OfflineEngine(), LATENCY_S))
    with stack(lambda name: llm) as built:
        _crossover(_parents(built))  # warm imports

    extra_ms, model_ms, calls, cpu_ms, cold_statements, window = _overhead(llm)
    overhead = extra_ms / model_ms
    with stack(lambda name: llm) as built:
        _parents(built)
        statements = _statements(built)
        hits = _hits(built, llm)
        per_hit = (_statements(built) - statements) / 201
    hit_ms = statistics.median(hits) * 1000
    print(
        f"   the command's stack: {ROUNDS} cold fusions, {calls} model calls at {LATENCY_S * 1000:.0f} ms injected; "
        f"median {extra_ms:.2f} ms of our own work beyond {model_ms:.1f} ms inside the model -> overhead "
        f"{overhead:.1%} (target < 5%); {cpu_ms:.2f} ms CPU of the fusing thread, {cold_statements} SQL "
        "statements per cold fusion"
    )
    print(
        f"   furnace CPU per model call over the cold fusions: {window.cpu_ms_per_call:.2f} ms (target <= "
        f"{CPU_TARGET_MS:.0f} ms; all threads, the provider client's {window.client_cpu_s:.2f}s left out)"
    )
    print(
        f"   cache hit (one synthesis cache, as in a running app or experiment): median {hit_ms:.2f} ms "
        f"(p95 {sorted(hits)[189] * 1000:.2f} ms) (target < {HIT_TARGET_MS} ms); "
        f"{per_hit:.1f} SQL statements per hit"
    )
    ok = overhead < 0.05 and hit_ms < HIT_TARGET_MS and window.cpu_ms_per_call <= CPU_TARGET_MS

    # 3. single-flight: 64 threads asking for one new fusion -> one build, one model call
    with stack(lambda name: llm) as built:
        _parents(built)
        cache, barrier, results = built.runtime.synthesis_cache, threading.Barrier(64), []
        before = llm.calls

        def worker() -> None:
            barrier.wait()
            results.append(_crossover(built, seed=999))

        threads = [threading.Thread(target=worker) for _ in range(64)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        flight_ms = (time.perf_counter() - started) * 1000
        flight_calls = llm.calls - before
    print(
        f"   single-flight: 64 concurrent -> {cache.builds} build(s), {flight_calls} model call(s), "
        f"{len({r.agent.id for r in results})} agent id, {flight_ms:.0f} ms total"
    )
    record(
        **window.figures(),
        overhead=round(overhead, 4),
        hit_ms=round(hit_ms, 3),
        single_flight_builds=cache.builds,
    )
    return ok and cache.builds == 1 and len({r.agent.id for r in results}) == 1


main = main_for("fusion", run)


if __name__ == "__main__":
    raise SystemExit(0 if run() else 1)
