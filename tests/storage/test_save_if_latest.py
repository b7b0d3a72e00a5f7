"""Compare-and-set saves (``save_elixir(..., if_latest=N)``) on both stores."""

from __future__ import annotations

from typing import Any

import pytest

from furnace.domain.elixir import edit
from furnace.domain.errors import StaleVersion
from tests.storage.conftest import make_elixir


def test_saves_the_next_version_while_the_expected_one_is_latest(store: Any) -> None:
    first = store.save_elixir(make_elixir("Ada"), origin="user")
    ref = store.save_elixir(edit(store.get_elixir(first.id), principles=["Be brief."]), if_latest=1)
    assert (ref.version, store.get_elixir(first.id).principles) == (2, ("Be brief.",))
    if hasattr(store, "db"):  # the origin of the id is carried over inside the statement
        assert store.db.query("SELECT DISTINCT origin FROM elixir_versions WHERE id = ?", [first.id]) == [("user",)]


def test_a_newer_version_refuses_the_save_and_writes_nothing(store: Any) -> None:
    first = store.save_elixir(make_elixir("Ada"))
    base = store.get_elixir(first.id)
    store.save_elixir(edit(base, principles=["Someone else's edit."]))
    with pytest.raises(StaleVersion, match="expected v1, the latest is v2"):
        store.save_elixir(edit(base, principles=["Mine."]), if_latest=1)
    latest = store.get_elixir(first.id)
    assert (latest.version, latest.principles) == (2, ("Someone else's edit.",))


def test_a_deleted_id_refuses_the_save(store: Any) -> None:
    first = store.save_elixir(make_elixir("Ada"))
    base = store.get_elixir(first.id)
    store.delete_elixir(first.id)
    with pytest.raises(StaleVersion, match="deleted"):
        store.save_elixir(edit(base, principles=["Mine."]), if_latest=1)


def test_a_missing_id_refuses_the_save(store: Any) -> None:
    with pytest.raises(StaleVersion, match="does not exist"):
        store.save_elixir(make_elixir("Nobody"), if_latest=1)


def test_same_content_is_the_usual_no_op(store: Any) -> None:
    first = store.save_elixir(make_elixir("Ada"))
    assert store.save_elixir(store.get_elixir(first.id), if_latest=1).version == 1
    assert store.get_elixir(first.id).version == 1


def test_inside_a_transaction_a_newer_version_refuses_the_save_and_the_transaction_goes_on(sql_db: Any) -> None:
    """On its own the save lets a newer version collide on (id, version); inside a unit's transaction
    a collision would end that transaction, so there it checks instead, and the unit can go on."""
    from furnace.storage.sql.store import SQLStore
    from furnace.storage.store import unit_of_work

    store = SQLStore(sql_db)
    first = store.save_elixir(make_elixir("Ada"))
    base = store.get_elixir(first.id)
    store.save_elixir(edit(base, principles=["Someone else's edit."]))
    with unit_of_work(store):
        with pytest.raises(StaleVersion, match="expected v1, the latest is v2"):
            store.save_elixir(edit(base, principles=["Mine."]), if_latest=1)
        latest = store.get_elixir(first.id)
        store.save_elixir(edit(latest, principles=["Mine, on top."]), if_latest=latest.version)
    assert store.get_elixir(first.id).principles == ("Mine, on top.",)
    assert store.get_elixir(first.id).version == 3
