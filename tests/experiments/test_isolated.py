"""Units run isolated (``furnace.evolution.isolated``), in process: what a Dask worker does, without Dask.

Fast: a thread pool stands in for the cluster; ``run_job`` gets only what would be pickled
(the outcome is round-tripped through pickle as a worker's would be).
"""

from __future__ import annotations

import pickle
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from furnace.evolution.config import parse_config
from furnace.evolution.isolated import (
    IsolatedUnitRunner,
    PeerPrompt,
    Sink,
    SpanRecorder,
    _Kit,
    _kit,
    _Slotted,
    build_world,
    replay,
    run_job,
)
from furnace.evolution.local import memory_evolution
from furnace.evolution.units import ThreadUnitRunner
from furnace.fusion.embedding import HashEmbedder
from furnace.llm.cache import CachedLLM
from furnace.llm.offline import OfflineEngine
from tests.experiments.helpers import library

CONFIG = {
    "name": "isolated",
    "seed": 3,
    "population": 4,
    "generations": 2,
    "concurrency": 2,
    "seeds": {"language": "en"},
    "selection": {"tournament_size": 2, "elitism": 1},
    "probes": {"set": "writing-en", "limit": 2},
    "scorers": {"constraints": 0.2, "fidelity": 0.2, "brief_fit": 0.5, "diversity": 0.1},
}


class Tracing:
    """A tracker that keeps the span tree it is sent (kinds, inputs, outputs, usage, assessments)."""

    def __init__(self) -> None:
        self.roots: list[dict[str, Any]] = []

    def start_experiment(self, *args: Any) -> None: ...

    def log_generation(self, *args: Any) -> None: ...

    def finish(self, *args: Any, **kwargs: Any) -> None: ...

    def trace(self, name: str, inputs: dict[str, Any], kind: str = "agent") -> _Node:
        node = _Node(name, inputs, kind)
        self.roots.append(node.data)
        return node

    def shape(self) -> list[Any]:
        """The trees without timings, without cache hits (whether a repeat is a hit or is not asked
        at all depends on timing in any runner), children in a stable order (probes run in parallel)."""

        def strip(d: dict[str, Any]) -> Any:
            outputs = {k: v for k, v in (d["outputs"] or {}).items() if k not in ("latency_s", "cached")}
            children = sorted((strip(c) for c in d["children"] if not (c["outputs"] or {}).get("cached")), key=repr)
            return (
                d["name"],
                d["kind"],
                sorted(d["inputs"]),
                children,
                outputs,
                d["error"],
                d["tokens"],
                d["assessed"],
            )

        return sorted((strip(r) for r in self.roots), key=repr)


class _Node:
    def __init__(self, name: str, inputs: dict[str, Any], kind: str) -> None:
        self.data: dict[str, Any] = {
            "name": name,
            "kind": kind,
            "inputs": inputs,
            "children": [],
            "outputs": None,
            "error": None,
            "tokens": None,
            "assessed": [],
        }

    def child(self, name: str, inputs: dict[str, Any], kind: str = "chain") -> _Node:
        node = _Node(name, inputs, kind)
        self.data["children"].append(node.data)
        return node

    def end(
        self, outputs: dict[str, Any] | None = None, error: str | None = None, *, usage: Any = None, model: Any = None
    ) -> None:
        self.data["outputs"], self.data["error"] = outputs, error
        self.data["tokens"] = usage.total_tokens if usage is not None else None

    def assess(self, assessments: Any) -> None:
        self.data["assessed"] += [(a.name, a.value) for a in assessments]


def _evolution(tracker: Any = None) -> Any:
    seeds = [e for e in library() if e.language == "en"]
    kwargs = {"tracker": tracker} if tracker is not None else {}
    return memory_evolution(parse_config(CONFIG), seeds, llm=CachedLLM(OfflineEngine()), **kwargs)


def _offline() -> Any:
    return OfflineEngine()


def _isolated(evo: Any, pool: ThreadPoolExecutor, shipped: list[Any]) -> IsolatedUnitRunner:
    world = pickle.loads(pickle.dumps(build_world(evo, model=_offline, embedder=HashEmbedder, slots=2)))
    sink = Sink(evo, evo.breeder.store, evo.llm.cache, evo.llm.ledger, evo.breeder.cache.kv)

    def submit(job: Any, order: int) -> Any:
        def work() -> Any:
            outcome = pickle.loads(pickle.dumps(run_job(world, pickle.loads(pickle.dumps(job)))))
            shipped.append(outcome)
            return outcome

        return pool.submit(work)

    return IsolatedUnitRunner(submit, sink)


