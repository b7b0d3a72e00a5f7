"""The persona pipeline: how any persona speaks, in single chat and in the arena.

One function, :func:`speak`, used for a one-member session and for every group
speaker alike:

1. the persona's rendered system prompt (:func:`furnace.domain.render.render_prompt`, or
   an agent's synthesised prompt) plus a note on who else is in the room;
2. selected memory — a swappable :data:`ContextBuilder` (default
   :func:`token_aware_context`, i.e. :func:`furnace.llm.context.build_context`: the
   history within a token budget, older turns compressed, the last 4 verbatim);
3. one REPLY model call with ``inputs = {"persona", "message", "instruction"}``
   (``instruction`` carries a fixed task, e.g. a roll-call ordinal; ``question``, when
   the message @mentions members, is the message without those mentions — the model's
   messages keep the message as the user wrote it);
4. response validation (:func:`validate_reply`): non-empty, the persona's
   ``max_length``, and for a roll call the ordinal enforced in code;
5. the text handed to ``on_delta`` (the arena turns it into a ``Delta`` event).

Retries and persistence belong to the caller (the arena runner).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from furnace.arena.ordinals import enforce_ordinal
from furnace.domain.elixir import Elixir
from furnace.domain.errors import LLMMalformedOutput, NotFound
from furnace.domain.macros import served
from furnace.domain.render import render_prompt
from furnace.llm.context import TokenCounter, build_context, estimate_counter
from furnace.llm.seam import LLM, LLMRequest, Message, TaskKind
from furnace.storage.store import ElixirStore

DEFAULT_CONTEXT_LIMIT = 32_000
ROLL_CALL_MAX_CHARS = 160


@dataclass(frozen=True)
class Persona:
    """A speaker: its member id, display name, elixir and system prompt."""

    member_id: str
    name: str
    elixir: Elixir
    system_prompt: str

    @property
    def language(self) -> str:
        return self.elixir.language

    @property
    def version(self) -> int:
        return self.elixir.version


def persona_from_elixir(elixir: Elixir, *, member_id: str | None = None, system_prompt: str | None = None) -> Persona:
    """A persona from an elixir (its rendered prompt unless one is given)."""
    return Persona(
        member_id=member_id or elixir.id,
        name=elixir.name,
        elixir=elixir,
        system_prompt=system_prompt if system_prompt is not None else render_prompt(elixir),
    )


def resolve_persona(store: ElixirStore, member_id: str) -> Persona:
    """Load a member by agent id (its synthesised prompt) or elixir id (latest version)."""
    if member_id.startswith("agt-"):
        try:
            agent = store.get_agent(member_id)
            return persona_from_elixir(agent.elixir, member_id=member_id, system_prompt=agent.system_prompt)
        except NotFound:
            pass
    try:
        return persona_from_elixir(store.get_elixir(member_id), member_id=member_id)
    except NotFound:
        agent = store.get_agent(member_id)  # raises NotFound naming the id
        return persona_from_elixir(agent.elixir, member_id=member_id, system_prompt=agent.system_prompt)


class HistoryTurn(BaseModel):
    """One earlier line of the conversation; ``speaker_id`` None is the user."""

    model_config = ConfigDict(frozen=True)

    text: str
    speaker_id: str | None = None
    speaker_name: str | None = None


def history_messages(persona: Persona, history: Sequence[HistoryTurn]) -> list[Message]:
    """The conversation as this persona sees it: its own replies are assistant
    messages; the user's and the other members' are user messages (others prefixed
    with their name)."""
    out = []
    for turn in history:
        if turn.speaker_id == persona.member_id:
            out.append(Message(role="assistant", content=turn.text))
        elif turn.speaker_id is None:
            out.append(Message(role="user", content=turn.text))
        else:
            out.append(Message(role="user", content=f"[{turn.speaker_name or turn.speaker_id}] {turn.text}"))
    return out


# (persona, system prompt, user message, history) -> the full message list of the call
ContextBuilder = Callable[[Persona, str, str, Sequence[HistoryTurn]], list[Message]]


def token_aware_context(
    *, context_limit: int = DEFAULT_CONTEXT_LIMIT, count: TokenCounter = estimate_counter, llm: LLM | None = None
) -> ContextBuilder:
    """Memory selection by :func:`furnace.llm.context.build_context`: the history
    fits ``context_limit × 0.85`` minus the fixed costs, counted by ``count`` (the model's own
    counter, injected by the runtime; the offline estimate by default); older turns are
    compressed (by ``llm`` when given, else extractively) and the last 4 stay verbatim."""

    def build(persona: Persona, system_prompt: str, user_message: str, history: Sequence[HistoryTurn]) -> list[Message]:
        return build_context(
            system_prompt=system_prompt,
            user_message=user_message,
            history=history_messages(persona, history),
            context_limit=context_limit,
            count=count,
            llm=llm,
            language=persona.language,
        ).messages

    return build


@lru_cache(maxsize=1)
def _default_context() -> ContextBuilder:
    return token_aware_context()


def _room_note(persona: Persona, group: Sequence[str]) -> str:
    others = [n for n in group if n != persona.name]
    if not others:
        return ""
    if persona.language == "zh":
        return (
            f"\n\n# 群聊\n你是群聊中的「{persona.name}」，同在群里的还有：{'、'.join(others)}。只以你自己的身份发言。"
        )
    return f"\n\n# Group chat\nYou are {persona.name} in a group chat with {', '.join(others)}. Speak only as yourself."


def _task_line(persona: Persona, instruction: str | None) -> str:
    if not instruction:
        return ""
    return f"\n\n（你的任务：{instruction}）" if persona.language == "zh" else f"\n\n(Your task: {instruction})"


def build_reply_request(
    persona: Persona,
    message: str,
    *,
    instruction: str | None = None,
    question: str | None = None,
    history: Sequence[HistoryTurn] = (),
    context: ContextBuilder | None = None,
    group: Sequence[str] = (),
    max_tokens: int | None = None,
    temperature: float = 0.7,
    seed: int = 0,
    attempt: int = 0,
    run_id: str | None = None,
) -> LLMRequest:
    """The REPLY request for one speaker (``attempt`` > 0 asks for a fresh sample on retry).

    ``question`` is ``message`` without its @mentions (:func:`furnace.arena.directives.strip_mentions`);
    it is an input only when it differs, so a message without mentions makes the same request as before."""
    build = context or _default_context()
    messages = build(
        persona,
        persona.system_prompt + _room_note(persona, group),
        message + _task_line(persona, instruction),
        history,
    )
    return LLMRequest(
        task=TaskKind.REPLY,
        messages=tuple(messages),
        temperature=temperature,
        seed=seed,
        max_tokens=max_tokens,
        inputs={
            "persona": served(persona.elixir).model_dump(mode="json"),  # as the prompt shows it: macros expanded
            "message": message,
            "instruction": instruction,
            **({"question": question} if question is not None and question != message else {}),
        },
        sample_index=attempt,
        run_id=run_id,
    )


_NAME_PREFIX = re.compile(r"^\s*\[?(?P<name>[^\]\n:：]{1,80})\]?\s*[:：]\s*")


def validate_reply(text: str, persona: Persona, *, ordinal: int | None = None) -> tuple[str, bool]:
    """Check and fix a reply; returns (text, corrected).

    Strips a leading ``Name:`` the model may have echoed, refuses an empty reply
    (an :class:`LLMMalformedOutput`: the speaker is recorded as failed), enforces the
    roll-call ordinal (one short line carrying exactly that number) and cuts the
    text to the persona's ``max_length``.
    """
    text = (text or "").strip()
    m = _NAME_PREFIX.match(text)
    if m and m.group("name").strip().casefold() in {persona.name.casefold(), persona.member_id.casefold()}:
        text = text[m.end() :].strip()
    if not text and ordinal is None:
        raise LLMMalformedOutput(f"{persona.name} gave an empty reply")
    corrected = False
    if ordinal is not None:
        first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
        line = first_line[:ROLL_CALL_MAX_CHARS]
        line, corrected = enforce_ordinal(line, ordinal, persona.language)
        corrected = corrected or line != text
        text = line
    limit = persona.elixir.constraints.max_length
    if limit and len(text) > limit:
        cut = text[:limit]
        space = cut.rfind(" ")
        text = cut[:space] if persona.language == "en" and space > limit // 2 else cut
        if ordinal is not None and str(ordinal) not in text:
            text = enforce_ordinal(text[: max(1, limit - 3)], ordinal, persona.language)[0]
        corrected = True
    return text, corrected


@dataclass(frozen=True)
class SpokenReply:
    """What :func:`speak` returns."""

    text: str
    corrected: bool
    raw: str
    model: str
    latency_s: float
    attempts: int = 1


def speak(
    persona: Persona,
    message: str,
    *,
    llm: LLM,
    instruction: str | None = None,
    question: str | None = None,
    ordinal: int | None = None,
    history: Sequence[HistoryTurn] = (),
    context: ContextBuilder | None = None,
    group: Sequence[str] = (),
    max_tokens: int | None = None,
    seed: int = 0,
    attempt: int = 0,
    run_id: str | None = None,
    on_delta: Callable[[str], None] | None = None,
) -> SpokenReply:
    """One persona answers one message: prompt + memory + REPLY call + validation."""
    request = build_reply_request(
        persona,
        message,
        instruction=instruction,
        question=question,
        history=history,
        context=context,
        group=group,
        max_tokens=max_tokens,
        seed=seed,
        attempt=attempt,
        run_id=run_id,
    )
    completion = llm.complete(request)
    text, corrected = validate_reply(completion.text, persona, ordinal=ordinal)
    if on_delta is not None:
        on_delta(text)
    return SpokenReply(
        text=text,
        corrected=corrected,
        raw=completion.text,
        model=completion.model,
        latency_s=completion.latency_s,
        attempts=completion.attempts,
    )
