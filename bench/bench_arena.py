"""Arena orchestration overhead: a 4-speaker turn vs the model's own latency.

The arena is the one ``furnace arena`` builds (:meth:`furnace.runtime.Runtime.arena` on a temporary home,
:mod:`bench.stack`: the arena store and elixirs in the SQLite store, the response cache and call ledger behind every
model call, the hash embedder), the model replaced at furnace's LLM seam by ``SlowLLM(OfflineEngine(),
0.05)``. Baseline, measured in the same run: the very same model requests sent straight to that model,
nothing around them. Overhead = (turn wall time − baseline) / baseline, each turn paired with its own
baseline made right after it; the target (< 10 %) is judged on the median turn: on a shared machine
another process's stall lands on one turn and says nothing about furnace (the 90th percentile and the
whole run's ratio are printed beside it). Beside it, furnace's CPU per model call
(:class:`bench.stack.CpuWindow`).
"""

from __future__ import annotations

import statistics
import time

from bench.paired import overheads
from bench.stack import CPU_TARGET_MS, CpuWindow, Stack, main_for, record, stack
from furnace.domain.elixir import Elixir
from furnace.llm.fakes import SlowLLM
from furnace.llm.offline import OfflineEngine

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


def _measure(built: Stack) -> tuple[list[float], list[float], CpuWindow]:
    """Per turn (all rounds and messages): (turn seconds, its baseline seconds), and the CPU window; prints
    furnace's CPU per model call and the SQL statements per turn."""
    runtime = built.runtime
    for data in MEMBERS:
        runtime.store.save_elixir(Elixir.model_validate(data))
    arena = runtime.arena()
    client = built.client
    session = arena.create_session([m["id"] for m in MEMBERS])
    arena.say(session.id, "warm-up")  # imports, first-call costs
    turns: list[float] = []
    baselines: list[float] = []
    before = runtime.sql.statements
    with built.measure() as window:
        for _ in range(ROUNDS):
            for message in MESSAGES:
                sent = len(client.requests)
                started = time.perf_counter()
                outcome = arena.say(session.id, message)
                turns.append(time.perf_counter() - started)
                assert len(outcome.replies) == 4, "a 4-speaker turn must give 4 replies"
                baselines.append(client.replay(client.requests[sent:]))
    count = len(turns)
    print(
        f"   furnace CPU per model call: {window.cpu_ms_per_call:.2f} ms (target <= {CPU_TARGET_MS:.0f} ms; all "
        f"threads, the provider client's {window.client_cpu_s:.2f}s and the baseline replays left out; "
        f"{window.model_calls} model calls in the ledger)"
    )
    print(
        f"   SQL statements per 4-speaker turn: {(runtime.sql.statements - before) / count:.1f} (BEGIN/COMMIT included)"
    )
    record(**window.figures())
    return turns, baselines, window


def run() -> bool:
    """Print the overhead figures; True when the median overhead is under 10 % and furnace's CPU per
    model call is within its target."""
    with stack(lambda name: SlowLLM(OfflineEngine(), 0.05)) as built:
        turns, baselines, window = _measure(built)
    calls = window.model_calls
    median, p90, whole = overheads(turns, baselines)
    print(f"   model: SlowLLM(OfflineEngine(), 0.05); {len(turns)} turns x 4 speakers, {calls} model calls")
    print(f"   baseline (same requests, bare model): {statistics.median(baselines) * 1000:.1f} ms per turn (median)")
    print(
        f"   arena turn (the command's stack): {statistics.median(turns) * 1000:.1f} ms per turn (median), "
        f"overhead median {median:.1%} (target < {TARGET:.0%}; p90 {p90:.1%}, whole run {whole:.1%})"
    )
    record(overhead_median=round(median, 4), overhead_target=TARGET, model_calls=calls)
    return median < TARGET and window.cpu_ms_per_call <= CPU_TARGET_MS


main = main_for("arena", run)
