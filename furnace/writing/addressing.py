"""Addressing: a revision instruction → where to edit (target) and what to do (operations).

Pure and deterministic (zh and en). Used by the revision chat to check an
instruction before any model call and to keep an edit inside its target, and by
the offline engine to carry the edit out. The phrasing table is in docs/revision.md.

Targets: ``whole`` (the piece), ``title``, ``paragraph`` (1-based; ``-1`` is the
last; the intro/opening/开头 is 1) and ``sentence`` (a quoted sentence or part
of one). Operations: see :data:`OPERATIONS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from furnace.domain.text import has_cjk, split_paragraphs
from furnace.llm.offline.writing_text import split_sentences

TargetKind = Literal["whole", "title", "paragraph", "sentence"]
OpKind = Literal[
    "shorten",
    "expand",
    "formal",
    "casual",
    "lively",
    "less_ad",
    "emoji_add",
    "emoji_remove",
    "to_bullets",
    "to_prose",
    "fix_word",
    "delete",
    "retitle",
]

# What each operation does, as told to a user whose instruction was not understood.
OPERATIONS: dict[str, dict[str, str]] = {
    "en": {
        "shorten": 'shorten (by half, to N sentences): "cut the intro to one sentence"',
        "expand": 'expand: "the last paragraph is too short"',
        "formal": 'more formal: "make paragraph 2 more formal"',
        "casual": 'less formal: "too stiff, more casual"',
        "lively": 'livelier: "make the opening livelier"',
        "less_ad": 'less like an ad: "it sounds like an ad"',
        "emoji_add": 'add emoji: "add an emoji to the title"',
        "emoji_remove": 'remove emoji: "no emoji please"',
        "to_bullets": 'bullets: "turn the third paragraph into bullet points"',
        "to_prose": 'prose: "turn the list into prose"',
        "fix_word": 'fix a word: \'replace "colour" with "color"\'',
        "delete": 'delete: \'delete the sentence "..."\', "drop the last paragraph"',
        "retitle": "new title: 'change the title to \"...\"'",
    },
    "zh": {
        "shorten": "缩短（删掉一半、只留N句）：“开头太长了，只留一句话”",
        "expand": "扩写：“结尾太短了，展开说说”",
        "formal": "更正式：“第二段正式一点”",
        "casual": "不那么正式：“太正式了，口语化一点”",
        "lively": "更活泼：“开头活泼一点”",
        "less_ad": "去广告味：“别那么像广告”",
        "emoji_add": "加 emoji：“标题加个 emoji”",
        "emoji_remove": "去掉 emoji：“把表情都去掉”",
        "to_bullets": "改成要点：“第三段改成分点列出”",
        "to_prose": "改回段落：“把列表改成一段话”",
        "fix_word": "改字词：“把「的」改成「地」”",
        "delete": "删除：“删掉「……」这句”“删掉最后一段”",
        "retitle": "改标题：“标题改成「……」”",
    },
}

MAX_INSTRUCTION = 2000


@dataclass(frozen=True)
class Target:
    """Where an edit applies."""

    kind: TargetKind = "whole"
    index: int | None = None  # paragraph: 1-based, -1 = last
    quote: str | None = None  # sentence: the quoted text

    def describe(self, language: str) -> str:
        zh = language == "zh"
        if self.kind == "title":
            return "标题" if zh else "the title"
        if self.kind == "paragraph":
            if self.index == -1:
                return "最后一段" if zh else "the last paragraph"
            return f"第{self.index}段" if zh else f"paragraph {self.index}"
        if self.kind == "sentence":
            return f"「{self.quote}」这句" if zh else f'the sentence "{self.quote}"'
        return "全文" if zh else "the whole piece"


@dataclass(frozen=True)
class Operation:
    """What to do to the target."""

    kind: OpKind
    ratio: float | None = None  # shorten: the share to remove
    sentences: int | None = None  # shorten: how many sentences to keep
    word: str | None = None  # fix_word: the wrong word
    replacement: str | None = None  # fix_word: the right word
    text: str | None = None  # retitle: the new title

    def label(self) -> str:
        extra = ""
        if self.sentences is not None:
            extra = f":{self.sentences}s"
        elif self.ratio is not None:
            extra = f":{self.ratio:g}"
        return self.kind + extra


@dataclass(frozen=True)
class Instruction:
    """One parsed instruction: a target and the operations on it, in order."""

    text: str
    language: str
    target: Target = field(default_factory=Target)
    operations: tuple[Operation, ...] = ()

    @property
    def understood(self) -> bool:
        return bool(self.operations)

    def label(self) -> str:
        where = {"whole": "", "title": "@title", "sentence": "@sentence"}.get(self.target.kind)
        if where is None:
            where = f"@{self.target.index}"
        return ", ".join(op.label() + where for op in self.operations)


# --- language -------------------------------------------------------------------

_QUOTED = re.compile(
    r"[「“\"『《]([^」”\"』》]{1,300})[」”\"』》]|(?<![A-Za-z])'([^']{1,300})'(?![A-Za-z])"  # 'x', not don't
)
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def instruction_language(text: str) -> str | None:
    """``zh`` or ``en`` for the instruction's own words (quoted text is ignored); None when it has no words."""
    bare = _QUOTED.sub(" ", text)
    if has_cjk(bare):
        return "zh"
    if _LATIN_WORD.search(bare):
        return "en"
    return None