def _individuals(evo: Any, report: Any) -> list[tuple]:
    return sorted(
        (r.generation, r.slot, r.agent_id, r.lineage_hash, r.fitness, tuple(sorted(r.objectives.items())))
        for r in evo.results.individuals(report.experiment_id)
    )


def _paid(report: Any) -> tuple[Any, ...]:
    """What a run paid (model calls, tokens, cost); how many repeats were cache hits depends on timing."""
    return (
        report.totals["model_calls"],
        report.totals["tokens"],
        report.totals["cost_usd"],
        report.totals["failed_calls"],
    )


def test_isolated_units_give_the_local_run_and_the_driver_writes_everything():
    local = _evolution(Tracing())
    local.unit_runner = ThreadUnitRunner(1)  # one unit at a time on both sides: which unit pays for a
    expected = local.run()  # request two units share (and whose trace shows it) cannot depend on timing
    evo = _evolution(Tracing())
    shipped: list[Any] = []
    with ThreadPoolExecutor(1) as pool:
        evo.unit_runner = _isolated(evo, pool, shipped)
        report = evo.run()
    assert report.experiment_id == expected.experiment_id
    assert _individuals(evo, report) == _individuals(local, expected)
    assert _paid(report) == _paid(expected) and report.totals["model_calls"] > 0  # the driver's ledger
    gens = [(g.survivors, g.calls, g.tokens) for g in evo.results.generations(report.experiment_id)]
    assert gens == [(g.survivors, g.calls, g.tokens) for g in local.results.generations(expected.experiment_id)]
    assert evo.tracker.shape() == local.tracker.shape()  # the traces, replayed on the driver's tracker
    # the driver's stores hold what the workers made: every bred agent, every answer
    bred = {a.id for o in shipped for a in o.agents}
    assert bred and all(evo.breeder.store.get_agent(agent_id) for agent_id in bred)
    for call in evo.llm.ledger.calls():
        assert evo.llm.cache.get(call.cache_key) is not None
    # every call a worker made, cache hits included (`calls` are model calls); each names its unit
    held = [c for c in evo.llm.ledger.calls() if c.unit == "held-out"]  # made by the driver, after the search
    assert sum(len(o.calls) for o in shipped) + len(held) == report.totals["calls"] + report.totals["cached_calls"]
    assert all(c.unit for o in shipped for c in o.calls)


def test_an_outcome_applied_twice_is_counted_once():
    """A Prefect task served from its cache returns an outcome whose calls the ledger already holds."""
    evo = _evolution()
    outcomes: list[Any] = []
    with ThreadPoolExecutor(2) as pool:
        evo.unit_runner = _isolated(evo, pool, outcomes)
        evo.run()
    before = evo.llm.ledger.totals()
    sink = Sink(evo, evo.breeder.store, evo.llm.cache, evo.llm.ledger, evo.breeder.cache.kv)
    meter = evo.metered.meter
    outcome = next(o for o in outcomes if o.calls)
    record = sink.apply(outcome, outcome.record.generation, outcome.record.slot)
    evo._writer.flush()
    assert record == outcome.record
    assert evo.llm.ledger.totals() == before and evo.metered.meter == meter


def test_recorded_spans_replay_in_order_with_errors():
    from furnace.llm.cache import CallTotals

    recorder = SpanRecorder()
    root = recorder.trace("individual", {"slot": 1}, "agent")
    fuse = root.child("fuse crossover", {"seed": 2}, "chain")
    fuse.child("model identity", {"message": "hi"}, kind="llm").end(
        {"text": "x"}, usage=CallTotals(calls=1, prompt_tokens=3)
    )
    fuse.end(error="FusionError: no")
    root.end(error="FusionError: no")
    shipped = pickle.loads(pickle.dumps(recorder.spans))
    tracker = Tracing()
    replay(tracker, shipped)
    model = {
        "name": "model identity",
        "kind": "llm",
        "inputs": {"message": "hi"},
        "children": [],
        "outputs": {"text": "x"},
        "error": None,
        "tokens": 3,
        "assessed": [],
    }
    step = {**model, "name": "fuse crossover", "kind": "chain", "inputs": {"seed": 2}, "children": [model]}
    step.update(outputs=None, error="FusionError: no", tokens=None)
    assert tracker.roots == [{**step, "name": "individual", "kind": "agent", "inputs": {"slot": 1}, "children": [step]}]
    replay(object(), shipped)  # a tracker that does not trace: nothing to do, no error


