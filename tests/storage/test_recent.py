"""The per-store memory of last known states (furnace.storage.recent)."""

from __future__ import annotations

import gc

from furnace.storage.recent import Recent


class Store:
    """Any store object."""


def test_entries_are_per_store_and_bounded_least_recently_used_first() -> None:
    recent: Recent[int] = Recent(max_entries=2)
    a, b = Store(), Store()
    recent.put(a, "x", 1)
    recent.put(b, "x", 2)
    assert (recent.get(a, "x"), recent.get(b, "x"), recent.get(a, "y")) == (1, 2, None)
    recent.put(a, "y", 3)
    recent.put(a, "x", 4)  # x is now the most recent: y goes first
    recent.put(a, "z", 5)
    assert (recent.get(a, "x"), recent.get(a, "y"), recent.get(a, "z")) == (4, None, 5)
    recent.forget(a, "x")
    assert recent.get(a, "x") is None and recent.get(b, "x") == 2


def test_a_store_that_goes_away_takes_its_entries_and_unhashable_stores_keep_nothing() -> None:
    recent: Recent[int] = Recent()
    store = Store()
    recent.put(store, "x", 1)
    del store
    gc.collect()
    assert len(recent._stores) == 0
    unhashable: list[int] = []
    recent.put(unhashable, "x", 1)
    assert recent.get(unhashable, "x") is None
    recent.forget(unhashable, "x")
