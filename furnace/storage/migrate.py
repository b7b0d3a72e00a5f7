"""Move a home's ``furnace.duckdb`` into the relational store, nothing lost (``docs/store.md``).

:func:`copy_home` copies every table's rows (the columns both schemas have; lists as JSON text), then
verifies that each table holds as many rows as the DuckDB file and that every sealed record reads back
through the relational store's adapters with its seal verified: every elixir version, every agent (its
whole record), every experiment with its individuals and generations, every cached response, every
person's pick (and its undo). The DuckDB file is kept byte for byte (the move reads a copy brought to
the last DuckDB schema).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from furnace.domain.errors import StoreError
from furnace.storage.duckdb.db import Database
from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.schema import metadata

_LISTS = {("elixir_versions", "expertise"), ("embeddings", "vector")}
CHUNK = 500


@dataclass
class Moved:
    """What :func:`copy_home` copied and verified."""

    rows: dict[str, int] = field(default_factory=dict)
    verified: dict[str, int] = field(default_factory=dict)  # sealed records read back, by kind


def _value(table: str, column: str, value: Any) -> Any:
    if (table, column) in _LISTS and value is not None and not isinstance(value, str):
        return json.dumps([float(v) for v in value] if column == "vector" else list(value), ensure_ascii=False)
    return value


def copy_home(source: Database, target: SQLDatabase) -> Moved:
    """Copy ``source`` into ``target`` (rows already there are kept), then verify counts and seals;
    StoreError naming the table or record when anything differs."""
    moved = copy_rows(source, target)
    _verify(target, moved)
    return moved


def copy_rows(source: Database, target: SQLDatabase) -> Moved:
    """Copy every table's rows of ``source`` into ``target`` and check their counts (no seal is read:
    :func:`copy_home` verifies them)."""
    moved = Moved()
    for table in metadata.sorted_tables:
        present = {
            r[0]
            for r in source.query(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table.name]
            )
        }
        columns = [c.name for c in table.columns if c.name in present]
        if not columns:
            moved.rows[table.name] = 0
            continue
        rows = source.query(f"SELECT {', '.join(columns)} FROM {table.name}")
        for start in range(0, len(rows), CHUNK):
            part = [
                {c: _value(table.name, c, v) for c, v in zip(columns, row, strict=True)}
                for row in rows[start : start + CHUNK]
            ]
            with target.transaction() as conn:
                conn.execute(target.insert(table).on_conflict_do_nothing(), part)
        copied = target.query(f"SELECT count(*) FROM {table.name}")[0][0]
        if copied != len(rows):
            raise StoreError(
                f"migrate: {table.name} holds {copied} rows in {target.where}, {len(rows)} in {source.path}"
            )
        moved.rows[table.name] = len(rows)
    return moved


def _verify(target: SQLDatabase, moved: Moved) -> None:
    from furnace.storage.sql.experiments import SQLExperimentResults
    from furnace.storage.sql.llm_calls import SQLResponseCache
    from furnace.storage.sql.picks import SQLPicks
    from furnace.storage.sql.store import SQLStore

    store = SQLStore(target)
    versions = 0
    for (id,) in target.query("SELECT DISTINCT id FROM elixir_versions"):
        versions += len(store.history(id))  # each version's seal and content hash
    moved.verified["elixir versions"] = versions
    moved.verified["agents"] = len(store.list_agents())
    results = SQLExperimentResults(target)
    records = 0
    for experiment in results.list_experiments():
        records += (
            1 + len(results.individuals(experiment.experiment_id)) + len(results.generations(experiment.experiment_id))
        )
    moved.verified["experiment records"] = records
    cache = SQLResponseCache(target, ttl_s=None)
    for (key,) in target.query("SELECT cache_key FROM llm_responses"):
        cache.get(key)
    if cache.refused:
        raise StoreError(f"migrate: {cache.refused} cached responses do not match their keyed seal")
    moved.verified["cached responses"] = moved.rows.get("llm_responses", 0)
    picks = SQLPicks(target)
    moved.verified["picks"] = sum(
        len(picks.picks(experiment_id, include_undone=True))  # each pick's seal, and its undo's
        for (experiment_id,) in target.query("SELECT DISTINCT experiment_id FROM human_picks")
    )
