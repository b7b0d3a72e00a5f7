"""Diversity: embedding distance of an agent to the rest of the population."""

from __future__ import annotations

from collections.abc import Sequence

from furnace.scoring.base import Score


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = sum(x * x for x in a) ** 0.5
    nb = sum(y * y for y in b) ** 0.5
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def diversity(vector: Sequence[float], others: Sequence[Sequence[float]]) -> Score:
    """1 − mean cosine similarity to ``others`` (clamped to [0, 1]); 1 when alone."""
    if not others:
        return Score(1.0, "no other members to compare with")
    sims = [_cosine(vector, o) for o in others]
    mean = sum(sims) / len(sims)
    return Score(
        round(min(1.0, max(0.0, 1.0 - mean)), 6),
        f"mean similarity {mean:.2f} to {len(sims)} members (closest {max(sims):.2f})",
    )
