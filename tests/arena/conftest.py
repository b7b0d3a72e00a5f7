"""Arena fixtures."""

from __future__ import annotations

import pytest

from furnace.arena.store import InMemoryArenaStore
from furnace.storage.memory import MemoryStore

from .helpers import make_store


@pytest.fixture()
def elixirs() -> MemoryStore:
    return make_store()


@pytest.fixture()
def arena_store() -> InMemoryArenaStore:
    return InMemoryArenaStore()
