"""Fusion operators: ``OPERATORS`` maps each name to its operator.

Every operator has a ``name`` and an ``op_version``; bumping the version
changes every lineage hash it produces, which invalidates its cached syntheses.
"""

from __future__ import annotations

from furnace.fusion.operators.base import Operator, OperatorContext, OperatorResult
from furnace.fusion.operators.crossover import Crossover
from furnace.fusion.operators.ensemble import Ensemble, expertise_distance, route
from furnace.fusion.operators.mutation import Mutation
from furnace.fusion.operators.reflect import Reflect

OPERATORS: dict[str, Operator] = {op.name: op for op in (Crossover(), Mutation(), Ensemble(), Reflect())}

__all__ = [
    "OPERATORS",
    "Crossover",
    "Ensemble",
    "Mutation",
    "Operator",
    "OperatorContext",
    "OperatorResult",
    "Reflect",
    "expertise_distance",
    "route",
]
