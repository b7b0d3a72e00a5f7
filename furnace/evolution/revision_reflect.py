"""Human edits flow back: a revision chat's accepted suggestions reflected into a new persona version.

The suggestions a person accepted in a piece's revision chat (the revisions on the chain that
leads to the piece's current version: a rollback drops the revisions it undid) become a
reflection brief (:func:`furnace.scoring.feedback.revision_feedback`) that the ``reflect``
operator turns into targeted edits of the persona that wrote the piece. The result is recorded
twice over:

- an agent made by ``fuse`` (operator ``reflect``, parent the persona's current version, lineage
  params ``feedback`` = the brief and ``source`` = ``{"session": <revision session id>,
  "revisions": [<revision ids>]}``), cached and verified like every fusion product;
- the persona's next version, holding the agent's edited principles, tone and constraints, with a
  lineage edge agent → persona (operator ``reflect``), so the persona's lineage shows where its
  new version came from.

Each accepted revision flows back once: revisions already named by a reflect agent on the
persona's lineage are left out, and when none is left nothing is made (status ``already``).
Feedback the rules (or the model) cannot act on raises
:class:`~furnace.fusion.operators.reflect.NoUsableFeedback` and nothing is stored.

Every revision read is accounted for (:class:`RevisionOutcome`): the persona edits traced to
its clauses, or why it made none (no rule reads it, it is about one part of the piece, the
persona already held it, a held format request, ...).

**The structure rule.** A revision chat's suggestion is about one piece. A format request in it
("use bullet points", "第三段改成列表") changes the persona-wide markdown flag only when
:data:`FORMAT_REPEAT` accepted revisions of the piece ask for the same format, or when the
suggestion says it holds beyond the piece ("always", "from now on", "以后"); until then it is
held (the operator is told to apply no ``markdown`` edit, whatever the model proposes). A request
about one part of the piece that no rule reads ("标题改成疑问句", "change the title to ...")
becomes ``piece: ...`` and edits nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from furnace.domain.elixir import ElixirRef, Tone, edit
from furnace.domain.errors import InputError, NotFound
from furnace.domain.lineage import ResolutionNote
from furnace.fusion.fuse import fuse
from furnace.fusion.operators import OPERATORS
from furnace.fusion.operators.reflect import NoUsableFeedback
from furnace.llm.seam import LLM
from furnace.scoring.feedback import clause_slot, persona_wide, suggestion_clauses
from furnace.storage.store import ElixirStore, unit_of_work
from furnace.writing.content import ContentStore, RevisionRecord, persona_origin

_ROLLBACK = re.compile(r"rollback to V(\d+)")
FORMAT_REPEAT = 2  # accepted revisions of one piece asking for the same format before the persona's flag moves
_NOT_EDITS = ("(skipped)", "(held)")


@dataclass(frozen=True)
class RevisionOutcome:
    """What one accepted revision did to the persona: the edits traced to it, or why it made none."""

    revision_id: str
    suggestions: tuple[str, ...]
    clauses: tuple[str, ...]  # what it asked, in the brief's words (a held format request included)
    edits: tuple[str, ...]  # "field: change" of each persona edit traced to one of its clauses
    reason: str  # why a clause made no edit ("" when every clause made one)

    def as_dict(self) -> dict[str, Any]:
        return {
            "revision_id": self.revision_id,
            "suggestions": list(self.suggestions),
            "clauses": list(self.clauses),
            "edits": list(self.edits),
            "reason": self.reason,
        }

    def line(self) -> str:
        """One line for the CLI: the suggestion, then its edits or why it made none."""
        head = f"{self.revision_id} 「{' / '.join(self.suggestions)}」"
        if not self.edits:
            return f"{head} → no edit: {self.reason}"
        return f"{head} → {'; '.join(self.edits)}" + (f" (not used: {self.reason})" if self.reason else "")


@dataclass(frozen=True)
class RevisionReflection:
    """What reflecting one revision session did."""

    status: str  # "reflected" | "already" (every accepted revision had flowed back before)
    content_id: str
    session_id: str
    revision_ids: tuple[str, ...]  # the revisions reflected now
    suggestions: tuple[str, ...]
    feedback: str
    agent_id: str | None
    persona: ElixirRef  # the persona's version after reflecting (unchanged when it already held the edits)
    previous: ElixirRef  # the version the reflect operator read
    notes: tuple[ResolutionNote, ...]
    from_cache: bool
    outcomes: tuple[RevisionOutcome, ...] = ()  # one per revision reflected now, in order
    untraced: tuple[str, ...] = ()  # edits no revision's clause names (a model acting on free text)

    @property
    def changed(self) -> bool:
        return self.persona != self.previous

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "content_id": self.content_id,
            "session_id": self.session_id,
            "revision_ids": list(self.revision_ids),
            "suggestions": list(self.suggestions),
            "feedback": self.feedback,
            "agent_id": self.agent_id,
            "persona": {"id": self.persona.id, "version": self.persona.version},
            "previous": {"id": self.previous.id, "version": self.previous.version},
            "changed": self.changed,
            "notes": [n.model_dump(mode="json") for n in self.notes],
            "from_cache": self.from_cache,
            "revisions": [o.as_dict() for o in self.outcomes],
            "untraced_edits": list(self.untraced),
        }


def accepted_revisions(content_store: ContentStore, content_id: str) -> list[RevisionRecord]:
    """The revisions on the chain of the piece's current version, oldest first: each revision's
    edit is built on its ``from_version``; a rollback to ``Vk`` continues ``Vk``'s chain."""
    versions = {v.version: v for v in content_store.versions(content_id)}
    by_id = {r.id: r for r in content_store.revisions(content_id)}
    chain: list[RevisionRecord] = []
    current = max(versions, default=None)
    seen: set[int] = set()
    while current is not None and current not in seen:
        seen.add(current)
        version = versions[current]
        revision = by_id.get(version.revision_id or "")
        back = _ROLLBACK.fullmatch(version.note) if version.source == "rollback" else None
        if revision is not None:
            chain.append(revision)
            current = revision.from_version
        elif back is not None:
            current = int(back.group(1))
        else:
            current = None  # the first version (or one not made by a revision): the chain starts here
    return chain[::-1]


