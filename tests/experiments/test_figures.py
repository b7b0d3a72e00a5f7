"""Figures that agree: the budget stop line and the totals line, the traces and the ledger, a
resumed generation and what it spent."""

from __future__ import annotations

from experiments.helpers import scripted_llm
from experiments.test_evolution import make
from experiments.test_mlflow_tracker import Priced
from furnace.evolution.records import MemoryResults
from furnace.llm.cache import CachedLLM, MemoryCallLedger, MemoryResponseCache


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


def test_a_budget_stopped_run_traces_every_unit_and_its_spans_add_up_to_the_ledger(settings):
    import mlflow

    from furnace.adapters.mlflow_tracker import MLflowTracker

    ledger = MemoryCallLedger()
    evo = make(MemoryResults(), llm=ledgered(ledger, MemoryResponseCache()), generations=2, budget={"max_calls": 10})
    evo.tracker = MLflowTracker(settings.tracking_uri)
    report = evo.run()
    assert report.status.startswith("stopped: budget.max_calls 10 reached")
    traces = mlflow.search_traces(
        locations=[evo.tracker.mlflow_experiment_id], return_type="list", run_id=evo.tracker.run_id
    )
    # every seed's unit started (generation 0 submits them all); the ones the stop cut short are
    # ERROR traces, still linked to the run with every model call they paid for
    assert len(traces) == 6
    assert any(t.info.state == "ERROR" for t in traces)
    assert all(t.info.state in ("OK", "ERROR") for t in traces)  # none left in progress
    spent = ledger.totals()
    assert llm_span_tokens(traces) == spent.total_tokens == report.totals["tokens"] > 0
    assert sum(t.info.token_usage["total_tokens"] for t in traces) == spent.total_tokens


def test_the_budget_stop_line_and_the_totals_line_state_the_same_named_counts():
    from furnace.evolution.report import render_report, spent_text

    ledger, cache, results = MemoryCallLedger(), MemoryResponseCache(), MemoryResults()
    first = make(results, llm=ledgered(ledger, cache), generations=2, budget={"max_calls": 10}).run()
    spent = ledger.totals()
    # calls in flight when the limit was reached count against it and land before the status is
    # written: the stop line counts all of them, as the ledger does
    assert first.totals["calls"] == spent.model_calls == 10
    assert first.status == f"stopped: budget.max_calls 10 reached after {spent_text(first.totals)}"
    assert "after 10 model calls (10 attempts, 0 failed) + 0 cache hits" in first.status
    assert f"calls: {spent_text(first.totals)}\n" in render_report(first) + "\n"
    assert "this run:" not in render_report(first)  # one run: one set of figures

    # the same experiment again, a fresh budget: what the earlier run paid for is served by the cache
    again = make(results, llm=ledgered(ledger, cache), generations=2, budget={"max_calls": 10}).run()
    spent, mine = ledger.totals(), again.run_spent
    assert again.totals["calls"] == spent.model_calls == 20  # `calls` are model calls, cache hits apart
    assert again.totals["cached_calls"] == spent.cached_calls > 0
    assert mine["calls"] == 10 and mine["cached_calls"] == spent.cached_calls
    assert again.status == f"stopped: budget.max_calls 10 reached after {spent_text(mine)}"
    text = render_report(again)
    assert f"calls: {spent_text(again.totals)} (every run of this experiment)" in text
    assert f"this run: {spent_text(mine)}" in text
    # and so are an individual's: made again from the cache (a new store), its record holds no call
    fresh = MemoryResults()
    make(fresh, llm=ledgered(ledger, cache), generations=2, budget={"max_calls": 10}).run()
    seeds = fresh.individuals(again.experiment_id, generation=0)
    assert seeds and {r.calls for r in seeds} <= {0, 1, 2, 3, 4} and 0 in {r.calls for r in seeds}
