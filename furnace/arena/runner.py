"""The arena: sessions, user turns as resumable runs, events.

:class:`Arena` is what the CLI and the app call::

    arena = Arena(arena_store, elixir_store, llm)
    session = arena.create_session(["ada", "bo", "cy", "di"])
    for event in arena.stream(session.id, "@all count off!"):
        ...                                  # typed events (furnace.arena.events)
    arena.resume(run_id)                     # finish an interrupted turn
    arena.cancel(run_id)                     # lands before the next speaker
    arena.messages(session.id)               # the transcript

A turn: classify the message (code) → plan (router, or the supervisor for open
discussion) stored once → each speaker through the persona pipeline as one
logical model call (retries happen only inside the model client, so a speaker
costs at most ``FURNACE_MAX_RETRIES + 1`` requests), then a checkpoint →
``RunFinished``. A resumed run
loads its stored plan, skips checkpointed speakers and writes replies by their
deterministic ids, so nothing is repeated or duplicated.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from furnace.arena.directives import Directive, DirectiveKind, MemberName, classify, strip_mentions
from furnace.arena.events import (
    ArenaEvent,
    Delta,
    FinalReply,
    PlanCreated,
    RunCancelled,
    RunFinished,
    RunStarted,
    SpeakerFailed,
    SpeakerStarted,
)
from furnace.arena.lease import LEASE_TTL_S, Holder, busy_error
from furnace.arena.models import (
    MAX_MEMBERS,
    ArenaMessage,
    ArenaSession,
    Checkpoint,
    Plan,
    ReplyRecord,
    RunRecord,
    SpeakerTask,
    new_run_id,
    new_session_id,
    reply_id_for,
)
from furnace.arena.relevance import TextEmbedder
from furnace.arena.router import route
from furnace.arena.speaker import ContextBuilder, HistoryTurn, Persona, SpokenReply, resolve_persona, speak
from furnace.arena.store import ArenaStore
from furnace.arena.supervisor import plan_open_discussion
from furnace.domain.errors import InputError
from furnace.llm.seam import LLM
from furnace.storage.store import ElixirStore, snapshot_soon

CheckpointHook = Callable[[str, int], None]


@dataclass
class _Lease:
    """Our lease on the run being driven. Nobody can take a lease before it expires, so it is
    renewed (one statement) only once a tenth of :data:`LEASE_TTL_S` has passed since it was last
    claimed or renewed, not before every speaker."""

    holder: Holder
    renewed_at: float = -LEASE_TTL_S
    released: bool = False  # by the last speaker's record (which also marks the run finished)

    def keep(self, store: ArenaStore, run_id: str) -> Holder | None:
        """Claim or renew when due; the process holding the run instead, or None when it is ours."""
        now = time.monotonic()
        if now - self.renewed_at < LEASE_TTL_S / 10:
            return None
        taken = store.claim_run(run_id, self.holder, LEASE_TTL_S)
        if taken is None:
            self.renewed_at = now
        return taken


@dataclass(frozen=True)
class _Attempt:
    """One speaker's call: its reply (None when it failed, with the error), and the requests it made."""

    spoken: SpokenReply | None
    error: str
    attempts: int


@dataclass
class RunOutcome:
    """Everything one call to :meth:`Arena.say` / :meth:`Arena.resume` emitted."""

    run_id: str | None
    events: list[ArenaEvent] = field(default_factory=list)

    @property
    def replies(self) -> list[FinalReply]:
        return [e for e in self.events if isinstance(e, FinalReply)]

    @property
    def failures(self) -> list[SpeakerFailed]:
        return [e for e in self.events if isinstance(e, SpeakerFailed)]

    @property
    def cancelled(self) -> bool:
        return any(isinstance(e, RunCancelled) for e in self.events)

    @property
    def plan(self) -> Plan | None:
        return next((e.plan for e in self.events if isinstance(e, PlanCreated)), None)


