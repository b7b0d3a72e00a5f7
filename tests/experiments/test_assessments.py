"""An individual's assessments on its trace: a reflected child rejected on its minibatch has no score."""

from __future__ import annotations

from furnace.evolution.assessments import individual_assessments
from furnace.evolution.records import MINIBATCH, IndividualRecord, ScoreRow

SCORERS = {"fidelity": 0.5, "tone": 0.3, "constraints": 0.2}


def _reflected(won: bool) -> IndividualRecord:
    """A reflected child with its minibatch verdict; accepted, it was evaluated on validation (objectives and a
    fitness), rejected, it was not (the engine stores no objectives and a fitness of 0)."""
    verdict = ScoreRow("*", MINIBATCH, 1.0 if won else 0.0, "child 0.41 vs parent 0.55 on 2 train probes")
    train = (ScoreRow("t1", "fidelity", 0.4, "on the minibatch"), ScoreRow("t1", "tone", 0.42, "on the minibatch"))
    objectives = {"fidelity": 0.7, "tone": 0.6, "constraints": 1.0} if won else {}
    fitness = 0.73 if won else 0.0
    return IndividualRecord(
        "x", 1, "agt-c", 0, "reflect", ("agt-p",), None, {}, "", fitness, objectives, (*train, verdict)
    )


def test_a_rejected_reflected_child_has_no_fitness_and_no_objective_values() -> None:
    verdicts = {a.name: a for a in individual_assessments(_reflected(False), SCORERS, judge_model="judge")}
    assert set(verdicts) == {*SCORERS, "fitness"}
    for assessment in verdicts.values():  # an error saying why, never a 0
        assert assessment.value is None and "rejected on its minibatch" in (assessment.error or "")
    assert "child 0.41 vs parent 0.55" in (verdicts["fitness"].error or "")


def test_an_accepted_reflected_child_is_assessed_on_its_scores() -> None:
    record = _reflected(True)
    verdicts = {a.name: a for a in individual_assessments(record, SCORERS, judge_model="judge")}
    assert verdicts["fitness"].value == record.fitness and not verdicts["fitness"].error
    assert {n: verdicts[n].value for n in SCORERS} == record.objectives
