"""Offline rules for the fusion tasks: identity, rewrite, adjudicate, route.

Deterministic for the same inputs and seed; zh and en. Inputs (``request.inputs``),
as built by :mod:`furnace.fusion.operators.prompts`:

- **identity** ``{"language": "en"|"zh", "parents": [{"name", "identity", "priority"}]}``
  → ``{"identity": str}``. Takes each parent's role phrase (its identity sentence
  without "You are"/"你是" and cut before the first clause such as "who ...",
  "，..."), highest priority first, and joins them:
  "You are a data scientist and a travel writer in one voice." /
  "你是一位数据科学家，同时也是一位旅行作家。"
- **rewrite** ``{"principle": str, "language": str}`` → ``{"principle": str}``.
  Rewords by seeded rules, keeping the meaning: a synonym swap, added emphasis,
  or moving a leading "When/If ..." clause to the end. Never returns the input
  unchanged (emphasis is the last resort).
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

from furnace.llm.seam import LLMRequest

# --- identity -------------------------------------------------------------------

_EN_LEAD = re.compile(r"^(you are|you're|i am|i'm|as)\s+", re.I)
_EN_CUT = re.compile(
    r"\s+(who|that|which|with|whose|known for|specialising|specializing)\s+|[,;:.!?(—–]\s*|\s-\s", re.I
)
_ZH_LEAD = re.compile(r"^(你是|我是|作为)")
_ZH_CUT = re.compile(r"[，。；：！？,.;:!?（(]")


def role_phrase(identity: str, language: str) -> str:
    """The role part of an identity sentence ("a seasoned data scientist")."""
    text = " ".join(identity.split())
    if language == "zh" or re.search(r"[\u4e00-\u9fff]", text[:4]):
        text = _ZH_LEAD.sub("", text)
        return _ZH_CUT.split(text, maxsplit=1)[0].strip() or text
    text = _EN_LEAD.sub("", text)
    role = _EN_CUT.split(text, maxsplit=1)[0].strip() or text.rstrip(".")
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


def _emphasise(text: str, language: str, rng: random.Random) -> str:
    if language == "zh":
        return (
            "请务必" + text.removeprefix("请")
            if not text.startswith("请务必")
            else text.rstrip("。") + "，这一点很重要。"
        )
    body = text.rstrip(".!")
    prefixes = ["Make sure to ", "Be sure to ", "Take care to "]
    if body[:1].isupper() and not body.lower().startswith(tuple(p.lower() for p in prefixes)):
        return rng.choice(prefixes) + body[0].lower() + body[1:] + "."
    return body + " — this matters."


def rewrite(request: LLMRequest, rng: random.Random) -> tuple[str, Any]:
    """Reword one principle by a seeded rule, keeping its meaning."""
    text = " ".join(str(request.inputs.get("principle", "")).split())
    language = request.inputs.get("language", "en")
    swap = _swap_zh if language == "zh" else _swap_en
    strategies = [lambda: swap(text, rng), lambda: _reorder(text, language)]
    rng.shuffle(strategies)
    for strategy in strategies:
        out = strategy()
        if out and out != text:
            return "", {"principle": out}
    return "", {"principle": _emphasise(text, language, rng)}


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
    low = text.casefold()
    words = {w for w in re.findall(r"[a-z0-9]+", low) if len(w) > 2}
    for run in re.findall(r"[\u4e00-\u9fff]+", low):
        words |= {run[i : i + 2] for i in range(len(run) - 1)}
    return words


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
