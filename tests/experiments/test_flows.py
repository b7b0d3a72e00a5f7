"""The Prefect flows (few, sharing the session harness; the loop itself is tested elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from experiments.helpers import JudgeOutage

CONFIG = Path(__file__).parent / "data" / "small.yaml"


@pytest.fixture()
def library_home(home, monkeypatch, mlflow_ready):
    monkeypatch.setenv("FURNACE_EMBEDDER", "hash")
    from furnace.cli.elixir_cmd import LIBRARY_DIR
    from furnace.interop.importers import import_library
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    import_library(LIBRARY_DIR, Runtime(FurnaceSettings()).store, keep_existing=True)
    return home


def test_unit_version_names_operator_and_scorer_versions():
    from furnace.evolution.config import load_config
    from furnace_flows._common import unit_version

    version = unit_version(load_config(CONFIG))
    assert "crossover:" in version and "brief_fit:brief-v1" in version


def test_evolution_flow_matches_the_plain_run_and_its_rerun_is_cached(library_home, prefect_harness, smaller, capsys):
    from furnace.cli.experiment_cmd import run_experiment_file
    from furnace.runtime import Runtime
    from furnace_flows.evolution import evolution_flow

    shared = Path(os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"])
    shared_before = set(shared.rglob("*")) if shared.exists() else set()
    flowed = evolution_flow(str(smaller), home=str(library_home), show=True)
    assert flowed["status"] == "finished" and "leaderboard" in flowed["text"]
    # the MLflow run names its Prefect flow run (the app links to it when FURNACE_PREFECT_UI_URL is set)
    from prefect.client.orchestration import get_client

    from furnace.adapters.mlflow_tracker import run_summary
    from furnace.settings import FurnaceSettings

    summary = run_summary(FurnaceSettings(home=library_home).tracking_uri, flowed["experiment_id"])
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(summary["tags"]["furnace.prefect_flow_run_id"])
        assert client.read_flow(flow_run.flow_id).name == "furnace-evolution"
        units = [r for r in client.read_task_runs() if r.flow_run_id == flow_run.id]
    assert flow_run.parameters["file"] == str(smaller.resolve())
    # every unit's task run is versioned and its result persisted under its unit's content key
    keys = [Path(str(getattr(r.state.data, "storage_key", ""))).name for r in units]
    assert units and all(r.task_version for r in units) and all(k.startswith("furnace-unit-") for k in keys), keys
    assert len(set(keys)) == len(units)  # one key per unit
    shown = capsys.readouterr().err  # --prefect keeps the estimate and the progress of a plain run
    assert "estimate: ~" in shown and "generation 2/2" in shown
    # task results live in this home only: another home never gets them served from a shared cache
    assert any((library_home / "prefect" / "results").iterdir())
    assert (set(shared.rglob("*")) if shared.exists() else set()) == shared_before
    # run again under Prefect: every unit served from its task cache (one experiment built for both checks)
    _assert_a_rerun_is_served_from_its_task_cache(str(smaller), str(library_home), flowed)
    # the same experiment run directly reads every individual back: identical result, no model call
    plain = run_experiment_file(Runtime.from_env(home=str(library_home)), str(smaller), track=False, quiet=True)
    assert plain.totals["model_calls"] == flowed["totals"]["model_calls"]  # no new model call; totals kept
    assert plain.leaderboard == flowed["leaderboard"] and plain.lineage == flowed["lineage"]


def _task_runs(client, flow_run_id: str) -> list:
    """The task runs of a flow run that has returned, once the API holds each one's final state: Prefect
    reports task run states as events, which the server may write after the flow run has returned (a loaded
    machine saw a Pending ``record-sweep``). Polled up to a generous limit; what is read then is returned."""
    import time

    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    deadline = time.monotonic() + 60
    while True:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
        if all(r.state is not None and r.state.is_final() for r in runs) or time.monotonic() > deadline:
            return runs
        time.sleep(0.1)


def _assert_a_rerun_is_served_from_its_task_cache(config: str, home: str, first: dict) -> None:
    """Prefect as the engine: the rerun of ``first`` (a tracked flow run of ``config`` in ``home``) has every
    unit a Cached task run (nothing runs, no model call); task runs are named and tagged by generation, drawn
    after their parents' task runs only; each generation and the end publish artifacts."""
    from prefect.client.orchestration import get_client

    from furnace_flows.evolution import evolution_flow

    again = evolution_flow(config, home=home)
    assert again["experiment_id"] == first["experiment_id"] and again["leaderboard"] == first["leaderboard"]
    assert again["run_spent"]["model_calls"] == 0 < first["run_spent"]["model_calls"]
    with get_client(sync_client=True) as client:
        made, rerun = (_task_runs(client, r["prefect_flow_run_id"]) for r in (first, again))
        artifacts = client.read_artifacts()
    assert made and len(rerun) == len(made)
    assert {r.state.name for r in made} == {"Completed"}
    assert {r.state.name for r in rerun} == {"Cached"}, sorted({r.state.name for r in rerun})
    # named and tagged by generation: g<generation>/s<slot> <operator> (the call ledger's unit label)
    by_name = {r.name: r for r in made}
    generations = {int(n.split("/")[0][1:]) for n in by_name}
    assert generations == set(range(len(first["generations"]))), sorted(by_name)
    assert all(f"generation-{n.split('/')[0][1:]}" in r.tags for n, r in by_name.items())
    assert {n.split(" ", 1)[1] for n in by_name if n.startswith("g0/")} == {"seed"}
    # edges: a child's upstream task runs are the ones that made its parents, never the whole population
    made_by = {r.id: r for r in made}
    children = [r for r in made if not r.name.startswith("g0/")]
    upstream = {r.name: [i.id for i in r.task_inputs.get("wait_for", [])] for r in children}
    assert children and all(0 < len(ids) <= 2 for ids in upstream.values()), upstream
    for name, ids in upstream.items():  # each edge points to an earlier generation's task run
        assert all(int(made_by[i].name.split("/")[0][1:]) < int(name.split("/")[0][1:]) for i in ids)
    # artifacts: a leaderboard and an operators table per generation, plus the final ones and the MLflow link
    exp = first["experiment_id"]
    mine = [a for a in artifacts if a.flow_run_id is not None and str(a.flow_run_id) == first["prefect_flow_run_id"]]
    kinds = sorted(a.key.removeprefix(exp.lower() + "-") for a in mine)
    n = len(first["generations"])
    assert kinds.count("leaderboard") == n + 1 and kinds.count("operators") >= n and "mlflow-run" in kinds, kinds
    [link] = [a for a in mine if a.key.endswith("mlflow-run")]
    assert "/runs/" in str(link.data)
    [final] = [a for a in mine if a.key.endswith("leaderboard") and a.description.startswith("final")]
    assert first["leaderboard"][0]["agent_id"] in str(final.data)


