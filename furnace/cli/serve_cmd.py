"""``furnace agent serve``: the OpenAI-compatible server (:mod:`furnace.server`) on this invocation's runtime."""

from __future__ import annotations

import contextlib
import ipaddress

import click

from furnace.cli.listening import ensure_can_listen
from furnace.runtime import Runtime


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address (another machine: 0.0.0.0).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port (0: a free one).")
@click.option("--no-mlflow", is_flag=True, help="Do not trace answers to MLflow.")
@click.pass_obj
def serve_cmd(obj: Runtime, host: str, port: int, no_mlflow: bool) -> None:
    """Serve agents and elixirs over the OpenAI chat-completions protocol (/v1/models, /v1/chat/completions).

    Each agent id, elixir id and Prompt Registry alias (NAME@champion) is a model id; set FURNACE_SERVE_KEY
    to require a bearer key. Each answer is an MLflow trace (experiment furnace-agents). Stop with Ctrl-C."""
    ensure_can_listen(host, port)
    from furnace.server.app import build_server  # the launcher edge cli -> server (lazy: FastAPI loads only here)

    keyed = obj.settings.serve_key is not None and bool(obj.settings.serve_key.get_secret_value())
    if not _loopback(host) and not keyed:
        click.echo(f"warning: serving {host} without FURNACE_SERVE_KEY: anyone who reaches it can use it", err=True)
    click.echo(
        f"furnace: OpenAI-compatible API on http://{host}:{port}/v1 (model {obj.settings.model_name}; "
        f"key {'required' if keyed else 'not required'})",
        err=True,
    )
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn shuts down cleanly on Ctrl-C, then passes the signal on
        build_server(obj, host=host, port=port, trace=not no_mlflow).run()
    click.echo("furnace: server stopped", err=True)


def register(cli: click.Group) -> None:
    """Add ``serve`` to ``furnace agent`` (defined by :mod:`furnace.cli.fusion_cmd`)."""
    found = cli.commands.get("agent")
    group: click.Group = found if isinstance(found, click.Group) else click.Group("agent", help="Agents.")
    if found is None:
        cli.add_command(group)
    group.add_command(serve_cmd)
