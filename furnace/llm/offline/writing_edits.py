"""Offline REVISE, the editor's requests beyond register and length: a question title or ending,
a call to action, a punchier or title-cased title, a subheading, a hook, a summary, splitting and
merging paragraphs, second or first person, plainer words, shorter sentences, no exclamation marks
or hashtags. (Concrete examples need facts about the topic: the rule engine refuses them.)

Each function takes the text it edits and returns the edited text, or raises :class:`CannotApply`
with the problem key (see :data:`furnace.writing.addressing.problem`); it never changes anything
outside what it was given. Pure and deterministic.
"""

from __future__ import annotations

import re

from furnace.llm.offline.writing_text import join_sentences, split_sentences, strip_emoji, title_case


class CannotApply(Exception):
    """An operation that cannot be carried out on its target (the message is the problem key)."""


_EMOJI_TAIL = re.compile(r"(?:\s*[\U0001F300-\U0001FAFF\u2600-\u27BF]\ufe0f?)+\s*$")
_EN_WH = re.compile(
    r"^(why|how|what|where|when|who|which)\s+(.+?)\s+(are|is|was|were|can|could|do|does|did|should|will|would|"
    r"has|have)\s+(.+)$",
    re.I,
)
_EN_QUESTION_START = re.compile(r"^(why|how|what|where|when|who|which|is|are|can|should|do|does|will|would)\b", re.I)
_ZH_QUESTION_WORD = re.compile(r"吗|什么|怎么|如何|为什么|为何|哪|几|多少|是否|能不能|要不要|该不该|可不可以")


def _tail(text: str) -> tuple[str, str]:
    """``text`` without its trailing emoji, and that tail."""
    m = _EMOJI_TAIL.search(text)
    return (text[: m.start()], m.group(0)) if m else (text, "")


def _core_title(title: str) -> str:
    """The main part of a title: before a colon, dash, question or exclamation mark (zh: also a comma)."""
    return re.split(r"\s*[：:—–？?！!，]\s*", strip_emoji(title).strip())[0].strip().rstrip("。.") or title.strip()


def question_title(title: str, language: str) -> str:
    """The title as a real question: "Why crows are so smart: …" → "Why Are Crows So Smart?",
    "夏季防晒推荐：…" → "夏季防晒推荐，你真的了解吗？"."""
    core = _core_title(title)
    if strip_emoji(title).strip().endswith(("?", "？")):
        raise CannotApply("already_question")
    if language == "zh":
        if _ZH_QUESTION_WORD.search(core):
            return core.rstrip("？?") + "？"
        return f"{core}，你真的了解吗？"
    m = _EN_WH.match(core)
    if m:
        wh, subject, aux, rest = m.groups()
        return title_case(f"{wh.capitalize()} {aux.lower()} {subject} {rest}") + "?"
    m = re.match(r"^how to\s+(.+)$", core, re.I)
    if m:
        return title_case(f"How Do You {m.group(1)}") + "?"
    if _EN_QUESTION_START.match(core):
        return title_case(core) + "?"
    return f"What Should You Know About {title_case(core)}?"


def punchy_title(title: str, language: str) -> str:
    """A shorter, livelier title: the part before the colon, with a hook (zh) or an exclamation (en)."""
    core = _core_title(title)
    new = f"{core}，看这篇就够了！" if language == "zh" else title_case(core) + "!"
    if new == title:
        raise CannotApply("title_short")
    return new


def title_case_title(title: str, language: str) -> str:
    if language == "zh":
        raise CannotApply("zh_case")
    new = title_case(title)
    if new == title:
        raise CannotApply("already_case")
    return new


def _closing(text: str, sentence: str, language: str) -> str:
    """``text`` with one more closing sentence, before any trailing emoji."""
    core, tail = _tail(text)
    if "\n" in core.strip():
        return core.rstrip() + "\n" + sentence + tail
    return join_sentences([*split_sentences(core, language), sentence], language) + tail


_QUESTIONS = {
    "zh": ["关于{t}，你有什么自己的经验吗？", "读到这里，你最想先试哪一条？"],
    "en": ["So, what's your own experience with {t}?", "Which of these will you try first?"],
}
_CALLS = {
    "zh": ["现在就挑一条试试吧，坚持一周，你会看到变化！", "别再等了，今天就开始，做完记得回来分享你的体会！"],
    "en": [
        "So pick one idea from this piece and try it this week — you'll see the difference.",
        "Don't wait for the perfect moment: start today, and share what you notice.",
    ],
}


