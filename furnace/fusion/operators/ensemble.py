"""ensemble: a committee persona whose members take turns leading.

The child keeps every member's expertise and principles (exact duplicates
dropped), a priority-weighted tone, merged constraints, and a machine-readable
roster in its style notes::

    Committee members (a router picks who leads each answer):
    - member alice@1 (Alice): statistics; python

Building it calls no model. Answering (:func:`answer`): with an embedder (what the CLI
passes), the member whose profile the message is nearest to *in meaning* leads
(:func:`furnace.fusion.routing.route_by_meaning`: no model call, deterministic, profile
vectors embedded once); without one, :func:`route` asks the ROUTE task, once per message
and through the seam (so a cached model answers a repeated message from its cache). The
chosen member then answers with its own rendered prompt — its own tone, principles and
constraints — and the result records who led and why. Chosen automatically when the
parents' expertise Jaccard distance (over word terms) exceeds ``ensemble_threshold``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from furnace.domain.agent import Agent
from furnace.domain.elixir import Elixir, ElixirRef, parse_elixir
from furnace.domain.errors import InputError, LLMError
from furnace.domain.text import terms as text_terms
from furnace.fusion.embedding import Embedder
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
from furnace.fusion.operators.conflicts import guardrail_union, resolve_constraints
from furnace.fusion.operators.crossover import adjudicator
from furnace.fusion.routing import route_by_meaning
from furnace.llm.seam import LLM

log = logging.getLogger("furnace.fusion.operators.ensemble")

ROSTER_HEADER = "Committee members (a router picks who leads each answer):"
_ROSTER_LINE = re.compile(r"^- member (\S+@\d+) \((.*)\): (.*)$")
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
    """The terms of an elixir's expertise (see :func:`furnace.domain.text.terms`)."""
    terms: set[str] = set()
    for item in elixir.expertise:
        terms |= text_terms(item, min_len=1, stop=_TERM_STOP)
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


@dataclass(frozen=True)
class Routing:
    """Who leads an answer and why."""

    leader: ElixirRef
    reason: str
    fallback: bool = False


@dataclass(frozen=True)
class EnsembleAnswer:
    """A committee's answer: the text, by the member who led, and why that member led."""

    text: str
    leader: ElixirRef
    leader_name: str
    reason: str
    fallback: bool = False

    def transcript(self) -> dict[str, Any]:
        """The record of the turn: who led, why, and what was said."""
        return {
            "leader": str(self.leader),
            "leader_name": self.leader_name,
            "reason": self.reason,
            "fallback": self.fallback,
            "text": self.text,
        }


def route(
    agent: Agent,
    message: str,
    llm: LLM,
    *,
    members: Sequence[Elixir] | None = None,
    embedder: Embedder | None = None,
) -> ElixirRef:
    """Which member of a committee agent leads the answer to ``message`` (see :func:`choose_leader`)."""
    return choose_leader(agent, message, llm, members=members, embedder=embedder).leader


def choose_leader(
    agent: Agent,
    message: str,
    llm: LLM,
    *,
    members: Sequence[Elixir] | None = None,
    embedder: Embedder | None = None,
) -> Routing:
    """The leading member and why: by meaning with ``embedder`` (no model call), else one ROUTE call.

    Members come from ``members`` when given (name, identity and expertise), else from the
    agent's roster (name and expertise). A failed or invalid ROUTE answer falls back to the
    first member (logged, and marked).
    """
    if not agent.members:
        raise InputError(f"agent {agent.id} is not a committee (no members)", field="members")
    if members is not None:
        info = [
            {"ref": str(m.ref), "name": m.name, "identity": m.identity, "expertise": list(m.expertise)} for m in members
        ]
    else:
        info = parse_roster(agent)
    if embedder is not None:
        return _by_meaning(agent, message, info, embedder)
    info = [{k: v for k, v in m.items() if k != "identity"} for m in info]  # the ROUTE request as before
    refs = [str(r) for r in agent.members]
    request = prompts.build_route_request(message, info, language=agent.elixir.language)
    try:
        completion = llm.complete(request)
        chosen = prompts.parse_route(completion, refs)
    except LLMError as err:
        log.warning("routing for %s failed (%s); the first member leads", agent.id, err)
        return Routing(agent.members[0], f"routing failed ({err}); the first member leads", fallback=True)
    reason = completion.parsed.get("reason", "") if isinstance(completion.parsed, dict) else ""
    return Routing(agent.members[refs.index(chosen)], str(reason) or "chosen by the router")


def _by_meaning(agent: Agent, message: str, info: list[dict[str, Any]], embedder: Embedder) -> Routing:
    """The member nearest to ``message`` in meaning, with the scores as the reason."""
    found = route_by_meaning(message, info, embedder)
    best, other = info[found.index], found.runner_up
    zh = agent.elixir.language == "zh"
    if zh:
        reason = f"问题与{best['name']}的专长最接近（{found.scores[found.index]:.2f}"
        reason += f"；其次{info[other]['name']} {found.scores[other]:.2f}）" if other is not None else "）"
    else:
        reason = f"closest in meaning to {best['name']}'s expertise ({found.scores[found.index]:.2f}"
        reason += f"; next {info[other]['name']} {found.scores[other]:.2f})" if other is not None else ")"
    by_ref = {str(r): r for r in agent.members}
    return Routing(by_ref.get(str(best["ref"]), agent.members[found.index]), reason)


def answer(
    agent: Agent,
    message: str,
    llm: LLM,
    members: Sequence[Elixir],
    *,
    seed: int = 0,
    embedder: Embedder | None = None,
) -> EnsembleAnswer:
    """A committee answers ``message``: the router picks the leader (by meaning with ``embedder``, else
    one ROUTE call), who answers in its own voice.

    ``members`` are the committee's elixirs (the versions in ``agent.members``).
    The leader's reply goes through the persona pipeline with the leader's own
    prompt, so its tone, principles and ``max_length`` apply — not the merged ones.
    """
    from furnace.arena.speaker import persona_from_elixir, speak

    by_ref = {str(m.ref): m for m in members}
    missing = [str(r) for r in agent.members if str(r) not in by_ref]
    if missing:
        raise InputError(f"committee {agent.id} is missing member(s) {', '.join(missing)}", field="members")
    routing = choose_leader(agent, message, llm, members=[by_ref[str(r)] for r in agent.members], embedder=embedder)
    leader = by_ref[str(routing.leader)]
    spoken = speak(persona_from_elixir(leader), message, llm=llm, seed=seed)
    return EnsembleAnswer(spoken.text, routing.leader, leader.name, routing.reason, routing.fallback)


class Ensemble:
    """A committee persona of two or more elixirs with a router."""

    name = "ensemble"
    op_version = "2"
    min_parents = 2
    max_parents: int | None = 6

    def param_defaults(self) -> dict[str, Any]:
        """No operator-specific params."""
        return {}

    def max_calls(self, parents: Sequence[Elixir], params: dict[str, Any]) -> int:
        """One adjudication, when the parents' markdown constraints tie."""
        return 1

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
                "conflicts_with": guardrail_union((p.conflicts_with for p in ordered), "conflicts_with"),
                "style_notes": notes_text,
                "style_preferences": [s.model_dump() for s in merge_preferences(ordered)],
            }
        )
        return OperatorResult(child=child, notes=notes, members=tuple(p.ref for p in ordered))
