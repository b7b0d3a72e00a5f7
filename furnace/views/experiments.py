"""Experiments over generations: fitness, cost, operator success and judge feedback, as table rows.

Reads :class:`furnace.evolution.records.ExperimentResults` (DuckDB in the app);
MLflow figures are merged in by the page when a run exists.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from furnace.evolution.records import ExperimentResults, IndividualRecord


def generation_rows(results: ExperimentResults, experiment_id: str) -> list[dict[str, Any]]:
    """One row per finished generation: best/mean fitness, calls, cached calls, tokens, cost."""
    return [
        {
            "generation": g.generation,
            "best_fitness": round(g.best_fitness, 4),
            "mean_fitness": round(g.mean_fitness, 4),
            "calls": g.calls,
            "cached_calls": g.cached_calls,
            "tokens": g.tokens,
            "cost_usd": round(g.cost_usd, 6),
            **{f"weight:{k}": round(v, 3) for k, v in sorted(g.operator_weights.items())},
        }
        for g in results.generations(experiment_id)
    ]


def operator_rows(results: ExperimentResults, experiment_id: str) -> list[dict[str, Any]]:
    """Per operator and generation: children made and how many beat their fittest parent."""
    everyone = results.individuals(experiment_id)
    fitness: dict[str, float] = {}
    for r in sorted(everyone, key=lambda r: r.generation):
        fitness.setdefault(r.agent_id, r.fitness)
    stats: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    seen: set[str] = set()
    for r in sorted(everyone, key=lambda r: (r.generation, r.slot)):
        if not r.parents or r.agent_id in seen:
            continue
        seen.add(r.agent_id)
        best_parent = max((fitness.get(p, 0.0) for p in r.parents), default=0.0)
        cell = stats[(r.generation, r.operator)]
        cell[0] += 1
        cell[1] += int(r.fitness > best_parent)
    return [
        {
            "generation": gen,
            "operator": op,
            "children": made,
            "fitter_than_parents": won,
            "success_rate": round(won / made, 3) if made else 0.0,
        }
        for (gen, op), (made, won) in sorted(stats.items())
    ]


def leaderboard_rows(results: ExperimentResults, experiment_id: str, limit: int = 10) -> list[dict[str, Any]]:
    """The fittest distinct agents of an experiment."""
    best: dict[str, Any] = {}
    for r in results.individuals(experiment_id):
        if r.agent_id not in best or r.fitness > best[r.agent_id].fitness:
            best[r.agent_id] = r
    ranked = sorted(best.values(), key=lambda r: (-r.fitness, r.agent_id))[:limit]
    return [
        {
            "agent_id": r.agent_id,
            "generation": r.generation,
            "operator": r.operator,
            "fitness": round(r.fitness, 4),
            **{k: round(v, 3) for k, v in sorted(r.objectives.items())},
        }
        for r in ranked
    ]


def feedback_rows(record: IndividualRecord) -> list[dict[str, Any]]:
    """The judge's feedback stored for one individual: one row per probe and scorer that has some,
    weakest first (what was missing or wrong; the score's evidence is its ``reason``)."""
    rows = [s for s in record.scores if s.feedback]
    return [
        {"probe": s.probe, "scorer": s.scorer, "value": round(s.value, 4), "feedback": s.feedback}
        for s in sorted(rows, key=lambda s: (s.value, s.probe, s.scorer))
    ]


def agent_feedback(results: ExperimentResults, experiment_id: str, agent_id: str) -> list[dict[str, Any]]:
    """:func:`feedback_rows` of ``agent_id``'s first scoring in the experiment (a survivor is not judged again)."""
    mine = sorted((r for r in results.individuals(experiment_id) if r.agent_id == agent_id), key=lambda r: r.generation)
    return feedback_rows(mine[0]) if mine else []
