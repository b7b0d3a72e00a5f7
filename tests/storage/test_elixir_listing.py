"""The listing's columns (migration 0014): written with every version, filled for older rows, and
``list_summaries`` reads them instead of the JSON bodies."""

from __future__ import annotations

from pathlib import Path

import pytest

from furnace import resources
from furnace.interop.importers import load_elixir_file
from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.store import DuckDBStore
from furnace.storage.store import ElixirSummary

from .conftest import make_elixir, older_schema

OLD_COLUMNS = "id, version, origin, name, content_hash, body, created_at, deleted_at"


def _library() -> list:
    return [e for p in sorted(resources.LIBRARY_DIR.glob("*.yaml")) for e in load_elixir_file(p)]


def test_every_saved_version_carries_its_listing_columns(tmp_path: Path) -> None:
    store = DuckDBStore(Database(tmp_path / "f.duckdb"))
    library = _library()
    store.save_elixirs(library)
    editor = make_elixir("Editor", expertise=["copy editing", "Übersetzung"])
    store.save_elixir(editor)
    store.save_elixir(editor.model_copy(update={"expertise": ("proofreading",), "language": "zh"}))
    rows = store.db.query(
        "SELECT id, version, language, expertise, body ->> '$.language',"
        " from_json(body -> '$.expertise', '[\"VARCHAR\"]') FROM elixir_versions"
    )
    assert len(rows) == len(library) + 2
    for id, version, language, expertise, body_language, body_expertise in rows:
        assert (language, expertise) == (body_language, body_expertise), (id, version)
    assert {r[1]: (r[2], r[3]) for r in rows if r[0] == "editor"} == {
        1: ("en", ["copy editing", "Übersetzung"]),
        2: ("zh", ["proofreading"]),
    }


def test_list_summaries_read_the_columns_not_the_bodies(tmp_path: Path) -> None:
    store = DuckDBStore(Database(tmp_path / "f.duckdb"))
    store.save_elixirs(_library())
    expected = [ElixirSummary.of(e) for e in store.list_elixirs()]
    term = expected[0].expertise[0].split()[0].upper()
    found = store.list_summaries(query=term)
    assert found and len(found) < len(expected)
    assert store.list_summaries() == expected
    # bodies the listing does not read: the columns alone decide what is listed and found
    store.db.execute("UPDATE elixir_versions SET body = json_object('name', name)")
    assert store.list_summaries() == expected
    assert store.list_summaries(query=term) == found


def test_migration_fills_the_columns_of_older_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    current = DuckDBStore(Database(tmp_path / "new.duckdb"))
    current.save_elixirs(_library())
    editor = make_elixir("Editor", expertise=["naïve search", "北京"])
    current.save_elixir(editor)
    current.save_elixir(editor.model_copy(update={"language": "zh"}))
    current.delete_elixir("editor")
    rows = current.db.query(f"SELECT {OLD_COLUMNS} FROM elixir_versions")
    # a file as furnace left it before the listing columns existed
    with older_schema(monkeypatch, tmp_path / "old.duckdb", before=14) as old:
        assert "language" not in {
            r[0] for r in old.query("SELECT column_name FROM duckdb_columns() WHERE table_name = 'elixir_versions'")
        }
        for row in rows:
            old.execute(f"INSERT INTO elixir_versions ({OLD_COLUMNS}) VALUES ({', '.join('?' * len(row))})", list(row))
    migrated = DuckDBStore(old)
    for kwargs in ({}, {"include_deleted": True}, {"origin": None}, {"query": "北京", "include_deleted": True}):
        assert migrated.list_summaries(**kwargs) == current.list_summaries(**kwargs), kwargs
    [summary] = migrated.list_summaries(query="naïve", include_deleted=True)
    assert (summary.language, summary.expertise, summary.deleted) == ("zh", ("naïve search", "北京"), True)
