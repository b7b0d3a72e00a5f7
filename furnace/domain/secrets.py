"""The one secret scanner: every export refuses, and the store warns about, text that looks like a credential.

A gitleaks-style rule set (:data:`RULES`): provider key prefixes (OpenAI, Anthropic,
AWS, GitHub, GitLab, Slack, Google, Stripe, Hugging Face, npm, PyPI, SendGrid,
Twilio, Telegram, Discord, DigitalOcean, Shopify, Mailgun, Square, Azure ...),
bearer/basic authorization headers, private key blocks, JSON Web Tokens, URLs with
embedded credentials, assigned keys/passwords, and high-entropy tokens.

Text is normalised first (NFKC, zero-width characters and soft hyphens removed),
and the prefix rules also run on the text with all whitespace removed, so a key
split by zero-width characters, spaces or line breaks is still found.
Placeholders (``sk-xxxxxxxx…``, ``<your key>``, ``${API_KEY}``) are not secrets, nor is
prose that merely starts like a key (``sk-learn is a nickname…``: a prefix rule's match made
only of lower-case letters and dashes is words).

Encoded keys are found too (:data:`ENCODINGS`): the payload of a ``data:…;base64,`` URI is
scanned as written and decoded, and hex (plain, ``\\x``-escaped or byte-spaced), base64,
base64url and percent-encoded runs are decoded and scanned again (two levels deep). A
decoding that is text gets every rule; one that is binary (an image, a hash) gets the prefix
rules on its printable stretches only, so images and digests are not "high-entropy tokens".
The high-entropy rule skips words joined into identifiers and product codes
(``HttpRequestHandlerFactory2``, ``XPS13-9310-Intel-Core-i7-1185G7``) and integrity hashes
(``sha384-…``).

:func:`find_secret` walks any JSON-like value and returns the first string that
matches, naming the field (dotted path) and the kind of secret — never the secret
itself, so the result is safe to print, log or raise.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import math
import re
import unicodedata
import urllib.parse
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

ENCODINGS = ("data URI", "hex", "base64", "base64url", "percent-encoding")
DECODE_DEPTH = 2  # an encoding inside an encoding inside the text is still decoded
MIN_DECODED = 8  # bytes: shorter decodings hold no key

_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_SPACE = re.compile(r"\s+")
_DATA_URI = re.compile(r"data:[\w/+.-]*(?:;[\w.+-]+=[\w.+-]+)*;base64,(?P<data>[A-Za-z0-9+/=_-]+)", re.IGNORECASE)
_HEX_RUN = re.compile(
    r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){12,}(?![0-9A-Fa-f])"  # 736b2d70…
    r"|(?:\\x[0-9A-Fa-f]{2}){12,}"  # \x73\x6b…
    r"|(?<![0-9A-Fa-f])[0-9A-Fa-f]{2}(?:[ :][0-9A-Fa-f]{2}){11,}(?![0-9A-Fa-f])"  # 73 6b 2d … / 73:6b:2d…
)
_B64_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{16,}={0,2}")
_B64URL_RUN = re.compile(r"(?<![A-Za-z0-9_-])(?=[A-Za-z0-9_-]*[-_])[A-Za-z0-9_-]{16,}={0,2}")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_PRINTABLE_RUN = re.compile(rb"[\x20-\x7e]{16,}")
_FILE_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"%PDF", b"PK\x03\x04", b"RIFF", b"\x1f\x8b", b"II*\x00")
_INTEGRITY = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)|md5)[-:=]")  # sha384-<base64>, sha256:<hex>
_PART_NUMBER = re.compile(r"[A-Z0-9]{2,12}")  # 21HM0043GE, S918B, 512GB
_WORD = re.compile(r"(?=[A-Z]?[a-z]{2})[A-Z]?[a-z]*[aeiouyAEIOUY][a-z]*")
_CONSONANTS = re.compile(r"[b-df-hj-np-tv-xz]{5}", re.IGNORECASE)
_ACRONYM = re.compile(r"[A-Z]{2,4}")
_HUMP = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_WORDS = re.compile(r"[a-z]+(?:[-_.][a-z]+)*")  # what a prefix rule matched in prose: "sk-learn-style"
_TOKEN = re.compile(rf"[A-Za-z0-9+/=_-]{{{MIN_TOKEN},}}")
_HEX = re.compile(r"[0-9a-fA-F-]+")
# <your key>, ${API_KEY}, {{token}}, $TOKEN, OPENAI_API_KEY (an environment variable's name),
# os.environ[…] / getenv(…) (code reading a key from elsewhere), sk-xxxx…, ****, …
_PLACEHOLDER = re.compile(
    r"^(?:<.*>|\$\{.*\}|\{\{.*\}\}|\$[A-Z_]+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Za-z_][\w.]*[\[(].*"
    r"|.*(?:x{4}|X{4}|\*{3}|\.{3}|your|example).*)$"
)


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())


def _placeholder(text: str) -> bool:
    body = re.sub(r"^(?:sk|rk|gh[pousr]|xox[a-z])[-_](?:[a-z]+[-_])?", "", text)
    return len(set(body.lower()) - set("-_")) <= 2 or bool(_PLACEHOLDER.match(body))


def _words(value: str) -> bool:
    """True when a prefix rule's match is prose that starts like a key (``sk-learn-compatible``)."""
    body = re.sub(r"^[A-Za-z0-9]{1,6}[-_.]", "", value)
    return bool(_WORDS.fullmatch(body)) and not re.search(r"\d", value)


