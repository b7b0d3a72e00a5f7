"""``furnace pick EXPERIMENT``: people pick the better of two candidates' replies, blind; ``--report``
says how far each judge agrees with them; ``--undo`` takes one's last pick back."""

from __future__ import annotations

import getpass
import random
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from furnace.cli.context import emit, json_option
from furnace.domain.errors import InputError, NotFound
from furnace.runtime import Runtime

if TYPE_CHECKING:  # the core loads when a command runs, not on every CLI start
    from furnace.evolution.records import ExperimentRecord, IndividualRecord
    from furnace.scoring.picks import Choice, Pick
    from furnace.scoring.probes import Probe

_ANSWERS: dict[str, Choice | str] = {"a": "A", "b": "B", "t": "tie", "tie": "tie", "s": "skip", "q": "quit"}


def _experiment(obj: Runtime, experiment_id: str) -> ExperimentRecord:
    exp = obj.results.get_experiment(experiment_id)
    if exp is None:
        raise NotFound(f"no experiment {experiment_id!r} (see furnace experiment list)")
    return exp


def _who(who: str | None) -> str:
    name = (who or "").strip()
    if not name:
        try:
            name = getpass.getuser().strip()
        except (KeyError, OSError):  # no login name in this environment
            name = ""
    if not name:
        raise InputError("say who is picking: --who NAME", field="who")
    return name


def _show(text: str) -> str:
    return "\n".join("  " + line for line in text.strip().splitlines()) or "  (empty reply)"


def _undo_command(experiment_id: str, who: str | None, *, track: bool) -> str:
    """The command that takes back the last pick of this session: the same home, the same person."""
    home = click.get_current_context().find_root().params.get("home")
    words = ["furnace", *(["--home", home] if home else []), "pick", experiment_id]
    if who and who.strip():  # else the login name, which --undo defaults to as well
        words += ["--who", who.strip()]
    words += ["--undo", *([] if track else ["--no-mlflow"])]
    return shlex.join(words)


def _undo(obj: Runtime, exp: ExperimentRecord, who: str, as_json: bool, track: bool) -> None:
    last = obj.picks.last(exp.experiment_id, who)
    if last is None:
        raise NotFound(f"{who} has no pick to undo in {exp.experiment_id}")
    undone = obj.picks.undo(last.pick_id, who=who)
    if track:
        obj.withdraw_pick(undone)
    emit(
        {"undone": undone.pick_id, "probe": undone.probe, "choice": undone.choice},
        as_json=as_json,
        human=f"undone: {undone.pick_id} ({undone.probe}: {undone.choice}); it is kept, and counts no more",
    )


def _report(
    obj: Runtime, exp: ExperimentRecord, extra_judges: tuple[str, ...], probes_dir: Path | None, as_json: bool
) -> None:
    from furnace.scoring.agreement import MIN_PICKS
    from furnace.scoring.fitness import SCORERS
    from furnace.views.picking import (
        candidate_reply,
        experiment_calibration,
        experiment_probes,
        recorded_judge,
        rejudge,
    )

    every_pick = obj.picks.picks(exp.experiment_id, include_undone=True)
    picks = [p for p in every_pick if not p.undone]
    records = obj.results.individuals(exp.experiment_id)
    others = {}
    if extra_judges and picks:
        llm = obj.llm_for(exp.model)
        by_key = {(r.agent_id, r.generation): r for r in records}
        scorers = exp.config.get("scorers") or {}
        rubrics = [s for s, w in scorers.items() if w > 0 and s in SCORERS and SCORERS[s].kind == "judge"]

        def answer(record: IndividualRecord, probe: Probe) -> str:
            return candidate_reply(llm, record, probe, seed=exp.seed)

        for name in extra_judges:
            judge = obj.llm_for(name)
            others[name] = rejudge(
                judge, answer, by_key, picks, experiment_probes(exp, probes_dir), rubrics or ["fidelity"], seed=exp.seed
            )
    result = experiment_calibration(records, every_pick, recorded_judge(exp), others)
    head = f"{exp.experiment_id}: what people's picks say (below {MIN_PICKS} decided picks: not yet meaningful)"
    data = {"experiment_id": exp.experiment_id, **result.as_dict()}
    emit(data, as_json=as_json, human="\n".join([head, *result.lines()]))


