"""Picks become HUMAN feedback assessments on both candidates' MLflow traces; an undo withdraws them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import seed_home
from tests.judges.helpers import furnace_traces, run

CONFIG = Path(__file__).parents[1] / "experiments" / "data" / "small.yaml"


def _human(home: Path) -> list[tuple[str, str, str, float, str | None, dict[str, str]]]:
    traces = furnace_traces(home)
    return [
        (
            t.info.tags.get("mlflow.traceName", ""),
            a.source.source_type,
            a.source.source_id,
            a.value,
            a.rationale,
            a.metadata,
        )
        for t in traces
        for a in t.info.assessments
        if a.name == "human_preference"
    ]


def test_picks_are_human_assessments_read_back_through_search_traces(
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mlflow_ready: str,
) -> None:
    seed_home(home)
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    config = tmp_path / "tiny.yaml"
    config.write_text(CONFIG.read_text().replace("generations: 3", "generations: 1").replace("limit: 2", "limit: 1"))
    code, out, err = run(capsys, "experiment", "run", str(config), "--json")
    assert code == 0, err
    experiment = json.loads(out)["experiment_id"]
    code, out, err = run(
        capsys, "pick", experiment, "--who", "ana", "--count", "2", "--seed", "2", stdin="a\nclearer\nt\n\n"
    )
    assert code == 0 and "MLflow: 4 human assessments" in out, err
    picks = json.loads(run(capsys, "experiment", "show", experiment, "--json")[1])["picks"]
    got = _human(home)
    assert len(got) == 4 and {g[1] for g in got} == {"HUMAN"} and {g[2] for g in got} == {"ana"}
    first = [g for g in got if g[5]["furnace.pick_id"] == picks[0]["pick_id"]]
    assert sorted((g[5]["shown_as"], g[3], g[4]) for g in first) == [("A", 1.0, "clearer"), ("B", 0.0, "clearer")]
    tie = [g for g in got if g[5]["furnace.pick_id"] == picks[1]["pick_id"]]
    assert [g[3] for g in tie] == [0.5, 0.5]
    code, _, err = run(capsys, "pick", experiment, "--who", "ana", "--undo")
    assert code == 0, err
    assert {g[5]["furnace.pick_id"] for g in _human(home)} == {picks[0]["pick_id"]}
    _calibration_logged(home, experiment, picks, undone=1)


def _calibration_logged(home: Path, experiment: str, picks: list[dict], *, undone: int) -> None:
    """The run carries what the picks not undone say of the judge, as furnace pick --report computes it,
    at the last pick event (each pick and each undo is one step)."""
    from mlflow import MlflowClient

    from furnace.adapters.mlflow_tracker import _TAG_ID
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings
    from furnace.views.picking import experiment_calibration, recorded_judge

    rt = Runtime(FurnaceSettings(home=home))
    exp = rt.results.get_experiment(experiment)
    assert exp is not None
    expected = experiment_calibration(
        rt.results.individuals(experiment), rt.picks.picks(experiment, include_undone=True), recorded_judge(exp)
    )
    assert expected.picks == len(picks) - undone and expected.undone == undone
    client = MlflowClient(tracking_uri=rt.settings.tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=f"tags.`{_TAG_ID}` = '{experiment}'")
    run = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    history = client.get_metric_history(run.info.run_id, "people_picks")
    steps = [m.step for m in sorted(history, key=lambda m: m.timestamp)]
    assert steps == sorted(set(steps)) and steps[-1] == len(picks) + undone  # one value per pick event logged
    assert history[-1].value == expected.picks
    judge = expected.judges[0]
    name = judge.judge.replace("+", "_")
    assert run.data.metrics[f"people_picks/{name}"] == judge.picks
    logged = json.loads(Path(client.download_artifacts(run.info.run_id, "calibration.json")).read_text())
    assert logged["picks"] == expected.picks and logged["judges"][0]["judge"] == judge.judge
