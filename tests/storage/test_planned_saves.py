"""Saves are planned (re-validated, hashed, sealed) before their write transaction, and the plan is used
only while the latest rows it was made from are still the latest: a save that raced another keeps
versions contiguous and every row verifying."""

from __future__ import annotations

from typing import Any

import pytest

from furnace.storage.sql.store import SQLStore

from .conftest import make_elixir
from .test_contract import make_agent


def _counting_plans(store: SQLStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    made: list[int] = []
    plan = store._plan

    def counted(*args: Any) -> Any:
        made.append(1)
        return plan(*args)

    monkeypatch.setattr(store, "_plan", counted)
    return made


def test_a_save_is_planned_once_outside_its_transaction(sql_db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SQLStore(sql_db)
    store.save_elixir(make_elixir("Editor"))
    made = _counting_plans(store, monkeypatch)
    ref = store.save_elixir(make_elixir("Editor", principles=["Be brief."]))
    assert (ref.version, len(made)) == (2, 1)  # the transaction used the plan made before it
    parent = store.save_elixir(make_elixir("Coach"))
    agent = make_agent([ref, parent])
    made.clear()
    assert store.save_agents([agent]) == [True]
    assert len(made) == 1
    assert store.get_agent(agent.id).system_prompt == agent.system_prompt  # rows made ahead verify


def test_a_save_raced_between_its_plan_and_its_transaction_is_planned_again(sql_db: Any) -> None:
    store = SQLStore(sql_db)
    first = make_elixir("Editor")
    store.save_elixir(first)
    mine = make_elixir("Editor", principles=["Mine."])
    ahead = store._planned_ahead([(mine, mine.id)], "library")
    assert ahead is not None and ahead.refs[0].version == 2
    store.save_elixir(make_elixir("Editor", principles=["Theirs."]))  # another writer took version 2
    ref = store.db.write(lambda conn: store._save_many(conn, [(mine, mine.id)], "library", ahead))[0]
    assert ref.version == 3
    assert [e.version for e in store.history(mine.id)] == [1, 2, 3]  # every version verified on read
    assert store.get_elixir(mine.id).principles == ("Mine.",)
