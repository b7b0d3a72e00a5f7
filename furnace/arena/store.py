"""Where arena sessions, runs, replies and checkpoints live.

:class:`ArenaStore` is the protocol; :class:`InMemoryArenaStore` is the twin for
unit tests and benchmarks; ``furnace.storage.sql.arena.SQLArenaStore`` is
the system of record. Rules both keep:

- a run's plan is set once (``set_plan`` on a run that has one is a no-op);
- ``start_run`` numbers the run (``turn`` = the count of earlier runs of the session);
- ``record_speaker`` writes the reply (by ``reply_id``) and the checkpoint (by
  run and speaker index) together and idempotently (in the live store the reply row
  is the checkpoint of a done speaker), and reads the cancel flag after them — that
  is where a cancel lands: between speakers;
- a finished run's lease is free (``claim_run``), whether or not its release was
  written yet;
- ``request_cancel`` sets that flag.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from furnace.arena.lease import Holder, is_free
from furnace.arena.models import ArenaSession, Checkpoint, Plan, ReplyRecord, RunRecord, RunStatus
from furnace.domain.errors import NotFound
from furnace.domain.guarded import serialized
from furnace.domain.times import utc_now
from furnace.storage.memory import InMemory
from furnace.storage.protocols import ArenaStore as ArenaStore  # declared with every store protocol


class InMemoryArenaStore(InMemory):
    """A thread-safe in-memory :class:`ArenaStore`."""

    def __init__(self) -> None:
        self._sessions: dict[str, ArenaSession] = {}
        self._runs: dict[str, RunRecord] = {}
        self._replies: dict[str, ReplyRecord] = {}
        self._checkpoints: dict[tuple[str, int], Checkpoint] = {}
        self._leases: dict[str, tuple[Holder, datetime]] = {}

    @serialized
    def save_session(self, session: ArenaSession) -> None:
        stamped = session.model_copy(update={"created_at": session.created_at or utc_now()})
        self._sessions.setdefault(session.id, stamped)

    @serialized
    def get_session(self, session_id: str) -> ArenaSession:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise NotFound(f"no arena session {session_id!r}", field="session") from None

    @serialized
    def list_sessions(self) -> list[ArenaSession]:
        return sorted(self._sessions.values(), key=lambda s: s.created_at or utc_now(), reverse=True)

    @serialized
    def start_run(self, run: RunRecord) -> RunRecord:
        if run.run_id not in self._runs:
            turn = sum(1 for r in self._runs.values() if r.session_id == run.session_id)
            self._runs[run.run_id] = run.model_copy(update={"turn": turn, "created_at": run.created_at or utc_now()})
        return self._runs[run.run_id]

    @serialized
    def get_run(self, run_id: str) -> RunRecord:
        try:
            return self._runs[run_id]
        except KeyError:
            raise NotFound(f"no arena run {run_id!r}", field="run") from None

    @serialized
    def list_runs(self, session_id: str) -> list[RunRecord]:
        return sorted((r for r in self._runs.values() if r.session_id == session_id), key=lambda r: r.turn)

    @serialized
    def set_plan(self, run_id: str, plan: Plan) -> RunRecord:
        run = self.get_run(run_id)
        if run.plan is None:
            run = self._runs[run_id] = run.model_copy(update={"plan": plan})
        return run

    @serialized
    def record_speaker(
        self, checkpoint: Checkpoint, reply: ReplyRecord | None, *, finish: Holder | None = None
    ) -> bool:
        if reply is not None:
            self._replies.setdefault(reply.reply_id, reply.model_copy(update={"created_at": utc_now()}))
        self._checkpoints.setdefault((checkpoint.run_id, checkpoint.speaker_index), checkpoint)
        run = self._runs[checkpoint.run_id]
        if finish is not None:
            self._runs[run.run_id] = run.model_copy(update={"status": "finished"})
            lease = self._leases.get(run.run_id)
            if lease is not None and lease[0].token == finish.token:
                del self._leases[run.run_id]
        return run.cancel_requested

    @serialized
    def checkpoints(self, run_id: str) -> dict[int, Checkpoint]:
        return {i: c for (r, i), c in self._checkpoints.items() if r == run_id}

    @serialized
    def replies(self, *, run_id: str | None = None, session_id: str | None = None) -> list[ReplyRecord]:
        turns = {r.run_id: r.turn for r in self._runs.values()}
        found = [
            r
            for r in self._replies.values()
            if (run_id is None or r.run_id == run_id) and (session_id is None or r.session_id == session_id)
        ]
        return sorted(found, key=lambda r: (turns.get(r.run_id, 0), r.run_id, r.speaker_index))

    @serialized
    def set_status(self, run_id: str, status: RunStatus, *, clear_cancel: bool = False) -> None:
        run = self.get_run(run_id)
        update: dict[str, object] = {"status": status}
        if clear_cancel:
            update["cancel_requested"] = False
        self._runs[run_id] = run.model_copy(update=update)

    @serialized
    def request_cancel(self, run_id: str) -> None:
        self._runs[run_id] = self.get_run(run_id).model_copy(update={"cancel_requested": True})

    @serialized
    def cancel_requested(self, run_id: str) -> bool:
        return self.get_run(run_id).cancel_requested

    @serialized
    def claim_run(self, run_id: str, holder: Holder, ttl_s: float) -> Holder | None:
        now = utc_now()
        current = self._leases.get(run_id)
        run = self._runs.get(run_id)
        finished = run is not None and run.status in ("finished", "failed")  # the run has ended
        if current is not None and current[0].token != holder.token and not is_free(*current, now, finished=finished):
            return current[0]
        self._leases[run_id] = (holder, now + timedelta(seconds=ttl_s))
        return None

    @serialized
    def release_run(self, run_id: str, holder: Holder) -> None:
        if run_id in self._leases and self._leases[run_id][0].token == holder.token:
            del self._leases[run_id]
