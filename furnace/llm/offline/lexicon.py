"""The offline judge's own concept lexicon: what counts as expressing a descriptor, and how a gap is described.

A target descriptor (an area of expertise, an ``expect`` or ``avoid`` item of a rubric) resolves to a
:class:`Concept`: the cues whose presence in an answer expresses it (synonyms and paraphrases, en and
zh) and the judge's paraphrase of its absence (the ``gap`` clause of its feedback). No operator reads
this module and no feedback text quotes a descriptor, so the way to score is to say the thing — in
any of the words a reader would accept — not to repeat the rubric's words.

Cues: an English cue is a sequence of word stems (each word's first five letters start a word of the
answer, the words in order with at most two words between them); a Chinese cue is a substring; the
cue ``#digit`` is any digit. A cue right after a negation (en "not", "never", "no", "without",
"skip", "avoid"; zh 不, 没, 别, 勿, 未, 无) does not count: saying that you never do a thing is not
doing it.

A descriptor this lexicon does not know becomes a concept of its own words (en: its content words'
stems; zh: at least 60 % of its character bigrams) with a gap that names no word of it ("leaves out a
point the question called for"). This module is the judge's alone: the REPLY rules have their own
wording (``paraphrase.py``) and share no table with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True)
class Concept:
    """A descriptor as the judge understands it."""

    key: str
    cues: tuple[str, ...]
    gap: dict[str, str]  # language -> how the judge says the answer lacks it ("does not ...")
    known: bool = True


def _c(names: str, cues: str, gap_en: str, gap_zh: str) -> tuple[tuple[str, ...], Concept]:
    keys = tuple(n.strip().casefold() for n in names.split("|") if n.strip())
    cue_list = tuple(c.strip().casefold() for c in cues.split("|") if c.strip())
    return keys, Concept(keys[0], cue_list, {"en": gap_en, "zh": gap_zh})


_ENTRIES = (
    # --- security and review
    _c(
        "threat modelling|threat modeling|威胁建模",
        "threat|attack surface|adversar|entry point|威胁|攻击面|入口",
        "does not work out who might get in, and through which entry points",
        "没有梳理谁可能闯进来、从哪些入口进来",
    ),
    _c(
        "severity|严重程度",
        "severity|serious|critical|how bad|risk level|high risk|low risk|严重|风险等级|高危|后果有多大",
        "does not say how serious each problem is",
        "没有说明每个问题的后果有多大",
    ),
    _c(
        "attacker gains|what an attacker gains|攻击者收益",
        "attacker|intruder|malicious|exploit|steal|hijack|take over|攻击者|黑客|盗取|窃取",
        "does not say what an intruder could do with the weakness",
        "没有说明坏人能利用这个漏洞做什么",
    ),
    _c(
        "rotate session|session rotation|轮换会话",
        "rotat|fresh session|new session|fresh login token|regenerat|reissu|轮换|重新生成|重新发放",
        "does not suggest issuing a fresh login token once the user signs in",
        "没有建议登录后重新发放令牌",
    ),
    _c(
        "hostile input|untrusted input|恶意输入",
        "hostile|untrusted|suspect|validat|sanitis|sanitiz|trust boundar|not trusted|校验|不可信|过滤",
        "does not treat what users send as suspect until it is checked",
        "没有把用户传来的内容当作不可信、先检查再使用",
    ),
    _c(
        "praise|称赞",
        "praise|well done|great job|nice work|compliment|celebrat|做得好|真棒|夸",
        "spends words complimenting the work",
        "花了笔墨去夸奖",
    ),
    # --- mathematics and teaching
    _c(
        "calculus|微积分",
        "calculus|derivativ|integral|rates of change|rate of change|differentiat|微积分|导数|积分",
        "does not bring in the mathematics of rates of change",
        "没有用到变化率的数学",
    ),
    _c(
        "guiding question|引导性问题",
        "guiding question|leading question|question at a time|what do you think|try first|asking them|"
        "引导|提问|你觉得|反问",
        "does not lead the learner by asking them something first",
        "没有先反问学习者、让他自己想",
    ),
    _c(
        "product rule|乘积法则",
        "product rule|product of two|differentiating a product|multiplied together|乘积法则|两个函数的乘积|相乘",
        "does not say how to differentiate two functions multiplied together",
        "没有讲两个函数相乘时怎么求导",
    ),
    _c(
        "chain rule|链式法则",
        "chain rule|inner function|outer function|function inside|composite|链式法则|复合函数|内层函数",
        "does not explain how to differentiate a function inside another function",
        "没有讲清函数套函数时怎么求导",
    ),
    _c(
        "integration by parts|分部积分",
        "by parts|uv minus|u dv|two pieces|splitting the integral|分部积分|拆成两部分",
        "does not suggest splitting the problem into two pieces, one easy to differentiate",
        "没有提到拆成两部分来做",
    ),
    # --- plain language and contracts
    _c(
        "everyday words|plain language|日常用语",
        "everyday word|plain word|plain language|plain terms|plain english|simple words|jargon|say at home|"
        "通俗|大白话|日常用语",
        "does not translate the jargon into what anyone would say at home",
        "没有把术语翻成大白话",
    ),
    _c(
        "notice period|通知期",
        "notice|advance warning|deadline|cancel before|提前通知|通知期|截止|提前多久",
        "does not say how much advance warning must be given, and by when",
        "没有说明要提前多久告知对方",
    ),
    _c(
        "penalties|penalty|违约金",
        "penalt|forfeit|fees|charges|breaking the terms|违约金|罚金|扣除",
        "does not warn what breaking the terms would cost",
        "没有提醒违反条款要付出什么代价",
    ),
    # --- launches, numbers and customers
    _c(
        "product launches|product launch|产品发布",
        "launch|release|rollout|roll out|go-live|announcement|发布|上线|首发",
        "does not plan it like a release: timing, audience and the announcement",
        "没有按上线的思路安排：时间、受众和公告",
    ),
    _c(
        "habit building|习惯养成",
        "habit|routine|streak|stick|daily practice|习惯|坚持|打卡",
        "does not turn the advice into a routine that sticks",
        "没有把建议变成每天能坚持下去的做法",
    ),
    _c(
        "call to action|行动号召",
        "call to action|sign up|order now|buy now|reader to act|click|join us|reply to this|"
        "立即|马上下单|点击|行动号召|快来|马上报名",
        "does not close by asking the reader to act: sign up, buy or reply",
        "结尾没有请读者马上报名、购买或回复",
    ),
    _c(
        "tasting notes|风味描述",
        "tasting note|flavour|flavor|aroma|tastes|smells|notes of|口感|香气|风味",
        "does not describe the tea's flavour and aroma",
        "没有讲茶的口感和香气",
    ),
    _c(
        "guarantee|保证",
        "guarantee|promise|always works|100%|保证|承诺|绝对",
        "promises a result it cannot be sure of",
        "许诺了没法确定的结果",
    ),
    _c(
        "simplest baseline|baseline|基线",
        "baseline|simplest|reference point|benchmark|against last|基线|参照|对比",
        "does not first compare the figure with an obvious reference point",
        "没有先拿一个简单的参照来比较这个数字",
    ),
    _c(
        "retention cohort|cohort|留存分组",
        "cohort|retention|groups by|by when they joined|signup month|留存|分组|同期群|分批",
        "does not split the customers into groups by when they joined",
        "没有按用户加入的时间把他们分批来看",
    ),
    _c(
        "concrete next step|next step|下一步",
        "next step|small step|first step|small action|right away|one action|下一步|第一步|马上就能做",
        "does not give one small action to take right away",
        "没有给出一个马上就能做的小行动",
    ),
    _c(
        "delivery date|送达日期",
        "delivery date|will arrive|arrival|arrive by|expected on|ship by|送达|到货|预计",
        "does not tell the customer when the parcel will arrive",
        "没有告诉客户包裹什么时候到",
    ),
    _c(
        "diagnose|diagnosis|诊断",
        "diagnos|disorder|symptom|诊断|病症",
        "plays doctor about what is wrong with the person",
        "像医生一样给人下结论",
    ),
    _c(
        "habit cue|习惯触发",
        "trigger|cue|reminder|anchor|same time|right after|提醒|触发|固定时间",
        "does not tie the new routine to a trigger in the day",
        "没有把新做法和一天里某个固定的提醒绑在一起",
    ),
    _c(
        "hook|opening hook|开头钩子",
        "hook|grab|attention|opening line|first line|first seven words|抓人|开头|抓住",
        "does not open with a line that grabs attention",
        "第一句没有抓住人",
    ),
    # --- family budget and sun care (zh first)
    _c(
        "家庭预算|family budget",
        "预算|开支|花销|收支|budget|spending|expenses",
        "没有把家里每月的开支列出来规划",
        "没有把家里每月的开支列出来规划",
    ),
    _c(
        "防晒|sun protection",
        "防晒|紫外线|晒伤|遮阳|sunscreen|sun protection|uv",
        "没有讲怎么挡住紫外线、避免晒伤",
        "没有讲怎么挡住紫外线、避免晒伤",
    ),
    _c(
        "克数|grams",
        "克|分量|用量|勺|gram",
        "没有写清每样食材用多少分量",
        "没有写清每样食材用多少分量",
    ),
    _c(
        "采购清单|shopping list",
        "清单|要买的东西|采购|shopping list",
        "没有列出要买的东西",
        "没有列出要买的东西",
    ),
    _c(
        "应急基金|emergency fund",
        "应急|救急|备用金|emergency",
        "没有提到留一笔救急用的钱",
        "没有提到留一笔救急用的钱",
    ),
    _c(
        "具体数字|concrete numbers",
        "#digit|数额|几成",
        "没有用实际的数额举例",
        "没有用实际的数额举例",
    ),
    _c(
        "收支记账|记账|bookkeeping",
        "记账|账本|记下来|收支|进出",
        "没有建议把每笔进出都记下来",
        "没有建议把每笔进出都记下来",
    ),
    _c(
        "个股|individual stocks",
        "个股|股票|stock",
        "点名推荐了具体的股票",
        "点名推荐了具体的股票",
    ),
    _c(
        "补涂频率|reapplication",
        "补涂|再涂|重新涂|两小时|两个小时|reappl",
        "没有说多久需要再涂一次",
        "没有说多久需要再涂一次",
    ),
    _c(
        "儿童肤质|children's skin",
        "儿童|小朋友|宝宝|肤质|娇嫩|敏感",
        "没有考虑小朋友皮肤的特点",
        "没有考虑小朋友皮肤的特点",
    ),
    _c(
        "spf|防晒指数",
        "spf|pa值|pa+|防晒指数|指数|强度",
        "没有说明挡紫外线的强度该怎么选",
        "没有说明挡紫外线的强度该怎么选",
    ),
)

LEXICON: dict[str, Concept] = {name: concept for names, concept in _ENTRIES for name in names}
_UNKNOWN_GAP = {"en": "leaves out a point the question called for", "zh": "漏掉了这个问题该讲到的一点"}
_HAN = re.compile(r"[\u4e00-\u9fff]")
_WORD = re.compile(r"[a-z0-9][a-z0-9'+%-]*")
_STOP = frozenset(_words("the and for are how why who its one any with that this from your have will when what into"))
_NEG_EN = frozenset(_words("not never no without skip avoid don't doesn't didn't won't isn't aren't cannot"))
_NEG_ZH = ("不", "没", "别", "勿", "未", "无")
_DIGIT = re.compile(r"[0-9０-９]")


def concept(descriptor: str) -> Concept:
    """The concept a descriptor names (its own words when the lexicon does not know it)."""
    key = " ".join(descriptor.casefold().split())
    return LEXICON.get(key) or Concept(key, (key,), dict(_UNKNOWN_GAP), known=False)


@lru_cache(maxsize=4096)
def _en_pattern(cue: str) -> re.Pattern[str] | None:
    words = [w for w in _WORD.findall(cue) if w not in _STOP] or _WORD.findall(cue)
    if not words:
        return None
    stems = [re.escape(w[:5]) + r"[\w'-]*" for w in words]
    return re.compile(r"\b" + r"(?:\W+\w+){0,2}?\W+".join(stems))


def _negated_en(text: str, start: int) -> bool:
    before = _WORD.findall(text[max(0, start - 40) : start])[-3:]
    return any(w in _NEG_EN for w in before)


def _negated_zh(text: str, start: int) -> bool:
    return any(n in text[max(0, start - 2) : start] for n in _NEG_ZH)


def _cue_found(cue: str, text: str) -> bool:
    if cue == "#digit":
        return bool(_DIGIT.search(text))
    if _HAN.search(cue) or not _WORD.search(cue):
        found = [m.start() for m in re.finditer(re.escape(cue), text)]
        return any(not _negated_zh(text, at) for at in found)
    pattern = _en_pattern(cue)
    return pattern is not None and any(not _negated_en(text, m.start()) for m in pattern.finditer(text))


def _own_words_found(key: str, text: str) -> bool:
    if _HAN.search(key):
        han = "".join(re.findall(r"[\u4e00-\u9fff]+", key))
        grams = {han[i : i + 2] for i in range(max(1, len(han) - 1))}
        return sum(g in text for g in grams) >= 0.6 * len(grams)
    return _cue_found(key, text)


def expressed(item: Concept, text: str) -> bool:
    """Whether ``text`` (casefolded) expresses the concept: one of its cues, not negated."""
    if not item.known:
        return _own_words_found(item.key, text)
    return any(_cue_found(cue, text) for cue in item.cues)


def gap(item: Concept, language: str) -> str:
    """The judge's words for the concept's absence (never the descriptor's own words)."""
    return item.gap.get(language) or item.gap["en"]
