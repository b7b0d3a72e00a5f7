"""Reusable analysis for the notebooks and the app: pure pandas over DataFrames.

The readers that produce these frames from DuckDB are in
:mod:`furnace.storage.duckdb.analysis`, from MLflow in
:mod:`furnace.adapters.mlflow_analysis`. :mod:`furnace.analysis.sample` builds a
small offline data set for notebooks run on a fresh clone.
"""

from __future__ import annotations

from furnace.analysis.distance import drift, drift_by_depth, elixirs_from_individuals, field_distance
from furnace.analysis.lineage import (
    ancestor_pairs,
    ancestry,
    best_agent,
    first_records,
    fitness_by_generation,
    fitness_by_operator,
    lineage_layout,
    operator_success,
    with_parent_fitness,
)
from furnace.analysis.revisions import (
    edit_sizes,
    extracted_preferences,
    preference_summary,
    revision_chains,
    similarity,
)
from furnace.analysis.runs import curve_table, differing_params, pick_champion

__all__ = [
    "ancestor_pairs",
    "ancestry",
    "best_agent",
    "curve_table",
    "differing_params",
    "drift",
    "drift_by_depth",
    "edit_sizes",
    "elixirs_from_individuals",
    "extracted_preferences",
    "field_distance",
    "first_records",
    "fitness_by_generation",
    "fitness_by_operator",
    "lineage_layout",
    "operator_success",
    "pick_champion",
    "preference_summary",
    "revision_chains",
    "similarity",
    "with_parent_fitness",
]
