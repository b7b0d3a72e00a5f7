"""A home with three library elixirs, a crossover agent and a committee, served by ``furnace agent serve``'s
uvicorn server in a thread on an ephemeral 127.0.0.1 port (started and stopped by the fixture)."""

from __future__ import annotations

import os

# As the Makefile does (tests/conftest.py sets them too): litellm and MLflow stay offline.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import threading  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from furnace import resources  # noqa: E402

KEY = "serve-test-key-0123456789"
ELIXIRS = ("data-science-mentor", "socratic-math-tutor", "viral-copywriter")


@dataclass
class Lab:
    runtime: Any
    agent: Any  # a crossover agent
    committee: Any  # an ensemble agent (members set)


def make_lab(home: Path, **settings: Any) -> Lab:
    """A runtime on ``home`` holding :data:`ELIXIRS`, a crossover agent and a committee (offline engine)."""
    from furnace.fusion.fuse import fuse
    from furnace.interop.importers import import_file
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    home.mkdir(parents=True, exist_ok=True)
    rt = Runtime(FurnaceSettings(home=home, embedder="hash", **settings))
    for name in ELIXIRS:
        import_file(resources.LIBRARY_DIR / f"{name}.yaml", rt.store)
    kw: dict[str, Any] = dict(llm=rt.llm, embedder=rt.embedder, cache=rt.synthesis_cache, settings=rt.settings)
    agent = fuse(rt.store, ["data-science-mentor", "socratic-math-tutor"], operator="crossover", **kw).agent
    committee = fuse(rt.store, ["data-science-mentor", "viral-copywriter"], operator="ensemble", **kw).agent
    return Lab(rt, agent, committee)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    made = make_lab(tmp_path_factory.mktemp("serve") / "home")
    yield made
    made.runtime.close()


@dataclass
class Live:
    base_url: str  # http://127.0.0.1:PORT/v1
    server: Any

    @property
    def catalogue(self) -> Any:
        return self.server.config.app.state.catalogue


def start(runtime: Any, *, key: str | None) -> tuple[Any, threading.Thread]:
    """The server ``furnace agent serve`` runs (:func:`furnace.server.app.build_server`), in a thread."""
    from furnace.server.app import build_server

    server = build_server(runtime, host="127.0.0.1", port=0, key=key, log_level="warning")
    thread = threading.Thread(target=server.run, name="furnace-serve-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a bound on a stuck start, not a timing assertion
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    return server, thread


def stop(server: Any, thread: threading.Thread) -> None:
    server.should_exit = True
    thread.join(30)


@pytest.fixture(scope="module")
def live(lab: Lab):
    """The server on ``lab``'s runtime, requiring :data:`KEY`."""
    server, thread = start(lab.runtime, key=KEY)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield Live(f"http://127.0.0.1:{port}/v1", server)
    stop(server, thread)
