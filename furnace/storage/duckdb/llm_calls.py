"""DuckDB storage for the LLM response cache and the call ledger.

Tables (migrations ``0002_llm.sql``, ``0009_llm_accounting.sql``):

- ``llm_responses(cache_key PK, model, task, completion JSON, created_at, seal)`` —
  insert-if-absent by content key, so processes racing on one key keep the
  first stored answer and a re-run repeats no finished model call. Rows older
  than ``ttl_s`` are not served and are purged (:meth:`DuckDBResponseCache.prune`,
  also ``furnace cache prune``). ``seal`` is the keyed seal of the key and the
  completion (migration 0016, docs/reliability.md): a row whose seal does not
  verify is a miss (counted in ``refused``, and by ``furnace cache stats``) and is
  replaced by the fresh answer;
- ``llm_calls(id PK, run_id, task, model, cache_key, prompt_tokens,
  completion_tokens, cost_usd, latency_s, cached, status, created_at, attempts,
  detail, unit)`` — one row per logical call (hits included); ``unit`` is the unit of work
  within the run it was for (migration ``0017_llm_call_unit.sql``). ``status`` is ``ok`` or
  an error class name, never an error message; ``detail`` is a scrubbed excerpt
  of an unusable reply.

**Write-ahead ledger.** A call is appended (one ``write`` of one JSON line) to
this process's journal file ``<db>.ledger/<pid>-<token>.jsonl`` *before* its
answer is used, so a SIGKILL loses no paid call. Journal rows reach the table
in batches (at ``batch`` rows, after ``flush_interval_s``, at exit); a journal
whose process is gone is replayed into the table (idempotent by row id) by the
next ledger that opens the file or reads totals. Reads also count rows still in
live processes' journals, so totals are exact across processes.

Each operation uses one short-lived connection from :class:`Database`; none is
held across a model call. The response cache keeps the completions it has seen
in memory (content-addressed, hence immutable).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import uuid
import weakref
from collections import deque
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from furnace.domain.liveness import pid_alive
from furnace.llm.cache import CallRecord, CallTotals, sum_calls
from furnace.llm.seam import Completion
from furnace.storage.duckdb.db import Database
from furnace.storage.responses import ResponseMemory
from furnace.storage.seals import response_seal, sealed

_LIVE: dict[str, weakref.WeakSet[_Pending]] = {}
_LIVE_LOCK = threading.Lock()

_COLUMNS = (
    "id, run_id, task, model, cache_key, prompt_tokens, completion_tokens,"
    " cost_usd, latency_s, cached, status, created_at, attempts, detail, unit"
)
_INSERT = f"INSERT INTO llm_calls ({_COLUMNS}) VALUES ({', '.join('?' * 15)}) ON CONFLICT DO NOTHING"
DEFAULT_RESPONSE_TTL_S = 90 * 24 * 3600


class DuckDBResponseCache(ResponseMemory):
    """Completions by content key in ``llm_responses``, with an in-memory read layer."""

    def __init__(self, db: Database, *, memory_items: int = 4096, ttl_s: float | None = DEFAULT_RESPONSE_TTL_S) -> None:
        super().__init__(memory_items=memory_items, ttl_s=ttl_s)
        self.db = db

    def get(self, key: str) -> Completion | None:
        """The stored completion for ``key``, or None (also for a row whose seal does not verify)."""
        known = self._recall(key)
        if known is not None:
            return known
        rows = self.db.query("SELECT completion, created_at, seal FROM llm_responses WHERE cache_key = ?", [key])
        if not rows or self._expired(rows[0][1]):
            return None
        return self._served(self.db.sealer, key, rows[0][0], rows[0][2])

    def put(self, key: str, completion: Completion, *, task: str = "") -> bool:
        """Insert unless present; True when this call inserted the row."""
        stored = completion.model_copy(update={"cached": False})
        text = stored.model_dump_json()
        sealer = self.db.sealer
        seal = response_seal(sealer, key, text)
        with self.db.transaction() as con:
            rows = con.execute(
                "INSERT INTO llm_responses (cache_key, model, task, completion, seal) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT DO UPDATE SET completion = excluded.completion, created_at = now()::TIMESTAMP,"
                " seal = excluded.seal WHERE llm_responses.created_at < ? RETURNING cache_key",
                [key, completion.model, task, text, seal, self._cutoff()],
            ).fetchall()
            if not rows:  # another process stored it first: converge on its answer (if it is sealed)
                first = con.execute("SELECT completion, seal FROM llm_responses WHERE cache_key = ?", [key]).fetchall()
                if first and sealed(first[0][1], response_seal(sealer, key, first[0][0])):
                    stored = Completion.model_validate_json(first[0][0])
                elif first:  # a row written outside furnace: replaced by this answer
                    rows = con.execute(
                        "UPDATE llm_responses SET completion = ?, seal = ?, model = ?, task = ?,"
                        " created_at = now()::TIMESTAMP WHERE cache_key = ? RETURNING cache_key",
                        [text, seal, completion.model, task, key],
                    ).fetchall()
        self._remember(key, stored)
        return bool(rows)

    def _expired(self, created_at: datetime | None) -> bool:
        if self.ttl_s is None or created_at is None:
            return False
        return created_at < datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=self.ttl_s)

    def _cutoff(self) -> datetime:
        """Rows created before this are expired (the epoch when there is no TTL)."""
        if self.ttl_s is None:
            return datetime(1970, 1, 1)
        return datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=self.ttl_s)

    def prune(self, ttl_s: float | None = None) -> int:
        """Delete responses older than ``ttl_s`` (default: this cache's TTL); returns how many."""
        ttl = self.ttl_s if ttl_s is None else ttl_s
        if ttl is None:
            return 0
        cutoff = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=ttl)
        with self.db.transaction() as con:
            gone = con.execute(
                "DELETE FROM llm_responses WHERE created_at < ? RETURNING cache_key", [cutoff]
            ).fetchall()
        self._forget([key for (key,) in gone])
        return len(gone)

    def prune_if_due(self) -> int:
        """The automatic purge: delete expired rows when the oldest row is past the TTL (one cheap
        indexed read otherwise); returns how many went."""
        if self.ttl_s is None:
            return 0
        oldest = self.db.query("SELECT min(created_at) FROM llm_responses")[0][0]
        return self.prune() if oldest is not None and self._expired(oldest) else 0

    def stats(self) -> dict[str, Any]:
        """Rows, expired rows, oldest/newest and rows per task (``furnace cache stats``)."""
        cutoff = self._cutoff()
        counts = self.db.query(
            "SELECT count(*), count(*) FILTER (WHERE created_at < ?), min(created_at), max(created_at)"
            " FROM llm_responses",
            [cutoff],
        )[0]
        by_task = self.db.query("SELECT task, count(*) FROM llm_responses GROUP BY task ORDER BY 2 DESC, 1")
        sealer = self.db.sealer
        bad = sum(
            not sealed(seal, response_seal(sealer, key, text))
            for key, text, seal in self.db.query("SELECT cache_key, completion, seal FROM llm_responses")
        )
        return self._stats(counts, by_task, bad)

    def __len__(self) -> int:
        return int(self.db.query("SELECT count(*) FROM llm_responses")[0][0])


