"""Token-aware context for long chats (docs/revision.md, "Memory for long chats"), for the arena and assistant.

Budget arithmetic (integers, floors; :class:`ContextBudget`)::

    total   = context_limit × 0.85 − fixed          fixed = tokens(system prompt) + tokens(user message)
    profile ≤ total × 0.20                           long-lived memory (about the user / persona)
    session ≤ total × 0.15                           memory of this session
    history = total − profile used − session used    the conversation itself

When the history does not fit, the older turns are compressed by the model
(COMPRESS task) into a summary while the newest turns — at least the last 4 —
stay verbatim. The summary is carried in a :class:`MemoryState` so the next
turn only compresses what is new. Whatever the model returns, the summary is
cut to its share: the context never exceeds the budget.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from furnace.llm.offline.engine import estimate_tokens
from furnace.llm.seam import LLM, LLMRequest, Message, TaskKind

log = logging.getLogger(__name__)

TokenCounter = Callable[[str], int]

SAFETY_PERCENT = 85
PROFILE_PERCENT = 20
SESSION_PERCENT = 15
KEEP_VERBATIM = 4
SUMMARY_RESERVE_PERCENT = 20  # of the history budget, kept for the summary when turns are dropped

_HEADERS = {
    "en": (
        "\n\n## What I remember about you\n",
        "\n\n## Notes from this session\n",
        "\n\n## Earlier in this conversation (summary)\n",
    ),
    "zh": ("\n\n## 关于你的长期记忆\n", "\n\n## 本次会话笔记\n", "\n\n## 之前的对话（摘要）\n"),
}


@lru_cache(maxsize=16384)
def estimate_counter(text: str) -> int:
    """The default :data:`TokenCounter`: the offline engine's deterministic estimate (CJK characters
    count one each), needing no tokenizer library. A runtime injects a model's own counter
    (:func:`furnace.adapters.tokens.counter_for`) where it has one.

    Remembered per text: a chat counts its whole history again for every reply (each speaker of
    every turn), and a text's count never changes."""
    return estimate_tokens(text) if text else 0


@dataclass(frozen=True)
class ContextBudget:
    """The token budget of one model call."""

    context_limit: int
    fixed_tokens: int

    @property
    def total(self) -> int:
        """Tokens available for memory and history: ``limit × 0.85 − fixed`` (never negative)."""
        return max(0, self.context_limit * SAFETY_PERCENT // 100 - self.fixed_tokens)

    @property
    def profile_cap(self) -> int:
        return self.total * PROFILE_PERCENT // 100

    @property
    def session_cap(self) -> int:
        return self.total * SESSION_PERCENT // 100

    def history_budget(self, profile_used: int, session_used: int) -> int:
        """What the history gets: the rest after the memories actually used."""
        return max(0, self.total - profile_used - session_used)


Turn = Message  # one chat message of the history (role user or assistant)


@dataclass(frozen=True)
class MemoryState:
    """The running summary: ``summary`` covers ``history[:covered]``."""

    summary: str = ""
    covered: int = 0


SummarySource = Literal["none", "model", "fallback", "previous"]
"""Where the summary of older turns came from (none, the model, the extractive fallback, the previous state)."""


@dataclass(frozen=True)
class BuiltContext:
    """The messages of one model call and how the budget was spent."""

    messages: list[Message]
    budget: ContextBudget
    profile_tokens: int
    session_tokens: int
    summary_tokens: int
    history_tokens: int
    verbatim_turns: int
    state: MemoryState
    summary_source: SummarySource = "none"

    @property
    def tokens_used(self) -> int:
        """Memory + summary + verbatim history tokens (the fixed costs excluded)."""
        return self.profile_tokens + self.session_tokens + self.summary_tokens + self.history_tokens


def fit_tokens(text: str, cap: int, count: TokenCounter, *, keep: Literal["start", "end"] = "start") -> str:
    """The longest prefix (``keep='start'``) or suffix of ``text`` within ``cap`` tokens."""
    if cap <= 0 or not text:
        return ""
    if count(text) <= cap:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        part = text[:mid] if keep == "start" else text[len(text) - mid :]
        if count(part) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] if keep == "start" else text[len(text) - lo :]


def _section(header: str, text: str, cap: int, count: TokenCounter, keep: Literal["start", "end"]) -> tuple[str, int]:
    """``header + text`` cut to ``cap`` tokens (empty when the text is empty or nothing fits)."""
    if not text.strip():
        return "", 0
    room = cap - count(header)
    body = fit_tokens(text.strip(), room, count, keep=keep) if room > 0 else ""
    if not body:
        return "", 0
    section = header + body
    while count(section) > cap and body:  # a counter that is not additive: trim until it fits
        body = body[:-1] if keep == "start" else body[1:]
        section = header + body
    return (section, count(section)) if body else ("", 0)