# --- numbers --------------------------------------------------------------------

_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_EN_NUMBERS = {
    "one": 1,
    "a single": 1,
    "a": 1,
    "single": 1,
    "two": 2,
    "a couple of": 2,
    "three": 3,
    "four": 4,
    "five": 5,
}
_EN_ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "eleventh": 11,
    "twelfth": 12,
}


def zh_number(token: str) -> int:
    """一 → 1, 十二 → 12, 二十 → 20, 7 → 7."""
    if token.isdigit():
        return int(token)
    if "十" in token:
        tens, _, ones = token.partition("十")
        return (_ZH_DIGITS.get(tens, 1) if tens else 1) * 10 + (_ZH_DIGITS.get(ones, 0) if ones else 0)
    return _ZH_DIGITS[token]


# --- targets --------------------------------------------------------------------

_ZH_NUM = r"(\d+|[一二两三四五六七八九十]{1,3})"
_ZH_NTH = re.compile(r"第\s*" + _ZH_NUM + r"\s*段")
_ZH_LAST = re.compile(r"最后一段|最后那段|末段|结尾|结语|收尾|最后一部分")
_ZH_FIRST = re.compile(r"开头|开篇|首段|引言|导语|开场|第一部分")
_ZH_TITLE = re.compile(r"标题|题目")
_ZH_SENTENCE = re.compile(r"这句|这一句|那句|句子")

_EN_NTH = re.compile(
    r"\b(" + "|".join(_EN_ORDINALS) + r"|\d+(?:st|nd|rd|th))\s+(?:paragraph|para|section|part)\b"
    r"|\b(?:paragraph|para)\s*(?:no\.?\s*|number\s*|#\s*)?(\d+)\b",
    re.I,
)
_EN_LAST = re.compile(
    r"\b(?:last|final|closing|concluding|end)\s+(?:paragraph|para|section|part)\b|\bconclusion\b|\bending\b|"
    r"\boutro\b|\bsign-?off\b|\bwrap-?up\b",
    re.I,
)
_EN_FIRST = re.compile(
    r"\bintro(?:duction)?\b|\bopening(?:\s+(?:paragraph|para|section|lines?))?\b|\blead\s+paragraph\b|"
    r"\bbeginning\b|\bstart of (?:the )?(?:piece|text|post|article)\b|\bopener\b|\blede\b",
    re.I,
)
_EN_TITLE = re.compile(r"\b(?:title|headline|heading)\b", re.I)
_EN_SENTENCE = re.compile(r"\b(?:sentence|line|phrase|bit)\b", re.I)


def _quotes(text: str) -> list[str]:
    found = (next(g for g in m.groups() if g is not None).strip() for m in _QUOTED.finditer(text))
    return [q for q in found if q]


def _paragraph_index(text: str, zh: bool) -> int | None:
    bare = _QUOTED.sub(" ", text)
    if zh:
        m = _ZH_NTH.search(bare)
        if m:
            return zh_number(m.group(1))
        if _ZH_LAST.search(bare):
            return -1
        if _ZH_FIRST.search(bare):
            return 1
        return None
    m = _EN_NTH.search(bare)
    if m:
        token = (m.group(1) or m.group(2)).lower()
        return _EN_ORDINALS.get(token) or int(re.sub(r"\D", "", token))
    if _EN_LAST.search(bare):
        return -1
    if _EN_FIRST.search(bare):
        return 1
    return None


