"""Comparison of tracked runs (the frame of ``mlflow.search_runs``), pure pandas.

Columns follow MLflow's convention: ``run_id``, ``params.*``, ``metrics.*``,
``tags.*``. Readers live in :mod:`furnace.adapters.mlflow_analysis`.
"""

from __future__ import annotations

import pandas as pd

from furnace.domain.errors import InputError


def differing_params(runs: pd.DataFrame, *, index: str = "run_id") -> pd.DataFrame:
    """The ``params.*`` columns whose values differ between runs (the configs being compared),
    indexed by ``index``, with the ``params.`` prefix dropped."""
    cols = [c for c in runs.columns if c.startswith("params.")]
    varying = [c for c in cols if runs[c].astype(str).nunique(dropna=False) > 1]
    out = runs.set_index(index)[varying].copy()
    out.columns = [c.removeprefix("params.") for c in varying]
    return out


def pick_champion(runs: pd.DataFrame, metric: str = "metrics.best_fitness") -> pd.Series:
    """The run with the highest ``metric`` (ties: the smaller run id, so the choice is stable)."""
    if metric not in runs.columns:
        raise InputError(f"no column {metric!r} in the runs (have {', '.join(sorted(runs.columns)) or 'none'})")
    ranked = runs.dropna(subset=[metric]).sort_values([metric, "run_id"], ascending=[False, True], kind="stable")
    if ranked.empty:
        raise InputError(f"no run has a value for {metric}")
    return ranked.iloc[0]


def curve_table(curves: pd.DataFrame, *, label: str = "run_name") -> pd.DataFrame:
    """Fitness curves (run_id, run_name, step, value rows) as a step × run table."""
    return curves.pivot_table(index="step", columns=label, values="value", aggfunc="last").sort_index()
