"""Two offline judges through the faces: ``experiment run --json``, ``experiment show --json``, and one
MLflow assessment per judge (``source_id`` = the judge model) read back through ``mlflow.search_traces``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from furnace.evolution.judging import judge_rows
from furnace.llm.seam import OFFLINE_MODEL_NAME, OFFLINE_SECOND_JUDGE
from tests.conftest import seed_home
from tests.judges.helpers import furnace_traces, run

CONFIG = Path(__file__).parents[1] / "experiments" / "data" / "small.yaml"
JUDGES = f"judges: [{OFFLINE_MODEL_NAME}, {OFFLINE_SECOND_JUDGE}]\n"


def _assessments(home: Path) -> dict[str, list]:
    """trace name -> its assessments."""
    return {t.info.tags.get("mlflow.traceName", ""): list(t.info.assessments) for t in furnace_traces(home)}


def test_a_two_judge_run_reports_each_judge_and_logs_one_assessment_per_judge(
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mlflow_ready: str,
) -> None:
    seed_home(home)
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    config = tmp_path / "judges.yaml"
    config.write_text(
        CONFIG.read_text().replace("generations: 3", "generations: 1").replace("limit: 2", "limit: 3") + JUDGES
    )
    code, out, err = run(capsys, "experiment", "run", str(config), "--json")
    assert code == 0, err
    report = json.loads(out)
    judges = report["judges"]
    assert judges["judges"] == [OFFLINE_MODEL_NAME, OFFLINE_SECOND_JUDGE] and judges["fitness"] == "mean of 2 judges"
    assert judges["units"] > 0 and len(judges["readings"]) == 2
    assert all(set(row["judges"]) == set(judges["judges"]) for row in report["leaderboard"])
    top = report["leaderboard"][0]
    assert top["fitness"] == pytest.approx(sum(top["judges"].values()) / 2, abs=1e-5)

    # the test probes are judged by both judges too (held-out figures: test fitness is their mean)
    tested = [row for row in report["held_out"]["agents"].values() if row.get("test") is not None]
    assert tested and all(set(row["test_by_judge"]) == set(judges["judges"]) for row in tested)
    assert all(row["test"] == pytest.approx(sum(row["test_by_judge"].values()) / 2, abs=1e-5) for row in tested)

    code, out, err = run(capsys, "experiment", "show", report["experiment_id"])
    assert code == 0 and f"judges: {OFFLINE_MODEL_NAME}, {OFFLINE_SECOND_JUDGE}" in out, err
    shown = json.loads(run(capsys, "experiment", "show", report["experiment_id"], "--json")[1])
    assert shown["judges"]["alpha"] == judges["alpha"] and shown["judges"]["spearman"] == judges["spearman"]
    assert shown["leaderboard"][0]["judges"] == pytest.approx(top["judges"])

    import mlflow

    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    records = Runtime(FurnaceSettings(home=home)).results.individuals(report["experiment_id"])
    validation = report["held_out"]["splits"]["validation"]
    traces = _assessments(home)
    checked = 0
    for record in records:
        found = traces.get(f"individual g{record.generation} s{record.slot}")
        if found is None or not record.scored:
            continue
        fidelity = [a for a in found if a.name == "fidelity"]
        by_judge = {a.source.source_id: a for a in fidelity if a.source.source_type == "LLM_JUDGE"}
        assert set(by_judge) == {OFFLINE_MODEL_NAME, OFFLINE_SECOND_JUDGE}
        for judge, assessment in by_judge.items():
            mine = [
                r.value for r in judge_rows(record.scores, judge) if r.scorer == "fidelity" and r.probe in validation
            ]
            assert assessment.value == pytest.approx(sum(mine) / len(mine), abs=1e-6)
        (panel,) = [a for a in fidelity if a.source.source_type == "CODE"]
        assert (
            panel.value == pytest.approx(record.objectives["fidelity"]) and "furnace.judges" in panel.source.source_id
        )
        checked += 1
    assert checked >= 4
    # the agreement as run metrics
    from furnace.adapters.mlflow_tracker import run_summary

    summary = run_summary(FurnaceSettings(home=home).tracking_uri, report["experiment_id"])
    metrics = mlflow.MlflowClient().get_run(summary["run_id"]).data.metrics
    assert metrics["judges_alpha"] == pytest.approx(judges["alpha"])
    assert metrics["judges_spearman"] == pytest.approx(judges["spearman"])


@pytest.mark.parametrize(
    ("judges", "warned"),
    [(["openai/stub", OFFLINE_SECOND_JUDGE], True), ([OFFLINE_MODEL_NAME, OFFLINE_SECOND_JUDGE], False)],
)
def test_a_panel_with_the_agents_real_model_still_warns_it_grades_itself(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judges: list[str], warned: bool
) -> None:
    from furnace.evolution.config import load_config
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    seed_home(home)
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    monkeypatch.setenv("FURNACE_MODEL", "openai/stub")
    monkeypatch.setenv("FURNACE_JUDGE_MODEL", "openai/other")  # the panel wins over the setting
    path = tmp_path / "panel.yaml"
    path.write_text(CONFIG.read_text() + f"judges: [{', '.join(judges)}]\n")
    prepared = Runtime(FurnaceSettings()).prepare_experiment(load_config(path), track=False)
    assert (prepared.judge_warning is not None) == warned
    evo = prepared.evolution
    assert [j.model_name for j in evo.judges] == judges and evo.judge is None
    assert evo.llm.run_id == evo.experiment_id == evo.judges[1].run_id  # one ledger run: the runtime's id