def test_under_prefect_a_rerun_retries_unscored_individuals_unless_keep_failures(
    library_home, prefect_harness, monkeypatch, smaller
):
    """A unit whose judgement failed is not served from Prefect's task cache on a rerun: it runs again.
    (One generation of children after the seeds: three runs of it, each unit's rule the same at any size.)"""
    import furnace.llm.offline as offline
    from furnace.runtime import Runtime
    from furnace_flows.evolution import evolution_flow

    smaller.write_text(smaller.read_text().replace("generations: 2", "generations: 1"))

    real = offline.OfflineEngine
    monkeypatch.setattr(offline, "OfflineEngine", lambda: JudgeOutage(real))  # what the runtime builds offline
    monkeypatch.setattr(JudgeOutage, "down", True)
    home = str(library_home)

    def unscored(exp_id: str) -> int:
        results = Runtime.from_env(home=home).results
        return sum(1 for r in results.individuals(exp_id) if not r.scored)

    first = evolution_flow(str(smaller), home=home, track=False)
    assert first["unscored"], "the outage should leave some judgements unscored"
    before = unscored(first["experiment_id"])
    monkeypatch.setattr(JudgeOutage, "down", False)
    kept = evolution_flow(str(smaller), home=home, track=False, keep_failures=True)
    assert len(kept["unscored"]) == len(first["unscored"]) and unscored(first["experiment_id"]) == before
    again = evolution_flow(str(smaller), home=home, track=False)
    assert again["unscored"] == [] and unscored(first["experiment_id"]) == 0