def reflected_revisions(store: ElixirStore, persona_id: str, session_id: str) -> set[str]:
    """Revisions of ``session_id`` already reflected into ``persona_id`` (named by the reflect agents
    whose edge leads to the persona)."""
    done: set[str] = set()
    for node in store.ancestors(persona_id, max_depth=1):
        if node.operator != "reflect":
            continue
        try:
            source = store.get_agent(node.id).lineage.params.get("source")
        except NotFound:
            continue
        if isinstance(source, dict) and source.get("session") == session_id:
            done.update(str(r) for r in source.get("revisions") or ())
    return done


def reflect_from_revisions(
    store: ElixirStore,
    content_store: ContentStore,
    *,
    llm: LLM,
    embedder: Any,
    cache: Any,
    content_id: str,
    persona_id: str | None = None,
    seed: int = 0,
    settings: Any = None,
) -> RevisionReflection:
    """Reflect the accepted suggestions of ``content_id``'s revision chat into its persona (see the module doc).

    ``persona_id`` (optional) must be the persona that wrote the piece. Raises InputError when the piece
    has no accepted revision, NoUsableFeedback when none of its suggestions gives a usable edit."""
    content = content_store.get_content(content_id)
    if persona_id is not None and persona_id != content.persona_id:
        raise InputError(
            f"{content_id} was written by {content.persona_id}, not {persona_id}: reflect its revisions into "
            f"{content.persona_id}",
            field="persona",
        )
    session = content_store.get_session(content_id)
    chain = accepted_revisions(content_store, content_id)
    if session is None or not chain:
        raise InputError(f"{content_id} has no accepted revision to learn from (revise it first)", field="content")
    parent = store.get_elixir(content.persona_id)
    done = reflected_revisions(store, parent.id, session.id)
    revisions = [r for r in chain if r.id not in done]
    if not revisions:
        return RevisionReflection(
            "already", content_id, session.id, (), (), "", None, parent.ref, parent.ref, (), from_cache=True
        )
    suggestions = tuple(s for r in revisions for s in r.suggestions)
    asked = {r.id: revision_clauses(r) for r in chain}
    held = held_formats(chain, asked)
    feedback, hold = reflection_input(revisions, asked, held)
    if not feedback:
        raise InputError(f"{content_id}: its accepted revisions carry no suggestion text", field="content")
    try:
        result = fuse(
            store,
            [parent.ref],
            llm=llm,
            embedder=embedder,
            cache=cache,
            operator="reflect",
            seed=seed,
            params={
                "feedback": feedback,
                "source": {"session": session.id, "revisions": [r.id for r in revisions]},
                "hold": hold,
            },
            settings=settings,
        )
    except NoUsableFeedback as err:  # say, for each revision, why it gave nothing
        why = "; ".join(f"{r.id}: {trace(r, asked[r.id], held, ()).reason}" for r in revisions)
        raise NoUsableFeedback(
            f"reflect: the feedback gave no usable edit ({why}); the persona is unchanged",
            field=err.field,
        ) from err
    agent = result.agent
    child = agent.elixir
    updated = edit(
        parent,
        principles=list(child.principles),
        tone=child.tone.model_dump(),
        constraints=child.constraints.model_dump(),
    )
    with unit_of_work(store):  # the new version and its lineage edge: one transaction
        ref = store.save_elixir(updated, origin=persona_origin(parent.id))
        store.add_edge(agent.id, parent.id, operator="reflect", op_version=OPERATORS["reflect"].op_version)
    return RevisionReflection(
        status="reflected",
        content_id=content_id,
        session_id=session.id,
        revision_ids=tuple(r.id for r in revisions),
        suggestions=suggestions,
        feedback=feedback,
        agent_id=agent.id,
        persona=ref,
        previous=parent.ref,
        notes=tuple(agent.lineage.resolution_notes),
        from_cache=result.from_cache,
        outcomes=tuple(trace(r, asked[r.id], held, agent.lineage.resolution_notes) for r in revisions),
        untraced=untraced_edits(agent.lineage.resolution_notes, [c for r in revisions for c, _ in asked[r.id]]),
    )


