"""Must hold: a roll call gives exactly one reply per member, in member order, each
with its own number — whatever the model tries — and never consults the supervisor."""

from __future__ import annotations

import re

import pytest

from furnace.arena.events import PlanCreated, RunFinished, SpeakerStarted
from furnace.arena.ordinals import enforce_ordinal, find_numbers
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.seam import LLMRequest, TaskKind

from .helpers import IDS, count, make_arena, numbers

ROLL_CALLS = ["@全体成员 全体都有！报数！", "@all count off!", "Sound off!"]


def offline_counting() -> FakeLLM:
    """The offline engine behind a FakeLLM, so that every call is recorded."""
    engine = OfflineEngine()
    return FakeLLM(respond=engine.complete, model_name=engine.model_name)


def assert_count_off(outcome, n: int = 4) -> None:
    replies = outcome.replies
    assert len(replies) == n, [r.text for r in replies]
    assert [r.member_id for r in replies] == IDS[:n]
    assert [r.index for r in replies] == list(range(n))
    assert [r.ordinal for r in replies] == list(range(1, n + 1))
    for i, reply in enumerate(replies, start=1):
        assert str(i) in reply.text, reply.text
        assert set(numbers(reply.text)) == {i}, f"reply {i} states other numbers: {reply.text!r}"
    assert not outcome.failures
    finished = [e for e in outcome.events if isinstance(e, RunFinished)]
    assert finished and finished[0].replies == n


@pytest.mark.parametrize("message", ROLL_CALLS)
def test_count_off_with_the_offline_engine(message: str) -> None:
    llm = offline_counting()
    arena = make_arena(llm)
    session = arena.create_session(IDS)
    outcome = arena.say(session.id, message)
    assert_count_off(outcome)
    assert count(llm.calls, TaskKind.PLAN) == 0
    assert count(llm.calls, TaskKind.REPLY) == 4


def _scrambled(request: LLMRequest) -> str:
    # Answers as if it were somebody else: the persona of member k claims number 5 - k,
    # sometimes in words, sometimes with an extra speaker's line.
    member = request.inputs["persona"]["id"]
    k = IDS.index(member) + 1
    wrong = 5 - k
    return {
        1: f"{wrong}号到！",
        2: f"Number {['zero', 'one', 'two', 'three', 'four'][wrong]}, present!",
        3: f"我是{wrong}号，{wrong + 1}号在后面",
        4: f"Present and accounted for!\nDee: {wrong}",
    }[k]


@pytest.mark.parametrize("message", ROLL_CALLS[:2])
def test_count_off_is_corrected_in_code_when_the_model_lies(message: str) -> None:
    llm = FakeLLM(respond=_scrambled)
    arena = make_arena(llm)
    session = arena.create_session(IDS)
    outcome = arena.say(session.id, message)
    assert_count_off(outcome)
    assert all(r.corrected for r in outcome.replies)
    assert count(llm.calls, TaskKind.PLAN) == 0


def test_count_off_with_answers_queued_out_of_order() -> None:
    # The model hands out replies in the wrong order (4, 3, 2, 1): order and numbers still hold.
    llm = FakeLLM(["4!", "3号", "2, sir", "one!"])
    arena = make_arena(llm)
    session = arena.create_session(IDS)
    outcome = arena.say(session.id, "@all count off!")
    assert_count_off(outcome)
    assert [r.text for r in outcome.replies] == ["1!", "2号", "3, sir", "4!"]
    assert [r.corrected for r in outcome.replies] == [True, True, True, True]


def test_a_correct_reply_keeps_its_persona_wording() -> None:
    llm = FakeLLM(respond=lambda r: f"Reporting for duty — number {IDS.index(r.inputs['persona']['id']) + 1}!")
    arena = make_arena(llm)
    outcome = arena.say(arena.create_session(IDS).id, "@all count off!")
    assert_count_off(outcome)
    assert outcome.replies[2].text == "Reporting for duty — number 3!"
    assert not any(r.corrected for r in outcome.replies)


def test_roll_call_task_reaches_the_model_as_instruction() -> None:
    llm = FakeLLM(respond=lambda r: "ok")
    arena = make_arena(llm)
    arena.say(arena.create_session(IDS).id, "@all count off!")
    instructions = [r.inputs["instruction"] for r in llm.calls]
    assert [re.findall(r"number (\d)", i)[0] for i in instructions] == ["1", "2", "3", "4"]
    assert set(llm.calls[0].inputs) == {"persona", "message", "instruction"}


@pytest.mark.parametrize("message", ["@all hello there", "@Bo what's for dinner?", "@全体成员 早上好", "stop", "继续"])
def test_deterministic_directives_make_no_supervisor_call(message: str) -> None:
    llm = FakeLLM(respond=lambda r: "hi")
    arena = make_arena(llm)
    session = arena.create_session(IDS)
    events = arena.say(session.id, message).events
    assert count(llm.calls, TaskKind.PLAN) == 0
    plans = [e.plan for e in events if isinstance(e, PlanCreated)]
    assert all(p.source == "directive" for p in plans)


def test_open_discussion_makes_exactly_one_supervisor_call() -> None:
    llm = offline_counting()
    arena = make_arena(llm)
    outcome = arena.say(arena.create_session(IDS).id, "Any tips for a food trip to Rome?")
    assert count(llm.calls, TaskKind.PLAN) == 1
    assert outcome.plan is not None and outcome.plan.source == "supervisor"
    assert outcome.plan.speakers[0].member_id == "bo"  # travel / food writing matches
    started = [e.member_id for e in outcome.events if isinstance(e, SpeakerStarted)]
    assert started == [s.member_id for s in outcome.plan.speakers]


@pytest.mark.parametrize(
    "text, ordinal, expected",
    [
        ("3号到！", 1, "1号到！"),
        ("一号到！", 1, "1号到！"),
        ("Number three, sir!", 2, "Number 2, sir!"),
        ("Present.", 3, "3! Present."),
        ("我们一起努力！", 2, "2！我们一起努力！"),
        ("第十二名", 4, "第4名"),
    ],
)
def test_enforce_ordinal(text: str, ordinal: int, expected: str) -> None:
    lang = "zh" if re.search(r"[\u4e00-\u9fff]", text) else "en"
    assert enforce_ordinal(text, ordinal, lang)[0] == expected


def test_find_numbers_ignores_ordinary_words() -> None:
    assert find_numbers("我们一起去吧") == []
    assert find_numbers("no one knows the way home") == []
