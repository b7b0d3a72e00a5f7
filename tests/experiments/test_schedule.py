"""The loop without a generation barrier: same seed, same run at any concurrency and with any runner;
units of the next generation start before the previous one has finished; the oldest waiting call
gets a freed model slot first."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from experiments.helpers import library, scripted_llm
from experiments.test_evolution import make
from furnace.domain.render import render_prompt
from furnace.domain.threads import PrioritySlots
from furnace.evolution.plans import Plan
from furnace.evolution.records import MemoryResults
from furnace.evolution.units import Unit
from furnace.llm.seam import TaskKind
from furnace.scoring.probes import load_probe_set


class ShuffledRunner:
    """Runs submitted units one at a time on a background thread, each time picking a seeded-random
    pending one: completion order has nothing to do with plan order."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pending: list[tuple[Unit, Future]] = []
        self.cond = threading.Condition()
        self.closed = False
        self.log: list[tuple[str, int, int]] = []  # ("start"/"end", generation, slot)
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def submit(self, unit: Unit) -> Future:
        fut: Future = Future()
        with self.cond:
            self.pending.append((unit, fut))
            self.cond.notify()
        return fut

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.pending and not self.closed:
                    self.cond.wait()
                if self.closed and not self.pending:
                    return
                unit, fut = self.pending.pop(self.rng.randrange(len(self.pending)))
            generation, plan = unit.args[0], unit.args[1]
            self.log.append(("start", generation, plan.slot))
            try:
                result = unit.run()
            except BaseException as err:
                fut.set_exception(err)
            else:
                fut.set_result(result)
            self.log.append(("end", generation, plan.slot))

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify()
        self.thread.join()


def _outcome(evo, report, results) -> tuple:
    rows = sorted(
        (r.generation, r.slot, r.agent_id, r.operator, r.parents, r.fitness, tuple(r.scores))
        for r in results.individuals(evo.experiment_id)
    )
    return report.result_signature(), rows


def test_same_seed_same_run_at_any_concurrency_and_with_any_runner():
    outcomes = []
    for concurrency in (1, 8, 32):
        results = MemoryResults()
        evo = make(results, concurrency=concurrency)
        outcomes.append(_outcome(evo, evo.run(), results))
    for seed in (1, 2):
        results = MemoryResults()
        evo = make(results)
        evo.unit_runner = ShuffledRunner(seed)
        outcomes.append(_outcome(evo, evo.run(), results))
    assert all(o == outcomes[0] for o in outcomes[1:])
    assert len(outcomes[0][1]) == 6 + 3 * 5  # every seed and child recorded once
    other = make(MemoryResults(), seed=4).run()
    assert other.result_signature() != outcomes[0][0]


def test_next_generation_starts_before_the_previous_one_finishes():
    runner = ShuffledRunner(7)
    evo = make(MemoryResults())
    evo.unit_runner = runner
    report = evo.run()
    assert report.status == "finished"
    ends = {(g, s): i for i, (what, g, s) in enumerate(runner.log) if what == "end"}
    starts = {(g, s): i for i, (what, g, s) in enumerate(runner.log) if what == "start"}
    overlapped = [
        g
        for g in (2, 3)
        if min(i for (gg, _), i in starts.items() if gg == g) < max(ends[k] for k in ends if k[0] == g - 1)
    ]
    assert overlapped  # a unit of generation g started while generation g-1 still had a unit running or waiting
    # generation 0 (the seeds) is complete before any child starts: every plan needs it
    first_child = min(i for (g, _), i in starts.items() if g >= 1)
    assert all(i < first_child for (g, _), i in ends.items() if g == 0)


def test_stored_fusion_run_is_identical_at_concurrency_1_and_8(tmp_path: Path):
    from experiments.helpers import live_db
    from furnace.evolution.config import parse_config
    from furnace.evolution.local import memory_evolution
    from furnace.llm.cache import CachedLLM
    from furnace.llm.offline import OfflineEngine
    from furnace.storage.sql.experiments import SQLExperimentResults
    from furnace.storage.sql.store import SQLStore

    seeds = [e for e in library() if e.language == "en"]
    outcomes = []
    for concurrency in (1, 8):
        db = live_db(tmp_path / f"c{concurrency}")
        store = SQLStore(db)
        store.save_elixirs(seeds)
        config = parse_config(
            {
                "name": "sched",
                "seed": 11,
                "population": 5,
                "generations": 2,
                "concurrency": concurrency,
                "seeds": {"language": "en"},
                "probes": {"set": "writing-en", "limit": 2},
                "scorers": {"constraints": 0.2, "fidelity": 0.2, "brief_fit": 0.5, "diversity": 0.1},
            }
        )
        results = SQLExperimentResults(db)
        evo = memory_evolution(config, seeds, llm=CachedLLM(OfflineEngine()), results=results, store=store)
        report = evo.run()
        assert report.status == "finished"
        lineage = sorted((a.id, tuple(p.id for p in a.lineage.parents)) for a in store.list_agents())
        outcomes.append((_outcome(evo, report, results), lineage))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1]  # children were made and stored with their lineage


