"""Read-only queries for analysis: the live store's Parquet snapshots as pandas DataFrames.

Every reader takes a DuckDB connection over the Parquet snapshots of the live
store (``furnace.analysis.connect()``, the same table names) or anything with
that SQL's ``query`` (:class:`~furnace.storage.duckdb.snapshot.SnapshotReader`),
runs one parameterised ``SELECT`` and returns a DataFrame
with fixed columns (empty, with the same columns, when there are no rows).
JSON columns come back decoded (lists and dicts). The pure analysis over these
frames lives in :mod:`furnace.analysis`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

import duckdb
import pandas as pd

from furnace.evolution.records import MINIBATCH


class Queryable(Protocol):
    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]: ...


Source = Queryable | duckdb.DuckDBPyConnection
"""A connection over a snapshot (:func:`furnace.analysis.connect`), or a reader of one."""

EDGE_COLUMNS = ["parent", "child", "operator", "op_version", "parent_version"]
AGENT_COLUMNS = ["agent_id", "name", "operator", "op_version", "lineage_hash", "parents", "created_at"]
INDIVIDUAL_COLUMNS = [
    "experiment_id",
    "generation",
    "agent_id",
    "slot",
    "operator",
    "parents",
    "lineage_hash",
    "fitness",
    "objectives",
    "failures",
    "calls",
    "tokens",
    "cost_usd",
    "elixir",
]
GENERATION_COLUMNS = [
    "experiment_id",
    "generation",
    "best_fitness",
    "mean_fitness",
    "survivors",
    "operator_weights",
    "calls",
    "cached_calls",
    "tokens",
    "cost_usd",
]
SCORE_COLUMNS = ["experiment_id", "generation", "agent_id", "probe", "scorer", "value", "reason", "failed", "feedback"]
EXPERIMENT_COLUMNS = ["experiment_id", "name", "model", "status", "seed", "config", "summary", "created_at"]
CONTENT_COLUMNS = ["content_id", "persona_id", "persona_version", "topic", "language", "created_at"]
VERSION_COLUMNS = ["content_id", "version", "title", "body", "word_count", "source", "revision_id", "created_at"]
REVISION_COLUMNS = [
    "revision_id",
    "content_id",
    "persona_id",
    "persona_version",
    "suggestions",
    "from_version",
    "to_version",
    "original_title",
    "original_body",
    "revised_title",
    "revised_body",
    "created_at",
]
PROCESSED_COLUMNS = ["revision_id", "persona_id", "persona_version", "status", "preferences", "processed_at"]
PREFERENCE_COLUMNS = ["persona_id", "version", "dimension", "value", "weight", "count", "source_revision", "evidence"]
CALL_COLUMNS = [
    "run_id",
    "task",
    "calls",
    "model_calls",
    "cached_calls",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_s",
]


def _rows(db: Source, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Rows from a snapshot connection, or from a reader's ``query``."""
    if not isinstance(db, duckdb.DuckDBPyConnection):
        return db.query(sql, list(params))
    rows: list[tuple[Any, ...]] = db.execute(sql, list(params)).fetchall()
    return rows


def _frame(
    db: Source, sql: str, params: Sequence[Any], columns: list[str], json_cols: Sequence[str] = ()
) -> pd.DataFrame:
    rows = _rows(db, sql, params)
    frame = pd.DataFrame(rows, columns=columns) if rows else pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    for col in json_cols:
        frame[col] = [json.loads(v) if isinstance(v, str) else v for v in frame[col]]
    return frame


def _where(filters: dict[str, Any]) -> tuple[str, list[Any]]:
    """``WHERE a = ? AND b = ?`` for the filters that are not None."""
    used = {k: v for k, v in filters.items() if v is not None}
    if not used:
        return "", []
    return " WHERE " + " AND ".join(f"{k} = ?" for k in used), list(used.values())


# --- lineage -------------------------------------------------------------------