def test_the_final_leaderboard_artifact_has_test_with_its_interval_beside_train():
    from experiments.test_evolution import make
    from furnace_flows.artifacts import report_rows

    report = make(generations=1, probes={"set": "writing-en", "limit": 4}).run().as_dict()
    board, _ = report_rows(report)
    keys = ("fitness", "train_fitness", "test_fitness", "test_low", "test_high", "train_test_gap")
    assert [{k: r[k] for k in keys} for r in board] == [{k: r.get(k) for k in keys} for r in report["leaderboard"]]
    assert all(r["test_low"] <= r["test_fitness"] <= r["test_high"] for r in board)


def test_fusion_generation_and_mutation_sweep_flows(library_home, prefect_harness):
    from furnace_flows.fusion_generation import fusion_generation
    from furnace_flows.mutation_sweep import mutation_sweep

    home = str(library_home)
    row = fusion_generation(
        ["viral-copywriter", "data-science-mentor"], operator="crossover", seed=1, limit=3, home=home, track=False
    )
    assert row["agent_id"].startswith("agt-") and 0 <= row["fitness"] <= 1
    # three probes, one held out: the fitness is the other two's, the test fitness stands beside it
    assert row["train_fitness"] == pytest.approx(row["fitness"]) and row["test_fitness"] is not None
    assert row["test_low"] <= row["test_fitness"] <= row["test_high"]
    assert row["train_test_gap"] == pytest.approx(row["fitness"] - row["test_fitness"], abs=1e-6)
    again = fusion_generation(
        ["viral-copywriter", "data-science-mentor"], operator="crossover", seed=1, limit=3, home=home, track=False
    )
    assert again["from_cache"] and again == row | {"from_cache": True}  # served from Prefect's task cache
    rows = mutation_sweep("viral-copywriter", [0.1, 0.3], [1, 2], limit=1, home=home)
    assert sorted((r["rate"], r["seed"]) for r in rows) == [(0.0, 0), (0.1, 1), (0.1, 2), (0.3, 1), (0.3, 2)]
    assert [r["fitness"] for r in rows] == sorted((r["fitness"] for r in rows), reverse=True)
    # its scores are stored like an experiment's: in DuckDB and in MLflow
    from furnace.adapters.mlflow_tracker import run_summary
    from furnace.runtime import Runtime

    [sweep_id] = {r["sweep_id"] for r in rows}
    rt = Runtime.from_env(home=home)
    stored = {r.agent_id: r.fitness for r in rt.results.individuals(sweep_id)}
    assert stored == {r["agent_id"]: r["fitness"] for r in rows}
    assert rt.results.get_experiment(sweep_id).summary["model_calls"] > 0
    logged = run_summary(rt.settings.tracking_uri, sweep_id)
    assert logged and logged["tags"]["furnace.kind"] == "mutation-sweep" and "sweep.json" in logged["artifacts"]
    assert [step for step, _ in logged["best_fitness_steps"]] == [0, 1]


