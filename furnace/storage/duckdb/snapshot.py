"""Parquet snapshots of the live store, for analysis in DuckDB that never touches (or blocks) a writer.

Layout under ``<home>/snapshots/``::

    CURRENT                 the id of the newest complete snapshot (replaced atomically)
    <id>/<table>.parquet    every table, copied inside one read transaction ...
    <id>/<table>.<k>.parquet  ... or the rows added since the snapshot before, beside its files hard-linked
    <id>/manifest.json      tables, their files, row counts, schema version, time, each file's sha256,
                            the marks the next refresh extends from, the keyed seal
    <id>/.reader-<pid>      a lease: a live reader process keeps this snapshot from removal

A refresh writes a new folder ``.tmp-<id>``, renames it to ``<id>`` and only
then replaces ``CURRENT`` (write-then-rename), so a reader sees the old or
the new snapshot, never half of one, and a writer killed mid-refresh leaves
the previous snapshot intact. Older folders without a live reader are
removed by later refreshes. :func:`connect` opens an in-memory DuckDB
connection with one view per table over the current snapshot; it never
touches the live store. See docs/store.md.

**Sealed.** The manifest lists every Parquet file's sha256 and carries the keyed seal of the
whole manifest (:mod:`furnace.storage.seals`, docs/reliability.md). :func:`connect` checks both before it
makes the snapshot's views, and refuses a snapshot whose files or manifest were rewritten
(:class:`~furnace.domain.errors.SealError`); a snapshot taken before seals existed (no ``seal``
in its manifest) is replaced by a fresh one.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from furnace.domain.errors import SealError, StoreError
from furnace.domain.guarded import Guarded, serialized
from furnace.domain.liveness import pid_alive
from furnace.domain.threads import PerKey, background
from furnace.storage.seals import Sealer, check, sealer_for
from furnace.storage.snapshot_files import Base, Written

if TYPE_CHECKING:  # DuckDB is imported when a snapshot is read: a command that only writes never loads it
    import duckdb

log = logging.getLogger(__name__)

FOLDER = "snapshots"
POINTER = "CURRENT"
KEEP = 2  # complete snapshots kept besides any a live reader holds
QUIET_S = 0.5  # a refresh waits until no unit ran and no request came for this long (a pause) ...
MAX_DELAY_S = 10.0  # ... but a snapshot is never older than this behind a request while requests keep coming
MIN_INTERVAL_S = 2.0  # background refreshes at most this often (the last request is always served)
DUTY = 20.0  # ... and never sooner than this many times the last refresh's own duration after it
_counter = itertools.count()


class Source(Protocol):
    """A live store a snapshot is taken from: the relational store
    (:class:`~furnace.storage.sql.db.SQLDatabase`, which writes Parquet with pyarrow)."""

    @property
    def path(self) -> Path:
        """The store's file (its folder holds ``snapshots/``)."""
        ...

    @property
    def sealer(self) -> Sealer: ...

    @property
    def idle_s(self) -> float:
        """Seconds since the store was last used by this process."""
        ...

    def exists(self) -> bool:
        """Whether there is anything to snapshot (a temporary home may be gone)."""
        ...

    def write_parquet(self, folder: Path, base: Base | None = None) -> tuple[Written, int]:
        """Every table into ``folder``, in one read transaction, extending ``base`` where only rows were
        added since: what was written and the schema version."""
        ...


def snapshot_root(db_path: Path) -> Path:
    """Where the snapshots of ``db_path`` live."""
    return Path(db_path).resolve().parent / FOLDER


def current(root: Path) -> Path | None:
    """The folder of the newest complete snapshot, or None."""
    try:
        name = (root / POINTER).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    folder = root / name
    return folder if name and (folder / "manifest.json").exists() else None


def manifest(folder: Path) -> dict[str, Any]:
    """The manifest of one snapshot folder: id, tables (row counts), schema_version, taken_at."""
    data: dict[str, Any] = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    return data


