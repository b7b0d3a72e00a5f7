"""furnace.adapters.mlflow_analysis over runs logged by the experiment tracker (temp sqlite MLflow)."""

from __future__ import annotations


def test_search_runs_curves_and_champion(settings, mlflow_ready) -> None:
    from furnace.adapters import mlflow_analysis as ma
    from furnace.adapters.mlflow_tracker import MLflowTracker

    uri = settings.tracking_uri
    assert ma.search_runs(uri).empty
    for exp, best, curve in (("exp-a", "agt-aaa", [0.5, 0.6, 0.7]), ("exp-b", "agt-bbb", [0.4, 0.8])):
        tracker = MLflowTracker(uri)
        tracker.start_experiment(exp, {"population": len(curve), "seed": 1}, {"furnace.experiment_id": exp})
        for step, value in enumerate(curve):
            tracker.log_generation(step, {"best_fitness": value, "mean_fitness": value / 2}, {})
        tracker.finish("finished", {"furnace.best_agent": best}, {})
    runs = ma.search_runs(uri)
    assert len(runs) == 2 and set(runs["tags.furnace.experiment_id"]) == {"exp-a", "exp-b"}
    assert len(ma.search_runs(uri, parents_only=False)) == 2 + 5  # plus one child run per generation
    curves = ma.fitness_curves(uri, list(runs["run_id"]))
    by_name = {name: list(g["value"]) for name, g in curves.groupby("run_name")}
    assert by_name == {"exp-a": [0.5, 0.6, 0.7], "exp-b": [0.4, 0.8]}
    champ = ma.champion(uri)
    assert champ["experiment_id"] == "exp-b" and champ["agent_id"] == "agt-bbb" and champ["fitness"] == 0.8
