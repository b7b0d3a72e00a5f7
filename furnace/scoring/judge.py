"""Judge scorers: persona fidelity, preference adherence, tone match (JUDGE task).

Prompt builder + parser + a thin composer, so the prompt is snapshot-testable.
A failed call or malformed verdict becomes a failure score, never an exception.

When the probe has a target (its brief and held-out rubric, see
:func:`furnace.scoring.probes.ProbeSet.target_for`) the judge scores the answer
against that target, not against the persona's own words; the verdict carries
short structured ``feedback`` (:mod:`furnace.scoring.feedback`).
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
from furnace.scoring.feedback import join_clauses

Rubric = Literal["fidelity", "preference", "tone"]
RUBRICS: tuple[str, ...] = ("fidelity", "preference", "tone")
JUDGE_VERSION = "judge-v2"


class JudgeVerdict(BaseModel):
    """A judge's reply: the score, the evidence behind it, and short structured feedback
    (``missing: ...; tone: too formal``, see :mod:`furnace.scoring.feedback`; empty when nothing is wrong)."""

    model_config = ConfigDict(extra="forbid")

    score: float = Field(ge=0, le=1)
    reason: str
    feedback: str = ""


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


_TARGET_TEXT = {
    "fidelity": (
        "Target fit: does the answer deliver what the target below describes — its expertise and the "
        "descriptors it expects — while leaving out what it says to avoid and keeping its constraints?"
    ),
    "preference": _RUBRIC_TEXT["preference"],
    "tone": (
        "Tone match: do the register (formal/casual), length, humour and warmth of the answer match the "
        "target's tone (0 = low, 1 = high)?"
    ),
}
_FEEDBACK_TEXT = (
    "feedback: what was missing or wrong, as short clauses joined by '; ' — 'missing: <items>', "
    "'avoid: <item>', 'tone: too formal|too casual|needs warmth|less warmth|needs humour|less humour', "
    "'length: too long|too short', 'format: needs markdown|no markdown' — or '' when nothing is"
)


def _target_text(target: dict[str, Any]) -> str:
    lines = []
    for key, label in (("expertise", "expertise"), ("expect", "a good answer contains"), ("avoid", "it avoids")):
        if target.get(key):
            lines.append(f"- {label}: {', '.join(map(str, target[key]))}")
    if target.get("tone"):
        lines.append("- tone: " + ", ".join(f"{k} {v:g}" for k, v in sorted(target["tone"].items())))
    constraints = {k: v for k, v in (target.get("constraints") or {}).items() if v is not None}
    if constraints:
        lines.append("- constraints: " + ", ".join(f"{k} {v}" for k, v in sorted(constraints.items())))
    return "\n".join(lines) or "- (nothing specified)"


def build_judge_request(
    elixir: Elixir,
    message: str,
    answer: str,
    rubric: Rubric,
    *,
    seed: int = 0,
    target: dict[str, Any] | None = None,
) -> LLMRequest:
    """The JUDGE request for one (persona, message, answer, rubric), against ``target`` when given."""
    criterion = (_TARGET_TEXT if target else _RUBRIC_TEXT)[rubric]
    system = (
        "You are a strict evaluator of persona-driven answers. "
        f"{criterion} Score from 0 (not at all) to 1 (fully), citing concrete evidence from the answer. "
        'Reply with JSON only: {"score": <0..1>, "reason": "<one sentence>", "feedback": "<clauses>"}; '
        f"{_FEEDBACK_TEXT}."
    )
    user = f"## Persona\n{render_prompt(elixir)}\n\n## User message\n{message}\n\n## Answer to evaluate\n{answer}"
    if target:
        user = f"## Target (what the user wants)\n{_target_text(target)}\n\n{user}"
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
            "target": target,
        },
    )


def parse_verdict(parsed: Any, text: str, *, model: str = "judge") -> Score:
    """A :class:`Score` from a judge's structured output (failure score if malformed)."""
    try:
        verdict = parse_reply(Completion(text=text or "", parsed=parsed, model=model), JudgeVerdict, task="judge")
    except LLMError as err:
        return Score.failure(str(err))
    feedback = join_clauses(c.strip() for c in verdict.feedback.split(";") if c.strip())
    return Score(verdict.score, verdict.reason[:500] or "no reason given", feedback=feedback)


def judge_answer(
    llm: LLM,
    elixir: Elixir,
    message: str,
    answer: str | None,
    rubric: Rubric,
    *,
    seed: int = 0,
    error: str | None = None,
    target: dict[str, Any] | None = None,
) -> Score:
    """Ask the judge for one rubric; failures (no answer, LLM error, bad output) score 0 with a reason."""
    if answer is None:
        return Score.failure(f"no answer: {error or 'unknown error'}")
    try:
        completion = llm.complete(build_judge_request(elixir, message, answer, rubric, seed=seed, target=target))
    except LLMError as err:
        return Score.failure(f"judge call failed: {err}")
    return parse_verdict(completion.parsed, completion.text, model=completion.model)
