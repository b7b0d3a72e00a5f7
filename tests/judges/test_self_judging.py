"""The warning when a real agent model would grade itself, and the second offline judge as a judge."""

from __future__ import annotations

from pathlib import Path

import pytest

from furnace.llm.seam import OFFLINE_MODEL_NAME, OFFLINE_SECOND_JUDGE
from furnace.runtime import Runtime, build_llm, self_judging_warning
from furnace.settings import FurnaceSettings
from tests.conftest import seed_home
from tests.judges.helpers import run

CONFIG = Path(__file__).parents[1] / "experiments" / "data" / "small.yaml"


def test_warns_only_for_a_real_model_judging_itself() -> None:
    text = self_judging_warning("openai/gpt-x", None)
    assert text and "openai/gpt-x is grading itself" in text and "FURNACE_JUDGE_MODEL" in text
    assert self_judging_warning("openai/gpt-x", "openai/gpt-x") == text  # naming itself as judge is no help
    assert self_judging_warning("openai/gpt-x", "anthropic/claude-y") is None
    assert self_judging_warning(None, None) is None
    assert self_judging_warning(OFFLINE_MODEL_NAME, None) is None


def test_a_runtime_warns_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FURNACE_MODEL", "openai/stub")
    runtime = Runtime(FurnaceSettings())
    assert runtime.judge_warning() is not None
    assert runtime.judge_warning() is None
    monkeypatch.setenv("FURNACE_JUDGE_MODEL", "openai/other")
    assert Runtime(FurnaceSettings()).judge_warning() is None


def test_experiment_run_warns_before_anything_runs(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_home(home)
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    monkeypatch.setenv("FURNACE_MODEL", "openai/stub")
    monkeypatch.setenv("FURNACE_API_BASE", "http://127.0.0.1:9")  # never reached: the budget refuses first
    tight = tmp_path / "tight.yaml"
    tight.write_text(CONFIG.read_text().replace("max_calls: 500", "max_calls: 2"))
    code, _, err = run(capsys, "experiment", "run", str(tight), "--no-mlflow")
    assert code == 1 and "cannot cover the run's first unit" in err  # --yes would not help: no call is made
    assert err.count("openai/stub is grading itself") == 1
    monkeypatch.setenv("FURNACE_JUDGE_MODEL", OFFLINE_SECOND_JUDGE)
    code, _, err = run(capsys, "experiment", "run", str(tight), "--no-mlflow")
    assert code == 1 and "grading itself" not in err


def test_the_second_offline_judge_is_built_offline(settings: FurnaceSettings) -> None:
    llm = build_llm(settings.model_copy(update={"model": OFFLINE_SECOND_JUDGE}))
    assert llm.model_name == OFFLINE_SECOND_JUDGE and type(llm.inner).__name__ == "OfflineEngine"


def test_an_experiment_judged_by_the_second_offline_judge(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    seed_home(home)
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    monkeypatch.setenv("FURNACE_JUDGE_MODEL", OFFLINE_SECOND_JUDGE)
    code, out, err = run(capsys, "experiment", "run", str(CONFIG), "--no-mlflow", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["judge_model"] == OFFLINE_SECOND_JUDGE and "grading itself" not in err


def test_outside_a_flow_run_the_warning_goes_to_furnaces_log() -> None:
    import logging

    from furnace_flows.evolution import _log_warning

    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    # A handler of its own on the logger: whether Prefect's logging setup lets records reach the root
    # logger (and pytest's capture) depends on what ran before in this worker.
    logger = logging.getLogger("furnace_flows")
    keep = Keep(level=logging.WARNING)
    logger.addHandler(keep)
    try:
        _log_warning("warning: the agent model x is grading itself")
    finally:
        logger.removeHandler(keep)
    assert [(r.name, r.levelno, r.getMessage()) for r in seen] == [
        ("furnace_flows", logging.WARNING, "warning: the agent model x is grading itself")
    ]
