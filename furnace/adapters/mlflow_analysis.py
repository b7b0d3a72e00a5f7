"""Reading tracked runs back from MLflow for comparison (notebooks, app).

:func:`search_runs` wraps ``mlflow.search_runs`` across every MLflow experiment
of a tracking URI (pandas: ``run_id``, ``params.*``, ``metrics.*``, ``tags.*``);
:func:`fitness_curves` reads metric histories (one point per generation);
:func:`champion` picks the fittest furnace experiment run and names its best
agent. The pure comparison helpers are in :mod:`furnace.analysis.runs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from furnace import offline_env

offline_env.apply()

import mlflow  # noqa: E402
import pandas as pd  # noqa: E402
from mlflow import MlflowClient  # noqa: E402

from furnace.adapters import mlflow_home  # noqa: E402
from furnace.analysis.runs import pick_champion  # noqa: E402

mlflow_home.install()  # a moved home's artifacts resolve here too (notebooks read through this module)

PARENT_TAG = "tags.mlflow.parentRunId"
BEST_AGENT_TAG = "tags.furnace.best_agent"
EXPERIMENT_TAG = "tags.furnace.experiment_id"
CURVE_COLUMNS = ["run_id", "run_name", "step", "value"]


def search_runs(
    tracking_uri: str,
    *,
    experiment_names: Sequence[str] | None = None,
    parents_only: bool = True,
    filter_string: str = "",
) -> pd.DataFrame:
    """Runs across MLflow experiments (all of them unless ``experiment_names``), newest first.

    ``parents_only`` drops nested child runs (one per generation), keeping one
    row per furnace experiment run. An empty store gives an empty frame with a
    ``run_id`` column.
    """
    mlflow.set_tracking_uri(tracking_uri)
    kwargs: dict[str, Any] = {"filter_string": filter_string, "output_format": "pandas"}
    if experiment_names:
        kwargs["experiment_names"] = list(experiment_names)
    else:
        kwargs["search_all_experiments"] = True
    runs = mlflow.search_runs(**kwargs)
    if not isinstance(runs, pd.DataFrame) or runs.empty:
        return pd.DataFrame({"run_id": pd.Series(dtype=object)})
    if parents_only and PARENT_TAG in runs.columns:
        runs = runs[runs[PARENT_TAG].isna()]
    return runs.reset_index(drop=True)


def fitness_curves(tracking_uri: str, run_ids: Sequence[str], metric: str = "best_fitness") -> pd.DataFrame:
    """The history of ``metric`` for each run (step = generation): run_id, run_name, step, value. Runs
    sharing a name (one experiment name, two configs) are told apart by their run id's start."""
    client = MlflowClient(tracking_uri=tracking_uri)
    names = {run_id: client.get_run(run_id).info.run_name for run_id in run_ids}
    shared = {n for n in names.values() if list(names.values()).count(n) > 1}
    rows = []
    for run_id in run_ids:
        name = names[run_id]
        if name in shared:  # runs are named after their experiment: two of one name stay two curves
            name = f"{name} ({run_id[:8]})"
        for m in sorted(client.get_metric_history(run_id, metric), key=lambda m: (m.step, m.timestamp)):
            rows.append([run_id, name, int(m.step), float(m.value)])
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def champion(tracking_uri: str, metric: str = "metrics.best_fitness") -> dict[str, Any]:
    """The run with the best ``metric`` among furnace experiment runs, and its best agent:
    ``{"run_id", "run_name", "experiment_id", "agent_id", "fitness"}``."""
    runs = search_runs(tracking_uri)
    if EXPERIMENT_TAG in runs.columns:
        runs = runs[runs[EXPERIMENT_TAG].notna()]
    row = pick_champion(runs, metric)
    return {
        "run_id": row["run_id"],
        "run_name": row.get("tags.mlflow.runName"),
        "experiment_id": row.get(EXPERIMENT_TAG),
        "agent_id": row.get(BEST_AGENT_TAG),
        "fitness": float(row[metric]),
    }
