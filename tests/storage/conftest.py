"""One contract suite, two stores: every test taking ``store`` runs on both."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from furnace.domain.elixir import Elixir, parse_elixir


class TickClock:
    """A clock that advances one second per reading (distinct, ordered timestamps)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture(params=["memory", "duckdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh store of each kind (DuckDB on a temp file)."""
    if request.param == "memory":
        from furnace.storage.memory import MemoryStore

        yield MemoryStore(clock=TickClock())
    else:
        from furnace.storage.duckdb.db import Database
        from furnace.storage.duckdb.store import DuckDBStore

        yield DuckDBStore(Database(tmp_path / "furnace.duckdb"), clock=TickClock())


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
