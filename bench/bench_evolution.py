"""Evolution benchmark: concurrency vs the ideal and a sequential loop, re-run cost, search quality.

All with the offline engine behind the latency-injected fake (50 ms per model call), DuckDB
for the store and the records (what users run), and the hash embedder; baselines are measured
in the same run. Wall vs ideal targets: <= 1.10x at concurrency 8, <= 1.25x at concurrency 32.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from furnace import resources
from furnace.domain.elixir import Elixir, parse_elixir
from furnace.evolution.config import parse_config
from furnace.evolution.local import memory_evolution
from furnace.llm.cache import CachedLLM
from furnace.llm.fakes import SlowLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.seam import Completion, LLMRequest
from furnace.scoring.brief import brief_fit
from furnace.scoring.probes import load_probe_set

LATENCY = 0.05
IDEAL_TARGETS = {8: 1.10, 32: 1.25}  # wall / ideal at each concurrency
REPO = Path(__file__).resolve().parents[1]
BASE = {
    "name": "bench",
    "seed": 5,
    "population": 16,
    "generations": 4,
    "concurrency": 8,
    "seeds": {"language": "en"},
    "selection": {"tournament_size": 3, "elitism": 1},
    "probes": {"set": "writing-en", "limit": 4},
    "scorers": {"constraints": 0.2, "fidelity": 0.2, "brief_fit": 0.5, "diversity": 0.1},
}


def _library() -> list[Elixir]:
    found = [
        parse_elixir(yaml.safe_load(p.read_text(encoding="utf-8")))
        for p in sorted(resources.LIBRARY_DIR.glob("*.yaml"))
    ]
    return [e for e in found if e.language == "en"]


class _Recorder:
    """Records the requests that reach the (slow) model, to replay them sequentially."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_name = inner, inner.model_name
        self.requests: list[LLMRequest] = []
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> Completion:
        with self._lock:
            self.requests.append(request)
        return self.inner.complete(request)


def _evolve(config: Any, seeds: list[Elixir], folder: Path, llm: Any) -> Any:
    from furnace.storage.duckdb.db import Database
    from furnace.storage.duckdb.experiments import DuckDBExperimentResults
    from furnace.storage.duckdb.store import DuckDBStore

    db = Database(folder / "furnace.duckdb")
    store = DuckDBStore(db)
    for elixir in seeds:
        store.save_elixir(elixir)
    return memory_evolution(config, seeds, llm=llm, results=DuckDBExperimentResults(db), store=store)


def _costs(evo: Any, statements: int, cpu: float, load: float) -> str:
    """The load-independent figures of a run: its CPU time and DuckDB statements per individual."""
    individuals = len(evo.results.individuals(evo.experiment_id))
    return (
        f"   CPU {cpu:.2f}s (all threads), {statements} DuckDB statements ({statements / individuals:.1f} per "
        f"individual), load average {load:.1f} at the start"
    )


def _timed_run(evo: Any) -> tuple[Any, float, float, int, float]:
    """Run ``evo``: its report, wall, CPU (all threads), DuckDB statements and the load at the start."""
    db = evo.results.db
    load, before = os.getloadavg()[0], db.statements
    cpu, started = time.process_time(), time.perf_counter()
    report = evo.run()
    return report, time.perf_counter() - started, time.process_time() - cpu, db.statements - before, load


def _wide(seeds: list[Elixir]) -> bool:
    """Wall vs ideal at concurrency 32 (a population of 32, so every slot could be busy)."""
    config = parse_config({**BASE, "concurrency": 32, "population": 32, "generations": 3})
    recorder = _Recorder(SlowLLM(OfflineEngine(), LATENCY))
    folder = Path(tempfile.mkdtemp(prefix="furnace-bench-"))
    evo = _evolve(config, seeds, folder, CachedLLM(recorder))
    _, wall, cpu, statements, load = _timed_run(evo)
    ideal = len(recorder.requests) * LATENCY / 32
    target = IDEAL_TARGETS[32]
    print(
        f"   evolution at concurrency 32: {len(recorder.requests)} model calls, wall {wall:.2f}s, ideal {ideal:.2f}s "
        f"-> {wall / ideal:.2f}x ideal (target <= {target:.2f}x)"
    )
    print(_costs(evo, statements, cpu, load))
    shutil.rmtree(folder, ignore_errors=True)
    return wall / ideal <= target


