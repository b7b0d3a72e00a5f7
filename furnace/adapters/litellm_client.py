"""The litellm adapter: any litellm model string behind furnace's LLM seam.

``LiteLLMClient("deepseek/deepseek-chat")`` (key from ``DEEPSEEK_API_KEY``),
``LiteLLMClient("openai/gpt-4.1-mini")`` (``OPENAI_API_KEY``), or any
OpenAI-compatible server with ``api_base=...``.

- litellm is imported lazily, on the first call (the import costs seconds).
- Retries are ours, so the count is exact: at most ``max_retries`` more attempts
  after the first, only for transient failures (timeout, rate limit, 5xx,
  connection trouble, output that does not parse or match the request's JSON
  schema), with a short exponential backoff. litellm's and the OpenAI SDK's own
  retries are switched off.
- litellm exceptions become :mod:`furnace.domain.errors` types. Their messages are
  scrubbed of the key (and of any ``*_API_KEY`` value in the environment, of
  ``Bearer`` tokens and ``sk-...`` strings) and raised *outside* the ``except``
  block, so the original exception (which may hold request headers) is neither
  chained nor kept as context.
- Usage, cost (``litellm.completion_cost``; 0.0 when the price is unknown) and
  latency are recorded on the :class:`~furnace.llm.seam.Completion`; when retries
  happened, tokens and cost add up over every attempt actually paid for.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from typing import Any

from pydantic import SecretStr

from furnace.domain.errors import LLMError, LLMMalformedOutput, LLMRateLimit, LLMTimeout
from furnace.llm.seam import Completion, LLMRequest, Usage

_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\",}]+")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}")
_VENDOR_PREFIX = re.compile(r"^(litellm\.\w+:\s*)?(\w+Error:\s*)?(\w+Exception\s*-\s*)?")
_MAX_MESSAGE = 300
_MIN_SECRET = 6


class LiteLLMClient:
    """A real model through litellm, implementing :class:`furnace.llm.seam.LLM`."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: SecretStr | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.25,
        max_backoff_s: float = 4.0,
    ) -> None:
        if not model:
            raise LLMError("LiteLLMClient needs a litellm model string, e.g. deepseek/deepseek-chat")
        self.model_name = model
        self.api_base = api_base
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.max_retries = max(0, int(max_retries))
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.attempts = 0  # every HTTP attempt made (observable for tests and accounting)
        self._attempts_lock = threading.Lock()

    def __repr__(self) -> str:  # never show the key
        return f"LiteLLMClient(model={self.model_name!r}, api_base={self.api_base!r})"

    # --- the seam ----------------------------------------------------------

    def complete(self, request: LLMRequest) -> Completion:
        """One completion, retried on transient failures; raises an :class:`LLMError`."""
        started = time.perf_counter()
        prompt_tokens = completion_tokens = 0
        cost = 0.0
        last: LLMError | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self._backoff(attempt, last))
            with self._attempts_lock:
                self.attempts += 1
            try:
                text, parsed, usage, attempt_cost = self._attempt(request)
            except LLMError as err:
                last = err
                spent: tuple[Usage, float] | None = getattr(err, "spent", None)
                if spent is not None:
                    prompt_tokens += spent[0].prompt_tokens
                    completion_tokens += spent[0].completion_tokens
                    cost += spent[1]
                if not err.transient:
                    raise
                continue
            return Completion(
                text=text,
                parsed=parsed,
                usage=Usage(
                    prompt_tokens=prompt_tokens + usage.prompt_tokens,
                    completion_tokens=completion_tokens + usage.completion_tokens,
                ),
                cost_usd=cost + attempt_cost,
                model=self.model_name,
                latency_s=time.perf_counter() - started,
            )
        assert last is not None
        if self.max_retries == 0:
            raise last
        final = type(last)(f"{last} (after {self.max_retries + 1} attempts)")
        final.transient = last.transient
        raise final

    # --- one attempt ---------------------------------------------------------

    def _attempt(self, request: LLMRequest) -> tuple[str, Any, Usage, float]:
        litellm = _litellm()
        translated: LLMError | None = None
        response: Any = None
        try:
            # no local holds the kwargs: a traceback printed with locals cannot show the key
            response = litellm.completion(**self._kwargs(request))
        except Exception as err:  # noqa: BLE001 - every litellm failure is translated
            translated = self._translate(err)
        if translated is not None:
            raise translated  # outside the except block: no chained vendor exception
        text = _text_of(response)
        usage = _usage_of(response)
        cost = _cost_of(litellm, response)
        parsed: Any = None
        if request.json_schema is not None:
            problem = _validate(text, request.json_schema)
            if isinstance(problem, str):
                malformed = LLMMalformedOutput(self._scrub(f"{self.model_name}: {problem}"))
                # these tokens were paid for even though the output is unusable
                malformed.spent = usage, cost
                raise malformed
            parsed = problem[0]
        return text, parsed, usage, cost

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        messages = [m.model_dump() for m in request.messages]
        kwargs: dict[str, Any] = {
            "model": self.model_name,
            "messages": messages,
            "temperature": request.temperature,
            "timeout": self.timeout_s,
            "num_retries": 0,  # our loop retries; the count stays exact
            "max_retries": 0,  # and the OpenAI SDK must not retry underneath
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key is not None:
            kwargs["api_key"] = self._api_key.get_secret_value()
        if request.json_schema is not None:
            if self.api_base or _supports_schema(self.model_name):
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": f"furnace_{request.task.value}",
                        "schema": request.json_schema,
                        "strict": False,
                    },
                }
            else:
                # JSON mode plus the schema in words for providers without json_schema.
                kwargs["response_format"] = {"type": "json_object"}
                schema = json.dumps(request.json_schema, ensure_ascii=False, sort_keys=True)
                messages.append(
                    {"role": "system", "content": f"Reply with one JSON object matching this JSON Schema: {schema}"}
                )
        return kwargs

    # --- errors --------------------------------------------------------------

    def _secrets(self) -> list[str]:
        found = []
        if self._api_key is not None:
            found.append(self._api_key.get_secret_value())
        # the provider's usual variables may hold the key litellm used
        found += [v for k, v in os.environ.items() if k.endswith(("_API_KEY", "_TOKEN", "_SECRET")) and v]
        return sorted({s for s in found if len(s) >= _MIN_SECRET}, key=len, reverse=True)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets():
            text = text.replace(secret, "***")
        text = _BEARER.sub(r"\1***", text)
        return _SK.sub("sk-***", text)

    def _translate(self, err: BaseException) -> LLMError:
        """Our error type for a litellm (or transport) failure, scrubbed of secrets."""
        litellm = _litellm()
        name = type(err).__name__
        status = getattr(err, "status_code", None)
        detail = _one_line(self._scrub(_VENDOR_PREFIX.sub("", str(err).strip())))
        where = f"{self.model_name}"
        if isinstance(err, litellm.Timeout) or name in ("Timeout", "APITimeoutError", "ReadTimeout"):
            return LLMTimeout(f"{where}: timed out after {self.timeout_s:g} s")
        if isinstance(err, litellm.RateLimitError) or status == 429:
            return LLMRateLimit(f"{where}: rate limited (429): {detail}")
        transient = isinstance(
            err,
            (
                litellm.InternalServerError,
                litellm.ServiceUnavailableError,
                litellm.BadGatewayError,
                litellm.APIConnectionError,
            ),
        ) or (isinstance(status, int) and status >= 500)
        label = f"HTTP {status}" if isinstance(status, int) else name
        message = f"{where}: {label}: {detail}"
        return _transient_error(message) if transient else LLMError(message)

    def _backoff(self, attempt: int, last: LLMError | None) -> float:
        delay = self.backoff_s * (2 ** (attempt - 1))
        if isinstance(last, LLMRateLimit):
            delay *= 2
        return min(delay, self.max_backoff_s)


