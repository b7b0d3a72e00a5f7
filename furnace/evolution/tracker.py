"""The small tracking protocol the core talks to (MLflow lives in an adapter)."""

from __future__ import annotations

from typing import Any, Protocol


class Span(Protocol):
    """One traced step (an individual, a fusion, a model call). Children nest under it."""

    def child(self, name: str, inputs: dict[str, Any]) -> Span: ...

    def end(self, outputs: dict[str, Any] | None = None, error: str | None = None) -> None: ...


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
        are the whole run's call figures (from the ledger)."""
        ...


def start_trace(tracker: Any, name: str, inputs: dict[str, Any]) -> Span | None:
    """A root span from ``tracker`` when it traces (its optional ``trace`` method), else None."""
    trace = getattr(tracker, "trace", None)
    return trace(name, inputs) if callable(trace) else None


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
