"""The one owner of the DuckDB file: one held instance per process, one cursor per unit of work.

DuckDB lets one process hold a read-write connection, which locks every other
process out (read-only ones too). Opening an instance costs 15-100 ms, so a
process *holds* its instance while it is wanted and *releases* it when
another process asks for a turn:

- **Units of work.** :meth:`Database.unit` hands the calling thread one cursor
  on the held instance; every store method called on that thread inside the
  unit joins it (:meth:`connect`, :meth:`query`, ...), and
  :meth:`transaction` inside a unit joins the unit's open transaction, so a
  unit that writes commits once. A store method called outside a unit is a
  unit of its own.
- **Hold while wanted.** Between units the instance stays open; it is closed
  after ``idle_release_s`` without a unit, at :meth:`close`, and at exit.
- **Release when asked.** A process that meets the lock announces itself with
  a marker file ``<db>.wait-<pid>`` (refreshed while it waits). The holder's
  monitor sees it within ``POLL_S`` and, once it has had the file for ``TURN_S``
  (so each side of a busy pair gets work done per turn), drains: units already running finish,
  new ones wait (at most ``lock_timeout_s``), the instance closes, and the
  holder then holds back while the waiter's marker is fresh so the waiter gets
  its turn. The waiter shows who it waits for (``<db>.holder`` names the
  holder's role, e.g. "waiting for the experiment writer…") and gives up with a
  clear error after ``lock_timeout_s``.
- **Bookkeeping behind the wait.** :meth:`Database.write_behind` runs a write
  on the file's background writer after the caller goes on. It reads as if
  written at once: a unit started after the call waits for it, and the file is
  neither released nor closed before it is written. Only for records that a
  crash may lose because a later run redoes them (a revision's processed mark).

See docs/storage.md for the protocol. Schema: numbered SQL files in
``migrations/`` (``0001_name.sql`` ...), applied in order inside a transaction
and recorded in ``schema_version``.
"""

from __future__ import annotations

import atexit
import importlib
import json
import logging
import os
import queue
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar, cast

import duckdb

from furnace.domain.errors import StoreError
from furnace.storage.seals import Sealer, sealer_for
from furnace.storage.sql.db import DAMAGED_HINT

log = logging.getLogger(__name__)

_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# migration number -> the module whose ``upgrade(db)`` runs after its SQL. Named, not imported: an
# upgrade reads through the stores, which import this module.
_UPGRADES = {16: "furnace.storage.duckdb.reseal"}
_migrated: set[str] = set()
_migrate_lock = threading.Lock()
CONFLICT_RETRIES = 5
T = TypeVar("T")

WAIT_MARKER_TTL_S = 2.0  # a waiter's marker counts while younger than this (it refreshes it while waiting)
YIELD_MAX_S = 1.0  # a process that just released holds back at most this long for a waiter
POLL_S = 0.05  # how often a holder looks for waiters
IDLE_RELEASE_S = 2.0  # a held instance with no unit for this long is closed
TURN_S = 0.3  # a process that just got the file keeps it at least this long (when it has work) before draining
NOTICE_AFTER_S = 0.3  # a wait longer than this is shown
BEHIND_EXIT_S = 30.0  # how long the exit waits for writes behind (each is one short statement)

_role = "furnace process"


def set_role(role: str) -> None:
    """Name this process in waiting messages of others ("the experiment writer", "the app", ...)."""
    global _role
    _role = role


def _is_lock_error(err: BaseException) -> bool:
    text = str(err).lower()
    return "lock" in text and ("could not set" in text or "conflicting" in text or "lock on file" in text)