def _stopped_by_the_budget(concurrency: int, runner=None, max_calls: int = 148):
    """The offline engine behind a response cache (fusion, reflection, answers and judgements shared between
    units through it), a budget that stops the run mid-generation: everything the run reports and stores."""
    from furnace.evolution.config import parse_config
    from furnace.evolution.local import memory_evolution

    config = parse_config(
        {
            "name": "budget-stop",
            "seed": 5,
            "population": 6,
            "generations": 8,
            "concurrency": concurrency,
            "seeds": {"language": "en"},
            "probes": {"set": "writing-en", "limit": 6},
            "samples_per_probe": 1,
            "reevaluate_top": 2,
            "operators": {"crossover": 1, "mutation": 1, "reflect": 2},
            "budget": {"max_calls": max_calls},
        }
    )
    results = MemoryResults()
    evo = memory_evolution(config, [e for e in library() if e.language == "en"], results=results)
    if runner is not None:
        evo.unit_runner = runner
    report = evo.run()
    # the experiment id names the config, concurrency included: everything else must be the same
    stored = sorted(results.individuals(evo.experiment_id), key=lambda r: (r.generation, r.slot))
    return (
        report.status,
        report.totals,
        report.result_signature(),
        report.held_out,
        [replace(r, experiment_id="") for r in stored],
        [replace(g, experiment_id="") for g in results.generations(evo.experiment_id)],
        evo.unit_bound(Plan(0, "seed", elixir=evo.seeds[0])),  # one evaluation on validation, at most
    )


def test_a_run_the_budget_stops_is_identical_at_any_concurrency_and_with_any_runner():
    """The budget is reserved unit by unit in plan order and each unit is credited, in plan order, with the
    calls it was the first to ask for: where the run stops, what it stored (every individual's calls
    included) and what it reports never depend on thread timing."""
    shapes = ["concurrency 1", "concurrency 8", "concurrency 8", "concurrency 1", "concurrency 8", "shuffled runner"]
    outcomes = [_stopped_by_the_budget(c) for c in (1, 8, 8, 1, 8)]
    outcomes.append(_stopped_by_the_budget(8, ShuffledRunner(3)))
    first = outcomes[0]
    status, totals, _, held_out, stored, generations, evaluation = first
    fields = ("status", "totals", "signature", "held_out", "stored", "generations", "unit bound")
    differ = [
        (shape, name)
        for shape, o in zip(shapes, outcomes, strict=True)
        for name, a, b in zip(fields, first, o, strict=True)
        if a != b
    ]
    assert not differ, differ  # which run and which part, should timing ever show through
    assert status.startswith("stopped: budget.max_calls 148 reached (the next unit may make")
    assert 0 < totals["calls"] <= 148
    assert totals["cached_calls"] > 0  # units asked what others asked: who paid depended on timing
    for g in generations:  # a generation's figures are its individuals' credited calls
        assert g.calls == sum(r.calls for r in stored if r.generation == g.generation)
    # every call credited to one individual, but the held-out re-evaluation of the top (here what the search
    # left covered that step, and not the next: the test probes)
    reevaluated = len(held_out.get("reevaluation", {}).get("top", {}))
    assert "stopped" in held_out
    assert totals["calls"] - sum(r.calls for r in stored) == reevaluated * evaluation
    done = {g.generation for g in generations}
    assert max(r.generation for r in stored) not in done  # stopped mid-generation: some of its children ran
    assert len(done) >= 3  # ... after whole generations
    assert any(r.operator == "reflect" for r in stored)
    other = _stopped_by_the_budget(8, max_calls=190)
    assert other[4] != stored  # the stop follows the budget


def test_reservations_settle_early_never_below_what_each_unit_is_credited(monkeypatch):
    """A unit's reservation shrinks before it is taken in (once its child is made, once it finishes, by
    what it asked and what the call book says it can be credited with): never below the calls it is
    credited with in the end, and the run is the one it is when nothing settles early."""
    from furnace.evolution.scheduler import Schedule

    lowered: list[tuple[tuple[int, int], int]] = []
    settle = Schedule.settle

    def watched(self, order, calls, more=0):
        before = self.reserved.get(order)
        settle(self, order, calls, more)
        if before and self.reserved[order] < before:
            lowered.append((self.where(order), self.reserved[order]))

    monkeypatch.setattr(Schedule, "settle", watched)
    outcome = _stopped_by_the_budget(8)
    assert lowered  # fusions that asked less than their bound, units whose requests others asked first
    credited = {(r.generation, r.slot): r.calls for r in outcome[4]}
    assert all(reserved >= credited[where] for where, reserved in lowered if where in credited)
    monkeypatch.setattr(Schedule, "settle", lambda self, order, calls, more=0: None)
    assert _stopped_by_the_budget(8) == outcome


