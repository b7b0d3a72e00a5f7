"""A run's breeder reads parents once and writes new agents behind, with the records
(furnace.evolution.runstore, furnace.evolution.writer)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from experiments.helpers import library, live_db
from furnace.domain.agent import Agent, agent_id_for
from furnace.domain.lineage import Lineage
from furnace.evolution.config import parse_config
from furnace.evolution.local import memory_evolution
from furnace.evolution.records import IndividualRecord, ScoreRow
from furnace.evolution.writer import Deferred, NewAgent, RecordWriter
from furnace.llm.cache import CachedLLM
from furnace.llm.offline import OfflineEngine
from furnace.storage.memory import MemoryStore
from furnace.storage.sql.experiments import SQLExperimentResults
from furnace.storage.sql.store import SQLStore

CONFIG = {
    "name": "wb",
    "seed": 4,
    "population": 6,
    "generations": 2,
    "concurrency": 3,
    "selection": {"tournament_size": 2, "elitism": 1},
    "probes": {"set": "writing-en", "limit": 1},
    "scorers": {"constraints": 0.3, "fidelity": 0.3, "brief_fit": 0.3, "diversity": 0.1},
}


def _seeds() -> list[Any]:
    return [e for e in library() if e.language == "en"]


class _Watched(SQLStore):
    """Records which thread saves agents, and the reads made on the units' threads."""

    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self.saved_on: list[str] = []
        self.unit_reads: list[str] = []
        self.unit_transactions = 0

    def save_agents(self, agents: Any) -> list[bool]:
        self.saved_on.append(threading.current_thread().name)
        return super().save_agents(agents)

    def _read(self, what: str) -> None:
        if threading.current_thread().name.startswith("furnace-unit"):
            self.unit_reads.append(what)

    def atomically(self, work: Any) -> Any:
        if threading.current_thread().name.startswith("furnace-unit"):
            self.unit_transactions += 1
        return super().atomically(work)

    def get_agent(self, id: str) -> Any:
        self._read("get_agent")
        return super().get_agent(id)

    def load_for_fusion(self, ref_or_id: Any) -> Any:
        self._read("load_for_fusion")
        return super().load_for_fusion(ref_or_id)

    def child_ids(self, parents: Any) -> dict[str, set[str]]:
        self._read("child_ids")
        return super().child_ids(parents)


def _writer_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "furnace-writer"}


def test_a_run_writes_its_agents_on_the_writer_thread_with_the_same_result(settings: Any) -> None:
    db = live_db(settings.home)
    store = _Watched(db)
    seeds = _seeds()
    for elixir in seeds:
        store.save_elixir(elixir)
    config = parse_config(CONFIG)
    results = SQLExperimentResults(db)
    llm = CachedLLM(OfflineEngine())
    writers_before = _writer_threads()
    report = memory_evolution(config, seeds, llm=llm, store=store, results=results).run()

    assert store.saved_on and set(store.saved_on) == {"furnace-writer"}  # never on a unit's thread
    assert _writer_threads() == writers_before  # the run's writer thread ended with the run
    assert store.unit_reads == []  # the seeds were read ahead; a new child's parents say it is not stored
    assert store.unit_transactions == 0  # a child's agent is written behind: no transaction on the unit
    bred = [r for r in results.individuals(report.experiment_id) if r.lineage_hash]
    assert bred
    for record in bred:  # every recorded child's agent is stored, and verifies
        assert store.get_agent(record.agent_id).lineage_hash == record.lineage_hash
    plain = CachedLLM(OfflineEngine())
    memory = memory_evolution(config, seeds, llm=plain).run()
    assert memory.result_signature() == report.result_signature()
    # the same requests (by key) and the same tokens spent
    assert {c.cache_key for c in llm.ledger.calls()} == {c.cache_key for c in plain.ledger.calls()}
    assert llm.totals().total_tokens == plain.totals().total_tokens > 0


