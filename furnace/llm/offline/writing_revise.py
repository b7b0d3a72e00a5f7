"""Offline REVISE: apply each instruction to its target only, or say why not.

Inputs: ``title``, ``body``, ``suggestions`` (list of str, applied in order),
optional ``language``. Output: ``{"title", "body", "applied": [label, ...], "note",
"problems": [str, ...]}``.

Each suggestion is parsed by :func:`furnace.writing.addressing.parse_instruction`
into a target (whole piece, title, paragraph N, a quoted sentence) and operations
(shorten by a ratio or to N sentences, expand, more/less formal, livelier, less
like an ad, add/remove emoji, bullets ↔ prose, fix a word, delete, new title).
Edits work on whole sentences, clauses or list lines, never on characters;
everything outside the target is left byte-identical; the piece never becomes
empty. An operation that cannot be carried out (nothing to shorten, paragraph 9
of 4, a word that is not there) changes nothing and is reported in ``note``;
``applied`` lists only operations that really changed the text.
"""

from __future__ import annotations

import contextlib
import random
import re
from typing import Any

from furnace.domain.text import detect_language, split_paragraphs
from furnace.llm.offline import writing_edits as edits
from furnace.llm.offline.writing_edits import CannotApply
from furnace.llm.offline.writing_text import (
    count_emoji,
    join_paragraphs,
    join_sentences,
    split_sentences,
    strip_emoji,
    title_case,
    topic_emoji,
)
from furnace.llm.seam import LLMRequest
from furnace.writing.addressing import (
    LANGUAGE_NAMES,
    Instruction,
    Operation,
    Target,
    instruction_language,
    locate_sentence,
    paragraph_position,
    parse_instruction,
    problem,
)

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


def _substitute(text: str, pairs: list[tuple[str, str]]) -> str:
    for old, new in sorted(pairs, key=lambda pair: -len(pair[0])):  # longest phrases first
        text = _sub(text, old, new)
    return text


def _register(units: list[str], language: str, kind: str) -> list[str]:
    """``units`` in another register: ``lively`` / ``casual`` (the same phrase table; lively also
    ends on an exclamation) or ``formal``. Raises CannotApply when nothing changes."""
    zh = language == "zh"
    table = _ZH_LIVELY if zh else _EN_LIVELY
    opener = _ZH_LIVELY_OPENER if zh else _EN_LIVELY_OPENER
    if kind in ("lively", "casual"):
        out = [_substitute(u, table) for u in units]
        if kind == "lively":
            out[-1] = re.sub(r"[。.]\s*$", "！" if zh else "!", out[-1])
        if out == units:  # nothing matched: still change the register audibly
            first = out[0]
            out[0] = opener + (first if zh else first[:1].lower() + first[1:])
        return out
    # formal: reversing single words would misfire ("so", "about", "要"): only phrases and contractions go back
    reversible = [(b, a) for a, b in table if (len(b) >= 2 if zh else (" " in b.strip() or "'" in b))]
    pairs = (_ZH_FORMAL + reversible + _ZH_FORMAL_EXTRA) if zh else (_EN_FORMAL + reversible)
    out = [_substitute(u, pairs).replace("！", "。").replace("!", ".") for u in units]
    if out[0].startswith(opener):
        rest = out[0][len(opener) :]
        out[0] = rest[:1].upper() + rest[1:]
    if out == units:
        raise CannotApply("formal")
    return out


# --- less like an ad -------------------------------------------------------------

_EN_CALL_TO_ACTION = re.compile(
    r"\b(buy|order|shop now|grab (one|yours|it)|get yours|sign up|subscribe|click|tap the link|visit our|call now|"
    r"don't miss|do not miss|limited[- ]time|act now|hurry|today only|link in bio|use (the )?code|add to cart|"
    r"while stocks last|free shipping)\b",
    re.I,
)
_ZH_CALL_TO_ACTION = re.compile(
    r"赶紧|快来|立即|立刻下单|马上下单|抢购|下单|点击|链接|扫码|限时|包邮|私信|错过|冲鸭|买它|闭眼入|手慢无|戳"
)
_EN_HYPE = [
    ("the best ever", "a good one"),
    ("the very best", "a very good"),
    ("best ever", "good"),
    ("the best", "a good"),
    ("absolutely amazing", "useful"),
    ("amazing", "useful"),
    ("incredible", "notable"),
    ("unbelievable", "notable"),
    ("must-have", "useful"),
    ("game-changer", "real improvement"),
    ("game changer", "real improvement"),
    ("revolutionary", "new"),
    ("guaranteed", "likely"),
    ("life-changing", "helpful"),
    ("perfect", "good"),
    ("ultimate", "complete"),
    ("magical", "effective"),
    ("insanely", "very"),
    ("totally ", ""),
    ("absolutely ", ""),
]
_ZH_HYPE = [
    ("史上最", "很"),
    ("最好的", "不错的"),
    ("绝对", ""),
    ("神器", "好用的工具"),
    ("必备", "值得考虑"),
    ("必买", "值得考虑"),
    ("超级", "很"),
    ("吹爆", "推荐"),
    ("天花板", "很出色"),
    ("yyds", "很好用"),
    ("一定要买", "可以考虑"),
    ("强烈推荐", "推荐"),
    ("无敌", "很"),
]


