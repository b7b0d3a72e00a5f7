"""How a snapshot's rows become Arrow tables (``furnace.storage.sql.parquet``): a small write while pandas
is not loaded goes through Arrow's JSON reader (pyarrow's constructors would import pandas), and gives
the very table the constructors give."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from furnace.storage.sql import parquet
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.kv import SQLVectors
from furnace.storage.sql.schema import metadata
from furnace.storage.sql.store import SQLStore

from .conftest import make_elixir
from .test_contract import make_agent

REPO = Path(__file__).resolve().parents[2]


def _filled(tmp_path: Path) -> SQLDatabase:
    db = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)
    store = SQLStore(db)
    a = store.save_elixir(make_elixir("Alpha", expertise=["writing", "数学"], principles=['Say "no" plainly.\n']))
    b = store.save_elixir(make_elixir("Beta"))
    store.save_agent(make_agent([a, b]))
    SQLVectors(db).put_many("m", {"h": [0.5, 1 / 3, -2e-12], "g": []})
    return db


def test_the_json_reader_gives_the_table_the_constructors_give(tmp_path: Path) -> None:
    db = _filled(tmp_path)
    with db.connect() as conn:
        tables = {t.name: (t, conn.execute(select(t)).all()) for t in metadata.sorted_tables}
    filled = {name for name, (_, rows) in tables.items() if rows}
    assert {"elixir_versions", "agents", "lineage_edges", "embeddings"} <= filled
    for name in sorted(filled):
        table, rows = tables[name]
        schema = parquet.arrow_table(table, []).schema
        assert parquet._read_as_json(table, rows, schema).equals(parquet._built(table, rows, schema)), name
    expertise = parquet._read_as_json(
        *tables["elixir_versions"], schema=parquet.arrow_table(tables["elixir_versions"][0], []).schema
    )
    assert ["writing", "数学"] in expertise.column("expertise").to_pylist()
    db.close()


def test_a_row_the_json_reader_cannot_take_goes_through_the_constructors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet, "_pandas_loaded", lambda: False)
    built: list[int] = []
    real_built = parquet._built
    monkeypatch.setattr(parquet, "_built", lambda *a: built.append(len(a[1])) or real_built(*a))
    embeddings = metadata.tables["embeddings"]
    # a number beyond a double in a stored list: Python's json reads it as infinity, Arrow's refuses it
    rows = [("m", "h", "[1e400, NaN]", datetime(2026, 12, 7, 10, 0, 0, 5)), ("m", "g", "[0.25]", None)]
    vectors = parquet.arrow_table(embeddings, rows).column("vector").to_pylist()
    assert math.isinf(vectors[0][0]) and math.isnan(vectors[0][1]) and vectors[1] == [0.25]
    assert built == [2]


def test_a_large_table_or_a_process_with_pandas_uses_the_constructors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lineage = metadata.tables["lineage_edges"]
    row_count = parquet.JSON_ROWS + 1
    rows = [
        tuple(f"{c.name}-{i}" if c.type.python_type is str else None for c in lineage.columns) for i in range(row_count)
    ]
    used: list[str] = []
    real_json, real_built = parquet._read_as_json, parquet._built
    monkeypatch.setattr(parquet, "_read_as_json", lambda *a: used.append("json") or real_json(*a))
    monkeypatch.setattr(parquet, "_built", lambda *a: used.append("built") or real_built(*a))
    monkeypatch.setattr(parquet, "_pandas_loaded", lambda: False)
    assert parquet.arrow_table(lineage, rows).num_rows == row_count
    assert parquet.arrow_table(lineage, rows[:3]).num_rows == 3
    monkeypatch.setattr(parquet, "_pandas_loaded", lambda: True)
    assert parquet.arrow_table(lineage, rows[:3]).num_rows == 3
    assert used == ["built", "json", "built"]


def test_a_refresh_of_a_fresh_home_does_not_import_pandas(tmp_path: Path) -> None:
    """In a process of its own: pandas is loaded in the test process."""
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(REPO)!r})
        from furnace.domain.elixir import parse_elixir
        from furnace.storage.duckdb import snapshot
        from furnace.storage.sql.db import SQLDatabase, sqlite_url
        from furnace.storage.sql.store import SQLStore
        db = SQLDatabase(sqlite_url(Path({str(tmp_path)!r})), home=Path({str(tmp_path)!r}))
        SQLStore(db).save_elixir(parse_elixir({{"name": "Alpha", "identity": "You are Alpha.", "expertise": ["w"],
                                              "principles": ["Be clear."]}}))
        folder = snapshot.refresh(db)
        print(snapshot.manifest(folder)["tables"]["elixir_versions"], "pandas" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["1", "False"]
