"""Render + hash throughput for 10,000 elixirs, against plain ``json.dumps`` of the same dicts.

Run: ``python -m bench render``. The elixirs are the sample library varied
deterministically (names, tone, an extra principle), so zh and en templates,
few-shots, constraints and preferences are all exercised.

The hash is the one an elixir's ``content_hash`` computes (``compute_content_hash``,
uncached: every pass hashes every elixir again); ``content_key(content())``, the
generic path over the dumped dict (same bytes), is printed for reference. Wall
and CPU time (``time.process_time``) are both printed, with the load average.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

from furnace import resources
from furnace.domain.canonical import content_key
from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.render import render_prompt
from furnace.interop.importers import load_elixir_file

N = 10_000
TARGET_PER_S = 20_000  # render + hash: what a library listing or a large generation should get
LIBRARY = resources.LIBRARY_DIR


def build(n: int = N, seed: int = 0) -> list[Elixir]:
    """``n`` distinct, valid elixirs derived from the sample library."""
    rng = random.Random(seed)
    base = [
        e.model_dump(mode="json", exclude={"content_hash"})
        for p in sorted(LIBRARY.glob("*.yaml"))
        for e in load_elixir_file(p)
    ]
    out = []
    for i in range(n):
        data: dict[str, Any] = json.loads(json.dumps(base[i % len(base)]))
        data["id"] = f"{data['id']}-{i}"
        data["name"] = f"{data['name']} #{i}"
        data["tone"] = {k: round(rng.random(), 3) for k in ("formality", "conciseness", "humor", "empathy")}
        data["principles"] = [*data["principles"], f"Variant rule {i}: keep answer {i % 7 + 1} under control."]
        data["conflicts_with"] = []
        out.append(parse_elixir(data))
    return out


def _best(fn: Any, repeats: int = 3) -> tuple[float, float]:
    """Best wall and best CPU seconds of ``repeats`` runs."""
    walls, cpus = [], []
    for _ in range(repeats):
        started, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def run() -> bool:
    """Print elixirs/s for render+hash, render alone, hash alone, and the json.dumps baseline."""
    started = time.perf_counter()
    elixirs = build()
    build_s = time.perf_counter() - started
    dicts = [e.content() for e in elixirs]

    def render_and_hash() -> None:
        for e in elixirs:
            render_prompt(e)
            e.compute_content_hash()

    def render_only() -> None:
        for e in elixirs:
            render_prompt(e)

    def hash_only() -> None:
        for e in elixirs:
            e.compute_content_hash()

    def generic_hash() -> None:
        for e in elixirs:
            content_key(e.content())

    def baseline() -> None:
        for d in dicts:
            json.dumps(d, sort_keys=True)

    (both, both_cpu), (render_s, _), (hash_s, hash_cpu), (generic_s, generic_cpu), (base_s, _) = (
        _best(f) for f in (render_and_hash, render_only, hash_only, generic_hash, baseline)
    )
    rate = N / both
    print(f"   load average {os.getloadavg()[0]:.1f}")
    print(f"   built+validated {N} elixirs in {build_s:.2f}s ({N / build_s:,.0f}/s)")
    print(
        f"   render + hash : {rate:>10,.0f} elixirs/s  ({both * 1000:.0f} ms; CPU {both_cpu / N * 1e6:.1f} µs/elixir)"
    )
    print(f"   render only   : {N / render_s:>10,.0f} elixirs/s")
    print(f"   hash only     : {N / hash_s:>10,.0f} elixirs/s  (CPU {hash_cpu / N * 1e6:.1f} µs/elixir)")
    print(
        f"   content_key(content()): {N / generic_s:>10,.0f} elixirs/s  (CPU {generic_cpu / N * 1e6:.1f} µs/elixir;"
        " generic path, same hashes)"
    )
    print(f"   json.dumps    : {N / base_s:>10,.0f} dicts/s   (baseline, same content)")
    print(
        f"   ratio render+hash / json.dumps time: {both / base_s:.1f}x; target ≥ {TARGET_PER_S:,} elixirs/s: "
        + ("met" if rate >= TARGET_PER_S else "MISSED")
    )
    return rate >= TARGET_PER_S


if __name__ == "__main__":
    raise SystemExit(0 if run() else 1)
