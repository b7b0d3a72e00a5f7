"""Test doubles at furnace's own LLM seam (shipped, so users' tests can use them too).

- :class:`FakeLLM` — answers from a queue (or a function), records every request.
- :class:`EchoLLM` — echoes the prompt back; for asserting prompt assembly.
- :class:`SlowLLM` — wraps another model and adds fixed latency; for benchmarks.
- :class:`FlakyLLM` — wraps another model and fails a seeded share of calls.
- :class:`ReplayLLM` — replays recorded completions by content key (see below).
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from furnace.errors import LLMError, LLMTimeout
from furnace.llm import Completion, LLMRequest, Usage


def _completion(model: str, text: str, parsed: Any = None) -> Completion:
    return Completion(
        text=text,
        parsed=parsed,
        usage=Usage(prompt_tokens=0, completion_tokens=max(1, len(text) // 4)),
        model=model,
    )


class FakeLLM:
    """Answers from a queue of strings, dicts (parsed JSON), exceptions or callables.

    ``FakeLLM(["a", {"x": 1}, LLMTimeout("slow")])``; ``enqueue(...)`` adds more;
    ``respond=fn`` answers every call not covered by the queue. ``calls`` holds every
    request seen, in order.
    """

    def __init__(
        self,
        responses: Iterable[Any] = (),
        *,
        respond: Callable[[LLMRequest], Any] | None = None,
        model_name: str = "fake",
    ) -> None:
        self.model_name = model_name
        self._queue: deque[Any] = deque(responses)
        self._respond = respond
        self._lock = threading.Lock()
        self.calls: list[LLMRequest] = []

    def enqueue(self, *responses: Any) -> None:
        with self._lock:
            self._queue.extend(responses)

    def complete(self, request: LLMRequest) -> Completion:
        with self._lock:
            self.calls.append(request)
            item = self._queue.popleft() if self._queue else None
        if item is None:
            if self._respond is None:
                raise LLMError("FakeLLM: no response queued for task " + request.task.value)
            item = self._respond(request)
        if callable(item) and not isinstance(item, (str, dict, list)):
            item = item(request)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Completion):
            return item
        if isinstance(item, (dict, list)):
            import json

            return _completion(self.model_name, json.dumps(item, ensure_ascii=False), item)
        return _completion(self.model_name, str(item))


class EchoLLM:
    """Returns the request's messages as text (``role: content`` lines)."""

    model_name = "echo"

    def __init__(self) -> None:
        self.calls: list[LLMRequest] = []

    def complete(self, request: LLMRequest) -> Completion:
        self.calls.append(request)
        text = "\n".join(f"{m.role}: {m.content}" for m in request.messages)
        return _completion(self.model_name, text)


class SlowLLM:
    """Adds ``latency_s`` per call (sleeping, so threads overlap) to ``inner``."""

    def __init__(self, inner: Any, latency_s: float = 0.05, *, per_token_s: float = 0.0) -> None:
        self.inner = inner
        self.latency_s = latency_s
        self.per_token_s = per_token_s
        self.model_name = inner.model_name
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> Completion:
        with self._lock:
            self.calls += 1
        started = time.perf_counter()
        result = self.inner.complete(request)
        time.sleep(self.latency_s + self.per_token_s * result.usage.completion_tokens)
        return result.model_copy(update={"latency_s": time.perf_counter() - started})


class FlakyLLM:
    """Fails a seeded ``rate`` of calls with a transient :class:`LLMTimeout`.

    Whether a call fails depends only on its cache key and the seed, so a retried
    identical request fails again only by the same deterministic rule
    (``attempt`` in the key makes retries independent).
    """

    def __init__(self, inner: Any, rate: float = 0.3, *, seed: int = 0) -> None:
        self.inner = inner
        self.rate = rate
        self.seed = seed
        self.model_name = inner.model_name
        self.failures = 0
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> Completion:
        key = request.cache_key(self.model_name)
        with self._lock:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
        if random.Random(f"{self.seed}:{key}:{attempt}").random() < self.rate:
            with self._lock:
                self.failures += 1
            raise LLMTimeout(f"injected transient failure ({request.task.value})")
        return self.inner.complete(request)
