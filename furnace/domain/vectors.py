"""Vector arithmetic shared by every layer that compares embeddings (fusion, the arena's ranking)."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0.0 when either is all zeros)."""
    if len(a) != len(b):
        raise ValueError(f"vectors differ in length ({len(a)} vs {len(b)})")
    dot: float = sum(map(operator.mul, a, b))
    na = math.sqrt(sum(map(operator.mul, a, a)))
    nb = math.sqrt(sum(map(operator.mul, b, b)))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return max(-1.0, min(1.0, dot / (na * nb)))
