"""A round after this process's own round starts its edit call at once, from what the process knows;
the store's reads confirm that state while the model writes, and anything changed meanwhile drops
the early answer and asks again from the fresh state (furnace.writing.recent)."""

from __future__ import annotations

import threading
from typing import Any

from furnace.domain.elixir import edit
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import TaskKind
from furnace.writing.content import generate_content
from furnace.writing.revision import note_suggestion, revise, rollback


class ReadsWait:
    """The content store; while ``armed``, reading the latest version first waits for the edit's call."""

    def __init__(self, inner: Any, revise_started: threading.Event) -> None:
        self.inner, self.revise_started = inner, revise_started
        self.armed = False
        self.waited: list[bool] = []

    def get_version(self, content_id: str, version: int | None = None) -> Any:
        if self.armed and version is None:
            self.waited.append(self.revise_started.wait(10))
        return self.inner.get_version(content_id, version)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _counting(engine: Any, started: threading.Event | None = None) -> FakeLLM:
    def respond(request):
        if started is not None and request.task == TaskKind.REVISE:
            started.set()
        return engine.complete(request)

    return FakeLLM(respond=respond, model_name=engine.model_name)


def _revise_calls(llm: FakeLLM) -> list[Any]:
    return [r for r in llm.calls if r.task == TaskKind.REVISE]


def test_the_next_round_reads_while_the_model_writes(store, contents, engine, clock) -> None:
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    started = threading.Event()
    watched = ReadsWait(contents, started)
    llm = _counting(engine, started)
    first = revise(store, watched, llm, content.id, "加一个 emoji", clock=clock)
    assert first.status == "revised"
    started.clear()
    watched.armed = True  # from now on, the piece's latest version is read only once the edit call runs
    second = revise(store, watched, llm, content.id, "去掉 emoji", clock=clock)
    assert watched.waited and all(watched.waited)  # read first (as before), each wait would time out
    assert second.status == "revised" and second.revision.from_version == first.version.version
    assert len(_revise_calls(llm)) == 2  # the early call was confirmed: nothing asked twice


def test_rounds_with_learning_never_ask_twice(store, contents, engine, clock) -> None:
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    llm = _counting(engine)
    suggestions = ["太正式了，活泼点", "加一个 emoji", "第三段长一点", "去掉 emoji"]
    outcomes = [revise(store, contents, llm, content.id, s, clock=clock) for s in suggestions]
    assert [o.status for o in outcomes] == ["revised"] * 4
    assert store.get_elixir("skin-advisor").version > 1  # the persona learned (new versions) between rounds
    assert len(_revise_calls(llm)) == 4
    # each edit was asked of the persona as stored at that round's start
    for outcome, request in zip(outcomes, _revise_calls(llm), strict=True):
        assert f"V{outcome.revision.from_version}→V{outcome.revision.to_version}" in outcome.reply.content
        assert request.inputs["body"] == contents.get_version(content.id, outcome.revision.from_version).body


def test_a_persona_edited_meanwhile_drops_the_early_answer(store, contents, engine, clock) -> None:
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    llm = _counting(engine)
    revise(store, contents, llm, content.id, "加一个 emoji", learn=False, clock=clock)
    persona = store.get_elixir("skin-advisor")
    store.save_elixir(edit(persona, principles=[*persona.principles, "引用研究时给出来源"]))  # another window
    out = revise(store, contents, llm, content.id, "去掉 emoji", learn=False, clock=clock)
    early, asked_again = _revise_calls(llm)[1:]
    assert "引用研究时给出来源" not in early.messages[0].content  # the early call used the old persona...
    assert "引用研究时给出来源" in asked_again.messages[0].content  # ...its answer was dropped, asked again
    assert out.status == "revised" and out.revision.persona_version == persona.version + 1


class Elsewhere:
    """The same content data seen through another store object: what another process (another
    Runtime) writes, this one's knowledge does not hear of."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_piece_changed_meanwhile_is_edited_from_its_latest_version(store, contents, engine, clock) -> None:
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    here, llm = Elsewhere(contents), _counting(engine)
    revise(store, here, llm, content.id, "加一个 emoji", learn=False, clock=clock)
    other = FakeLLM(respond=engine.complete, model_name=engine.model_name)
    elsewhere = revise(store, contents, other, content.id, "第三段长一点", learn=False, clock=clock)
    out = revise(store, here, llm, content.id, "去掉 emoji", learn=False, clock=clock)
    early, asked_again = _revise_calls(llm)[1:]
    assert early.inputs["body"] != elsewhere.version.body  # the early call edited the version this process knew
    assert asked_again.inputs["body"] == elsewhere.version.body  # dropped; asked again on the latest version
    assert out.status == "revised" and out.revision.from_version == elsewhere.version.version
    assert out.revision.original_body == elsewhere.version.body


def test_a_noted_suggestion_or_a_rollback_starts_the_next_edit_from_the_store(store, contents, engine, clock) -> None:
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    llm = _counting(engine)
    revise(store, contents, llm, content.id, "加一个 emoji", learn=False, clock=clock)
    note_suggestion(contents, content.id, "第三段长一点", clock=clock)
    out = revise(store, contents, llm, content.id, "去掉 emoji", learn=False, clock=clock)
    assert out.revision.suggestions == ("第三段长一点", "去掉 emoji")  # both pending suggestions applied
    rollback(contents, content.id, 1, clock=clock)
    again = revise(store, contents, llm, content.id, "加一个 emoji", learn=False, clock=clock)
    assert again.revision.original_body == contents.get_version(content.id, 1).body
    assert len(_revise_calls(llm)) == 3  # neither needed a second ask: the process knew to read first
