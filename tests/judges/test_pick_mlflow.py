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
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
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