class _Pending:
    """Ledger rows of one ledger: journaled on disk at once, written to the table in batches."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.rows: list[CallRecord] = []
        self.lock = threading.Lock()
        self.last_flush = time.monotonic()
        self.folder = journal_folder(db)
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._retired: list[Path] = []
        self._unsure: list[CallRecord] = []  # written inside a caller's transaction, not yet known committed

    def journal(self, call: CallRecord) -> None:
        """Append one row to the journal (under ``lock``): one write, before the answer is used."""
        if self._file is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._path = self.folder / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.jsonl"
            self._file = open(self._path, "ab", buffering=0)  # noqa: SIM115 - kept open across calls
        self._file.write((call.model_dump_json() + "\n").encode())

    def flush(self) -> int:
        # Inside a caller's unit transaction the rows commit (or roll back) with it: they and their
        # journals are kept and written again at the next flush outside one (idempotent by row id).
        committed = not self.db.in_transaction
        with self.lock:
            rows, self.rows = self.rows, []
            self.last_flush = time.monotonic()
            if self._file is not None:  # the next row starts a new journal; this one retires once written
                self._file.close()
                self._file = None
                if self._path is not None:
                    self._retired.append(self._path)
            retired, self._retired = self._retired, []
            if committed:
                rows, self._unsure = [*self._unsure, *rows], []
        if rows:
            try:
                with self.db.transaction() as con:
                    con.executemany(_INSERT, [_row(call) for call in rows])
            except BaseException:
                with self.lock:  # keep them (and their journals) for the next attempt
                    self.rows[:0] = rows
                    self._retired[:0] = retired
                raise
        if not committed:
            with self.lock:
                self._unsure += rows
                self._retired[:0] = retired
            return len(rows)
        for path in retired:
            path.unlink(missing_ok=True)
        return len(rows)

    def own(self) -> set[Path]:
        with self.lock:
            return {*self._retired, *([self._path] if self._file is not None and self._path else [])}


class DuckDBCallLedger:
    """One row per model call in ``llm_calls``, journaled first (write-ahead), written in batches."""

    def __init__(self, db: Database, *, batch: int = 32, flush_interval_s: float = 0.5) -> None:
        self.db = db
        self.batch = max(1, batch)
        self.flush_interval_s = flush_interval_s
        self._pending = _Pending(db)
        # flushed when the ledger is garbage-collected or the interpreter exits
        weakref.finalize(self, _quiet_flush, self._pending)
        with _LIVE_LOCK:
            _LIVE.setdefault(str(db.path), weakref.WeakSet()).add(self._pending)
        recover_journals(db)

    def record(self, call: CallRecord) -> None:
        """Append one call: on disk (journal) before returning, in the table at the next flush."""
        pending = self._pending
        with pending.lock:
            pending.journal(call)
            pending.rows.append(call)
            due = len(pending.rows) >= self.batch or time.monotonic() - pending.last_flush >= self.flush_interval_s
        if due:
            pending.flush()

    def flush(self) -> int:
        """Write this ledger's buffered rows in one transaction; returns how many."""
        return self._pending.flush()

    def flush_all(self) -> None:
        """Flush every ledger of this process writing to the same file, and replay dead processes' journals."""
        flush_pending(self.db)

    def _in_flight(self, run_id: str | None, *, family: bool = False) -> list[CallRecord]:
        """Rows other live processes have journaled but not yet written (counted, not moved)."""
        mine = set().union(*(p.own() for p in _pendings(self.db.path)))
        rows = []
        for path in _journals(self.db):
            if path not in mine:
                rows += [r for r in _read_journal(path) if _of_run(r.run_id, run_id, family)]
        return rows

    def calls(self, run_id: str | None = None) -> list[CallRecord]:
        """The calls (of one run), oldest first."""
        self.flush_all()
        where, params = _where(run_id)
        rows = self.db.query_dicts(f"SELECT {_COLUMNS} FROM llm_calls{where} ORDER BY created_at, id", params)
        stored = [_record(r) for r in rows]
        ids = {r.id for r in stored}
        extra = [r for r in self._in_flight(run_id) if r.id not in ids]
        return sorted([*stored, *extra], key=lambda r: (r.created_at, r.id))

    def totals(self, run_id: str | None = None, *, family: bool = False) -> CallTotals:
        """Sums over every call, or over one run's calls (``family``: and its sub-runs', ``run_id/…``)."""
        self.flush_all()
        where, params = _where(run_id, family=family)
        row = self.db.query(
            "SELECT count(*), count(*) FILTER (WHERE cached), coalesce(sum(prompt_tokens), 0),"
            " coalesce(sum(completion_tokens), 0), coalesce(sum(cost_usd), 0), coalesce(sum(latency_s), 0),"
            " count(*) FILTER (WHERE status <> 'ok'),"
            " coalesce(sum(coalesce(attempts, 1)) FILTER (WHERE NOT cached), 0),"
            " coalesce(sum(CASE WHEN cached THEN 0 WHEN status <> 'ok' THEN coalesce(attempts, 1)"
            f" ELSE greatest(coalesce(attempts, 1) - 1, 0) END), 0) FROM llm_calls{where}",
            params,
        )[0]
        stored = CallTotals.from_row(row)
        extra = self._in_flight(run_id, family=family)
        if not extra:
            return stored
        known = {
            r[0]
            for r in self.db.query(
                f"SELECT id FROM llm_calls WHERE id IN ({', '.join('?' * len(extra))})", [r.id for r in extra]
            )
        }
        return stored.plus(sum_calls([r for r in extra if r.id not in known]))


