"""Notebook data: which home a notebook reads (furnace.runtime.analysis_runtime), and the offline sample."""

from __future__ import annotations

from pathlib import Path

import furnace.analysis.sample as sample
import furnace.runtime as runtime
from furnace.settings import FurnaceSettings


def test_empty_home_falls_back_to_a_fresh_sample_home(tmp_path, monkeypatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for need in ("experiments", "revisions", "mlflow"):
        assert not runtime.has_data(FurnaceSettings(home=empty), need)
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the sample home's folder lands under tmp_path
    built: list[tuple[Path, object]] = []
    monkeypatch.setattr(sample, "build_sample", lambda rt, need=None: built.append((rt.settings.home, need)))
    settings = runtime.analysis_runtime("revisions", env={"FURNACE_HOME": str(empty), "FURNACE_MODEL": "x/y"}).settings
    assert built == [(settings.home, "revisions")] and settings.home.parent.parent == tmp_path
    assert settings.model is None and settings.embedder == "hash"
    assert list(empty.iterdir()) == []  # nothing written into the user's home


def test_a_home_with_data_is_used_as_it_is(lab, monkeypatch) -> None:
    from furnace.evolution.records import IndividualRecord

    home = str(lab.settings.home)
    monkeypatch.setattr(sample, "build_sample", lambda *a, **k: (_ for _ in ()).throw(AssertionError("built")))
    assert not runtime.has_data(lab.settings, "experiments")
    lab.runtime.results.save_individual(
        IndividualRecord("exp-1", 0, "data-science-mentor", 0, "seed", (), None, {}, "p", 0.5, {})
    )
    assert runtime.analysis_runtime("experiments", env={"FURNACE_HOME": home}).settings.home == lab.settings.home
    assert not runtime.has_data(lab.settings, "mlflow")  # no mlflow.db in this home yet
    assert not runtime.has_data(lab.settings, "revisions")


def test_sample_configs_differ_in_operators_and_rate() -> None:
    configs = [sample.sample_config(n, o) for n, o in sample.SAMPLE_CONFIGS.items()]
    assert configs[0]["operators"] != configs[1]["operators"]
    assert configs[0]["mutation_rate"] != configs[1]["mutation_rate"]
    assert all(c["seeds"]["ids"] == sample.SEED_IDS for c in configs)
