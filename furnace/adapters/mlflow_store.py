"""A home's MLflow database, set up once even when several processes open a new home at the same time.

MLflow creates (or migrates) a ``sqlite:///…/mlflow.db`` the first time a process opens it, and two
processes doing that at once run the same migrations twice: one dies (``duplicate column name: step``,
``table … already exists``). :func:`prepare` opens the tracking and registry stores behind an exclusive
file lock (``fcntl.flock`` on ``mlflow.db.lock`` next to the database), so the second process waits for
the first and then finds the tables made. MLflow keeps each store it opened for the process, so every
later client of that URI in the process reuses it. A tracking server (``http(s)://…``) needs no lock.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

from furnace import offline_env
from furnace.domain.threads import PerKey

offline_env.apply()

LOCK_NAME = "mlflow.db.lock"


def database_of(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///…`` tracking URI (None for any other store)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return Path(tracking_uri.removeprefix("sqlite:///")).resolve()


def holds_runs(tracking_uri: str) -> bool:
    """False when ``tracking_uri`` is a home's ``mlflow.db`` that was never made (nothing was tracked there):
    known without importing MLflow (~2 s of CPU in a process that has not yet)."""
    db = database_of(tracking_uri)
    return db is None or db.exists()


def prepare(tracking_uri: str) -> None:
    """Open ``tracking_uri``'s tracking and registry stores once in this process, a sqlite one behind
    the home's setup lock (creating or migrating the database happens at most once at a time)."""
    _prepared.get(tracking_uri)


def _open_stores(tracking_uri: str) -> None:
    db = database_of(tracking_uri)
    if db is None:
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.parent / LOCK_NAME, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            from mlflow import MlflowClient

            client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
            client.search_experiments(max_results=1)  # the tracking store: tables made or migrated
            client.search_registered_models(max_results=1)  # the registry store on the same file
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_prepared: PerKey[str, None] = PerKey(_open_stores)  # the URIs whose stores this process opened
