"""``furnace ask`` states an agent's held-out test fitness beside its (validation) fitness: the test
fitness with its 95% interval, the train fitness and the train-test gap, read from the experiment's
stored ``held_out`` summary (the figures ``experiment show`` and the app show), and "not tested" where an
agent was not scored on the test probes — never 0. A forged held-out figure is refused like a forged fitness."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from furnace.assistant.answer import Assistant, AssistantState, Done
from furnace.llm.offline import OfflineEngine
from furnace.storage.duckdb.assist import DuckDBAssistData
from tests.app.helpers import run_experiment, small_demo
from tests.assistant.dataset import HELD_OUT, NOW
from tests.assistant.test_ask_cli import _run as _ask
from tests.conftest import seed_home


def _stored(row: dict[str, Any]) -> dict[str, Any]:
    """An agent's stored held-out figures under the names an answer uses (rounded as every face rounds)."""
    names = {"train": "train_fitness", "test": "test_fitness", "test_low": "test_low", "test_high": "test_high"}
    out = {name: round(row[key], 6) for key, name in names.items()}
    return {**out, "train_test_gap": round(row["gap"], 6)}


def _answer(data: DuckDBAssistData, question: str) -> Done:
    done = list(Assistant(data, OfflineEngine(), now=lambda: NOW).ask(question, AssistantState()))[-1]
    assert isinstance(done, Done) and done.result is not None, done
    return done


def test_the_best_agent_of_a_run_carries_its_stored_test_figures_and_a_forged_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    home = seed_home(tmp_path / "home")
    monkeypatch.setenv("FURNACE_HOME", str(home))
    exp = run_experiment(home, "tested.yaml", small_demo("tested", 3, generations=1))
    runtime = Runtime(FurnaceSettings(home=home))
    record = runtime.results.get_experiment(exp)
    runtime.close()
    assert record is not None
    held = record.summary["held_out"]
    assert held["agents"], "the run scored its members on the test probes"

    code, out, err = _ask(capsys, "ask", f"which agent is best in {exp}?", "--json")
    assert code == 0, err
    done = json.loads(out)[-1]
    rows = done["result"]["items"]
    best = rows[0]
    assert best["fitness"] == max(r["fitness"] for r in rows)
    assert best["agent_id"] in held["agents"]  # every generation's best and the leaderboard are tested
    figures = _stored(held["agents"][best["agent_id"]])
    assert {k: best[k] for k in figures} == figures
    assert best["test"] == f"{figures['test_fitness']:.3f} [{figures['test_low']:.3f}, {figures['test_high']:.3f}]"
    gap = figures["train_test_gap"] if round(figures["train_test_gap"], 3) else 0.0  # never -0.000
    assert best["test"] in done["lead"] and f"train − test gap {gap:+.3f}" in done["lead"]
    for row in rows:  # an agent the run did not score on test says so, with no figure
        if row["agent_id"] not in held["agents"]:
            assert row["test"] == "not tested" and row["test_fitness"] is None and row["train_test_gap"] is None

    code, out, err = _ask(capsys, "ask", "list the experiments", "--json")
    [row] = json.loads(out)[-1]["result"]["items"]
    assert row["champion"] == held["champion"]
    assert {k: row[k] for k in figures} == _stored(held["agents"][held["champion"]])

    forged = {
        **record.summary,
        "held_out": {**held, "agents": {a: {**r, "test": 0.999} for a, r in held["agents"].items()}},
    }
    runtime = Runtime(FurnaceSettings(home=home))  # the home's live store, written behind furnace's back
    runtime.sql.execute("UPDATE experiments SET summary = ?", [json.dumps(forged)])
    runtime.close()
    code, out, err = _ask(capsys, "ask", f"which agent is best in {exp}?")
    assert code == 1 and "0.999" not in out
    assert f"the summary of experiment {exp}" in err and "seal" in err


