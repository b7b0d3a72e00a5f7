"""Diversity: embedding distance of an agent to the rest of the population.

A member's diversity is 1 − its mean cosine similarity to the other members. A run keeps its agents'
embeddings in :class:`Embeddings`: the rows of one matrix, each row's norm computed once when it is
added, so a member's similarities to a population of 256 are one gather and one matrix–vector product
(tens of microseconds); :func:`diversity` computes the same figures from plain vectors. The sums are
numpy's (vectorised), so a similarity may differ from a left-to-right Python sum in its last bits; the
score is rounded to 6 decimals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from furnace.scoring.base import Score

Vector = Sequence[float] | np.ndarray


def _row_norms(matrix: np.ndarray) -> np.ndarray:
    """Each row's length (numpy computes a row's the same whether it is alone or among others)."""
    norms: np.ndarray = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    return norms


def _scored(own: np.ndarray, rows: np.ndarray, row_norms: np.ndarray) -> Score:
    """The score of ``own`` against ``rows`` (of ``own``'s width) with their norms ``row_norms``."""
    count = rows.shape[0]
    if count == 0:
        return Score(1.0, "no other members to compare with")
    norms = row_norms * float(np.sqrt(own @ own))
    dots = rows @ own
    sims = np.zeros(count)
    np.divide(dots, norms, out=sims, where=norms != 0)  # 0 where either has no length
    mean = float(sims.sum()) / count
    return Score(
        round(min(1.0, max(0.0, 1.0 - mean)), 6),
        f"mean similarity {mean:.2f} to {count} members (closest {float(sims.max()):.2f})",
    )


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


def diversity(vector: Vector, others: Sequence[Vector]) -> Score:
    """1 − mean cosine similarity to ``others`` (clamped to [0, 1]); 1 when alone."""
    if len(others) == 0:
        return Score(1.0, "no other members to compare with")
    own, matrix = _rows(vector, others)
    return _scored(own, matrix, _row_norms(matrix))


class Embeddings:
    """Embeddings by key (a run's agents) as the rows of one matrix, with each row's norm computed once.

    :meth:`diversity` gives the figures :func:`diversity` gives for the same vectors (to the last bit).
    Rows are added by one thread at a time (the caller's lock) and read by any thread without a lock: a
    row and its norm are in place before its key is published, and a reader takes the arrays after the
    keys it looked up (a grown copy holds every row published before it replaced the old one)."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self._arrays: tuple[np.ndarray, np.ndarray] = (np.zeros((0, 0)), np.zeros(0))  # rows, norms

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def add(self, key: str, vector: Vector) -> None:
        """Keep ``vector`` as ``key``'s row (a key added before keeps its first row). Under the caller's lock."""
        if key in self._index:
            return
        row = np.asarray(vector, dtype=float)
        matrix, norms = self._arrays
        count = len(self._index)
        width = max(matrix.shape[1], row.shape[0])
        if count == matrix.shape[0] or width > matrix.shape[1]:  # full or too narrow: a grown copy
            grown = np.zeros((max(16, 2 * count) if count == matrix.shape[0] else matrix.shape[0], width))
            grown[:count, : matrix.shape[1]] = matrix[:count]
            more = np.zeros(grown.shape[0])
            more[:count] = norms[:count]
            matrix, norms = grown, more
        matrix[count, :] = 0.0
        matrix[count, : row.shape[0]] = row
        norms[count] = _row_norms(matrix[count : count + 1])[0]
        self._arrays = (matrix, norms)
        self._index[key] = count  # published last

    def diversity(self, key: str, peers: Iterable[str]) -> Score:
        """``key``'s diversity to the ``peers`` added (itself and keys never added left out)."""
        index = self._index
        own = index.get(key)
        if own is None:
            return Score.failure("no embedding")
        rows = np.array([i for peer in peers if peer != key and (i := index.get(peer)) is not None], dtype=np.intp)
        matrix, norms = self._arrays
        return _scored(matrix[own], matrix.take(rows, axis=0), norms.take(rows))