def lineage_edges(db: Source, children: Sequence[str] | None = None) -> pd.DataFrame:
    """Every lineage edge (or those into ``children``): parent, child, operator, op_version, parent_version
    (0 = unpinned)."""
    where, params = ("", []) if children is None else (" WHERE list_contains(?, child)", [list(children)])
    sql = f"SELECT {', '.join(EDGE_COLUMNS)} FROM lineage_edges{where} ORDER BY child, parent"
    return _frame(db, sql, params, EDGE_COLUMNS)


def agents(db: Source) -> pd.DataFrame:
    """Every agent with its name, operator, op_version, lineage hash and parent refs (``id@version``)."""
    sql = (
        "SELECT a.id, e.name, a.lineage->>'$.operator', a.lineage->>'$.op_version', a.lineage_hash,"
        " a.lineage->'$.parents', a.created_at"
        " FROM agents a LEFT JOIN elixir_versions e ON e.id = a.id AND e.version = a.elixir_version"
        " ORDER BY a.created_at, a.id"
    )
    frame = _frame(db, sql, [], AGENT_COLUMNS, json_cols=["parents"])
    frame["parents"] = [[f"{p['id']}@{p['version']}" for p in (ps or [])] for ps in frame["parents"]]
    return frame


def elixir_bodies(db: Source, ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The latest stored version of each elixir (library and agents): id, version, origin, name, body (dict)."""
    cols = ["id", "version", "origin", "name", "content_hash", "body"]
    sql = (
        "SELECT id, version, origin, name, content_hash, body FROM elixir_versions"
        " QUALIFY row_number() OVER (PARTITION BY id ORDER BY version DESC) = 1"
    )
    frame = _frame(db, sql + " ORDER BY id", [], cols, json_cols=["body"])
    if ids is not None:
        frame = frame[frame["id"].isin(list(ids))].reset_index(drop=True)
    return frame


# --- experiments -----------------------------------------------------------------


def experiments(db: Source) -> pd.DataFrame:
    """Every experiment: id, name, model, status, seed, config (dict), summary (dict), created_at."""
    return _frame(
        db,
        f"SELECT {', '.join(EXPERIMENT_COLUMNS)} FROM experiments ORDER BY created_at, experiment_id",
        [],
        EXPERIMENT_COLUMNS,
        json_cols=["config", "summary"],
    )


def rejected_sql(row: str) -> str:
    """SQL true for a reflected child (``row``: its alias over ``experiment_individuals``) that lost to its parent
    on its minibatch: never evaluated on validation, so its stored fitness (0) is no score."""
    return (
        f"EXISTS (SELECT 1 FROM experiment_scores m WHERE m.experiment_id = {row}.experiment_id AND m.generation = "
        f"{row}.generation AND m.agent_id = {row}.agent_id AND m.probe = '*' AND m.scorer = '{MINIBATCH}' "
        "AND m.value <> 1)"
    )


def individuals(db: Source, experiment_id: str | None = None) -> pd.DataFrame:
    """Evaluated individuals (one row per generation and agent); ``parents`` a list, ``objectives`` a dict;
    ``rejected``: a reflected child that lost on its minibatch (:func:`rejected_sql`). A row whose fitness is a
    score has ``failures`` 0 and is not ``rejected`` (:func:`furnace.analysis.has_score`)."""
    where, params = _where({"experiment_id": experiment_id})
    sql = (
        f"SELECT {', '.join(INDIVIDUAL_COLUMNS)}, {rejected_sql('i')} AS rejected FROM experiment_individuals i{where}"
        " ORDER BY experiment_id, generation, slot"
    )
    columns = [*INDIVIDUAL_COLUMNS, "rejected"]
    return _frame(db, sql, params, columns, json_cols=["parents", "objectives", "elixir"])


def generations(db: Source, experiment_id: str | None = None) -> pd.DataFrame:
    """Finished generations: best and mean fitness, survivors, operator weights, calls, tokens, cost."""
    where, params = _where({"experiment_id": experiment_id})
    sql = (
        f"SELECT {', '.join(GENERATION_COLUMNS)} FROM experiment_generations{where} ORDER BY experiment_id, generation"
    )
    return _frame(db, sql, params, GENERATION_COLUMNS, json_cols=["survivors", "operator_weights"])


def scores(db: Source, experiment_id: str | None = None) -> pd.DataFrame:
    """Per-probe scorer verdicts (probe ``*`` for per-agent scorers)."""
    where, params = _where({"experiment_id": experiment_id})
    sql = (
        f"SELECT {', '.join(SCORE_COLUMNS)} FROM experiment_scores{where}"
        " ORDER BY experiment_id, generation, agent_id, probe, scorer"
    )
    return _frame(db, sql, params, SCORE_COLUMNS)


# --- content and revisions -------------------------------------------------------


def contents(db: Source, persona_id: str | None = None) -> pd.DataFrame:
    """Content items: id, persona, the persona version that wrote V1, topic, language."""
    where, params = _where({"persona_id": persona_id})
    sql = (
        f"SELECT id, persona_id, persona_version, topic, language, created_at FROM contents{where}"
        " ORDER BY created_at, id"
    )
    return _frame(db, sql, params, CONTENT_COLUMNS)


def content_versions(db: Source, content_id: str | None = None) -> pd.DataFrame:
    """Every version of every (or one) content item, oldest first."""
    where, params = _where({"content_id": content_id})
    sql = f"SELECT {', '.join(VERSION_COLUMNS)} FROM content_versions{where} ORDER BY content_id, version"
    return _frame(db, sql, params, VERSION_COLUMNS)


def revisions(db: Source, content_id: str | None = None) -> pd.DataFrame:
    """Revision records with their suggestions (a list) and the full text before and after."""
    where, params = _where({"content_id": content_id})
    cols = ", ".join(["id"] + REVISION_COLUMNS[1:])
    sql = f"SELECT {cols} FROM revisions{where} ORDER BY content_id, to_version"
    return _frame(db, sql, params, REVISION_COLUMNS, json_cols=["suggestions"])


def processed_revisions(db: Source) -> pd.DataFrame:
    """Preference extraction per revision: status (learned | nothing | already) and what it found."""
    sql = f"SELECT {', '.join(PROCESSED_COLUMNS)} FROM processed_revisions ORDER BY processed_at, revision_id"
    return _frame(db, sql, [], PROCESSED_COLUMNS, json_cols=["preferences"])


def persona_preferences(db: Source, persona_id: str | None = None) -> pd.DataFrame:
    """Learned style preferences of every stored persona version, one row per (version, preference)."""
    where, params = _where({"id": persona_id})
    sql = f"SELECT id, version, body->'$.style_preferences' FROM elixir_versions{where} ORDER BY id, version"
    rows = []
    for id_, version, prefs in _rows(db, sql, params):
        for p in json.loads(prefs) if isinstance(prefs, str) else (prefs or []):
            rows.append(
                [
                    id_,
                    version,
                    p.get("dimension"),
                    p.get("value"),
                    p.get("weight", 0.5),
                    p.get("count", 1),
                    p.get("source_revision"),
                    p.get("evidence", ""),
                ]
            )
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in PREFERENCE_COLUMNS})
    return pd.DataFrame(rows, columns=PREFERENCE_COLUMNS)


# --- model calls -----------------------------------------------------------------


def call_totals(db: Source, run_id: str | None = None) -> pd.DataFrame:
    """Model-call accounting per run and task: ``calls`` (every ledger row, cache hits included, as
    :class:`~furnace.llm.cache.CallTotals` counts them), ``model_calls`` (those that reached the model: what the
    report, ``experiment show`` and MLflow call model calls), ``cached_calls``, tokens, cost, latency; ``run_id``
    is empty for calls made outside a run (revision chat, arena, a fusion)."""
    where, params = _where({"run_id": run_id})
    sql = (
        "SELECT coalesce(run_id, ''), task, count(*), count(*) FILTER (WHERE NOT cached),"
        " count(*) FILTER (WHERE cached),"
        " sum(prompt_tokens), sum(completion_tokens), sum(cost_usd), sum(latency_s)"
        f" FROM llm_calls{where} GROUP BY ALL ORDER BY 1, 2"
    )
    return _frame(db, sql, params, CALL_COLUMNS)
