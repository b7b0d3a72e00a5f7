"""The LLM response cache and the call ledger in the relational store (tables ``llm_responses``,
``llm_calls``).

Both are ordinary inserts. A fresh paid call's ledger row is committed in the same transaction as its
cache entry (:meth:`SQLResponseCache.put` right after :meth:`SQLCallLedger.record` on the same thread,
as :class:`~furnace.llm.cache.CachedLLM` does before it returns the answer), so the ledger never holds a
paid call whose answer a rerun cannot find, and the answer is never used before its call is in the
ledger. Every other row (cache hits, failures) is committed when recorded. Several processes and
machines write at once: the cache keeps the first stored answer for a key (insert-if-absent), and
the ledger's totals are one query.

A cached response carries its keyed seal (``docs/reliability.md``): a row whose seal does not verify is
a miss (counted in ``refused``) and is replaced by the fresh answer. Rows older than ``ttl_s`` are
not served and are purged (:meth:`SQLResponseCache.prune`, ``furnace cache prune``).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, case, delete, func, or_, select, update

from furnace.domain.times import utc_now
from furnace.llm.cache import CallRecord, CallTotals
from furnace.llm.seam import Completion
from furnace.storage.responses import ResponseMemory
from furnace.storage.seals import response_seal, sealed
from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.schema import llm_calls, llm_responses

DEFAULT_RESPONSE_TTL_S = 90 * 24 * 3600
_R = llm_responses.c
_C = llm_calls.c
_CALL_FIELDS = tuple(col.name for col in llm_calls.columns)
# a model call's read of its answer, built once (SQLAlchemy memoizes its cache key on the object)
_GET = select(_R.completion, _R.created_at, _R.seal).where(_R.cache_key == bindparam("key"))


def _call_row(call: CallRecord) -> dict[str, Any]:
    row = {name: getattr(call, name) for name in _CALL_FIELDS}
    row["created_at"] = call.created_at.astimezone(UTC).replace(tzinfo=None)
    return row


class SQLCallLedger:
    """One row per model call in ``llm_calls`` (:class:`~furnace.llm.cache.CallLedger`)."""

    def __init__(self, db: SQLDatabase) -> None:
        self.db = db
        self._held = threading.local()  # a fresh paid call's row, until its answer is stored with it
        # a row's insert on SQLite's driver (a model call's hot path, see SQLDatabase.insert_on_driver)
        self.driver_insert = db.prepare(db.insert_if_absent(llm_calls))

    def record(self, call: CallRecord) -> None:
        """Append one call. A fresh, successful call waits on this thread for its cache entry
        (:meth:`take`), which is committed with it; every other row is committed now."""
        self.flush()  # a held row whose answer was never stored (the cache failed) is written first
        if not call.cached and call.status == "ok":
            self._held.row = _call_row(call)
            return
        self._insert(self.db, [_call_row(call)])

    def take(self, cache_key: str) -> dict[str, Any] | None:
        """The held row of the fresh call for ``cache_key`` on this thread (removed), if any."""
        row: dict[str, Any] | None = getattr(self._held, "row", None)
        if row is not None and row["cache_key"] == cache_key:
            self._held.row = None
            return row
        return None

    def flush(self) -> int:
        """Write this thread's held row (if its answer was not stored); returns how many were written."""
        row: dict[str, Any] | None = getattr(self._held, "row", None)
        if row is None:
            return 0
        self._insert(self.db, [row])
        self._held.row = None
        return 1

    def _insert(self, db: SQLDatabase, rows: list[dict[str, Any]]) -> None:
        if not db.insert_on_driver([(self.driver_insert, row, False) for row in rows]):
            db.write(lambda conn: self.insert_rows(conn, rows))

    def insert_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Insert ledger rows on ``conn`` (idempotent by row id)."""
        if rows:
            conn.execute(self.db.insert_if_absent(llm_calls), rows[0] if len(rows) == 1 else rows)

    def _where(self, run_id: str | None, family: bool) -> Any:
        if run_id is None:
            return None
        if family:
            return or_(_C.run_id == run_id, _C.run_id.startswith(run_id + "/", autoescape=True))
        return _C.run_id == run_id

    def calls(self, run_id: str | None = None) -> list[CallRecord]:
        """The calls (of one run), oldest first."""
        self.flush()
        query = select(llm_calls).order_by(_C.created_at, _C.id)
        where = self._where(run_id, False)
        if where is not None:
            query = query.where(where)
        out = []
        for row in self.db.query(query):
            data = dict(zip(_CALL_FIELDS, row, strict=True))
            data["created_at"] = data["created_at"].replace(tzinfo=UTC)
            data["attempts"] = 1 if data["attempts"] is None else data["attempts"]
            data["detail"] = data["detail"] or ""
            data["unit"] = data["unit"] or ""
            out.append(CallRecord(**data))
        return out

    def totals(self, run_id: str | None = None, *, family: bool = False, unit: str | None = None) -> CallTotals:
        """Sums over every call, or over one run's calls (``family``: and its sub-runs', ``run_id/…``); with
        ``unit``, over that unit of work's calls only."""
        self.flush()
        attempts = func.coalesce(_C.attempts, 1)
        query = select(
            func.count(),
            func.coalesce(func.sum(case((_C.cached, 1), else_=0)), 0),
            func.coalesce(func.sum(_C.prompt_tokens), 0),
            func.coalesce(func.sum(_C.completion_tokens), 0),
            func.coalesce(func.sum(_C.cost_usd), 0.0),
            func.coalesce(func.sum(_C.latency_s), 0.0),
            func.coalesce(func.sum(case((_C.status != "ok", 1), else_=0)), 0),
            func.coalesce(func.sum(case((_C.cached, 0), else_=attempts)), 0),
            func.coalesce(
                func.sum(
                    case(
                        (_C.cached, 0),
                        (_C.status != "ok", attempts),
                        else_=case((attempts > 1, attempts - 1), else_=0),
                    )
                ),
                0,
            ),
        )
        where = self._where(run_id, family)
        if where is not None:
            query = query.where(where)
        if unit is not None:
            query = query.where(_C.unit == unit)
        row = self.db.query(query)[0]
        return CallTotals.from_row(row)


