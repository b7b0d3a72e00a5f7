"""Invariants of the offline edits, property-tested over random pieces and instructions.

- paragraphs outside the target (and the title, unless it is the target) stay byte-identical;
- shortening and deleting keep whole sentences or whole leading clauses, never a fragment;
- the piece is never empty;
- an instruction that cannot be understood or applied changes nothing and says why.
"""

from __future__ import annotations

import random
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from furnace.domain.text import split_paragraphs
from furnace.llm.offline.writing import revise
from furnace.llm.offline.writing_text import split_sentences
from furnace.llm.seam import LLMRequest, Message, TaskKind
from furnace.writing.addressing import parse_instruction

EN_SENTENCES = [
    "Winter birdwatching starts with warm layers.",
    "Bring a thermos, because cold hands make for short mornings.",
    "Feeders attract finches, tits and the odd woodpecker.",
    "If you sit still, the birds come back within minutes.",
    "Binoculars with a wide field of view help in dim light.",
    "Keep a notebook, write down what you see, and note the time.",
    "Frozen ponds push ducks into the few open patches of water!",
    "Early mornings are quiet, cold and surprisingly busy.",
    "Don't miss our winter sale, buy your feeder today!",
    "This amazing guide is the best ever.",
]
ZH_SENTENCES = [
    "冬天观鸟要先穿暖和。",
    "带一壶热茶，因为手冻僵了就看不久。",
    "喂食器会引来雀类、山雀和偶尔的啄木鸟。",
    "如果你安静地坐着，鸟几分钟后就会回来。",
    "视野宽的望远镜在光线暗时更好用。",
    "准备一个本子，记下看到的鸟，再写上时间。",
    "结冰的池塘会把野鸭赶到仅有的几片水面上！",
    "清晨很安静，也很冷，却出奇地热闹。",
    "赶紧下单，限时包邮！",
    "这是史上最好用的观鸟神器。",
]
TITLES = {"en": ["Winter Birdwatching: A Gentle Start", "Birds in the Cold"], "zh": ["冬天观鸟：从零开始", "冬日观鸟"]}

EN_TARGETS = [
    "the intro",
    "the second paragraph",
    "paragraph 3",
    "the last paragraph",
    "paragraph 9",
    "it",
    "the title",
]
ZH_TARGETS = ["开头", "第二段", "第三段", "结尾", "第九段", "全文", "标题"]
EN_OPS = [
    "{t} is too long",
    "cut {t} to one sentence",
    "cut {t} in half",
    "expand {t}",
    "make {t} more formal",
    "make {t} livelier",
    "make {t} less formal",
    "{t} sounds like an ad",
    "add an emoji to {t}",
    "remove the emoji from {t}",
    "turn {t} into bullet points",
    "turn {t} into prose",
    "drop {t}",
    "{t}: replace 'cold' with 'chilly'",
    "{t} should sing",
]
ZH_OPS = [
    "{t}太长了",
    "{t}只留一句话",
    "{t}删掉一半",
    "{t}展开说说",
    "{t}正式一点",
    "{t}活泼一点",
    "{t}别那么正式",
    "{t}别那么像广告",
    "{t}加个 emoji",
    "{t}去掉表情",
    "{t}改成分点列出",
    "{t}不要分点，连成一段",
    "删掉{t}",
    "{t}里把「冷」改成「凉」",
    "{t}唱首歌",
]


@st.composite
def pieces(draw, language: str) -> tuple[str, str]:
    pool = EN_SENTENCES if language == "en" else ZH_SENTENCES
    sep = " " if language == "en" else ""
    count = draw(st.integers(1, 5))
    paragraphs = []
    for _ in range(count):
        sentences = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4, unique=True))
        paragraphs.append(sep.join(sentences))
    if draw(st.booleans()):  # sometimes a list paragraph
        i = draw(st.integers(0, count - 1))
        items = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=3, unique=True))
        paragraphs[i] = "\n".join(f"- {s}" for s in items)
    return draw(st.sampled_from(TITLES[language])), "\n\n".join(paragraphs)


def instructions(language: str):
    targets, ops = (EN_TARGETS, EN_OPS) if language == "en" else (ZH_TARGETS, ZH_OPS)
    return st.builds(lambda op, t: op.format(t=t), st.sampled_from(ops), st.sampled_from(targets))


