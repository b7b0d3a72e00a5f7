"""Two judges on one experiment (``judges: [a, b]``): each judge rubric scored by each judge, fitness
from their mean (or the named ``fitness_judge``), their agreement from the stored rows, the estimate
and the budget counting both, cache keys and experiment ids apart, one judge's failure a failure."""

from __future__ import annotations

from collections import Counter

import pytest

from furnace.domain.errors import FurnaceError, InputError, LLMRateLimit
from furnace.evolution.config import parse_config
from furnace.evolution.engine import Evolution
from furnace.evolution.estimate import calls_per_answer, estimate
from furnace.evolution.judging import judge_fitness, judge_rows, judge_scores
from furnace.evolution.records import MemoryResults
from furnace.llm.cache import CachedLLM, MemoryCallLedger, MemoryResponseCache
from furnace.llm.offline import OfflineEngine
from furnace.llm.routing import TaskRouter
from furnace.llm.seam import OFFLINE_MODEL_NAME, OFFLINE_SECOND_JUDGE, LLMRequest, TaskKind
from furnace.scoring.agreement import krippendorff_alpha, spearman
from furnace.scoring.judge import build_judge_request
from furnace.scoring.panel import judge_scorer, split_scorer
from furnace.scoring.probes import load_probe_set
from tests.experiments.helpers import PureBreeder, library, scripted_llm
from tests.experiments.test_evolution import CONFIG, Embed

FIRST, SECOND = "scripted", OFFLINE_SECOND_JUDGE


class Counting:
    """``inner`` counting the JUDGE calls it answers; ``fail_for``: every JUDGE call about that persona's
    answer raises a rate limit (a judge outage for one individual)."""

    def __init__(self, inner, fail_for: str | None = None) -> None:
        self.inner, self.model_name, self.fail_for = inner, inner.model_name, fail_for
        self.judged = 0

    def complete(self, request: LLMRequest):
        if request.task == TaskKind.JUDGE:
            self.judged += 1
            answer = str((request.inputs or {}).get("answer") or "")
            if self.fail_for is not None and answer.startswith(f"## {self.fail_for}\n"):
                raise LLMRateLimit("429 from the second judge")
        return self.inner.complete(request)


def panel_run(*, generations: int = 1, fail_for: str | None = None, **overrides):
    """A small experiment judged by the scripted judge and the second offline judge."""
    cfg = parse_config({**CONFIG, "generations": generations, "judges": [FIRST, SECOND], **overrides})
    seeds = library()
    llm = scripted_llm(FIRST)
    second = Counting(OfflineEngine(SECOND), fail_for=fail_for)
    evo = Evolution(
        cfg,
        load_probe_set(cfg.probes.set).head(cfg.probes.limit),
        seeds,
        llm,
        PureBreeder(seeds),
        MemoryResults(),
        Embed(),
        judges=[llm, second],
    )
    return evo, second


def test_each_judge_scores_each_rubric_and_fitness_is_their_mean() -> None:
    evo, second = panel_run()
    report = evo.run()
    assert report.status == "finished" and second.judged > 0
    records = [r for r in evo.results.individuals(report.experiment_id) if r.scored]
    assert records
    for record in records:
        rows = {(r.probe, r.scorer): r for r in record.scores}
        panel_rows = [r for r in record.scores if r.scorer == "fidelity"]
        assert panel_rows
        for row in panel_rows:
            a, b = (
                rows[(row.probe, judge_scorer("fidelity", FIRST))],
                rows[(row.probe, judge_scorer("fidelity", SECOND))],
            )
            assert not a.failed and not b.failed
            assert row.value == pytest.approx((a.value + b.value) / 2, abs=1e-6)
        by_judge = judge_fitness(record.scores, evo.config.scorers, [FIRST, SECOND], over=evo.validation_ids)
        assert record.fitness == pytest.approx((by_judge[FIRST] + by_judge[SECOND]) / 2, abs=1e-5)
    # the judges differ somewhere (else the panel would say nothing)
    assert any(
        r.value != s.value
        for rec in records
        for r in rec.scores
        for s in rec.scores
        if r.probe == s.probe
        and r.scorer == judge_scorer("fidelity", FIRST)
        and s.scorer == judge_scorer("fidelity", SECOND)
    )
    top = report.leaderboard[0]
    assert set(top["judges"]) == {FIRST, SECOND}


