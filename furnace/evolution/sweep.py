"""Mutation sweep: one base elixir × a grid of rates × seeds, each variant scored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from furnace.domain.elixir import Elixir
from furnace.domain.render import render_prompt
from furnace.evolution.engine import Breeder
from furnace.evolution.evaluate import evaluate_agent
from furnace.llm.seam import LLM
from furnace.scoring.probes import ProbeSet

DEFAULT_SCORERS = {"constraints": 0.3, "fidelity": 0.3, "tone": 0.2, "brief_fit": 0.2}


def sweep_variant(
    base: Elixir, rate: float, seed: int, *, breeder: Breeder, llm: LLM, probes: ProbeSet, scorers: Mapping[str, float]
) -> dict[str, Any]:
    """One cell of the grid: mutate ``base`` at ``rate`` with ``seed`` and score the child."""
    bred = breeder([base.ref], "mutation", seed, {"rate": rate}, llm)
    ev = evaluate_agent(llm, bred.elixir, bred.system_prompt, probes, scorers, seed=seed)
    return {
        "rate": rate,
        "seed": seed,
        "agent_id": bred.agent_id,
        "lineage_hash": bred.lineage_hash,
        "fitness": ev.fitness,
        "objectives": ev.objectives,
        "failures": len(ev.failure_reasons),
    }


def mutation_sweep(
    base: Elixir,
    rates: Sequence[float],
    seeds: Sequence[int],
    *,
    breeder: Breeder,
    llm: LLM,
    probes: ProbeSet,
    scorers: Mapping[str, float] | None = None,
    concurrency: int = 4,
) -> list[dict[str, Any]]:
    """Every (rate, seed) variant of ``base`` scored on ``probes``; the base itself first (rate 0)."""
    scorers = scorers or DEFAULT_SCORERS
    base_ev = evaluate_agent(llm, base, render_prompt(base), probes, scorers, seed=0)
    rows = [
        {
            "rate": 0.0,
            "seed": 0,
            "agent_id": base.id,
            "lineage_hash": None,
            "fitness": base_ev.fitness,
            "objectives": base_ev.objectives,
            "failures": len(base_ev.failure_reasons),
        }
    ]
    grid = [(r, s) for r in rates for s in seeds]
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        rows += list(
            pool.map(
                lambda rs: sweep_variant(base, rs[0], rs[1], breeder=breeder, llm=llm, probes=probes, scorers=scorers),
                grid,
            )
        )
    return rows
