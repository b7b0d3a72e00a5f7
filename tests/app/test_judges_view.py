"""The app's experiment view with a panel of two judges: how fitness reads them, their agreement in words
and each ranked agent's fitness by judge, computed from the stored per-judge score rows."""

from __future__ import annotations

import pytest

from .helpers import no_errors

A, B, C = "academic-editor", "data-science-mentor", "empathetic-coach"
J1, J2 = "judge-a", "judge-b"


def _record(agent: str, first: float, second: float, slot: int):
    from furnace.evolution.records import IndividualRecord, ScoreRow
    from furnace.scoring.panel import judge_scorer

    rows = (
        ScoreRow("p1", judge_scorer("fidelity", J1), first, "a"),
        ScoreRow("p1", judge_scorer("fidelity", J2), second, "b"),
        ScoreRow("p1", "fidelity", (first + second) / 2, "mean of 2 judges"),
        ScoreRow("p1", "constraints", 1.0, "ok"),
    )
    fitness = 0.5 * (first + second) / 2 + 0.5
    objectives = {"fidelity": (first + second) / 2, "constraints": 1.0}
    return IndividualRecord("exp-judges", 0, agent, slot, "seed", (), None, {}, "p", fitness, objectives, scores=rows)


def test_the_experiment_view_shows_the_judges_agreement_and_fitness_by_judge(app, app_home):
    from furnace.evolution.judging import panel_agreement
    from furnace.evolution.records import ExperimentRecord, GenerationRecord
    from furnace.runtime import Runtime
    from furnace.scoring.panel import Panel
    from furnace.settings import FurnaceSettings

    results = Runtime(FurnaceSettings(home=app_home)).results
    scorers = {"fidelity": 0.5, "constraints": 0.5}
    config = {"name": "judges", "scorers": scorers, "judges": [J1, J2]}
    results.start_experiment(ExperimentRecord("exp-judges", "judges", config, 1, "offline"))
    records = [_record(A, 0.9, 0.8, 0), _record(B, 0.5, 0.7, 1), _record(C, 0.2, 0.1, 2)]
    for r in records:
        results.save_individual(r)
    results.save_generation(GenerationRecord("exp-judges", 0, (A, B, C), 0.925, 0.7, {}))
    agreement = panel_agreement(records, scorers, Panel((J1, J2)))
    results.finish_experiment("exp-judges", "finished", {"best_fitness": 0.925, "judges": agreement})

    at = app.switch_page("screens/compare.py").run()
    at.selectbox(key="compare_experiment").set_value("exp-judges").run()
    no_errors(at)
    assert any(f"**Judges**: {J1}, {J2} (fitness: mean of 2 judges)" in m.value for m in at.markdown)
    captions = [c.value for c in at.caption]
    assert agreement["readings"] and all(text in captions for text in agreement["readings"])
    table = next(d.value for d in at.dataframe if J1 in d.value.columns)
    by_agent = {row["agent_id"]: (row[J1], row[J2]) for row in table.to_dict("records")}
    # each judge's fitness: its own fidelity with the shared constraints, half and half
    assert by_agent[A] == pytest.approx((0.5 * 0.9 + 0.5, 0.5 * 0.8 + 0.5))
    assert by_agent[C] == pytest.approx((0.5 * 0.2 + 0.5, 0.5 * 0.1 + 0.5))
