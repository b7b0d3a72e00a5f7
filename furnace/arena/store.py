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

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol

from furnace.arena.lease import Holder, is_free
from furnace.arena.models import ArenaSession, Checkpoint, Plan, ReplyRecord, RunRecord, RunStatus
from furnace.domain.errors import NotFound


class ArenaStore(Protocol):
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


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class InMemoryArenaStore:
    """A thread-safe in-memory :class:`ArenaStore`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, ArenaSession] = {}
        self._runs: dict[str, RunRecord] = {}
        self._replies: dict[str, ReplyRecord] = {}
        self._checkpoints: dict[tuple[str, int], Checkpoint] = {}
        self._leases: dict[str, tuple[Holder, datetime]] = {}

    def save_session(self, session: ArenaSession) -> None:
        with self._lock:
            self._sessions.setdefault(
                session.id, session.model_copy(update={"created_at": session.created_at or _now()})
            )

    def get_session(self, session_id: str) -> ArenaSession:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise NotFound(f"no arena session {session_id!r}", field="session") from None

    def list_sessions(self) -> list[ArenaSession]:
        return sorted(self._sessions.values(), key=lambda s: s.created_at or _now(), reverse=True)

    def start_run(self, run: RunRecord) -> RunRecord:
        with self._lock:
            if run.run_id not in self._runs:
                turn = sum(1 for r in self._runs.values() if r.session_id == run.session_id)
                self._runs[run.run_id] = run.model_copy(update={"turn": turn, "created_at": run.created_at or _now()})
            return self._runs[run.run_id]

    def get_run(self, run_id: str) -> RunRecord:
        try:
            return self._runs[run_id]
        except KeyError:
            raise NotFound(f"no arena run {run_id!r}", field="run") from None

    def list_runs(self, session_id: str) -> list[RunRecord]:
        return sorted((r for r in self._runs.values() if r.session_id == session_id), key=lambda r: r.turn)

    def set_plan(self, run_id: str, plan: Plan) -> RunRecord:
        with self._lock:
            run = self.get_run(run_id)
            if run.plan is None:
                run = self._runs[run_id] = run.model_copy(update={"plan": plan})
            return run

    def record_speaker(
        self, checkpoint: Checkpoint, reply: ReplyRecord | None, *, finish: Holder | None = None
    ) -> bool:
        with self._lock:
            if reply is not None:
                self._replies.setdefault(reply.reply_id, reply.model_copy(update={"created_at": _now()}))
            self._checkpoints.setdefault((checkpoint.run_id, checkpoint.speaker_index), checkpoint)
            run = self._runs[checkpoint.run_id]
            if finish is not None:
                self._runs[run.run_id] = run.model_copy(update={"status": "finished"})
                lease = self._leases.get(run.run_id)
                if lease is not None and lease[0].token == finish.token:
                    del self._leases[run.run_id]
            return run.cancel_requested

    def checkpoints(self, run_id: str) -> dict[int, Checkpoint]:
        return {i: c for (r, i), c in self._checkpoints.items() if r == run_id}

    def replies(self, *, run_id: str | None = None, session_id: str | None = None) -> list[ReplyRecord]:
        turns = {r.run_id: r.turn for r in self._runs.values()}
        found = [
            r
            for r in self._replies.values()
            if (run_id is None or r.run_id == run_id) and (session_id is None or r.session_id == session_id)
        ]
        return sorted(found, key=lambda r: (turns.get(r.run_id, 0), r.run_id, r.speaker_index))

    def set_status(self, run_id: str, status: RunStatus, *, clear_cancel: bool = False) -> None:
        with self._lock:
            run = self.get_run(run_id)
            update: dict[str, object] = {"status": status}
            if clear_cancel:
                update["cancel_requested"] = False
            self._runs[run_id] = run.model_copy(update=update)

    def request_cancel(self, run_id: str) -> None:
        with self._lock:
            self._runs[run_id] = self.get_run(run_id).model_copy(update={"cancel_requested": True})

    def cancel_requested(self, run_id: str) -> bool:
        return self.get_run(run_id).cancel_requested

    def claim_run(self, run_id: str, holder: Holder, ttl_s: float) -> Holder | None:
        with self._lock:
            now = _now()
            current = self._leases.get(run_id)
            run = self._runs.get(run_id)
            finished = run is not None and run.status in ("finished", "failed")  # the run has ended
            if (
                current is not None
                and current[0].token != holder.token
                and not is_free(*current, now, finished=finished)
            ):
                return current[0]
            self._leases[run_id] = (holder, now + timedelta(seconds=ttl_s))
            return None

    def release_run(self, run_id: str, holder: Holder) -> None:
        with self._lock:
            if run_id in self._leases and self._leases[run_id][0].token == holder.token:
                del self._leases[run_id]
