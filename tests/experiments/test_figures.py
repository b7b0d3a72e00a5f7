"""Figures that agree: the budget stop line and the totals line, the traces and the ledger, a
resumed generation and what it spent."""

from __future__ import annotations

import pytest

from experiments.helpers import Boom, PureBreeder, library, scripted_llm
from experiments.test_evolution import make
from experiments.test_mlflow_tracker import Priced
from furnace.evolution.records import MemoryResults
from furnace.llm.cache import CachedLLM, MemoryCallLedger, MemoryResponseCache, sum_calls


def ledgered(ledger: MemoryCallLedger, cache: MemoryResponseCache, run_id: str = "exp") -> CachedLLM:
    """A priced scripted model behind a response cache and a call ledger (what the runtime builds)."""
    return CachedLLM(Priced(scripted_llm(), fail_judge_for="nobody"), cache, ledger, run_id=run_id)


def llm_span_tokens(traces) -> int:
    """What the LLM spans of ``traces`` say was spent (MLflow's token usage on each model call)."""
    return sum(
        usage["total_tokens"]
        for t in traces
        for s in t.data.spans
        if (usage := s.get_attribute("mlflow.chat.tokenUsage")) is not None
    )


def test_traces_add_up_to_the_ledger_when_stopped_and_resumed_or_the_report_names_the_short_ones(
    settings, mlflow_ready
):
    import mlflow

    from furnace.adapters.mlflow_tracker import MLflowTracker
    from furnace.evolution.report import render_report

    def traced(evo):
        return mlflow.search_traces(
            locations=[evo.tracker.mlflow_experiment_id], return_type="list", run_id=evo.tracker.run_id
        )

    ledger, cache, results = MemoryCallLedger(), MemoryResponseCache(), MemoryResults()
    # a budget of two seeds' evaluations and a bit (each 1 validation probe x 3 samples x 2 calls): two
    # seeds start, the third would pass it and is never started (the budget never cuts a unit short)
    evo = make(results, llm=ledgered(ledger, cache), population=4, generations=1, budget={"max_calls": 14})
    evo.tracker = MLflowTracker(settings.tracking_uri)
    report = evo.run()
    assert report.status.startswith("stopped: budget.max_calls 14 reached")
    traces = traced(evo)
    # the two seeds, each run whole, and the held-out evaluation, stopped before its first step
    assert len(traces) == 3 and sorted(t.info.state for t in traces) == ["ERROR", "OK", "OK"]
    spent = ledger.totals()
    assert spent.model_calls == 12
    assert llm_span_tokens(traces) == spent.total_tokens == report.totals["tokens"] > 0
    assert sum((t.info.token_usage or {}).get("total_tokens", 0) for t in traces) == spent.total_tokens

    # resumed (a fresh budget): the run's traces, both invocations', still add up to its totals
    again = make(results, llm=ledgered(ledger, cache), population=4, generations=1, budget={"max_calls": 14})
    again.tracker = MLflowTracker(settings.tracking_uri)
    resumed = again.run()
    traces = traced(again)
    assert again.tracker.run_id == evo.tracker.run_id and len(traces) > 2
    assert llm_span_tokens(traces) == ledger.totals().total_tokens == resumed.totals["tokens"]
    assert resumed.untraced == [] and "traces short" not in render_report(resumed)

    # a run whose spans never reached MLflow (here: it traced nothing), killed, then resumed traced:
    # the report names the traces short of the ledger, and by how much
    ledger, cache, results = MemoryCallLedger(), MemoryResponseCache(), MemoryResults()
    with pytest.raises(Boom):
        make(
            results,
            llm=ledgered(ledger, cache),
            population=4,
            generations=1,
            breeder=paid_then_dies(PureBreeder(library()), 3),
        ).run()
    later = make(results, llm=ledgered(ledger, cache), population=4, generations=1)
    later.tracker = MLflowTracker(settings.tracking_uri)
    final = later.run()
    assert final.status == "finished"
    traces = traced(later)
    shown = llm_span_tokens(traces)
    assert final.untraced and shown < final.totals["tokens"]
    assert shown + sum(u["tokens"] - u["traced_tokens"] for u in final.untraced) == final.totals["tokens"]
    short = {u["trace"] for u in final.untraced}
    assert "individual g0 s0" in short  # recorded by the killed run, read back: no trace of it
    assert any(name.startswith("individual g1") for name in short)  # the one it was killed in, among others
    assert "traces short of the ledger by" in render_report(final) and "a killed run's" in render_report(final)


