"""How far judges agree with each other and with people: the statistics and their plain readings.

Pure Python, no I/O. Every figure returns ``None`` (never 0) when there is too
little data to compute it, and each has a reading in words:

- :func:`spearman` — rank correlation of two judges' fitness over the same agents
  (average ranks for ties);
- :func:`krippendorff_alpha` — Krippendorff's alpha with the interval metric over
  (agent, probe) scores by several judges, missing values allowed;
- :func:`wilson_interval` and :func:`share_of_agreement` — the share of people's
  picks a judge agrees with, with a Wilson score interval;
- :func:`bradley_terry` — strengths fitted from pairwise picks (a tie is half a
  win each); an agent never picked has no strength (absent, never 0).

Below :data:`MIN_PICKS` decided picks a judge's agreement with people "is not yet
meaningful" (docs/evaluation.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

MIN_PICKS = 20
"""Decided picks (not ties) below which a judge's agreement with people is not yet meaningful: with 20
picks the 95% interval of a share near 0.7 is still about ±0.2 wide."""

MIN_AGENTS = 3  # Spearman over fewer agents says nothing


def _average_ranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n of ``values``, ties sharing the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None  # one judge gave every agent the same value: no ranking to compare
    return sxy / math.sqrt(sxx * syy)


def spearman(a: Mapping[str, float], b: Mapping[str, float]) -> float | None:
    """Spearman's rank correlation between two judges' values over the agents both scored
    (None below :data:`MIN_AGENTS` common agents, or when one judge ranks them all equal)."""
    common = sorted(set(a) & set(b))
    if len(common) < MIN_AGENTS:
        return None
    return _pearson(_average_ranks([a[k] for k in common]), _average_ranks([b[k] for k in common]))


def krippendorff_alpha(units: Mapping[Any, Mapping[str, float | None]]) -> float | None:
    """Krippendorff's alpha, interval metric: ``units`` maps a unit (an (agent, probe) pair) to each
    judge's value for it; a missing judge or a ``None`` value is missing data. Only units with at least
    two values count. 1 = perfect agreement, 0 = no better than chance, below 0 = systematic
    disagreement; None when fewer than two pairable values exist or every value is the same."""
    pairable = [[v for v in unit.values() if v is not None] for unit in units.values()]
    pairable = [values for values in pairable if len(values) >= 2]
    n = sum(len(values) for values in pairable)
    if n < 2:
        return None
    observed = 0.0
    for values in pairable:
        within = sum((x - y) ** 2 for i, x in enumerate(values) for j, y in enumerate(values) if i != j)
        observed += within / (len(values) - 1)
    observed /= n
    everything = [v for values in pairable for v in values]
    mean = sum(everything) / n
    # sum over ordered pairs i != j of (x_i - x_j)^2 = 2 n sum (x - mean)^2
    expected = 2 * n * sum((v - mean) ** 2 for v in everything) / (n * (n - 1))
    if expected == 0:
        return None
    return 1 - observed / expected


def wilson_interval(successes: float, n: float, *, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval (95% by default) for a share of ``successes`` in ``n`` (None for n=0)."""
    if n <= 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


Choice = Literal["A", "B", "tie"]


@dataclass(frozen=True)
class Agreement:
    """A judge's agreement with people over picked pairs.

    ``share``: the share of decided picks (a person chose A or B) where the judge prefers the same
    candidate; a judge that scores the two equal counts half. ``picks``: decided picks compared;
    ``ties``: picks where the person called a tie (not in the share); ``unjudged``: picks the judge
    has no score for (left out)."""

    judge: str
    share: float | None
    interval: tuple[float, float] | None
    picks: int
    ties: int
    unjudged: int

    @property
    def meaningful(self) -> bool:
        return self.picks >= MIN_PICKS

    def reading(self) -> str:
        """The figure in words, saying when it is not yet meaningful."""
        if self.share is None or self.interval is None:
            return f"{self.judge}: no decided picks to compare yet"
        low, high = self.interval
        share = f"{self.share:.0%} of {self.picks} picks"
        text = f"{self.judge} agrees with people on {share} (95% CI {low:.2f}–{high:.2f})"
        if not self.meaningful:
            return f"{text}; not yet meaningful: fewer than {MIN_PICKS} decided picks"
        if low > 0.5:
            return f"{text}; better than a coin toss"
        return f"{text}; not distinguishable from a coin toss"


