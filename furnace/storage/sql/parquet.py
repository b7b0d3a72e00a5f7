"""The relational store's tables as Parquet files (the analysis snapshots; ``docs/store.md``).

Written with pyarrow (no DuckDB extension is needed), in one read transaction, with the column types the
DuckDB snapshots have: lists (an elixir's expertise, an embedding vector) as Parquet lists, JSON
documents as strings, timestamps as naive UTC microseconds.

**Small writes without pandas.** pyarrow's own constructors (``pa.array``, ``pa.table``) import pandas the
first time a process uses them: ~0.3 s of CPU and wall at the end of a CLI command whose refresh writes a
few rows (``furnace revise`` on a fresh home: a median of 1.36 s before, 0.93 s after). While pandas is
not loaded, a table of at most :data:`JSON_ROWS` rows is parsed by Arrow's JSON reader instead, one JSON
document per row, which does not import it. The reader costs ~10-25 us a row against ~1-2 us for the
constructors, and ~0.35 against ~0.15 ms for a table of a few rows: a larger table, and any table once
pandas is loaded (the app, a notebook, an earlier large write), goes through the constructors; so does a
row the reader cannot take (a number beyond a double in a stored list). A long-lived process that never
loads pandas pays the difference on each small table it writes (the revision bench's 24 rounds in one
process: ~0.2 ms a table, ~1.5 ms a round).

**Only what was added.** On SQLite a table's rows are added with a growing ``rowid``, and migration 0006's
stamps move whenever a row is changed or removed in place. A refresh given the snapshot before it (its
*base*) keeps the base's files of a table -- hard-linked, not copied -- and writes one more file with the
rows past the base's highest ``rowid``, when the table's stamp and the schema cookie are the base's, the
base's rows are all still there (the table's row count is the base's plus the rows past that ``rowid``:
an ``INSERT OR REPLACE`` or a row put under it fires no trigger) and each kept file is as it was written.
Anything else, a table reaching :data:`MAX_PARTS` files, or PostgreSQL (no ``rowid``), writes the table
in full as ``<table>.parquet``.
A long experiment's refreshes then cost what it added since the last one, not everything it holds.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from sqlalchemy import (
    BigInteger,
    Boolean,
    Connection,
    DateTime,
    Float,
    Integer,
    Table,
    literal_column,
    select,
    text,
)
from sqlalchemy.sql.expression import ColumnClause

from furnace.storage.snapshot_files import Base, Written
from furnace.storage.sql.schema import metadata

_LISTS = {("elixir_versions", "expertise"): pa.list_(pa.string()), ("embeddings", "vector"): pa.list_(pa.float64())}
JSON_ROWS = 256  # the most rows of a table parsed as JSON while pandas is not loaded (module docstring)
MAX_PARTS = 8  # a table's files in one snapshot; the refresh that would add one more rewrites it in one
_rowid: ColumnClause[Any] = literal_column("rowid")
_STAMPS = text("SELECT s.name, s.n, hex(s.token), v.schema_version FROM snapshot_stamps s, pragma_schema_version v")


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


def _list_columns(table: Table) -> list[str]:
    """The columns of ``table`` stored as JSON text and written as Arrow lists (:data:`_LISTS`)."""
    return [c.name for c in table.columns if (table.name, c.name) in _LISTS]


def _read_as_json(table: Table, rows: Sequence[Any], schema: pa.Schema) -> pa.Table:
    """``rows`` parsed by Arrow's JSON reader, one JSON document per row (a list column's stored JSON goes in
    as it is): no pandas import (module docstring)."""
    names = schema.names
    lists = [names.index(name) for name in _list_columns(table)]

    def document(row: Any) -> bytes:
        values = list(row)
        for i in lists:
            if values[i] is not None:
                values[i] = orjson.Fragment(values[i])
        return orjson.dumps(dict(zip(names, values, strict=True)), option=orjson.OPT_APPEND_NEWLINE)

    data = b"".join(document(row) for row in rows)
    return pa_json.read_json(
        pa.BufferReader(data),
        read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1),
        parse_options=pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
    )


def _built(table: Table, rows: Sequence[Any], schema: pa.Schema) -> pa.Table:
    """``rows`` through pyarrow's constructors."""
    values = list(zip(*rows, strict=True))  # rows to columns in one C-level transpose
    columns: dict[str, list[Any]] = {c.name: list(column) for c, column in zip(table.columns, values, strict=True)}
    for name in _list_columns(table):
        columns[name] = [None if v is None else json.loads(v) for v in columns[name]]
    return pa.table(columns, schema=schema)


