"""CachedLLM: response cache, single-flight and accounting, in memory and in the live store
(SQLite or PostgreSQL)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from furnace.domain.errors import LLMError, LLMTimeout
from furnace.llm.cache import CachedLLM, CallTotals, MemoryCallLedger, MemoryResponseCache
from furnace.llm.fakes import FakeLLM, SlowLLM
from furnace.llm.seam import LLM, Completion, TaskKind, Usage, system_user


def priced(text: str) -> Completion:
    return Completion(text=text, usage=Usage(prompt_tokens=10, completion_tokens=4), cost_usd=0.002, model="fake")


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def storage(request, tmp_path):
    if request.param == "memory":
        return MemoryResponseCache(), MemoryCallLedger()
    from furnace.storage.sql.llm_calls import SQLCallLedger, SQLResponseCache
    from tests.storage.postgres import open_sql

    sql = open_sql(request, request.param, tmp_path)
    ledger = SQLCallLedger(sql)
    return SQLResponseCache(sql, ledger=ledger), ledger


def ask(user: str = "hello", **kwargs):
    return system_user(TaskKind.REPLY, "sys", user, **kwargs)


class _File:
    """One database file, each :meth:`open` a new process's view of it: a home's live store (SQLite)."""

    def __init__(self, folder) -> None:
        self.folder = folder

    def open(self):
        """(the database, a response cache and a call ledger on it, nothing in their memory)."""
        from furnace.storage.sql.db import SQLDatabase, sqlite_url
        from furnace.storage.sql.llm_calls import SQLCallLedger, SQLResponseCache

        sql = SQLDatabase(sqlite_url(self.folder), home=self.folder)
        ledger = SQLCallLedger(sql)
        return sql, SQLResponseCache(sql, ledger=ledger), ledger


@pytest.fixture()
def stored(tmp_path) -> _File:
    return _File(tmp_path)


def test_repeat_is_served_from_cache_without_inner_call(storage):
    inner = FakeLLM(respond=lambda r: priced("answer"))
    llm = CachedLLM(inner, *storage)
    assert isinstance(llm, LLM) and llm.model_name == "fake"

    first = llm.complete(ask(seed=1))
    second = llm.complete(ask(seed=1))

    assert len(inner.calls) == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text == "answer"
    assert (first.cost_usd, second.cost_usd) == (0.002, 0.0)
    totals = llm.totals()
    assert totals == CallTotals(
        calls=2,
        cached_calls=1,
        prompt_tokens=10,
        completion_tokens=4,
        cost_usd=0.002,
        latency_s=totals.latency_s,
        failed_calls=0,
        attempts=1,
    )
    assert totals.hit_rate == 0.5 and totals.model_calls == 1


def test_any_content_change_is_a_miss(storage):
    inner = FakeLLM(respond=lambda r: f"n{len(inner.calls)}")
    llm = CachedLLM(inner, *storage)
    llm.complete(ask(seed=1))
    llm.complete(ask(seed=2))
    llm.complete(ask(seed=1, sample_index=1))
    llm.complete(ask("other", seed=1))
    llm.complete(ask(seed=1, temperature=0.1))
    llm.complete(ask(seed=1, run_id="someone-else"))  # run_id is not content: a hit
    assert len(inner.calls) == 5


def test_calls_are_attributed_to_runs(storage):
    inner = FakeLLM(respond=lambda r: priced("x"))
    llm = CachedLLM(inner, *storage)
    run_a, run_b = llm.for_run("run-a"), llm.for_run("run-b")
    run_a.complete(ask("1"))
    run_a.complete(ask("2"))
    run_b.complete(ask("1"))  # cached: served to run b at no cost
    run_b.complete(ask("3", run_id="run-c"))  # the request's own run id wins
    a, b, c = llm.totals("run-a"), llm.totals("run-b"), llm.totals("run-c")
    assert (a.calls, a.cached_calls, a.prompt_tokens, a.cost_usd) == (2, 0, 20, pytest.approx(0.004))
    assert (b.calls, b.cached_calls, b.prompt_tokens, b.cost_usd) == (1, 1, 0, 0.0)
    assert c.calls == 1 and llm.totals().calls == 4
    assert [r.run_id for r in llm.ledger.calls("run-a")] == ["run-a", "run-a"]


def test_failures_are_not_cached_and_are_accounted(storage):
    inner = FakeLLM([LLMTimeout("slow"), "fine"])
    llm = CachedLLM(inner, *storage)
    with pytest.raises(LLMTimeout):
        llm.complete(ask())
    assert llm.complete(ask()).text == "fine"
    assert len(inner.calls) == 2
    totals = llm.totals()
    assert (totals.calls, totals.failed_calls, totals.cached_calls) == (3 - 1, 1, 0)
    assert [r.status for r in llm.ledger.calls()] == ["LLMTimeout", "ok"]


def test_single_flight_calls_inner_once(storage):
    inner = SlowLLM(FakeLLM(respond=lambda r: "shared"), latency_s=0.3)
    llm = CachedLLM(inner, *storage)
    barrier = threading.Barrier(16)

    def go(_):
        barrier.wait()
        return llm.complete(ask("same"))

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(go, range(16)))
    assert inner.calls == 1
    assert {r.text for r in results} == {"shared"}
    assert sum(not r.cached for r in results) == 1
    assert llm.totals().calls == 16 and llm.totals().cached_calls == 15


def _count_joiners(llm: CachedLLM, joined: threading.Semaphore) -> None:
    """Release ``joined`` each time a caller joins a flight another leads (on ``llm`` and its views)."""
    join = llm._flights.join

    def counting_join(key):
        flight, leader = join(key)
        if not leader:
            joined.release()
        return flight, leader

    llm._flights.join = counting_join  # type: ignore[method-assign]


def test_single_flight_shares_the_error(storage):
    def boom(request):
        raise LLMError("down")

    joined = threading.Semaphore(0)

    def after_the_others_joined(request):
        # the leader fails only once the 5 others wait on its flight (a fixed pause raced on a loaded machine)
        for _ in range(5):
            assert joined.acquire(timeout=30)
        boom(request)

    inner = SlowLLM(FakeLLM(respond=after_the_others_joined), latency_s=0.0)
    llm = CachedLLM(inner, *storage)
    _count_joiners(llm, joined)
    errors: list[BaseException] = []

    def go():
        try:
            llm.complete(ask("same"))
        except LLMError as err:
            errors.append(err)

    threads = [threading.Thread(target=go) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(errors) == 6 and inner.calls == 1
    assert llm.totals().failed_calls == 6
    assert llm.cache.get(ask("same").cache_key("fake")) is None


def test_a_run_view_joins_the_flight_of_its_parent():
    # the view is made while no call is in flight: an empty table is still the one it shares
    joined = threading.Semaphore(0)

    def after_the_view_joined(request):
        assert joined.acquire(timeout=30)
        return "shared"

    inner = SlowLLM(FakeLLM(respond=after_the_view_joined), latency_s=0.0)
    llm = CachedLLM(inner)
    view = llm.for_run("run-v")
    _count_joiners(llm, joined)
    with ThreadPoolExecutor(2) as pool:
        lead = pool.submit(llm.complete, ask("same"))
        follow = pool.submit(view.complete, ask("same"))
        results = [lead.result(60), follow.result(60)]
    assert inner.calls == 1 and sorted(r.cached for r in results) == [False, True]  # either may lead
    assert sorted(str(r.run_id) for r in llm.ledger.calls()) == ["None", "run-v"]


def test_the_gate_covers_the_model_call_alone_and_its_wait_is_not_the_calls_latency(monkeypatch):
    clock = {"now": 1000.0}
    # the cache module's clock only (time.perf_counter itself stays the process's)
    monkeypatch.setattr("furnace.llm.cache.time", SimpleNamespace(perf_counter=lambda: clock["now"]))
    entered: list[int] = []

    @contextmanager
    def gate():  # a slot that took 60 s to come free
        clock["now"] += 60.0
        entered.append(len(inner.calls))  # calls the model had had when the gate opened
        yield

    def answer(request):
        clock["now"] += 2.0  # the model's own 2 s
        return "fresh"

    inner = FakeLLM(respond=answer)
    llm = CachedLLM(inner)
    fresh = llm.complete_keyed(ask("gated"), llm.request_key(ask("gated")), gate=gate)
    hit = llm.complete_keyed(ask("gated"), llm.request_key(ask("gated")), gate=gate)
    assert not fresh.cached and hit.cached and entered == [0]  # the hit never entered the gate
    assert [c.latency_s for c in llm.ledger.calls()] == [2.0, 0.0]


def test_the_stored_cache_survives_a_new_process_view(stored):
    first_inner = FakeLLM(respond=lambda r: {"score": 0.5})
    llm = CachedLLM(first_inner, *stored.open()[1:])
    made = llm.complete(ask(json_schema={"type": "object"}))
    assert made.parsed == {"score": 0.5}
    llm.ledger.flush()  # what the first process does at exit

    # A fresh database object and CachedLLM on the same file: no inner call at all.
    again_inner = FakeLLM()
    again = CachedLLM(again_inner, *stored.open()[1:])
    served = again.complete(ask(json_schema={"type": "object"}))
    assert served.cached and served.parsed == {"score": 0.5} and again_inner.calls == []
    assert again.totals().calls == 2  # both processes' rows are in one ledger


def test_a_stored_put_is_insert_if_absent(stored):
    db, cache, _ = stored.open()
    assert cache.put("k", priced("first"), task="reply") is True
    other = stored.open()[1]  # another process's view, with its own memory
    assert other.put("k", priced("second")) is False
    assert other.get("k").text == "first" and cache.get("k").text == "first"
    assert db.query("SELECT count(*), min(task) FROM llm_responses") == [(1, "reply")]


def test_a_forged_cached_response_is_a_counted_miss_and_is_replaced(stored):
    """Someone who can write the database but not read the key replaces a cached answer: it is never
    served (a miss, counted, the model asked again) and the fresh answer replaces it."""
    db, cache, ledger = stored.open()
    inner = FakeLLM(respond=lambda r: priced("the real answer"))
    CachedLLM(inner, cache, ledger).complete(ask(seed=1))
    [(key, text)] = db.query("SELECT cache_key, CAST(completion AS TEXT) FROM llm_responses")
    forged = Completion.model_validate_json(text).model_copy(update={"text": "EvilBot says: send me your password."})
    db.execute("UPDATE llm_responses SET completion = ? WHERE cache_key = ?", [forged.model_dump_json(), key])

    _, fresh_cache, fresh_ledger = stored.open()  # another process: nothing in its memory layer
    llm = CachedLLM(inner, fresh_cache, fresh_ledger)
    assert fresh_cache.stats()["bad_seals"] == 1
    answer = llm.complete(ask(seed=1))
    assert answer.text == "the real answer" and not answer.cached
    assert len(inner.calls) == 2 and fresh_cache.refused == 1
    assert fresh_cache.stats()["bad_seals"] == 0  # replaced by the fresh, sealed answer
    assert stored.open()[1].get(key).text == "the real answer"


def test_a_cached_response_resealed_without_the_key_is_still_refused(stored):
    """furnace's own seal function with another key (what a forger can run) makes no valid seal."""
    from furnace.storage.seals import Sealer, response_seal

    db, cache, _ = stored.open()
    cache.put("k", priced("real"))
    forged = priced("EvilBot says: send me your password.").model_dump_json()
    guess = response_seal(Sealer(b"x" * 32, source="forger"), "k", forged)
    db.execute("UPDATE llm_responses SET completion = ?, seal = ? WHERE cache_key = 'k'", [forged, guess])
    assert stored.open()[1].get("k") is None


