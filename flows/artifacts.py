"""What an evolution flow run shows in the Prefect UI besides its task runs: artifacts.

Each finished generation publishes its population (a leaderboard table) and the operator weights it
bred with; the end of the run publishes the final leaderboard, the operators table of the report and
a link to the experiment's MLflow run. Keys are per experiment (``<experiment id>-leaderboard``, …),
so the Artifacts page lists each generation as a new version of the same key, in order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from furnace.evolution.records import GenerationRecord, IndividualRecord
from furnace.evolution.report import HELD_OUT_FIELDS

DEFAULT_MLFLOW_UI = "http://127.0.0.1:5000"  # where `mlflow ui` listens unless FURNACE_MLFLOW_UI_URL says otherwise


def artifact_key(experiment_id: str, what: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes) for ``what`` of the experiment."""
    return re.sub(r"[^a-z0-9-]+", "-", f"{experiment_id}-{what}".lower()).strip("-")


def population_rows(population: Sequence[IndividualRecord]) -> list[dict[str, Any]]:
    """The population, fittest first, as table rows."""
    ranked = sorted(population, key=lambda r: -r.fitness)
    return [
        {
            "rank": i,
            "agent": r.agent_id,
            "generation": r.generation,
            "operator": r.operator,
            "parents": ", ".join(r.parents) or "—",
            "fitness": round(r.fitness, 4),
            "calls": r.calls,
        }
        for i, r in enumerate(ranked, 1)
    ]


def weight_rows(weights: dict[str, float]) -> list[dict[str, Any]]:
    """The operator weights a generation bred with, heaviest first."""
    return [{"operator": op, "weight": round(w, 4)} for op, w in sorted(weights.items(), key=lambda kv: -kv[1])]


def publish_generation(record: GenerationRecord, population: Sequence[IndividualRecord], generations: int) -> None:
    """The generation's leaderboard and operator weights (called by the engine as each generation ends)."""
    from prefect.artifacts import create_table_artifact

    where = f"generation {record.generation} of {generations}"
    create_table_artifact(
        population_rows(population),
        key=artifact_key(record.experiment_id, "leaderboard"),
        description=f"{where}: the population after it, fittest first (best {record.best_fitness:.3f}, "
        f"mean {record.mean_fitness:.3f}; calls: the model calls each individual made)",
    )
    if record.operator_weights:
        create_table_artifact(
            weight_rows(record.operator_weights),
            key=artifact_key(record.experiment_id, "operators"),
            description=f"{where}: the operator weights its children were drawn with"
            if record.generation
            else f"{where} (the seeds): the operator weights the run starts with",
        )


def report_rows(report: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The final leaderboard and operators tables of a report (``ExperimentReport.as_dict()``); the
    leaderboard's fitness (validation) with the train and held-out test fitness, its interval and the gap."""
    board = [
        {
            "rank": i,
            "agent": row.get("agent_id"),
            "generation": row.get("generation"),
            "operator": row.get("operator"),
            "fitness": row.get("fitness"),
            **{k: row.get(k) for k in HELD_OUT_FIELDS},
        }
        for i, row in enumerate(report.get("leaderboard") or [], 1)
    ]
    operators = [{"operator": op, **stats} for op, stats in sorted((report.get("operators") or {}).items())]
    return board, operators


def publish_report(report: dict[str, Any], *, mlflow_link: str | None) -> None:
    """The run's final leaderboard, operators table and (when the run was tracked) its MLflow run."""
    from prefect.artifacts import create_link_artifact, create_table_artifact

    exp, status = report["experiment_id"], report.get("status", "")
    board, operators = report_rows(report)
    create_table_artifact(
        board, key=artifact_key(exp, "leaderboard"), description=f"final leaderboard ({status}), fittest first"
    )
    if operators:
        create_table_artifact(
            operators,
            key=artifact_key(exp, "operators"),
            description="final operators table: each operator's children, their fitness and the weight it ended with",
        )
    if mlflow_link:
        create_link_artifact(
            mlflow_link,
            link_text=f"MLflow run of {exp}",
            key=artifact_key(exp, "mlflow-run"),
            description="the experiment's MLflow run (params, per-generation metrics, traces); the link assumes "
            f"`mlflow ui` at FURNACE_MLFLOW_UI_URL (default {DEFAULT_MLFLOW_UI})",
        )
