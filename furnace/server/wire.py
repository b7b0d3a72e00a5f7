"""The OpenAI chat-completions wire format: reading (and validating) a request body, writing completions,
stream chunks and error bodies. Plain dicts in and out (no HTTP here), so the shapes are tested on their own.

Every refused body is a 400 in OpenAI's words: ``param`` the field's JSON path, ``code``
``missing_required_parameter``, ``invalid_type`` or ``invalid_value`` (``invalid_json`` for the body)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from furnace.fusion.answers import AgentAnswer
from furnace.llm.seam import Message

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_PIECE = re.compile(r"\s*\S+\s*")  # a word with the spaces around it: stream pieces join back to the text


class ApiError(Exception):
    """An OpenAI-style error: HTTP ``status`` and the ``{"error": {message, type, param, code}}`` body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        """The error body OpenAI clients read."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def model_not_found(model: str) -> ApiError:
    """404 for a model id that names no agent, elixir or registry alias."""
    return ApiError(
        404,
        f"The model `{model}` does not exist (see GET /v1/models)",
        param="model",
        code="model_not_found",
    )


def missing_parameter(param: str) -> ApiError:
    """400 for a required field that is absent (or null)."""
    return ApiError(400, f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


def invalid_type(param: str, expected: str, value: Any) -> ApiError:
    """400 for a field of the wrong JSON type, in OpenAI's words."""
    return ApiError(
        400,
        f"Invalid type for '{param}': expected {expected}, but got {json_kind(value)} instead.",
        param=param,
        code="invalid_type",
    )


def invalid_value(param: str, message: str) -> ApiError:
    """400 for a field of the right type whose value furnace does not take."""
    return ApiError(400, message, param=param, code="invalid_value")


def json_kind(value: Any) -> str:
    """The JSON type of ``value`` with its article ("an integer", "a string", ...), for an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


@dataclass(frozen=True)
class ChatRequest:
    """What furnace reads of a chat-completions body; every other field is accepted and ignored."""

    model: str
    message: str  # the last message, the user's
    history: tuple[Message, ...]  # the turns before it (system messages included; the persona drops them)
    stream: bool = False
    include_usage: bool = False
    seed: int = 0


def _quoted(value: str, limit: int = 40) -> str:
    """A client's string value quoted for a message (cut at ``limit`` characters)."""
    return f"'{value[:limit]}…'" if len(value) > limit else f"'{value}'"


def _field(body: dict[str, Any], key: str, where: str, kind: str, accepts: Callable[[Any], bool]) -> Any:
    """``body[key]`` when ``accepts`` it; None when absent or null; else an invalid-type error naming ``kind``."""
    value = body.get(key)
    if value is not None and not accepts(value):
        raise invalid_type(where, kind, value)
    return value


def _string(body: dict[str, Any], key: str, where: str, *, required: bool = False) -> str | None:
    """``body[key]`` as a string; None when absent or null (a missing-parameter error when ``required``)."""
    value = _field(body, key, where, "a string", lambda v: isinstance(v, str))
    if value is None and required:
        raise missing_parameter(where)
    return value


def _boolean(body: dict[str, Any], key: str, where: str) -> bool:
    """``body[key]`` as a boolean; False when absent or null."""
    return bool(_field(body, key, where, "a boolean", lambda v: isinstance(v, bool)))


