"""Response cache and call accounting around any model.

:class:`CachedLLM` wraps an :class:`~furnace.llm.seam.LLM`:

- **Response cache.** Each request's content key
  (:func:`~furnace.llm.seam.answer_key`: everything that shapes the answer,
  nothing else) looks up a stored completion first. A hit is served with
  ``cached=True`` and ``cost_usd=0.0`` and makes no inner call. Only
  successful completions are stored (insert-if-absent, so two processes
  racing on one key keep the first answer).
- **Single-flight.** Concurrent identical requests in one process call the
  inner model once; the others wait and are served the same completion
  (as ``cached=True``) or the same error.
- **Accounting.** Every call, hit or miss, failed or not, is one
  :class:`CallRecord` in the ledger, attributed to the request's ``run_id`` or
  to the wrapper's (``cached_llm.for_run(run_id)``), and to the request's ``unit`` (an
  experiment's generation and slot) when it names one. Token and cost figures in
  the ledger are what was *spent*: a cache hit records zero tokens and zero
  cost. :meth:`CallLedger.totals` sums them.

Storage is pluggable: :class:`MemoryResponseCache` / :class:`MemoryCallLedger`
here, ``SQLResponseCache`` / ``SQLCallLedger`` in
``furnace.storage.sql.llm_calls`` (the live store). Nothing stored contains a request's
messages, a key or a header: the cache holds completions, the ledger numbers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from furnace.domain.threads import Flights
from furnace.llm.seam import LLM, Completion, LLMRequest, answer_key


class CallRecord(BaseModel):
    """One logical model call as accounted: who asked, what it cost, whether it was served from cache.

    ``attempts`` counts the requests the client made for it (retries and re-asks); tokens and
    cost are what all of them were billed, failed ones included. ``detail`` is a scrubbed
    excerpt of an unusable reply (never an error message from the provider).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    run_id: str | None = None
    task: str
    model: str
    cache_key: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    status: str = "ok"  # "ok" or the error class name (never its message)
    created_at: datetime
    attempts: int = 1
    detail: str = ""
    unit: str = ""  # the unit of work within the run it was made for (the request's ``unit``), "" if none

    @property
    def failed_attempts(self) -> int:
        if self.cached:
            return 0
        return self.attempts if self.status != "ok" else max(0, self.attempts - 1)


class CallTotals(BaseModel):
    """The one accounting type: sums over call records (the ledger, a meter, a report, MLflow).

    - ``calls``: logical calls the code made (cache hits included); shown (:meth:`as_dict`:
      reports, summaries, MLflow, experiment records) ``calls`` means model calls instead;
    - ``cached_calls``: served from the response cache (free);
    - ``model_calls``: reached the model (``calls - cached_calls``);
    - ``failed_calls``: logical calls that ended in an error;
    - ``attempts`` / ``failed_attempts``: requests sent (retries, re-asks) and how many failed;
    - tokens and cost: everything billed, failed attempts included.
    """

    model_config = ConfigDict(frozen=True)

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    failed_calls: int = 0
    attempts: int = 0
    failed_attempts: int = 0

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> CallTotals:
        """Totals from a ledger query's row, in field order (calls, cached_calls, prompt_tokens,
        completion_tokens, cost_usd, latency_s, failed_calls, attempts, failed_attempts)."""
        values: dict[str, Any] = {
            name: float(value) if name in ("cost_usd", "latency_s") else int(value)
            for name, value in zip(cls.model_fields, row, strict=True)
        }
        return cls(**values)

    @property
    def model_calls(self) -> int:
        """Calls that reached the model (not served from cache)."""
        return self.calls - self.cached_calls

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def tokens(self) -> int:
        return self.total_tokens

    @property
    def hit_rate(self) -> float:
        """Share of calls served from the cache (0.0 when there were none)."""
        return self.cached_calls / self.calls if self.calls else 0.0

    cache_hit_rate = hit_rate

    def plus(self, other: CallTotals) -> CallTotals:
        return CallTotals(**{k: getattr(self, k) + getattr(other, k) for k in CallTotals.model_fields})

    def minus(self, other: CallTotals) -> CallTotals:
        out = {k: getattr(self, k) - getattr(other, k) for k in CallTotals.model_fields}
        out["cost_usd"] = round(out["cost_usd"], 9)
        return CallTotals(**out)

    def as_dict(self) -> dict[str, float]:
        """The figures shown in reports, stored in summaries and logged to MLflow. There ``calls``
        means model calls (``model_calls``, kept under its old name too); cache hits are
        ``cached_calls``, requests sent (retries included) ``attempts``."""
        return {
            "calls": self.model_calls,
            "model_calls": self.model_calls,
            "cached_calls": self.cached_calls,
            "failed_calls": self.failed_calls,
            "attempts": self.attempts,
            "failed_attempts": self.failed_attempts,
            "tokens": self.total_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "cache_hit_rate": round(self.hit_rate, 4),
        }