# --- operations -----------------------------------------------------------------

_I = re.IGNORECASE
_ZH = {
    "emoji": re.compile(r"emoji|表情|😀|颜文字", _I),
    "remove": re.compile(r"去掉|删除|删掉|不要|别用|别加|少用|拿掉|去除|太多|清掉|全删"),
    "less_ad": re.compile(r"像广告|广告味|广告腔|推销|营销味|营销腔|软文|带货|太商业|卖货|硬广"),
    "to_prose": re.compile(
        r"(?:列表|要点|分点|条目|清单|小点).{0,6}(?:改成|改为|变成|换成|连成|写成).{0,4}(?:段|正文|一段话|文字|句子)|"
        r"不要(?:列表|分点|要点|条目)|连成一段|改成段落|改回段落|改成正文|改成一段话"
    ),
    "to_bullets": re.compile(r"分点|要点|列表|条目|清单|一条一条|逐条|分条|列出来|分成几点"),
    "casual": re.compile(
        r"太正式|(?:不要|别|不用)(?:那么|这么|太)?正式|口语化|口语一点|随意一点|随和|接地气|亲切|"
        r"太官方|太死板|太生硬|像公文|太书面|放松一点|轻松一点"
    ),
    "formal": re.compile(r"正式|太随意|太口语|严肃|专业一点|书面|稳重|规范|得体|官方一点"),
    "lively": re.compile(r"活泼|有趣|生动|俏皮|有活力|有意思|太干|枯燥|无聊|有感染力|热情一点|带劲"),
    "fix_word": re.compile(r"错别字|写错|笔误|打错|改成|改为|换成|替换"),
    "delete": re.compile(r"删掉|删除|删去|去掉|拿掉|不要了|砍掉"),
    "half": re.compile(r"一半|减半|砍半|对半"),
    "third": re.compile(r"三分之一"),
    "percent": re.compile(r"(\d{1,2})\s*%|百分之(\d{1,2}|[一二三四五六七八九十]{1,3})"),
    "to_n": re.compile(
        r"(?:只留|只保留|保留|留|缩成|压缩成|压到|缩到|改成|变成|写成|精简成|精简到|砍到)\s*第?"
        + _ZH_NUM
        + r"\s*句|^\s*"
        + _ZH_NUM
        + r"\s*句话?(?:就行|就够|即可|就好)"
    ),
    "shorten": re.compile(
        r"太长|缩短|短一点|短些|精简|删减|简短|简洁|啰嗦|啰唆|冗长|压缩|太多了|长了|少写点|紧凑|"
        r"拖沓|废话|砍|只留|只保留|删掉一半|太水"
    ),
    "expand": re.compile(r"太短|扩展|展开|加长|详细|长一点|多写|丰富|充实|扩写|多说|补充|具体一点|不够|单薄"),
    "retitle": re.compile(r"换个|改个|重新起|起个|改成|改为|换成|换一个|新的"),
}
_EN = {
    "emoji": re.compile(r"\bemojis?\b|\bemoticons?\b|\bsmileys?\b|😀", _I),
    "remove": re.compile(
        r"\bremove\b|\bwithout\b|\bno\b|\bfewer\b|\bdrop\b|\bdelete\b|\bget rid\b|\bstrip\b|\btoo many\b|"
        r"\bless\b|\bditch\b|\blose the\b|\bkill\b|\bnone\b",
        _I,
    ),
    "less_ad": re.compile(
        r"\bads?\b|\badvert(?:isement)?s?\b|\bsales(?:y|-?pitch)?\b|\bmarketing\b|\bpromotional\b|\bcommercial\b|"
        r"\bhype\b|\bpushy\b|\binfomercial\b|\bsell(?:ing|s)?\b|\bbrochure\b|\bclickbait\b",
        _I,
    ),
    "to_prose": re.compile(
        r"\bprose\b|\bparagraph form\b|\bfull sentences\b|\bno (?:more )?(?:bullets|list)\b|"
        r"\b(?:remove|drop|lose) the (?:bullets|bullet points|list)\b|\bflowing text\b|\brunning text\b|"
        r"\b(?:list|bullets?) (?:in|into|to) (?:a )?paragraph\b",
        _I,
    ),
    "to_bullets": re.compile(
        r"\bbullets?\b|\bbullet[- ]points?\b|\bbulleted\b|\b(?:a|as|into) (?:a )?list\b|"
        r"\blist form\b|\blistify\b",
        _I,
    ),
    "casual": re.compile(
        r"\btoo formal\b|\bless formal\b|\bnot so formal\b|\bso formal\b|\bless stiff\b|\btoo stiff\b|\bstiff\b|"
        r"\bmore casual\b|\bcasual(?:ly)? (?:tone|voice|register)\b|\bconversational\b|\bfriendlier\b|"
        r"\brelaxed\b|\bstuffy\b|\bless academic\b|"
        r"\bloosen\b|\bmore chatty\b|\bless corporate\b|\bmore human\b|\bwarmer\b",
        _I,
    ),
    "formal": re.compile(
        r"\bmore formal\b|\bformal\b|\btoo casual\b|\bless casual\b|\bprofessional\b|\bserious\b|\bpolished\b|"
        r"\bbusinesslike\b|\bacademic\b|\btoo chatty\b|\bless chatty\b|\bsober\b",
        _I,
    ),
    "lively": re.compile(
        r"\blivel(?:y|ier|ily)\b|\bmore fun\b|\bfun\b|\bfunnier\b|\benergy\b|\benergetic\b|\bpunch(?:y|ier)\b|"
        r"\bengaging\b|\bboring\b|\bdull\b|\bdry\b|\bspice\b|\bexcit(?:ing|ed)\b|\bzing\b|\bpep\b|\bupbeat\b|"
        r"\bvivid\b|\bflat\b",
        _I,
    ),
    "fix_word": re.compile(
        r"\btypos?\b|\bmisspel+(?:ed|ing|t)?\b|\bspelling\b|\bspelled\b|\breplace\b|\bshould (?:be|read)\b|"
        r"\bfix (?:the )?word\b|\bswap\b|\bwrong word\b|→|->",
        _I,
    ),
    "delete": re.compile(r"\bdelete\b|\bremove\b|\bdrop\b|\bcut\b|\bget rid of\b|\bscrap\b|\bkill\b|\bditch\b", _I),
    "half": re.compile(r"\bhalf\b|\bhalve\b|\b50\s?%", _I),
    "third": re.compile(r"\ba third\b|\bone third\b|\bone-third\b", _I),
    "percent": re.compile(r"\b(\d{1,2})\s?(?:%|percent)", _I),
    "to_n": re.compile(
        r"\b(?:to|into|in|down to|just|only|keep|at most|max(?:imum)?|a|single)\s+"
        r"(one|a single|single|two|three|four|five|a couple of|\d)\s+sentences?\b|\bone[- ]liner\b|"
        r"\b(one|a single|two|three|\d)[- ]sentences?\b",
        _I,
    ),
    "shorten": re.compile(
        r"\btoo long\b|\bshorten\b|\bshorter\b|\btrim\b|\bcondense\b|\bmore concise\b|\bconcise\b|\bcut\b|"
        r"\btighten\b|\bwordy\b|\blong-winded\b|\bverbose\b|\breduce\b|\bbloated\b|\brambl(?:es|ing|y)\b|"
        r"\bpare\b|\bbrief(?:er)?\b|\bless text\b|\btl;?dr\b|\bhalve\b|\bsnappier\b|\bdrags\b|\bpadding\b|\bpadded\b",
        _I,
    ),
    "expand": re.compile(
        r"\btoo short\b|\bexpand\b|\blonger\b|\blengthen\b|\bmore detail(?:s|ed)?\b|\belaborate\b|\bflesh\b|"
        r"\bsay more\b|\bbeef\b|\bdevelop\b|\bthin\b|\bmore depth\b|\bbuild (?:it )?out\b|\bbulk\b|\bextend\b|"
        r"\bmore about\b|\bgo deeper\b|\bunderdeveloped\b",
        _I,
    ),
    "retitle": re.compile(
        r"\bnew\b|\bchange\b|\brename\b|\bretitle\b|\bcall it\b|\bdifferent\b|\bbetter\b|\bmake\b"
        r"|\bshould be\b|\bto\b",
        _I,
    ),
}
_EN_TYPOS = {
    "teh": "the",
    "recieve": "receive",
    "seperate": "separate",
    "definately": "definitely",
    "occured": "occurred",
    "untill": "until",
    "wich": "which",
    "alot": "a lot",
    "accomodate": "accommodate",
    "sunscren": "sunscreen",
    "begining": "beginning",
    "beleive": "believe",
    "goverment": "government",
    "tommorow": "tomorrow",
    "neccessary": "necessary",
}
_ZH_TYPOS = {
    "再接再励": "再接再厉",
    "既使": "即使",
    "按步就班": "按部就班",
    "一股作气": "一鼓作气",
    "迫不急待": "迫不及待",
}
_EN_FIX_PAIR = re.compile(
    r"(?:replace|change|swap|turn|fix)\s+[\"'“]([^\"'”]+)[\"'”]\s+(?:with|to|for|into|by)\s+[\"'“]([^\"'”]+)[\"'”]"
    r"|[\"'“]([^\"'”]+)[\"'”]\s+(?:should (?:be|read)|->|→|to)\s+[\"'“]([^\"'”]+)[\"'”]",
    _I,
)
_ZH_FIX_PAIR = re.compile(
    r"把\s*[「“\"『]([^」”\"』]+)[」”\"』]\s*(?:改成|改为|换成|替换成|替换为|写成)\s*[「“\"『]([^」”\"』]+)[」”\"』]"
    r"|[「“\"『]([^」”\"』]+)[」”\"』]\s*(?:应该是|应为|改成|改为|换成|→|->)\s*[「“\"『]([^」”\"』]+)[」”\"』]"
)


