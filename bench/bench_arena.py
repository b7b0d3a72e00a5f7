"""Arena orchestration overhead: a 4-speaker turn vs the model's own latency.

The model is ``SlowLLM(OfflineEngine(), 0.05)``. Baseline, measured in the same
run: the very same model requests called back to back with nothing around them.
Overhead = (turn wall time − baseline) / baseline; target < 10 % with DuckDB
for both the arena store and the members' elixirs (what users run); in-memory
stores are shown for reference.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

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


def _measure(store_factory: Any, db: Any = None) -> tuple[float, float, int]:
    """(turn seconds, baseline seconds, model calls) summed over all rounds and messages; with ``db``,
    the members' elixirs are on DuckDB too and the DuckDB statements per turn are printed."""
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
    turn = baseline = 0.0
    calls = 0
    before = db.statements if db is not None else 0
    cpu = time.process_time()
    for _ in range(ROUNDS):
        for message in MESSAGES:
            recording.requests.clear()
            started = time.perf_counter()
            outcome = arena.say(session.id, message)
            turn += time.perf_counter() - started
            assert len(outcome.replies) == 4, "a 4-speaker turn must give 4 replies"
            requests = list(recording.requests)
            calls += len(requests)
            started = time.perf_counter()
            for request in requests:
                model.complete(request)
            baseline += time.perf_counter() - started
    if db is not None:
        turns = ROUNDS * len(MESSAGES)
        cpu_ms, model_ms = (time.process_time() - cpu) / turns * 1000, baseline / turns * 1000
        print(
            f"   CPU per turn (all threads, baseline replays included; the model only sleeps): {cpu_ms:.1f} ms = "
            f"{cpu_ms / model_ms:.1%} of the model's {model_ms:.0f} ms (less load-dependent; informational)"
        )
        print(
            f"   DuckDB statements per 4-speaker turn: {(db.statements - before) / turns:.1f} (BEGIN/COMMIT "
            "included; background snapshot refreshes included, ~80 statements each)"
        )
    return turn, baseline, calls


def run() -> bool:
    """Print the overhead figures; True when the DuckDB overhead is under 10 %."""
    turn, baseline, calls = _measure(InMemoryArenaStore)
    turns = ROUNDS * len(MESSAGES)
    print(f"   model: SlowLLM(OfflineEngine(), 0.05); {turns} turns x 4 speakers, {calls} model calls")
    print(f"   baseline (same requests, bare model): {baseline / turns * 1000:.1f} ms per turn")
    print(
        f"   arena turn (in-memory stores, reference): {turn / turns * 1000:.1f} ms per turn, "
        f"overhead {(turn - baseline) / baseline:.1%}"
    )

    from furnace.storage.duckdb import snapshot
    from furnace.storage.duckdb.arena import DuckDBArenaStore
    from furnace.storage.duckdb.db import Database

    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "bench.duckdb")
        db_turn, db_base, _ = _measure(lambda: DuckDBArenaStore(db), db)
        snapshot.wait_pending()  # the background refresh writes into tmp: let it finish first
        db.close()
    overhead = (db_turn - db_base) / db_base
    print(
        f"   arena turn (DuckDB stores): {db_turn / turns * 1000:.1f} ms per turn, "
        f"overhead {overhead:.1%} (target < {TARGET:.0%})"
    )
    return overhead < TARGET
