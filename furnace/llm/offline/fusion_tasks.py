"""Offline rules for the fusion tasks: identity, rewrite, adjudicate, route.

Deterministic for the same inputs and seed; zh and en. Inputs (``request.inputs``),
as built by :mod:`furnace.fusion.operators.prompts`:

- **identity** ``{"language": "en"|"zh", "parents": [{"name", "identity", "priority"}]}``
  → ``{"identity": str}``. Takes each parent's role phrase (its identity sentence
  without "You are"/"你是" and cut before the first clause such as "who ...",
  "，..."), highest priority first, and joins them:
  "You are a data scientist and a travel writer in one voice." /
  "你是一位数据科学家，同时也是一位旅行作家。" Only roles written in the requested
  language are used, so a zh child of a zh and an en parent never mixes scripts.
- **rewrite** ``{"principle": str, "language": str}`` → ``{"principle": str}``.
  Rewords by a seeded choice among the paraphrase rules that fit: negation
  ("Never X" → "Avoid X-ing", "不要X" → "避免X"), order ("X before Y-ing" →
  "Before Y-ing, x", "A前先B" → "先B，再A", a leading "When/If ..." clause moved
  to the end), modality ("…要…" → "…应当…", "Always X" → "X every time"),
  coordination ("clear and kind" → "kind and clear") and a synonym swap. When no
  rule fits the principle comes back unchanged.
- **adjudicate** ``{"field": str, "rule": "stricter"|"plain_text"|"specific",
  "options": [{"label", "value", "priority", "source"}]}`` → ``{"choice": int,
  "reason": str}``. Highest priority wins; on a tie the rule decides (stricter:
  the smaller number / the constraining option; plain_text: the option whose
  value is false; specific: the longer wording), then the first option.
- **route** ``{"message": str, "members": [{"ref", "name", "expertise": [str]}]}``
  → ``{"member": ref, "reason": str}``. The member with the most expertise terms
  found in the message (words for en, 2-character runs for zh) leads; ties go
  to the earlier member.
"""

from __future__ import annotations

import random
import re
from typing import Any

from furnace.domain.text import has_cjk, terms
from furnace.llm.offline.paraphrase import gerund
from furnace.llm.seam import LLMRequest

# --- identity -------------------------------------------------------------------

_EN_LEAD = re.compile(r"^(you are|you're|i am|i'm|as)\s+", re.I)
_EN_CUT = re.compile(
    r"\s+(?:who|that|which|with|whose|known for|specialising|specializing)\s+|[;:.!?(—–]\s*|\s-\s", re.I
)
_ARTICLES = ("a", "an", "the")
_ZH_LEAD = re.compile(r"^(你是|我是|作为)")
_ZH_CUT = re.compile(r"[，。；：！？,.;:!?（(]")


def role_phrase(identity: str, language: str) -> str:
    """The role part of an identity sentence ("a seasoned data scientist")."""
    text = " ".join(identity.split())
    if language == "zh" or has_cjk(text[:4]):
        text = _ZH_LEAD.sub("", text)
        return _ZH_CUT.split(text, maxsplit=1)[0].strip() or text
    text = _EN_LEAD.sub("", text)
    head = _EN_CUT.split(text, maxsplit=1)[0].strip()
    # A comma ends the role unless it only separates adjectives ("A warm, patient coach"):
    # keep adding comma parts while the last one is a single word (after an article).
    parts = [p.strip() for p in head.split(",")]
    role, last = parts[0], parts[0].split()
    for part in parts[1:]:
        if len(last) - (bool(last) and last[0].lower() in _ARTICLES) > 1 or not part:
            break
        role, last = f"{role}, {part}", part.split()
    role = role.rstrip(",").strip() or text.rstrip(".")
    if role.split(" ", 1)[0] in ("A", "An", "The"):
        role = role[0].lower() + role[1:]
    return role


_MAX_ROLES = 3
_MAX_ROLE = 150


def _fused_roles(role: str, language: str) -> list[str]:
    """Split a role phrase that this rule composed earlier back into its roles."""
    if language == "zh":
        return [r for r in role.split("，同时也是") if r]
    if role.endswith(" in one voice"):
        return [r for r in re.split(r",\s+|\s+and\s+", role.removesuffix(" in one voice")) if r]
    return [role]


