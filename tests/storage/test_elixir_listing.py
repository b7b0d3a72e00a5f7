"""The listing's columns: written with every version, filled for the rows of an old home written before
they existed (DuckDB migration 0014, then the move), and ``list_summaries`` reads them instead of the JSON
bodies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from furnace import resources
from furnace.interop.importers import load_elixir_file
from furnace.storage.sql.store import SQLStore
from furnace.storage.store import ElixirSummary

from .conftest import make_elixir
from .old_home import move, older_schema, scratch

OLD_COLUMNS = "id, version, origin, name, content_hash, body, created_at, deleted_at"


def _library() -> list:
    return [e for p in sorted(resources.LIBRARY_DIR.glob("*.yaml")) for e in load_elixir_file(p)]


def test_every_saved_version_carries_its_listing_columns(sql_db: Any) -> None:
    store = SQLStore(sql_db)
    library = _library()
    store.save_elixirs(library)
    editor = make_elixir("Editor", expertise=["copy editing", "Übersetzung"])
    store.save_elixir(editor)
    store.save_elixir(editor.model_copy(update={"expertise": ("proofreading",), "language": "zh"}))
    rows = [
        (id, version, language, json.loads(expertise), json.loads(body))
        for id, version, language, expertise, body in store.db.query(
            "SELECT id, version, language, expertise, body FROM elixir_versions"
        )
    ]
    assert len(rows) == len(library) + 2
    for id, version, language, expertise, body in rows:
        assert (language, expertise) == (body["language"], body["expertise"]), (id, version)
    assert {r[1]: (r[2], r[3]) for r in rows if r[0] == "editor"} == {
        1: ("en", ["copy editing", "Übersetzung"]),
        2: ("zh", ["proofreading"]),
    }


def test_list_summaries_read_the_columns_not_the_bodies(sql_db: Any) -> None:
    store = SQLStore(sql_db)
    store.save_elixirs(_library())
    expected = [ElixirSummary.of(e) for e in store.list_elixirs()]
    term = expected[0].expertise[0].split()[0].upper()
    found = store.list_summaries(query=term)
    assert found and len(found) < len(expected)
    assert store.list_summaries() == expected
    # bodies the listing does not read: the columns alone decide what is listed and found
    store.db.execute('UPDATE elixir_versions SET body = \'{"name": "x"}\'')
    assert store.list_summaries() == expected
    assert store.list_summaries(query=term) == found


def test_the_move_fills_the_columns_of_older_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "new").mkdir()
    current = SQLStore(scratch(tmp_path / "new"))  # another home: the old one gets its key at its upgrade
    current.save_elixirs(_library())
    editor = make_elixir("Editor", expertise=["naïve search", "北京"])
    current.save_elixir(editor)
    current.save_elixir(editor.model_copy(update={"language": "zh"}))
    current.delete_elixir("editor")
    rows = current.db.query(f"SELECT {OLD_COLUMNS} FROM elixir_versions")
    # a file as furnace left it before the listing columns existed
    with older_schema(monkeypatch, tmp_path / "furnace.duckdb", before=14) as old:
        assert "language" not in {
            r[0] for r in old.query("SELECT column_name FROM duckdb_columns() WHERE table_name = 'elixir_versions'")
        }
        for row in rows:
            old.execute(f"INSERT INTO elixir_versions ({OLD_COLUMNS}) VALUES ({', '.join('?' * len(row))})", list(row))
    target, _ = move(old)
    migrated = SQLStore(target)
    for kwargs in ({}, {"include_deleted": True}, {"origin": None}, {"query": "北京", "include_deleted": True}):
        assert migrated.list_summaries(**kwargs) == current.list_summaries(**kwargs), kwargs
    [summary] = migrated.list_summaries(query="naïve", include_deleted=True)
    assert (summary.language, summary.expertise, summary.deleted) == ("zh", ("naïve search", "北京"), True)