def _pandas_loaded() -> bool:
    return "pandas" in sys.modules


def arrow_table(table: Table, rows: Sequence[Any]) -> pa.Table:
    """``rows`` of ``table`` as an Arrow table with the snapshot's column types (module docstring)."""
    schema = pa.schema([pa.field(c.name, _arrow_type(table, c)) for c in table.columns])
    if not rows:
        return pa.Table.from_batches([], schema=schema)  # (schema.empty_table() imports pandas)
    if len(rows) <= JSON_ROWS and not _pandas_loaded():
        try:
            return _read_as_json(table, rows, schema)
        except (orjson.JSONEncodeError, pa.ArrowInvalid):
            pass  # a number beyond a double in a stored list: the constructors take it
    return _built(table, rows, schema)


def _write(table: Table, rows: Sequence[Any], path: Path) -> None:
    pq.write_table(arrow_table(table, rows), path)


def _stamps(conn: Connection) -> dict[str, list[Any]]:
    """SQLite: each stamped table's ``[stamp n, stamp token, schema cookie]``; {} elsewhere."""
    if conn.dialect.name != "sqlite":
        return {}
    return {name: [n, token, cookie] for name, n, token, cookie in conn.execute(_STAMPS)}


def _sizes(conn: Connection, names: list[str]) -> dict[str, tuple[int, int]]:
    """Each of the tables ``names``: its highest ``rowid`` (0 when empty) and its row count, in one
    statement (a refresh of a home where little changed costs two statements, not three per table)."""
    if not names:
        return {}
    columns = ", ".join(f"(SELECT max(rowid) FROM {n}), (SELECT count(*) FROM {n})" for n in names)
    row = conn.execute(text(f"SELECT {columns}")).one()
    return {n: (row[2 * i] or 0, row[2 * i + 1]) for i, n in enumerate(names)}


def _kept(table: Table, base: Base | None, mark: list[Any] | None) -> list[str] | None:
    """The base's files of ``table`` this snapshot may keep, rows past the base's highest ``rowid`` added
    (once their count is checked: :func:`write_tables`), or None: write the table in full."""
    if base is None or mark is None:
        return None
    then, parts = base.marks.get(table.name), base.parts.get(table.name)
    if not then or not parts or len(parts) >= MAX_PARTS or then[1:] != mark[1:] or mark[0] < then[0]:
        return None
    return list(parts)


def _link(base: Base, parts: list[str], folder: Path) -> bool:
    """Hard-link the base's ``parts`` into ``folder``; False (and none left) if one is gone, was changed
    since it was written, or cannot be linked."""
    done: list[Path] = []
    try:
        for name in parts:
            stat = os.stat(base.folder / name)
            if [stat.st_size, stat.st_mtime_ns] != base.stats.get(name):
                raise FileExistsError(name)  # rewritten since: not kept
            os.link(base.folder / name, folder / name)
            done.append(folder / name)
    except OSError:  # removed meanwhile, rewritten, or another filesystem: the table is written in full
        for path in done:
            path.unlink(missing_ok=True)
        return False
    return True


def write_tables(conn: Connection, folder: Path, base: Base | None = None) -> Written:
    """Every table of the store into ``folder`` (on ``conn``, one read transaction), extending ``base``
    where only rows were added since (module docstring)."""
    written, stamps = Written(), _stamps(conn)
    sizes = _sizes(conn, [t.name for t in metadata.sorted_tables if t.name in stamps])
    for table in metadata.sorted_tables:
        name = table.name
        mark = None
        if name in sizes:
            mark = [sizes[name][0], *stamps[name]]
            written.marks[name] = mark
        kept = _kept(table, base, mark)
        if kept is not None and mark is not None and base is not None:
            since = base.marks[name][0]
            rows = conn.execute(select(table).where(since < _rowid)).all() if mark[0] > since else []
            # every row of the base is still there (an INSERT OR REPLACE removes one without a trigger)
            if base.rows.get(name, -1) + len(rows) == sizes[name][1] and _link(base, kept, folder):
                written.linked.update(kept)
                if rows:
                    kept.append(f"{name}.{len(kept)}.parquet")
                    _write(table, rows, folder / kept[-1])
                written.parts[name] = kept
                written.rows[name] = sizes[name][1]
                continue
        rows = conn.execute(select(table)).all()
        _write(table, rows, folder / f"{name}.parquet")
        written.parts[name] = [f"{name}.parquet"]
        written.rows[name] = len(rows)
    return written
