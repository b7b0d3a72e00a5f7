"""One structured-output path for every task that expects JSON.

A task declares its reply as a pydantic model; :func:`schema_of` gives the JSON
schema that goes into :attr:`LLMRequest.json_schema` (``model_json_schema()``,
never a hand-written dict). Replies are read the same way everywhere:

- :func:`extract_json` finds the JSON value in what a model actually sends:
  prose before or after it, a code fence with any language tag (or none),
  ``<think>…</think>`` / ``<reasoning>…</reasoning>`` blocks;
- :func:`check_schema` validates a value against a request's schema (the client
  does this before a reply is accepted, so the response cache only ever holds
  replies that validate);
- :func:`reask` builds the follow-up conversation when a reply does not validate:
  the bad reply and the validation error are added to the messages, so a re-ask
  is never an identical retry;
- :func:`parse_reply` turns a :class:`Completion` into the task's model, or raises
  :class:`LLMMalformedOutput` naming the task, the model and what was wrong.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from furnace.domain.canonical import content_key
from furnace.domain.errors import LLMMalformedOutput
from furnace.llm.seam import Completion, LLMRequest, Message

M = TypeVar("M", bound=BaseModel)

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
_OPEN_THINK = re.compile(r"<(think|thinking|reasoning)>.*", re.S | re.I)
_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.S)
_MAX_SCAN = 256  # candidate start positions tried when the JSON sits inside prose
_EXCERPT = 160


class NoJSON(ValueError):
    """The reply holds no JSON value of the expected kind."""


def extract_json(text: str, *, want: type = dict) -> Any:
    """The JSON value (of type ``want``: dict by default) in a model reply, or :class:`NoJSON`."""
    if not isinstance(text, str):
        raise NoJSON("the reply is not text")
    cleaned = _THINK.sub("", text)
    unclosed = _OPEN_THINK.search(cleaned)
    if unclosed:  # a reasoning block that never closed: the answer is before it, else inside it
        before = cleaned[: unclosed.start()]
        cleaned = before if before.strip() else cleaned[unclosed.start() :].split(">", 1)[1]
    candidates = [cleaned.strip(), *(m.group(1).strip() for m in _FENCE.finditer(cleaned))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, want):
            return value
    decoder = json.JSONDecoder()
    opener = "{" if want is dict else "["
    start, tried = cleaned.find(opener), 0
    while start != -1 and tried < _MAX_SCAN:
        tried += 1
        try:
            value, _ = decoder.raw_decode(cleaned, start)
        except ValueError:
            value = None
        if isinstance(value, want):
            return value
        start = cleaned.find(opener, start + 1)
    kind = "object" if want is dict else "array"
    if '"' in cleaned and opener in cleaned and cleaned.count(opener) > cleaned.count("}" if want is dict else "]"):
        raise NoJSON(f"the JSON {kind} in the reply is cut off")
    raise NoJSON(f"no JSON {kind} found in the reply")


@lru_cache(maxsize=256)
def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a reply model (what goes into ``LLMRequest.json_schema``)."""
    return model.model_json_schema()


_VALIDATORS: dict[str, Any] = {}


def _validator(schema: dict[str, Any]) -> Any:
    key = content_key(schema)
    found = _VALIDATORS.get(key)
    if found is None:
        import jsonschema

        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        found = _VALIDATORS[key] = cls(schema)
    return found


def check_schema(value: Any, schema: dict[str, Any]) -> str | None:
    """None when ``value`` matches ``schema``, else the problem in one short line."""
    error = next(iter(_validator(schema).iter_errors(value)), None)
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "reply"
    return f"{where}: {_one_line(error.message)[:160]}"


def read_reply(text: str, schema: dict[str, Any] | None) -> tuple[Any, str | None]:
    """``(value, None)`` for a reply that holds JSON matching ``schema``; else ``(None, problem)``."""
    want: type = list if schema is not None and schema.get("type") == "array" else dict
    try:
        value = extract_json(text, want=want)
    except NoJSON as err:
        return None, str(err)
    problem = check_schema(value, schema) if schema is not None else None
    return (None, problem) if problem else (value, None)


def reask(request: LLMRequest, reply: str, problem: str) -> LLMRequest:
    """The follow-up request after an invalid reply: the reply and its problem join the conversation."""
    follow_up = (
        f"Your previous reply could not be used: {problem}. "
        "Answer again with only the JSON value that matches the requested schema, and nothing else."
    )
    messages = (
        *request.messages,
        Message(role="assistant", content=excerpt(reply, 2000) or "(empty reply)"),
        Message(role="user", content=follow_up),
    )
    return request.model_copy(update={"messages": messages})


def parse_reply(completion: Completion, model: type[M], *, task: str) -> M:
    """The task's reply model from a completion; :class:`LLMMalformedOutput` names task, model and problem."""
    data = completion.parsed
    if data is None:
        try:
            data = extract_json(completion.text)
        except NoJSON as err:
            raise malformed(task, completion.model, str(err), completion.text) from None
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise malformed(task, completion.model, validation_problem(err), completion.text) from None


def validation_problem(err: ValidationError) -> str:
    """A pydantic validation error in one short line (first two problems)."""
    parts = []
    for item in err.errors()[:2]:
        where = ".".join(str(p) for p in item.get("loc", ())) or "reply"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts)


def malformed(task: str, model: str, problem: str, reply: str = "") -> LLMMalformedOutput:
    """The one-line error for a reply that does not validate (the excerpt is kept on the error)."""
    err = LLMMalformedOutput(f"{task} on {model}: the reply did not validate ({problem})")
    err.excerpt = excerpt(reply)
    return err


def excerpt(text: str, size: int = _EXCERPT) -> str:
    line = _one_line(text or "")
    return line if len(line) <= size else line[: size - 1] + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())
