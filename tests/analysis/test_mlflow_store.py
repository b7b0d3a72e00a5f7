"""Two processes setting up a new home's mlflow.db at once both succeed (furnace.adapters.mlflow_store)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

# Imports first (seconds), then for each new home's URI waits for "go" on stdin, so both processes open the
# new store together (a second home in the same processes: the race again, without importing again).
CHILD = """
import sys
from furnace.adapters.mlflow_tracker import MLflowTracker
from furnace.adapters.mlflow_prompts import client_for
print("ready", flush=True)
for uri in sys.argv[1:]:
    sys.stdin.readline()
    tracker = MLflowTracker(uri)
    client_for(uri).search_prompts(max_results=1)
    print("experiment", tracker.mlflow_experiment_id, flush=True)
"""


def _first_setups(homes: list[Path], logs: Path) -> list[list[str]]:
    """Two processes set up each of ``homes`` in turn, both at once; per home, the line each printed. Their
    stderr goes to files in ``logs`` (a pipe nobody reads until the end could fill up and block a child)."""
    uris = [f"sqlite:///{home / 'mlflow.db'}" for home in homes]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    errs = [logs / f"child-{n}.err" for n in range(2)]
    procs = []
    for err in errs:
        with err.open("w") as handle:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", CHILD, *uris],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=handle,
                    text=True,
                    cwd=REPO,
                    env=env,
                )
            )

    def stderr() -> str:
        return "\n".join(err.read_text()[-2000:] for err in errs)

    lines: list[list[str]] = []
    try:
        for proc in procs:  # both imported and waiting
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", stderr()
        for _ in homes:
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            lines.append([proc.stdout.readline().strip() for proc in procs if proc.stdout is not None])
            assert all(line.startswith("experiment ") for line in lines[-1]), stderr()
        for proc in procs:
            proc.communicate(timeout=300)
            assert proc.returncode == 0, stderr()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "duplicate column" not in stderr() and "already exists" not in stderr()
    return lines


@pytest.mark.slow
def test_two_concurrent_first_setups_both_succeed(tmp_path: Path) -> None:
    homes = [tmp_path / f"home-{attempt}" for attempt in range(2)]
    for home in homes:
        home.mkdir()
    for home, printed in zip(homes, _first_setups(homes, tmp_path), strict=True):
        assert len({line.split()[-1] for line in printed}) == 1  # one MLflow experiment, found by the second process
        assert (home / "mlflow.db.lock").exists()


def test_prepare_is_once_per_process_and_skips_servers(tmp_path: Path, _mlflow_template: Path) -> None:
    import shutil

    from furnace.adapters import mlflow_store

    assert mlflow_store.database_of("http://127.0.0.1:5000") is None
    mlflow_store.prepare("http://127.0.0.1:1")  # a server: no lock, nothing opened (port 1 is never asked)
    (tmp_path / "home").mkdir()
    # an initialised database (making its tables is the test above's; this one is about the lock)
    shutil.copyfile(_mlflow_template, tmp_path / "home" / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}"
    mlflow_store.prepare(uri)
    assert (tmp_path / "home" / "mlflow.db.lock").is_file()  # opened behind the lock
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


def test_a_home_that_never_tracked_is_known_without_importing_mlflow(tmp_path: Path) -> None:
    """The Compare page asks ``holds_runs`` before importing the tracker: a home run ``--no-mlflow`` costs no
    MLflow import (seconds of CPU) and no ``mlflow.db``."""
    probe = (
        "import sys; from furnace.adapters.mlflow_store import holds_runs; "
        "print(holds_runs(sys.argv[1]), holds_runs(sys.argv[2]), holds_runs('http://mlflow:5000'), "
        "'mlflow' in sys.modules)"
    )
    made = tmp_path / "made" / "mlflow.db"
    made.parent.mkdir()
    made.write_bytes(b"")
    never = tmp_path / "never" / "mlflow.db"
    out = subprocess.run(
        [sys.executable, "-c", probe, f"sqlite:///{made}", f"sqlite:///{never}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.stdout.split() == ["True", "False", "True", "False"], out.stderr[-2000:]
    assert not never.exists()