def _worded(segment: str) -> bool:
    """True when ``segment`` reads as words run together: nearly all of it is words (a hump of three
    letters or more with a vowel and no five consonants in a row: ``Factory``), acronyms (``XPS``)
    and numbers, at least half of it words. Random text has humps too, rarely pronounceable ones."""
    humps = _HUMP.findall(segment)
    alnum = sum(len(h) for h in humps)
    words = sum(len(h) for h in humps if _WORD.fullmatch(h) and not _CONSONANTS.search(h))
    worded = words + sum(len(h) for h in humps if h.isdigit() or _ACRONYM.fullmatch(h))
    return alnum > 0 and worded / alnum >= 0.85 and words / alnum >= 0.5


def _identifier(token: str) -> bool:
    """True when ``token`` is an identifier or a product code, not random text: words run together
    (``HttpRequestHandlerFactory2``), or parts joined by ``-``/``_``/``.`` each of which is a word, a
    number, a short part (``i7``) or a part number (``21HM0043GE``)."""
    if _worded(token):
        return True
    parts = [p for p in re.split(r"[-_.]", token) if p]
    return len(parts) > 1 and all(
        len(p) <= 4 or p.isdigit() or bool(_PART_NUMBER.fullmatch(p)) or _worded(p) for p in parts
    )


def _high_entropy(text: str, *, decoded_later: bool = True) -> bool:
    """True when ``text`` holds a random-looking token (``decoded_later``: base64 of text is skipped,
    because its decoding is scanned)."""
    for match in _TOKEN.finditer(text):
        token = match.group().strip("=-_")
        if len(token) < MIN_TOKEN or _HEX.fullmatch(token):
            continue  # content hashes, uuids, ids
        if not (re.search(r"\d", token) and re.search(r"[a-z]", token) and re.search(r"[A-Z]", token)):
            continue
        if token.count("/") > 2:
            continue  # a path
        before = text[max(0, match.start() - 7) : match.start()] + match.group()[:8]
        if _INTEGRITY.search(before):
            continue  # an integrity hash (sha384-…), base64 of a digest
        if _identifier(token) or (decoded_later and _encoded(token)):
            continue
        if _entropy(token) >= ENTROPY_BITS and not _placeholder(token):
            return True
    return False


