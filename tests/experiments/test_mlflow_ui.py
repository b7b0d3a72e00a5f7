"""The MLflow UI is an extra: the default install has MLflow's client (mlflow-skinny); ``furnace demo`` says
how to get the UI when it is missing, and ``make setup`` installs it."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

from furnace.adapters import mlflow_home

REPO = Path(__file__).resolve().parents[2]


def test_the_ui_line_is_the_command_where_the_ui_is_installed(tmp_path: Path) -> None:
    assert mlflow_home.ui_installed()  # make setup installs the mlflow-ui extra
    line = mlflow_home.ui_command("sqlite:///h/mlflow.db", tmp_path)
    assert (
        line
        == f"mlflow ui --backend-store-uri sqlite:///h/mlflow.db --artifacts-destination {tmp_path / 'mlartifacts'}"
    )


def test_without_the_ui_the_line_says_how_to_install_it(tmp_path: Path, monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flask" else real(name, *a))
    assert not mlflow_home.ui_installed()
    line = mlflow_home.ui_command("sqlite:///h/mlflow.db", tmp_path)
    assert line.startswith(
        f"pip install '{mlflow_home.UI_EXTRA}' && mlflow ui --backend-store-uri sqlite:///h/mlflow.db"
    )


def test_the_extra_the_line_names_is_declared_and_installed_by_make_setup() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[ <>=!~\[;]", d, maxsplit=1)[0] for d in project["dependencies"]}
    assert "mlflow-skinny" in names and "mlflow" not in names  # the client only, by default
    extra = mlflow_home.UI_EXTRA.split("[")[1].rstrip("]")
    assert any(d.startswith("mlflow>=") for d in project["optional-dependencies"][extra])
    setup = next(ln for ln in (REPO / "Makefile").read_text().splitlines() if "pip install" in ln and "-e '." in ln)
    assert extra in re.search(r"\.\[([^\]]*)\]", setup).group(1).split(",")
