"""Attempts per logical call stay within FURNACE_MAX_RETRIES + 1 for every face.

The real wiring (settings -> factory -> CachedLLM(LiteLLMClient)) talks to the
local stub server, which fails every request; the stub counts what arrives.
A logical call is one distinct conversation (a re-ask changes the messages).
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter

import pytest
from pydantic import SecretStr

from furnace.domain.errors import FurnaceError
from furnace.runtime import build_llm
from furnace.settings import FurnaceSettings

from .stub_server import Reply, StubServer, error_body


def _llm(stub: StubServer, retries: int):
    settings = FurnaceSettings.model_construct(
        model="openai/stub",
        api_base=stub.api_base,
        api_key=SecretStr("sk-stub-000000"),
        timeout_s=5.0,
        max_retries=retries,
    )
    llm = build_llm(settings)
    llm.inner._sleep = lambda s: None  # no real backoff in tests; the policy itself is tested in the client tests
    return llm


def _per_call(stub: StubServer) -> Counter:
    return Counter(json.dumps(r.get("messages"), sort_keys=True) for r in stub.requests)


def _fusion(llm) -> None:
    from fusion.conftest import COACH, WIT, make_elixir

    from furnace.fusion.embedding import HashEmbedder
    from furnace.fusion.fuse import fuse
    from furnace.fusion.synthesis import SynthesisCache
    from furnace.storage.memory import MemoryStore

    store = MemoryStore()
    a, b = store.save_elixir(make_elixir("Data Coach", **COACH)), store.save_elixir(make_elixir("Travel Wit", **WIT))
    fuse(store, [a, b], llm=llm, embedder=HashEmbedder(), cache=SynthesisCache(), operator="crossover")


def _judge(llm) -> None:
    from fusion.conftest import COACH, make_elixir

    from furnace.scoring.judge import judge_answer

    score = judge_answer(llm, make_elixir("Data Coach", **COACH), "hi?", "hello", "fidelity")
    assert score.failed


def _content(llm) -> None:
    import pathlib
    import tempfile

    from fusion.conftest import COACH, make_elixir

    from furnace.storage.memory import MemoryStore
    from furnace.storage.sql.content import SQLContentStore
    from furnace.storage.sql.db import SQLDatabase, sqlite_url
    from furnace.writing.content import generate_content

    store = MemoryStore()
    ref = store.save_elixir(make_elixir("Data Coach", **COACH))
    home = pathlib.Path(tempfile.mkdtemp())
    db = SQLDatabase(sqlite_url(home), home=home)  # a home's live store
    try:
        generate_content(store, SQLContentStore(db), llm, persona_id=ref.id, topic="sunscreen")
    finally:
        db.close()


def _arena(llm) -> None:
    from arena.helpers import IDS, make_arena

    arena = make_arena(llm)
    outcome = arena.say(arena.create_session(IDS[:2]).id, "Tell me something useful about your field.")
    assert not outcome.replies and len(outcome.failures) >= 1


def _ask(llm) -> None:
    from assistant.test_assistant import NOW, FakeData

    from furnace.assistant.answer import Assistant, AssistantState

    list(
        Assistant(FakeData(), llm, model_lead=True, now=lambda: NOW).ask(
            "tell me a story about the data", AssistantState()
        )
    )


FACES = {"fusion": _fusion, "judge": _judge, "content": _content, "arena": _arena, "ask": _ask}


@pytest.mark.parametrize("retries", [0, 2])
@pytest.mark.parametrize("face", sorted(FACES))
def test_attempts_per_logical_call_within_budget(stub, face, retries):
    stub.default = Reply(status=503, body=error_body("overloaded"))
    llm = _llm(stub, retries)
    with contextlib.suppress(FurnaceError):  # a face may give up with a clear error
        FACES[face](llm)
    per_call = _per_call(stub)
    assert per_call, f"{face} made no model call"
    assert max(per_call.values()) == retries + 1  # the client retried, and nothing above it did
    rows = llm.ledger.calls()
    assert sum(r.attempts for r in rows if not r.cached) == stub.calls  # the ledger knows every attempt