def refresh(source: Source) -> Path:
    """Take a new snapshot of the live store and make it current; returns its folder. It extends the
    current snapshot where only rows were added since (its files hard-linked, one more file with the new
    rows: ``furnace.storage.sql.parquet``); every other table is copied in full."""
    if not source.exists():  # e.g. a temporary home already removed: never recreate an empty file
        raise StoreError(f"no {source.path.name} at {source.path.parent}: nothing to snapshot")
    root = snapshot_root(source.path)
    root.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    sid = f"{stamp}-{os.getpid()}-{next(_counter)}"
    tmp = root / f".tmp-{sid}"
    tmp.mkdir()
    try:
        base, digests = _base(root, source.sealer)
        done, version = source.write_parquet(tmp, base)
        written: dict[str, Any] = {"id": sid, "tables": done.rows, "schema_version": version, "taken_at": stamp}
        written["parts"] = done.parts
        written["files"] = {
            name: digests[name] if name in done.linked else _digest(tmp / name)
            for table in sorted(done.parts)
            for name in done.parts[table]
        }
        written["marks"] = done.marks
        written["stats"] = {name: _stat(tmp / name) for name in written["files"]}
        written["seal"] = _manifest_seal(source.sealer, written)
        (tmp / "manifest.json").write_text(json.dumps(written, indent=1), encoding="utf-8")
        folder = root / sid
        os.replace(tmp, folder)
        pointer = root / f"{POINTER}.tmp-{sid}"
        pointer.write_text(sid, encoding="utf-8")
        os.replace(pointer, root / POINTER)  # the atomic step: readers now open the new snapshot
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _collect(root, keep=folder)
    return folder


def _base(root: Path, sealer: Sealer) -> tuple[Base | None, dict[str, str]]:
    """The current snapshot as a refresh's base, with its files' digests; None when there is none, it
    predates extending (no marks), or its manifest's seal does not check (a full copy replaces it)."""
    folder = current(root)
    if folder is None:
        return None, {}
    try:
        data = manifest(folder)
        check(data.get("seal"), _manifest_seal(sealer, data), f"the manifest of snapshot {folder.name}")
    except (OSError, ValueError, SealError):
        return None, {}
    if "marks" not in data or "stats" not in data:
        return None, {}
    base = Base(folder, int(data["schema_version"]), data["parts"], data["tables"], data["marks"], data["stats"])
    return base, data["files"]


def parts(data: dict[str, Any]) -> dict[str, list[tuple[str, str | None]]]:
    """Each table's files in a snapshot's manifest, with their sha256 (a manifest written before a table
    could span files lists ``<table>.parquet`` under the table's name)."""
    files = data.get("files") or {}
    if "parts" not in data:
        return {table: [(f"{table}.parquet", files.get(table))] for table in data["tables"]}
    return {table: [(name, files.get(name)) for name in data["parts"].get(table, [])] for table in data["tables"]}


def _stat(path: Path) -> list[int]:
    """A file's size and modification time (ns): what a later refresh checks before it keeps the file."""
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns]


def _digest(path: Path) -> str:
    """The sha256 of one file."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest_seal(sealer: Sealer, data: dict[str, Any]) -> str:
    """The keyed seal of a manifest: everything in it but the seal."""
    return sealer.mac("snapshot", {k: v for k, v in data.items() if k != "seal"})


def verify(folder: Path, sealer: Sealer) -> None:
    """Raise :class:`~furnace.domain.errors.SealError` unless ``folder``'s manifest carries its keyed seal
    and every Parquet file it lists has the sha256 it lists."""
    data = manifest(folder)
    what = f"snapshot {folder.name}"
    check(data.get("seal"), _manifest_seal(sealer, data), f"the manifest of {what}")
    for table, listed in parts(data).items():
        for name, digest in listed or [(f"{table}.parquet", None)]:
            path = folder / name
            if digest is None or not path.exists() or _digest(path) != digest:
                raise SealError(
                    f"{name} of {what} does not match its sealed manifest: the snapshot was rewritten"
                    " outside furnace (docs/reliability.md)"
                )


def _pid_of(name: str, prefix: str) -> int | None:
    try:
        return int(name.removeprefix(prefix).split("-")[1 if prefix == ".tmp-" else 0])
    except (IndexError, ValueError):
        return None


def _collect(root: Path, *, keep: Path) -> None:
    """Remove snapshots nobody needs: not current, not among the newest KEEP, no live reader."""
    now_current = current(root)
    complete = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), reverse=True)
    for folder in complete[KEEP:]:
        if folder in (keep, now_current):
            continue
        leases = [_pid_of(p.name, ".reader-") for p in folder.glob(".reader-*")]
        if any(pid is None or pid_alive(pid) for pid in leases):
            continue
        shutil.rmtree(folder, ignore_errors=True)
    for tmp in root.glob(".tmp-*"):  # left by a writer killed mid-refresh
        pid = _pid_of(tmp.name, ".tmp-")
        if pid is not None and not pid_alive(pid):
            shutil.rmtree(tmp, ignore_errors=True)


def connect(db_path: Path, *, source: Source | None = None, seal_key: str | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with one view per table over the current snapshot of the store whose file is
    ``db_path`` (any file in the home: the snapshots live next to it).

    Takes a first snapshot of ``source`` (one read transaction on the live store) when there is none
    yet, or when the current one predates seals; StoreError without ``source``. The snapshot's seal is
    checked (with
    ``seal_key``, ``FURNACE_SEAL_KEY``, else the home's key file) before its views are made:
    SealError for a rewritten snapshot. The snapshot stays readable for as long as this process lives.
    The connections of one process are cursors on one in-memory database, with one
    schema of views per snapshot (made when the process first opens that snapshot), so
    a notebook re-running ``connect()`` pays for a DuckDB instance once, not per call;
    each connection keeps the snapshot it was opened on.
    """
    wait_pending()  # this process's own writes are in the snapshot it opens
    root = snapshot_root(db_path)
    folder = current(root)
    if folder is not None and "seal" not in manifest(folder) and source is not None and source.exists():
        folder = None  # taken before snapshots were sealed: a fresh, sealed one replaces it
    if folder is None:
        if source is None or not source.exists():
            raise StoreError(f"no snapshot of {Path(db_path).name} yet: run `furnace snapshot`")
        folder = refresh(source)
    with suppress(OSError):
        (folder / f".reader-{os.getpid()}").touch()
    return _views.open(folder, lambda: sealer_for(root.parent, seal_key))