def _less_ad(units: list[str], language: str) -> list[str]:
    """Drop call-to-action sentences (never the last one left), tone down hype words and exclamations."""
    zh = language == "zh"
    cta = _ZH_CALL_TO_ACTION if zh else _EN_CALL_TO_ACTION
    out = []
    for unit in units:
        sentences = split_sentences(unit, language)
        kept = [s for s in sentences if not cta.search(s)] or sentences[:1]
        text = join_sentences(kept, language) if kept != sentences else unit
        text = _substitute(text, _ZH_HYPE if zh else _EN_HYPE)
        text = re.sub(r"[！!]+", "。", text) if zh else re.sub(r"!+", ".", text)
        text = re.sub(r"  +", " ", text)
        out.append(text)
    if out == units:
        raise CannotApply("less_ad")
    return out


# --- length --------------------------------------------------------------------

_EXTRA = {
    "zh": ["对{t}来说，这一点很容易被忽略，值得多花点心思。", "放在{t}上，这一步做好了，后面会省心很多。"],
    "en": [
        "When it comes to {t}, this point is easy to overlook, so it deserves a closer look.",
        "For {t} in particular, getting this step right makes everything after it easier.",
    ],
}
_EMOJI_TAIL = re.compile(r"(?:\s*[\U0001F300-\U0001FAFF\u2600-\u27BF]\ufe0f?)+\s*$")
_EN_SUBORDINATE = re.compile(
    r"^(if|when|whenever|because|although|though|while|since|unless|as|before|after|whether|so that|even if)\b", re.I
)
_EN_CONNECTIVE = re.compile(
    r"^(first|second|third|then|next|finally|also|plus|however|but|and|so|furthermore|moreover|in addition|"
    r"in conclusion|in practice|in particular|for example|for instance|honestly|overall|still|yet|that said|"
    r"of course|in short|all in all|day to day|that's a wrap)$",
    re.I,
)
_ZH_SUBORDINATE = re.compile(r"^(如果|假如|虽然|因为|当|只要|即使|尽管|除非|由于|要是)")
_ZH_CONNECTIVE = re.compile(
    r"^(首先|其次|再次|最后|此外|另外|同时|总之|综上所述|不过|但是|然而|还有|还有哦|所以|因此|比如|例如|说真的|具体来说|具体而言|接下来)$"
)
_CLAUSE_SPLIT = re.compile(r"(?<=[，,；;：:])\s*")


def topic_of(title: str, language: str) -> str:
    """The subject of a piece, read from its title (the part before a colon, comma or exclamation)."""
    core = re.split(r"[：:，,！!？?—–]", title)[0].strip().rstrip("。.") or title.strip()
    core = strip_emoji(core)
    if language != "zh" and core[:1].isupper() and core[1:2].islower():
        core = core[:1].lower() + core[1:]
    return core or ("这个话题" if language == "zh" else "this topic")


def _split_tail(text: str) -> tuple[str, str]:
    tail = _EMOJI_TAIL.search(text)
    trailing = tail.group(0).rstrip() if tail else ""
    return text[: len(text) - len(tail.group(0))] if tail else text, trailing


