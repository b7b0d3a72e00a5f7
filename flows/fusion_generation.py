"""Prefect flow: parents + operator + params → agent (through the caches), scored on a probe set, logged.

Both tasks are cached by Prefect (docs/prefect.md#caching). The flow first resolves each parent to the
version the store holds now, then keys ``fuse-and-score`` on the child's lineage hash (the parents' ids,
versions and content hashes, the operator and its version, every param that shapes the result — seed,
model and embedder among them), the probes it is scored on and the scorers' versions; ``log-fusion`` on
the row it logs and where. A rerun shows ``Cached`` task runs and makes no model call; a parent's new
version, another model or operator makes a new key. A result with a failure is never cached.

Its fitness is over the probes outside the **test** split; the test probes are scored beside it, for the
report only: the row and the MLflow run carry the test fitness with its 95% interval and the train–test gap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any  # noqa: E402

from prefect import flow, task  # noqa: E402

from ._common import (
    Unscored,
    cache_options,
    furnace_version,
    operator_versions,
    outcome,
    results_dir,
    retry_options,
    runtime,
    scorer_versions,
    task_key,
    task_retries,
)

if TYPE_CHECKING:
    from furnace.runtime import Runtime

from furnace.evolution.report import HELD_OUT_FIELDS, held_out_columns  # noqa: E402

DEFAULT_SCORERS = {"constraints": 0.3, "fidelity": 0.3, "tone": 0.2, "brief_fit": 0.2}


def _wiring(ctx: Runtime) -> dict[str, Any]:
    """What a fusion is wired to in ``ctx``: the model, the embedder, the settings and the synthesis cache."""
    return {"llm": ctx.llm, "embedder": ctx.embedder, "settings": ctx.settings, "cache": ctx.synthesis_cache}


@task(
    name="fuse-and-score",
    version=f"{operator_versions()} {scorer_versions(DEFAULT_SCORERS)}",
    **retry_options(task_retries()),  # transient, non-model failures only (docs/prefect.md#retries)
)
def fuse_and_score(
    key: str,
    home: str | None,
    parents: list[str],
    operator: str,
    seed: int,
    params: dict[str, Any],
    probe_set: str,
    limit: int | None,
) -> dict[str, Any]:
    """One fusion and its evaluation (furnace functions; the task only wires them). ``parents`` are
    pinned (``id@version``); ``key`` is the cache key the flow computed (:func:`fusion_key`)."""
    from furnace.evolution.evaluate import evaluate_agent, split_held_out
    from furnace.fusion.fuse import fuse
    from furnace.scoring.probes import load_probe_set

    ctx = runtime(home)
    result = fuse(ctx.store, parents, operator=operator, seed=seed, params=params or None, **_wiring(ctx))
    agent = result.agent
    probes = load_probe_set(probe_set).head(limit)
    every = evaluate_agent(ctx.llm, agent.elixir, agent.system_prompt, probes, DEFAULT_SCORERS, seed=seed)
    ev, held = split_held_out(every, probes, DEFAULT_SCORERS, seed=seed, agent_id=agent.id)  # fitness without test
    row = {
        "agent_id": agent.id,
        "lineage_hash": agent.lineage_hash,
        "operator": agent.lineage.operator,
        "from_cache": result.from_cache,
        "fitness": ev.fitness,
        **{k: held_out_columns(held).get(k) for k in HELD_OUT_FIELDS},
        "objectives": ev.objectives,
        "failures": list(ev.failure_reasons),
    }
    if ev.failure_reasons:
        raise Unscored(row, ev.failure_reasons)  # never cached: a rerun scores it again
    return row


@task(name="log-fusion", version=f"furnace:{furnace_version()}", **retry_options(task_retries()))
def log_fusion(key: str, home: str | None, row: dict[str, Any]) -> None:
    """One MLflow run for the fusion (params, metrics, lineage tag). Cached on the row and the tracking
    URI: a rerun of the same fusion logs no second run."""
    tracker = runtime(home).new_tracker(mlflow_experiment="furnace-fusions")
    tracker.start_experiment(
        f"fusion-{row['agent_id']}", {"operator": row["operator"]}, {"furnace.lineage_hash": row["lineage_hash"]}
    )
    held = {k: row[k] for k in HELD_OUT_FIELDS if row.get(k) is not None}  # test beside train, with its interval
    tracker.log_generation(0, {"fitness": row["fitness"], **held, **row["objectives"]}, {})
    tracker.finish("finished", {"furnace.agent_id": row["agent_id"]}, {"fusion.json": row})


def fusion_key(lineage_hash: str, probes: Any, seed: int) -> str:
    """The fusion task's cache key: the child's lineage hash, the probes (their content) and the scorers
    with their versions, the evaluation's seed."""
    from furnace.scoring.fitness import SCORERS

    scorers = {k: [w, SCORERS[k].version] for k, w in sorted(DEFAULT_SCORERS.items())}
    # what the fitness is over: the probes outside the test split (a row cached before splits had no test)
    split = "fitness outside the test split"
    return task_key(
        "fusion", lineage=lineage_hash, probes=probes.model_dump(mode="json"), scorers=scorers, seed=seed, split=split
    )


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
    """Fuse ``parents`` (each ``id`` at its latest version, or ``id@version``) and score the child on
    ``probe_set``. ``from_cache`` is true when no synthesis ran (furnace's cache or Prefect's)."""
    from furnace.fusion.fuse import plan_fusion
    from furnace.scoring.probes import load_probe_set

    ctx = runtime(home)
    wiring = {k: v for k, v in _wiring(ctx).items() if k != "cache"}
    loaded, plan = plan_fusion(ctx.store, parents, operator=operator, seed=seed, params=params or None, **wiring)
    pinned = [str(e.ref) for e in loaded]  # the versions the key names, in the task too
    key = fusion_key(plan.lineage_hash, load_probe_set(probe_set).head(limit), seed)
    cached = cache_options(results_dir(home))
    state = fuse_and_score.with_options(**cached)(
        key, home, pinned, plan.operator, seed, params or {}, probe_set, limit, return_state=True
    )
    row: dict[str, Any] = outcome(state)
    if track:
        uri = ctx.settings.tracking_uri
        log_fusion.with_options(**cached)(task_key("log-fusion", row=row, tracking_uri=uri), home, row)
    return {**row, "from_cache": True} if state.is_completed() and state.name == "Cached" else row