class _Views(Guarded):
    """This process's in-memory DuckDB database: one schema of views per snapshot folder."""

    def __init__(self) -> None:
        self.base: duckdb.DuckDBPyConnection | None = None
        self.pid = 0
        self.schemas: dict[Path, str] = {}

    def open(self, folder: Path, sealer: Callable[[], Sealer]) -> duckdb.DuckDBPyConnection:
        con = self._cursor(folder)
        if con is None:  # a snapshot not opened yet: its files are checked (read in full) outside the lock
            verify(folder, sealer())  # once per snapshot and process: its files are read-only from here
            con = self._cursor(folder, verified=True)
        assert con is not None
        return con

    @serialized
    def _cursor(self, folder: Path, *, verified: bool = False) -> duckdb.DuckDBPyConnection | None:
        """A cursor on the base database using ``folder``'s schema, made now once ``verified``; None: the
        snapshot's seal is not checked yet in this process."""
        if self.base is None or self.pid != os.getpid():  # a forked child gets its own database
            import duckdb

            self.base, self.pid, self.schemas = duckdb.connect(":memory:"), os.getpid(), {}
        schema = self.schemas.get(folder)
        if schema is None:
            if not verified:
                return None
            schema = f"snapshot_{len(self.schemas) + 1}"
            con = self.base.cursor()
            try:
                con.execute("BEGIN")
                con.execute(f'CREATE SCHEMA "{schema}"')
                for table, listed in parts(manifest(folder)).items():
                    files = ", ".join("'" + (folder / name).as_posix().replace("'", "''") + "'" for name, _ in listed)
                    con.execute(f'CREATE VIEW "{schema}"."{table}" AS SELECT * FROM read_parquet([{files}])')
                con.execute("COMMIT")
            finally:
                con.close()
            self.schemas[folder] = schema
        con = self.base.cursor()
        con.execute(f'USE "{schema}"')
        return con


_views = _Views()


def refresh_due(quiet_since: float, first: float, last: float, cost: float) -> float:
    """When a background refresh asked for at ``first`` runs (``time.monotonic()`` values): once the writer
    has been quiet for ``QUIET_S`` since ``quiet_since``, or at the latest ``MAX_DELAY_S`` after ``first``
    while it stays busy; never sooner than ``MIN_INTERVAL_S`` after the last refresh ended (``last``), nor
    than ``DUTY`` times that refresh's duration (``cost``). A refresh copies what was added since the last
    one, and in full every table changed in place (and, every :data:`~furnace.storage.sql.parquet.MAX_PARTS`
    refreshes, a growing table), so its cost can grow with the home: the last bound keeps a busy run's
    background refreshes under 1/``DUTY`` of one core's time however large the home is (a home whose
    refresh takes 0.5 s is refreshed at most every 10 s), where a fixed interval let them take most of it.
    ``wait_pending`` (a command's end) does not wait."""
    soon = min(max(quiet_since + QUIET_S, last + MIN_INTERVAL_S), first + MAX_DELAY_S)
    return max(soon, last + DUTY * cost)