def test_a_job_ships_its_population_as_ids_and_prompts():
    """The population a unit is scored against travels as what the unit reads of it (not the records' scores)."""
    evo = _evolution()
    world = build_world(evo, model=_offline, embedder=HashEmbedder, slots=2)
    sink = Sink(evo, evo.breeder.store, evo.llm.cache, evo.llm.ledger, evo.breeder.cache.kv)
    jobs: list[Any] = []
    with ThreadPoolExecutor(2) as pool:

        def submit(job: Any, order: int) -> Any:
            jobs.append(job)
            return pool.submit(run_job, world, pickle.loads(pickle.dumps(job)))

        evo.unit_runner = IsolatedUnitRunner(submit, sink)
        report = evo.run()
    children = [j for j in jobs if j.args[0] > 0]
    assert children and all(j.args[2] for j in children)
    assert all(type(p) is PeerPrompt for j in jobs for p in j.args[2])
    members = {r.agent_id: r.system_prompt for r in evo.results.individuals(report.experiment_id)}
    assert all(members[p.agent_id] == p.system_prompt for j in children for p in j.args[2])


class _CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it is asked to embed."""

    texts: list[str] = []

    def embed(self, texts: Any) -> list[list[float]]:
        type(self).texts += list(texts)
        return super().embed(texts)


def test_a_worker_embeds_each_text_once_for_all_its_units():
    """The peers' prompts recur in every unit's diversity: a worker embeds each once (what a unit gets is unchanged)."""
    _CountingEmbedder.texts = []
    local = _evolution()
    local.unit_runner = ThreadUnitRunner(1)
    expected = local.run()
    evo = _evolution()
    world = build_world(evo, model=_offline, embedder=_CountingEmbedder, slots=2)
    sink = Sink(evo, evo.breeder.store, evo.llm.cache, evo.llm.ledger, evo.breeder.cache.kv)
    with ThreadPoolExecutor(1) as pool:  # one worker: one kit for the run
        evo.unit_runner = IsolatedUnitRunner(lambda job, order: pool.submit(run_job, world, job), sink)
        report = evo.run()
    assert _individuals(evo, report) == _individuals(local, expected)
    assert _CountingEmbedder.texts and len(_CountingEmbedder.texts) == len(set(_CountingEmbedder.texts))


def test_a_workers_model_slots_serve_the_oldest_unit_first_and_its_phase_only_moves_forward():
    evo = _evolution()
    kit = _Kit(build_world(evo, model=_offline, slots=1))
    kit.serve("priority")
    kit.serve("arrival")  # a job sent in generation 0 that starts late does not set the worker back
    assert kit.slots.serving == "priority"

    class Recording:
        model_name = "rec"

        def __init__(self) -> None:
            self.served: list[float] = []

        def complete(self, request: Any) -> Any:
            self.served.append(request)
            return request

    inner = Recording()
    with kit.slots.held():  # the only slot is busy: the calls below wait for it
        calls = [_Slotted(inner, kit.slots, order) for order in (9, 7, 8)]
        callers = [threading.Thread(target=call.complete, args=(call.priority,)) for call in calls]
        for t in callers:
            t.start()
        while len(kit.slots._waiters) < len(callers):
            time.sleep(0.001)
    for t in callers:
        t.join()
    assert inner.served == [7, 8, 9]
    kit.serve("reverse")  # the last child is planned: the youngest unit has the longest chain left
    assert kit.slots.serving == "reverse"


def test_a_worker_builds_one_kit_per_run_and_keeps_the_newest_four() -> None:
    world = build_world(_evolution(), model=_offline, slots=1)
    first = _kit(world)
    assert _kit(pickle.loads(pickle.dumps(world))) is first  # the same run (token), sent again
    later = [_kit(replace(world, token=f"later-{i}")) for i in range(4)]
    assert len(set(map(id, later))) == 4 and first not in later
    assert _kit(replace(world, token="later-3")) is later[3]
    assert _kit(world) is not first  # the oldest was dropped: a new run of its token builds a new kit


def test_no_secret_travels_to_the_workers(tmp_path: Any) -> None:
    """The world a worker receives carries no key, store URL or seal key: a worker reads its own environment."""
    from furnace.settings import FurnaceSettings

    settings = FurnaceSettings(
        home=tmp_path,
        api_key="sk-live-key-1234",
        database_url="postgresql+psycopg://team:pw-5678@db.example/furnace",
        seal_key="seal-key-9012",
    )
    shipped = pickle.dumps(build_world(_evolution(), model=_offline, settings=settings, slots=2))
    for secret in (b"sk-live-key-1234", b"pw-5678", b"seal-key-9012"):
        assert secret not in shipped
