"""Overhead of paired measurements: each round (or turn) against its own baseline, made right after it."""

from __future__ import annotations

import statistics


def overheads(rounds: list[float], bases: list[float]) -> tuple[float, float, float]:
    """(median, 90th percentile, whole run) of the rounds' overhead over their own baselines."""
    each = sorted((r - b) / b for r, b in zip(rounds, bases, strict=True))
    whole = (sum(rounds) - sum(bases)) / sum(bases)
    return statistics.median(each), each[min(len(each) - 1, int(0.9 * len(each)))], whole
