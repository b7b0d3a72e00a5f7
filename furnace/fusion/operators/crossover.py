"""crossover: fuse two (or more) elixirs field by field.

- tone: priority-weighted mean (exact decimal arithmetic);
- principles: merged in priority order; a principle whose meaning another
  parent already states (cosine ≥ ``similarity_threshold``) collapses into the
  higher-priority wording; contradictions (:func:`conflicts.contradiction`) go
  by priority, or to the ADJUDICATE task on a tie; each with a note;
- few-shots: a share from each; expertise, tools, forbidden topics: unions;
- constraints: :func:`conflicts.resolve_constraints`;
- language: one for the child — ``params.language`` when given, else the
  highest-priority parent's;
- identity: one sentence in that language from the IDENTITY task at
  ``temperature`` (0.4), cached by the parents' content hashes, the op version and
  the model; an answer in another script is replaced by a plain same-language
  sentence naming the parents;
- principles across languages ("回答要简短。" / "Answer briefly.") collapse only
  when the embedder maps them close together: a multilingual embedder can, the
  English MiniLM and the lexical fallback cannot, so with those both are kept.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

from furnace.domain.elixir import MAX_LIST, Elixir, parse_elixir
from furnace.domain.errors import InputError
from furnace.domain.lineage import ResolutionNote
from furnace.domain.text import has_cjk
from furnace.fusion.operators import prompts
from furnace.fusion.operators.base import (
    OperatorContext,
    OperatorResult,
    by_priority,
    joined_name,
    joined_notes,
    merge_preferences,
    share_few_shots,
    union,
    weighted_tone,
)
from furnace.fusion.operators.conflicts import Adjudicator, contradiction, guardrail_union, resolve_constraints


def unit(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to length 1 (so that a dot product is the cosine)."""
    norm = math.sqrt(sum(map(operator.mul, vector, vector)))
    return [x / norm for x in vector] if norm else list(vector)


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """Dot product (the cosine, for unit vectors)."""
    total: float = sum(map(operator.mul, a, b))
    return total


def adjudicator(ctx: OperatorContext, language: str) -> Adjudicator:
    """An :data:`~furnace.fusion.operators.conflicts.Adjudicator` backed by the ADJUDICATE task."""

    def adjudicate(field: str, options: list[dict[str, Any]], rule: str) -> tuple[int, str]:
        request = prompts.build_adjudicate_request(field, options, rule=rule, language=language)
        return prompts.parse_adjudicate(ctx.complete(request), len(options))

    return adjudicate


def merge_principles(
    parents: Sequence[Elixir], ctx: OperatorContext, language: str
) -> tuple[list[str], list[ResolutionNote]]:
    """Principles of ``parents`` (highest priority first), de-duplicated and de-contradicted."""
    threshold = float(ctx.params["similarity_threshold"])
    items = [(text, i) for i, p in enumerate(parents) for text in p.principles]
    vectors = [unit(v) for v in ctx.embedder.embed([t for t, _ in items])]
    kept: list[tuple[str, int, list[float]]] = []
    notes: list[ResolutionNote] = []
    adjudicate = adjudicator(ctx, language)
    for (text, owner), vec in zip(items, vectors, strict=False):
        verdict: tuple[str, int, Any] | None = None
        for k, (other, other_owner, other_vec) in enumerate(kept):
            if other_owner == owner:
                continue  # a parent's own principles are its business
            axis = contradiction(other, text)
            if axis is not None:
                verdict = ("contradiction", k, axis)
                break
            sim = dot(vec, other_vec)
            if sim >= threshold:
                verdict = ("same", k, sim)
                break
        if verdict is None:
            kept.append((text, owner, vec))
            continue
        kind, k, detail = verdict
        other, other_owner, other_vec = kept[k]
        a, b = parents[other_owner], parents[owner]
        if kind == "same":
            notes.append(
                ResolutionNote(
                    field="principles",
                    chose=other,
                    reason=f"{text!r} ({b.name}) means the same (similarity {detail:.2f} ≥ {threshold:g}); "
                    f"kept the wording of {a.name} (priority {a.priority})",
                )
            )
        elif a.priority != b.priority:
            notes.append(
                ResolutionNote(
                    field="principles",
                    chose=other,
                    reason=f"contradicts {text!r} ({b.name}) on {detail}; {a.name} has the higher priority "
                    f"({a.priority} > {b.priority})",
                )
            )
        else:
            options: list[dict[str, Any]] = [
                {"label": other, "value": other, "priority": a.priority, "source": a.name},
                {"label": text, "value": text, "priority": b.priority, "source": b.name},
            ]
            index, why = adjudicate("principles", options, "specific")
            loser = options[1 - index]["label"]
            if index == 1:
                kept[k] = (text, owner, vec)
            notes.append(
                ResolutionNote(
                    field="principles",
                    chose=options[index]["label"],
                    reason=f"contradicts {loser!r} on {detail}; priorities tie ({a.priority}); adjudicated: {why}",
                )
            )
    return [t for t, _, _ in kept][:MAX_LIST], notes