def _clause_prefix(sentence: str, language: str, ratio: float) -> str | None:
    """The sentence cut after a whole clause (about ``1 - ratio`` of its clauses), or None when no cut
    leaves a complete statement (a lone connective or a subordinate clause is not one)."""
    zh = language == "zh"
    end = "。" if zh else "."
    core = sentence.strip().rstrip("。！？!?.…")
    clauses = [c for c in _CLAUSE_SPLIT.split(core) if c.strip()]
    if len(clauses) < 2:
        return None
    remove = max(1, int(len(clauses) * ratio + 0.5))
    for keep in range(max(1, len(clauses) - remove), 0, -1):
        prefix = "".join(c if zh else c + " " for c in clauses[:keep]).strip().rstrip("，,；;：: ")
        first = clauses[0].strip().rstrip("，,；;：: ")
        words = len(prefix) if zh else len(prefix.split())
        if words < 4 or (_ZH_CONNECTIVE if zh else _EN_CONNECTIVE).match(first):
            continue
        if (_ZH_SUBORDINATE if zh else _EN_SUBORDINATE).match(prefix):
            continue
        return prefix + end
    return None


def shorten_unit(text: str, op: Operation, language: str) -> str:
    """Fewer sentences (or list lines), or a single sentence cut after a whole clause."""
    core, trailing = _split_tail(text)
    sep = "" if language == "zh" else " "
    if "\n" in core.strip():  # a list or line-broken block: lines are the units, the lead line stays
        lines = core.strip().split("\n")
        keep = (
            op.sentences if op.sentences is not None else len(lines) - max(1, int(len(lines) * (op.ratio or 0.5) + 0.5))
        )
        keep = max(1, keep)
        if keep >= len(lines):
            raise CannotApply("already_short")
        return "\n".join(lines[:keep]) + (sep + trailing if trailing else "")
    sentences = split_sentences(core, language)
    n = len(sentences)
    if op.sentences is not None:
        if n > op.sentences:
            return join_sentences(sentences[: op.sentences], language) + (sep + trailing if trailing else "")
        raise CannotApply("already_short")
    ratio = op.ratio or 0.5
    if n >= 2:
        keep = max(1, n - max(1, int(n * ratio + 0.5)))
        return join_sentences(sentences[:keep], language) + (sep + trailing if trailing else "")
    cut = _clause_prefix(sentences[0] if sentences else core, language, ratio)
    if cut is None:
        raise CannotApply("already_short")
    return cut + (sep + trailing if trailing else "")


def expand_unit(text: str, language: str, topic: str, index: int) -> str:
    """One more sentence about the topic, before any trailing emoji."""
    core, trailing = _split_tail(text)
    extra = _EXTRA["zh" if language == "zh" else "en"][index % 2].format(t=topic)
    sep = "" if language == "zh" else " "
    if "\n" in core.strip():
        return core.rstrip() + "\n" + extra + (sep + trailing if trailing else "")
    return join_sentences([*split_sentences(core, language), extra], language) + (sep + trailing if trailing else "")


# --- structure -----------------------------------------------------------------

_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)、])\s+")


def to_bullets(text: str, language: str) -> str:
    """A paragraph as a list: a lead sentence ending in a colon stays, every other sentence becomes an item."""
    core, trailing = _split_tail(text)
    if any(_BULLET.match(line) for line in core.split("\n")):
        raise CannotApply("already_list")
    sentences = [s.strip() for s in split_sentences(core.replace("\n", " "), language)]
    lead = [sentences.pop(0)] if sentences and sentences[0].endswith((":", "：")) else []
    if len(sentences) < 2:
        raise CannotApply("one_sentence")
    lines = [*lead, *(f"- {s}" for s in sentences)]
    return "\n".join(lines) + ((" " if language != "zh" else "") + trailing if trailing else "")


def to_prose(text: str, language: str) -> str:
    """A list as running text: each item becomes a sentence (end punctuation added when missing)."""
    core, trailing = _split_tail(text)
    lines = [line.strip() for line in core.split("\n") if line.strip()]
    if not any(_BULLET.match(line) for line in lines):
        raise CannotApply("no_list")
    zh = language == "zh"
    sentences = []
    for line in lines:
        item = _BULLET.sub("", line).strip()
        if not item:
            continue
        if not zh:
            item = item[:1].upper() + item[1:]
        if not re.search(r"[。！？.!?:：…]$", item):
            item += "。" if zh else "."
        sentences.append(item)
    return join_sentences(sentences, language) + ((" " if not zh else "") + trailing if trailing else "")


def fix_word(text: str, word: str, replacement: str, language: str) -> str:
    """Every whole-word occurrence of ``word`` replaced (case kept for Latin words)."""
    if re.search(r"[A-Za-z]", word):
        return _sub(text, word, replacement)
    return text.replace(word, replacement)


# --- targets -------------------------------------------------------------------


