"""Shared doubles for the experiment tests: a library, a pure breeder, a scripted model."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from furnace import resources
from furnace.domain.canonical import content_key
from furnace.domain.elixir import Elixir, ElixirRef, parse_elixir
from furnace.domain.render import render_prompt
from furnace.evolution.engine import Bred
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline.judge import judge
from furnace.llm.seam import LLM, LLMRequest, TaskKind

REPO = Path(__file__).resolve().parents[2]


def library() -> list[Elixir]:
    """The shipped sample library."""
    return [parse_elixir(yaml.safe_load(p.read_text())) for p in sorted(resources.LIBRARY_DIR.glob("*.yaml"))]


class PureBreeder:
    """A deterministic stand-in for fusion: no store, one model call per child (like identity)."""

    def __init__(self, seeds: Sequence[Elixir]) -> None:
        self.known: dict[str, Elixir] = {e.content_hash: e for e in seeds}

    def __call__(
        self, parents: Sequence[ElixirRef], operator: str, seed: int, params: dict[str, Any], llm: LLM
    ) -> Bred:
        from furnace.llm.seam import system_user

        ps = [self.known[r.content_hash] for r in parents]
        rng = random.Random(seed)
        llm.complete(
            system_user(
                TaskKind.IDENTITY, "identity", ps[0].identity, seed=seed, inputs={"parents": [p.identity for p in ps]}
            )
        )
        data = ps[0].model_dump(mode="json", exclude={"content_hash", "id", "version", "created_at", "deleted_at"})
        tone = dict(data["tone"])
        if operator == "mutation":
            dim = rng.choice(sorted(tone))
            tone[dim] = round(min(1.0, max(0.0, tone[dim] + rng.uniform(-0.2, 0.2))), 3)
        else:
            other = ps[-1]
            for dim in tone:
                tone[dim] = round((tone[dim] + getattr(other.tone, dim)) / 2, 3)
            data["expertise"] = list(dict.fromkeys([*data["expertise"], *other.expertise]))[:40]
            data["constraints"] = dict(
                data["constraints"], must_use_markdown=any(p.constraints.must_use_markdown for p in ps)
            )
        lineage_hash = content_key([[r.model_dump() for r in parents], operator, seed, params])
        agent_id = "agt-" + lineage_hash[:20]
        data.update(tone=tone, id=agent_id, name=f"child {lineage_hash[:8]}", conflicts_with=[])
        child = parse_elixir(data)
        self.known[child.content_hash] = child
        return Bred(agent_id, child, render_prompt(child), lineage_hash)


def scripted_llm(model_name: str = "scripted") -> FakeLLM:
    """Answers REPLY with a persona-flavoured text and JUDGE through the offline judge."""

    def respond(request: LLMRequest) -> Any:
        if request.task == TaskKind.JUDGE:
            return judge(request, random.Random(0))[1]
        if request.task == TaskKind.REPLY:
            persona = request.inputs["persona"]
            return (
                f"## {persona['name']}\n- " + "\n- ".join(persona["expertise"][:3]) + f"\n{request.inputs['message']}"
            )
        return "ok"

    return FakeLLM(respond=respond, model_name=model_name)


class Boom(Exception):
    """The crash a test breeder raises (a process killed mid-run)."""


def dying_after(inner: Any, n: int) -> Any:
    """A breeder that breeds with ``inner`` and raises :class:`Boom` at its ``n``-th child."""
    made = {"n": 0}

    def dying(parents: Any, operator: Any, seed: Any, params: Any, llm: Any) -> Any:
        made["n"] += 1
        if made["n"] == n:
            raise Boom()
        return inner(parents, operator, seed, params, llm)

    return dying


def live_db(home: Path) -> Any:
    """The live store of ``home`` as the runtime opens it: ``furnace.sqlite`` in it (SQLite in WAL mode)."""
    from furnace.storage.sql.db import SQLDatabase, sqlite_url

    home.mkdir(parents=True, exist_ok=True)
    return SQLDatabase(sqlite_url(home), home=home)


class JudgeOutage:
    """The offline engine whose judge fails (a rate limit) for a seeded share of its judgements while ``down``
    (both class attributes: a test sets them with ``monkeypatch.setattr``). Built in place of the runtime's
    offline engine: ``monkeypatch.setattr(offline, "OfflineEngine", lambda: JudgeOutage(real))``."""

    down = True
    share = 0.3  # of the judgements that fail while down (each chosen by a seeded draw on its messages)

    def __init__(self, engine: type) -> None:
        self.inner = engine()
        self.model_name = self.inner.model_name

    def complete(self, request: LLMRequest) -> Any:
        from furnace.domain.errors import LLMRateLimit

        key = content_key([m.content for m in request.messages])
        if JudgeOutage.down and request.task == TaskKind.JUDGE and random.Random(key).random() < JudgeOutage.share:
            raise LLMRateLimit("429 from the provider")
        return self.inner.complete(request)
