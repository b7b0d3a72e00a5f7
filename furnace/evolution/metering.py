"""A model wrapper that bounds concurrency, meters calls and enforces the budget.

The meter is this process's running :class:`~furnace.llm.cache.CallTotals` (the
same type as the ledger's); it drives the budget. A run's reported totals come
from the call ledger, which also holds what earlier (interrupted) runs spent.

Its slots are handed out by priority: when a slot frees, the waiting call with the smallest
priority gets it (ties: first come, first served). The evolution loop gives each unit its
order number as priority, so the units closest to finishing (the oldest) are served first.
Two phases are served otherwise (:meth:`MeteredLLM.serve`), since no plan waits on the oldest
units there: generation 0, which every plan needs whole, first come, first served (a seed's judge
calls queue behind the other seeds' answers, so generation 0 ends with many independent calls
rather than the last seed's answer → judge chain on mostly idle slots); and the units left once
the last child is planned, youngest first (the run ends when all of them have, and the youngest
has the longest chain of calls left).

Its :class:`CallBook` credits the calls of an evolution run's units in plan order, so what each
unit is credited with never depends on which unit asked a shared request first; while the
evolution loop reserves ``max_calls`` unit by unit (``reserving``), no call is refused for it here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from furnace.domain.errors import BudgetExceeded
from furnace.domain.guarded import Guarded, serialized
from furnace.domain.threads import PrioritySlots
from furnace.evolution.config import Budget
from furnace.llm.cache import CallTotals
from furnace.llm.seam import LLM, Completion, LLMRequest

Meter = CallTotals  # the one accounting type (furnace.llm.cache.CallTotals)


def completion_totals(completion: Completion) -> CallTotals:
    """One answered call as totals (a cache hit costs nothing and made no request)."""
    if completion.cached:
        return CallTotals(calls=1, cached_calls=1)
    return CallTotals(
        calls=1,
        prompt_tokens=completion.usage.prompt_tokens,
        completion_tokens=completion.usage.completion_tokens,
        cost_usd=completion.cost_usd,
        attempts=completion.attempts,
        failed_attempts=max(0, completion.attempts - 1),
    )


def error_totals(err: BaseException) -> CallTotals:
    """One failed call as totals: its attempts failed, and what they were billed counts."""
    attempts = int(getattr(err, "attempts", 1) or 1)
    spent = getattr(err, "spent", None)
    usage, cost = spent if spent is not None else (None, 0.0)
    return CallTotals(
        calls=1,
        failed_calls=1,
        prompt_tokens=getattr(usage, "prompt_tokens", 0),
        completion_tokens=getattr(usage, "completion_tokens", 0),
        cost_usd=cost,
        attempts=attempts,
        failed_attempts=attempts,
    )


class Tally:
    """A running sum of call totals: the figures ``CallTotals.plus`` would give, added field by field
    in the same order, without building a ``CallTotals`` for every call (``totals()`` builds one)."""

    __slots__ = (
        "calls",
        "cached_calls",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "latency_s",
        "failed_calls",
        "attempts",
        "failed_attempts",
    )  # CallTotals' fields (tested)

    def __init__(self) -> None:
        self.calls = self.cached_calls = self.prompt_tokens = self.completion_tokens = 0
        self.failed_calls = self.attempts = self.failed_attempts = 0
        self.cost_usd = self.latency_s = 0.0

    def add(self, totals: CallTotals) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(totals, name))

    def add_completion(self, completion: Completion) -> None:
        """Add :func:`completion_totals` of ``completion``."""
        self.calls += 1
        if completion.cached:
            self.cached_calls += 1
            return
        self.prompt_tokens += completion.usage.prompt_tokens
        self.completion_tokens += completion.usage.completion_tokens
        self.cost_usd += completion.cost_usd
        self.attempts += completion.attempts
        self.failed_attempts += max(0, completion.attempts - 1)

    def totals(self) -> CallTotals:
        return CallTotals(**{name: getattr(self, name) for name in self.__slots__})


_HIT = CallTotals(calls=1, cached_calls=1)  # a call served by the cache: free


class CallBook(Guarded):
    """Credits the calls of a run's units deterministically. Which unit of a run pays for a request two
    units ask (a reflection's parent answer, a judgement of the same reply) depends on which asked first,
    in wall time; the book credits it instead to the first unit *in plan order* that asked it
    (:meth:`credit`, called in plan order), and every later ask is a cache hit. What a paid request cost
    is what its one paid call in this run spent (single-flight and the cache make it one); a request
    answered from the cache as it was before the run is free whoever asks it. So a unit's credited
    calls depend on the plans alone, never on thread timing, and the credits of the units credited so
    far add up to at least what they paid (a request paid by a unit still under way and asked by one
    credited already is counted in both: never less)."""

    def __init__(self) -> None:
        self._asked: dict[str, list[str]] = {}  # unit -> keys of its answered calls, in order
        self._made: dict[str, Tally] = {}  # unit -> its calls credited as made: failed ones, ones with no key
        self._paid: dict[str, CallTotals] = {}  # key -> what its paid call in this run spent
        self._landing: dict[str, int] = {}  # key -> its calls under way (started at the model, not landed)
        self._credited: set[str] = set()

    @serialized
    def start(self, key: str) -> None:
        """A call of ``key`` goes to the model (before it could be answered, so a credit waits for it)."""
        self._landing[key] = self._landing.get(key, 0) + 1

    @serialized
    def made(self, unit: str, totals: CallTotals) -> None:
        """A call of ``unit`` credited as it was made (a model with no cache keys below the router: each
        unit pays its own calls there)."""
        self._made.setdefault(unit, Tally()).add(totals)

    @serialized
    def land(self, key: str, unit: str, completion: Completion | None, failed: CallTotals | None = None) -> None:
        """The call of ``key`` made for ``unit`` landed: answered (``completion``) or failed."""
        if completion is not None:
            if not completion.cached:
                self._paid.setdefault(key, completion_totals(completion))
            self._asked.setdefault(unit, []).append(key)
        elif failed is not None:
            self._made.setdefault(unit, Tally()).add(failed)
        left = self._landing.get(key, 1) - 1
        if left:
            self._landing[key] = left
        else:
            self._landing.pop(key, None)
            self._changed()

    @serialized
    def upper(self, unit: str, earlier: Iterable[str]) -> int:
        """At most how many model calls ``unit`` will be credited with for the calls it asked so far, while
        the units ``earlier`` (every unit before it in plan order not credited yet) are under way: a request
        credited already or asked by one of them is a cache hit for it (credited to the first unit in plan
        order that asked it), one the cache held before the run is free, any other counts what its paid
        call cost (one call while it is landing); its failed calls count as made."""
        seen = set(self._credited)
        for other in earlier:
            seen.update(self._asked.get(other, ()))
        made = self._made.get(unit)
        calls = made.calls - made.cached_calls if made is not None else 0
        for key in dict.fromkeys(self._asked.get(unit, ())):
            if key in seen:
                continue
            paid = self._paid.get(key)
            if paid is not None:
                calls += paid.model_calls
            elif self._landing.get(key):
                calls += 1
        return calls

    @serialized
    def credit(self, unit: str) -> CallTotals:
        """What ``unit`` is credited with (call once per unit, in plan order, after it finished): each
        request it asked that no unit credited before it asked, at what it cost in this run (free when
        the cache had it before the run), every other ask a cache hit, and its failed calls (and any
        call with no cache key) as made."""
        tally = self._made.pop(unit, None) or Tally()
        asked = self._asked.pop(unit, [])
        # a paid call of a request it asked lands in a moment (this unit has its answer): wait for it
        self._wait_until(lambda: not any(self._landing.get(key) for key in asked))
        for key in asked:
            if key in self._credited:
                tally.add(_HIT)
            else:
                self._credited.add(key)
                tally.add(self._paid.get(key, _HIT))
        return tally.totals()


class _AtPriority:
    """The metered model as seen by one unit: every call waits for a slot with ``priority``."""

    def __init__(self, metered: MeteredLLM, priority: float) -> None:
        self.metered, self.priority, self.model_name = metered, priority, metered.model_name

    def complete(self, request: LLMRequest) -> Completion:
        return self.metered.complete(request, priority=self.priority)


class MeteredLLM(Guarded):
    """Wraps an LLM (usually the cached one): at most ``concurrency`` calls in flight,
    every call metered, and :class:`BudgetExceeded` raised *before* a call once the
    budget is spent (so a generation stops between calls, never inside a write).

    Over the cached model a slot is held for the model's own call alone: the cache read before it and
    the answer's write (with its ledger row) after it, a cache hit and a call joining an identical one
    in flight hold none, so the store's work for one call overlaps the next call's wait for the model."""

    def __init__(self, inner: LLM, *, concurrency: int = 4, budget: Budget | None = None) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.budget = budget or Budget()
        self._slots = PrioritySlots(concurrency)
        self._tally = Tally()
        self._in_flight = 0
        # the calls of named units, credited by plan order (when the model below has cache keys)
        key = getattr(inner, "request_key", None)
        self._key = key if callable(key) else None
        keyed = getattr(inner, "complete_keyed", None)  # a model that takes the key computed here (CachedLLM)
        self._complete_keyed = keyed if callable(keyed) and self._key is not None else None
        self.book: CallBook | None = CallBook() if self._key is not None else None
        # True while the evolution loop reserves ``max_calls`` unit by unit (engine): the loop then keeps
        # the calls within it, so no call is refused for it here (that refusal would depend on timing)
        self.reserving = False

    @property
    @serialized
    def meter(self) -> CallTotals:
        return self._tally.totals()

    @serialized
    def exhausted(self, extra_calls: int = 0) -> str | None:
        """The budget limit that is (or would be, after ``extra_calls``) reached (``budget.max_calls 60
        reached``), else None. Calls in flight count against ``max_calls``; the counts are left to
        :func:`furnace.evolution.report.spent_text` once they have landed."""
        return self._exhausted(extra_calls)

    def _exhausted(self, extra_calls: int) -> str | None:
        m, b = self._tally, self.budget
        model_calls = m.calls - m.cached_calls
        # the limit only: what was spent is said once the calls in flight have landed (the run's status)
        if b.max_calls is not None and not self.reserving and model_calls + self._in_flight + extra_calls > b.max_calls:
            return f"budget.max_calls {b.max_calls} reached"
        tokens = m.prompt_tokens + m.completion_tokens
        if b.max_tokens is not None and tokens >= b.max_tokens:
            return f"budget.max_tokens {b.max_tokens} reached"
        if b.max_usd is not None and b.max_usd > 0 and m.cost_usd >= b.max_usd:
            return f"budget.max_usd {b.max_usd} reached"
        return None

    @serialized
    def account(self, spent: CallTotals) -> None:
        """Add calls made elsewhere (a unit in another process) to the meter the budget reads."""
        self._tally.add(spent)

    def serve(self, order: str) -> None:
        """The order waiting calls get slots in (:meth:`PrioritySlots.serve`): ``"priority"`` (smallest
        first, the default), ``"arrival"`` or ``"reverse"``."""
        self._slots.serve(order)

    @property
    def serving(self) -> str:
        """The order waiting calls get slots in now (see :meth:`serve`)."""
        return self._slots.serving

    def at(self, priority: float) -> LLM:
        """This model with every call queued at ``priority`` (smaller is served first)."""
        return _AtPriority(self, priority)

    def complete(self, request: LLMRequest, *, priority: float = 0.0) -> Completion:
        key = self._key(request) if self._key is not None else None
        self._take_off()
        try:
            completion = self._answer(request, key, partial(self._slots.held, priority))
        except Exception as err:
            self._failed(error_totals(err))
            raise
        self._answered(completion)
        return completion

    @serialized
    def _take_off(self) -> None:
        """A call is about to wait for a slot: refused if the budget is spent, else counted in flight
        (calls in flight count against ``max_calls``, so it is never overshot)."""
        reason = self._exhausted(1)
        if reason:
            raise BudgetExceeded(reason)
        self._in_flight += 1

    @serialized
    def _answered(self, completion: Completion) -> None:
        """A call in flight landed with ``completion``."""
        self._in_flight -= 1
        self._tally.add_completion(completion)

    @serialized
    def _failed(self, spent: CallTotals) -> None:
        """A call in flight failed, having spent ``spent`` (its :func:`error_totals`)."""
        self._in_flight -= 1
        self._tally.add(spent)

    def _answer(self, request: LLMRequest, key: str | None, gate: Callable[[], Any]) -> Completion:
        """The inner model's answer (:meth:`_ask`, holding a slot through ``gate``), noted in the book under
        ``key`` for the request's unit."""
        if self.book is None or not request.unit:
            return self._ask(request, key, gate)
        unit = request.unit
        if key is None:  # a model with no cache below: no request is shared, the unit pays what it asks
            try:
                completion = self._ask(request, key, gate)
            except BaseException as err:
                self.book.made(unit, error_totals(err))
                raise
            self.book.made(unit, completion_totals(completion))
            return completion
        self.book.start(key)
        try:
            completion = self._ask(request, key, gate)
        except BaseException as err:
            self.book.land(key, unit, None, error_totals(err))
            raise
        self.book.land(key, unit, completion)
        return completion

    def _ask(self, request: LLMRequest, key: str | None, gate: Callable[[], Any]) -> Completion:
        """The inner model's answer, ``gate`` (a slot) held for the model's own call: over the cached model
        only around its call to the model below (the cache's read and write, a hit and a joined call hold
        none), around the whole call over any other."""
        if key is not None and self._complete_keyed is not None:
            completion: Completion = self._complete_keyed(request, key, gate=gate)
            return completion
        with gate():
            return self.inner.complete(request)

    def credit(self, unit: str) -> CallTotals | None:
        """What ``unit`` is credited with (:meth:`CallBook.credit`), or None when no book is kept (a model
        without cache keys: then each unit pays its own calls, and those are what it is credited with)."""
        return self.book.credit(unit) if self.book is not None else None
