"""One coarse lock per object: how furnace guards the state that threads share.

The in-memory stores (``MemoryStore``, ``MemoryContentStore``, ``MemoryResults`` …) and the fakes at
the LLM seam, used by the threaded engine in tests, and the objects a user's run shares between its
threads (the metered model and its call book, the runtime, the verified lineage walks, the snapshot
refresher …) all use the simplest guard there is: a :class:`Guarded` object has one re-entrant lock,
and each method marked :func:`serialized` runs holding it (a serialized method may call another; the
wrapper and the lock cost about a microsecond a call). A method
that waits on something slow (a model's answer, a sleep) is not marked: it calls small serialized
helpers for the state it touches instead.

A serialized method that must wait for another thread's change (a call landing, a request arriving)
waits with :meth:`Guarded._wait_until`, which lets go of the lock while it waits; the method that makes
the change calls :meth:`Guarded._changed`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
G = TypeVar("G", bound="Guarded")


class Guarded:
    """Base of an object whose :func:`serialized` methods hold its one lock (set on creation,
    whatever the subclass's ``__init__`` does)."""

    _lock: Any
    _condition: Any

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        made = super().__new__(cls)
        made._lock = threading.RLock()
        made._condition = None  # made on the first wait
        return made

    def _wait_until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Inside a serialized method: wait until ``predicate()`` is true (checked now, then after each
        :meth:`_changed`), letting go of the lock meanwhile; False when ``timeout`` ran out first."""
        if self._condition is None:
            self._condition = threading.Condition(self._lock)
        return bool(self._condition.wait_for(predicate, timeout))

    def _changed(self) -> None:
        """Inside a serialized method: wake every :meth:`_wait_until` to check its predicate again."""
        if self._condition is not None:
            self._condition.notify_all()


def serialized(method: Callable[Concatenate[G, P], R]) -> Callable[Concatenate[G, P], R]:
    """``method`` run holding its object's lock (re-entrant: it may call other serialized methods)."""

    @functools.wraps(method)
    def holding(self: G, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return holding
