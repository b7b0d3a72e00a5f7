"""Prefect flow: preference extraction over the revisions not processed yet.

Thin by design: one task runs :func:`furnace.writing.preferences.process_unprocessed`
(idempotent per revision: processed revisions are marked and skipped), one
task logs the batch to MLflow. Run it with ``python -m furnace_flows.preferences``
(optionally ``--limit N``) or schedule it against a Prefect server.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Any

from furnace import offline_env

offline_env.apply()

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NONE  # noqa: E402

from furnace.writing.preferences import BatchReport, process_unprocessed  # noqa: E402

from ._common import furnace_version, retry_options, runtime, task_retries  # noqa: E402

if TYPE_CHECKING:
    from furnace.llm.seam import LLM
    from furnace.storage.store import ElixirStore
    from furnace.writing.content import ContentStore

MLFLOW_EXPERIMENT = "furnace-preferences"


@task(name="process-batch", version=f"furnace:{furnace_version()}", cache_policy=NONE, **retry_options(task_retries()))
def process_batch(
    store: ElixirStore, content_store: ContentStore, llm: LLM, limit: int | None, seed: int
) -> BatchReport:
    """Learn from every unprocessed revision (one furnace call)."""
    return process_unprocessed(store, content_store, llm, limit=limit, seed=seed)


@task(name="log-batch", version=f"furnace:{furnace_version()}", cache_policy=NONE, **retry_options(task_retries()))
def log_batch(tracking_uri: str, report: BatchReport, params: dict[str, Any]) -> str:
    """One MLflow run per flow run: params, counts as metrics, persona versions as tags, the report."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    from furnace.adapters.mlflow_tracker import artifact_root_for

    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(MLFLOW_EXPERIMENT)
    experiment_id = (
        found.experiment_id
        if found
        else client.create_experiment(
            MLFLOW_EXPERIMENT, artifact_location=artifact_root_for(tracking_uri, MLFLOW_EXPERIMENT)
        )
    )
    run = client.create_run(experiment_id, run_name=f"preferences-{time.strftime('%Y%m%d-%H%M%S')}")
    now = int(time.time() * 1000)
    data = report.as_dict()
    client.log_batch(
        run.info.run_id,
        metrics=[Metric(k, float(data[k]), now, 0) for k in ("processed", "learned", "nothing", "failed")],
        params=[Param(k, str(v)) for k, v in params.items()],
        tags=[RunTag(f"furnace.persona.{pid}", str(v)) for pid, v in sorted(report.personas.items())],
    )
    client.log_dict(run.info.run_id, data, "preference_batch.json")
    client.set_terminated(run.info.run_id, "FAILED" if report.failed and not report.processed else "FINISHED")
    return run.info.run_id


@flow(name="preference-extraction")
def preference_extraction(home: str | None = None, limit: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Process unprocessed revisions into new persona versions; returns the batch report (+ MLflow run id)."""
    rt = runtime(home)
    settings = rt.settings
    report = process_batch(rt.store, rt.content_store, rt.llm, limit, seed)
    if not (report.processed or report.failed):  # nothing to learn from: no empty MLflow run
        return {**report.as_dict(), "mlflow_run_id": None}
    run_id = log_batch(settings.tracking_uri, report, {"limit": limit, "seed": seed, "model": settings.model_name})
    return {**report.as_dict(), "mlflow_run_id": run_id}


def main(argv: list[str] | None = None) -> None:
    """``python -m furnace_flows.preferences [--home DIR] [--limit N] [--seed S]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(json.dumps(preference_extraction(args.home, args.limit, args.seed), ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
