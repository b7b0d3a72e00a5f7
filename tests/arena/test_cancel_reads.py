"""The cancel check before a speaker sees a cancel requested by another store object of this process or by
another process (``furnace arena cancel``) at once, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from furnace.arena.models import RunRecord
from furnace.storage.sql.arena import SQLArenaStore
from furnace.storage.sql.db import SQLDatabase
from tests.storage.postgres import open_sql


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_db(request: pytest.FixtureRequest, tmp_path: Path):
    db = open_sql(request, request.param, tmp_path)
    yield db
    db.close()


def _run(store: SQLArenaStore) -> str:
    run = store.start_run(RunRecord(run_id="run-1", session_id="ses-1", turn=0, message="hi", directive="open"))
    return run.run_id


def test_a_cancel_through_another_store_object_is_seen_at_once(sql_db: SQLDatabase) -> None:
    store, other = SQLArenaStore(sql_db), SQLArenaStore(sql_db)  # e.g. two screens of the app
    run_id = _run(store)
    assert store.cancel_requested(run_id) is False
    other.request_cancel(run_id)
    assert store.cancel_requested(run_id) is True


def test_a_cancel_by_another_process_is_seen_at_once(sql_db: SQLDatabase, tmp_path: Path) -> None:
    store = SQLArenaStore(sql_db)
    run_id = _run(store)
    assert store.cancel_requested(run_id) is False
    another = SQLDatabase(sql_db.url.render_as_string(hide_password=False), home=tmp_path)  # its own connections
    another.execute("UPDATE arena_runs SET cancel_requested = ? WHERE run_id = ?", [True, run_id])
    another.close()
    assert store.cancel_requested(run_id) is True
