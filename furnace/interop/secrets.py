"""Refuse to export text that looks like a secret.

:func:`find_secret` walks any JSON-like value and returns the first string
that matches a known credential pattern, naming the field (dotted path) and
the kind of secret — never the secret itself, so the error is safe to print.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from furnace.domain.errors import InputError

# (kind, pattern). Anchored on word boundaries so ordinary words ("task-force",
# "desk-lamp") do not match.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an API key (sk-…)", re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a bearer token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{16,}=*", re.IGNORECASE)),
    ("a JSON Web Token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----")),
    ("a URL with embedded credentials", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@[^\s/@]", re.IGNORECASE)),
    (
        "an assigned API key or password",
        re.compile(
            r"(?i)\b(?:api[_-]?key|secret[_-]?key|access[_-]?token|password)\s*[:=]\s*['\"]?[A-Za-z0-9_\-+/=]{12,}"
        ),
    ),
)


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


def find_secret(value: Any, path: str = "") -> tuple[str, str] | None:
    """``(field path, kind)`` of the first string in ``value`` that looks like a secret, else None."""
    for where, text in _strings(value, path):
        for kind, pattern in PATTERNS:
            if pattern.search(text):
                return where or "value", kind
    return None


def refuse_secrets(value: Any, *, what: str, path: str = "") -> None:
    """Raise :class:`InputError` naming the field if ``value`` holds something that looks like a secret."""
    found = find_secret(value, path)
    if found:
        where, kind = found
        raise InputError(
            f"refusing to export {what}: {where} contains what looks like {kind}; remove it and try again",
            field=where,
        )