def revision_clauses(revision: RevisionRecord) -> list[tuple[str, bool]]:
    """Each clause one revision states (:func:`~furnace.scoring.feedback.suggestion_clauses`), in order and
    once, with whether the suggestion that stated it says it holds beyond the piece."""
    out: dict[str, bool] = {}
    for suggestion in revision.suggestions:
        wide = persona_wide(suggestion)
        for c in suggestion_clauses(suggestion):
            out[c] = out.get(c, False) or wide
    return list(out.items())


def _is_format(text: str) -> bool:
    return text.startswith("format:")


def held_formats(chain: list[RevisionRecord], asked: dict[str, list[tuple[str, bool]]]) -> dict[str, int]:
    """The format clauses the structure rule holds (see the module doc), each with how many accepted
    revisions of the piece ask for it (fewer than :data:`FORMAT_REPEAT`, none persona-wide)."""
    counts: dict[str, int] = {}
    wide: set[str] = set()
    for r in chain:
        for c, is_wide in asked[r.id]:
            if _is_format(c):
                counts[c] = counts.get(c, 0) + 1
                if is_wide:
                    wide.add(c)
    return {c: n for c, n in counts.items() if n < FORMAT_REPEAT and c not in wide}


def _held_reason(n: int) -> str:
    return (
        f"a format request about one piece ({n} of {FORMAT_REPEAT} accepted revisions ask for it): "
        "the persona-wide markdown flag stays"
    )


def reflection_input(
    revisions: list[RevisionRecord], asked: dict[str, list[tuple[str, bool]]], held: dict[str, int]
) -> tuple[str, dict[str, str]]:
    """The reflection brief of the revisions reflected now (a held format request is kept for a model
    to read as ``piece: <suggestion>``) and the operator's ``hold`` (``markdown`` unless a format
    request passed the structure rule)."""
    lines: dict[str, None] = {"probe: user-revision": None}
    for r in revisions:
        for c, _ in asked[r.id]:
            lines[f"piece: {r.suggestion}"[:220] if c in held else c] = None
    if len(lines) == 1:
        return "", {}
    passed = any(_is_format(c) and c not in held for r in revisions for c, _ in asked[r.id])
    hold = {} if passed else {"markdown": "no accepted format request passed the structure rule"}
    return "\n".join(lines), hold


