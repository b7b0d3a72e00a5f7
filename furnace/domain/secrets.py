"""The one secret scanner: every export refuses, and the store warns about, text that looks like a credential.

A gitleaks-style rule set (:data:`RULES`): provider key prefixes (OpenAI, Anthropic,
AWS, GitHub, GitLab, Slack, Google, Stripe, Hugging Face, npm, PyPI, SendGrid,
Twilio, Telegram, Discord, DigitalOcean, Shopify, Mailgun, Square, Azure ...),
bearer/basic authorization headers, private key blocks, JSON Web Tokens, URLs with
embedded credentials, assigned keys/passwords, and high-entropy tokens.

Text is normalised first (NFKC, zero-width characters and soft hyphens removed),
and the prefix rules also run on the text with all whitespace removed, so a key
split by zero-width characters, spaces or line breaks is still found.
Placeholders (``sk-xxxxxxxx…``, ``<your key>``, ``${API_KEY}``) are not secrets.

:func:`find_secret` walks any JSON-like value and returns the first string that
matches, naming the field (dotted path) and the kind of secret — never the secret
itself, so the result is safe to print, log or raise.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from typing import Any

from furnace.domain.errors import InputError

log = logging.getLogger("furnace.secrets")

# (kind, pattern, strong). Strong rules are specific enough to also run on the
# whitespace-collapsed text (to catch split keys) without matching joined-up prose.
_RULES: list[tuple[str, str, bool]] = [
    ("an API key (sk-…)", r"(?<![A-Za-z0-9])sk-(?:proj-|ant-|live-|test-|admin-|svcacct-)?[A-Za-z0-9_-]{16,}", True),
    (
        "an API key (sk-…)",  # short keys with a known sub-prefix, e.g. sk-test-LEAK777 (a digit required)
        r"(?<![A-Za-z0-9])sk-(?:proj|ant|live|test|admin|svcacct)-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{6,}",
        True,
    ),
    ("a Stripe key", r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}", True),
    ("a Stripe webhook secret", r"(?<![A-Za-z0-9])whsec_[A-Za-z0-9]{20,}", True),
    ("an AWS access key id", r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA|ANPA|APKA)[0-9A-Z]{16}(?![0-9A-Z])", True),
    (
        "an AWS secret access key",
        r"(?i)aws.{0,24}(?:secret|private).{0,24}[:=]\s*['\"]?[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])",
        False,
    ),
    ("a GitHub token", r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})", True),
    ("a GitLab token", r"(?<![A-Za-z0-9])gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,}", True),
    ("a Slack token", r"(?<![A-Za-z0-9])xox[abposre]-[A-Za-z0-9-]{10,}", True),
    ("a Slack webhook", r"hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{20,}", True),
    ("a Google API key", r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}", True),
    ("a Google OAuth token", r"(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_-]{20,}", True),
    ("a Hugging Face token", r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}", True),
    ("an npm token", r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}", True),
    ("a PyPI token", r"(?<![A-Za-z0-9])pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}", True),
    ("a SendGrid key", r"(?<![A-Za-z0-9])SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", True),
    ("a Twilio key", r"(?<![A-Za-z0-9])SK[0-9a-f]{32}(?![A-Za-z0-9])", True),
    ("a Telegram bot token", r"(?<![0-9])\d{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])", True),
    ("a Discord bot token", r"(?<![A-Za-z0-9])[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}", True),
    ("a DigitalOcean token", r"(?<![A-Za-z0-9])do[por]_v1_[a-f0-9]{64}", True),
    ("a Shopify token", r"(?<![A-Za-z0-9])shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}", True),
    ("a Mailgun key", r"(?<![A-Za-z0-9])key-[0-9a-zA-Z]{32}(?![A-Za-z0-9])", True),
    ("a Square token", r"(?<![A-Za-z0-9])(?:sq0atp|sq0csp|EAAA)[-_]?[0-9A-Za-z_-]{22,}", True),
    ("a Groq/xAI/Replicate key", r"(?<![A-Za-z0-9])(?:gsk_|xai-|r8_)[A-Za-z0-9]{30,}", True),
    ("an Azure storage key", r"AccountKey=[A-Za-z0-9+/]{40,}={0,2}", True),
    ("a bearer token", r"(?i)\bBearer\s+[A-Za-z0-9._~+/-]{16,}=*", False),
    ("a basic-auth header", r"(?i)\bauthorization\s*:\s*basic\s+[A-Za-z0-9+/]{8,}={0,2}", False),
    ("a JSON Web Token", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", True),
    ("a private key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", True),
    ("a URL with embedded credentials", r"(?i)\b[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@[^\s/@]", False),
    (
        "an assigned API key or password",
        r"(?i)\b(?:api[_-]?key|apikey|secret[_-]?key|client[_-]?secret|access[_-]?token|auth[_-]?token|"
        r"password|passwd|pwd)['\"]?\s*[:=]\s*['\"]?(?P<value>[^\s'\",;]{8,})",
        False,
    ),
]
RULES: tuple[tuple[str, re.Pattern[str], bool], ...] = tuple((k, re.compile(p), s) for k, p, s in _RULES)
HIGH_ENTROPY = "a high-entropy token"
ENTROPY_BITS = 4.0  # Shannon bits per character; hex (hashes, ids) tops out at 4.0 and is skipped anyway
MIN_TOKEN = 24

_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_SPACE = re.compile(r"\s+")
_DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")
_TOKEN = re.compile(rf"[A-Za-z0-9+/=_-]{{{MIN_TOKEN},}}")
_HEX = re.compile(r"[0-9a-fA-F-]+")
# <your key>, ${API_KEY}, {{token}}, $TOKEN, OPENAI_API_KEY (an environment variable's name), sk-xxxx…, ****, …
_PLACEHOLDER = re.compile(
    r"^(?:<.*>|\$\{.*\}|\{\{.*\}\}|\$[A-Z_]+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|.*(?:x{4}|X{4}|\*{3}|\.{3}|your|example).*)$"
)


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())


def _placeholder(text: str) -> bool:
    body = re.sub(r"^(?:sk|rk|gh[pousr]|xox[a-z])[-_](?:[a-z]+[-_])?", "", text)
    return len(set(body.lower()) - set("-_")) <= 2 or bool(_PLACEHOLDER.match(body))


def _high_entropy(text: str) -> bool:
    for match in _TOKEN.finditer(text):
        token = match.group().strip("=-_")
        if len(token) < MIN_TOKEN or _HEX.fullmatch(token):
            continue  # content hashes, uuids, ids
        if not (re.search(r"\d", token) and re.search(r"[a-z]", token) and re.search(r"[A-Z]", token)):
            continue
        if token.count("/") > 2:
            continue  # a path
        if _entropy(token) >= ENTROPY_BITS and not _placeholder(token):
            return True
    return False


# Verdicts of texts already scanned, by a digest of the text (no text is kept): stores scan every
# elixir they write, and a generation of personas shares most of its principles and style notes.
_VERDICTS: dict[bytes, str | None] = {}
_VERDICTS_MAX = 16384


def scan_text(text: str) -> str | None:
    """The kind of the first secret in ``text``, else None (a text scanned before: its verdict, by digest)."""
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    try:
        return _VERDICTS[key]
    except KeyError:
        pass
    verdict = _scan(text)
    if len(_VERDICTS) >= _VERDICTS_MAX:
        _VERDICTS.clear()
    _VERDICTS[key] = verdict
    return verdict


def _scan(text: str) -> str | None:
    clean = _DATA_URI.sub("", _INVISIBLE.sub("", unicodedata.normalize("NFKC", text)))
    collapsed = _SPACE.sub("", clean)
    for kind, pattern, strong in RULES:
        for candidate in (clean, collapsed) if strong else (clean,):
            for match in pattern.finditer(candidate):
                value = match.groupdict().get("value") or match.group()
                if not _placeholder(value):
                    return kind
    return HIGH_ENTROPY if _high_entropy(clean) else None


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
        kind = scan_text(text)
        if kind is not None:
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


WATCHED_FIELDS = ("style_notes", "principles")


def warn_secrets(elixir: Any) -> str | None:
    """Log a warning (never the secret) when an elixir's style notes or principles look like they hold one.

    Returns the warning text (None when clean). Stores call this on every write.
    """
    data = {name: getattr(elixir, name, None) for name in WATCHED_FIELDS}
    found = find_secret(data)
    if found is None:
        return None
    where, kind = found
    message = (
        f"elixir {getattr(elixir, 'id', '?')!r}: {where} contains what looks like {kind}; "
        "exports of it will be refused until it is removed"
    )
    log.warning(message)
    return message
