"""The waits bench's counting: a wait spans every other process's transaction that held the lock during it,
and each wait spanning more than one is told with whose transactions it waited behind."""

from __future__ import annotations

from bench import bench_waits


def test_a_wait_counts_the_transactions_held_during_it_and_the_long_ones_are_told() -> None:
    records = {  # (asked, got, done) in seconds
        "app": [(0.000, 0.000, 0.010)],
        "fuse": [(0.002, 0.010, 0.015)],  # behind the app's transaction
        "experiment": [(0.003, 0.015, 0.016), (0.020, 0.020, 0.021)],  # behind the app's and fuse's; then none
    }
    waits = bench_waits._waits(records)
    assert [n for _, n in waits["fuse"]] == [1]
    assert [n for _, n in waits["experiment"]] == [2, 0]
    assert [round(w, 3) for w, _ in waits["experiment"]] == [0.012, 0.0]
    told = bench_waits._spans(records)
    assert len(told) == 1
    assert told[0].startswith("experiment waited 12.0 ms behind app 10.0 ms (in at -3.0), fuse 5.0 ms (in at +7.0)")
