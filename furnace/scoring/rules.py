"""Constraint compliance: pure rules over an answer and the persona's constraints."""

from __future__ import annotations

import re
from typing import Any

from furnace.domain.elixir import Elixir
from furnace.scoring.base import Score

_MARKDOWN = re.compile(r"(^\s{0,3}#{1,6}\s)|(^\s*[-*+]\s)|(^\s*\d+\.\s)|(\*\*[^*]+\*\*)|(^```)|(^\|.*\|\s*$)", re.M)


def has_markdown(text: str) -> bool:
    """True when ``text`` contains a markdown heading, list, emphasis, code fence or table."""
    return bool(_MARKDOWN.search(text))


def constraint_compliance(
    elixir: Elixir, answer: str | None, *, error: str | None = None, target: dict[str, Any] | None = None
) -> Score:
    """Score ``answer`` against the constraints: length, forbidden topics, markdown.

    Length and markdown come from the target's constraints where the target (a probe's
    brief) sets them — what the user asked for — else from ``elixir.constraints``;
    forbidden topics are the persona's. Each applicable check is 0..1 (length degrades
    gracefully past the limit); the score is their mean. A missing answer is a failure
    score with ``error`` as reason.
    """
    if answer is None:
        return Score.failure(f"no answer: {error or 'unknown error'}")
    c = elixir.constraints
    wanted = {k: v for k, v in ((target or {}).get("constraints") or {}).items() if v is not None}
    max_length = wanted.get("max_length", c.max_length)
    markdown = wanted.get("must_use_markdown", c.must_use_markdown)
    source = " (target)" if wanted else ""
    checks: list[float] = []
    notes: list[str] = []
    if max_length is not None:
        n = len(answer)
        checks.append(1.0 if n <= max_length else max(0.0, max_length / n))
        notes.append(f"length {n}/{max_length}{source}" + ("" if n <= max_length else " (over)"))
    if c.forbidden_topics:
        lowered = answer.casefold()
        hit = [t for t in c.forbidden_topics if t.casefold() in lowered]
        checks.append(0.0 if hit else 1.0)
        notes.append(f"mentions forbidden {', '.join(hit)}" if hit else "no forbidden topic")
    if markdown:
        ok = has_markdown(answer)
        checks.append(1.0 if ok else 0.0)
        notes.append("markdown present" if ok else f"markdown required{source} but absent")
    elif "must_use_markdown" in wanted:
        ok = not has_markdown(answer)
        checks.append(1.0 if ok else 0.0)
        notes.append("plain text" if ok else "markdown present, target wants plain text")
    if not answer.strip():
        return Score(0.0, "empty answer")
    if not checks:
        return Score(1.0, "no constraints to violate")
    return Score(round(sum(checks) / len(checks), 6), "; ".join(notes))
