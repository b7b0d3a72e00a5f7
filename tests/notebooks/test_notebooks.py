"""Execute each analysis notebook top to bottom with nbclient, offline.

Each notebook is a jupytext pair: ``NAME.py`` (percent format, the reviewable source) and ``NAME.ipynb``
(what Jupyter opens), kept in step by jupytext. The tests execute the ``.py`` side as a notebook and fail
on errors, not on edits; one test checks that each pair is in step.

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
jupytext = pytest.importorskip("jupytext")

pytestmark = pytest.mark.slow

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.fixture(scope="session")
def jupyter_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    install(prefix=str(prefix), kernel_name="python3", display_name="furnace venv")
    return prefix / "share" / "jupyter"


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory: pytest.TempPathFactory, _mlflow_template: Path) -> Path:
    """The analysis sample, tracked into an initialised MLflow store (the session's template: creating its
    tables is not what these notebooks test; the revision notebook's sample starts from nothing)."""
    import shutil

    from furnace.runtime import sample_runtime

    home = tmp_path_factory.mktemp("analysis-sample") / "home"
    home.mkdir()
    shutil.copyfile(_mlflow_template, home / "mlflow.db")
    sample_runtime(home)
    return home


def execute(name: str, monkeypatch: pytest.MonkeyPatch, jupyter_path: Path, home: Path) -> object:
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))
    monkeypatch.setenv("FURNACE_HOME", str(home))
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")  # the real embedder has its own tests; keep these fast
    monkeypatch.setenv("MPLBACKEND", "Agg")
    paired = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not c.get("outputs") for c in paired.cells if c.cell_type == "code"), f"{name} is committed with outputs"
    nb = jupytext.read(NOTEBOOKS / name.replace(".ipynb", ".py"))
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
    assert count(nb, "image/png") >= 4 and count(nb, "text/html") >= 6
    # its fitness by generation is the report's (the population's best, survivors included)
    from furnace.runtime import Runtime
    from furnace.views.experiments import generation_rows, held_out

    shown = s["best_by_generation"].split(",")
    held = s["held_out_by_generation"].split(",")
    rt = Runtime.from_env(home=sample_home)
    try:
        experiments = sorted({item.split(":")[0] for item in shown})
        rows = {exp: generation_rows(rt.results, exp) for exp in experiments}
        tested = sum(len(held_out(rt.results, exp)["agents"]) for exp in experiments)
        ledger = rt.llm.ledger.totals()
    finally:
        rt.close()
    # its calls are the model calls every face counts (the ledger's, cache hits apart; it added the hits)
    assert int(s["calls"]) == ledger.model_calls > 0
    assert shown == [f"{exp}:{row['generation']}:{row['best_fitness']:.4f}" for exp in experiments for row in rows[exp]]
    # every generation's best with its train and held-out test fitness, interval and gap: the view's figures,
    # the ones the report, `experiment show` and the app show (the sample holds one test probe per experiment)
    keys = ("train_fitness", "test_fitness", "test_low", "test_high", "train_test_gap")
    assert all(row["best_test_fitness"] is not None for exp in experiments for row in rows[exp])
    assert held == [
        ":".join([exp, str(row["generation"]), *(f"{row[f'best_{k}']:.4f}" for k in keys)])
        for exp in experiments
        for row in rows[exp]
    ]
    assert int(s["tested"]) == tested >= len(shown)


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
    assert list(empty.iterdir()) == [], "the sample must not be written into the user's home"
    assert list(tmp_path.glob("furnace-sample-*/home/furnace.sqlite")), "no sample home was built"


def test_mlflow_notebook_picks_champion_and_loads_its_prompt(monkeypatch, jupyter_path, sample_home) -> None:
    nb = execute("mlflow_comparison.ipynb", monkeypatch, jupyter_path, sample_home)
    no_errors(nb)
    s = summary(nb)
    assert int(s["runs"]) == 2 and int(s["curves"]) == 8 and int(s["configs"]) >= 2
    assert int(s["test_curves"]) == 8  # every generation's best's test fitness, logged after each search
    assert s["champion"].startswith("agt-")
    from furnace.adapters.mlflow_prompts import aliased_prompts
    from furnace.settings import FurnaceSettings

    uri = FurnaceSettings(home=sample_home).tracking_uri
    assert {p.name for p in aliased_prompts(uri) if p.agent_id == s["champion"]} == {s["prompt"]}  # one name
    assert count(nb, "image/png") >= 1


PAIRS = ["lineage_analysis", "revision_analysis", "mlflow_comparison"]


@pytest.mark.parametrize("stem", PAIRS)
def test_each_notebook_is_a_jupytext_pair_in_step(stem: str) -> None:
    script = jupytext.read(NOTEBOOKS / f"{stem}.py")
    notebook = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    assert script.metadata["jupytext"]["formats"] == "ipynb,py:percent"
    assert notebook.metadata["jupytext"]["formats"] == "ipynb,py:percent"
    step = f"{stem}.py and {stem}.ipynb differ: run `jupytext --sync notebooks/{stem}.py`"
    assert [(c.cell_type, c.source) for c in script.cells] == [(c.cell_type, c.source) for c in notebook.cells], step
    # the round trip a researcher's editor makes (ipynb -> py) gives back the committed script
    assert jupytext.writes(notebook, fmt="py:percent") == (NOTEBOOKS / f"{stem}.py").read_text(encoding="utf-8")
