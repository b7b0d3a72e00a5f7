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
from furnace.writing.edit_messages import LANGUAGE_NAMES as LANGUAGE_NAMES
from furnace.writing.edit_messages import OPERATIONS as OPERATIONS
from furnace.writing.edit_messages import available_operations as available_operations
from furnace.writing.edit_messages import problem as problem
from furnace.writing.request_words import REQUEST_WORDS

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
    "question",
    "call_to_action",
    "punchy",
    "subheading",
    "no_exclaim",
    "example",
    "split",
    "merge",
    "second_person",
    "first_person",
    "hook",
    "plain",
    "title_case",
    "no_hashtags",
    "short_sentences",
    "summary",
]

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
            if self.index is not None and self.index < -1:
                return f"倒数第{-self.index}段" if zh else f"paragraph {-self.index} from the end"
            return f"第{self.index}段" if zh else f"paragraph {self.index}"
        if self.kind == "sentence":
            return f"「{self.quote}」这句" if zh else f'the sentence "{self.quote}"'
        return "全文" if zh else "the whole piece"


def paragraph_position(target: Target, count: int) -> int | None:
    """The 0-based paragraph a paragraph target names in a piece of ``count`` paragraphs (negative
    indexes count from the end: -1 is the last); None when there is no such paragraph."""
    index = target.index or 1
    position = count + index if index < 0 else index - 1
    return position if 0 <= position < count else None


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
    refusal: str | None = None  # understood, but not an edit the chat makes: the problem key saying why

    @property
    def understood(self) -> bool:
        return bool(self.operations)

    def label(self) -> str:
        where = {"whole": "", "title": "@title", "sentence": "@sentence"}.get(self.target.kind)
        if where is None:
            where = f"@{self.target.index}"
        return ", ".join(op.label() + where for op in self.operations)


# --- language -------------------------------------------------------------------

# Every quoting style a user types: 「x」 『x』 《x》 “x” ‘x’ "x" 'x' (not the apostrophe of don't / don’t).
_QUOTED = re.compile(
    r"「([^」]{1,300})」|『([^』]{1,300})』|《([^》]{1,300})》|“([^”]{1,300})”"
    r"|(?<![A-Za-z])‘([^’]{1,300})’(?![A-Za-z])|\"([^\"]{1,300})\"|(?<![A-Za-z])'([^']{1,300})'(?![A-Za-z])"
)


def canonical_quotes(text: str) -> str:
    """``text`` with every quoted span written as 「…」, whatever quotes the user typed."""
    return _QUOTED.sub(lambda m: "「" + next(g for g in m.groups() if g is not None) + "」", text)


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
# Word pairs, read on the instruction with its quotes made 「…」 (:func:`canonical_quotes`).
_Q = r"「([^」]+)」"
_EN_FIX_PAIR = re.compile(
    r"(?:replace|change|swap|turn|fix|rename|substitute)\s+(?:(?:all|every|each)\s+)?(?:(?:the|a)\s+)?"
    r"(?:(?:words?|phrases?|terms?|names?|occurrences? of)\s+)?"
    + _Q
    + r"\s*(?:with|to|for|into|by|as)\s*"
    + _Q
    + r"|"
    + _Q
    + r"\s*(?:should (?:be|read|say)|->|→|to|with|into|=>)\s*"
    + _Q,
    _I,
)
_EN_USE_INSTEAD = re.compile(r"\buse\s+" + _Q + r"\s*(?:instead of|in place of|rather than|not)\s*" + _Q, _I)
_ZH_FIX_PAIR = re.compile(
    r"(?:把|将)\s*"
    + _Q
    + r"\s*(?:都|全部|统一|一律)?(?:改成|改为|换成|替换成|替换为|写成|改写成)\s*"
    + _Q
    + r"|"
    + _Q
    + r"\s*(?:都|全部|统一|一律)?(?:应该是|应为|改成|改为|换成|替换成|替换为|→|->)\s*"
    + _Q
)
_ZH_USE_INSTEAD = re.compile(r"用\s*" + _Q + r"\s*(?:代替|替换|替代|取代)\s*" + _Q)
# Without quotes: only "replace X with Y" / "把X改成Y" where X and Y are a few plain words.
_EN_FIX_BARE = re.compile(
    r"^(?:please\s+)?(?:replace|swap|substitute)\s+(?:(?:all|every|each)\s+)?(?:(?:the|a)\s+)?"
    r"(?:(?:words?|phrases?|terms?|occurrences? of)\s+)?([\w'’-]+(?:\s+[\w'’-]+){0,3}?)\s+(?:with|by|for)\s+"
    r"([\w'’-]+(?:\s+[\w'’-]+){0,3}?)\s*(?:(?:in|throughout|everywhere|across)\b.*)?[.!]?$",
    _I,
)
_ZH_FIX_BARE = re.compile(
    r"^(?:请)?(?:把|将)?\s*([^\s，,。；;！!「」]{1,12}?)\s*(?:都|全部|统一|一律)?(?:改成|改为|换成|替换成|替换为)\s*"
    r"([^\s，,。；;！!「」]{1,12}?)\s*(?:吧|啊)?[。！!]?$"
)
# An unquoted "X" or "Y" that names a part of the piece or a style, not a word of it.
_ZH_NOT_A_WORD = re.compile(
    r"标题|题目|段|开头|开篇|结尾|结语|全文|整体|文章|列表|要点|分点|条目|语气|风格|口吻|句|表情|emoji|人称|正式|活泼|"
    r"口语|疑问|问句|号召|感叹|一点|一些|点儿"
)
_EN_NOT_A_WORD = re.compile(
    r"\b(?:title|headline|heading|paragraph|para|intro|introduction|conclusion|ending|sentence|list|bullets?|"
    r"emojis?|tone|question|voice|person)\b",
    _I,
)


