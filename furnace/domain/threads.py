"""The project's thread toolkit: every way furnace runs work on threads or hands results between them.

furnace runs a few things on threads (an experiment's units and their probes, reads fanned out, a
background refresh, a watchdog); each does it through one of these, so the thread code a maintainer
has to reason about is here and in :mod:`furnace.domain.guarded` (one lock per object), not spread
over the modules that use it:

- :func:`background` and :func:`later` start a daemon thread now, or after a delay (a :class:`Thread`
  to join, a :class:`Timer` to cancel);
- :func:`pool` makes a thread pool, :func:`parallel_map` maps a function over items on a short-lived
  one (in the caller's thread when there is nothing to share out); :class:`Future` and :func:`wait`
  are what a pool's ``submit`` hands back and how to wait for several;
- :class:`PerKey` (and :class:`Once`) makes a value once per key in this process, the first caller
  making it while any other waits for it;
- :class:`Flights` is a single-flight table: the first caller of a key does the work, the others
  wait for its :class:`Flight` and share its result (or its error);
- :class:`PrioritySlots` is a semaphore whose freed slot goes to the waiter served first.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

__all__ = [
    "Executor",
    "Flight",
    "Flights",
    "Future",
    "Once",
    "PerKey",
    "PrioritySlots",
    "Thread",
    "Timer",
    "background",
    "later",
    "parallel_map",
    "pool",
    "wait",
]

Thread = threading.Thread  # what background() returns
Timer = threading.Timer  # what later() returns

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
V = TypeVar("V")


def background(target: Callable[..., Any], *args: Any, name: str) -> Thread:
    """Run ``target(*args)`` on a new daemon thread named ``name``, started; returns the thread (to join)."""
    thread = Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


def later(delay_s: float, target: Callable[..., Any], *args: Any, name: str) -> Timer:
    """Run ``target(*args)`` on a daemon thread after ``delay_s`` seconds, unless cancelled (``.cancel()``)."""
    timer = Timer(delay_s, target, args=args)
    timer.name, timer.daemon = name, True
    timer.start()
    return timer


def pool(workers: int, *, name: str) -> ThreadPoolExecutor:
    """A pool of at most ``workers`` threads named ``name-N`` (started as work arrives; ``shutdown`` it,
    or use it in a ``with``)."""
    return ThreadPoolExecutor(max(1, workers), thread_name_prefix=name)


def parallel_map(fn: Callable[[T], V], items: Iterable[T], *, workers: int, name: str) -> list[V]:
    """``[fn(x) for x in items]``, in order, on up to ``workers`` threads of a pool made for the call;
    in the caller's thread when ``workers`` ≤ 1 or there is at most one item. The first error raised
    by ``fn`` is raised here (after the items already started have finished)."""
    work = list(items)
    if workers <= 1 or len(work) <= 1:
        return [fn(x) for x in work]
    with pool(min(workers, len(work)), name=name) as threads:
        return list(threads.map(fn, work))


class PerKey(Generic[K, V]):
    """One value per key, made once in this process by ``make(key)`` (or by the ``make()`` a caller of
    :meth:`get` passes): the first caller of a key makes it while later callers of that key wait, then
    everyone gets the same value. A ``make`` that raises leaves the key unmade (the next caller tries
    again). With ``keep``, at most that many values are kept: making one more drops the oldest."""

    def __init__(self, make: Callable[[K], V] | None = None, *, keep: int | None = None) -> None:
        self._make = make
        self._keep = keep
        self._made: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V] | None = None) -> V:
        """``key``'s value, made now by ``make()`` (or the table's ``make(key)``) when it is not yet."""
        try:
            return self._made[key]  # a dict read is one atomic step: no lock once made
        except KeyError:
            pass
        with self._lock:
            if key not in self._made:
                if make is not None:
                    value = make()
                elif self._make is not None:
                    value = self._make(key)
                else:
                    raise KeyError(key)  # nothing to make it with
                if self._keep is not None and len(self._made) >= self._keep:
                    del self._made[next(iter(self._made))]  # the oldest
                self._made[key] = value
            return self._made[key]

    def __contains__(self, key: object) -> bool:
        return key in self._made

    def forget(self, key: K) -> V | None:
        """Drop ``key``'s value (the next :meth:`get` makes a new one); returns what was dropped."""
        with self._lock:
            return self._made.pop(key, None)

    def values(self) -> list[V]:
        with self._lock:
            return list(self._made.values())


