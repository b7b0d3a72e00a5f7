"""Experiment records in DuckDB (migration ``0004_experiments.sql``).

Implements :class:`furnace.evolution.records.ExperimentResults`. Every write is
``INSERT ... ON CONFLICT DO NOTHING`` on the natural keys, one short transaction
each, so a resumed run never duplicates a row.

Every row a reader trusts carries a keyed seal (``seal``, migration 0016; docs/reliability.md):
an experiment's config (and, once finished, its summary: ``summary_seal``), each generation's
figures, each individual's fitness, objectives, lineage and scores. A read that finds a bad seal
raises :class:`~furnace.domain.errors.SealError` naming the record.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import Any

from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord, ScoreRow
from furnace.storage.duckdb.db import Database
from furnace.storage.seals import check, experiment_seal, generation_seal, individual_seal, summary_seal

# (column, type) of the rows written in bulk: one ``unnest`` per column binds a whole batch as a
# few list parameters (a multi-row VALUES binds every value: ~3x the CPU at 100 rows)
_IND_TYPED = (
    ("experiment_id", "VARCHAR"),
    ("generation", "INTEGER"),
    ("agent_id", "VARCHAR"),
    ("slot", "INTEGER"),
    ("operator", "VARCHAR"),
    ("parents", "VARCHAR"),
    ("lineage_hash", "VARCHAR"),
    ("elixir", "VARCHAR"),
    ("system_prompt", "VARCHAR"),
    ("fitness", "DOUBLE"),
    ("objectives", "VARCHAR"),
    ("failures", "INTEGER"),
    ("failure_reasons", "VARCHAR"),
    ("calls", "INTEGER"),
    ("tokens", "BIGINT"),
    ("cost_usd", "DOUBLE"),
    ("plan", "VARCHAR"),
    ("seal", "VARCHAR"),
)
_SCORE_TYPED = (
    ("experiment_id", "VARCHAR"),
    ("generation", "INTEGER"),
    ("agent_id", "VARCHAR"),
    ("probe", "VARCHAR"),
    ("scorer", "VARCHAR"),
    ("value", "DOUBLE"),
    ("reason", "VARCHAR"),
    ("failed", "BOOLEAN"),
    ("feedback", "VARCHAR"),
)
_IND_COLS = ", ".join(name for name, _ in _IND_TYPED)
# what a home before migration 0019 has (the reseal of migration 0016 reads those): no plan key, "" on read
_IND_COLS_BEFORE_PLAN = ", ".join(name for name, _ in _IND_TYPED if name != "plan")


def _insert_many(con: Any, table: str, typed: tuple[tuple[str, str], ...], rows: list[list[Any]]) -> None:
    """Insert ``rows`` (no-op for existing keys) in one statement, bound column-wise."""
    if not rows:
        return
    columns = ", ".join(name for name, _ in typed)
    values = ", ".join(f"unnest(?::{kind}[])" for _, kind in typed)
    con.execute(
        f"INSERT INTO {table} ({columns}) SELECT {values} ON CONFLICT DO NOTHING",
        [list(column) for column in zip(*rows, strict=True)],
    )


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _load(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


class DuckDBExperimentResults:
    """Experiments, generations, individuals and scores in the furnace DuckDB file."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def unit(self, *, one_transaction: bool = True) -> AbstractContextManager[Any]:
        """One connection, and one transaction once it writes, for every call inside (see ``unit_of_work``)."""
        return self.db.unit(one_transaction=one_transaction)

    def snapshot_soon(self) -> None:
        """Refresh the Parquet snapshots that analysis reads, in the background (docs/storage.md)."""
        from furnace.storage.duckdb import snapshot

        snapshot.request(self.db)

    # --- experiments ------------------------------------------------------

    def start_experiment(self, record: ExperimentRecord) -> None:
        """Insert the experiment if new; a re-run keeps its row, status back to running (one statement)."""
        row = [
            record.experiment_id,
            record.name,
            _dump(record.config),
            record.seed,
            record.model,
            experiment_seal(self.db.sealer, record),
        ]
        self.db.write_one(
            lambda con: con.execute(
                "INSERT INTO experiments (experiment_id, name, config, seed, model, seal, status)"
                " VALUES (?, ?, ?, ?, ?, ?, 'running') ON CONFLICT (experiment_id)"
                " DO UPDATE SET status = 'running', updated_at = now()",
                row,
            )
        )

    def finish_experiment(self, experiment_id: str, status: str, summary: dict[str, Any]) -> None:
        self.db.execute(
            "UPDATE experiments SET status = ?, summary = ?, summary_seal = ?, updated_at = current_timestamp"
            " WHERE experiment_id = ?",
            [status, _dump(summary), summary_seal(self.db.sealer, experiment_id, summary), experiment_id],
        )

    def _experiment(self, row: dict[str, Any], *, verify: bool = True) -> ExperimentRecord:
        record = ExperimentRecord(
            row["experiment_id"],
            row["name"],
            _load(row["config"]),
            int(row["seed"]),
            row["model"],
            row["status"],
            _load(row["summary"]) or {},
        )
        if verify:
            sealer, what = self.db.sealer, f"experiment {record.experiment_id}"
            check(row["seal"], experiment_seal(sealer, record), what)
            if row["summary"] is not None:
                expected = summary_seal(sealer, record.experiment_id, record.summary)
                check(row["summary_seal"], expected, f"the summary of {what}")
        return record

    def get_experiment(self, experiment_id: str) -> ExperimentRecord | None:
        rows = self.db.query_dicts("SELECT * FROM experiments WHERE experiment_id = ?", [experiment_id])
        return self._experiment(rows[0]) if rows else None

    def list_experiments(self) -> list[ExperimentRecord]:
        rows = self.db.query_dicts("SELECT * FROM experiments ORDER BY updated_at DESC, experiment_id")
        return [self._experiment(r) for r in rows]

    # --- individuals --------------------------------------------------------

    def save_individual(self, record: IndividualRecord) -> None:
        self.save_individuals([record])

    def save_individuals(self, records: list[IndividualRecord]) -> None:
        """Insert several individuals and their scores in one transaction (no-op for existing keys)."""
        if not records:
            return
        sealer = self.db.sealer
        with self.db.transaction() as con:
            ind = [
                [
                    r.experiment_id,
                    r.generation,
                    r.agent_id,
                    r.slot,
                    r.operator,
                    _dump(list(r.parents)),
                    r.lineage_hash,
                    _dump(r.elixir),
                    r.system_prompt,
                    r.fitness,
                    _dump(r.objectives),
                    r.failures,
                    _dump(list(r.failure_reasons)),
                    r.calls,
                    r.tokens,
                    r.cost_usd,
                    r.plan,
                    individual_seal(sealer, r),
                ]
                for r in records
            ]
            _insert_many(con, "experiment_individuals", _IND_TYPED, ind)
            scores = [
                [r.experiment_id, r.generation, r.agent_id, s.probe, s.scorer, s.value, s.reason, s.failed, s.feedback]
                for r in records
                for s in r.scores
            ]
            _insert_many(con, "experiment_scores", _SCORE_TYPED, scores)

    def replace_individual(self, record: IndividualRecord) -> None:
        """Replace what is recorded at the record's slot, and a stale row of the same agent in that
        generation (one row per agent and generation), scores included, in one transaction."""
        r = record
        stale = (
            "SELECT agent_id FROM experiment_individuals WHERE experiment_id = ? AND generation = ?"
            " AND (slot = ? OR agent_id = ?)"
        )
        keys = [r.experiment_id, r.generation, r.slot, r.agent_id]
        with self.db.transaction():
            self.db.execute(
                f"DELETE FROM experiment_scores WHERE experiment_id = ? AND generation = ? AND agent_id IN ({stale})",
                [r.experiment_id, r.generation, *keys],
            )
            self.db.execute(
                "DELETE FROM experiment_individuals WHERE experiment_id = ? AND generation = ?"
                " AND (slot = ? OR agent_id = ?)",
                keys,
            )
            self.save_individuals([record])

    def _individuals(
        self, where: str, params: list[Any], *, verify: bool = True, before_plan: bool = False
    ) -> list[IndividualRecord]:
        columns = _IND_COLS_BEFORE_PLAN if before_plan else _IND_COLS
        rows = self.db.query_dicts(
            f"SELECT {columns} FROM experiment_individuals WHERE {where} ORDER BY generation, slot, agent_id", params
        )
        if not rows:
            return []
        keys = {(r["generation"], r["agent_id"]) for r in rows}
        exp = rows[0]["experiment_id"]
        scores: dict[tuple[int, str], list[ScoreRow]] = {}
        for s in self.db.query_dicts(
            "SELECT generation, agent_id, probe, scorer, value, reason, failed, feedback FROM experiment_scores"
            " WHERE experiment_id = ? ORDER BY generation, agent_id, probe, scorer",
            [exp],
        ):
            if (s["generation"], s["agent_id"]) in keys:
                scores.setdefault((s["generation"], s["agent_id"]), []).append(
                    ScoreRow(s["probe"], s["scorer"], s["value"], s["reason"], bool(s["failed"]), s["feedback"] or "")
                )
        records = [
            IndividualRecord(
                experiment_id=r["experiment_id"],
                generation=r["generation"],
                agent_id=r["agent_id"],
                slot=r["slot"],
                operator=r["operator"],
                parents=tuple(_load(r["parents"])),
                lineage_hash=r["lineage_hash"],
                elixir=_load(r["elixir"]),
                system_prompt=r["system_prompt"],
                fitness=r["fitness"],
                objectives=_load(r["objectives"]),
                scores=tuple(scores.get((r["generation"], r["agent_id"]), [])),
                failures=r["failures"],
                failure_reasons=tuple(_load(r["failure_reasons"])),
                calls=r["calls"],
                tokens=r["tokens"],
                cost_usd=r["cost_usd"],
                plan=r.get("plan") or "",
            )
            for r in rows
        ]
        if verify:
            sealer = self.db.sealer
            for row, record in zip(rows, records, strict=True):
                what = f"experiment {record.experiment_id}: the record of {record.agent_id} (gen {record.generation})"
                check(row["seal"], individual_seal(sealer, record), what)
        return records

    def individual_by_slot(self, experiment_id: str, generation: int, slot: int) -> IndividualRecord | None:
        found = self._individuals(
            "experiment_id = ? AND generation = ? AND slot = ?", [experiment_id, generation, slot]
        )
        return found[0] if found else None

    def individual(self, experiment_id: str, generation: int, agent_id: str) -> IndividualRecord | None:
        found = self._individuals(
            "experiment_id = ? AND generation = ? AND agent_id = ?", [experiment_id, generation, agent_id]
        )
        return found[0] if found else None

    def individuals(self, experiment_id: str, generation: int | None = None) -> list[IndividualRecord]:
        if generation is None:
            return self._individuals("experiment_id = ?", [experiment_id])
        return self._individuals("experiment_id = ? AND generation = ?", [experiment_id, generation])

    # --- generations ----------------------------------------------------------

    def save_generation(self, record: GenerationRecord) -> None:
        r = record
        self.db.execute(
            "INSERT INTO experiment_generations (experiment_id, generation, survivors, best_fitness, mean_fitness,"
            " operator_weights, calls, cached_calls, tokens, cost_usd, seal) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO UPDATE SET survivors = excluded.survivors, best_fitness = excluded.best_fitness,"
            " mean_fitness = excluded.mean_fitness, operator_weights = excluded.operator_weights,"
            " calls = excluded.calls, cached_calls = excluded.cached_calls, tokens = excluded.tokens,"
            " cost_usd = excluded.cost_usd, seal = excluded.seal",
            [
                r.experiment_id,
                r.generation,
                _dump(list(r.survivors)),
                r.best_fitness,
                r.mean_fitness,
                _dump(r.operator_weights),
                r.calls,
                r.cached_calls,
                r.tokens,
                r.cost_usd,
                generation_seal(self.db.sealer, r),
            ],
        )

    def generations(self, experiment_id: str, *, verify: bool = True) -> list[GenerationRecord]:
        rows = self.db.query_dicts(
            "SELECT * FROM experiment_generations WHERE experiment_id = ? ORDER BY generation", [experiment_id]
        )
        records = [
            GenerationRecord(
                r["experiment_id"],
                r["generation"],
                tuple(_load(r["survivors"])),
                r["best_fitness"],
                r["mean_fitness"],
                _load(r["operator_weights"]),
                r["calls"],
                r["cached_calls"],
                r["tokens"],
                r["cost_usd"],
            )
            for r in rows
        ]
        if verify:
            sealer = self.db.sealer
            for row, record in zip(rows, records, strict=True):
                what = f"experiment {experiment_id}: generation {record.generation}"
                check(row["seal"], generation_seal(sealer, record), what)
        return records

    def count_rows(self, experiment_id: str) -> dict[str, int]:
        """Row counts per table (for tests and the show command)."""
        out = {}
        for table in ("experiment_generations", "experiment_individuals", "experiment_scores"):
            out[table] = int(
                self.db.query(f"SELECT count(*) FROM {table} WHERE experiment_id = ?", [experiment_id])[0][0]
            )
        return out
