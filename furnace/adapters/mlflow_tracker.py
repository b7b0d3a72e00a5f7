"""MLflow tracking for experiments (implements :class:`furnace.evolution.tracker.Tracker`).

One MLflow run per furnace experiment (params = the flattened config; tags =
experiment id, model, best agent and its lineage hashes), metrics per
generation with ``step = generation``, one child run per generation (its
parent passed explicitly — the active run is thread-local), and artifacts at
the end: the best prompt, lineage JSON, the leaderboard table. Re-running an
experiment reuses its run and skips generations already logged.

Everything goes through :class:`mlflow.MlflowClient` with explicit run ids, so
nothing depends on MLflow's thread-local "active run".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from furnace import offline_env

offline_env.apply()

import mlflow  # noqa: E402
from mlflow import MlflowClient  # noqa: E402
from mlflow.entities import Metric, Param, RunTag  # noqa: E402

MLFLOW_EXPERIMENT = "furnace-experiments"
_TAG_ID = "furnace.experiment_id"
_TAG_GEN = "furnace.generation"


def artifact_root_for(tracking_uri: str) -> str | None:
    """Artifacts next to a ``sqlite:///…/mlflow.db`` file (never ``./mlruns`` in the cwd)."""
    if tracking_uri.startswith("sqlite:///"):
        return (Path(tracking_uri.removeprefix("sqlite:///")).parent / "mlartifacts").resolve().as_uri()
    return None


class _Span:
    """An MLflow span addressed by explicit ids (safe from worker threads)."""

    def __init__(self, client: MlflowClient, trace_id: str, span_id: str, *, root: bool = False) -> None:
        self.client, self.trace_id, self.span_id, self.root = client, trace_id, span_id, root

    def child(self, name: str, inputs: dict[str, Any]) -> _Span:
        span = self.client.start_span(name, trace_id=self.trace_id, parent_id=self.span_id, inputs=inputs)
        return _Span(self.client, self.trace_id, span.span_id)

    def end(self, outputs: dict[str, Any] | None = None, error: str | None = None) -> None:
        status = "ERROR" if error else "OK"
        outputs = {"error": error} if error else outputs
        if self.root:
            self.client.end_trace(self.trace_id, outputs=outputs, status=status)
        else:
            self.client.end_span(self.trace_id, self.span_id, outputs=outputs, status=status)


