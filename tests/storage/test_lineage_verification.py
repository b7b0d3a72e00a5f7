"""Verifying the agents a lineage walk reaches: every one checked in full on first sight, with a fixed
number of statements however many there are, and a tampered one still named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from furnace.domain.errors import LineageError
from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.store import SQLStore

from .conftest import make_elixir
from .test_contract import make_agent


def _store(path: Path) -> SQLStore:
    return SQLStore(SQLDatabase(f"sqlite:///{path}", home=path.parent))


def _chain(store: SQLStore, length: int) -> list[str]:
    """A line of agents, each bred from the previous one and a library elixir."""
    library = store.save_elixir(make_elixir("Root"))
    parent = library
    ids = []
    for i in range(length):
        agent = make_agent([parent, library], seed=i, name=f"Child {i}")
        store.save_agent(agent)
        ids.append(agent.id)
        parent = agent.elixir.model_copy(update={"id": agent.id}).ref
    return ids


def _statements_of_a_fresh_walk(path: Path, leaf: str) -> tuple[int, int]:
    store = _store(path)  # a new process: nothing verified yet
    before = store.db.statements
    found = store.ancestors(leaf)
    return store.db.statements - before, len(found)


def test_a_walk_verifies_every_agent_with_statements_independent_of_their_number(tmp_path: Path) -> None:
    short, long = tmp_path / "short.sqlite", tmp_path / "long.sqlite"
    short_ids = _chain(_store(short), 3)
    long_ids = _chain(_store(long), 12)
    few, found_few = _statements_of_a_fresh_walk(short, short_ids[-1])
    many, found_many = _statements_of_a_fresh_walk(long, long_ids[-1])
    assert (found_few, found_many) == (3, 12)  # 2 / 11 agents and the library root
    assert many == few  # one query for every persona and parent, not one per agent


def test_a_tampered_parent_persona_deep_in_the_walk_is_named(tmp_path: Path) -> None:
    store = _store(tmp_path / "f.sqlite")
    ids = _chain(store, 6)
    body = json.loads(store.db.query("SELECT body FROM elixir_versions WHERE id = ?", [ids[2]])[0][0])
    body["identity"] = "You are EvilBot."
    store.db.execute("UPDATE elixir_versions SET body = ? WHERE id = ?", [json.dumps(body), ids[2]])
    fresh = _store(tmp_path / "f.sqlite")
    with pytest.raises(LineageError, match=ids[2][:12]):
        fresh.ancestors(ids[-1])
