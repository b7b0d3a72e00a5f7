"""The relational store's connections: one SQLAlchemy engine per database, one connection per thread.

SQLite (the default, ``$FURNACE_HOME/furnace.sqlite``) runs in WAL mode: readers never wait for a
writer and a writer never waits for readers; writers take turns per transaction (``BEGIN IMMEDIATE``,
so a transaction that will write holds the write lock from its first statement and never fails half
way on an upgrade), waiting at most ``busy_timeout`` for another's commit -- microseconds for the
small transactions furnace writes. ``synchronous=NORMAL``, SQLite's setting for WAL: a commit is
durable against a crash of any process (a SIGKILL loses nothing committed) and the file is never
corrupted; a power loss or an OS crash may roll back the transactions committed since the WAL was last
synced (at a checkpoint). ``FULL`` would sync at every commit: ~0.1 ms of CPU per transaction (~0.17
ms per model call of an experiment, whose call writes its ledger row and answer in one), and the
write lock held through an fsync of 1-60 ms on a loaded machine. PostgreSQL
(``FURNACE_DATABASE_URL=postgresql+psycopg://…``) needs none of this.

Every write is a plain transaction at the point it happens (:meth:`SQLDatabase.transaction`,
:meth:`SQLDatabase.write`). A *unit* (:meth:`SQLDatabase.unit`, entered by
:func:`furnace.storage.store.unit_of_work`) gives every call on the thread one connection and, once it
writes, one transaction that commits when the unit ends (or rolls back on an error).

The schema is migrated on first open by Alembic (``migrations/``), one migration run at a time per
database (SQLite: inside ``BEGIN IMMEDIATE``; PostgreSQL: under an advisory lock).
"""

from __future__ import annotations

import gc
import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, Table, create_engine, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.pool import NullPool
from sqlalchemy.sql.compiler import WARN_LINTING

from furnace.domain.errors import InputError, StoreError
from furnace.domain.guarded import Guarded, serialized
from furnace.domain.threads import PerKey
from furnace.settings import SQLITE_FILE as SQLITE_FILE
from furnace.storage.seals import Sealer, sealer_for
from furnace.storage.sql.turns import WriteTurns, turns_for

if TYPE_CHECKING:
    from furnace.storage.snapshot_files import Base, Written

T = TypeVar("T")
BUSY_TIMEOUT_MS = 30_000
CONFLICT_RETRIES = 5
_MIGRATION_LOCK = 0x0F0A_CE  # PostgreSQL advisory lock id: one migration run at a time
DAMAGED_HINT = " (if the file is damaged: truncated, or not a furnace database, restore a backup or move it aside)"
_SQLITE_DAMAGE = {11, 26}  # SQLITE_CORRUPT ("database disk image is malformed"), SQLITE_NOTADB
_SQLITE_CANTOPEN = 14  # "unable to open database file"
_CANTOPEN_HINT = " (a folder in its place, or no permission to read and write it and its folder)"
_UNREACHABLE_HINT = " (is the server running, and is FURNACE_DATABASE_URL right?)"
_REVISION = text("SELECT version_num FROM alembic_version")
HEAD_REVISION = "0006"  # the newest migration's revision (migrations/versions/; a test holds them equal)


def sqlite_url(home: Path) -> str:
    """The default store of a home: ``furnace.sqlite`` in it."""
    return f"sqlite:///{(home / SQLITE_FILE).resolve()}"


def _sqlite_pragmas(dbapi_con: Any, _record: Any) -> None:
    dbapi_con.isolation_level = None  # the driver opens no transaction on its own: _begin does
    cur = dbapi_con.cursor()
    for pragma in (
        "PRAGMA journal_mode=WAL",
        f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
        "PRAGMA synchronous=NORMAL",  # see the module's docstring
    ):
        cur.execute(pragma)
    cur.close()


_heap_settled = False


