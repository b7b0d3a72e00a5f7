"""The judges tests' CLI runner: the experiment tests' one, with typed input on stdin."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.experiments.test_cli import run as run_cli


def run(capsys: pytest.CaptureFixture[str], *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """Run ``furnace ARGS`` in-process (``stdin``: what the person types); (exit code, stdout, stderr)."""
    if stdin is None:
        return run_cli(capsys, *args)
    before, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        return run_cli(capsys, *args)
    finally:
        sys.stdin = before


def furnace_traces(home: Path) -> list[Any]:
    """Every trace of the home's MLflow experiment ``furnace-experiments`` (assessments, no spans)."""
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{home.resolve() / 'mlflow.db'}")
    found = mlflow.get_experiment_by_name("furnace-experiments")
    assert found is not None
    return list(mlflow.search_traces(locations=[found.experiment_id], return_type="list", include_spans=False))
