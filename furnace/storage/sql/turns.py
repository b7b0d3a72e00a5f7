"""Waiters first: the turns of the processes writing one SQLite file.

SQLite lets one writer in at a time (``BEGIN IMMEDIATE``) and leaves the others to its busy handler,
which sleeps and tries again (1, 2, 5, 10, 15, 20, 25 ms, ...). A process that writes back to back --
an experiment writes a ledger row and a cache entry per model call, and its threads hand this
process's turn to one another within microseconds (:mod:`furnace.storage.sql.db`) -- then takes the
lock again and again while another process sleeps through the gaps: that process waits behind many
transactions instead of one (``python -m bench waits`` counts them).

So a process asking for the lock says so, and the others let it go first:

- **asking**, a process holds a shared ``flock`` on the file's ``-waiters`` companion from just before
  its first ``BEGIN IMMEDIATE`` until it is in, asking again every 0.1 ms, doubling up to 1 ms, until
  the busy timeout (then SQLite's "database is locked" is raised, as before);
- **before it asks**, a process tries an exclusive ``flock`` on that companion without blocking (let go
  at once). When it cannot have it, someone is asking: it tries again (after 0.2 ms, doubling up to
  every 2 ms) until no one is, at most :data:`DEFER_MAX_S` (a process stopped with Ctrl-Z while asking
  holds no one up for longer), and only then asks itself.

A waiter then waits behind the transaction it found and, at worst, those of processes that were
waiting already -- never behind a stream of new ones. The cost on the path with no one waiting: four
``flock`` calls and two ``PRAGMA busy_timeout`` per write transaction (~13 µs); a writer that checks
during another's few microseconds of asking may let it go first for 0.2 ms it did not need.
Measured with ``python -m bench waits`` (docs/benchmarks.md).

One :class:`WriteTurns` per file and process (a forked child opens the companion again: a ``flock``
belongs to the open file, which a fork shares). In one process only the thread holding the process's
turn to write (:mod:`furnace.storage.sql.db`) is ever here, so the shared and exclusive locks of one
process never meet on its one open file.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import DBAPIError

from furnace.domain.threads import PerKey

SUFFIX = "-waiters"
DEFER_MAX_S = 1.0  # the longest a writer lets waiters go first
_SQLITE_BUSY = 5


def _busy(err: BaseException) -> bool:
    """Whether ``err`` (the driver's, or SQLAlchemy's around it) is SQLite's "database is locked"."""
    orig = err.orig if isinstance(err, DBAPIError) else err
    return isinstance(orig, sqlite3.OperationalError) and orig.sqlite_errorcode & 0xFF == _SQLITE_BUSY


class WriteTurns:
    """This process's side of the waiters-first turns on one SQLite file (see the module docstring)."""

    def __init__(self, database: str, busy_timeout_ms: int) -> None:
        self.path = database + SUFFIX
        self.busy_timeout_ms = busy_timeout_ms
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def someone_waits(self) -> bool:
        """Whether another process is waiting for the lock now (the exclusive lock is let go at once)."""
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        return False

    def defer(self) -> None:
        """Let the processes waiting now go first (at most :data:`DEFER_MAX_S`)."""
        if not self.someone_waits():
            return
        deadline, pause = time.monotonic() + DEFER_MAX_S, 0.0002
        while time.monotonic() < deadline:
            time.sleep(pause)
            if not self.someone_waits():
                return
            pause = min(pause * 2, 0.002)

    def begin(self, driver: Any, run: Callable[[str], Any] | None = None) -> None:
        """``BEGIN IMMEDIATE`` on ``driver`` (a ``sqlite3`` connection) in this process's turn: after the
        waiters, then as a waiter itself until it is in. ``run`` executes the ``BEGIN`` (by default
        ``driver.execute``; SQLAlchemy's connection passes its own, so the statement is seen and counted
        as before); the pragmas go to the driver. Raises SQLite's "database is locked" after the busy
        timeout, as SQLite's own busy handler does."""
        run = run or driver.execute
        self.defer()
        # announced before the first try, so a process that commits while this one finds the lock taken
        # already sees it waiting (announced after a failed try, its next transaction could slip in between)
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        driver.execute("PRAGMA busy_timeout=0")
        try:
            deadline, pause = time.monotonic() + self.busy_timeout_ms / 1000, 0.0001
            while True:
                try:
                    run("BEGIN IMMEDIATE")
                    return
                except Exception as err:
                    if not _busy(err) or time.monotonic() >= deadline:
                        raise
                time.sleep(pause)
                pause = min(pause * 2, 0.001)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            driver.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")


_TURNS: PerKey[tuple[str, int, int], WriteTurns] = PerKey(lambda key: WriteTurns(key[0], key[2]))


def turns_for(database: str, busy_timeout_ms: int) -> WriteTurns:
    """The turns of the SQLite file ``database`` (a path) for this process."""
    return _TURNS.get((database, os.getpid(), busy_timeout_ms))