# --- helpers -------------------------------------------------------------------

_LITELLM: Any = None


def _litellm() -> Any:
    """Import litellm once, quietly (it is slow to import and chatty)."""
    global _LITELLM
    if _LITELLM is None:
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        _LITELLM = litellm
    return _LITELLM


def _supports_schema(model: str) -> bool:
    try:
        return bool(_litellm().supports_response_schema(model=model))
    except Exception:  # noqa: BLE001 - unknown model: fall back to JSON mode
        return False


def _transient_error(message: str) -> LLMError:
    err = LLMError(message)
    err.transient = True
    return err


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_MESSAGE else line[: _MAX_MESSAGE - 1] + "…"


def _text_of(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        raise _transient_error("model response had no choices") from None
    return content or ""


def _usage_of(response: Any) -> Usage:
    usage = getattr(response, "usage", None)
    return Usage(
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
    )


def _cost_of(litellm: Any, response: Any) -> float:
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # noqa: BLE001 - unknown price: cost unknown, not an error
        return 0.0


def _strip_fence(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return stripped.strip()


def _validate(text: str, schema: dict[str, Any]) -> tuple[Any] | str:
    """``(parsed,)`` when ``text`` is JSON matching ``schema``, else the problem."""
    import jsonschema

    try:
        parsed = json.loads(_strip_fence(text))
    except json.JSONDecodeError as err:
        return f"output is not JSON ({err.msg} at position {err.pos})"
    try:
        jsonschema.validate(parsed, schema)
    except jsonschema.ValidationError as err:
        path = ".".join(str(p) for p in err.absolute_path) or "output"
        return f"output does not match the schema at {path}: {_one_line(err.message)[:120]}"
    except jsonschema.SchemaError as err:
        raise LLMError(f"the request's JSON schema is invalid: {_one_line(err.message)[:120]}") from None
    return (parsed,)
