"""A panel of judges as the faces show it (``experiment show``, the app's experiment view).

An experiment run with ``judges: [a, b]`` keeps the judges' agreement in its summary
(``judges``: :func:`furnace.evolution.judging.panel_agreement`) and every judge's verdicts in
its score rows; :func:`experiment_judges` reads both back: the agreement with its readings,
and each ranked agent's fitness by judge (recomputed from the stored rows, over the
validation probes fitness reads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from furnace.evolution.judging import fitness_by_judge
from furnace.evolution.records import ExperimentRecord, IndividualRecord
from furnace.scoring.panel import Panel


@dataclass(frozen=True)
class JudgesView:
    """The judges of one experiment, their agreement (as the summary keeps it) and fitness by judge."""

    agreement: dict[str, Any]
    by_agent: dict[str, dict[str, float | None]] = field(default_factory=dict)

    @property
    def judges(self) -> list[str]:
        return list(self.agreement.get("judges") or [])

    def rows(self) -> list[dict[str, Any]]:
        """One row per agent: its fitness by each judge (None: that judge failed on it)."""
        return [{"agent_id": agent, **scores} for agent, scores in self.by_agent.items()]

    def as_dict(self) -> dict[str, Any]:
        return {**self.agreement, "by_agent": self.by_agent}


def experiment_judges(exp: ExperimentRecord, ranked: Sequence[IndividualRecord]) -> JudgesView | None:
    """The panel of ``exp`` and the fitness by judge of its ``ranked`` agents; None for a one-judge
    experiment (or one that has not finished: the agreement is written when it ends)."""
    agreement = dict((exp.summary or {}).get("judges") or {})
    if not agreement.get("judges"):
        return None
    panel = Panel(tuple(agreement["judges"]), agreement.get("fitness_judge"))
    scorers = dict((exp.config or {}).get("scorers") or {})
    splits = ((exp.summary or {}).get("held_out") or {}).get("splits") or {}
    over = tuple(splits["validation"]) if "validation" in splits else None  # as the engine read them
    by_agent = {r.agent_id: fitness_by_judge(r, scorers, panel, over=over) for r in ranked}
    return JudgesView(agreement, by_agent)
