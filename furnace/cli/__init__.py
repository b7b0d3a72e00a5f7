"""The ``furnace`` command line.

Each command group lives in its own module and is registered here. Every
command accepts ``--json``. Exit codes (the contract, see docs/reliability.md):

- 0: done;
- 1: a user error or a failed operation (a :class:`~furnace.domain.errors.FurnaceError`, or an
  ``OSError`` on the user's input such as a path too long; printed as one line on stderr), and a usage
  error (unknown command or option, bad argument): click's message on one line,
  ``error: <message> (furnace <command> --help)``; a group run without a command prints its help;
- 3: an internal error (a bug): one line, with a hint to set ``FURNACE_DEBUG=1`` for the traceback.
"""

from __future__ import annotations

import os
import sys

import click

from furnace import offline_env

offline_env.apply()

from furnace.cli.context import cli_runtime  # noqa: E402
from furnace.domain.errors import FurnaceError, InputError  # noqa: E402

_GROUPS = [
    "furnace.cli.elixir_cmd",
    "furnace.cli.fusion_cmd",
    "furnace.cli.registry_cmd",
    "furnace.cli.serve_cmd",
    "furnace.cli.experiment_cmd",
    "furnace.cli.content_cmd",
    "furnace.cli.arena_cmd",
    "furnace.cli.interop_cmd",
    "furnace.cli.app_cmd",
    "furnace.cli.ask_cmd",
    "furnace.cli.demo_cmd",
    "furnace.cli.snapshot_cmd",
    "furnace.cli.cache_cmd",
    "furnace.cli.pick_cmd",
    "furnace.cli.migrate_cmd",
]


EXIT_OK, EXIT_FAILED, EXIT_INTERNAL = 0, 1, 3
EXIT_USAGE = EXIT_FAILED  # a usage error is a user error: one line, exit 1 (the README's promise)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("furnace")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), "--version", "-V", prog_name="furnace", message="%(prog)s %(version)s")
@click.option(
    "--home", type=click.Path(file_okay=False), default=None, help="Data folder (default $FURNACE_HOME or ./data)."
)
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """furnace — breed LLM personas: elixirs, fusion, lineage, experiments."""
    ctx.obj = cli_runtime(home=home)
    ctx.call_on_close(ctx.obj.close)  # a command's last snapshot request is served, its connections returned


def _register() -> None:
    import importlib

    for name in _GROUPS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:
                continue  # not built yet
            raise
        module.register(cli)


_register()


def usage_error_line(err: click.UsageError) -> str:
    """Click's message for a usage error on one line, with the help to read: ``No such command 'bogus'
    (furnace --help)``."""
    message = " ".join(line.strip() for line in err.format_message().splitlines() if line.strip())
    message = message.removesuffix(".") or "bad usage"
    ctx = err.ctx
    if ctx is None:
        return message
    names = ctx.help_option_names
    if not names:
        return message
    return f"{message} ({ctx.command_path} {'--help' if '--help' in names else names[0]})"


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning errors into one clear line."""
    try:
        code = cli.main(args=argv, prog_name="furnace", standalone_mode=False)
        if isinstance(code, int) and code:  # a command's Exit(n): click returns n when not standalone
            sys.exit(code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as err:  # ``furnace`` or ``furnace elixir`` alone: the help
        err.show()
        sys.exit(EXIT_USAGE)
    except click.UsageError as err:
        click.echo(f"error: {usage_error_line(err)}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as err:
        err.show()
        sys.exit(EXIT_FAILED)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except FurnaceError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(EXIT_FAILED)
    except OSError as err:  # the system refused the user's input (a path too long, no permission, disk full)
        click.echo(f"error: {InputError.from_os_error(err)}", err=True)
        sys.exit(EXIT_FAILED)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as err:  # never a traceback for users
        if os.environ.get("FURNACE_DEBUG"):
            raise
        click.echo(f"internal error: {err.__class__.__name__}: {err} (set FURNACE_DEBUG=1 for details)", err=True)
        sys.exit(EXIT_INTERNAL)
