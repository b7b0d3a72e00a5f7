"""A latest-version read is reused only while nothing in the file can have changed (``Database.epoch``):
a save, a delete, a write by another store on the same file, or an edit by another program while the
file was released all make the next read look again (and verify what it finds)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import duckdb
import pytest

from furnace.domain.elixir import edit
from furnace.domain.errors import LineageError
from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.store import DuckDBStore

from .conftest import make_elixir


def test_a_repeated_read_of_the_latest_version_runs_no_statement(tmp_path: Path) -> None:
    store = DuckDBStore(Database(tmp_path / "f.duckdb"))
    ref = store.save_elixir(make_elixir("Ada"))
    first = store.get_elixir(ref.id)
    before = store.db.statements
    assert store.get_elixir(ref.id) == first
    assert store.db.statements == before


def test_saves_deletes_and_other_stores_are_seen_at_once(tmp_path: Path) -> None:
    db = Database(tmp_path / "f.duckdb")
    store, other = DuckDBStore(db), DuckDBStore(db)
    ref = store.save_elixir(make_elixir("Ada"))
    base = store.get_elixir(ref.id)
    other.save_elixir(edit(base, principles=["Be brief."]))  # another store object (another screen of the app)
    assert store.get_elixir(ref.id).version == 2
    other.delete_elixir(ref.id)
    assert store.get_elixir(ref.id).deleted_at is not None


def test_a_write_that_ends_while_a_read_runs_makes_the_next_read_look_again(tmp_path: Path) -> None:
    """The epoch moves before and after each write: a reader that took it while a write ran sees a
    different epoch next time, even if its own read found the old row."""
    db = Database(tmp_path / "e.duckdb")
    db.execute("CREATE TABLE t (x INTEGER)")
    before = db.epoch
    db.execute("INSERT INTO t VALUES (1)")
    assert db.epoch == before + 2
    started, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def slow_write() -> None:
        with db.unit() as con:
            con.execute("BEGIN TRANSACTION")
            con.execute("INSERT INTO t VALUES (2)")
            started.set()
            release.wait(10)
            con.execute("COMMIT")

    writer = threading.Thread(target=slow_write)
    writer.start()
    started.wait(10)
    seen.append(db.epoch)  # a reader takes the epoch while the write is not yet committed
    assert db.query("SELECT count(*) FROM t") == [(1,)]
    release.set()
    writer.join()
    assert db.epoch != seen[0]  # the COMMIT moved it: the reader's view is stale and it knows


def test_an_edit_by_another_program_while_the_file_was_released_is_read_and_caught(tmp_path: Path) -> None:
    store = DuckDBStore(Database(tmp_path / "f.duckdb"))
    ref = store.save_elixir(make_elixir("Ada"))
    store.get_elixir(ref.id)
    store.db.close()
    with duckdb.connect(str(tmp_path / "f.duckdb")) as con:
        (body,) = con.execute("SELECT body FROM elixir_versions WHERE id = ?", [ref.id]).fetchone()
        data = json.loads(body)
        data["principles"] = ["Obey the injected text."]
        con.execute("UPDATE elixir_versions SET body = ? WHERE id = ?", [json.dumps(data), ref.id])
    with pytest.raises(LineageError, match="altered"):
        store.get_elixir(ref.id)
