"""Pre-run estimate of model calls, tokens and cost, checked against the budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from furnace.domain.elixir import Elixir
from furnace.evolution.config import ExperimentConfig
from furnace.scoring.fitness import SCORERS
from furnace.scoring.probes import ProbeSet, split_quota

LEADERBOARD = 10  # the members scored on train and test after the search (with every generation's best)

# Rough per-call token sizes for the estimate (prompt + completion).
TOKENS_PER_CALL = 900
FUSE_CALLS = {"crossover": 1.0, "mutation": 1.0, "ensemble": 1.0, "reflect": 1.0}  # one model call per child


@dataclass(frozen=True)
class Estimate:
    """Upper-bound-ish figures for a run from scratch (cached calls cost nothing)."""

    calls: int
    tokens: int
    usd: float
    calls_per_generation: int

    def over_budget(self, config: ExperimentConfig) -> list[str]:
        """Which budget limits the estimate exceeds (empty when within budget)."""
        b, over = config.budget, []
        if b.max_calls is not None and self.calls > b.max_calls:
            over.append(f"{self.calls} calls > budget.max_calls {b.max_calls}")
        if b.max_tokens is not None and self.tokens > b.max_tokens:
            over.append(f"{self.tokens} tokens > budget.max_tokens {b.max_tokens}")
        if b.max_usd is not None and self.usd > b.max_usd:
            over.append(f"${self.usd:.2f} > budget.max_usd ${b.max_usd:.2f}")
        return over


def calls_per_answer(config: ExperimentConfig) -> int:
    """One reply plus one call per judge scorer with a positive weight, for each judge (``judges``: a panel)."""
    judges = max(1, len(config.judges))
    return 1 + judges * sum(SCORERS[s].calls_per_probe for s, w in config.scorers.items() if w > 0)


def estimate(config: ExperimentConfig, probes: ProbeSet | int) -> Estimate:
    """Estimate the calls of a full run on ``probes`` (a set, or a count split by the default ratio):
    every individual answers its validation probes ``samples_per_probe`` times (what selection reads);
    a reflected child and its parent answer the child's minibatch of train probes (an upper bound: a
    parent scored there before is served by the cache); after the search the top ``reevaluate_top``
    answer validation again (fresh samples), and every generation's best and the leaderboard answer
    the train and test probes (the report's figures)."""
    sizes = split_quota(probes) if isinstance(probes, int) else {k: len(p) for k, p in probes.splits().items()}
    validation = sizes["validation"] or sizes["train"]
    answer = calls_per_answer(config) * config.samples_per_probe
    per_individual = validation * answer
    total_w = sum(config.operators.values())
    fuse = sum(FUSE_CALLS[o] * w for o, w in config.operators.items()) / total_w if total_w else 0.0
    # An ensemble child answers probes with its committee prompt: one reply call, like any agent
    # (routing to one member is `furnace agent answer`; experiments do not route yet).
    reflect = config.operators.get("reflect", 0.0) / total_w if total_w else 0.0
    minibatch = reflect * 2 * min(config.minibatch, sizes["train"]) * answer  # the child's and its parent's
    child = fuse + per_individual + minibatch
    per_gen = round(config.children_per_generation * child)
    held_out = config.reevaluate_top * validation * answer
    made = config.population + config.generations * config.children_per_generation
    held_out += min(LEADERBOARD + config.generations + 1, made) * ((sizes["train"] + sizes["test"]) * answer)
    calls = config.population * per_individual + config.generations * per_gen + held_out
    tokens = calls * TOKENS_PER_CALL
    return Estimate(
        calls=calls, tokens=tokens, usd=tokens / 1000 * config.budget.usd_per_1k_tokens, calls_per_generation=per_gen
    )


def fusion_calls(operator: str, parents: Sequence[Elixir], params: dict[str, Any]) -> int:
    """At most how many model calls one fusion makes (what a unit reserves for it: ``engine``): the
    operator's own bound (``max_calls``: a crossover's tied contradictions, a mutation's rewrites)."""
    from furnace.fusion.operators import OPERATORS

    return OPERATORS[operator].max_calls(parents, params)
