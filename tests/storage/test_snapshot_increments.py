"""A refresh extends the snapshot before it where only rows were added (``furnace.storage.sql.parquet``):
what analysis reads is always what a full copy would read, whatever changed in between."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import duckdb
import pytest

from furnace.storage.duckdb import snapshot
from furnace.storage.snapshot_files import Base
from furnace.storage.sql import parquet
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.kv import SQLKV
from furnace.storage.sql.schema import metadata
from furnace.storage.sql.store import SQLStore

from .conftest import make_elixir
from .test_contract import make_agent


def _rows(con: Any, table: str) -> list[str]:
    return sorted(repr(row) for row in con.sql(f'SELECT * FROM "{table}"').fetchall())


def _same_as_a_full_copy(db: Any, folder: Path, tmp_path: Path) -> None:
    """Every table of the snapshot in ``folder``, as analysis reads it, holds what a full copy of the store
    holds now."""
    full = tmp_path / f"full-{len(list(tmp_path.iterdir()))}"
    full.mkdir()
    db.write_parquet(full)  # no base: every table in one file
    views = snapshot.connect(db.path)
    assert snapshot.current(snapshot.snapshot_root(db.path)) == folder
    plain = duckdb.connect()
    for table in metadata.tables:
        path = (full / f"{table}.parquet").as_posix()
        expected = sorted(repr(row) for row in plain.sql(f"SELECT * FROM read_parquet('{path}')").fetchall())
        assert _rows(views, table) == expected, table
    views.close()


def _store(tmp_path: Path) -> tuple[SQLDatabase, SQLStore]:
    db = SQLDatabase(sqlite_url(tmp_path / "home"), home=tmp_path / "home")
    return db, SQLStore(db)


def _with_an_agent(tmp_path: Path) -> tuple[SQLDatabase, SQLStore, Any, Any]:
    """A store holding two elixirs and one agent bred from them: the store and both elixirs' refs."""
    db, store = _store(tmp_path)
    a = store.save_elixir(make_elixir("Alpha"))
    b = store.save_elixir(make_elixir("Beta"))
    store.save_agent(make_agent([a, b], seed=1))
    return db, store, a, b


def _inode(folder: Path, name: str) -> int:
    return os.stat(folder / name).st_ino


def test_added_rows_extend_the_snapshot_before(tmp_path: Path) -> None:
    db, store, a, b = _with_an_agent(tmp_path)
    first = snapshot.refresh(db)
    assert snapshot.manifest(first)["parts"]["agents"] == ["agents.parquet"]

    store.save_agent(make_agent([a, b], seed=2))
    second = snapshot.refresh(db)
    data = snapshot.manifest(second)
    assert data["parts"]["agents"] == ["agents.parquet", "agents.1.parquet"]  # the new agent alone
    assert _inode(second, "agents.parquet") == _inode(first, "agents.parquet")  # kept, not copied
    assert data["parts"]["contents"] == ["contents.parquet"]  # nothing added: its file kept as it was
    assert data["tables"]["agents"] == 2
    _same_as_a_full_copy(db, second, tmp_path)


def test_a_row_changed_or_removed_in_place_copies_its_table_in_full(tmp_path: Path) -> None:
    db, store = _store(tmp_path)
    a = store.save_elixir(make_elixir("Alpha"))
    store.save_elixir(make_elixir("Beta"))
    kv = SQLKV(db, clock=lambda: 1000.0)
    kv.put_many_if_absent([("short", {"v": 1}, 1.0), ("long", {"v": 2}, None)])
    first = snapshot.refresh(db)

    store.delete_elixir(a.id)  # an UPDATE (soft delete)
    SQLKV(db, clock=lambda: 2000.0).purge_expired()  # a DELETE
    second = snapshot.refresh(db)
    data = snapshot.manifest(second)
    for table in ("elixir_versions", "kv"):
        assert data["parts"][table] == [f"{table}.parquet"]
        assert _inode(second, f"{table}.parquet") != _inode(first, f"{table}.parquet")
    assert data["tables"]["kv"] == 1
    _same_as_a_full_copy(db, second, tmp_path)


def test_a_replace_that_fires_no_trigger_is_caught_by_the_count(tmp_path: Path) -> None:
    db, store = _store(tmp_path)
    store.save_elixir(make_elixir("Alpha"))
    first = snapshot.refresh(db)
    with db.engine.begin() as conn:  # a row replaced outside furnace: SQLite deletes it without a trigger
        conn.exec_driver_sql("INSERT OR REPLACE INTO elixir_versions SELECT * FROM elixir_versions")
    second = snapshot.refresh(db)
    assert snapshot.manifest(second)["parts"]["elixir_versions"] == ["elixir_versions.parquet"]
    assert _inode(second, "elixir_versions.parquet") != _inode(first, "elixir_versions.parquet")
    _same_as_a_full_copy(db, second, tmp_path)


