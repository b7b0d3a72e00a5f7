"""MLflow runs that say what they are: named after the experiment (and generation), linked to the prompts
registered from them (the run page's "Registered prompts")."""

from __future__ import annotations

import json


def _log(uri: str, experiment_id: str, params: dict, best_agent: str, generations: int = 2) -> str:
    from furnace.adapters.mlflow_tracker import MLflowTracker

    tracker = MLflowTracker(uri, tracing=False)
    tracker.start_experiment(experiment_id, params, {"furnace.experiment_id": experiment_id})
    for step in range(generations):
        tracker.log_generation(step, {"best_fitness": 0.5 + step / 10, "mean_fitness": 0.4}, {})
    tracker.finish("finished", {"furnace.best_agent": best_agent}, {})
    assert tracker.run_id is not None
    return tracker.run_id


def test_runs_are_named_after_the_experiment_and_generation(settings, mlflow_ready) -> None:
    from furnace.adapters import mlflow_analysis as ma
    from furnace.adapters.mlflow_tracker import MLflowTracker

    uri = settings.tracking_uri
    run_id = _log(uri, "exp-0123abcd", {"name": "tea-coach", "seed": 1}, "agt-x")
    client = MLflowTracker(uri, tracing=False).client
    assert client.get_run(run_id).info.run_name == "tea-coach"
    children = client.search_runs(
        [client.get_run(run_id).info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'"
    )
    assert sorted(r.info.run_name for r in children) == ["tea-coach · generation 0", "tea-coach · generation 1"]

    # a run made before (named by its id) takes the experiment's name when the experiment resumes
    client.update_run(run_id, name="exp-0123abcd")
    again = MLflowTracker(uri, tracing=False)
    again.start_experiment("exp-0123abcd", {"name": "tea-coach", "seed": 1}, {"furnace.experiment_id": "exp-0123abcd"})
    assert again.run_id == run_id and client.get_run(run_id).info.run_name == "tea-coach"

    # a tag names a run whose params carry no config name (a sweep); two runs of one name stay two curves
    tracker = MLflowTracker(uri, tracing=False)
    tracker.start_experiment("swp-1", {"base": "x"}, {"furnace.experiment_name": "sweep x"})
    assert client.get_run(tracker.run_id).info.run_name == "sweep x"
    other = _log(uri, "exp-ffff0000", {"name": "tea-coach", "seed": 2}, "agt-y")
    curves = ma.fitness_curves(uri, [run_id, other])
    assert set(curves["run_name"]) == {f"tea-coach ({run_id[:8]})", f"tea-coach ({other[:8]})"}


def test_a_registered_prompt_is_linked_to_the_run_that_bred_it(lab, mlflow_ready) -> None:
    from furnace.adapters import mlflow_prompts as mp
    from furnace.adapters.mlflow_tracker import MLflowTracker

    uri = lab.settings.tracking_uri
    bred = _log(uri, "exp-a", {"name": "lab"}, lab.grandchild.id)
    other = _log(uri, "exp-b", {"name": "other"}, lab.mutant.id)
    first = mp.register_agent_prompt(lab.store, lab.grandchild.id, tracking_uri=uri, name="furnace-lab")
    assert first.runs == (bred,) and first.as_dict()["runs"] == [bred]
    second = mp.register_agent_prompt(lab.store, lab.mutant.id, tracking_uri=uri, name="furnace-lab")
    assert second.runs == (other,)
    again = mp.register_agent_prompt(lab.store, lab.grandchild.id, tracking_uri=uri, name="furnace-lab")
    assert again.version == 3 and again.runs == (bred,)  # the latest version was another agent's: a new one
    client = MLflowTracker(uri, tracing=False).client
    linked = json.loads(client.get_run(bred).data.tags["mlflow.linkedPrompts"])
    assert linked == [{"name": "furnace-lab", "version": "1"}, {"name": "furnace-lab", "version": "3"}]
    assert json.loads(client.get_run(other).data.tags["mlflow.linkedPrompts"]) == [
        {"name": "furnace-lab", "version": "2"}
    ]
    # registering an agent no run bred links nothing
    assert mp.register_agent_prompt(lab.store, lab.crossover.id, tracking_uri=uri, name="furnace-x").runs == ()