def _word_pair(canon: str, zh: bool) -> tuple[str, str] | None:
    """The (wrong, right) words of a replace request, quoted in any style or (a few plain words) not quoted."""
    m = (_ZH_FIX_PAIR if zh else _EN_FIX_PAIR).search(canon)
    if m:
        a, b = [g for g in m.groups() if g]
        return a.strip(), b.strip()
    m = (_ZH_USE_INSTEAD if zh else _EN_USE_INSTEAD).search(canon)
    if m:
        return m.group(2).strip(), m.group(1).strip()
    if "「" in canon:
        return None
    m = (_ZH_FIX_BARE if zh else _EN_FIX_BARE).search(canon.strip())
    if not m:
        return None
    a, b = m.group(1).strip(), m.group(2).strip().rstrip(".!。！")
    if (_ZH_NOT_A_WORD if zh else _EN_NOT_A_WORD).search(a + " " + b):
        return None
    return a, b


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


# --- further operations (their words: furnace.writing.request_words) -----------------------

_NEW_ZH = {kind: re.compile(zh, _I) for kind, (_, zh) in REQUEST_WORDS.items()}
_NEW_EN = {kind: re.compile(en, _I) for kind, (en, _) in REQUEST_WORDS.items()}
_EN_ADD = re.compile(r"\b(?:add|insert|include|put|give|with|need|needs|want|more|some|a few)\b", _I)
_ZH_ADD = re.compile(r"加|添|补|插入|来一|放一|多|给")
_EN_PAIR = re.compile(
    r"\b(?:paragraphs?|paras?)\s+(\d+)\s*(?:and|&|\+|with|into|,)\s*(?:paragraph\s+|para\s+)?(\d+)\b"
    r"|\b("
    + "|".join(_EN_ORDINALS)
    + r")\s+(?:paragraph\s+)?(?:and|with|into)\s+(?:the\s+)?("
    + "|".join(_EN_ORDINALS)
    + r")\b"
    r"|\b(first|last|final) (two|2) (?:paragraphs|paras)\b",
    _I,
)
_ZH_PAIR = re.compile(
    r"第\s*"
    + _ZH_NUM
    + r"\s*段?\s*(?:和|与|跟|、|,|，|并到|并入|合并到)\s*第?\s*"
    + _ZH_NUM
    + r"\s*段|(最后|前面?|开头)(两|2)段"
)


