"""The Judge page: a blind pair, a pick stored with the ids revealed only after it, undo, the pairs an
experiment weighting ``human`` is waiting for, per-judge calibration and the self-judging warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import PEOPLE_EXPERIMENT, no_errors, run_experiment


@pytest.fixture(scope="module")
def experiment(app_home: Path) -> str:
    return run_experiment(app_home, "people.yaml", PEOPLE_EXPERIMENT)


def _picks(home: Path, experiment_id: str, *, include_undone: bool = False):
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    return Runtime(FurnaceSettings(home=home)).picks.picks(experiment_id, include_undone=include_undone)


def _judge_page(app, experiment_id: str):
    at = app.switch_page("screens/judge.py").run()
    no_errors(at)
    at.selectbox(key="judge_experiment").set_value(experiment_id).run()
    no_errors(at)
    return at


def _texts(at) -> str:
    return " ".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.subheader])


def test_a_pick_is_stored_blind_then_revealed_and_undone(app_unrun, app_home, experiment):
    at = _judge_page(app_unrun, experiment)
    waiting = [i.value for i in at.info if "pairs waiting" in i.value]
    assert waiting and waiting[0].startswith("**3 pairs waiting** of 3"), waiting  # asked after generation 0
    assert at.button(key="judge_a").disabled  # nobody named yet: no pick
    pair = at.session_state["judge_pair"]
    shown = _texts(at)
    assert pair.probe in shown and pair.a.agent_id not in shown and pair.b.agent_id not in shown  # blind
    assert [s.value for s in at.subheader][:2] == ["A", "B"]

    at.text_input(key="judge_who").input("ana").run()
    at.text_input(key="judge_reason").input("warmer and to the point").run()
    at.button(key="judge_b").click().run()
    no_errors(at)
    [stored] = _picks(app_home, experiment)
    assert (stored.probe, stored.agent_a, stored.agent_b) == (pair.probe, pair.a.agent_id, pair.b.agent_id)
    assert (stored.choice, stored.who, stored.reason) == ("B", "ana", "warmer and to the point")
    assert stored.order_seed == pair.order_seed
    revealed = [s.value for s in at.success if s.value.startswith("Stored")]
    assert revealed and pair.a.agent_id in revealed[0] and pair.b.agent_id in revealed[0]  # after the pick
    assert at.text_input(key="judge_reason").value == ""  # cleared for the next pair
    assert [i.value for i in at.info if "pairs waiting" in i.value][0].startswith("**2 pairs waiting**")
    following = at.session_state["judge_pair"]
    assert (following.probe, following.a.agent_id, following.b.agent_id) != (
        pair.probe,
        pair.a.agent_id,
        pair.b.agent_id,
    )

    at.button(key="judge_undo").click().run()
    no_errors(at)
    assert _picks(app_home, experiment) == []
    [kept] = _picks(app_home, experiment, include_undone=True)  # kept, marked undone
    assert kept.undone and kept.pick_id == stored.pick_id
    assert any(s.value.startswith(f"Undone: {stored.pick_id}") for s in at.success)
    assert [i.value for i in at.info if "pairs waiting" in i.value][0].startswith("**3 pairs waiting**")


def test_calibration_shows_each_judge_with_its_picks_and_says_when_not_yet_meaningful(app_unrun, app_home, experiment):
    at = _judge_page(app_unrun, experiment)
    at.text_input(key="judge_who").input("bo").run()
    for choice in ("judge_a", "judge_tie", "judge_a"):
        at.button(key=choice).click().run()
        no_errors(at)
    assert len(_picks(app_home, experiment)) == 3
    table = at.dataframe[0].value  # the judges; [1]: people's ranking
    [row] = table.to_dict("records")
    assert row["judge"] == "furnace-offline-rules-v1"
    assert row["decided picks"] == 2 and row["ties"] == 1
    assert row["meaningful"] == "not yet meaningful: fewer than 20 decided picks"
    low, high = (float(v) for v in row["95% interval"].split("–"))
    assert low <= row["agreement with people"] <= high
    assert "below 20 decided picks" in " ".join(c.value for c in at.caption)
    assert "People's ranking" in " ".join(m.value for m in at.markdown)


def test_the_self_judging_warning_shows_when_the_judge_is_the_agent_model(app_unrun, app_home, experiment):
    from furnace.evolution.records import ExperimentRecord
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    results = Runtime(FurnaceSettings(home=app_home)).results
    config = {"probes": {"set": "writing-en", "limit": 2}, "scorers": {"fidelity": 1.0}}
    results.start_experiment(ExperimentRecord("exp-graded-0000000001", "graded", config, 0, "openai/gpt-4o-mini"))
    at = _judge_page(app_unrun, "exp-graded-0000000001")
    assert any("grading itself" in w.value for w in at.warning)
    at = at.switch_page("screens/compare.py").run()  # the experiment in detail says it too
    at.selectbox(key="compare_experiment").set_value("exp-graded-0000000001").run()
    assert any("grading itself" in w.value for w in at.warning)
    assert not any("grading itself" in w.value for w in _judge_page(app_unrun, experiment).warning)  # rules judge: none
