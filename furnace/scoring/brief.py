"""Brief fit: the structural distance between an elixir and a target brief (no model).

A brief names what the user wants: expertise keywords, target tone values,
constraints and a language. Each part that the brief specifies contributes a
similarity in [0, 1]; the fit is their weighted mean, and the reason lists each
part, so a low score says where the elixir misses.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from furnace.domain.elixir import Elixir
from furnace.scoring.base import Score

_WEIGHTS = {"expertise": 0.4, "tone": 0.35, "constraints": 0.15, "language": 0.1}
TONE_DIMENSIONS = ("formality", "conciseness", "humor", "empathy")


class BriefConstraints(BaseModel):
    """Target constraints (each optional)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_length: int | None = Field(default=None, gt=0)
    must_use_markdown: bool | None = None


class Brief(BaseModel):
    """A target persona description to score elixirs against."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    expertise: list[str] = Field(default_factory=list, max_length=40)
    tone: dict[Literal["formality", "conciseness", "humor", "empathy"], float] = Field(default_factory=dict)
    constraints: BriefConstraints = BriefConstraints()
    language: Literal["zh", "en"] | None = None


def _keyword_hit(keyword: str, haystack: list[str]) -> bool:
    k = keyword.casefold().strip()
    return any(k in h or (len(h) >= 2 and h in k) for h in haystack)


def brief_fit(elixir: Elixir, brief: Brief) -> Score:
    """How closely ``elixir``'s structure matches ``brief`` (1 = every specified part matches)."""
    parts: dict[str, tuple[float, str]] = {}
    if brief.expertise:
        haystack = [e.casefold() for e in elixir.expertise] + [elixir.identity.casefold()]
        hits = [k for k in brief.expertise if _keyword_hit(k, haystack)]
        parts["expertise"] = (len(hits) / len(brief.expertise), f"expertise {len(hits)}/{len(brief.expertise)}")
    if brief.tone:
        diffs = {d: abs(getattr(elixir.tone, d) - v) for d, v in brief.tone.items()}
        sim = 1.0 - sum(diffs.values()) / len(diffs)
        worst = max(diffs, key=lambda d: diffs[d])
        parts["tone"] = (
            sim,
            f"tone {sim:.2f} (furthest: {worst} {getattr(elixir.tone, worst):.2f} vs {brief.tone[worst]:.2f})",
        )
    checks: list[float] = []
    notes: list[str] = []
    c = brief.constraints
    if c.max_length is not None:
        have = elixir.constraints.max_length
        if have is None:
            checks.append(0.5)
            notes.append("no max_length")
        else:
            checks.append(max(0.0, 1.0 - abs(math.log(have / c.max_length)) / math.log(4)))
            notes.append(f"max_length {have} vs {c.max_length}")
    if c.must_use_markdown is not None:
        ok = elixir.constraints.must_use_markdown == c.must_use_markdown
        checks.append(1.0 if ok else 0.0)
        notes.append("markdown ok" if ok else "markdown differs")
    if checks:
        parts["constraints"] = (sum(checks) / len(checks), ", ".join(notes))
    if brief.language:
        ok = elixir.language == brief.language
        parts["language"] = (1.0 if ok else 0.0, f"language {elixir.language}")
    if not parts:
        return Score(1.0, "the brief specifies nothing")
    total = sum(_WEIGHTS[k] for k in parts)
    value = sum(_WEIGHTS[k] * v for k, (v, _) in parts.items()) / total
    return Score(round(value, 6), "; ".join(r for _, r in parts.values()))