def _settle_heap() -> None:
    """Before this process's first write: one full garbage collection, so the first full collection
    a fresh CLI command would otherwise meet inside its one write transaction (50-140 ms while holding
    SQLite's write lock, measured with ``python -m bench waits``) runs before the lock is taken, and
    the next one is as far away as the collector's thresholds put it. Once per process (a flag; racing
    first writers may both collect, which is harmless). ``gc.freeze()`` did the same job and doubled the
    CPU of a long-lived process (the test suite: 73 -> 130 s of CPU on one slice), so it is not used."""
    global _heap_settled
    if not _heap_settled:
        _heap_settled = True
        gc.collect()


def _sqlite_begin(conn: Connection) -> None:
    if conn.info.get("furnace_single_read"):  # one SELECT is its own consistent read in SQLite (see query)
        return
    if not conn.info.get("furnace_write"):
        conn.exec_driver_sql("BEGIN")
        return
    # a migration (once, at a store's first open) may run beside this process's writing threads, outside
    # its turn to write: it never joins the turns, whose flocks assume one asker per process at a time
    turns = None if conn.info.get("furnace_migrate") else _turns(conn.engine)
    _driver_begin(conn.connection.driver_connection, turns, conn.exec_driver_sql)


def _driver_begin(driver: Any, turns: WriteTurns | None, run: Callable[[str], Any] | None = None) -> None:
    """A write transaction on ``driver`` (SQLite's ``sqlite3`` connection), in the arrival-order turns
    unless ``turns`` is None; ``run`` issues the ``BEGIN`` (SQLAlchemy's connection passes its own, so the
    statement is seen and counted; the driver's own by default). Every write transaction begins here:
    ``python -m bench waits`` times it."""
    if turns is None:
        (run or driver.execute)("BEGIN IMMEDIATE")
    else:
        turns.begin(driver, run)


def _driver_end(driver: Any, statement: str) -> None:
    """``COMMIT`` or ``ROLLBACK`` of a driver transaction: SQLite's write lock is free once it returns (a
    hook of its own, as ``_driver_begin``, so ``python -m bench waits`` times the lock held to here)."""
    driver.execute(statement)


def _turns(engine: Engine) -> WriteTurns | None:
    """The arrival-order turns of a SQLite file (:mod:`furnace.storage.sql.turns`); None in memory."""
    database = engine.url.database
    if not database or database == ":memory:":
        return None
    return turns_for(database, BUSY_TIMEOUT_MS)


def _sqlite_damaged(context: ExceptionContext) -> None:
    """A damaged, foreign or unreachable SQLite file is the user's to fix: one :class:`StoreError` naming the
    file, whether it shows when the file opens or at the first read of a missing page."""
    err = context.original_exception
    code = getattr(err, "sqlite_errorcode", 0) & 0xFF
    path = Path(str(context.engine.url.database if context.engine is not None else SQLITE_FILE))
    verb = "open" if context.connection is None else "use"
    if code in _SQLITE_DAMAGE:
        raise StoreError(f"cannot {verb} {path.name}: {_first_line(err)}{DAMAGED_HINT}") from None
    if code == _SQLITE_CANTOPEN:
        raise StoreError(f"cannot open {path}: {_first_line(err)}{_CANTOPEN_HINT}") from None


def _server_unreachable(context: ExceptionContext) -> None:
    """A PostgreSQL server furnace cannot connect to (refused, unknown host, wrong password, no such
    database) is the user's to fix: one :class:`StoreError` naming the store by its URL without the
    password, raised where the connection is made. A failed pre-ping is left to the pool (it reconnects)."""
    if context.connection is not None or context.is_pre_ping:
        return
    where = context.engine.url.render_as_string(hide_password=True) if context.engine is not None else "the store"
    raise StoreError(
        f"cannot connect to the store at {where}: {_first_line(context.original_exception)}{_UNREACHABLE_HINT}"
    ) from None


def _events(engine: Engine) -> None:
    """What furnace hooks into an engine of its store: on SQLite its pragmas, its write turns and the
    damaged-file errors; on PostgreSQL the unreachable-server error."""
    if engine.url.get_backend_name() != "sqlite":
        event.listen(engine, "handle_error", _server_unreachable)
        return
    event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "begin", _sqlite_begin)
    event.listen(engine, "handle_error", _sqlite_damaged)