class Once(Generic[V]):
    """A value made by ``make()`` once in this process, on first :meth:`get` (see :class:`PerKey`)."""

    def __init__(self, make: Callable[[], V]) -> None:
        self._per_key: PerKey[int, V] = PerKey(lambda _: make())

    def get(self) -> V:
        return self._per_key.get(0)

    @property
    def done(self) -> bool:
        return 0 in self._per_key


class Flight(Generic[V]):
    """One key's work under way (see :class:`Flights`): its leader sets :attr:`value` or :attr:`error`,
    then the flight lands and :meth:`wait` returns (or raises) for everyone who joined it."""

    __slots__ = ("_done", "error", "value")

    def __init__(self) -> None:
        self._done = threading.Event()
        self.value: V | None = None
        self.error: BaseException | None = None

    def wait(self) -> V:
        """The leader's value once the flight landed; its error raised if it failed."""
        self._done.wait()
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value


class Flights(Generic[V]):
    """A single-flight table: :meth:`join` makes the first caller of a key its flight's leader (it does
    the work, then :meth:`land`\\ s the flight) and hands every later caller, until then, the same
    flight to :meth:`Flight.wait` on. A dict's ``setdefault`` and ``pop`` on a key are each one atomic
    step, so joining needs no lock of its own."""

    def __init__(self) -> None:
        self._flights: dict[Hashable, Flight[V]] = {}

    def join(self, key: Hashable) -> tuple[Flight[V], bool]:
        """``(flight, leader)``: the key's flight under way, and whether this caller leads it."""
        mine: Flight[V] = Flight()
        flight = self._flights.setdefault(key, mine)
        return flight, flight is mine

    @contextmanager
    def lead(self, key: Hashable, flight: Flight[V]) -> Iterator[None]:
        """The leader's block: an error leaving it is the flight's (unless the leader set one already),
        and the flight lands when it ends, however it ends."""
        try:
            yield
        except BaseException as err:
            if flight.value is None and flight.error is None:
                flight.error = err
            raise
        finally:
            self.land(key, flight)

    def land(self, key: Hashable, flight: Flight[V]) -> None:
        """The leader is done (:attr:`Flight.value` or :attr:`Flight.error` set): release the waiters;
        the next :meth:`join` of ``key`` starts a new flight."""
        self._flights.pop(key, None)
        flight._done.set()

    def __len__(self) -> int:
        return len(self._flights)


class PrioritySlots:
    """At most ``size`` holders; a freed slot goes straight to the waiter served first: by default the
    smallest priority (ties: first come, first served); see :meth:`serve` for the other orders."""

    ORDERS = ("priority", "arrival", "reverse")

    def __init__(self, size: int) -> None:
        self._free = max(1, size)
        self._lock = threading.Lock()
        self._waiters: list[tuple[float, int, float, threading.Event]] = []  # (key, arrival, priority, turn)
        self._order = itertools.count()
        self._serve = "priority"

    def serve(self, order: str) -> None:
        """``"priority"``: smallest priority first; ``"arrival"``: first come, first served; ``"reverse"``:
        largest priority first. Applies to the calls already waiting too."""
        if order not in self.ORDERS:
            raise ValueError(f"unknown order {order!r}; one of {', '.join(self.ORDERS)}")
        with self._lock:
            self._serve = order
            self._waiters = [(self._key(p), seq, p, turn) for _, seq, p, turn in self._waiters]
            heapq.heapify(self._waiters)

    @property
    def serving(self) -> str:
        """The order waiters are served in now (one of :attr:`ORDERS`)."""
        return self._serve

    def _key(self, priority: float) -> float:
        return priority if self._serve == "priority" else 0.0 if self._serve == "arrival" else -priority

    @contextmanager
    def held(self, priority: float = 0.0) -> Iterator[None]:
        """Hold a slot for the ``with`` block, waiting for one at ``priority`` (smaller is served first)."""
        turn: threading.Event | None = None
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
            else:
                turn = threading.Event()
                heapq.heappush(self._waiters, (self._key(priority), next(self._order), priority, turn))
        if turn is not None:
            turn.wait()  # the releasing thread handed its slot to this waiter
        try:
            yield
        finally:
            with self._lock:
                if self._waiters:
                    heapq.heappop(self._waiters)[3].set()
                else:
                    self._free += 1
