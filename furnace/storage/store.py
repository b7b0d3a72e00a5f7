"""The elixir library, agents and lineage: the rules every store keeps, and helpers they share.

The protocol, :class:`ElixirStore`, is declared with every other store protocol in
:mod:`furnace.storage.protocols` (and re-exported here).

Two implementations pass one contract suite (``tests/storage/``):
``furnace.storage.memory.MemoryStore`` and
``furnace.storage.sql.store.SQLStore`` (on SQLite and on PostgreSQL).

Rules every implementation keeps:

- **Immutable versions.** ``save_elixir`` of new content stores ``version + 1``
  (version 1 for a new id); saving content identical to the latest version is
  a no-op that returns the existing ref. The ``version`` on the passed value is
  ignored; the store assigns it.
- **Soft delete.** ``delete_elixir`` marks every version withdrawn.
  ``get_elixir`` still returns withdrawn versions (history stays readable);
  ``load_for_fusion`` refuses them with a :class:`LineageError`.
- **Lineage verified on read.** ``get_agent`` recomputes the lineage hash and
  raises :class:`LineageError` on a mismatch.
- **Idempotent writes.** Saving the same agent twice writes nothing new.
- **An id's origin is fixed by its first save** (later saves keep it).
- **Deleted ids stay deleted.** ``save_elixir`` under a deleted id raises
  :class:`InputError`; ``delete_elixir`` of a deleted id is a no-op.
- **Agents.** ``save_agent`` stores the child elixir under the agent's id
  (``origin='agent'``, whatever id the passed child carries) and one edge
  per lineage parent (``parent_version`` = the parent ref's version).
  ``get_agent`` also checks that an ``agt-`` id matches its lineage hash and
  that each parent ref's ``content_hash`` matches the stored version.
- **Lineage queries** exclude the start node, return ``[]`` for an unknown
  id, and sort by (depth, id); ``via``/``operator`` are those of the smallest
  neighbour id at the shortest depth. ``parent_version=None`` is stored as 0.

**Units of work.** Every store offers ``unit()``
(:class:`~furnace.storage.protocols.Transactional`): a context in which every call
of that store (and of any other store on the same database) uses one connection
and one transaction (in memory: nothing to do). :func:`unit_of_work` enters it
for each store given; flows wrap each unit -- a revision step, an arena speaker,
a page render -- in it, never a model call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from furnace.domain.agent import AGENT_PREFIX, Agent, agent_id_for
from furnace.domain.elixir import Elixir, ElixirRef, parse_elixir
from furnace.domain.errors import InputError, LineageError, StaleVersion
from furnace.domain.lineage import Lineage, verify_lineage
from furnace.storage.protocols import ElixirStore as ElixirStore  # declared with every store protocol
from furnace.storage.protocols import Transactional

if TYPE_CHECKING:
    from furnace.storage.seals import Sealer

Origin = Literal["library", "agent"]


@contextmanager
def unit_of_work(*stores: Transactional, one_transaction: bool = True) -> Iterator[None]:
    """One connection for every call inside, on each store's ``unit()``, and one transaction for its
    writes (without ``one_transaction``, each write is atomic on its own)."""
    with ExitStack() as stack:
        for store in stores:
            stack.enter_context(store.unit(one_transaction=one_transaction))
        yield


def snapshot_soon(*stores: Transactional) -> None:
    """Ask each store for a fresh analysis snapshot (in the background; in memory: nothing)."""
    for store in stores:
        store.snapshot_soon()


@dataclass(frozen=True)
class ElixirSummary:
    """The fields a listing shows, read without decoding, validating or hashing the body (the stored
    ``content_hash`` as is: reads of one elixir verify it)."""

    id: str
    version: int
    name: str
    language: str
    expertise: tuple[str, ...]
    content_hash: str
    created_at: datetime | None
    deleted: bool

    @classmethod
    def of(cls, elixir: Elixir) -> ElixirSummary:
        return cls(
            elixir.id,
            elixir.version,
            elixir.name,
            elixir.language,
            tuple(elixir.expertise),
            elixir.content_hash,
            elixir.created_at,
            elixir.withdrawn,
        )


T = TypeVar("T")


# --- helpers shared by every implementation (not part of the protocol) -------


def utc_now() -> datetime:
    """The current time, timezone-aware UTC (what stores stamp on save)."""
    return datetime.now(UTC)


def as_stored(elixir: Elixir, *, version: int, created_at: datetime, id: str | None = None) -> Elixir:
    """A re-validated copy carrying the store-assigned id, version and timestamp.

    Re-validating (rather than ``model_copy``) means a value assembled without
    validation can never reach the store, and its ``content_hash`` is fresh.
    Style notes or principles that look like they hold a secret are logged as a warning.
    """
    from furnace.domain.secrets import warn_secrets

    data = elixir.model_dump(mode="json", exclude={"content_hash", "version", "created_at", "deleted_at"})
    data.update(version=version, created_at=created_at, deleted_at=None)
    if id is not None:
        data["id"] = id
    stored = parse_elixir(data)
    warn_secrets(stored)  # a warning, never the secret: exports of it are refused
    return stored


def checked_ref(elixir: Elixir, ref: ElixirRef) -> Elixir:
    """``elixir`` when it is the content ``ref`` pins; else a LineageError naming both hashes."""
    if elixir.content_hash != ref.content_hash:
        raise LineageError(
            f"{ref}: content_hash mismatch — reference says {ref.content_hash[:12]}…, "
            f"the store holds {elixir.content_hash[:12]}…"
        )
    return elixir


def withdrawn_error(elixir: Elixir) -> LineageError:
    """The error for fusing from a soft-deleted elixir."""
    return LineageError(f"agent depends on withdrawn elixir {elixir.id} v{elixir.version}")


def stale_version_error(id: str, expected: int, latest: int | None, deleted: bool) -> StaleVersion:
    """The error for a compare-and-set save (``if_latest``) that met another state."""
    if latest is None:
        return StaleVersion(f"elixir {id!r} does not exist; expected version {expected}")
    found = f"v{latest} is deleted" if deleted else f"the latest is v{latest}"
    return StaleVersion(f"elixir {id!r} changed meanwhile: expected v{expected}, {found}; nothing was saved")


def deleted_id_error(id: str) -> InputError:
    """The error for saving under an id that was deleted."""
    return InputError(f"elixir {id!r} was deleted; save it under a new id", field="id")


def matches_query(elixir: Elixir, query: str | None) -> bool:
    """Case-insensitive substring match on name, id or any expertise entry."""
    if not query:
        return True
    q = query.strip().lower()
    return any(q in text.lower() for text in (elixir.id, elixir.name, *elixir.expertise))


def verified_agent(
    row: Sequence[Any],
    *,
    sealer: Sealer,
    stored_hash: Callable[[str, int], str | None],
    edges: Iterable[tuple[str, str, str, int]],
    persona: Callable[[str, int], Elixir],
    created_at: Callable[[Any], datetime | None],
) -> Agent:
    """An agent from its stored row ``(id, lineage, elixir_version, prompt, tools, members, created_at, seal)``,
    every check made: its lineage against the stored hashes and edges, its record seal, its keyed seal. The
    adapters differ only in how they read the persona (``persona(id, version)``) and the timestamp."""
    import json

    from furnace.domain.agent import verify_edges, verify_seal
    from furnace.storage.seals import agent_mac, check

    id, lineage_json, elixir_version, prompt, tools, members, stored_at, seal = row
    try:
        data = json.loads(lineage_json)
    except ValueError:
        raise LineageError(f"agent {id}: unreadable lineage record (not JSON)") from None
    lineage = verify_agent_lineage(id, data, stored_hash)
    verify_edges(id, lineage, edges)
    try:
        agent = Agent(
            id=id,
            elixir=persona(id, elixir_version),
            lineage=lineage,
            system_prompt=prompt,
            tools=tuple(json.loads(tools)),
            members=tuple(ElixirRef.model_validate(m) for m in json.loads(members)),
            created_at=created_at(stored_at),
        )
        stored_seal = json.loads(seal) if seal is not None else None
    except (ValueError, TypeError) as err:  # pydantic's ValidationError is a ValueError
        raise LineageError(f"agent {id}: unreadable agent record ({err.__class__.__name__})") from None
    verify_seal(agent, stored_seal)  # first: its message names the field group that was changed
    assert isinstance(stored_seal, dict)  # verify_seal raised otherwise
    check(stored_seal.get("mac"), agent_mac(sealer, id, elixir_version, stored_seal["record_hash"]), f"agent {id}")
    return agent


def verify_agent_lineage(agent_id: str, data: dict[str, Any], stored_hash: Callable[[str, int], str | None]) -> Lineage:
    """Verify an agent's stored lineage record.

    Checks the ``lineage_hash`` (see :func:`furnace.domain.lineage.verify_lineage`),
    that a derived agent id still matches it, and that every parent ref's
    ``content_hash`` equals the stored elixir version's (``stored_hash(id, v)``
    returns None when that version is not in this store).
    """
    what = f"agent {agent_id}"
    lineage = verify_lineage(data, what=what)
    if agent_id.startswith(AGENT_PREFIX) and agent_id != agent_id_for(lineage.lineage_hash):
        raise LineageError(
            f"{what}: id does not match its lineage_hash {lineage.lineage_hash[:12]}…: the record was altered"
        )
    for parent in lineage.parents:
        actual = stored_hash(parent.id, parent.version)
        if actual is not None and actual != parent.content_hash:
            raise LineageError(
                f"{what}: parent {parent} content_hash mismatch — lineage says "
                f"{parent.content_hash[:12]}…, the store holds {actual[:12]}…"
            )
    return lineage


def decode_elixir(row: Sequence[Any]) -> Elixir:
    """The elixir of an ``elixir_versions`` row ``(id, version, content_hash, body, created_at, deleted_at,
    seal)`` (timestamps naive UTC), unverified."""
    import json

    id, version, _, body, created_at, deleted_at = row[:6]
    data = json.loads(body)
    data.update(
        id=id,
        version=version,
        created_at=None if created_at is None else created_at.replace(tzinfo=UTC),
        deleted_at=None if deleted_at is None else deleted_at.replace(tzinfo=UTC),
    )
    return Elixir.model_validate(data)


def plan_versions(
    items: Sequence[tuple[Elixir, str]],
    latest: dict[str, tuple[int, str, Any, str]],
    origin: Origin,
    clock: Callable[[], datetime],
) -> tuple[list[ElixirRef], list[tuple[Elixir, str]]]:
    """What saving ``(elixir, id)`` pairs writes, given each id's latest ``(version, content_hash,
    deleted_at, origin)``: the ref of each pair (an existing one for identical content) and the new versions
    to insert with their origin (an id keeps the origin of its first save). A deleted id raises."""
    refs: list[ElixirRef] = []
    new: list[tuple[Elixir, str]] = []
    for elixir, id in items:
        current = latest.get(id)
        if current is not None and current[2] is not None:
            raise deleted_id_error(id)
        if current is not None and current[1] == elixir.content_hash:
            refs.append(ElixirRef(id=id, version=current[0], content_hash=current[1]))
            continue
        version = current[0] + 1 if current is not None else 1
        stored = as_stored(elixir, id=id, version=version, created_at=clock())
        row_origin = current[3] if current is not None else origin
        new.append((stored, row_origin))
        latest[id] = (version, stored.content_hash, None, row_origin)
        refs.append(stored.ref)
    return refs, new


def loadable_for_fusion(
    refs: Sequence[ElixirRef],
    rows: Sequence[Sequence[Any]],
    sealer: Sealer,
    verify_agents: Callable[[Sequence[str]], None],
) -> list[Elixir]:
    """``load_many_for_fusion`` over the ``elixir_versions`` ``rows`` of the refs' ids: each ref's version,
    verified and matching the ref, not withdrawn; nothing when an agent among them fails verification
    (each load then raises where it is used)."""
    by_version = {(row[0], row[1]): row for row in rows}
    loaded: list[Elixir] = []
    for ref in refs:
        found = by_version.get((ref.id, ref.version))
        if found is None:
            continue
        try:
            elixir = checked_ref(stored_elixir(found, sealer), ref)
        except LineageError:
            continue
        if not elixir.withdrawn:
            loaded.append(elixir)
    try:
        verify_agents([e.id for e in loaded])
    except LineageError:
        return []
    return loaded


def stored_elixir(row: Sequence[Any], sealer: Sealer, *, verify: bool = True) -> Elixir:
    """The elixir of an ``elixir_versions`` row (as :func:`decode_elixir` takes it); ``verify`` checks its
    keyed seal and recomputes its content hash against the stored one. A listing does not verify (it
    carries the stored hash); every read of one elixir does."""
    from furnace.storage.seals import check, elixir_seal

    id, version, content_hash, _, _, _, seal = row
    if verify:
        whose = f" (the persona of agent {id})" if id.startswith(AGENT_PREFIX) else ""
        check(seal, elixir_seal(sealer, id, version, content_hash), f"elixir {id}@{version}{whose}")
    elixir = decode_elixir(row)
    if not verify:
        elixir.__dict__["content_hash"] = content_hash  # seeds the cached property: no hashing
        return elixir
    if elixir.content_hash != content_hash:
        raise LineageError(
            f"elixir {id}@{version}: stored content_hash {content_hash[:12]}… does not match its "
            f"content ({elixir.content_hash[:12]}…): the record was altered"
        )
    return elixir