def _note_slot(note: ResolutionNote) -> str | None:
    """The persona field a resolution note is about (a skipped or held edit: from its ``kind: ...`` reason)."""
    if note.field.startswith("principles"):
        return "principles"
    if note.field.startswith(("tone.", "constraints.")):
        return note.field
    if not note.field.startswith("edit["):
        return None
    kind, _, rest = note.reason.partition(":")
    if kind == "tone":
        dim = next((d for d in Tone.DIMENSIONS if d in rest), None)
        return f"tone.{dim}" if dim else None
    kinds = {
        "markdown": "constraints.must_use_markdown",
        "max_length": "constraints.max_length",
        "forbid_topic": "constraints.forbidden_topics",
    }
    return kinds.get(kind, "principles" if kind.endswith("_principle") else None)


def _direction(note: ResolutionNote) -> int:
    """+1 / -1 for a tone move ("0.7 → 0.5") or a markdown flag; 0 when the note has no direction."""
    if note.field == "constraints.must_use_markdown":
        return 1 if note.chose == "markdown" else -1
    before, arrow, after = note.chose.partition("→")
    try:
        return (float(after) > float(before)) - (float(after) < float(before)) if arrow else 0
    except ValueError:
        return 0


def _matches(text: str, note: ResolutionNote) -> bool:
    """Whether a note is the edit (or the refusal) of one clause: the same field, the same way, and for
    ``missing`` / ``avoid`` the clause's item named by the note."""
    slot = clause_slot(text)
    note_slot = _note_slot(note)
    if slot is None or note_slot is None:
        return False
    field, way = slot
    detail = text.partition(":")[2].strip().casefold()
    if text.startswith("avoid:"):
        return note_slot in ("constraints.forbidden_topics", "principles") and detail in (
            f"{note.chose} {note.reason}".casefold()
        )
    if text.startswith("missing:"):
        first = detail.replace("，", ",").replace("、", ",").split(",")[0].strip()
        return note_slot == "principles" and first in f"{note.chose} {note.reason}".casefold()
    if note_slot != field:
        return False
    return note.chose in _NOT_EDITS or not way or _direction(note) in (0, way)


def trace(
    revision: RevisionRecord, asked: list[tuple[str, bool]], held: dict[str, int], notes: tuple[ResolutionNote, ...]
) -> RevisionOutcome:
    """One revision's :class:`RevisionOutcome`: for each of its clauses the applied edit it names, else why none."""
    edits: list[str] = []
    why: list[str] = []
    for text, _ in asked:
        made = [n for n in notes if n.chose not in _NOT_EDITS and _matches(text, n)]
        if made:
            edits.extend(f"{n.field}: {n.chose}" for n in made)
            continue
        refused = next((n for n in notes if n.chose in _NOT_EDITS and _matches(text, n)), None)
        if text in held:
            why.append(f"{text} — {_held_reason(held[text])}")
        elif text.startswith("piece:"):
            why.append(f"{text} — about one part of this piece, not the persona")
        elif clause_slot(text) is None:
            why.append(f"{text} — no rule reads it (a model may)")
        elif refused is not None:
            why.append(f"{text} — {refused.reason}")
        elif any(n.chose not in _NOT_EDITS and _note_slot(n) == (clause_slot(text) or ("",))[0] for n in notes):
            why.append(f"{text} — another revision moved the same field the other way first")
        else:
            why.append(f"{text} — the operator proposed no edit for it")
    return RevisionOutcome(
        revision.id, revision.suggestions, tuple(t for t, _ in asked), tuple(dict.fromkeys(edits)), "; ".join(why)
    )


def untraced_edits(notes: tuple[ResolutionNote, ...], clauses: list[str]) -> tuple[str, ...]:
    """The applied edits no clause names (e.g. a model's answer to a ``user: ...`` request)."""
    return tuple(
        f"{n.field}: {n.chose}"
        for n in notes
        if n.field != "reflect" and n.chose not in _NOT_EDITS and not any(_matches(c, n) for c in clauses)
    )
