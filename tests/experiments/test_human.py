"""The ``human`` objective: people's Bradley–Terry rating of picked agents, unpicked agents unscored (never
0), the engine asking for pairs between generations and waiting for picks on an injected clock."""

from __future__ import annotations

import pytest

from experiments.helpers import PureBreeder, library, scripted_llm
from furnace.domain.errors import InputError
from furnace.evolution.config import parse_config
from furnace.evolution.engine import Evolution
from furnace.evolution.human import (
    HUMAN,
    asked_pairs,
    human_ratings,
    latest_ask,
    pairs_waiting,
    wait_for_picks,
    with_human,
)
from furnace.evolution.pairs import BlindPair
from furnace.evolution.records import IndividualRecord, MemoryResults
from furnace.evolution.report import render_report
from furnace.llm.cache import CachedLLM, MemoryCallLedger, MemoryResponseCache
from furnace.scoring.picks import MemoryPicks, Pick, new_pick_id
from furnace.scoring.probes import load_probe_set

CONFIG = {
    "name": "h",
    "seed": 3,
    "population": 4,
    "generations": 2,
    "selection": {"tournament_size": 2, "elitism": 1},
    "probes": {"set": "writing-en", "limit": 4},
    "scorers": {"constraints": 0.3, "fidelity": 0.3, "brief_fit": 0.2, "human": 0.5},
    "samples_per_probe": 1,
    "reevaluate_top": 0,
    "human_pairs": 3,
    "concurrency": 2,
}


def _record(agent: str, objectives: dict[str, float], fitness: float, generation: int = 0) -> IndividualRecord:
    return IndividualRecord(
        experiment_id="exp",
        generation=generation,
        agent_id=agent,
        slot=0,
        operator="seed",
        parents=(),
        lineage_hash=None,
        elixir={},
        system_prompt="",
        fitness=fitness,
        objectives=objectives,
    )


def _pick(a: str, b: str, choice: str = "A", probe: str = "p", experiment: str = "exp") -> Pick:
    return Pick(new_pick_id(), experiment, probe, a, 0, b, 0, choice, "ana")  # type: ignore[arg-type]


# --- the objective ----------------------------------------------------------------------------------------


def test_a_picked_agent_gets_its_rating_and_the_fitness_is_renormalised_over_what_it_has() -> None:
    scorers = {"fidelity": 1.0, "tone": 1.0, HUMAN: 2.0}
    picked = with_human(_record("x", {"fidelity": 0.6, "tone": 0.4}, 0.5), {"x": 0.8}, scorers)
    assert picked.objectives[HUMAN] == 0.8
    assert picked.fitness == pytest.approx((0.6 + 0.4 + 2 * 0.8) / 4)


def test_an_unpicked_agent_is_unscored_for_human_never_zero() -> None:
    scorers = {"fidelity": 1.0, "tone": 1.0, HUMAN: 2.0}
    judges_only = _record("y", {"fidelity": 0.6, "tone": 0.4}, 0.5)
    kept = with_human(judges_only, {"x": 0.8}, scorers)
    assert HUMAN not in kept.objectives
    assert kept.fitness == 0.5  # the judges' objectives, their weights renormalised; a 0 would give 0.25
    # a rating withdrawn (the picks undone) goes, and the fitness is the judges' again
    rated = with_human(judges_only, {"y": 0.9}, scorers)
    assert rated.fitness != 0.5
    assert with_human(rated, {}, scorers).fitness == pytest.approx(0.5)
    assert HUMAN not in with_human(rated, {}, scorers).objectives


def test_ratings_come_from_the_picks_not_undone() -> None:
    picks = [_pick("a", "b"), _pick("a", "b"), _pick("b", "c", "tie")]
    ratings = human_ratings(picks)
    assert set(ratings) == {"a", "b", "c"} and ratings["a"] > ratings["b"]
    assert all(0 < v < 1 for v in ratings.values())
    undone = Pick(**{**_pick("d", "a").__dict__, "undone_at": picks[0].created_at or _now()})
    assert "d" not in human_ratings([*picks, undone])


def _now():
    from datetime import UTC, datetime

    return datetime.now(UTC)