def test_a_fitness_judge_makes_fitness_that_judges_alone() -> None:
    evo, _ = panel_run(fitness_judge=SECOND)
    report = evo.run()
    records = [r for r in evo.results.individuals(report.experiment_id) if r.scored]
    assert records and report.judges["fitness_judge"] == SECOND
    for record in records:
        by_judge = judge_fitness(record.scores, evo.config.scorers, [FIRST, SECOND], over=evo.validation_ids)
        assert record.fitness == pytest.approx(by_judge[SECOND], abs=1e-5)
        assert record.objectives["fidelity"] == pytest.approx(
            judge_scores(record.scores, {"fidelity": 1.0}, [SECOND], over=evo.validation_ids)[SECOND], abs=1e-6
        )


def test_the_agreement_is_agreement_py_on_the_stored_per_judge_scores() -> None:
    evo, _ = panel_run()
    report = evo.run()
    everyone = {}
    for r in evo.results.individuals(report.experiment_id):
        everyone.setdefault(r.agent_id, r)
    # by hand from the stored rows: each judge's fidelity over validation, and its (agent, probe) values
    own: dict[str, dict[str, float]] = {FIRST: {}, SECOND: {}}
    units: dict[tuple[str, str], dict[str, float]] = {}
    for agent, record in everyone.items():
        for row in record.scores:
            scorer, judge = split_scorer(row.scorer)
            if judge is None or row.failed:
                continue
            units.setdefault((agent, row.probe), {})[judge] = row.value  # one judge rubric: its mean is itself
        for judge in (FIRST, SECOND):
            values = [
                r.value
                for r in judge_rows(record.scores, judge)
                if r.scorer == "fidelity" and r.probe in evo.validation_ids
            ]
            own[judge][agent] = sum(values) / len(values)
    rho = spearman(own[FIRST], own[SECOND])
    alpha = krippendorff_alpha(units)
    assert rho is not None and alpha is not None
    assert report.judges["spearman"] == pytest.approx(rho, abs=1e-6)
    assert report.judges["alpha"] == pytest.approx(alpha, abs=1e-6)
    assert report.judges["units"] == len(units)
    assert any("Spearman" in t for t in report.judges["readings"])
    assert any("alpha" in t for t in report.judges["readings"])
    assert report.summary()["judges"] == report.judges  # what experiment show and the app read


def test_the_estimate_and_the_budget_count_both_judges() -> None:
    one = parse_config({**CONFIG, "scorers": {"fidelity": 0.5, "tone": 0.5}})
    two = parse_config({**CONFIG, "scorers": {"fidelity": 0.5, "tone": 0.5}, "judges": [FIRST, SECOND]})
    assert calls_per_answer(one) == 1 + 2 and calls_per_answer(two) == 1 + 2 * 2
    assert estimate(two, 6).calls > estimate(one, 6).calls
    # the budget's meter sees the second judge's calls: a run stops at max_calls with them counted
    evo, second = panel_run(budget={"max_calls": 40})
    first = Counter()
    inner = evo.llm

    class Tally:
        model_name = inner.model_name

        def complete(self, request):
            first[request.task] += 1
            return inner.complete(request)

    evo.metered.inner.named[FIRST] = evo.metered.inner.default = Tally()
    report = evo.run()
    # each unit reserves both judges' calls before it starts (one judge's would let it pass its reservation)
    assert report.status.startswith("stopped: budget.max_calls 40 reached (the next unit may make")
    assert second.judged > 0
    assert evo.metered.meter.calls == sum(first.values()) + second.judged <= 40


def test_cache_keys_differ_by_judge() -> None:
    elixir = library()[0]
    request = build_judge_request(elixir, "hello", "## answer", "fidelity", seed=1)
    ledger, cache = MemoryCallLedger(), MemoryResponseCache()
    first = CachedLLM(OfflineEngine(OFFLINE_MODEL_NAME), cache, ledger)
    second = CachedLLM(OfflineEngine(SECOND), cache, ledger)
    router = TaskRouter(first, {TaskKind.JUDGE: first}, {OFFLINE_MODEL_NAME: first, SECOND: second})
    a = router.complete(request.model_copy(update={"route": OFFLINE_MODEL_NAME}))
    b = router.complete(request.model_copy(update={"route": SECOND}))
    keys = [c.cache_key for c in ledger.calls()]
    assert len(keys) == 2 and keys[0] != keys[1]  # the second judge is never served the first's verdict
    assert not a.cached and not b.cached and a.model != b.model
    again = router.complete(request.model_copy(update={"route": SECOND}))
    assert again.cached and again.text == b.text
    with pytest.raises(FurnaceError, match="no model 'other'"):
        router.complete(request.model_copy(update={"route": "other"}))