def _queue(slots: PrioritySlots, priorities: tuple[int, ...], served: list[int]) -> list[threading.Thread]:
    """One thread per priority, each queued on ``slots`` (in this order) before the next starts."""
    threads: list[threading.Thread] = []
    for priority in priorities:

        def wait(p: int = priority) -> None:
            with slots.held(p):
                served.append(p)

        t = threading.Thread(target=wait, daemon=True)  # a failing test never hangs the session
        t.start()
        while len(slots._waiters) < len(threads) + 1:  # the waiter is queued
            threading.Event().wait(0.001)
        threads.append(t)
    return threads


def test_slots_served_by_arrival_or_in_reverse_then_by_priority_again():
    slots = PrioritySlots(1)
    served: list[int] = []
    with slots.held():  # the only slot is busy: the calls below wait for it
        threads = _queue(slots, (5, 1), served)
        slots.serve("arrival")  # the waiters already queued are served as they came too
        threads += _queue(slots, (0, 3), served)
    for t in threads:
        t.join(5)
    assert served == [5, 1, 0, 3]

    served.clear()
    with slots.held():
        threads = _queue(slots, (5, 1, 3), served)
        slots.serve("reverse")
        threads += _queue(slots, (4,), served)
    for t in threads:
        t.join(5)
    assert served == [5, 4, 3, 1]

    served.clear()
    with slots.held():
        slots.serve("priority")
        threads = _queue(slots, (5, 1, 3), served)
    for t in threads:
        t.join(5)
    assert served == [1, 3, 5]
    with pytest.raises(ValueError, match="unknown order"):
        slots.serve("random")


def test_slots_are_served_by_arrival_in_generation_0_by_age_then_youngest_first_once_all_is_planned():
    evo = make(concurrency=2)
    switched: list[tuple[str, int, int]] = []  # (order, generation-0 records made, children planned)
    serve = evo.metered.serve
    children = evo.config.children_per_generation * evo.config.generations
    planned = {"n": 0}
    plan_child = evo._plan_child

    def counted(*args, **kwargs):
        planned["n"] += 1
        return plan_child(*args, **kwargs)

    def record(order: str) -> None:
        switched.append((order, len(evo._stored.individuals(evo.experiment_id, 0)), planned["n"]))
        serve(order)

    evo.metered.serve = record  # type: ignore[method-assign]
    evo._plan_child = counted  # type: ignore[method-assign]
    report = evo.run()
    assert report.status == "finished"
    seeds = len(evo.seeds)
    assert switched == [("arrival", 0, 0), ("priority", seeds, 0), ("reverse", seeds, children)]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_budget_stop_keeps_every_finished_individual(concurrency):
    results = MemoryResults()
    evo = make(results, concurrency=concurrency, budget={"max_calls": 30}, samples_per_probe=1)
    report = evo.run()
    assert report.status.startswith("stopped") and report.totals["calls"] <= 30
    recorded = results.individuals(evo.experiment_id)
    assert len(recorded) == len({(r.generation, r.slot) for r in recorded})
    assert report.leaderboard


class InFlight:
    """The seam's model counting the calls in flight (its peak) and whether two JUDGE calls about the same
    answer were ever in flight together; each call yields its thread for a moment so calls can overlap."""

    def __init__(self, inner) -> None:
        self.inner, self.model_name = inner, inner.model_name
        self.lock = threading.Lock()
        self.now = self.peak = 0
        self.judging: dict[str, int] = {}  # (persona, message, answer, sample seed) -> its judge calls in flight
        self.judges_overlapped = False

    def complete(self, request):
        inputs = request.inputs or {}
        same = [inputs.get(k) for k in ("subject", "message", "answer")] + [request.seed]  # one sample's answer
        answer = repr(same) if request.task == TaskKind.JUDGE else None
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            if answer is not None:
                self.judging[answer] = self.judging.get(answer, 0) + 1
                self.judges_overlapped |= self.judging[answer] > 1
        try:
            time.sleep(0.002)
            return self.inner.complete(request)
        finally:
            with self.lock:
                self.now -= 1
                if answer is not None:
                    self.judging[answer] -= 1


JUDGED = {"constraints": 0.2, "fidelity": 0.3, "tone": 0.3, "brief_fit": 0.2}


