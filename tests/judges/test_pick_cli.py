"""`furnace pick`: blind pairs from an experiment, picks stored and undone, the judges' calibration."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from furnace.llm.seam import OFFLINE_SECOND_JUDGE
from tests.conftest import seed_home
from tests.judges.helpers import run

CONFIG = Path(__file__).parents[1] / "experiments" / "data" / "small.yaml"


@pytest.fixture()
def experiment(home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    seed_home(home)
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    code, out, err = run(capsys, "experiment", "run", str(CONFIG), "--no-mlflow", "--json")
    assert code == 0, err
    return str(json.loads(out)["experiment_id"])


def _calls(home: Path) -> int:
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    runtime = Runtime(FurnaceSettings(home=home))
    try:
        return int(runtime.sql.query("SELECT count(*) FROM llm_calls WHERE NOT cached")[0][0])
    finally:
        runtime.close()


def test_a_session_is_blind_stored_and_undone(
    experiment: str, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _calls(home)
    assert before > 0  # the run paid for its replies: the count below can show a new call
    code, out, err = run(
        capsys, "pick", experiment, "--who", "ana", "--count", "3", "--seed", "5", stdin="a\nwarmer\nt\n\nq\n"
    )
    assert code == 0, err
    assert _calls(home) == before  # the replies came from the response cache: no model call
    shown = out.split("stored pick-")
    assert len(shown) == 3  # two picks, then quit
    assert not re.search(r"agt-[0-9a-f]{20}", shown[0])  # no id before the first pick
    assert "A was agt-" in shown[1] and "2 picks stored for ana" in out

    code, out, _ = run(capsys, "experiment", "show", experiment, "--json")
    picks = json.loads(out)["picks"]
    assert [(p["choice"], p["who"], p["reason"], p["order_seed"]) for p in picks] == [
        ("A", "ana", "warmer", 5),
        ("tie", "ana", "", 5),
    ]
    code, out, _ = run(capsys, "pick", experiment, "--who", "ana", "--undo", "--json")
    assert code == 0 and json.loads(out)["undone"] == picks[1]["pick_id"]
    code, out, _ = run(capsys, "pick", experiment, "--report", "--json")
    report = json.loads(out)
    assert report["picks"] == 1 and report["undone"] == 1 and report["by_person"] == {"ana": 1}
    (judge,) = report["judges"]
    assert judge["picks"] + judge["unjudged"] == 1 and judge["meaningful"] is False
    assert "not yet meaningful" in judge["reading"]
    assert set(report["people"]) == {picks[0]["agent_a"], picks[0]["agent_b"]}  # only picked agents are rated
    code, out, _ = run(capsys, "experiment", "show", experiment, "--json")
    shown = json.loads(out)
    assert len(shown["picks"]) == 2 and shown["calibration"]["judges"] == report["judges"]  # exported with it


def _undo_hint(out: str, picks: int, who: str) -> list[str]:
    found = re.search(rf"{picks} picks stored for {who}; (furnace .+) takes the last one back", out)
    assert found, out
    return shlex.split(found.group(1))


def test_the_undo_hint_names_the_person_and_takes_their_last_pick_back(
    experiment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "pick", experiment, "--who", "ux", "--count", "3", "--seed", "3", stdin="a\nmore concise\nb\n\nq\n"
    )
    assert code == 0, err
    last = re.findall(r"stored (pick-\S+):", out)[-1]
    argv = _undo_hint(out, 2, "ux")
    assert argv == ["furnace", "pick", experiment, "--who", "ux", "--undo"]
    code, out, err = run(capsys, *argv[1:], "--json")
    assert code == 0, err
    assert json.loads(out)["undone"] == last


def test_the_undo_hint_keeps_the_home_and_is_left_out_when_nothing_was_picked(
    experiment: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("FURNACE_HOME")
    monkeypatch.chdir(tmp_path)  # the default home, ./data, does not exist here
    session = ("--home", str(home), "pick", experiment, "--who", "ux", "--count", "1", "--no-mlflow")
    code, out, err = run(capsys, *session, stdin="q\n")
    assert code == 0, err
    assert out.rstrip().endswith("0 picks stored for ux") and "--undo" not in out
    code, out, err = run(capsys, *session, stdin="a\n\n")
    assert code == 0, err
    argv = _undo_hint(out, 1, "ux")
    assert argv == ["furnace", "--home", str(home), "pick", experiment, "--who", "ux", "--undo", "--no-mlflow"]
    code, out, err = run(capsys, *argv[1:])
    assert code == 0 and out.startswith("undone: pick-"), err


def test_report_with_a_second_judge_and_clear_errors(experiment: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(capsys, "pick", experiment, "--who", "ana", "--count", "2", "--seed", "1", stdin="a\n\nb\n\n")
    assert code == 0
    code, out, err = run(capsys, "pick", experiment, "--report", "--judge", OFFLINE_SECOND_JUDGE)
    assert code == 0, err
    assert f"{OFFLINE_SECOND_JUDGE} agrees with people on" in out and "2 picks by 1 person" in out
    code, _, err = run(capsys, "pick", "exp-none", "--report")
    assert code == 1 and "no experiment 'exp-none'" in err
    code, _, err = run(capsys, "pick", experiment, "--judge", OFFLINE_SECOND_JUDGE)
    assert code == 1 and "--judge goes with --report" in err
    code, _, err = run(capsys, "pick", experiment, "--who", "nobody", "--undo")
    assert code == 1 and "no pick to undo" in err


def test_a_probe_set_beside_the_experiment_file(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from furnace import resources

    seed_home(home)
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    (tmp_path / "probes").mkdir()
    (tmp_path / "experiments").mkdir()
    shipped = resources.PROBES_DIR / "writing-en.yaml"
    (tmp_path / "probes" / "my-probes.yaml").write_text(shipped.read_text())
    config = tmp_path / "experiments" / "mine.yaml"
    text = CONFIG.read_text().replace("set: writing-en", "set: my-probes").replace("generations: 3", "generations: 1")
    config.write_text(text)
    code, out, err = run(capsys, "experiment", "run", str(config), "--no-mlflow", "--json")
    assert code == 0, err
    experiment = json.loads(out)["experiment_id"]
    code, _, err = run(capsys, "pick", experiment, "--who", "ana", "--count", "1", stdin="a\n\n")
    assert code == 1 and "probe set 'my-probes' not found" in err
    code, out, err = run(
        capsys,
        "pick",
        experiment,
        "--who",
        "ana",
        "--count",
        "1",
        "--probes-dir",
        str(tmp_path / "probes"),
        stdin="a\n\n",
    )
    assert code == 0 and "1 picks stored for ana" in out, err


def test_a_run_weighting_human_asks_for_pairs_and_picks_in_the_terminal_answer_them(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.app.helpers import PEOPLE_EXPERIMENT

    seed_home(home)
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    config = home / "people.yaml"
    config.write_text(PEOPLE_EXPERIMENT)
    code, out, err = run(capsys, "experiment", "run", str(config), "--no-mlflow", "--json")
    assert code == 0, err
    report = json.loads(out)
    experiment = report["experiment_id"]
    assert f"3 pairs waiting for people's picks in {experiment} (human_wait_s 0" in err  # asked, never waited
    assert report["human"]["asks"] == [{"generation": 0, "asked": 3, "waiting": 3}]
    assert report["human"]["ratings"] == {} and all(row["human"] is None for row in report["leaderboard"])
    # the terminal shows the waiting pairs first: three picks answer them
    code, out, err = run(capsys, "pick", experiment, "--who", "ana", "--count", "3", "--seed", "2", stdin="a\n\n" * 3)
    assert code == 0, err
    code, out, err = run(capsys, "experiment", "run", str(config), "--no-mlflow", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["experiment_id"] == experiment and "pairs waiting" not in err
    assert again["human"]["asks"] == [{"generation": 0, "asked": 3, "waiting": 0}] and again["human"]["picks"] == 3
    rated = {row["agent_id"]: row["human"] for row in again["leaderboard"] if row["human"] is not None}
    assert rated and rated == {a: v for a, v in again["human"]["ratings"].items() if a in rated}
