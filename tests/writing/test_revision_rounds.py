"""A revision round reads the piece, its chat and its persona as they are now, then makes exactly one
edit call: whatever changed since the last round (the persona edited in the app's editor, the piece
revised elsewhere, a noted suggestion) is in that one call, and no call is made twice."""

from __future__ import annotations

from furnace.domain.elixir import edit
from furnace.llm.cache import CachedLLM, MemoryCallLedger
from furnace.llm.fakes import FakeLLM
from furnace.llm.seam import TaskKind
from furnace.writing.content import generate_content
from furnace.writing.revision import note_suggestion, revise


def _revise_calls(ledger: MemoryCallLedger) -> int:
    """Edit calls in the call ledger, served from the response cache or not."""
    return sum(1 for c in ledger.calls() if c.task == TaskKind.REVISE.value)


def test_a_round_after_a_persona_edit_makes_one_call_with_the_edited_persona(store, contents, engine, clock) -> None:
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    model, ledger = FakeLLM(respond=engine.complete, model_name=engine.model_name), MemoryCallLedger()
    llm = CachedLLM(model, ledger=ledger)
    first = revise(store, contents, llm, content.id, "太正式了，活泼点", clock=clock)
    assert first.status == "revised" and first.learned is not None and first.learned.persona_ref is not None
    learned = store.get_elixir("skin-advisor")  # the round's learned version
    store.save_elixir(edit(learned, principles=[*learned.principles, "引用研究时给出来源"]))  # the app's editor
    edited = store.get_elixir("skin-advisor")
    assert edited.version == learned.version + 1

    second = revise(store, contents, llm, content.id, "加一个 emoji", learn=False, clock=clock)
    assert _revise_calls(ledger) == 2  # one per round: nothing asked twice
    [request] = [r for r in model.calls if r.task == TaskKind.REVISE][1:]
    assert "引用研究时给出来源" in request.messages[0].content  # the edit made between the rounds
    assert request.inputs["body"] == first.version.body  # on the version the first round made
    assert second.status == "revised" and second.revision is not None
    assert second.revision.persona_version == edited.version
    assert f"V{first.version.version}→V{second.version.version}" in second.reply.content
    assert [v.version for v in contents.versions(content.id)] == [1, 2, 3]


def test_a_piece_revised_elsewhere_is_edited_from_its_latest_version_in_one_call(
    store, contents, engine, clock
) -> None:
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    here, ledger = FakeLLM(respond=engine.complete, model_name=engine.model_name), MemoryCallLedger()
    llm = CachedLLM(here, ledger=ledger)
    revise(store, contents, llm, content.id, "加一个 emoji", learn=False, clock=clock)
    elsewhere = revise(store, contents, engine, content.id, "第三段长一点", learn=False, clock=clock)  # another window
    out = revise(store, contents, llm, content.id, "去掉 emoji", learn=False, clock=clock)
    assert _revise_calls(ledger) == 2
    assert out.status == "revised" and out.revision is not None
    assert out.revision.from_version == elsewhere.version.version
    assert out.revision.original_body == elsewhere.version.body
    assert [r.inputs["body"] for r in here.calls if r.task == TaskKind.REVISE][-1] == elsewhere.version.body


def test_a_noted_suggestion_is_applied_by_the_next_round_in_its_one_call(store, contents, engine, clock) -> None:
    content, _ = generate_content(store, contents, engine, persona_id="skin-advisor", topic="夏季防晒推荐", clock=clock)
    model = FakeLLM(respond=engine.complete, model_name=engine.model_name)
    revise(store, contents, model, content.id, "加一个 emoji", learn=False, clock=clock)
    note_suggestion(contents, content.id, "第三段长一点", clock=clock)
    out = revise(store, contents, model, content.id, "去掉 emoji", learn=False, clock=clock)
    assert out.revision is not None and out.revision.suggestions == ("第三段长一点", "去掉 emoji")
    edits = [r for r in model.calls if r.task == TaskKind.REVISE]
    assert len(edits) == 2 and edits[-1].inputs["suggestions"] == ["第三段长一点", "去掉 emoji"]
