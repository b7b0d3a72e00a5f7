"""The stack a bench runs: the one ``furnace experiment run`` builds, and furnace's CPU per model call.

Every bench that touches a store, a cache, the call ledger or an embedder builds them here, through
:class:`furnace.runtime.Runtime` on :class:`~furnace.settings.FurnaceSettings` for a temporary home
(``FURNACE_HOME``), exactly as a command does: the live store is ``furnace.sqlite`` in the
home (PostgreSQL when ``FURNACE_DATABASE_URL`` names one), the response cache and the call ledger
are in it behind every model call, the synthesis cache is its KV. ``tests/shipping/test_bench_stack.py``
fails when a bench constructs a store, cache, ledger, results or embedder by hand.

The model is replaced only at furnace's LLM seam (:attr:`Runtime.client`): the provider client is a
:class:`Client` around a fake (the offline engine behind an injected latency,
:class:`~furnace.llm.fakes.SlowLLM`, or a replay of its answers). Settings differ from a user's
defaults in one place: the embedder is ``hash`` unless a bench asks for another (``FURNACE_EMBEDDER=hash``
is a user's setting too; MiniLM's model load is a one-off of seconds of CPU per process and would
swamp a per-call figure; what MiniLM costs per call is the issue's separate figure).

**CPU per model call** (:class:`CpuWindow`): the process's CPU time (``time.process_time``: every
thread, the snapshots' DuckDB included) over a timed part, minus the CPU the provider client spent inside its
``complete`` (``time.thread_time`` around each call, on the calling thread: the offline engine
computing its answer, a replay's lookup; the injected sleep costs none), divided by the model calls
the call ledger counts for the window (``ledger.totals().model_calls``: cache hits excluded). The
ledger's totals are read before the window closes, so flushing its buffered rows is counted.

Excluded: the provider client's own work (what a real provider does on its machines), and nothing
else. Included: furnace's scheduler, scoring, fusion, the embedder, the cache and ledger writes, the
stores, background snapshot refreshes and garbage collection, and the bench's own harness within the
window (a paired baseline replays its requests through the same :class:`Client`, so its model work
is excluded too; what remains of the harness is a loop and a list).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from furnace.domain.canonical import content_key
from furnace.llm.seam import LLM, Completion, LLMRequest
from furnace.runtime import Runtime
from furnace.settings import FurnaceSettings

STACK = "runtime"  # what ``--json`` says the figures were measured on
CPU_TARGET_MS = 2.0  # furnace's CPU per model call on the experiment's default stack (issue #31)


class Client:
    """The provider client a bench's stack calls: ``inner`` (a fake at furnace's LLM seam), with the CPU
    it spends counted so that it can be left out of furnace's figure, and the requests it is sent."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.cpu_s = 0.0
        self.calls = 0
        self.requests: list[LLMRequest] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:  # engine_version, reads_inputs: what cache keys ask of the model
        inner = self.__dict__.get("inner")
        if inner is None:  # before __init__ (a copy, a pickle): nothing to forward to
            raise AttributeError(name)
        return getattr(inner, name)

    def complete(self, request: LLMRequest) -> Completion:
        started = time.thread_time()
        try:
            return self.inner.complete(request)
        finally:
            spent = time.thread_time() - started
            with self._lock:
                self.cpu_s += spent
                self.calls += 1
                self.requests.append(request)

    def replay(self, requests: Sequence[LLMRequest]) -> float:
        """Wall seconds of ``requests`` sent straight to the model, one after another (a paired baseline)."""
        started = time.perf_counter()
        for request in requests:
            self.complete(request)
        return time.perf_counter() - started


@dataclass
class CpuWindow:
    """Furnace's CPU over a timed part (see the module's docstring); filled when the window closes."""

    cpu_s: float = 0.0  # the process, every thread
    client_cpu_s: float = 0.0  # inside the provider client (excluded)
    model_calls: int = 0  # from the call ledger
    wall_s: float = 0.0

    @property
    def cpu_ms_per_call(self) -> float:
        return (self.cpu_s - self.client_cpu_s) * 1000 / max(self.model_calls, 1)

    def figures(self) -> dict[str, float]:
        """The window's ``--json`` figures: CPU per model call and its target."""
        return {"cpu_ms_per_call": round(self.cpu_ms_per_call, 3), "cpu_target_ms": CPU_TARGET_MS}

    def since(self, earlier: CpuWindow) -> CpuWindow:
        """The part between two marks (:meth:`Stack.mark`): ``earlier``'s figures taken from these."""
        return CpuWindow(
            self.cpu_s - earlier.cpu_s,
            self.client_cpu_s - earlier.client_cpu_s,
            self.model_calls - earlier.model_calls,
            self.wall_s - earlier.wall_s,
        )

    def add(self, other: CpuWindow) -> None:
        self.cpu_s += other.cpu_s
        self.client_cpu_s += other.client_cpu_s
        self.model_calls += other.model_calls
        self.wall_s += other.wall_s


@dataclass(eq=False)
class Stack:
    """A runtime on a temporary home, its provider client(s) and what was measured on it."""

    runtime: Runtime
    home: Path
    clients: dict[str, Client] = field(default_factory=dict)

    @property
    def client(self) -> Client:
        """The configured model's client (built on first use of :attr:`Runtime.llm`); only on a stack
        made with a ``fake``."""
        self.runtime.llm  # noqa: B018
        return self.clients[self.runtime.llm.model_name]

    def client_cpu_s(self) -> float:
        return sum(c.cpu_s for c in self.clients.values())

    def model_calls(self) -> int:
        """Model calls in the call ledger (every run; cache hits excluded)."""
        return self.runtime.llm.ledger.totals().model_calls

    def mark(self) -> CpuWindow:
        """The figures so far (the ledger's model calls and the clients' CPU read first, then the process's
        CPU and the clock): the part between two marks is the later one's :meth:`CpuWindow.since`."""
        calls, client = self.model_calls(), self.client_cpu_s()
        return CpuWindow(time.process_time(), client, calls, time.perf_counter())

    @contextmanager
    def measure(self) -> Iterator[CpuWindow]:
        """Time the block: the window's figures are set when it ends (the ledger read inside it)."""
        window, start = CpuWindow(), self.mark()
        yield window
        window.add(self.mark().since(start))


