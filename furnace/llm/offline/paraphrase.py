"""How the offline REPLY rules put a persona's principle in their own words (never quoting it).

A principle is an instruction to the persona ("Rate every finding by severity."); an answer shows the
persona following it. The REPLY rules say it in the engine's words: English principles become a
gerund phrase ("rating each finding by severity") with the engine's own word choices (its table
below: every → each, give → offer, …); Chinese principles get the engine's word choices (必须 → 一定要,
先 → 首先, …). The principle's text never appears verbatim in an answer.

A principle may name when it applies: "When asked about <topic>, <instruction>." (zh
"谈到<topic>时，<instruction>"). :func:`condition` splits it; the REPLY rules use such a principle only
for a message on that topic (every word of it, en; most of its character pairs, zh).

This table is the reply's own; the judge reads answers through a lexicon of its own (``lexicon.py``).
"""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_EN_WORDS = {
    "every": "each",
    "each": "every",
    "give": "offer",
    "gives": "offers",
    "say": "state",
    "state": "say",
    "explain": "make clear",
    "describe": "lay out",
    "ask": "invite",
    "suggest": "propose",
    "after": "once",
    "clearly": "plainly",
    "always": "consistently",
    "show": "present",
    "use": "employ",
    "write": "compose",
    "open": "begin",
    "start": "begin",
    "end": "finish",
    "keep": "hold",
    "check": "verify",
    "prefer": "favour",
    "tell": "inform",
    "name": "identify",
    "offer": "provide",
    "lead": "open",
    "cite": "reference",
    "flag": "mark",
    "treat": "regard",
    "translate": "render",
    "specific": "particular",
    "concrete": "tangible",
    "person": "individual",
    "student": "learner",
    "problem": "issue",
    "finding": "issue",
    "result": "outcome",
    "quote": "repeat",
    "improve": "strengthen",
    "never": "never",
}
_EN_PHRASES = {"rather than": "instead of", "not only": "not just", "point out": "flag up", "make sure": "see to it"}
_ZH_WORDS = {
    "必须": "一定要",
    "先": "首先",
    "再": "然后",
    "说明": "讲清",
    "给出": "提供",
    "明确": "清楚",
    "每个": "每一个",
    "每条": "每一条",
    "不推荐": "不去推荐",
    "讲清": "说明白",
    "写清楚": "交代清楚",
    "指出": "点出",
    "告诉": "告知",
    "建议": "提议",
    "提到": "讲到",
    "邀请": "请",
    "区分": "分清",
    "不确定": "拿不准",
    "具体": "实际",
    "举例": "打比方",
    "用料": "食材",
    "结尾": "收尾",
    "永远": "始终",
    "了解": "弄清",
    "不把": "不会把",
    "只谈": "只讲",
    "解释": "讲解",
    "举出": "列出",
    "夸大": "夸张",
    "不承诺": "不许诺",
    "不猜测": "不瞎猜",
    "按照": "依照",
    "按": "按照",
    "步骤": "步",
    "一定要": "务必",
}
_ZH_CHAR_WORDS = {
    "和": "与",
    "要": "需",
    "的": "之",
    "是": "乃",
    "在": "于",
    "把": "将",
    "就": "便",
    "也": "亦",
    "很": "颇",
}
_ZH_CHARS = re.compile("|".join(_ZH_CHAR_WORDS))
_NOT_VERBS = frozenset(
    _words(
        "a an the this that these those when if whenever while each every all any no one it its your my our "
        "their to in on at for by with of from as"
    )
)
_EN_CONDITION = re.compile(
    r"^\s*(?:when(?:ever)?|if)\s+(?:you\s+are\s+|you're\s+)?asked\s+about\s+(.+?),\s*(.+)$", re.I | re.S
)
_ZH_CONDITION = re.compile(r"^\s*(?:谈到|问到|说到|聊到)(.+?)时[，,]\s*(.+)$", re.S)
_EN_TABLE = re.compile(
    r"\b(" + "|".join(sorted(map(re.escape, [*_EN_PHRASES, *_EN_WORDS]), key=len, reverse=True)) + r")\b", re.I
)
_ZH_TABLE = re.compile("|".join(sorted(map(re.escape, _ZH_WORDS), key=len, reverse=True)))


