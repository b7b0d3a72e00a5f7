"""The directive classifier and the deterministic router (no model involved)."""

from __future__ import annotations

import pytest

from furnace.arena.directives import DirectiveKind, MemberName, classify
from furnace.arena.router import route

MEMBERS = [
    MemberName(id="ada", name="Ada"),
    MemberName(id="bo", name="Bo"),
    MemberName(id="cy", name="小周"),
    MemberName(id="dee", name="Dee Dee"),
]
IDS = [m.id for m in MEMBERS]


@pytest.mark.parametrize(
    "message, kind, mentions",
    [
        ("@全体成员 全体都有！报数！", DirectiveKind.ROLL_CALL, ()),
        ("全体都有，报数", DirectiveKind.ROLL_CALL, ()),
        ("@all count off!", DirectiveKind.ROLL_CALL, ()),
        ("Sound off, everyone!", DirectiveKind.ROLL_CALL, ()),
        ("ROLL CALL", DirectiveKind.ROLL_CALL, ()),
        ("@Ada @小周 报数", DirectiveKind.ROLL_CALL, ("ada", "cy")),
        ("＠全体成员 今天开会", DirectiveKind.ALL, ()),
        ("@everyone what's new?", DirectiveKind.ALL, ()),
        ("@Bo what should I cook tonight?", DirectiveKind.MENTION, ("bo",)),
        ("@dee 今天练什么？", DirectiveKind.MENTION, ("dee",)),
        ("@Dee Dee hi", DirectiveKind.MENTION, ("dee",)),
        ("@小周 @Ada 你们好", DirectiveKind.OPEN, ("ada", "cy")),  # mention + discussion cue
        ("@Bo what do you all think about Rome?", DirectiveKind.OPEN, ("bo",)),
        ("stop", DirectiveKind.STOP, ()),
        ("停！", DirectiveKind.STOP, ()),
        ("/stop", DirectiveKind.STOP, ()),
        ("继续", DirectiveKind.CONTINUE, ()),
        ("Go on.", DirectiveKind.CONTINUE, ()),
        ("Please don't stop the music", DirectiveKind.OPEN, ()),
        ("How do I tune a slow query?", DirectiveKind.OPEN, ()),
        ("email me at bo@example.com", DirectiveKind.OPEN, ()),
        ("一起讨论一下旅行计划", DirectiveKind.OPEN, ()),
    ],
)
def test_classify(message: str, kind: DirectiveKind, mentions: tuple[str, ...]) -> None:
    directive = classify(message, MEMBERS)
    assert directive.kind is kind
    assert directive.mentions == mentions


def test_roll_call_gives_fixed_ordinals_in_member_order() -> None:
    plan = route(classify("@全体成员 全体都有！报数！", MEMBERS), IDS, "@全体成员 全体都有！报数！")
    assert plan is not None and plan.source == "directive"
    assert [(s.member_id, s.ordinal) for s in plan.speakers] == [("ada", 1), ("bo", 2), ("cy", 3), ("dee", 4)]
    assert all(str(s.ordinal) in s.task for s in plan.speakers)


def test_roll_call_of_mentioned_members_numbers_them_in_member_order() -> None:
    message = "@小周 @Ada count off"
    plan = route(classify(message, MEMBERS), IDS, message)
    assert plan is not None
    assert [(s.member_id, s.ordinal) for s in plan.speakers] == [("ada", 1), ("cy", 2)]


def test_all_mention_and_control_routes() -> None:
    all_plan = route(classify("@all hello", MEMBERS), IDS, "@all hello")
    assert all_plan is not None and [s.member_id for s in all_plan.speakers] == IDS
    assert all(s.ordinal is None for s in all_plan.speakers)
    one = route(classify("@Bo hi", MEMBERS), IDS, "@Bo hi")
    assert one is not None and [s.member_id for s in one.speakers] == ["bo"]
    assert route(classify("stop", MEMBERS), IDS, "stop") is None
    assert route(classify("how are you?", MEMBERS), IDS, "how are you?") is None  # open → supervisor


def test_single_member_session_needs_no_plan() -> None:
    plan = route(classify("how are you?", MEMBERS[:1]), ["ada"], "how are you?")
    assert plan is not None and [s.member_id for s in plan.speakers] == ["ada"]


def test_public_names_resolve_and_the_pipeline_imports_first() -> None:
    import subprocess
    import sys

    import furnace.arena as arena

    for name in arena.__all__:
        assert getattr(arena, name) is not None
    # the persona pipeline (speaker) uses arena.ordinals: importing it first must not hit an import cycle
    code = "import furnace.arena.speaker, furnace.arena.runner; print('ok')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"
