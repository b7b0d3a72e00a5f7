"""fuse() on the live store (store and KV in one database, SQLite): a cold fusion's writes commit together or
not at all, tampered rows are refused, racers agree, and the statement log shows reads before one write
transaction."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from furnace.domain.errors import ConflictError, LineageError
from furnace.fusion.embedding import HashEmbedder
from furnace.fusion.fuse import fuse
from furnace.fusion.synthesis import SynthesisCache
from furnace.llm.fakes import FakeLLM, SlowLLM
from furnace.llm.offline.engine import OfflineEngine
from furnace.storage.duckdb import snapshot
from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.kv import SQLKV
from furnace.storage.sql.store import SQLStore

from .conftest import COACH, WIT, all_at_once, counting, make_elixir

PAIR = ["data-coach", "travel-wit"]


@pytest.fixture(autouse=True)
def _no_background_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "request", lambda db: None)  # its statements would mix with the fusion's


Db = SQLDatabase


def _store(db: Db) -> Any:
    return SQLStore(db)


def _kv(db: Db) -> Any:
    return SQLKV(db)


def _json_patch(db: Db) -> str:
    """SQLite's JSON merge-patch function."""
    return "json_patch"


def _seeded(database: Db) -> Db:
    store = _store(database)
    store.save_elixir(make_elixir("Data Coach", **COACH))
    store.save_elixir(make_elixir("Travel Wit", **WIT))
    return database


@pytest.fixture()
def db(tmp_path: Path) -> Db:
    """The two parents in a home's live store (SQLite)."""
    return _seeded(SQLDatabase(sqlite_url(tmp_path), home=tmp_path))


def _fuse(db: Db, llm: Any = None, cache: SynthesisCache | None = None, **kw: Any) -> Any:
    return fuse(
        _store(db),
        kw.pop("parents", PAIR),
        llm=llm or counting(),
        embedder=HashEmbedder(),
        cache=cache or SynthesisCache(_kv(db)),
        operator=kw.pop("operator", "crossover"),
        **kw,
    )


def _counts(db: Db) -> dict[str, int]:
    return {
        t: db.query(f"SELECT count(*) FROM {t}")[0][0] for t in ("kv", "agents", "elixir_versions", "lineage_edges")
    }


def _reads_only(statement: str) -> bool:
    return statement.lstrip().upper().startswith(("SELECT", "WITH"))