def record_totals(record: CallRecord) -> CallTotals:
    """One record as totals."""
    return CallTotals(
        calls=1,
        cached_calls=int(record.cached),
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens,
        cost_usd=record.cost_usd,
        latency_s=record.latency_s,
        failed_calls=int(record.status != "ok"),
        attempts=0 if record.cached else record.attempts,
        failed_attempts=record.failed_attempts,
    )


class ResponseCache(Protocol):
    """Completions by content key."""

    def get(self, key: str) -> Completion | None:
        """The stored completion for ``key``, or None."""
        ...

    def put(self, key: str, completion: Completion, *, task: str = "") -> bool:
        """Store ``completion`` unless ``key`` is present; True when it was inserted.
        ``task`` labels the row for people browsing the store."""
        ...


class CallLedger(Protocol):
    """Append-only record of model calls."""

    def record(self, call: CallRecord) -> None:
        """Append one call."""
        ...

    def totals(self, run_id: str | None = None, *, family: bool = False, unit: str | None = None) -> CallTotals:
        """Sums over every call, or over one run's calls (``family``: and its sub-runs', ``run_id/…``,
        e.g. a sweep's cells); with ``unit``, over the calls of that unit of work only (``held-out``)."""
        ...

    def calls(self, run_id: str | None = None) -> list[CallRecord]:
        """The calls (of one run), oldest first."""
        ...


def sum_calls(records: list[CallRecord]) -> CallTotals:
    """Totals of ``records`` (shared by the in-memory ledger and tests): :func:`record_totals` of each,
    added in order (the same figures as adding them one ``CallTotals`` at a time, without building one
    per record)."""
    calls = cached_calls = prompt = completion = failed = attempts = failed_attempts = 0
    cost = latency = 0.0
    for record in records:
        calls += 1
        cached_calls += int(record.cached)
        prompt += record.prompt_tokens
        completion += record.completion_tokens
        cost += record.cost_usd
        latency += record.latency_s
        failed += int(record.status != "ok")
        attempts += 0 if record.cached else record.attempts
        failed_attempts += record.failed_attempts
    return CallTotals(
        calls=calls,
        cached_calls=cached_calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=cost,
        latency_s=latency,
        failed_calls=failed,
        attempts=attempts,
        failed_attempts=failed_attempts,
    )


class MemoryResponseCache:
    """A thread-safe in-process response cache: each of its steps is one atomic dict operation (the first
    answer put for a key is kept: ``setdefault``), so it needs no lock of its own."""

    def __init__(self) -> None:
        self._data: dict[str, Completion] = {}

    def get(self, key: str) -> Completion | None:
        return self._data.get(key)

    def put(self, key: str, completion: Completion, *, task: str = "") -> bool:
        mine = completion.model_copy()  # an object of this call's own: kept means this put inserted it
        return self._data.setdefault(key, mine) is mine

    def __len__(self) -> int:
        return len(self._data)


class MemoryCallLedger:
    """A thread-safe in-process call ledger: a list appended to (one atomic ``append``) and read as a copy
    (one atomic ``list(...)``), so it needs no lock of its own."""

    def __init__(self) -> None:
        self._rows: list[CallRecord] = []

    def record(self, call: CallRecord) -> None:
        self._rows.append(call)

    def calls(self, run_id: str | None = None) -> list[CallRecord]:
        return [r for r in list(self._rows) if run_id is None or r.run_id == run_id]

    def totals(self, run_id: str | None = None, *, family: bool = False, unit: str | None = None) -> CallTotals:
        if not family or run_id is None:
            rows = self.calls(run_id)
        else:
            rows = [r for r in list(self._rows) if r.run_id == run_id or (r.run_id or "").startswith(run_id + "/")]
        return sum_calls([r for r in rows if unit is None or r.unit == unit])