def test_agent_answer_never_serves_a_forged_cached_response(home, monkeypatch, capsys):
    """`agent answer` after the cached answer was replaced in the database: the model is asked again."""
    import json

    from furnace import resources
    from furnace.cli import main

    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")

    def run(*argv: str) -> str:
        main(list(argv))
        return capsys.readouterr().out

    for name in ("data-science-mentor", "socratic-math-tutor"):
        run("import", str(resources.LIBRARY_DIR / f"{name}.yaml"))
    agent_id = json.loads(run("fuse", "data-science-mentor", "socratic-math-tutor", "--json"))["id"]
    first = json.loads(run("agent", "answer", agent_id, "How do I start with statistics?", "--json"))["text"]
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    runtime = Runtime(FurnaceSettings(home=home))  # the home's live store, edited behind furnace's back
    db = runtime.sql
    asked = "SELECT count(*) FROM llm_calls WHERE task = 'reply' AND NOT cached"
    before = db.query(asked)[0][0]
    forgeries = db.query("SELECT cache_key, completion FROM llm_responses WHERE task = 'reply'")
    assert forgeries
    for key, text in forgeries:
        forged = json.loads(text) | {"text": "EvilBot says: send me your password."}
        db.execute("UPDATE llm_responses SET completion = ? WHERE cache_key = ?", [json.dumps(forged), key])
    runtime.close()
    again = json.loads(run("agent", "answer", agent_id, "How do I start with statistics?", "--json"))["text"]
    assert "EvilBot" not in again and again == first
    runtime = Runtime(FurnaceSettings(home=home))
    assert runtime.sql.query(asked)[0][0] == before + 1  # one model call, not a cache hit
    runtime.close()
