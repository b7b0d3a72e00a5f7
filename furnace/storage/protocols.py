"""Every store protocol, in one module: what a backend must offer, declared once.

Declarations only; the implementations live with their backend: in memory
(``furnace.storage.memory``, ``furnace.evolution.records.MemoryResults``,
``furnace.writing.content_memory``, ``furnace.arena.store.InMemoryArenaStore``,
``furnace.scoring.picks.MemoryPicks``, ``furnace.fusion.synthesis.MemoryKV``,
``furnace.fusion.embedding.MemoryVectors``) and in the relational store
(``furnace.storage.sql``: SQLite or PostgreSQL). Every method a caller uses is
declared here, batch methods included, and every backend implements all of them:
callers call them, they never probe for one (``getattr(store, "name", None)``;
``tests/storage/test_protocols.py`` checks the implementations against these
declarations, ``python -m bench complexity`` counts probes).

The model's response cache and call ledger are declared with the model seam they
serve (:class:`furnace.llm.cache.ResponseCache`, :class:`furnace.llm.cache.CallLedger`)
and re-exported here, so this module lists every store protocol.

The rules each store keeps are documented where its records are defined
(``furnace.storage.store`` for the elixir library, agents and lineage;
``furnace.evolution.records``, ``furnace.writing.content``, ``furnace.arena.store``,
``furnace.scoring.picks``, ``furnace.fusion.synthesis``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from furnace.llm.cache import CallLedger, ResponseCache

if TYPE_CHECKING:
    from furnace.arena.lease import Holder
    from furnace.arena.models import ArenaSession, Checkpoint, Plan, ReplyRecord, RunRecord, RunStatus
    from furnace.domain.agent import Agent, LineageNode
    from furnace.domain.elixir import Elixir, ElixirRef
    from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord
    from furnace.scoring.picks import Pick
    from furnace.storage.store import ElixirSummary, Origin
    from furnace.writing.content import (
        ChatMessage,
        ChatSession,
        Content,
        ContentBatch,
        ContentVersion,
        RevisionRecord,
    )

__all__ = [
    "ArenaStore",
    "CallLedger",
    "ContentStore",
    "ElixirStore",
    "ExperimentResults",
    "KV",
    "PickStore",
    "ResponseCache",
    "Transactional",
    "VectorStore",
]

T = TypeVar("T")


class Transactional(Protocol):
    """Units of work and snapshots, offered by every store that persists records of a home (the
    elixir library, experiments, content, the arena). In memory both are nothing to do."""

    def unit(self, *, one_transaction: bool = True) -> AbstractContextManager[Any]:
        """A context in which every call of this store (and of any other store on the same database)
        uses one connection and, with ``one_transaction``, one transaction for its writes (else each
        write is atomic on its own). Flows wrap each unit -- a revision step, an arena speaker, a page
        render -- in it (``furnace.storage.store.unit_of_work``), never a model call."""
        ...

    def snapshot_soon(self) -> None:
        """Ask for a fresh analysis snapshot of the home, taken in the background."""
        ...


class ElixirStore(Transactional, Protocol):
    """The elixir library, agents and the lineage DAG, with the batch and transaction methods fusion
    and the evolution loop use to read and write several records at once (every backend has them)."""

    def save_elixir(self, elixir: Elixir, *, origin: Origin = "library", if_latest: int | None = None) -> ElixirRef:
        """Store new content as the next version; identical content is a no-op.

        With ``if_latest`` (compare-and-set), save only while version ``if_latest`` is still the
        latest and not deleted; otherwise raise :class:`StaleVersion` and write nothing (a
        read-modify-write then re-reads and tries again, so no one's edit is lost)."""
        ...

    def save_elixirs(self, elixirs: Sequence[Elixir], *, origin: Origin = "library") -> list[ElixirRef]:
        """Save several elixirs all-or-nothing (one transaction); each as ``save_elixir`` would."""
        ...

    def get_elixir(self, id: str, version: int | None = None) -> Elixir:
        """One version (latest when ``version`` is None); raises NotFound."""
        ...

    def get_by_ref(self, ref: ElixirRef) -> Elixir:
        """The exact version; raises LineageError if its content hash differs."""
        ...

    def load_for_fusion(self, ref_or_id: ElixirRef | str) -> Elixir:
        """Like get, but a withdrawn elixir raises LineageError
        ("agent depends on withdrawn elixir X v3")."""
        ...

    def history(self, id: str) -> list[Elixir]:
        """Every version of ``id``, oldest first."""
        ...

    def list_elixirs(
        self,
        *,
        query: str | None = None,
        origin: Origin | None = "library",
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[Elixir]:
        """Latest versions, sorted by id; ``query`` matches name, id or expertise (case-insensitive)."""
        ...

    def list_summaries(
        self,
        *,
        query: str | None = None,
        origin: Origin | None = "library",
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[ElixirSummary]:
        """:meth:`list_elixirs` as summaries (same selection and order), without decoding bodies."""
        ...

    def delete_elixir(self, id: str) -> None:
        """Soft-delete every version of ``id``; raises NotFound."""
        ...

    def save_agent(self, agent: Agent) -> bool:
        """Persist an agent, its child elixir and its lineage edges. Returns False if it existed."""
        ...

    def get_agent(self, id: str) -> Agent:
        """Load and verify an agent; raises NotFound or LineageError."""
        ...

    def verify_agents(self, ids: Sequence[str]) -> None:
        """Raise LineageError if any agent among ``ids`` was altered since it was saved; ids that are
        not agents are ignored (for readers that walk lineage on their own)."""
        ...

    def list_agents(self, *, limit: int | None = None) -> list[Agent]:
        """Agents, newest first."""
        ...

    def add_edge(
        self, parent: str, child: str, *, operator: str, op_version: str = "", parent_version: int | None = None
    ) -> None:
        """A lineage edge (idempotent)."""
        ...

    def ancestors(self, id: str, *, max_depth: int | None = None) -> list[LineageNode]:
        """Every ancestor of ``id`` with its shortest depth (recursive)."""
        ...

    def descendants(self, id: str, *, max_depth: int | None = None) -> list[LineageNode]:
        """Every descendant of ``id`` with its shortest depth (recursive)."""
        ...

    def common_ancestors(self, a: str, b: str) -> list[str]:
        """Ids that are ancestors of both."""
        ...

    def same_blood(self, a: str, b: str) -> bool:
        """True when one descends from the other or they share an ancestor."""
        ...

    # --- batches and transactions ---

    def save_agents(self, agents: Sequence[Agent]) -> list[bool]:
        """Persist agents (each with its child elixir and lineage edges) all-or-nothing; per agent, False
        if it existed (kept as stored; the first of an id listed twice is the one saved)."""
        ...

    def load_many_for_fusion(self, refs: Sequence[ElixirRef]) -> list[Elixir]:
        """What ``load_for_fusion`` gives for each of ``refs`` (a run's parents read ahead); a ref that
        would fail there is left out, so its own load raises where it is used."""
        ...

    def child_ids(self, parents: Sequence[str]) -> dict[str, set[str]]:
        """The ids of each parent's children by the lineage edges, unverified: a filter for "might this
        agent be stored?", never a read of an agent."""
        ...

    def stored_child(self, id: str, parents: Sequence[ElixirRef]) -> Agent:
        """``get_agent(id)`` for a fusion's child of ``parents`` (NotFound when it is not stored)."""
        ...

    def atomically(self, work: Callable[[], T]) -> T:
        """Run ``work`` in one transaction: every write inside it commits together or not at all."""
        ...


class ContentStore(Transactional, Protocol):
    """Contents, versions, chat sessions, messages (light) and revisions (heavy)."""

    def commit(self, batch: ContentBatch) -> list[ChatMessage]:
        """Write the batch in one transaction; returns the messages with ``seq``/``id``.

        A new ``version`` must be exactly one above the stored latest (else
        :class:`~furnace.domain.errors.StoreError`: someone else edited meanwhile).
        Rows already stored under the same natural key are left as they are.
        """
        ...

    def get_content(self, content_id: str) -> Content:
        """The content item; raises NotFound."""
        ...

    def list_contents(self, *, persona_id: str | None = None) -> list[Content]:
        """Content items, newest first."""
        ...

    def get_version(self, content_id: str, version: int | None = None) -> ContentVersion:
        """One version (latest when None); raises NotFound."""
        ...

    def versions(self, content_id: str) -> list[ContentVersion]:
        """Every version, oldest first."""
        ...

    def get_session(self, content_id: str) -> ChatSession | None:
        """The content's chat session, if one was created."""
        ...

    def messages(self, session_id: str) -> list[ChatMessage]:
        """The session's messages in order."""
        ...

    def get_revision(self, revision_id: str) -> RevisionRecord:
        """One revision record (loaded on demand); raises NotFound."""
        ...

    def revisions(self, content_id: str) -> list[RevisionRecord]:
        """The content's revision records, oldest first."""
        ...

    def unprocessed_revisions(self, *, limit: int | None = None) -> list[RevisionRecord]:
        """Revisions whose preferences were not extracted yet, oldest first."""
        ...

    def mark_processed(
        self,
        revision_id: str,
        *,
        persona_id: str,
        persona_version: int | None,
        preferences: Sequence[dict[str, Any]],
        status: str,
    ) -> bool:
        """Mark a revision as processed (idempotent); False when it already was."""
        ...

    def is_processed(self, revision_id: str) -> bool:
        """Whether preference extraction already ran for this revision."""
        ...


class ExperimentResults(Transactional, Protocol):
    """Where experiment facts are kept (the system of record is the live store)."""

    def start_experiment(self, record: ExperimentRecord) -> None:
        """Insert the experiment if new (a re-run keeps the existing row, status back to running)."""
        ...

    def finish_experiment(self, experiment_id: str, status: str, summary: dict[str, Any]) -> None:
        """Set the final status and summary."""
        ...

    def get_experiment(self, experiment_id: str) -> ExperimentRecord | None: ...

    def list_experiments(self) -> list[ExperimentRecord]: ...

    def save_individual(self, record: IndividualRecord) -> None:
        """Insert the individual and its scores (no-op for existing keys)."""
        ...

    def save_individuals(self, records: Sequence[IndividualRecord]) -> None:
        """:meth:`save_individual` for each of ``records``, in one transaction (one statement per table
        where the database can)."""
        ...

    def replace_individual(self, record: IndividualRecord) -> None:
        """Replace whatever is recorded at the record's (experiment, generation, slot), and a stale row
        of the same agent in that generation, scores included (a rerun's new evaluation), at once."""
        ...

    def individual_by_slot(self, experiment_id: str, generation: int, slot: int) -> IndividualRecord | None: ...

    def individual(self, experiment_id: str, generation: int, agent_id: str) -> IndividualRecord | None: ...

    def individuals(self, experiment_id: str, generation: int | None = None) -> list[IndividualRecord]: ...

    def save_generation(self, record: GenerationRecord) -> None:
        """Insert or replace (a rerun that rescored individuals recomputes the generation)."""
        ...

    def generations(self, experiment_id: str) -> list[GenerationRecord]: ...


class ArenaStore(Transactional, Protocol):
    """Persistence of the arena."""

    def save_session(self, session: ArenaSession) -> None:
        """Create a session (idempotent by id)."""
        ...

    def get_session(self, session_id: str) -> ArenaSession:
        """One session; raises NotFound."""
        ...

    def list_sessions(self) -> list[ArenaSession]:
        """Sessions, newest first."""
        ...

    def start_run(self, run: RunRecord) -> RunRecord:
        """Insert a run unless it exists, numbering its turn; returns the stored run."""
        ...

    def get_run(self, run_id: str) -> RunRecord:
        """One run; raises NotFound."""
        ...

    def list_runs(self, session_id: str) -> list[RunRecord]:
        """Runs of a session, oldest first."""
        ...

    def set_plan(self, run_id: str, plan: Plan) -> RunRecord:
        """Store the run's plan if it has none; returns the run as stored (with ``plan``, or with the
        plan it had, which stands) and its cancel flag, read by the same statement."""
        ...

    def record_speaker(
        self, checkpoint: Checkpoint, reply: ReplyRecord | None, *, finish: Holder | None = None
    ) -> bool:
        """Persist a speaker's outcome (reply and checkpoint) idempotently and atomically; returns
        whether a cancel of the run has been requested (read after the record). With ``finish`` (the
        run's last speaker), the run is marked finished, which frees ``finish``'s lease."""
        ...

    def checkpoints(self, run_id: str) -> dict[int, Checkpoint]:
        """Finished speakers of a run by index."""
        ...

    def replies(self, *, run_id: str | None = None, session_id: str | None = None) -> list[ReplyRecord]:
        """Final replies, in run then speaker order."""
        ...

    def set_status(self, run_id: str, status: RunStatus, *, clear_cancel: bool = False) -> None:
        """Mark a run running/finished/cancelled."""
        ...

    def request_cancel(self, run_id: str) -> None:
        """Ask a running run to stop at the next speaker boundary."""
        ...

    def claim_run(self, run_id: str, holder: Holder, ttl_s: float) -> Holder | None:
        """Take or renew the run's lease for ``ttl_s``; None when taken, else the live holder."""
        ...

    def release_run(self, run_id: str, holder: Holder) -> None:
        """Give the lease back (only ``holder``'s own)."""
        ...

    def cancel_requested(self, run_id: str) -> bool:
        """Whether a cancel was requested."""
        ...


class PickStore(Protocol):
    """Where people's picks are kept (the home's store: SQLite or PostgreSQL)."""

    def add(self, pick: Pick) -> Pick:
        """Store a new pick (its ``created_at`` set by the store); adding the same ``pick_id`` again
        returns the stored pick unchanged."""
        ...

    def undo(self, pick_id: str, *, who: str) -> Pick:
        """Mark a pick undone (kept, left out of every figure); only its author may. Undoing an undone
        pick changes nothing. NotFound for an unknown id, InputError for someone else's pick."""
        ...

    def picks(self, experiment_id: str, *, include_undone: bool = False) -> list[Pick]:
        """An experiment's picks, oldest first."""
        ...

    def last(self, experiment_id: str, who: str) -> Pick | None:
        """The newest pick of ``who`` in the experiment that is not undone."""
        ...


class KV(Protocol):
    """A JSON key-value store with insert-if-absent and expiry."""

    def get(self, key: str) -> dict[str, Any] | None:
        """The live value under ``key`` (None when absent or expired)."""
        ...

    def put_if_absent(self, key: str, value: dict[str, Any], ttl_s: float | None = None) -> dict[str, Any]:
        """Store ``value`` unless a live value exists; return the value that is stored."""
        ...

    def put_many_if_absent(self, items: Sequence[tuple[str, dict[str, Any], float | None]]) -> list[dict[str, Any]]:
        """``put_if_absent`` for each ``(key, value, ttl_s)``, in one transaction (one statement where the
        database can); the stored (winning) values, in order."""
        ...


class VectorStore(Protocol):
    """Vectors by (model, text hash), e.g. ``furnace.storage.sql.kv.SQLVectors``."""

    def get_many(self, model: str, text_hashes: Sequence[str]) -> dict[str, list[float]]: ...

    def put_many(self, model: str, vectors: Mapping[str, Sequence[float]]) -> None: ...
