"""Prefect flow: parents + operator + params → agent (through the caches), scored on a probe set, logged.

Its fitness is over the probes outside the **test** split; the test probes are scored beside it, for the
report only: the row and the MLflow run carry the test fitness with its 95% interval and the train–test gap.
"""

from __future__ import annotations

from typing import Any  # noqa: E402

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NONE  # noqa: E402

from furnace.evolution.report import HELD_OUT_FIELDS, held_out_columns  # noqa: E402

from ._common import furnace_version, operator_versions, retry_options, runtime, scorer_versions, task_retries

DEFAULT_SCORERS = {"constraints": 0.3, "fidelity": 0.3, "tone": 0.2, "brief_fit": 0.2}


# Prefect does not cache these tasks (cache_policy=NONE, stated): parents are ids whose latest
# version can change, so a key on the inputs could serve a stale child. furnace's own caches are
# content-addressed (synthesis by the parents' content hashes, responses by the full request).
@task(
    name="fuse-and-score",
    version=f"{operator_versions()} {scorer_versions(DEFAULT_SCORERS)}",
    cache_policy=NONE,
    **retry_options(task_retries()),  # transient, non-model failures only (docs/prefect.md#retries)
)
def fuse_and_score(
    home: str | None,
    parents: list[str],
    operator: str | None,
    seed: int,
    params: dict[str, Any],
    probe_set: str,
    limit: int | None,
) -> dict[str, Any]:
    """One fusion and its evaluation (furnace functions; the task only wires them)."""
    from furnace.evolution.evaluate import evaluate_agent, split_held_out
    from furnace.fusion.fuse import fuse
    from furnace.scoring.probes import load_probe_set

    ctx = runtime(home)
    result = fuse(
        ctx.store,
        parents,
        llm=ctx.llm,
        embedder=ctx.embedder,
        operator=operator,
        seed=seed,
        params=params or None,
        settings=ctx.settings,
        cache=ctx.synthesis_cache,
    )
    agent = result.agent
    probes = load_probe_set(probe_set).head(limit)
    every = evaluate_agent(ctx.llm, agent.elixir, agent.system_prompt, probes, DEFAULT_SCORERS, seed=seed)
    ev, held = split_held_out(every, probes, DEFAULT_SCORERS, seed=seed, agent_id=agent.id)  # fitness without test
    return {
        "agent_id": agent.id,
        "lineage_hash": agent.lineage_hash,
        "operator": agent.lineage.operator,
        "from_cache": result.from_cache,
        "fitness": ev.fitness,
        **{k: held_out_columns(held).get(k) for k in HELD_OUT_FIELDS},
        "objectives": ev.objectives,
        "failures": list(ev.failure_reasons),
    }


@task(name="log-fusion", version=f"furnace:{furnace_version()}", cache_policy=NONE, **retry_options(task_retries()))
def log_fusion(home: str | None, row: dict[str, Any]) -> None:
    """One MLflow run for the fusion (params, metrics, lineage tag)."""
    tracker = runtime(home).new_tracker(mlflow_experiment="furnace-fusions")
    tracker.start_experiment(
        f"fusion-{row['agent_id']}", {"operator": row["operator"]}, {"furnace.lineage_hash": row["lineage_hash"]}
    )
    held = {k: row[k] for k in HELD_OUT_FIELDS if row.get(k) is not None}  # test beside train, with its interval
    tracker.log_generation(0, {"fitness": row["fitness"], **held, **row["objectives"]}, {})
    tracker.finish("finished", {"furnace.agent_id": row["agent_id"]}, {"fusion.json": row})


@flow(name="furnace-fusion-generation")
def fusion_generation(
    parents: list[str],
    operator: str | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    probe_set: str = "writing-en",
    limit: int | None = 3,
    home: str | None = None,
    track: bool = True,
) -> dict[str, Any]:
    """Fuse ``parents`` and score the child on ``probe_set``."""
    row = fuse_and_score(home, parents, operator, seed, params or {}, probe_set, limit)
    if track:
        log_fusion(home, row)
    return row