def _concurrency_and_rerun() -> bool:
    from furnace.storage.duckdb.db import Database
    from furnace.storage.duckdb.experiments import DuckDBExperimentResults

    seeds = _library()
    config = parse_config(BASE)
    recorder = _Recorder(SlowLLM(OfflineEngine(), LATENCY))
    folder = Path(tempfile.mkdtemp(prefix="furnace-bench-"))
    evo = _evolve(config, seeds, folder, CachedLLM(recorder))
    report, wall, cpu, statements, load = _timed_run(evo)
    calls = len(recorder.requests)
    ideal = calls * LATENCY / config.concurrency
    target = IDEAL_TARGETS[config.concurrency]
    print(
        f"   evolution: {calls} model calls, wall {wall:.2f}s, ideal {ideal:.2f}s "
        f"(calls x {LATENCY * 1000:.0f}ms / {config.concurrency}) -> {wall / ideal:.2f}x ideal "
        f"(target <= {target:.2f}x)"
    )
    print(_costs(evo, statements, cpu, load))

    slow = SlowLLM(OfflineEngine(), LATENCY)
    started = time.perf_counter()
    for request in recorder.requests:  # what a user would write by hand: one call after another
        slow.complete(request)
    sequential = time.perf_counter() - started
    print(
        f"   sequential loop of the same calls: {sequential:.2f}s -> evolution {sequential / wall:.1f}x faster "
        "(target >= 5x)"
    )

    again = memory_evolution(
        config,
        seeds,
        llm=CachedLLM(recorder),
        results=DuckDBExperimentResults(Database(folder / "furnace.duckdb")),
        store=evo.breeder.store,
    )  # type: ignore[attr-defined]
    before = len(recorder.requests)
    started = time.perf_counter()
    rerun = again.run()
    rerun_wall = time.perf_counter() - started
    rerun_calls = len(recorder.requests) - before
    same = rerun.result_signature() == report.result_signature()
    print(
        f"   re-run of the finished experiment (records read back from DuckDB): {rerun_calls} model calls, "
        f"wall {rerun_wall:.2f}s = "
        f"{rerun_wall / wall:.0%} of the first (target 0 calls, <= 15%); same result: {same}"
    )
    shutil.rmtree(folder, ignore_errors=True)
    wide = _wide(seeds)
    return (
        wall / ideal <= target
        and wide
        and sequential / wall >= 5
        and rerun_calls == 0
        and rerun_wall <= 0.15 * wall
        and same
    )


def _search_quality(seed: int) -> tuple[float, float, int]:
    """Best brief fit found by evolution vs by random fusions with the same number of model calls."""
    seeds = _library()
    probes = load_probe_set("writing-en").head(1)
    brief = probes.brief
    assert brief is not None
    config = parse_config(
        {
            **BASE,
            "seed": seed,
            "population": 8,
            "generations": 4,
            "concurrency": 4,
            "probes": {"set": "writing-en", "limit": 1},
            "scorers": {"brief_fit": 1.0},
        }
    )
    evo = memory_evolution(config, seeds, llm=CachedLLM(OfflineEngine()), probes=probes)
    report = evo.run()
    budget = evo.metered.meter.calls
    evolved = report.leaderboard[0]["objectives"]["brief_fit"]

    rng = random.Random(seed)
    rand = memory_evolution(config, seeds, llm=CachedLLM(OfflineEngine()), probes=probes)
    best = max(brief_fit(e, brief).value for e in seeds)
    while rand.metered.meter.calls < budget:
        operator = rng.choice(["crossover", "mutation"])
        parents = rng.sample(seeds, 2 if operator == "crossover" else 1)
        try:
            child = rand.breeder(
                [p.ref for p in parents],
                operator,
                rng.randrange(2**31),
                {"rate": 0.25} if operator == "mutation" else {},
                rand.metered,
            )
        except Exception:  # a refused fusion still cost its calls
            continue
        best = max(best, brief_fit(child.elixir, brief).value)
    return evolved, best, budget


def run() -> bool:
    """Print the figures and ratios; True when every target is met."""
    ok = _concurrency_and_rerun()
    results = [_search_quality(s) for s in range(1, 6)]
    evo_median = statistics.median(r[0] for r in results)
    rand_median = statistics.median(r[1] for r in results)
    print(
        f"   search quality (best brief fit, median of 5 seeds, ~{results[0][2]} model calls each): "
        f"evolution {evo_median:.3f} vs random fusions {rand_median:.3f} "
        f"({'evolution wins' if evo_median > rand_median else 'evolution does NOT win'})"
    )
    return ok and evo_median > rand_median
