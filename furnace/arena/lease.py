"""One process at a time drives a run: a lease row per run.

A process that starts or resumes a run claims its lease; a second process
claiming the same run is told who holds it (:class:`RunBusy`, exit 1 in the CLI)
instead of paying for the same speakers again. The holder renews the lease when
due and releases it when the run ends, however it ends (the lease of a finished
run is free even before its release is written).

A lease is free when it was released, when it expired (:data:`LEASE_TTL_S`
after the holder's last renewal: a speaker slower than that is unheard of, a
model call times out well before), or when its holder ran on this machine and
that process is gone (a killed ``arena say`` frees its run at once).
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime

from furnace.domain.errors import FurnaceError
from furnace.domain.liveness import pid_alive

LEASE_TTL_S = 600.0


class RunBusy(FurnaceError):
    """Another process is driving this run."""


@dataclass(frozen=True)
class Holder:
    """Who drives a run: a token unique to one drive, and where it runs."""

    token: str
    host: str
    pid: int

    @classmethod
    def here(cls) -> Holder:
        return cls(token=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid())

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


def is_free(holder: Holder | None, expires_at: datetime | None, now: datetime, *, finished: bool = False) -> bool:
    """Whether a stored lease may be taken over. The lease of a ``finished`` run is free: the run's
    last record ends the drive (and removes the lease in its transaction; a lease row left beside a
    finished run, by an earlier release, holds nothing)."""
    if finished or holder is None or expires_at is None or expires_at <= now:
        return True
    return holder.host == socket.gethostname() and not pid_alive(holder.pid)


def busy_error(run_id: str, holder: Holder) -> RunBusy:
    return RunBusy(
        f"arena run {run_id} is already running ({holder.describe()}); "
        "wait for it to finish, or stop it and resume the run afterwards"
    )