def test_human_needs_another_objective_and_its_weight_changes_the_experiment_id() -> None:
    with pytest.raises(InputError, match="human needs another positive weight"):
        parse_config({**CONFIG, "scorers": {"human": 1.0}})
    with_human_id = parse_config(CONFIG).experiment_id("m")
    heavier = parse_config({**CONFIG, "scorers": {**CONFIG["scorers"], "human": 0.9}}).experiment_id("m")
    without = {k: v for k, v in CONFIG["scorers"].items() if k != HUMAN}
    plain = parse_config({**CONFIG, "scorers": without})
    assert len({with_human_id, heavier, plain.experiment_id("m")}) == 3
    # how long a run waits is not what it computes; the pairs asked count only when human is weighted
    assert parse_config({**CONFIG, "human_wait_s": 60}).experiment_id("m") == with_human_id
    assert parse_config({**CONFIG, "scorers": without, "human_pairs": 9}).experiment_id("m") == plain.experiment_id("m")
    assert parse_config({**CONFIG, "human_pairs": 9}).experiment_id("m") != with_human_id


# --- asking and waiting -----------------------------------------------------------------------------------


class FakeTime:
    """A clock that moves only when the run sleeps; ``on_sleep`` plays the people picking meanwhile."""

    def __init__(self, on_sleep=None) -> None:
        self.now = 100.0
        self.slept: list[float] = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep()


def _pairs() -> list[BlindPair]:
    a, b, c = (_record(x, {}, 0.5) for x in "abc")
    return [BlindPair("p", a, b, 1), BlindPair("q", c, a, 1)]


def test_waiting_ends_at_the_timeout_when_nobody_picks() -> None:
    time = FakeTime()
    picks = wait_for_picks(list, _pairs(), timeout_s=9, clock=time.clock, sleep=time.sleep, poll_s=2)
    assert picks == [] and sum(time.slept) == 9 and time.slept[-1] == 1


def test_waiting_ends_when_every_asked_pair_is_picked_either_order() -> None:
    made: list[Pick] = []
    time = FakeTime(lambda: made.append(_pick("b", "a") if not made else _pick("a", "c", "B", probe="q")))
    picks = wait_for_picks(lambda: list(made), _pairs(), timeout_s=600, clock=time.clock, sleep=time.sleep, poll_s=5)
    assert len(picks) == 2 and time.slept == [5, 5]
    assert pairs_waiting(_pairs(), picks[:1]) == _pairs()[1:]


def test_timeout_zero_reads_once_and_never_sleeps() -> None:
    time = FakeTime()
    wait_for_picks(list, _pairs(), timeout_s=0, clock=time.clock, sleep=time.sleep)
    assert time.slept == []


def _evolution(picks, time: FakeTime, **config):
    cfg = parse_config({**CONFIG, **config})
    seeds = library()
    probes = load_probe_set(cfg.probes.set).head(cfg.probes.limit)
    llm = CachedLLM(scripted_llm(), MemoryResponseCache(), MemoryCallLedger())
    results = MemoryResults()
    evo = Evolution(
        cfg, probes, seeds, llm, PureBreeder(seeds), results, picks=picks, clock=time.clock, sleep=time.sleep
    )
    return evo, results


def test_the_run_waits_for_picks_between_generations_then_proceeds() -> None:
    picks = MemoryPicks()
    holder: dict[str, Evolution] = {}

    def person() -> None:  # picks every waiting pair, always for the agent first by id
        evo = holder["evo"]
        ask = latest_ask(  # what the Judge page shows: the pairs asked after the latest generation, waiting
            evo.config.model_dump(mode="json"),
            evo.results.individuals(evo.experiment_id),
            evo.results.generations(evo.experiment_id),
            picks.picks(evo.experiment_id),
            [p.id for p in evo.search_probes.probes],
        )
        if ask is not None:
            for pair in ask.waiting:
                choice = "A" if pair.a.agent_id < pair.b.agent_id else "B"
                a, b = pair.a, pair.b
                picks.add(
                    Pick(
                        new_pick_id(),
                        evo.experiment_id,
                        pair.probe,
                        a.agent_id,
                        a.generation,
                        b.agent_id,
                        b.generation,
                        choice,
                        "ana",
                        order_seed=pair.order_seed,
                    )
                )

    time = FakeTime(person)
    evo, results = _evolution(picks, time, human_wait_s=300)
    holder["evo"] = evo
    report = evo.run()
    # asked after generations 0 and 1 (not after the last), answered during the first wait each time
    assert [a["generation"] for a in report.human["asks"]] == [0, 1]
    assert all(a["asked"] == 3 and a["waiting"] == 0 for a in report.human["asks"])
    assert len(time.slept) == 2 and sum(time.slept) < 300
    made = picks.picks(evo.experiment_id)
    assert report.human["picks"] == len(made) == 6
    assert report.human["ratings"] == human_ratings(made)
    rated = report.human["ratings"]
    for row in report.leaderboard:  # people's score beside the judges'; unpicked agents have none (not 0)
        assert row["human"] == rated.get(row["agent_id"])
        assert HUMAN not in row["objectives"]
    assert any(row["human"] is None for row in report.leaderboard)
    text = render_report(report)
    assert "people" in text and "unpicked" in text and "0 of 3 pairs waiting" in text


