"""``furnace agent register|alias|load``: agents' prompts in MLflow's Prompt Registry.

Adds commands to the ``agent`` group of :mod:`furnace.cli.fusion_cmd` (or
creates the group when that module is absent). :func:`register_promoted` is
what ``furnace agent promote`` calls after a promotion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from furnace.cli.context import emit, ensure_home, json_option
from furnace.domain.elixir import ElixirRef
from furnace.runtime import Runtime

if TYPE_CHECKING:
    from furnace.adapters.mlflow_prompts import RegisteredPrompt

ALIAS_CHOICE = click.Choice(["champion", "candidate"])


def _text(reg: RegisteredPrompt, verb: str) -> str:
    aliases = f"  aliases: {', '.join(reg.aliases)}" if reg.aliases else ""
    return f"{verb} {reg.uri} for {reg.agent_id} (lineage {reg.lineage_hash[:12]}){aliases}"


def register_promoted(
    ctx: Runtime, agent_id: str, ref: ElixirRef, *, alias: str = "candidate", quiet: bool = False
) -> RegisteredPrompt | None:
    """Register a just-promoted agent's prompt (alias ``candidate``); a registry failure is a note, not an error.

    Prints one line on stderr (unless ``quiet``, e.g. under ``--json``) naming the registered version."""
    try:
        from furnace.adapters.mlflow_prompts import register_agent_prompt

        reg = register_agent_prompt(
            ctx.store,
            agent_id,
            tracking_uri=ctx.settings.tracking_uri,
            alias=alias,
            elixir_ref=str(ref),
            message=f"promoted to {ref}",
        )
    except Exception as err:  # the promotion stands without the registry
        click.echo(f"note: prompt registry skipped ({err.__class__.__name__}: {str(err)[:160]})", err=True)
        return None
    if not quiet:
        click.echo(_text(reg, "registered prompt"), err=True)
    return reg


@click.command("register")
@click.argument("agent_id")
@click.option("--alias", type=ALIAS_CHOICE, default=None, help="Point this alias at the registered version.")
@click.option("--name", default=None, help="Registry name (default: furnace-<agent name>).")
@json_option
@click.pass_obj
def register_cmd(obj: Runtime, agent_id: str, alias: str | None, name: str | None, as_json: bool) -> None:
    """Register an agent's rendered prompt in MLflow's Prompt Registry, with lineage tags."""
    store = obj.store  # a missing home is refused before MLflow loads
    from furnace.adapters.mlflow_prompts import register_agent_prompt

    reg = register_agent_prompt(store, agent_id, tracking_uri=obj.settings.tracking_uri, name=name, alias=alias)
    emit(reg.as_dict(), as_json=as_json, human=_text(reg, "reused" if reg.reused else "registered"))


@click.command("alias")
@click.argument("name")
@click.argument("version", type=int)
@click.argument("alias", type=ALIAS_CHOICE)
@json_option
@click.pass_obj
def alias_cmd(obj: Runtime, name: str, version: int, alias: str, as_json: bool) -> None:
    """Point ALIAS (champion | candidate) of prompt NAME at VERSION."""
    ensure_home(obj.settings.home)  # the registry lives in the home's mlflow.db: never created here
    from furnace.adapters.mlflow_prompts import set_alias

    reg = set_alias(obj.settings.tracking_uri, name, version, alias)
    emit(reg.as_dict() | {"alias": alias}, as_json=as_json, human=f"prompts:/{name}@{alias} → version {version}")


@click.command("load")
@click.argument("uri")
@json_option
@click.pass_obj
def load_cmd(obj: Runtime, uri: str, as_json: bool) -> None:
    """Load prompts:/NAME@ALIAS (or prompts:/NAME/VERSION) back to the agent it was registered for."""
    store = obj.store  # a missing home is refused before MLflow loads
    from furnace.adapters.mlflow_prompts import load_agent

    loaded = load_agent(store, uri, tracking_uri=obj.settings.tracking_uri)
    agent = loaded.agent
    data = {
        "uri": uri,
        "prompt": loaded.prompt.as_dict(),
        "agent_id": agent.id,
        "name": agent.elixir.name,
        "lineage_hash": agent.lineage_hash,
        "operator": agent.lineage.operator,
        "parents": [str(p) for p in agent.lineage.parents],
        "system_prompt": agent.system_prompt,
        "elixir": agent.elixir.model_dump(mode="json"),
    }
    human = "\n".join(
        [
            f"{uri} → version {loaded.prompt.version}",
            f"agent         {agent.id}",
            f"name          {agent.elixir.name}",
            f"operator      {agent.lineage.operator} (op_version {agent.lineage.op_version})",
            f"parents       {', '.join(str(p) for p in agent.lineage.parents)}",
            f"lineage_hash  {agent.lineage_hash}",
        ]
    )
    emit(data, as_json=as_json, human=human)


def register(cli: click.Group) -> None:
    """Add the registry commands to ``furnace agent``."""
    found = cli.commands.get("agent")
    group: click.Group = (
        found if isinstance(found, click.Group) else click.Group("agent", help="Agents: prompt registry.")
    )
    if found is None:
        cli.add_command(group)
    for command in (register_cmd, alias_cmd, load_cmd):
        group.add_command(command)
