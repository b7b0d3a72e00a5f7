"""Scoring: probe sets, scorers returning :class:`Score`, fitness and the Pareto front.

Scorers never raise for one bad answer or judge call: they return a failure
score (value 0) whose reason says what went wrong.

- :mod:`furnace.scoring.probes` — probe sets (``furnace/resources/probes/*.yaml``) and target briefs;
- :mod:`furnace.scoring.rules` — constraint compliance (pure rules);
- :mod:`furnace.scoring.judge` — persona fidelity, preference adherence, tone match (JUDGE task);
- :mod:`furnace.scoring.brief` — brief fit (structural distance, no model);
- :mod:`furnace.scoring.diversity` — embedding distance to the population (not re-exported here: it
  imports numpy, which a command that scores no diversity never loads);
- :mod:`furnace.scoring.fitness` — registry, weighted fitness and the Pareto front.
"""

from __future__ import annotations

from furnace.scoring.base import Score
from furnace.scoring.brief import Brief, brief_fit
from furnace.scoring.fitness import SCORERS, ScorerSpec, pareto_front, weighted_fitness
from furnace.scoring.judge import judge_answer
from furnace.scoring.probes import Probe, ProbeSet, load_probe_set
from furnace.scoring.rules import constraint_compliance

__all__ = [
    "SCORERS",
    "Brief",
    "Probe",
    "ProbeSet",
    "Score",
    "ScorerSpec",
    "brief_fit",
    "constraint_compliance",
    "judge_answer",
    "load_probe_set",
    "pareto_front",
    "weighted_fitness",
]
