"""A turn reads the session's members and conversation as they are now, then makes one model call per
speaker (and one plan for open discussion): a member edited since the last turn (the app's editor) or
a turn driven elsewhere meanwhile is in those calls, and no call is made twice."""

from __future__ import annotations

from typing import Any

import pytest

from furnace.domain.elixir import edit
from furnace.llm.cache import CachedLLM, MemoryCallLedger
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import TaskKind

from .helpers import IDS, OPEN, make_arena, make_store, named


def _calls(ledger: MemoryCallLedger, run_id: str | None, task: TaskKind) -> int:
    """Calls of ``task`` the ledger holds for ``run_id``, served from the response cache or not."""
    return sum(1 for c in ledger.calls(run_id) if c.task == task.value)


@pytest.mark.parametrize(("message", "plans"), [(OPEN, 1), ("@all count off!", 0)])
def test_a_turn_after_a_member_edit_makes_one_call_a_speaker_with_the_edited_member(
    store, message: str, plans: int
) -> None:
    library, ledger = make_store(), MemoryCallLedger()
    model = FakeLLM(respond=named)
    arena = make_arena(CachedLLM(model, ledger=ledger), library, store)
    session = arena.create_session(IDS)
    arena.say(session.id, message)
    ada = library.get_elixir("ada")
    library.save_elixir(edit(ada, name="Ada Lovelace", principles=[*ada.principles, "Cite the benchmark."]))

    outcome = arena.say(session.id, message)
    assert _calls(ledger, outcome.run_id, TaskKind.REPLY) == len(IDS)  # one a speaker, none asked twice
    assert _calls(ledger, outcome.run_id, TaskKind.PLAN) == plans
    [asked] = [r for r in model.calls[-len(IDS) :] if r.task is TaskKind.REPLY and r.inputs["persona"]["id"] == "ada"]
    assert "Cite the benchmark." in asked.messages[0].content
    ada_reply = next(r for r in outcome.replies if r.member_id == "ada")
    assert ada_reply.name == "Ada Lovelace" and "Ada Lovelace says hi" in ada_reply.text  # a count-off numbers it
    assert store.replies(run_id=outcome.run_id)[0].member_version == ada.version + 1
    assert [r.member_id for r in outcome.replies] == IDS


def test_a_turn_driven_elsewhere_meanwhile_is_in_the_next_prompt(store) -> None:
    library, model = make_store(), FakeLLM(respond=named)
    here = make_arena(model, library, store)
    session = here.create_session(IDS)
    here.say(session.id, "@all count off!")
    other: Any = type("Other", (), {"__getattr__": lambda s, n: getattr(store, n)})()  # another process's store
    make_arena(FakeLLM(respond=named), library, other).say(session.id, "@all what did you do today?")
    outcome = here.say(session.id, "@all count off!")
    replies = [r for r in model.calls if r.task is TaskKind.REPLY]
    assert len(replies) == 2 * len(IDS)
    assert any("what did you do today?" in m.content for m in replies[-len(IDS)].messages)
    assert [r.member_id for r in outcome.replies] == IDS
    assert [r.turn for r in store.list_runs(session.id)] == [0, 1, 2]
