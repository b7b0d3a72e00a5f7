"""Offline REVISE: apply recognised suggestions literally, leave everything else alone.

Inputs: ``title``, ``body``, ``suggestions`` (list of str, applied in order),
optional ``language``. Output: ``{"title", "body", "applied": [intent, ...], "note"}``.

Recognised intents (zh and en): register change (formal ↔ lively), shorten or
lengthen paragraph N (or the whole text), add or remove emoji, change the title
(to a quoted text when one is given). A suggestion with no recognised intent
leaves the text unchanged and the note says so.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from furnace.llm.offline.writing_text import (
    count_emoji,
    detect_language,
    join_paragraphs,
    join_sentences,
    paragraph_ref,
    shorten_sentences,
    split_paragraphs,
    split_sentences,
    strip_emoji,
    topic_emoji,
)
from furnace.llm.seam import LLMRequest


@dataclass(frozen=True)
class Intent:
    """One recognised edit: ``kind`` in lively/formal/shorten/lengthen/emoji_add/emoji_remove/title."""

    kind: str
    paragraph: int | None = None  # 1-based; -1 = last; None = whole text
    text: str | None = None  # a quoted new title


_P = re.IGNORECASE
_LIVELY = re.compile(
    r"太正式|不要.{0,4}正式|别.{0,4}正式|活泼|轻松|口语|有趣|俏皮|随意一点|"
    r"too formal|less formal|not so formal|livel|lively|more casual|casual|relaxed|"
    r"fun\b|funnier|friendlier|conversational",
    _P,
)
_FORMAL = re.compile(
    r"太随意|太口语|正式|严肃|专业一点|书面|稳重|too casual|more formal|formal|"
    r"more professional|less casual|serious",
    _P,
)
_SHORTEN = re.compile(
    r"太长|缩短|短一点|精简|删减|简短|简洁|too long|shorten|shorter|trim|condense|"
    r"more concise|cut down|tighten",
    _P,
)
_LENGTHEN = re.compile(
    r"太短|扩展|展开|加长|详细|长一点|多写|丰富|too short|longer|lengthen|expand|"
    r"more detail|elaborate",
    _P,
)
_EMOJI = re.compile(r"emoji|表情|😀|emoticon", _P)
_REMOVE = re.compile(r"去掉|删除|删掉|不要|别用|少用|少一点|remove|without|no emoji|fewer|drop|delete|get rid", _P)
_TITLE = re.compile(r"标题|title|headline", _P)
_QUOTED = re.compile(r"[「“\"『《]([^」”\"』》]{1,80})[」”\"』》]")


def detect_intents(suggestion: str) -> list[Intent]:
    """The edits a suggestion asks for, in a fixed order (register, length, emoji, title)."""
    intents: list[Intent] = []
    text = suggestion.strip()
    emoji_asked = bool(_EMOJI.search(text))
    title_asked = bool(_TITLE.search(text))
    if _LIVELY.search(text):
        intents.append(Intent("lively"))
    elif _FORMAL.search(text) and not title_asked:
        intents.append(Intent("formal"))
    if not emoji_asked:
        ref = paragraph_ref(text)
        if _SHORTEN.search(text) and not _LENGTHEN.search(text.replace("太长", "")):
            intents.append(Intent("shorten", ref))
        elif _LENGTHEN.search(text) and not title_asked:
            intents.append(Intent("lengthen", ref))
    if emoji_asked:
        kind = "emoji_remove" if _REMOVE.search(text) else "emoji_add"
        ref = paragraph_ref(text) if kind == "emoji_add" else None
        intents.append(Intent(kind, ref, "title" if title_asked and kind == "emoji_add" else None))
    elif title_asked:
        quoted = _QUOTED.search(text)
        intents.append(Intent("title", None, quoted.group(1).strip() if quoted else None))
    return intents


# Register phrase tables (formal → lively); the reverse direction uses them backwards.
_ZH_LIVELY = [
    ("是许多读者关心的话题", "大家肯定都关心"),
    ("本文将", "今天咱们"),
    ("本文", "这篇"),
    ("进行系统的说明", "好好聊一聊"),
    ("以下内容基于专业经验整理，供您参考", "下面都是实打实的经验，放心看"),
    ("首先，需要明确", "先说最基础的，搞清"),
    ("在实际操作中，应当", "平时要"),
    ("此外，", "还有哦，"),
    ("存在密切关联，不宜割裂看待", "关系可密切了，别分开看"),
    ("其次，", "接下来，"),
    ("在具体执行层面，", "说到具体怎么做，"),
    ("建议遵循以下原则", "记住这几条"),
    ("值得注意的是，", "要注意哦，"),
    ("因此需要", "所以要"),
    ("在条件允许的情况下，建议", "有条件的话，"),
    ("综上所述，", "总之，"),
    ("并非一蹴而就的事情", "急不来"),
    ("希望本文能够为您提供有益的参考", "希望这篇对你有帮助"),
    ("您", "你"),
    ("因此", "所以"),
    ("然而", "不过"),
    ("应当", "要"),
    ("非常", "超级"),
    ("例如", "比如"),
]
_EN_LIVELY = [
    ("is a subject many readers care about", "is something everyone has an opinion on"),
    ("This article examines", "Let's dig into"),
    (
        "The following guidance is based on professional experience and is offered for your consideration",
        "Everything here comes from real experience, so enjoy",
    ),
    ("it is important to understand", "you'll want to get"),
    ("In practice, ", "Day to day, "),
    ("Furthermore, ", "Plus, "),
    ("In addition, ", "Also, "),
    ("It should be noted that ", "Heads up: "),
    ("therefore", "so"),
    ("Where possible, it is advisable to", "If you can,"),
    ("In conclusion, ", "All in all, "),
    ("It is hoped that this article provides a useful reference", "Hope this helps you out"),
    ("is not something that can be achieved overnight", "takes a little time"),
    ("However, ", "But "),
    ("Second, ", "Next up, "),
    ("the following principles are recommended", "my golden rules"),
    ("utilize", "use"),
    ("approximately", "about"),
    ("it is", "it's"),
    ("do not", "don't"),
    ("cannot", "can't"),
    ("should not", "shouldn't"),
    ("you are", "you're"),
    ("we are", "we're"),
    ("there is", "there's"),
]
# Lively → formal phrases of the lively register (incl. the offline generator's own wording).
_ZH_FORMAL = [
    ("大家肯定都有话说", "许多读者都很关心"),
    ("今天咱们就从", "本文将从"),
    ("轻松聊一聊", "进行系统的说明"),
    ("都是实打实的经验，放心看", "以下内容基于专业经验整理，供您参考"),
    ("先说最基础的：", "首先，"),
    ("的门道要摸清", "的基本原则需要明确"),
    ("平时多看看自己的情况，合适的才是最好的", "在实际操作中，应当结合自身情况进行判断"),
    ("关系可密切了，别分开看", "存在密切关联，不宜割裂看待"),
    ("接下来是重点，记住这几条", "其次，建议遵循以下原则"),
    ("每个人情况不一样", "不同人群的需求存在差异"),
    ("按自己的需要灵活调整", "因人而异地调整方案"),
    ("拿不准的时候，问问专业人士也完全没问题", "在条件允许的情况下，建议咨询专业人士的意见"),
    ("希望这篇对你有帮助", "希望本文能够为您提供有益的参考"),
]
_EN_FORMAL = [
    ("Let's talk about", "This article discusses"),
    (
        "Everyone has an opinion on it, so here's a friendly take from someone who loves",
        "It is examined here from the perspective of",
    ),
    ("No jargon, just stuff that works", "The guidance below is practical and evidence-based"),
    ("First things first: get the basics of", "First, it is important to understand the fundamentals of"),
    (
        "Look at your own situation and go with what fits you",
        "Each decision should be made in light of individual circumstances",
    ),
    ("And hey, ", "Furthermore, "),
    ("go hand in hand, so keep both in mind", "are closely related and should be considered together"),
    ("Now for the good part, my golden rules", "Second, the following principles are recommended"),
    (
        "Everyone's different, so tweak things until they feel right for you",
        "Needs differ from person to person, so the approach should be adjusted accordingly",
    ),
    (
        "And if you're unsure, just ask a pro, there's no shame in that",
        "Where in doubt, it is advisable to consult a qualified professional",
    ),
    ("That's a wrap: ", "In conclusion, "),
    ("takes a little patience", "requires patience"),
    ("You've totally got this", "With care, good results are achievable"),
]
_ZH_LIVELY_OPENER, _EN_LIVELY_OPENER = "说真的，", "Honestly, "
_ZH_FORMAL_EXTRA = [("啦", ""), ("哦", ""), ("～", "。"), ("咱们", "我们"), ("超级", "非常")]


def _sub(text: str, old: str, new: str) -> str:
    """Replace ``old`` by ``new`` (case-insensitive for Latin text, keeping an initial capital)."""
    if not re.search(r"[A-Za-z]", old):
        return text.replace(old, new)
    before = r"(?<![A-Za-z])" if old[:1].isalpha() else ""
    after = r"(?![A-Za-z])" if old[-1:].isalpha() else ""
    pattern = re.compile(before + re.escape(old) + after, re.IGNORECASE)

    def repl(m: re.Match[str]) -> str:
        return new[:1].upper() + new[1:] if m.group(0)[:1].isupper() and new else new

    return pattern.sub(repl, text)


def _register(paragraphs: list[str], language: str, lively: bool) -> list[str]:
    table = _ZH_LIVELY if language == "zh" else _EN_LIVELY
    if lively:
        pairs = table
    else:  # reversing single words would misfire ("so", "about", "要"): only phrases and contractions go back
        reversible = [(b, a) for a, b in table if (len(b) >= 2 if language == "zh" else (" " in b.strip() or "'" in b))]
        pairs = (_ZH_FORMAL + reversible + _ZH_FORMAL_EXTRA) if language == "zh" else (_EN_FORMAL + reversible)
    pairs = sorted(pairs, key=lambda pair: -len(pair[0]))  # longest phrases first
    out = []
    for para in paragraphs:
        for old, new in pairs:
            para = _sub(para, old, new)
        out.append(para)
    if lively:
        out[-1] = re.sub(r"[。.]\s*$", "！" if language == "zh" else "!", out[-1])
        if out == paragraphs:  # nothing matched: still change the register audibly
            opener = _ZH_LIVELY_OPENER if language == "zh" else _EN_LIVELY_OPENER
            first = out[0]
            out[0] = opener + (first if language == "zh" else first[:1].lower() + first[1:])
    else:
        out = [p.replace("！", "。").replace("!", ".") for p in out]
        opener = _ZH_LIVELY_OPENER if language == "zh" else _EN_LIVELY_OPENER
        if out[0].startswith(opener):
            rest = out[0][len(opener) :]
            out[0] = rest[:1].upper() + rest[1:]
    return out


_EXTRA = {
    "zh": ["具体来说，这一步做好了，后面会省心很多。", "举个例子，很多人正是在这个环节上吃了亏，所以值得多留意。"],
    "en": [
        "To put it another way, getting this step right makes everything after it easier.",
        "For example, this is exactly where many people slip up, so it deserves extra attention.",
    ],
}


_EMOJI_TAIL = re.compile(r"(?:\s*[\U0001F300-\U0001FAFF\u2600-\u27BF]\ufe0f?)+\s*$")


def _resize(paragraph: str, language: str, shorten: bool, index: int) -> str:
    """Shorten (fewer/shorter sentences) or lengthen (one more sentence) a paragraph,
    keeping a trailing emoji where it was."""
    tail = _EMOJI_TAIL.search(paragraph)
    trailing = tail.group(0) if tail else ""
    core = paragraph[: len(paragraph) - len(trailing)]
    if "\n" in core:  # a list or line-broken block: lines are the units, line breaks stay
        lines = core.split("\n")
        lines = lines[: max(1, (len(lines) + 1) // 2)] if shorten else [*lines, _EXTRA[language][index % 2]]
        return "\n".join(lines) + trailing.rstrip()
    sentences = split_sentences(core, language)
    sentences = shorten_sentences(sentences, language) if shorten else [*sentences, _EXTRA[language][index % 2]]
    return join_sentences(sentences, language) + trailing.rstrip()


def _target_indexes(ref: int | None, count: int) -> list[int] | None:
    if ref is None:
        return list(range(count))
    index = count - 1 if ref == -1 else ref - 1
    return [index] if 0 <= index < count else None


_PROBLEMS = {
    "en": {
        "missing": "paragraph {n} does not exist (the text has {count})",
        "no_emoji": "the text has no emoji to remove",
        "unrecognised": "no edit recognised in {text!r}",
        "unknown": "unknown edit {kind}",
    },
    "zh": {
        "missing": "没有第 {n} 段（全文共 {count} 段）",
        "no_emoji": "文中没有可去掉的 emoji",
        "unrecognised": "没能从「{text}」中识别出具体的修改",
        "unknown": "未知的修改 {kind}",
    },
}


def _problem(language: str, key: str, **values: object) -> str:
    return _PROBLEMS["zh" if language == "zh" else "en"][key].format(**values)


def apply_intent(title: str, paragraphs: list[str], intent: Intent, language: str) -> tuple[str, list[str], str | None]:
    """Apply one intent; returns (title, paragraphs, problem) — problem is set when it could not apply."""
    if intent.kind in ("lively", "formal"):
        return title, _register(paragraphs, language, intent.kind == "lively"), None
    if intent.kind in ("shorten", "lengthen"):
        targets = _target_indexes(intent.paragraph, len(paragraphs))
        if targets is None:
            return title, paragraphs, _problem(language, "missing", n=intent.paragraph, count=len(paragraphs))
        out = list(paragraphs)
        for i in targets:
            out[i] = _resize(out[i], language, intent.kind == "shorten", i)
        return title, out, None
    if intent.kind == "emoji_add":
        mark = topic_emoji(title + " " + " ".join(paragraphs))
        sep = "" if language == "zh" else " "
        if intent.text == "title":
            return title + sep + mark, paragraphs, None
        targets = _target_indexes(intent.paragraph if intent.paragraph is not None else 1, len(paragraphs))
        if targets is None:
            return title, paragraphs, _problem(language, "missing", n=intent.paragraph, count=len(paragraphs))
        out = list(paragraphs)
        out[targets[0]] = out[targets[0]] + sep + mark
        return title, out, None
    if intent.kind == "emoji_remove":
        if count_emoji(title + "".join(paragraphs)) == 0:
            return title, paragraphs, _problem(language, "no_emoji")
        return strip_emoji(title), [strip_emoji(p) for p in paragraphs], None
    if intent.kind == "title":
        return (intent.text or _new_title(title, language)), paragraphs, None
    return title, paragraphs, _problem(language, "unknown", kind=intent.kind)


def _new_title(title: str, language: str) -> str:
    core = re.split(r"[：:，,！!？?]", title)[0].strip() or title
    return f"关于{core}，你需要知道的事" if language == "zh" else f"What You Need to Know About {core}"


def revise(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Apply the recognised edits of ``inputs.suggestions`` to ``inputs.title``/``inputs.body``."""
    title = str(request.inputs.get("title") or "")
    body = str(request.inputs.get("body") or "")
    suggestions = [str(s) for s in request.inputs.get("suggestions") or []]
    language = request.inputs.get("language") or detect_language(title + body)
    paragraphs = split_paragraphs(body) or [body]
    applied: list[str] = []
    problems: list[str] = []
    for suggestion in suggestions:
        intents = detect_intents(suggestion)
        if not intents:
            problems.append(_problem(language, "unrecognised", text=suggestion))
        for intent in intents:
            title, paragraphs, problem = apply_intent(title, paragraphs, intent, language)
            if problem:
                problems.append(problem)
            else:
                where = "" if intent.paragraph is None else f"@{intent.paragraph}"
                applied.append(intent.kind + where)
    new_body = join_paragraphs(paragraphs)
    if not applied:
        note = (
            ("原文保持不变：" if language == "zh" else "Text left unchanged: ")
            + ("；" if language == "zh" else "; ").join(problems)
            + ("。" if language == "zh" else ".")
        )
        new_body = body
    else:
        note = ("已修改：" if language == "zh" else "Applied: ") + ", ".join(applied)
        if problems:
            note += ("；未执行：" if language == "zh" else "; not applied: ") + "; ".join(problems)
    return "", {"title": title, "body": new_body, "applied": applied, "note": note}
