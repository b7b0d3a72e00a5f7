"""Every app page rendered (AppTest) with 1,000 personas and 10,000 lineage edges in the store.

The runtime's live store is filled in bulk (the rows inserted in one transaction, shaped and sealed
exactly as ``save_elixir`` / ``save_agent`` write them: :func:`bench.bench_lineage.load`), not by
thousands of ``save_*`` calls: 1,000 library personas (the 13 sample elixirs
under new ids) and 5,000 agents over 25 generations, each made from two parents
of the generation before (the first from the library) -- 10,000 edges. Each
page is timed as one ``AppTest`` run after a warm-up run of the whole app
(imports and the cached services are paid once, as in a live server). The
baseline, measured in the same run, is the personas page on the 13-persona
sample library. Target: every page under 1 s.
"""

from __future__ import annotations

import json
import logging
import os
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.bench_lineage import load
from bench.stack import main_for
from furnace import resources

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "app" / "streamlit_app.py"
PERSONAS = 1_000
GENERATIONS, PER_GENERATION = 25, 200  # 5,000 agents x 2 parents = 10,000 edges
TARGET_S = 1.0  # the slowest page measured ~450 ms; a page should feel instant
REPEATS = 3
PAGES = ["personas", "furnace", "revision", "lineage", "compare", "arena", "assistant"]


def _row(elixir: Any, origin: str, body: str, now: datetime) -> tuple:
    """An ``elixir_versions`` row (its seal added on load)."""
    e = elixir
    return (e.id, 1, origin, e.name, e.content_hash, body, now, None, e.language, list(e.expertise))


def _rows(seed: int = 0) -> tuple[list[tuple], list[tuple], list[tuple], str]:
    """(elixir rows, agent rows, edge rows, a mid-DAG agent id), in :data:`bench.bench_lineage.COLUMNS`' shape
    (seals added by :func:`bench.bench_lineage.load`)."""
    from furnace.domain.agent import agent_id_for, record_seal
    from furnace.domain.elixir import ElixirRef, parse_elixir
    from furnace.domain.lineage import Lineage
    from furnace.interop.importers import load_elixir_file
    from furnace.storage.store import as_stored

    rng = random.Random(seed)
    now = datetime.now(UTC).replace(tzinfo=None)
    samples = [e for p in sorted(resources.LIBRARY_DIR.glob("*.yaml")) for e in load_elixir_file(p)]
    exclude = {"id", "version", "created_at", "deleted_at", "content_hash"}
    elixirs, agents, edges = [], [], []
    library: list[ElixirRef] = []
    for i in range(PERSONAS):
        base = samples[i % len(samples)]
        data = base.model_dump(mode="json", exclude={"content_hash"})
        data.update(id=f"{base.id}-{i:04d}", name=f"{base.name} #{i}")
        stored = as_stored(parse_elixir(data), version=1, created_at=now)
        body = json.dumps(stored.model_dump(mode="json", exclude=exclude), ensure_ascii=False, sort_keys=True)
        elixirs.append(_row(stored, "library", body, now))
        library.append(stored.ref)
    previous: list[ElixirRef] = []
    middle = ""
    for g in range(GENERATIONS):
        current = []
        for j in range(PER_GENERATION):
            first = rng.choice(previous) if previous else rng.choice(library)
            second = rng.choice(library)
            lineage = Lineage(
                parents=(first, second),
                operator="crossover" if j % 3 else "ensemble",
                params={"seed": g * PER_GENERATION + j},
                op_version="1",
            )
            agent_id = agent_id_for(lineage.lineage_hash)
            child_data = json.loads(elixirs[library.index(second)][5])
            child_data.update(id=agent_id, name=f"gen {g} child {j}")
            child = as_stored(parse_elixir(child_data), version=1, created_at=now)
            body = json.dumps(child.model_dump(mode="json", exclude=exclude), ensure_ascii=False, sort_keys=True)
            elixirs.append(_row(child, "agent", body, now))
            prompt = f"prompt of {agent_id}"
            seal = json.dumps(record_seal(lineage, child.content_hash, prompt, (), ()), sort_keys=True)
            agents.append((agent_id, lineage.model_dump_json(), lineage.lineage_hash, 1, prompt, "[]", "[]", now, seal))
            edges.extend((p.id, agent_id, lineage.operator, "1", p.version) for p in lineage.parents)
            current.append(child.ref)
        if g == GENERATIONS // 2:
            middle = current[0].id
        previous = current
    return elixirs, agents, edges, middle


