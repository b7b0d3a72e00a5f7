"""Postconditions: did an edit do what its instruction asked? Checked before an edit is reported.

Every operation the revision chat understands (:mod:`furnace.writing.addressing`) has a check on
the text before and after the edit — a title asked to be a question ends with a question mark, a
replace leaves no old occurrence and changes nothing else, a cut shortens the named paragraph, a
split paragraph reads the same in two parts, … (the full list is in docs/revision.md). The checks
run on whatever wrote the edit, a real model or the offline engine; :func:`unmet` lists what was
not done, and the revision chat then saves nothing and says so.

Pure and deterministic (zh and en). When several suggestions are applied in one edit, the checks
that depend on their order (lengths, paragraph positions once their number changed) are skipped.
"""

from __future__ import annotations

import re

from furnace.domain.text import split_paragraphs
from furnace.llm.offline.writing_text import count_emoji, split_sentences, strip_emoji, title_case
from furnace.writing.addressing import Instruction, Operation, Target, locate_sentence, paragraph_position
from furnace.writing.content import word_count

_MESSAGES = {
    "en": {
        "shorter": "{where} is not shorter",
        "sentences": "{where} has {got} sentences, not at most {n}",
        "longer": "{where} is not longer",
        "changed": "{where} was not changed",
        "emoji_add": "{where} has no new emoji",
        "emoji_remove": "{where} still has emoji",
        "to_bullets": "{where} is not a list",
        "to_prose": "{where} is still a list",
        "word_left": '"{word}" is still in {where}',
        "no_replacement": '"{replacement}" is not in {where}',
        "more_changed": 'the edit changed more than "{word}"',
        "still_there": "{where} is still there",
        "retitle_text": 'the title is "{got}", not "{text}"',
        "retitle_same": "the title did not change",
        "question_title": "the title is not a question: {got}",
        "question": "{where} does not end with a question",
        "call_to_action": "{where} has no new call to action",
        "subheading": "no subheading was added{at}",
        "no_exclaim": "{where} still has exclamation marks",
        "example": "{where} has no new example",
        "split": "{where} was not split into two paragraphs with the same sentences",
        "merge": "{where} and the next paragraph were not merged into one with the same sentences",
        "second_person": '{where} does not address the reader as "you"',
        "first_person": "{where} is not in the first person",
        "hook": "{where} does not start with a new sentence before the old text",
        "plain": "{where} was not put in plainer words",
        "title_case": "the title is not in title case (or its words changed): {got}",
        "no_hashtags": "{where} still has hashtags",
        "short_sentences": "the sentences of {where} are not shorter",
        "summary": "no summary was added at the end",
    },
    "zh": {
        "shorter": "{where}没有变短",
        "sentences": "{where}有 {got} 句，不是最多 {n} 句",
        "longer": "{where}没有变长",
        "changed": "{where}没有改动",
        "emoji_add": "{where}没有新加 emoji",
        "emoji_remove": "{where}还有 emoji",
        "to_bullets": "{where}不是列表",
        "to_prose": "{where}还是列表",
        "word_left": "{where}中还有「{word}」",
        "no_replacement": "{where}中没有「{replacement}」",
        "more_changed": "修改不止替换了「{word}」",
        "still_there": "{where}还在",
        "retitle_text": "标题是「{got}」，不是「{text}」",
        "retitle_same": "标题没有变",
        "question_title": "标题不是疑问句：{got}",
        "question": "{where}没有以问句结尾",
        "call_to_action": "{where}没有新加号召读者行动的话",
        "subheading": "没有加上小标题{at}",
        "no_exclaim": "{where}还有感叹号",
        "example": "{where}没有新加例子",
        "split": "{where}没有拆成句子不变的两段",
        "merge": "{where}和下一段没有合并成句子不变的一段",
        "second_person": "{where}没有用“你”来称呼读者",
        "first_person": "{where}不是第一人称",
        "hook": "{where}开头没有在原文前新加一句",
        "plain": "{where}没有改得更通俗",
        "title_case": "标题不是首字母大写（或改了用词）：{got}",
        "no_hashtags": "{where}还有话题标签",
        "short_sentences": "{where}的句子没有变短",
        "summary": "结尾没有加上总结",
    },
}

