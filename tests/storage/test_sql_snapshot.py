"""Analysis snapshots of the live store: the same tables and column types as an old home's DuckDB file,
sealed, read by ``furnace.analysis.connect()`` unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from furnace.domain.errors import SealError
from furnace.storage.duckdb import snapshot
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.kv import SQLVectors
from furnace.storage.sql.store import SQLStore

from .conftest import make_elixir
from .old_home import write_old_home
from .test_contract import make_agent


def _fill(store: Any) -> str:
    a = store.save_elixir(make_elixir("Alpha", expertise=["writing", "math"]))
    b = store.save_elixir(make_elixir("Beta"))
    agent = make_agent([a, b])
    store.save_agent(agent)
    return agent.id


def test_a_snapshot_of_the_relational_store_reads_like_one_of_duckdb(tmp_path: Path) -> None:
    sql = SQLDatabase(sqlite_url(tmp_path / "sql"), home=tmp_path / "sql")
    _fill(SQLStore(sql))
    SQLVectors(sql).put_many("m", {"h": [0.5, 1 / 3]})
    duck = write_old_home(tmp_path / "duck" / "furnace.duckdb", sql)  # the same rows in the DuckDB schema
    sql_folder = snapshot.refresh(sql)
    sql_tables = set(snapshot.manifest(sql_folder)["tables"])
    assert {r[0] for r in duck.query("SELECT table_name FROM duckdb_tables()")} - {"schema_version"} == sql_tables
    con = snapshot.connect(sql.path)  # the views analysis opens
    assert con.sql("SELECT expertise FROM elixir_versions WHERE id = 'alpha'").fetchall() == [(["writing", "math"],)]
    assert con.sql("SELECT vector FROM embeddings").fetchall() == [([0.5, 1 / 3],)]
    assert con.sql("SELECT count(*) FROM lineage_edges").fetchall() == [(2,)]
    for table in ("agents", "lineage_edges", "elixir_versions"):
        duck_types = {r[0]: r[1] for r in duck.query(f"DESCRIBE {table}")}
        sql_types = {r[0]: r[1] for r in con.sql(f"DESCRIBE {table}").fetchall()}
        # the JSON columns read as text from both; every other column has DuckDB's type
        assert {c: t for c, t in sql_types.items() if duck_types[c] != "JSON"} == {
            c: t for c, t in duck_types.items() if t != "JSON"
        }


def test_a_rewritten_snapshot_of_the_relational_store_is_refused(tmp_path: Path) -> None:
    sql = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)
    _fill(SQLStore(sql))
    folder = snapshot.refresh(sql)
    (folder / "agents.parquet").write_bytes((folder / "lineage_edges.parquet").read_bytes())
    snapshot._views.schemas.pop(folder, None)
    with pytest.raises(SealError, match="agents.parquet"):
        snapshot.connect(sql.path)
