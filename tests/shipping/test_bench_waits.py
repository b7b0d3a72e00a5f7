"""The waits bench's counting: a wait spans every other process's transaction that held the lock during it;
the judged count is the waits behind more than one transaction of one other process; each wait spanning more
than one is told with whose transactions it waited behind and when they asked (by the turns' tickets), and
each transaction that began asking once a waiter was in line and got in before it is told too."""

from __future__ import annotations

from bench import bench_waits


def test_a_wait_counts_the_transactions_held_during_it_and_the_long_ones_are_told() -> None:
    records = {  # (asked, got, done) in seconds; its ticket and when it was in line (ns: only their order matters)
        "app": [(0.000, 0.000, 0.010, 100, 110)],
        "fuse": [(0.002, 0.010, 0.015, 200, 210)],  # behind the app's transaction
        "experiment": [(0.003, 0.015, 0.016, 300, 310), (0.020, 0.020, 0.021, 400, 410)],  # behind both
    }
    waits = bench_waits._waits(records)
    assert [w.behind for w in waits["fuse"]] == [1]
    assert [w.behind for w in waits["experiment"]] == [2, 0]
    assert [round(w.seconds, 3) for w in waits["experiment"]] == [0.012, 0.0]
    # behind one transaction of each of two processes: not a wait on one process for more than one
    assert [w.most_of_one for w in waits["experiment"]] == [1, 0]
    assert all(w.passed_by == 0 for rows in waits.values() for w in rows)  # each got in in the order it asked
    assert bench_waits._passes(records) == []
    told = bench_waits._spans(records)
    assert len(told) == 1
    assert told[0].startswith(
        "experiment waited 12.0 ms behind app 10.0 ms (in at -3.0; asked -0.0 ms from it), "
        "fuse 5.0 ms (in at +7.0; asked -0.0 ms from it)"
    )


def test_a_stream_of_one_process_and_a_later_asker_let_in_first_are_counted() -> None:
    records = {
        "experiment": [
            (0.000, 0.000, 0.004, 1_000_000, 1_000_000),
            (0.005, 0.005, 0.009, 5_000_000, 5_000_000),  # began asking once fuse was in line: passed it
        ],
        "fuse": [(0.002, 0.009, 0.012, 2_000_000, 2_100_000)],  # in line at 2.1 ms: behind both of those
        "migration": [(0.013, 0.013, 0.014, 0, 0)],  # outside the turns: no ticket, never counted as passed
    }
    waits = bench_waits._waits(records)
    (fuse,) = waits["fuse"]
    assert (fuse.behind, fuse.most_of_one, fuse.passed_by) == (2, 2, 1)
    assert [w.passed_by for w in waits["experiment"]] == [0, 0]
    assert bench_waits._spans(records) == [
        "fuse waited 7.0 ms behind experiment 4.0 ms (in at -2.0; asked -1.0 ms from it), "
        "experiment 4.0 ms (in at +3.0; asked +3.0 ms from it)"
    ]
    assert bench_waits._passes(records) == [
        "experiment (began asking +2.90 ms after it was in line, in at +3.0, held 4.0 ms) got in before fuse, "
        "which waited 7.0 ms"
    ]


def test_a_ticket_read_before_the_waiters_byte_was_locked_is_not_a_pass() -> None:
    records = {  # the app read its clock (ticket) at 1.0 ms but held its byte only from 3.0 ms
        "app": [(0.003, 0.006, 0.007, 1_000_000, 3_000_000)],
        # began asking at 2.0 ms, while the app's byte was not locked yet: it was first in line
        "experiment": [(0.002, 0.002, 0.005, 2_000_000, 2_000_000)],
    }
    (app,) = bench_waits._waits(records)["app"]
    assert (app.behind, app.passed_by) == (1, 0)
    assert bench_waits._passes(records) == []
