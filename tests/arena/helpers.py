"""Arena test helpers: four members (two en, two zh) in a MemoryStore."""

from __future__ import annotations

import re

from furnace.arena.runner import Arena
from furnace.arena.store import InMemoryArenaStore
from furnace.domain.elixir import Elixir
from furnace.llm.seam import LLMRequest, TaskKind
from furnace.storage.memory import MemoryStore

MEMBERS = [
    dict(
        id="ada",
        name="Ada",
        language="en",
        identity="A meticulous data engineer.",
        expertise=["databases", "query tuning"],
        principles=["Measure before optimising."],
    ),
    dict(
        id="bo",
        name="Bo",
        language="en",
        identity="A cheerful travel writer.",
        expertise=["travel", "food writing"],
        principles=["Tell one vivid detail."],
        tone={"humor": 0.9, "formality": 0.1},
    ),
    dict(
        id="cy",
        name="小周",
        language="zh",
        identity="一位严谨的财务顾问。",
        expertise=["理财", "税务"],
        principles=["先讲风险再讲收益。"],
    ),
    dict(
        id="dee",
        name="Dee",
        language="zh",
        identity="一位热情的健身教练。",
        expertise=["健身", "营养"],
        principles=["每次只给一个可执行的建议。"],
    ),
]
IDS = [m["id"] for m in MEMBERS]

OPEN = "Tell me something useful about your field."
PLAN_ALL = {"speakers": [{"member": m, "task": f"task {m}"} for m in IDS], "budget": {"max_speakers": 4}}


def named(request):
    """A fake model: the plan above for PLAN calls, "<name> says hi" for every reply."""
    if request.task is TaskKind.PLAN:
        return PLAN_ALL
    return f"{request.inputs['persona']['name']} says hi"


def make_store() -> MemoryStore:
    store = MemoryStore()
    for data in MEMBERS:
        store.save_elixir(Elixir.model_validate(data))
    return store


def make_arena(llm, elixirs=None, store=None, **kwargs) -> Arena:
    return Arena(store or InMemoryArenaStore(), elixirs or make_store(), llm, **kwargs)


def count(llm_calls: list[LLMRequest], task: TaskKind) -> int:
    return sum(1 for r in llm_calls if r.task is task)


def numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]
