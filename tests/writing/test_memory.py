"""Token-aware memory: exact budget arithmetic, long chats, compression."""

from __future__ import annotations

import pytest

from furnace.adapters.tokens import counter_for
from furnace.domain.errors import LLMTimeout
from furnace.llm.context import (
    ContextBudget,
    MemoryState,
    build_context,
    fit_tokens,
)
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.offline.engine import estimate_tokens
from furnace.llm.seam import Message, TaskKind


def chars(text: str) -> int:
    """A counter where every character is one token keeps the arithmetic exact."""
    return len(text)


def test_budget_arithmetic_is_exact():
    b = ContextBudget(context_limit=32_000, fixed_tokens=1_500)
    assert b.total == 27_200 - 1_500 == 25_700
    assert (b.profile_cap, b.session_cap) == (5_140, 3_855)
    assert b.history_budget(5_140, 3_855) == 16_705
    assert b.history_budget(100, 0) == 25_600  # unused memory shares go to the history
    assert ContextBudget(1_000, 1_000).total == 0  # never negative
    odd = ContextBudget(context_limit=4_097, fixed_tokens=3)
    assert odd.total == 4_097 * 85 // 100 - 3 == 3_479 and odd.profile_cap == 695 and odd.session_cap == 521


def test_build_context_spends_exactly_the_shares():
    ctx = build_context(
        system_prompt="S" * 100,
        user_message="U" * 50,
        history=[],
        context_limit=1_000,
        count=chars,
        profile_memory="p" * 1_000,
        session_memory="s" * 1_000,
    )
    assert ctx.budget.total == 850 - 150 == 700
    assert (ctx.profile_tokens, ctx.session_tokens) == (140, 105)  # 20 % and 15 % of 700, header included
    system = ctx.messages[0].content
    assert system.startswith("S" * 100) and len(system) == 100 + 140 + 105
    assert system.endswith("s" * 10)  # session memory keeps its newest part
    assert "p" * 50 in system


def test_short_history_is_kept_whole_without_a_model_call():
    history = [Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i}") for i in range(6)]
    llm = FakeLLM()
    ctx = build_context(
        system_prompt="sys", user_message="hi", history=history, context_limit=10_000, count=chars, llm=llm
    )
    assert ctx.messages[1:-1] == history and ctx.summary_source == "none" and llm.calls == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sixty_turn_conversation_never_exceeds_the_budget_and_keeps_the_last_four(lang):
    engine = OfflineEngine()
    count = counter_for(engine.model_name)
    assert count("你好世界") == estimate_tokens("你好世界")
    line = (
        "我们来讨论防晒的第{i}个问题。这里有很多细节需要说明，比如指数、肤质和补涂的频率。"
        if lang == "zh"
        else "Let us discuss question {i} about sunscreen. There are many details, like SPF, skin type and reapplying."
    )
    history: list[Message] = []
    state = MemoryState()
    limit = 600
    for i in range(60):
        user = line.format(i=i)
        ctx = build_context(
            system_prompt="You are a skin-care advisor.",
            user_message=user,
            history=history,
            context_limit=limit,
            count=count,
            profile_memory="Prefers lively answers.",
            session_memory="Topic: sunscreen.",
            llm=engine,
            state=state,
            language=lang,
        )
        assert ctx.tokens_used <= ctx.budget.total
        whole = sum(count(m.content) for m in ctx.messages)
        assert whole <= limit * 85 // 100
        if len(history) >= 4:
            assert ctx.messages[-5:-1] == history[-4:]  # last 4 turns verbatim, in order
        state = ctx.state
        reply = f"({i}) " + line.format(i=i)
        history += [Message(role="user", content=user), Message(role="assistant", content=reply)]
    assert ctx.summary_source in ("model", "previous") and ctx.summary_tokens > 0
    assert ctx.verbatim_turns >= 4 and ctx.verbatim_turns < 120


def test_compression_is_incremental_and_falls_back_when_the_model_fails():
    engine = OfflineEngine()
    calls = FakeLLM(respond=engine.complete)
    history = [
        Message(role="user", content=f"Sentence number {i}. More words follow here to fill space.") for i in range(30)
    ]
    ctx = build_context(
        system_prompt="sys", user_message="now", history=history, context_limit=400, count=estimate_tokens, llm=calls
    )
    [req] = calls.calls
    assert req.task == TaskKind.COMPRESS and req.inputs["previous_summary"] == ""
    assert ctx.state.covered == len(history) - ctx.verbatim_turns
    # the same history again reuses the summary: no model call
    again = build_context(
        system_prompt="sys",
        user_message="now",
        history=history,
        context_limit=400,
        count=estimate_tokens,
        llm=calls,
        state=ctx.state,
    )
    assert len(calls.calls) == 1 and again.summary_source == "previous"
    # two more turns: only the new older turns go to the model, with the previous summary
    longer = history + [Message(role="assistant", content="Sentence extra. Filler.")] * 2
    build_context(
        system_prompt="sys",
        user_message="now",
        history=longer,
        context_limit=400,
        count=estimate_tokens,
        llm=calls,
        state=ctx.state,
    )
    assert calls.calls[-1].inputs["previous_summary"] == ctx.state.summary
    assert len(calls.calls[-1].inputs["turns"]) < len(longer) - 4
    failing = FakeLLM([LLMTimeout("slow")])
    fb = build_context(
        system_prompt="sys", user_message="now", history=history, context_limit=400, count=estimate_tokens, llm=failing
    )
    assert fb.summary_source == "fallback" and fb.summary_tokens > 0 and fb.tokens_used <= fb.budget.total


def test_a_runaway_summary_is_cut_to_its_share():
    history = [Message(role="user", content="x" * 200) for _ in range(20)]
    verbose = FakeLLM(respond=lambda r: "y" * 50_000)
    ctx = build_context(
        system_prompt="s", user_message="u", history=history, context_limit=2_000, count=chars, llm=verbose
    )
    assert ctx.tokens_used <= ctx.budget.total and ctx.summary_tokens > 0
    assert ctx.messages[-5:-1] == history[-4:]


def test_fit_tokens_keeps_start_or_end():
    assert fit_tokens("abcdef", 3, chars) == "abc" and fit_tokens("abcdef", 3, chars, keep="end") == "def"
    assert fit_tokens("abc", 0, chars) == ""