def condition(principle: str) -> tuple[str | None, str]:
    """``(topic, instruction)`` of a principle that names when it applies, else ``(None, principle)``."""
    for pattern in (_EN_CONDITION, _ZH_CONDITION):
        found = pattern.match(principle)
        if found:
            return found.group(1).strip(), found.group(2).strip()
    return None, principle


def _swap_en(match: re.Match[str]) -> str:
    word = match.group(0)
    low = word.casefold()
    new = _EN_PHRASES.get(low) or _EN_WORDS.get(low, word)
    return new[0].upper() + new[1:] if word[0].isupper() else new


# two-syllable verbs stressed on the last syllable (and "quit"): their final consonant doubles
_DOUBLED = frozenset({
    "abet", "admit", "begin", "commit", "compel", "control", "deter", "emit", "equip", "expel", "forbid", "forget",
    "occur", "omit", "patrol", "permit", "prefer", "propel", "quit", "rebut", "recur", "refer", "regret", "submit",
    "transmit", "upset",
})  # fmt: skip


def gerund(verb: str) -> str:
    """exaggerate → exaggerating, cut → cutting, lie → lying, open → opening, begin → beginning."""
    low = verb.lower()
    if low.endswith("ie"):
        return verb[:-2] + "ying"
    if low.endswith("e") and not low.endswith(("ee", "ye", "oe")) and len(low) > 2:
        return verb[:-1] + "ing"
    one_syllable = len(re.findall(r"[aeiou]+", low)) == 1
    if low in _DOUBLED or (one_syllable and re.search(r"[^aeiou][aeiou][^aeiouwxy]$", low)):
        return verb + verb[-1] + "ing"
    return verb + "ing"


def _gerund(word: str) -> str:
    """:func:`gerund` of a word that is not one already (nor a number or a symbol)."""
    if word.casefold().endswith("ing") or not word.isalpha():
        return word
    return gerund(word)


def express_en(principle: str) -> str:
    """An English principle as a gerund phrase in the engine's words (no final stop)."""
    text = " ".join(principle.split()).rstrip(" .;:!")
    text = _EN_TABLE.sub(_swap_en, text)
    words = text.split(" ")
    if not words or not words[0]:
        return text
    if words[0].casefold() in ("never", "always", "consistently", "don't", "do") and len(words) > 1:
        head = "never" if words[0].casefold() in ("never", "don't") else "consistently"
        return " ".join([head, _gerund(words[1]), *words[2:]])
    if words[0].casefold() in _NOT_VERBS:
        if text.casefold() == " ".join(principle.split()).rstrip(" .;:!").casefold():  # nothing reworded
            text = " — ".join(text.split(" ", 1))
        return "holding to this: " + text[0].lower() + text[1:]
    return " ".join([_gerund(words[0]).lower(), *words[1:]])


def express_zh(principle: str) -> str:
    """A Chinese principle in the engine's words (no final stop)."""
    text = "".join(principle.split()).rstrip("。.；;！!")
    changed = _ZH_TABLE.sub(lambda m: _ZH_WORDS[m.group(0)], text)
    if changed == text:  # no word of the table: single characters in a more literary register
        changed = _ZH_CHARS.sub(lambda m: _ZH_CHAR_WORDS[m.group(0)], text)
    if changed == text:
        changed = "坚持" + text[:2] + "、" + text[2:]
    return changed


def express(principle: str, language: str) -> str:
    """The principle's instruction (a condition removed) in the engine's own words."""
    _, instruction = condition(principle)
    return express_zh(instruction) if language == "zh" else express_en(instruction)