def share_of_agreement(
    judge: str,
    picks: Iterable[tuple[Choice, float | None, float | None]],
) -> Agreement:
    """Agreement of one judge with people: each pick is (the person's choice, the judge's score of the
    candidate shown as A, of the one shown as B); a ``None`` score means the judge did not score it."""
    agreed = 0.0
    decided = ties = unjudged = 0
    for choice, score_a, score_b in picks:
        if choice == "tie":
            ties += 1
            continue
        if score_a is None or score_b is None:
            unjudged += 1
            continue
        decided += 1
        if score_a == score_b:
            agreed += 0.5
        elif (score_a > score_b) == (choice == "A"):
            agreed += 1
    share = agreed / decided if decided else None
    return Agreement(judge, share, wilson_interval(agreed, decided), decided, ties, unjudged)


def bradley_terry(
    outcomes: Iterable[tuple[str, str, float]],
    *,
    prior: float = 0.5,
    iterations: int = 500,
    tolerance: float = 1e-10,
) -> dict[str, float]:
    """Bradley–Terry strengths from pairwise outcomes ``(a, b, result)`` where ``result`` is 1 when a
    won, 0 when b won and 0.5 for a tie (half a win each). Fitted by the minorise-maximise iteration;
    ``prior`` adds that many virtual ties of every agent with an average agent (strength 1), so an
    agent that won or lost every pick still gets a finite strength (and the scale is anchored).
    Returns, for each agent that appears in an outcome, the probability that it beats an average
    agent (strength / (strength + 1), the strengths scaled to a geometric mean of 1). Agents that
    were never picked are absent."""
    if prior <= 0:
        raise ValueError("prior must be > 0 (an unbeaten agent would have an infinite strength)")
    wins: dict[str, float] = {}
    games: dict[tuple[str, str], float] = {}
    for a, b, result in outcomes:
        if a == b:
            continue
        if not 0.0 <= result <= 1.0:
            raise ValueError(f"a result is 1, 0 or 0.5, got {result}")
        wins[a] = wins.get(a, 0.0) + result
        wins[b] = wins.get(b, 0.0) + 1.0 - result
        key = (a, b) if a < b else (b, a)
        games[key] = games.get(key, 0.0) + 1.0
    agents = sorted(wins)
    if not agents:
        return {}
    opponents: dict[str, list[tuple[str, float]]] = {k: [] for k in agents}
    for (a, b), count in games.items():
        opponents[a].append((b, count))
        opponents[b].append((a, count))
    strength = dict.fromkeys(agents, 1.0)
    for _ in range(iterations):
        new = {}
        for agent in agents:
            denominator = sum(n / (strength[agent] + strength[o]) for o, n in opponents[agent])
            denominator += 2 * prior / (strength[agent] + 1.0)  # the virtual games with an average agent
            new[agent] = (wins[agent] + prior) / denominator
        change = max(abs(math.log(new[k]) - math.log(strength[k])) for k in agents)
        strength = new
        if change < tolerance:
            break
    return {k: v / (v + 1.0) for k, v in _unit_mean(strength).items()}


def _unit_mean(strength: dict[str, float]) -> dict[str, float]:
    scale = math.exp(sum(math.log(v) for v in strength.values()) / len(strength))
    return {k: v / scale for k, v in strength.items()}


def _reading(value: float | None, good: float, fair: float, texts: tuple[str, str, str, str]) -> str:
    """``texts`` (not computed, good, fair, poor) for ``value`` against the ``good`` and ``fair`` lines."""
    missing, well, moderately, poorly = texts
    if value is None:
        return missing
    return (well if value >= good else moderately if value >= fair else poorly).format(value)


def read_spearman(rho: float | None, *, who: str = "the judges") -> str:
    """Spearman's rho in words (0.8 and 0.5 are the lines); ``who``: the two rankings compared."""
    return _reading(
        rho,
        0.8,
        0.5,
        (
            f"rank agreement not computed: fewer than {MIN_AGENTS} agents ranked by both, or no spread",
            who + " rank the agents alike (Spearman {:.2f})",
            who + " rank the agents moderately alike (Spearman {:.2f}): trust only large differences",
            who + " agree poorly (Spearman {:.2f}): rankings below 0.5 should not be trusted",
        ),
    )


def read_alpha(alpha: float | None) -> str:
    """Krippendorff's alpha in words (Krippendorff's own lines: 0.8 reliable, 0.667 tentative)."""
    return _reading(
        alpha,
        0.8,
        0.667,
        (
            "score agreement not computed: no (agent, probe) scored by two judges, or no spread",
            "the judges' scores agree (Krippendorff's alpha {:.2f})",
            "the judges' scores agree moderately (alpha {:.2f}): tentative conclusions only",
            "the judges' scores agree poorly (alpha {:.2f}): scores below 0.667 should not be trusted",
        ),
    )
