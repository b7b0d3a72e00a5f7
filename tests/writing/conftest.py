"""Shared fixtures for the revision area: personas, in-memory stores, the offline engine."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from furnace.domain.elixir import Elixir, parse_elixir
from furnace.llm.offline import OfflineEngine
from furnace.storage.memory import MemoryStore
from furnace.writing.content_memory import MemoryContentStore

ZH_PERSONA = {
    "id": "skin-advisor",
    "name": "护肤顾问",
    "language": "zh",
    "identity": "一位严谨的护肤顾问，擅长把成分和防晒讲清楚。",
    "expertise": ["护肤", "防晒", "成分分析"],
    "principles": ["推荐前先说明适用肤质", "不夸大产品功效"],
    "tone": {"formality": 0.8, "conciseness": 0.5, "humor": 0.2, "empathy": 0.6},
}
EN_PERSONA = {
    "id": "skin-advisor-en",
    "name": "Skin Advisor",
    "language": "en",
    "identity": "A careful skin-care advisor who explains sunscreen and ingredients plainly.",
    "expertise": ["skin care", "sun protection", "ingredient analysis"],
    "principles": ["State the skin type before recommending", "Never exaggerate what a product does"],
    "tone": {"formality": 0.8, "conciseness": 0.5, "humor": 0.2, "empathy": 0.6},
}


class TickClock:
    """A deterministic clock: each call is one second later."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, 0)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture()
def clock() -> TickClock:
    return TickClock()


@pytest.fixture()
def store(clock: TickClock) -> MemoryStore:
    s = MemoryStore(clock=clock)
    s.save_elixir(parse_elixir(ZH_PERSONA))
    s.save_elixir(parse_elixir(EN_PERSONA))
    return s


@pytest.fixture()
def contents() -> MemoryContentStore:
    return MemoryContentStore()


@pytest.fixture()
def engine() -> OfflineEngine:
    return OfflineEngine()


def persona(store: MemoryStore, pid: str) -> Elixir:
    return store.get_elixir(pid)
