"""The OpenAI chat-completions wire format: reading a request body, writing completions, stream chunks
and error bodies. Plain dicts in and out (no HTTP here), so the shapes are tested on their own."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
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


@dataclass(frozen=True)
class ChatRequest:
    """What furnace reads of a chat-completions body; every other field is accepted and ignored."""

    model: str
    message: str  # the last message, the user's
    history: tuple[Message, ...]  # the turns before it (system messages included; the persona drops them)
    stream: bool = False
    include_usage: bool = False
    seed: int = 0


def _text(content: Any, where: str) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(str(p) for p in parts)
    raise ApiError(400, f"{where}.content must be a string or a list of content parts", param=f"{where}.content")


def parse_chat_request(raw: bytes) -> ChatRequest:
    """The request body as a :class:`ChatRequest`; an :class:`ApiError` (400) names what is wrong."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise ApiError(400, f"We could not parse the JSON body of your request ({err})", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object", code="invalid_json")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ApiError(400, "Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
    messages = body.get("messages")
    if messages is None:
        raise ApiError(
            400, "Missing required parameter: 'messages'.", param="messages", code="missing_required_parameter"
        )
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty array of messages", param="messages", code="invalid_value")
    turns: list[Message] = []
    for i, item in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(item, dict):
            raise ApiError(400, f"{where} must be an object with a role and content", param=where, code="invalid_type")
        role = ROLES.get(str(item.get("role")))
        if role is None:
            raise ApiError(
                400,
                f"{where}.role {item.get('role')!r} is not supported (system, developer, user, assistant)",
                param=f"{where}.role",
                code="invalid_value",
            )
        turns.append(Message(role=role, content=_text(item.get("content"), where)))  # type: ignore[arg-type]
    last = turns[-1]
    if last.role != "user" or not last.content.strip():
        raise ApiError(400, "The last message must be a non-empty user message", param="messages", code="invalid_value")
    n = body.get("n", 1)
    if n not in (1, None):
        raise ApiError(400, "Only n=1 is supported", param="n", code="invalid_value")
    seed = body.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ApiError(400, "'seed' must be an integer", param="seed", code="invalid_type")
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise ApiError(400, "'stream' must be a boolean", param="stream", code="invalid_type")
    options = body.get("stream_options") or {}
    include_usage = bool(options.get("include_usage")) if isinstance(options, dict) else False
    return ChatRequest(
        model=model.strip(),
        message=last.content,
        history=tuple(turns[:-1]),
        stream=stream,
        include_usage=include_usage,
        seed=seed or 0,
    )


def completion_id() -> str:
    """A new response id (also the ledger's ``run_id`` of the calls behind it)."""
    return f"chatcmpl-{uuid.uuid4().hex}"


def _usage(answer: AgentAnswer) -> dict[str, int]:
    u = answer.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens}


def _furnace(answer: AgentAnswer) -> dict[str, Any]:
    """furnace's own fields on a response: who answered, who led, the model and the calls behind it."""
    return {
        "speaker": answer.speaker,
        "model": answer.model,
        "calls": answer.calls,
        "cached_calls": answer.cached_calls,
    } | answer.transcript()


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
