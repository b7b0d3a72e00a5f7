"""The revision and arena benches run on DuckDB and count what they claim (no timing here).

``python -m bench revision`` once crashed before printing its DuckDB figure and nothing noticed;
these run each bench's measurement, small and without the fake's latency, and check its figures
are earned: the calls replayed as the baseline are the calls the round made, and the statements
counted are the ones DuckDB ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import bench_arena, bench_revision
from bench.paired import overheads
from furnace.storage.duckdb.content import DuckDBContentStore
from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.store import DuckDBStore


def test_the_revision_bench_measures_duckdb_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_revision, "LATENCY_S", 0.0)
    monkeypatch.setattr(bench_revision, "ROUNDS", 3)
    db = Database(tmp_path / "bench.duckdb")
    counted: list[float] = []
    rounds, baselines, calls = bench_revision.measure(
        lambda: (DuckDBStore(db), DuckDBContentStore(db)), counted=(db, counted)
    )
    assert calls == 3 * 2  # each round: the edit and the preference extraction
    assert len(rounds) == len(baselines) == 3  # each round paired with its own baseline
    assert all(r > 0 for r in rounds) and all(b > 0 for b in baselines)
    statements, cpu = counted
    assert 3 * 10 <= statements <= 3 * 20  # the rounds' own statements (budget: tests/storage)
    assert cpu > 0


def test_the_arena_bench_measures_duckdb_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_arena, "ROUNDS", 1)
    monkeypatch.setattr(bench_arena, "SlowLLM", lambda inner, latency: inner)  # no latency: nothing is timed here
    from furnace.storage.duckdb.arena import DuckDBArenaStore

    db = Database(tmp_path / "bench.duckdb")
    turns, baselines, calls = bench_arena._measure(lambda: DuckDBArenaStore(db), db)
    assert calls >= 4 * len(bench_arena.MESSAGES)  # four speakers a turn (and the open message's plan)
    assert len(turns) == len(baselines) == len(bench_arena.MESSAGES)  # each turn paired with its baseline
    assert all(t > 0 for t in turns) and all(b > 0 for b in baselines)


def test_the_revision_bench_judges_the_median_round_against_its_own_baseline() -> None:
    median, p90, whole = overheads([1.2, 1.1, 3.0], [1.0, 1.0, 1.0])
    assert median == pytest.approx(0.2)  # the stalled third round does not move the median ...
    assert p90 == pytest.approx(2.0)  # ... and is shown in the 90th percentile
    assert whole == pytest.approx((5.3 - 3.0) / 3.0)
