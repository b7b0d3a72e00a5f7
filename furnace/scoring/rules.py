"""Constraint compliance: pure rules over an answer and the persona's constraints."""

from __future__ import annotations

import re

from furnace.domain.elixir import Elixir
from furnace.scoring.base import Score

_MARKDOWN = re.compile(r"(^\s{0,3}#{1,6}\s)|(^\s*[-*+]\s)|(^\s*\d+\.\s)|(\*\*[^*]+\*\*)|(^```)|(^\|.*\|\s*$)", re.M)


def has_markdown(text: str) -> bool:
    """True when ``text`` contains a markdown heading, list, emphasis, code fence or table."""
    return bool(_MARKDOWN.search(text))


def constraint_compliance(elixir: Elixir, answer: str | None, *, error: str | None = None) -> Score:
    """Score ``answer`` against ``elixir.constraints``: length, forbidden topics, markdown.

    Each applicable check is 0..1 (length degrades gracefully past the limit); the
    score is their mean. A missing answer is a failure score with ``error`` as reason.
    """
    if answer is None:
        return Score.failure(f"no answer: {error or 'unknown error'}")
    c = elixir.constraints
    checks: list[float] = []
    notes: list[str] = []
    if c.max_length is not None:
        n = len(answer)
        checks.append(1.0 if n <= c.max_length else max(0.0, c.max_length / n))
        notes.append(f"length {n}/{c.max_length}" + ("" if n <= c.max_length else " (over)"))
    if c.forbidden_topics:
        lowered = answer.casefold()
        hit = [t for t in c.forbidden_topics if t.casefold() in lowered]
        checks.append(0.0 if hit else 1.0)
        notes.append(f"mentions forbidden {', '.join(hit)}" if hit else "no forbidden topic")
    if c.must_use_markdown:
        ok = has_markdown(answer)
        checks.append(1.0 if ok else 0.0)
        notes.append("markdown present" if ok else "markdown required but absent")
    if not answer.strip():
        return Score(0.0, "empty answer")
    if not checks:
        return Score(1.0, "no constraints to violate")
    return Score(round(sum(checks) / len(checks), 6), "; ".join(notes))
