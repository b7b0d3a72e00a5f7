"""The thread toolkit (furnace.domain.threads) and Guarded's waits: each promise checked with threads that
really interleave, synchronised by events and barriers (never by sleeping for a while)."""

from __future__ import annotations

import threading

import pytest

from furnace.domain.guarded import Guarded, serialized
from furnace.domain.threads import Flights, Once, PerKey, PrioritySlots, background, later, parallel_map, pool


def test_per_key_makes_each_value_once_while_callers_race() -> None:
    made: list[str] = []
    start = threading.Barrier(8)

    def make(key: str) -> object:
        made.append(key)
        return object()

    values = PerKey(make)
    got: list[object] = []

    def ask() -> None:
        start.wait()
        got.append(values.get("a"))

    threads = [background(ask, name=f"t{i}") for i in range(8)]
    for t in threads:
        t.join()
    assert made == ["a"]
    assert len({id(v) for v in got}) == 1
    assert "a" in values and "b" not in values
    assert values.forget("a") is got[0]
    assert values.get("a") is not got[0]  # made again after forget
    assert made == ["a", "a"]


def test_per_key_leaves_a_failed_key_unmade() -> None:
    attempts = []

    def make(key: int) -> int:
        attempts.append(key)
        if len(attempts) == 1:
            raise RuntimeError("first try fails")
        return key * 2

    values = PerKey(make)
    with pytest.raises(RuntimeError):
        values.get(3)
    assert 3 not in values
    assert values.get(3) == 6
    assert values.values() == [6]


def test_per_key_takes_the_callers_make_when_it_has_none_of_its_own() -> None:
    values: PerKey[str, list[str]] = PerKey()
    with pytest.raises(KeyError):
        values.get("a")
    made = values.get("a", lambda: ["made by the caller"])
    assert values.get("a", lambda: ["never made"]) is made  # made once: a later make is not called
    assert values.get("a") is made


def test_once_makes_on_first_get() -> None:
    calls = []
    once = Once(lambda: calls.append(1) or "v")
    assert not once.done and calls == []
    assert once.get() == "v" and once.get() == "v"
    assert once.done and calls == [1]


def test_flights_share_the_leaders_value_and_error() -> None:
    flights: Flights[str] = Flights()
    flight, leader = flights.join("k")
    again, second = flights.join("k")
    assert leader and not second and again is flight
    seen: list[str] = []
    waiter = background(lambda: seen.append(again.wait()), name="waiter")
    flight.value = "answer"
    flights.land("k", flight)
    waiter.join()
    assert seen == ["answer"]
    assert len(flights) == 0
    failed, leader = flights.join("k")
    assert leader and failed is not flight  # a new flight once the old one landed
    failed.error = ValueError("boom")
    flights.land("k", failed)
    with pytest.raises(ValueError, match="boom"):
        failed.wait()


def test_priority_slots_hand_a_freed_slot_to_the_smallest_priority() -> None:
    slots = PrioritySlots(1)
    order: list[float] = []
    queued = threading.Semaphore(0)

    def call(priority: float) -> None:
        queued.release()
        with slots.held(priority):
            order.append(priority)

    with slots.held():
        threads = []
        for p in (5.0, 1.0, 3.0):
            threads.append(background(call, p, name=f"p{p}"))
            queued.acquire()
            while len(slots._waiters) < len(threads):  # each waiter is queued before the next starts
                threading.Event().wait(0.001)
    for t in threads:
        t.join()
    assert order == [1.0, 3.0, 5.0]
    slots.serve("reverse")
    assert slots.serving == "reverse"
    with pytest.raises(ValueError, match="unknown order"):
        slots.serve("random")


def test_priority_slots_free_the_slot_when_the_block_raises() -> None:
    slots = PrioritySlots(1)
    with pytest.raises(RuntimeError), slots.held():
        raise RuntimeError("inside")
    with slots.held():  # would wait for ever if the slot had leaked
        pass


def test_parallel_map_keeps_order_and_raises_the_error() -> None:
    assert parallel_map(lambda x: x * x, range(10), workers=4, name="sq") == [x * x for x in range(10)]
    caller = threading.current_thread()
    assert parallel_map(lambda _: threading.current_thread() is caller, [1, 2], workers=1, name="one") == [True, True]

    def fail(x: int) -> int:
        if x == 3:
            raise KeyError(x)
        return x

    with pytest.raises(KeyError):
        parallel_map(fail, range(6), workers=3, name="fail")


def test_pool_names_its_threads_and_later_can_be_cancelled() -> None:
    with pool(2, name="furnace-test") as threads:
        assert threads.submit(lambda: threading.current_thread().name).result().startswith("furnace-test")
    ran = threading.Event()
    timer = later(3600, ran.set, name="never")
    timer.cancel()
    timer.join()
    assert not ran.is_set() and timer.daemon
    soon = later(0, ran.set, name="soon")
    soon.join()
    assert ran.is_set()


class _Mailbox(Guarded):
    def __init__(self) -> None:
        self.items: list[int] = []

    @serialized
    def put(self, item: int) -> None:
        self.items.append(item)
        self._changed()

    @serialized
    def take(self, count: int, timeout: float | None = None) -> list[int] | None:
        if not self._wait_until(lambda: len(self.items) >= count, timeout):
            return None
        taken, self.items = self.items[:count], self.items[count:]
        return taken


def test_guarded_wait_lets_go_of_the_lock_until_the_change() -> None:
    box = _Mailbox()
    got: list[list[int] | None] = []
    taker = background(lambda: got.append(box.take(3)), name="taker")
    for i in range(3):
        box.put(i)  # would deadlock if the waiting taker held the lock
    taker.join()
    assert got == [[0, 1, 2]]
    assert box.take(1, timeout=0) is None
