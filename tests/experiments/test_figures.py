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
