"""The trace exporter never drops a trace: a population whose spans overflow MLflow's export queue
waits for the writer instead, and every trace and span reaches the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

# The run in its own process (one trace destination per process, a fresh export queue). The writer
# is held until the export queue is full once, so the run's units end spans into a full queue: MLflow's
# own queue drops those ("Trace export queue is full, trace will be discarded"), furnace's waits. The
# queue holds QUEUE tasks (MLflow's default is 1000: span batches, furnace's of up to 25 spans, and
# finished traces), so that a population of 8 overflows it as populations of 16 and 64 overflowed the
# default under load.
QUEUE = 20
CHILD = """
import json, os, sys, threading, time
sys.path.insert(0, "tests")
from furnace.adapters import mlflow_export
from furnace.adapters.mlflow_tracker import MLflowTracker
from mlflow.tracing.export import mlflow_v3
from experiments.test_evolution import make
from furnace.evolution.records import MemoryResults

full_once = threading.Event()
write_spans = mlflow_v3.MlflowV3SpanExporter._log_spans

def held(self, *args, **kwargs):
    if not full_once.is_set():
        for _ in range(12000):  # at most ~2 minutes: a run too small to fill the queue is reported below
            if self._async_queue._queue.full():
                break
            time.sleep(0.01)
        full_once.set()
    return write_spans(self, *args, **kwargs)

mlflow_v3.MlflowV3SpanExporter._log_spans = held
population, generations = int(sys.argv[2]), int(sys.argv[3])
evo = make(MemoryResults(), population=population, generations=generations, concurrency=8, samples_per_probe=1)
evo.tracker = tracker = MLflowTracker(sys.argv[1])
report = evo.run()
started, stored = tracker.trace_counts()
traces = tracker.traces.search_traces(locations=[tracker.mlflow_experiment_id], run_id=tracker.run_id, max_results=1000)
spans = {t.info.trace_id: len(t.data.spans) for t in traces}
expected = {t.info.trace_id: json.loads(t.info.trace_metadata["mlflow.trace.sizeStats"])["num_spans"] for t in traces}
units = len(evo.results.individuals(report.experiment_id))
held_out = sum(next(s for s in t.data.spans if s.parent_id is None).name == "held-out" for t in traces)
tag = tracker.client.get_run(tracker.run_id).data.tags.get("furnace.traces")
print(json.dumps({
    "units": units, "held": held_out, "started": started, "stored": stored,
    "missing": tracker.traces_missing, "tag": tag, "report_traces": report.traces,
    "spans": sum(spans.values()), "expected_spans": sum(expected.values()),
    "queued": mlflow_export.stats.queued, "waited": mlflow_export.stats.waited,
}))
"""


def _run(home: Path, template: Path, population: int, generations: int) -> tuple[dict, str]:
    import shutil

    home.mkdir()
    shutil.copyfile(template, home / "mlflow.db")  # an initialised store: the child only runs and exports
    uri = f"sqlite:///{home / 'mlflow.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_ASYNC_TRACE_LOGGING_MAX_QUEUE_SIZE": str(QUEUE)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, uri, str(population), str(generations)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.mark.slow
def test_a_population_overflowing_the_export_queue_loses_no_trace(tmp_path: Path, _mlflow_template: Path) -> None:
    got, err = _run(tmp_path / "home", _mlflow_template, 8, 2)
    assert got["queued"] > QUEUE and got["waited"] > 0, got  # the queue was full: hand-overs waited
    assert "queue is full" not in err and "dropping" not in err.lower()
    # one trace per individual, and one for the evaluation after the search (held-out probes)
    traced = got["units"] + got["held"]
    assert got["held"] == 1 and got["started"] == got["stored"] == traced and got["missing"] == 0
    assert got["tag"] == f"{traced} of {traced} stored"
    assert got["report_traces"] == {"started": traced, "exported": traced, "missing": 0}  # the report counts them
    assert got["spans"] == got["expected_spans"] > got["units"]  # every span of every trace stored
