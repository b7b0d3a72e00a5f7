"""The preference extraction flow, end to end on DuckDB + MLflow (one flow-level test)."""

from __future__ import annotations

import json

import pytest

from furnace.domain.elixir import parse_elixir

from .conftest import EN_PERSONA


def _two_pending_revisions(settings):
    """The persona, one piece and two revisions of it not learned from yet: (store, contents, llm, piece)."""
    from furnace.runtime import Runtime, build_llm
    from furnace.writing.content import generate_content
    from furnace.writing.revision import revise

    rt = Runtime(settings)
    store, contents, llm = rt.store, rt.content_store, build_llm(settings)
    store.save_elixir(parse_elixir(EN_PERSONA))
    content, _ = generate_content(store, contents, llm, persona_id="skin-advisor-en", topic="sunscreen")
    for s in ["too formal, make it livelier", "add an emoji"]:
        assert revise(store, contents, llm, content.id, s, learn=False).status == "revised"
    return store, contents, llm, content


@pytest.mark.slow
def test_flow_processes_pending_revisions_once_and_logs_to_mlflow(settings, prefect_harness, mlflow_ready):
    from furnace_flows.preferences import preference_extraction

    store, contents, llm, content = _two_pending_revisions(settings)

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
def test_prefs_learn_pending_with_prefect_runs_the_flow(settings, prefect_harness, mlflow_ready):
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


@pytest.mark.slow
def test_flow_extraction_is_cached_by_prefect_and_the_writes_never_are(
    settings, prefect_harness, monkeypatch, mlflow_ready
):
    """A batch whose writes failed leaves its revisions unprocessed; the rerun learns them from Cached
    extraction task runs (no model call), and writes the personas itself. A new seed asks the model again."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    import furnace.writing.preferences as prefs
    from furnace.runtime import Runtime
    from furnace.writing.revision import revise
    from furnace_flows.preferences import preference_extraction

    store, contents, llm, content = _two_pending_revisions(settings)

    def extracted(**kw) -> tuple[dict, dict[str, str]]:
        state = preference_extraction(home=str(settings.home), return_state=True, **kw)
        with get_client(sync_client=True) as client:
            flow_run = FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))
            runs = client.read_task_runs(flow_run_filter=flow_run)
        return state.result(), {r.name: r.state.name for r in runs if r.name.startswith("extract ")}

    def calls() -> int:
        return Runtime(settings).llm.run_totals().calls  # cache hits included: no call at all

    real_save = prefs.save_learned

    def store_down(*args, **kwargs):
        raise OSError("the store went away")

    monkeypatch.setattr(prefs, "save_learned", store_down)
    first, states = extracted()
    assert (first["processed"], first["failed"]) == (0, 2) and set(states.values()) == {"Completed"}, states
    assert len(states) == 2
    monkeypatch.setattr(prefs, "save_learned", real_save)
    before = calls()
    again, states = extracted()
    assert (again["processed"], again["learned"]) == (2, 2)
    assert len(states) == 2 and set(states.values()) == {"Cached"}, states
    assert calls() == before  # served by Prefect: no call, not even one the response cache would answer
    assert {p.dimension for p in store.get_elixir("skin-advisor-en").style_preferences} == {"tone", "emoji"}

    assert revise(store, contents, llm, content.id, "shorter please", learn=False).status == "revised"
    monkeypatch.setattr(prefs, "save_learned", store_down)
    _, states = extracted(seed=0)
    assert list(states.values()) == ["Completed"], states  # the new revision's extraction
    monkeypatch.setattr(prefs, "save_learned", real_save)
    _, states = extracted(seed=7)  # another seed is another request: a new key
    assert list(states.values()) == ["Completed"], states
