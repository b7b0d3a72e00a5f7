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


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request, tmp_path):
    """Each arena store: the in-memory twin and the live store (SQLite, PostgreSQL)."""
    if request.param == "memory":
        return InMemoryArenaStore()
    from furnace.storage.sql.arena import SQLArenaStore
    from tests.storage.postgres import open_sql

    return SQLArenaStore(open_sql(request, request.param, tmp_path))
