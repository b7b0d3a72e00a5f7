"""The secret scanner's two corpora, and the figures docs/reliability.md reports.

- :data:`INNOCENT`: texts that look like secrets and are not (identifiers, product codes, hashes,
  UUIDs, git SHAs, base64 images' headers, encoded prose, prose mentioning "sk-learn" …).
- :func:`keys`: synthetic keys of every shape a rule knows, generated from a fixed seed (never a
  real key), each written in every encoding the scanner decodes (:data:`ENCODERS`).

``python tests/interop/secret_corpus.py`` prints the figures (detection per encoding, false positives).
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"


def key_shapes(seed: int = 33) -> list[tuple[str, str]]:
    """``(key, the kind the scanner must name)`` for one synthetic key of every shape."""
    rng = random.Random(seed)

    def r(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    upper = string.ascii_uppercase + string.digits
    return [
        ("sk-proj-" + r(48), "sk-"),
        ("sk-" + r(48), "sk-"),
        ("sk-ant-api03-" + r(80, ALNUM + "-_"), "sk-"),
        ("sk_live_" + r(24), "Stripe key"),
        ("rk_test_" + r(24), "Stripe key"),
        ("whsec_" + r(32), "Stripe webhook"),
        ("AKIA" + r(16, upper), "AWS access key id"),
        ("ASIA" + r(16, upper), "AWS access key id"),
        ("aws_secret_access_key = " + r(40, B64), "AWS secret"),
        ("ghp_" + r(36), "GitHub token"),
        ("github_pat_" + r(22) + "_" + r(59), "GitHub token"),
        ("glpat-" + r(20, ALNUM + "-_"), "GitLab token"),
        (f"xoxb-{r(12, string.digits)}-{r(12, string.digits)}-{r(24)}", "Slack token"),
        ("AIza" + r(35, ALNUM + "-_"), "Google API key"),
        ("ya29." + r(60, ALNUM + "-_"), "Google OAuth"),
        ("hf_" + r(34), "Hugging Face"),
        ("npm_" + r(36), "npm token"),
        ("pypi-AgEIcHlwaS5vcmc" + r(60, ALNUM + "-_"), "PyPI token"),
        (f"SG.{r(22, ALNUM + '-_')}.{r(43, ALNUM + '-_')}", "SendGrid"),
        ("SK" + r(32, HEX), "Twilio"),
        (f"{r(10, string.digits)}:AA{r(33, ALNUM + '-_')}", "Telegram"),
        ("dop_v1_" + r(64, HEX), "DigitalOcean"),
        ("shpat_" + r(32, HEX), "Shopify"),
        ("key-" + r(32), "Mailgun"),
        ("sq0atp-" + r(22, ALNUM + "-_"), "Square"),
        ("gsk_" + r(52), "Groq/xAI/Replicate"),
        ("AccountKey=" + r(86, B64) + "==", "Azure storage key"),
        ("Authorization: Bearer " + r(40, ALNUM + "._-"), "bearer token"),
        (f"eyJ{r(20)}.eyJ{r(40)}.{r(43, ALNUM + '-_')}", "JSON Web Token"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + r(40, B64), "private key"),
        (f"postgres://app:{r(12)}@10.0.0.5:5432/main", "URL with embedded credentials"),
        ("client_secret=" + r(30), "assigned API key or password"),
        ("token " + r(40), "high-entropy token"),
    ]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _wrapped(text: str, width: int = 20) -> str:
    encoded = _b64(text)
    return "\n".join(encoded[i : i + width] for i in range(0, len(encoded), width))


# encoding name -> how a key is written in it (inside a sentence, see keys())
ENCODERS: dict[str, Callable[[str], str]] = {
    "plain": lambda key: key,
    "data URI payload as written": lambda key: "data:text/plain;base64," + key.replace(" ", ""),
    "data URI (base64)": lambda key: "data:text/plain;charset=utf-8;base64," + _b64(key),
    "hex": lambda key: key.encode().hex(),
    "hex, upper case": lambda key: key.encode().hex().upper(),
    "hex, \\x-escaped": lambda key: "".join(f"\\x{b:02x}" for b in key.encode()),
    "hex, byte-spaced": lambda key: " ".join(f"{b:02x}" for b in key.encode()),
    "base64": _b64,
    "base64url": lambda key: base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
    "base64 over lines": _wrapped,
    "percent-encoding": lambda key: "".join(f"%{b:02X}" for b in key.encode()),
    "base64 of hex": lambda key: _b64(key.encode().hex()),
}

# keys whose text has no form the payload-as-written case can carry (a space-free rewrite would change them)
_AS_WRITTEN_SKIPS = ("aws_secret_access_key", "Authorization", "-----BEGIN", "token ")


def keys(seed: int = 33) -> list[tuple[str, str, str]]:
    """``(encoding, text holding a synthetic key, kind)`` for every key shape in every encoding."""
    found = []
    for key, kind in key_shapes(seed):
        for name, encode in ENCODERS.items():
            if name == "data URI payload as written" and key.startswith(_AS_WRITTEN_SKIPS):
                continue
            found.append((name, f"config for the bot: {encode(key)} (do not share)", kind))
    return found


_PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
_GIF_1PX = "R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw=="
_JPEG_HEAD = "/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4RDgsLEBYQERMUFRUV"

INNOCENT: list[str] = [
    # prose about keys, and words that start like them
    "Ask for the task-oriented summary first.",
    "Desk-lamp lighting, skeptical tone.",
    "Use scikit-learn (sklearn) for the baseline; risk-free rate 4%.",
    "sk-learn is a nickname for scikit-learn",
    "The sk-learn-compatible estimators and sk-image filters are fine.",
    "A bearer of bad news.",
    "Bearer tokens must never appear in answers.",
    "Use a password manager; never share a password.",
    "Set api_key = os.environ['OPENAI_API_KEY'] in your own code.",
    "api_key: ${OPENAI_API_KEY}",
    "API_KEY=<your key here>",
    "export OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxx",
    "Keys look like sk-... or sk-proj-...; never paste one here.",
    "Send `Authorization: Bearer <token>` with every request.",
    "token: $TOKEN",
    "password = PASSWORD_FROM_VAULT",
    "AKIA is how AWS key ids begin; ghp_ marks a GitHub token; AIza a Google key.",
    "-----BEGIN PUBLIC KEY----- and -----BEGIN CERTIFICATE----- are not secret.",
    "xoxo, Gossip Girl",
    "The token budget is 512; token = 5 per word.",
    "PASSWORD_MIN_LENGTH=12",
    "密码学入门：不要在回答中透露任何密钥。",
    "zero\u200bwidth joiners in ordinary text",
    # hashes, ids, UUIDs, git SHAs, digests
    "content_hash 9c9f1c927aae65720aec134f8b88c1aa506db5dc0b54039a432af3d8875e40d8",
    "agent agt-3f2a9b8c7d6e5f4a3b2c1d0e from lineage 952ca8a205279eaefe93f1fd806804ff",
    "run id 123e4567-e89b-12d3-a456-426614174000",
    "commit 9db6449 fixed it; see d41d8cd98f00b204e9800998ecf8427e.",
    "merged 3ac1c6d8e4f2b7a9c0d1e2f3a4b5c6d7e8f90123 into main",
    "sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "image@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    'integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC"',
    '"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="',
    "furnace:parent:go-reviewer@3:952ca8a205279eaefe93f1fd806804ff4dfecd1764437895d7de4d2edc1b5b2a",
    "uuid 550E8400-E29B-41D4-A716-446655440000 and ulid 01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "trace 4bf92f3577b34da6a3ce929d0e0e4736 span 00f067aa0ba902b7",
    # identifiers and product codes
    "CamelCaseIdentifiersLikeHttpRequestHandlerFactory",
    "AbstractSingletonProxyFactoryBeanV2Impl",
    "HttpClient4RequestHandlerFactoryImpl2WithRetries",
    "org.apache.commons.Http2ConnectionManagerFactoryBean",
    "XPS13-9310-Intel-Core-i7-1185G7",
    "ThinkPad-X1-Carbon-Gen11-21HM0043GE",
    "Galaxy-S23-Ultra-SM-S918B-512GB-Phantom-Black",
    "test_every_fake_key_is_found_in_all_encodings",
    "IMG_20240312_184512_HDR_Portrait2.jpg",
    "my-app-deployment-7d9f8c6b5-x2k4z in namespace prod-eu-west-1",
    "The model claude-3-5-sonnet-20241022 or gpt-4o-mini-2024-07-18.",
    "arn:aws:iam::123456789012:role/FurnaceExperimentRunnerRole2024",
    "AWS region us-east-1, bucket my-app-assets-2024",
    "Supercalifragilisticexpialidocious, Donaudampfschifffahrtsgesellschaftskapitän.",
    "Shelf 12, volume 3: The Moon's Ledger. risu:abc123",
    "ISBN 978-3-16-148410-0, phone +1-202-555-0143, IPv6 2001:0db8:85a3:0000:0000:8a2e:0370:7334",
    "IBAN DE89370400440532013000, BIC COBADEFFXXX, MAC 00:1A:2B:3C:4D:5E",
    "/usr/local/lib/python3.11/site-packages/furnace/interop/importers/files.py",
    # URLs
    "https://example.org/cards/archivist-quill and http://user@example.com/ (no password).",
    "postgres://localhost:5432/furnace",
    "https://example.com/search?q=caf%C3%A9%20au%20lait&lang=fr%2DFR",
    "https://www.youtube.com/watch?v=dQw4w9WgXcQ&list=PLFgquLnL59alCl_2TQvOiD5Vgm1hCaGSI",
    # base64 images' headers and encoded prose
    f"![dot](data:image/png;base64,{_PNG_1PX})",
    f"<img src='data:image/gif;base64,{_GIF_1PX}'>",
    f"a JPEG starts {_JPEG_HEAD}",
    f"bare PNG base64 {_PNG_1PX}",
    "base64 of hello is aGVsbG8= and of book Qm9vaw==",
    "note (base64): " + _b64("Remember to be concise, cite sources, and keep a warm tone."),
    "hex of the greeting: " + b"Hello, world! Be kind to the reader.".hex(),
    "JWT header only: eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
    "data:text/plain;base64," + _b64("Just a friendly note, nothing secret in here."),
    "CSS #1a2b3c, rgba(12, 34, 56, 0.5), font Inter-SemiBold-Italic",
]


def figures(seed: int = 33) -> dict[str, object]:
    """Detection per encoding and the false positives on :data:`INNOCENT` (what the tests assert)."""
    from furnace.domain.secrets import scan_text

    by_encoding: dict[str, list[int]] = {}
    leaked = []
    for encoding, text, kind in keys(seed):
        found = scan_text(text)
        hit = found is not None and kind in found
        counts = by_encoding.setdefault(encoding, [0, 0])
        counts[0] += hit
        counts[1] += 1
        if not hit:
            leaked.append((encoding, kind, found))
    flagged = [(text, scan_text(text)) for text in INNOCENT if scan_text(text) is not None]
    total = sum(n for _, n in by_encoding.values())
    return {
        "keys": total,
        "shapes": len(key_shapes(seed)),
        "encodings": len(ENCODERS),
        "detected": total - len(leaked),
        "leaked": leaked,
        "by_encoding": by_encoding,
        "innocent": len(INNOCENT),
        "flagged": flagged,
    }


if __name__ == "__main__":
    found = figures()
    for encoding, (hit, n) in found["by_encoding"].items():  # type: ignore[attr-defined]
        print(f"{encoding:30} {hit}/{n}")
    print(
        f"keys detected {found['detected']}/{found['keys']} ({found['shapes']} shapes x {found['encodings']} encodings)"
    )
    print(f"innocent flagged {len(found['flagged'])}/{found['innocent']}: {found['flagged']}")  # type: ignore[arg-type]
    print(f"leaked: {found['leaked']}")
