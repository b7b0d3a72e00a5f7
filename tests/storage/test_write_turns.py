"""Arrival order (furnace.storage.sql.turns): the processes asking for SQLite's write lock go in the order
they asked. Two WriteTurns on one file in one process hold two open files, whose locks meet as two
processes' do; the SQLite lock is held by a plain sqlite3 connection."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from furnace.domain.threads import background
from furnace.storage.sql import turns as turns_module
from furnace.storage.sql.turns import WriteTurns, turns_for

GUARD_S = 60.0  # a hang guard only: every wait below ends on an event long before


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    return conn


def _until(condition: Callable[[], bool]) -> None:
    pause = threading.Event()
    for _ in range(int(GUARD_S / 0.001)):
        if condition():
            return
        pause.wait(0.001)
    raise AssertionError("the condition never came true")


def _busy_timeout(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA busy_timeout").fetchone()[0])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "furnace.sqlite"
    _connect(path).close()
    return path


def test_an_uncontended_begin_opens_the_transaction_and_restores_the_busy_timeout(db: Path) -> None:
    turns, conn = WriteTurns(str(db), 30_000), _connect(db)
    turns.begin(conn)
    assert conn.in_transaction
    assert _busy_timeout(conn) == 30_000
    conn.execute("INSERT INTO t VALUES (1)")
    conn.execute("COMMIT")
    assert not WriteTurns(str(db), 30_000).someone_waits()  # nothing left held


def test_a_process_asking_is_seen_and_gets_in_once_the_holder_commits(db: Path) -> None:
    holder, asker, observer = _connect(db), _connect(db), WriteTurns(str(db), 30_000)
    holder.execute("BEGIN IMMEDIATE")
    asking = background(WriteTurns(str(db), 30_000).begin, asker, name="asker")
    _until(observer.someone_waits)
    assert asking.is_alive() and not asker.in_transaction
    holder.execute("COMMIT")
    asking.join(GUARD_S)
    assert asker.in_transaction
    assert not observer.someone_waits()
    assert _busy_timeout(asker) == 30_000
    asker.execute("COMMIT")


def test_a_writer_lets_the_one_asking_go_first(db: Path) -> None:
    holder, first, second = _connect(db), _connect(db), _connect(db)
    observer = WriteTurns(str(db), 30_000)
    first_in = threading.Event()

    def first_run(sql: str) -> object:
        done = first.execute(sql)  # raises while the holder holds the lock
        first_in.set()
        return done

    holder.execute("BEGIN IMMEDIATE")
    asking = background(WriteTurns(str(db), 30_000).begin, first, first_run, name="first")
    _until(observer.someone_waits)
    first_in_when_second_asked: list[bool] = []

    def second_run(sql: str) -> object:
        if not first_in_when_second_asked:
            first_in_when_second_asked.append(first_in.is_set())
        return second.execute(sql)

    writing = background(WriteTurns(str(db), 30_000).begin, second, second_run, name="second")
    holder.execute("COMMIT")
    asking.join(GUARD_S)
    _until(lambda: bool(first_in_when_second_asked))  # the second asks (and waits) while the first is in
    first.execute("COMMIT")
    writing.join(GUARD_S)
    # the second writer asked SQLite only once the first was in: it never raced it for the freed lock
    assert first_in_when_second_asked == [True]
    assert second.in_transaction
    second.execute("COMMIT")


def test_asking_gives_up_after_the_busy_timeout_with_nothing_left_held(db: Path) -> None:
    holder, asker = _connect(db), _connect(db)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        WriteTurns(str(db), 20).begin(asker)
    assert not asker.in_transaction
    assert _busy_timeout(asker) == 20
    assert not WriteTurns(str(db), 20).someone_waits()
    holder.execute("ROLLBACK")


def test_a_writer_lets_a_stuck_asker_go_first_only_for_a_while(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns_module, "DEFER_MAX_S", 0.01)
    stuck = os.open(str(db) + turns_module.SUFFIX, os.O_RDWR | os.O_CREAT)
    assert turns_module._lock(stuck, fcntl.F_WRLCK, 1, 1)  # an asker stopped with Ctrl-Z: the earliest ticket
    try:
        conn = _connect(db)
        WriteTurns(str(db), 30_000).begin(conn)
        assert conn.in_transaction
        conn.execute("COMMIT")
    finally:
        os.close(stuck)


def test_a_ticket_holds_back_the_later_ones_only(db: Path) -> None:
    mine, other = WriteTurns(str(db), 30_000), WriteTurns(str(db), 30_000)
    ticket = other._take_ticket()
    assert other.someone_waits() is False  # its own ticket is not someone else's
    assert mine.someone_waits()
    assert not mine._free_before(ticket + 1)  # asked after it: waits for it
    assert mine._free_before(ticket)  # asked before it: does not
    assert mine._take_ticket() > ticket and other.someone_waits()  # each sees the other's, not its own
    turns_module._lock(other._fd, fcntl.F_UNLCK, ticket, 1)
    assert not mine.someone_waits()


def test_a_waiter_is_not_overtaken_by_one_that_asked_after_it(db: Path) -> None:
    # the one it found asking gets in; the next to ask (here while that one holds the lock, as an
    # experiment's next thread does) goes after it, not before
    holder, conns = _connect(db), {name: _connect(db) for name in ("first", "waiter", "later")}
    observer = WriteTurns(str(db), 30_000)
    order: list[str] = []
    asked: dict[str, threading.Event] = {name: threading.Event() for name in conns}

    def asking(name: str) -> threading.Thread:
        def run(sql: str) -> object:
            asked[name].set()
            done = conns[name].execute(sql)  # raises while another holds the lock
            order.append(name)
            return done

        return background(WriteTurns(str(db), 30_000).begin, conns[name], run, name=name)

    holder.execute("BEGIN IMMEDIATE")
    first = asking("first")
    _until(asked["first"].is_set)
    waiter = asking("waiter")
    _until(lambda: observer.someone_waits() and len(order) == 0)
    holder.execute("COMMIT")
    first.join(GUARD_S)
    assert order == ["first"]
    later = asking("later")
    _until(asked["waiter"].is_set)  # the waiter asks SQLite now (its turn), while the first holds the lock
    conns["first"].execute("COMMIT")
    waiter.join(GUARD_S)
    conns["waiter"].execute("COMMIT")
    later.join(GUARD_S)
    conns["later"].execute("COMMIT")
    assert order == ["first", "waiter", "later"]


def test_one_turns_object_per_file_and_process(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = turns_for(str(db), 30_000)
    assert turns_for(str(db), 30_000) is here
    monkeypatch.setattr(turns_module.os, "getpid", lambda: -1)  # as a forked child sees itself
    assert turns_for(str(db), 30_000) is not here
