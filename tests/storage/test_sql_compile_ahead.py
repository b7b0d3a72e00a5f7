"""On SQLite the statements of the common writes are compiled before their transaction takes the write
lock (``SQLDatabase.compile_ahead``): in a fresh process (a CLI command) a compile inside the lock was
about half of its hold, which every other process asking for the lock waited through. Each test opens a
fresh database (an empty statement cache, as a new process has) and records every statement SQLAlchemy
compiles while this thread is inside a write transaction."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.sql import compiler

from furnace.llm.offline import OfflineEngine
from furnace.storage.sql.content import SQLContentStore
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.kv import SQLKV
from furnace.storage.sql.schema import kv
from furnace.storage.sql.store import SQLStore
from furnace.writing.content import generate_content
from furnace.writing.revision import revise

from .conftest import make_elixir
from .test_contract import make_agent


@pytest.fixture()
def db(tmp_path: Path) -> Iterator[SQLDatabase]:
    database = SQLDatabase(sqlite_url(tmp_path), home=tmp_path)
    yield database
    database.close()


@pytest.fixture()
def compiled_inside(db: SQLDatabase, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL of every statement compiled while this thread is inside one of ``db``'s write transactions."""
    inside = threading.local()
    found: list[str] = []

    def began(conn: Any) -> None:
        inside.now = bool(conn.info.get("furnace_write"))

    def ended(conn: Any) -> None:
        inside.now = False

    event.listen(db.engine, "begin", began)
    event.listen(db.engine, "commit", ended)
    event.listen(db.engine, "rollback", ended)
    init = compiler.SQLCompiler.__init__

    def recording(self: Any, dialect: Any, statement: Any, *args: Any, **kw: Any) -> None:
        init(self, dialect, statement, *args, **kw)
        if getattr(inside, "now", False):
            found.append(self.string)

    monkeypatch.setattr(compiler.SQLCompiler, "__init__", recording)
    return found


def test_a_statement_first_run_inside_a_write_is_compiled_there(db: SQLDatabase, compiled_inside: list[str]) -> None:
    # the detector: a write nobody compiled ahead compiles inside its transaction
    row = {"key": "k", "value": "{}", "created_at": datetime(2026, 1, 1), "expires_at": None}
    db.write(lambda conn: conn.execute(kv.insert(), row))
    assert [sql.split(" (")[0] for sql in compiled_inside] == ["INSERT INTO kv"]


def test_saves_compile_nothing_inside_their_transaction(db: SQLDatabase, compiled_inside: list[str]) -> None:
    store = SQLStore(db)
    first = store.save_elixir(make_elixir("Editor"))
    second = store.save_elixir(make_elixir("Coach"))
    assert store.save_elixir(make_elixir("Editor", principles=["Be brief."])).version == 2
    assert store.save_elixirs([make_elixir("Critic"), make_elixir("Tutor")])[0].version == 1
    assert store.save_agents([make_agent([first, second])]) == [True]
    assert compiled_inside == []


def test_a_fusion_writes_its_agent_and_cache_entries_with_nothing_to_compile(
    db: SQLDatabase, compiled_inside: list[str]
) -> None:
    store, kv = SQLStore(db), SQLKV(db)
    parents = [store.save_elixir(make_elixir("Editor")), store.save_elixir(make_elixir("Coach"))]
    for seed, entries in ((1, 1), (2, 2)):  # one entry (a single insert) and several (an executemany)
        agent = make_agent(parents, seed=seed)

        def work(agent: Any = agent, entries: int = entries) -> None:  # as furnace.fusion.fuse stores a build
            store.save_agent(agent)
            kv.put_many_if_absent([(f"synth:{agent.id}:{i}", {"n": i}, 60.0) for i in range(entries)])

        store.atomically(work)
    assert kv.get(f"synth:{make_agent(parents, seed=2).id}:1") == {"n": 1}
    assert compiled_inside == []


def test_content_and_revision_batches_compile_nothing_inside_their_transaction(
    db: SQLDatabase, compiled_inside: list[str]
) -> None:
    store, contents, llm = SQLStore(db), SQLContentStore(db), OfflineEngine()
    persona = make_elixir("Writer")
    store.save_elixir(persona)
    content, v1 = generate_content(store, contents, llm, persona_id=persona.id, topic="sunscreen")
    outcome = revise(store, contents, llm, content.id, "make it shorter", learn=False)
    assert (v1.version, outcome.status) == (1, "revised")
    assert [v.version for v in contents.versions(content.id)] == [1, 2]
    assert compiled_inside == []