def test_best_agents_show_the_stored_test_figures_and_untested_agents_say_so(assist_data: DuckDBAssistData) -> None:
    tested = HELD_OUT["exp-tea"]["agents"]
    done = _answer(assist_data, "which agent is best in exp-tea?")
    columns = done.result.columns
    assert (
        columns.index("fitness")
        < columns.index("train_fitness")
        < columns.index("test")
        < columns.index("train_test_gap")
    )
    rows = {r["agent_id"]: r for r in done.result.items}
    for agent, row in rows.items():
        if agent in tested:
            assert {k: row[k] for k in _stored(tested[agent])} == _stored(tested[agent])
        else:  # not scored on test: said, never 0
            assert row["test"] == "not tested" and row["test_fitness"] is None and row["test_low"] is None
    assert any(a not in tested for a in rows) and any(a in tested for a in rows)
    best = done.result.items[0]
    assert f"the best is {best['agent_id']}" in done.lead and best["test"] in done.lead


def test_untested_agents_say_not_tested_in_chinese_too(assist_data: DuckDBAssistData) -> None:
    done = _answer(assist_data, "哪些智能体用了 ensemble？")
    [row] = done.result.items
    assert row["agent_id"] not in HELD_OUT["exp-tea"]["agents"]
    assert row["test"] == "未测试" and row["train_test_gap"] is None


def test_a_comparison_shows_each_agents_test_figures(assist_data: DuckDBAssistData) -> None:
    tested = HELD_OUT["exp-tea"]["agents"]
    done = _answer(assist_data, "compare agt-eee555 and agt-fff666")
    rows = {r["subject"]: r for r in done.result.items}
    assert {k: rows["agt-eee555"][k] for k in _stored(tested["agt-eee555"])} == _stored(tested["agt-eee555"])
    assert rows["agt-fff666"]["test"] == "not tested"
    assert rows["agt-eee555"]["test"] in done.lead


def test_experiments_show_their_champions_test_figures(assist_data: DuckDBAssistData) -> None:
    done = _answer(assist_data, "compare exp-tea and exp-night")
    rows = {r["experiment_id"]: r for r in done.result.items}
    champion = HELD_OUT["exp-tea"]["champion"]
    assert rows["exp-tea"]["champion"] == champion
    stored = _stored(HELD_OUT["exp-tea"]["agents"][champion])
    assert {k: rows["exp-tea"][k] for k in stored} == stored
    assert rows["exp-night"]["champion"] is None and rows["exp-night"]["test"] == "not tested"


def test_on_the_relational_store_a_finished_runs_figures_reach_the_snapshot_ask_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The assistant reads the relational store through its analysis snapshot: the run's finish (its status
    and held-out summary) asks for a fresh one, so the champion's test figures are there once the run ends."""
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    home = tmp_path / "home"
    monkeypatch.setenv("FURNACE_HOME", str(home))
    monkeypatch.setenv("FURNACE_DATABASE_URL", f"sqlite:///{tmp_path / 'furnace.sqlite'}")
    seed_home(home)
    exp = run_experiment(home, "tested.yaml", small_demo("tested", 5, generations=1))
    runtime = Runtime(FurnaceSettings(home=home))
    record = runtime.results.get_experiment(exp)
    runtime.close()
    assert record is not None and record.status == "finished"
    held = record.summary["held_out"]

    code, out, err = _ask(capsys, "ask", "list the experiments", "--json")
    assert code == 0, err
    [row] = json.loads(out)[-1]["result"]["items"]
    assert row["status"] == "finished" and row["champion"] == held["champion"]
    stored = _stored(held["agents"][held["champion"]])
    assert {k: row[k] for k in stored} == stored


@pytest.mark.parametrize(
    ("gap", "said"), [(-0.000424, "+0.000"), (0.0004, "+0.000"), (-0.0123, "-0.012"), (0.02, "+0.020")]
)
def test_a_gap_that_rounds_to_zero_is_never_said_as_minus_zero(gap: float, said: str) -> None:
    from furnace.assistant.leads import _tested

    row = {"test": "0.822 [0.822, 0.823]", "test_fitness": 0.822, "train_test_gap": gap}
    assert _tested(row, zh=False).endswith(f"train − test gap {said}")
    assert _tested(row, zh=True).endswith(f"训练−测试差 {said}")
