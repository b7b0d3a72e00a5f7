"""`furnace demo` runs the demo experiment to the end: report, DuckDB, MLflow, promotion."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_demo_experiment_end_to_end(home, monkeypatch, capsys):
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    from furnace.cli import main

    try:
        main(["demo"])
    except SystemExit as exit_:
        assert not exit_.code
    out, err = capsys.readouterr()
    assert "5. Evolution experiment" in out and "— finished" in out
    assert "best agent promoted to the library as demo-champion@1" in out
    assert "mlflow ui --backend-store-uri sqlite:///" in out and "furnace app" in out
    assert (home / "furnace.duckdb").exists() and (home / "mlflow.db").exists()

    from furnace.adapters.mlflow_tracker import run_summary
    from furnace.settings import FurnaceSettings
    from furnace.storage.duckdb.db import Database
    from furnace.storage.duckdb.experiments import DuckDBExperimentResults

    results = DuckDBExperimentResults(Database(home / "furnace.duckdb"))
    (exp,) = results.list_experiments()
    gens = results.generations(exp.experiment_id)
    assert len(gens) == 5 and gens[-1].best_fitness > gens[0].best_fitness  # evolution improved on the seeds
    assert gens[-1].best_fitness > gens[1].best_fitness  # and kept improving after generation 1 (it was flat)
    summary = run_summary(FurnaceSettings(home=home).tracking_uri, exp.experiment_id)
    assert summary and summary["status"] == "FINISHED" and len(summary["best_fitness_steps"]) == 5

    # step 6: the preference loop — revise by chat, learn, write again with what was learned
    assert "6. Revision chat: skincare-science-writer-zh@1" in out
    assert "V1→V2" in out and "V3→V4" in out
    from furnace.runtime import Runtime

    persona = Runtime(FurnaceSettings(home=home)).store.get_elixir("skincare-science-writer-zh")
    learned = {(p.dimension, p.value) for p in persona.style_preferences}
    assert {("tone", "lively"), ("emoji", "more")} <= learned
    assert f"learned preferences → skincare-science-writer-zh@{persona.version}" in out
    assert "prompts:/furnace-demo-champion@champion" in out
