"""What this process last knew of a record, per store object: the state its own last unit of work left.

A unit of work that follows one of this process's own (the next revision round of a piece,
the next turn of an arena session) can start its model call from that state at once and
let the store's reads confirm it while the model works: when the reads say something
changed meanwhile, the early answer is dropped and the call made again from the fresh
state. Entries are held per store object (weakly: a store that goes away takes its
entries with it) and bounded per store, least recently used first out.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Generic, TypeVar

V = TypeVar("V")

MAX_ENTRIES = 256  # records remembered per store object


class Recent(Generic[V]):
    """The last known state of recently used records, per store object (weakly held), by record id."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._max = max_entries
        self._stores: weakref.WeakKeyDictionary[Any, OrderedDict[str, V]] = weakref.WeakKeyDictionary()

    def get(self, store: Any, key: str) -> V | None:
        with self._lock:
            try:
                entries = self._stores.get(store)
            except TypeError:  # a store that cannot be weakly referenced: nothing is remembered
                return None
            return entries.get(key) if entries is not None else None

    def put(self, store: Any, key: str, value: V) -> None:
        with self._lock:
            try:
                entries = self._stores.setdefault(store, OrderedDict())
            except TypeError:
                return
            entries[key] = value
            entries.move_to_end(key)
            while len(entries) > self._max:
                entries.popitem(last=False)

    def forget(self, store: Any, key: str) -> None:
        with self._lock:
            try:
                entries = self._stores.get(store)
            except TypeError:
                return
            if entries is not None:
                entries.pop(key, None)
