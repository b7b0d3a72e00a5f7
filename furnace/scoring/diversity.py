"""Diversity: embedding distance of an agent to the rest of the population."""

from __future__ import annotations

import operator
from collections.abc import Sequence

from furnace.scoring.base import Score


def _norm(a: Sequence[float]) -> float:
    return float(sum(map(operator.mul, a, a)) ** 0.5)


def _cosine(a: Sequence[float], b: Sequence[float], na: float | None = None) -> float:
    """Cosine similarity; ``na``: the norm of ``a`` when the caller has it. The sums run left to right
    over the products, exactly as a generator would (same value to the last bit)."""
    dot = sum(map(operator.mul, a, b))  # stops at the shorter vector, like zip
    na = _norm(a) if na is None else na
    nb = _norm(b)
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def diversity(vector: Sequence[float], others: Sequence[Sequence[float]]) -> Score:
    """1 − mean cosine similarity to ``others`` (clamped to [0, 1]); 1 when alone."""
    if not others:
        return Score(1.0, "no other members to compare with")
    na = _norm(vector)
    sims = [_cosine(vector, o, na) for o in others]
    mean = sum(sims) / len(sims)
    return Score(
        round(min(1.0, max(0.0, 1.0 - mean)), 6),
        f"mean similarity {mean:.2f} to {len(sims)} members (closest {max(sims):.2f})",
    )
