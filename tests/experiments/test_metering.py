"""The metered model's lock is never held while the model answers, a model slot is held for the model's
own call only, and the call book's credit waits for a call of the same request still landing."""

from __future__ import annotations

import threading
from typing import Any

from furnace.domain.threads import background
from furnace.evolution.config import Budget
from furnace.evolution.metering import CallBook, MeteredLLM, completion_totals
from furnace.llm.cache import CachedLLM, MemoryCallLedger, MemoryResponseCache
from furnace.llm.seam import Completion, LLMRequest, TaskKind, Usage, system_user


def _request() -> LLMRequest:
    return system_user(TaskKind.REPLY, "s", "u")


class _Blocking:
    """A model whose answer waits until the test lets it go."""

    model_name = "blocking"

    def __init__(self) -> None:
        self.asked, self.go = threading.Event(), threading.Event()

    def complete(self, request: Any) -> Completion:
        self.asked.set()
        self.go.wait()
        return Completion(text="a", model="m", usage=Usage(prompt_tokens=3, completion_tokens=2))


def test_the_meter_is_read_while_a_call_waits_for_the_model_and_the_call_in_flight_counts() -> None:
    inner = _Blocking()
    metered = MeteredLLM(inner, concurrency=2, budget=Budget(max_calls=1))
    caller = background(metered.complete, _request(), name="caller")
    inner.asked.wait()
    free = metered._lock.acquire(blocking=False)  # held by the caller's thread, this would be False
    if free:
        metered._lock.release()
    assert free
    assert metered.meter.calls == 0  # nothing landed yet
    assert metered.exhausted(1) == "budget.max_calls 1 reached"  # the call in flight counts
    assert metered.exhausted() is None
    inner.go.set()
    caller.join()
    assert metered.meter.calls == 1 and metered.meter.tokens == 5
    assert metered.exhausted() is None and metered.exhausted(1) == "budget.max_calls 1 reached"


class _Echo:
    """A model that answers at once with the request's user message."""

    model_name = "echo"

    def complete(self, request: LLMRequest) -> Completion:
        return Completion(
            text=request.messages[-1].content, model="m", usage=Usage(prompt_tokens=1, completion_tokens=1)
        )


class _HeldWrite(MemoryResponseCache):
    """A response cache whose write of the answer for ``held`` waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.held: str | None = None
        self.writing, self.go = threading.Event(), threading.Event()

    def put(self, key: str, completion: Completion, *, task: str = "") -> bool:
        if key == self.held:
            self.writing.set()
            self.go.wait()
        return super().put(key, completion, task=task)


def test_a_cached_answer_waits_for_no_model_slot() -> None:
    inner = _Blocking()
    cached = CachedLLM(inner)
    metered = MeteredLLM(cached, concurrency=1)
    known = system_user(TaskKind.REPLY, "s", "known")
    cached.cache.put(cached.request_key(known), Completion(text="stored", model="m"))
    paid = background(metered.complete, _request(), name="paid")
    inner.asked.wait()  # the only slot is the paid call's, its model still answering
    served: list[str] = []
    hit = background(lambda: served.append(metered.complete(known).text), name="hit")
    hit.join(10)  # a hit held behind the slot would still be waiting (it is let go below either way)
    answered = list(served)
    inner.go.set()
    paid.join()
    hit.join()
    assert answered == ["stored"]
    assert [(c.cached, c.status) for c in cached.ledger.calls()] == [(True, "ok"), (False, "ok")]


def test_the_slot_is_free_while_an_answer_and_its_ledger_row_are_written() -> None:
    cache, ledger = _HeldWrite(), MemoryCallLedger()
    cached = CachedLLM(_Echo(), cache, ledger)
    metered = MeteredLLM(cached, concurrency=1)
    first, second = system_user(TaskKind.REPLY, "s", "first"), system_user(TaskKind.REPLY, "s", "second")
    cache.held = cached.request_key(first)
    writing = background(metered.complete, first, name="first")
    cache.writing.wait()  # the model answered the first call; its answer is being stored
    done: list[str] = []
    other = background(lambda: done.append(metered.complete(second).text), name="second")
    other.join(10)  # behind a slot held through the write it would still be waiting
    answered = list(done)
    cache.go.set()
    writing.join()
    other.join()
    assert answered == ["second"]
    assert [c.cached for c in ledger.calls()] == [False, False]  # the first was in the ledger before its write
    assert metered.complete(first).cached and metered.meter.model_calls == 2


def test_a_credit_waits_for_the_paid_call_of_a_request_still_landing() -> None:
    book = CallBook()
    paid = Completion(text="a", model="m", usage=Usage(prompt_tokens=7, completion_tokens=1), cost_usd=0.5)
    book.start("k")  # unit b's call, paid, under way
    book.start("k")  # unit a's, answered by b's flight
    book.land("k", "a", paid.model_copy(update={"cached": True}))
    credited: list[Any] = []
    crediting = background(lambda: credited.append(book.credit("a")), name="credit")
    while crediting.is_alive() and book._condition is None:  # until the credit waits (or, wrongly, is done)
        threading.Event().wait(0.001)
    book.land("k", "b", paid)
    crediting.join()
    assert credited == [completion_totals(paid)]  # a is first in plan order: it pays what b's call cost
    assert book.credit("b").model_calls == 0  # a cache hit for b
