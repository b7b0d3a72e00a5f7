"""The run's scheduler: plans children in order, runs each as a unit as soon as its plan is known, takes
finished children in strictly in plan order, and reserves the budget unit by unit (see
:mod:`furnace.evolution.engine` for the loop it drives)."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from furnace.evolution.human import (
    Ask,
    asked_pairs,
    human_ratings,
    pairs_waiting,
    population_records,
    wait_for_picks,
    weighs_human,
    with_human,
)
from furnace.evolution.plans import Plan, made_by
from furnace.evolution.records import GenerationRecord, IndividualRecord
from furnace.evolution.reflection import BreedingMemory
from furnace.evolution.report import budget_stop
from furnace.evolution.selection import rank_key, survivors
from furnace.evolution.units import Finished, Settled, Unit, UnitRunner
from furnace.llm.cache import CallTotals

if TYPE_CHECKING:
    from furnace.evolution.engine import Evolution


class Schedule:
    """The loop without a generation barrier (see the module docstring): plans in order, runs
    units as their plans are known, takes finished children in strictly in plan order.

    The budget (``max_calls``) is reserved unit by unit, in plan order: a unit starts only when the
    calls credited to the units taken in so far, plus what the units under way reserved, plus its own
    bound (:meth:`Evolution.unit_bound`) fit in the budget; otherwise it waits and is tried again each
    time a reservation shrinks (:meth:`settle`: a unit under way tells what it can still ask once its
    child is made, a finished unit what it asked; a unit taken in is credited), and when nothing is under
    way and it still does not fit, the run stops there. When a unit starts so depends on thread timing,
    whether it runs does not: a reservation is never below what its unit will be credited with, and the
    stop is decided from credited figures (:class:`~furnace.evolution.metering.CallBook`), which do not
    depend on timing. The calls billed never pass the budget (each unit under way makes at most what it
    reserved)."""

    def __init__(self, evo: Evolution, rng: random.Random, runner: UnitRunner) -> None:
        self.evo, self.rng, self.runner = evo, rng, runner
        cfg = evo.config
        self.per_generation = cfg.children_per_generation
        self.total = cfg.generations * self.per_generation  # children of generations 1..G
        self.window = max(1, self.per_generation)
        self.population: list[IndividualRecord] = []
        self.founders: list[IndividualRecord] = []  # the scored seeds (generation 0): crossover partners
        self.memory = BreedingMemory()  # founders and mutation moves tried: each once before any again
        self.history: list[GenerationRecord] = []
        self.finished = Finished()
        # child index -> its plan, the weights it saw and the population it was drawn from (its unit's peers)
        self.plans: dict[int, tuple[Plan, dict[str, float], tuple[IndividualRecord, ...]]] = {}
        self.over: dict[int, str] = {}  # child index -> the token or dollar limit reached when it was planned
        self.done: dict[int, IndividualRecord] = {}  # child index -> record, not yet taken in
        self.planned = self.taken = 0
        self.stop: str | None = None
        self.error: BaseException | None = None
        self.seen: set[str] = set()  # agent ids taken in during the current generation
        self.replacing: set[int] = set()  # orders of units whose slot holds a stale or unscored record
        self.replayed: dict[int, IndividualRecord] = {}  # order -> stored record of a finished unit replayed
        self.generation_weights: dict[int, dict[str, float]] = {}  # what the generation's first plan saw
        # the budget, reserved in plan order: child indexes planned but not started, the bounds of the
        # units started and not yet credited (by order), the credited figures so far
        self.waiting: deque[int] = deque()
        self.reserved: dict[int, int] = {}
        self.bounds: dict[tuple[int, int], int] = {}  # (generation, slot) -> its unit's bound, once computed
        self.charged = CallTotals()
        self.ran: set[int] = set()  # orders of the units run here (credited once finished)
        self.kept: dict[int, IndividualRecord] = {}  # order -> record of a unit run here, credited and saved
        self.finished_records: dict[int, tuple[Unit, IndividualRecord]] = {}  # order -> finished, not yet kept
        # the ``human`` objective: a generation is planned once people were asked about the one before it
        self.human = weighs_human(cfg.scorers)
        self.ratings: dict[str, float] = {}  # agent -> its human objective (people's Bradley–Terry rating)
        self.asks: list[Ask] = []

    def generation_of(self, n: int) -> tuple[int, int]:
        """Child index -> (generation, slot)."""
        return 1 + n // self.per_generation, n % self.per_generation

    # --- the budget ---------------------------------------------------------

    def refused(self, bound: int) -> str | None:
        """Why a unit that may make ``bound`` model calls cannot start now (None: it can): the calls
        credited so far, the reservations under way and ``bound`` pass ``max_calls``."""
        b, spent = self.evo.config.budget, self.charged
        if b.max_calls is not None and spent.model_calls + sum(self.reserved.values()) + bound > b.max_calls:
            left = b.max_calls - spent.model_calls - sum(self.reserved.values())
            return f"budget.max_calls {b.max_calls} reached (the next unit may make {bound} model calls, {left} left)"
        return None

    def spent_out(self) -> str | None:
        """The token or dollar limit the figures credited so far reached, else None."""
        b, spent = self.evo.config.budget, self.charged
        if b.max_tokens is not None and spent.total_tokens >= b.max_tokens:
            return f"budget.max_tokens {b.max_tokens} reached"
        if b.max_usd is not None and b.max_usd > 0 and spent.cost_usd >= b.max_usd:
            return f"budget.max_usd {b.max_usd} reached"
        return None

    def bound(self, generation: int, plan: Plan) -> int:
        """What the unit of ``plan`` reserves: its bound, or nothing when a previous run recorded it."""
        old = self.evo._recorded.get(generation, {}).get(plan.slot)
        if old is not None and (old.scored or self.evo.keep_failures) and made_by(old, plan):
            return 0
        where = (generation, plan.slot)
        if where not in self.bounds:
            self.bounds[where] = self.evo.unit_bound(plan)
        return self.bounds[where]

    def admit(self) -> None:
        """Start the planned children in plan order while their reservations fit; the first that does not
        waits for the next child taken in, or, with nothing under way, ends the run here."""
        seeds = len(self.evo.seeds)
        while self.waiting and self.stop is None and self.error is None:
            n = self.waiting[0]
            plan, _, population = self.plans[n]
            generation, _ = self.generation_of(n)
            bound = self.bound(generation, plan)
            why = self.over.get(n) or self.refused(bound)
            if why is not None:
                if not self.reserved:  # nothing under way: nothing will be freed
                    self.end(why, n)
                return
            self.waiting.popleft()
            self.reserved[seeds + n] = bound
            record = self.start(seeds + n, generation, plan, population)
            if record is not None:
                self.done[n] = record

    def end(self, why: str, n: int) -> None:
        """Stop at child ``n`` (the first not started): drop it and every plan after it."""
        self.stop = why
        self.waiting.clear()
        for k in [k for k in self.plans if k >= n]:
            del self.plans[k]
            self.over.pop(k, None)
        self.planned = n

    def keep(self, order: int, generation: int, slot: int, record: IndividualRecord) -> IndividualRecord:
        """Credit the finished unit ``order`` (plan order: every unit before it is kept already), settle its
        reservation, put its credited figures on its record and queue the record's write."""
        evo = self.evo
        self.reserved.pop(order, None)
        self.finished_records.pop(order, None)
        if order in self.replayed:  # already stored: the run goes on with the stored record, writes nothing
            return self.replayed[order]
        if order not in self.ran:  # recorded by a previous run: read back, nothing spent here
            return record
        self.ran.discard(order)
        spent = evo.credit_unit(generation, slot)
        self.charged = self.charged.plus(spent)
        if record.experiment_id == evo.experiment_id and record.slot == slot:
            if evo.metered.book is not None:  # the credited figures (a model without a book: its own calls)
                record = replace(
                    record, calls=spent.model_calls, tokens=spent.total_tokens, cost_usd=round(spent.cost_usd, 9)
                )
            evo._save(record, replace=order in self.replacing)
        return record

    # --- units ------------------------------------------------------------

    def start(
        self, order: int, generation: int, plan: Plan, population: tuple[IndividualRecord, ...] = ()
    ) -> IndividualRecord | None:
        """Submit ``plan``'s unit (scored against ``population``, the one it was drawn from), or return its
        record when a previous run finished it."""
        evo = self.evo
        recorded = evo._recorded.get(generation, {})
        old = recorded.get(plan.slot)
        if old is not None and (old.scored or evo.keep_failures) and made_by(old, plan):
            if not getattr(self.runner, "replays_finished", False):
                return old
            # a runner with a result cache of its own (Prefect) is shown the finished unit too: it serves it
            # from that cache (a rerun reads as cached there), else the unit returns the stored record as is
            known = {r.agent_id: r for r in recorded.values() if r.scored or evo.keep_failures}
            unit = replace(evo.unit(order, generation, plan, population, known), run=lambda: old)
            self.replayed[order] = old
            self.finished.watch(unit, self.runner.submit(unit))
            return None
        if old is not None:  # unscored (retried) or made by another plan (an earlier slot was rescored)
            self.replacing.add(order)
        known = {r.agent_id: r for r in recorded.values() if r.scored or evo.keep_failures}
        unit = self.evo.unit(order, generation, plan, population, known, retry=old is not None)
        self.ran.add(order)
        self.finished.watch(unit, self.runner.submit(unit))
        return None

    def wait_one(self) -> tuple[Unit, IndividualRecord | None] | None:
        """The next unit to finish and its record (kept later, in plan order); an error stops planning
        (returned as None). None instead when a unit under way told of fewer calls (:meth:`settle`)."""
        got = self.finished.get()
        if isinstance(got, Settled):
            self.settle(got.order, got.calls, got.more)
            return None
        unit, fut = got
        try:
            record = fut.result()
        except BaseException as err:
            if self.error is None:
                self.error = err
            self.ran.discard(unit.order)
            return unit, None
        self.finished_records[unit.order] = (unit, record)
        generation = unit.args[0] if unit.args else 0
        self.settle(unit.order, self.evo.unit_meter(generation, unit.slot).calls)
        return unit, record

    def settle(self, order: int, calls: int, more: int = 0) -> None:
        """Lower the reservation of unit ``order`` to ``calls``: the calls it asked, once finished (answered,
        cache hits included, and failed), or what it asked so far plus the most it can still ask (``more``: a
        unit under way, told through ``Evolution.settled``); lower still to what its book says it can be
        credited with for what it asked (:meth:`Evolution.credit_bound`: a request a unit before it asked is
        not its to pay) plus ``more``. That is never less than it will be credited with once taken in, so the
        units waiting for the budget may start before it is taken in, and where the run stops (decided when
        nothing is under way, from credited figures: :meth:`admit`) does not move. Whatever the unit pays that
        is credited to a unit before it stays covered by that unit's reservation (or credit). Without
        ``max_calls`` nothing waits for the budget: nothing to do."""
        if self.evo.config.budget.max_calls is None or not self.reserved.get(order):
            return
        where = self.where(order)
        bound = self.evo.credit_bound(where, [self.where(o) for o in self.reserved if o < order])
        if bound is not None:
            calls = min(calls, bound + more)
        self.reserved[order] = min(self.reserved[order], calls)

    def where(self, order: int) -> tuple[int, int]:
        """(generation, slot) of the unit at ``order`` (seeds first, then children in plan order)."""
        seeds = len(self.evo.seeds)
        return (0, order) if order < seeds else self.generation_of(order - seeds)

    def drain(self) -> None:
        """Wait for the units still running, keep (write) every finished record, then raise the first error."""
        while self.finished.pending:
            self.wait_one()
        for order in sorted(self.finished_records):
            unit, record = self.finished_records.pop(order)
            generation = unit.args[0] if unit.args else 0
            self.keep(order, generation, unit.slot, record)
        if self.error is not None:
            raise self.error

    # --- the loop ---------------------------------------------------------

    def run(self) -> None:
        self.evo.settled = self.finished.settled  # units under way tell of fewer calls than they reserved
        try:
            self._run()
        finally:
            self.evo.settled = None

    def _run(self) -> None:
        metered = self.evo.metered
        metered.serve("arrival")  # generation 0: every plan waits for all of it
        if self.seed_generation():
            metered.serve("priority")  # the oldest units first: the next plans wait on them
            for n in range(min(self.window, self.total)):
                self.plan(n)
            while self.taken < self.planned:
                if self.error is not None:
                    self.drain()
                while self.taken in self.done:
                    self.take(self.done.pop(self.taken))
                if self.taken == self.planned:
                    break
                got = self.wait_one()
                if got is not None and got[1] is not None:
                    self.done[got[0].order - len(self.evo.seeds)] = got[1]
                self.admit()  # a reservation settled: what waits for the budget may fit now
        if self.stop is not None:  # every unit started has been taken in: the meter is final
            self.evo.status = budget_stop(self.stop, self.evo.metered.meter.as_dict())

    def seed_generation(self) -> bool:
        """Generation 0 (the library seeds): every later plan needs all of it. Seeds start in order while
        their reservations fit; when one does not, it waits for those under way to be credited, and when
        none is under way the run ends there."""
        evo = self.evo
        weights = evo.board.weights()
        plans = [Plan(i, "seed", elixir=e) for i, e in enumerate(evo.seeds)]
        records: dict[int, IndividualRecord] = {}
        queued = deque(plans)
        first = True
        while queued and self.stop is None:
            why = None
            while queued:
                bound = self.bound(0, queued[0])
                why = self.refused(bound) or self.spent_out()
                if why is not None:
                    break
                plan = queued.popleft()
                self.reserved[plan.slot] = bound
                record = self.start(plan.slot, 0, plan, tuple(self.population))
                if record is not None:
                    records[plan.slot] = record
            if why is not None and not self.reserved:
                self.stop = why
            if first:
                first = False
                self.progress(0, len(records), len(plans), records.values())
                prefetch = getattr(evo._breed, "prefetch", None)  # the first parents, read while the seeds are scored
                if callable(prefetch):
                    prefetch([e.ref for e in evo.seeds])
            while self.finished.pending:
                got = self.wait_one()
                if got is not None and got[1] is not None:
                    records[got[0].slot] = got[1]
                    self.progress(0, len(records), len(plans), records.values())
            if self.error is not None:
                self.drain()
            for slot in sorted(o for o in self.reserved if o in records):  # credited and written in plan order
                records[slot] = self.keep(slot, 0, slot, records[slot])
        if self.stop is not None:  # the budget does not cover generation 0
            return False
        scored = [records[p.slot] for p in plans if records[p.slot].scored]  # only these take part in selection
        if not scored:
            evo.status = f"stopped: no individual could be scored ({len(plans)} unscored; rerun to retry)"
            return False
        self.population = survivors([], scored, evo.config.population, 0)
        self.founders = sorted(scored, key=lambda r: r.agent_id)
        self.finish(0, weights)
        return True

    def plan(self, n: int) -> None:
        """Plan child ``n`` from the current population (the one after children ``0 .. n - window``), and
        start it when its reservation fits (:meth:`admit`)."""
        if self.stop is not None or self.error is not None:
            return
        generation, slot = self.generation_of(n)
        weights = self.evo.board.weights()
        plan = self.evo._plan_child(slot, self.population, self.rng, weights, self.founders, self.memory)
        self.plans[n] = (plan, weights, tuple(self.population))
        over = self.spent_out()  # checked here, at a fixed point of the plan order (when it starts depends on timing)
        if over is not None:
            self.over[n] = over
        self.generation_weights.setdefault(generation, weights)
        self.planned = n + 1
        if self.planned == self.total:  # the run ends when every unit has: the longest chains left first
            self.evo.metered.serve("reverse")
        self.waiting.append(n)
        self.admit()

    def take(self, child: IndividualRecord) -> None:
        """Take child ``self.taken`` into the population (credited and written first), close its generation
        when it is the last, then plan the child whose window this opens and start what now fits."""
        evo, cfg = self.evo, self.evo.config
        n = self.taken
        generation, slot = self.generation_of(n)
        child = self.keep(len(evo.seeds) + n, generation, slot, child)
        plan, _, _ = self.plans.pop(n)
        self.over.pop(n, None)
        if slot == 0:
            self.seen = set()
        child = with_human(child, self.ratings, cfg.scorers)
        if child.agent_id not in self.seen:
            self.seen.add(child.agent_id)
            parent_best = max((p.fitness for p in plan.parents), default=0.0)
            if child.scored or not child.scores:  # an unscored judgement says nothing about the operator
                evo.board.record(child.operator, child.fitness, parent_best, failed=not child.scores)
            self.memory.took(child, plan.parents)
        # an unscored child (failed fusion, answer or judgement) never displaces a member, nor does a
        # reflected child that did not beat its parent on its minibatch
        if child.has_score:
            self.population = survivors(self.population, [child], cfg.population, cfg.selection.elitism)
        self.taken += 1
        self.progress(generation, slot + 1, self.per_generation)
        if slot == self.per_generation - 1:
            self.finish(generation, self.generation_weights.pop(generation))
        if self.human:  # generational: the next generation is planned after people were asked
            if slot == self.per_generation - 1:
                for k in range(self.taken, min(self.taken + self.window, self.total)):
                    self.plan(k)
        elif self.taken + self.window - 1 < self.total:
            self.plan(self.taken + self.window - 1)
        self.admit()

    def finish(self, generation: int, weights: dict[str, float]) -> None:
        """Record generation ``generation``: its population now, and the calls spent on it: what earlier
        runs spent plus the units run here. What earlier runs spent is the call ledger's (its rows name
        their unit), so the calls a killed run paid for units it never finished count too; without a
        ledger (or rows written before units were named), their generation record, or the records of its
        individuals when a run was killed before finishing it. A rerun that runs nothing leaves the
        figures as they were."""
        evo = self.evo
        here = evo.take_generation_meters(generation)
        spent = evo._ledger_before.get(generation)
        if spent is None or (not here and generation in evo._spent_before):
            spent = evo._spent_before.get(generation)
        if spent is None:
            spent = CallTotals()
            for r in evo._recorded.get(generation, {}).values():
                spent = spent.plus(individual_totals(r))
        for meter in here:
            spent = spent.plus(meter)
        self.history.append(evo._finish_generation(generation, self.population, weights, spent))
        if self.human and generation < evo.config.generations:
            self.ask_people(generation)

    def human_summary(self) -> dict[str, Any] | None:
        """The report's ``human`` part (None when the objective is not weighted): the ratings from every
        pick made so far (after the run's last ask too), the picks counted and each ask."""
        evo = self.evo
        if not self.human:
            return None
        picks = evo.picks.picks(evo.experiment_id) if evo.picks is not None else []
        return {
            "weight": evo.config.scorers["human"],
            "picks": len(picks),
            "ratings": human_ratings(picks),
            "asks": [ask.as_dict() for ask in self.asks],
        }

    def ask_people(self, generation: int) -> None:
        """Ask people about blind pairs of the population (``furnace.evolution.human``), wait for their picks
        up to ``human_wait_s`` (the records on disk first, so the app shows the pairs), then rate the picked
        agents and rank the population with their ``human`` objective."""
        evo, cfg = self.evo, self.evo.config
        members = population_records(
            evo._stored.individuals(evo.experiment_id), [r.agent_id for r in self.population], generation
        )
        probes = [p.id for p in evo.search_probes.probes]
        asked = asked_pairs(members, probes, count=cfg.human_pairs, seed=cfg.seed, generation=generation)
        picks = []
        if evo.picks is not None:
            store = evo.picks
            picks = store.picks(evo.experiment_id)
            waiting = pairs_waiting(asked, picks)
            if waiting:
                wait = cfg.human_wait_s
                if wait > 0:
                    evo._writer.flush()  # the app shows the pairs from the stored records
                evo._emit(
                    generation=generation,
                    generations=cfg.generations,
                    done=0,
                    total=0,
                    best=self.population[0].fitness if self.population else 0.0,
                    message=f"{len(waiting)} pairs waiting for people's picks in {evo.experiment_id} "
                    + (f"(up to {wait:g} s)" if wait > 0 else "(human_wait_s 0: going on with the picks made so far)")
                    + f": the app's Judge page, or furnace pick {evo.experiment_id}",
                )
                picks = wait_for_picks(
                    lambda: store.picks(evo.experiment_id),
                    asked,
                    timeout_s=cfg.human_wait_s,
                    clock=evo.clock,
                    sleep=evo.sleep,
                )
        self.asks.append(Ask(generation, tuple(asked), tuple(pairs_waiting(asked, picks))))
        self.ratings = human_ratings(picks)
        self.population = sorted((with_human(r, self.ratings, cfg.scorers) for r in self.population), key=rank_key)

    def progress(self, generation: int, done: int, total: int, seeds: Iterable[IndividualRecord] | None = None) -> None:
        """Report progress; the best fitness is the population's, or (``seeds``: generation 0 under way)
        the best scored seed so far."""
        if self.evo.progress is None:  # nobody listens: no scan of the population per child
            return
        if seeds is None:  # the population is ranked (survivors): its fittest member is the first
            best = self.population[0].fitness if self.population else 0.0
        else:
            best = max((r.fitness for r in seeds if r.scored), default=0.0)
        self.evo._emit(
            generation=generation, generations=self.evo.config.generations, done=done, total=total, best=best
        )


def individual_totals(r: IndividualRecord) -> CallTotals:
    """A stored individual's figures as totals (its calls were counted when it was made)."""
    return CallTotals(calls=r.calls, completion_tokens=r.tokens, cost_usd=r.cost_usd)