class _Counting(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads: Counter[Any] = Counter()

    def load_for_fusion(self, ref_or_id: Any) -> Any:
        self.loads[ref_or_id] += 1
        return super().load_for_fusion(ref_or_id)


def test_parents_are_loaded_from_the_store_once_per_run() -> None:
    store = _Counting()
    seeds = _seeds()
    for elixir in seeds:
        store.save_elixir(elixir)
    config = parse_config({**CONFIG, "generations": 3})
    evo = memory_evolution(config, seeds, llm=CachedLLM(OfflineEngine()), store=store)
    evo.run()
    parents = {p for r in evo.results.individuals(evo.experiment_id) for p in r.parents}
    assert any(p.startswith("agt-") for p in parents)  # children bred from this run's children
    assert store.loads and max(store.loads.values()) == 1
    assert not any(ref.id.startswith("agt-") for ref in store.loads)  # served as bred, not read back


def _agent(store: SQLStore, seed: int = 1) -> Agent:
    parent = store.save_elixir(_seeds()[0])
    lineage = Lineage(parents=(parent,), operator="mutation", params={"seed": seed}, op_version="1")
    child = _seeds()[1]
    return Agent(id=agent_id_for(lineage.lineage_hash), elixir=child, lineage=lineage, system_prompt="You are x.")


def _record(agent_id: str, slot: int, *, lineage_hash: str | None = "h", failed: bool = False) -> IndividualRecord:
    return IndividualRecord(
        experiment_id="exp-wb",
        generation=1,
        agent_id=agent_id,
        slot=slot,
        operator="mutation",
        parents=("editor",),
        lineage_hash=lineage_hash,
        elixir={"id": agent_id, "name": "Ünïcode “quoted”"},
        system_prompt="You are x.",
        fitness=0.5,
        objectives={"fidelity": 0.5},
        scores=(
            ScoreRow("p1", "fidelity", 0.5, "half", False, "missing: tone"),
            ScoreRow("p2", "fidelity", 0.0, "timeout", failed),
        ),
        failures=int(failed),
        failure_reasons=("p2/fidelity: timeout",) if failed else (),
        calls=3,
        tokens=120,
        cost_usd=0.0012,
    )


def test_a_batch_is_one_unit_of_work_agents_included(settings: Any) -> None:
    db = live_db(settings.home)
    store, results = SQLStore(db), SQLExperimentResults(db)
    agent = _agent(store)
    writer = RecordWriter(results)
    gate = threading.Event()
    writer.put(Deferred(gate.wait))  # holds the writer so that the next three make one batch

    def boom() -> None:
        raise RuntimeError("disk on fire")

    writer.put(NewAgent(store, agent))
    writer.put(_record(agent.id, 0))
    writer.put(Deferred(boom))
    gate.set()
    with pytest.raises(RuntimeError, match="disk on fire"):
        writer.flush()
    assert db.query("SELECT count(*) FROM agents") == [(0,)]  # rolled back with the record
    assert results.individuals("exp-wb") == []

    writer.put(NewAgent(store, agent))
    writer.put(_record(agent.id, 0))
    writer.flush()
    assert store.get_agent(agent.id).lineage_hash == agent.lineage_hash
    assert [r.agent_id for r in results.individuals("exp-wb")] == [agent.id]


def test_individuals_round_trip_and_saving_again_changes_nothing(settings: Any) -> None:
    results = SQLExperimentResults(live_db(settings.home))
    records = [_record("agt-a", 0), _record("agt-b", 1, lineage_hash=None, failed=True)]
    results.save_individuals(records)
    results.save_individuals([*records, _record("agt-c", 2)])  # existing keys are no-ops
    assert results.individuals("exp-wb") == [*records, _record("agt-c", 2)]
    assert results.count_rows("exp-wb")["experiment_scores"] == 6


def test_the_writer_commits_a_window_of_records_at_once_and_flush_ends_the_window(settings: Any) -> None:
    db = live_db(settings.home)
    results = SQLExperimentResults(db)

    def window(slots: range) -> int:
        writer = RecordWriter(results, window_s=120)
        for slot in slots:
            writer.put(_record(f"agt-{slot}", slot))
        assert len(results.individuals("exp-wb")) == slots.start  # gathered, not yet committed
        before = db.statements
        writer.flush()  # commits now (else it would wait out the window)
        return db.statements - before

    assert window(range(0, 2)) == window(range(2, 7))  # one transaction, however many records
    assert len(results.individuals("exp-wb")) == 7


def test_units_from_other_processes_are_written_in_one_batch_too(settings: Any) -> None:
    """What the isolated runner's driver queues per unit (its agent, its cache writes, its record)
    does not split the batch: three units cost the statements two do."""
    db = live_db(settings.home)
    store, results = SQLStore(db), SQLExperimentResults(db)
    agents = [_agent(store, seed) for seed in (1, 2, 3, 4, 5)]
    written: list[str] = []

    def batch(units: list[Agent], first_slot: int) -> int:
        writer = RecordWriter(results, window_s=120)
        for slot, agent in enumerate(units, first_slot):
            writer.put(NewAgent(store, agent))
            writer.put(Deferred(lambda a=agent: written.append(a.id)))  # e.g. its response-cache entries
            writer.put(_record(agent.id, slot))
        before = db.statements
        writer.flush()
        return db.statements - before

    assert batch(agents[:3], 0) == batch(agents[3:], 3)  # (one agent alone is saved another way)
    assert written == [a.id for a in agents]
    assert [r.agent_id for r in results.individuals("exp-wb")] == [a.id for a in agents]
    assert all(store.get_agent(a.id).lineage_hash == a.lineage_hash for a in agents)


def test_a_finished_generation_ends_the_window(settings: Any) -> None:
    from furnace.evolution.records import GenerationRecord

    results = SQLExperimentResults(live_db(settings.home))
    writer = RecordWriter(results, window_s=120)
    writer.put(_record("agt-a", 0))
    writer.put(GenerationRecord("exp-wb", 1, ("agt-a",), 0.5, 0.5))
    deadline = time.monotonic() + 60
    while not results.generations("exp-wb") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [g.generation for g in results.generations("exp-wb")] == [1]  # without a flush
    assert [r.agent_id for r in results.individuals("exp-wb")] == ["agt-a"]


class _Reads(MemoryStore):
    """Counts agent reads and the parents whose children were listed."""

    def __init__(self) -> None:
        super().__init__()
        self.agent_reads: list[str] = []
        self.listed: list[str] = []

    def get_agent(self, id: str) -> Any:
        self.agent_reads.append(id)
        return super().get_agent(id)

    def child_ids(self, parents: Any) -> dict[str, set[str]]:
        self.listed.extend(parents)
        return super().child_ids(parents)


def test_a_new_child_is_not_read_from_the_store_and_a_stored_one_is_reused() -> None:
    store = _Reads()
    seeds = _seeds()
    for elixir in seeds:
        store.save_elixir(elixir)
    config = parse_config({**CONFIG, "generations": 3})
    first = memory_evolution(config, seeds, llm=CachedLLM(OfflineEngine()), store=store)
    report = first.run()
    bred = {r.agent_id for r in first.results.individuals(first.experiment_id) if r.lineage_hash}
    assert bred and store.agent_reads == []  # each parent's edges said its child was not stored
    assert store.listed and len(store.listed) == len(set(store.listed))  # a parent's children listed once per run
    assert set(store.listed) <= {e.id for e in seeds}  # the run's own children have none stored
    for agent_id in bred:
        assert store.get_agent(agent_id).id == agent_id  # written behind, all of them
    store.agent_reads.clear()

    # another experiment (other name) plans the same children: they are stored, so they are read, not bred
    inner = _Tasks(OfflineEngine())
    again = memory_evolution(
        parse_config({**CONFIG, "generations": 3, "name": "wb2"}), seeds, llm=CachedLLM(inner), store=store
    )
    second = again.run()
    assert second.result_signature()["lineage"] == report.result_signature()["lineage"]
    assert set(store.agent_reads) == bred
    assert inner.tasks and all(task in ("reply", "judge") for task in inner.tasks)  # no fusion call


class _Tasks:
    """The tasks that reach the model."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_name, self.engine_version = inner, inner.model_name, inner.engine_version
        self.tasks: list[str] = []

    def complete(self, request: Any) -> Any:
        self.tasks.append(request.task.value)
        return self.inner.complete(request)


def test_two_units_asking_about_one_parent_at_once_list_its_children_once() -> None:
    from furnace.domain.errors import NotFound
    from furnace.evolution.runstore import RunStore

    entered, go = threading.Event(), threading.Event()
    calls: list[list[str]] = []

    class _Slow(MemoryStore):
        def child_ids(self, parents: Any) -> dict[str, set[str]]:
            calls.append(list(parents))
            entered.set()
            go.wait(10)  # the first listing is under way while the second unit asks
            return super().child_ids(parents)

    store = _Slow()
    seed = _seeds()[0]
    store.save_elixir(seed)
    view = RunStore(store, lambda _agent: None)
    outcomes: list[str] = []

    def ask() -> None:
        try:
            view.stored_child("child-1", [seed.ref])
        except NotFound:
            outcomes.append("not stored")

    first = threading.Thread(target=ask)
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=ask)
    second.start()
    second.join(0.3)  # the second unit must not start a listing of its own meanwhile
    go.set()
    first.join(10)
    second.join(10)
    assert calls == [[seed.id]] and outcomes == ["not stored", "not stored"]