def test_a_table_is_rewritten_in_one_file_once_it_has_max_parts(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(parquet, "MAX_PARTS", 3)
    db, store = _store(tmp_path)
    a = store.save_elixir(make_elixir("Alpha"))
    b = store.save_elixir(make_elixir("Beta"))
    seen = []
    for seed in range(5):
        store.save_agent(make_agent([a, b], seed=seed))
        seen.append(len(snapshot.manifest(snapshot.refresh(db))["parts"]["agents"]))
    assert seen == [1, 2, 3, 1, 2]
    _same_as_a_full_copy(db, snapshot.current(snapshot.snapshot_root(db.path)), tmp_path)


def test_a_file_rewritten_since_is_not_kept_so_the_next_refresh_heals_the_snapshot(tmp_path: Path) -> None:
    db, store, a, b = _with_an_agent(tmp_path)
    first = snapshot.refresh(db)
    bogus = (first / "lineage_edges.parquet").read_bytes()
    (first / "agents.parquet").write_bytes(bogus)  # outside furnace (the seal no longer checks)
    store.save_agent(make_agent([a, b], seed=2))
    second = snapshot.refresh(db)
    assert snapshot.manifest(second)["parts"]["agents"] == ["agents.parquet"]
    assert (second / "agents.parquet").read_bytes() != bogus
    _same_as_a_full_copy(db, second, tmp_path)


def test_a_snapshot_at_another_schema_revision_is_not_extended(tmp_path: Path) -> None:
    db, store = _store(tmp_path)
    store.save_elixir(make_elixir("Alpha"))
    first = snapshot.refresh(db)
    base, _ = snapshot._base(first.parent, db.sealer)
    assert base is not None and base.revision == 6
    older = Base(base.folder, base.revision - 1, base.parts, base.rows, base.marks, base.stats)
    folder = tmp_path / "next"
    folder.mkdir()
    written, revision = db.write_parquet(folder, older)
    assert revision == 6 and not written.linked


def test_postgresql_snapshots_are_full_copies(sql_db: Any, tmp_path: Path) -> None:
    if sql_db.dialect != "postgresql":
        pytest.skip("SQLite extends its snapshots (the tests above)")
    store = SQLStore(sql_db)
    store.save_elixir(make_elixir("Alpha"))
    snapshot.refresh(sql_db)
    store.save_elixir(make_elixir("Beta"))
    data = snapshot.manifest(snapshot.refresh(sql_db))
    assert data["marks"] == {} and data["parts"]["elixir_versions"] == ["elixir_versions.parquet"]
    assert data["tables"]["elixir_versions"] == 2


def test_a_snapshot_written_before_increments_is_read_and_then_replaced_in_full(tmp_path: Path) -> None:
    db, store, a, b = _with_an_agent(tmp_path)
    folder = snapshot.refresh(db)
    data = snapshot.manifest(folder)  # as the release before wrote it: one file per table, keyed by table
    old = {k: v for k, v in data.items() if k not in ("parts", "marks", "stats", "seal")}
    old["files"] = {table: data["files"][f"{table}.parquet"] for table in data["tables"]}
    old["seal"] = snapshot._manifest_seal(db.sealer, old)
    (folder / "manifest.json").write_text(json.dumps(old), encoding="utf-8")
    snapshot._views.schemas.pop(folder, None)
    views = snapshot.connect(db.path)
    assert views.sql("SELECT count(*) FROM agents").fetchall() == [(1,)]
    views.close()

    store.save_agent(make_agent([a, b], seed=2))
    second = snapshot.refresh(db)
    assert snapshot.manifest(second)["parts"]["agents"] == ["agents.parquet"]  # nothing to extend from
    _same_as_a_full_copy(db, second, tmp_path)


def test_a_row_put_back_under_the_highest_rowid_is_caught_by_the_count(tmp_path: Path) -> None:
    db, store = _store(tmp_path)
    for name in ("Alpha", "Beta", "Gamma"):
        store.save_elixir(make_elixir(name))
    with db.engine.begin() as conn:  # a gap under the highest rowid (the DELETE moves the stamp)
        conn.exec_driver_sql("DELETE FROM elixir_versions WHERE id = 'beta'")
    snapshot.refresh(db)
    with db.engine.begin() as conn:  # outside furnace: an explicit rowid into the gap (no trigger, same max)
        conn.exec_driver_sql(
            "INSERT INTO elixir_versions (rowid, id, version, origin, name, content_hash, body, created_at)"
            " VALUES (2, 'ghost', 1, 'library', 'Ghost', 'h', '{}', '2026-01-01 00:00:00.000000')"
        )
    second = snapshot.refresh(db)
    assert snapshot.manifest(second)["parts"]["elixir_versions"] == ["elixir_versions.parquet"]
    _same_as_a_full_copy(db, second, tmp_path)
