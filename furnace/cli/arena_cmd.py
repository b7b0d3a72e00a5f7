"""``furnace arena``: group chat from the command line.

``new`` creates a session, ``say`` runs one user turn and prints each reply as
it lands (``--json``: one event per line, JSON Lines), ``resume`` finishes an
interrupted turn (``say`` and ``resume`` exit 1 when the turn ended with no reply:
every speaker failed), ``cancel`` asks a running turn to stop before its next
speaker (a turn already finished, failed or cancelled is refused: exit 1, nothing
written), ``show`` prints a session's transcript (``--plans`` adds each plan).

Test hook: ``FURNACE_ARENA_KILL_AFTER=N`` makes ``say``/``resume`` SIGKILL
their own process right after the N-th checkpoint of the run (used by the
crash-and-resume test).
"""

from __future__ import annotations

import json
import os
import signal
from typing import TYPE_CHECKING, Any

import click

from furnace.cli.context import emit, json_option
from furnace.runtime import Runtime

if TYPE_CHECKING:
    from furnace.arena.runner import Arena, CheckpointHook, RunOutcome

KILL_AFTER_ENV = "FURNACE_ARENA_KILL_AFTER"


def _kill_hook() -> CheckpointHook | None:
    raw = os.environ.get(KILL_AFTER_ENV)
    if not raw:
        return None
    after = int(raw)

    def hook(run_id: str, checkpoints: int) -> None:
        if checkpoints >= after:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def _arena(ctx: Runtime) -> Arena:
    return ctx.arena(after_checkpoint=_kill_hook())


def _printer(as_json: bool) -> Any:
    from furnace.arena.events import FinalReply, PlanCreated, RunCancelled, RunFinished, RunStarted, SpeakerFailed

    def show(event: Any) -> None:
        if as_json:
            click.echo(event.model_dump_json())
        elif isinstance(event, RunStarted):
            click.echo(f"run {event.run_id} · {event.directive}{' (resumed)' if event.resumed else ''}")
        elif isinstance(event, PlanCreated):
            plan = event.plan
            names = ", ".join(s.member_id for s in plan.speakers)
            how = "stored plan" if event.reused else f"plan by {plan.source}"
            click.echo(f"{how}: {names}" + (f" ({plan.reason})" if plan.source == "fallback" else ""))
        elif isinstance(event, FinalReply):
            click.echo(f"{event.name}: {event.text}")
        elif isinstance(event, SpeakerFailed):
            click.echo(f"{event.name}: (skipped after {event.attempts} attempts: {event.error})")
        elif isinstance(event, RunFinished):
            tail = f", {event.skipped_done} already done" if event.skipped_done else ""
            head = "done" if event.status == "finished" else "failed"
            click.echo(f"{head}: {event.replies} replies, {event.failed} failed{tail}")
        elif isinstance(event, RunCancelled):
            click.echo(f"cancelled: {event.completed} answered, {event.remaining} not started")

    return show


def _fail_unanswered(outcome: RunOutcome) -> None:
    """Exit 1 with one line on stderr when the turn ended with no reply (the run is stored as failed)."""
    from furnace.arena.events import RunFinished

    ended = next((e for e in outcome.events if isinstance(e, RunFinished)), None)
    if ended is not None and ended.status == "failed":
        failed = ended.failed + ended.skipped_done
        click.echo(
            f"error: no member replied in run {ended.run_id} ({failed} speaker(s) failed); it is recorded as failed",
            err=True,
        )
        raise click.exceptions.Exit(1)


@click.group("arena")
def arena() -> None:
    """Group chat: several personas in one session (deterministic directives, supervisor, resume)."""


@arena.command("new")
@click.option("--members", required=True, help="Comma-separated agent or elixir ids (1-8), primary first.")
@click.option("--title", default="", help="A title for the session.")
@click.option("--model", default=None, help="The session's model (default: the configured one).")
@json_option
@click.pass_obj
def new(ctx: Runtime, members: str, title: str, model: str | None, as_json: bool) -> None:
    """Create a session."""
    session = _arena(ctx).create_session(members.split(","), title=title, model=model)
    emit(
        session.model_dump(mode="json"),
        as_json=as_json,
        human=f"{session.id}  members: {', '.join(session.members)}  model: {session.model}",
    )


@arena.command("say")
@click.argument("session_id")
@click.argument("message")
@json_option
@click.pass_obj
def say(ctx: Runtime, session_id: str, message: str, as_json: bool) -> None:
    """Send MESSAGE to SESSION; prints each speaker's reply as it lands."""
    outcome = _arena(ctx).say(session_id, message, on_event=_printer(as_json))
    if not outcome.events and not as_json:  # stop/continue with no turn to act on
        click.echo("no running or interrupted turn in this session")
    _fail_unanswered(outcome)


@arena.command("resume")
@click.argument("run_id")
@json_option
@click.pass_obj
def resume(ctx: Runtime, run_id: str, as_json: bool) -> None:
    """Finish an interrupted or cancelled turn (remaining speakers only, same plan)."""
    _fail_unanswered(_arena(ctx).resume(run_id, on_event=_printer(as_json)))


@arena.command("cancel")
@click.argument("run_id")
@json_option
@click.pass_obj
def cancel(ctx: Runtime, run_id: str, as_json: bool) -> None:
    """Ask a running turn to stop before its next speaker (a turn that has ended is refused, exit 1)."""
    _arena(ctx).cancel(run_id)
    emit({"run_id": run_id, "cancel_requested": True}, as_json=as_json, human=f"cancel requested for {run_id}")


@arena.command("list")
@json_option
@click.pass_obj
def list_(ctx: Runtime, as_json: bool) -> None:
    """List sessions, newest first."""
    sessions = _arena(ctx).store.list_sessions()
    emit(
        [s.model_dump(mode="json") for s in sessions],
        as_json=as_json,
        human="\n".join(f"{s.id}  {', '.join(s.members)}  {s.title}" for s in sessions) or "no sessions",
    )


@arena.command("show")
@click.argument("session_id")
@click.option("--plans", is_flag=True, help="Show each turn's plan (the supervisor is otherwise invisible).")
@json_option
@click.pass_obj
def show(ctx: Runtime, session_id: str, plans: bool, as_json: bool) -> None:
    """Print a session's transcript."""
    arena_ = _arena(ctx)
    session = arena_.store.get_session(session_id)
    runs = {r.run_id: r for r in arena_.store.list_runs(session_id)}
    messages = arena_.messages(session_id)
    if as_json:
        data = {
            "session": session.model_dump(mode="json"),
            "runs": [r.model_dump(mode="json") for r in runs.values()],
            "messages": [m.model_dump(mode="json") for m in messages],
        }
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        return
    click.echo(f"{session.id}  members: {', '.join(session.members)}  model: {session.model}")
    for m in messages:
        if m.role == "user":
            run = runs[m.run_id]
            click.echo(f"\n> {m.text}   [{run.run_id} · {run.directive} · {run.status}]")
            if plans and run.plan is not None:
                for i, s in enumerate(run.plan.speakers, start=1):
                    click.echo(f"  plan {i}. {s.member_id}: {s.task}")
        else:
            click.echo(f"{m.member_name}: {m.text}")


def register(cli: click.Group) -> None:
    """Add the ``arena`` command group."""
    cli.add_command(arena)
