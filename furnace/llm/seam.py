"""The LLM seam: one small interface for every model call in furnace.

Operators, scorers, revision chat, the arena and the assistant all build an
:class:`LLMRequest` and call ``llm.complete(request)``. Implementations:

- ``furnace.llm.offline.OfflineEngine`` — the deterministic rule engine (default);
- ``furnace.adapters.litellm_client.LiteLLMClient`` — any litellm model;
- fakes in :mod:`furnace.llm.fakes`;
- wrappers in :mod:`furnace.llm.cache` (response cache + accounting).

``request.inputs`` carries the task's structured inputs so that the offline
engine (and fakes) can do the task without parsing prose; real models read
``messages``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from furnace.domain.canonical import content_key

OFFLINE_MODEL_NAME = "furnace-offline-rules-v1"


class TaskKind(StrEnum):
    IDENTITY = "identity"
    REWRITE = "rewrite"
    ADJUDICATE = "adjudicate"
    GENERATE = "generate"
    REVISE = "revise"
    EXTRACT_PREFERENCES = "extract_preferences"
    JUDGE = "judge"
    REPLY = "reply"
    PLAN = "plan"
    COMPRESS = "compress"
    ROUTE = "route"
    ASSIST = "assist"
    REFLECT = "reflect"


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class LLMRequest(BaseModel):
    """Everything a model call needs. Frozen; hashable into a cache key."""

    model_config = ConfigDict(frozen=True)

    task: TaskKind
    messages: tuple[Message, ...]
    temperature: float = 0.7
    seed: int | None = None
    max_tokens: int | None = None
    json_schema: dict[str, Any] | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    sample_index: int = 0
    # Not part of the cache key: who asked (for accounting) and a label for traces.
    run_id: str | None = None

    def cache_key(self, model: str) -> str:
        """Content key of this request for ``model`` (run_id excluded)."""
        return content_key(
            {
                "model": model,
                "task": self.task.value,
                "messages": [m.model_dump() for m in self.messages],
                "temperature": self.temperature,
                "seed": self.seed,
                "max_tokens": self.max_tokens,
                "schema": self.json_schema,
                "inputs": self.inputs,
                "sample": self.sample_index,
            }
        )


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Completion(BaseModel):
    """A model's answer. ``parsed`` is set (and schema-valid) when a schema was given."""

    model_config = ConfigDict(frozen=True)

    text: str
    parsed: Any = None
    usage: Usage = Usage()
    cost_usd: float = 0.0
    model: str
    latency_s: float = 0.0
    cached: bool = False
    attempts: int = 1  # requests made for this answer (retries and re-asks included)


@runtime_checkable
class LLM(Protocol):
    """The seam. ``model_name`` is what goes into cache keys and lineage params."""

    model_name: str

    def complete(self, request: LLMRequest) -> Completion: ...


def system_user(task: TaskKind, system: str, user: str, **kwargs: Any) -> LLMRequest:
    """Shorthand for the common two-message request."""
    return LLMRequest(
        task=task,
        messages=(Message(role="system", content=system), Message(role="user", content=user)),
        **kwargs,
    )
