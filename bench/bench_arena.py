"""Arena orchestration overhead: a 4-speaker turn vs the model's own latency.

The model is ``SlowLLM(OfflineEngine(), 0.05)``. Baseline, measured in the same
run: the very same model requests called back to back with nothing around them.
Overhead = (turn wall time − baseline) / baseline, each turn paired with its
own baseline made right after it; the target (< 10 %) is judged on the median
turn, with DuckDB for both the arena store and the members' elixirs (what users
run): on a shared machine another process's stall lands on one turn and says
nothing about furnace (the 90th percentile and the whole run's ratio are printed
beside it). In-memory stores are shown for reference.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.paired import overheads
from furnace.arena.runner import Arena
from furnace.arena.store import InMemoryArenaStore
from furnace.domain.elixir import Elixir
from furnace.llm.fakes import SlowLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.seam import Completion, LLMRequest
from furnace.storage.memory import MemoryStore

TARGET = 0.10
ROUNDS = 4
MEMBERS = [
    dict(
        id="ada",
        name="Ada",
        language="en",
        identity="A data engineer.",
        expertise=["databases"],
        principles=["Measure first."],
    ),
    dict(
        id="bo",
        name="Bo",
        language="en",
        identity="A travel writer.",
        expertise=["travel", "food"],
        principles=["One vivid detail."],
    ),
    dict(id="cy", name="小周", language="zh", identity="一位财务顾问。", expertise=["理财"], principles=["先讲风险。"]),
    dict(
        id="dee",
        name="Dee",
        language="zh",
        identity="一位健身教练。",
        expertise=["健身"],
        principles=["只给一个建议。"],
    ),
]
MESSAGES = ["@全体成员 全体都有！报数！", "@all count off!", "@all what did you do today?", "Any tips for a food trip?"]


class Recording:
    """Records the requests an arena turn makes (to replay them as the baseline)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.requests: list[LLMRequest] = []

    def complete(self, request: LLMRequest) -> Completion:
        self.requests.append(request)
        return self.inner.complete(request)


def _library(store: Any = None) -> Any:
    store = store if store is not None else MemoryStore()
    for data in MEMBERS:
        store.save_elixir(Elixir.model_validate(data))
    return store


def _measure(store_factory: Any, db: Any = None) -> tuple[list[float], list[float], int]:
    """Per turn (all rounds and messages): (turn seconds, its baseline seconds), and the model calls;
    with ``db``, the members' elixirs are on DuckDB too and the DuckDB statements per turn are printed."""
    model = SlowLLM(OfflineEngine(), 0.05)
    recording = Recording(model)
    if db is not None:
        from furnace.storage.duckdb.store import DuckDBStore

        elixirs = _library(DuckDBStore(db))
    else:
        elixirs = _library()
    arena = Arena(store_factory(), elixirs, recording)
    session = arena.create_session([m["id"] for m in MEMBERS])
    arena.say(session.id, "warm-up")  # imports, first-call costs
    turns: list[float] = []
    baselines: list[float] = []
    calls = 0
    before = db.statements if db is not None else 0
    cpu = time.process_time()
    for _ in range(ROUNDS):
        for message in MESSAGES:
            recording.requests.clear()
            started = time.perf_counter()
            outcome = arena.say(session.id, message)
            turns.append(time.perf_counter() - started)
            assert len(outcome.replies) == 4, "a 4-speaker turn must give 4 replies"
            requests = list(recording.requests)
            calls += len(requests)
            started = time.perf_counter()
            for request in requests:
                model.complete(request)
            baselines.append(time.perf_counter() - started)
    if db is not None:
        count = len(turns)
        cpu_ms, model_ms = (time.process_time() - cpu) / count * 1000, sum(baselines) / count * 1000
        print(
            f"   CPU per turn (all threads, baseline replays included; the model only sleeps): {cpu_ms:.1f} ms = "
            f"{cpu_ms / model_ms:.1%} of the model's {model_ms:.0f} ms (less load-dependent; informational)"
        )
        print(
            f"   DuckDB statements per 4-speaker turn: {(db.statements - before) / count:.1f} (BEGIN/COMMIT "
            "included; background snapshot refreshes included, ~80 statements each)"
        )
    return turns, baselines, calls


def run() -> bool:
    """Print the overhead figures; True when the DuckDB median overhead is under 10 %."""
    turns, baselines, calls = _measure(InMemoryArenaStore)
    median, p90, whole = overheads(turns, baselines)
    print(f"   model: SlowLLM(OfflineEngine(), 0.05); {len(turns)} turns x 4 speakers, {calls} model calls")
    print(f"   baseline (same requests, bare model): {statistics.median(baselines) * 1000:.1f} ms per turn (median)")
    print(
        f"   arena turn (in-memory stores, reference): {statistics.median(turns) * 1000:.1f} ms per turn (median), "
        f"overhead median {median:.1%} (p90 {p90:.1%}, whole run {whole:.1%})"
    )

    from furnace.storage.duckdb import snapshot
    from furnace.storage.duckdb.arena import DuckDBArenaStore
    from furnace.storage.duckdb.db import Database

    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "bench.duckdb")
        turns, baselines, _ = _measure(lambda: DuckDBArenaStore(db), db)
        snapshot.wait_pending()  # the background refresh writes into tmp: let it finish first
        db.close()
    median, p90, whole = overheads(turns, baselines)
    print(
        f"   arena turn (DuckDB stores): {statistics.median(turns) * 1000:.1f} ms per turn (median), "
        f"overhead median {median:.1%} (target < {TARGET:.0%}; p90 {p90:.1%}, whole run {whole:.1%})"
    )
    return median < TARGET
