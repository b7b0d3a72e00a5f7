"""The awesome-chatgpt-prompts corpus (CSV: ``act, prompt, for_devs, type, contributor``).

Each ``TEXT`` row becomes an elixir by rules, no model involved:

- **id** ``acp-<slug of the role>`` (a second row with the same role but a
  different prompt gets ``-<short hash>``), so a re-import names the same ids;
- **name** the role (``act``); **identity** "You are a <role>." / "你是<role>。";
- **expertise** the role itself plus its meaningful words (``for_devs`` adds
  "software development");
- **principles** the prompt's instruction sentences ("I want you to only reply
  with ..." → "Only reply with ..."), the "act as" and "my first request"
  sentences left out;
- **language** ``zh`` when CJK characters dominate the prompt, else ``en``;
- **must_use_markdown** when the prompt asks for Markdown.

``IMAGE`` and ``STRUCTURED`` rows are skipped (they are image or JSON-template
prompts, not personas); broken rows are reported as ``(row, reason)`` where the
header is row 1, as in a spreadsheet.
"""

from __future__ import annotations

import csv
import io
import re

from furnace.domain.canonical import content_key
from furnace.domain.elixir import MAX_ITEM, MAX_LIST, MAX_NAME, Elixir, parse_elixir, slugify
from furnace.domain.errors import InputError
from furnace.domain.text import detect_language, has_cjk
from furnace.interop.importers.report import ReadResult

COLUMNS = ("act", "prompt", "for_devs", "type", "contributor")
REQUIRED_COLUMNS = ("act", "prompt", "type")
ID_PREFIX = "acp-"
MAX_PRINCIPLES = 12
CORPUS = "awesome-chatgpt-prompts"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？；])")
_BULLET = re.compile(r"^\s*(?:[-*•]+|\d+[.)、]|#+)\s*")
_MARKUP = re.compile(r"\*\*|__|`")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#.'-]*[A-Za-z0-9+#]|[A-Za-z]")
_ZH_SPLIT = re.compile(r"[\s、，,/&＆\-–—·()（）]+|和|与|及")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "as",
        "at",
        "by",
        "for",
        "from",
        "in",
        "into",
        "of",
        "on",
        "or",
        "the",
        "to",
        "with",
        "your",
        "you",
        "my",
        "our",
        "act",
        "acting",
        "expert",
        "assistant",
        "generator",
        "helper",
        "creator",
        "prompt",
        "prompts",
    ]
)
_ACT_AS = re.compile(
    r"\b(act|acting|serve|behave)\s+as\b|\bpretend to be\b|\byou are an?\b|扮演|充当|作为一名|你是一[名位个]", re.I
)
_SKIP = re.compile(
    r"^(my first|the first|first (request|question|command|sentence|prompt|message)|我的第一|第一个(请求|问题))", re.I
)
_CUES = re.compile(
    r"\b(i want you to|you will|you should|you must|you need to|you are to|your (task|job|goal|role) is|"
    r"do not|don't|never|always|"
    r"only|must|should|make sure|ensure|please|reply|respond|answer|provide|include|use|write|keep|avoid|focus|explain|"
    r"create|generate|give|list|follow|ask|offer|suggest|check|review|identify|analy[sz]e|describe|translate|correct)\b"
    r"|请|需要|必须|不要|务必|确保|应该|回答|提供|使用|保持|避免|输出|列出|给出|生成|撰写|分析",
    re.I,
)
_LEADS = re.compile(
    r"^(please\s+|i (would like|want|need) you to\s+|you (will|should|must|need to|are to)\s+"
    r"|your (task|job|goal) is to\s+|请你?|你需要|你应该)",
    re.I,
)
_MARKDOWN = re.compile(r"markdown", re.I)
_NO_MARKDOWN = re.compile(r"(no|not|without|never|avoid)\s+(use\s+)?(any\s+)?markdown|不要.{0,4}markdown", re.I)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def sentences(prompt: str) -> list[str]:
    """The prompt split into cleaned sentences (lines first, then sentence ends)."""
    out = []
    for line in prompt.splitlines():
        line = _MARKUP.sub("", _BULLET.sub("", line)).strip()
        for part in _SENTENCE_END.split(line):
            part = _SPACE.sub(" ", part).strip(" \"'")
            if len(part) >= 4:
                out.append(part)
    return out


def instructions(prompt: str) -> list[str]:
    """The prompt's instruction sentences, reworded as direct instructions."""
    found: list[str] = []
    seen: set[str] = set()
    for sentence in sentences(prompt):
        if _SKIP.search(sentence) or (not found and _ACT_AS.search(sentence)):
            continue  # the role sentence (that is the identity) or the user's first request
        if not _CUES.search(sentence):
            continue
        text = _LEADS.sub("", sentence).strip()
        if not text:
            continue
        text = _clip(text[0].upper() + text[1:], MAX_ITEM)
        if text.casefold() not in seen:
            seen.add(text.casefold())
            found.append(text)
        if len(found) >= MAX_PRINCIPLES:
            break
    if not found:  # a prompt with no recognisable instruction: keep its first sentence as one
        first = next((s for s in sentences(prompt) if not _SKIP.search(s)), "")
        if first:
            found.append(_clip(first, MAX_ITEM))
    return found


