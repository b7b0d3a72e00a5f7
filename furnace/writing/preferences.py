"""Preference learning: from a revision's before/after and suggestion to persona style.

1. :func:`extract_preferences` asks the model (EXTRACT_PREFERENCES, structured
   output) for ``(dimension, value, evidence, weight)`` items;
2. :func:`merge_preferences` folds them into the persona's existing ones — same
   dimension and value reinforces (``count + 1``, weight up by
   :data:`REINFORCE_STEP`), same dimension with another value replaces;
3. :func:`learn_from_revision` stores the result as a new persona version
   (versions are immutable) and marks the revision processed, so the next
   generation's rendered prompt carries the preference (:func:`save_learned`
   is that last step alone: the revision chat extracts while it commits).

Idempotent per revision: a processed revision is skipped, and a revision whose
id is already the ``source_revision`` of a stored preference is only marked.
The version and the mark are written in one transaction (:func:`save_learned`),
so a crash leaves both or neither. The only-marked case is a home written by an
earlier release, which saved the version first and the mark behind the reply.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from furnace.domain.elixir import MAX_PREFERENCES, Elixir, ElixirRef, StylePreference, edit
from furnace.domain.errors import LLMMalformedOutput, StaleVersion
from furnace.llm.seam import LLM, LLMRequest, Message, TaskKind
from furnace.llm.structured import parse_reply, schema_of
from furnace.storage.store import ElixirStore, unit_of_work
from furnace.writing.content import ContentStore, RevisionRecord, persona_origin

log = logging.getLogger(__name__)

REINFORCE_STEP = 0.1


class _PreferenceItem(BaseModel):
    dimension: str
    value: str
    evidence: str = ""
    weight: float = Field(default=0.5, ge=0, le=1)


class _PreferencesSchema(BaseModel):
    preferences: list[_PreferenceItem]


class PreferencesReply(BaseModel):
    """What is read back (leniently: bad items are skipped by :func:`parse_preferences`)."""

    preferences: list[dict[str, Any]]


PREFERENCES_SCHEMA: dict[str, Any] = schema_of(_PreferencesSchema)

_INSTRUCTION = {
    "en": (
        "From one revision of a text, infer the author's lasting style preferences. Compare the original and "
        'the revised text with the user\'s suggestion. Return JSON {"preferences": [{"dimension", "value", '
        '"evidence", "weight"}]} using short dimensions such as tone, emoji, length, structure, title, and '
        "short values such as lively, formal, more, fewer, concise, detailed. Weight in [0, 1] is your "
        'confidence. A suggestion may ask for several things ("too formal, make it livelier and add an emoji"): '
        "return one item for each of them, none left out. Return an empty list when the edit says nothing general "
        "about style."
    ),
    "zh": (
        "根据一次文本修改推断作者长期的写作风格偏好。对照原文、修改后的文本和用户的建议。以 JSON 返回 "
        '{"preferences": [{"dimension", "value", "evidence", "weight"}]}，dimension 用简短英文词'
        "（tone、emoji、length、structure、title），value 用简短英文词（lively、formal、more、fewer、concise、"
        "detailed），weight 为 0 到 1 的置信度。一条建议可能同时提出几点要求（如“太正式了，活泼点，再加个表情”），"
        "每一点各返回一项，不要遗漏。若这次修改不反映一般性的风格偏好，返回空列表。"
    ),
}


def build_extract_request(revision: RevisionRecord, *, language: str, seed: int = 0) -> LLMRequest:
    """The EXTRACT_PREFERENCES request for one revision."""
    suggestions = "\n".join(f"- {s}" for s in revision.suggestions)
    user = (
        f"Suggestion(s):\n{suggestions}\n\nOriginal title: {revision.original_title}\nOriginal body:\n<<<\n"
        f"{revision.original_body}\n>>>\n\nRevised title: {revision.revised_title}\nRevised body:\n<<<\n"
        f"{revision.revised_body}\n>>>"
    )
    return LLMRequest(
        task=TaskKind.EXTRACT_PREFERENCES,
        messages=(
            Message(role="system", content=_INSTRUCTION.get(language, _INSTRUCTION["en"])),
            Message(role="user", content=user),
        ),
        temperature=0.0,
        seed=seed,
        json_schema=PREFERENCES_SCHEMA,
        inputs={
            "suggestions": list(revision.suggestions),
            "before": {"title": revision.original_title, "body": revision.original_body},
            "after": {"title": revision.revised_title, "body": revision.revised_body},
            "language": language,
        },
    )


def parse_preferences(parsed: Any, *, revision_id: str) -> list[StylePreference]:
    """Validated preferences from a structured answer; raises LLMMalformedOutput."""
    items = parsed.get("preferences") if isinstance(parsed, dict) else None
    if not isinstance(items, list):
        raise LLMMalformedOutput("preference extraction did not return a preferences list")
    out: dict[str, StylePreference] = {}
    for item in items:
        if not isinstance(item, dict) or not str(item.get("dimension", "")).strip():
            continue
        try:
            pref = StylePreference(
                dimension=str(item["dimension"]).strip().lower(),
                value=str(item.get("value", "")).strip().lower(),
                evidence=str(item.get("evidence", ""))[:1000],
                source_revision=revision_id,
                weight=min(1.0, max(0.0, float(item.get("weight", 0.5)))),
            )
        except (ValueError, TypeError):
            continue  # one bad item is skipped, not the whole answer
        out[pref.dimension] = pref
    return list(out.values())


def extract_preferences(llm: LLM, revision: RevisionRecord, *, language: str, seed: int = 0) -> list[StylePreference]:
    """Ask the model which style preferences one revision reveals."""
    completion = llm.complete(build_extract_request(revision, language=language, seed=seed))
    reply = parse_reply(completion, PreferencesReply, task="extract_preferences")
    return parse_preferences(reply.model_dump(), revision_id=revision.id)


def merge_preferences(existing: Sequence[StylePreference], learned: Sequence[StylePreference]) -> list[StylePreference]:
    """Fold ``learned`` into ``existing``: same dimension and value reinforces, another value replaces."""
    merged = list(existing)
    for new in learned:
        index = next((i for i, p in enumerate(merged) if p.dimension.casefold() == new.dimension.casefold()), None)
        if index is None:
            merged.append(new)
            continue
        old = merged[index]
        if old.value.casefold() == new.value.casefold():
            merged[index] = old.model_copy(
                update={
                    "count": old.count + 1,
                    "weight": min(1.0, round(max(old.weight, new.weight) + REINFORCE_STEP, 6)),
                    "evidence": new.evidence or old.evidence,
                    "source_revision": new.source_revision,
                }
            )
        else:
            merged[index] = new.model_copy(update={"count": 1})
    while len(merged) > MAX_PREFERENCES:
        merged.remove(min(merged, key=lambda p: p.weight))
    return merged


@dataclass(frozen=True)
class PreferenceUpdate:
    """What learning from one revision did."""

    revision_id: str
    status: Literal["learned", "nothing", "already"]
    learned: tuple[StylePreference, ...] = ()
    persona_ref: ElixirRef | None = None
    preferences: tuple[StylePreference, ...] = ()
    persona: Elixir | None = None  # the content saved as ``persona_ref`` (when learned)


class Extractor(Protocol):
    """How a batch asks which preferences one revision reveals (:func:`extract_preferences`, or a face's
    wrapper around it: the Prefect flow runs it as a cached task)."""

    def __call__(self, llm: LLM, revision: RevisionRecord, *, language: str, seed: int = 0) -> list[StylePreference]:
        """The preferences ``revision`` reveals."""
        ...


def learn_from_revision(
    store: ElixirStore,
    content_store: ContentStore,
    llm: LLM,
    revision: RevisionRecord,
    *,
    seed: int = 0,
    extract: Extractor = extract_preferences,
) -> PreferenceUpdate:
    """Extract (``extract``), merge, save a new persona version, mark the revision processed.

    Raises on a model or store failure (the revision itself is never touched;
    it stays unprocessed and a later batch retries it).
    """
    with unit_of_work(store, content_store):  # the reads before the model call: one connection
        if content_store.is_processed(revision.id):
            return PreferenceUpdate(revision.id, "already")
        persona = store.get_elixir(revision.persona_id)
        if any(p.source_revision == revision.id for p in persona.style_preferences):
            content_store.mark_processed(
                revision.id, persona_id=persona.id, persona_version=persona.version, preferences=[], status="already"
            )
            return PreferenceUpdate(
                revision.id, "already", persona_ref=persona.ref, preferences=tuple(persona.style_preferences)
            )
    learned = extract(llm, revision, language=persona.language, seed=seed)
    return save_learned(store, content_store, revision, persona, learned)


_SAVE_TRIES = 3  # compare-and-set attempts of a learned persona version against concurrent saves


def save_learned(
    store: ElixirStore,
    content_store: ContentStore,
    revision: RevisionRecord,
    persona: Elixir,
    learned: Sequence[StylePreference],
) -> PreferenceUpdate:
    """Merge ``learned`` into ``persona`` (the revision's persona, unprocessed), save the new persona
    version and mark the revision processed, in one transaction.

    The version is saved only while ``persona`` is still the latest (compare-and-set, checked inside
    the INSERT): when someone saved the persona meanwhile, the preferences are merged into their
    version instead, so their edit is never overwritten."""
    merged = merge_preferences(persona.style_preferences, learned)
    ref: ElixirRef | None = None
    updated: Elixir | None = None
    with unit_of_work(store, content_store):  # one connection and one transaction: the version and the mark
        for attempt in range(_SAVE_TRIES):
            merged = merge_preferences(persona.style_preferences, learned)
            if not learned or merged == list(persona.style_preferences):
                break
            updated = edit(persona, style_preferences=[p.model_dump(mode="json") for p in merged])
            try:
                ref = store.save_elixir(updated, origin=persona_origin(persona.id), if_latest=persona.version)
                break
            except StaleVersion:
                if attempt + 1 == _SAVE_TRIES:
                    raise
                persona = store.get_elixir(persona.id)  # saved (or deleted) meanwhile: learn on top of that
                if persona.withdrawn:
                    raise
        content_store.mark_processed(
            revision.id,
            persona_id=persona.id,
            persona_version=ref.version if ref else persona.version,
            preferences=[p.model_dump(mode="json") for p in learned],
            status="learned" if learned else "nothing",
        )
    return PreferenceUpdate(
        revision.id, "learned" if learned else "nothing", tuple(learned), ref, tuple(merged), updated if ref else None
    )


@dataclass
class BatchReport:
    """What one batch of preference extraction did."""

    processed: int = 0
    learned: int = 0
    nothing: int = 0
    failed: int = 0
    revision_ids: list[str] = field(default_factory=list)
    personas: dict[str, int] = field(default_factory=dict)  # persona id -> latest version written

    def as_dict(self) -> dict[str, Any]:
        return {
            "processed": self.processed,
            "learned": self.learned,
            "nothing": self.nothing,
            "failed": self.failed,
            "revision_ids": list(self.revision_ids),
            "personas": dict(self.personas),
        }


def process_unprocessed(
    store: ElixirStore,
    content_store: ContentStore,
    llm: LLM,
    *,
    limit: int | None = None,
    seed: int = 0,
    extract: Extractor = extract_preferences,
) -> BatchReport:
    """Learn from every revision not processed yet (oldest first); failures are logged and counted."""
    report = BatchReport()
    for revision in content_store.unprocessed_revisions(limit=limit):
        try:
            update = learn_from_revision(store, content_store, llm, revision, seed=seed, extract=extract)
        except Exception as err:  # one failed revision never stops the batch
            log.warning("preference extraction failed for %s: %s", revision.id, err)
            report.failed += 1
            continue
        report.processed += 1
        report.revision_ids.append(revision.id)
        if update.status == "learned":
            report.learned += 1
        elif update.status == "nothing":
            report.nothing += 1
        if update.persona_ref is not None:
            report.personas[update.persona_ref.id] = update.persona_ref.version
    return report
