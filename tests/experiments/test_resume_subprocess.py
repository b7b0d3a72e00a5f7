"""For real: SIGKILL `furnace experiment run` during generation 2, run it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path

import pytest

from tests.conftest import run_cli, seed_home

REPO = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).parent / "data" / "small.yaml"
FURNACE = [sys.executable, "-c", "from furnace.cli import main; main()"]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FURNACE_")}
    env.update(FURNACE_HOME=str(home), FURNACE_EMBEDDER="hash", PYTHONUNBUFFERED="1")
    return env


def _prepare(home: Path) -> None:
    """The sample library in a new ``home`` (in this process, its DuckDB file closed again)."""
    home.mkdir()
    seed_home(home)


def _run_here(capsys: pytest.CaptureFixture[str], home: Path) -> dict:
    """The same command in this process: for the runs whose process is not what is tested (the reference, the
    resume after the kill and the rerun after it), an interpreter start fewer each."""
    code, out, err = run_cli(capsys, "--home", str(home), "experiment", "run", str(CONFIG), "--json", "--no-mlflow")
    assert code == 0, err[-2000:]
    return json.loads(out)


def _read(home: Path, read):
    """``read(runtime)`` on a runtime of ``home``, closed afterwards (the live store, as a command opens it)."""
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    runtime = Runtime(FurnaceSettings(home=home))
    try:
        return read(runtime)
    finally:
        runtime.close()


def _model_calls(home: Path, experiment_id: str) -> int:
    return _read(home, lambda rt: rt.llm.ledger.totals(experiment_id).model_calls)


def _responses(home: Path) -> int:
    return int(_read(home, lambda rt: rt.sql.query("SELECT count(*) FROM llm_responses"))[0][0])


def _model_calls_since(home: Path, since: float) -> int:
    from datetime import datetime

    stamp = datetime.fromtimestamp(since, tz=UTC).replace(tzinfo=None)
    rows = _read(
        home, lambda rt: rt.sql.query("SELECT count(*) FROM llm_calls WHERE NOT cached AND created_at >= ?", [stamp])
    )
    return int(rows[0][0])


def _rows(home: Path, experiment_id: str) -> dict[str, int]:
    return _read(home, lambda rt: rt.results.count_rows(experiment_id))


def _signature(report: dict) -> dict:
    return {
        "leaderboard": report["leaderboard"],
        "lineage": report["lineage"],
        "generations": [
            {k: g[k] for k in ("generation", "best_fitness", "mean_fitness", "survivors")}
            for g in report["generations"]
        ],
        "pareto": report["pareto"],
    }


@pytest.mark.slow
def test_sigkill_in_generation_2_then_rerun_equals_uninterrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    _prepare(clean)
    _prepare(killed)
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")  # as _env gives the subprocesses
    reference = _run_here(capsys, clean)
    exp_id = reference["experiment_id"]
    reference_calls = _model_calls(clean, exp_id)
    assert reference_calls > 0

    proc = subprocess.Popen(
        [*FURNACE, "experiment", "run", str(CONFIG), "--no-mlflow"],
        env=_env(killed),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    seen = b""
    deadline = time.monotonic() + 240
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        chunk = os.read(proc.stderr.fileno(), 4096)
        if not chunk:
            break
        seen += chunk
        tail = seen.rsplit(b"\r", 1)[-1]
        if b"generation 2/3" in tail and b"] 0/" not in tail:  # at least one child of generation 2 saved
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert b"generation 2/3" in seen, seen[-500:]
    partial = _rows(killed, exp_id)
    assert 0 < partial["experiment_generations"] < 4
    # The response cache's rows are the model calls that finished before the kill; the ledger is
    # written ahead of the cache (journal replayed after the kill), so it lost none of them.
    finished_before_kill = _responses(killed)
    assert 0 < finished_before_kill < reference_calls
    # A call that finished just before the kill may be in the ledger but not yet in the cache: it
    # was paid, so it stays counted, and the resume pays for it again. Those are the only extras.
    paid_before_kill = _model_calls(killed, exp_id)
    assert paid_before_kill >= finished_before_kill
    in_the_window = paid_before_kill - finished_before_kill

    resume_started = time.time()
    resumed = _run_here(capsys, killed)  # the resume: a new run in another process than the killed one
    assert _signature(resumed) == _signature(reference)
    made_after = _model_calls_since(killed, resume_started)
    assert finished_before_kill + made_after == reference_calls  # no finished model call was repeated
    # the report's totals are the whole experiment's, recomputed from the ledger, not this run's
    paid = _model_calls(killed, exp_id)
    assert resumed["totals"]["model_calls"] == paid == paid_before_kill + made_after
    assert paid == reference_calls + in_the_window
    assert _responses(killed) == _responses(clean)
    assert _rows(killed, exp_id) == _rows(clean, exp_id)  # and no row was written twice
    again_started = time.time()
    again = _run_here(capsys, killed)
    assert _model_calls_since(killed, again_started) == 0
    assert again["totals"]["model_calls"] == paid  # a rerun never overwrites the totals
    assert _signature(again) == _signature(reference)


def _trace_states(home: Path) -> dict[str, str]:
    import sqlite3

    db = home / "mlflow.db"
    if not db.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return dict(con.execute("SELECT request_id, status FROM trace_info").fetchall())
    except sqlite3.OperationalError:  # tables not created yet, or busy
        return {}


@pytest.mark.slow
def test_sigkill_leaves_no_trace_in_progress_after_resume_and_one_metric_value_per_step(
    tmp_path: Path,
    smaller: Path,
    _mlflow_template: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the smaller experiment, in a home whose MLflow store is initialised (a copy of the session's
    template): what is checked holds at any size, and the store's creation has tests of its own."""
    import shutil

    from mlflow import MlflowClient

    home = tmp_path / "home"
    _prepare(home)
    shutil.copyfile(_mlflow_template, home / "mlflow.db")
    proc = subprocess.Popen(
        [*FURNACE, "experiment", "run", str(smaller), "--json"], env=_env(home), cwd=REPO, stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if list(_trace_states(home).values()).count("IN_PROGRESS") >= 2:  # spans of open traces are stored
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    killed = {t for t, s in _trace_states(home).items() if s == "IN_PROGRESS"}
    assert killed, "the kill came after every trace had ended"

    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")  # the resume in this process (its process is not the point)
    code, out, err = run_cli(capsys, "--home", str(home), "experiment", "run", str(smaller), "--json")
    assert code == 0, err[-2000:]
    report = json.loads(out)
    states = _trace_states(home)
    assert "IN_PROGRESS" not in states.values()
    assert {states[t] for t in killed} == {"ERROR"}
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    for trace_id in killed:
        info = client.get_trace(trace_id).info
        assert info.tags["furnace.note"].startswith("run killed; resumed by ")
        assert info.trace_metadata["mlflow.sourceRun"]  # linked to the experiment's run
    run = client.search_runs(
        [info.experiment_id], filter_string=f"tags.`furnace.experiment_id` = '{report['experiment_id']}'"
    )
    parent = next(r for r in run if "mlflow.parentRunId" not in r.data.tags)
    for metric in ("best_fitness", "mean_fitness", "generation_model_calls", "calls", "tokens"):
        steps = [m.step for m in client.get_metric_history(parent.info.run_id, metric)]
        assert len(steps) == len(set(steps)), (metric, steps)  # never two values at one step
    every = [0, 1, 2]  # the smaller experiment: its seeds, then 2 generations of children
    assert sorted(m.step for m in client.get_metric_history(parent.info.run_id, "best_fitness")) == every
    assert client.get_metric_history(parent.info.run_id, "calls")[-1].value == report["totals"]["calls"]
    children = [r for r in run if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(int(r.data.tags["furnace.generation"]) for r in children) == every
    assert {r.info.status for r in children} == {"FINISHED"}