_QUESTION_END = re.compile(r"[?？]\s*[\"'”’」）)]*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)、])\s+", re.M)
_HASHTAG = re.compile(r"(?<![\w&])#[^\s#]+")
_EXCLAIM = re.compile(r"[!！]")
_MARKERS = {
    "call_to_action": {
        "en": r"\b(?:try|start|begin|pick|choose|share|tell|join|let's|don't wait|go ahead|take|give it a (?:go|try)|"
        r"today|this week|right now|act|make)\b",
        "zh": r"试试|不妨|开始|行动|马上|现在就|今天就|一起|动起来|别再等|分享|告诉|留言|评论|关注|收藏|赶紧|挑一|选一",
    },
    "example": {
        "en": r"\bfor (?:example|instance)\b|\bsuch as\b|\be\.g\.|\bimagine\b|\bsay you\b|\btake\b.*\bexample\b",
        "zh": r"比如|例如|举个例子|举例来说|譬如|拿.{1,12}来说|打个比方",
    },
    "summary": {
        "en": r"\b(?:in short|in summary|to sum up|summing up|tl;?dr|the takeaway|key takeaways?|bottom line|"
        r"all in all|in a nutshell|to recap|in sum)\b",
        "zh": r"总之|总结|一句话|简单来说|概括|划重点|归根结底|说到底|总的来说",
    },
    "second_person": {"en": r"\b(?:you|your|yours|yourself|you're|you'll|you've|you'd)\b", "zh": r"你|您"},
    "first_person": {"en": r"\b(?:I|me|my|mine|I'm|I've|I'll|I'd|we|our|us|we're)\b", "zh": r"我"},
}
_LENGTH_OPS = frozenset({"shorten", "expand", "plain", "short_sentences"})
_COUNT_OPS = frozenset({"delete", "split", "merge", "subheading"})


def _marker(kind: str, language: str) -> re.Pattern[str]:
    flags = 0 if kind == "first_person" else re.I  # "I" is a pronoun only as a capital
    return re.compile(_MARKERS[kind]["zh" if language == "zh" else "en"], flags)


def _flat(text: str, language: str) -> str:
    """Whitespace-normalised text (zh: no whitespace at all), for "the same sentences" comparisons."""
    return re.sub(r"\s+", "", text) if language == "zh" else " ".join(text.split())


def _core(text: str) -> str:
    return strip_emoji(text).strip()


def is_question(text: str) -> bool:
    """True when ``text`` (trailing emoji aside) ends with a question mark."""
    return bool(_QUESTION_END.search(_core(text)))


def is_heading(paragraph: str) -> bool:
    """A markdown heading, or one short line without sentence-ending punctuation."""
    line = paragraph.strip()
    if "\n" in line or not line:
        return False
    if line.startswith("#"):
        return True
    return len(line) <= 40 and not re.search(r"[.!?。！？]$", line) and len(line.split()) <= 8


def _word_pattern(words: list[str]) -> re.Pattern[str]:
    """Any of ``words`` (longest first; whole words for Latin text, case-insensitive)."""
    parts = []
    for word in sorted({w for w in words if w}, key=len, reverse=True):
        before = r"(?<![A-Za-z])" if word[:1].isalpha() and word[:1].isascii() else ""
        after = r"(?![A-Za-z])" if word[-1:].isalpha() and word[-1:].isascii() else ""
        parts.append(before + re.escape(word) + after)
    return re.compile("|".join(parts), re.I)


def _new_sentences(before: str, after: str, language: str) -> list[str]:
    old = {_flat(s, language) for s in split_sentences(before, language)}
    return [s for s in split_sentences(after, language) if _flat(s, language) not in old]


class _Piece:
    """A title and its paragraphs."""

    def __init__(self, title: str, body: str) -> None:
        self.title = title
        self.body = body
        self.paragraphs = split_paragraphs(body) or [body]

    def whole(self) -> str:
        return self.title + "\n\n" + self.body


def _positions(target: Target, before: _Piece, language: str) -> int | None:
    """The 0-based paragraph of a paragraph or sentence target, in the text before the edit."""
    if target.kind == "paragraph":
        return paragraph_position(target, len(before.paragraphs))
    if target.kind == "sentence":
        found = locate_sentence(before.paragraphs, target.quote or "", language)
        return found[0] if found else None
    return None


def _scopes(target: Target, before: _Piece, after: _Piece, language: str) -> tuple[str, str] | None:
    """The target's text before and after the edit; None when it cannot be told apart any more."""
    if target.kind == "title":
        return before.title, after.title
    if target.kind == "whole":
        return before.whole(), after.whole()
    position = _positions(target, before, language)
    if position is None or len(after.paragraphs) != len(before.paragraphs):
        return None
    return before.paragraphs[position], after.paragraphs[position]