class _Refresher(Guarded):
    """Background refreshes of one file's snapshot: requests are coalesced, never block the caller. One
    thread of this process refreshes at a time (started by a request when none runs, ending when no
    request is left); :meth:`wait` hurries it past the spacing of :func:`refresh_due`."""

    def __init__(self) -> None:
        self.db: Source | None = None  # the store of the first request
        self.wanted = False  # a request not served yet
        self.hurried = 0  # callers of wait(): no more spacing, refresh now
        self.runner = 0  # the process whose thread refreshes (0: none; another pid: a forked child's parent)
        self.last = 0.0
        self.cost = 0.0  # how long the last refresh took (wall)
        self.requested_at = 0.0
        self.refreshes = 0

    @property
    def idle(self) -> bool:
        """No thread of this process refreshes, or waits to."""
        return self.runner != os.getpid()

    @serialized
    def request(self, source: Source) -> None:
        if self.db is None:
            self.db = source
        self.requested_at = time.monotonic()
        self.wanted = True
        if self.idle:
            background(self._run, name="furnace-snapshot")  # its first step waits for this lock
            self.runner = os.getpid()

    def _run(self) -> None:
        try:
            while self._next():
                # A refresh costs a few ms of CPU, tens with much added (furnace.storage.sql.parquet): it runs
                # when the writer is quiet (between a user's turns), not between back-to-back units, where it
                # would compete with them for the CPU; a busy writer still gets one every MAX_DELAY_S.
                db = self._spaced(first=time.monotonic())
                if not db.exists():  # the home went away (a temporary folder): nothing to keep fresh
                    continue
                started = time.monotonic()
                try:
                    refresh(db)
                    self.refreshes += 1
                except Exception as err:  # noqa: BLE001 - a failed refresh keeps the previous snapshot; say so
                    log.warning("snapshot of %s not refreshed: %s", db.path.name, err)
                self.last = time.monotonic()
                self.cost = self.last - started
        except BaseException:
            self._stopped()  # the next request starts a new thread
            raise

    @serialized
    def _next(self) -> bool:
        """Whether a request is waiting for a refresh; if not, this thread ends (the refresher is idle)."""
        if not self.wanted:
            self._stopped()
        return self.wanted

    @serialized
    def _stopped(self) -> None:
        self.runner = 0
        self._changed()

    @serialized
    def _spaced(self, first: float) -> Source:
        """Wait (letting requests in) until the refresh asked for at ``first`` is due, or :meth:`wait`
        hurries it; the requests so far are served by it. Returns the store to refresh."""
        assert self.db is not None
        while not self.hurried:
            quiet_since = max(self.requested_at, time.monotonic() - self.db.idle_s)
            due = refresh_due(quiet_since, first, self.last, self.cost)
            if time.monotonic() >= due:
                break
            self._wait_until(lambda: self.hurried > 0, due - time.monotonic())
        self.wanted = False
        return self.db

    @serialized
    def wait(self, timeout: float) -> bool:
        """Hurry the refresh under way (if any) and wait for it, up to ``timeout`` seconds; False if it is
        still running then."""
        self.hurried += 1
        self._changed()
        try:
            return self._wait_until(lambda: self.idle, timeout)
        finally:
            self.hurried -= 1


class SnapshotReader:
    """Read-only SQL over the newest snapshot of a live store (taking a first one when there is none):
    how the lab assistant reads the relational store with its DuckDB queries. Each call opens the
    snapshot current at that moment (this process's requested refreshes done first)."""

    def __init__(self, source: Source) -> None:
        self.source = source

    def _connection(self) -> duckdb.DuckDBPyConnection:
        wait_pending()
        root = snapshot_root(self.source.path)
        folder = current(root) or refresh(self.source)
        with suppress(OSError):
            (folder / f".reader-{os.getpid()}").touch()
        return _views.open(folder, lambda: self.source.sealer)

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        con = self._connection()
        try:
            return con.execute(sql, params or []).fetchall()
        finally:
            con.close()

    def query_dicts(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        con = self._connection()
        try:
            cur = con.execute(sql, params or [])
            cols = [d[0] for d in cur.description or []]
            return [dict(zip(cols, row, strict=False)) for row in cur.fetchall()]
        finally:
            con.close()


_refreshers: PerKey[str, _Refresher] = PerKey(lambda _: _Refresher())  # by the store's file


def request(source: Source) -> None:
    """Refresh the snapshot of ``source`` soon, on a background thread (coalescing close requests)."""
    _refreshers.get(str(source.path)).request(source)


def wait_pending(timeout: float = 60.0) -> None:
    """Finish every requested refresh of this process (at command end and at exit)."""
    for refresher in _refreshers.values():
        refresher.wait(timeout)


atexit.register(wait_pending)
