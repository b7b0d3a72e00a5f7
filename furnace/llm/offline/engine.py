"""Dispatch of the offline engine to its per-task handlers."""

from __future__ import annotations

import hashlib
import importlib
import json
import random
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from furnace.domain.canonical import content_key
from furnace.domain.errors import LLMError
from furnace.llm.seam import (
    OFFLINE_MODEL_NAME,
    OFFLINE_SECOND_JUDGE,
    Completion,
    LLMRequest,
    TaskKind,
    Usage,
    shaping_inputs,
)

Handler = Callable[[LLMRequest, random.Random], tuple[str, Any]]

# task kind -> "module:function" (relative to furnace.llm.offline). Owners add theirs.
HANDLERS: dict[TaskKind, str] = {
    TaskKind.IDENTITY: "fusion_tasks:identity",
    TaskKind.REWRITE: "fusion_tasks:rewrite",
    TaskKind.ADJUDICATE: "fusion_tasks:adjudicate",
    TaskKind.ROUTE: "fusion_tasks:route",
    TaskKind.REPLY: "reply:reply",
    TaskKind.JUDGE: "judge:judge",
    TaskKind.GENERATE: "writing:generate",
    TaskKind.REVISE: "writing:revise",
    TaskKind.EXTRACT_PREFERENCES: "writing:extract_preferences",
    TaskKind.COMPRESS: "writing:compress",
    TaskKind.PLAN: "plan:plan",
    TaskKind.ASSIST: "assist:assist",
    TaskKind.REFLECT: "reflect:reflect",
}
# model name -> the tasks it answers with other rules than HANDLERS (every offline name is listed)
VARIANTS: dict[str, dict[TaskKind, str]] = {
    OFFLINE_MODEL_NAME: {},
    OFFLINE_SECOND_JUDGE: {TaskKind.JUDGE: "judge_second:judge"},
}


def rules_version(package: Any = None) -> str:
    """A version of the offline engine's rules: a hash over its source files (rule tables and handlers).

    Any edit to a rule changes it, so the response cache never serves an answer
    the current rules would not give (it is part of every offline cache key).
    """
    root = package if package is not None else resources.files("furnace.llm.offline")
    digest = hashlib.sha256()
    for item in sorted((f for f in root.iterdir() if f.name.endswith(".py")), key=lambda f: f.name):
        digest.update(item.name.encode() + b"\0" + item.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


RULES_VERSION = rules_version()


def estimate_tokens(text: str) -> int:
    """A cheap, deterministic token estimate (CJK chars count one each)."""
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    return cjk + max(0, (len(text) - cjk) // 4) + 1


class OfflineEngine:
    """The default model: rules, not a language model. Says so in its name."""

    model_name = OFFLINE_MODEL_NAME  # or another name of VARIANTS, given to the constructor
    engine_version = f"rules-{RULES_VERSION}"
    reads_inputs = True  # answers come from ``inputs`` (its choices are seeded with them), not the prose

    def __init__(self, model_name: str = OFFLINE_MODEL_NAME) -> None:
        if model_name not in VARIANTS:
            raise LLMError(f"no offline model {model_name!r} (known: {', '.join(sorted(VARIANTS))})")
        self.model_name = model_name
        self._cache: dict[TaskKind, Handler] = {}

    def _handler(self, task: TaskKind) -> Handler:
        if task not in self._cache:
            target = VARIANTS[self.model_name].get(task) or HANDLERS.get(task)
            if target is None:
                raise LLMError(f"the offline engine has no rule for task {task.value!r}")
            module_name, func = target.split(":")
            module = importlib.import_module(f"furnace.llm.offline.{module_name}")
            self._cache[task] = getattr(module, func)
        return self._cache[task]

    def complete(self, request: LLMRequest) -> Completion:
        started = time.perf_counter()
        # Seeded per request: same request, same answer.
        inputs = shaping_inputs(request.inputs)
        rng = random.Random(content_key([request.seed, request.sample_index, request.task.value, inputs]))
        text, parsed = self._handler(request.task)(request, rng)
        if parsed is not None and not text:
            text = json.dumps(parsed, ensure_ascii=False)
        prompt_text = "".join(m.content for m in request.messages)
        return Completion(
            text=text,
            parsed=parsed,
            usage=Usage(prompt_tokens=estimate_tokens(prompt_text), completion_tokens=estimate_tokens(text)),
            cost_usd=0.0,
            model=self.model_name,
            latency_s=time.perf_counter() - started,
        )