def test_the_experiment_id_changes_with_the_judges() -> None:
    base = {"name": "ids"}
    ids = {
        parse_config(base).experiment_id("m"),
        parse_config({**base, "judges": ["a", "b"]}).experiment_id("m"),
        parse_config({**base, "judges": ["a", "c"]}).experiment_id("m"),
        parse_config({**base, "judges": ["a", "b"], "fitness_judge": "a"}).experiment_id("m"),
    }
    assert len(ids) == 4
    alias = parse_config({**base, "judge_models": ["a", "b"]})
    assert alias.judges == ("a", "b") and alias.experiment_id("m") == parse_config(
        {**base, "judges": ["a", "b"]}
    ).experiment_id("m")
    assert parse_config({**base, "judges": ["a"]}).judge_model == "a"  # one judge is judge_model


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"judges": ["a", "a"]}, "twice"),
        ({"judges": ["a", "b"], "judge_model": "c"}, "not both"),
        ({"judges": ["a", "b"], "fitness_judge": "z"}, "must be one of the judges"),
        ({"fitness_judge": "z"}, "must be one of the judges"),
        ({"judges": ["a"], "fitness_judge": "a"}, "two or more judges"),
        ({"judges": ["a", "b"], "judge_models": ["a", "b"]}, "give one"),
    ],
)
def test_bad_judges_are_refused_naming_why(fields, message) -> None:
    with pytest.raises(InputError, match=message) as refused:
        parse_config({"name": "bad", **fields}, source="bad.yaml")
    assert str(refused.value).startswith("bad.yaml: ") and "elixir" not in str(refused.value)  # an experiment's file


def test_one_judge_failing_is_a_failure_never_a_score() -> None:
    outage = library()[1].name
    evo, _ = panel_run(generations=0, fail_for=outage)
    report = evo.run()
    hit = [r for r in evo.results.individuals(report.experiment_id) if r.elixir["name"] == outage]
    assert hit and not hit[0].scored
    record = hit[0]
    failed = [r for r in record.scores if r.failed]
    assert {r.scorer for r in failed} == {"fidelity", judge_scorer("fidelity", SECOND)}
    assert all(r.value == 0 and "429" in r.reason for r in failed)
    assert all(not r.failed for r in record.scores if r.scorer == judge_scorer("fidelity", FIRST))
    assert "fidelity" not in record.objectives and record.unscored == ("fidelity",)
    assert any(u["agent_id"] == record.agent_id for u in report.unscored)
    assert all(row["agent_id"] != record.agent_id for row in report.leaderboard)


def test_a_panel_without_its_models_is_refused() -> None:
    cfg = parse_config({**CONFIG, "judges": [FIRST, SECOND]})
    seeds = library()
    with pytest.raises(FurnaceError, match="give their models"):
        Evolution(
            cfg, load_probe_set("writing-en").head(2), seeds, scripted_llm(FIRST), PureBreeder(seeds), MemoryResults()
        )
    with pytest.raises(FurnaceError, match="not the config's"):
        Evolution(
            cfg,
            load_probe_set("writing-en").head(2),
            seeds,
            scripted_llm(FIRST),
            PureBreeder(seeds),
            MemoryResults(),
            judges=[scripted_llm(FIRST), OfflineEngine()],
        )


def test_budget_exceeded_is_not_swallowed_by_a_judge() -> None:
    """A budget stop inside one judge's call stops the run (it is not one judge's failure)."""
    evo, _ = panel_run(generations=0, budget={"max_calls": 5})
    report = evo.run()
    assert "budget" in report.status
    assert not any("budget" in r.reason for rec in evo.results.individuals(report.experiment_id) for r in rec.scores)


def _second() -> OfflineEngine:
    return OfflineEngine(SECOND)


