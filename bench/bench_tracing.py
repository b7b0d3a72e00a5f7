"""MLflow tracing's CPU per model call, measured on the stack ``furnace experiment run`` builds.

Each mode runs the same small experiment (offline engine, hash embedder, DuckDB) in a fresh home,
built through :class:`furnace.runtime.Runtime` as the command builds it (:mod:`bench.stack`,
``prepare_experiment``), and reports furnace's CPU per model call (:class:`bench.stack.CpuWindow`: every
thread, the scorers, DuckDB, MLflow's background writer; the offline engine's own work left out):

- **no MLflow** (``--no-mlflow``): the null tracker;
- **tracing off**: MLflow logs the run (params, metrics per generation, child runs, artifacts), no traces;
- **tracing on**: the default: each individual a trace, each model call an ``LLM`` span, written by
  MLflow's background writer (furnace's waiting export queue), flushed and counted before the run ends.

The figure judged is tracing's own cost, ``on - off``, in ms of CPU per model call (target
< :data:`TARGET_MS`); the trace count must be whole (0 missing). One untimed warm-up run first loads
what every mode uses. The offline engine computes its answers in this process (model-side work a real
provider does elsewhere), the same in every mode, so it cancels out of the difference.
"""

from __future__ import annotations

import gc
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.stack import main_for, record, stack

TARGET_MS = 30.0  # tracing's CPU per model call (ms), on - off
CONFIG: dict[str, Any] = {
    "name": "bench-tracing",
    "seed": 5,
    "population": 16,
    "generations": 2,
    "concurrency": 4,
    "seeds": {"language": "en"},
    "probes": {"set": "writing-en", "limit": 2},
    "scorers": {"constraints": 0.2, "fidelity": 0.2, "brief_fit": 0.5, "diversity": 0.1},
}


def _run(home: Path, mode: str) -> dict[str, float]:
    """One experiment in a fresh home: CPU ms per model call, calls, and (tracing on) traces missing."""
    from furnace.evolution.config import parse_config
    from furnace.interop.importers import import_library
    from furnace.llm.offline import OfflineEngine
    from furnace.resources import LIBRARY_DIR

    with stack(lambda name: OfflineEngine(), home=home) as built:
        runtime = built.runtime
        import_library(LIBRARY_DIR, runtime.store, keep_existing=True)
        prepared = runtime.prepare_experiment(parse_config(CONFIG, source="bench"), track=mode != "no MLflow")
        tracker = prepared.evolution.tracker
        if mode == "tracing off":
            tracker.tracing = False  # type: ignore[attr-defined]  (the MLflow tracker: runs logged, no traces)
        gc.collect()
        with built.measure() as window:
            report = prepared.evolution.run()
        calls = int(report.totals["calls"])
        missing = float(getattr(tracker, "traces_missing", 0))
        return {"cpu_ms_per_call": window.cpu_ms_per_call, "calls": calls, "missing": missing}


def run() -> bool:
    root = Path(tempfile.mkdtemp(prefix="furnace-bench-tracing-"))
    try:
        _run(root / "warm-up", "no MLflow")
        got = {mode: _run(root / mode.replace(" ", "-"), mode) for mode in ("no MLflow", "tracing off", "tracing on")}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for mode, figures in got.items():
        print(f"   {mode:<12} cpu_ms_per_call {figures['cpu_ms_per_call']:6.2f}  ({int(figures['calls'])} model calls)")
    tracing = got["tracing on"]["cpu_ms_per_call"] - got["tracing off"]["cpu_ms_per_call"]
    mlflow_runs = got["tracing off"]["cpu_ms_per_call"] - got["no MLflow"]["cpu_ms_per_call"]
    missing = int(got["tracing on"]["missing"])
    ok = tracing < TARGET_MS and missing == 0
    record(
        cpu_ms_per_call=round(got["tracing on"]["cpu_ms_per_call"], 3),  # the default: MLflow with tracing
        cpu_ms_per_call_by_mode={mode: round(f["cpu_ms_per_call"], 3) for mode, f in got.items()},
        tracing_ms_per_call=round(tracing, 3),
        tracing_target_ms=TARGET_MS,
    )
    print(
        f"   tracing: {tracing:+.2f} ms of CPU per model call (on - off; target < {TARGET_MS} ms), traces missing:"
        f" {missing}; MLflow run logging without traces: {mlflow_runs:+.2f} ms per call {'ok' if ok else 'MISSED'}"
    )
    return ok


main = main_for("tracing", run)