def _bulk(home: Path) -> tuple[int, int, str]:
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    elixirs, agents, edges, middle = _rows()
    runtime = Runtime(FurnaceSettings(home=home))
    try:
        load(runtime.sql, {"elixir_versions": elixirs, "agents": agents, "lineage_edges": edges})
    finally:
        runtime.close()
    return PERSONAS, len(edges), middle


def _time_pages(home: Path, picks: dict[str, object]) -> dict[str, float]:
    from streamlit.testing.v1 import AppTest

    os.environ["FURNACE_HOME"] = str(home)
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()  # warm-up: imports, cached services, the store's first reads
    for page in PAGES[1:]:
        at.switch_page(f"screens/{page}.py").run()
    times: dict[str, list[float]] = {p: [] for p in PAGES}
    for _ in range(REPEATS):
        for page in PAGES:
            for key, value in picks.items():
                at.session_state[key] = value
            at.switch_page(f"screens/{page}.py")
            started = time.perf_counter()
            at.run()
            times[page].append(time.perf_counter() - started)
            if at.exception:
                raise RuntimeError(f"{page}: {at.exception[0].value}")
    return {p: statistics.median(v) for p, v in times.items()}


def run() -> bool:
    """Fill a home in bulk, time every page; True when each renders under 2 s."""
    from furnace import offline_env

    offline_env.apply()
    os.environ.setdefault("FURNACE_EMBEDDER", "hash")
    os.environ["FURNACE_DEBUG"] = "1"  # a page that fails raises (and the run stops), never timed as an error message
    # AppTest runs pages outside a server; Streamlit warns about that on every run.
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("streamlit"):
            logging.getLogger(name).setLevel(logging.ERROR)
    old_home = os.environ.get("FURNACE_HOME")
    try:
        with tempfile.TemporaryDirectory(prefix="furnace-bench-app-") as tmp:
            small = Path(tmp) / "small"
            small.mkdir()
            from furnace.interop.importers import import_library
            from furnace.runtime import Runtime
            from furnace.settings import FurnaceSettings

            import_library(resources.LIBRARY_DIR, Runtime(FurnaceSettings(home=small)).store)
            baseline = _time_pages(small, {})["personas"]

            big = Path(tmp) / "big"
            big.mkdir()
            started = time.perf_counter()
            personas, edges, middle = _bulk(big)
            print(
                f"   bulk-loaded {personas:,} personas, {GENERATIONS * PER_GENERATION:,} agents, {edges:,} edges "
                f"in {time.perf_counter() - started:.1f}s"
            )
            figures = _time_pages(big, {"lineage_pick": middle})
    finally:
        if old_home is None:
            os.environ.pop("FURNACE_HOME", None)
        else:
            os.environ["FURNACE_HOME"] = old_home
    print(f"   baseline: personas page on the 13-persona sample library {baseline * 1000:.0f} ms")
    for page, seconds in figures.items():
        mark = "ok" if seconds < TARGET_S else "SLOW"
        print(f"   {page:<10} {seconds * 1000:7.0f} ms  ({seconds / baseline:4.1f}x baseline)  {mark}")
    print(f"   target: every page < {TARGET_S:.1f} s (median of {REPEATS} AppTest runs; lineage page on {middle})")
    return all(s < TARGET_S for s in figures.values())


main = main_for("app", run)
