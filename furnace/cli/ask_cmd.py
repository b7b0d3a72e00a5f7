"""``furnace ask``: the lab assistant in the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from furnace.cli.context import emit, json_option
from furnace.cli.table import format_table
from furnace.runtime import Runtime

if TYPE_CHECKING:
    from furnace.assistant.answer import Assistant
    from furnace.storage.duckdb.assist import DuckDBAssistData


def build_assistant(obj: Runtime, *, model_lead: bool = False) -> tuple[Assistant, DuckDBAssistData]:
    """The assistant and its data layer on this runtime's store and model."""
    from furnace.assistant.answer import Assistant

    data = obj.assist_data
    assistant = Assistant(
        data,
        obj.llm,
        model_lead=model_lead,
        context_limit=obj.settings.context_limit,
        count_tokens=obj.token_counter,
    )
    return assistant, data


@click.command("ask")
@click.argument("question")
@click.option("--session", default="default", show_default=True, help="Assistant session (keeps a locked scope).")
@click.option("--model-lead", is_flag=True, help="Let the model write the lead even for rule-only questions.")
@json_option
@click.pass_obj
def ask(obj: Runtime, question: str, session: str, model_lead: bool, as_json: bool) -> None:
    """Ask about furnace's data in plain words (zh or en).

    Lock a scope with "focus on tea-master from now on" / "接下来都看 experiment X" (a persona,
    experiment, agent, operator or time window); clear it with "clear the scope" / "不限了".
    """
    from furnace.assistant.answer import Done

    assistant, data = build_assistant(obj, model_lead=model_lead)
    state = data.load_state(session)
    events = list(assistant.ask(question, state))
    data.save_state(state)
    done = events[-1]
    assert isinstance(done, Done), "the assistant ends every answer with Done"
    if as_json:
        emit([e.model_dump(mode="json") for e in events], as_json=True)
        return
    locked = f"locked: {state.locked.label()}" if state.locked else "not locked"
    click.echo(f"scope: {done.scope_label}  ({locked})")
    click.echo(done.lead)
    if done.result is not None:
        click.echo("")
        click.echo(done.result.title)
        click.echo(format_table(done.result.items, done.result.columns))
        for action in done.result.actions:
            click.echo(f"  → {action.label}")


def register(cli: click.Group) -> None:
    cli.add_command(ask)
