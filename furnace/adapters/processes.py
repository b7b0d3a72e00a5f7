"""Child processes furnace starts are stopped when furnace stops.

:func:`run_child` runs a server (Streamlit for ``furnace app``) in the foreground;
:func:`start_child` starts one in the background (the temporary Prefect server
of ``--prefect`` runs, :mod:`furnace.adapters.prefect_server`):

- **SIGTERM / SIGINT** of furnace are forwarded: the child is asked to stop
  (SIGTERM), given :data:`STOP_GRACE_S`, then killed; furnace then exits with
  the usual code for the signal (143 / 130).
- **SIGKILL** of furnace cannot be caught, so the child notices its parent is
  gone: on Linux the kernel sends it SIGTERM when its parent dies
  (``PR_SET_PDEATHSIG``, set between fork and exec); elsewhere a watcher thread
  is not possible in the child, and the process group is the fallback.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from furnace.domain.threads import background, later

STOP_GRACE_S = 10.0
WATCH_S = 0.5  # how often a child's parent watcher looks (where no parent-death signal exists)
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, signum: int = signal.SIGTERM) -> bool:
    """In a child process (its main thread): get ``signum`` when ``parent`` dies (Linux), and exit
    now if it is already gone. Run between fork and exec, or first thing in a Python child.

    SIGTERM lets a server stop cleanly; SIGKILL (what furnace's Dask workers ask for) cannot be
    handled or held up by a busy interpreter. True when the kernel will send it."""
    bound = False
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            bound = ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signum) == 0
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    return bound


def watch_parent(parent: int, every_s: float = WATCH_S) -> None:
    """In a Python child: a daemon thread that exits the process (``os._exit``) once ``parent`` is gone,
    where the kernel cannot be asked to (not Linux). It needs the interpreter: a parent-death signal
    (:func:`die_with_parent`) is the stronger binding."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    background(watch, name="furnace-parent-watch")


def stop(child: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> int:
    """Ask ``child`` to stop, kill it after ``grace_s``; its exit code."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
    return child.wait()


def _kill_if_running(child: subprocess.Popen[bytes]) -> None:
    if child.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            child.kill()


def start_child(command: Sequence[str], *, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``command`` in the background, bound to furnace's life: it gets SIGTERM when furnace
    dies, however it dies (call from the main thread: the binding is to the calling thread)."""
    parent = os.getpid()
    return subprocess.Popen(list(command), env=env, preexec_fn=lambda: die_with_parent(parent), **popen)  # noqa: PLW1509


def run_child(command: Sequence[str], *, env: dict[str, str] | None = None) -> int:
    """Run ``command`` until it exits or furnace is told to stop; never leaves it running."""
    child = start_child(command, env=env)
    received: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        # Only signal here: the interrupted ``child.wait()`` below holds the child's wait lock.
        received.append(signum)
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)
            later(STOP_GRACE_S, _kill_if_running, child, name="furnace-child-kill")

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = child.wait()
    finally:
        stop(child)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 + received[0] if received else code