def migrations() -> list[tuple[int, str, str]]:
    """All shipped migrations as (version, name, sql), in order."""
    found = []
    for entry in resources.files("furnace.storage.duckdb").joinpath("migrations").iterdir():
        m = _MIGRATION_NAME.match(entry.name)
        if m:
            found.append((int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(versions) != len(set(versions)):
        raise StoreError(f"duplicate migration numbers in {versions}")
    return found


def _stderr_notice(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


_WRITE_WORDS = ("INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "COPY", "ATTACH")


def _reads_only(query: str) -> bool:
    """True for a statement that cannot change the file: a SELECT, or a WITH … SELECT naming no write."""
    head = query.lstrip()[:6].upper()
    if head == "SELECT":
        return True
    if head.startswith("WITH"):
        upper = query.upper()
        return not any(word in upper for word in _WRITE_WORDS)
    return False


class _Cursor:
    """A unit's cursor; counts the statements it runs (``Database.statements``, for tests and benchmarks)."""

    __slots__ = ("_con", "_holder")

    def __init__(self, con: duckdb.DuckDBPyConnection, holder: _Holder) -> None:
        self._con = con
        self._holder = holder

    def execute(self, query: str, parameters: object = None) -> duckdb.DuckDBPyConnection:
        self._holder.statements += 1
        if _reads_only(query):
            return self._con.execute(query, parameters)
        # The epoch moves before a write (a reader starting now looks again next time) and after it
        # (a reader that took the epoch while it ran, and read the old rows, looks again too).
        self._holder.epoch += 1
        try:
            return self._con.execute(query, parameters)
        finally:
            self._holder.epoch += 1

    def executemany(self, query: str, parameters: object = None) -> duckdb.DuckDBPyConnection:
        self._holder.statements += len(parameters) if isinstance(parameters, list) else 1  # one per row
        self._holder.epoch += 1
        try:
            return self._con.executemany(query, parameters)
        finally:
            self._holder.epoch += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


class _Unit:
    """One thread's unit of work: its cursor, and its transaction (begun at the first write when wanted)."""

    __slots__ = ("con", "in_tx", "one_tx")

    def __init__(self, con: duckdb.DuckDBPyConnection, one_tx: bool) -> None:
        self.con = con
        self.in_tx = False
        self.one_tx = one_tx


class _Holder:
    """The process-wide state of one DuckDB file: the held instance and the units using it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cond = threading.Condition()
        self.con: duckdb.DuckDBPyConnection | None = None
        self.active = 0
        self.draining = False
        self.last_used = 0.0
        self.released_at = 0.0
        self.opened_at = 0.0
        self.local = threading.local()
        self.idle_release_s = IDLE_RELEASE_S
        self.opens = 0  # instance opens (observable for tests and benchmarks)
        self.lock_retries = 0
        self.waits = 0  # how many acquisitions had to wait for another process
        self.statements = 0  # statements run on unit cursors (observable for tests and benchmarks)
        # Bumped at every open and close of the file (another process may write while it is not held)
        # and around every statement that may write: while it is unchanged, nothing in the file changed.
        self.epoch = 0
        # Writes behind (Database.write_behind): queued, not yet committed; their thread starts lazily.
        self.behind: queue.SimpleQueue[tuple[Database, Callable[[duckdb.DuckDBPyConnection], object], str]] = (
            queue.SimpleQueue()
        )
        self.behind_pending = 0
        self.behind_thread: threading.Thread | None = None

    @property
    def marker(self) -> Path:
        return self.path.with_name(f"{self.path.name}.wait-{os.getpid()}")

    @property
    def holder_file(self) -> Path:
        return self.path.with_name(f"{self.path.name}.holder")

    def current(self) -> _Unit | None:
        return getattr(self.local, "unit", None)

    def on_behind_thread(self) -> bool:
        return getattr(self.local, "behind", False)

    def settle(self, timeout: float) -> bool:
        """Wait until every write behind put so far is written (caller holds ``cond``); False on timeout."""
        until = time.monotonic() + timeout
        while self.behind_pending and not self.on_behind_thread():
            left = until - time.monotonic()
            if left <= 0:
                return False
            self.cond.wait(left)
        return True

    def run_behind(self) -> None:
        """The background writer: the writes behind, one unit each, in the order put."""
        self.local.behind = True
        while True:
            database, work, what = self.behind.get()
            try:
                database.write_one(work)
            except Exception as err:  # noqa: BLE001 - bookkeeping a later run redoes; say so, go on
                log.warning("%s not written to %s: %s", what, self.path.name, err)
            with self.cond:
                self.behind_pending -= 1
                if self.behind_pending == 0:
                    if self.draining and self.active == 0:
                        self.close_now()
                    self.cond.notify_all()

    def close_now(self) -> None:
        """Close the instance (caller holds ``cond`` and made sure no unit is active)."""
        con, self.con = self.con, None
        self.draining = False
        self.released_at = time.monotonic()
        self.epoch += 1  # not held: another process may write from now on (and the next open moves it again)
        if con is not None:
            try:
                con.close()
            except duckdb.Error as err:  # e.g. the folder was removed under us (temp dirs)
                log.debug("closing %s: %s", self.path.name, err)
            _remove_own(self.holder_file)
        self.cond.notify_all()

    def monitor(self) -> None:
        """Release the instance when another process waits, or after the idle timeout."""
        while True:
            time.sleep(POLL_S)
            wanted = _other_waiter(self.path)
            with self.cond:
                if self.con is None:
                    return
                if wanted and time.monotonic() - self.opened_at >= TURN_S:
                    self.draining = True
                idle = time.monotonic() - self.last_used > self.idle_release_s
                if self.active == 0 and self.behind_pending == 0 and (self.draining or idle):
                    self.close_now()
                    return


_holders: dict[str, _Holder] = {}
_holders_lock = threading.Lock()


def _holder(path: Path) -> _Holder:
    with _holders_lock:
        found = _holders.get(str(path))
        if found is None:
            found = _holders[str(path)] = _Holder(path)
        return found


def _close_all() -> None:
    for h in list(_holders.values()):
        with h.cond:
            h.settle(BEHIND_EXIT_S)  # the writes behind are written before the process lets go of the file
            if h.active == 0:
                h.close_now()


def _forget_after_fork() -> None:
    # a forked child must not touch the parent's instance: it opens its own
    for h in _holders.values():
        h.con, h.active, h.draining, h.cond, h.local = None, 0, False, threading.Condition(), threading.local()
        h.behind, h.behind_pending, h.behind_thread = queue.SimpleQueue(), 0, None  # the parent writes its own


atexit.register(_close_all)
os.register_at_fork(after_in_child=_forget_after_fork)


class Database:
    """Units of work on one DuckDB file: a held instance, cursors per unit, lock turns, migrations."""

    def __init__(
        self,
        path: Path | str,
        *,
        lock_timeout_s: float = 30.0,
        rng: random.Random | None = None,
        migrate: bool = True,
        on_wait: Callable[[str], None] | None = None,
        idle_release_s: float | None = None,
        seal_key: str | None = None,
    ) -> None:
        self.path = Path(path).resolve()
        self._seal_key = seal_key  # FURNACE_SEAL_KEY; else the key file next to the database (seal_key.py)
        self.lock_timeout_s = lock_timeout_s
        self._rng = rng or random.Random()
        self.on_wait = on_wait or _stderr_notice
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._holder = _holder(self.path)
        if idle_release_s is not None:
            self._holder.idle_release_s = idle_release_s
        if migrate:
            self.migrate()

    @cached_property
    def sealer(self) -> Sealer:
        """The keyed seal of this file's records (its key read, or created, on first use)."""
        return sealer_for(self.path.parent, self._seal_key)

    @property
    def lock_retries(self) -> int:
        """Times this process met the other process's lock (observable for tests and benchmarks)."""
        return self._holder.lock_retries

    @property
    def opens(self) -> int:
        """Times this process opened the DuckDB instance."""
        return self._holder.opens

    @property
    def waits(self) -> int:
        """Units that had to wait for another process to release the file."""
        return self._holder.waits

    @property
    def epoch(self) -> int:
        """Changes when the file may have changed: at every open and close (another process may write
        while this one does not hold it) and before and after every statement that may write. Equal
        epochs mean the same content, so a result derived from the file (a verification, a latest
        version) can be reused."""
        return self._holder.epoch

    @property
    def statements(self) -> int:
        """Statements this process ran on the file (BEGIN and COMMIT included), a cost that does not
        depend on the machine's load: tests and benchmarks count them per unit of work."""
        return self._holder.statements

    @property
    def idle_s(self) -> float:
        """Seconds since this process's last unit on the file ended (0 while one runs)."""
        h = self._holder
        return 0.0 if h.active else max(0.0, time.monotonic() - h.last_used)

    @property
    def held(self) -> bool:
        """True while this process holds the file open."""
        return self._holder.con is not None

    @property
    def in_transaction(self) -> bool:
        """True while this thread's unit has (or will have) an open transaction."""
        unit = self._holder.current()
        return unit is not None and (unit.in_tx or unit.one_tx)

    # --- units of work ---------------------------------------------------

    @contextmanager
    def unit(self, *, one_transaction: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """One unit of work on this thread: every store call inside shares its cursor.

        With ``one_transaction``, the unit's first write begins a transaction that every
        later write joins and that commits when the unit ends (rolls back on an error);
        reads before it run without one. A nested unit joins the outer one.
        """
        h = self._holder
        current = h.current()
        if current is not None:
            if one_transaction and not current.one_tx and not current.in_tx:
                current.one_tx = True
                try:
                    yield current.con
                except BaseException:
                    if current.in_tx:
                        current.in_tx = False
                        _quiet_rollback(current.con)
                    raise
                finally:
                    current.one_tx = False
                if current.in_tx:
                    current.in_tx = False
                    current.con.execute("COMMIT")
                return
            yield current.con
            return
        cursor = self._acquire()
        unit = _Unit(cursor, one_transaction)
        h.local.unit = unit
        try:
            yield cursor
            if unit.in_tx:
                unit.in_tx = False
                cursor.execute("COMMIT")
        except (duckdb.IOException, duckdb.SerializationException) as err:  # the file, not the query
            raise StoreError(f"cannot use {self.path.name}: {_first_line(err)}{DAMAGED_HINT}") from None
        finally:
            h.local.unit = None
            if unit.in_tx:
                _quiet_rollback(cursor)
            with suppress(duckdb.Error):
                cursor.close()
            self._release()

    @contextmanager
    def connect(self, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """The current unit's cursor, or a unit of its own. (``read_only`` is accepted for old callers.)"""
        with self.unit() as con:
            yield con

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """BEGIN/COMMIT on the unit's cursor; joins the unit's transaction when it has one."""
        with self.unit() as con:
            unit = self._holder.current()
            assert unit is not None
            if unit.in_tx:
                yield con
                return
            con.execute("BEGIN TRANSACTION")
            unit.in_tx = True
            if unit.one_tx:  # the unit's one transaction: it commits when the unit ends
                try:
                    yield con
                except BaseException:
                    unit.in_tx = False
                    _quiet_rollback(con)
                    raise
                return
            try:
                yield con
            except BaseException:
                unit.in_tx = False
                _quiet_rollback(con)
                raise
            unit.in_tx = False
            con.execute("COMMIT")

    def write(self, work: Callable[[duckdb.DuckDBPyConnection], T], *, retries: int = CONFLICT_RETRIES) -> T:
        """Run ``work`` in one transaction, retrying when another thread of this process
        committed a conflicting write first (DuckDB's optimistic concurrency). Inside a
        unit's open transaction, ``work`` joins it (the unit's owner handles conflicts)."""
        return self._retrying(work, self.transaction, retries)

    def _retrying(
        self,
        work: Callable[[duckdb.DuckDBPyConnection], T],
        scope: Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]],
        retries: int,
    ) -> T:
        """Run ``work`` in ``scope`` (a transaction, or a unit for one statement), retried on a
        same-process write conflict; inside a unit's open transaction it joins that transaction."""
        current = self._holder.current()
        if current is not None and (current.in_tx or current.one_tx):
            with self.transaction() as con:
                return work(con)
        for attempt in range(retries + 1):
            try:
                with scope() as con:
                    return work(con)
            except (duckdb.TransactionException, duckdb.ConstraintException) as err:
                if attempt == retries:
                    raise StoreError(
                        f"write conflict persisted after {attempt + 1} tries: {_first_line(err)}"
                    ) from None
                time.sleep(0.005 * (attempt + 1))
        raise AssertionError("unreachable")

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run one read statement and return all rows."""
        with self.unit() as con:
            return con.execute(sql, params or []).fetchall()

    def query_dicts(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one read statement and return rows as dicts."""
        with self.unit() as con:
            cur = con.execute(sql, params or [])
            cols = [d[0] for d in cur.description or []]
            return [dict(zip(cols, row, strict=False)) for row in cur.fetchall()]

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        """Run one write statement, atomic on its own (no BEGIN/COMMIT around it) or in the unit's transaction."""
        current = self._holder.current()
        if current is not None and (current.in_tx or current.one_tx):
            with self.transaction() as con:
                con.execute(sql, params or [])
            return
        with self.unit() as con:
            con.execute(sql, params or [])

    def run(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None, *, retries: int = CONFLICT_RETRIES
    ) -> list[tuple[Any, ...]]:
        """Run one write statement and return its rows (``RETURNING``); see :meth:`write_one`."""
        return self.write_one(lambda con: con.execute(sql, params or []).fetchall(), retries=retries)

    def write_one(self, work: Callable[[duckdb.DuckDBPyConnection], T], *, retries: int = CONFLICT_RETRIES) -> T:
        """Like :meth:`write` for ``work`` that runs exactly one write statement.

        One statement is atomic by itself, so outside a unit's transaction it runs without
        BEGIN/COMMIT around it (two statements fewer), retried when another thread of this
        process committed a conflicting write first; inside a unit's transaction it joins it.
        """
        return self._retrying(work, self.unit, retries)

    def write_behind(self, work: Callable[[duckdb.DuckDBPyConnection], object], *, what: str) -> None:
        """Run ``work`` (one write statement, as for :meth:`write_one`) on this file's background
        writer, after the caller goes on: its commit is off the caller's wait.

        In this process it reads as written now: every unit started after this call (on any thread,
        through any ``Database`` of the file) waits for it, and the file is not released to another
        process or closed before it is written (nor does the process exit: ``_close_all``). Only for
        bookkeeping that a later run redoes when a crash loses it: a failure is logged (``what``
        names the record), never raised to the caller, who has gone on."""
        h = self._holder
        with h.cond:
            h.behind_pending += 1
            if h.behind_thread is None:
                h.behind_thread = threading.Thread(target=h.run_behind, name="furnace-behind", daemon=True)
                h.behind_thread.start()
        h.behind.put((self, work, what))

    def close(self) -> None:
        """Release the file now (or, with units still running on other threads, when they end)."""
        h = self._holder
        with h.cond:
            h.settle(self.lock_timeout_s)  # writes behind first: they read as written already
            if h.con is None:
                return
            if h.active == 0:
                h.close_now()
            else:
                h.draining = True

    # --- the held instance -------------------------------------------------

    def _acquire(self) -> duckdb.DuckDBPyConnection:
        h = self._holder
        with h.cond:
            # Read-your-writes: a unit waits for the writes behind put before it (the writer's own don't).
            h.settle(self.lock_timeout_s)
            if h.draining and h.con is not None and not h.on_behind_thread():
                # The file is being handed to another process: new units wait for the close, so the
                # count of running units reaches zero even in a busy multi-threaded writer. Bounded,
                # so a unit that waits for another thread's new unit can never deadlock.
                until = time.monotonic() + self.lock_timeout_s
                while h.draining and h.con is not None and time.monotonic() < until:
                    h.cond.wait(POLL_S)
            if h.con is None:
                self._open()
            assert h.con is not None
            h.active += 1
            h.last_used = time.monotonic()
            return cast(duckdb.DuckDBPyConnection, _Cursor(h.con.cursor(), h))

    def _release(self) -> None:
        h = self._holder
        with h.cond:
            h.active -= 1
            h.last_used = time.monotonic()
            if h.active == 0 and h.draining and h.behind_pending == 0:
                h.close_now()

    def _open(self) -> None:
        """Open the instance (caller holds ``cond``): give way to a waiter, retry the lock, show the wait."""
        h = self._holder
        started = time.monotonic()
        deadline = started + self.lock_timeout_s
        self._give_way()
        delay = 0.01
        announced = shown = False
        try:
            while True:
                try:
                    con = duckdb.connect(str(self.path))
                    break
                except duckdb.Error as err:
                    if not _is_lock_error(err) or time.monotonic() > deadline:
                        who = _holder_role(h.holder_file)
                        hint = f" ({who} held it for {time.monotonic() - started:.0f}s)" if announced else ""
                        if not hint and not _is_lock_error(err):
                            hint = DAMAGED_HINT
                        raise StoreError(f"cannot open {self.path.name}: {_first_line(err)}{hint}") from None
                    h.lock_retries += 1
                    _touch(h.marker)
                    if not announced:
                        h.waits += 1
                    announced = True
                    if not shown and time.monotonic() - started > NOTICE_AFTER_S:
                        shown = True
                        self.on_wait(f"waiting for {_holder_role(h.holder_file)} to release {self.path.name}…")
                    time.sleep(delay * (0.5 + self._rng.random()))
                    delay = min(delay * 2, 0.1)  # short: a releasing holder leaves only a brief window
        finally:
            if announced:
                h.marker.unlink(missing_ok=True)
        h.con = con
        h.opened_at = time.monotonic()
        h.opens += 1
        h.epoch += 1
        h.draining = False
        h.last_used = time.monotonic()
        _write_holder(h.holder_file)
        threading.Thread(target=h.monitor, name=f"furnace-db-{self.path.name}", daemon=True).start()

    def _give_way(self) -> None:
        """Hold back (at most YIELD_MAX_S) after a release while another process's marker is fresh."""
        until = time.monotonic() + YIELD_MAX_S
        while time.monotonic() < until and _other_waiter(self.path):
            time.sleep(0.01)

    # --- schema ----------------------------------------------------------

    def schema_version(self) -> int:
        rows = self.query("SELECT coalesce(max(version), 0) FROM schema_version")
        return int(rows[0][0])

    def migrate(self) -> int:
        """Apply pending migrations; returns the schema version. Safe to call often."""
        key = str(self.path)
        with _migrate_lock:
            if key in _migrated and self.path.exists():
                return -1
            with self.transaction() as con:
                con.execute(
                    "CREATE TABLE IF NOT EXISTS schema_version ("
                    " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL,"
                    " applied_at TIMESTAMP DEFAULT current_timestamp)"
                )
                done = {r[0] for r in con.execute("SELECT version FROM schema_version").fetchall()}
                current = max(done, default=0)
                functions = False
                for version, name, sql in migrations():
                    if version in done:
                        continue
                    if "furnace_" in sql and not functions:  # a migration calling furnace's SQL functions
                        from furnace.storage.duckdb import seal

                        seal.register(con)
                        functions = True
                    try:
                        con.execute(sql)
                        if version in _UPGRADES:  # rows the SQL cannot rewrite (keyed seals), same transaction
                            importlib.import_module(_UPGRADES[version]).upgrade(self)
                    except duckdb.Error as err:
                        raise StoreError(f"migration {version:04d}_{name} failed: {_first_line(err)}") from None
                    con.execute(
                        "INSERT INTO schema_version (version, name) VALUES (?, ?) ON CONFLICT DO NOTHING",
                        [version, name],
                    )
                    current = version
            _migrated.add(key)
            return current


def _quiet_rollback(con: duckdb.DuckDBPyConnection) -> None:
    with suppress(duckdb.Error):  # the failed statement may already have ended the transaction
        con.execute("ROLLBACK")


def _write_holder(path: Path) -> None:
    with suppress(OSError):
        path.write_text(json.dumps({"pid": os.getpid(), "role": _role}), encoding="utf-8")


def _remove_own(path: Path) -> None:
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def _holder_role(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return f"{data.get('role') or 'another process'} (pid {int(data['pid'])})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _touch(marker: Path) -> None:
    with suppress(OSError):  # a read-only folder: no fairness, the retry still works
        marker.touch()


def _other_waiter(path: Path) -> bool:
    """True when another process has a fresh ``<db>.wait-<pid>`` marker next to ``path``."""
    own = f"{path.name}.wait-{os.getpid()}"
    now = time.time()
    try:
        markers = [m for m in path.parent.iterdir() if m.name.startswith(path.name + ".wait-") and m.name != own]
    except OSError:
        return False
    for marker in markers:
        try:
            if now - marker.stat().st_mtime < WAIT_MARKER_TTL_S:
                return True
        except OSError:
            continue
    return False


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else err.__class__.__name__
