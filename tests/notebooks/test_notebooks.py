"""Execute each analysis notebook top to bottom with nbclient, offline.

The kernel is this venv's python: ``ipykernel`` installs a ``python3``
kernelspec pointing at ``sys.executable`` into a temporary prefix, and
``JUPYTER_PATH`` puts it first, so a fresh clone needs no Jupyter setup.
Two notebooks read one shared sample home (built once, in-process); the
revision notebook starts from an empty ``FURNACE_HOME`` and builds its own
sample, which is the fresh-clone path.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.slow

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.fixture(scope="session")
def jupyter_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    install(prefix=str(prefix), kernel_name="python3", display_name="furnace venv")
    return prefix / "share" / "jupyter"


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from furnace.runtime import sample_runtime

    home = tmp_path_factory.mktemp("analysis-sample") / "home"
    sample_runtime(home)
    return home


def execute(name: str, monkeypatch: pytest.MonkeyPatch, jupyter_path: Path, home: Path) -> object:
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))
    monkeypatch.setenv("FURNACE_HOME", str(home))
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")  # the real embedder has its own tests; keep these fast
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{name} is committed with outputs"
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # raises CellExecutionError naming the failing cell
    return nb


def outputs(nb: object) -> list[dict]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]  # type: ignore[attr-defined]


def summary(nb: object) -> dict[str, str]:
    text = "".join(o.get("text", "") for o in outputs(nb) if o.get("output_type") == "stream")
    line = next((ln for ln in text.splitlines() if ln.startswith("SUMMARY ")), None)
    assert line, "the notebook printed no SUMMARY line"
    return dict(re.findall(r"(\w+)=(\S+)", line))


def count(nb: object, mime: str) -> int:
    return sum(1 for o in outputs(nb) if mime in o.get("data", {}))


def no_errors(nb: object) -> None:
    assert not [o for o in outputs(nb) if o.get("output_type") == "error"]


def test_lineage_notebook(monkeypatch, jupyter_path, sample_home) -> None:
    nb = execute("lineage_analysis.ipynb", monkeypatch, jupyter_path, sample_home)
    no_errors(nb)
    s = summary(nb)
    # the best *bred* agent always has an ancestry, whatever the seed: its recorded parents first, seeds last
    assert int(s["ancestry"]) >= 1 and s["parents_ok"] == "1" and s["roots_are_seeds"] == "1"
    assert int(s["operators"]) >= 1 and int(s["drift"]) >= 1
    assert int(s["generations"]) == 8  # two sample experiments x generations 0..3
    assert int(s["calls"]) > 0
    assert count(nb, "image/png") >= 4 and count(nb, "text/html") >= 6


def test_revision_notebook_builds_its_own_sample_when_home_is_empty(monkeypatch, jupyter_path, tmp_path) -> None:
    empty = tmp_path / "empty-home"
    empty.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel's sample home lands here, cleaned up by pytest
    nb = execute("revision_analysis.ipynb", monkeypatch, jupyter_path, empty)
    no_errors(nb)
    s = summary(nb)
    assert int(s["chains"]) == 3 and int(s["edits"]) == 7
    assert int(s["taught"]) >= 5 and int(s["reinforced"]) >= 1  # "livelier" and "emoji" twice for one persona
    assert count(nb, "image/png") >= 3
    assert not (empty / "furnace.duckdb").exists(), "the sample must not be written into the user's home"
    assert list(tmp_path.glob("furnace-sample-*/home/furnace.duckdb")), "no sample home was built"


def test_mlflow_notebook_picks_champion_and_loads_its_prompt(monkeypatch, jupyter_path, sample_home) -> None:
    nb = execute("mlflow_comparison.ipynb", monkeypatch, jupyter_path, sample_home)
    no_errors(nb)
    s = summary(nb)
    assert int(s["runs"]) == 2 and int(s["curves"]) == 8 and int(s["configs"]) >= 2
    assert s["champion"].startswith("agt-")
    assert count(nb, "image/png") >= 1


def test_committed_notebooks_match_the_generator() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_notebooks", NOTEBOOKS / "make_notebooks.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    for name in module.NOTEBOOKS:
        committed = nbformat.read(NOTEBOOKS / name, as_version=4)
        assert [c.source for c in committed.cells] == [c.source for c in module.build(name).cells], name
