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

**Cache keys are complete and minimal** (:func:`answer_key`): everything that
shapes an answer and nothing else. Always: the model name, the task kind, the
full rendered messages, temperature, seed, max tokens, the response schema and
the sample index. Then what the model at the bottom of a wrapper chain says
about itself: ``engine_version`` (the offline engine's rules version, so
editing a rule misses the cache) and ``reads_inputs`` (real models read only
the messages, so ``inputs`` stay out of their keys; the offline engine and
fakes read ``inputs``, see :func:`shaping_inputs`). Who asked (``run_id``, ``unit``) is
never part of a key.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from furnace.domain.canonical import content_key

OFFLINE_MODEL_NAME = "furnace-offline-rules-v1"
OFFLINE_SECOND_JUDGE = "furnace-offline-judge2-v1"  # the offline rules with a second, independent JUDGE
OFFLINE_MODELS = frozenset({OFFLINE_MODEL_NAME, OFFLINE_SECOND_JUDGE})


def is_offline(model: str | None) -> bool:
    """True for no model or one of the offline engine's names (never sent to a provider)."""
    return not model or model in OFFLINE_MODELS


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
    unit: str | None = None  # the unit of work within the run the call is for (an experiment's ``g2/s3``)
    # the model a TaskRouter must send this request to (one judge of an experiment's panel); the model that
    # answers is part of the cache key, the route is not
    route: str | None = None

    def cache_key(self, model: str, *, engine_version: str = "", reads_inputs: bool = True) -> str:
        """Content key of this request for ``model`` (run_id excluded); see :func:`answer_key`."""
        parts: dict[str, Any] = {
            "model": model,
            "task": self.task.value,
            "messages": [m.model_dump() for m in self.messages],
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "schema": self.json_schema,
            "sample": self.sample_index,
        }
        if reads_inputs:
            parts["inputs"] = shaping_inputs(self.inputs)
        if engine_version:
            parts["engine"] = engine_version
        return content_key(parts)


def shaping_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """What an inputs-reading model (the offline engine, fakes) answers from: all of ``inputs``
    (the offline engine seeds its choices with them, a persona's id included)."""
    return inputs


def base_model(llm: Any) -> Any:
    """The model at the bottom of a chain of wrappers (each wrapper keeps its model in ``inner``)."""
    seen = 0
    while getattr(llm, "inner", None) is not None and seen < 32:
        llm, seen = llm.inner, seen + 1
    return llm


def answer_traits(llm: Any) -> tuple[str, bool]:
    """``(engine_version, reads_inputs)`` of the model that actually answers."""
    base = base_model(llm)
    return str(getattr(base, "engine_version", "") or ""), bool(getattr(base, "reads_inputs", True))


def answer_key(llm: Any, request: LLMRequest) -> str:
    """The response-cache key of ``request`` on ``llm``: everything that shapes its answer."""
    engine_version, reads_inputs = answer_traits(llm)
    return request.cache_key(llm.model_name, engine_version=engine_version, reads_inputs=reads_inputs)


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
    """The seam. ``model_name`` is what goes into cache keys and lineage params.

    Optional attributes (read by :func:`answer_traits`): ``engine_version`` (a
    version of the rules that produce answers) and ``reads_inputs`` (False for a
    model that reads only ``messages``; default True).
    """

    model_name: str

    def complete(self, request: LLMRequest) -> Completion: ...


def system_user(task: TaskKind, system: str, user: str, **kwargs: Any) -> LLMRequest:
    """Shorthand for the common two-message request."""
    return LLMRequest(
        task=task,
        messages=(Message(role="system", content=system), Message(role="user", content=user)),
        **kwargs,
    )