def _session(
    obj: Runtime,
    exp: ExperimentRecord,
    who: str,
    count: int,
    seed: int | None,
    generations: int,
    track: bool,
    probes_dir: Path | None,
    undo_command: str,
) -> None:
    from furnace.views.picking import as_pick, experiment_probes, pair_replies, recent, reveal, session_pairs

    probes = experiment_probes(exp, probes_dir)
    records = obj.results.individuals(exp.experiment_id)
    candidates = recent(records, generations)
    if len(candidates) < 2:
        raise InputError(f"{exp.experiment_id} has fewer than two scored candidates to compare", field="experiment")
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    picked = obj.picks.picks(exp.experiment_id)
    pairs = session_pairs(
        exp,
        records,
        obj.results.generations(exp.experiment_id),
        picked,
        probes,
        count=count,
        seed=seed,
        recent_generations=generations,
    )
    by_id = {p.id: p for p in probes.probes}
    llm = obj.llm_for(exp.model)
    click.echo(f"{len(pairs)} blind pairs from {exp.experiment_id} (order seed {seed}); the ids show after each pick")
    made: list[Pick] = []
    for n, pair in enumerate(pairs, 1):
        probe = by_id[pair.probe]
        reply_a, reply_b = pair_replies(llm, pair, probe, seed=exp.seed)
        click.echo(f"\n[{n}/{len(pairs)}] probe {probe.id}: {probe.message}\n")
        click.echo(f"A:\n{_show(reply_a)}\n\nB:\n{_show(reply_b)}\n")
        try:
            key = click.prompt(
                "better: a, b, t(ie), s(kip) or q(uit)",
                type=click.Choice(sorted(_ANSWERS), case_sensitive=False),
                show_choices=False,
            ).lower()
        except click.Abort:
            break  # end of input: the picks made so far are kept
        answer = _ANSWERS[key]
        if answer == "quit":
            break
        if answer == "skip":
            continue
        reason = click.prompt("why (optional, Enter to skip)", default="", show_default=False).strip()
        stored = obj.picks.add(as_pick(pair, exp.experiment_id, answer, who, reason))  # type: ignore[arg-type]
        made.append(stored)
        click.echo(f"stored {stored.pick_id}: {reveal(pair)}")
    taking_back = f"; {undo_command} takes the last one back" if made else ""
    click.echo(f"\n{len(made)} picks stored for {who}{taking_back}")
    if made and track:
        slots = {(r.agent_id, r.generation): r.slot for r in records}
        added = obj.log_picks(made, slots)
        if added is not None:
            click.echo(
                f"MLflow: {added} human assessments on the candidates' traces"
                if added
                else "MLflow: not logged (the experiment has no traced MLflow run)"
            )


@click.command("pick")
@click.argument("experiment_id")
@click.option("--who", default=None, help="Who is picking (default: the login name).")
@click.option("--count", type=click.IntRange(1, 100), default=5, show_default=True, help="Pairs to show.")
@click.option("--seed", type=int, default=None, help="Seed of the pairs' blind order (default: drawn, and recorded).")
@click.option(
    "--generations", type=click.IntRange(1, 1000), default=2, show_default=True, help="Recent generations drawn from."
)
@click.option("--undo", is_flag=True, help="Take back your last pick in this experiment (it is kept, marked undone).")
@click.option("--report", is_flag=True, help="Each judge's agreement with people's picks, and people's ranking.")
@click.option(
    "--judge",
    "judges",
    multiple=True,
    metavar="MODEL",
    help="With --report: also score the picked pairs with this judge model (e.g. furnace-offline-judge2-v1).",
)
@click.option(
    "--probes-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Folder of the experiment's probe set when it is not a shipped one (the experiment file's ../probes).",
)
@click.option("--no-mlflow", is_flag=True, help="Do not log picks (or undos) to the experiment's MLflow traces.")
@json_option
@click.pass_obj
def pick_cmd(
    obj: Runtime,
    experiment_id: str,
    who: str | None,
    count: int,
    seed: int | None,
    generations: int,
    undo: bool,
    report: bool,
    judges: tuple[str, ...],
    probes_dir: Path | None,
    no_mlflow: bool,
    as_json: bool,
) -> None:
    """Pick the better of two candidates' replies to a probe, blind (A, B or tie, and why)."""
    exp = _experiment(obj, experiment_id)
    if undo and report:
        raise InputError("--undo and --report are separate: run one, then the other", field="undo")
    if judges and not report:
        raise InputError("--judge goes with --report", field="judge")
    if undo:
        _undo(obj, exp, _who(who), as_json, not no_mlflow)
    elif report:
        _report(obj, exp, judges, probes_dir, as_json)
    else:
        if as_json:
            raise InputError("picking is interactive; --json goes with --report or --undo", field="json")
        undo_command = _undo_command(exp.experiment_id, who, track=not no_mlflow)
        _session(obj, exp, _who(who), count, seed, generations, not no_mlflow, probes_dir, undo_command)


def register(cli: click.Group) -> None:
    """Add ``pick`` to the ``furnace`` command."""
    cli.add_command(pick_cmd)