class Arena:
    """Group chat (and single chat) over an arena store, an elixir store and a model."""

    def __init__(
        self,
        store: ArenaStore,
        elixirs: ElixirStore,
        llm: LLM,
        *,
        llm_for_model: Callable[[str], LLM] | None = None,
        context: ContextBuilder | None = None,
        embedder: TextEmbedder | None = None,
        seed: int = 0,
        after_checkpoint: CheckpointHook | None = None,
    ) -> None:
        self.store = store
        self.elixirs = elixirs
        self.llm = llm
        self.llm_for_model = llm_for_model
        self.context = context
        self.embedder = embedder  # ranks members by meaning for the supervisor (open discussion only)
        self.seed = seed
        self.after_checkpoint = after_checkpoint

    # --- sessions ------------------------------------------------------------

    def create_session(
        self, members: Sequence[str], *, model: str | None = None, title: str = "", session_id: str | None = None
    ) -> ArenaSession:
        """A session of 1–8 distinct, existing members (agent or elixir ids); the first is primary."""
        ids = [m.strip() for m in members if m.strip()]
        if not 1 <= len(ids) <= MAX_MEMBERS:
            raise InputError(f"a session needs 1 to {MAX_MEMBERS} members, got {len(ids)}", field="members")
        dupes = sorted({m for m in ids if ids.count(m) > 1})
        if dupes:
            raise InputError(f"members are repeated: {', '.join(dupes)}", field="members")
        for member in ids:
            resolve_persona(self.elixirs, member)  # NotFound names the member
        session = ArenaSession(
            id=session_id or new_session_id(), members=tuple(ids), model=model or self.llm.model_name, title=title
        )
        self.store.save_session(session)
        return self.store.get_session(session.id)

    def personas(self, session: ArenaSession) -> dict[str, Persona]:
        """The session's members resolved to personas (latest versions), in member order."""
        return {m: resolve_persona(self.elixirs, m) for m in session.members}

    def messages(self, session_id: str) -> list[ArenaMessage]:
        """The transcript: each user turn followed by its replies in speaker order."""
        replies = self.store.replies(session_id=session_id)
        out: list[ArenaMessage] = []
        for run in self.store.list_runs(session_id):
            out.append(ArenaMessage(run_id=run.run_id, role="user", text=run.message))
            out.extend(
                ArenaMessage(
                    run_id=r.run_id,
                    role="member",
                    text=r.text,
                    member_id=r.member_id,
                    member_name=r.member_name,
                    speaker_index=r.speaker_index,
                    reply_id=r.reply_id,
                )
                for r in replies
                if r.run_id == run.run_id
            )
        return out

    def sessions(self) -> list[ArenaSession]:
        """Every session, newest first."""
        return self.store.list_sessions()

    def runs(self, session_id: str) -> list[RunRecord]:
        """The runs (user turns) of a session, oldest first, with plan and status."""
        return self.store.list_runs(session_id)

    def plan_of(self, run_id: str) -> Plan | None:
        """The stored plan of a run (None before planning)."""
        return self.store.get_run(run_id).plan

    def cancel(self, run_id: str) -> None:
        """Request a cancel; it lands before the run's next speaker. A run that has ended (finished,
        failed or cancelled) is refused with an InputError and nothing is written."""
        status = self.store.get_run(run_id).status
        if status != "running":
            again = "; resume picks it up again" if status == "cancelled" else ""
            raise InputError(f"run {run_id} already {status}; nothing to cancel{again}", field="run")
        self.store.request_cancel(run_id)

    # --- turns -----------------------------------------------------------------

    def say(
        self,
        session_id: str,
        message: str,
        *,
        run_id: str | None = None,
        on_event: Callable[[ArenaEvent], None] | None = None,
    ) -> RunOutcome:
        """Run one user turn to the end, calling ``on_event`` for each event."""
        return self._collect(self.stream(session_id, message, run_id=run_id), on_event)

    def resume(self, run_id: str, *, on_event: Callable[[ArenaEvent], None] | None = None) -> RunOutcome:
        """Finish an interrupted or cancelled run (the remaining speakers only)."""
        return self._collect(self.stream_resume(run_id), on_event)

    def stream(self, session_id: str, message: str, *, run_id: str | None = None) -> Iterator[ArenaEvent]:
        """Events of one user turn, as they happen."""
        message = message.strip()
        if not message:
            raise InputError("the message is empty", field="message")
        session = self.store.get_session(session_id)
        personas = self.personas(session)
        directive = classify(message, [MemberName(id=m, name=p.name) for m, p in personas.items()])
        if directive.kind is DirectiveKind.STOP:
            yield from self._stop(session)
            return
        if directive.kind is DirectiveKind.CONTINUE:
            target = self._latest(session, ("running", "cancelled"))
            if target is not None:
                yield from self.stream_resume(target.run_id)
            return
        record = RunRecord(
            run_id=run_id or new_run_id(),
            session_id=session.id,
            turn=0,
            message=message,
            directive=directive.kind.value,
        )
        run = self.store.start_run(record)  # a given id may exist already: its plan and checkpoints stand
        yield from self._drive(run, session, personas, directive, resumed=False)

    def stream_resume(self, run_id: str) -> Iterator[ArenaEvent]:
        """Events of a resumed run: its stored plan, remaining speakers only."""
        run = self.store.get_run(run_id)
        session = self.store.get_session(run.session_id)
        personas = self.personas(session)
        if run.status == "cancelled" or run.cancel_requested:
            self.store.set_status(run_id, "running", clear_cancel=True)
        directive = classify(run.message, [MemberName(id=m, name=p.name) for m, p in personas.items()])
        yield from self._drive(self.store.get_run(run_id), session, personas, directive, resumed=True)

    # --- internals -------------------------------------------------------------

    def _collect(self, events: Iterator[ArenaEvent], on_event: Callable[[ArenaEvent], None] | None) -> RunOutcome:
        outcome = RunOutcome(run_id=None)
        for event in events:
            outcome.run_id = outcome.run_id or event.run_id
            outcome.events.append(event)
            if on_event is not None:
                on_event(event)
        return outcome

    def _latest(self, session: ArenaSession, statuses: tuple[str, ...]) -> RunRecord | None:
        runs = [r for r in self.store.list_runs(session.id) if r.status in statuses]
        return runs[-1] if runs else None

    def _stop(self, session: ArenaSession) -> Iterator[ArenaEvent]:
        target = self._latest(session, ("running",))
        if target is None:
            return
        self.store.request_cancel(target.run_id)
        done = len(self.store.checkpoints(target.run_id))
        total = len(target.plan.speakers) if target.plan else 0
        yield RunCancelled(run_id=target.run_id, session_id=session.id, completed=done, remaining=max(0, total - done))

    def _history(self, session: ArenaSession, run: RunRecord | None) -> list[HistoryTurn]:
        """The conversation before ``run`` (and ``run``'s own replies so far); ``run`` None: every stored turn."""
        turns: list[HistoryTurn] = []
        replies = self.store.replies(session_id=session.id)
        for past in self.store.list_runs(session.id):
            if run is not None and past.turn > run.turn:
                break
            if run is None or past.run_id != run.run_id:
                turns.append(HistoryTurn(text=past.message))
            turns.extend(
                HistoryTurn(text=r.text, speaker_id=r.member_id, speaker_name=r.member_name)
                for r in replies
                if r.run_id == past.run_id
            )
        return turns

    def _make_plan(
        self, run: RunRecord, session: ArenaSession, personas: dict[str, Persona], directive: Directive, llm: LLM
    ) -> Plan:
        """The turn's plan: routed, or the supervisor's model call."""
        plan = route(directive, session.members, run.message)
        if plan is not None:
            return plan
        return plan_open_discussion(
            run.message,
            [p.elixir.model_copy(update={"id": m}) for m, p in personas.items()],
            directive,
            llm=llm,
            embedder=self.embedder,
            seed=self.seed,
            run_id=run.run_id,
        )

    def _cancelled(self, run: RunRecord, plan: Plan, ids: dict[str, Any]) -> RunCancelled:
        self.store.set_status(run.run_id, "cancelled")
        finished = len(self.store.checkpoints(run.run_id))
        return RunCancelled(**ids, completed=finished, remaining=len(plan.speakers) - finished)

    def _speak(
        self,
        personas: dict[str, Persona],
        task: SpeakerTask,
        run: RunRecord,
        llm: LLM,
        history: list[HistoryTurn],
        max_tokens: int,
    ) -> _Attempt:
        """One speaker, one logical call (retries live in the model client only)."""
        try:
            spoken = speak(
                personas[task.member_id],
                run.message,
                llm=llm,
                instruction=task.task,
                question=strip_mentions(run.message, [MemberName(id=m, name=p.name) for m, p in personas.items()]),
                ordinal=task.ordinal,
                history=list(history),
                context=self.context,
                group=[p.name for p in personas.values()],
                max_tokens=max_tokens,
                seed=self.seed,
                run_id=run.run_id,
            )
        except Exception as err:  # a failing speaker is data, never the end of the run
            return _Attempt(None, f"{err.__class__.__name__}: {err}", int(getattr(err, "attempts", 1) or 1))
        return _Attempt(spoken, "", spoken.attempts)

    def _model(self, session: ArenaSession, run: RunRecord) -> LLM:
        base = self.llm_for_model(session.model) if self.llm_for_model else self.llm
        return base.for_run(run.run_id) if hasattr(base, "for_run") else base

    def _drive(
        self,
        run: RunRecord,
        session: ArenaSession,
        personas: dict[str, Persona],
        directive: Directive,
        *,
        resumed: bool,
    ) -> Iterator[ArenaEvent]:
        holder = _Lease(Holder.here())
        busy = holder.keep(self.store, run.run_id)
        if busy is not None:
            raise busy_error(run.run_id, busy)
        try:
            yield from self._drive_held(run, session, personas, directive, resumed=resumed, holder=holder)
        finally:
            if not holder.released:
                self.store.release_run(run.run_id, holder.holder)

    def _drive_held(
        self,
        run: RunRecord,
        session: ArenaSession,
        personas: dict[str, Persona],
        directive: Directive,
        *,
        resumed: bool,
        holder: _Lease,
    ) -> Iterator[ArenaEvent]:
        ids: dict[str, Any] = {"run_id": run.run_id, "session_id": session.id}
        llm = self._model(session, run)
        yield RunStarted(**ids, message=run.message, directive=run.directive, resumed=resumed)
        cancel = run.cancel_requested
        if run.plan is None:
            made = self._make_plan(run, session, personas, directive, llm)
            stored = self.store.set_plan(run.run_id, made)  # one stored before (a reused id) stands
            plan = stored.plan
            assert plan is not None
            cancel = cancel or stored.cancel_requested
            yield PlanCreated(**ids, plan=plan, reused=False)
        else:
            plan = run.plan
            yield PlanCreated(**ids, plan=plan, reused=True)
        history = self._history(session, run)
        # A fresh run has no checkpoints; a resumed one (or a reused run id) may.
        done = self.store.checkpoints(run.run_id) if resumed or run.plan is not None else {}
        yield from self._speakers(run, session, personas, plan, history, done, holder, llm, cancel=cancel)

    def _speakers(
        self,
        run: RunRecord,
        session: ArenaSession,
        personas: dict[str, Persona],
        plan: Plan,
        history: list[HistoryTurn],
        done: dict[int, Checkpoint],
        holder: _Lease,
        llm: LLM,
        *,
        cancel: bool = False,
    ) -> Iterator[ArenaEvent]:
        """The plan's speakers not ``done`` yet, in order, each recorded before the next one speaks
        (a cancel or a lost lease stops the turn before a speaker's call), then ``RunFinished``."""
        ids: dict[str, Any] = {"run_id": run.run_id, "session_id": session.id}
        replied = failed = 0
        todo = [(index, task) for index, task in enumerate(plan.speakers) if index not in done]
        for position, (index, task) in enumerate(todo):
            persona = personas[task.member_id]
            if cancel:
                yield self._cancelled(run, plan, ids)
                return
            taken = holder.keep(self.store, run.run_id)  # renew when due: this speaker may take a while
            if taken is not None:  # our lease ran out and another process took the run over
                raise busy_error(run.run_id, taken)
            yield SpeakerStarted(
                **ids,
                index=index,
                member_id=task.member_id,
                name=persona.name,
                task=task.task,
                ordinal=task.ordinal,
            )
            attempt = self._speak(personas, task, run, llm, history, plan.budget.max_tokens)
            spoken = attempt.spoken
            if spoken is not None:
                history.append(HistoryTurn(text=spoken.text, speaker_id=task.member_id, speaker_name=persona.name))
            # the last speaker's record also ends the run and gives the lease back (one transaction)
            finish = holder.holder if position == len(todo) - 1 else None
            reply: ReplyRecord | None = None
            if spoken is None:
                checkpoint = Checkpoint(
                    run_id=run.run_id,
                    speaker_index=index,
                    status="failed",
                    error=attempt.error[:500],
                    attempts=attempt.attempts,
                )
            else:
                yield Delta(**ids, index=index, member_id=task.member_id, text=spoken.text)
                reply = ReplyRecord(
                    reply_id=reply_id_for(run.run_id, index),
                    run_id=run.run_id,
                    session_id=session.id,
                    speaker_index=index,
                    member_id=task.member_id,
                    member_name=persona.name,
                    member_version=persona.version,
                    text=spoken.text,
                    ordinal=task.ordinal,
                    corrected=spoken.corrected,
                )
                checkpoint = Checkpoint(
                    run_id=run.run_id,
                    speaker_index=index,
                    status="done",
                    reply_id=reply.reply_id,
                    attempts=attempt.attempts,
                )
            cancel = self.store.record_speaker(checkpoint, reply, finish=finish)
            holder.released = finish is not None
            if reply is None:
                failed += 1
                yield SpeakerFailed(
                    **ids,
                    index=index,
                    member_id=task.member_id,
                    name=persona.name,
                    error=attempt.error,
                    attempts=attempt.attempts,
                )
            else:
                replied += 1
                yield FinalReply(
                    **ids,
                    index=index,
                    member_id=task.member_id,
                    name=persona.name,
                    reply_id=reply.reply_id,
                    text=reply.text,
                    ordinal=task.ordinal,
                    corrected=reply.corrected,
                )
            if self.after_checkpoint is not None:
                self.after_checkpoint(run.run_id, len(done) + replied + failed)
        # A turn nobody answered (every speaker failed, now or before a resume) is recorded as failed,
        # not finished: the record behind the last speaker says finished, this write comes after it.
        answered = replied + sum(1 for c in done.values() if c.status == "done")
        status: Literal["finished", "failed"] = "finished" if answered else "failed"
        if not holder.released or status == "failed":  # not released: no speaker was left to run (a resume)
            self.store.set_status(run.run_id, status)
        snapshot_soon(self.store)  # analysis reads the turn from a fresh snapshot
        yield RunFinished(**ids, replies=replied, failed=failed, skipped_done=len(done), status=status)
