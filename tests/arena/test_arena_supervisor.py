"""The supervisor plans open discussion; an invalid or failed plan falls back."""

from __future__ import annotations

import pytest

from furnace.arena.directives import Directive, DirectiveKind
from furnace.arena.supervisor import PLAN_SCHEMA, build_plan_request, parse_plan
from furnace.domain.errors import InputError, LLMTimeout
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.seam import TaskKind

from .helpers import IDS, count, make_arena, make_store

OPEN = "What is the best way to plan a budget for a holiday?"


def _reply(request):
    if request.task is TaskKind.PLAN:
        raise AssertionError("unexpected PLAN")
    return f"{request.inputs['persona']['name']} here"


def arena_with_plan(plan_answer):
    """A FakeLLM whose PLAN call returns ``plan_answer`` and whose replies name the speaker."""

    def respond(request):
        if request.task is TaskKind.PLAN:
            if isinstance(plan_answer, BaseException):
                raise plan_answer
            return plan_answer
        return _reply(request)

    llm = FakeLLM(respond=respond)
    return llm, make_arena(llm)


def test_a_valid_plan_is_followed_in_its_order_with_its_tasks() -> None:
    plan = {
        "speakers": [{"member": "cy", "task": "Budget first."}, {"member": "bo", "task": "Where to go."}],
        "budget": {"max_speakers": 2, "max_tokens": 200},
    }
    llm, arena = arena_with_plan(plan)
    outcome = arena.say(arena.create_session(IDS).id, OPEN)
    assert [r.member_id for r in outcome.replies] == ["cy", "bo"]
    assert outcome.plan.source == "supervisor"
    replies = [c for c in llm.calls if c.task is TaskKind.REPLY]
    assert [c.inputs["instruction"] for c in replies] == ["Budget first.", "Where to go."]
    assert all(c.max_tokens == 200 for c in replies)


def test_the_budget_caps_the_number_of_speakers() -> None:
    plan = {"speakers": [{"member": m, "task": "t"} for m in ["dee", "ada", "bo"]], "budget": {"max_speakers": 2}}
    _, arena = arena_with_plan(plan)
    outcome = arena.say(arena.create_session(IDS).id, OPEN)
    assert [r.member_id for r in outcome.replies] == ["dee", "ada"]


@pytest.mark.parametrize(
    "bad",
    [
        {"speakers": [{"member": "zed", "task": "who?"}], "budget": {"max_speakers": 1}},  # unknown member
        {"speakers": [{"member": "bo", "task": "a"}, {"member": "bo", "task": "b"}], "budget": {"max_speakers": 2}},
        {"speakers": [], "budget": {"max_speakers": 1}},
        {"speakers": [{"member": "bo", "task": "  "}], "budget": {"max_speakers": 1}},
        {"speakers": [{"member": "bo", "task": "x"}], "budget": {"max_speakers": "many"}},
        "I think Bo should speak first.",  # not JSON
        ["bo", "ada"],
        LLMTimeout("supervisor timed out"),  # failing supervisor
        RuntimeError("supervisor crashed"),
    ],
)
def test_invalid_or_failed_plan_falls_back_to_the_primary_member(bad) -> None:
    llm, arena = arena_with_plan(bad)
    outcome = arena.say(arena.create_session(IDS).id, OPEN)
    assert outcome.plan.source == "fallback"
    assert [r.member_id for r in outcome.replies] == ["ada"]  # the primary member
    assert count(llm.calls, TaskKind.PLAN) == 1


def test_invalid_plan_falls_back_to_the_mentioned_member() -> None:
    llm, arena = arena_with_plan({"speakers": [{"member": "nobody", "task": "x"}], "budget": {"max_speakers": 1}})
    outcome = arena.say(arena.create_session(IDS).id, "@小周 what do you all think about index funds?")
    assert outcome.plan.source == "fallback"
    assert "unknown member" in outcome.plan.reason
    assert [r.member_id for r in outcome.replies] == ["cy"]


def test_plan_request_is_invisible_structured_and_without_persona() -> None:
    store = make_store()
    members = [store.get_elixir(i) for i in IDS]
    request = build_plan_request(OPEN, members, Directive(kind=DirectiveKind.OPEN))
    assert request.task is TaskKind.PLAN
    assert request.json_schema == PLAN_SCHEMA
    assert "persona" not in request.inputs
    assert [m["id"] for m in request.inputs["members"]] == IDS
    assert request.messages[0].content.startswith("You are the invisible moderator")


def test_parse_plan_names_the_problem() -> None:
    with pytest.raises(InputError, match="unknown member 'x'"):
        parse_plan({"speakers": [{"member": "x", "task": "t"}], "budget": {}}, IDS, Directive(kind=DirectiveKind.OPEN))


@pytest.mark.parametrize(
    "message, first",
    [
        ("Any tips for a food trip to Rome?", "bo"),
        ("How do I tune a slow database query?", "ada"),
        ("个人理财和税务有什么要注意的？", "cy"),
        ("健身后怎么补充营养？", "dee"),
        ("Hello there!", "ada"),  # nothing matches: member order
    ],
)
def test_offline_plan_puts_matching_expertise_first(message: str, first: str) -> None:
    store = make_store()
    members = [store.get_elixir(i) for i in IDS]
    completion = OfflineEngine().complete(build_plan_request(message, members, Directive(kind=DirectiveKind.OPEN)))
    plan = parse_plan(completion.parsed, IDS, Directive(kind=DirectiveKind.OPEN))
    order = [s.member_id for s in plan.speakers]
    assert order[0] == first
    assert sorted(order) == sorted(IDS)  # then the rest
    zh = any("\u4e00" <= ch <= "\u9fff" for ch in message)
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in s.task) == zh for s in plan.speakers)


def test_offline_plan_puts_the_mentioned_member_first() -> None:
    store = make_store()
    members = [store.get_elixir(i) for i in IDS]
    directive = Directive(kind=DirectiveKind.OPEN, mentions=("dee",))
    completion = OfflineEngine().complete(
        build_plan_request("@Dee what do you all think of databases?", members, directive)
    )
    assert [s["member"] for s in completion.parsed["speakers"]][:2] == ["dee", "ada"]
