"""Migration 0016's upgrade: the rows of an old home sealed with the key, once, when it is moved.

Run by the migration runner (:mod:`.db`) right after the migration's SQL, in its transaction; it reads
the rows of the schema as it is at 0016 into the records their seals cover. Named there, not imported
(this module imports :mod:`.db`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord, ScoreRow
from furnace.storage.duckdb.db import Database
from furnace.storage.duckdb.seal import agent_seal_sql
from furnace.storage.seals import (
    agent_mac,
    elixir_seal,
    experiment_seal,
    generation_seal,
    individual_seal,
    response_seal,
    summary_seal,
)
from furnace.storage.store import decode_elixir

log = logging.getLogger(__name__)


def upgrade(db: Database) -> None:
    """Seal the rows of a home written before keyed seals (migration 0016), once, on its first open.

    Rows that had an unkeyed check are sealed only when it verifies: an elixir version whose body
    hashes to its stored content hash, an agent whose stored seal equals the seal of its row as it is
    now. A row that fails stays unsealed, and every read refuses it (an altered record, as before the
    upgrade). Rows that had no check (cached responses, experiment rows) are sealed as they are: the
    upgrade trusts what the home holds when it runs (docs/reliability.md). It seals nothing when the
    home's key file existed before it: a sealed home set back to an older schema stays refused.
    """
    sealer = db.sealer
    if sealer.source != "FURNACE_SEAL_KEY" and not sealer.new_key:
        # The key predates this upgrade, so the home was sealed before and its schema was set back
        # (or an unsealed file was put under a sealed home): nothing here is trusted, nothing is sealed.
        log.warning("%s: its seal key predates this upgrade: existing rows are not sealed", db.path.name)
        return
    elixirs = []
    for version_row in db.query(
        "SELECT id, version, content_hash, body, created_at, deleted_at, seal FROM elixir_versions"
    ):
        id, version, content_hash = version_row[:3]
        try:
            intact = decode_elixir(version_row).content_hash == content_hash
        except (ValueError, TypeError, AttributeError):
            intact = False
        if intact:
            elixirs.append((id, version, elixir_seal(sealer, id, version, content_hash)))
    _set_seals(db, "elixir_versions", "seal", ("id", "version"), ("VARCHAR", "INTEGER"), elixirs)

    agents = []
    for id, version, seal, lineage, child_hash, prompt, tools, members in db.query(
        "SELECT a.id, a.elixir_version, a.seal::VARCHAR, a.lineage, e.content_hash, a.system_prompt, a.tools,"
        " a.members FROM agents a LEFT JOIN elixir_versions e ON e.id = a.id AND e.version = a.elixir_version"
    ):
        fresh = json.loads(agent_seal_sql(lineage, child_hash, prompt, tools, members))
        try:
            old = json.loads(seal) if seal is not None else None
        except ValueError:
            old = None
        if "record_hash" in fresh and old == fresh:  # the old seal verifies: the row is as it was sealed
            fresh["mac"] = agent_mac(sealer, id, version, fresh["record_hash"])
            agents.append((id, json.dumps(fresh, sort_keys=True)))
    _set_seals(db, "agents", "seal", ("id",), ("VARCHAR",), agents, cast="JSON")

    responses = [(key, response_seal(sealer, key, text)) for key, text in db.query(
        "SELECT cache_key, completion::VARCHAR FROM llm_responses"
    )]  # fmt: skip
    _set_seals(db, "llm_responses", "seal", ("cache_key",), ("VARCHAR",), responses)

    experiments, summaries = [], []
    for row in db.query_dicts("SELECT * FROM experiments"):
        record = _experiment(row)
        experiments.append((record.experiment_id, experiment_seal(sealer, record)))
        if row["summary"] is not None:
            summaries.append((record.experiment_id, summary_seal(sealer, record.experiment_id, record.summary)))
    _set_seals(db, "experiments", "seal", ("experiment_id",), ("VARCHAR",), experiments)
    _set_seals(db, "experiments", "summary_seal", ("experiment_id",), ("VARCHAR",), summaries)
    keys3 = ("experiment_id", "generation", "agent_id")
    for (experiment_id,) in db.query("SELECT DISTINCT experiment_id FROM experiment_individuals"):
        individuals = [
            (r.experiment_id, r.generation, r.agent_id, individual_seal(sealer, r))
            for r in _individuals(db, experiment_id)
        ]
        _set_seals(db, "experiment_individuals", "seal", keys3, ("VARCHAR", "INTEGER", "VARCHAR"), individuals)
    for (experiment_id,) in db.query("SELECT DISTINCT experiment_id FROM experiment_generations"):
        generations = [
            (g.experiment_id, g.generation, generation_seal(sealer, g)) for g in _generations(db, experiment_id)
        ]
        _set_seals(db, "experiment_generations", "seal", keys3[:2], ("VARCHAR", "INTEGER"), generations)


def _set_seals(
    db: Database,
    table: str,
    column: str,
    keys: Sequence[str],
    types: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    *,
    cast: str = "VARCHAR",
) -> None:
    """``UPDATE table SET column = <last value>`` for each row, matched on ``keys`` (its other values)."""
    for start in range(0, len(rows), 5000):
        part = rows[start : start + 5000]
        columns = [list(c) for c in zip(*part, strict=True)]
        given = ", ".join(f"unnest(?::{kind}[]) AS k{i}" for i, kind in enumerate(types))
        match = " AND ".join(f"t.{key} = s.k{i}" for i, key in enumerate(keys))
        db.execute(
            f"UPDATE {table} AS t SET {column} = s.v::{cast} FROM (SELECT {given}, unnest(?::VARCHAR[]) AS v) AS s"
            f" WHERE {match}",
            columns,
        )


def _load(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _experiment(row: dict[str, Any]) -> ExperimentRecord:
    return ExperimentRecord(
        row["experiment_id"],
        row["name"],
        _load(row["config"]),
        int(row["seed"]),
        row["model"],
        row["status"],
        _load(row["summary"]) or {},
    )


def _individuals(db: Database, experiment_id: str) -> list[IndividualRecord]:
    """The experiment's individuals with their scores, as the schema at 0016 holds them (no plan yet)."""
    scores: dict[tuple[int, str], list[ScoreRow]] = {}
    for s in db.query_dicts(
        "SELECT generation, agent_id, probe, scorer, value, reason, failed, feedback FROM experiment_scores"
        " WHERE experiment_id = ? ORDER BY generation, agent_id, probe, scorer",
        [experiment_id],
    ):
        scores.setdefault((s["generation"], s["agent_id"]), []).append(
            ScoreRow(s["probe"], s["scorer"], s["value"], s["reason"], bool(s["failed"]), s["feedback"] or "")
        )
    return [
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
        for r in db.query_dicts(
            "SELECT * FROM experiment_individuals WHERE experiment_id = ? ORDER BY generation, slot, agent_id",
            [experiment_id],
        )
    ]


def _generations(db: Database, experiment_id: str) -> list[GenerationRecord]:
    return [
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
        for r in db.query_dicts(
            "SELECT * FROM experiment_generations WHERE experiment_id = ? ORDER BY generation", [experiment_id]
        )
    ]
