"""A writer waiting for SQLite's write lock asks again every millisecond (``_begin_immediate``) instead of
sleeping in SQLite's busy handler; it gets the lock once the holder commits, and gives up (locked) at the
busy timeout."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from furnace.storage.sql import db as sql_db
from furnace.storage.sql.db import SQLDatabase, sqlite_url


def _holder(path: Path) -> sqlite3.Connection:
    """Another process's connection holding the write lock."""
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_a_waiting_writer_gets_the_lock_when_the_holder_commits(tmp_path: Path) -> None:
    db = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)
    db.execute("CREATE TABLE t (x INTEGER)")
    other = _holder(db.path)
    other.execute("INSERT INTO t VALUES (1)")
    asked = threading.Event()

    def write() -> None:
        asked.set()
        db.execute("INSERT INTO t VALUES (2)")

    writer = threading.Thread(target=write)
    writer.start()
    asked.wait()
    writer.join(0.05)
    assert writer.is_alive()  # waiting: the lock is held
    other.execute("COMMIT")
    writer.join(10)
    assert not writer.is_alive()
    assert sorted(r[0] for r in db.query("SELECT x FROM t")) == [1, 2]
    with db.engine.connect() as conn:  # the connection's busy timeout is back for every other statement
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == sql_db.BUSY_TIMEOUT_MS
    other.close()
    db.close()


def test_a_writer_gives_up_at_the_busy_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)
    db.execute("CREATE TABLE t (x INTEGER)")
    other = _holder(db.path)
    monkeypatch.setattr(sql_db, "BUSY_TIMEOUT_MS", 30)
    with pytest.raises(OperationalError, match="locked"):
        db.execute("INSERT INTO t VALUES (2)")
    other.execute("ROLLBACK")
    db.execute("INSERT INTO t VALUES (3)")  # the connection is usable after giving up
    assert db.query("SELECT x FROM t") == [(3,)]
    other.close()
    db.close()