LANGUAGES = ("zh", "en")


def child_language(ordered: Sequence[Elixir], requested: Any) -> str:
    """The one language of a child: the one named in params, else the highest-priority parent's."""
    if requested is None:
        return ordered[0].language
    if requested not in LANGUAGES:
        raise InputError(f"language must be one of {', '.join(LANGUAGES)}, got {requested!r}", field="language")
    return str(requested)


_FALLBACK_IDENTITY = {
    "en": "You are an assistant that combines the strengths of {names}.",
    "zh": "你是一位融合了{names}所长的助手。",
}


def in_language(text: str, language: str) -> bool:
    """Whether an identity sentence is written in ``language`` (zh: has CJK; en: has none)."""
    return has_cjk(text) == (language == "zh")


def synthesise_identity(parents: Sequence[Elixir], ctx: OperatorContext, language: str, op_version: str) -> str:
    """The child's identity sentence (IDENTITY task, sub-result cached)."""
    temperature = float(ctx.params.get("temperature", 0.4))
    key = {
        "parents": [p.content_hash for p in parents],
        "op_version": op_version,
        "model": ctx.llm.model_name,
        "temperature": temperature,
        "language": language,
    }

    def compute() -> str:
        request = prompts.build_identity_request(parents, language=language, temperature=temperature)
        return prompts.parse_identity(ctx.complete(request))

    identity = str(ctx.cached("identity", key, compute))
    if in_language(identity, language):
        return identity
    # a sentence mixing languages is not an identity: name the same-language parents instead
    sep = "、" if language == "zh" else " and "
    names = sep.join(p.name for p in parents if in_language(p.name, language)) or (
        "几位前辈人格" if language == "zh" else "its parent personas"
    )
    return _FALLBACK_IDENTITY[language].format(names=names)


class Crossover:
    """Field-by-field fusion of two or more elixirs."""

    name = "crossover"
    op_version = "2"
    min_parents = 2
    max_parents: int | None = 4

    def param_defaults(self) -> dict[str, Any]:
        """Identity temperature; the child's language (None: the highest-priority parent's)."""
        return {"temperature": 0.4, "language": None}

    def max_calls(self, parents: Sequence[Elixir], params: dict[str, Any]) -> int:
        """One adjudication per principle that contradicts an earlier principle of another parent of the
        same priority (:func:`merge_principles` asks only for those), one for markdown, one identity."""
        items = [(text, p.priority, i) for i, p in enumerate(by_priority(parents)) for text in p.principles]
        tied = sum(
            any(o != owner and pr == priority and contradiction(t, text) is not None for t, pr, o in items[:k])
            for k, (text, priority, owner) in enumerate(items)
        )
        return tied + 2

    def apply(self, parents: Sequence[Elixir], ctx: OperatorContext) -> OperatorResult:
        """The crossover child of ``parents``."""
        ordered = by_priority(parents)
        language = child_language(ordered, ctx.params.get("language"))
        principles, notes = merge_principles(ordered, ctx, language)
        constraints, constraint_notes = resolve_constraints(ordered, adjudicator(ctx, language))
        identity = synthesise_identity(ordered, ctx, language, self.op_version)
        child = parse_elixir(
            {
                "id": ctx.child_id,
                "name": joined_name(ordered, " × "),
                "language": language,
                "identity": identity,
                "expertise": union(p.expertise for p in ordered),
                "principles": principles,
                "tone": weighted_tone(ordered).model_dump(),
                "constraints": constraints.model_dump(),
                "few_shots": [s.model_dump() for s in share_few_shots(ordered)],
                "tools": union(p.tools for p in ordered),
                "priority": max(p.priority for p in ordered),
                "conflicts_with": guardrail_union((p.conflicts_with for p in ordered), "conflicts_with"),
                "style_notes": joined_notes(ordered),
                "style_preferences": [s.model_dump() for s in merge_preferences(ordered)],
            }
        )
        return OperatorResult(child=child, notes=notes + constraint_notes)
