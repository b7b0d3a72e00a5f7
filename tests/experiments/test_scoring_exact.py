"""Faster scoring arithmetic gives the same figures: diversity to the score's 6 decimals (numpy's sums
may differ from a left-to-right sum in the last bits) and a run's embedding table to the last bit of
:func:`diversity`, call totals to the last bit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from furnace.llm.cache import CallRecord, CallTotals, record_totals, sum_calls
from furnace.scoring.diversity import Embeddings, diversity

_FLOAT = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


def _reference_diversity(vector: list[float], others: list[list[float]]) -> tuple[float, str]:
    """Diversity as first written: generator sums for every dot product and norm."""

    def cosine(a: list[float], b: list[float]) -> float:
        dot = sum(x * y for x, y in zip(a, b, strict=False))
        na = sum(x * x for x in a) ** 0.5
        nb = sum(y * y for y in b) ** 0.5
        return 0.0 if na == 0 or nb == 0 else dot / (na * nb)

    sims = [cosine(vector, o) for o in others]
    mean = sum(sims) / len(sims)
    reason = f"mean similarity {mean:.2f} to {len(sims)} members (closest {max(sims):.2f})"
    return round(min(1.0, max(0.0, 1.0 - mean)), 6), reason


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.lists(st.lists(_FLOAT, min_size=n, max_size=n), min_size=2, max_size=6)))
def test_diversity_equals_the_generator_formula(vectors: list[list[float]]) -> None:
    score = diversity(vectors[0], vectors[1:])
    value, _ = _reference_diversity(vectors[0], vectors[1:])
    assert score.value == pytest.approx(value, abs=2e-6)  # a rounding of the 6th decimal may flip


def test_diversity_reason_names_the_mean_and_the_closest() -> None:
    score = diversity([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert (score.value, score.reason) == _reference_diversity([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert score.reason == "mean similarity 0.57 to 3 members (closest 1.00)"


def test_diversity_of_zero_and_unequal_vectors() -> None:
    assert (diversity([0.0, 0.0], [[1.0, 2.0]]).value, diversity([1.0], [[0.0]]).value) == (1.0, 1.0)
    assert diversity([1.0, 2.0, 3.0], [[1.0, 2.0]]).value == _reference_diversity([1.0, 2.0, 3.0], [[1.0, 2.0]])[0]
    assert diversity([1.0], []).value == 1.0


_VECTORS = st.integers(1, 12).flatmap(
    lambda n: st.lists(st.lists(_FLOAT, min_size=n, max_size=n), min_size=1, max_size=40)
)


@settings(max_examples=200, deadline=None)
@given(_VECTORS, st.data())
def test_the_embedding_table_gives_diversity_to_the_last_bit(vectors: list[list[float]], data: st.DataObject) -> None:
    """Rows added one by one (past the table's first growth at 16 rows), each norm computed once: a member's
    score against any peers, in any order, is the score :func:`diversity` gives for their vectors."""
    table = Embeddings()
    for i, v in enumerate(vectors):
        table.add(f"a{i}", v)
    me = data.draw(st.integers(0, len(vectors) - 1))
    peers = data.draw(st.lists(st.integers(0, len(vectors) - 1), unique=True))
    others = [vectors[p] for p in peers if p != me]
    assert table.diversity(f"a{me}", [f"a{p}" for p in peers]) == diversity(vectors[me], others)


def test_the_embedding_table_leaves_out_the_member_itself_and_keys_never_added() -> None:
    table = Embeddings()
    for key, v in {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0]}.items():
        table.add(key, v)
    table.add("a", [0.0, 5.0])  # a key keeps its first row
    assert table.diversity("a", ["a", "b", "c", "ghost"]) == diversity([1.0, 0.0], [[0.0, 1.0], [1.0, 1.0]])
    assert table.diversity("a", ["a"]).value == 1.0  # alone
    assert table.diversity("ghost", ["a", "b"]).failed
    assert ("a" in table, "ghost" in table, len(table)) == (True, False, 3)


def test_the_embedding_table_widens_for_a_longer_vector() -> None:
    table = Embeddings()
    table.add("short", [1.0, 2.0])
    table.add("long", [1.0, 2.0, 3.0])
    assert table.diversity("long", ["short"]) == diversity([1.0, 2.0, 3.0], [[1.0, 2.0]])
    assert table.diversity("short", ["long"]) == diversity([1.0, 2.0], [[1.0, 2.0, 3.0]])


_RECORD = st.builds(
    lambda cached, status, attempts, p, c, cost, latency: CallRecord(
        id="x",
        task="reply",
        model="m",
        cache_key="k",
        cached=cached,
        status=status,
        attempts=attempts,
        prompt_tokens=p,
        completion_tokens=c,
        cost_usd=cost,
        latency_s=latency,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    ),
    st.booleans(),
    st.sampled_from(["ok", "LLMError", "Timeout"]),
    st.integers(0, 4),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.floats(0, 5, allow_nan=False),
    st.floats(0, 60, allow_nan=False),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_RECORD, max_size=30))
def test_sum_calls_equals_adding_one_record_at_a_time(records: list[CallRecord]) -> None:
    folded = CallTotals()
    for record in records:
        folded = folded.plus(record_totals(record))
    assert sum_calls(records) == folded


def test_probes_on_a_shared_pool_run_at_most_parallel_at_once_in_order() -> None:
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from furnace.evolution.evaluate import _bounded_map

    lock, running, peak = threading.Lock(), [0], [0]

    def work(n: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.002 * (n % 3))
        with lock:
            running[0] -= 1
        return n * n

    with ThreadPoolExecutor(16) as pool:
        assert _bounded_map(pool, work, list(range(10)), 3) == [n * n for n in range(10)]
        assert _bounded_map(pool, work, [4], 3) == [16]
    assert 1 <= peak[0] <= 3


def test_the_unit_runner_waits_for_running_units_and_not_for_idle_threads() -> None:
    import threading

    from furnace.evolution.units import ThreadUnitRunner, Unit

    runner = ThreadUnitRunner(2)
    gate, closed = threading.Event(), threading.Event()
    running = runner.submit(Unit("k", 0, lambda: gate.wait(5) and "done"))

    def close() -> None:
        runner.close()
        closed.set()

    threading.Thread(target=close).start()
    assert not closed.wait(0.1)  # a unit still running: close waits for it
    gate.set()
    assert closed.wait(5) and running.result() == "done"

    finished = ThreadUnitRunner(2)
    futures = [finished.submit(Unit(str(i), i, lambda i=i: i)) for i in range(4)]
    assert [f.result() for f in futures] == [0, 1, 2, 3]
    finished.close()  # every unit finished: the idle threads end on their own
    for thread in [t for t in threading.enumerate() if t.name.startswith("furnace-unit")]:
        thread.join(5)
        assert not thread.is_alive()


_SCORE = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])  # few values: ties and duplicates are common


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_SCORE, _SCORE, _SCORE), max_size=30), st.integers(1, 3))
def test_pareto_front_equals_comparing_every_pair(points: list[tuple[float, float, float]], width: int) -> None:
    from furnace.scoring.fitness import dominates, pareto_front

    keys = ["a", "b", "c"][:width]
    items = {f"i{n}": dict(zip(["a", "b", "c"], p, strict=True)) for n, p in enumerate(points)}
    naive = [i for i in items if not any(dominates(items[j], items[i], keys) for j in items if j != i)]
    assert pareto_front(items, keys) == naive


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdef"), _SCORE), max_size=20), st.integers(0, 3), st.integers(-1, 12))
def test_survivors_rank_as_rank_key_orders(members: list[tuple[str, float]], elitism: int, size: int) -> None:
    from dataclasses import dataclass

    from furnace.evolution.selection import rank_key, ranked, survivors

    @dataclass(frozen=True)
    class M:
        agent_id: str
        fitness: float

    items = [M(a, f) for a, f in members]
    assert ranked(items) == sorted(items, key=rank_key)
    old, children = items[: len(items) // 2], items[len(items) // 2 :]
    chosen = survivors(old, children, size, elitism)
    assert chosen == sorted(chosen, key=rank_key) and len({m.agent_id for m in chosen}) == len(chosen)
    # as first written: elites, children, the rest, each taken unless its id was, up to size
    taken: list[M] = []
    for m in [*sorted(old, key=rank_key)[:elitism], *sorted(children, key=rank_key), *sorted(old, key=rank_key)]:
        if len(taken) < size and m.agent_id not in {t.agent_id for t in taken}:
            taken.append(m)
    assert chosen == sorted(taken, key=rank_key)
