"""The cancel check before a speaker reads the flag only when it may have changed: a cancel requested
in this process (through any store object), or a turn of another process on the file."""

from __future__ import annotations

from pathlib import Path

import duckdb

from furnace.arena.models import RunRecord
from furnace.storage.duckdb.arena import DuckDBArenaStore
from furnace.storage.duckdb.db import Database


def _run(store: DuckDBArenaStore) -> str:
    run = store.start_run(RunRecord(run_id="run-1", session_id="ses-1", turn=0, message="hi", directive="open"))
    return run.run_id


def test_a_flag_read_as_not_set_is_not_read_again_until_something_could_change_it(tmp_path: Path) -> None:
    db = Database(tmp_path / "a.duckdb")
    store, other = DuckDBArenaStore(db), DuckDBArenaStore(db)  # e.g. two screens of the app
    run_id = _run(store)
    assert store.cancel_requested(run_id) is False
    before = db.statements
    assert store.cancel_requested(run_id) is False
    assert db.statements == before  # nothing could have set it: no query
    other.request_cancel(run_id)  # another store object of this process
    assert store.cancel_requested(run_id) is True


def test_another_process_turn_on_the_file_makes_the_check_read_again(tmp_path: Path) -> None:
    path = tmp_path / "a.duckdb"
    db = Database(path)
    store = DuckDBArenaStore(db)
    run_id = _run(store)
    assert store.cancel_requested(run_id) is False
    db.close()  # another process takes its turn on the file (`furnace arena cancel`)
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE arena_runs SET cancel_requested = true WHERE run_id = ?", [run_id])
    assert store.cancel_requested(run_id) is True
