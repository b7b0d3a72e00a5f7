"""Which pairs people are shown, and what their picks say about a judge (synthetic records)."""

from __future__ import annotations

import random
from dataclasses import replace

from furnace.evolution.records import MINIBATCH, IndividualRecord, ScoreRow
from furnace.scoring.picks import Pick, new_pick_id
from furnace.views.picking import calibrate, judge_table, next_pairs, recent


def _record(agent: str, generation: int, scores: dict[str, float], *, failures: int = 0) -> IndividualRecord:
    rows = tuple(ScoreRow(probe, "fidelity", value, "r") for probe, value in scores.items())
    rows += tuple(ScoreRow(probe, "constraints", 1.0, "r") for probe in scores)  # a rule: not the judge's
    return IndividualRecord(
        "exp", generation, agent, 0, "seed", (), None, {}, "", sum(scores.values()) / len(scores), {}, rows, failures
    )


def test_recent_keeps_scored_agents_of_the_last_generations_once() -> None:
    rejected = _record("rejected", 2, {"p": 0.6})  # a reflected child that lost on its minibatch
    rejected = replace(rejected, scores=(*rejected.scores, ScoreRow("*", MINIBATCH, 0.0, "child 0.6 vs parent 0.7")))
    records = [
        _record("old", 0, {"p": 0.1}),
        _record("kept", 1, {"p": 0.2}),
        _record("kept", 2, {"p": 0.3}),
        _record("failed", 2, {"p": 0.9}, failures=1),
        rejected,
        _record("new", 2, {"p": 0.4}),
    ]
    got = recent(records, generations=2)
    assert [(r.agent_id, r.generation) for r in got] == [("kept", 2), ("new", 2)]
    assert judge_table(got)[("new", 2, "p")] == 0.4  # the judge scorers only


def test_pairs_prefer_unpicked_then_close_and_the_order_is_seeded() -> None:
    candidates = [_record("a", 1, {"p": 0.10}), _record("b", 1, {"p": 0.50}), _record("c", 1, {"p": 0.52})]
    pairs = next_pairs(candidates, [], ["p"], count=3, seed=4)
    assert {pairs[0].a.agent_id, pairs[0].b.agent_id} == {"b", "c"} and pairs[0].gap == 0.02
    assert [(p.a.agent_id, p.b.agent_id) for p in pairs] == [
        (p.a.agent_id, p.b.agent_id) for p in next_pairs(candidates, [], ["p"], count=3, seed=4)
    ]
    picked = [Pick(new_pick_id(), "exp", "p", "c", 1, "b", 1, "A", "ana")]
    after = next_pairs(candidates, picked, ["p"], count=1, seed=4)
    assert {after[0].a.agent_id, after[0].b.agent_id} != {"b", "c"}  # a pair not picked yet comes first
    orders = {next_pairs(candidates, [], ["p"], count=1, seed=s)[0].a.agent_id for s in range(20)}
    assert orders == {"b", "c"}  # either may be shown as A


def test_calibration_tells_a_judge_that_follows_people_from_one_that_does_not() -> None:
    rng = random.Random(3)
    quality = {f"agt-{i}": i / 10 for i in range(8)}
    good = {(a, 1, "p"): q + rng.uniform(-0.05, 0.05) for a, q in quality.items()}
    contrary = {k: 1 - v for k, v in good.items()}
    picks = []
    for _ in range(60):
        x, y = rng.sample(sorted(quality), 2)
        choice = "A" if quality[x] > quality[y] else "B"
        picks.append(Pick(new_pick_id(), "exp", "p", x, 1, y, 1, choice, rng.choice(["ana", "bo"])))  # type: ignore[arg-type]
    result = calibrate(picks, {"good": good, "contrary": contrary}, quality)
    by_name = {a.judge: a for a in result.judges}
    assert by_name["good"].share is not None and by_name["good"].share > 0.8 and by_name["good"].meaningful
    assert by_name["contrary"].share is not None and by_name["contrary"].share < 0.2
    assert (by_name["good"].interval or (0, 0))[0] > 0.5
    assert result.rank_agreement is not None and result.rank_agreement > 0.9  # people rank as quality does
    assert set(result.by_person) == {"ana", "bo"} and result.picks == 60
    assert result.judge_alpha is not None and result.judge_alpha < 0  # the two judges contradict each other
    assert "agrees with people" in "\n".join(result.lines())


def test_people_ranking_is_compared_with_scores_only() -> None:
    """A reflected child rejected on its minibatch, picked before such children left the pairs, has no score to
    rank against people's: its stored 0 would put it last and read as a disagreement."""
    from furnace.views.picking import experiment_calibration

    scored = [_record("a", 1, {"p": 0.8}), _record("b", 1, {"p": 0.6}), _record("c", 1, {"p": 0.4})]
    rejected = _record("r", 1, {"p": 0.9})
    rejected = replace(
        rejected, fitness=0.0, scores=(*rejected.scores, ScoreRow("*", MINIBATCH, 0.0, "child 0.5 vs parent 0.6"))
    )
    wins = [("r", "a"), ("r", "b"), ("r", "c"), ("a", "b"), ("a", "c"), ("b", "c")]  # people: r > a > b > c
    picks = [Pick(new_pick_id(), "exp", "p", w, 1, lose, 1, "A", "ana") for w, lose in wins]
    got = experiment_calibration([*scored, rejected], picks, "judge")
    assert got.rank_agreement == 1.0  # people and fitness agree on a > b > c; r has no fitness to rank
