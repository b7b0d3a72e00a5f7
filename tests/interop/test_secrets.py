"""The secret scanner: a corpus of realistic fake keys (0 may leak) and innocent look-alikes (< 3% flagged).

Every rule has at least one fake key; the shipped corpora (``secret_corpus.py``: synthetic keys of
every shape in every encoding the scanner decodes, and innocent look-alikes) give the figures on
docs/reliability.md. The scanner is used by every export (skill, card JSON, card PNG V2/V3) and
warns when the store writes style notes or principles that hold one.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import string

import pytest
from conftest import make_agent, make_native
from secret_corpus import ENCODERS, INNOCENT, figures, key_shapes, keys

from furnace.domain.elixir import edit
from furnace.domain.errors import InputError
from furnace.domain.secrets import HIGH_ENTROPY, RULES, find_secret, scan_text
from furnace.interop.cards import export_card_json, export_card_png
from furnace.interop.skill import build_skill, skill_zip_bytes
from furnace.storage.memory import MemoryStore

_rng = random.Random(15)
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
ZW = "\u200b"


def r(n: int, alphabet: str = ALNUM) -> str:
    """A fixed-seed random body: fake, but shaped like the real thing."""
    return "".join(_rng.choice(alphabet) for _ in range(n))


def upper(n: int) -> str:
    return r(n, string.ascii_uppercase + string.digits)


_openai = "sk-proj-" + r(48)
# (text with a fake secret, the kind the scanner must name)
FAKE_KEYS: list[tuple[str, str]] = [
    (f"OPENAI key {_openai}", "sk-"),
    (f"legacy sk-{r(48)}", "sk-"),
    (f"anthropic sk-ant-api03-{r(80, ALNUM + '-_')}", "sk-"),
    ("short test key sk-test-LEAK777", "sk-"),
    (f"split by zero-width: {_openai[:10]}{ZW}{_openai[10:30]}{ZW}{_openai[30:]}", "sk-"),
    (f"split by spaces: {_openai[:12]} {_openai[12:30]} {_openai[30:]}", "sk-"),
    (f"split over lines:\n{_openai[:20]}\n{_openai[20:]}", "sk-"),
    (f"stripe sk_live_{r(24)}", "Stripe key"),
    (f"stripe restricted rk_test_{r(24)}", "Stripe key"),
    (f"whsec_{r(32)}", "Stripe webhook"),
    (f"AWS id AKIA{upper(16)}", "AWS access key id"),
    (f"session ASIA{upper(16)}", "AWS access key id"),
    (f"spaced A K I A {' '.join(upper(16))}", "AWS access key id"),
    (f"aws_secret_access_key = {r(40, B64)}", "AWS secret"),
    (f"ghp_{r(36)}", "GitHub token"),
    (f"github_pat_{r(22)}_{r(59)}", "GitHub token"),
    (f"glpat-{r(20, ALNUM + '-_')}", "GitLab token"),
    (f"xoxb-{r(12, string.digits)}-{r(12, string.digits)}-{r(24)}", "Slack token"),
    (f"https://hooks.slack.com/services/T{upper(8)}/B{upper(10)}/{r(24)}", "Slack webhook"),
    (f"AIza{r(35, ALNUM + '-_')}", "Google API key"),
    (f"ya29.{r(60, ALNUM + '-_')}", "Google OAuth"),
    (f"hf_{r(34)}", "Hugging Face"),
    (f"npm_{r(36)}", "npm token"),
    (f"pypi-AgEIcHlwaS5vcmc{r(60, ALNUM + '-_')}", "PyPI token"),
    (f"SG.{r(22, ALNUM + '-_')}.{r(43, ALNUM + '-_')}", "SendGrid"),
    (f"SK{r(32, HEX)}", "Twilio"),
    (f"bot {r(10, string.digits)}:AA{r(33, ALNUM + '-_')}", "Telegram"),
    (f"M{r(23)}.{r(6)}.{r(27, ALNUM + '-_')}", "Discord"),
    (f"dop_v1_{r(64, HEX)}", "DigitalOcean"),
    (f"shpat_{r(32, HEX)}", "Shopify"),
    (f"key-{r(32)}", "Mailgun"),
    (f"sq0atp-{r(22, ALNUM + '-_')}", "Square"),
    (f"gsk_{r(52)}", "Groq/xAI/Replicate"),
    (f"DefaultEndpointsProtocol=https;AccountName=x;AccountKey={r(86, B64)}==", "Azure storage key"),
    (f"curl -H 'Authorization: Bearer {r(40, ALNUM + '._-')}'", "bearer token"),
    (f"Authorization: Basic {r(24, B64)}=", "basic-auth"),
    (f"eyJ{r(20)}.eyJ{r(40)}.{r(43, ALNUM + '-_')}", "JSON Web Token"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow...\n-----END RSA PRIVATE KEY-----", "private key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "private key"),
    ("-----BEGIN EC PRIVATE KEY-----", "private key"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "private key"),
    ("db at postgres://app:Tr0ub4dor3@10.0.0.5:5432/main", "URL with embedded credentials"),
    ("password: correct-horse-battery-9", "assigned API key or password"),
    (f'"api_key": "{r(32, HEX)}"', "assigned API key or password"),
    (f"client_secret={r(30)}", "assigned API key or password"),
    (f"a bare token {r(40)}", HIGH_ENTROPY),
    (f"ｓｋ－ｐｒｏｊ－{r(30)}", "sk-"),  # full-width look-alike characters (NFKC)
]


def test_corpus_sizes() -> None:
    assert len(FAKE_KEYS) >= 30 and len(INNOCENT) >= 60 and len(key_shapes()) >= 30 and len(ENCODERS) >= 10


@pytest.mark.parametrize(("text", "kind"), FAKE_KEYS, ids=[f"key{i}" for i in range(len(FAKE_KEYS))])
def test_every_fake_key_is_found(text: str, kind: str) -> None:
    found = scan_text(text)
    assert found is not None, f"leaked: {text!r}"
    assert kind in found


def test_every_rule_has_a_fake_key() -> None:
    kinds = {scan_text(text) for text, _ in FAKE_KEYS}
    assert {kind for kind, _, _ in RULES} | {HIGH_ENTROPY} <= kinds


def test_innocent_look_alikes_are_not_flagged() -> None:
    flagged = [(text, scan_text(text)) for text in INNOCENT if scan_text(text) is not None]
    assert len(flagged) / len(INNOCENT) < 0.03, flagged


@pytest.mark.parametrize("encoding", list(ENCODERS))
def test_every_key_shape_is_found_in_every_encoding(encoding: str) -> None:
    texts = [(text, kind) for name, text, kind in keys() if name == encoding]
    leaked = [(kind, scan_text(text)) for text, kind in texts if kind not in (scan_text(text) or "")]
    assert texts and not leaked, leaked


def test_the_figures_hold_on_other_synthetic_keys() -> None:
    """Another seed, other keys: all found, and what the figures count is what the tests assert."""
    found = figures(seed=7)
    assert found["detected"] == found["keys"] >= 300, found["leaked"]
    assert len(found["flagged"]) / found["innocent"] < 0.03


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("data:text/plain;base64,AKIAQ3EGRT7YB2XK9PLM", "AWS access key id"),  # a key after the prefix, as is
        ("data:text/plain;base64,QUtJQVEzRUdSVDdZQjJYSzlQTE0=", "AWS access key id (in data URI)"),
        (("sk-proj-" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY").encode().hex(), "sk-…) (in hex)"),
        (
            f"![x](data:image/png;base64,{base64.b64encode(b'PNG tEXt ghp_' + b'k' * 3 + b'Z9' * 16).decode()})",
            "GitHub",
        ),
    ],
    ids=["data-uri-as-written", "data-uri-decoded", "hex", "text-inside-binary"],
)
def test_keys_that_leaked_before_are_found(text: str, kind: str) -> None:
    assert kind in (scan_text(text) or "")


@pytest.mark.parametrize(
    "text",
    [
        "sk-learn is a nickname for scikit-learn",
        "XPS13-9310-Intel-Core-i7-1185G7",
        "AbstractSingletonProxyFactoryBeanV2Impl",
        "Set api_key = os.environ['OPENAI_API_KEY'] in your own code.",
        'integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC"',
    ],
)
def test_look_alikes_refused_before_pass(text: str) -> None:
    assert scan_text(text) is None


def _exports(target) -> dict:
    return {
        "skill": lambda: build_skill(target),
        "skill-zip": lambda: skill_zip_bytes(target),
        "card-v2": lambda: export_card_json(target, "v2"),
        "card-v3": lambda: export_card_json(target, "v3"),
        "card-png-v2": lambda: export_card_png(target, "v2"),
        "card-png-v3": lambda: export_card_png(target, "v3"),
    }


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("style_notes", "short key sk-test-LEAK777", "style_notes"),
        ("principles", [f"Call with {_openai[:15]}{ZW}{_openai[15:]}"], "principles[0]"),
        ("identity", "A bot using AKIA" + upper(16), "identity"),
    ],
)
def test_every_export_refuses_a_secret_without_printing_it(field: str, value, where: str) -> None:
    elixir = edit(make_native(), **{field: value})
    secret = "LEAK777" if "LEAK" in str(value) else str(value)[-12:]
    for name, export in _exports(elixir).items():
        with pytest.raises(InputError) as err:
            export()
        assert err.value.field and err.value.field in str(err.value), name  # the field is named
        if name.startswith("skill"):
            assert where in str(err.value)
        assert secret not in str(err.value)


def test_agent_card_export_refuses_a_secret_in_the_system_prompt() -> None:
    native = make_native()
    agent = make_agent(native, native).model_copy(update={"system_prompt": f"Use {_openai} for calls."})
    for name, export in _exports(agent).items():
        with pytest.raises(InputError, match="system_prompt"):
            export()
        assert name


def test_clean_exports_pass_the_scanner() -> None:
    native = make_native()
    for export in _exports(native).values():
        export()
    card = json.loads(export_card_json(make_agent(native, native), "v3"))
    assert find_secret(card) is None  # hashes, ids and lineage are not secrets


def test_store_warns_on_write_of_style_notes_or_principles(caplog) -> None:
    store = MemoryStore()
    with caplog.at_level(logging.WARNING, logger="furnace.secrets"):
        store.save_elixir(edit(make_native(), style_notes=f"my key is ghp_{r(36)}"))
    (record,) = [r for r in caplog.records if r.name == "furnace.secrets"]
    assert "style_notes" in record.getMessage() and "GitHub token" in record.getMessage()
    assert "ghp_" not in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="furnace.secrets"):
        store.save_elixir(make_native())
    assert not [r for r in caplog.records if r.name == "furnace.secrets"]


def test_a_text_scanned_again_gets_the_same_verdict_and_no_text_is_kept() -> None:
    from furnace.domain import secrets

    texts = [text for text, _ in FAKE_KEYS] + INNOCENT
    first = [scan_text(t) for t in texts]
    again = [scan_text(t) for t in texts]  # served by digest
    assert first == again == [secrets._scan(t) for t in texts]
    assert all(isinstance(k, bytes) and len(k) == 16 for k in secrets._VERDICTS)  # digests, never the texts
    assert not any(t in secrets._VERDICTS for t in texts)