class _Present(Exception):
    """A row :meth:`SQLDatabase.insert_on_driver` must insert is present: its transaction rolls back."""


class Prepared:
    """One statement compiled once for SQLite's driver (``sqlite3``): its SQL, its parameters in the driver's
    order with the bind conversion of each column's type, and the result conversion of each selected
    column (SQLAlchemy's own processors: a timestamp is stored and read exactly as through SQLAlchemy).
    :meth:`SQLDatabase.driver_query` and :meth:`SQLDatabase.driver_transaction` run it: a model call's
    cache read and its answer's insert, where SQLAlchemy's per-execution work (a connection, a
    transaction object, events, a result) cost several times the driver's own."""

    def __init__(self, db: SQLDatabase, statement: Any) -> None:
        dialect = db.engine.dialect
        compiled = statement.compile(dialect=dialect)
        self.sql = str(compiled)
        self._binds = [
            (name, compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect))
            for name in compiled.positiontup or ()
        ]
        columns = getattr(statement, "selected_columns", ())
        self._results = [c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns]

    def params(self, values: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(values[n] if p is None else p(values[n]) for n, p in self._binds)

    def rows(self, found: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        if not any(self._results):
            return found
        return [tuple(v if p is None else p(v) for p, v in zip(self._results, row, strict=False)) for row in found]


@dataclass
class _Unit:
    conn: Connection
    one_transaction: bool
    open: bool = False  # the unit's transaction has begun (at its first write)
    writing: bool = False  # it holds this process's turn to write (SQLite), until it ends


# This process's open units of work on one database (by its URL's digest), per thread, shared by every
# SQLDatabase on it: a write through one object inside a unit opened through another joins that unit (on
# SQLite, a second connection of the same thread would wait for its own lock).
_UNITS: PerKey[str, threading.local] = PerKey(lambda _: threading.local())
# This process's turn to write one SQLite database: its threads queue here and each is woken as the previous
# write commits, instead of polling SQLite's lock with the busy handler's growing sleeps (other processes
# still wait on the lock itself, up to the busy timeout). Re-entrant: a unit holds it from its first write
# to its end, and the writes inside it take it again.
_WRITERS: PerKey[str, threading.RLock] = PerKey(lambda _: threading.RLock())


class SQLDatabase:
    """One relational database (SQLite file or PostgreSQL server) and this process's connections to it."""

    def __init__(
        self, url: str, *, home: Path, seal_key: str | None = None, migrate: bool = True, echo: bool = False
    ) -> None:
        try:
            self.url = make_url(url)
        except Exception:
            raise InputError(
                "FURNACE_DATABASE_URL is not a database URL (e.g. postgresql+psycopg://user@host/furnace)",
                field="database_url",
            ) from None
        self.home = home
        self._seal_key = seal_key
        digest = hashlib.sha256(url.encode()).hexdigest()  # keyed without the password in clear
        self._local = _UNITS.get(digest)
        self._writer = _WRITERS.get(digest)
        self._last_used = time.monotonic()
        self.on_change: Callable[[], None] | None = None
        """Called by :meth:`snapshot_soon` (the runtime sets it to a background snapshot refresh)."""
        self.dialect = self.url.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise InputError(
                f"FURNACE_DATABASE_URL: furnace stores in SQLite or PostgreSQL, not {self.dialect}",
                field="database_url",
            )
        self._inserts: dict[str, Any] = {}  # insert_if_absent's statements (immutable: shared by threads)
        self._statements: int | None = None  # counted once :attr:`statements` was first read
        self.engine = self._engine(echo)
        if migrate:
            self.migrate()

    def _engine(self, echo: bool) -> Engine:
        if self.dialect == "sqlite":
            database = self.url.database or ""
            if database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(
                self.url,
                echo=echo,
                pool_size=8,
                max_overflow=64,
                pool_pre_ping=False,
                # every checkout ends its transaction itself (commit, or rollback on an error or on close):
                # the pool's own rollback on every return would be one more driver call per transaction
                pool_reset_on_return=None,
                connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
            )
        else:
            engine = create_engine(self.url, echo=echo, pool_size=8, max_overflow=64, pool_pre_ping=True)
        _events(engine)
        return engine

    @property
    def statements(self) -> int:
        """Statements this object's connections ran since this was first read (the benches' and tests'
        statements per round: read it before and after). Counting costs a listener call per statement, so
        it starts only when asked for; not locked, as the count is only read by single-threaded windows."""
        if self._statements is None:
            self._statements = 0
            event.listen(self.engine, "after_cursor_execute", self._count)
        return self._statements

    def _count(self, *_args: Any) -> None:
        self._statements = (self._statements or 0) + 1

    def __repr__(self) -> str:
        return f"SQLDatabase({self.url.render_as_string(hide_password=True)!r})"

    @property
    def where(self) -> str:
        """The database as users name it (the SQLite file, or the URL without its password)."""
        if self.dialect == "sqlite":
            return str(self.url.database)
        return self.url.render_as_string(hide_password=True)

    @property
    def path(self) -> Path:
        """The SQLite file, or (PostgreSQL) where it would be in the home: its folder holds ``snapshots/``."""
        if self.dialect == "sqlite" and self.url.database not in (None, "", ":memory:"):
            return Path(str(self.url.database)).resolve()
        return (self.home / SQLITE_FILE).resolve()

    @property
    def idle_s(self) -> float:
        """Seconds since a unit or transaction of this process last ended."""
        return time.monotonic() - self._last_used

    def exists(self) -> bool:
        """Whether the store is there (a temporary home's SQLite file may be gone)."""
        return self.dialect != "sqlite" or self.path.exists()

    def write_parquet(self, folder: Path, base: Base | None = None) -> tuple[Written, int]:
        """Every table into ``folder`` in one read transaction, extending ``base`` (a snapshot of this
        store at the same schema revision) where only rows were added since; what was written and the
        schema revision."""
        from furnace.storage.sql.parquet import write_tables

        with self.connect() as conn:
            revision = int(conn.execute(_REVISION).scalar() or 0)
            extended = base if base is not None and base.revision == revision else None
            return write_tables(conn, folder, extended), revision

    def snapshot_soon(self) -> None:
        """Ask for a fresh analysis snapshot (in the background, when the runtime set one up)."""
        if self.on_change is not None:
            self.on_change()

    @cached_property
    def sealer(self) -> Sealer:
        """The keyed sealer: ``FURNACE_SEAL_KEY``, else the key file in the home (made on first use)."""
        return sealer_for(self.home, self._seal_key)

    def insert(self, table: Table) -> Any:
        """An INSERT on ``table`` with this dialect's ``on_conflict_do_nothing``/``do_update``."""
        return postgresql.insert(table) if self.dialect == "postgresql" else sqlite.insert(table)

    def insert_if_absent(self, table: Table) -> Any:
        """``INSERT … ON CONFLICT DO NOTHING`` on ``table``, built once per table and database: a hot path's
        statement (a model call's ledger row and answer) is then not rebuilt, nor its cache key recomputed
        (SQLAlchemy memoizes it on the statement object), on every call."""
        statement = self._inserts.get(table.name)
        if statement is None:
            statement = self._inserts[table.name] = self.insert(table).on_conflict_do_nothing()
        return statement

    def compile_ahead(self, statement: Any, params: dict[str, Any] | Sequence[dict[str, Any]] = ()) -> None:
        """Compile ``statement`` into the engine's statement cache as executing it with ``params`` (one
        dict, or the rows of an ``executemany``) would, so the write transaction that runs it next finds
        it compiled. On SQLite that compile would otherwise happen inside the write lock: in a fresh
        process (a CLI command) it is about half of the lock's hold, which every other process asking for
        the lock waits through. Call it before the transaction opens; nothing is executed.

        SQLAlchemy has no public call that fills its statement cache: this makes the call that
        ``Connection.execute`` makes (``_compile_w_cache`` with the same cache key: the sorted parameter
        names and whether it is an ``executemany``; SQLAlchemy is pinned in ``constraints.txt``).
        ``tests/storage/test_sql_compile_ahead.py`` fails when a statement compiled ahead is compiled
        again inside the transaction."""
        cache = self.engine._compiled_cache
        if cache is None:  # statement caching switched off: every execution compiles
            return
        rows = [params] if isinstance(params, dict) else list(params)
        dialect = self.engine.dialect
        statement._compile_w_cache(
            dialect=dialect,
            compiled_cache=cache,
            column_keys=sorted(rows[0]) if rows else [],
            for_executemany=len(rows) > 1,
            schema_translate_map=None,
            linting=dialect.compiler_linting | WARN_LINTING,
        )

    # --- connections and transactions ------------------------------------------------------------

    def _unit(self) -> _Unit | None:
        unit: _Unit | None = getattr(self._local, "unit", None)
        return unit

    @property
    def in_transaction(self) -> bool:
        """True inside a unit whose transaction has begun on this thread."""
        unit = self._unit()
        return unit is not None and unit.open

    @contextmanager
    def unit(self, *, one_transaction: bool = True) -> Iterator[Connection]:
        """One connection for every call on this thread inside; with ``one_transaction``, every write joins
        one transaction (begun at the first write) that commits when the unit ends, or rolls back."""
        current = self._unit()
        if current is not None:  # joins the unit already open on this thread
            yield current.conn
            return
        with self.engine.connect() as conn:
            unit = _Unit(conn, one_transaction)
            self._local.unit = unit
            try:
                yield conn
                if conn.in_transaction():
                    conn.commit()
            except BaseException:
                if conn.in_transaction():
                    conn.rollback()
                raise
            finally:
                self._local.unit = None
                if unit.writing:
                    self._writer.release()
                self._last_used = time.monotonic()

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection for reads: the unit's, else a pooled one for the block (one read transaction)."""
        unit = self._unit()
        if unit is not None:
            if unit.conn.in_transaction():
                yield unit.conn
            else:
                unit.conn.info["furnace_write"] = False
                with unit.conn.begin():
                    yield unit.conn
            return
        with self.engine.connect() as conn:
            conn.info["furnace_write"] = False
            with conn.begin():
                yield conn

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One write transaction for the block (joining the unit's, when one is open on this thread)."""
        unit = self._unit()
        if unit is not None and unit.one_transaction:
            if not unit.open:
                if self.dialect == "sqlite" and not unit.writing:
                    _settle_heap()
                    self._writer.acquire()  # released when the unit ends
                    unit.writing = True
                unit.conn.info["furnace_write"] = True
                unit.conn.begin()
                unit.open = True
            yield unit.conn
            return
        with self._turn():
            if unit is not None:
                unit.conn.info["furnace_write"] = True
                with unit.conn.begin():
                    yield unit.conn
                return
            with self.engine.connect() as conn:
                conn.info["furnace_write"] = True
                with conn.begin():
                    yield conn

    @property
    def driver_path(self) -> bool:
        """Whether :meth:`driver_query` and :meth:`driver_transaction` may run on this thread now: SQLite,
        outside a unit of work (a unit's reads and writes go through its own connection)."""
        return self.dialect == "sqlite" and self._unit() is None

    def prepare(self, statement: Any) -> Prepared | None:
        """``statement`` compiled once for the driver (see :class:`Prepared`); None elsewhere than SQLite."""
        return Prepared(self, statement) if self.dialect == "sqlite" else None

    def read(self, prepared: Prepared | None, statement: Any, values: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The rows of ``statement`` (one SELECT) with ``values``: through ``prepared`` (its :meth:`prepare`
        form) on SQLite's driver where :attr:`driver_path` allows, else (and when the driver raised: that
        path retries a busy store and says what is wrong) through SQLAlchemy (:meth:`query`)."""
        if prepared is not None and self.driver_path:
            try:
                return self.driver_query(prepared, values)
            except Exception:  # noqa: BLE001 - see the docstring
                pass
        return self.query(statement, values)

    def insert_on_driver(self, inserts: Sequence[tuple[Prepared | None, dict[str, Any], bool]]) -> bool:
        """Each ``(prepared insert, row, new)`` run in order in one transaction on SQLite's driver (see
        :meth:`driver_transaction`): True when it committed. False, with nothing written, when a row marked
        ``new`` was not inserted (its key is present), elsewhere than SQLite or inside a unit (see
        :attr:`driver_path`), or on an error: the caller's own transaction through SQLAlchemy then decides
        (it retries a busy store and says what failed)."""
        if not self.driver_path or any(prepared is None for prepared, _, _ in inserts):
            return False
        try:
            with self.driver_transaction() as run:
                for prepared, row, new in inserts:
                    if not run(prepared, row) and new:  # type: ignore[arg-type]
                        raise _Present
        except Exception:  # noqa: BLE001 - rolled back (_Present included)
            return False
        return True

    def driver_query(self, prepared: Prepared, values: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The rows of one SELECT on a pooled connection's driver (SQLite, outside a unit: see
        :attr:`driver_path`): a single SELECT is its own consistent read there (as :meth:`query`)."""
        raw = self.engine.raw_connection()
        try:
            found = raw.driver_connection.execute(prepared.sql, prepared.params(values)).fetchall()  # type: ignore[union-attr]
        finally:
            raw.close()
        if self._statements is not None:
            self._statements += 1
        return prepared.rows(found)

    @contextmanager
    def driver_transaction(self) -> Iterator[Callable[[Prepared, dict[str, Any]], int]]:
        """One write transaction on a pooled connection's driver (SQLite, outside a unit: see
        :attr:`driver_path`), in this process's turn to write: the block gets ``run(prepared, values)``,
        which executes one statement and returns the rows it changed; commits when the block ends, rolls
        back on an error (which is raised)."""
        with self._turn():
            raw = self.engine.raw_connection()
            driver: Any = raw.driver_connection
            ran = 1  # BEGIN (a COMMIT is not counted, as through SQLAlchemy: the driver commits)

            def run(prepared: Prepared, values: dict[str, Any]) -> int:
                nonlocal ran
                ran += 1
                return int(driver.execute(prepared.sql, prepared.params(values)).rowcount)

            try:
                _driver_begin(driver, _turns(self.engine))
                try:
                    yield run
                    _driver_end(driver, "COMMIT")
                except BaseException:
                    if driver.in_transaction:
                        _driver_end(driver, "ROLLBACK")
                    raise
            finally:
                raw.close()
                self._last_used = time.monotonic()
                if self._statements is not None:
                    self._statements += ran

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """This process's turn to write (SQLite; PostgreSQL's writers need none)."""
        if self.dialect != "sqlite":
            yield
            return
        _settle_heap()
        with self._writer:
            yield

    def write(self, work: Callable[[Connection], T], *, retries: int = CONFLICT_RETRIES) -> T:
        """``work`` in one transaction; a unique-key race with another writer (two saves of one id's next
        version) runs it again, up to ``retries`` times. Inside a unit's transaction, it joins it."""
        if self.in_transaction:
            with self.transaction() as conn:
                return work(conn)
        for attempt in range(retries + 1):
            try:
                with self.transaction() as conn:
                    return work(conn)
            except (IntegrityError, OperationalError) as err:
                if attempt >= retries or not _retryable(err):
                    raise
        raise AssertionError("unreachable")

    def query(self, statement: Any, params: Sequence[Any] | dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """The rows of one read: a SQLAlchemy statement, or SQL text with ``?`` placeholders (ad-hoc SQL
        and tests, in the same form on SQLite and PostgreSQL). On SQLite outside a unit, the one statement
        runs without ``BEGIN``/``COMMIT`` around it: a single SELECT is its own consistent read there,
        and a model call's cache lookup is one of these (two fewer driver round trips per call)."""
        if self.dialect == "sqlite" and self._unit() is None:
            with self.engine.connect() as conn:
                conn.info["furnace_single_read"] = True
                try:
                    return [tuple(row) for row in self._run(conn, statement, params)]
                finally:
                    conn.info["furnace_single_read"] = False
                    conn.rollback()  # ends SQLAlchemy's own (empty) transaction: no statement is sent
        with self.connect() as conn:
            return [tuple(row) for row in self._run(conn, statement, params)]

    def execute(self, statement: Any, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        """One write statement in its own transaction (as :meth:`query` takes it)."""
        with self.transaction() as conn:
            self._run(conn, statement, params)

    def _run(self, conn: Connection, statement: Any, params: Sequence[Any] | dict[str, Any] | None) -> Any:
        if isinstance(statement, str):
            sql = statement
            if self.dialect == "postgresql":  # psycopg's placeholders are %s
                sql = sql.replace("%", "%%").replace("?", "%s")
            result = conn.exec_driver_sql(sql, tuple(params or ()))
        else:
            result = conn.execute(statement, dict(params or {}))
        return result.all() if result.returns_rows else []

    def close(self) -> None:
        """Return every pooled connection (the next use opens new ones)."""
        self.engine.dispose()

    # --- schema ------------------------------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision (once per process and database)."""
        _migrations.run(self)

    def _migrate_now(self) -> None:
        """Bring the schema to the newest Alembic revision: one migration run at a time per database
        (SQLite: inside ``BEGIN IMMEDIATE``; PostgreSQL: under an advisory lock)."""
        # an up-to-date store (every open but the first) is recognised by a plain read, without Alembic
        # (importing it and loading the scripts cost each command ~0.2 s of CPU at its start; loading
        # them inside the write transaction held every other process's writes for it)
        if self.revision() == HEAD_REVISION:
            return
        from alembic import command

        config = migrations_config()
        with self.engine.connect() as conn:
            conn.info["furnace_write"] = True
            conn.info["furnace_migrate"] = True  # SQLite's own busy handler, outside the turns (see _sqlite_begin)
            try:
                with conn.begin():
                    if self.dialect == "postgresql":
                        conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK})
                    config.attributes["connection"] = conn
                    command.upgrade(config, "head")
            except DBAPIError as err:
                raise StoreError(f"could not migrate the store at {self.where}: {_first_line(err)}") from None
            finally:
                conn.info.pop("furnace_migrate", None)  # the pooled connection's next writes join the turns

    def revision(self) -> str | None:
        """The Alembic revision the database is at (None before the first migration)."""
        try:
            rows = self.query(_REVISION)
        except DBAPIError:
            return None
        return str(rows[0][0]) if rows else None


class _Migrations(Guarded):
    """The databases this process brought to the newest schema (by URL): one migration run at a time in
    the process (Alembic's ``context`` is one per process), each database once."""

    def __init__(self) -> None:
        self.done: set[str] = set()

    @serialized
    def run(self, db: SQLDatabase) -> None:
        """Migrate ``db`` unless it was migrated already (and, SQLite, its file is still there: a file
        removed since is made again); a thread that comes meanwhile waits for the migration under way."""
        key = db.url.render_as_string(hide_password=False)
        if key in self.done and db.exists():
            return
        db._migrate_now()
        self.done.add(key)


_migrations = _Migrations()


def migrations_config() -> Any:
    """The Alembic configuration of the store's migrations (``migrations/``)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    return config


def _retryable(err: DBAPIError) -> bool:
    if isinstance(err, IntegrityError):
        return True
    message = str(err.orig).lower()
    return "locked" in message or "busy" in message or "deadlock" in message or "serializ" in message


def _first_line(err: BaseException) -> str:
    text_ = str(getattr(err, "orig", err) or err).strip()
    return text_.splitlines()[0] if text_ else err.__class__.__name__


def single_use(url: str, *, home: Path) -> SQLDatabase:
    """A database whose connections are not pooled (a command that opens it once, e.g. ``migrate``)."""
    db = SQLDatabase(url, home=home, migrate=False)
    db.engine = create_engine(db.url, poolclass=NullPool)
    _events(db.engine)
    return db
