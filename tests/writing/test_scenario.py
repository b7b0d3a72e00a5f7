"""The users' scenario: generate, three revisions, preferences learned and used next time."""

from __future__ import annotations

import pytest

from furnace.domain.render import render_prompt
from furnace.domain.text import split_paragraphs
from furnace.llm.fakes import EchoLLM
from furnace.llm.offline.writing_text import count_emoji
from furnace.llm.seam import TaskKind
from furnace.writing.content import generate_content
from furnace.writing.revision import Step, revise

CASES = {
    "zh": ("skin-advisor", "夏季防晒推荐", ["太正式了，活泼点", "第三段太长，缩短一点", "加一个 emoji"]),
    "en": (
        "skin-advisor-en",
        "summer sunscreen picks",
        ["too formal, make it livelier", "the third paragraph is too long", "add an emoji"],
    ),
}


class Recording:
    """Wraps the offline engine and keeps every request (to inspect prompts)."""

    def __init__(self, inner):
        self.inner, self.model_name, self.calls = inner, inner.model_name, []

    def complete(self, request):
        self.calls.append(request)
        return self.inner.complete(request)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_three_revisions_learn_preferences_used_by_the_next_piece(lang, store, contents, engine, clock):
    persona_id, topic, suggestions = CASES[lang]
    llm = Recording(engine)
    content, v1 = generate_content(store, contents, llm, persona_id=persona_id, topic=topic, clock=clock)
    assert v1.version == 1 and len(split_paragraphs(v1.body)) >= 3
    assert count_emoji(v1.title + v1.body) == 0

    outcomes = [revise(store, contents, llm, content.id, s, clock=clock) for s in suggestions]
    assert [o.status for o in outcomes] == ["revised"] * 3
    assert [o.steps[-1] for o in outcomes] == [Step.PERSIST] * 3
    versions = contents.versions(content.id)
    assert [v.version for v in versions] == [1, 2, 3, 4]
    v2, v3, v4 = versions[1:]

    # three revision records with the exact before/after
    records = contents.revisions(content.id)
    assert [(r.from_version, r.to_version) for r in records] == [(1, 2), (2, 3), (3, 4)]
    for record, before, after, suggestion in zip(records, versions, versions[1:], suggestions, strict=False):
        assert record.suggestions == (suggestion,)
        assert (record.original_title, record.original_body) == (before.title, before.body)
        assert (record.revised_title, record.revised_body) == (after.title, after.body)

    # V2 really changed register; structure kept
    assert v2.body != v1.body
    assert len(split_paragraphs(v2.body)) == len(split_paragraphs(v1.body))

    # V3: third paragraph shorter, the others untouched
    p2, p3 = split_paragraphs(v2.body), split_paragraphs(v3.body)
    assert len(p3[2]) < len(p2[2])
    assert [p for i, p in enumerate(p3) if i != 2] == [p for i, p in enumerate(p2) if i != 2]
    assert v3.word_count < v2.word_count

    # V4: an emoji was added, nothing else
    assert count_emoji(v4.body) == 1 and count_emoji(v3.body) == 0
    assert v4.title == v3.title

    # assistant replies name the step and preview the text
    replies = [o.reply.content for o in outcomes]
    assert replies[0].startswith("V1→V2") and replies[2].startswith("V3→V4")
    assert v4.body[:20].replace("\n", " ") in " ".join(replies[2].split())

    # preferences learned: tone lively and emoji, in the persona's latest version
    latest = store.get_elixir(persona_id)
    prefs = {p.dimension: p for p in latest.style_preferences}
    assert prefs["tone"].value == "lively" and prefs["emoji"].value == "more"
    assert prefs["tone"].source_revision == records[0].id
    assert prefs["emoji"].source_revision == records[2].id
    assert latest.version > 1
    assert store.get_elixir(persona_id, 1).style_preferences == ()

    # ... and in the prompt of the next generated piece, which follows them
    llm.calls.clear()
    _, next_v1 = generate_content(store, contents, llm, persona_id=persona_id, topic=topic, clock=clock)
    [gen] = [c for c in llm.calls if c.task == TaskKind.GENERATE]
    system = gen.messages[0].content
    assert system == render_prompt(latest)
    assert "lively" in system and "emoji" in system
    assert count_emoji(next_v1.body) >= 1  # emoji preference followed
    assert next_v1.body != v1.body  # lively register, concise paragraphs


def test_revision_prompt_shows_original_and_asks_to_edit_only(store, contents, clock):
    content, v1 = generate_content(
        store,
        contents,
        __import__("furnace.llm.offline", fromlist=["x"]).OfflineEngine(),
        persona_id="skin-advisor-en",
        topic="summer sunscreen picks",
        clock=clock,
    )
    echo = EchoLLM()
    outcome = revise(store, contents, echo, content.id, "the third paragraph is too long", clock=clock, learn=False)
    assert outcome.status == "failed"  # echo text is not a {title, body} object
    [request] = echo.calls
    assert request.task == TaskKind.REVISE
    system, user = request.messages[0].content, request.messages[1].content
    assert "change only what they ask for" in system and "emoji habits" in system
    assert v1.title in user and v1.body in user and "1. the third paragraph is too long" in user
    assert request.json_schema["required"] == ["title", "body"]
