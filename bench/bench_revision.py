"""Revision round overhead beyond the model's latency (target <= 5 % beyond a 500 ms model, issue #31).

One round = save the user message, edit (REVISE call), record + new version +
reply (one commit), extract preferences (EXTRACT_PREFERENCES call), persist
the new persona version, exactly as ``furnace content revise`` does it: on the
stack the command builds (:mod:`bench.stack`: the runtime's store and content
store on a temporary home, the response cache and call ledger behind every model
call), the model replaced at furnace's LLM seam by ``SlowLLM(OfflineEngine(), 0.5)``: a 500 ms model,
as the issue's target says (a first run behind 50 ms, which also warms the process up, is printed
for reference and not judged).
The baseline, measured in the same run, is the same model calls made directly
(the recorded requests replayed through the same slow model), so the ratio is
pure furnace overhead. Each round is paired with its own baseline, made right
after it, and the target is judged on the median round: on a shared machine
another process's stall lands on one round and says nothing about furnace (the
90th percentile and the whole run's ratio are printed beside it). Beside it,
furnace's CPU per model call (:class:`bench.stack.CpuWindow`).
"""

from __future__ import annotations

import os
import statistics
import time

from bench.paired import overheads
from bench.stack import CPU_TARGET_MS, CpuWindow, Stack, main_for, record, stack
from furnace.domain.elixir import parse_elixir
from furnace.llm.fakes import SlowLLM
from furnace.llm.offline import OfflineEngine
from furnace.writing.content import generate_content
from furnace.writing.revision import revise

LATENCY_S = 0.5
REFERENCE_LATENCY_S = 0.05  # the warm-up run's model, printed for reference
ROUNDS = 24
TARGET = 0.05
PERSONA = {
    "id": "bench-writer",
    "name": "Bench Writer",
    "language": "zh",
    "identity": "一位写生活方式文章的博主。",
    "expertise": ["护肤", "防晒"],
    "principles": ["推荐前先说明适用肤质", "不夸大产品功效"],
    "tone": {"formality": 0.8},
}
TOPIC = "夏季防晒推荐"
# Alternating edits so that every round really changes the text.
SUGGESTIONS = ["加一个 emoji", "第三段长一点", "去掉 emoji", "第三段太长，缩短一点"]


def measure(built: Stack) -> tuple[list[float], list[float], CpuWindow, int]:
    """Per round: (round times, model-only times), furnace's CPU window and the SQL statements, for
    ROUNDS rounds on the stack's home. Each piece gets one cycle of SUGGESTIONS (a new piece, on its
    own topic, every cycle): on the same piece the edits undo each other, the text comes back to one
    seen before, and the response cache serves the round (a user's stack does), leaving no model
    latency to pair it with."""
    runtime = built.runtime
    runtime.store.save_elixir(parse_elixir(PERSONA))
    pieces = [
        generate_content(
            runtime.store, runtime.content_store, runtime.llm, persona_id="bench-writer", topic=f"{TOPIC}（{n + 1}）"
        )[0]
        for n in range(-(-ROUNDS // len(SUGGESTIONS)))
    ]
    client = built.client
    rounds: list[float] = []
    bases: list[float] = []
    before = runtime.sql.statements
    with built.measure() as window:
        for i in range(ROUNDS):
            sent = len(client.requests)
            started = time.perf_counter()
            piece, suggestion = pieces[i // len(SUGGESTIONS)], SUGGESTIONS[i % len(SUGGESTIONS)]
            out = revise(runtime.store, runtime.content_store, runtime.llm, piece.id, suggestion)
            rounds.append(time.perf_counter() - started)
            assert out.status == "revised", out.reply.content
            bases.append(client.replay(client.requests[sent:]))
    statements = runtime.sql.statements - before
    return rounds, bases, window, statements


def _report(label: str, rounds: list[float], bases: list[float], window: CpuWindow, statements: int) -> float:
    """Print one run's figures; its median overhead."""
    median, p90, whole = overheads(rounds, bases)
    print(
        f"   {label}: {ROUNDS} rounds, {window.model_calls} model calls; a round "
        f"{statistics.median(rounds) * 1000:.1f} ms vs its model calls alone {statistics.median(bases) * 1000:.1f} ms "
        f"(medians) → overhead median {median:+.1%} (p90 {p90:+.1%}, whole run {whole:+.1%}); SQL statements per "
        f"round {statements / ROUNDS:.1f}; furnace CPU per model call {window.cpu_ms_per_call:.2f} ms (all threads, "
        f"the provider client's {window.client_cpu_s:.2f}s and the baseline replays left out)"
    )
    return median


def run() -> bool:
    """Print the overhead figures; True when the median overhead beyond the 500 ms model is within 5 % and
    furnace's CPU per model call is within its target."""
    load = os.getloadavg()[0]
    with stack(lambda name: SlowLLM(OfflineEngine(), REFERENCE_LATENCY_S)) as warm:
        reference = measure(warm)  # also the warm-up (imports, template caches)
    _report(f"for reference, behind a {REFERENCE_LATENCY_S * 1000:.0f} ms model (not judged)", *reference)
    with stack(lambda name: SlowLLM(OfflineEngine(), LATENCY_S)) as built:
        rounds, bases, window, statements = measure(built)
    median = _report(f"the command's stack behind a {LATENCY_S * 1000:.0f} ms model", rounds, bases, window, statements)
    print(
        f"   overhead median {median:+.1%} (target <= {TARGET:.0%}: {'met' if median <= TARGET else 'MISSED'}); "
        f"furnace CPU {window.cpu_ms_per_call:.2f} ms per model call (target <= {CPU_TARGET_MS:.0f} ms); load "
        f"average {load:.1f} at the start (statements include BEGIN/COMMIT)"
    )
    record(
        **window.figures(),
        overhead_median=round(median, 4),
        overhead_target=TARGET,
        latency_s=LATENCY_S,
        model_calls=window.model_calls,
        load=round(load, 1),
    )
    return median <= TARGET and window.cpu_ms_per_call <= CPU_TARGET_MS


main = main_for("revision", run)


if __name__ == "__main__":
    raise SystemExit(0 if run() else 1)