def test_without_picks_the_run_waits_out_its_timeout_and_proceeds_on_the_judges() -> None:
    time = FakeTime()
    evo, results = _evolution(MemoryPicks(), time, human_wait_s=30)
    notices: list[str] = []
    evo.progress = lambda p: notices.append(p.message) if p.message else None
    report = evo.run()
    assert notices == [f"3 pairs waiting for people's picks in {evo.experiment_id} (up to 30 s): the app's Judge "
                       f"page, or furnace pick {evo.experiment_id}"] * 2  # fmt: skip
    assert report.status == "finished" and len(results.generations(report.experiment_id)) == 3
    assert sum(time.slept) == pytest.approx(60)  # 30 s after each of generations 0 and 1
    assert [a["waiting"] for a in report.human["asks"]] == [3, 3]
    assert report.human["ratings"] == {} and all(row["human"] is None for row in report.leaderboard)
    # the pairs waiting, as the app computes them from the stored records, are the engine's
    ask = latest_ask(
        evo.config.model_dump(mode="json"),
        results.individuals(report.experiment_id),
        results.generations(report.experiment_id),
        [],
        [p.id for p in evo.search_probes.probes],
    )
    assert ask is not None and ask.generation == 1 and len(ask.waiting) == 3
    population = [r for r in results.individuals(report.experiment_id) if r.generation <= 1]
    assert {(p.probe, p.a.agent_id, p.b.agent_id) for p in ask.asked} <= {
        (probe, x.agent_id, y.agent_id)
        for probe in [p.id for p in evo.search_probes.probes]
        for x in population
        for y in population
    }


def test_with_timeout_zero_the_run_never_sleeps_and_ends_like_a_run_without_a_person() -> None:
    time = FakeTime()
    evo, _ = _evolution(MemoryPicks(), time)
    first = evo.run()
    assert time.slept == []
    again, _ = _evolution(MemoryPicks(), FakeTime())
    assert again.run().result_signature() == first.result_signature()


def test_asked_pairs_are_drawn_from_the_population_seeded_by_generation() -> None:
    population = [_record(x, {}, 0.5) for x in "abcd"]
    one = asked_pairs(population, ["p", "q"], count=3, seed=1, generation=0)
    assert one == asked_pairs(list(reversed(population)), ["q", "p"], count=3, seed=1, generation=0)
    orders = {
        tuple((p.probe, p.a.agent_id) for p in asked_pairs(population, ["p", "q"], count=3, seed=1, generation=g))
        for g in range(6)
    }
    assert len(orders) > 1


def test_the_progress_bar_prints_a_notice_on_a_line_of_its_own(capsys) -> None:
    from furnace.evolution.engine import Progress
    from furnace.evolution.progress import ProgressBar

    bar = ProgressBar(interactive=False)
    bar(Progress(1, 2, 0, 0, 0.5, message="3 pairs waiting for people's picks"))
    bar(Progress(1, 2, 2, 2, 0.5))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "3 pairs waiting for people's picks" and lines[1].startswith("generation 1/2")


def test_peoples_taste_steers_the_search() -> None:
    """People who always prefer the seed the judges rank last: with ``human`` weighted heavily, the next
    generation's best is that seed; without their picks it is the judges' best."""
    config = {"scorers": {"constraints": 0.3, "fidelity": 0.3, "brief_fit": 0.2, "human": 4.0}}
    plain, plain_results = _evolution(MemoryPicks(), FakeTime(), **config)
    plain.run()
    seeds = [r for r in plain_results.individuals(plain.experiment_id) if r.generation == 0]
    favourite = min(seeds, key=lambda r: (r.fitness, r.agent_id)).agent_id
    best_plain = next(g for g in plain_results.generations(plain.experiment_id) if g.generation == 1).survivors[0]
    assert best_plain != favourite

    picks = MemoryPicks()
    steered, results = _evolution(picks, FakeTime(), **config)
    assert steered.experiment_id == plain.experiment_id  # picks change what it does, not what it is
    for other in sorted(r.agent_id for r in seeds if r.agent_id != favourite):
        for probe in [p.id for p in steered.search_probes.probes][:2]:
            picks.add(Pick(new_pick_id(), steered.experiment_id, probe, other, 0, favourite, 0, "B", "ana"))
    report = steered.run()
    assert report.human["ratings"][favourite] == max(report.human["ratings"].values()) > 0.5
    best_steered = next(g for g in results.generations(steered.experiment_id) if g.generation == 1).survivors[0]
    assert best_steered == favourite
