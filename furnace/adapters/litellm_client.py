"""The litellm adapter: any litellm model string behind furnace's LLM seam.

``LiteLLMClient("deepseek/deepseek-chat")`` (key from ``DEEPSEEK_API_KEY``),
``LiteLLMClient("openai/gpt-4.1-mini")`` (``OPENAI_API_KEY``), or any
OpenAI-compatible server with ``api_base=...`` (llama.cpp, vLLM, Ollama).

- litellm is imported lazily, on the first call (the import costs seconds).
- **The one retry policy** (tenacity) lives here and nowhere above: at most
  ``max_retries`` more attempts after the first, so a logical call makes at most
  ``max_retries + 1`` requests. Transient: timeouts, connection errors, HTTP
  408/409/429/5xx; they wait an exponential backoff with full jitter, or the
  server's ``Retry-After`` (seconds or HTTP-date, capped at ``max_retry_after_s``)
  when longer. 400/401/403/404 and context-length errors fail at once; a missing
  or rejected key names the environment variable to set. litellm's and the
  OpenAI SDK's own retries are switched off.
- **Structured output** (:mod:`furnace.llm.structured`): when the request has a
  JSON schema, the JSON is extracted from the reply (prose, fences, think blocks)
  and validated; an invalid reply is re-asked (bounded by ``reasks``, default 1)
  with the reply and the validation error added to the conversation — never an
  identical retry. A re-ask uses one of the attempts above. ``response_format``
  carries the schema when litellm says the provider supports it (or for an
  OpenAI-compatible ``api_base``), plain JSON mode otherwise.
- litellm exceptions become :mod:`furnace.domain.errors` types. Their messages are
  scrubbed of the key (and of any ``*_API_KEY`` value in the environment, of
  ``Bearer`` tokens and ``sk-...`` strings) and raised *outside* the ``except``
  block, so the original exception (which may hold request headers) is neither
  chained nor kept as context.
- Accounting: usage, cost (``litellm.completion_cost``; 0.0 when the price is
  unknown) and latency add up over **every attempt actually paid for**, failed
  ones included; ``Completion.attempts`` says how many requests were made. A
  failure carries the same figures on the error (``err.spent``, ``err.attempts``).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from pydantic import SecretStr
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from furnace.domain.errors import LLMError, LLMRateLimit, LLMTimeout
from furnace.llm import structured
from furnace.llm.seam import Completion, LLMRequest, Usage

_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\",}]+")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}")
_VENDOR_PREFIX = re.compile(r"^(litellm\.\w+:\s*)?(\w+Error:\s*)?(\w+Exception\s*-\s*)?")
_MAX_MESSAGE = 300
_MIN_SECRET = 6
_TRANSIENT_STATUS = {408, 409, 429}
_LOCAL_KEY = "furnace-local"  # sent to a keyless OpenAI-compatible server (the OpenAI SDK insists on one)


class _Spent:
    """What the attempts of one logical call cost (failed attempts included)."""

    def __init__(self) -> None:
        self.prompt_tokens = self.completion_tokens = self.attempts = 0
        self.cost = 0.0

    def add(self, usage: Usage, cost: float) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cost += cost

    @property
    def usage(self) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens)


class LiteLLMClient:
    """A real model through litellm, implementing :class:`furnace.llm.seam.LLM`."""

    reads_inputs = False  # only the messages reach the model: ``inputs`` stay out of cache keys

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: SecretStr | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_retry_after_s: float = 30.0,
        reasks: int = 1,
        sleep: Callable[[float], None] = time.sleep,
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
        self.max_retry_after_s = max_retry_after_s
        self.reasks = max(0, int(reasks))
        self._sleep = sleep
        self._jitter = wait_random_exponential(multiplier=backoff_s, max=max_backoff_s)
        self.waits: list[float] = []  # every backoff slept, in order (observable for tests)

    def __repr__(self) -> str:  # never show the key
        return f"LiteLLMClient(model={self.model_name!r}, api_base={self.api_base!r})"

    # --- the seam ----------------------------------------------------------

    def complete(self, request: LLMRequest) -> Completion:
        """One logical call: at most ``max_retries + 1`` requests; raises an :class:`LLMError`."""
        started = time.perf_counter()
        spent = _Spent()
        state = {"request": request, "reasks": self.reasks}
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(lambda err: isinstance(err, LLMError) and err.transient),
            sleep=self._slept,
            reraise=True,
        )
        failure: LLMError | None = None
        try:
            for attempt in retrying:
                with attempt:
                    text, parsed = self._attempt(state, spent)
        except LLMError as err:
            failure = err
        if failure is not None:
            raise self._final(failure, spent)
        return Completion(
            text=text,
            parsed=parsed,
            usage=spent.usage,
            cost_usd=spent.cost,
            model=self.model_name,
            latency_s=time.perf_counter() - started,
            attempts=spent.attempts,
        )

    def _final(self, err: LLMError, spent: _Spent) -> LLMError:
        """The error a caller sees: one line, with what the attempts cost attached."""
        final = err
        if spent.attempts > 1 and err.transient:
            final = type(err)(f"{err} (after {spent.attempts} attempts)")
            final.transient = err.transient
            final.excerpt = err.excerpt
        final.spent = spent.usage, spent.cost
        final.attempts = spent.attempts
        return final

    def _wait(self, retry_state: RetryCallState) -> float:
        """Backoff with full jitter, or the server's Retry-After when longer (capped)."""
        delay = float(self._jitter(retry_state))
        outcome = retry_state.outcome
        err = outcome.exception() if outcome is not None else None
        asked = getattr(err, "retry_after", None)
        if isinstance(asked, (int, float)) and asked > 0:
            delay = max(delay, min(float(asked), self.max_retry_after_s))
        return delay

    def _slept(self, seconds: float) -> None:
        self.waits.append(seconds)
        self._sleep(seconds)

    # --- one attempt ---------------------------------------------------------

    def _attempt(self, state: dict[str, Any], spent: _Spent) -> tuple[str, Any]:
        request: LLMRequest = state["request"]
        litellm = _litellm()
        spent.attempts += 1
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
        spent.add(_usage_of(response), _cost_of(litellm, response))  # paid for, usable or not
        if request.json_schema is None:
            return text, None
        parsed, problem = structured.read_reply(text, request.json_schema)
        if problem is None:
            return text, parsed
        if _finish_reason(response) == "length":
            problem = f"the reply was cut off at the token limit (finish_reason=length): {problem}"
        bad = structured.malformed(request.task.value, self.model_name, self._scrub(problem), self._scrub(text))
        bad.transient = state["reasks"] > 0  # re-asked below; never an identical retry
        if bad.transient:
            state["reasks"] -= 1
            state["request"] = structured.reask(request, text, problem)
        raise bad

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
        elif self.api_base and self._missing_key():
            kwargs["api_key"] = _LOCAL_KEY  # a local server needs no key; the SDK wants one anyway
        elif self._missing_key():
            raise self._no_key()
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

    def key_variable(self) -> str:
        """The environment variable litellm reads this model's key from (e.g. ``DEEPSEEK_API_KEY``)."""
        try:
            provider = str(_litellm().get_llm_provider(self.model_name)[1])
        except Exception:  # noqa: BLE001 - unknown provider: name the generic one
            provider = self.model_name.split("/", 1)[0] if "/" in self.model_name else "openai"
        return f"{provider.upper()}_API_KEY"

    def _missing_key(self) -> bool:
        try:
            found = _litellm().validate_environment(model=self.model_name)
        except Exception:  # noqa: BLE001 - litellm cannot tell: let the provider answer
            return False
        return bool(found.get("missing_keys")) and not found.get("keys_in_environment")

    def _no_key(self) -> LLMError:
        return LLMError(f"{self.model_name}: no API key: set {self.key_variable()} (or FURNACE_API_KEY)")

    def _translate(self, err: BaseException) -> LLMError:
        """Our error type for a litellm (or transport) failure, scrubbed of secrets."""
        litellm = _litellm()
        name = type(err).__name__
        status = getattr(err, "status_code", None)
        status = status if isinstance(status, int) else None
        detail = _one_line(self._scrub(_VENDOR_PREFIX.sub("", str(err).strip())))
        where = self.model_name
        if "missing credentials" in detail.lower() or "api_key client option must be set" in detail.lower():
            return self._no_key()
        if isinstance(err, (litellm.AuthenticationError, litellm.PermissionDeniedError)) or status in (401, 403):
            return LLMError(
                f"{where}: the provider rejected the API key (HTTP {status or 401}): "
                f"check {self.key_variable()} (or FURNACE_API_KEY)"
            )
        if isinstance(err, litellm.ContextWindowExceededError):
            return LLMError(f"{where}: the prompt is longer than the model's context window: {detail}")
        if (isinstance(err, litellm.Timeout) or name in ("Timeout", "APITimeoutError", "ReadTimeout")) and status in (
            None,
            408,
        ):
            if status == 408:
                return LLMTimeout(f"{where}: the server timed out the request (HTTP 408)")
            return LLMTimeout(f"{where}: timed out after {self.timeout_s:g} s")
        if isinstance(err, litellm.RateLimitError) or status == 429:
            limited = LLMRateLimit(f"{where}: rate limited (429): {detail}")
            limited.retry_after = _retry_after(err)
            return limited
        transient = (
            isinstance(err, (litellm.APIConnectionError, litellm.InternalServerError, litellm.ServiceUnavailableError))
            or (status is not None and (status >= 500 or status in _TRANSIENT_STATUS))
            or isinstance(err, (ConnectionError, TimeoutError))
        )
        label = f"HTTP {status}" if status is not None else name
        out = LLMError(f"{where}: {label}: {detail}")
        out.transient = transient
        if transient:
            out.retry_after = _retry_after(err)
        return out


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


def _finish_reason(response: Any) -> str | None:
    try:
        return response.choices[0].finish_reason
    except (AttributeError, IndexError, TypeError):
        return None


def _retry_after(err: BaseException) -> float | None:
    """Seconds the server asked us to wait (``Retry-After``: seconds or an HTTP-date), if any."""
    headers = getattr(err, "litellm_response_headers", None) or getattr(getattr(err, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        raw = headers.get("retry-after") or headers.get("Retry-After")
    except Exception:  # noqa: BLE001 - odd header containers: no hint
        return None
    return parse_retry_after(raw)


def parse_retry_after(raw: Any, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds (``"5"``, ``"1.5"`` or an HTTP-date); None when absent or unreadable."""
    if raw is None:
        return None
    text = str(raw).strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