def _ratio(text: str, table: dict[str, re.Pattern[str]], zh: bool) -> float | None:
    if table["half"].search(text):
        return 0.5
    if table["third"].search(text):
        return 1 / 3
    m = table["percent"].search(text)
    if m:
        token = next(g for g in m.groups() if g)
        value = zh_number(token) if zh else int(token)
        if 0 < value < 100:
            return value / 100
    return None


def _to_sentences(text: str, table: dict[str, re.Pattern[str]], zh: bool) -> int | None:
    m = table["to_n"].search(text)
    if not m:
        return None
    if m.group(0).lower().replace("-", " ").startswith("one liner"):
        return 1
    token = next((g for g in m.groups() if g), None)
    if token is None:
        return 1
    return zh_number(token) if zh else _EN_NUMBERS.get(token.lower()) or int(token)


def parse_instruction(text: str, language: str) -> Instruction:
    """The target and operations of one instruction; ``operations`` is empty when nothing was understood."""
    raw = " ".join(text.split())
    zh = language == "zh"
    table = _ZH if zh else _EN
    quotes = _quotes(raw)
    bare = _QUOTED.sub(" ", raw)  # the instruction's own words, quoted text removed
    ops: list[Operation] = []

    # target
    target = Target()
    title_named = bool((_ZH_TITLE if zh else _EN_TITLE).search(bare))
    index = _paragraph_index(raw, zh)
    sentence_named = bool((_ZH_SENTENCE if zh else _EN_SENTENCE).search(bare))

    # fix a named word comes first: its quotes are words, not a target
    pair = (_ZH_FIX_PAIR if zh else _EN_FIX_PAIR).search(raw)
    if pair and not title_named:
        groups = [g for g in pair.groups() if g]
        ops.append(Operation("fix_word", word=groups[0].strip(), replacement=groups[1].strip()))
        if index is not None:
            target = Target("paragraph", index)
        return Instruction(raw, language, target, tuple(ops))
    if table["fix_word"].search(bare) and quotes and not title_named and not table["emoji"].search(bare):
        word = quotes[0]
        fixed = (_ZH_TYPOS if zh else _EN_TYPOS).get(word if zh else word.lower())
        ops.append(Operation("fix_word", word=word, replacement=fixed))
        if index is not None:
            target = Target("paragraph", index)
        return Instruction(raw, language, target, tuple(ops))

    if title_named:
        target = Target("title")
    elif quotes and (sentence_named or index is None):
        target = Target("sentence", quote=quotes[0])
    elif index is not None:
        target = Target("paragraph", index)

    # the new title: a quoted text, or "a new title" without one
    if target.kind == "title" and not table["emoji"].search(bare):
        if quotes:
            return Instruction(raw, language, target, (Operation("retitle", text=quotes[0]),))
        if table["retitle"].search(bare) and not (
            table["shorten"].search(bare) or table["expand"].search(bare) or table["less_ad"].search(bare)
        ):
            register = [k for k in ("casual", "formal", "lively") if table[k].search(bare)]
            if not register:
                return Instruction(raw, language, target, (Operation("retitle"),))

    if table["emoji"].search(bare):
        ops.append(Operation("emoji_remove" if table["remove"].search(bare) else "emoji_add"))
        return Instruction(raw, language, target, tuple(ops))

    if table["less_ad"].search(bare):
        ops.append(Operation("less_ad"))
    if table["to_prose"].search(bare):
        ops.append(Operation("to_prose"))
    elif table["to_bullets"].search(bare):
        ops.append(Operation("to_bullets"))

    if table["lively"].search(bare):  # livelier includes less formal
        ops.append(Operation("lively"))
    elif table["casual"].search(bare):
        ops.append(Operation("casual"))
    elif table["formal"].search(bare) and not table["less_ad"].search(bare):
        ops.append(Operation("formal"))

    sentences = _to_sentences(bare, table, zh)
    ratio = _ratio(bare, table, zh)
    shorten = table["shorten"].search(bare) or sentences is not None or ratio is not None
    expand = table["expand"].search(bare.replace("太长", "").replace("长了", ""))
    if shorten and not (expand and not (sentences or ratio) and not table["shorten"].search(bare)):
        ops.append(Operation("shorten", ratio=ratio, sentences=sentences))
    elif expand:
        ops.append(Operation("expand"))
    elif (
        not ops
        and table["delete"].search(bare)
        and (target.kind in ("sentence", "paragraph") or (zh and "这句" in bare))
    ):
        ops.append(Operation("delete"))
    return Instruction(raw, language, target, tuple(ops))