def test_isolated_units_judge_with_the_whole_panel_like_a_local_run() -> None:
    """What a Dask worker does (``run_job`` on the pickled world): the panel's judges travel as factories
    and the records equal a local run's, per-judge rows included."""
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    from furnace.evolution.isolated import IsolatedUnitRunner, Sink, build_world, run_job
    from furnace.evolution.local import memory_evolution
    from furnace.evolution.units import ThreadUnitRunner
    from furnace.fusion.embedding import HashEmbedder
    from tests.experiments.test_isolated import CONFIG as ISOLATED

    cfg = parse_config({**ISOLATED, "generations": 1, "judges": [OFFLINE_MODEL_NAME, SECOND]})
    seeds = [e for e in library() if e.language == "en"]

    def evolution() -> Evolution:
        llm = CachedLLM(OfflineEngine())
        return memory_evolution(cfg, seeds, llm=llm, judges=[llm, CachedLLM(_second(), llm.cache, llm.ledger)])

    def rows(evo: Evolution, experiment_id: str) -> list[tuple]:
        return sorted(
            (r.generation, r.slot, r.agent_id, r.fitness, tuple(sorted((s.probe, s.scorer, s.value) for s in r.scores)))
            for r in evo.results.individuals(experiment_id)
        )

    local = evolution()
    local.unit_runner = ThreadUnitRunner(1)
    expected = local.run()
    evo = evolution()
    world = pickle.loads(
        pickle.dumps(build_world(evo, model=OfflineEngine, judges=[OfflineEngine, _second], embedder=HashEmbedder))
    )
    sink = Sink(evo, evo.breeder.store, evo.llm.cache, evo.llm.ledger, evo.breeder.cache.kv)
    with ThreadPoolExecutor(1) as pool:
        evo.unit_runner = IsolatedUnitRunner(lambda job, order: pool.submit(run_job, world, job), sink)
        report = evo.run()
    assert report.experiment_id == expected.experiment_id
    assert rows(evo, report.experiment_id) == rows(local, expected.experiment_id)
    assert any(
        split_scorer(s.scorer)[1] == SECOND for r in evo.results.individuals(report.experiment_id) for s in r.scores
    )
    assert report.judges == expected.judges


def test_picks_calibrate_each_judge_of_the_panel() -> None:
    """``furnace pick --report`` and ``experiment show``: each judge of a panel against people's picks."""
    from furnace.scoring.picks import Pick
    from furnace.views.picking import experiment_calibration, judge_table, panel_tables

    evo, _ = panel_run(generations=0)
    report = evo.run()
    records = evo.results.individuals(report.experiment_id)
    tables = panel_tables(records)
    assert set(tables) == {FIRST, SECOND}
    first = tables[FIRST]
    probe = evo.validation_ids[0]
    scored = sorted((first[(r.agent_id, r.generation, probe)], r.agent_id) for r in records if r.scored)
    (low, a), (high, b) = scored[0], scored[-1]
    assert low < high
    # a person who always sides with the first judge
    picks = [Pick(f"pick-{i}", report.experiment_id, probe, a, 0, b, 0, "B", "ana") for i in range(3)]
    calibration = experiment_calibration(records, picks, evo.judge_model)
    shares = {agreement.judge: agreement.share for agreement in calibration.judges}
    assert set(shares) == {evo.judge_model, FIRST, SECOND} and shares[FIRST] == 1.0
    assert judge_table(records) != first  # the panel's own table is the judges' mean, not one judge's


def test_a_panel_that_includes_the_agent_model_still_warns_in_the_faces() -> None:
    from furnace.evolution.records import ExperimentRecord
    from furnace.runtime import self_judging_warning
    from furnace.views.picking import grading_judge

    def record(judges: list[str]) -> ExperimentRecord:
        summary = {"judge_model": " + ".join(judges), "judges": {"judges": judges}}
        return ExperimentRecord("exp-panel-0000000001", "panel", {}, 0, "openai/gpt-4o-mini", "finished", summary)

    graded = record(["openai/gpt-4o-mini", "anthropic/claude-3-5-haiku"])
    assert grading_judge(graded) == "openai/gpt-4o-mini"
    assert "grading itself" in (self_judging_warning(graded.model, grading_judge(graded)) or "")
    separate = record(["anthropic/claude-3-5-haiku", "gemini/gemini-1.5-flash"])
    assert self_judging_warning(separate.model, grading_judge(separate)) is None


def test_a_panels_judge_calls_at_once_give_the_run_of_one_after_another() -> None:
    """Every judge of the panel asked at once (concurrency 8) or one after another (1): the same records,
    rows, report and calls, the judges' rows in panel order whatever order they answered in."""
    outcomes = []
    for concurrency in (1, 8):
        evo, _ = panel_run(generations=2, concurrency=concurrency, scorers={"fidelity": 0.5, "tone": 0.5})
        report = evo.run()
        rows = sorted(
            (r.generation, r.slot, r.agent_id, r.fitness, tuple(r.scores))
            for r in evo.results.individuals(evo.experiment_id)
        )
        outcomes.append((report.result_signature(), rows, report.totals["calls"], report.judges))
    assert outcomes[0] == outcomes[1]
    scorers = [s.scorer for s in outcomes[0][1][0][4] if s.probe != "*"]
    assert scorers[:3] == ["fidelity@" + FIRST, "fidelity@" + SECOND, "fidelity"]
