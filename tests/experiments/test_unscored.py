"""A failed judgement is a failure, not a score: the objective is unscored, the individual is kept
out of selection and means, a rerun after the provider recovers evaluates it again (and ends where a
run that never failed ends); a separate judge model answers every JUDGE call."""

from __future__ import annotations

import random

import pytest

from experiments.helpers import PureBreeder, library, scripted_llm
from furnace.domain.canonical import content_key
from furnace.domain.errors import LLMRateLimit
from furnace.evolution.config import parse_config
from furnace.evolution.engine import HELD_OUT, Evolution
from furnace.evolution.records import MemoryResults
from furnace.evolution.report import render_report
from furnace.llm.cache import CachedLLM, MemoryCallLedger, MemoryResponseCache
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import LLMRequest, TaskKind
from furnace.scoring.probes import load_probe_set

CONFIG = {
    "name": "u",
    "seed": 5,
    "population": 6,
    "generations": 2,
    "selection": {"tournament_size": 2, "elitism": 1},
    "probes": {"set": "writing-en", "limit": 2},
    "scorers": {"constraints": 0.2, "fidelity": 0.3, "tone": 0.2, "brief_fit": 0.3},
    "concurrency": 2,
}


class Outage:
    """Fails a seeded share of JUDGE calls with a rate limit while ``down`` (the provider's noise)."""

    def __init__(self, inner, rate: float = 0.3) -> None:
        self.inner, self.model_name, self.rate = inner, inner.model_name, rate
        self.down = True
        self.calls: list[LLMRequest] = []
        self.failed = 0

    def complete(self, request: LLMRequest):
        self.calls.append(request)
        key = content_key([request.task.value, [m.content for m in request.messages]])
        if self.down and request.task == TaskKind.JUDGE and random.Random(key).random() < self.rate:
            self.failed += 1
            raise LLMRateLimit("429 from the provider")
        return self.inner.complete(request)


def _evolution(llm, results, config=CONFIG, breeder=None, **kwargs):
    cfg = parse_config(config)
    seeds = library()
    probes = load_probe_set(cfg.probes.set).head(cfg.probes.limit)
    return Evolution(cfg, probes, seeds, llm, breeder or PureBreeder(seeds), results, **kwargs)


def _cached(inner, cache=None, ledger=None):
    # (``is None``: an empty cache is falsy, and ``cache or ...`` gave each run a cache of its own)
    cache = cache if cache is not None else MemoryResponseCache()
    return CachedLLM(inner, cache, ledger if ledger is not None else MemoryCallLedger())


def test_a_failed_judgement_is_unscored_never_a_zero_and_kept_out_of_selection() -> None:
    results = MemoryResults()
    report = _evolution(_cached(Outage(scripted_llm())), results).run()
    records = results.individuals(report.experiment_id)
    unscored = [r for r in records if not r.scored]
    assert unscored, "the outage should leave some judgements unscored"
    for r in unscored:
        failed = [s for s in r.scores if s.failed]
        assert failed and all("429" in s.reason for s in failed)
        for scorer in r.unscored:  # no objective at all for what failed (not a 0)
            assert scorer not in r.objectives
        assert any(s.scorer not in r.unscored for s in r.scores)  # the rest was scored
    survivors = {a for g in results.generations(report.experiment_id) for a in g.survivors}
    assert survivors and not survivors & {r.agent_id for r in unscored}
    assert {row["agent_id"] for row in report.leaderboard}.isdisjoint({r.agent_id for r in unscored})
    listed = {row["agent_id"] for row in report.unscored}
    assert listed == {r.agent_id for r in unscored} - {row["agent_id"] for row in report.leaderboard}
    assert "unscored (" in render_report(report) and "429" in render_report(report)
    for g in results.generations(report.experiment_id):  # means only over scored individuals
        scored = {r.agent_id: r.fitness for r in records if r.generation <= g.generation and r.scored}
        assert g.best_fitness == max(scored[a] for a in g.survivors)


def test_a_rerun_after_recovery_evaluates_the_failures_again_and_ends_where_a_clean_run_ends() -> None:
    clean = _evolution(_cached(scripted_llm()), MemoryResults()).run()

    results, cache, ledger = MemoryResults(), MemoryResponseCache(), MemoryCallLedger()
    model = Outage(scripted_llm())
    first = _evolution(_cached(model, cache, ledger), results).run()
    assert first.unscored
    failed_before = sum(1 for r in results.individuals(first.experiment_id) if not r.scored)

    model.down, model.calls = False, []
    kept = _evolution(_cached(model, cache, ledger), results, keep_failures=True).run()
    assert model.calls == [] and len(kept.unscored) == len(first.unscored)  # --keep-failures: the old records stand

    again = _evolution(_cached(model, cache, ledger), results).run()
    assert again.unscored == [] and all(r.scored for r in results.individuals(again.experiment_id))
    assert again.result_signature() == clean.result_signature()
    # only what had failed reached the model again: every other answer came from the response cache
    assert model.calls and {c.task for c in model.calls} <= {TaskKind.JUDGE, TaskKind.REPLY, TaskKind.IDENTITY}
    assert len([c for c in model.calls if c.task == TaskKind.JUDGE]) >= failed_before


