"""The deterministic router: directives become plans without any model call.

- roll call → one immutable task per addressed member, with its fixed ordinal
  (1, 2, … in member order);
- @all → every member in order, each answers the message;
- @name → the mentioned member(s) only, in member order;
- stop / continue → control, no plan (the caller handles them);
- open discussion → ``None``: the supervisor plans it (except in single chat,
  where the one member answers).
"""

from __future__ import annotations

from collections.abc import Sequence

from furnace.arena.directives import Directive, DirectiveKind
from furnace.arena.models import Plan, PlanBudget, SpeakerTask
from furnace.domain.text import detect_language

ROLL_CALL_TOKENS = 60
REPLY_TOKENS = 400


def roll_call_task(ordinal: int, total: int, language: str) -> str:
    """The fixed wording of a roll-call task."""
    if language == "zh":
        return (
            f"报数：你是第{ordinal}号（共{total}人）。只报出你的数字{ordinal}，一句话；人设只能影响语气，不能改变数字。"
        )
    return (
        f"Roll call: you are number {ordinal} of {total}. Answer with your number {ordinal} in one short line; "
        "your persona may colour the tone but must not change the number."
    )


def reply_task(language: str) -> str:
    """The task of a member addressed directly (@name, @all)."""
    return "直接回复用户的消息。" if language == "zh" else "Reply to the user's message."


def route(directive: Directive, members: Sequence[str], message: str) -> Plan | None:
    """The plan for a deterministic directive; ``None`` for open discussion and control."""
    language = detect_language(message)
    kind = directive.kind
    if kind is DirectiveKind.ROLL_CALL:
        addressed = list(members) if directive.addressed_all else [m for m in members if m in directive.mentions]
        speakers = tuple(
            SpeakerTask(member_id=m, task=roll_call_task(i, len(addressed), language), ordinal=i)
            for i, m in enumerate(addressed, start=1)
        )
        return _plan(kind, speakers, ROLL_CALL_TOKENS, "roll call: fixed ordinals in member order")
    if len(members) == 1 and kind in (DirectiveKind.ALL, DirectiveKind.MENTION, DirectiveKind.OPEN):
        # Single chat: the one member answers; there is nothing to plan.
        return _plan(kind, (SpeakerTask(member_id=members[0], task=reply_task(language)),), REPLY_TOKENS, "single chat")
    if kind is DirectiveKind.ALL:
        speakers = tuple(SpeakerTask(member_id=m, task=reply_task(language)) for m in members)
        return _plan(kind, speakers, REPLY_TOKENS, "@all: every member in order")
    if kind is DirectiveKind.MENTION:
        speakers = tuple(
            SpeakerTask(member_id=m, task=reply_task(language)) for m in members if m in directive.mentions
        )
        return _plan(kind, speakers, REPLY_TOKENS, "@mention: the mentioned member(s) only")
    return None


def fallback_plan(directive: Directive, members: Sequence[str], message: str, reason: str) -> Plan:
    """When the supervisor fails: the @mentioned member, else the primary member."""
    speaker = directive.mentions[0] if directive.mentions else members[0]
    task = SpeakerTask(member_id=speaker, task=reply_task(detect_language(message)))
    return Plan(
        source="fallback",
        directive=directive.kind.value,
        speakers=(task,),
        budget=PlanBudget(max_speakers=1, max_tokens=REPLY_TOKENS),
        reason=reason,
    )


def _plan(kind: DirectiveKind, speakers: tuple[SpeakerTask, ...], tokens: int, reason: str) -> Plan:
    return Plan(
        source="directive",
        directive=kind.value,
        speakers=speakers,
        budget=PlanBudget(max_speakers=max(1, len(speakers)), max_tokens=tokens),
        reason=reason,
    )
