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

import random
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from furnace.errors import StoreError

_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_migrated: set[str] = set()
_migrate_lock = threading.Lock()


def _is_lock_error(err: BaseException) -> bool:
    text = str(err).lower()
    return "lock" in text and ("could not set" in text or "conflicting" in text or "lock on file" in text)


def migrations() -> list[tuple[int, str, str]]:
    """All shipped migrations as (version, name, sql), in order."""
    found = []
    for entry in resources.files("furnace.adapters").joinpath("migrations").iterdir():
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
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=read_only and self.path.exists())
                break
            except duckdb.Error as err:
                if not _is_lock_error(err) or time.monotonic() > deadline:
                    raise StoreError(f"cannot open {self.path.name}: {_first_line(err)}") from None
                self.lock_retries += 1
                time.sleep(delay * (0.5 + self._rng.random()))
                delay = min(delay * 2, 0.5)
        try:
            yield con
        finally:
            con.close()

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

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[tuple]:
        """Run one read statement and return all rows."""
        with self.connect() as con:
            return con.execute(sql, params or []).fetchall()

    def query_dicts(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one read statement and return rows as dicts."""
        with self.connect() as con:
            cur = con.execute(sql, params or [])
            cols = [d[0] for d in cur.description or []]
            return [dict(zip(cols, row)) for row in cur.fetchall()]

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


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else err.__class__.__name__
