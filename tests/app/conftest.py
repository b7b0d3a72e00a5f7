"""App tests: one seeded FURNACE_HOME per module, driven through AppTest."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import APP, seed_home


@pytest.fixture(autouse=True)
def _main_module_restored() -> Iterator[None]:
    """AppTest installs the app script as ``sys.modules["__main__"]`` and leaves it there: a later test in this
    worker that spawns processes (Dask's LocalCluster, tests/experiments/test_dask.py) would run the app in
    each child, which then fails to start."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture(autouse=True, scope="session")
def _scripts_compiled_once() -> Iterator[None]:
    """AppTest gives each run a new ScriptCache (for the entry script and for the pages), so every ``at.run()``
    compiled the entry and the page again (with Streamlit's magic: ~30 ms a render); a server compiles each
    once and keeps it. The app tests share one cache, as the server's sessions do (the scripts do not change
    during a test run)."""
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    shared = ScriptCache()
    with pytest.MonkeyPatch.context() as mp:
        for module in (app_test, local_script_runner):
            mp.setattr(module, "ScriptCache", lambda: shared)
        yield


@pytest.fixture(scope="module")
def app_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A seeded home shared by one test module (FURNACE_HOME points at it; hash embedder for speed)."""
    home = seed_home(tmp_path_factory.mktemp("app") / "home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FURNACE_HOME", str(home))
        mp.setenv("FURNACE_EMBEDDER", "hash")
        yield home


@pytest.fixture()
def app(app_home: Path):
    """A fresh AppTest of the whole app (first page rendered) on the module's home."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture()
def app_unrun(app_home: Path):
    """A fresh AppTest of the whole app on the module's home, not run yet: a test switches to its page and
    runs that (Streamlit finds a page by its file name before the first run), one render instead of two."""
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(APP), default_timeout=60)
