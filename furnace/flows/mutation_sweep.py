"""Prefect flow: one base elixir × rates × seeds → variants, scored, one comparison table."""

from __future__ import annotations

from typing import Any  # noqa: E402

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NONE  # noqa: E402
from prefect.task_runners import ThreadPoolTaskRunner  # noqa: E402

from furnace.evolution.sweep import DEFAULT_SCORERS  # noqa: E402
from furnace.flows._common import operator_versions, runtime, scorer_versions


# Not cached by Prefect (the base is an id whose latest version can change); see fusion_generation.
@task(
    name="mutate-and-score",
    version=f"{operator_versions(['mutation'])} {scorer_versions(DEFAULT_SCORERS)}",
    cache_policy=NONE,
)
def mutate_and_score(
    home: str | None, base_id: str, rate: float, seed: int, probe_set: str, limit: int | None
) -> dict[str, Any]:
    """One cell of the grid (``furnace.evolution.sweep.sweep_variant``)."""
    from furnace.evolution.sweep import sweep_variant
    from furnace.scoring.probes import load_probe_set

    ctx = runtime(home)
    breeder = ctx.fusion_breeder()
    return sweep_variant(
        ctx.store.get_elixir(base_id),
        rate,
        seed,
        breeder=breeder,
        llm=ctx.llm,
        probes=load_probe_set(probe_set).head(limit),
        scorers=DEFAULT_SCORERS,
    )


@flow(name="furnace-mutation-sweep", task_runner=ThreadPoolTaskRunner(max_workers=4))  # type: ignore[arg-type]
def mutation_sweep(
    base_id: str,
    rates: list[float],
    seeds: list[int],
    probe_set: str = "writing-en",
    limit: int | None = 3,
    home: str | None = None,
) -> list[dict[str, Any]]:
    """Every (rate, seed) variant of ``base_id``, scored; rows sorted by fitness."""
    futures = [mutate_and_score.submit(home, base_id, r, s, probe_set, limit) for r in rates for s in seeds]
    rows = [f.result() for f in futures]
    return sorted(rows, key=lambda r: (-r["fitness"], r["rate"], r["seed"]))
