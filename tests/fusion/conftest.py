"""Shared fixtures for the fusion tests: a memory store with two parents, models, caches."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from furnace.domain.elixir import Elixir, parse_elixir
from furnace.fusion.embedding import HashEmbedder
from furnace.fusion.synthesis import MemoryKV, SynthesisCache
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline.engine import OfflineEngine
from furnace.settings import FurnaceSettings
from furnace.storage.memory import MemoryStore


def make_elixir(name: str, **fields: Any) -> Elixir:
    data: dict[str, Any] = {
        "name": name,
        "identity": f"You are {name.lower()}, a helpful persona.",
        "expertise": ["general help"],
        "principles": ["Be helpful."],
    }
    data.update(fields)
    return parse_elixir(data)


COACH = dict(
    identity="You are a seasoned data scientist who explains statistics plainly.",
    expertise=["statistics", "python data analysis"],
    principles=["Answer briefly.", "Cite sources.", "Use formal language."],
    tone={"formality": 0.8, "conciseness": 0.6, "humor": 0.2, "empathy": 0.5},
    constraints={"max_length": 200, "forbidden_topics": ["gambling"]},
    few_shots=[{"input": "q1", "output": "a1"}, {"input": "q2", "output": "a2"}],
    tools=["python", "sql"],
    priority=300,
)
WIT = dict(
    identity="You are a witty travel writer, fond of puns.",
    expertise=["travel writing", "python data analysis"],
    principles=["Keep your answers short.", "Be casual and playful.", "Use examples."],
    tone={"formality": 0.4, "conciseness": 0.2, "humor": 0.9, "empathy": 0.7},
    constraints={"max_length": 400, "must_use_markdown": True, "forbidden_topics": ["politics"]},
    few_shots=[{"input": "q3", "output": "a3"}, {"input": "q4", "output": "a4"}],
    tools=["maps", "python"],
    priority=100,
)


def counting(inner: Any | None = None) -> FakeLLM:
    """A FakeLLM that answers with the offline engine and records every call."""
    engine = inner or OfflineEngine()
    return FakeLLM(respond=engine.complete, model_name=engine.model_name)


@pytest.fixture()
def store() -> MemoryStore:
    s = MemoryStore()
    s.save_elixir(make_elixir("Data Coach", **COACH))
    s.save_elixir(make_elixir("Travel Wit", **WIT))
    return s


@pytest.fixture()
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture()
def cache() -> SynthesisCache:
    return SynthesisCache(MemoryKV())


@pytest.fixture()
def fsettings(tmp_path) -> FurnaceSettings:
    return FurnaceSettings(home=tmp_path / "home", embedder="hash")


T = TypeVar("T")


def all_at_once(n: int, call: Callable[[], T]) -> list[T]:
    """``call()`` on ``n`` threads released together (a barrier): their results, in finishing order;
    the first error any of them raised is raised here."""
    barrier, results, errors = threading.Barrier(n), [], []

    def worker() -> None:
        try:
            barrier.wait()
            results.append(call())
        except Exception as err:  # raised below, in the test's thread
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