@contextmanager
def stack(
    fake: Callable[[str], LLM] | None = None,
    *,
    home: Path | None = None,
    keep: bool = False,
    **settings: Any,
) -> Iterator[Stack]:
    """A :class:`Stack` on a fresh temporary home (or ``home``), closed (and removed unless ``keep``) after.

    ``fake``: the fake behind each model name's provider client (None: the client the settings name,
    built as for a user: the offline engine computing in this process unless ``model=...`` is set);
    ``settings``: :class:`FurnaceSettings` values over what ``FURNACE_*`` variables say, as for a
    user's command (``FURNACE_DATABASE_URL``: a relational store); ``embedder`` is ``hash`` unless
    given, and the home is always the temporary one, so a developer's own home is never touched."""
    root = Path(tempfile.mkdtemp(prefix="furnace-bench-")) if home is None else None
    folder = home if home is not None else root / "home"  # type: ignore[operator]
    folder.mkdir(parents=True, exist_ok=True)
    values: dict[str, Any] = {"embedder": "hash", **settings, "home": folder}
    clients: dict[str, Client] = {}

    def client(name: str) -> LLM:
        assert fake is not None
        clients[name] = Client(fake(name))
        return clients[name]

    runtime = Runtime(FurnaceSettings(**values), client=client if fake is not None else None)
    built = Stack(runtime, folder, clients)
    try:
        yield built
    finally:
        runtime.close()
        if root is not None and not keep:
            shutil.rmtree(root, ignore_errors=True)


def library(built: Stack, *, language: str | None = None) -> list[Any]:
    """Import the sample library into the stack's store (as ``furnace init`` does); the elixirs of
    ``language`` (or all), as stored."""
    from furnace.interop.importers import import_library
    from furnace.resources import LIBRARY_DIR

    import_library(LIBRARY_DIR, built.runtime.store, keep_existing=True)
    found = built.runtime.store.list_elixirs()
    return [e for e in found if language is None or e.language == language]


# -- the machine's speed beside the figures ---------------------------------------------------------

REFERENCE_ROUNDS = 5
REFERENCE_CALLS = 3000


def reference_ms(rounds: int = REFERENCE_ROUNDS, clock: Callable[[], float] = time.thread_time) -> float:
    """How fast this machine runs furnace-like work right now, in ms: the median thread CPU of a fixed
    single-thread workload, ``REFERENCE_CALLS`` times a request's content key, an :class:`LLMRequest`
    validated and a one-row SQLite insert transaction (in memory). Not judged. On a shared virtual machine
    the same code's CPU drifts 1.5-2x within hours; a figure is comparable with another only beside this
    one (docs/benchmarks.md)."""
    messages = [
        {"role": "system", "content": "You are a careful reviewer. " * 40},
        {"role": "user", "content": "Review this launch plan for risks."},
    ]
    request = {"model": "offline", "messages": messages, "temperature": 0.7}
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
        spent = []
        for r in range(rounds):
            started = clock()
            for i in range(REFERENCE_CALLS):
                key = content_key({**request, "seed": r * REFERENCE_CALLS + i})
                LLMRequest.model_validate({"messages": messages, "temperature": 0.7, "seed": i, "task": "reply"})
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT INTO t VALUES (?, ?)", (key, "x" * 200))
                db.execute("COMMIT")
            spent.append((clock() - started) * 1000)
    finally:
        db.close()
    return statistics.median(spent)


# -- ``python -m bench GROUP --json`` ---------------------------------------------------------------

_FIGURES: dict[str, Any] = {}


def record(**figures: Any) -> None:
    """Figures for the group's ``--json`` output (``cpu_ms_per_call`` among them)."""
    _FIGURES.update(figures)


def main_for(group: str, run: Callable[[], bool], *, built_on: str = STACK) -> Callable[[Sequence[str]], int]:
    """A group's ``main(argv)``: ``--json`` prints one JSON object (the figures :func:`record` was given,
    ``stack: "runtime"``, ``met``, ``cpu_ms_per_call``, null for a group that makes no model call, and
    ``reference_ms``, :func:`reference_ms` before and after the group)
    on stdout, the human lines going to stderr (``built_on``: what ``stack`` says, for a documented
    exception of the guard test that does not run on the runtime); 0 when every target was
    met, 1 when one was missed."""

    def main(argv: Sequence[str]) -> int:
        unknown = [a for a in argv if a != "--json"]
        if unknown:
            print(f"error: python -m bench {group} takes only --json, not {' '.join(unknown)}", file=sys.stderr)
            return 2
        if "--json" not in argv:
            return 0 if run() else 1
        with redirect_stdout(sys.stderr):
            before = reference_ms()
            met = run() is True
            after = reference_ms()
        figures = {"cpu_ms_per_call": None, **_FIGURES}  # None: the group makes no model call
        figures["reference_ms"] = {"before": round(before, 1), "after": round(after, 1)}
        print(json.dumps({"group": group, "stack": built_on, "met": met, **figures}, sort_keys=True))
        return 0 if met else 1

    return main