def run(title: str, body: str, suggestion: str) -> dict:
    request = LLMRequest(
        task=TaskKind.REVISE,
        messages=(Message(role="user", content="-"),),
        inputs={"title": title, "body": body, "suggestions": [suggestion]},
    )
    return revise(request, random.Random(0))[1]


def _core(sentence: str) -> str:
    return re.sub(r"[\s\U0001F300-\U0001FAFF\u2600-\u27BF\ufe0f]+$", "", sentence.strip()).lstrip("- ")


def _whole_or_clause_prefix(sentence: str, originals: list[str]) -> bool:
    """An original sentence, or one cut right after a clause (and closed with a full stop)."""
    s = _core(sentence)
    for original in originals:
        o = _core(original)
        if s == o:
            return True
        stem = s.rstrip("。.")
        if o.startswith(stem) and len(stem) < len(o) and o[len(stem)] in "，,；;：:":
            return True
    return False


def check(language: str, title: str, body: str, suggestion: str) -> None:
    out = run(title, body, suggestion)
    before = split_paragraphs(body)
    after = split_paragraphs(out["body"])
    assert out["body"].strip() and out["title"].strip(), "never empty"
    if not out["applied"]:
        assert (out["title"], out["body"]) == (title, body), "a refused edit changes nothing"
        assert out["note"], "and says why"
        return
    assert (out["title"], out["body"]) != (title, body), "applied means changed"
    instruction = parse_instruction(suggestion, language)
    target = instruction.target
    kinds = {op.kind for op in instruction.operations}
    if target.kind == "title":
        assert out["body"] == body
        return
    if target.kind == "paragraph":
        assert out["title"] == title
        k = len(before) - 1 if target.index == -1 else target.index - 1
        if "delete" in kinds:
            assert after == before[:k] + before[k + 1 :]
            return
        assert len(after) == len(before)
        assert [p for i, p in enumerate(after) if i != k] == [p for i, p in enumerate(before) if i != k]
        changed = [k]
    else:
        changed = [i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b]
    if kinds & {"shorten", "delete"}:
        for i in changed:
            originals = [s for line in before[i].split("\n") for s in split_sentences(line, language)]
            for line in after[i].split("\n"):
                for sentence in split_sentences(line, language):
                    assert _whole_or_clause_prefix(sentence, originals), (sentence, before[i])


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(piece=pieces("en"), suggestion=instructions("en"))
def test_english_edits_keep_the_invariants(piece, suggestion):
    check("en", *piece, suggestion)


@SETTINGS
@given(piece=pieces("zh"), suggestion=instructions("zh"))
def test_chinese_edits_keep_the_invariants(piece, suggestion):
    check("zh", *piece, suggestion)


@SETTINGS
@given(piece=pieces("en"), suggestion=st.text(max_size=60))
def test_arbitrary_text_never_corrupts_the_piece(piece, suggestion):
    check("en", *piece, suggestion)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(suggestion=instructions("en"))
def test_through_the_chat_only_an_applied_edit_makes_a_version_or_teaches(suggestion):
    from furnace.domain.elixir import parse_elixir
    from furnace.llm.offline import OfflineEngine
    from furnace.storage.memory import MemoryStore
    from furnace.writing.content import generate_content
    from furnace.writing.content_memory import MemoryContentStore
    from furnace.writing.revision import revise as chat_revise

    from .conftest import EN_PERSONA, TickClock

    clock, engine = TickClock(), OfflineEngine()
    store, contents = MemoryStore(clock=clock), MemoryContentStore()
    store.save_elixir(parse_elixir(EN_PERSONA))
    content, v1 = generate_content(
        store, contents, engine, persona_id=EN_PERSONA["id"], topic="winter birds", clock=clock
    )
    outcome = chat_revise(store, contents, engine, content.id, suggestion, clock=clock)
    versions = contents.versions(content.id)
    persona = store.get_elixir(EN_PERSONA["id"])
    if outcome.status == "revised":
        assert (
            len(versions) == 2
            and versions[1].body.strip()
            and (versions[1].title, versions[1].body)
            != (
                v1.title,
                v1.body,
            )
        )
    else:
        assert outcome.status == "failed" and versions == [v1] and contents.revisions(content.id) == []
        assert persona.version == 1 and persona.style_preferences == ()