def _paragraph_index(target: Target, count: int) -> int | None:
    return paragraph_position(target, count)


def _edit_unit(text: str, op: Operation, language: str, topic: str, index: int) -> str:
    """One operation on one unit of text (a paragraph, a run of sentences)."""
    kind = op.kind
    if kind == "shorten":
        return shorten_unit(text, op, language)
    if kind == "expand":
        return expand_unit(text, language, topic, index)
    if kind in ("formal", "casual", "lively"):
        return _register([text], language, kind)[0]
    if kind == "less_ad":
        return _less_ad([text], language)[0]
    if kind == "to_bullets":
        return to_bullets(text, language)
    if kind == "to_prose":
        return to_prose(text, language)
    if kind == "question":
        return edits.end_with_question(text, language, topic)
    if kind == "call_to_action":
        return edits.call_to_action(text, language)
    if kind == "no_exclaim":
        return edits.no_exclamations(text, language)
    if kind == "no_hashtags":
        return edits.no_hashtags(text)
    if kind == "second_person":
        return edits.second_person(text, language)
    if kind == "first_person":
        return edits.first_person(text, language)
    if kind == "plain":
        return edits.plain_words(text, language)
    if kind == "short_sentences":
        return edits.shorter_sentences(text, language)
    if kind == "hook":
        return edits.hook(text, language, topic)
    if kind == "summary":
        return edits.summary(text, language, topic)
    if kind == "example":
        raise CannotApply("needs_model")
    raise CannotApply("unknown")


def _edit_title(title: str, op: Operation, language: str, topic: str) -> str:
    zh = language == "zh"
    sep = "" if zh else " "
    if op.kind == "question":
        return edits.question_title(title, language)
    if op.kind == "punchy":
        return edits.punchy_title(title, language)
    if op.kind == "title_case":
        return edits.title_case_title(title, language)
    if op.kind == "no_exclaim":
        return edits.no_exclamations(title, language, title=True)
    if op.kind in ("no_hashtags", "second_person", "first_person", "plain"):
        return _edit_unit(title, op, language, topic, 0)
    if op.kind == "retitle":
        new = op.text or (f"关于{topic}，你需要知道的事" if zh else f"What You Need to Know About {title_case(topic)}")
        if new == title:
            raise CannotApply("same_title")
        return new
    if op.kind == "emoji_add":
        return title + sep + topic_emoji(title)
    if op.kind == "emoji_remove":
        if not count_emoji(title):
            raise CannotApply("no_emoji")
        return strip_emoji(title)
    if op.kind == "shorten":
        core = re.split(r"\s*[：:，,！!？?—–]\s*", title.strip())[0].strip()
        if not core or core == title.strip():
            raise CannotApply("title_short")
        return core
    if op.kind == "expand":
        return f"{title.rstrip('！!')}：你需要知道的事" if zh else f"{title.rstrip('!')}: What You Need to Know"
    if op.kind == "lively":
        out = _substitute(title, _ZH_LIVELY if zh else _EN_LIVELY)
        return out if out != title else title.rstrip("。.") + ("！" if zh else "!")
    if op.kind in ("formal", "casual", "less_ad"):
        return (_less_ad if op.kind == "less_ad" else lambda u, lang: _register(u, lang, op.kind))([title], language)[0]
    if op.kind == "fix_word":
        return _fix(title, op, language)
    if op.kind == "delete":
        raise CannotApply("title_delete")
    raise CannotApply("unknown")


def _fix(text: str, op: Operation, language: str) -> str:
    if not op.replacement:
        raise CannotApply("no_fix")
    out = fix_word(text, op.word or "", op.replacement, language)
    if out == text:
        raise CannotApply("no_word")
    return out


