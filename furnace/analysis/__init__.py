"""Reusable analysis for the notebooks and the app: pure pandas over DataFrames.

The readers that produce these frames with DuckDB over the live store's Parquet
snapshots are in :mod:`furnace.storage.duckdb.analysis`, from MLflow in
:mod:`furnace.adapters.mlflow_analysis`. :mod:`furnace.analysis.sample` builds a
small offline data set for notebooks run on a fresh clone. :func:`connect` opens
the Parquet snapshots of a furnace home for ad-hoc DuckDB/pandas analysis that
never blocks a running experiment (docs/store.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from furnace.analysis.distance import drift, drift_by_depth, elixirs_from_individuals, field_distance
from furnace.analysis.lineage import (
    ancestor_pairs,
    ancestry,
    best_agent,
    first_records,
    fitness_by_generation,
    fitness_by_operator,
    has_score,
    held_out_agents,
    held_out_by_generation,
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


def connect(home: str | Path | None = None) -> Any:  # not in __all__: an entry point, not pandas analysis
    """A DuckDB connection over the newest Parquet snapshot of ``home``'s live store (default ``$FURNACE_HOME``).

    One view per table, with the same names as in the live store; reading it never touches the store,
    so it never makes a writer wait. The snapshot's keyed seal is checked first: a rewritten snapshot
    raises SealError (docs/reliability.md). A first snapshot is taken from the live store (``furnace.sqlite``,
    or ``FURNACE_DATABASE_URL``) when there is none yet; ``furnace snapshot`` takes a fresh one.
    """
    from furnace.settings import FurnaceSettings
    from furnace.storage.duckdb import snapshot

    settings = FurnaceSettings() if home is None else FurnaceSettings(home=Path(home))
    key = settings.seal_key.get_secret_value() if settings.seal_key is not None else None
    folder = snapshot.current(snapshot.snapshot_root(settings.db_path))
    if folder is not None and "seal" in snapshot.manifest(folder):
        return snapshot.connect(settings.db_path, seal_key=key)  # SealError for a rewritten snapshot
    from furnace.domain.errors import StoreError
    from furnace.storage.sql.db import SQLITE_FILE, SQLDatabase, sqlite_url

    url = settings.database_url
    if url is None and not (settings.home / SQLITE_FILE).is_file():  # no store is made here
        if settings.db_path.is_file():
            raise StoreError(
                f"{settings.home} holds only {settings.db_path.name}: run `furnace migrate` (or any furnace command)"
                " to move it into the live store first"
            )
        raise StoreError(f"no furnace store in {settings.home}: nothing to snapshot")
    live = SQLDatabase(
        url.get_secret_value() if url is not None else sqlite_url(settings.home), home=settings.home, seal_key=key
    )
    try:
        return snapshot.connect(settings.db_path, source=live, seal_key=key)
    finally:
        live.close()


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
    "held_out_agents",
    "held_out_by_generation",
    "lineage_layout",
    "operator_success",
    "has_score",
    "pick_champion",
    "preference_summary",
    "revision_chains",
    "similarity",
    "with_parent_fitness",
]
