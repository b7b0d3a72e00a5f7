"""ensemble: a committee persona whose members take turns leading.

The child keeps every member's expertise and principles (exact duplicates
dropped), a priority-weighted tone, merged constraints, and a machine-readable
roster in its style notes::

    Committee members (a router picks who leads each answer):
    - member alice@1 (Alice): statistics; python

Building it calls no model. Answering costs one more call: :func:`route` asks
the ROUTE task which member's expertise leads for a question. Chosen
automatically when the parents' expertise Jaccard distance (over word terms)
exceeds ``ensemble_threshold``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from furnace.domain.agent import Agent
from furnace.domain.elixir import Elixir, ElixirRef, parse_elixir
from furnace.domain.errors import InputError, LLMError
from furnace.fusion.operators import prompts
from furnace.fusion.operators.base import (
    OperatorContext,
    OperatorResult,
    by_priority,
    joined_name,
    merge_preferences,
    share_few_shots,
    union,
    weighted_tone,
)
from furnace.fusion.operators.conflicts import resolve_constraints
from furnace.fusion.operators.crossover import adjudicator
from furnace.llm.seam import LLM

log = logging.getLogger("furnace.fusion.operators.ensemble")

ROSTER_HEADER = "Committee members (a router picks who leads each answer):"
_ROSTER_LINE = re.compile(r"^- member (\S+@\d+) \((.*)\): (.*)$")
_TERM = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]{2,}")
_TERM_STOP = {"and", "or", "of", "the", "a", "an", "in", "for", "with", "to", "on"}

_IDENTITY = {
    "en": "You are a committee of {names}: for each question the member whose expertise fits best leads, "
    "answering in that member's style.",
    "zh": "你是由{names}组成的委员会：每个问题由专长最契合的成员主答，并以该成员的风格作答。",
}
_LEAD_PRINCIPLE = {
    "en": "Let the member whose expertise fits the question lead the answer, in that member's style.",
    "zh": "由专长最契合问题的成员主答，并保持该成员的风格。",
}


def expertise_terms(elixir: Elixir) -> set[str]:
    """The word terms of an elixir's expertise (lowercased, CJK runs whole)."""
    terms: set[str] = set()
    for item in elixir.expertise:
        terms |= {t for t in _TERM.findall(item.casefold()) if t not in _TERM_STOP}
    return terms


def expertise_distance(parents: Sequence[Elixir]) -> float:
    """Jaccard distance of the parents' expertise terms (1 - |∩| / |∪|)."""
    sets = [expertise_terms(p) for p in parents]
    union_ = set().union(*sets)
    if not union_:
        return 0.0
    common = set.intersection(*sets)
    return 1.0 - len(common) / len(union_)


def roster(members: Sequence[Elixir], per_member: int = 10) -> str:
    """The roster block written into the committee's style notes."""
    lines = [ROSTER_HEADER]
    for m in members:
        terms = "; ".join(" ".join(x.split()).replace(";", ",")[:80] for x in m.expertise[:per_member])
        lines.append(f"- member {m.ref} ({' '.join(m.name.split())}): {terms}")
    return "\n".join(lines)


def parse_roster(agent: Agent) -> list[dict[str, Any]]:
    """The members (ref, name, expertise) recorded in a committee agent's style notes."""
    found = {}
    for line in agent.elixir.style_notes.splitlines():
        m = _ROSTER_LINE.match(line.strip())
        if m:
            found[m.group(1)] = {
                "ref": m.group(1),
                "name": m.group(2),
                "expertise": [t.strip() for t in m.group(3).split(";")],
            }
    return [found.get(str(ref), {"ref": str(ref), "name": ref.id, "expertise": []}) for ref in agent.members]


def route(agent: Agent, message: str, llm: LLM, *, members: Sequence[Elixir] | None = None) -> ElixirRef:
    """Which member of a committee agent leads the answer to ``message`` (one ROUTE call).

    Members come from ``members`` when given, else from the agent's roster. A
    failed or invalid routing falls back to the first member (logged).
    """
    if not agent.members:
        raise InputError(f"agent {agent.id} is not a committee (no members)", field="members")
    if members is not None:
        info = [{"ref": str(m.ref), "name": m.name, "expertise": list(m.expertise)} for m in members]
    else:
        info = parse_roster(agent)
    refs = [str(r) for r in agent.members]
    request = prompts.build_route_request(message, info, language=agent.elixir.language)
    try:
        chosen = prompts.parse_route(llm.complete(request), refs)
    except LLMError as err:
        log.warning("routing for %s failed (%s); the first member leads", agent.id, err)
        chosen = refs[0]
    return agent.members[refs.index(chosen)]


class Ensemble:
    """A committee persona of two or more elixirs with a router."""

    name = "ensemble"
    op_version = "1"
    min_parents = 2
    max_parents: int | None = 6

    def param_defaults(self) -> dict[str, Any]:
        """No operator-specific params."""
        return {}

    def apply(self, parents: Sequence[Elixir], ctx: OperatorContext) -> OperatorResult:
        """The committee child of ``parents`` (no model call unless constraints tie)."""
        ordered = by_priority(parents)
        language = ordered[0].language
        constraints, notes = resolve_constraints(ordered, adjudicator(ctx, language))
        sep = "、" if language == "zh" else " and "
        names = sep.join(p.name for p in ordered)
        notes_text = "\n\n".join([roster(ordered), *(p.style_notes for p in ordered if p.style_notes)])[:4000]
        child = parse_elixir(
            {
                "id": ctx.child_id,
                "name": joined_name(ordered, " + "),
                "language": language,
                "identity": _IDENTITY[language].format(names=names)[:600],
                "expertise": union(p.expertise for p in ordered),
                "principles": union([[_LEAD_PRINCIPLE[language]], *(p.principles for p in ordered)]),
                "tone": weighted_tone(ordered).model_dump(),
                "constraints": constraints.model_dump(),
                "few_shots": [s.model_dump() for s in share_few_shots(ordered)],
                "tools": union(p.tools for p in ordered),
                "priority": max(p.priority for p in ordered),
                "conflicts_with": union(p.conflicts_with for p in ordered),
                "style_notes": notes_text,
                "style_preferences": [s.model_dump() for s in merge_preferences(ordered)],
            }
        )
        return OperatorResult(child=child, notes=notes, members=tuple(p.ref for p in ordered))
