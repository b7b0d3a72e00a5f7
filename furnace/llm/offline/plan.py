"""Offline PLAN handler: the supervisor's plan for an open discussion, by rules.

Inputs (see :mod:`furnace.arena.supervisor`): ``message``, ``language``,
``mentions`` (member ids) and ``members`` (``id``, ``name``, ``expertise``,
``identity``), and ``ranking`` when the arena ranked the members by meaning.
Order: mentioned members first, then the ``ranking``'s order; without one,
members whose expertise matches the message (more matches first), then the rest
in member order. Each gets one short task in the message's language.
"""

from __future__ import annotations

import random
from typing import Any

from furnace.domain.text import detect_language, terms
from furnace.llm.seam import LLMRequest

_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "from",
        "that",
        "this",
        "what",
        "your",
        "about",
        "into",
        "have",
        "more",
        "less",
        "very",
        "some",
    ]
)


def _matches(expertise: list[str], message: str) -> list[str]:
    """The expertise entries the message touches."""
    msg = message.casefold()
    wanted = terms(msg, min_len=4, stop=_STOP)
    hits = []
    for item in expertise:
        low = item.casefold()
        if low in msg or terms(low, min_len=4, stop=_STOP) & wanted:
            hits.append(item)
    return hits


def _task(language: str, hits: list[str], lead: bool) -> str:
    if language == "zh":
        if hits:
            return f"从你在「{'、'.join(hits[:2])}」方面的专长回答这个问题，简短具体。"
        return "先回应用户的问题，简短具体。" if lead else "补充一个不同的角度，一两句话。"
    if hits:
        return f"Answer from your expertise in {' and '.join(hits[:2])}; be brief and concrete."
    return (
        "Answer the question first, briefly and concretely."
        if lead
        else "Add one different angle in a sentence or two."
    )


def plan(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Order members by mention, then relevance ranking (else expertise match), then member order; one task each."""
    inputs = request.inputs
    message = str(inputs.get("message", ""))
    language = inputs.get("language") or detect_language(message)
    members = list(inputs.get("members") or [])
    mentions = list(inputs.get("mentions") or [])
    ranking = [str(r.get("member")) for r in inputs.get("ranking") or [] if isinstance(r, dict)]
    scored = []
    for position, member in enumerate(members):
        hits = _matches(list(member.get("expertise") or []), message)
        mentioned = member.get("id") in mentions
        if ranking:  # the arena's ranking by meaning decides; an unranked member goes last
            rank = ranking.index(member.get("id")) if member.get("id") in ranking else len(ranking)
            scored.append((0 if mentioned else 1, rank, position, member, hits))
        else:
            scored.append((0 if mentioned else 1, -len(hits), position, member, hits))
    scored.sort(key=lambda row: row[:3])
    speakers = [
        {"member": member["id"], "task": _task(language, hits, lead=(i == 0))}
        for i, (_, _, _, member, hits) in enumerate(scored)
    ]
    parsed = {"speakers": speakers, "budget": {"max_speakers": max(1, len(speakers)), "max_tokens": 300}}
    return "", parsed