def identity(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Compose the parents' role phrases, highest priority first."""
    language = request.inputs.get("language", "en")
    parents = sorted(request.inputs.get("parents", []), key=lambda p: -int(p.get("priority", 100)))
    roles: list[str] = []
    for p in parents:
        role = role_phrase(str(p.get("identity") or p.get("name") or ""), language)
        if has_cjk(role) != (language == "zh"):
            continue  # a role in another language would make a mixed-language sentence
        for part in _fused_roles(role, language):
            if part and part.casefold() not in {r.casefold() for r in roles}:
                roles.append(part)
    # Repeated fusion would otherwise chain every ancestor's role into one ever-longer
    # sentence: keep the three highest-priority roles, each within a sane length.
    roles = [r if len(r) <= _MAX_ROLE else r[: _MAX_ROLE - 1].rstrip() + "…" for r in roles[:_MAX_ROLES]]
    if language == "zh":
        sentence = "你是" + ("，同时也是".join(roles) if roles else "一位融合型助手") + "。"
    else:
        if len(roles) > 1:
            joined = ", ".join(roles[:-1]) + " and " + roles[-1]
            sentence = f"You are {joined} in one voice."
        else:
            sentence = f"You are {roles[0] if roles else 'a fused assistant'}."
    return "", {"identity": sentence}


# --- rewrite --------------------------------------------------------------------

_EN_SYNONYMS = {
    "short": "brief",
    "brief": "short",
    "briefly": "concisely",
    "concise": "succinct",
    "always": "consistently",
    "use": "employ",
    "avoid": "steer clear of",
    "explain": "clarify",
    "answer": "reply",
    "answers": "replies",
    "help": "assist",
    "show": "demonstrate",
    "give": "provide",
    "keep": "maintain",
    "make": "ensure",
    "simple": "plain",
    "clear": "lucid",
    "examples": "illustrations",
    "example": "illustration",
    "questions": "queries",
    "quickly": "promptly",
    "never": "at no point",
    "check": "verify",
    "users": "people",
}
_ZH_SYNONYMS = {
    "简短": "简洁",
    "简洁": "精炼",
    "使用": "采用",
    "总是": "始终",
    "避免": "尽量不要",
    "解释": "说明",
    "回答": "回复",
    "帮助": "协助",
    "例子": "示例",
    "示例": "例子",
    "清楚": "清晰",
    "问题": "疑问",
    "用户": "使用者",
}
_EN_WHEN = re.compile(r"^(when|if|whenever|before|after)\s+(.+?),\s*(.+?)([.!]?)$", re.I)
_ZH_WHEN = re.compile(r"^(当|如果|在)(.+?)[，,](.+?)([。！]?)$")


def _swap_en(text: str, rng: random.Random) -> str | None:
    words = list(re.finditer(r"[A-Za-z]+", text))
    hits = [m for m in words if m.group(0).lower() in _EN_SYNONYMS]
    if not hits:
        return None
    m = rng.choice(hits)
    repl = _EN_SYNONYMS[m.group(0).lower()]
    if m.group(0)[0].isupper():
        repl = repl[0].upper() + repl[1:]
    return text[: m.start()] + repl + text[m.end() :]


def _swap_zh(text: str, rng: random.Random) -> str | None:
    hits = [w for w in _ZH_SYNONYMS if w in text]
    if not hits:
        return None
    word = rng.choice(sorted(hits))
    return text.replace(word, _ZH_SYNONYMS[word], 1)


def _reorder(text: str, language: str) -> str | None:
    if language == "zh":
        m = _ZH_WHEN.match(text)
        return f"{m.group(3)}（{m.group(1)}{m.group(2)}时）{m.group(4) or '。'}" if m else None
    m = _EN_WHEN.match(text)
    if not m:
        return None
    main = m.group(3)
    return f"{main[0].upper()}{main[1:]} {m.group(1).lower()} {m.group(2)}{m.group(4) or '.'}"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _low(text: str) -> str:
    return text[:1].lower() + text[1:] if not text[:2].isupper() else text


_EN_STOP = {"the", "a", "an", "to", "of", "in", "it", "them", "you", "your", "is", "are"}


def _en_rules(text: str) -> list[str]:
    """Every paraphrase the English rules can make of one principle."""
    m = re.match(r"^(.*?)([.!]?)$", text)
    if m is None:  # a principle over several lines: no rule applies
        return []
    body, end = m.group(1), m.group(2) or "."
    out: list[str] = []
    m = re.match(r"^(?:never|don't|do not)\s+(\w+)\s*(.*)$", body, re.I)
    if m:
        out.append(f"Avoid {gerund(m.group(1).lower())} {m.group(2)}".rstrip() + end)
    m = re.match(r"^avoid\s+(.+)$", body, re.I)
    if m:
        out.append(f"Steer clear of {m.group(1)}{end}")
    m = re.match(r"^always\s+(.+)$", body, re.I)
    if m:
        out.append(f"{_cap(m.group(1))} every time{end}")
    m = re.match(r"^(.+?)\s+before\s+(\w+ing\b.*)$", body, re.I)
    if m and not re.match(r"^(when|if|before)\b", body, re.I):
        out.append(f"Before {m.group(2)}, {_low(m.group(1))}{end}")
    m = re.match(r"^be\s+(.+)$", body, re.I)
    if m:
        out.append(f"Stay {m.group(1)}{end}")
    m = re.match(r"^use\s+(.+)$", body, re.I)
    if m:
        out.append(f"Rely on {m.group(1)}{end}")
    m = re.match(r"^(.*\b)(\w+) and (\w+)$", body)
    if m and m.group(2).lower() not in _EN_STOP and m.group(3).lower() not in _EN_STOP:
        out.append(f"{m.group(1)}{m.group(3)} and {m.group(2)}{end}")
    return out


_ZH_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^不要(.+)$"), r"避免\1"),
    (re.compile(r"^避免(.+)$"), r"尽量不\1"),
    (re.compile(r"^别(.+)$"), r"不要\1"),
    (re.compile(r"^切勿(.+)$"), r"千万不要\1"),
    (re.compile(r"^不([^要用得是能会].*)$"), r"避免\1"),
    (re.compile(r"^总是(.+)$"), r"始终\1"),
    (re.compile(r"^始终(.+)$"), r"一直\1"),
    (re.compile(r"^先(.+?)[，,]?再(.+)$"), r"在\2之前，先\1"),
    (re.compile(r"^(.+?)前先(.+)$"), r"先\2，再\1"),
    (re.compile(r"^(.+?)要(.+)$"), r"\1应当\2"),
    (re.compile(r"^(.+?)应当(.+)$"), r"\1需要\2"),
    (re.compile(r"^尽量(.+)$"), r"尽可能\1"),
    (re.compile(r"^尽可能(.+)$"), r"尽量\1"),
)