class MLflowTracker:
    """Logs one furnace experiment to MLflow at ``tracking_uri`` (absolute sqlite URI by default).

    With ``tracing`` on, every individual is one MLflow trace tied to the experiment's run: a
    root span, a ``fuse <operator>`` step and an ``evaluate`` step, each model call a child span
    (task, input/output summaries, tokens, latency, cached) — so a user can see which step failed.
    """

    def __init__(self, tracking_uri: str, *, mlflow_experiment: str = MLFLOW_EXPERIMENT, tracing: bool = True) -> None:
        self.tracking_uri = tracking_uri
        self.tracing = tracing
        self.client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
        found = self.client.get_experiment_by_name(mlflow_experiment)
        self.mlflow_experiment_id = (
            found.experiment_id
            if found
            else self.client.create_experiment(mlflow_experiment, artifact_location=artifact_root_for(tracking_uri))
        )
        self.run_id: str | None = None
        self._logged: set[int] = set()

    def start_experiment(self, experiment_id: str, params: dict[str, Any], tags: dict[str, str]) -> None:
        """Open the experiment's run, or reuse the one a previous (interrupted) run opened."""
        runs = self.client.search_runs(
            [self.mlflow_experiment_id], filter_string=f"tags.`{_TAG_ID}` = '{experiment_id}'"
        )
        parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        if parents:
            self.run_id = parents[0].info.run_id
            self._logged = {int(r.data.tags[_TAG_GEN]) for r in runs if _TAG_GEN in r.data.tags}
            self.client.update_run(self.run_id, status="RUNNING")
            return
        run = self.client.create_run(
            self.mlflow_experiment_id, run_name=experiment_id, tags={**tags, _TAG_ID: experiment_id}
        )
        self.run_id = run.info.run_id
        self.client.log_batch(self.run_id, params=[Param(k, str(v)[:6000]) for k, v in sorted(params.items())])

    def trace(self, name: str, inputs: dict[str, Any]) -> _Span | None:
        """A root span (one trace) for one unit of work, linked to the experiment's run."""
        if not self.tracing or self.run_id is None:
            return None
        mlflow.set_tracking_uri(self.tracking_uri)
        root = self.client.start_trace(name, inputs=inputs, experiment_id=self.mlflow_experiment_id, run_id=self.run_id)
        return _Span(self.client, root.trace_id, root.span_id, root=True)

    def log_generation(self, generation: int, metrics: dict[str, float], tags: dict[str, str]) -> None:
        """Metrics at ``step = generation`` on the experiment run, plus one child run."""
        if self.run_id is None or generation in self._logged:
            return
        import time

        now = int(time.time() * 1000)
        # idempotent per step: a kill after the parent's metrics but before the child run leaves the
        # step logged; a resumed run then only adds the child, never a second value at that step
        logged = {m.step for m in self.client.get_metric_history(self.run_id, "best_fitness")}
        if generation not in logged:
            batch = [Metric(k, float(v), now, generation) for k, v in sorted(metrics.items())]
            self.client.log_batch(self.run_id, metrics=batch)
        child = self.client.create_run(
            self.mlflow_experiment_id,
            run_name=f"generation-{generation}",
            tags={
                "mlflow.parentRunId": self.run_id,
                _TAG_GEN: str(generation),
                _TAG_ID: self.client.get_run(self.run_id).data.tags.get(_TAG_ID, ""),
                **tags,
            },
        )
        self.client.log_batch(
            child.info.run_id, metrics=[Metric(k, float(v), now, 0) for k, v in sorted(metrics.items())]
        )
        self.client.set_terminated(child.info.run_id)
        self._logged.add(generation)

    def finish(
        self, status: str, tags: dict[str, str], artifacts: dict[str, Any], totals: dict[str, float] | None = None
    ) -> None:
        """Tags, artifacts (text, JSON, the leaderboard as a table), whole-run totals and the final status.

        ``totals`` (from the call ledger) are logged on the parent run at a new step per finish, so a
        resumed run's totals become the latest value and no step ever holds two values."""
        if self.run_id is None:
            return
        if totals:
            import time

            step = len(self.client.get_metric_history(self.run_id, "calls"))
            now = int(time.time() * 1000)
            self.client.log_batch(
                self.run_id, metrics=[Metric(k, float(v), now, step) for k, v in sorted(totals.items())]
            )
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)[:5000]) for k, v in sorted(tags.items())])
        for name, value in artifacts.items():
            if isinstance(value, str):
                self.client.log_text(self.run_id, value, name)
            else:
                self.client.log_dict(self.run_id, value, name)
        board = artifacts.get("leaderboard.json")
        if isinstance(board, list) and board:
            table = {k: [row.get(k) for row in board] for k in ("agent_id", "generation", "operator", "fitness")}
            for key in sorted({k for row in board for k in row.get("objectives", {})}):
                table[key] = [row.get("objectives", {}).get(key) for row in board]
            self.client.log_table(self.run_id, table, "leaderboard_table.json")
        self.client.set_terminated(self.run_id, status="FINISHED" if status == "finished" else "KILLED")
        if self.tracing:
            mlflow.flush_trace_async_logging()

    def register_prompt(
        self, name: str, prompt: str, tags: dict[str, str], message: str = "", *, skip_if_same: bool = False
    ) -> int:
        """Register a promoted agent's prompt in MLflow's Prompt Registry; returns its version.
        With ``skip_if_same``, an identical latest version is reused instead of adding one."""
        mlflow.set_tracking_uri(self.tracking_uri)
        mlflow.set_registry_uri(self.tracking_uri)
        if skip_if_same:
            try:
                latest = mlflow.genai.load_prompt(f"prompts:/{name}@latest")
            except Exception:
                latest = None
            if latest is not None and latest.tags.get("furnace.lineage_hash") == tags.get("furnace.lineage_hash"):
                return int(latest.version)
        version = mlflow.genai.register_prompt(
            name=name,
            template=prompt.replace("{{", "{ {"),
            commit_message=message or None,
            tags={k: str(v)[:5000] for k, v in tags.items()},
        )
        return int(version.version)


def run_summary(tracking_uri: str, experiment_id: str) -> dict[str, Any] | None:
    """The MLflow run of a furnace experiment as plain data (for ``experiment show`` and tests)."""
    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(MLFLOW_EXPERIMENT)
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`{_TAG_ID}` = '{experiment_id}'")
    parent = next((r for r in runs if "mlflow.parentRunId" not in r.data.tags), None)
    if parent is None:
        return None
    history = client.get_metric_history(parent.info.run_id, "best_fitness")
    return {
        "run_id": parent.info.run_id,
        "mlflow_experiment_id": exp.experiment_id,
        "status": parent.info.status,
        "tags": dict(parent.data.tags),
        "params": dict(parent.data.params),
        "best_fitness_steps": [(m.step, m.value) for m in history],
        "children": len(runs) - 1,
        "artifacts": sorted(a.path for a in client.list_artifacts(parent.info.run_id)),
    }
