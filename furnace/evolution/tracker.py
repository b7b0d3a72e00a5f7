"""The small tracking protocol the core talks to (MLflow lives in an adapter)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from furnace.llm.cache import CallTotals

SpanKind = Literal["agent", "chain", "llm", "tool", "embedding"]
"""What a step is (the adapter maps it to its own span types): ``llm`` a model call, ``chain`` a
pipeline step (a fusion, an evaluation), ``agent`` one individual (made and scored), ``tool`` a
non-model step."""


@dataclass(frozen=True)
class Assessment:
    """One verdict on a traced unit (an objective, the fitness). ``value`` None means it could not be
    scored: ``error`` says why (never a 0). ``judge`` names the judge model when an LLM judged;
    otherwise ``source`` names the code that scored (scorer and version)."""

    name: str
    value: float | None
    rationale: str = ""
    error: str = ""
    judge: str = ""
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


class Span(Protocol):
    """One traced step (an individual, a fusion, a model call). Children nest under it."""

    def child(self, name: str, inputs: dict[str, Any], kind: SpanKind = "chain") -> Span: ...

    def end(
        self,
        outputs: dict[str, Any] | None = None,
        error: str | None = None,
        *,
        usage: CallTotals | None = None,
        model: str | None = None,
    ) -> None:
        """Close the step; ``usage`` is what a model call spent (the ledger's accounting: a cache
        hit spent nothing), ``model`` the model that answered."""
        ...

    def assess(self, assessments: Sequence[Assessment]) -> None:
        """Attach verdicts to this step's trace (called on a root span before it ends)."""
        ...


class Tracker(Protocol):
    """Where runs are logged for comparison. Not the system of record."""

    def start_experiment(self, experiment_id: str, params: dict[str, Any], tags: dict[str, str]) -> None:
        """Open (or resume) the run of one experiment."""
        ...

    def log_generation(self, generation: int, metrics: dict[str, float], tags: dict[str, str]) -> None:
        """Metrics of one finished generation (step = generation)."""
        ...

    def finish(
        self, status: str, tags: dict[str, str], artifacts: dict[str, Any], totals: dict[str, float] | None = None
    ) -> None:
        """Close the run; ``artifacts`` maps file names to text (``.txt/.md``) or JSON data; ``totals``
        are the whole run's call figures (from the ledger) and the champion's held-out figures
        (``champion_test_fitness`` and its interval, ``champion_train_fitness``, the train-test gap,
        ``reevaluation_drop``), logged as metrics."""
        ...


def log_held_out(tracker: Any, steps: dict[int, dict[str, float]], assessments: dict[str, list[Assessment]]) -> None:
    """The figures scored after the search, through ``tracker`` when it logs them (its optional
    ``log_held_out`` method): each generation's best's train and test fitness (``steps``: metrics by
    generation) and each tested individual's held-out assessments (``assessments``: by trace name)."""
    log = getattr(tracker, "log_held_out", None)
    if callable(log):
        log(steps, assessments)


def start_trace(tracker: Any, name: str, inputs: dict[str, Any], kind: SpanKind = "agent") -> Span | None:
    """A root span from ``tracker`` when it traces (its optional ``trace`` method), else None."""
    trace = getattr(tracker, "trace", None)
    return trace(name, inputs, kind) if callable(trace) else None


class NullTracker:
    """Logs nothing; records what it was given (handy in tests)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def start_experiment(self, experiment_id: str, params: dict[str, Any], tags: dict[str, str]) -> None:
        self.events.append(("start", experiment_id))

    def log_generation(self, generation: int, metrics: dict[str, float], tags: dict[str, str]) -> None:
        self.events.append(("generation", generation))

    def finish(
        self, status: str, tags: dict[str, str], artifacts: dict[str, Any], totals: dict[str, float] | None = None
    ) -> None:
        self.events.append(("finish", status))
