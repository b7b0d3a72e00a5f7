"""Ancestors of a deep node in a 100,000-agent lineage DAG: DuckDB vs in-memory BFS.

The DAG mimics furnace's own use: 50 library elixirs; 100 evolution
experiments of 40 generations x 25 agents; each child has two parents
(crossover, 70%) or one (mutation) in the previous generation; generation 0
of an experiment is seeded from library elixirs and the promoted best agent
of one earlier experiment -- so a late agent's ancestry spans several
experiments. Edges are bulk-inserted from a pandas frame in one transaction
(never through ``save_agent``). The query is ``DuckDBStore.ancestors`` (one
recursive ``USING KEY`` CTE, including opening and closing its connection);
the baseline is ``furnace.storage.memory.bfs`` over the same edges already in
memory. Target: ``DuckDBStore.ancestors`` is interactive -- median under 20 ms for
the whole call, results equal to the BFS.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

LIBRARY = 50
EXPERIMENTS = 100
GENERATIONS = 40
POPULATION = 25
TARGET_MS = 20.0
REPEATS = 7


def build_edges(seed: int = 0) -> list[tuple[str, str, str, str, int]]:
    """(parent, child, operator, op_version, parent_version) rows for 100,000 agents."""
    rng = random.Random(seed)
    library = [f"lib-{i}" for i in range(LIBRARY)]
    edges: list[tuple[str, str, str, str, int]] = []
    best: list[str] = []  # one promoted agent per finished experiment
    for x in range(EXPERIMENTS):
        # an experiment builds on the promoted best of one earlier experiment (when there is one)
        promoted = [best[rng.randrange(len(best))]] if best else []
        previous: list[str] = []
        for g in range(GENERATIONS):
            current = [f"agt-{x:03d}-{g:02d}-{i:02d}" for i in range(POPULATION)]
            for child in current:
                if g == 0:
                    first = promoted if promoted and rng.random() < 0.5 else [rng.choice(library)]
                    parents, op = first + [rng.choice([x for x in library if x not in first])], "crossover"
                elif rng.random() < 0.7:
                    parents, op = rng.sample(previous, 2), "crossover"
                else:
                    parents, op = [rng.choice(previous)], "mutation"
                edges.extend((p, child, op, "1", 1) for p in parents)
            previous = current
        best.append(rng.choice(previous))
    return edges


def run() -> bool:
    """Build the DAG, time both walks, print figures; True when DuckDB is interactive."""
    import pandas as pd

    from furnace.storage.duckdb.db import Database
    from furnace.storage.duckdb.store import _ANCESTORS, DuckDBStore
    from furnace.storage.memory import adjacency, bfs

    edges = build_edges()
    agents = EXPERIMENTS * GENERATIONS * POPULATION
    deep = f"agt-{EXPERIMENTS - 1:03d}-{GENERATIONS - 1:02d}-00"
    with tempfile.TemporaryDirectory(prefix="furnace-bench-") as tmp:
        store = DuckDBStore(Database(Path(tmp) / "bench.duckdb"))
        frame = pd.DataFrame(edges, columns=["parent", "child", "operator", "op_version", "parent_version"])
        started = time.perf_counter()
        with store.db.transaction() as con:
            con.register("frame", frame)
            con.execute("INSERT INTO lineage_edges SELECT * FROM frame")
        load_s = time.perf_counter() - started
        print(f"   built {agents:,} agents / {len(edges):,} edges in DuckDB in {load_s:.2f}s")

        store.ancestors(deep)  # warm the file cache once, as an interactive session would be
        duck_times, found = [], []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            found = store.ancestors(deep)
            duck_times.append(time.perf_counter() - t0)

        with store.db.connect() as con:  # the recursive CTE on an open connection (the rejected design)
            warm_times = []
            for _ in range(3):
                t0 = time.perf_counter()
                con.execute(_ANCESTORS, [deep, 2**31 - 1]).fetchall()
                warm_times.append(time.perf_counter() - t0)

        parents_of = adjacency((c, p, op) for p, c, op, _, _ in edges)
        py_times, expected = [], []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            expected = bfs(deep, parents_of)
            py_times.append(time.perf_counter() - t0)

    same = [(n.id, n.depth) for n in found] == [(n.id, n.depth) for n in expected]
    duck_ms = statistics.median(duck_times) * 1000
    py_ms = statistics.median(py_times) * 1000
    depth = max((n.depth for n in found), default=0)
    print(f"   ancestors of {deep}: {len(found):,} nodes, deepest at depth {depth}; results equal: {same}")
    warm_ms = statistics.median(warm_times) * 1000
    best_ms = min(duck_times) * 1000
    print(f"   DuckDBStore.ancestors (index caught up, walk): median {duck_ms:.1f} ms, best {best_ms:.1f} ms")
    print(f"   recursive CTE on an open connection (reference): median {warm_ms:.1f} ms")
    print(f"   Python BFS over in-memory edges:               median {py_ms:.1f} ms")
    print(f"   ratio DuckDB / Python BFS: {duck_ms / py_ms:.1f}x   target: DuckDB < {TARGET_MS:.0f} ms")
    return same and duck_ms < TARGET_MS
