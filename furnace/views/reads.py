"""One page render's reads of the experiment results: each read made once.

A dashboard's view functions read the same experiment many times in one render (the Compare page read
an experiment's individuals about ten times, each read verifying every record's seal again). A page wraps
the live store in :class:`ReadsOnce` at the top of its script: within that render each read (method and
arguments) goes to the store once; the next render makes a new one, so it reads the store afresh (a save,
or another process's write, shows on the next render).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord

T = TypeVar("T")


class ResultReads(Protocol):
    """The reads of :class:`furnace.evolution.records.ExperimentResults` the views make."""

    def get_experiment(self, experiment_id: str) -> ExperimentRecord | None: ...

    def list_experiments(self) -> list[ExperimentRecord]: ...

    def individuals(self, experiment_id: str, generation: int | None = None) -> list[IndividualRecord]: ...

    def generations(self, experiment_id: str) -> list[GenerationRecord]: ...


class ReadsOnce:
    """``results``' reads, each (method, arguments) read once for the life of this object (one render).
    Lists are handed out as copies: a caller that sorts or extends one never changes another's."""

    def __init__(self, results: ResultReads) -> None:
        self._results = results
        self._read: dict[tuple[Any, ...], Any] = {}

    def _once(self, read: Callable[..., T], *args: Any) -> T:
        key = (read.__name__, *args)
        if key not in self._read:
            self._read[key] = read(*args)
        found = self._read[key]
        return list(found) if isinstance(found, list) else found  # type: ignore[return-value]

    def get_experiment(self, experiment_id: str) -> ExperimentRecord | None:
        return self._once(self._results.get_experiment, experiment_id)

    def list_experiments(self) -> list[ExperimentRecord]:
        return self._once(self._results.list_experiments)

    def individuals(self, experiment_id: str, generation: int | None = None) -> list[IndividualRecord]:
        return self._once(self._results.individuals, experiment_id, generation)

    def generations(self, experiment_id: str) -> list[GenerationRecord]:
        return self._once(self._results.generations, experiment_id)
