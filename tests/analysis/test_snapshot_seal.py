"""``furnace.analysis.connect()`` reads sealed Parquet snapshots of a home's live store: a rewritten one is
refused (docs/reliability.md), a missing or pre-seal one is taken afresh from the live store."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from furnace.analysis import connect
from furnace.domain.elixir import parse_elixir
from furnace.domain.errors import SealError
from furnace.runtime import Runtime
from furnace.settings import FurnaceSettings
from furnace.storage.duckdb import snapshot


def _home(tmp_path: Path, *, snapshot_taken: bool = True) -> tuple[Path, Path | None]:
    """A home with one elixir in its live store, and the snapshot ``furnace snapshot`` takes of it."""
    home = tmp_path / "home"
    runtime = Runtime(FurnaceSettings(home=home))
    runtime.store.save_elixir(
        parse_elixir({"id": "editor", "name": "Editor", "identity": "x", "expertise": ["a"], "principles": ["p"]})
    )
    folder = snapshot.refresh(runtime.sql) if snapshot_taken else None
    runtime.close()
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


def test_a_first_snapshot_is_taken_of_the_live_store(tmp_path: Path) -> None:
    home, _ = _home(tmp_path, snapshot_taken=False)
    assert snapshot.current(home / "snapshots") is None
    assert connect(home).execute("SELECT name FROM elixir_versions").fetchall() == [("Editor",)]
    assert snapshot.current(home / "snapshots") is not None


def test_a_home_without_a_store_is_refused_and_left_uncreated(tmp_path: Path) -> None:
    from furnace.domain.errors import StoreError

    with pytest.raises(StoreError, match="no furnace store in"):
        connect(tmp_path / "typo")
    assert not (tmp_path / "typo").exists()