def apply_operation(
    title: str, paragraphs: list[str], target: Target, op: Operation, language: str
) -> tuple[str, list[str]]:
    """``op`` on ``target``; everything else is returned unchanged. Raises CannotApply."""
    topic = topic_of(title, language)
    if target.kind == "title":
        return _edit_title(title, op, language, topic), paragraphs
    out = list(paragraphs)
    if op.kind in ("split", "merge", "subheading", "hook", "summary", "example"):
        return title, _structure(paragraphs, target, op, language, topic)
    if target.kind == "paragraph":
        i = _paragraph_index(target, len(paragraphs))
        if i is None:
            raise CannotApply("missing")
        if op.kind == "delete":
            if len(paragraphs) == 1:
                raise CannotApply("empty")
            return title, out[:i] + out[i + 1 :]
        if op.kind == "emoji_add":
            out[i] = out[i] + ("" if language == "zh" else " ") + topic_emoji(title + " " + out[i])
        elif op.kind == "emoji_remove":
            if not count_emoji(out[i]):
                raise CannotApply("no_emoji")
            out[i] = strip_emoji(out[i])
        elif op.kind == "fix_word":
            out[i] = _fix(out[i], op, language)
        else:
            out[i] = _edit_unit(out[i], op, language, topic, i)
        return title, out
    if target.kind == "sentence":
        found = locate_sentence(paragraphs, target.quote or "", language)
        if found is None:
            raise CannotApply("no_sentence")
        p, a, b = found
        sentences = split_sentences(paragraphs[p], language)
        sep = "" if language == "zh" else " "
        unit = join_sentences(sentences[a:b], language)
        if op.kind == "delete":
            rest = sentences[:a] + sentences[b:]
            if rest:
                out[p] = join_sentences(rest, language)
            elif len(paragraphs) > 1:
                out.pop(p)
            else:
                raise CannotApply("empty")
            return title, out
        if op.kind == "emoji_add":
            new = unit + sep + topic_emoji(title + " " + unit)
        elif op.kind == "emoji_remove":
            if not count_emoji(unit):
                raise CannotApply("no_emoji")
            new = strip_emoji(unit)
        elif op.kind == "fix_word":
            new = _fix(unit, op, language)
        else:
            new = _edit_unit(unit, op, language, topic, p)
        out[p] = join_sentences([*sentences[:a], new, *sentences[b:]], language)
        return title, out
    # the whole piece
    if op.kind == "delete":
        raise CannotApply("whole_delete")
    if op.kind == "emoji_add":
        out[0] = out[0] + ("" if language == "zh" else " ") + topic_emoji(title + " " + " ".join(paragraphs))
        return title, out
    if op.kind == "emoji_remove":
        if count_emoji(title + "".join(paragraphs)) == 0:
            raise CannotApply("no_emoji")
        return strip_emoji(title), [strip_emoji(p) for p in paragraphs]
    if op.kind == "fix_word":
        if not op.replacement:
            raise CannotApply("no_fix")
        new_title = fix_word(title, op.word or "", op.replacement, language)
        fixed = [fix_word(p, op.word or "", op.replacement, language) for p in out]
        if (new_title, fixed) == (title, out):
            raise CannotApply("no_word")
        return new_title, fixed
    if op.kind in ("formal", "casual", "lively"):
        return title, _register(out, language, op.kind)
    if op.kind == "less_ad":
        return title, _less_ad(out, language)
    if op.kind in ("retitle", "punchy", "title_case"):
        return _edit_title(title, op, language, topic), out
    if op.kind in ("question", "call_to_action"):  # the piece ends with it
        out[-1] = _edit_unit(out[-1], op, language, topic, len(out) - 1)
        return title, out
    if op.kind in ("no_exclaim", "no_hashtags", "second_person", "first_person", "plain"):
        new_title = title
        with contextlib.suppress(CannotApply):  # a title without anything of the kind stays as it is
            new_title = _edit_title(title, op, language, topic)
        edited = []
        for para in out:
            try:
                edited.append(_edit_unit(para, op, language, topic, 0))
            except CannotApply:
                edited.append(para)
        edited = [p for p in edited if p.strip()]
        if (new_title, edited) == (title, out):
            raise CannotApply(_NOTHING_TO_DO[op.kind])
        return new_title, edited or out
    changed = False
    for i, para in enumerate(out):  # per paragraph; one that cannot take the edit stays as it is
        try:
            out[i] = _edit_unit(para, op, language, topic, i)
            changed = changed or out[i] != para
        except CannotApply:
            continue
    if not changed:
        raise CannotApply(_NOTHING_TO_DO.get(op.kind, "unknown"))
    return title, out


# Why an edit of the whole piece changed nothing, per operation.
_NOTHING_TO_DO = {
    "shorten": "already_short",
    "to_bullets": "one_sentence",
    "to_prose": "no_list",
    "short_sentences": "short_already",
    "no_exclaim": "no_exclaim",
    "no_hashtags": "no_hashtags",
    "second_person": "no_third_person",
    "first_person": "no_first_person",
    "plain": "no_jargon",
}