def journal_folder(db: Database) -> Path:
    """Where the ledger journals of ``db`` live."""
    return db.path.with_name(db.path.name + ".ledger")


def _journals(db: Database) -> list[Path]:
    folder = journal_folder(db)
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def _read_journal(path: Path) -> list[CallRecord]:
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(CallRecord.model_validate_json(line))
        except ValueError:
            continue  # a line cut by a kill mid-write: the call's answer was never used
    return out


def recover_journals(db: Database) -> int:
    """Replay the journals of processes that are gone into ``llm_calls`` (idempotent); returns rows replayed."""
    replayed = 0
    for path in _journals(db):
        try:
            pid = int(path.name.split("-", 1)[0])
        except ValueError:
            continue
        if pid_alive(pid):
            continue
        rows = _read_journal(path)
        if rows:
            with db.transaction() as con:
                con.executemany(_INSERT, [_row(call) for call in rows])
            replayed += len(rows)
        path.unlink(missing_ok=True)
    return replayed


def _record(r: dict[str, Any]) -> CallRecord:
    r = {**r, "created_at": r["created_at"].replace(tzinfo=UTC)}
    r["attempts"] = 1 if r.get("attempts") is None else r["attempts"]
    r["detail"] = r.get("detail") or ""
    r["unit"] = r.get("unit") or ""
    return CallRecord(**r)