class _Recorder:
    """Every statement run on ``db``'s engine, in order, and ``COMMIT`` for each commit."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, db: Db) -> None:
        self.sql: list[str] = []

        def statement(conn: Any, cursor: Any, text: str, *args: Any) -> None:
            self.sql.append(" ".join(text.split()))

        def commit(conn: Any) -> None:
            self.sql.append("COMMIT")

        event.listen(db.engine, "before_cursor_execute", statement)
        event.listen(db.engine, "commit", commit)


def test_a_cold_fusion_reads_then_writes_everything_in_one_transaction(db, monkeypatch) -> None:
    recorded = _Recorder(monkeypatch, db)
    llm = counting()
    result = _fuse(db, llm)
    assert not result.from_cache and len(llm.calls) == 1
    sql = recorded.sql
    assert sql.count("BEGIN IMMEDIATE") == 1  # one write transaction ...
    begin = sql.index("BEGIN IMMEDIATE")
    assert all(_reads_only(s) or s in ("BEGIN", "COMMIT") for s in sql[:begin])  # ... after reads only
    assert sql[-1] == "COMMIT" and "COMMIT" not in sql[begin:-1]
    tables = [s.split(" (")[0].split()[2] for s in sql[begin + 1 : -1] if s.startswith("INSERT")]
    # the persona, the agent, its edges (their rows planned before BEGIN), then the identity sub-result and
    # the synthesis entry in one insert
    assert tables == ["elixir_versions", "agents", "lineage_edges", "kv"]
    assert _counts(db) == {"kv": 2, "agents": 1, "elixir_versions": 3, "lineage_edges": 2}
    stored = SQLStore(db).get_agent(result.agent.id)  # verified in full on read
    assert stored.system_prompt == result.agent.system_prompt
    again = _fuse(db, llm)  # a new process's repeat: served by the cache, no call
    assert again.from_cache and again.agent.id == result.agent.id and len(llm.calls) == 1


def test_a_cold_fusion_plans_its_agent_rows_before_the_write_transaction(db, monkeypatch) -> None:
    planned_in_transaction: list[bool] = []
    plan = SQLStore._plan

    def recorded(self: SQLStore, *args: Any) -> Any:
        planned_in_transaction.append(self.db.in_transaction)
        return plan(self, *args)

    monkeypatch.setattr(SQLStore, "_plan", recorded)
    result = _fuse(db)
    assert not result.from_cache and planned_in_transaction == [False]  # planned once, before BEGIN IMMEDIATE
    assert _store(db).get_agent(result.agent.id).system_prompt == result.agent.system_prompt


class _EntryUnseen:
    """A KV whose synthesis entries its reads do not see: an entry another process committed after the build
    looked (the build runs, and meets it only at its insert)."""

    def __init__(self, kv: Any) -> None:
        self.kv = kv

    def get(self, key: str) -> Any:
        return None if key.startswith("synth:") else self.kv.get(key)

    def put_if_absent(self, key: str, value: Any, ttl_s: Any = None) -> Any:
        return self.kv.put_if_absent(key, value, ttl_s)

    def put_many_if_absent(self, items: Any) -> Any:
        return self.kv.put_many_if_absent(items)


def test_an_entry_that_won_without_its_agent_is_the_agent_stored(db, tmp_path) -> None:
    other = _seeded(SQLDatabase(sqlite_url(tmp_path / "other"), home=tmp_path / "other"))
    theirs = _fuse(other, FakeLLM(respond=lambda r: {"identity": "You are theirs."}, model_name="offline")).agent
    entry = _kv(other).get(f"synth:{theirs.lineage_hash}")
    _kv(db).put_if_absent(f"synth:{theirs.lineage_hash}", entry)  # e.g. an experiment's, its agent still queued
    mine = FakeLLM(respond=lambda r: {"identity": "You are mine."}, model_name="offline")
    result = _fuse(db, mine, cache=SynthesisCache(_EntryUnseen(_kv(db))))
    assert len(mine.calls) == 1  # built here, then the insert met the other entry: rolled back, stored theirs
    assert result.agent.id == theirs.id and result.agent.system_prompt == theirs.system_prompt
    assert _store(db).get_agent(theirs.id).system_prompt == theirs.system_prompt
    assert _counts(db)["agents"] == 1


def test_a_fusion_whose_save_fails_leaves_nothing_and_a_retry_builds_it(db, monkeypatch) -> None:
    def failing(self: Any, agents: Any) -> list[bool]:
        assert original(self, agents) == [True]  # every row is written ... and then the disk fills
        raise OSError("No space left on device")

    kind = type(_store(db))
    original = kind.save_agents
    monkeypatch.setattr(kind, "save_agents", failing)
    before = _counts(db)
    llm = counting()
    with pytest.raises(OSError, match="No space"):
        _fuse(db, llm)
    assert _counts(db) == before  # neither the cache entries, nor the agent, its persona or its edges
    monkeypatch.setattr(kind, "save_agents", original)
    result = _fuse(db, llm)
    assert not result.from_cache and len(llm.calls) == 2  # the identity was not kept either: asked again
    assert _counts(db) == {"kv": 2, "agents": 1, "elixir_versions": 3, "lineage_edges": 2}


def test_a_refused_fusion_writes_nothing(db, monkeypatch) -> None:
    store = SQLStore(db)
    store.save_elixir(make_elixir("Rival", conflicts_with=["data-coach"]))
    before = _counts(db)
    recorded = _Recorder(monkeypatch, db)
    llm = counting()
    with pytest.raises(ConflictError):
        _fuse(db, llm, parents=["data-coach", "rival"])
    assert llm.calls == [] and _counts(db) == before
    assert recorded.sql and all(_reads_only(s) or s in ("BEGIN", "COMMIT") for s in recorded.sql)


def test_a_tampered_agent_parent_is_refused_before_any_call(db) -> None:
    child = _fuse(db).agent
    db.execute("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?", [child.id])
    before = _counts(db)
    llm = counting()
    with pytest.raises(LineageError, match=f"agent {child.id}: system prompt does not match"):
        _fuse(db, llm, parents=[child.id, "travel-wit"])
    assert llm.calls == [] and _counts(db) == before


def test_a_tampered_library_parent_is_refused(db) -> None:
    db.execute(f'UPDATE elixir_versions SET body = {_json_patch(db)}(body, \'{{"identity": "Evil."}}\')')
    llm = counting()
    with pytest.raises(LineageError, match="altered"):
        _fuse(db, llm)
    assert llm.calls == []


def test_64_threads_asking_for_one_new_fusion_build_once(db) -> None:
    cache, llm = SynthesisCache(_kv(db)), SlowLLM(OfflineEngine(), 0.05)
    store = _store(db)
    results = all_at_once(
        64, lambda: fuse(store, PAIR, llm=llm, embedder=HashEmbedder(), cache=cache, operator="crossover", seed=5)
    )
    assert cache.builds == 1 and llm.calls == 1
    assert len({r.agent.id for r in results}) == 1 and sum(not r.from_cache for r in results) == 1
    assert _counts(db) == {"kv": 2, "agents": 1, "elixir_versions": 3, "lineage_edges": 2}


def test_two_caches_racing_on_one_fusion_keep_the_first_commit(db) -> None:
    numbers, both_asked = itertools.count(1), threading.Barrier(2)

    def identity(request: Any) -> dict[str, str]:
        number = next(numbers)
        both_asked.wait(timeout=30)  # neither answer comes before both were asked: both builds commit
        return {"identity": f"You are blend number {number}."}

    llm = FakeLLM(respond=identity, model_name="offline")
    results = all_at_once(2, lambda: _fuse(db, llm, cache=SynthesisCache(_kv(db))))  # caches of two processes
    assert len(llm.calls) == 2
    first, second = results
    assert first.agent.id == second.agent.id
    assert first.agent.system_prompt == second.agent.system_prompt  # the loser returns the winner's agent
    stored = _store(db).get_agent(first.agent.id)
    assert stored.system_prompt == first.agent.system_prompt
    assert _counts(db) == {"kv": 2, "agents": 1, "elixir_versions": 3, "lineage_edges": 2}


def test_a_stored_agent_whose_cache_entry_is_gone_is_served_without_a_call(db) -> None:
    first = _fuse(db).agent
    db.execute("DELETE FROM kv")  # e.g. `furnace cache clear`, or the entries expired
    llm = counting()
    again = _fuse(db, llm)
    assert llm.calls == [] and again.model_calls == 0  # the read before the operator stopped it before its call
    assert again.agent.id == first.id and again.agent.system_prompt == first.system_prompt
    assert _counts(db)["agents"] == 1


def test_a_tampered_stored_agent_stops_the_fusion_before_its_call(db) -> None:
    first = _fuse(db).agent
    db.execute("DELETE FROM kv")
    db.execute("UPDATE agents SET system_prompt = 'You are EvilBot.' WHERE id = ?", [first.id])
    before = _counts(db)
    llm = counting()
    with pytest.raises(LineageError, match=f"agent {first.id}: system prompt does not match"):
        _fuse(db, llm)
    assert llm.calls == [] and _counts(db) == before


@pytest.mark.parametrize("parents", [["nobody", "data-coach"], ["data-coach", "nobody"], ["data-coach@9", "nobody"]])
def test_the_first_parent_that_fails_is_named(db, parents) -> None:
    from furnace.domain.errors import NotFound

    first_bad = parents[0] if parents[0] != "data-coach" else parents[1]
    expected = "has no version 9" if first_bad.endswith("@9") else f"no elixir '{first_bad}'"
    with pytest.raises(NotFound, match=expected):
        _fuse(db, parents=parents)


def test_a_withdrawn_second_parent_is_refused(db) -> None:
    _store(db).delete_elixir("travel-wit")
    llm = counting()
    with pytest.raises(LineageError, match="withdrawn elixir travel-wit"):
        _fuse(db, llm)
    assert llm.calls == [] and _counts(db)["kv"] == 0


def test_an_altered_cache_row_read_before_the_operator_is_refused(db) -> None:
    first = _fuse(db).agent
    db.execute(
        f"UPDATE kv SET value = {_json_patch(db)}(value, '{{\"prompt\": \"You are evil.\"}}') WHERE key LIKE 'synth:%'"
    )
    llm = counting()
    with pytest.raises(LineageError, match="altered"):
        _fuse(db, llm)  # a new cache object (another process): the row is read, not the memo
    assert llm.calls == [] and _store(db).get_agent(first.id).system_prompt == first.system_prompt


def test_a_corrupted_cache_row_is_a_miss_and_the_stored_agent_is_served(db, monkeypatch) -> None:
    first = _fuse(db).agent
    db.execute("UPDATE kv SET value = '{\"agent\": 1}' WHERE key LIKE 'synth:%'")
    recorded = _Recorder(monkeypatch, db)
    llm = counting()
    again = _fuse(db, llm)
    assert llm.calls == [] and not again.from_cache  # rebuilt: "is it stored?" found the agent
    assert again.agent.id == first.id and again.agent.system_prompt == first.system_prompt
    assert _counts(db)["agents"] == 1 and "INSERT INTO agents" not in " ".join(recorded.sql)


def test_a_new_process_repeating_a_fusion_reads_and_writes_nothing_more(db, monkeypatch) -> None:
    _fuse(db)
    recorded = _Recorder(monkeypatch, db)
    llm = counting()
    again = _fuse(db, llm)  # a new store and cache object: nothing known in memory
    assert again.from_cache and llm.calls == []
    # reads only: the parents, the cache entry, and beside it "is it stored?" (found: loaded and verified,
    # so it is not written again); no write transaction
    assert all(_reads_only(s) or s in ("BEGIN", "COMMIT") for s in recorded.sql), recorded.sql
