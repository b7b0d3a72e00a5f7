"""``furnace ask``: the lab assistant in the terminal."""

from __future__ import annotations

import click

from furnace.cli.context import CliContext, emit, json_option
from furnace.cli.table import format_table


def build_assistant(obj: CliContext, *, model_lead: bool = False):  # noqa: ANN201 - edge wiring
    """The assistant and its data layer on this CLI's store and model."""
    from furnace.assistant.answer import Assistant
    from furnace.llm.context import counter_for
    from furnace.storage.duckdb.assist import DuckDBAssistData

    data = DuckDBAssistData(obj.db, verify_agents=obj.store.verify_agents)
    assistant = Assistant(
        data,
        obj.llm,
        model_lead=model_lead,
        context_limit=obj.settings.context_limit,
        count_tokens=counter_for(obj.settings.model),
    )
    return assistant, data


def register(cli: click.Group) -> None:
    @cli.command("ask")
    @click.argument("question")
    @click.option("--session", default="default", show_default=True, help="Assistant session (keeps a locked scope).")
    @click.option("--model-lead", is_flag=True, help="Let the model write the lead even for rule-only questions.")
    @json_option
    @click.pass_obj
    def ask(obj: CliContext, question: str, session: str, model_lead: bool, as_json: bool) -> None:
        """Ask about furnace's data in plain words (zh or en).

        Lock a scope with "from now on only the coach persona" / "只看 experiment X";
        clear it with "clear scope" / "清除范围".
        """
        assistant, data = build_assistant(obj, model_lead=model_lead)
        state = data.load_state(session)
        events = list(assistant.ask(question, state))
        data.save_state(state)
        done = events[-1]
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