def _integer(body: dict[str, Any], key: str, where: str, default: int) -> int:
    """``body[key]`` as an integer (a boolean is not one); ``default`` when absent or null."""
    value = _field(body, key, where, "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
    return default if value is None else value


def _object(body: dict[str, Any], key: str, where: str) -> dict[str, Any] | None:
    """``body[key]`` as a JSON object; None when absent or null."""
    return _field(body, key, where, "an object", lambda v: isinstance(v, dict))


def _text(content: Any, where: str) -> str:
    """A message's text: a string, or the text parts of an array of content parts (other parts, such
    as images, are skipped); null is empty."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid_type(f"{where}.content", "a string or an array of content parts", content)
    texts: list[str] = []
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        if not isinstance(part, dict):
            raise invalid_type(at, "an object", part)
        kind = _string(part, "type", f"{at}.type", required=True)
        if kind == "text":
            texts.append(_string(part, "text", f"{at}.text", required=True) or "")
    return "\n".join(texts)


def _message(item: Any, where: str) -> Message:
    """One entry of ``messages`` as a :class:`Message` (``developer`` read as ``system``)."""
    if not isinstance(item, dict):
        raise invalid_type(where, "an object", item)
    role = _string(item, "role", f"{where}.role", required=True) or ""
    if role not in ROLES:
        raise invalid_value(
            f"{where}.role",
            f"Invalid value for '{where}.role': {_quoted(role)} is not supported. "
            "Supported values are: 'system', 'developer', 'user' and 'assistant'.",
        )
    return Message(role=ROLES[role], content=_text(item.get("content"), where))  # type: ignore[arg-type]


def parse_chat_request(raw: bytes) -> ChatRequest:
    """The request body as a :class:`ChatRequest`; an :class:`ApiError` (400) names what is wrong: its
    ``param`` is the field's JSON path (``messages[0].role``) and its ``code`` one of
    ``missing_required_parameter`` (absent or null), ``invalid_type`` (the wrong JSON type) and
    ``invalid_value`` (the right type, a value furnace does not take). Fields are checked in order
    (``model``, ``messages``, ``n``, ``seed``, ``stream``, ``stream_options``): the first wrong one is named."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise ApiError(400, f"We could not parse the JSON body of your request ({err})", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object", code="invalid_json")
    model = (_string(body, "model", "model", required=True) or "").strip()
    if not model:
        raise invalid_value("model", "Invalid value for 'model': it must name a model (see GET /v1/models).")
    messages = body.get("messages")
    if messages is None:
        raise missing_parameter("messages")
    if not isinstance(messages, list):
        raise invalid_type("messages", "an array", messages)
    if not messages:
        raise invalid_value("messages", "Invalid value for 'messages': expected at least one message, got none.")
    turns = [_message(item, f"messages[{i}]") for i, item in enumerate(messages)]
    last, where = turns[-1], f"messages[{len(turns) - 1}]"
    if last.role != "user":
        raise invalid_value(f"{where}.role", f"The last message must be the user's ('{where}.role' is {last.role}).")
    if not last.content.strip():
        raise invalid_value(f"{where}.content", "The last message (the user's) must not be empty.")
    n = _integer(body, "n", "n", 1)
    if n != 1:
        raise invalid_value("n", f"Invalid value for 'n': only 1 is supported, got {n}.")
    seed = _integer(body, "seed", "seed", 0)
    stream = _boolean(body, "stream", "stream")
    options = _object(body, "stream_options", "stream_options")
    include_usage = _boolean(options or {}, "include_usage", "stream_options.include_usage")
    if options is not None and not stream:
        raise invalid_value(
            "stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled."
        )
    return ChatRequest(
        model=model,
        message=last.content,
        history=tuple(turns[:-1]),
        stream=stream,
        include_usage=include_usage,
        seed=seed,
    )


def completion_id() -> str:
    """A new response id (also the ledger's ``run_id`` of the calls behind it)."""
    return f"chatcmpl-{uuid.uuid4().hex}"


def _usage(answer: AgentAnswer) -> dict[str, int]:
    u = answer.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens}


def _furnace(answer: AgentAnswer) -> dict[str, Any]:
    """furnace's own fields on a response: who answered, who led, the model and the calls behind it (not
    the text: that is the message's ``content``, or the stream's pieces)."""
    led = {k: v for k, v in answer.transcript().items() if k != "text"}
    return {
        "speaker": answer.speaker,
        "model": answer.model,
        "calls": answer.calls,
        "cached_calls": answer.cached_calls,
    } | led


def completion(cid: str, model: str, answer: AgentAnswer, *, created: int | None = None) -> dict[str, Any]:
    """A ``chat.completion`` object."""
    return {
        "id": cid,
        "object": "chat.completion",
        "created": created or int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer.text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage(answer),
        "furnace": _furnace(answer),
    }


def pieces(text: str) -> list[str]:
    """The text cut into stream pieces (a word each) that join back to exactly ``text``."""
    found = _PIECE.findall(text)
    return found if "".join(found) == text else [text]


def stream_events(cid: str, model: str, answer: AgentAnswer, *, include_usage: bool = False) -> Iterator[str]:
    """Server-sent events: ``data: {chunk}`` lines of ``chat.completion.chunk`` objects (the role, the
    text a word at a time, the finish reason, the usage when asked for), then ``data: [DONE]``."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        } | extra
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for piece in pieces(answer.text):
        yield chunk({"content": piece})
    yield chunk({}, "stop", furnace=_furnace(answer))
    if include_usage:
        body = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(answer),
        }
        yield f"data: {json.dumps(body)}\n\n"
    yield "data: [DONE]\n\n"
