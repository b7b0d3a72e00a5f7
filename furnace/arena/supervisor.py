"""The supervisor: plans an open discussion with the session's model.

It has no persona and is never shown to users. It gets a PLAN request whose
``inputs`` are ``{"message", "language", "mentions", "members": [{"id", "name",
"expertise", "identity"}]}`` — plus, when the arena has an embedder, ``"ranking":
[{"member", "relevance"}, ...]``: every member, most relevant to the question (the
message without its @mentions) first, by meaning (:mod:`furnace.arena.relevance`)
— and must return JSON matching :data:`PLAN_SCHEMA`::

    {"speakers": [{"member": "<id>", "task": "<short task>"}, ...],
     "budget": {"max_speakers": 3, "max_tokens": 300}}

A plan that does not validate (unknown or repeated member, empty task, no
speakers) or a failing call falls back to the @mentioned member, else the
primary member (:func:`furnace.arena.router.fallback_plan`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from furnace.arena.directives import Directive, MemberName, strip_mentions
from furnace.arena.models import MAX_MEMBERS, Plan, PlanBudget, SpeakerTask
from furnace.arena.relevance import TextEmbedder, rank_members
from furnace.arena.router import REPLY_TOKENS, fallback_plan
from furnace.domain.elixir import Elixir
from furnace.domain.errors import InputError
from furnace.domain.text import detect_language
from furnace.llm.seam import LLM, LLMRequest, TaskKind, system_user
from furnace.llm.structured import NoJSON, extract_json, schema_of

MAX_TASK_CHARS = 300


class _PlanSpeaker(BaseModel):
    model_config = ConfigDict(extra="forbid")

    member: str
    task: str


class _PlanBudgetReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_speakers: int = Field(ge=1, le=MAX_MEMBERS)
    max_tokens: int | None = Field(default=None, ge=16, le=4000)


class PlanReply(BaseModel):
    """The supervisor's reply (semantic checks — known, distinct members — are in :func:`parse_plan`)."""

    model_config = ConfigDict(extra="forbid")

    speakers: list[_PlanSpeaker] = Field(min_length=1, max_length=MAX_MEMBERS)
    budget: _PlanBudgetReply


PLAN_SCHEMA: dict[str, Any] = schema_of(PlanReply)

_SYSTEM = (
    "You are the invisible moderator of a group chat. You never speak in the chat. "
    "Decide which members should answer the user's message, in which order, and give each one "
    "short task. Prefer members whose expertise fits; a mentioned member speaks first. "
    "When a relevance ranking is given, the most relevant members speak first (after a mentioned one). "
    "Answer only with JSON matching the schema."
)

Ranking = Sequence[tuple[str, float]]


def build_plan_request(
    message: str,
    members: Sequence[Elixir],
    directive: Directive,
    *,
    ranking: Ranking | None = None,
    seed: int = 0,
    run_id: str | None = None,
) -> LLMRequest:
    """The PLAN request for an open-discussion message (``ranking``: :func:`rank_for`, when known)."""
    roster = [{"id": e.id, "name": e.name, "expertise": list(e.expertise), "identity": e.identity} for e in members]
    inputs: dict[str, Any] = {
        "message": message,
        "language": detect_language(message),
        "mentions": list(directive.mentions),
        "members": roster,
    }
    ranked = ""
    if ranking is not None:
        inputs["ranking"] = [{"member": m, "relevance": score} for m, score in ranking]
        ranked = "Relevance to the message (most relevant first): " + ", ".join(
            f"{m} {score:.2f}" for m, score in ranking
        )
        ranked += "\n\n"
    user = (
        f"Members (in order):\n{json.dumps(roster, ensure_ascii=False, indent=1)}\n\n{ranked}"
        f"Mentioned: {', '.join(directive.mentions) or 'none'}\n\nUser message:\n{message}"
    )
    return system_user(
        TaskKind.PLAN,
        _SYSTEM,
        user,
        temperature=0.0,
        seed=seed,
        json_schema=PLAN_SCHEMA,
        inputs=inputs,
        max_tokens=600,
        run_id=run_id,
    )


