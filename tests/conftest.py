"""Test-wide setup: no network, no keys, a private FURNACE_HOME per test."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hypothesis import settings

from furnace import resources

# No wall-clock assertion in any test: Hypothesis's per-example deadline (200 ms by default) is one,
# and a loaded machine missed it (tests/domain/test_canonical_equivalence.py). Timing lives in bench/.
settings.register_profile("furnace", deadline=None)
settings.load_profile("furnace")

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="furnace-tests-"))
atexit.register(shutil.rmtree, _SESSION_DIR, ignore_errors=True)  # each process's own, gone when it exits

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


def seed_home(path: Path) -> Path:
    """A FURNACE_HOME holding the sample library (what ``furnace import --library`` does) in its live store,
    the runtime closed again (``furnace.sqlite`` whole, no WAL left for a subprocess started next)."""
    from furnace.interop.importers import import_library
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    path.mkdir(parents=True, exist_ok=True)
    runtime = Runtime(FurnaceSettings(home=path))
    import_library(LIBRARY_DIR, runtime.store, keep_existing=True)
    runtime.close()
    return path


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


# Test files whose tests an xdist worker runs together, in order, as one unit (see pytest_xdist_make_scheduler):
# they share a module- or session-scoped fixture that is expensive to set up (every worker that ran one of them
# would build it again) or that holds state one test leaves for the next. The files
# that use ``prefect_harness`` (a temporary Prefect server, ~13 s of CPU) are one unit together; collection fails
# if another file uses it.
PREFECT_HARNESS_FILES = frozenset(
    {
        "tests/experiments/test_flows.py",
        "tests/writing/test_flow.py",
        "tests/shipping/test_wheel.py",  # its serve test (the wheel build is a module fixture: the file stays whole)
        "tests/experiments/test_dask.py",  # a flow on its cluster of 2 worker processes (a module fixture)
    }
)
# Test files that import litellm (~4 s of CPU, and openai): one unit, so one worker pays for that import.
LITELLM_FILES = frozenset(
    {
        "tests/llm/test_attempt_budget.py",
        "tests/llm/test_litellm_client.py",
        "tests/llm/test_response_zoo.py",
        "tests/llm/test_secrets.py",
        "tests/writing/test_tokens.py",
        "tests/server/test_clients.py",  # also a live server on the module's lab (tests/server/conftest.py)
    }
)
ONE_WORKER_UNITS = (
    {path: "prefect-harness" for path in PREFECT_HARNESS_FILES}
    | {path: "litellm" for path in LITELLM_FILES}
    | {
        path: path
        for path in (
            "tests/app/test_dashboards.py",  # two experiments and a 120-node family (module fixtures)
            "tests/app/test_browser.py",  # one seeded home, app server and chromium (module fixtures)
            # the module's app home (tests/app/conftest.py): a test may read what an earlier one saved there
            "tests/app/test_pages.py",
            "tests/app/test_personas.py",
            "tests/app/test_secrets.py",
            "tests/notebooks/test_notebooks.py",  # the analysis sample home and a kernelspec (session fixtures)
            "tests/experiments/test_search_bench.py",  # the search benchmark's CI run (module fixture)
            "tests/app/test_judge.py",  # the module's app home and an experiment in it (module fixtures)
            "tests/server/test_app.py",  # the module's lab: a seeded home and its runtime (tests/server/conftest.py)
            "tests/assistant/test_ids_and_shared_agents.py",  # a live store built for the module
            "tests/assistant/test_scope_everywhere.py",  # a live store built for the module
            "tests/interop/test_importers.py",  # the corpus read once (module fixture)
            "tests/interop/test_importers_total.py",  # a store of fuzzed imports (module fixture)
        )
    }
)


@pytest.fixture(scope="session")
def prefect_server_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's migrated Prefect server database: copy it where a test's Prefect server will start
    (``tests/prefect_db.py``)."""
    from tests.prefect_db import migrated_template

    return migrated_template(tmp_path_factory)


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory):
    """One temporary Prefect API for the whole session (Prefect's ``prefect_test_harness``); its server starts on
    a copy of the run's migrated database (~5 s of CPU), or migrates its own (~10 s) and keeps it as the run's
    template. Use only in flow-level tests (in a file listed in PREFECT_HARNESS_FILES)."""
    import contextlib
    from unittest import mock

    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL
    from prefect.testing import utilities

    from tests.prefect_db import server_database

    where = tempfile.mkdtemp(prefix="prefect-harness-")  # the harness removes it at exit, as its own
    database = Path(where) / "prefect-test.db"  # the harness's database in it
    with server_database(tmp_path_factory, database) as migrated, contextlib.ExitStack() as harness:
        with mock.patch.object(utilities, "mkdtemp", lambda: where):  # the directory the harness would make
            harness.enter_context(utilities.prefect_test_harness(server_startup_timeout=120))
        served = PREFECT_SERVER_DATABASE_CONNECTION_URL.value()
        assert served == f"sqlite+aiosqlite:///{database}", f"the harness serves {served}, not {database}"
        migrated()
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest work goes out first (xdist hands units out in this order, see pytest_xdist_make_scheduler):
    spread over the workers from the start, it overlaps the rest of the suite instead of finishing it alone.
    First the tests marked ``longest``, then the Prefect harness unit (the biggest), then the other units of
    ONE_WORKER_UNITS and the tests marked ``slow``, then the rest (their order kept within each rank). A test
    that uses ``prefect_harness`` outside PREFECT_HARNESS_FILES is an error: it would start a harness on
    another worker; so is a file in ONE_WORKER_UNITS that does not exist (a moved file would lose its unit)."""
    missing = sorted(path for path in ONE_WORKER_UNITS if not (REPO / path).is_file())
    if missing:
        raise pytest.UsageError(f"ONE_WORKER_UNITS in tests/conftest.py lists files that do not exist: {missing}")
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if "prefect_harness" in getattr(item, "fixturenames", ()) and path not in PREFECT_HARNESS_FILES:
            raise pytest.UsageError(
                f"{path} uses prefect_harness: add it to PREFECT_HARNESS_FILES in tests/conftest.py"
            )
    items.sort(key=_rank)


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    if item.get_closest_marker("longest") is not None:
        return 0
    if path in PREFECT_HARNESS_FILES:
        return 1
    if path in ONE_WORKER_UNITS or item.get_closest_marker("slow") is not None:
        return 2
    return 3


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # xdist (a dev dependency) defines it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (``make test``): one worker more than the cores this process may run on. The suite is
    CPU-bound but waits on subprocesses and servers (~11% of the cores idle with one worker per core): the
    extra worker fills those waits. Measured on 2 cores, see docs/contributing.md. xdist's own
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's implementation reads it
    return len(os.sched_getaffinity(0)) + 1


@pytest.hookimpl(optionalhook=True)  # xdist (a dev dependency) defines it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """With ``-n`` (xdist's default ``--dist load``): the same per-test load balancing, except for the units of
    ONE_WORKER_UNITS, each sent to one worker whole. Units go out in collection order (the longest first, see
    pytest_collection_modifyitems), not xdist's default of the units with the most tests first: a unit of many
    quick tests is not the longest one. xdist's own ``--dist loadgroup`` would group units, but xdist 3.8
    cannot group under pytest 9.2 (its node ids became structured: pytest-dev/pytest-xdist#1386)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # read by LoadScopeScheduling.schedule only

    class SharedFixturesOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return ONE_WORKER_UNITS.get(nodeid.split("::", 1)[0], nodeid)

    return SharedFixturesOnOneWorker(config, log)


@pytest.fixture(scope="session", autouse=True)
def _fresh_stores_from_a_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A new SQLite store opened in a test process starts as a copy of one made by the migrations at the
    start of the session: the migrations' ~110 DDL statements cost ~50 ms of CPU per store, and ~1,000 tests
    open a fresh home. The copy is the migrations' own result, so the store still finds itself at
    ``HEAD_REVISION``. Only a file that does not exist yet, and only once per path in a process: a store made
    again where one was removed is migrated as the product does (its ``lineage_stamp`` token fresh, not the
    copy's again). Subprocesses (CLI commands, servers, workers) and the migration tests' old databases
    migrate for real."""
    from furnace.storage.sql.db import SQLDatabase, sqlite_url

    folder = tmp_path_factory.mktemp("store-template")
    made = SQLDatabase(sqlite_url(folder), home=folder)
    template = Path(made.url.database or "")
    made.close()
    assert template.is_file() and not Path(f"{template}-wal").exists(), "the template is not one whole file"
    migrate, given = SQLDatabase._migrate_now, set[str]()

    def from_template(db: SQLDatabase) -> None:
        database = db.url.database if db.dialect == "sqlite" else None
        if database and database != ":memory:" and database not in given and not os.path.exists(database):
            given.add(database)
            shutil.copyfile(template, database)
        migrate(db)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SQLDatabase, "_migrate_now", from_template)
        yield


@pytest.fixture(scope="session")
def _mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An initialised, empty MLflow sqlite store (creating the tables costs ~3 s; copying it, nothing)."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture()
def mlflow_ready(settings, _mlflow_template: Path) -> str:
    """The test home's tracking URI, backed by a copy of the initialised template store."""
    import shutil

    shutil.copyfile(_mlflow_template, settings.home / "mlflow.db")
    return settings.tracking_uri


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``furnace ARGV`` in-process: its exit code (0 when it returns), stdout and stderr."""
    from furnace.cli import main

    code: object = 0
    try:
        main(list(argv))
    except SystemExit as done:
        code = done.code
    out, err = capsys.readouterr()
    return (0 if code is None else int(code)), out, err  # type: ignore[call-overload]


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL database for the session: ``TEST_POSTGRES_URL`` when set, else a throwaway cluster
    (``tests/storage/postgres.py``); the PostgreSQL store tests skip, saying why, when none can run."""
    from tests.storage.postgres import throwaway_server, unavailable

    given = os.environ.get("TEST_POSTGRES_URL")
    if given:
        yield given
        return
    why = unavailable()
    if why is not None:
        pytest.skip(f"no PostgreSQL: {why}")
    with throwaway_server() as url:
        yield url
