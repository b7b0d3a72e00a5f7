"""Prefect flow: preference extraction over the revisions not processed yet.

Thin by design: the flow runs :func:`furnace.writing.preferences.process_unprocessed` (idempotent per
revision: processed revisions are marked and skipped), with each revision's model step — which
preferences it reveals — as an ``extract-preferences`` task cached by Prefect (docs/prefect.md#caching)
on what determines its answer: the extraction request's content (the revision's suggestions, before and
after texts, the persona's language, the seed, the instruction), the model and its answer versions.
The writes (a new persona version, the revision's mark) run in the flow, never from a cache: a revision
left unprocessed (a failed write, a stopped run) is learned on the next run from a ``Cached`` extraction,
with no model call. One task logs the batch to MLflow. Run it with ``python -m furnace_flows.preferences``
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

from furnace.writing.preferences import (  # noqa: E402
    BatchReport,
    build_extract_request,
    extract_preferences,
    process_unprocessed,
)

from ._common import (  # noqa: E402
    cache_options,
    furnace_version,
    results_dir,
    retry_options,
    runtime,
    task_key,
    task_retries,
)

if TYPE_CHECKING:
    from furnace.domain.elixir import StylePreference
    from furnace.llm.seam import LLM
    from furnace.writing.content import RevisionRecord

MLFLOW_EXPERIMENT = "furnace-preferences"


@task(name="extract-preferences", version=f"furnace:{furnace_version()}", **retry_options(task_retries()))
def extract(key: str, llm: LLM, revision: RevisionRecord, language: str, seed: int) -> list[StylePreference]:
    """Which preferences one revision reveals (one model call; ``key``: :func:`extraction_key`)."""
    return extract_preferences(llm, revision, language=language, seed=seed)


def extraction_key(llm: LLM, revision: RevisionRecord, language: str, seed: int) -> str:
    """The extraction task's cache key: the request it sends (content), the model and its answer versions."""
    from furnace.fusion.operators.prompts import answer_versions

    request = build_extract_request(revision, language=language, seed=seed)
    return task_key(
        "preferences", request=request.model_dump(mode="json"), model=llm.model_name, answers=answer_versions(llm)
    )


def cached_extractor(home: str | None) -> Any:
    """:func:`extract_preferences` as the cached ``extract-preferences`` task (a task run per revision)."""
    cached = extract.with_options(**cache_options(results_dir(home)))

    def run(llm: LLM, revision: RevisionRecord, *, language: str, seed: int = 0) -> list[StylePreference]:
        key = extraction_key(llm, revision, language, seed)
        return cached.with_options(task_run_name=f"extract {revision.id}")(key, llm, revision, language, seed)

    return run


# Not cached (cache_policy=NONE, stated): each batch is a new MLflow run, and two batches that failed
# alike are two attempts the runs page should show.
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
    report = process_unprocessed(
        rt.store, rt.content_store, rt.llm, limit=limit, seed=seed, extract=cached_extractor(home)
    )
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