@pytest.mark.parametrize("concurrency", [1, 2, 5])
def test_calls_in_flight_never_exceed_the_concurrency(concurrency: int) -> None:
    """A probe's judge calls are made at once, through the same slots as every call: the seam never sees
    more than ``concurrency`` calls at a time (with more than one slot, two judge calls about one answer
    do run together)."""
    llm = InFlight(scripted_llm())
    evo = make(llm=llm, concurrency=concurrency, scorers=JUDGED, generations=2)
    assert evo.run().status == "finished"
    assert 1 <= llm.peak <= concurrency
    if concurrency > 1:
        assert llm.judges_overlapped


def test_judge_calls_at_once_give_the_rows_and_calls_of_one_after_another() -> None:
    """Same seed, judge calls at once (concurrency 8) or one after another (1): the same report, records,
    rows and model calls, whatever order the judges answered in."""
    outcomes = []
    for concurrency in (1, 8):
        results, llm = MemoryResults(), scripted_llm()
        evo = make(results, llm=llm, concurrency=concurrency, scorers=JUDGED, generations=2)
        report = evo.run()
        keys = sorted(r.cache_key(llm.model_name) for r in llm.calls)  # every request made, as the cache keys it
        outcomes.append((_outcome(evo, report, results), report.totals["calls"], keys))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] > 0


def test_a_probes_judge_calls_run_together_on_the_pool_and_on_the_caller_when_it_is_busy() -> None:
    """``evaluate_agent`` with a pool: every judge call of a probe is in flight at once (the fake waits for
    all of them), rows as one after another gives; a pool whose threads are all busy runs them on the
    caller instead (never a deadlock), with the same rows."""
    from furnace.evolution.evaluate import evaluate_agent

    elixir = library()[0]
    probes = load_probe_set("writing-en").head(2)
    scorers = {"fidelity": 0.5, "tone": 0.3, "preference": 0.2}
    together = threading.Barrier(3, timeout=30)  # a probe's three judge calls
    plain = scripted_llm()

    class WaitsForItsSiblings:
        model_name = "scripted"

        def complete(self, request):
            if request.task == TaskKind.JUDGE:
                together.wait()  # broken (an error) unless all three are in flight
            return plain.complete(request)

    def evaluate(llm, pool):
        return evaluate_agent(llm, elixir, render_prompt(elixir), probes, scorers, seed=3, pool=pool)

    expected = evaluate(plain, None)
    with ThreadPoolExecutor(4) as pool:
        assert evaluate(WaitsForItsSiblings(), pool) == expected
    gate = threading.Event()
    with ThreadPoolExecutor(1) as busy:
        busy.submit(gate.wait)
        try:
            assert evaluate(plain, busy) == expected
        finally:
            gate.set()


def test_a_failing_judge_call_drops_the_ones_not_started_and_never_waits_for_them() -> None:
    """The budget stop inside a probe's judge calls while every pool thread is busy: the error goes on at
    once (the calls the pool never started are dropped, not waited for), and nothing dropped ever runs."""
    from furnace.domain.errors import BudgetExceeded
    from furnace.evolution.evaluate import _fan_out

    ran: list[int] = []

    def call(n: int) -> int:
        ran.append(n)
        if n == 0:
            raise BudgetExceeded("budget.max_calls 1 reached")
        return n

    gate, raised = threading.Event(), []
    with ThreadPoolExecutor(1) as busy:
        busy.submit(gate.wait)

        def fan() -> None:
            try:
                _fan_out(busy, call, [0, 1, 2])
            except BudgetExceeded as err:
                raised.append(err)

        caller = threading.Thread(target=fan, daemon=True)
        caller.start()
        caller.join(30)  # a guard against a hang, not a timing check
        gate.set()
    assert raised and ran == [0]


def test_a_runs_units_read_the_synthesis_cache_as_it_was_before_the_run():
    """A sub-result one unit stored is not read by another unit of the same run (it asks the model, and the
    response cache answers): which requests a unit makes never depends on which unit ran first."""
    from furnace.evolution.breeding import RunKV
    from furnace.fusion.synthesis import MemoryKV

    kv = MemoryKV()
    kv.put_if_absent("identity:before", {"result": "stored by an earlier run"})
    run = RunKV(kv)
    assert run.get("identity:before") == {"result": "stored by an earlier run"}
    run.put_if_absent("identity:a", {"result": "a"})
    run.put_many_if_absent([("identity:b", {"result": "b"}, None)])
    assert run.get("identity:a") is None and run.get("identity:b") is None  # hidden from this run's units
    assert kv.get("identity:a") == {"result": "a"} and kv.get("identity:b") == {"result": "b"}  # a later run reads them