def _runs(state) -> list:
    """The task runs of the flow run that ended in ``state`` (read back from Prefect), each checked to carry
    the versions of the code it ran: every furnace task of every flow run these tests make is versioned."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        runs = _task_runs(client, str(state.state_details.flow_run_id))
    assert all(r.task_version for r in runs), sorted(r.name for r in runs if not r.task_version)
    return runs


def _named(runs: list) -> dict[str, str]:
    """Task runs by name: name -> state name."""
    return {r.name: r.state.name for r in runs}


def _states(state) -> dict[str, str]:
    """The task runs of the flow run that ended in ``state``: name -> state name."""
    return _named(_runs(state))


def _new_version(home: str, elixir_id: str) -> int:
    from furnace.domain.elixir import edit
    from furnace.runtime import Runtime

    store = Runtime.from_env(home=home).store
    elixir = store.get_elixir(elixir_id)
    return store.save_elixir(edit(elixir, name=elixir.name + " (edited)")).version


def test_fusion_generation_rerun_is_cached_until_an_input_changes(library_home, prefect_harness, monkeypatch):
    """Prefect caches the fusion flow's tasks on what determines their result: a rerun's task runs are all
    Cached (no second MLflow run); a parent's new version or another model runs the fusion again."""
    from mlflow import MlflowClient

    from furnace.settings import FurnaceSettings
    from furnace_flows.fusion_generation import fusion_generation

    home = str(library_home)
    parents = ["viral-copywriter", "data-science-mentor"]

    def fused(**kw):
        state = fusion_generation(parents, operator="crossover", seed=2, limit=1, home=home, return_state=True, **kw)
        return state.result(), _runs(state)

    def fusion_runs() -> int:
        client = MlflowClient(FurnaceSettings(home=library_home).tracking_uri)
        found = client.get_experiment_by_name("furnace-fusions")
        return len(client.search_runs([found.experiment_id])) if found else 0

    row, runs = fused()
    states = _named(runs)
    assert sorted(states.values()) == ["Completed", "Completed"] and not row["from_cache"], states
    assert {name.split("-")[0] for name in states} == {"fuse", "log"}, states
    logged = fusion_runs()
    again, runs = fused()
    states = _named(runs)
    assert set(states.values()) == {"Cached"} and len(states) == 2, states
    assert again["agent_id"] == row["agent_id"] and again["fitness"] == row["fitness"] and again["from_cache"]
    assert fusion_runs() == logged  # the log task was served too: no second MLflow run of the same fusion
    _new_version(home, "viral-copywriter")  # the id now resolves to a new version: a new key, not a stale child
    newer, runs = fused(track=False)
    states = _named(runs)
    assert set(states.values()) == {"Completed"}, states
    assert newer["agent_id"] != row["agent_id"]
    monkeypatch.setenv("FURNACE_MODEL", "furnace-offline-judge2-v1")  # another model: its own key
    _, runs = fused(track=False)
    assert {r.state.name for r in runs} == {"Completed"}, runs
    [fuse] = [r for r in runs if r.name.startswith("fuse-and-score")]  # its version names operator and scorers
    assert "crossover:" in fuse.task_version and "scorers[" in fuse.task_version, fuse.task_version


def test_an_unscored_fusion_is_never_served_from_the_task_cache(library_home, prefect_harness, monkeypatch):
    import furnace.llm.offline as offline
    from furnace_flows.fusion_generation import fusion_generation

    real = offline.OfflineEngine
    monkeypatch.setattr(offline, "OfflineEngine", lambda: JudgeOutage(real))
    monkeypatch.setattr(JudgeOutage, "share", 1.0)
    monkeypatch.setattr(JudgeOutage, "down", True)
    home = str(library_home)

    def fused():
        state = fusion_generation(["empathetic-coach"], seed=5, limit=1, home=home, track=False, return_state=True)
        return state.result(), _states(state)

    row, states = fused()
    assert row["failures"] and set(states.values()) == {"Failed"}, states  # the flow still returns its row
    monkeypatch.setattr(JudgeOutage, "down", False)
    row, states = fused()
    assert not row["failures"] and set(states.values()) == {"Completed"}, states  # ran again, not the failure
    _, states = fused()
    assert set(states.values()) == {"Cached"}, states


def test_mutation_sweep_rerun_is_cached_until_its_base_changes(library_home, prefect_harness):
    from furnace_flows.mutation_sweep import mutation_sweep

    home = str(library_home)

    def swept():
        state = mutation_sweep("empathetic-coach", [0.2], [1, 2], limit=1, home=home, track=False, return_state=True)
        return state.result(), _states(state)

    rows, states = swept()
    assert len(states) == 4 and set(states.values()) == {"Completed"}, states  # 3 cells and the record
    assert sorted(name.split("-")[0] for name in states) == ["mutate", "mutate", "mutate", "record"], states
    again, states = swept()
    assert len(states) == 4 and set(states.values()) == {"Cached"}, states
    assert again == rows
    _new_version(home, "empathetic-coach")
    newer, states = swept()
    assert set(states.values()) == {"Completed"}, states
    assert {r["sweep_id"] for r in newer} != {r["sweep_id"] for r in rows}


