"""Arrival order: the turns of the processes writing one SQLite file.

SQLite lets one writer in at a time (``BEGIN IMMEDIATE``) and leaves the others to its busy handler,
which sleeps and tries again (1, 2, 5, 10, 15, 20, 25 ms, ...). A process that writes back to back --
an experiment writes a ledger row and a cache entry per model call, and its threads hand this
process's turn to one another within microseconds (:mod:`furnace.storage.sql.db`) -- then takes the
lock again and again while another process sleeps through the gaps: that process waits behind many
transactions instead of one (``python -m bench waits`` counts them).

So the processes asking for the lock go in the order they asked. Each takes a **ticket**: the system's
monotonic clock in nanoseconds when it asks (one clock for every process on the machine), held as a
write lock on that byte of the file's ``-waiters`` companion from before its first ``BEGIN IMMEDIATE``
until it is in. It tries ``BEGIN IMMEDIATE`` only once no earlier ticket is held (a read lock over
every byte before its own can be had: it is let go at once), asking again every 0.1 ms, doubling up to
1 ms, until the busy timeout (then SQLite's "database is locked" is raised, as before). A waiter then
waits behind the transaction it found and those of processes that asked before it, never behind one
that asked after it -- in particular not behind the next transaction of a process it let go first. An
earlier ticket holds it back for at most :data:`DEFER_MAX_S` (a process stopped with Ctrl-Z while
asking holds no one up for longer). A process that dies lets its ticket go with it.

The locks are open file description locks (``F_OFD_SETLK``, Linux), which belong to the open file as
``flock`` does, so two :class:`WriteTurns` of one process meet as two processes' do (the tests rely on
it); elsewhere they are POSIX record locks (``lockf``), which belong to the process: the same between
processes. The cost on the path with no one waiting: three ``fcntl`` calls and two ``PRAGMA
busy_timeout`` per write transaction (~10 µs). Measured with ``python -m bench waits`` (docs/benchmarks.md).

One :class:`WriteTurns` per file and process (a forked child opens the companion again). In one process
only the thread holding the process's turn to write (:mod:`furnace.storage.sql.db`) is ever here, so
one process holds at most one ticket.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sqlite3
import struct
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import DBAPIError

from furnace.domain.threads import PerKey

SUFFIX = "-waiters"
DEFER_MAX_S = 1.0  # the longest an earlier ticket holds a writer back
_SQLITE_BUSY = 5
_EVERY_BYTE = 1 << 62  # the length of a lock over every ticket
_OFD = hasattr(fcntl, "F_OFD_SETLK")


def _busy(err: BaseException) -> bool:
    """Whether ``err`` (the driver's, or SQLAlchemy's around it) is SQLite's "database is locked"."""
    orig = err.orig if isinstance(err, DBAPIError) else err
    return isinstance(orig, sqlite3.OperationalError) and orig.sqlite_errorcode & 0xFF == _SQLITE_BUSY


def _lock(fd: int, kind: int, start: int, length: int) -> bool:
    """Take (``F_WRLCK``, ``F_RDLCK``) or let go (``F_UNLCK``) the bytes ``start .. start + length`` of ``fd``
    without waiting; False when another open file (another process) holds a lock in the way."""
    try:
        if _OFD:  # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for these locks)
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", kind, os.SEEK_SET, start, length, 0))
        else:
            how = {fcntl.F_WRLCK: fcntl.LOCK_EX, fcntl.F_RDLCK: fcntl.LOCK_SH}.get(kind, fcntl.LOCK_UN)
            fcntl.lockf(fd, how | (fcntl.LOCK_NB if how != fcntl.LOCK_UN else 0), length, start, os.SEEK_SET)
    except OSError as err:
        if err.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


class WriteTurns:
    """This process's side of the arrival-order turns on one SQLite file (see the module docstring)."""

    def __init__(self, database: str, busy_timeout_ms: int) -> None:
        self.path = database + SUFFIX
        self.busy_timeout_ms = busy_timeout_ms
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._ticket: int | None = None  # while this process asks

    def _free(self, start: int, length: int) -> bool:
        """Whether no other process holds a ticket in ``start .. start + length`` (a read lock, let go at
        once: never over this process's own ticket, which it would replace)."""
        if not _lock(self._fd, fcntl.F_RDLCK, start, length):
            return False
        _lock(self._fd, fcntl.F_UNLCK, start, length)
        return True

    def _free_before(self, ticket: int) -> bool:
        """Whether no other process holds a ticket before ``ticket``."""
        return self._free(0, ticket)

    def someone_waits(self) -> bool:
        """Whether another process is asking for the lock now (holds a ticket)."""
        mine = self._ticket
        if mine is None:
            return not self._free(0, _EVERY_BYTE)
        return not (self._free(0, mine) and self._free(mine + 1, _EVERY_BYTE))

    def _take_ticket(self) -> int:
        """This process's place in line: the monotonic clock's nanoseconds now, its byte locked."""
        while True:
            ticket = time.monotonic_ns()
            if _lock(self._fd, fcntl.F_WRLCK, ticket, 1):
                self._ticket = ticket
                return ticket
            time.sleep(0)  # that byte is another's, or under another's read lock looking along the line: later

    def begin(self, driver: Any, run: Callable[[str], Any] | None = None) -> None:
        """``BEGIN IMMEDIATE`` on ``driver`` (a ``sqlite3`` connection) in this process's turn: after the
        processes that asked before it, then until it is in. ``run`` executes the ``BEGIN`` (by default
        ``driver.execute``; SQLAlchemy's connection passes its own, so the statement is seen and counted
        as before); the pragmas go to the driver. Raises SQLite's "database is locked" after the busy
        timeout, as SQLite's own busy handler does."""
        run = run or driver.execute
        ticket = self._take_ticket()
        try:
            driver.execute("PRAGMA busy_timeout=0")
            now = time.monotonic()
            deadline, queued_until, pause = now + self.busy_timeout_ms / 1000, now + DEFER_MAX_S, 0.0001
            while True:
                now = time.monotonic()
                if now >= queued_until or now >= deadline or self._free_before(ticket):
                    try:
                        run("BEGIN IMMEDIATE")
                        return
                    except Exception as err:
                        if not _busy(err) or time.monotonic() >= deadline:  # past the busy timeout: SQLite's answer
                            raise
                time.sleep(pause)
                pause = min(pause * 2, 0.001)
        finally:
            _lock(self._fd, fcntl.F_UNLCK, ticket, 1)
            self._ticket = None
            driver.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")


_TURNS: PerKey[tuple[str, int, int], WriteTurns] = PerKey(lambda key: WriteTurns(key[0], key[2]))


def turns_for(database: str, busy_timeout_ms: int) -> WriteTurns:
    """The turns of the SQLite file ``database`` (a path) for this process."""
    return _TURNS.get((database, os.getpid(), busy_timeout_ms))
