"""The directive classifier: deterministic instructions are recognised in code.

``classify(message, members)`` returns a :class:`Directive`:

- ``stop`` / ``continue`` — control words alone on the line ("stop", "停", "继续", "/continue");
- ``roll_call`` — "报数", "count off", "sound off", "number off", "roll call", "点名";
  addressed to the @mentioned members, or to everyone;
- ``all`` — "@all", "@everyone", "@全体成员", "@所有人", "全体都有": every member in order;
- ``mention`` — "@name" or "@id" of one or more members: those members only. The
  longest member name wins ("@Quant Trader" over a member called "Quant"); Latin
  names in any case, any run of spaces between a name's words, zh names with no
  space after them (:func:`find_mentions`); :func:`strip_mentions` gives the
  question the mentioned members answer;
- ``open`` — everything else (goes to the supervisor). A mention together with a
  discussion cue ("@Ann what do you all think?", "@Ann 大家讨论一下") is open
  discussion led by the mentioned member (``mentions`` set; the fallback speaker).

No model is ever consulted here.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class DirectiveKind(StrEnum):
    ROLL_CALL = "roll_call"
    ALL = "all"
    MENTION = "mention"
    STOP = "stop"
    CONTINUE = "continue"
    OPEN = "open"


class MemberName(BaseModel):
    """What a member can be @mentioned by."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str


class Directive(BaseModel):
    """A classified user message. ``mentions`` are member ids in member order."""

    model_config = ConfigDict(frozen=True)

    kind: DirectiveKind
    mentions: tuple[str, ...] = ()
    addressed_all: bool = False

    @property
    def deterministic(self) -> bool:
        """True when the router, not the supervisor, decides who speaks."""
        return self.kind is not DirectiveKind.OPEN

    @property
    def control(self) -> bool:
        return self.kind in (DirectiveKind.STOP, DirectiveKind.CONTINUE)


_TRAIL = r"[\s!！.。~～?？]*"
_STOP = re.compile(
    r"^/?(stop|halt|enough|be quiet|quiet|silence|停|停止|停下|暂停|别说了|安静|闭嘴|够了)" + _TRAIL + "$",
    re.IGNORECASE,
)
_CONTINUE = re.compile(
    r"^/?(continue|go on|carry on|keep going|resume|继续|接着说|接着|继续说|请继续)" + _TRAIL + "$",
    re.IGNORECASE,
)
_ROLL_CALL = re.compile(
    r"报数|点名|报到|报个数|count\s*off|sound\s*off|number\s*off|roll[\s-]*call|call\s*the\s*roll",
    re.IGNORECASE,
)
_ALL = re.compile(
    r"@\s*(all|everyone|everybody|channel|here|全体成员|全体|所有人|大家)(?![\w])|全体都有",
    re.IGNORECASE,
)


_DISCUSS = re.compile(
    r"discuss|debate|brainstorm|what do you (all|both|guys) think|everyone|each of you|all of you|"
    r"讨论|辩论|大家|各位|你们|头脑风暴",
    re.IGNORECASE,
)


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LEAD = re.compile(r"^[\s,，:：;；、.。!！]+")


def _norm(text: str) -> str:
    # NFKC folds full-width "＠" and letters into their ASCII forms.
    return unicodedata.normalize("NFKC", text).strip()


def _handle_pattern(handle: str) -> re.Pattern[str]:
    """``@handle``: any run of spaces where the handle has one, case-insensitive (Latin), and not
    running on into a longer word ("@Ann" is not "@Anna"). A handle ending in a CJK character needs
    no boundary: zh text has no spaces ("@小周你好")."""
    words = [re.escape(w) for w in handle.split()]
    tail = "" if _CJK.match(handle[-1]) or not handle[-1].isalnum() else r"(?!\w)"
    return re.compile(r"@\s?" + r"\s+".join(words) + tail, re.IGNORECASE)


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` NFKC-folded character by character, with the index in ``text`` of each folded character
    (so a span found in the folded text maps back onto what the user wrote)."""
    chars: list[str] = []
    where: list[int] = []
    for i, char in enumerate(text):
        folded = unicodedata.normalize("NFKC", char)
        chars.append(folded)
        where.extend([i] * len(folded))
    return "".join(chars), where


def _mention_spans(text: str, members: Sequence[MemberName]) -> list[tuple[int, int, str]]:
    """``(start, end, member id)`` of each ``@name``/``@id`` in ``text``, as indices into ``text``.

    The longest handle wins ("@Quant Trader" is Quant Trader, not a member called Quant followed by
    the word "Trader"); a span taken by a longer handle is not matched again by a shorter one."""
    folded, where = _folded(text)
    handles = sorted(
        {(" ".join(h.split()), m.id) for m in members for h in (_norm(m.name), m.id) if h.strip()},
        key=lambda pair: (-len(pair[0]), pair[0].casefold(), pair[1]),
    )
    spans: list[tuple[int, int, str]] = []
    for handle, member_id in handles:
        for match in _handle_pattern(handle).finditer(folded):
            start, end = where[match.start()], where[match.end() - 1] + 1
            if all(end <= s or start >= e for s, e, _ in spans):
                spans.append((start, end, member_id))
    return sorted(spans)


def find_mentions(text: str, members: Sequence[MemberName]) -> tuple[str, ...]:
    """Ids of members mentioned as ``@name`` or ``@id`` (longest name first, case-insensitive), in member order."""
    found = {member_id for _, _, member_id in _mention_spans(text, members)}
    return tuple(m.id for m in members if m.id in found)


def strip_mentions(text: str, members: Sequence[MemberName]) -> str:
    """``text`` without its member mentions: what was asked ("@Quant Trader what's…" → "what's…").

    Only handles of ``members`` are taken out (an ``@`` that names nobody stays), and the
    punctuation a mention leaves at the start ("@Ann, hi" → "hi") goes with it; the rest is
    the user's text as written (spaces collapsed)."""
    spans = _mention_spans(text, members)
    if not spans:
        return text.strip()
    out, at = [], 0
    for start, end, _ in spans:
        out.append(text[at:start])
        at = end
    out.append(text[at:])
    return _LEAD.sub("", " ".join("".join(out).split()))


def classify(message: str, members: Sequence[MemberName]) -> Directive:
    """Classify a user message into a directive (zh and en), by rules only."""
    text = _norm(message)
    if _STOP.match(text):
        return Directive(kind=DirectiveKind.STOP)
    if _CONTINUE.match(text):
        return Directive(kind=DirectiveKind.CONTINUE)
    addressed_all = bool(_ALL.search(text))
    mentions = () if addressed_all else find_mentions(text, members)
    if _ROLL_CALL.search(text):
        return Directive(kind=DirectiveKind.ROLL_CALL, mentions=mentions, addressed_all=addressed_all or not mentions)
    if addressed_all:
        return Directive(kind=DirectiveKind.ALL, addressed_all=True)
    if mentions and not _DISCUSS.search(text):
        return Directive(kind=DirectiveKind.MENTION, mentions=mentions)
    return Directive(kind=DirectiveKind.OPEN, mentions=mentions)