@pytest.mark.parametrize("seed", [1, 7, 8])
def test_a_rerun_remakes_every_slot_whose_plan_changed_and_calls_only_for_that(seed: int) -> None:
    """A retried failure changes the population later plans are drawn from: a later slot may draw the same
    operator and parent with another seed or other moves. Its recorded child is not what the new plan makes:
    the rerun makes it again (never reads the old one back), and calls the model only for what had failed
    and for the slots whose plan changed (search), and after the search for no more than a clean run does.
    (One mutation-only population of 4 to 6 at a low fault rate: most slots are scored, so such a slot
    is drawn; the test that uses ``CONFIG`` above never drew one.)"""
    config = dict(CONFIG, seed=seed, population=6 if seed == 7 else 4, operators={"mutation": 1.0})
    clean_model = scripted_llm()
    clean = _evolution(_cached(clean_model), MemoryResults(), config).run()

    results, cache, ledger = MemoryResults(), MemoryResponseCache(), MemoryCallLedger()
    model = Outage(scripted_llm(), rate=0.1)
    breeder = PureBreeder(library())  # the agents a run made stay known to the next (fusion's store)
    first = _evolution(_cached(model, cache, ledger), results, config, breeder).run()
    assert first.unscored
    before = {(r.generation, r.slot): r for r in results.individuals(first.experiment_id)}
    failed = model.failed

    model.down, model.calls = False, []
    again = _evolution(_cached(model, cache, ledger), results, config, breeder).run()
    after = {(r.generation, r.slot): r for r in results.individuals(again.experiment_id)}
    assert again.unscored == [] and all(r.scored for r in after.values())
    assert again.result_signature() == clean.result_signature()
    changed = [k for k, r in after.items() if k not in before or before[k].agent_id != r.agent_id]
    search = [c for c in model.calls if c.unit != HELD_OUT]
    assert len(search) <= failed + sum(after[k].calls for k in changed)
    held_out = [c for c in model.calls if c.unit == HELD_OUT]
    assert len(held_out) <= len([c for c in clean_model.calls if c.unit == HELD_OUT])


def test_a_separate_judge_model_answers_every_judgement() -> None:
    ledger, cache = MemoryCallLedger(), MemoryResponseCache()
    agents = scripted_llm("agent-model")
    judge_inner = FakeLLM(respond=scripted_llm().complete, model_name="judge-model")
    evo = _evolution(_cached(agents, cache, ledger), MemoryResults(), judge=_cached(judge_inner, cache, ledger))
    report = evo.run()
    assert judge_inner.calls and all(c.task == TaskKind.JUDGE for c in judge_inner.calls)
    assert not any(c.task == TaskKind.JUDGE for c in agents.calls)
    assert report.judge_model == "judge-model" and "judge: judge-model" in render_report(report)
    same = _evolution(_cached(scripted_llm("agent-model")), MemoryResults()).run()
    assert same.judge_model == "agent-model" and same.experiment_id != report.experiment_id
    assert "judge: agent-model (the same model as the agents)" in render_report(same)


def test_when_nothing_can_be_scored_the_run_stops_with_a_reason() -> None:
    results = MemoryResults()
    report = _evolution(_cached(Outage(scripted_llm(), rate=1.0)), results).run()
    assert report.status.startswith("stopped: no individual could be scored")
    assert report.leaderboard == [] and len(report.unscored) == 6


@pytest.mark.parametrize("keep", [False, True])
def test_stored_results_replace_a_rescored_individual(settings, tmp_path, keep: bool) -> None:
    from experiments.helpers import live_db
    from furnace.storage.sql.experiments import SQLExperimentResults

    def facts(results, experiment_id):
        rows = results.individuals(experiment_id)
        # (a child made twice in one generation is one row, at whichever slot was saved first)
        return sorted((r.generation, r.agent_id, r.fitness, r.failures) for r in rows)

    clean_results = SQLExperimentResults(live_db(tmp_path / "clean"))
    clean = _evolution(_cached(scripted_llm()), clean_results).run()
    results = SQLExperimentResults(live_db(settings.home))
    cache, ledger = MemoryResponseCache(), MemoryCallLedger()
    model = Outage(scripted_llm())
    first = _evolution(_cached(model, cache, ledger), results).run()
    before = facts(results, first.experiment_id)
    model.down = False
    again = _evolution(_cached(model, cache, ledger), results, keep_failures=keep).run()
    after = facts(results, again.experiment_id)
    if keep:  # the unscored records stand, untouched
        assert after == before and any(f[3] for f in after)
    else:  # rescored and replaced: the file holds what a run that never failed stores
        assert after == facts(clean_results, clean.experiment_id) and not any(f[3] for f in after)
    assert all(r.plan for r in results.individuals(again.experiment_id))  # each keeps the plan that made it
    stored = [
        (g.generation, list(g.survivors), round(g.best_fitness, 6)) for g in results.generations(again.experiment_id)
    ]
    assert stored == [(g["generation"], g["survivors"], g["best_fitness"]) for g in again.generations]