def _check(
    instruction: Instruction, op: Operation, before: _Piece, after: _Piece, alone: bool
) -> tuple[str, dict[str, object]] | None:
    """The key and values of the message saying ``op`` was not done; None when it was."""
    language = instruction.language
    target = instruction.target
    where = target.describe(language)
    kind = op.kind
    same_count = len(after.paragraphs) == len(before.paragraphs)
    position = _positions(target, before, language)
    if target.kind == "whole" and kind in ("question", "call_to_action"):
        target, position = Target("paragraph", -1), len(before.paragraphs) - 1

    if kind == "retitle":
        if op.text:
            wanted = op.text.strip().strip("「」“”\"'")
            return None if after.title.strip() == wanted else ("retitle_text", {"got": after.title, "text": wanted})
        return None if after.title != before.title else ("retitle_same", {})
    if kind == "question" and target.kind == "title":
        return None if is_question(after.title) else ("question_title", {"got": after.title})
    if kind == "title_case":
        ok = after.title.casefold() == before.title.casefold() and after.title == title_case(after.title)
        return None if ok and after.title != before.title else ("title_case", {"got": after.title})
    if kind == "fix_word":
        return _check_fix(instruction, op, before, after, where)
    if kind in _COUNT_OPS:
        if not alone and not same_count and len(after.paragraphs) - len(before.paragraphs) not in (-1, 1):
            return None  # several edits changed the paragraphs: their positions cannot be followed
        return _check_count(instruction, op, before, after, where, position)
    if kind == "hook":
        old, new = before.paragraphs[0], after.paragraphs[0] if same_count or alone else ""
        ok = _flat(old, language) in _flat(new, language) and _flat(new, language).endswith(_flat(old, language))
        return None if ok and len(_flat(new, language)) > len(_flat(old, language)) else ("hook", {"where": where})
    if kind == "summary":
        old, new = before.paragraphs[-1], after.paragraphs[-1]
        added = _new_sentences(old, new, language) if same_count else split_sentences(new, language)
        ok = any(_marker("summary", language).search(s) for s in added)
        return None if ok else ("summary", {})

    scopes = _scopes(target, before, after, language)
    if scopes is None:
        return None
    old, new = scopes
    if kind in _LENGTH_OPS and not alone:
        return None
    if kind == "shorten":
        if op.sentences is not None and target.kind == "whole":  # each paragraph to N sentences
            got = max(len(split_sentences(_core(p), language)) for p in after.paragraphs)
            return None if got <= op.sentences else ("sentences", {"where": where, "got": got, "n": op.sentences})
        if op.sentences is not None and target.kind == "paragraph":
            got = len(split_sentences(_core(new), language))
            return None if got <= op.sentences else ("sentences", {"where": where, "got": got, "n": op.sentences})
        return None if word_count(new, language) < word_count(old, language) else ("shorter", {"where": where})
    if kind == "expand":
        return None if word_count(new, language) > word_count(old, language) else ("longer", {"where": where})
    if kind in ("formal", "casual", "lively", "less_ad", "punchy"):
        return None if new != old else ("changed", {"where": where})
    if kind == "plain":
        ok = new != old and word_count(new, language) <= word_count(old, language)
        return None if ok else ("plain", {"where": where})
    if kind == "emoji_add":
        return None if count_emoji(new) > count_emoji(old) else ("emoji_add", {"where": where})
    if kind == "emoji_remove":
        return None if count_emoji(new) == 0 else ("emoji_remove", {"where": where})
    if kind == "to_bullets":
        return None if _BULLET.search(new) else ("to_bullets", {"where": where})
    if kind == "to_prose":
        return None if not _BULLET.search(new) else ("to_prose", {"where": where})
    if kind == "question":
        return None if is_question(new) else ("question", {"where": where})
    if kind in ("call_to_action", "example"):
        added = _new_sentences(old, new, language)
        ok = any(_marker(kind, language).search(s) for s in added)
        return None if ok else (kind, {"where": where})
    if kind in ("second_person", "first_person"):
        marker = _marker(kind, language)
        return None if len(marker.findall(new)) > len(marker.findall(old)) else (kind, {"where": where})
    if kind == "no_exclaim":
        return None if not _EXCLAIM.search(new) else ("no_exclaim", {"where": where})
    if kind == "no_hashtags":
        return None if not _HASHTAG.search(new) else ("no_hashtags", {"where": where})
    if kind == "short_sentences":

        def mean(text: str) -> float:
            sentences = split_sentences(" ".join(text.split()), language) or [text]
            return sum(word_count(s, language) for s in sentences) / len(sentences)

        ok = mean(new) < mean(old) and word_count(new, language) <= word_count(old, language) + len(old) // 20 + 2
        return None if ok else ("short_sentences", {"where": where})
    return None


