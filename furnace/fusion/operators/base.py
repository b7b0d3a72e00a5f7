"""What every operator shares: the protocol, its context and result, and helpers.

An operator is a thin composer over pure prompt builders/parsers
(:mod:`furnace.fusion.operators.prompts`) and field-by-field rules. It never touches a
store or the environment: parents, the model, the embedder, one seeded
``random.Random`` and a sub-result cache arrive in :class:`OperatorContext`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from furnace.domain.elixir import (
    MAX_FEW_SHOTS,
    MAX_LIST,
    MAX_PREFERENCES,
    Elixir,
    ElixirRef,
    FewShot,
    StylePreference,
    Tone,
)
from furnace.domain.lineage import ResolutionNote
from furnace.fusion.embedding import Embedder
from furnace.fusion.operators.prompts import answer_versions
from furnace.fusion.synthesis import SubResultCache
from furnace.llm.seam import LLM, Completion, LLMRequest


@dataclass
class OperatorContext:
    """The collaborators and resolved params of one operator run."""

    llm: LLM
    embedder: Embedder
    rng: random.Random
    params: dict[str, Any]
    child_id: str
    subcache: SubResultCache | None = None
    model_calls: int = 0

    def complete(self, request: LLMRequest) -> Completion:
        """One model call (counted)."""
        self.model_calls += 1
        return self.llm.complete(request)

    def cached(self, kind: str, key_parts: Any, compute: Callable[[], Any]) -> Any:
        """A sub-result through the sub-result cache (computed directly without one)."""
        if self.subcache is None:
            return compute()
        return self.subcache.get_or_compute(kind, {"parts": key_parts, **answer_versions(self.llm)}, compute)


@dataclass
class OperatorResult:
    """A child elixir, how its conflicts were resolved, and committee members."""

    child: Elixir
    notes: list[ResolutionNote] = field(default_factory=list)
    members: tuple[ElixirRef, ...] = ()


class Operator(Protocol):
    """A fusion operator. Bump ``op_version`` whenever its output for the same
    inputs could change: that invalidates every cached synthesis it made."""

    name: str
    op_version: str
    min_parents: int
    max_parents: int | None

    def param_defaults(self) -> dict[str, Any]:
        """Operator-specific params (merged into the lineage params)."""
        ...

    def apply(self, parents: Sequence[Elixir], ctx: OperatorContext) -> OperatorResult:
        """Make the child from ``parents`` (already loaded, conflict-checked)."""
        ...

    def max_calls(self, parents: Sequence[Elixir], params: dict[str, Any]) -> int:
        """At most how many model calls :meth:`apply` makes for ``parents`` and ``params`` (the evolution
        loop reserves them of its budget before the child is made)."""
        ...


def by_priority(parents: Sequence[Elixir]) -> list[Elixir]:
    """Parents by priority, highest first; ties keep the given order."""
    return sorted(parents, key=lambda p: -p.priority)


def weighted_tone(parents: Sequence[Elixir]) -> Tone:
    """Priority-weighted mean of each tone dimension, in exact decimal arithmetic.

    ``Fraction(str(x))`` reads the decimal as written, so priorities 300/100 and
    formality 0.8/0.4 give exactly 0.7. All-zero priorities weigh equally.
    """
    weights = [Fraction(p.priority) for p in parents]
    if sum(weights) == 0:
        weights = [Fraction(1)] * len(parents)
    total = sum(weights)
    values = {}
    for dim in Tone.DIMENSIONS:
        mean = sum(w * Fraction(str(getattr(p.tone, dim))) for w, p in zip(weights, parents, strict=False)) / total
        values[dim] = float(mean)
    return Tone(**values)


def union(lists: Iterable[Sequence[str]], limit: int = MAX_LIST) -> list[str]:
    """Order-preserving, case-insensitive union, capped at ``limit``."""
    seen: set[str] = set()
    out: list[str] = []
    for items in lists:
        for item in items:
            key = item.casefold()
            if key not in seen:
                seen.add(key)
                out.append(item)
    return out[:limit]


def share_few_shots(parents: Sequence[Elixir]) -> list[FewShot]:
    """A share from each parent: the first ``ceil(len / n_parents)`` examples of each."""
    out: list[FewShot] = []
    seen: set[tuple[str, str]] = set()
    for p in parents:
        take = math.ceil(len(p.few_shots) / len(parents)) if p.few_shots else 0
        for shot in p.few_shots[:take]:
            key = (shot.input.casefold(), shot.output.casefold())
            if key not in seen:
                seen.add(key)
                out.append(shot)
    return out[:MAX_FEW_SHOTS]


def merge_preferences(parents: Sequence[Elixir]) -> list[StylePreference]:
    """Learned preferences; on a shared dimension the higher-priority parent's wins."""
    seen: set[str] = set()
    out: list[StylePreference] = []
    for p in parents:
        for pref in p.style_preferences:
            if pref.dimension.casefold() not in seen:
                seen.add(pref.dimension.casefold())
                out.append(pref)
    return out[:MAX_PREFERENCES]


def joined_name(parents: Sequence[Elixir], sep: str) -> str:
    """A child name from the parents' names, each part once (at most 120 characters).

    Children of children would otherwise repeat an ancestor ("A × B × B × C")."""
    parts: list[str] = []
    for parent in parents:
        for part in parent.name.split(sep):
            if part and part not in parts:
                parts.append(part)
    name = sep.join(parts)
    return name if len(name) <= 120 else name[:119] + "…"


def joined_notes(parents: Sequence[Elixir], limit: int = 4000) -> str:
    """The parents' style notes, higher priority first, within ``limit``."""
    text = "\n\n".join(p.style_notes for p in parents if p.style_notes)
    return text[:limit]
