"""The design card's layout: the faces at the top of the checkout (flows/, app/), importable as the packages the
wheel installs (furnace_flows, furnace_app), and `furnace app` finding the app's entry from a checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_faces_are_the_checkouts_top_level_folders():
    import furnace_app
    import furnace_flows

    assert [Path(p).resolve() for p in furnace_flows.__path__] == [REPO / "flows"]
    assert [Path(p).resolve() for p in furnace_app.__path__] == [REPO / "app"]
    assert (REPO / "flows" / "prefect.yaml").is_file()
    assert not (REPO / "furnace" / "flows").exists() and not (REPO / "furnace" / "app").exists()


def test_furnace_app_runs_the_checkouts_entry():
    from furnace.cli.app_cmd import app_entry

    assert app_entry() == REPO / "app" / "streamlit_app.py"


def test_without_the_app_package_furnace_app_says_how_to_get_it(monkeypatch):
    import furnace.cli.app_cmd as app_cmd
    from furnace.domain.errors import InputError

    monkeypatch.setattr(app_cmd.importlib.util, "find_spec", lambda _name: None)
    with pytest.raises(InputError, match=r"furnace_app not found.*pip install -e \."):
        app_cmd.app_entry()
