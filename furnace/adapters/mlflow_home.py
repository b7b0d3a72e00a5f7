"""A furnace home's MLflow artifacts, stored with locations that survive moving the home.

MLflow keeps each experiment's and run's artifact location as a string. An absolute
``file:///…/mlartifacts`` path breaks when ``FURNACE_HOME`` is copied or moved, so furnace
creates its experiments with *proxied* locations (``mlflow-artifacts:/<experiment name>``),
which name no directory:

- ``mlflow ui`` / ``mlflow server`` serve them from ``--artifacts-destination`` (default
  ``./mlartifacts``): ``mlflow ui --backend-store-uri sqlite:///$FURNACE_HOME/mlflow.db
  --artifacts-destination $FURNACE_HOME/mlartifacts`` opens a home wherever it now lives;
- in furnace's own processes (and any process that calls :func:`install`), an
  ``mlflow-artifacts:/`` location read through a ``sqlite:///…/mlflow.db`` tracking URI resolves
  to the ``mlartifacts`` directory next to that database file. With an ``http(s)`` tracking URI
  (a real MLflow server) MLflow's own proxied repository is used unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from furnace import offline_env
from furnace.domain.threads import Once

offline_env.apply()

import mlflow  # noqa: E402
from mlflow.store.artifact.artifact_repository_registry import _artifact_repository_registry  # noqa: E402
from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository  # noqa: E402
from mlflow.store.artifact.mlflow_artifacts_repo import MlflowArtifactsRepository  # noqa: E402

ARTIFACTS_DIR = "mlartifacts"  # next to mlflow.db; also `mlflow ui`'s default --artifacts-destination
# `mlflow ui` / `mlflow server` (the Flask server and its web app) ship only in the full mlflow package; the
# default install has mlflow-skinny (tracking, Prompt Registry, tracing) and this extra adds the UI
UI_EXTRA = "furnace[mlflow-ui]"
SCHEME = "mlflow-artifacts"


def home_of(tracking_uri: str) -> Path | None:
    """The directory holding a ``sqlite:///…`` tracking database (None for any other store)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return Path(tracking_uri.removeprefix("sqlite:///")).resolve().parent


def artifact_location(tracking_uri: str, experiment_name: str) -> str | None:
    """Where a new MLflow experiment of this home keeps its artifacts: a proxied location (no
    directory in it) for a sqlite home, MLflow's default (None) for a tracking server."""
    return f"{SCHEME}:/{experiment_name}" if home_of(tracking_uri) is not None else None


def artifacts_dir(tracking_uri: str) -> Path | None:
    """The directory a sqlite home's proxied artifacts live in (``<home>/mlartifacts``)."""
    home = home_of(tracking_uri)
    return home / ARTIFACTS_DIR if home is not None else None


def _repository(artifact_uri: str, tracking_uri: str | None = None, registry_uri: str | None = None) -> Any:
    """MLflow's artifact repository factory for ``mlflow-artifacts:`` URIs (see the module docstring)."""
    effective = tracking_uri or mlflow.get_tracking_uri()
    root = artifacts_dir(effective)
    parsed = urlparse(artifact_uri)
    if root is None or parsed.netloc:  # a server (or an explicit host): MLflow's own proxy client
        return MlflowArtifactsRepository(artifact_uri, tracking_uri=tracking_uri, registry_uri=registry_uri)
    path = (root / parsed.path.lstrip("/")).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ValueError(f"artifact location {artifact_uri!r} points outside {root}")
    return LocalArtifactRepository(path.as_uri(), tracking_uri=effective, registry_uri=registry_uri)


_registered = Once(lambda: _artifact_repository_registry.register(SCHEME, _repository))


def install() -> None:
    """Resolve ``mlflow-artifacts:/`` locations of sqlite homes in this process (idempotent)."""
    _registered.get()


def ui_installed() -> bool:
    """Whether ``mlflow ui`` can run here: the full mlflow package (its Flask server and web app), which
    the ``mlflow-ui`` extra installs. The default install has mlflow-skinny only."""
    from importlib.util import find_spec

    return find_spec("flask") is not None and (Path(mlflow.__file__).parent / "server" / "js" / "build").is_dir()


def ui_command(tracking_uri: str, home: Path) -> str:
    """The command that opens ``home``'s runs in the MLflow UI, preceded by the install it needs when the
    UI is not installed."""
    command = f"mlflow ui --backend-store-uri {tracking_uri} --artifacts-destination {home / ARTIFACTS_DIR}"
    return command if ui_installed() else f"pip install '{UI_EXTRA}' && {command}"