def parse_plan(parsed: Any, members: Sequence[str], directive: Directive) -> Plan:
    """Validate a supervisor answer into a :class:`Plan`; raises :class:`InputError` naming the problem."""
    if isinstance(parsed, str):
        try:
            parsed = extract_json(parsed)
        except NoJSON:
            raise InputError("plan is not JSON", field="plan") from None
    if not isinstance(parsed, dict):
        raise InputError("plan must be a JSON object", field="plan")
    raw_speakers = parsed.get("speakers")
    if not isinstance(raw_speakers, list) or not raw_speakers:
        raise InputError("plan has no speakers", field="plan.speakers")
    budget_raw: dict[str, Any] = parsed["budget"] if isinstance(parsed.get("budget"), dict) else {}
    try:
        max_speakers = int(budget_raw.get("max_speakers", len(raw_speakers)))
        max_tokens = int(budget_raw.get("max_tokens", REPLY_TOKENS))
        budget = PlanBudget(max_speakers=min(max(max_speakers, 1), len(members)), max_tokens=max_tokens)
    except (TypeError, ValueError) as err:
        raise InputError(f"plan budget is invalid ({err.__class__.__name__})", field="plan.budget") from None
    known, seen, speakers = set(members), set(), []
    for i, item in enumerate(raw_speakers):
        if not isinstance(item, dict):
            raise InputError(f"plan speaker {i} is not an object", field=f"plan.speakers.{i}")
        member, task = item.get("member"), item.get("task")
        if member not in known:
            raise InputError(f"plan names an unknown member {member!r}", field=f"plan.speakers.{i}.member")
        if member in seen:
            raise InputError(f"plan repeats member {member!r}", field=f"plan.speakers.{i}.member")
        if not isinstance(task, str) or not task.strip():
            raise InputError(f"plan gives {member} no task", field=f"plan.speakers.{i}.task")
        seen.add(member)
        speakers.append(SpeakerTask(member_id=member, task=task.strip()[:MAX_TASK_CHARS]))
    return Plan(
        source="supervisor",
        directive=directive.kind.value,
        speakers=tuple(speakers[: budget.max_speakers]),
        budget=budget,
        reason="supervisor plan",
    )


def rank_for(message: str, members: Sequence[Elixir], embedder: TextEmbedder) -> list[tuple[str, float]]:
    """Every member with its relevance to the question (``message`` without its @mentions), most relevant first."""
    question = strip_mentions(message, [MemberName(id=e.id, name=e.name) for e in members])
    return rank_members(question or message, members, embedder)


def plan_open_discussion(
    message: str,
    members: Sequence[Elixir],
    directive: Directive,
    *,
    llm: LLM,
    embedder: TextEmbedder | None = None,
    seed: int = 0,
    run_id: str | None = None,
) -> Plan:
    """Ask the supervisor for a plan; any failure or invalid plan gives the fallback plan.

    With ``embedder``, the members are ranked by relevance first (:func:`rank_for`) and the
    supervisor is given that ranking; an embedder that fails leaves the request without it."""
    ids = [e.id for e in members]
    ranking, unranked = None, ""
    if embedder is not None:
        try:
            ranking = rank_for(message, members, embedder)
        except Exception as err:  # noqa: BLE001 - ranking is advice: the supervisor still plans without it
            unranked = f" (members not ranked: {err.__class__.__name__}: {err})"
    request = build_plan_request(message, members, directive, ranking=ranking, seed=seed, run_id=run_id)
    try:
        completion = llm.complete(request)
    except Exception as err:  # a failing supervisor never ends the turn
        return fallback_plan(directive, ids, message, f"supervisor failed: {err.__class__.__name__}: {err}{unranked}")
    try:
        plan = parse_plan(completion.parsed if completion.parsed is not None else completion.text, ids, directive)
    except InputError as err:
        return fallback_plan(directive, ids, message, f"invalid supervisor plan: {err}{unranked}")
    return plan.model_copy(update={"reason": plan.reason + unranked}) if unranked else plan
