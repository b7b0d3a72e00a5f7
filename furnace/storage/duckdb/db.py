"""The one owner of the DuckDB file.

DuckDB lets one process hold a read-write connection, which locks every other
process out (read-only ones too). So furnace never keeps a connection open:
:meth:`Database.connect` opens one for a short unit of work and closes it,
retrying the lock error with jittered exponential backoff. Never hold a
connection across a model call, a flow or a Streamlit rerun.

Schema: numbered SQL files in ``migrations/`` (``0001_name.sql`` ...), applied
in order inside a transaction and recorded in ``schema_version``.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from furnace.domain.errors import StoreError

_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_migrated: set[str] = set()
_migrate_lock = threading.Lock()
CONFLICT_RETRIES = 5
T = TypeVar("T")

# Fair turns between processes. DuckDB frees the file only when a process has no
# connection open; a busy multi-threaded writer (an experiment) almost never gets
# there, so a waiting process (the app) could retry for its whole timeout. A
# process that meets the lock announces itself with a marker file
# ``<db>.wait-<pid>`` (refreshed while it waits); a process about to open a
# connection while it has none open, and seeing another's fresh marker, holds
# back briefly so its open count can drop to zero and the waiter gets its turn.
WAIT_MARKER_TTL_S = 2.0
YIELD_MAX_S = 1.0
_open_lock = threading.Lock()
_open: dict[str, int] = {}


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


class Database:
    """Short-lived connections to one DuckDB file, with lock retry and migrations."""

    def __init__(
        self,
        path: Path | str,
        *,
        lock_timeout_s: float = 30.0,
        rng: random.Random | None = None,
        migrate: bool = True,
    ) -> None:
        self.path = Path(path).resolve()
        self.lock_timeout_s = lock_timeout_s
        self._rng = rng or random.Random()
        self.lock_retries = 0  # observable for tests and benchmarks
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if migrate:
            self.migrate()

    # --- connections -----------------------------------------------------

    @contextmanager
    def connect(self, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """Open a connection for one short unit of work; retries the lock error."""
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.01
        self._give_way()
        marker = self.path.with_name(f"{self.path.name}.wait-{os.getpid()}")
        announced = False
        try:
            while True:
                try:
                    con = duckdb.connect(str(self.path), read_only=read_only and self.path.exists())
                    break
                except duckdb.Error as err:
                    if not _is_lock_error(err) or time.monotonic() > deadline:
                        raise StoreError(f"cannot open {self.path.name}: {_first_line(err)}") from None
                    self.lock_retries += 1
                    _touch(marker)
                    announced = True
                    time.sleep(delay * (0.5 + self._rng.random()))
                    delay = min(delay * 2, 0.1)  # short: a yielding holder leaves only a brief window
        finally:
            if announced:
                marker.unlink(missing_ok=True)
        key = str(self.path)
        with _open_lock:
            _open[key] = _open.get(key, 0) + 1
        try:
            yield con
        finally:
            con.close()
            with _open_lock:
                _open[key] -= 1

    def _give_way(self) -> None:
        """Hold back (at most YIELD_MAX_S) while another process waits and this one has nothing open."""
        until = time.monotonic() + YIELD_MAX_S
        while time.monotonic() < until:
            with _open_lock:
                if _open.get(str(self.path), 0):
                    return  # our own connections hold the file: waiting would not free it
            if not _other_waiter(self.path):
                return
            time.sleep(0.01)

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection inside BEGIN/COMMIT; rolls back on any error."""
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            else:
                con.execute("COMMIT")

    def write(self, work: Callable[[duckdb.DuckDBPyConnection], T], *, retries: int = CONFLICT_RETRIES) -> T:
        """Run ``work`` in one transaction, retrying when another thread of this process
        committed a conflicting write first (DuckDB's optimistic concurrency)."""
        for attempt in range(retries + 1):
            try:
                with self.transaction() as con:
                    return work(con)
            except (duckdb.TransactionException, duckdb.ConstraintException) as err:
                if attempt == retries:
                    raise StoreError(
                        f"write conflict persisted after {attempt + 1} tries: {_first_line(err)}"
                    ) from None
                time.sleep(0.005 * (attempt + 1))
        raise AssertionError("unreachable")

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[tuple]:
        """Run one read statement and return all rows."""
        with self.connect() as con:
            return con.execute(sql, params or []).fetchall()

    def query_dicts(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one read statement and return rows as dicts."""
        with self.connect() as con:
            cur = con.execute(sql, params or [])
            cols = [d[0] for d in cur.description or []]
            return [dict(zip(cols, row, strict=False)) for row in cur.fetchall()]

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        """Run one write statement in its own transaction."""
        with self.transaction() as con:
            con.execute(sql, params or [])

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
                for version, name, sql in migrations():
                    if version in done:
                        continue
                    try:
                        con.execute(sql)
                    except duckdb.Error as err:
                        raise StoreError(f"migration {version:04d}_{name} failed: {_first_line(err)}") from None
                    con.execute(
                        "INSERT INTO schema_version (version, name) VALUES (?, ?) ON CONFLICT DO NOTHING",
                        [version, name],
                    )
                    current = version
            _migrated.add(key)
            return current


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
