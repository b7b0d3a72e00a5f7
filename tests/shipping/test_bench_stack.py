"""The benches run the user's stack (issue #31.5): no bench builds a store, cache, ledger, results or
embedder by hand; each builds it through :class:`furnace.runtime.Runtime` (:mod:`bench.stack`), the model
replaced only at furnace's LLM seam (``Runtime.client``); ``--json`` says so and carries furnace's CPU per
model call."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

# What builds a piece of the stack: a store, cache, ledger, results, KV, vectors or embedder class (by
# its name's shape, so a new one is caught too), the databases, and the helpers that assemble a stack
# of their own (``memory_evolution``: memory store, results and caches; ``CachedLLM``: a memory cache
# and ledger when given none; ``build_llm`` / ``build_embedder``: what Runtime calls).
BY_HAND = re.compile(
    r"^(?:(?:DuckDB|SQL|Memory|InMemory)\w*"
    r"|\w*(?:Store|Cache|Ledger|Results|Embedder|KV|Vectors|Database)"
    r"|CachedLLM|memory_evolution|build_llm|build_embedder)$"
)

# Documented exceptions: file -> why it may build its own.
ALLOWED = {
    "bench_search.py": (
        "the search bench compares search methods (and gepa) on one in-memory graph per method and seed; "
        "it is owned by the search targets work and reports no store or CPU figure (not converted yet)"
    ),
}


def built_by_hand(source: str) -> list[str]:
    """``name (line N)`` for every call in ``source`` that constructs a piece of the stack by hand."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if BY_HAND.match(name):
                found.append(f"{name} (line {node.lineno})")
    return found


def test_the_guard_catches_a_store_built_by_hand():
    source = (
        "from furnace.storage.duckdb.db import Database\n"
        "store = DuckDBStore(Database(path))\n"
        "llm = CachedLLM(SlowLLM(OfflineEngine()), MemoryResponseCache(), MemoryCallLedger())\n"
        "evo = memory_evolution(config, seeds, results=MemoryResults())\n"
        "emb = HashEmbedder(); arena = InMemoryArenaStore(); kv = db.DuckDBKV(x)\n"
    )
    names = {item.split(" ")[0] for item in built_by_hand(source)}
    assert names == {
        "DuckDBStore",
        "Database",
        "CachedLLM",
        "MemoryResponseCache",
        "MemoryCallLedger",
        "memory_evolution",
        "MemoryResults",
        "HashEmbedder",
        "InMemoryArenaStore",
        "DuckDBKV",
    }
    # a fake model, the runtime and the shared helper are not pieces of the stack
    assert built_by_hand("stack(lambda n: SlowLLM(OfflineEngine(), 0.05)); Runtime(FurnaceSettings(home=h))") == []


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_no_bench_builds_its_stack_by_hand(path):
    if path.name in ALLOWED or path.name == "stack.py":
        return
    found = built_by_hand(path.read_text(encoding="utf-8"))
    assert not found, f"bench/{path.name} builds by hand: {', '.join(found)}; build it through bench.stack (Runtime)"


def test_every_exception_names_a_file_that_still_builds_its_own():
    """An allow-list entry that is no longer needed is removed, not kept as a licence."""
    for name, reason in ALLOWED.items():
        assert reason and (BENCH / name).is_file(), name
        assert built_by_hand((BENCH / name).read_text(encoding="utf-8")), f"{name} no longer needs its exception"


def test_the_stack_is_the_commands_with_the_model_replaced_at_the_seam(tmp_path):
    """Runtime.client puts the fake behind the runtime's own response cache and ledger (in the live store),
    for the configured model and a judge alike; CPU the client spends is counted apart."""
    from bench.stack import Client, stack
    from furnace.llm.fakes import FakeLLM
    from furnace.llm.seam import LLMRequest, Message, TaskKind
    from furnace.storage.sql.llm_calls import SQLCallLedger, SQLResponseCache

    def busy(request):
        total = 0
        for i in range(20_000):  # model-side work, on the calling thread
            total += i
        return f"answer {total} {request.messages[-1].content}"

    with stack(lambda name: FakeLLM(respond=busy, model_name=name), home=tmp_path / "home") as built:
        rt = built.runtime
        assert isinstance(rt.llm.cache, SQLResponseCache) and isinstance(rt.llm.ledger, SQLCallLedger)
        assert rt.settings.home == tmp_path / "home" and (tmp_path / "home" / "furnace.sqlite").exists()
        assert isinstance(rt.llm.inner, Client)
        judge = rt.llm_for("judge-model")
        assert isinstance(judge.inner, Client) and judge.ledger is not None
        ask = [LLMRequest(task=TaskKind.JUDGE, messages=[Message(role="user", content=f"q{i}")]) for i in range(3)]
        with built.measure() as window:
            for request in ask + ask[:1]:  # the repeat is a cache hit: no model call
                rt.llm.complete(request)
            judge.complete(ask[1])
        assert window.model_calls == 4 == built.clients[rt.llm.model_name].calls + built.clients["judge-model"].calls
        assert window.client_cpu_s > 0
        assert window.cpu_ms_per_call == pytest.approx((window.cpu_s - window.client_cpu_s) * 1000 / window.model_calls)


def test_json_output_says_the_stack_and_the_cpu_per_call(capsys):
    from bench import stack as bench_stack

    def run() -> bool:
        print("a human line")
        bench_stack.record(cpu_ms_per_call=3.5)
        return False

    assert bench_stack.main_for("demo", run)(["--json"]) == 1  # a missed target: non-zero, as make bench
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert data["stack"] == "runtime" and data["cpu_ms_per_call"] == 3.5 and data["met"] is False
    # the machine's reference workload measured before and after the group, beside its figures
    assert set(data["reference_ms"]) == {"before", "after"} and all(v > 0 for v in data["reference_ms"].values())
    assert "a human line" in out.err and "a human line" not in out.out
    assert bench_stack.main_for("demo", run)(["--nope"]) == 2


def test_the_reference_workload_is_the_median_thread_cpu_of_a_fixed_amount_of_work(monkeypatch):
    """The reference times a fixed amount of work per round on the thread's CPU clock (never wall time) and
    gives the median round: here each round's keys are counted and the clock is a fake one."""
    import inspect
    import itertools
    import time

    from bench import stack as bench_stack

    keys: list[str] = []
    real_key = bench_stack.content_key
    monkeypatch.setattr(bench_stack, "content_key", lambda value: keys.append(real_key(value)) or keys[-1])
    monkeypatch.setattr(bench_stack, "REFERENCE_CALLS", 7)
    spans = iter([0.004, 0.001, 0.002])  # CPU seconds per round, read at the start and the end of each
    readings = itertools.accumulate(itertools.chain.from_iterable((0.0, next(spans)) for _ in range(3)))

    assert bench_stack.reference_ms(rounds=3, clock=lambda: next(readings)) == pytest.approx(2.0)  # median of 4, 1, 2
    assert inspect.signature(bench_stack.reference_ms).parameters["clock"].default is time.thread_time  # not wall
    assert len(keys) == 21 and len(set(keys)) == 21  # 3 rounds of 7 distinct requests (every insert is new)
