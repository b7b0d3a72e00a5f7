"""Experiment records in the relational store (:class:`furnace.evolution.records.ExperimentResults`).

Writes are idempotent by natural keys (a resumed run never duplicates a row), one transaction each.
Every row a reader trusts carries its keyed seal (``furnace.storage.seals``); a read that finds a bad
seal raises :class:`~furnace.domain.errors.SealError` naming the record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, and_, delete, func, or_, select, update

from furnace.domain.times import utc_now
from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord, ScoreRow
from furnace.storage.seals import check, experiment_seal, generation_seal, individual_seal, summary_seal
from furnace.storage.sql.db import SQLDatabase
from furnace.storage.sql.schema import (
    experiment_generations,
    experiment_individuals,
    experiment_scores,
    experiments,
)

_X = experiments.c
_G = experiment_generations.c
_I = experiment_individuals.c
_S = experiment_scores.c


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


class SQLExperimentResults:
    """Experiments, generations, individuals and scores."""

    def __init__(self, db: SQLDatabase) -> None:
        self.db = db

    def unit(self, *, one_transaction: bool = True) -> AbstractContextManager[Any]:
        """One connection, and one transaction once it writes, for every call inside (see ``unit_of_work``)."""
        return self.db.unit(one_transaction=one_transaction)

    def snapshot_soon(self) -> None:
        """Refresh the Parquet snapshots that analysis reads, in the background (docs/store.md)."""
        self.db.snapshot_soon()

    # --- experiments ---------------------------------------------------------------------------------

    def start_experiment(self, record: ExperimentRecord) -> None:
        """Insert the experiment if new; a re-run keeps its row, status back to running."""
        row = {
            "experiment_id": record.experiment_id,
            "name": record.name,
            "config": _dump(record.config),
            "seed": record.seed,
            "model": record.model,
            "seal": experiment_seal(self.db.sealer, record),
            "status": "running",
        }
        now = utc_now()
        row.update(created_at=now, updated_at=now)
        statement = (
            self.db.insert(experiments)
            .values(row)
            .on_conflict_do_update(index_elements=["experiment_id"], set_={"status": "running", "updated_at": now})
        )
        self.db.write(lambda conn: conn.execute(statement))

    def finish_experiment(self, experiment_id: str, status: str, summary: dict[str, Any]) -> None:
        """Set the final status and summary (sealed)."""
        values = {
            "status": status,
            "summary": _dump(summary),
            "summary_seal": summary_seal(self.db.sealer, experiment_id, summary),
            "updated_at": utc_now(),
        }
        self.db.write(
            lambda conn: conn.execute(update(experiments).where(_X.experiment_id == experiment_id).values(values))
        )

    def _experiment(self, row: Any) -> ExperimentRecord:
        summary = json.loads(row.summary) if row.summary is not None else None
        record = ExperimentRecord(
            row.experiment_id, row.name, json.loads(row.config), int(row.seed), row.model, row.status, summary or {}
        )
        sealer, what = self.db.sealer, f"experiment {record.experiment_id}"
        check(row.seal, experiment_seal(sealer, record), what)
        if summary is not None:
            check(
                row.summary_seal, summary_seal(sealer, record.experiment_id, record.summary), f"the summary of {what}"
            )
        return record

    def get_experiment(self, experiment_id: str) -> ExperimentRecord | None:
        with self.db.connect() as conn:
            row = conn.execute(select(experiments).where(_X.experiment_id == experiment_id)).first()
        return self._experiment(row) if row is not None else None

    def list_experiments(self) -> list[ExperimentRecord]:
        with self.db.connect() as conn:
            rows = conn.execute(select(experiments).order_by(_X.updated_at.desc(), _X.experiment_id)).all()
        return [self._experiment(r) for r in rows]

    # --- individuals ---------------------------------------------------------------------------------

    def save_individual(self, record: IndividualRecord) -> None:
        self.save_individuals([record])

    def save_individuals(self, records: Sequence[IndividualRecord]) -> None:
        """Insert several individuals and their scores in one transaction (no-op for existing keys)."""
        if records:
            rows = self._rows(list(records))  # made and sealed before the write lock: it holds the SQL only
            self.db.write(lambda conn: self._insert(conn, *rows))

    def _rows(self, records: list[IndividualRecord]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The rows of ``records`` and of their scores, sealed."""
        sealer = self.db.sealer
        now = utc_now()
        rows = [
            {
                "experiment_id": r.experiment_id,
                "generation": r.generation,
                "agent_id": r.agent_id,
                "slot": r.slot,
                "operator": r.operator,
                "parents": _dump(list(r.parents)),
                "lineage_hash": r.lineage_hash,
                "elixir": _dump(r.elixir),
                "system_prompt": r.system_prompt,
                "fitness": r.fitness,
                "objectives": _dump(r.objectives),
                "failures": r.failures,
                "failure_reasons": _dump(list(r.failure_reasons)),
                "calls": r.calls,
                "tokens": r.tokens,
                "cost_usd": r.cost_usd,
                "plan": r.plan,
                "created_at": now,
                "seal": individual_seal(sealer, r),
            }
            for r in records
        ]
        scores = [
            {
                "experiment_id": r.experiment_id,
                "generation": r.generation,
                "agent_id": r.agent_id,
                "probe": s.probe,
                "scorer": s.scorer,
                "value": s.value,
                "reason": s.reason,
                "failed": s.failed,
                "feedback": s.feedback,
            }
            for r in records
            for s in r.scores
        ]
        return rows, scores

    def _insert(self, conn: Connection, rows: list[dict[str, Any]], scores: list[dict[str, Any]]) -> None:
        conn.execute(self.db.insert(experiment_individuals).on_conflict_do_nothing(), rows)
        if scores:
            conn.execute(self.db.insert(experiment_scores).on_conflict_do_nothing(), scores)

    def replace_individual(self, record: IndividualRecord) -> None:
        """Replace what is recorded at the record's slot, and a stale row of the same agent in that
        generation, scores included, in one transaction."""
        r = record
        here = and_(_I.experiment_id == r.experiment_id, _I.generation == r.generation)
        stale = and_(here, or_(_I.slot == r.slot, _I.agent_id == r.agent_id))
        made = self._rows([record])

        def work(conn: Connection) -> None:
            agents = [row[0] for row in conn.execute(select(_I.agent_id).where(stale))]
            if agents:
                conn.execute(
                    delete(experiment_scores).where(
                        _S.experiment_id == r.experiment_id, _S.generation == r.generation, _S.agent_id.in_(agents)
                    )
                )
            conn.execute(delete(experiment_individuals).where(stale))
            self._insert(conn, *made)

        self.db.write(work)

    def _individuals(self, *conditions: Any) -> list[IndividualRecord]:
        with self.db.connect() as conn:
            rows = conn.execute(
                select(experiment_individuals).where(*conditions).order_by(_I.generation, _I.slot, _I.agent_id)
            ).all()
            if not rows:
                return []
            keys = {(r.generation, r.agent_id) for r in rows}
            generations = sorted({r.generation for r in rows})
            found = conn.execute(
                select(experiment_scores)
                .where(_S.experiment_id == rows[0].experiment_id, _S.generation.in_(generations))
                .order_by(_S.generation, _S.agent_id, _S.probe, _S.scorer)
            ).all()
        scores: dict[tuple[int, str], list[ScoreRow]] = {}
        for s in found:
            if (s.generation, s.agent_id) in keys:
                scores.setdefault((s.generation, s.agent_id), []).append(
                    ScoreRow(s.probe, s.scorer, s.value, s.reason, bool(s.failed), s.feedback or "")
                )
        sealer = self.db.sealer
        records = []
        for r in rows:
            record = IndividualRecord(
                experiment_id=r.experiment_id,
                generation=r.generation,
                agent_id=r.agent_id,
                slot=r.slot,
                operator=r.operator,
                parents=tuple(json.loads(r.parents)),
                lineage_hash=r.lineage_hash,
                elixir=json.loads(r.elixir),
                system_prompt=r.system_prompt,
                fitness=r.fitness,
                objectives=json.loads(r.objectives),
                scores=tuple(scores.get((r.generation, r.agent_id), [])),
                failures=r.failures,
                failure_reasons=tuple(json.loads(r.failure_reasons)),
                calls=r.calls,
                tokens=r.tokens,
                cost_usd=r.cost_usd,
                plan=r.plan or "",
            )
            what = f"experiment {record.experiment_id}: the record of {record.agent_id} (gen {record.generation})"
            check(r.seal, individual_seal(sealer, record), what)
            records.append(record)
        return records

    def individual_by_slot(self, experiment_id: str, generation: int, slot: int) -> IndividualRecord | None:
        found = self._individuals(_I.experiment_id == experiment_id, _I.generation == generation, _I.slot == slot)
        return found[0] if found else None

    def individual(self, experiment_id: str, generation: int, agent_id: str) -> IndividualRecord | None:
        found = self._individuals(
            _I.experiment_id == experiment_id, _I.generation == generation, _I.agent_id == agent_id
        )
        return found[0] if found else None

    def individuals(self, experiment_id: str, generation: int | None = None) -> list[IndividualRecord]:
        if generation is None:
            return self._individuals(_I.experiment_id == experiment_id)
        return self._individuals(_I.experiment_id == experiment_id, _I.generation == generation)

    # --- generations ---------------------------------------------------------------------------------

    def save_generation(self, record: GenerationRecord) -> None:
        """Insert or replace (a rerun that rescored individuals recomputes the generation)."""
        r = record
        values = {
            "survivors": _dump(list(r.survivors)),
            "best_fitness": r.best_fitness,
            "mean_fitness": r.mean_fitness,
            "operator_weights": _dump(r.operator_weights),
            "calls": r.calls,
            "cached_calls": r.cached_calls,
            "tokens": r.tokens,
            "cost_usd": r.cost_usd,
            "seal": generation_seal(self.db.sealer, r),
        }
        statement = (
            self.db.insert(experiment_generations)
            .values(experiment_id=r.experiment_id, generation=r.generation, finished_at=utc_now(), **values)
            .on_conflict_do_update(index_elements=["experiment_id", "generation"], set_=values)
        )
        self.db.write(lambda conn: conn.execute(statement))

    def generations(self, experiment_id: str, *, verify: bool = True) -> list[GenerationRecord]:
        with self.db.connect() as conn:
            rows = conn.execute(
                select(experiment_generations).where(_G.experiment_id == experiment_id).order_by(_G.generation)
            ).all()
        records = []
        for r in rows:
            record = GenerationRecord(
                r.experiment_id,
                r.generation,
                tuple(json.loads(r.survivors)),
                r.best_fitness,
                r.mean_fitness,
                json.loads(r.operator_weights),
                r.calls,
                r.cached_calls,
                r.tokens,
                r.cost_usd,
            )
            if verify:
                check(
                    r.seal,
                    generation_seal(self.db.sealer, record),
                    f"experiment {experiment_id}: generation {r.generation}",
                )
            records.append(record)
        return records

    def count_rows(self, experiment_id: str) -> dict[str, int]:
        """Row counts per table (for tests and the show command)."""
        out = {}
        with self.db.connect() as conn:
            for table in (experiment_generations, experiment_individuals, experiment_scores):
                count = select(func.count()).select_from(table).where(table.c.experiment_id == experiment_id)
                out[table.name] = int(conn.execute(count).scalar() or 0)
        return out