def available_operations(language: str) -> str:
    """The operations the revision chat understands, one per line."""
    table = OPERATIONS["zh" if language == "zh" else "en"]
    return "\n".join(f"- {line}" for line in table.values())


# --- explanations and checks ----------------------------------------------------

_PROBLEMS = {
    "en": {
        "missing": "paragraph {n} does not exist (the text has {count})",
        "no_sentence": 'the sentence "{quote}" is not in the text',
        "no_emoji": "the text has no emoji to remove",
        "unrecognised": 'no edit recognised in "{text}"',
        "language": "the instruction is in {got} but the piece is in {want}",
        "already_short": "{where} is already as short as it can get without breaking a sentence",
        "formal": "{where} has nothing informal to change",
        "less_ad": "{where} has no ad-like wording (no calls to action, hype words or exclamations)",
        "already_list": "{where} is already a list",
        "one_sentence": "{where} has only one sentence; there is nothing to list",
        "no_list": "{where} has no list to turn into prose",
        "no_word": '"{word}" does not appear in {where}',
        "no_fix": 'I don\'t know the right spelling of "{word}"; say: replace "{word}" with "..."',
        "empty": "deleting {where} would leave the piece empty",
        "whole_delete": "deleting the whole piece is not an edit; name a paragraph or quote a sentence",
        "same_title": "the title is already {title}",
        "title_short": "the title has no part that can be dropped",
        "title_delete": "a piece needs a title; give a new one instead",
        "unknown": "cannot apply {kind} to {where}",
    },
    "zh": {
        "missing": "没有第 {n} 段（全文共 {count} 段）",
        "no_sentence": "文中没有「{quote}」这句",
        "no_emoji": "文中没有可去掉的 emoji",
        "unrecognised": "没能从「{text}」中识别出具体的修改",
        "language": "修改建议是{got}，而文章是{want}",
        "already_short": "{where}已经不能再短了（再删就会删出半句话）",
        "formal": "{where}没有可以改得更正式的口语说法",
        "less_ad": "{where}没有广告腔（没有促销号召、夸张用词或感叹号）",
        "already_list": "{where}已经是列表了",
        "one_sentence": "{where}只有一句话，列不出要点",
        "no_list": "{where}没有可以改成段落的列表",
        "no_word": "{where}中没有「{word}」",
        "no_fix": "不知道「{word}」该改成什么；请说“把「{word}」改成「……」”",
        "empty": "删掉{where}后文章就空了",
        "whole_delete": "不能删除全文；请指明哪一段或引用要删的句子",
        "same_title": "标题已经是「{title}」了",
        "title_short": "标题没有可以删掉的部分",
        "title_delete": "文章需要标题；可以换一个新标题",
        "unknown": "无法对{where}执行 {kind}",
    },
}
LANGUAGE_NAMES = {"en": {"en": "English", "zh": "Chinese"}, "zh": {"en": "英文", "zh": "中文"}}