class SQLResponseCache(ResponseMemory):
    """Completions by content key in ``llm_responses`` (:class:`~furnace.llm.cache.ResponseCache`), with an
    in-memory read layer; ``ledger``: the call ledger whose fresh rows commit with their answers."""

    def __init__(
        self,
        db: SQLDatabase,
        *,
        ledger: SQLCallLedger | None = None,
        memory_items: int = 4096,
        ttl_s: float | None = DEFAULT_RESPONSE_TTL_S,
    ) -> None:
        super().__init__(memory_items=memory_items, ttl_s=ttl_s)
        self.db = db
        self.ledger = ledger
        self._insert_returning = db.insert_if_absent(llm_responses).returning(_R.cache_key)  # built once
        # a model call's cache read and its answer's insert on SQLite's driver (SQLDatabase.read, .insert_on_driver)
        self._driver_get = db.prepare(_GET)
        self._driver_put = db.prepare(db.insert_if_absent(llm_responses))

    def _cutoff(self, ttl_s: float | None = None) -> datetime:
        ttl = self.ttl_s if ttl_s is None else ttl_s
        return datetime(1970, 1, 1) if ttl is None else utc_now() - timedelta(seconds=ttl)

    def get(self, key: str) -> Completion | None:
        """The stored completion for ``key``, or None (also for an expired row or one whose seal fails)."""
        known = self._recall(key)
        if known is not None:
            return known
        rows = self.db.read(self._driver_get, _GET, {"key": key})
        if not rows or rows[0][1] < self._cutoff():
            return None
        return self._served(self.db.sealer, key, rows[0][0], rows[0][2])

    def put(self, key: str, completion: Completion, *, task: str = "") -> bool:
        """Insert unless a live, sealed row is present (then converge on it); True when this call wrote the
        row. The fresh call's ledger row held for ``key`` commits in the same transaction."""
        stored = completion.model_copy(update={"cached": False})
        text = stored.model_dump_json()
        sealer = self.db.sealer
        seal = response_seal(sealer, key, text)
        held = self.ledger.take(key) if self.ledger is not None else None
        if self._stored_on_driver(key, completion, text, seal, task, held):
            self._remember(key, stored)
            return True

        def work(conn: Connection) -> tuple[bool, Completion]:
            if held is not None and self.ledger is not None:
                self.ledger.insert_rows(conn, [held])
            row = {"cache_key": key, "model": completion.model, "task": task, "completion": text, "seal": seal}
            inserted = conn.execute(self._insert_returning, row).all()
            if inserted:
                return True, stored
            first = conn.execute(select(_R.completion, _R.seal, _R.created_at).where(_R.cache_key == key)).first()
            if (
                first is not None
                and first[2] >= self._cutoff()
                and sealed(first[1], response_seal(sealer, key, first[0]))
            ):
                return False, Completion.model_validate_json(first[0])  # another writer stored it first
            conn.execute(  # expired, or a row written outside furnace: replaced by this answer
                update(llm_responses)
                .where(_R.cache_key == key)
                .values(completion=text, seal=seal, model=completion.model, task=task, created_at=utc_now())
            )
            return True, stored

        try:
            wrote, stored = self.db.write(work)
        except BaseException:
            if held is not None and self.ledger is not None:
                self.ledger._insert(self.db, [held])  # the paid call is never lost with its answer
            raise
        self._remember(key, stored)
        return wrote

    def _stored_on_driver(
        self, key: str, completion: Completion, text: str, seal: str, task: str, held: dict[str, Any] | None
    ) -> bool:
        """The common case of :meth:`put` on SQLite's driver: the held ledger row and the answer inserted in
        one transaction. False (nothing written) when the key is present (the full path decides between
        that row and this answer), elsewhere than SQLite outside a unit, or on an error (the full path
        retries a busy store and says what failed)."""
        row = {
            "cache_key": key,
            "model": completion.model,
            "task": task,
            "completion": text,
            "seal": seal,
            "created_at": utc_now(),
        }
        ledger = self.ledger.driver_insert if self.ledger is not None else None
        inserts = [(ledger, held, False)] if held is not None else []
        return self.db.insert_on_driver([*inserts, (self._driver_put, row, True)])

    def prune(self, ttl_s: float | None = None) -> int:
        """Delete responses older than ``ttl_s`` (default: this cache's TTL); returns how many."""
        if (self.ttl_s if ttl_s is None else ttl_s) is None:
            return 0
        cutoff = self._cutoff(ttl_s)

        def work(conn: Connection) -> list[str]:
            return [
                r[0] for r in conn.execute(delete(llm_responses).where(_R.created_at < cutoff).returning(_R.cache_key))
            ]

        gone = self.db.write(work)
        self._forget(gone)
        return len(gone)

    def prune_if_due(self) -> int:
        """The automatic purge: delete expired rows when the oldest row is past the TTL."""
        if self.ttl_s is None:
            return 0
        oldest = self.db.query(select(func.min(_R.created_at)))[0][0]
        return self.prune() if oldest is not None and oldest < self._cutoff() else 0

    def stats(self) -> dict[str, Any]:
        """Rows, expired rows, oldest/newest and rows per task (``furnace cache stats``)."""
        cutoff = self._cutoff()
        counts = self.db.query(
            select(
                func.count(),
                func.coalesce(func.sum(case((_R.created_at < cutoff, 1), else_=0)), 0),
                func.min(_R.created_at),
                func.max(_R.created_at),
            )
        )[0]
        by_task = self.db.query(select(_R.task, func.count()).group_by(_R.task).order_by(func.count().desc(), _R.task))
        sealer = self.db.sealer
        bad = sum(
            not sealed(seal, response_seal(sealer, key, text))
            for key, text, seal in self.db.query(select(_R.cache_key, _R.completion, _R.seal))
        )
        return self._stats(counts, by_task, bad)

    def __len__(self) -> int:
        return int(self.db.query(select(func.count()).select_from(llm_responses))[0][0])