def expertise(act: str, for_devs: bool) -> list[str]:
    """The role itself plus its meaningful words."""
    items = [act.strip()]
    if has_cjk(act):
        items += [w for w in _ZH_SPLIT.split(act) if len(w) >= 2]
    items += [w.lower() for w in _WORD.findall(act) if len(w) >= 3 and w.lower() not in _STOP]
    if for_devs:
        items.append("software development")
    out: list[str] = []
    for item in items:
        item = _clip(item, MAX_ITEM)
        if item and item.casefold() not in {o.casefold() for o in out}:
            out.append(item)
    return out[:MAX_LIST]


_ROLE_NOUN = re.compile(
    r"(er|or|ist|ian|ant|ent|ive|eer|ee|guide|coach|expert|master|guru|bot|agent|assistant|specialist|"
    r"doctor|chef|poet|guru|mentor|friend|critic|terminal|console|interpreter)s?$",
    re.I,
)


def identity(act: str, language: str) -> str:
    """One identity sentence from the role, in the elixir's language."""
    if language == "zh":
        return f"你扮演「{act}」这一角色。"
    last = act.split()[-1] if act.split() else act
    if _ROLE_NOUN.search(last):
        article = "an" if act[:1].lower() in "aeiou" else "a"
        return f"You are {article} {act}."
    return f"You play the role of “{act}”."


def row_to_elixir(act: str, prompt: str, *, for_devs: bool, contributor: str, id: str) -> Elixir:
    """One TEXT row as a validated elixir (raises InputError)."""
    language = detect_language(prompt)
    principles = instructions(prompt)
    if not principles:
        raise InputError("prompt holds no usable sentence", field="prompt")
    name = _clip(act, MAX_NAME)
    data = {
        "id": id,
        "name": name,
        "language": language,
        "identity": identity(name, language),
        "expertise": expertise(name, for_devs),
        "principles": principles,
        "constraints": {"must_use_markdown": bool(_MARKDOWN.search(prompt) and not _NO_MARKDOWN.search(prompt))},
        "style_notes": f"Imported from {CORPUS} (CC0)" + (f"; contributor: {contributor}." if contributor else "."),
    }
    return parse_elixir(data)


def _id_for(act: str) -> str:
    slug = slugify(act)
    if slug.startswith("elixir-"):  # a non-Latin role: hash-based
        slug = content_key(act.strip())[:12]
    return ID_PREFIX + slug


def _truthy(value: str) -> bool:
    return value.strip().lower() in {"true", "1", "yes", "y"}


def read_corpus(text: str, *, name: str = "corpus.csv") -> ReadResult:
    """Parse the corpus CSV text: valid rows as elixirs, the rest as ``(row, reason)``."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise InputError(f"{name}: the file is empty") from None
    except csv.Error as err:
        raise InputError(f"{name}: row 1: {err}") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{name}: missing column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}")
    result = ReadResult(row_wise=True)
    used: dict[str, tuple[int, str]] = {}  # id -> (row, content hash)
    row_no = 1
    while True:
        row_no += 1
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as err:
            result.skipped.append((row_no, f"unreadable CSV ({err})"))
            continue
        if not any(f.strip() for f in fields):
            continue  # blank line
        if len(fields) != len(header):
            result.skipped.append((row_no, f"has {len(fields)} fields, expected {len(header)}"))
            continue
        row = dict(zip(header, fields, strict=False))
        kind = row["type"].strip().upper()
        act, prompt = row["act"].strip(), row["prompt"].strip()
        if kind in ("IMAGE", "STRUCTURED"):
            result.skipped.append((row_no, f"{kind} prompt, not a persona"))
            continue
        if kind != "TEXT":
            result.skipped.append((row_no, f"unknown type {row['type']!r} (expected TEXT, IMAGE or STRUCTURED)"))
            continue
        if not act:
            result.skipped.append((row_no, "act (the role) is empty"))
            continue
        if not prompt:
            result.skipped.append((row_no, "prompt is empty"))
            continue
        id = _id_for(act)
        if id in used and used[id][1] != content_key([act, prompt]):
            id = f"{id[:70]}-{content_key(prompt)[:6]}"
        if id in used:
            result.skipped.append((row_no, f"duplicate of row {used[id][0]}"))
            continue
        try:
            elixir = row_to_elixir(
                act,
                prompt,
                for_devs=_truthy(row.get("for_devs", "")),
                contributor=row.get("contributor", "").strip(),
                id=id,
            )
        except InputError as err:
            result.skipped.append((row_no, str(err).removeprefix("invalid elixir: ")))
            continue
        used[id] = (row_no, content_key([act, prompt]))
        result.elixirs.append((f"row {row_no}", elixir))
    return result
