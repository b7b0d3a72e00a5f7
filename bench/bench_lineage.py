"""Ancestors of a deep node in a 100,000-agent lineage DAG on the live store, seals verified, vs in-memory BFS.

The DAG mimics furnace's own use: 50 library elixirs; 100 evolution
experiments of 40 generations x 25 agents; each child has two parents
(crossover, 70%) or one (mutation) in the previous generation; generation 0
of an experiment is seeded from library elixirs and the promoted best agent
of one earlier experiment -- so a late agent's ancestry spans several
experiments. Every agent is a real record: its id derived from its lineage
hash, its child persona (a sample-library persona renamed) in
``elixir_versions``, its rendered prompt and its keyed seal, exactly as
``save_agent`` writes them; rows are bulk-inserted in one transaction
(``save_agent`` one by one would take an hour).

The query is ``SQLStore.ancestors``, the path the CLI's ``furnace lineage``,
the app's lineage page and fusion run: one recursive query for the reachable
edges, the walk, and the verification of every agent it reached: in full (seal,
lineage hash, parent hashes, persona, edges) the first time a process meets it,
then remembered with the digest of the stored bytes it read; the walk itself is
remembered too: while SQLite's stamp of the lineage tables (moved by triggers on
every change to agents, lineage edges and the elixir versions they name) is
unchanged, the same walk is answered from memory (no query, no check: the file
holds what was read); after a change to them, the change log says which keys it
touched: a walk they do not touch is still answered from memory, one they touch
reads the edges and rows again and compares their digest (``VerifiedAgents``; on
PostgreSQL every walk reads and verifies in full).
Judged: the median of repeated calls in one process. Shown too: the first call
of a process (a fresh ``furnace lineage`` command: every agent verified in
full), a walk from another start (query, BFS and the edges into each agent
compared; its agents verified already), a walk after a commit of something
else (an elixir saved: the stamp unchanged, answered from memory), a walk after
a lineage commit elsewhere in the DAG (an edge off the walk: the stamp moves, its
change log names the edge, which touches nothing the walk read: answered from
memory), a walk after a lineage commit on it (a new parent of a library elixir
it reached: walked again from the remembered edges) and the recursive query
alone (no checks). The store is the runtime's
live store on a temporary home (:mod:`bench.stack`: ``furnace.sqlite``, or the
database ``FURNACE_DATABASE_URL`` names).
Baseline: ``furnace.storage.memory.bfs`` over the same edges already in memory.
Target: median under 20 ms for the whole call, results equal to the BFS.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from bench.stack import main_for, record, stack

LIBRARY = 50
EXPERIMENTS = 100
GENERATIONS = 40
POPULATION = 25
TARGET_MS = 20.0
REPEATS = 7
BYSTANDER = {"id": "bench-bystander", "name": "Bystander", "expertise": ["a"], "principles": ["p"]}


def _shape(seed: int) -> list[tuple[str, str, str]]:
    """The DAG as (parent, child, operator) over placeholder ids, parents before their children."""
    rng = random.Random(seed)
    library = [f"lib-{i}" for i in range(LIBRARY)]
    edges: list[tuple[str, str, str]] = []
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
                edges.extend((p, child, op) for p in parents)
            previous = current
        best.append(rng.choice(previous))
    return edges


def build_records(seed: int = 0) -> tuple[dict[str, list[tuple[Any, ...]]], dict[str, str]]:
    """Rows for ``elixir_versions``, ``agents`` and ``lineage_edges`` as ``save_agent`` writes them, and the
    real id of each placeholder id."""
    from furnace import resources
    from furnace.domain.agent import agent_id_for, record_seal
    from furnace.domain.elixir import ElixirRef
    from furnace.domain.lineage import Lineage
    from furnace.domain.render import render_prompt
    from furnace.interop.importers import load_elixir_file

    now = datetime.now(UTC).replace(tzinfo=None)
    samples = [e for p in sorted(resources.LIBRARY_DIR.glob("*.yaml")) for e in load_elixir_file(p)]
    exclude = {"id", "version", "created_at", "deleted_at", "content_hash"}
    elixirs: list[tuple[Any, ...]] = []
    agents: list[tuple[Any, ...]] = []
    edges: list[tuple[Any, ...]] = []
    refs: dict[str, ElixirRef] = {}
    real: dict[str, str] = {}

    def persona(id: str, n: int, origin: str) -> ElixirRef:
        base = samples[n % len(samples)]
        elixir = base.model_copy(update={"id": id, "name": f"{base.name} {n}"})
        body = json.dumps(elixir.model_dump(mode="json", exclude=exclude), ensure_ascii=False, sort_keys=True)
        row = (id, 1, origin, elixir.name, elixir.content_hash, body, now, None, elixir.language)
        elixirs.append((*row, list(elixir.expertise)))
        return elixir.ref

    for i in range(LIBRARY):
        real[f"lib-{i}"] = f"lib-{i}"
        refs[f"lib-{i}"] = persona(f"lib-{i}", i, "library")
    parents_of: dict[str, list[str]] = {}
    operator_of: dict[str, str] = {}
    for parent, child, op in _shape(seed):
        parents_of.setdefault(child, []).append(parent)
        operator_of[child] = op
    for n, (child, parents) in enumerate(parents_of.items()):
        lineage = Lineage(
            parents=tuple(refs[p] for p in parents),
            operator=operator_of[child],
            params={"slot": child},  # a unique fusion per agent, as an experiment's seeded choices give
            op_version="1",
        )
        id = real[child] = agent_id_for(lineage.lineage_hash)
        ref = refs[child] = persona(id, n, "agent")
        base = samples[n % len(samples)]
        prompt = render_prompt(base.model_copy(update={"id": id, "name": f"{base.name} {n}"}))
        seal = record_seal(lineage, ref.content_hash, prompt, (), ())
        agents.append(
            (
                id,
                lineage.model_dump_json(),
                lineage.lineage_hash,
                1,
                prompt,
                "[]",
                "[]",
                now,
                json.dumps(seal, sort_keys=True),
            )
        )
        edges.extend((p.id, id, lineage.operator, lineage.op_version, p.version) for p in lineage.parents)
    return {"elixir_versions": elixirs, "agents": agents, "lineage_edges": edges}, real


COLUMNS = {
    "elixir_versions": [
        "id", "version", "origin", "name", "content_hash", "body", "created_at", "deleted_at", "language", "expertise",
        "seal",
    ],
    "agents": [
        "id", "lineage", "lineage_hash", "elixir_version", "system_prompt", "tools", "members", "created_at", "seal",
    ],
    "lineage_edges": ["parent", "child", "operator", "op_version", "parent_version"],
}  # fmt: skip


def _seal(tables: dict[str, list[tuple[Any, ...]]], db: Any) -> None:
    """Add the keyed seals ``save_agent`` writes (with ``db``'s key) to the built rows."""
    from furnace.storage.seals import agent_mac, elixir_seal

    sealer = db.sealer
    tables["elixir_versions"] = [(*r, elixir_seal(sealer, r[0], r[1], r[4])) for r in tables["elixir_versions"]]
    agents = []
    for row in tables["agents"]:
        seal = json.loads(row[8])
        seal["mac"] = agent_mac(sealer, row[0], row[3], seal["record_hash"])
        agents.append((*row[:8], json.dumps(seal, sort_keys=True)))
    tables["agents"] = agents


def load(db: Any, tables: dict[str, list[tuple[Any, ...]]]) -> None:
    """Seal the built rows with ``db``'s key (as ``save_elixir``/``save_agent`` do) and insert them in one
    transaction: the bulk load of a runtime's live store (``runtime.sql``)."""
    from furnace.storage.sql.schema import metadata

    _seal(tables, db)
    with db.transaction() as conn:
        for table, rows in tables.items():
            dicts = [dict(zip(COLUMNS[table], row, strict=True)) for row in rows]
            for d in dicts:
                if "expertise" in d:
                    d["expertise"] = json.dumps(d["expertise"], ensure_ascii=False)  # a JSON list
            for start in range(0, len(dicts), 5000):
                conn.execute(metadata.tables[table].insert(), dicts[start : start + 5000])


def _timed(fn: Any) -> tuple[float, float, Any]:
    """Wall and CPU milliseconds of one call, and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000, result


def run() -> bool:
    """Build the DAG, time the walks, print figures; True when the live store's walk is interactive."""
    from furnace.domain.elixir import parse_elixir
    from furnace.storage.memory import adjacency, bfs

    started = time.perf_counter()
    tables, real = build_records()
    build_s = time.perf_counter() - started
    agents = len(tables["agents"])
    deep = real[f"agt-{EXPERIMENTS - 1:03d}-{GENERATIONS - 1:02d}-00"]
    with stack() as built:  # the home ``furnace lineage`` reads (its live store: the rows are bulk-loaded into it)
        db = built.runtime.sql
        started = time.perf_counter()
        load(db, tables)
        load_s = time.perf_counter() - started
        print(
            f"   built {agents:,} sealed agents / {len(tables['lineage_edges']):,} edges in {build_s:.1f}s,"
            f" loaded into {db.dialect} in {load_s:.2f}s; load average {os.getloadavg()[0]:.1f}"
        )

        store = built.runtime.store
        first_ms, first_cpu, _ = _timed(lambda: store.ancestors(deep))  # a fresh process's first walk
        walk_times, walk_cpu, found = [], [], []
        for _ in range(REPEATS):
            wall, cpu, found = _timed(lambda: store.ancestors(deep))
            walk_times.append(wall)
            walk_cpu.append(cpu)
        verified = sum(1 for n in found if not n.id.startswith("lib-"))
        # walks from other starts in the same epoch: first the walk of each (its agents not met yet verified
        # in full), then again with the remembered walks forgotten (the recursive query, the BFS and the
        # edges into each agent compared: every agent verified already)
        others = [real[f"agt-{EXPERIMENTS - 1:03d}-{GENERATIONS - 1:02d}-{i:02d}"] for i in range(1, 4)]
        other_times = [_timed(lambda other=other: store.ancestors(other))[0] for other in others]
        unremembered = []
        for other in others:
            store._verified._walks.clear()  # type: ignore[attr-defined]
            unremembered.append(_timed(lambda other=other: store.ancestors(other))[0])
        # the recursive query alone, no checks (reference)
        warm_times = [_timed(lambda: store._reachable(deep, up=True))[0] for _ in range(3)]  # type: ignore[attr-defined]
        # a walk after a commit of something else (as while an experiment or the app writes): the lineage
        # tables' stamp does not move, the walk is answered from memory
        after_commit = []
        for n in range(3):
            store.save_elixir(parse_elixir({**BYSTANDER, "identity": f"edit {n}"}))
            after_commit.append(_timed(lambda: store.ancestors(deep))[0])
        # a walk after a lineage commit elsewhere in the DAG (an edge out of a library elixir to a new node, off
        # the walk): the stamp moves, the change log names the edge's ends, neither is a node whose edges into
        # it the walk read: the walk is still answered from memory
        after_lineage = []
        for n in range(3):
            store.add_edge("lib-0", f"bench-late-{n}", operator="mutation")
            after_lineage.append(_timed(lambda: store.ancestors(deep))[0])
        # a walk after a lineage commit on it (a new parent of a library elixir the walk reached): the walk is
        # forgotten and walked again from the remembered edges, its agents still confirmed (none is touched)
        on_walk = next(n.id for n in found if n.id.startswith("lib-"))
        touching = []
        for n in range(3):
            store.add_edge(f"bench-ancient-{n}", on_walk, operator="promote")
            touching.append(_timed(lambda: store.ancestors(deep))[0])

    parents_of = adjacency((c, p, op) for p, c, op, _, _ in tables["lineage_edges"])
    py_times, expected = [], []
    for _ in range(REPEATS):
        wall, _, expected = _timed(lambda: bfs(deep, parents_of))
        py_times.append(wall)

    same = [(n.id, n.depth) for n in found] == [(n.id, n.depth) for n in expected]
    walk_ms, py_ms = statistics.median(walk_times), statistics.median(py_times)
    depth = max((n.depth for n in found), default=0)
    print(
        f"   ancestors of {deep}: {len(found):,} nodes ({verified:,} agents verified), deepest at depth {depth};"
        f" results equal to the BFS: {same}"
    )
    print(
        f"   SQLStore.ancestors on {db.dialect}, the walk remembered while unchanged: median {walk_ms:.1f} ms"
        f" (CPU {statistics.median(walk_cpu):.1f} ms), best {min(walk_times):.1f} ms"
    )
    print(f"   first call of a process (every agent verified in full): {first_ms:.0f} ms (CPU {first_cpu:.0f} ms)")
    print(f"   a walk from another start, its first (new agents verified): {statistics.median(other_times):.0f} ms")
    print(
        f"   a walk not remembered, its agents verified (query, BFS, edges compared): median"
        f" {statistics.median(unremembered):.1f} ms"
    )
    committed, lineage_committed = statistics.median(after_commit), statistics.median(after_lineage)
    print(f"   a walk after another commit (an elixir saved; lineage stamp unchanged): median {committed:.1f} ms")
    print(
        "   a walk after a lineage commit elsewhere (an edge off the walk; the change log says the walk is"
        f" untouched): median {lineage_committed:.1f} ms"
    )
    print(
        "   a walk after a lineage commit on it (a new parent of a library elixir it reached; walked again, no"
        f" agent touched): median {statistics.median(touching):.1f} ms"
    )
    print(f"   the recursive query alone, no checks (reference): median {statistics.median(warm_times):.1f} ms")
    print(f"   Python BFS over in-memory edges:                          median {py_ms:.1f} ms")
    print(
        f"   ratio store / Python BFS: {walk_ms / py_ms:.1f}x   target: store < {TARGET_MS:.0f} ms: "
        + ("met" if same and walk_ms < TARGET_MS else "MISSED")
    )
    record(
        ancestry_ms=round(walk_ms, 2),
        first_call_ms=round(first_ms, 1),
        other_start_ms=round(statistics.median(other_times), 1),
        unremembered_ms=round(statistics.median(unremembered), 1),
        after_commit_ms=round(committed, 2),
        after_lineage_commit_ms=round(lineage_committed, 2),
        after_touching_commit_ms=round(statistics.median(touching), 1),
        agents=agents,
        nodes=len(found),
    )
    return same and walk_ms < TARGET_MS


main = main_for("lineage", run)
