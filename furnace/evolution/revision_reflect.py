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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from furnace.domain.elixir import ElixirRef, edit
from furnace.domain.errors import InputError, NotFound
from furnace.domain.lineage import ResolutionNote
from furnace.fusion.fuse import fuse
from furnace.fusion.operators import OPERATORS
from furnace.llm.seam import LLM
from furnace.scoring.feedback import revision_feedback
from furnace.storage.store import ElixirStore, unit_of_work
from furnace.writing.content import ContentStore, RevisionRecord, persona_origin

_ROLLBACK = re.compile(r"rollback to V(\d+)")


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
    revisions = accepted_revisions(content_store, content_id)
    if session is None or not revisions:
        raise InputError(f"{content_id} has no accepted revision to learn from (revise it first)", field="content")
    parent = store.get_elixir(content.persona_id)
    done = reflected_revisions(store, parent.id, session.id)
    revisions = [r for r in revisions if r.id not in done]
    if not revisions:
        return RevisionReflection(
            "already", content_id, session.id, (), (), "", None, parent.ref, parent.ref, (), from_cache=True
        )
    suggestions = tuple(s for r in revisions for s in r.suggestions)
    feedback = revision_feedback(list(suggestions))
    if not feedback:
        raise InputError(f"{content_id}: its accepted revisions carry no suggestion text", field="content")
    result = fuse(
        store,
        [parent.ref],
        llm=llm,
        embedder=embedder,
        cache=cache,
        operator="reflect",
        seed=seed,
        params={"feedback": feedback, "source": {"session": session.id, "revisions": [r.id for r in revisions]}},
        settings=settings,
    )
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
    )
