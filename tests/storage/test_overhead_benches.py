"""The revision and arena benches run on the user's stack and count what they claim (no timing here).

``python -m bench revision`` once crashed before printing its statements figure and nothing noticed;
these run each bench's measurement on the stack it builds (:mod:`bench.stack`: the runtime on a
temporary home), small and without the fake's latency, and check its figures are earned: the calls
replayed as the baseline are the calls the round made, the model calls are the ledger's, and the
statements counted are the ones the SQLite store ran.
"""

from __future__ import annotations

import pytest

from bench import bench_arena, bench_revision
from bench.paired import overheads
from bench.stack import stack
from furnace.llm.offline import OfflineEngine


def test_the_revision_bench_measures_the_runtimes_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_revision, "ROUNDS", 3)
    with stack(lambda name: OfflineEngine()) as built:  # no latency: nothing is timed here
        rounds, baselines, window, statements = bench_revision.measure(built)
        assert built.runtime.sql.dialect == "sqlite"  # the default store: furnace.sqlite in the home
        replayed = built.client.calls
    assert window.model_calls == 3 * 2  # each round: the edit and the preference extraction, in the ledger
    assert replayed == 1 + 2 * window.model_calls  # the piece's generation, each call and its baseline replay
    assert len(rounds) == len(baselines) == 3  # each round paired with its own baseline
    assert all(r > 0 for r in rounds) and all(b > 0 for b in baselines)
    assert 3 * 10 <= statements <= 3 * 40  # the rounds' own statements, the cache and the ledger included
    assert window.cpu_s > window.client_cpu_s > 0


def test_the_arena_bench_measures_the_runtimes_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_arena, "ROUNDS", 1)
    with stack(lambda name: OfflineEngine()) as built:  # no latency: nothing is timed here
        turns, baselines, window = bench_arena._measure(built)
    assert window.model_calls >= 4 * len(bench_arena.MESSAGES)  # four speakers a turn (and the open message's plan)
    assert len(turns) == len(baselines) == len(bench_arena.MESSAGES)  # each turn paired with its baseline
    assert all(t > 0 for t in turns) and all(b > 0 for b in baselines)


def test_the_revision_bench_judges_the_median_round_against_its_own_baseline() -> None:
    median, p90, whole = overheads([1.2, 1.1, 3.0], [1.0, 1.0, 1.0])
    assert median == pytest.approx(0.2)  # the stalled third round does not move the median ...
    assert p90 == pytest.approx(2.0)  # ... and is shown in the 90th percentile
    assert whole == pytest.approx((5.3 - 3.0) / 3.0)