def end_with_question(text: str, language: str, topic: str) -> str:
    """The paragraph ends with a question to the reader (one more sentence)."""
    core, _ = _tail(text)
    if core.strip().endswith(("?", "？")):
        raise CannotApply("already_question")
    table = _QUESTIONS["zh" if language == "zh" else "en"]
    existing = split_sentences(core, language)
    for template in table:
        sentence = template.format(t=topic)
        if sentence not in existing:
            return _closing(text, sentence, language)
    raise CannotApply("already_question")


def call_to_action(text: str, language: str) -> str:
    """The paragraph ends with an invitation to act (one more sentence)."""
    existing = [s.strip() for s in split_sentences(_tail(text)[0], language)]
    for sentence in _CALLS["zh" if language == "zh" else "en"]:
        if sentence not in existing:
            return _closing(text, sentence, language)
    raise CannotApply("already_cta")


def hook(text: str, language: str, topic: str) -> str:
    """A question before the first sentence of the opening."""
    if language == "zh":
        sentence = (
            f"你有没有想过，{topic}？" if _ZH_QUESTION_WORD.search(topic) else f"你有没有想过，{topic}到底有什么讲究？"
        )
    elif _EN_QUESTION_START.match(topic):
        sentence = f"Ever wondered {topic}?"
    else:
        sentence = f"Ever wondered what really matters in {topic}?"
    if text.lstrip().startswith(sentence):
        raise CannotApply("already_hook")
    return sentence + ("" if language == "zh" else " ") + text.lstrip()


def summary(text: str, language: str, topic: str) -> str:
    """One closing sentence that sums the piece up."""
    sentence = (
        f"总之，{topic}就看上面这几点。"
        if language == "zh"
        else f"In short, the points above are what matters most for {topic}."
    )
    if sentence in text:
        raise CannotApply("already_short")
    return _closing(text, sentence, language)


def no_exclamations(text: str, language: str, *, title: bool = False) -> str:
    """Exclamation marks become full stops (a title just loses them)."""
    if not re.search(r"[!！]", text):
        raise CannotApply("no_exclaim")
    if title:
        return re.sub(r"\s*[!！]+", "", text).strip()
    out = re.sub(r"\?[!！]+|[!！]+\?", "?", text)
    out = re.sub(r"？[!！]+|[!！]+？", "？", out)
    out = re.sub(r"！+", "。", out)
    return re.sub(r"!+", ".", out)


def no_hashtags(text: str) -> str:
    if not re.search(r"(?<![\w&])#[^\s#]+", text):
        raise CannotApply("no_hashtags")
    out = re.sub(r"\s*(?<![\w&])#[^\s#]+", "", text)
    return re.sub(r"[ \t]+(\n|$)", r"\1", out).strip()


_EN_YOU = [
    ("many readers", "you"),
    ("most readers", "you"),
    ("the reader", "you"),
    ("readers", "you"),
    ("everyone", "you"),
    ("one should", "you should"),
    ("each decision should be made", "make each decision"),
]
_ZH_YOU = [("许多读者", "你"), ("很多读者", "你"), ("读者", "你"), ("大家", "你"), ("人们", "你")]
_EN_ME = [
    ("This article examines", "I look at"),
    ("this article examines", "I look at"),
    ("It is hoped that this article provides", "I hope this piece provides"),
    (
        "The following guidance is based on professional experience",
        "What follows is based on my professional experience",
    ),
    ("this article", "this piece of mine"),
    ("the following principles are recommended", "I recommend the following principles"),
]
_ZH_ME = [
    ("本文将", "我将"),
    ("希望本文能够", "我希望这篇能够"),
    ("以下内容基于专业经验整理", "以下内容是我根据专业经验整理的"),
    ("本文", "我这篇"),
    ("建议遵循以下原则", "我建议遵循以下原则"),
    ("今天咱们", "今天我"),
]
_EN_PLAIN = [
    ("It is hoped that this article provides a useful reference", "Hopefully this helps"),
    ("each decision should be made in light of individual circumstances", "decide based on your situation"),
    ("should not be considered in isolation", "go together"),
    ("is not something that can be achieved overnight", "takes time"),
    ("the approach should be adjusted accordingly", "adjust as needed"),
    ("it is advisable to consult a qualified professional", "ask an expert"),
    ("it is important to understand", "know"),
    ("It should be noted that ", ""),
    ("is offered for your consideration", "is yours to use"),
    ("in light of", "given"),
    ("it is advisable to", "it helps to"),
    ("the fundamentals of", "the basics of"),
    ("utilize", "use"),
    ("approximately", "about"),
    ("commence", "start"),
    ("facilitate", "help"),
    ("subsequently", "later"),
    ("numerous", "many"),
    ("demonstrate", "show"),
    ("in order to", "to"),
    ("Furthermore, ", "Also, "),
]
_ZH_PLAIN = [
    ("希望本文能够为您提供有益的参考", "希望对你有用"),
    ("进行系统的说明", "讲清楚"),
    ("不宜割裂看待", "别分开看"),
    ("存在密切关联", "关系很密"),
    ("并非一蹴而就的事情", "急不来"),
    ("在条件允许的情况下，", "有条件的话，"),
    ("因人而异地调整方案", "因人调整"),
    ("综上所述，", "总之，"),
    ("值得注意的是，", "注意，"),
    ("在实际操作中，", "实际做时，"),
    ("以下内容基于专业经验整理，供您参考", "下面是经验之谈"),
    ("具体执行层面", "具体做法"),
]


