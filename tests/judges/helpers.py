"""The judges tests' CLI runner: the experiment tests' one, with typed input on stdin."""

from __future__ import annotations

import io
import sys

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
