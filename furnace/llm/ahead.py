"""A model call run ahead: it starts on its own thread while the caller does its store work.

A model call mostly waits (for the network, or for a fake's sleep); the store work around it
mostly computes. Running the two side by side takes the store's time off the user's wait:

- a revision round stores the user's words while the edit is being written, and commits the
  revision while its style preferences are being extracted (the call's thread then saves the
  learned persona version itself, once the commit is in);
- an arena turn records one speaker while the next one speaks.

Rules that keep this safe:

- the caller waits for the call (:meth:`Ahead.result`) before it uses the answer, and the
  answer's exceptions are raised there, in the caller's thread, as if the call had been made
  inline;
- an ``Ahead`` never outlives the block that started it: leaving the ``with`` block waits for
  the call, even when the block raised, so no call runs on after its caller gave up (the call's
  ledger row is written either way, so a call whose answer was discarded is still counted);
- the call runs in a copy of the caller's context (``contextvars``), so tracing and run tags
  follow it; it opens its own unit of work on any store it touches (the call ledger), never the
  caller's.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class Ahead(Generic[T]):
    """``fn()`` running on its own thread; ``result()`` waits for it and returns or raises what it did."""

    __slots__ = ("_done", "_error", "_thread", "_value")

    def __init__(self, fn: Callable[[], T], *, name: str = "furnace-call-ahead") -> None:
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None
        context = contextvars.copy_context()

        def run() -> None:
            try:
                self._value = context.run(fn)
            except BaseException as err:  # handed to the caller in result()
                self._error = err
            finally:
                self._done.set()

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def result(self) -> T:
        """Wait for the call; its return value, or its exception raised here."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)

    def wait(self) -> None:
        """Wait for the call to end, whatever it did (its answer is being discarded)."""
        self._done.wait()

    def __enter__(self) -> Ahead[T]:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.wait()


def ahead(fn: Callable[[], T]) -> Ahead[T]:
    """Start ``fn()`` now on its own thread (use as ``with ahead(lambda: llm.complete(r)) as call:``)."""
    return Ahead(fn)