def _replace_all(text: str, pairs: list[tuple[str, str]]) -> str:
    for old, new in pairs:  # in order: longer phrases come first in the tables
        if re.search(r"[A-Za-z]", old):
            pattern = re.compile(r"(?<![A-Za-z])" + re.escape(old) + r"(?![A-Za-z])", re.I)

            def repl(m: re.Match[str], new: str = new) -> str:
                return new[:1].upper() + new[1:] if m.group(0)[:1].isupper() and new else new

            text = pattern.sub(repl, text)
        else:
            text = text.replace(old, new)
    return text


def second_person(text: str, language: str) -> str:
    out = _replace_all(text, _ZH_YOU if language == "zh" else _EN_YOU)
    if out == text:
        raise CannotApply("no_third_person")
    return out


def first_person(text: str, language: str) -> str:
    out = _replace_all(text, _ZH_ME if language == "zh" else _EN_ME)
    if out == text:
        raise CannotApply("no_first_person")
    return out


def plain_words(text: str, language: str) -> str:
    out = _replace_all(text, _ZH_PLAIN if language == "zh" else _EN_PLAIN)
    out = re.sub(r"(^|[.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), out)
    if out == text:
        raise CannotApply("no_jargon")
    return out


_EN_BREAK = re.compile(r"[,;]\s+(?=(?:therefore|so|but|however|which means|and then|yet|thus|while)\b)|;\s+", re.I)
_ZH_BREAK = re.compile(r"[，；](?=(?:因此|所以|但是|但|不过|同时|而且|此外|并且|然后|另外|因而|于是))|；")


def shorter_sentences(text: str, language: str) -> str:
    """Long sentences split where a clause starts with a connective (or after a semicolon)."""
    zh = language == "zh"
    pattern = _ZH_BREAK if zh else _EN_BREAK
    out = []
    for sentence in split_sentences(text, language):
        parts = [p for p in pattern.split(sentence.strip()) if p.strip()]
        if len(parts) < 2:
            out.append(sentence)
            continue
        for i, part in enumerate(parts):
            part = part.strip()
            if i < len(parts) - 1 and not re.search(r"[。！？.!?]$", part):
                part += "。" if zh else "."
            if not zh:
                part = part[:1].upper() + part[1:]
            out.append(part)
    new = join_sentences(out, language)
    if _flat(new) == _flat(text) or len(out) == len(split_sentences(text, language)):
        raise CannotApply("short_already")
    return new


def _flat(text: str) -> str:
    return " ".join(text.split())


def split_paragraph(text: str, language: str) -> list[str]:
    """One paragraph as two, at the middle sentence."""
    if "\n" in text.strip():
        raise CannotApply("split_short")
    sentences = split_sentences(text, language)
    if len(sentences) < 2:
        raise CannotApply("split_short")
    half = (len(sentences) + 1) // 2
    return [join_sentences(sentences[:half], language), join_sentences(sentences[half:], language)]


def merge_paragraphs(first: str, second: str, language: str) -> str:
    if "\n" in first.strip() or "\n" in second.strip() or first.lstrip().startswith("#"):
        return first.rstrip() + "\n" + second.lstrip()
    return first.rstrip() + ("" if language == "zh" else " ") + second.lstrip()


_HEADINGS = {
    "zh": {"first": "## 先说基础", "middle": "## 具体怎么做", "last": "## 写在最后"},
    "en": {"first": "## The Basics", "middle": "## In Practice", "last": "## In Closing"},
}


def subheading(paragraphs: list[str], position: int, language: str) -> list[str]:
    """A heading line before ``paragraphs[position]``."""
    if position > 0 and paragraphs[position - 1].lstrip().startswith("#"):
        raise CannotApply("already_title")
    if paragraphs[position].lstrip().startswith("#"):
        raise CannotApply("already_title")
    table = _HEADINGS["zh" if language == "zh" else "en"]
    key = "first" if position <= 1 else "last" if position == len(paragraphs) - 1 else "middle"
    return [*paragraphs[:position], table[key], *paragraphs[position:]]