def _check_fix(
    instruction: Instruction, op: Operation, before: _Piece, after: _Piece, where: str
) -> tuple[str, dict[str, object]] | None:
    """A replace leaves no old occurrence in its target, puts the new word there, and changes nothing else."""
    language = instruction.language
    scopes = _scopes(instruction.target, before, after, language)
    if scopes is None:
        scopes = before.whole(), after.whole()
    old, new = scopes
    word = op.word or ""
    if _word_pattern([word]).search(new) and not (op.replacement and word.casefold() in op.replacement.casefold()):
        return "word_left", {"word": word, "where": where}
    if not op.replacement:
        return None
    if not _word_pattern([op.replacement]).search(new):
        return "no_replacement", {"replacement": op.replacement, "where": where}
    both = _word_pattern([word, op.replacement])
    if _flat(both.sub("\x00", before.whole()), language) != _flat(both.sub("\x00", after.whole()), language):
        return "more_changed", {"word": word}
    return None


def _check_count(
    instruction: Instruction,
    op: Operation,
    before: _Piece,
    after: _Piece,
    where: str,
    position: int | None,
) -> tuple[str, dict[str, object]] | None:
    """Delete, split, merge and subheading: one paragraph fewer or more, the rest as it was."""
    language = instruction.language
    old, new = before.paragraphs, after.paragraphs
    kind = op.kind
    if kind == "delete":
        if instruction.target.kind == "sentence":
            quote = _flat(instruction.target.quote or "", language).casefold().rstrip("。！？!?.…")
            gone = quote not in _flat(after.body, language).casefold()
            return None if gone else ("still_there", {"where": where})
        ok = position is not None and len(new) == len(old) - 1 and new == old[:position] + old[position + 1 :]
        return None if ok else ("still_there", {"where": where})
    if kind == "split":
        candidates = [position] if position is not None else range(len(old))
        for i in candidates:
            if (
                len(new) == len(old) + 1
                and new[:i] == old[:i]
                and new[i + 2 :] == old[i + 1 :]
                and _flat(new[i] + (" " if language != "zh" else "") + new[i + 1], language) == _flat(old[i], language)
            ):
                return None
        return "split", {"where": where}
    if kind == "merge":
        if position is None:
            return "merge", {"where": where}
        i = position
        ok = (
            i + 1 < len(old)
            and len(new) == len(old) - 1
            and new[:i] == old[:i]
            and new[i + 1 :] == old[i + 2 :]
            and _flat(new[i], language) == _flat(old[i] + (" " if language != "zh" else "") + old[i + 1], language)
        )
        return None if ok else ("merge", {"where": where})
    # subheading: one new heading paragraph (before the named paragraph, when one is named)
    at = f" ({where})" if position is not None else ""
    if len(new) != len(old) + 1:
        return "subheading", {"at": at}
    slots = [position] if position is not None else range(len(new))
    for i in slots:
        if is_heading(new[i]) and new[:i] + new[i + 1 :] == old:
            return None
    return "subheading", {"at": at}


def unmet(instructions: list[Instruction], before: tuple[str, str], after: tuple[str, str]) -> list[str]:
    """What the edit from ``before`` to ``after`` (title, body) did not do of ``instructions``, one
    line each in the instruction's language; empty when every understood operation was done."""
    old, new = _Piece(*before), _Piece(*after)
    understood = [i for i in instructions if i.understood]
    alone = len(understood) == 1 and len(understood[0].operations) == 1
    out: list[str] = []
    for instruction in understood:
        for op in instruction.operations:
            failed = _check(instruction, op, old, new, alone)
            if failed is not None:
                key, values = failed
                out.append(_message(instruction.language, key, values))
    return out


def _message(language: str, key: str, values: dict[str, object]) -> str:
    return _MESSAGES["zh" if language == "zh" else "en"][key].format(**values)
