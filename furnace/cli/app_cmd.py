"""``furnace app``: start the Streamlit app (127.0.0.1 unless told otherwise)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import click

from furnace.cli.context import ensure_home
from furnace.cli.listening import ensure_can_listen
from furnace.domain.errors import InputError
from furnace.runtime import Runtime

APP_PACKAGE = "furnace_app"  # the checkout's app/ folder, installed under this name (setup.py)
ENTRY_NAME = "streamlit_app.py"


def app_entry() -> Path:
    """The app's entry script: the ``furnace_app`` package's, found without importing it (an editable
    install maps it to the checkout's ``app/``, a wheel holds it in site-packages)."""
    spec = importlib.util.find_spec(APP_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        entry = Path(folder) / ENTRY_NAME
        if entry.is_file():
            return entry.resolve()
    raise InputError(
        f"the app is not installed: package {APP_PACKAGE} not found (in a checkout: pip install -e .; "
        "or run streamlit run app/streamlit_app.py)"
    )


def app_command(entry: Path, *, host: str, port: int) -> list[str]:
    """The streamlit command line for ``entry``."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(entry),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",  # no "Deploy" button or developer menu: furnace is not deployed to a cloud
        "minimal",
    ]


@click.command("app")
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default 8501).")
@click.pass_obj
def app(obj: Runtime, host: str | None, port: int | None) -> None:
    """Start the Streamlit app on the current FURNACE_HOME."""
    entry = app_entry()
    ensure_home(obj.settings.home)
    settings = obj.settings
    env = dict(os.environ, FURNACE_HOME=str(settings.home.resolve()))
    host = host or settings.app_host
    port = port or settings.app_port
    ensure_can_listen(host, port)
    click.echo(f"furnace app on http://{host}:{port}  (data: {settings.home.resolve()}; Ctrl-C to stop)")
    from furnace.adapters.processes import run_child  # stopped with furnace, even on kill -9

    raise SystemExit(run_child(app_command(entry, host=host, port=port), env=env))


def register(cli: click.Group) -> None:
    cli.add_command(app)
