"""Test-wide setup: no network, no keys, a private FURNACE_HOME per test."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import settings

from furnace import resources

# No wall-clock assertion in any test: Hypothesis's per-example deadline (200 ms by default) is one,
# and a loaded machine missed it (tests/domain/test_canonical_equivalence.py). Timing lives in bench/.
settings.register_profile("furnace", deadline=None)
settings.load_profile("furnace")

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="furnace-tests-"))

# Before anything imports litellm, mlflow or prefect (their settings freeze at import).
os.environ.update(
    {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "true",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "PREFECT_HOME": str(_SESSION_DIR / "prefect"),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(_SESSION_DIR / "prefect-results"),
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
)
for _key in list(os.environ):
    if _key.startswith("FURNACE_") or _key.endswith("_API_KEY"):
        del os.environ[_key]

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
LIBRARY_DIR = resources.LIBRARY_DIR


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh FURNACE_HOME for one test."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("FURNACE_HOME", str(path))
    return path


@pytest.fixture()
def settings(home: Path):
    from furnace.settings import FurnaceSettings

    return FurnaceSettings(home=home)


# The test files that use ``prefect_harness``: the xdist scheduler below sends all their tests to one worker
# as one unit, so the harness starts once per run, not once per worker. Collection fails if another file uses it.
PREFECT_HARNESS_FILES = frozenset({"tests/experiments/test_flows.py", "tests/writing/test_flow.py"})


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API for the whole session (~13 s of CPU to start); use only in flow-level tests
    (in a file listed in PREFECT_HARNESS_FILES)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``longest`` run first: spread over the workers from the start, they overlap the
    rest of the suite instead of finishing it alone (the order of everything else is kept). A test that uses
    ``prefect_harness`` outside PREFECT_HARNESS_FILES is an error: it would start a harness on another worker."""
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if "prefect_harness" in getattr(item, "fixturenames", ()) and path not in PREFECT_HARNESS_FILES:
            raise pytest.UsageError(
                f"{path} uses prefect_harness: add it to PREFECT_HARNESS_FILES in tests/conftest.py"
            )
    items.sort(key=lambda item: item.get_closest_marker("longest") is None)


@pytest.hookimpl(optionalhook=True)  # xdist (a dev dependency) defines it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """With ``-n`` (xdist's default ``--dist load``): the same per-test load balancing, except that the tests
    of PREFECT_HARNESS_FILES are one unit, which goes out first (xdist queues the biggest unit first).
    xdist's own ``--dist loadgroup`` would do this, but xdist 3.8 cannot group under pytest 9.2 (its node ids
    became structured: pytest-dev/pytest-xdist#1386)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class PrefectHarnessOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "prefect-harness" if nodeid.split("::", 1)[0] in PREFECT_HARNESS_FILES else nodeid

    return PrefectHarnessOnOneWorker(config, log)
