"""One contract suite, three stores: every test taking ``store`` runs in memory, on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from furnace.domain.elixir import Elixir, parse_elixir

from .old_home import older_schema  # noqa: F401  (where the old-home tests import it from)
from .postgres import open_sql


class TickClock:
    """A clock that advances one second per reading (distinct, ordered timestamps)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh relational store database of each kind: SQLite in ``tmp_path``, and the session's
    PostgreSQL database, emptied."""
    db = open_sql(request, request.param, tmp_path)
    yield db
    db.close()


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh store of each kind (SQLite on a temp file, PostgreSQL on the session's server)."""
    if request.param == "memory":
        from furnace.storage.memory import MemoryStore

        yield MemoryStore(clock=TickClock())
    else:
        from furnace.storage.sql.store import SQLStore

        db = open_sql(request, request.param, tmp_path)
        yield SQLStore(db, clock=TickClock())
        db.close()


def make_elixir(name: str, **fields: Any) -> Elixir:
    """A small valid elixir named ``name``."""
    data: dict[str, Any] = {
        "name": name,
        "identity": f"You are {name}.",
        "expertise": ["writing"],
        "principles": ["Be clear."],
    }
    data.update(fields)
    return parse_elixir(data)


@pytest.fixture
def line(tmp_path: Path) -> Iterator[Any]:
    """A SQLite store holding a line of five agents, each bred from the previous one and the library
    elixir ``root``: ``(store, their ids)`` (the lineage stamp's and change log's tests)."""
    from furnace.storage.sql.db import SQLDatabase, sqlite_url
    from furnace.storage.sql.store import SQLStore

    from .test_lineage_verification import _chain

    db = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)
    store = SQLStore(db)
    yield store, _chain(store, 5)
    db.close()