_EN_NEW_TITLE = re.compile(
    r"\b(?:title|headline|heading)\s+(?:to|as|into)\s+(.+?)\s*$|\b(?:call|name|retitle|rename)\s+it\s+(?:to\s+)?(.+?)\s*$",
    _I,
)
_ZH_NEW_TITLE = re.compile(r"(?:标题|题目)\s*(?:改成|改为|换成|就叫|叫做|定为|用)\s*(.+?)\s*(?:吧|。)?$")
_NOT_A_TITLE = re.compile(
    r"^(?:something|anything|a |an |one |more |less |better|different|new|else)|其他|别的|一个|更|新的|好一点|好点", _I
)


def _bare_title(raw: str, zh: bool) -> str | None:
    """The new title an instruction names without quotes ("change the title to Sun Smart"), or None."""
    m = (_ZH_NEW_TITLE if zh else _EN_NEW_TITLE).search(raw)
    if not m:
        return None
    text = next(g for g in m.groups() if g).strip().rstrip(".!。！")
    return None if not text or _NOT_A_TITLE.search(text) else text


def _merge_target(bare: str, zh: bool, index: int | None) -> Target | None:
    """The first of the two neighbouring paragraphs a merge names (-2: the last two)."""
    m = (_ZH_PAIR if zh else _EN_PAIR).search(bare)
    if m:
        g = m.groups()
        if g[-2]:  # "the first two" / "the last two" / 前两段 / 最后两段
            return Target("paragraph", -2 if g[-2].lower() in ("last", "final", "最后") else 1)
        a, b = (g[0], g[1]) if g[0] else (g[2], g[3])
        na = zh_number(a) if zh else _EN_ORDINALS.get(a.lower()) or int(a)
        nb = zh_number(b) if zh else _EN_ORDINALS.get(b.lower()) or int(b)
        first, second = sorted((na, nb))
        return Target("paragraph", first) if second == first + 1 else None
    if index is not None and re.search(r"\bnext\b|下一段|后一段", bare, _I):
        return Target("paragraph", index)
    return None


def _further(
    canon: str, bare: str, zh: bool, title_named: bool, index: int | None, *, only_voice: bool = False
) -> tuple[Target, Operation] | str | None:
    """An operation beyond the register/length ones and its target; a refusal key; or None.
    ``only_voice``: the instruction quotes a sentence, so only "address the reader as 'you'" is read here."""
    new = _NEW_ZH if zh else _NEW_EN
    table = _ZH if zh else _EN
    adding = (_ZH_ADD if zh else _EN_ADD).search(bare)
    removing = table["remove"].search(bare)
    where = Target("title") if title_named else Target("paragraph", index) if index is not None else Target()
    if only_voice:
        for kind in ("second_person", "first_person"):
            if new[kind].search(canon):
                return where, Operation(kind)
        return None

    for kind in ("refuse_translate", "refuse_rewrite"):
        if new[kind].search(bare):
            return kind
    if new["refuse_images"].search(bare) and not removing and (adding or zh):
        return "refuse_images"
    checking = re.search(r"fact[- ]?check|verify the facts|核实|事实核查|查证", bare, _I)
    if new["refuse_sources"].search(bare) and not removing and (adding or checking or zh):
        return "refuse_sources"
    if (
        new["merge"].search(bare)
        and re.search(r"paragraph|\bparas?\b|段", bare, _I)
        and not table["to_prose"].search(bare)
    ):
        merged = _merge_target(bare, zh, index)
        return (merged, Operation("merge")) if merged is not None else "merge_pair"
    if new["split"].search(bare):
        return (Target("paragraph", index) if index is not None else Target()), Operation("split")
    if new["subheading"].search(bare):
        return (Target("paragraph", index) if index is not None else Target()), Operation("subheading")
    if new["hook"].search(bare):
        return Target("paragraph", 1), Operation("hook")
    if new["no_exclaim"].search(canon) and (removing or not adding):
        return where, Operation("no_exclaim")
    if new["no_hashtags"].search(canon) and removing:
        return where, Operation("no_hashtags")
    if new["short_sentences"].search(bare):
        return where, Operation("short_sentences")
    if new["question"].search(bare) and not removing:
        if title_named or index is not None:
            return where, Operation("question")
        return Target("paragraph", -1), Operation("question")  # "end with a question"
    if new["call_to_action"].search(bare):
        if removing:
            return where, Operation("less_ad")
        return (where if title_named or index is not None else Target("paragraph", -1)), Operation("call_to_action")
    if new["title_case"].search(bare) and (title_named or not zh):
        return Target("title"), Operation("title_case")
    if title_named and new["punchy"].search(bare) and not table["emoji"].search(bare):
        return Target("title"), Operation("punchy")
    if new["example"].search(bare) and not removing:
        return where, Operation("example")
    if new["second_person"].search(canon):
        return where, Operation("second_person")
    if new["first_person"].search(canon):
        return where, Operation("first_person")
    if new["plain"].search(bare):
        return where, Operation("plain")
    if new["summary"].search(bare) and (adding or not removing) and not title_named:
        return Target(), Operation("summary")
    return None