def test_cli_fuse_and_sweep_with_prefect_run_their_flows(library_home, prefect_harness):
    import json

    from click.testing import CliRunner

    from furnace.cli import cli

    def run(*args: str):
        result = CliRunner().invoke(cli, ["--home", str(library_home), *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.output[result.output.index("{") if args[0] == "fuse" else result.output.index("[") :])

    fused = run("fuse", "viral-copywriter", "empathetic-coach", "--prefect", "--limit", "1", "--no-mlflow", "--json")
    assert fused["id"].startswith("agt-") and 0 <= fused["fitness"] <= 1 and fused["probes"] == "writing-en"
    assert not fused["failures"] and set(fused["objectives"]) == {"brief_fit", "constraints", "fidelity", "tone"}
    again = run("fuse", "viral-copywriter", "empathetic-coach", "--prefect", "--limit", "1", "--no-mlflow", "--json")
    assert again["from_cache"] and again["id"] == fused["id"] and again["fitness"] == fused["fitness"]
    rows = run(
        "sweep",
        "empathetic-coach",
        "--rates",
        "0.2",
        "--seeds",
        "3",
        "--limit",
        "1",
        "--prefect",
        "--no-mlflow",
        "--json",
    )
    assert sorted((r["rate"], r["seed"]) for r in rows) == [(0.0, 0), (0.2, 3)]


def test_each_scheduled_slot_is_a_new_experiment_and_a_retry_resumes_it():
    from datetime import UTC, datetime, timedelta, timezone

    from furnace.evolution.config import load_config
    from furnace_flows.evolution import seed_for_slot

    slot = datetime(2026, 12, 1, 3, 0, 12, tzinfo=UTC)
    same_slot_elsewhere = slot.astimezone(timezone(timedelta(hours=8))) + timedelta(seconds=30)
    assert seed_for_slot(slot) == seed_for_slot(same_slot_elsewhere)  # a retry of the slot resumes
    next_day = seed_for_slot(slot + timedelta(days=1))
    assert next_day != seed_for_slot(slot)
    config = load_config(CONFIG)
    ids = {config.model_copy(update={"seed": s}).experiment_id("offline") for s in (seed_for_slot(slot), next_day)}
    assert len(ids) == 2  # a new seed is a new experiment id: the schedule never finds a finished run


@pytest.mark.slow
def test_prefect_deploy_all_registers_every_flow_of_prefect_yaml(prefect_harness, monkeypatch):
    """``prefect deploy --all`` in flows/ registers the four deployments of flows/prefect.yaml against a local
    server; each entrypoint loads its flow by path, as a worker would. The command runs in this process
    (Prefect's own CLI test runner), on the session's API."""
    import yaml
    from prefect.client.orchestration import get_client
    from prefect.flows import load_flow_from_entrypoint
    from prefect.testing.cli import invoke_and_assert

    flows = Path(__file__).resolve().parents[2] / "flows"
    declared = yaml.safe_load((flows / "prefect.yaml").read_text(encoding="utf-8"))["deployments"]
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    with get_client(sync_client=True) as client:  # what `prefect work-pool create furnace --type process` makes
        template = ProcessWorker.get_default_base_job_template()
        client.create_work_pool(WorkPoolCreate(name="furnace", type="process", base_job_template=template))
    monkeypatch.chdir(flows)
    invoke_and_assert(["--no-prompt", "deploy", "--all"], expected_code=0, echo=False)
    with get_client(sync_client=True) as client:
        deployed = {d.entrypoint: d for d in client.read_deployments()}
        flow_names = {e: client.read_flow(d.flow_id).name for e, d in deployed.items()}
    assert {d["entrypoint"] for d in declared} <= set(deployed), sorted(deployed)
    for spec in declared:
        got = deployed[spec["entrypoint"]]
        assert got.name == spec["name"] and got.work_pool_name == "furnace"
        assert got.parameters == spec["parameters"]
        assert [s.schedule.cron for s in got.schedules] == [s["cron"] for s in spec.get("schedules", [])]
        # a flow run starts in flows/, where the entrypoints and the relative parameters resolve
        [step] = got.pull_steps
        assert Path(step["prefect.deployments.steps.set_working_directory"]["directory"]) == flows
        assert load_flow_from_entrypoint(str(flows / spec["entrypoint"])).name == flow_names[spec["entrypoint"]]
    expected = {"furnace-evolution", "furnace-fusion-generation", "furnace-mutation-sweep", "preference-extraction"}
    assert expected <= set(flow_names.values())
    nightly = deployed["evolution.py:evolution"].parameters
    assert (flows / nightly["file"]).resolve().is_file() and nightly["reseed"] is True