def _zh_rules(text: str) -> list[str]:
    """Every paraphrase the Chinese rules can make of one principle."""
    m = re.match(r"^(.*?)([。！]?)$", text)
    if m is None:  # a principle over several lines: no rule applies
        return []
    body, end = m.group(1), m.group(2)
    return [pattern.sub(repl, body, count=1) + end for pattern, repl in _ZH_RULES if pattern.match(body)]


def paraphrases(text: str, language: str, rng: random.Random) -> list[str]:
    """Rule-made paraphrases of a principle: structure rules (negation, order, modality,
    coordination), a synonym swap and a clause move, each keeping the meaning; none
    equals the input."""
    found = _zh_rules(text) if language == "zh" else _en_rules(text)
    swapped = (_swap_zh if language == "zh" else _swap_en)(text, rng)
    out: list[str] = []
    for candidate in [*found, swapped, _reorder(text, language)]:
        if candidate and candidate != text and candidate not in out:
            out.append(candidate)
    return out


def rewrite(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Reword one principle by a seeded choice among the paraphrase rules that fit it.

    When no rule fits, the principle comes back unchanged (never a stock prefix)."""
    text = " ".join(str(request.inputs.get("principle", "")).split())
    language = request.inputs.get("language", "en")
    options = paraphrases(text, language, rng)
    return "", {"principle": rng.choice(options) if options else text}


# --- adjudicate -----------------------------------------------------------------


def _tie_break(options: list[dict[str, Any]], tied: list[int], rule: str) -> tuple[int, str]:
    if rule == "stricter":
        numeric = [
            i
            for i in tied
            if isinstance(options[i].get("value"), (int, float)) and not isinstance(options[i].get("value"), bool)
        ]
        if numeric:
            return min(numeric, key=lambda i: options[i]["value"]), "the stricter (smaller) limit"
        flagged = [i for i in tied if options[i].get("value") is True]
        if flagged:
            return flagged[0], "the stricter option"
    if rule == "plain_text":
        plain = [i for i in tied if options[i].get("value") is False]
        if plain:
            return plain[0], "plain text renders everywhere"
    if rule == "specific":
        return max(tied, key=lambda i: (len(str(options[i].get("label", ""))), -i)), "the more specific wording"
    return tied[0], "the first option"


def adjudicate(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Pick by priority, then by the stated rule, and say why."""
    options = list(request.inputs.get("options", []))
    if not options:
        return "", {"choice": 0, "reason": "no options"}
    zh = request.inputs.get("language") == "zh"
    top = max(int(o.get("priority", 0)) for o in options)
    tied = [i for i, o in enumerate(options) if int(o.get("priority", 0)) == top]
    if len(tied) == 1:
        i = tied[0]
        reason = (
            f"{options[i].get('source')} 优先级更高（{top}）"
            if zh
            else f"{options[i].get('source')} has the higher priority ({top})"
        )
        return "", {"choice": i, "reason": reason}
    i, why = _tie_break(options, tied, str(request.inputs.get("rule", "")))
    reason = f"优先级相同（{top}），按规则选择：{why}" if zh else f"priorities tie ({top}); rule: {why}"
    return "", {"choice": i, "reason": reason}


# --- route ----------------------------------------------------------------------


def _terms(text: str) -> set[str]:
    # two letters count: expertise such as "Go", "AI" or "UX" must be able to match
    return terms(text, min_len=2, stop=())


def route(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """The member whose expertise terms best match the message."""
    message = _terms(str(request.inputs.get("message", "")))
    members = list(request.inputs.get("members", []))
    if not members:
        return "", {"member": "", "reason": "no members"}
    scores = [len(message & _terms(" ".join(m.get("expertise", [])))) for m in members]
    best = max(range(len(members)), key=lambda i: (scores[i], -i))
    zh = request.inputs.get("language") == "zh"
    if scores[best]:
        reason = (
            f"问题与{members[best].get('name')}的专长有{scores[best]}处匹配"
            if zh
            else f"{scores[best]} expertise term(s) of {members[best].get('name')} appear in the question"
        )
    else:
        reason = "没有匹配的专长，由第一位成员主答" if zh else "no expertise term matched; the first member leads"
    return "", {"member": members[best]["ref"], "reason": reason}