def problem(language: str, key: str, **values: object) -> str:
    """A one-line explanation in the piece's language."""
    return _PROBLEMS["zh" if language == "zh" else "en"][key].format(**values)


def _normal(text: str) -> str:
    return re.sub(r"\s+", "", text).casefold().rstrip("。！？!?.…")


def locate_sentence(paragraphs: list[str], quote: str, language: str) -> tuple[int, int, int] | None:
    """(paragraph, first sentence, end sentence) of the sentences that hold ``quote``."""
    needle = _normal(quote)
    if not needle:
        return None
    for p, para in enumerate(paragraphs):
        if needle not in _normal(para):
            continue
        sentences = split_sentences(para, language)
        for size in range(1, len(sentences) + 1):  # the shortest run of sentences that holds the quote
            for i in range(len(sentences) - size + 1):
                if needle in _normal("".join(sentences[i : i + size])):
                    return p, i, i + size
    return None


def target_problems(instructions: list[Instruction], title: str, body: str) -> list[str]:
    """Why an instruction's target is not in the piece (paragraph 9 of 4, a quote that is not there)."""
    paragraphs = split_paragraphs(body) or [body]
    out: list[str] = []
    for instruction in instructions:
        target, language = instruction.target, instruction.language
        if target.kind == "paragraph" and target.index != -1 and not 1 <= (target.index or 0) <= len(paragraphs):
            out.append(problem(language, "missing", n=target.index, count=len(paragraphs)))
        elif (
            target.kind == "sentence"
            and locate_sentence(paragraphs, target.quote or "", language) is None
            and (target.quote or "").strip() not in title
        ):
            out.append(problem(language, "no_sentence", quote=target.quote))
    return out


