"""The experiment part of ``furnace demo`` (the main job of ``make demo``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from furnace import resources
from furnace.runtime import Runtime

if TYPE_CHECKING:
    from furnace.evolution.report import ExperimentReport

DEMO_FILE = resources.DEMO_EXPERIMENT
CHAMPION = "demo-champion"


def shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (``make demo`` in a checkout),
    else as it is (an installed package)."""
    path = path.resolve()
    cwd = Path.cwd().resolve()
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)


def _promote_and_register(ctx: Runtime, report: ExperimentReport) -> str | None:
    """Promote the best agent into the library and register its prompt in MLflow's Prompt Registry."""
    best = report.best
    if not best or not best["agent_id"].startswith("agt-"):
        return None
    from furnace.domain.errors import FurnaceError
    from furnace.fusion.fuse import promote

    try:
        ref = promote(ctx.store, best["agent_id"], name=CHAMPION)
    except FurnaceError as err:  # e.g. a champion of another experiment holds the name
        click.echo(f"note: best agent not promoted ({err})", err=True)
        return None
    try:
        from furnace.adapters.mlflow_prompts import register_agent_prompt

        registered = register_agent_prompt(
            ctx.store,
            best["agent_id"],
            tracking_uri=ctx.settings.tracking_uri,
            name=f"furnace-{CHAMPION}",
            alias="champion",
            elixir_ref=str(ref),
            message=f"best of {report.experiment_id}",
        )
        click.echo(f"registered prompts:/{registered.name}@champion (version {registered.version})")
    except Exception as err:  # the registry is a convenience; the demo result stands without it
        click.echo(f"note: prompt registry skipped ({err.__class__.__name__}: {err})", err=True)
    return str(ref)


def run_demo(ctx: Runtime, *, file: Path = DEMO_FILE) -> ExperimentReport:
    """Run the demo experiment offline, print the report and where to look next."""
    from furnace.adapters.mlflow_home import ui_command
    from furnace.cli.experiment_cmd import run_experiment_file
    from furnace.evolution.report import render_report

    click.echo(f"\n5. Evolution experiment ({shown_path(file)})")
    report = run_experiment_file(ctx, str(file), yes=True)
    click.echo(render_report(report))
    promoted = _promote_and_register(ctx, report)
    home = ctx.settings.home.resolve()
    lines = ["", "Where to look next:"]
    if promoted:
        lines.append(f"  best agent promoted to the library as {promoted}: furnace elixir show {CHAMPION}")
    lines += [
        f"  furnace experiment show {report.experiment_id}",
        f"  furnace agent load prompts:/furnace-{CHAMPION}@champion",
        "  furnace app                                   # dashboards, lineage explorer, arena",
        f"  {ui_command(ctx.settings.tracking_uri, home)}",
        f"  the store: {ctx.sql.where} (tables experiments, experiment_generations, experiment_individuals,"
        f" experiment_scores); DuckDB over its snapshots: furnace.analysis.connect('{home}')",
        "  notebooks/                                    # lineage, revisions, MLflow comparison",
    ]
    click.echo("\n".join(lines))
    return report