def test_the_budget_stop_line_and_the_totals_line_state_the_same_named_counts():
    from furnace.evolution.report import render_report, spent_text

    # 6 seeds x (1 reply + 1 judge) on the validation probe: five seeds fit in 11 calls, the sixth would
    # pass them and is never started
    ledger, cache, results = MemoryCallLedger(), MemoryResponseCache(), MemoryResults()
    first = make(
        results, llm=ledgered(ledger, cache), generations=2, budget={"max_calls": 11}, samples_per_probe=1
    ).run()
    spent = ledger.totals()
    assert first.totals["calls"] == spent.model_calls == 10
    reason = "budget.max_calls 11 reached (the next unit may make 2 model calls, 1 left)"
    assert first.status == f"stopped: {reason} after {spent_text(first.totals)}"
    assert "after 10 model calls (10 attempts, 0 failed) + 0 cache hits" in first.status
    assert f"calls: {spent_text(first.totals)}\n" in render_report(first) + "\n"
    assert "this run:" not in render_report(first)  # one run: one set of figures

    # the same experiment again, a fresh budget: the seeds recorded are read back, the run goes on
    again = make(
        results, llm=ledgered(ledger, cache), generations=2, budget={"max_calls": 11}, samples_per_probe=1
    ).run()
    spent, mine = ledger.totals(), again.run_spent
    assert again.totals["calls"] == spent.model_calls == 10 + mine["calls"]  # `calls` are model calls
    assert 2 <= mine["calls"] <= 11 and again.totals["cached_calls"] == spent.cached_calls
    assert again.status.startswith("stopped: budget.max_calls 11 reached") and again.status.endswith(
        f" after {spent_text(mine)}"
    )
    text = render_report(again)
    assert f"calls: {spent_text(again.totals)} (every run of this experiment)" in text
    assert f"this run: {spent_text(mine)}" in text
    # and so are an individual's: made again from the cache (a new store), its record holds no call
    fresh = MemoryResults()
    make(fresh, llm=ledgered(ledger, cache), generations=2, budget={"max_calls": 11}, samples_per_probe=1).run()
    seeds = fresh.individuals(again.experiment_id, generation=0)
    assert len(seeds) == 6 and {r.calls for r in seeds} == {0}  # every seed's calls were cached: free


def paid_then_dies(inner, n: int):
    """A breeder that breeds with ``inner`` and, at its ``n``-th child, dies once the child's fusion
    call has been paid for (a process killed mid-unit: the call is in the ledger, the unit never
    finished)."""
    made = {"n": 0}

    def breed(parents, operator, seed, params, llm):
        bred = inner(parents, operator, seed, params, llm)
        made["n"] += 1
        if made["n"] == n:
            raise Boom()
        return bred

    return breed


def test_a_resumed_generation_counts_what_the_killed_run_spent_on_it():
    from furnace.evolution.engine import unit_label

    seeds = library()
    inner = PureBreeder(seeds)
    ledger, cache, results = MemoryCallLedger(), MemoryResponseCache(), MemoryResults()
    with pytest.raises(Boom):  # in generation 2 (5 children per generation)
        make(results, llm=ledgered(ledger, cache), breeder=paid_then_dies(inner, 8)).run()
    killed = ledger.totals()
    assert killed.model_calls > 0
    resumed = make(results, llm=ledgered(ledger, cache), breeder=inner).run()
    assert resumed.status == "finished"
    calls = ledger.calls()
    assert any(c.unit == unit_label(2, 2) and not c.cached for c in calls)  # paid before the kill
    for g in results.generations(resumed.experiment_id):
        spent = sum_calls([c for c in calls if c.unit.startswith(f"g{g.generation}/")])
        # what was spent on the generation, whichever run paid: the killed unit's fusion call too
        # (the resumed run got it from the cache)
        assert (g.calls, g.cached_calls, g.tokens) == (spent.model_calls, spent.cached_calls, spent.total_tokens)
        assert g.cost_usd == pytest.approx(spent.cost_usd)
    gens = results.generations(resumed.experiment_id)
    held = sum_calls([c for c in calls if c.unit == "held-out"])  # after the search: no generation's
    assert sum(g.calls for g in gens) + held.model_calls == ledger.totals().model_calls == resumed.totals["calls"]
    assert sum(g.tokens for g in gens) + held.total_tokens == resumed.totals["tokens"]
    # and a rerun that runs nothing leaves them as they were
    make(results, llm=ledgered(ledger, cache), breeder=inner).run()
    assert results.generations(resumed.experiment_id) == gens