def parse_instruction(text: str, language: str) -> Instruction:
    """The target and operations of one instruction; ``operations`` is empty when nothing was understood."""
    raw = " ".join(text.split())
    zh = language == "zh"
    table = _ZH if zh else _EN
    quotes = _quotes(raw)
    canon = canonical_quotes(raw)  # every quoting style as 「…」
    bare = _QUOTED.sub(" ", raw)  # the instruction's own words, quoted text removed
    ops: list[Operation] = []

    # target
    target = Target()
    title_named = bool((_ZH_TITLE if zh else _EN_TITLE).search(bare))
    index = _paragraph_index(raw, zh)
    sentence_named = bool((_ZH_SENTENCE if zh else _EN_SENTENCE).search(bare))

    # fix a named word comes first: its quotes are words, not a target
    pair = _word_pair(canon, zh)
    if pair and not title_named:
        ops.append(Operation("fix_word", word=pair[0], replacement=pair[1]))
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

    further = _further(canon, bare, zh, title_named, index, only_voice=target.kind == "sentence")
    if isinstance(further, str):
        return Instruction(raw, language, target, (), refusal=further)
    if further is not None:
        return Instruction(raw, language, further[0], (further[1],))

    # the new title: a quoted text, or "a new title" without one
    if target.kind == "title" and not table["emoji"].search(bare):
        if quotes:
            return Instruction(raw, language, target, (Operation("retitle", text=quotes[0]),))
        if table["retitle"].search(bare) and not (
            table["shorten"].search(bare) or table["expand"].search(bare) or table["less_ad"].search(bare)
        ):
            register = [k for k in ("casual", "formal", "lively") if table[k].search(bare)]
            if not register:
                return Instruction(raw, language, target, (Operation("retitle", text=_bare_title(raw, zh)),))

    if table["emoji"].search(bare):
        ops.append(Operation("emoji_remove" if table["remove"].search(bare) else "emoji_add"))
        # the rest of the instruction too ("make it livelier and add an emoji"), never read as a removal
        bare = table["emoji"].sub(" ", bare)
        if ops[0].kind == "emoji_remove":
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


# --- explanations and checks ----------------------------------------------------


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
    """Why an instruction cannot be carried out before any model call: a request the chat refuses
    (translate, add images, …), or a target that is not in the piece (paragraph 9 of 4, a quote that is
    not there, a merge of the last paragraph with the next)."""
    paragraphs = split_paragraphs(body) or [body]
    out: list[str] = []
    for instruction in instructions:
        target, language = instruction.target, instruction.language
        if instruction.refusal:
            out.append(problem(language, instruction.refusal))
        elif target.kind == "paragraph" and target.index != -1 and paragraph_position(target, len(paragraphs)) is None:
            out.append(problem(language, "missing", n=target.index, count=len(paragraphs)))
        elif (
            target.kind == "paragraph"
            and any(op.kind == "merge" for op in instruction.operations)
            and (paragraph_position(target, len(paragraphs)) or 0) + 1 >= len(paragraphs)
        ):
            out.append(problem(language, "merge_last"))
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
            position = paragraph_position(target, len(paragraphs))
            if position is None:
                return None
            allowed.add(position)
            if any(op.kind == "merge" for op in instruction.operations):
                allowed.add(position + 1)
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
