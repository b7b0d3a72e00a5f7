"""The preference extraction flow, end to end on DuckDB + MLflow (one flow-level test)."""

from __future__ import annotations

import json

import pytest

from furnace.domain.elixir import parse_elixir

from .conftest import EN_PERSONA


@pytest.mark.slow
def test_flow_processes_pending_revisions_once_and_logs_to_mlflow(settings, prefect_harness):
    from furnace.runtime import Runtime, build_llm
    from furnace.writing.content import generate_content
    from furnace.writing.revision import revise
    from furnace_flows.preferences import preference_extraction

    rt = Runtime(settings)
    store, contents, llm = rt.store, rt.content_store, build_llm(settings)
    store.save_elixir(parse_elixir(EN_PERSONA))
    content, _ = generate_content(store, contents, llm, persona_id="skin-advisor-en", topic="sunscreen")
    for s in ["too formal, make it livelier", "add an emoji"]:
        assert revise(store, contents, llm, content.id, s, learn=False).status == "revised"

    first = preference_extraction(home=str(settings.home))
    assert (first["processed"], first["learned"], first["failed"]) == (2, 2, 0)
    persona = store.get_elixir("skin-advisor-en")
    assert {p.dimension: p.value for p in persona.style_preferences} == {"tone": "lively", "emoji": "more"}
    assert first["personas"] == {"skin-advisor-en": persona.version}

    second = preference_extraction(home=str(settings.home))
    assert second["processed"] == 0 and store.get_elixir("skin-advisor-en").version == persona.version
    assert second["mlflow_run_id"] is None  # an empty batch logs no MLflow run

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=settings.tracking_uri)
    run = client.get_run(first["mlflow_run_id"])
    assert run.data.metrics["learned"] == 2.0
    assert run.data.tags["furnace.persona.skin-advisor-en"] == str(persona.version)
    runs = client.search_runs([run.info.experiment_id])
    assert [r.info.run_id for r in runs] == [first["mlflow_run_id"]]


@pytest.mark.slow
def test_prefs_learn_pending_with_prefect_runs_the_flow(settings, prefect_harness):
    from click.testing import CliRunner

    from furnace.cli import cli
    from furnace.runtime import Runtime, build_llm

    def run(*args: str):
        return CliRunner().invoke(cli, ["--home", str(settings.home), *args])

    from furnace.writing.content import generate_content
    from furnace.writing.revision import revise

    rt = Runtime(settings)
    store, contents, llm = rt.store, rt.content_store, build_llm(settings)
    store.save_elixir(parse_elixir(EN_PERSONA))
    content, _ = generate_content(store, contents, llm, persona_id="skin-advisor-en", topic="sunscreen")
    assert revise(store, contents, llm, content.id, "add an emoji", learn=False).status == "revised"
    assert run("prefs", "skin-advisor-en", "--prefect").exit_code == 2  # --prefect goes with --learn-pending
    out = json.loads(run("prefs", "skin-advisor-en", "--learn-pending", "--prefect", "--json").output)
    assert out["batch"]["learned"] == 1 and out["batch"]["mlflow_run_id"]  # the flow ran and logged its batch
    assert out["preferences"][0]["value"] == "more" and out["version"] == 2
    again = json.loads(run("prefs", "skin-advisor-en", "--learn-pending", "--prefect", "--json").output)
    assert again["batch"]["processed"] == 0 and again["batch"]["mlflow_run_id"] is None and again["version"] == 2
