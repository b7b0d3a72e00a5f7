"""Diversity: embedding distance of an agent to the rest of the population.

One matrix product per member (numpy): a member's similarities to a population of 256 cost tens of
microseconds, where a Python loop over every peer's vector cost milliseconds and grew with the
population. The sums are numpy's (pairwise, vectorised), so a similarity may differ from a left-to-right
Python sum in its last bits; the score is rounded to 6 decimals.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from furnace.scoring.base import Score

Vector = Sequence[float] | np.ndarray


def _rows(vector: Vector, others: Sequence[Vector]) -> tuple[np.ndarray, np.ndarray]:
    """``vector`` and ``others`` as float arrays of one width: a shorter one is padded with zeros, which
    changes neither its norm nor a dot product (a dot product then runs over the shorter vector, like zip)."""
    own = np.asarray(vector, dtype=float)
    width = max(own.shape[0], *(len(o) for o in others))
    if all(len(o) == width for o in others):
        matrix = np.asarray(others, dtype=float)  # one C-level copy (a stack when the rows are arrays)
    else:
        matrix = np.zeros((len(others), width))
        for i, o in enumerate(others):
            matrix[i, : len(o)] = o
    if own.shape[0] < width:
        own = np.concatenate([own, np.zeros(width - own.shape[0])])
    return own, matrix


def similarities(vector: Vector, others: Sequence[Vector]) -> np.ndarray:
    """Cosine similarity of ``vector`` to each of ``others`` (0 where either has no length)."""
    own, matrix = _rows(vector, others)
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix)) * float(np.sqrt(own @ own))
    dots = matrix @ own
    out = np.zeros(len(others))
    np.divide(dots, norms, out=out, where=norms != 0)
    return out


def diversity(vector: Vector, others: Sequence[Vector]) -> Score:
    """1 − mean cosine similarity to ``others`` (clamped to [0, 1]); 1 when alone."""
    if len(others) == 0:
        return Score(1.0, "no other members to compare with")
    sims = similarities(vector, others)
    mean = float(sims.sum()) / len(sims)
    return Score(
        round(min(1.0, max(0.0, 1.0 - mean)), 6),
        f"mean similarity {mean:.2f} to {len(sims)} members (closest {float(sims.max()):.2f})",
    )