def compress_request(
    turns: Sequence[Message], *, target_tokens: int, previous_summary: str, language: str, seed: int = 0
) -> LLMRequest:
    """The COMPRESS request: summarise older turns (plus the previous summary) in ``target_tokens``."""
    transcript = "\n".join(f"{t.role}: {t.content}" for t in turns)
    if language == "zh":
        system = f"把下面较早的对话压缩成不超过 {target_tokens} 个 token 的摘要，保留事实、决定和用户的偏好。"
    else:
        system = (
            f"Compress the earlier conversation below into a summary of at most {target_tokens} tokens, "
            "keeping facts, decisions and the user's preferences."
        )
    user = (f"Previous summary:\n{previous_summary}\n\n" if previous_summary else "") + f"Turns:\n{transcript}"
    return LLMRequest(
        task=TaskKind.COMPRESS,
        messages=(Message(role="system", content=system), Message(role="user", content=user)),
        temperature=0.0,
        seed=seed,
        max_tokens=max(16, target_tokens),
        inputs={
            "turns": [{"role": t.role, "content": t.content} for t in turns],
            "target_tokens": target_tokens,
            "previous_summary": previous_summary,
            "language": language,
        },
    )


def _summarise(
    older: Sequence[Message], state: MemoryState, target: int, *, llm: LLM | None, language: str, seed: int
) -> tuple[str, SummarySource]:
    """A summary of ``older`` within ~``target`` tokens, reusing ``state`` when it covers a prefix."""
    if state.summary and state.covered == len(older):
        return state.summary, "previous"
    previous, new = ("", older)
    if state.summary and 0 < state.covered < len(older):
        previous, new = state.summary, older[state.covered :]
    request = compress_request(new, target_tokens=target, previous_summary=previous, language=language, seed=seed)
    if llm is not None:
        try:
            text = llm.complete(request).text.strip()
            if text:
                return text, "model"
        except Exception as err:  # the chat goes on with the extractive fallback
            log.warning("memory compression failed, using the extractive fallback: %s", err)
    import random

    from furnace.llm.offline.writing import compress

    return compress(request, random.Random(seed))[0], "fallback"


def build_context(
    *,
    system_prompt: str,
    user_message: str,
    history: Sequence[Message],
    context_limit: int,
    count: TokenCounter,
    profile_memory: str = "",
    session_memory: str = "",
    llm: LLM | None = None,
    state: MemoryState | None = None,
    language: str = "en",
    keep_verbatim: int = KEEP_VERBATIM,
    seed: int = 0,
) -> BuiltContext:
    """Assemble ``[system (+memories, summary), *verbatim turns, user]`` within the budget."""
    state = state or MemoryState()
    headers = _HEADERS.get(language, _HEADERS["en"])
    budget = ContextBudget(context_limit, count(system_prompt) + count(user_message))
    profile, profile_used = _section(headers[0], profile_memory, budget.profile_cap, count, "start")
    session, session_used = _section(headers[1], session_memory, budget.session_cap, count, "end")
    room = budget.history_budget(profile_used, session_used)

    sizes = [count(t.content) for t in history]
    summary_text, summary_used = "", 0
    source: SummarySource = "none"
    if sum(sizes) <= room:
        start = 0
        new_state = MemoryState()
    else:
        # The newest turns that fit next to a summary reserve; never fewer than keep_verbatim.
        reserve = room * SUMMARY_RESERVE_PERCENT // 100
        start, used = len(history), 0
        while start > 0 and (len(history) - start < keep_verbatim or used + sizes[start - 1] <= room - reserve):
            start -= 1
            used += sizes[start]
        turns_room = room - used
        older = history[:start]
        if older and turns_room > count(headers[2]):
            target = turns_room - count(headers[2])
            raw, source = _summarise(older, state, target, llm=llm, language=language, seed=seed)
            summary_text, summary_used = _section(headers[2], raw, turns_room, count, "end")
            new_state = MemoryState(summary=raw, covered=len(older))
        else:
            new_state = MemoryState()
    verbatim = list(history[start:])  # messages are frozen: the caller's are used as they are
    verbatim, history_used = _fit_verbatim(verbatim, sizes[start:], room - summary_used, count)
    system = system_prompt + profile + session + summary_text
    messages = [Message(role="system", content=system), *verbatim, Message(role="user", content=user_message)]
    return BuiltContext(
        messages=messages,
        budget=budget,
        profile_tokens=profile_used,
        session_tokens=session_used,
        summary_tokens=summary_used,
        history_tokens=history_used,
        verbatim_turns=len(verbatim),
        state=new_state,
        summary_source=source,
    )


def _fit_verbatim(turns: list[Message], sizes: list[int], room: int, count: TokenCounter) -> tuple[list[Message], int]:
    """Only when even the last turns exceed the room: cut the oldest ones from their start."""
    total = sum(sizes)
    turns, sizes = list(turns), list(sizes)
    while turns and total > room:
        over = total - room
        if sizes[0] <= over:
            total -= sizes.pop(0)
            turns.pop(0)
            continue
        text = fit_tokens(turns[0].content, sizes[0] - over, count, keep="end")
        if not text:
            total -= sizes.pop(0)
            turns.pop(0)
            continue
        size = count(text)
        turns[0] = Message(role=turns[0].role, content=text)
        total += size - sizes[0]
        sizes[0] = size
    return turns, total
