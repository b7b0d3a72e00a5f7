"""Experiment records and the protocol of their storage.

Implementations: :class:`MemoryResults` (tests) and
``furnace.storage.sql.experiments.SQLExperimentResults``. Writes are
idempotent by natural keys: experiment id; (experiment, generation);
(experiment, generation, agent); (experiment, generation, agent, probe, scorer).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from furnace.domain.guarded import serialized
from furnace.scoring.panel import split_scorer
from furnace.storage.memory import InMemory
from furnace.storage.protocols import ExperimentResults as ExperimentResults  # declared with every store protocol

MINIBATCH = "minibatch"  # the score row (probe ``*``) of a reflected child's minibatch decision


@dataclass(frozen=True)
class ScoreRow:
    """One scorer's verdict on one probe answer (probe ``*`` for per-agent scorers)."""

    probe: str
    scorer: str
    value: float
    reason: str
    failed: bool = False
    feedback: str = ""  # the judge's structured note (furnace.scoring.feedback); "" for other scorers


@dataclass(frozen=True)
class IndividualRecord:
    """One evaluated member of a generation."""

    experiment_id: str
    generation: int
    agent_id: str
    slot: int
    operator: str
    parents: tuple[str, ...]
    lineage_hash: str | None
    elixir: dict[str, Any]
    system_prompt: str
    fitness: float
    objectives: dict[str, float]
    scores: tuple[ScoreRow, ...] = ()
    failures: int = 0
    failure_reasons: tuple[str, ...] = ()
    calls: int = 0  # model calls (cache hits excluded), as ``calls`` means in every stored record
    tokens: int = 0
    cost_usd: float = 0.0
    # the content key of the plan that made it (operator, parents, seed, params: ``plans.plan_key``): a rerun
    # reads a record back only for the same plan. "" in records written before 2026-12-06
    plan: str = ""

    @property
    def scored(self) -> bool:
        """False when something failed (fusion, an answer or a judgement): kept out of selection."""
        return self.failures == 0

    @property
    def minibatch(self) -> ScoreRow | None:
        """A reflected child's minibatch verdict (1: it beat its parent there, 0: it did not), or None."""
        return next((s for s in self.scores if s.probe == "*" and s.scorer == MINIBATCH), None)

    @property
    def rejected(self) -> bool:
        """A reflected child that did not beat its parent on its minibatch: never evaluated on validation and
        kept out of selection (its stored fitness, 0, is no score)."""
        verdict = self.minibatch
        return verdict is not None and verdict.value != 1.0

    @property
    def has_score(self) -> bool:
        """Its fitness is a score: nothing failed and not :attr:`rejected`. What every ranking reads."""
        return self.scored and not self.rejected

    @property
    def unscored(self) -> tuple[str, ...]:
        """The objectives a failure left unscored (``*``: nothing could be scored)."""
        names = sorted({split_scorer(s.scorer)[0] for s in self.scores if s.failed})  # a judge's row: its objective
        return tuple(names) if names or self.scored else ("*",)


@dataclass(frozen=True)
class GenerationRecord:
    """A finished generation: survivors and figures."""

    experiment_id: str
    generation: int
    survivors: tuple[str, ...]
    best_fitness: float
    mean_fitness: float
    operator_weights: dict[str, float] = field(default_factory=dict)
    calls: int = 0  # model calls (cache hits excluded)
    cached_calls: int = 0  # calls the response cache served
    tokens: int = 0
    cost_usd: float = 0.0


def resolved_seeds(records: Iterable[IndividualRecord]) -> list[str]:
    """An experiment's initial population as ``id@version``, in slot order: what its seeds resolved to
    (generation 0's ``seed`` records carry each seed's elixir as it was run)."""
    seeds = sorted((r for r in records if r.generation == 0 and r.operator == "seed"), key=lambda r: r.slot)
    return [f"{r.elixir.get('id', r.agent_id)}@{r.elixir.get('version', '?')}" for r in seeds]


@dataclass(frozen=True)
class ExperimentRecord:
    """An experiment: its config and status."""

    experiment_id: str
    name: str
    config: dict[str, Any]
    seed: int
    model: str
    status: str = "running"
    summary: dict[str, Any] = field(default_factory=dict)


class MemoryResults(InMemory):
    """In-memory :class:`ExperimentResults` (same semantics, for tests)."""

    def __init__(self) -> None:
        self.experiments: dict[str, ExperimentRecord] = {}
        self._individuals: dict[tuple[str, int, str], IndividualRecord] = {}
        self._generations: dict[tuple[str, int], GenerationRecord] = {}

    @serialized
    def start_experiment(self, record: ExperimentRecord) -> None:
        old = self.experiments.get(record.experiment_id)
        self.experiments[record.experiment_id] = (
            record if old is None else ExperimentRecord(**{**old.__dict__, "status": "running"})
        )

    @serialized
    def finish_experiment(self, experiment_id: str, status: str, summary: dict[str, Any]) -> None:
        old = self.experiments[experiment_id]
        self.experiments[experiment_id] = ExperimentRecord(**{**old.__dict__, "status": status, "summary": summary})

    @serialized
    def get_experiment(self, experiment_id: str) -> ExperimentRecord | None:
        return self.experiments.get(experiment_id)

    @serialized
    def list_experiments(self) -> list[ExperimentRecord]:
        return sorted(self.experiments.values(), key=lambda r: r.experiment_id)

    @serialized
    def save_individual(self, record: IndividualRecord) -> None:
        self._individuals.setdefault((record.experiment_id, record.generation, record.agent_id), record)

    @serialized
    def save_individuals(self, records: Sequence[IndividualRecord]) -> None:
        for record in records:
            self.save_individual(record)

    @serialized
    def replace_individual(self, record: IndividualRecord) -> None:
        for key in [
            k
            for k, r in self._individuals.items()
            if k[:2] == (record.experiment_id, record.generation)
            and (r.slot == record.slot or r.agent_id == record.agent_id)
        ]:
            del self._individuals[key]
        self._individuals[(record.experiment_id, record.generation, record.agent_id)] = record

    @serialized
    def individual_by_slot(self, experiment_id: str, generation: int, slot: int) -> IndividualRecord | None:
        return next(
            (
                r
                for (e, g, _), r in self._individuals.items()
                if e == experiment_id and g == generation and r.slot == slot
            ),
            None,
        )

    @serialized
    def individual(self, experiment_id: str, generation: int, agent_id: str) -> IndividualRecord | None:
        return self._individuals.get((experiment_id, generation, agent_id))

    @serialized
    def individuals(self, experiment_id: str, generation: int | None = None) -> list[IndividualRecord]:
        rows = [
            r
            for (e, g, _), r in self._individuals.items()
            if e == experiment_id and (generation is None or g == generation)
        ]
        return sorted(rows, key=lambda r: (r.generation, r.slot, r.agent_id))

    @serialized
    def save_generation(self, record: GenerationRecord) -> None:
        self._generations[(record.experiment_id, record.generation)] = record

    @serialized
    def generations(self, experiment_id: str) -> list[GenerationRecord]:
        return sorted((r for (e, _), r in self._generations.items() if e == experiment_id), key=lambda r: r.generation)
