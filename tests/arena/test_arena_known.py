"""The next turn in a session starts its first model call from what this process's last turn left
(members, conversation); the store's reads confirm that while the call runs, and a change made
meanwhile drops the early answer and starts again from the store."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from furnace.domain.elixir import edit
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import TaskKind

from .helpers import IDS, OPEN, count, make_arena, make_store, named


class Library:
    """The elixir store; while ``armed``, a persona read first waits for a model call to be running."""

    def __init__(self, inner: Any, calling: threading.Event) -> None:
        self.inner, self.calling = inner, calling
        self.armed = False
        self.waited: list[bool] = []

    def get_elixir(self, *args: Any, **kwargs: Any) -> Any:
        if self.armed:
            self.waited.append(self.calling.wait(10))
        return self.inner.get_elixir(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize(("message", "first"), [(OPEN, TaskKind.PLAN), ("@all count off!", TaskKind.REPLY)])
def test_the_next_turn_reads_while_its_first_call_runs(store, message: str, first: TaskKind) -> None:
    calling = threading.Event()

    def respond(request):
        if request.task is first:
            calling.set()
        return named(request)

    library = Library(make_store(), calling)
    llm = FakeLLM(respond=respond)
    arena = make_arena(llm, library, store)
    session = arena.create_session(IDS)
    arena.say(session.id, message)
    calling.clear()
    library.armed = True
    outcome = arena.say(session.id, message)
    assert library.waited and all(library.waited)  # read first (each wait would time out), as a cold turn does
    assert [r.member_id for r in outcome.replies] == IDS
    assert count(llm.calls, TaskKind.REPLY) == 8  # confirmed: no call was made twice
    assert count(llm.calls, TaskKind.PLAN) == (2 if first is TaskKind.PLAN else 0)


def _after_one_turn(store: Any) -> tuple[Any, FakeLLM, Any, Any]:
    """(library, model, arena, session) once this process has driven one addressed turn."""
    library, llm = make_store(), FakeLLM(respond=named)
    arena = make_arena(llm, library, store)
    session = arena.create_session(IDS)
    arena.say(session.id, "@all count off!")
    return library, llm, arena, session


def test_a_member_edited_meanwhile_drops_the_early_answer(store) -> None:
    library, llm, arena, session = _after_one_turn(store)
    ada = library.get_elixir("ada")
    library.save_elixir(edit(ada, principles=[*ada.principles, "Cite the benchmark."]))  # the app's editor
    outcome = arena.say(session.id, "@all count off!")
    replies = [r for r in llm.calls if r.task is TaskKind.REPLY]
    early, again = replies[4], replies[5]  # ada spoke first, from the persona this process knew, then again
    assert "Cite the benchmark." not in early.messages[0].content
    assert "Cite the benchmark." in again.messages[0].content
    assert len(replies) == 9 and [r.member_id for r in outcome.replies] == IDS
    assert store.replies(run_id=outcome.run_id)[0].member_version == ada.version + 1


def test_a_turn_driven_elsewhere_meanwhile_is_in_the_next_prompt(store) -> None:
    library, llm, here, session = _after_one_turn(store)
    elsewhere = make_arena(
        FakeLLM(respond=named), library, type("Other", (), {"__getattr__": lambda s, n: getattr(store, n)})()
    )
    elsewhere.say(session.id, "@all what did you do today?")  # another process's turn in the same session
    outcome = here.say(session.id, "@all count off!")
    last = [r for r in llm.calls if r.task is TaskKind.REPLY][-4]  # ada's prompt, asked again from the store
    assert any("what did you do today?" in m.content for m in last.messages)
    assert [r.member_id for r in outcome.replies] == IDS
    assert [r.turn for r in store.list_runs(session.id)] == [0, 1, 2]


def test_turns_without_changes_never_ask_twice(store) -> None:
    llm = FakeLLM(respond=named)
    arena = make_arena(llm, store=store)
    session = arena.create_session(IDS)
    for message in [OPEN, "@all count off!", OPEN, "@all what did you do today?"]:
        assert len(arena.say(session.id, message).replies) == 4
    assert (count(llm.calls, TaskKind.PLAN), count(llm.calls, TaskKind.REPLY)) == (2, 16)
    # each turn saw the whole conversation before it: the last prompt holds the first turn's message
    assert any(OPEN in m.content for m in [r for r in llm.calls if r.task is TaskKind.REPLY][-1].messages)