def flush_pending(db: Database) -> None:
    """Before a read of ``llm_calls``: write the buffered rows of every ledger of this process on
    ``db``'s file and replay the journals of processes that are gone."""
    for pending in _pendings(db.path):
        pending.flush()
    with _LIVE_LOCK:  # written orphans are done (one that could not write keeps its rows and stays)
        group = _ORPHANS.get(str(db.path), set())
        group -= {p for p in group if not (p.rows or p.own() or p._unsure)}
    recover_journals(db)


def _row(call: CallRecord) -> list[object]:
    created = call.created_at.astimezone(UTC).replace(tzinfo=None)
    return [
        call.id,
        call.run_id,
        call.task,
        call.model,
        call.cache_key,
        call.prompt_tokens,
        call.completion_tokens,
        call.cost_usd,
        call.latency_s,
        call.cached,
        call.status,
        created,
        call.attempts,
        call.detail,
        call.unit,
    ]


# Buffers of ledgers the garbage collector finalised, by file: still this process's rows, so
# every reader's flush_pending writes them (and counts their journals as this process's).
_ORPHANS: dict[str, set[_Pending]] = {}


# Buffers the garbage collector finalised and no reader has adopted yet. A deque: its append is
# atomic and takes no lock, because a finalizer can run anywhere -- in the middle of code that
# holds _LIVE_LOCK on this very thread (a lock taken there again would never be released).
_FINALISED: deque[_Pending] = deque()


def _quiet_flush(pending: _Pending) -> None:
    # Runs from the garbage collector: possibly inside another unit of work on this thread, or
    # while this thread holds the database's lock (opening the file) or _LIVE_LOCK, so it must
    # neither write nor lock here. The buffer becomes an orphan: the next reader (flush_pending)
    # adopts and writes it, so totals never miss it, and the exit hook writes what is left. Its
    # rows are journaled meanwhile.
    if not threading.main_thread().is_alive():  # at interpreter exit: no unit is running
        _flush_ignoring_errors(pending)
        return
    _FINALISED.append(pending)


def _adopt_finalised() -> None:
    """Move the finalised buffers into ``_ORPHANS`` (call with ``_LIVE_LOCK`` held)."""
    while True:
        try:
            pending = _FINALISED.popleft()
        except IndexError:
            return
        _ORPHANS.setdefault(str(pending.db.path), set()).add(pending)


def _flush_ignoring_errors(pending: _Pending) -> None:
    with suppress(Exception):  # at exit the file may be gone (temp dirs); nothing to report to
        pending.flush()


def _pendings(path: Path) -> list[_Pending]:
    """This process's buffers for ``path``: live ledgers' and finalised ones'."""
    with _LIVE_LOCK:
        _adopt_finalised()
        live = list(_LIVE.get(str(path), ()))  # a finalizer during this copy only appends to _FINALISED
        return [*live, *(p for p in list(_ORPHANS.get(str(path), ())) if p not in live)]


@atexit.register
def _flush_orphans() -> None:
    with _LIVE_LOCK:
        _adopt_finalised()
        orphans = [p for group in _ORPHANS.values() for p in group]
        _ORPHANS.clear()
    for pending in orphans:
        _flush_ignoring_errors(pending)


def _where(run_id: str | None, *, family: bool = False) -> tuple[str, list[str]]:
    if run_id is not None and family:
        return " WHERE (run_id = ? OR starts_with(run_id, ?))", [run_id, run_id + "/"]
    return (" WHERE run_id = ?", [run_id]) if run_id is not None else ("", [])


def _of_run(found: str | None, run_id: str | None, family: bool) -> bool:
    """Whether a call of run ``found`` counts for ``run_id`` (every run when None; its sub-runs with ``family``)."""
    if run_id is None or found == run_id:
        return True
    return family and found is not None and found.startswith(run_id + "/")
