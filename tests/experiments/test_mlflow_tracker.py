"""MLflow tracking of an experiment: one run, metrics per generation, child runs, artifacts, prompts."""

from __future__ import annotations

from experiments.test_evolution import make
from furnace.evolution.records import MemoryResults


def test_experiment_is_logged_once_and_resumes_its_run(settings):
    from furnace.adapters.mlflow_tracker import MLflowTracker, run_summary

    uri = settings.tracking_uri
    assert uri.startswith("sqlite:////")
    evo = make(MemoryResults(), generations=2)
    evo.tracker = MLflowTracker(uri, tracing=False)  # tracing: next test (one trace destination per process)
    report = evo.run()
    summary = run_summary(uri, report.experiment_id)
    assert summary is not None
    assert summary["status"] == "FINISHED"
    assert [s for s, _ in summary["best_fitness_steps"]] == [0, 1, 2]
    assert summary["children"] == 3
    assert summary["params"]["population"] == "6"
    assert summary["tags"]["furnace.best_agent"] == report.leaderboard[0]["agent_id"]
    assert {"best_prompt.md", "lineage.json", "leaderboard.json", "leaderboard_table.json"} <= set(summary["artifacts"])
    assert (settings.home / "mlartifacts").exists()

    again = make(evo.results, generations=2, breeder=evo.breeder)
    again.tracker = MLflowTracker(uri, tracing=False)
    again.run()
    summary2 = run_summary(uri, report.experiment_id)
    assert summary2["run_id"] == summary["run_id"]
    assert summary2["children"] == 3
    assert len(summary2["best_fitness_steps"]) == 3

    version = again.tracker.register_prompt("furnace-best", report.best_prompt, {"lineage_hash": "abc"})
    assert version == 1
    import mlflow

    loaded = mlflow.genai.load_prompt("prompts:/furnace-best/1")
    assert loaded.tags["lineage_hash"] == "abc"


def test_individuals_are_traced_with_fusion_and_model_call_spans(settings):
    import mlflow

    from furnace.adapters.mlflow_tracker import MLflowTracker

    evo = make(MemoryResults(), generations=1)
    evo.tracker = MLflowTracker(settings.tracking_uri)
    report = evo.run()
    traces = mlflow.search_traces(
        locations=[evo.tracker.mlflow_experiment_id], return_type="list", run_id=evo.tracker.run_id
    )
    assert len(traces) == 6 + 5  # one per individual
    names = {s.name for t in traces for s in t.data.spans}
    assert {"evaluate", "model reply", "model judge"} <= names
    assert any(n.startswith("fuse ") for n in names) and any(n.startswith("individual g1") for n in names)
    assert report.status == "finished"
