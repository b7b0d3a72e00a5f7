"""Two processes setting up a new home's mlflow.db at once both succeed (furnace.adapters.mlflow_store)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

# Imports first (seconds), then waits for "go" on stdin, so both processes open the new store together.
CHILD = """
import sys
from furnace.adapters.mlflow_tracker import MLflowTracker
from furnace.adapters.mlflow_prompts import client_for
print("ready", flush=True)
sys.stdin.readline()
tracker = MLflowTracker(sys.argv[1])
client_for(sys.argv[1]).search_prompts(max_results=1)
print("experiment", tracker.mlflow_experiment_id, flush=True)
"""


def _first_setup(home: Path) -> list[tuple[int, str, str]]:
    uri = f"sqlite:///{home / 'mlflow.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, uri],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        for _ in range(2)
    ]
    for proc in procs:  # both imported and waiting
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        results.append((proc.returncode, out, err))
    return results


@pytest.mark.slow
def test_two_concurrent_first_setups_both_succeed(tmp_path: Path) -> None:
    for attempt in range(2):
        home = tmp_path / f"home-{attempt}"
        home.mkdir()
        results = _first_setup(home)
        for code, _out, err in results:
            assert code == 0, err[-2000:]
            assert "duplicate column" not in err and "already exists" not in err
        experiments = {out.split()[-1] for _, out, _ in results}
        assert len(experiments) == 1  # one MLflow experiment, found by the second process
        assert (home / "mlflow.db.lock").exists()


def test_prepare_is_once_per_process_and_skips_servers(tmp_path: Path) -> None:
    from furnace.adapters import mlflow_store

    assert mlflow_store.database_of("http://127.0.0.1:5000") is None
    mlflow_store.prepare("http://127.0.0.1:1")  # a server: no lock, nothing opened (port 1 is never asked)
    uri = f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}"
    mlflow_store.prepare(uri)
    assert (tmp_path / "home" / "mlflow.db").is_file() and (tmp_path / "home" / "mlflow.db.lock").is_file()
    (tmp_path / "home" / "mlflow.db.lock").unlink()
    mlflow_store.prepare(uri)  # already set up in this process: the lock is not taken again
    assert not (tmp_path / "home" / "mlflow.db.lock").exists()


def test_a_run_summary_of_a_home_without_an_mlflow_database_makes_none(tmp_path: Path) -> None:
    """The app's Compare page asks for an experiment's MLflow run: a home whose experiments ran ``--no-mlflow``
    has no database, so there is no run (and the question does not create the database)."""
    from furnace.adapters.mlflow_tracker import run_summary

    uri = f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}"
    assert run_summary(uri, "exp-none") is None
    assert not (tmp_path / "home").exists()
