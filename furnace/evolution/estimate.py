"""Pre-run estimate of model calls, tokens and cost, checked against the budget."""

from __future__ import annotations

from dataclasses import dataclass

from furnace.evolution.config import ExperimentConfig
from furnace.scoring.fitness import SCORERS

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
    """One reply plus one call per judge scorer with a positive weight."""
    return 1 + sum(SCORERS[s].calls_per_probe for s, w in config.scorers.items() if w > 0)


def estimate(config: ExperimentConfig, n_probes: int) -> Estimate:
    """Estimate the calls of a full run with ``n_probes`` probes per individual."""
    per_individual = n_probes * calls_per_answer(config)
    total_w = sum(config.operators.values())
    fuse = sum(FUSE_CALLS[o] * w for o, w in config.operators.items()) / total_w if total_w else 0.0
    # An ensemble child answers probes with its committee prompt: one reply call, like any agent
    # (routing to one member is `furnace agent answer`; experiments do not route yet).
    child = fuse + per_individual
    per_gen = round(config.children_per_generation * child)
    calls = config.population * per_individual + config.generations * per_gen
    tokens = calls * TOKENS_PER_CALL
    return Estimate(
        calls=calls, tokens=tokens, usd=tokens / 1000 * config.budget.usd_per_1k_tokens, calls_per_generation=per_gen
    )
