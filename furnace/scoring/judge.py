"""Judge scorers: persona fidelity, preference adherence, tone match (JUDGE task).

Prompt builder + parser + a thin composer, so the prompt is snapshot-testable.
A failed call or malformed verdict becomes a failure score, never an exception.

The judge receives the probe, the answer and the rubric — never the persona's
prompt. When the probe has a target (its brief and held-out rubric, see
:func:`furnace.scoring.probes.ProbeSet.target_for`) the judge scores the answer
against that target; the verdict carries short structured ``feedback``
(:mod:`furnace.scoring.feedback`) that names the answer's gaps in the judge's
own words, never the rubric's (the feedback reaches the operators; the rubric
must not).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from furnace.domain.elixir import Elixir
from furnace.domain.errors import LLMError
from furnace.llm.seam import LLM, Completion, LLMRequest, TaskKind, system_user
from furnace.llm.structured import parse_reply, schema_of
from furnace.scoring.base import Score
from furnace.scoring.feedback import join_clauses

Rubric = Literal["fidelity", "preference", "tone"]
RUBRICS: tuple[str, ...] = ("fidelity", "preference", "tone")
JUDGE_VERSION = "judge-v3"


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
        "Consistency: does the answer address the user's message, in the language and within the length "
        "the reference below states?"
    ),
    "preference": (
        "Preference adherence: does the answer follow the learned style preferences listed in the reference "
        "below? If there are none, score 1."
    ),
    "tone": (
        "Tone match: do the register (formal/casual) and length of the answer match the reference's tone "
        "(0 = low, 1 = high)?"
    ),
}


_TARGET_TEXT = {
    "fidelity": (
        "Target fit: does the answer deliver what the target below describes — its expertise and the "
        "points it expects — while leaving out what it says to avoid and keeping its constraints? Judge "
        "what the answer says, in any words: a point made in other words counts, repeating the question "
        "or naming a point without making it does not"
    ),
    "preference": _RUBRIC_TEXT["preference"],
    "tone": (
        "Tone match: do the register (formal/casual), length, humour and warmth of the answer match the "
        "target's tone (0 = low, 1 = high)?"
    ),
}
_FEEDBACK_TEXT = (
    "feedback: the answer's gaps as short clauses joined by '; ' — 'gap: <what the answer fails to do, "
    "described in your own words, e.g. does not say how an attacker would use the cookie>', 'avoid: <what it "
    "should have left out, in your own words>', 'tone: too formal|too casual|needs warmth|less warmth|needs "
    "humour|less humour', 'length: too long|too short', 'format: needs markdown|no markdown' — or '' when "
    "nothing is wrong. Never quote the target's or the rubric's wording in the feedback: it is read by "
    "whoever improves the persona, who must not see the target"
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


def reference_inputs(elixir: Elixir, rubric: str) -> dict[str, Any]:
    """The yardstick a rubric needs when the probe has no target, from the persona's declared settings
    (never its prompt): ``preference`` — its learned preferences; ``tone`` — its formality, conciseness
    and length limit; ``fidelity`` — its language only (the answer is checked against the message)."""
    reference: dict[str, Any] = {"language": elixir.language}
    if rubric == "preference":
        reference["style_preferences"] = [p.model_dump(mode="json") for p in elixir.style_preferences]
    elif rubric == "tone":
        reference["tone"] = {"formality": elixir.tone.formality, "conciseness": elixir.tone.conciseness}
        if elixir.constraints.max_length is not None:
            reference["constraints"] = {"max_length": elixir.constraints.max_length}
    return reference


def _reference_text(reference: dict[str, Any]) -> str:
    lines = [f"- language: {reference.get('language')}"]
    if reference.get("tone"):
        lines.append("- tone: " + ", ".join(f"{k} {v:g}" for k, v in sorted(reference["tone"].items())))
    if (reference.get("constraints") or {}).get("max_length"):
        lines.append(f"- max_length: {reference['constraints']['max_length']}")
    for pref in reference.get("style_preferences") or ():
        lines.append(f"- learned preference: {pref.get('dimension')} = {pref.get('value')}")
    return "\n".join(lines)


def build_judge_request(
    elixir: Elixir,
    message: str,
    answer: str,
    rubric: Rubric,
    *,
    seed: int = 0,
    target: dict[str, Any] | None = None,
) -> LLMRequest:
    """The JUDGE request for one (message, answer, rubric), against ``target`` when given.

    The judge receives the probe, the answer and the rubric — never the persona's prompt, which would
    invite scoring intent instead of the answer. ``elixir`` only supplies the yardstick when the probe
    has no target (:func:`reference_inputs`: declared settings, not its text)."""
    criterion = (_TARGET_TEXT if target else _RUBRIC_TEXT)[rubric]
    system = (
        "You are a strict evaluator of answers. "
        f"{criterion} Score from 0 (not at all) to 1 (fully), citing concrete evidence from the answer. "
        'Reply with JSON only: {"score": <0..1>, "reason": "<one sentence>", "feedback": "<clauses>"}; '
        f"{_FEEDBACK_TEXT}."
    )
    reference = None if target and rubric != "preference" else reference_inputs(elixir, rubric)
    yardstick = (
        f"## Target (what the user wants)\n{_target_text(target)}"
        if reference is None and target
        else f"## Reference\n{_reference_text(reference or {})}"
    )
    user = f"{yardstick}\n\n## User message\n{message}\n\n## Answer to evaluate\n{answer}"
    return system_user(
        TaskKind.JUDGE,
        system,
        user,
        temperature=0.0,
        seed=seed,
        max_tokens=300,
        json_schema=JUDGE_SCHEMA,
        inputs={
            "message": message,
            "answer": answer,
            "rubric": rubric,
            "target": target,
            "reference": reference,
            # the cache scope, not something judged: the offline engine keys its answers by inputs, so a
            # judgement is cached per persona and a run's calls never depend on which process scored whom
            # (two personas' identical answers, scored on two workers, would otherwise be one call or two)
            "subject": f"{elixir.id}@{elixir.content_hash}",
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
