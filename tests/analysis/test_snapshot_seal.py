"""A rewritten Parquet snapshot is refused by ``furnace.analysis.connect()`` (docs/reliability.md)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from furnace.analysis import connect
from furnace.domain.elixir import parse_elixir
from furnace.domain.errors import SealError
from furnace.storage.duckdb import snapshot
from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.store import DuckDBStore


def _home(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    store = DuckDBStore(Database(home / "furnace.duckdb"))
    store.save_elixir(
        parse_elixir({"id": "editor", "name": "Editor", "identity": "x", "expertise": ["a"], "principles": ["p"]})
    )
    folder = snapshot.refresh(store.db)
    return home, folder


def test_a_rewritten_parquet_file_is_refused(tmp_path: Path) -> None:
    home, folder = _home(tmp_path)
    target = (folder / "elixir_versions.parquet").as_posix()
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{target}')")
    con.execute("UPDATE t SET name = 'EvilBot'")
    con.execute(f"COPY t TO '{target}' (FORMAT parquet)")
    with pytest.raises(SealError, match=f"elixir_versions.parquet of snapshot {folder.name} does not match"):
        connect(home)


def test_a_manifest_rewritten_to_match_is_refused(tmp_path: Path) -> None:
    home, folder = _home(tmp_path)
    data = json.loads((folder / "manifest.json").read_text())
    data["tables"]["elixir_versions"] = 0
    (folder / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(SealError, match=f"the manifest of snapshot {folder.name} does not match its keyed seal"):
        connect(home)


def test_a_sealed_snapshot_reads_and_an_unsealed_one_is_replaced(tmp_path: Path) -> None:
    home, folder = _home(tmp_path)
    assert connect(home).execute("SELECT name FROM elixir_versions").fetchall() == [("Editor",)]
    data = json.loads((folder / "manifest.json").read_text())
    del data["seal"]  # as a snapshot taken before seals existed
    (folder / "manifest.json").write_text(json.dumps(data))
    con = connect(home)
    assert con.execute("SELECT name FROM elixir_versions").fetchall() == [("Editor",)]
    assert snapshot.current(home / "snapshots") != folder  # a fresh, sealed snapshot took its place
