"""What the flows share: offline defaults, a runtime for a home folder, versions."""

from __future__ import annotations

from furnace import offline_env

offline_env.apply()

from collections.abc import Callable, Iterable  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from furnace.runtime import Runtime  # noqa: E402

if TYPE_CHECKING:
    from furnace.evolution.config import ExperimentConfig


def runtime(home: str | None) -> Runtime:
    """The runtime for ``home`` (settings from the environment, as the CLI builds it). Built per
    task: a task may run in another process (Dask) and a flow may be served for days."""
    return Runtime.from_env(home=home)


def results_dir(home: str | None) -> str:
    """Where Prefect persists this home's task results: ``FURNACE_HOME/prefect/results``.

    Never Prefect's shared default (``~/.prefect/storage``): a result cached there would be
    served to every other home on the machine, skipping its model calls and its writes.
    """
    path = runtime(home).settings.home / "prefect" / "results"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def furnace_version() -> str:
    """The installed furnace version (side-effect tasks are versioned by the code that runs them)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("furnace")
    except PackageNotFoundError:  # a source checkout that was never installed
        return "0+source"


def scorer_versions(names: Iterable[str] | None = None) -> str:
    """``scorers[name:version,…]`` for ``names`` (all scorers when None)."""
    from furnace.scoring.fitness import SCORERS

    chosen = sorted(SCORERS if names is None else names)
    return "scorers[" + ",".join(f"{n}:{SCORERS[n].version}" for n in chosen if n in SCORERS) + "]"


def operator_versions(names: Iterable[str] | None = None) -> str:
    """``ops[name:op_version,…]`` for ``names`` (all operators when None)."""
    from furnace.fusion.operators import OPERATORS

    chosen = sorted(OPERATORS if names is None else names)
    return "ops[" + ",".join(f"{n}:{OPERATORS[n].op_version}" for n in chosen if n in OPERATORS) + "]"


def unit_version(config: ExperimentConfig) -> str:
    """The version of an evaluation task: the operator and scorer versions it runs."""
    return f"{operator_versions(config.operators)} {scorer_versions(config.scorers)}"


# Failures a task run may meet again and then not: the network, a file system, a Dask worker's comm.
TRANSIENT = (OSError, TimeoutError, ConnectionError, EOFError)
RETRY_DELAYS_S = [2.0, 10.0, 30.0]


def transient_failure(_task: Any, _task_run: Any, state: Any) -> bool:
    """Prefect's ``retry_condition_fn``: retry a task run only after a transient failure that is not
    furnace's own. A model error (``LLMError``) has already been retried by the model-call policy
    (``FURNACE_MAX_RETRIES``) and is recorded as an unscored individual, not raised; a budget stop, an
    input or a store error are final. So a model call is never attempted more often than that policy says."""
    from furnace.domain.errors import FurnaceError

    error = getattr(state, "data", None)
    return isinstance(error, TRANSIENT) and not isinstance(error, FurnaceError)


def retry_options(retries: int) -> dict[str, Any]:
    """A task's Prefect retry settings (``retries`` from FURNACE_PREFECT_TASK_RETRIES)."""
    return {
        "retries": retries,
        "retry_delay_seconds": RETRY_DELAYS_S[: max(1, retries)],
        "retry_condition_fn": transient_failure,
    }


def task_retries() -> int:
    """FURNACE_PREFECT_TASK_RETRIES."""
    from furnace.settings import FurnaceSettings

    return FurnaceSettings().prefect_task_retries


def resolve(path: str) -> str:
    return str(Path(path).resolve())


# Prefect's task cache (docs/prefect.md#caching). A task is cached on a ``key`` parameter the flow computes
# from what determines the task's result, every id resolved to its version and content hash first (a key
# on an id alone would serve a stale result once a newer version is saved). Results persist under the home.
CACHE_DAYS = 30


def _key_parameter(_context: Any, parameters: dict[str, Any]) -> str:
    return str(parameters["key"])


def cache_options(results: str, key_fn: Callable[[Any, dict[str, Any]], str] = _key_parameter) -> dict[str, Any]:
    """A cached task's options: cached on ``key_fn`` (default: its ``key`` parameter) for
    :data:`CACHE_DAYS`, its results persisted in ``results`` (:func:`results_dir`: the home's own folder)."""
    return {
        "cache_key_fn": key_fn,
        "cache_expiration": timedelta(days=CACHE_DAYS),
        "persist_result": True,
        "result_storage": Path(results),
    }


def task_key(kind: str, **parts: Any) -> str:
    """The cache key of a ``kind`` task: ``furnace-<kind>-`` and the content hash of ``parts``."""
    from furnace.domain.canonical import content_key

    return f"furnace-{kind}-{content_key(parts)}"


class Unscored(Exception):  # noqa: N818 - a result carried through a failed state, not an error of its own
    """Raised by a task whose result holds a failure (a model or judge error recorded instead of a
    score): the task run ends Failed, so its result is never cached and a rerun tries again. The flow
    takes the result back with :func:`outcome`. Not transient: Prefect does not retry it."""

    def __init__(self, value: Any, reasons: Iterable[str] = ()) -> None:
        self.value, self.reasons = value, tuple(reasons)
        super().__init__("unscored: " + ("; ".join(self.reasons) or "no score"))

    def __reduce__(self) -> tuple[Any, ...]:  # Prefect persists a failed run's exception (pickled)
        return (Unscored, (self.value, self.reasons))


def outcome(state: Any) -> Any:
    """A task's result from its final ``state``: the value of a completed or cached run, the value an
    :class:`Unscored` run carried; any other failure is raised."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, Unscored):
        return result.value
    if isinstance(result, BaseException):
        raise result
    return result