class CachedLLM:
    """An LLM that serves repeats from a response cache and accounts every call."""

    def __init__(
        self,
        inner: LLM,
        cache: ResponseCache | None = None,
        ledger: CallLedger | None = None,
        *,
        run_id: str | None = None,
        _flights: Flights[Completion] | None = None,
    ) -> None:
        self.inner = inner
        self.cache: ResponseCache = cache if cache is not None else MemoryResponseCache()
        self.ledger: CallLedger = ledger if ledger is not None else MemoryCallLedger()
        self.run_id = run_id
        self.model_name = inner.model_name
        # in-process single-flight table, shared with the for_run views
        self._flights: Flights[Completion] = _flights if _flights is not None else Flights()

    def __repr__(self) -> str:
        return f"CachedLLM({self.inner!r}, run_id={self.run_id!r})"

    def for_run(self, run_id: str | None) -> CachedLLM:
        """A view that attributes its calls to ``run_id`` (same cache, ledger, single-flight)."""
        return CachedLLM(self.inner, self.cache, self.ledger, run_id=run_id, _flights=self._flights)

    def totals(self, run_id: str | None = None) -> CallTotals:
        """The ledger's totals (shorthand)."""
        return self.ledger.totals(run_id)

    def run_totals(self) -> CallTotals:
        """Totals of this view's run, from the ledger (every process that worked on it)."""
        return self.ledger.totals(self.run_id) if self.run_id is not None else self.ledger.totals()

    def run_calls(self) -> list[CallRecord]:
        """The calls of this view's run, from the ledger (every process that worked on it), oldest first."""
        return self.ledger.calls(self.run_id)

    def request_key(self, request: LLMRequest) -> str:
        """The key ``request`` is cached and single-flighted under (two requests with one key are one call)."""
        return answer_key(self.inner, request)

    def complete(self, request: LLMRequest) -> Completion:
        """Serve from cache, join an identical in-flight call, or call the inner model once."""
        return self.complete_keyed(request, self.request_key(request))

    def complete_keyed(
        self, request: LLMRequest, key: str, *, gate: Callable[[], AbstractContextManager[Any]] | None = None
    ) -> Completion:
        """:meth:`complete` for a caller that has the request's :meth:`request_key` already (the metered
        model asks it for every call: the key is then computed once, not twice). ``gate``: entered around
        the inner model's call alone (the metered model's slot: a cache hit, a call joining another's,
        the cache read and the answer's write hold none); the time waiting at it is not the call's
        latency."""
        started = time.perf_counter()
        flight, leader = self._flights.join(key)
        if not leader:
            try:
                shared = flight.wait()
            except BaseException as err:
                self._record(request, key, started, cached=True, error=err)
                raise
            return self._served(request, key, shared, started)
        with self._flights.lead(key, flight):  # followers see the leader's error (e.g. the cache's own)
            hit = self.cache.get(key)
            if hit is not None:
                flight.value = hit
                return self._served(request, key, hit, started)
            try:
                if gate is None:
                    fresh = self.inner.complete(request)
                else:
                    asked = time.perf_counter()
                    with gate():
                        started += time.perf_counter() - asked  # waiting for the gate is not the call's
                        fresh = self.inner.complete(request)
            except BaseException as err:
                self._record(request, key, started, cached=False, error=err)
                raise
            result = fresh.model_copy(update={"cached": False})
            # write-ahead: the paid call is in the ledger before its answer is stored or used
            self._record(request, key, started, cached=False, completion=result)
            self.cache.put(key, result, task=request.task.value)
            flight.value = result
            return result

    # --- internals ---------------------------------------------------------

    def _served(self, request: LLMRequest, key: str, stored: Completion, started: float) -> Completion:
        served = stored.model_copy(update={"cached": True, "cost_usd": 0.0, "latency_s": time.perf_counter() - started})
        self._record(request, key, started, cached=True, completion=served)
        return served

    def _record(
        self,
        request: LLMRequest,
        key: str,
        started: float,
        *,
        cached: bool,
        completion: Completion | None = None,
        error: BaseException | None = None,
    ) -> None:
        spent = completion is not None and not cached
        paid: tuple[Any, float] | None = getattr(error, "spent", None) if error is not None and not cached else None
        prompt_tokens = completion_tokens = 0
        cost = 0.0
        if spent and completion is not None:
            prompt_tokens, completion_tokens = completion.usage.prompt_tokens, completion.usage.completion_tokens
            cost = completion.cost_usd
        elif paid is not None:  # a failed call's attempts were billed too
            prompt_tokens, completion_tokens, cost = paid[0].prompt_tokens, paid[0].completion_tokens, paid[1]
        attempts = completion.attempts if completion is not None else int(getattr(error, "attempts", 1) or 1)
        row: dict[str, Any] = {
            "id": uuid.uuid4().hex,
            "run_id": request.run_id or self.run_id,
            "unit": request.unit or "",
            "task": request.task.value,
            "model": completion.model if completion is not None else self.model_name,
            "cache_key": key,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cost_usd": cost,
            "latency_s": time.perf_counter() - started,
            "cached": cached,
            "status": "ok" if error is None else type(error).__name__,
            "created_at": datetime.now(UTC),
            "attempts": 0 if cached else attempts,
            "detail": str(getattr(error, "excerpt", "") or "")[:300] if error is not None else "",
        }
        self.ledger.record(CallRecord(**row))
