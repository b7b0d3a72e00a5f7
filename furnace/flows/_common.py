"""What the flows share: offline defaults, a CLI-like context from a home folder, versions."""

from __future__ import annotations

from furnace import offline_env

offline_env.apply()

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from furnace.cli.context import CliContext  # noqa: E402


def context(home: str | None) -> CliContext:
    """Settings and lazily built adapters for ``home`` (as the CLI builds them)."""
    return CliContext.from_env(home=home)


def results_dir(home: str | None) -> str:
    """Where Prefect persists this home's task results: ``FURNACE_HOME/prefect/results``.

    Never Prefect's shared default (``~/.prefect/storage``): a result cached there would be
    served to every other home on the machine, skipping its model calls and its writes.
    """
    path = context(home).settings.home / "prefect" / "results"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def unit_version(config: Any) -> str:
    """The version of an evaluation task: the operator and scorer versions it runs."""
    from furnace.fusion.operators import OPERATORS
    from furnace.scoring.fitness import SCORERS

    ops = ",".join(f"{n}:{OPERATORS[n].op_version}" for n in sorted(config.operators) if n in OPERATORS)
    scorers = ",".join(f"{n}:{SCORERS[n].version}" for n in sorted(config.scorers))
    return f"ops[{ops}] scorers[{scorers}]"


def resolve(path: str) -> str:
    return str(Path(path).resolve())
