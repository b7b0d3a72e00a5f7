"""``furnace experiment run|list|show``, ``furnace sweep`` and ``furnace serve``.

The plain ``experiment run`` runs the evolution loop in-process (no Prefect
server needed, so ``make demo`` stays fast); ``--prefect`` runs the same work
as a Prefect flow instead.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from furnace.cli.context import emit, json_option
from furnace.domain.errors import InputError, NotFound
from furnace.runtime import PreparedExperiment, Runtime

if TYPE_CHECKING:  # furnace.evolution loads on a run (its import is ~0.2 s of every CLI start otherwise)
    from furnace.evolution.report import ExperimentReport


def check_budget(prepared: PreparedExperiment, *, yes: bool, as_json: bool) -> None:
    """Print the estimate; refuse when it exceeds the budget unless ``yes``."""
    if not as_json:
        click.echo(prepared.estimate_line(), err=True)
    prepared.check_budget(yes=yes)


def run_experiment_file(
    ctx: Runtime,
    file: str,
    *,
    yes: bool = False,
    as_json: bool = False,
    track: bool = True,
    quiet: bool = False,
    keep_failures: bool = False,
    runner: str = "threads",
    dask_address: str | None = None,
    same: bool = False,
) -> ExperimentReport:
    """Load, estimate, run and return the report of one experiment file (``runner="dask"``: its
    units on Dask worker processes, see :meth:`Runtime.on_dask`)."""
    from furnace.evolution.config import load_config
    from furnace.evolution.progress import ProgressBar

    config = load_config(file)
    bar = ProgressBar(enabled=not quiet and not as_json, notices=not quiet)  # a notice on stderr even with --json
    prepared = ctx.prepare_experiment(
        config,
        progress=bar,
        track=track,
        probes_dir=Path(file).resolve().parent.parent / "probes",
        keep_failures=keep_failures,
    )
    fork = prepared.check_fork(same=same)
    if fork:
        click.echo(fork, err=True)
    if prepared.judge_warning:
        click.echo(prepared.judge_warning, err=True)
    check_budget(prepared, yes=yes, as_json=as_json)
    if runner == "dask":
        with ctx.on_dask(prepared, address=dask_address, on_status=lambda line: click.echo(line, err=True)):
            return prepared.evolution.run()
    return prepared.evolution.run()


@click.group("experiment")
def experiment_group() -> None:
    """Evolution experiments: run, list, show."""


@experiment_group.command("run")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--yes", is_flag=True, help="Start even when the estimate exceeds the budget.")
@click.option("--no-mlflow", is_flag=True, help="Do not log to MLflow.")
@click.option("--prefect", is_flag=True, help="Run as a Prefect flow (PREFECT_API_URL, or a temporary server).")
@click.option(
    "--runner",
    type=click.Choice(["threads", "dask"]),
    default="threads",
    help="threads in this process, or dask: worker processes (FURNACE_DASK_WORKERS, default 2) on 127.0.0.1.",
)
@click.option(
    "--dask-address",
    default=None,
    metavar="ADDRESS",
    help="With --runner dask: an existing Dask scheduler (tcp://host:8786; or FURNACE_DASK_ADDRESS).",
)
@click.option("--keep-failures", is_flag=True, help="On a rerun, keep individuals whose scoring failed (no retry).")
@click.option(
    "--same",
    is_flag=True,
    help="Refuse to start when a seed changed since this config's last run (a rerun would be a new experiment).",
)
@json_option
@click.pass_obj
def run_cmd(
    obj: Runtime,
    file: str,
    yes: bool,
    no_mlflow: bool,
    prefect: bool,
    runner: str,
    dask_address: str | None,
    keep_failures: bool,
    same: bool,
    as_json: bool,
) -> None:
    """Run (or resume) the experiment in FILE and print its report."""
    from furnace.evolution.report import render_report

    if prefect:
        from furnace.adapters.prefect_server import prefect_api
        from furnace_flows.evolution import evolution_flow  # the launcher edge cli -> flows (lazy: Prefect)

        with prefect_api(
            obj.settings.home,
            timeout_s=obj.settings.prefect_start_timeout_s,
            on_status=lambda line: click.echo(line, err=True),
        ):
            data = evolution_flow(
                str(Path(file).resolve()),
                home=str(obj.settings.home),
                yes=yes,
                track=not no_mlflow,
                runner=runner,
                show=not as_json,
                keep_failures=keep_failures,
                dask_address=dask_address,
            )
        emit(data, as_json=as_json, human=data.get("text"))
        return
    report = run_experiment_file(
        obj,
        file,
        yes=yes,
        as_json=as_json,
        track=not no_mlflow,
        keep_failures=keep_failures,
        runner=runner,
        dask_address=dask_address,
        same=same,
    )
    emit(report.as_dict(), as_json=as_json, human=render_report(report))


@experiment_group.command("list")
@json_option
@click.pass_obj
def list_cmd(obj: Runtime, as_json: bool) -> None:
    """Experiments recorded in the store, newest first: the champion's fitness (validation) and its held-out
    test fitness with its 95% interval and the train-test gap."""
    from furnace.evolution.report import HELD_OUT_FIELDS, gap_text, interval_text

    rows: list[dict[str, Any]] = [
        {
            "experiment_id": e.experiment_id,
            "name": e.name,
            "model": e.model,
            "status": e.status,
            "best_agent": e.summary.get("best_agent"),
            "best_fitness": e.summary.get("best_fitness"),
            **{k: e.summary.get(k) for k in HELD_OUT_FIELDS},
            "generations": e.summary.get("generations"),
        }
        for e in obj.results.list_experiments()
    ]
    lines = [
        f"{r['experiment_id']:<32} {r['status'][:30]:<30} best {r['best_fitness'] or 0:.3f} {r['best_agent'] or '-'}"
        + (f"  test {interval_text(r)}  gap {gap_text(r)}" if r["test_fitness"] is not None else "")
        for r in rows
    ] or ["no experiments yet (furnace experiment run FILE)"]
    emit(rows, as_json=as_json, human="\n".join(lines))


@experiment_group.command("show")
@click.argument("experiment_id")
@json_option
@click.pass_obj
def show_cmd(obj: Runtime, experiment_id: str, as_json: bool) -> None:
    """Generations, the run's totals (the call ledger's), leaderboard, judge feedback and failures of one
    experiment."""
    from furnace.evolution.engine import HELD_OUT
    from furnace.evolution.judging import panel_lines
    from furnace.evolution.records import resolved_seeds
    from furnace.evolution.report import gap_text, interval_text, reevaluation_text, spent_text
    from furnace.views.experiments import (
        agent_feedback,
        check_ledger,
        held_out,
        held_out_fields,
        ranked,
        unscored_rows,
    )
    from furnace.views.judges import experiment_judges

    results = obj.results
    exp = results.get_experiment(experiment_id)
    if exp is None:
        raise NotFound(f"no experiment {experiment_id!r} (see furnace experiment list)")
    ledger = obj.llm.ledger
    totals = ledger.totals(experiment_id, family=True)  # the run's totals, as its report gives them
    check_ledger(exp, totals)  # the totals shown hold to the ledger
    # of them, the evaluation after the search (its ledger rows name the unit "held-out"; in no generation's)
    held_calls = ledger.totals(experiment_id, unit=HELD_OUT)
    gens = results.generations(experiment_id)
    seeds = resolved_seeds(results.individuals(experiment_id))
    best = ranked(results, experiment_id)  # scored agents only: a failure is never ranked
    unscored = unscored_rows(results, experiment_id)
    every_pick = obj.picks.picks(experiment_id, include_undone=True)
    figures = held_out(results, experiment_id)
    tested = {r.agent_id: held_out_fields(figures, r.agent_id) for r in best}
    bests = {g.generation: held_out_fields(figures, g.survivors[0] if g.survivors else "") for g in gens}
    data: dict[str, Any] = {
        "experiment_id": exp.experiment_id,
        "name": exp.name,
        "model": exp.model,
        "status": exp.status,
        "summary": exp.summary,
        "config": exp.config,
        "seeds": seeds,
        "generations": [
            {
                "generation": g.generation,
                "best_fitness": g.best_fitness,
                "mean_fitness": g.mean_fitness,
                "calls": g.calls,
                "cached_calls": g.cached_calls,
                "weights": g.operator_weights,
                **{f"best_{k}": v for k, v in bests[g.generation].items()},  # scored on test after the search
            }
            for g in gens
        ],
        "leaderboard": [
            {
                "agent_id": r.agent_id,
                "generation": r.generation,
                "operator": r.operator,
                "fitness": r.fitness,
                **tested[r.agent_id],
                "objectives": r.objectives,
            }
            for r in best
        ],
        "champion": figures.get("champion"),
        "reevaluation": figures.get("reevaluation"),
        "splits": figures.get("splits"),
        "unscored": unscored,
        "feedback": {r.agent_id: agent_feedback(results, experiment_id, r.agent_id) for r in best[:3]},
        "picks": [asdict(p) for p in every_pick],  # people's (furnace pick)
        "totals": totals.as_dict(),
        "held_out_totals": held_calls.as_dict(),
    }
    lines = [
        f"{exp.experiment_id} ({exp.name}) — {exp.status}; model {exp.model}",
        f"seeds: {', '.join(seeds)}",
        "generation  best    mean   calls  (the best's held-out figures)",
    ]

    def held(row: dict[str, Any]) -> str:
        train = f"{row['train_fitness']:.3f}" if row["train_fitness"] is not None else "-"
        return f"train {train}  test {interval_text(row)}  gap {gap_text(row)}"

    lines += [
        f"{g.generation:>10}  {g.best_fitness:.3f}  {g.mean_fitness:.3f}  {g.calls:>5}  {held(bests[g.generation])}"
        for g in gens
    ]
    lines.append(f"calls: {spent_text(data['totals'])}")  # the report's totals line
    if held_calls.calls:
        held_figures = data["held_out_totals"]
        lines.append(
            f"  of them the held-out evaluation after the search (in no generation's calls):"
            f" {held_figures['calls']} model calls + {held_figures['cached_calls']} cache hits;"
            f" tokens {held_figures['tokens']}, cost ${held_figures['cost_usd']:.4f}"
        )

    lines += ["leaderboard (fitness: validation; test [95% interval]; gap = train - test)"] + [
        f"  {r.agent_id:<26} gen {r.generation} {r.operator:<9} {r.fitness:.3f}  {held(tested[r.agent_id])}"
        + ("  champion" if r.agent_id == figures.get("champion") else "")
        for r in best
    ]
    again = figures.get("reevaluation")
    if again:
        lines.append(
            f"re-evaluation with fresh samples: the search's winner {again['agent_id']} {reevaluation_text(again)}; "
            f"champion {figures.get('champion')}"
        )
    panel = experiment_judges(exp, best)
    if panel is not None:
        data["judges"] = panel.as_dict()
        for row in data["leaderboard"]:
            row["judges"] = panel.by_agent.get(row["agent_id"], {})
        lines += panel_lines(panel.agreement, data["leaderboard"])[:-1]
    if best:
        rows = data["feedback"][best[0].agent_id]
        lines.append(f"judge feedback on {best[0].agent_id}" + ("" if rows else ": none recorded"))
        lines += [f"  {f['probe']:<16} {f['scorer']:<10} {f['value']:.3f}  {f['feedback']}" for f in rows]
    if unscored:
        lines.append(
            f"unscored ({len(unscored)}): a failure, not a score; not ranked, kept out of selection, a rerun retries"
        )
        lines += [
            f"  {r['agent_id'][:26]:<26} gen {r['generation']:>2}  {r['unscored']}: {r['reason'][:90]}"
            for r in unscored[:10]
        ]
    if every_pick:
        from furnace.views.picking import experiment_calibration, recorded_judge

        calibration = experiment_calibration(results.individuals(experiment_id), every_pick, recorded_judge(exp))
        data["calibration"] = calibration.as_dict()
        lines.append(f"people's picks: {calibration.picks} (furnace pick {experiment_id} --report)")
        lines += ["  " + a.reading() for a in calibration.judges]
    emit(data, as_json=as_json, human="\n".join(lines))


@click.command("sweep")
@click.argument("base_id")
@click.option("--rates", default="0.1,0.2,0.3", show_default=True, help="Comma-separated mutation rates.")
@click.option("--seeds", "seeds", default="1,2", show_default=True, help="Comma-separated seeds.")
@click.option("--probes", "probe_set", default="writing-en", show_default=True, help="Probe set name.")
@click.option("--limit", type=click.IntRange(1, 200), default=3, show_default=True, help="Probes used.")
@click.option("--no-mlflow", is_flag=True, help="Do not log to MLflow.")
@click.option("--prefect", is_flag=True, help="Run as a Prefect flow (PREFECT_API_URL, or a temporary server).")
@json_option
@click.pass_obj
def sweep_cmd(
    obj: Runtime,
    base_id: str,
    rates: str,
    seeds: str,
    probe_set: str,
    limit: int,
    no_mlflow: bool,
    prefect: bool,
    as_json: bool,
) -> None:
    """Mutation sweep: BASE_ID x rates x seeds, each variant scored and stored like an experiment
    (furnace experiment show SWEEP_ID), one table."""
    from furnace.evolution.sweep import SweepPlan, run_sweep
    from furnace.scoring.probes import load_probe_set

    try:
        rate_list = [float(r) for r in rates.split(",") if r.strip()]
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise InputError("--rates must be numbers and --seeds integers, comma-separated", field="rates") from None
    if not rate_list or not seed_list:
        raise InputError("--rates and --seeds need at least one value each", field="rates")
    if any(not 0 < r <= 1 for r in rate_list):
        raise InputError("--rates must be between 0 (excluded) and 1", field="rates")
    base = obj.store.get_elixir(base_id)
    probes = load_probe_set(probe_set).head(limit)
    if prefect:
        from furnace.adapters.prefect_server import prefect_api
        from furnace_flows.mutation_sweep import mutation_sweep  # the launcher edge cli -> flows (lazy)

        with prefect_api(
            obj.settings.home,
            timeout_s=obj.settings.prefect_start_timeout_s,
            on_status=lambda line: click.echo(line, err=True),
        ):
            rows = mutation_sweep(
                base_id, rate_list, seed_list, probe_set, limit, home=str(obj.settings.home), track=not no_mlflow
            )
    else:
        plan = SweepPlan(base, tuple(rate_list), tuple(seed_list), probes, obj.llm.model_name)
        tracker = obj.new_tracker(track=not no_mlflow)  # the experiments' MLflow experiment
        rows = run_sweep(plan, breeder=obj.fusion_breeder(), llm=obj.llm, results=obj.results, tracker=tracker)
    sweep_id = rows[0]["sweep_id"] if rows else ""
    from furnace.evolution.report import gap_text, interval_text

    def held(r: dict[str, Any]) -> str:
        return f"{r['fitness']:.3f}    {interval_text(r):<22} {gap_text(r):>6}"

    lines = [f"{'rate':>5} {'seed':>5}  {'agent':<26} fitness  test [95% interval]       gap"] + [
        f"{r['rate']:>5.2f} {r['seed']:>5}  {r['agent_id']:<26} "
        + (held(r) if not r["failures"] else f"unscored: {(r['reasons'] or ['?'])[0][:60]}")
        for r in rows
    ]
    lines.append("fitness: the probes outside the test split (what the sweep ranks by); test: held out, report only")
    lines.append(f"stored as {sweep_id}: furnace experiment show {sweep_id}")
    emit(rows, as_json=as_json, human="\n".join(lines))


@click.command("serve")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--cron", default="0 3 * * *", show_default=True, help="Cron schedule.")
@click.option("--name", default=None, help="Deployment name (default: furnace-<experiment name>).")
@click.pass_obj
def serve_cmd(obj: Runtime, file: str, cron: str, name: str | None) -> None:
    """Serve the evolution flow for FILE on a cron schedule (needs `prefect server start`)."""
    from furnace_flows.evolution import serve  # the launcher edge cli -> flows (lazy: Prefect)

    click.echo(f"serving {file} on '{cron}' — needs a Prefect server (PREFECT_API_URL); Ctrl-C to stop", err=True)
    serve(str(Path(file).resolve()), home=str(obj.settings.home), cron=cron, name=name)


def register(cli: click.Group) -> None:
    """Add ``experiment``, ``sweep`` and ``serve`` to the ``furnace`` command."""
    cli.add_command(experiment_group)
    cli.add_command(sweep_cmd)
    cli.add_command(serve_cmd)
