"""The relational store's tables as Parquet files (the analysis snapshots; ``docs/store.md``).

Written with pyarrow (no DuckDB extension is needed), in one read transaction, with the column types the
DuckDB snapshots have: lists (an elixir's expertise, an embedding vector) as Parquet lists, JSON
documents as strings, timestamps as naive UTC microseconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import BigInteger, Boolean, Connection, DateTime, Float, Integer, Table, select

from furnace.storage.sql.schema import metadata

_LISTS = {("elixir_versions", "expertise"): pa.list_(pa.string()), ("embeddings", "vector"): pa.list_(pa.float64())}


def _arrow_type(table: Table, column: Any) -> pa.DataType:
    listed = _LISTS.get((table.name, column.name))
    if listed is not None:
        return listed
    kind = column.type
    if isinstance(kind, Boolean):
        return pa.bool_()
    if isinstance(kind, BigInteger):
        return pa.int64()
    if isinstance(kind, Integer):
        return pa.int32()
    if isinstance(kind, Float):
        return pa.float64()
    if isinstance(kind, DateTime):
        return pa.timestamp("us")
    return pa.string()


def write_tables(conn: Connection, folder: Path) -> dict[str, int]:
    """Every table of the store as ``folder/<table>.parquet`` (on ``conn``, one read transaction); row counts."""
    counts: dict[str, int] = {}
    for table in metadata.sorted_tables:
        rows = conn.execute(select(table)).all()
        names = [c.name for c in table.columns]
        # rows to columns in one C-level transpose (a Python append per value was ~40 % of a refresh)
        values = list(zip(*rows, strict=True)) if rows else [() for _ in names]
        columns: dict[str, list[Any]] = {name: list(column) for name, column in zip(names, values, strict=True)}
        for (name_of_table, column), _ in _LISTS.items():
            if name_of_table == table.name:
                columns[column] = [None if v is None else json.loads(v) for v in columns[column]]
        schema = pa.schema([pa.field(c.name, _arrow_type(table, c)) for c in table.columns])
        pq.write_table(pa.table(columns, schema=schema), folder / f"{table.name}.parquet")
        counts[table.name] = len(rows)
    return counts
