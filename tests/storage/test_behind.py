"""Writes behind the caller's wait (``Database.write_behind``): read-your-writes in this process,
written before the file is closed or released, a failure logged and never raised to the caller."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from furnace.storage.duckdb import db as duckdb_db
from furnace.storage.duckdb.db import Database

REPO = Path(__file__).resolve().parents[2]


def _table(path: Path) -> Database:
    db = Database(path, migrate=False)
    db.execute("CREATE TABLE IF NOT EXISTS marks (k VARCHAR PRIMARY KEY)")
    return db


def _gated(gate: threading.Event, key: str):
    def work(con):
        gate.wait()
        con.execute("INSERT INTO marks VALUES (?)", [key])

    return work


def test_a_unit_started_after_a_write_behind_waits_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = _table(tmp_path / "f.duckdb")
    gate, reader_waits = threading.Event(), threading.Event()
    settle = duckdb_db._Holder.settle

    def watched(holder, timeout):  # the reader announces that it waits; only then may the write go ahead
        if holder.behind_pending and not holder.on_behind_thread():
            reader_waits.set()
        return settle(holder, timeout)

    monkeypatch.setattr(duckdb_db._Holder, "settle", watched)
    opener = threading.Thread(target=lambda: (reader_waits.wait(), gate.set()))
    opener.start()
    try:
        db.write_behind(_gated(gate, "a"), what="mark a")  # returns at once: the write waits for the gate
        assert not gate.is_set()
        assert db.query("SELECT k FROM marks") == [("a",)]  # this read waited for the write behind
    finally:
        reader_waits.set()
        opener.join()


def test_close_writes_what_is_behind_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    db = _table(tmp_path / "f.duckdb")
    gate = threading.Event()
    settle = duckdb_db._Holder.settle

    def opening(holder, timeout):  # the write may go ahead only once close() waits for it
        if holder.behind_pending and not holder.on_behind_thread():
            gate.set()
        return settle(holder, timeout)

    monkeypatch.setattr(duckdb_db._Holder, "settle", opening)
    try:
        db.write_behind(_gated(gate, "a"), what="mark a")
        db.close()
    finally:
        gate.set()
    assert not db.held
    with duckdb.connect(str(tmp_path / "f.duckdb"), read_only=True) as other:  # what another reader finds
        assert other.execute("SELECT k FROM marks").fetchall() == [("a",)]


def test_a_failed_write_behind_is_logged_and_the_file_stays_usable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = _table(tmp_path / "f.duckdb")

    def broken(con):
        con.execute("INSERT INTO marks VALUES (NULL)")  # a NOT NULL key: DuckDB refuses it

    db.write_behind(broken, what="the mark of r1")
    db.write_behind(lambda con: con.execute("INSERT INTO marks VALUES ('b')"), what="the mark of r2")
    assert db.query("SELECT k FROM marks") == [("b",)]  # the next write went ahead, in order
    assert "the mark of r1 not written" in caplog.text


def test_a_process_writes_what_is_behind_before_it_exits(tmp_path: Path) -> None:
    path = tmp_path / "f.duckdb"
    _table(path).close()
    script = textwrap.dedent(
        f"""
        import time
        from furnace.storage.duckdb.db import Database
        db = Database({str(path)!r}, migrate=False)
        def slow(con):
            time.sleep(0.2)  # still running when the main thread ends
            con.execute("INSERT INTO marks VALUES ('exit')")
        db.write_behind(slow, what="the last mark")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _table(path).query("SELECT k FROM marks") == [("exit",)]
