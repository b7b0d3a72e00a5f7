"""Judge scorers: persona fidelity, preference adherence, tone match (JUDGE task).

Prompt builder + parser + a thin composer, so the prompt is snapshot-testable.
A failed call or malformed verdict becomes a failure score, never an exception.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from furnace.domain.elixir import Elixir
from furnace.domain.errors import LLMError
from furnace.domain.render import render_prompt
from furnace.llm.seam import LLM, Completion, LLMRequest, TaskKind, system_user
from furnace.llm.structured import parse_reply, schema_of
from furnace.scoring.base import Score, persona_inputs

Rubric = Literal["fidelity", "preference", "tone"]
RUBRICS: tuple[str, ...] = ("fidelity", "preference", "tone")
JUDGE_VERSION = "judge-v1"


class JudgeVerdict(BaseModel):
    """A judge's reply."""

    model_config = ConfigDict(extra="forbid")

    score: float = Field(ge=0, le=1)
    reason: str


JUDGE_SCHEMA: dict[str, Any] = schema_of(JudgeVerdict)

_RUBRIC_TEXT = {
    "fidelity": (
        "Persona fidelity: does the answer speak as this persona — drawing on its expertise, "
        "following its principles and respecting its hard constraints?"
    ),
    "preference": (
        "Preference adherence: does the answer follow the persona's learned style preferences "
        "(listed under learned preferences)? If it has none, score 1."
    ),
    "tone": (
        "Tone match: does the register (formal/casual), length, humour and warmth of the answer "
        "match the persona's tone settings?"
    ),
}


def build_judge_request(elixir: Elixir, message: str, answer: str, rubric: Rubric, *, seed: int = 0) -> LLMRequest:
    """The JUDGE request for one (persona, message, answer, rubric)."""
    system = (
        "You are a strict evaluator of persona-driven answers. "
        f"{_RUBRIC_TEXT[rubric]} Score from 0 (not at all) to 1 (fully), citing concrete evidence "
        'from the answer. Reply with JSON only: {"score": <0..1>, "reason": "<one sentence>"}.'
    )
    user = f"## Persona\n{render_prompt(elixir)}\n\n## User message\n{message}\n\n## Answer to evaluate\n{answer}"
    return system_user(
        TaskKind.JUDGE,
        system,
        user,
        temperature=0.0,
        seed=seed,
        max_tokens=300,
        json_schema=JUDGE_SCHEMA,
        inputs={
            "persona": persona_inputs(elixir),
            "message": message,
            "answer": answer,
            "rubric": rubric,
        },
    )


def parse_verdict(parsed: Any, text: str, *, model: str = "judge") -> Score:
    """A :class:`Score` from a judge's structured output (failure score if malformed)."""
    try:
        verdict = parse_reply(Completion(text=text or "", parsed=parsed, model=model), JudgeVerdict, task="judge")
    except LLMError as err:
        return Score.failure(str(err))
    return Score(verdict.score, verdict.reason[:500] or "no reason given")


def judge_answer(
    llm: LLM,
    elixir: Elixir,
    message: str,
    answer: str | None,
    rubric: Rubric,
    *,
    seed: int = 0,
    error: str | None = None,
) -> Score:
    """Ask the judge for one rubric; failures (no answer, LLM error, bad output) score 0 with a reason."""
    if answer is None:
        return Score.failure(f"no answer: {error or 'unknown error'}")
    try:
        completion = llm.complete(build_judge_request(elixir, message, answer, rubric, seed=seed))
    except LLMError as err:
        return Score.failure(f"judge call failed: {err}")
    return parse_verdict(completion.parsed, completion.text, model=completion.model)
