"""DuckDB storage for the LLM response cache and the call ledger.

Tables (migration ``0002_llm.sql``):

- ``llm_responses(cache_key PK, model, task, completion JSON, created_at)`` —
  insert-if-absent by content key, so processes racing on one key keep the
  first stored answer and a re-run repeats no finished model call;
- ``llm_calls(id PK, run_id, task, model, cache_key, prompt_tokens,
  completion_tokens, cost_usd, latency_s, cached, status, created_at)`` — one
  row per call (hits included). ``status`` is ``ok`` or an error class name,
  never an error message, so no provider text (which might echo a key) lands
  in the file.

Each operation uses one short-lived connection from :class:`Database`; none is
held across a model call. Opening one costs ~15-30 ms, so both classes avoid
needless round trips: the response cache keeps the completions it has seen in
memory (they are content-addressed, hence immutable), and the ledger buffers
rows and writes them in one transaction per batch (at ``batch`` rows, after
``flush_interval_s``, and at interpreter exit). A read (``totals``/``calls``)
first flushes every ledger of this process on the same file, so a budget check
always sees every call made so far in the process.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from contextlib import suppress
from datetime import UTC

from furnace.llm.cache import CallRecord, CallTotals
from furnace.llm.seam import Completion
from furnace.storage.duckdb.db import Database

_LIVE: dict[str, weakref.WeakSet[_Pending]] = {}
_LIVE_LOCK = threading.Lock()

_COLUMNS = (
    "id, run_id, task, model, cache_key, prompt_tokens, completion_tokens,"
    " cost_usd, latency_s, cached, status, created_at"
)


class DuckDBResponseCache:
    """Completions by content key in ``llm_responses``, with an in-memory read layer."""

    def __init__(self, db: Database, *, memory_items: int = 4096) -> None:
        self.db = db
        self.memory_items = memory_items
        self._memory: OrderedDict[str, Completion] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Completion | None:
        """The stored completion for ``key``, or None."""
        with self._lock:
            if key in self._memory:
                return self._memory[key]
        rows = self.db.query("SELECT completion FROM llm_responses WHERE cache_key = ?", [key])
        if not rows:
            return None
        found = Completion.model_validate_json(rows[0][0])
        self._remember(key, found)
        return found

    def put(self, key: str, completion: Completion, *, task: str = "") -> bool:
        """Insert unless present; True when this call inserted the row."""
        stored = completion.model_copy(update={"cached": False})
        with self.db.transaction() as con:
            rows = con.execute(
                "INSERT INTO llm_responses (cache_key, model, task, completion) VALUES (?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING RETURNING cache_key",
                [key, completion.model, task, stored.model_dump_json()],
            ).fetchall()
            if not rows:  # another process stored it first: converge on its answer
                first = con.execute("SELECT completion FROM llm_responses WHERE cache_key = ?", [key]).fetchall()
                stored = Completion.model_validate_json(first[0][0]) if first else stored
        self._remember(key, stored)
        return bool(rows)

    def _remember(self, key: str, completion: Completion) -> None:
        with self._lock:
            self._memory[key] = completion
            self._memory.move_to_end(key)
            while len(self._memory) > self.memory_items:
                self._memory.popitem(last=False)

    def __len__(self) -> int:
        return int(self.db.query("SELECT count(*) FROM llm_responses")[0][0])


class _Pending:
    """Buffered ledger rows for one file; outlives its ledger until flushed."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.rows: list[CallRecord] = []
        self.lock = threading.Lock()
        self.last_flush = time.monotonic()

    def flush(self) -> int:
        with self.lock:
            rows, self.rows = self.rows, []
            self.last_flush = time.monotonic()
        if not rows:
            return 0
        try:
            with self.db.transaction() as con:
                con.executemany(
                    f"INSERT INTO llm_calls ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT DO NOTHING",
                    [_row(call) for call in rows],
                )
        except BaseException:
            with self.lock:  # keep them for the next attempt
                self.rows[:0] = rows
            raise
        return len(rows)


class DuckDBCallLedger:
    """One row per model call in ``llm_calls``, written in batches."""

    def __init__(self, db: Database, *, batch: int = 32, flush_interval_s: float = 0.5) -> None:
        self.db = db
        self.batch = max(1, batch)
        self.flush_interval_s = flush_interval_s
        self._pending = _Pending(db)
        # flushed when the ledger is garbage-collected or the interpreter exits
        weakref.finalize(self, _quiet_flush, self._pending)
        with _LIVE_LOCK:
            _LIVE.setdefault(str(db.path), weakref.WeakSet()).add(self._pending)

    def record(self, call: CallRecord) -> None:
        """Append one call (written at the next flush; idempotent by its id)."""
        pending = self._pending
        with pending.lock:
            pending.rows.append(call)
            due = len(pending.rows) >= self.batch or time.monotonic() - pending.last_flush >= self.flush_interval_s
        if due:
            pending.flush()

    def flush(self) -> int:
        """Write this ledger's buffered rows in one transaction; returns how many."""
        return self._pending.flush()

    def flush_all(self) -> None:
        """Flush every ledger of this process writing to the same file."""
        flush_pending(self.db.path)

    def calls(self, run_id: str | None = None) -> list[CallRecord]:
        """The calls (of one run), oldest first."""
        self.flush_all()
        where, params = _where(run_id)
        rows = self.db.query_dicts(f"SELECT {_COLUMNS} FROM llm_calls{where} ORDER BY created_at, id", params)
        return [CallRecord(**{**r, "created_at": r["created_at"].replace(tzinfo=UTC)}) for r in rows]

    def totals(self, run_id: str | None = None) -> CallTotals:
        """Sums over every call, or over one run's calls."""
        self.flush_all()
        where, params = _where(run_id)
        row = self.db.query(
            "SELECT count(*), count(*) FILTER (WHERE cached), coalesce(sum(prompt_tokens), 0),"
            " coalesce(sum(completion_tokens), 0), coalesce(sum(cost_usd), 0), coalesce(sum(latency_s), 0),"
            f" count(*) FILTER (WHERE status <> 'ok') FROM llm_calls{where}",
            params,
        )[0]
        return CallTotals(
            calls=int(row[0]),
            cached_calls=int(row[1]),
            prompt_tokens=int(row[2]),
            completion_tokens=int(row[3]),
            cost_usd=float(row[4]),
            latency_s=float(row[5]),
            failed_calls=int(row[6]),
        )


def flush_pending(db_path: object) -> None:
    """Write the buffered rows of every ledger of this process on ``db_path`` (before a read of the table)."""
    with _LIVE_LOCK:
        pendings = list(_LIVE.get(str(db_path), ()))
    for pending in pendings:
        pending.flush()


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
    ]


def _quiet_flush(pending: _Pending) -> None:
    # Runs from the garbage collector, possibly in the middle of another unit of work on this
    # thread: flush on a thread of its own so the rows never land in that unit's cursor.
    try:
        worker = threading.Thread(target=_flush_ignoring_errors, args=(pending,), daemon=True)
        worker.start()
        worker.join()
    except RuntimeError:  # no new threads at interpreter shutdown
        _flush_ignoring_errors(pending)


def _flush_ignoring_errors(pending: _Pending) -> None:
    with suppress(Exception):  # at exit the file may be gone (temp dirs); nothing to report to
        pending.flush()


def _where(run_id: str | None) -> tuple[str, list[str]]:
    return (" WHERE run_id = ?", [run_id]) if run_id is not None else ("", [])