def _b64decode(run: str, *, url: bool) -> bytes | None:
    body = run.rstrip("=")
    if len(body) % 4 == 1:
        return None
    try:
        padded = body + "=" * (-len(body) % 4)
        return base64.urlsafe_b64decode(padded) if url else base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


def _encoded(token: str) -> bool:
    """True when ``token`` is base64 of text (scanned decoded instead) or of a known file format (an
    image's or an archive's header, cut anywhere): an encoding, not a random token."""
    for url in (False, True):
        data = _b64decode(token[: len(token) // 4 * 4], url=url)
        if data is not None and (data.startswith(_FILE_MAGIC) or _as_text(data) is not None):
            return True
    return False


def _as_text(data: bytes) -> str | None:
    """``data`` as text when it is (UTF-8, nearly all printable), else None."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(ch.isprintable() or ch.isspace() for ch in text)
    return text if text and printable / len(text) >= 0.9 else None


def _decodings(text: str, payloads: list[str]) -> Iterator[tuple[str, bytes]]:
    """``(encoding, decoded bytes)`` of every encoded run in ``text`` and of each data-URI payload."""
    for payload in payloads:
        data = _b64decode(payload, url="-" in payload or "_" in payload)
        if data is not None:
            yield "data URI", data
    joined = re.sub(r"[ \t]*\r?\n[ \t]*", "", text)  # base64 wrapped over lines
    for match in _HEX_RUN.finditer(text):
        digits = re.sub(r"\\x|[ :]", "", match.group())
        yield "hex", bytes.fromhex(digits)
    seen: set[str] = set()
    for source in (text, joined) if joined != text else (text,):
        for pattern, name in ((_B64_RUN, "base64"), (_B64URL_RUN, "base64url")):
            for match in pattern.finditer(source):
                run = match.group()
                if run in seen or _HEX.fullmatch(run.rstrip("=")):
                    continue
                seen.add(run)
                data = _b64decode(run, url=name == "base64url")
                if data is not None:
                    yield name, data
    if len(_PERCENT.findall(text)) >= 3:
        yield "percent-encoding", urllib.parse.unquote_to_bytes(text)


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


def _rules(text: str, *, strong_only: bool = False) -> str | None:
    """The kind of the first rule that matches ``text`` (the strong rules also on it without whitespace)."""
    collapsed = _SPACE.sub("", text)
    for kind, pattern, strong in RULES:
        if strong_only and not strong:
            continue
        for candidate in (text, collapsed) if strong else (text,):
            for match in pattern.finditer(candidate):
                value = match.groupdict().get("value") or match.group()
                if not _placeholder(value) and not (strong and _words(match.group())):
                    return kind
    return None


def _scan(text: str, depth: int = 0) -> str | None:
    clean = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    payloads: list[str] = []

    def cut(match: re.Match[str]) -> str:
        payloads.append(match.group("data"))
        return " "

    plain = _DATA_URI.sub(cut, clean)  # a data URI's payload is base64: no "high-entropy token" by itself
    # the rules on the text as written (a key pasted after a data URI's prefix is found), entropy without the URIs
    kind = _rules(clean) or (HIGH_ENTROPY if _high_entropy(plain, decoded_later=depth < DECODE_DEPTH) else None)
    if kind is not None or depth >= DECODE_DEPTH:
        return kind
    for encoding, data in _decodings(plain, payloads):
        if len(data) < MIN_DECODED:
            continue
        decoded = _as_text(data)
        if decoded is not None:
            found = _scan(decoded, depth + 1)
        else:  # binary: its printable stretches (a PNG's text chunk) get the prefix rules
            stretches = " ".join(m.group().decode("ascii") for m in _PRINTABLE_RUN.finditer(data))
            found = _rules(stretches, strong_only=True) if stretches else None
        if found is not None:
            return found if found.endswith(")") and " in " in found else f"{found} (in {encoding})"
    return None


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
