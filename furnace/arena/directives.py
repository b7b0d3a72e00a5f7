"""The directive classifier: deterministic instructions are recognised in code.

``classify(message, members)`` returns a :class:`Directive`:

- ``stop`` / ``continue`` — control words alone on the line ("stop", "停", "继续", "/continue");
- ``roll_call`` — "报数", "count off", "sound off", "number off", "roll call", "点名";
  addressed to the @mentioned members, or to everyone;
- ``all`` — "@all", "@everyone", "@全体成员", "@所有人", "全体都有": every member in order;
- ``mention`` — "@name" or "@id" of one or more members: those members only;
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


def _norm(text: str) -> str:
    # NFKC folds full-width "＠" and letters into their ASCII forms.
    return unicodedata.normalize("NFKC", text).strip()


def find_mentions(text: str, members: Sequence[MemberName]) -> tuple[str, ...]:
    """Ids of members mentioned as ``@name`` or ``@id`` (case-insensitive), in member order."""
    lowered = _norm(text).casefold()
    found: set[str] = set()
    # Longest handles first, so "@Ann Lee" wins over "@Ann"; matched spans are blanked out.
    handles = sorted(
        ((h.casefold(), m.id) for m in members for h in {m.name, m.id} if h.strip()),
        key=lambda pair: -len(pair[0]),
    )
    for handle, member_id in handles:
        pattern = re.compile(r"@\s?" + re.escape(handle) + r"(?![a-z0-9_])")
        if pattern.search(lowered):
            found.add(member_id)
            lowered = pattern.sub(" ", lowered)
    return tuple(m.id for m in members if m.id in found)


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