def _structure(paragraphs: list[str], target: Target, op: Operation, language: str, topic: str) -> list[str]:
    """Edits that work on paragraphs as units: split, merge, subheading, hook, summary (and examples)."""
    out = list(paragraphs)
    position = _paragraph_index(target, len(out)) if target.kind == "paragraph" else None
    if target.kind == "paragraph" and position is None:
        raise CannotApply("missing")
    if op.kind == "example":
        raise CannotApply("needs_model")
    if op.kind == "hook":
        out[0] = edits.hook(out[0], language, topic)
        return out
    if op.kind == "summary":
        out[-1] = edits.summary(out[-1], language, topic)
        return out
    if op.kind == "split":
        if position is None:  # the longest paragraph that has two sentences
            splittable = [i for i, p in enumerate(out) if len(split_sentences(p, language)) > 1 and "\n" not in p]
            if not splittable:
                raise CannotApply("split_short")
            position = max(splittable, key=lambda i: len(out[i]))
        return out[:position] + edits.split_paragraph(out[position], language) + out[position + 1 :]
    if op.kind == "merge":
        if position is None or position + 1 >= len(out):
            raise CannotApply("merge_last")
        merged = edits.merge_paragraphs(out[position], out[position + 1], language)
        return out[:position] + [merged] + out[position + 2 :]
    # subheading: before the named paragraph, or before the second one
    return edits.subheading(out, position if position is not None else min(1, len(out) - 1), language)


def _explain(err: CannotApply, instruction: Instruction, op: Operation, paragraphs: list[str], title: str) -> str:
    language = instruction.language
    target = instruction.target
    return problem(
        language,
        str(err.args[0]),
        n=target.index,
        count=len(paragraphs),
        quote=target.quote,
        where=target.describe(language),
        word=op.word,
        title=op.text or title,
        kind=op.kind,
    )


def apply_instruction(
    title: str, paragraphs: list[str], instruction: Instruction
) -> tuple[str, list[str], list[str], list[str]]:
    """Apply one parsed instruction: (title, paragraphs, applied labels, problems)."""
    applied: list[str] = []
    problems: list[str] = []
    where = {"whole": "", "title": "@title", "sentence": "@sentence"}.get(instruction.target.kind)
    if where is None:
        where = f"@{instruction.target.index}"
    for op in instruction.operations:
        try:
            new_title, new_paragraphs = apply_operation(title, paragraphs, instruction.target, op, instruction.language)
        except CannotApply as err:
            problems.append(_explain(err, instruction, op, paragraphs, title))
            continue
        if (new_title, new_paragraphs) != (title, paragraphs):
            title, paragraphs = new_title, new_paragraphs
            applied.append(op.label() + where)
    return title, paragraphs, applied, problems


def revise(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Apply each suggestion of ``inputs.suggestions`` to its target in ``inputs.title``/``inputs.body``."""
    title = str(request.inputs.get("title") or "")
    body = str(request.inputs.get("body") or "")
    suggestions = [str(s) for s in request.inputs.get("suggestions") or []]
    language = request.inputs.get("language") or detect_language(title + body)
    zh = language == "zh"
    paragraphs = split_paragraphs(body) or [body]
    applied: list[str] = []
    problems: list[str] = []
    for suggestion in suggestions:
        said = instruction_language(suggestion)
        if said is not None and said != language:
            names = LANGUAGE_NAMES["zh" if zh else "en"]
            problems.append(problem(language, "language", got=names[said], want=names[language]))
            continue
        instruction = parse_instruction(suggestion, language)
        if instruction.refusal:
            problems.append(problem(language, instruction.refusal))
            continue
        if not instruction.understood:
            problems.append(problem(language, "unrecognised", text=suggestion))
            continue
        title, paragraphs, done, failed = apply_instruction(title, paragraphs, instruction)
        applied += done
        problems += failed
    if not applied:
        note = (
            ("原文保持不变：" if zh else "Text left unchanged: ")
            + ("；" if zh else "; ").join(problems)
            + ("。" if zh else ".")
        )
        original = str(request.inputs.get("title") or "")
        return "", {"title": original, "body": body, "applied": [], "note": note, "problems": problems}
    note = ("已修改：" if zh else "Applied: ") + ", ".join(applied)
    if problems:
        note += ("；未执行：" if zh else "; not applied: ") + "; ".join(problems)
    return "", {
        "title": title,
        "body": join_paragraphs(paragraphs),
        "applied": applied,
        "note": note,
        "problems": problems,
    }
