"""Test doubles at furnace's own LLM seam (shipped, so users' tests can use them too).

- :class:`FakeLLM` — answers from a queue (or a function), records every request.
- :class:`EchoLLM` — echoes the prompt back; for asserting prompt assembly.
- :class:`SlowLLM` — wraps another model and adds fixed latency; for benchmarks.
- :class:`FlakyLLM` — wraps another model and fails a seeded share of calls.
- :class:`ReplayLLM` — replays recorded completions by content key (see below).
"""

from __future__ import annotations

import json
import pickle
import random
import time
from collections import deque
from collections.abc import Callable, Iterable
from os import PathLike
from typing import Any

from furnace.domain.errors import LLMError, LLMTimeout
from furnace.domain.guarded import Guarded, serialized
from furnace.llm.seam import LLM, Completion, LLMRequest, Usage


def _completion(model: str, text: str, parsed: Any = None) -> Completion:
    return Completion(
        text=text,
        parsed=parsed,
        usage=Usage(prompt_tokens=0, completion_tokens=max(1, len(text) // 4)),
        model=model,
    )


class FakeLLM(Guarded):
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
        reads_inputs: bool = True,
        engine_version: str = "",
    ) -> None:
        self.model_name = model_name
        self.reads_inputs = reads_inputs  # False: behaves like a real model for cache keys (messages only)
        self.engine_version = engine_version
        self._queue: deque[Any] = deque(responses)
        self._respond = respond
        self.calls: list[LLMRequest] = []

    @serialized
    def enqueue(self, *responses: Any) -> None:
        self._queue.extend(responses)

    @serialized
    def _take(self, request: LLMRequest) -> Any:
        self.calls.append(request)
        return self._queue.popleft() if self._queue else None

    def complete(self, request: LLMRequest) -> Completion:
        item = self._take(request)
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


class SlowLLM(Guarded):
    """Adds ``latency_s`` per call (sleeping, so threads overlap) to ``inner``."""

    def __init__(self, inner: LLM, latency_s: float = 0.05, *, per_token_s: float = 0.0) -> None:
        self.inner = inner
        self.latency_s = latency_s
        self.per_token_s = per_token_s
        self.model_name = inner.model_name
        self.calls = 0

    @serialized
    def _count(self) -> None:
        self.calls += 1

    def complete(self, request: LLMRequest) -> Completion:
        self._count()
        started = time.perf_counter()
        result = self.inner.complete(request)
        time.sleep(self.latency_s + self.per_token_s * result.usage.completion_tokens)
        return result.model_copy(update={"latency_s": time.perf_counter() - started})


class FlakyLLM(Guarded):
    """Fails a seeded ``rate`` of calls with a transient :class:`LLMTimeout`.

    Whether a call fails depends only on its cache key and the seed, so a retried
    identical request fails again only by the same deterministic rule
    (``attempt`` in the key makes retries independent).
    """

    def __init__(self, inner: LLM, rate: float = 0.3, *, seed: int = 0) -> None:
        self.inner = inner
        self.rate = rate
        self.seed = seed
        self.model_name = inner.model_name
        self.failures = 0
        self._attempts: dict[str, int] = {}

    @serialized
    def _fails(self, key: str) -> bool:
        """Whether this attempt at ``key`` fails (counted)."""
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1
        fails = random.Random(f"{self.seed}:{key}:{attempt}").random() < self.rate
        self.failures += fails
        return fails

    def complete(self, request: LLMRequest) -> Completion:
        if self._fails(request.cache_key(self.model_name)):
            raise LLMTimeout(f"injected transient failure ({request.task.value})")
        return self.inner.complete(request)


class ReplayMiss(AssertionError):
    """A replayed test asked for a completion that was never recorded.

    An ``AssertionError`` on purpose: it fails the test and is not swallowed by
    code that handles :class:`~furnace.domain.errors.LLMError` as a per-call failure.
    """


REPLAY_FORMAT = "furnace-replay/1"


class ReplayLLM(Guarded):
    """Record a real model's completions once; replay them by content key.

    - **Record**: ``ReplayLLM(path, inner=real_model)`` serves keys already in
      the file and calls ``inner`` for new ones, saving each new completion
      (atomically) to ``path``. With ``path=None`` the recording is kept in
      memory only (nothing is read or written).
    - **Replay**: ``ReplayLLM(path)`` serves only what was recorded; an unseen
      request raises :class:`ReplayMiss` naming its task and a hint of its text.
      With ``fallback=model`` an unseen request is answered by ``fallback``
      instead, and its key is listed in ``misses`` (never recorded).
      ``recorder.replay(fallback=...)`` replays an (in-memory) recorder's
      completions so far.

    Keys are ``request.cache_key(model)`` with the recorded model's name, so a
    replay matches exactly when the request's content (messages, params, schema,
    seed, inputs, sample index) is unchanged. The file is JSON:
    ``{"format", "model", "completions": {key: {"task", "hint", "completion"}}}``.
    ``inner`` (the recorded model, or the fallback) is what cache keys of wrappers
    above see as the model that answers (its ``engine_version``, ``reads_inputs``).
    """

    def __init__(
        self,
        path: str | PathLike[str] | None,
        inner: LLM | None = None,
        *,
        fallback: LLM | None = None,
        model_name: str | None = None,
    ) -> None:
        from pathlib import Path

        if inner is not None and fallback is not None:
            raise ValueError("ReplayLLM: a fallback is for replaying; a recorder calls its inner model for new keys")
        self.path = Path(path) if path is not None else None
        self.mode = "record" if inner is not None else "replay"
        self.inner = inner if inner is not None else fallback
        self._entries: dict[str, dict[str, Any]] = {}
        self._completions: dict[str, Completion] = {}  # validated entries, by key
        # the key of each request seen, by its fields' values (run_id left out, see _identity): pickled in a few
        # microseconds, where the canonical key takes tens; equal values mean an equal key (it is built from them)
        self._keys: dict[bytes, str] = {}
        recorded_model: str | None = None
        if self.path is not None and self.path.exists():
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != REPLAY_FORMAT:
                raise ValueError(f"{self.path} is not a furnace replay file ({REPLAY_FORMAT})")
            recorded_model = data.get("model")
            self._entries = dict(data.get("completions") or {})
        elif self.path is not None and self.mode == "replay":
            raise ReplayMiss(f"no recording at {self.path}; record one with ReplayLLM(path, inner=model)")
        self.model_name: str = model_name or (inner.model_name if inner is not None else recorded_model) or "replay"
        if recorded_model and inner is not None and recorded_model != self.model_name:
            raise ValueError(f"{self.path} was recorded with {recorded_model!r}, not {self.model_name!r}")
        self.calls: list[LLMRequest] = []
        self.recorded = 0
        self.misses: list[str] = []

    def __len__(self) -> int:
        return len(self._entries)

    def replay(self, *, fallback: LLM | None = None) -> ReplayLLM:
        """A replaying double over the completions recorded so far (in memory; later recordings are not seen)."""
        replay = ReplayLLM(None, fallback=fallback, model_name=self.model_name)
        replay._entries, replay._completions, replay._keys = self._copies()
        return replay

    @serialized
    def _copies(self) -> tuple[dict[str, dict[str, Any]], dict[str, Completion], dict[bytes, str]]:
        return dict(self._entries), dict(self._completions), dict(self._keys)

    def _key(self, request: LLMRequest) -> str:
        raw = _identity(request)
        key = self._keys.get(raw) if raw is not None else None  # a dict read: atomic
        if key is None:
            key = request.cache_key(self.model_name)  # raises for what has no key (a non-finite float, ...)
            if raw is not None:
                self._keys[raw] = key  # equal values, equal key: a race writes the same
        return key

    @serialized
    def _served(self, request: LLMRequest, key: str) -> Completion | None:
        """The recorded completion for ``key`` (validated once), None when none was recorded; the
        request is counted, and a miss listed when replaying."""
        self.calls.append(request)
        found = self._completions.get(key)
        entry = self._entries.get(key) if found is None else None
        if found is None and entry is not None:
            found = self._completions[key] = Completion.model_validate(entry["completion"])
        if found is None and self.mode == "replay":
            self.misses.append(key)
        return found

    def complete(self, request: LLMRequest) -> Completion:
        key = self._key(request)
        found = self._served(request, key)
        if found is not None:
            return found
        if self.mode == "replay":
            hint = _hint(request)
            if self.inner is not None:
                return self.inner.complete(request)
            raise ReplayMiss(
                f"no recorded completion for task {request.task.value!r} ({hint!r}, key {key[:12]}) in "
                f"{self.path or 'the recording'}; re-record with ReplayLLM(path, inner=model)"
            )
        assert self.inner is not None
        completion = self.inner.complete(request).model_copy(update={"cached": False})
        self._record(request, key, completion)
        return completion

    @serialized
    def _record(self, request: LLMRequest, key: str, completion: Completion) -> None:
        self._entries[key] = {
            "task": request.task.value,
            "hint": _hint(request),
            "completion": completion.model_dump(mode="json"),
        }
        self._completions[key] = completion
        self.recorded += 1
        if self.path is not None:
            self._save()

    def _save(self) -> None:
        import os

        assert self.path is not None
        data = {"format": REPLAY_FORMAT, "model": self.model_name, "completions": self._entries}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False, sort_keys=True, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)


def _identity(request: LLMRequest) -> bytes | None:
    """Every field of ``request`` but who asked (``run_id``, ``unit``), pickled: equal bytes only for equal
    values (unlike JSON, where a NaN and None are both ``null``); None when a value cannot be pickled."""
    fields = {name: value for name, value in request.__dict__.items() if name not in ("run_id", "unit")}
    fields["messages"] = [tuple(m.__dict__.items()) for m in request.messages]
    try:
        return pickle.dumps(fields, protocol=5)
    except Exception:  # noqa: BLE001 - e.g. a lambda in inputs: the request is keyed the canonical way
        return None


def _hint(request: LLMRequest, size: int = 60) -> str:
    text = request.messages[-1].content if request.messages else ""
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 1] + "…"