def _scope(instructions: list[Instruction], paragraphs: list[str]) -> tuple[set[int], bool] | None:
    """The paragraph indexes and whether the title may change; None when the whole piece may."""
    allowed: set[int] = set()
    title = False
    for instruction in instructions:
        target = instruction.target
        if not instruction.understood or target.kind == "whole":
            return None
        if target.kind == "title":
            title = True
        elif target.kind == "paragraph":
            allowed.add(len(paragraphs) - 1 if target.index == -1 else (target.index or 1) - 1)
        else:
            found = locate_sentence(paragraphs, target.quote or "", instruction.language)
            if found is None:
                return None
            allowed.add(found[0])
    return allowed, title


def confine(
    instructions: list[Instruction], before: tuple[str, str], after: tuple[str, str]
) -> tuple[tuple[str, str], bool]:
    """The edit with everything outside the instructions' targets restored byte for byte.

    Returns ``((title, body), spilled)``; ``spilled`` is True when the edit changed
    paragraphs outside its targets in a way that cannot be undone by restoring them
    (paragraphs added or removed around them)."""
    old_paragraphs = split_paragraphs(before[1]) or [before[1]]
    scope = _scope(instructions, old_paragraphs)
    if scope is None:
        return after, False
    allowed, title_allowed = scope
    title = after[0] if title_allowed else before[0]
    new_paragraphs = split_paragraphs(after[1]) or [after[1]]
    if not allowed:
        return (title, before[1]), False
    if len(new_paragraphs) == len(old_paragraphs):
        kept = [
            new if i in allowed else old
            for i, (old, new) in enumerate(zip(old_paragraphs, new_paragraphs, strict=True))
        ]
        if kept == old_paragraphs:
            return (title, before[1]), False
        return (title, "\n\n".join(kept)), False
    # a paragraph was deleted (or split): every paragraph outside the targets must still be there, in order
    outside = [p for i, p in enumerate(old_paragraphs) if i not in allowed]
    rest = iter(new_paragraphs)
    spilled = not all(any(p == q for q in rest) for p in outside)
    return (title, after[1]), spilled
