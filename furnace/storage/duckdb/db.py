"""An old home's ``furnace.duckdb``, opened by one process to move its records into the live store.

Before the relational store (SQLite in the home, or PostgreSQL; docs/store.md), furnace kept its
records in a DuckDB file. :class:`Database` opens such a file read-write in this process (DuckDB
lets one process hold it), brings it to the last DuckDB schema with the numbered SQL files in
``migrations/`` (``0001_name.sql`` ..., applied in order inside one transaction and recorded in
``schema_version``, the keyed-seal upgrade of 0016 included), so that
:func:`furnace.storage.migrate.copy_home` reads one known schema whatever release wrote the home.
The move reads a copy (:func:`opened_copy`): the home's file is kept byte for byte.
"""

from __future__ import annotations

import importlib
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from furnace.domain.errors import StoreError
from furnace.storage.seals import Sealer, sealer_for

_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# migration number -> the module whose ``upgrade(db)`` runs after its SQL (same transaction). Named, not
# imported: the upgrade imports this module.
_UPGRADES = {16: "furnace.storage.duckdb.reseal"}
DAMAGED_HINT = " (if the file is damaged: truncated, or not a furnace database, restore a backup or move it aside)"


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
    """One DuckDB file held open by this process (one thread at a time), at the last DuckDB schema."""

    def __init__(
        self, path: Path | str, *, migrate: bool = True, seal_key: str | None = None, home_file: Path | None = None
    ) -> None:
        """Open ``path`` (created when missing: the tests build an old home this way) and, with
        ``migrate``, apply the pending migrations. StoreError when another process holds the file or
        it is not a DuckDB database. ``home_file``: the home's file when ``path`` is a copy of it
        (:func:`opened_copy`): messages name it, and the seal key is read from its folder."""
        file = Path(path).resolve()
        self.path = home_file.resolve() if home_file is not None else file
        self._seal_key = seal_key  # FURNACE_SEAL_KEY; else the key file next to the database
        file.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con: duckdb.DuckDBPyConnection | None = duckdb.connect(str(file))
        except duckdb.Error as err:
            raise StoreError(f"cannot open {self.path.name}: {_first_line(err)}{DAMAGED_HINT}") from None
        self._in_tx = False
        if migrate:
            self.migrate()

    @cached_property
    def sealer(self) -> Sealer:
        """The keyed seal of this file's records (its key read, or created, on first use)."""
        return sealer_for(self.path.parent, self._seal_key)

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise StoreError(f"{self.path.name} is closed")
        return self._con

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The file's connection."""
        yield self.con

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """BEGIN/COMMIT (ROLLBACK on an error); a nested call joins the open transaction."""
        con = self.con
        if self._in_tx:
            yield con
            return
        con.execute("BEGIN TRANSACTION")
        self._in_tx = True
        try:
            yield con
        except BaseException:
            with suppress(duckdb.Error):  # the failed statement may already have ended the transaction
                con.execute("ROLLBACK")
            raise
        else:
            con.execute("COMMIT")
        finally:
            self._in_tx = False

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run one read statement and return all rows."""
        try:
            return self.con.execute(sql, params or []).fetchall()
        except (duckdb.IOException, duckdb.SerializationException) as err:  # the file, not the query
            raise StoreError(f"cannot use {self.path.name}: {_first_line(err)}{DAMAGED_HINT}") from None

    def query_dicts(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one read statement and return rows as dicts."""
        cur = self.con.execute(sql, params or [])
        cols = [d[0] for d in cur.description or []]
        return [dict(zip(cols, row, strict=False)) for row in cur.fetchall()]

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        """Run one write statement (in the open transaction, if any)."""
        self.con.execute(sql, params or [])

    def close(self) -> None:
        """Let go of the file (another process may open it from now on)."""
        con, self._con = self._con, None
        if con is not None:
            with suppress(duckdb.Error):  # e.g. the folder was removed under us (temp dirs)
                con.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- schema ----------------------------------------------------------

    def schema_version(self) -> int:
        rows = self.query("SELECT coalesce(max(version), 0) FROM schema_version")
        return int(rows[0][0])

    def migrate(self) -> int:
        """Apply pending migrations in one transaction; returns the schema version."""
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
        return current


@contextmanager
def opened_copy(path: Path, *, seal_key: str | None = None) -> Iterator[Database]:
    """The home's DuckDB file ``path``, copied (with its write-ahead log) into a temporary folder and opened
    there at the last DuckDB schema, so the home's file stays byte for byte what its release wrote (that
    release can still open it). StoreError when another process holds ``path``."""
    path = Path(path).resolve()
    try:
        duckdb.connect(str(path), read_only=True).close()  # DuckDB's lock: no process is writing it now
    except duckdb.Error as err:
        raise StoreError(f"cannot open {path.name}: {_first_line(err)}{DAMAGED_HINT}") from None
    with tempfile.TemporaryDirectory(prefix="furnace-move-") as folder:
        copy = Path(folder) / path.name
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            shutil.copyfile(wal, copy.with_name(wal.name))
        db = Database(copy, seal_key=seal_key, home_file=path)
        try:
            yield db
        finally:
            db.close()


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else err.__class__.__name__
