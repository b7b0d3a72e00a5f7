"""The shared persona pipeline: prompt assembly, memory selection, validation."""

from __future__ import annotations

import pytest

from furnace.adapters.tokens import count_tokens
from furnace.arena.speaker import (
    HistoryTurn,
    persona_from_elixir,
    resolve_persona,
    speak,
    token_aware_context,
    validate_reply,
)
from furnace.domain.elixir import Elixir
from furnace.domain.errors import LLMMalformedOutput
from furnace.domain.render import render_prompt
from furnace.llm.fakes import EchoLLM, FakeLLM
from furnace.llm.seam import Message, TaskKind

from .helpers import MEMBERS, make_store


def persona(i: int = 0, **changes):
    return persona_from_elixir(Elixir.model_validate({**MEMBERS[i], **changes}))


def test_request_carries_rendered_prompt_memory_task_and_structured_inputs() -> None:
    p = persona(0)
    echo = EchoLLM()
    history = [
        HistoryTurn(text="earlier question"),
        HistoryTurn(text="my answer", speaker_id="ada", speaker_name="Ada"),
        HistoryTurn(text="Bo's view", speaker_id="bo", speaker_name="Bo"),
    ]
    spoken = speak(p, "What now?", llm=echo, instruction="Answer briefly.", history=history, group=["Ada", "Bo"])
    [request] = echo.calls
    assert request.task is TaskKind.REPLY
    system = request.messages[0].content
    assert system.startswith(render_prompt(p.elixir)) and "group chat with Bo" in system
    assert [(m.role, m.content) for m in request.messages[1:]] == [
        ("user", "earlier question"),
        ("assistant", "my answer"),
        ("user", "[Bo] Bo's view"),
        ("user", "What now?\n\n(Your task: Answer briefly.)"),
    ]
    assert request.inputs == {
        "persona": p.elixir.model_dump(mode="json"),
        "message": "What now?",
        "instruction": "Answer briefly.",
    }
    assert spoken.text.startswith("system:")


def test_chinese_persona_gets_chinese_framing() -> None:
    p = persona(2)
    echo = EchoLLM()
    speak(p, "你好", llm=echo, instruction="简短回答。", group=["小周", "Dee"])
    request = echo.calls[0]
    assert "你是群聊中的「小周」" in request.messages[0].content
    assert request.messages[-1].content == "你好\n\n（你的任务：简短回答。）"


def test_memory_is_token_aware_and_keeps_the_last_turns_verbatim() -> None:
    p = persona(0)
    history = [HistoryTurn(text=f"turn {i}. " + "word " * 60) for i in range(40)]
    echo = EchoLLM()
    speak(p, "latest?", llm=echo, history=history, context=token_aware_context(context_limit=1200))
    messages = echo.calls[0].messages
    assert count_tokens("".join(m.content for m in messages)) <= 1200
    middle = [m.content for m in messages[1:-1]]
    assert middle[-4:] == [h.text for h in history[-4:]]  # the newest turns stay verbatim
    assert len(middle) < len(history)
    assert "turn 0." in messages[0].content  # older turns live on in the summary


def test_context_builder_is_swappable() -> None:
    echo = EchoLLM()
    speak(
        persona(0),
        "hi",
        llm=echo,
        history=[HistoryTurn(text="old")],
        context=lambda p, system, user, h: [Message(role="system", content=system), Message(role="user", content=user)],
    )
    assert len(echo.calls[0].messages) == 2


def test_validation() -> None:
    p = persona(0, constraints={"max_length": 20})
    with pytest.raises(LLMMalformedOutput):
        validate_reply("   ", p)
    assert validate_reply("Ada: hello", p) == ("hello", False)
    text, corrected = validate_reply("This sentence is certainly longer than twenty characters", p)
    assert len(text) <= 20 and corrected
    assert validate_reply("7\nand a second paragraph", persona(1), ordinal=2) == ("2", True)
    assert validate_reply("", persona(1), ordinal=2) == ("2!", True)


def test_resolve_persona_for_elixirs_and_unknown_ids() -> None:
    store = make_store()
    assert resolve_persona(store, "bo").name == "Bo"
    from furnace.domain.errors import NotFound

    with pytest.raises(NotFound):
        resolve_persona(store, "agt-nope")


def test_speak_reports_the_delta_once() -> None:
    seen = []
    spoken = speak(persona(1), "hi", llm=FakeLLM(["Hey there!"]), on_delta=seen.append)
    assert seen == ["Hey there!"] and spoken.text == "Hey there!"


def test_an_agent_member_speaks_with_its_synthesised_prompt() -> None:
    from furnace.domain.agent import Agent, agent_id_for
    from furnace.domain.lineage import Lineage

    store = make_store()
    parent = store.get_elixir("ada")
    lineage = Lineage(parents=(parent.ref,), operator="mutation", params={"rate": 0.2}, op_version="test-1")
    agent_id = agent_id_for(lineage.lineage_hash)
    child = parent.model_copy(update={"id": agent_id, "name": "Ada II"})
    store.save_agent(Agent(id=agent_id, elixir=child, lineage=lineage, system_prompt="SYNTHESISED PROMPT"))
    p = resolve_persona(store, agent_id)
    assert (p.member_id, p.name, p.system_prompt) == (agent_id, "Ada II", "SYNTHESISED PROMPT")
    echo = EchoLLM()
    speak(p, "hi", llm=echo)
    assert echo.calls[0].messages[0].content == "SYNTHESISED PROMPT"
