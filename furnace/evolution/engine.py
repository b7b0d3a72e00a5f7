"""The evolution loop: select, breed, evaluate concurrently, keep survivors, repeat.

No generation barrier: generation 0 (the seeds) is evaluated, then children are planned
one by one and each is submitted as soon as its plan is known. Child ``n`` is planned from
the population after children ``0 .. n - W`` have been taken in (``W`` = the children of
one generation, a fixed window that does not depend on the concurrency), and children are
taken in strictly in plan order (steady state: each replaces the weakest non-elite member).
So the next generation's model calls start while the previous one finishes, the metered
model serves the oldest units first (they are closest to finishing and the next plans wait
on them), and a run is identical for the same seed at any concurrency and with any runner.
A generation ``g`` is complete when its last child is taken in; its record is the
population at that point.

Reproducible and resumable by construction:

- one ``random.Random(config.seed)`` drives every choice, and only the main
  thread draws from it, in a fixed order (plan order);
- a run always replays from generation 0: a slot whose individual is already
  recorded (for the same plan) is read back (no fusion, no model call), so an
  interrupted run continues where it stopped and ends exactly where an
  uninterrupted run ends;
- an individual whose scoring failed (fusion, an answer or a judgement: provider
  noise) is *unscored*: kept out of selection and means, and evaluated again by
  the next run (its successful calls come from the response cache), which then
  replaces its record; ``keep_failures`` keeps such records instead;
- records are written from the main thread, one transaction per individual,
  idempotent by natural keys;
- ``budget.max_calls`` is reserved unit by unit in plan order (each unit's bound:
  :meth:`Evolution.unit_bound`), and each unit is credited, in plan order, with the calls it was
  the first to ask for (:class:`~furnace.evolution.metering.CallBook`): a run the budget stops
  stops at the same unit, with the same figures, at any concurrency (:class:`~furnace.evolution.scheduler.Schedule`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from furnace.domain.canonical import content_key
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import BudgetExceeded, FurnaceError
from furnace.domain.guarded import Guarded, serialized
from furnace.domain.render import render_prompt
from furnace.domain.threads import Executor, parallel_map, pool
from furnace.evolution.assessments import held_out_assessments, individual_assessments
from furnace.evolution.config import ExperimentConfig
from furnace.evolution.estimate import fusion_calls
from furnace.evolution.evaluate import (
    Evaluation,
    combine,
    evaluate_agent,
    failed_evaluation,
    judge_calls,
    reply,
    sample_seed,
    test_figures,
)
from furnace.evolution.judging import fitness_by_judge, judge_fitness, panel_agreement
from furnace.evolution.metering import MeteredLLM, Tally, completion_totals, error_totals
from furnace.evolution.plans import Plan, plan_key
from furnace.evolution.records import (
    MINIBATCH,
    ExperimentRecord,
    ExperimentResults,
    GenerationRecord,
    IndividualRecord,
    MemoryResults,
    ScoreRow,
)
from furnace.evolution.reflection import (
    SINGLE_PARENT,
    BreedingMemory,
    founder_partner,
    minibatch_score,
    operator_params,
    parent_picker,
    trace_brief,
)
from furnace.evolution.report import ExperimentReport, budget_stop, build_report
from furnace.evolution.scheduler import Schedule
from furnace.evolution.selection import OperatorBoard, choose_operator, rank_key
from furnace.evolution.tracker import Assessment, NullTracker, Span, Tracker, log_held_out, start_trace
from furnace.evolution.units import ThreadUnitRunner, Unit, UnitRunner
from furnace.evolution.writer import Deferred, NewAgent, RecordWriter, Replacement
from furnace.llm.cache import CallRecord, CallTotals, sum_calls
from furnace.llm.routing import TaskRouter
from furnace.llm.seam import LLM, Completion, LLMRequest, TaskKind
from furnace.scoring.base import Score, persona_inputs
from furnace.scoring.diversity import Embeddings
from furnace.scoring.fitness import SCORERS
from furnace.scoring.panel import Panel, split_scorer
from furnace.scoring.picks import PickStore
from furnace.scoring.probes import ProbeSet
from furnace.storage.store import snapshot_soon

LEADERBOARD = 10  # members the report ranks (each scored on test)
HELD_OUT = "held-out"  # the unit (ledger) and trace of the evaluation after the search


def trace_name(generation: int, slot: int) -> str:
    """The name of the trace of the individual evaluated at (``generation``, ``slot``)."""
    return f"individual g{generation} s{slot}"


@dataclass(frozen=True)
class Bred:
    """What a breeder returns: the child agent's id, elixir, prompt and lineage hash."""

    agent_id: str
    elixir: Elixir
    system_prompt: str
    lineage_hash: str


class Breeder(Protocol):
    """Makes one child from parent refs (usually :func:`furnace.evolution.breeding.fusion_breeder`)."""

    def __call__(
        self, parents: Sequence[ElixirRef], operator: str, seed: int, params: dict[str, Any], llm: LLM
    ) -> Bred: ...


class Peer(Protocol):
    """What a unit reads of the population it is scored against: each member's id and prompt (its
    diversity). An :class:`IndividualRecord` is one; a unit shipped to another process gets just these."""

    @property
    def agent_id(self) -> str: ...

    @property
    def system_prompt(self) -> str: ...


@dataclass(frozen=True)
class Progress:
    """A progress event for the CLI's bar."""

    generation: int
    generations: int
    done: int
    total: int
    best: float
    message: str = ""


class _CountingLLM(Guarded):
    """Counts one unit's calls and tokens (per-individual accounting), names the unit on each request
    (``unit``: the call ledger keeps it, so a generation's figures can be read from the ledger) and,
    when the unit is traced, records each call as an LLM span under ``parent`` (task, input/output
    summaries, and the tokens and cost it spent, by the ledger's accounting: a cache hit spent nothing)."""

    def __init__(
        self, inner: LLM, parent: Span | None = None, unit: str | None = None, limit: int | None = None
    ) -> None:
        self.inner, self.model_name = inner, inner.model_name
        self._tally = Tally()
        self.parent = parent
        self.unit = unit
        self.limit = limit  # the model calls the unit reserved (``Evolution.unit_bound``): a guard, never reached
        self._asking = 0  # its calls under way
        self.settled: Callable[[int, int], None] | None = None  # told its lower reservation and what is left

    @serialized
    def _ask(self, n: int) -> None:
        """One more call under way (``n`` = 1; -1 when it ended); refused past the unit's reservation."""
        if n > 0 and self._tally.calls - self._tally.cached_calls + self._asking >= (self.limit or 0):
            raise BudgetExceeded(f"unit {self.unit} would pass the {self.limit} model calls it reserved")
        self._asking += n

    def expect(self, more: int) -> None:
        """The unit asks at most ``more`` model calls from here on (called between its steps, no call under
        way): when what it asked so far plus ``more`` is below its reservation, that is its reservation now;
        ``settled`` is told either way (the scheduler may lower it further from the call book and start a
        unit waiting for the budget)."""
        cap = self._lower(more)
        if cap is not None and self.settled is not None:
            self.settled(cap, more)

    @serialized
    def _lower(self, more: int) -> int | None:
        if self.limit is None:
            return None
        self.limit = min(self.limit, self._tally.calls + more)
        return self.limit

    @serialized
    def _add(self, lost: CallTotals | None = None, completion: Completion | None = None) -> None:
        if lost is not None:
            self._tally.add(lost)
        if completion is not None:
            self._tally.add_completion(completion)

    def complete(self, request: LLMRequest) -> Completion:
        if self.limit is not None:
            self._ask(1)
            try:
                return self._complete(request)
            finally:
                self._ask(-1)
        return self._complete(request)

    def _complete(self, request: LLMRequest) -> Completion:
        if self.unit is not None and request.unit is None:
            request = request.model_copy(update={"unit": self.unit})
        span = None
        if self.parent is not None:
            last = request.messages[-1].content if request.messages else ""
            span = self.parent.child(
                f"model {request.task.value}", {"message": last[:200], "seed": request.seed}, kind="llm"
            )
        try:
            c = self.inner.complete(request)
        except BudgetExceeded as err:  # refused before any request: no call was made
            if span is not None:
                span.end(error=f"{err.__class__.__name__}: {err}"[:300], usage=CallTotals(), model=self.model_name)
            raise
        except Exception as err:
            lost = error_totals(err)
            if span is not None:
                span.end(error=f"{err.__class__.__name__}: {err}"[:300], usage=lost, model=self.model_name)
            self._add(lost=lost)
            raise
        if span is not None:
            span.end(
                {"text": c.text[:200], "cached": c.cached, "latency_s": round(c.latency_s, 4)},
                usage=completion_totals(c),
                model=c.model,
            )
        self._add(completion=c)
        return c

    @property
    @serialized
    def meter(self) -> CallTotals:
        """This unit's calls so far."""
        return self._tally.totals()

    spent = meter


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass
class Evolution(Guarded):
    """One experiment run with its collaborators. Call :meth:`run`."""

    config: ExperimentConfig
    probes: ProbeSet
    seeds: Sequence[Elixir]
    llm: LLM
    breeder: Breeder
    results: ExperimentResults
    embedder: Embedder | None = None
    tracker: Tracker = field(default_factory=NullTracker)
    progress: Callable[[Progress], None] | None = None
    unit_runner: UnitRunner | None = None
    judge: LLM | None = None  # the judge scorers' model (default: ``llm``, the agents' own model)
    judges: Sequence[LLM] = ()  # a panel (config ``judges``): each judge scorer asked of each (instead of ``judge``)
    keep_failures: bool = False  # a rerun keeps unscored records instead of evaluating them again
    run_tags: dict[str, str] = field(default_factory=dict)  # extra tags on the tracked run (e.g. a flow run id)
    # after the search: re-evaluate the top and score the report's members on train and test (off: the search
    # bench, which scores every method's champion itself, so no method pays for it)
    score_held_out: bool = True
    # called with each finished generation and its population, fittest first (the Prefect flow publishes artifacts)
    on_generation: Callable[[GenerationRecord, Sequence[IndividualRecord]], None] | None = None
    probe_pool: Executor | None = None  # threads for the probes of units evaluated outside run() (a worker's)
    # people's picks, read when the ``human`` objective is weighted (furnace.evolution.human); the clock and
    # sleep the run waits for them on (injected by tests)
    picks: PickStore | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        self.seeds = list(self.seeds)[: self.config.population]
        # train: feedback and reflection; validation: selection; test: the report only (never an operator)
        parts = self.probes.splits()
        self.train = self.probes.subset("train")
        self.validation = self.probes.subset("validation")
        self.test = self.probes.subset("test") if parts["test"] else None
        # what every individual is scored on: validation, what selection reads (as GEPA's D_pareto). Train
        # is scored where reflection needs it: a reflect plan's minibatch, for the parent and the child
        self.search_probes = self.validation
        self.validation_ids = tuple(p.id for p in self.validation.probes)
        self.judge_model = self.judge.model_name if self.judge is not None else self.llm.model_name
        # judge calls go to the judge model below the meter: budgets, slots and unit counters see them
        routed = TaskRouter(self.llm, {TaskKind.JUDGE: self.judge}) if self.judge is not None else self.llm
        self.panel = self._panel()
        if self.panel is not None:  # each judge's calls routed by name, below the meter like any call
            named = {j.model_name: j for j in self.judges}
            routed = TaskRouter(self.llm, {TaskKind.JUDGE: named[self.panel.judges[0]]}, named)
            self.judge_model = " + ".join(self.panel.judges)
        self.metered = MeteredLLM(routed, concurrency=self.config.concurrency, budget=self.config.budget)
        separate = self.judge.model_name if self.judge is not None else None  # a panel is in the config
        separate = separate if separate != self.llm.model_name else None
        self.experiment_id = self.config.experiment_id(
            self.llm.model_name, experiment_inputs(self.seeds, self.probes, judge_model=separate)
        )
        self.board = OperatorBoard(dict(self.config.operators), adapt=self.config.adapt_operators)
        # the run's one lock (Guarded): the embedder (one call at a time), the vectors it made, the units' meters
        self._embeddings = Embeddings()
        self._unit_meters: dict[tuple[int, int], CallTotals] = {}  # (generation, slot) -> calls of units run here
        self._remote: set[tuple[int, int]] = set()  # units run in another process (their calls as they made them)
        self._breed: Breeder = self.breeder  # during run(): the run's view (new agents written with the records)
        # threads for the units' probes: during run() a pool of its own, else the one given (a worker's)
        self._probe_pool: Executor | None = self.probe_pool
        self._probe_threads = 0
        self._probes_per_unit = min(4, self.config.concurrency)  # a unit's probes answered at once
        # a unit's threads: its probes', and beside each its judge calls (all at once), at most the slots
        asked = judge_calls(self.config.scorers, self.panel)
        self._threads_per_unit = max(self._probes_per_unit, min(self._probes_per_unit * asked, self.config.concurrency))
        self.status = "finished"
        # while run() schedules: told (order, calls, more) when a unit under way will ask fewer calls than it
        # reserved (``calls`` in all, ``more`` of them from then on)
        self.settled: Callable[[int, int, int], None] | None = None

    def _panel(self) -> Panel | None:
        """The panel of ``judges`` (the config's, in its order), or None for one judge."""
        if not self.judges:
            if self.config.judges:
                raise FurnaceError(f"the experiment lists judges {list(self.config.judges)}: give their models")
            return None
        if self.judge is not None:
            raise FurnaceError("an experiment has either one judge or a panel of judges, not both")
        given = [j.model_name for j in self.judges]
        if sorted(given) != sorted(self.config.judges):
            raise FurnaceError(
                f"the judges given ({', '.join(given)}) are not the config's ({', '.join(self.config.judges)})"
            )
        return Panel(tuple(self.config.judges), self.config.fitness_judge)

    # --- helpers ---------------------------------------------------------

    @serialized
    def _embed(self, agent_id: str, prompt: str) -> None:
        """Add the agent's prompt embedding to the run's table (computed once per run). A unit reads its
        peers' rows (a population's worth) without waiting for another unit's embedding: the embedder
        runs one call at a time (a tokenizer may not be shared by threads) under the run's lock, and a
        row, written once, is read without it. A unit that waited here finds the row another one added."""
        assert self.embedder is not None
        if agent_id not in self._embeddings:
            self._embeddings.add(agent_id, self.embedder.embed([prompt])[0])

    @serialized
    def _keep_meter(self, where: tuple[int, int], spent: CallTotals, *, remote: bool = False) -> None:
        self._unit_meters[where] = spent
        if remote:
            self._remote.add(where)

    @serialized
    def take_generation_meters(self, generation: int) -> list[CallTotals]:
        """The calls of the units of ``generation`` run here, forgotten once taken."""
        here = [m for (g, _), m in self._unit_meters.items() if g == generation]
        self._unit_meters = {k: v for k, v in self._unit_meters.items() if k[0] != generation}
        return here

    @serialized
    def _made(self, where: tuple[int, int]) -> tuple[CallTotals, bool]:
        """The calls the unit at ``where`` made, and whether it ran in another process."""
        return self._unit_meters.get(where, CallTotals()), where in self._remote

    def _emit(self, **kwargs: Any) -> None:
        if self.progress is not None:
            self.progress(Progress(**kwargs))

    def _plan_child(
        self,
        slot: int,
        population: Sequence[IndividualRecord],
        rng: random.Random,
        weights: dict[str, float],
        founders: Sequence[IndividualRecord] = (),
        memory: BreedingMemory | None = None,
    ) -> Plan:
        """One child's plan: operator, parents and seed, drawn from ``rng`` (main thread, plan order).
        A multi-parent operator crosses the selected parent with a founder (``reflection.founder_partner``);
        with the run's ``memory`` (``reflection.BreedingMemory``) the founder and a mutation's moves are
        ones the run has not tried yet."""
        op = choose_operator(weights, rng)
        first = parent_picker(self.config, population, rng, self.validation_ids)()
        parents: tuple[IndividualRecord, ...] = (first,)
        if op not in SINGLE_PARENT:
            partner = memory.partner(first, founders, rng) if memory else founder_partner(first, founders, rng)
            parents = (first,) if partner is None else (first, partner)
            if partner is None:
                op = "mutation"
        moves = (lambda: memory.moves(first, self.config.mutation_rate, rng)) if memory is not None else None
        params = operator_params(op, first, self.config, self.train, moves, rng)
        return Plan(slot, op, parents, rng.randrange(2**31), params)

    def unit_key(self, generation: int, plan: Plan) -> str:
        """Content key of one unit: what is made and how it is scored (operator and scorer versions)."""
        from furnace.fusion.operators import OPERATORS

        op = OPERATORS.get(plan.operator)
        return content_key(
            {
                "experiment": self.experiment_id,
                "generation": generation,
                "slot": plan.slot,
                "operator": plan.operator,
                "op_version": op.op_version if op else None,
                "seed": plan.seed,
                "params": plan.params,
                "parents": [p.elixir.get("id") for p in plan.parents] + [p.lineage_hash for p in plan.parents],
                "elixir": plan.elixir.content_hash if plan.elixir else None,
                "scorers": {k: [w, SCORERS[k].version] for k, w in sorted(self.config.scorers.items())},
            }
        )

    def unit_bound(self, plan: Plan) -> int:
        """The most model calls the unit of ``plan`` can make: what it reserves of ``budget.max_calls``
        (:class:`~furnace.evolution.scheduler.Schedule`). Its evaluation on validation (each sample's reply
        and judge calls) and, for a child, its fusion (:func:`~furnace.evolution.estimate.fusion_calls`) and,
        for a reflect plan, its parent's minibatch rows not recorded yet, the parent's answers its brief asks
        for (those of the probes with recorded rows) and the child's minibatch. Cache hits among them cost
        nothing: the bound is what they would cost without a cache."""
        if plan.elixir is not None:
            return self._after_fusion(plan)
        calls = self._after_fusion(plan)
        calls += fusion_calls(plan.operator, [Elixir.model_validate(p.elixir) for p in plan.parents], plan.params)
        if plan.operator == "reflect" and plan.parents:
            batch = self._minibatch_probes(plan)
            missing = len(self._missing_rows(plan.parents[0], batch).probes)
            calls += missing * self._answer_calls() + len(batch.probes) - missing
        return calls

    def first_unit_calls(self) -> int:
        """The most model calls a new experiment's first unit (scoring the first seed) may make; 0 on a rerun (a
        previous run may have recorded it). A ``budget.max_calls`` below it stops the run before anything."""
        if self.results.get_experiment(self.experiment_id) is not None:
            return 0
        return self.unit_bound(Plan(0, "seed", elixir=self.seeds[0]))

    def _answer_calls(self) -> int:
        """The model calls of one probe's answer: each sample's reply and judge calls."""
        return (1 + judge_calls(self.config.scorers, self.panel)) * max(1, self.config.samples_per_probe)

    def _after_fusion(self, plan: Plan) -> int:
        """The most model calls the unit of ``plan`` asks once its child is made: its evaluation on
        validation and, for a reflect plan, the child's minibatch first."""
        calls = len(self.search_probes.probes) * self._answer_calls()
        if plan.operator == "reflect" and plan.parents and plan.elixir is None:
            calls += len(self._minibatch_probes(plan).probes) * self._answer_calls()
        return calls

    def evaluate_unit(
        self,
        generation: int,
        plan: Plan,
        population: Sequence[Peer],
        known: dict[str, IndividualRecord],
        order: int = 0,
    ) -> IndividualRecord:
        """One individual: breed (unless a library seed), evaluate, build its record (no write).
        Its model calls queue at priority ``order`` (older units first). Traced (when the
        tracker traces) as a root (agent) span with a fusion and an evaluation step, its scores
        attached to the trace as assessments."""
        root = start_trace(
            self.tracker,
            trace_name(generation, plan.slot),
            {
                "experiment": self.experiment_id,
                "generation": generation,
                "slot": plan.slot,
                "operator": plan.operator,
                "parents": [p.agent_id for p in plan.parents],
            },
        )
        limit = self.unit_bound(plan) if self.config.budget.max_calls is not None else None
        llm = _CountingLLM(self.metered.at(order), unit=unit_label(generation, plan.slot), limit=limit)
        settled = self.settled
        if settled is not None:
            llm.settled = partial(settled, order)
        try:
            record = self._evaluate_unit(generation, plan, population, known, root, llm)
        except BaseException as err:
            if root is not None:
                root.end(error=f"{err.__class__.__name__}: {err}"[:300])
            raise
        finally:
            self._keep_meter((generation, plan.slot), llm.meter)
        if root is not None:
            root.assess(
                individual_assessments(
                    record,
                    self.config.scorers,
                    judge_model=self.judge_model,
                    panel=self.panel,
                    over=self.validation_ids,
                )
            )
            root.end(
                {
                    "agent_id": record.agent_id,
                    "fitness": record.fitness if record.has_score else None,
                    "failures": record.failures,
                }
            )
        return record

    def _evaluate_unit(
        self,
        generation: int,
        plan: Plan,
        population: Sequence[Peer],
        known: dict[str, IndividualRecord],
        root: Span | None,
        llm: _CountingLLM,
    ) -> IndividualRecord:
        parent_rows: tuple[ScoreRow, ...] = ()  # a reflect plan's parent on its minibatch
        if plan.elixir is not None:
            elixir, prompt = plan.elixir, render_prompt(plan.elixir)
            agent_id, lineage_hash, parents = elixir.id, None, tuple[str, ...]()
        else:
            parents = tuple(p.agent_id for p in plan.parents)
            refs = [Elixir.model_validate(p.elixir).ref for p in plan.parents]
            step = root.child(f"fuse {plan.operator}", {"seed": plan.seed, **plan.params}, "chain") if root else None
            llm.parent = step
            try:
                params = plan.params
                if plan.operator == "reflect":
                    params, parent_rows = self._reflect_params(plan, llm)
                bred = self._breed(refs, plan.operator, plan.seed, params, llm)
            except BaseException as err:
                _end_failed(step, err)  # an open step would keep its whole trace from being exported
                if isinstance(err, BudgetExceeded) or not isinstance(err, FurnaceError):
                    raise
                ev = failed_evaluation(f"fusion failed: {err}", self.config.scorers)
                return self._record(
                    generation, plan, f"failed-g{generation}-s{plan.slot}", parents, None, {}, "", ev, llm
                )
            if step is not None:
                step.end({"agent_id": bred.agent_id, "lineage_hash": bred.lineage_hash})
            llm.expect(self._after_fusion(plan))  # the fusion's calls are known: what it did not ask is freed
            if bred.agent_id in known:  # same child already evaluated in this generation
                return known[bred.agent_id]
            elixir, prompt, agent_id, lineage_hash = bred.elixir, bred.system_prompt, bred.agent_id, bred.lineage_hash

        def diversity_of() -> Callable[[], Score]:
            """Embeds the agent and its peers (while its probes run); what scores its diversity to them."""
            if self.embedder is None:
                return lambda: Score.failure("no embedding")
            table, seeds = self._embeddings, plan.elixir is not None  # generation 0 is scored against the seeds
            peers = [e.id for e in self.seeds] if seeds else [p.agent_id for p in population]
            for i in [i for i, pid in enumerate(peers) if pid != agent_id and pid not in table]:
                self._embed(peers[i], render_prompt(self.seeds[i]) if seeds else population[i].system_prompt)
            if agent_id not in table:
                self._embed(agent_id, prompt)
            return partial(table.diversity, agent_id, peers)

        decision = None
        if plan.operator == "reflect" and plan.parents:
            step = root.child("minibatch", {"probes": plan.params.get("minibatch", [])}, "chain") if root else None
            llm.parent = step
            try:
                decision = self._minibatch(plan, elixir, prompt, llm, parent_rows)
            except BaseException as err:
                _end_failed(step, err)
                raise
            if step is not None:
                step.end({"accepted": decision[0].value == 1.0, "reason": decision[0].reason})
            failed = [r for r in (*parent_rows, *decision[1]) if r.failed]
            if failed:  # a failure on the minibatch is no verdict: unscored, a rerun retries
                reasons = tuple(f"{r.probe}/{r.scorer}: {r.reason}" for r in failed)
                ev = Evaluation(
                    decision[1], {}, 0.0, reasons, tuple(sorted({split_scorer(r.scorer)[0] for r in failed}))
                )
                return self._record(
                    generation, plan, agent_id, parents, lineage_hash, persona_inputs(elixir), prompt, ev, llm
                )
            if decision[0].value != 1.0:  # rejected: never evaluated on validation, never in the population
                ev = Evaluation((*decision[1], decision[0]), {}, 0.0)
                return self._record(
                    generation, plan, agent_id, parents, lineage_hash, persona_inputs(elixir), prompt, ev, llm
                )
        step = (
            root.child("evaluate", {"agent_id": agent_id, "probes": len(self.search_probes.probes)}, "chain")
            if root
            else None
        )
        llm.parent = step
        try:
            ev = evaluate_agent(
                llm,
                elixir,
                prompt,
                self.search_probes,
                self.config.scorers,
                seed=self.config.seed,
                diversity_of=diversity_of,
                parallel=self._probes_per_unit,
                span=step,
                pool=self._probe_pool,
                samples=self.config.samples_per_probe,
                over=self.validation_ids,
                panel=self.panel,
            )
        except BaseException as err:
            _end_failed(step, err)
            raise
        if decision is not None:  # its minibatch rows (train: what a later reflection on it reads) and the verdict
            scored = {r.probe for r in ev.scores}
            extra = tuple(r for r in decision[1] if r.probe not in scored)
            ev = Evaluation(
                (*ev.scores, *extra, decision[0]), ev.objectives, ev.fitness, ev.failure_reasons, ev.unscored
            )
        if step is not None:
            step.end({"fitness": ev.fitness, "objectives": ev.objectives, "failures": len(ev.failure_reasons)})
        return self._record(generation, plan, agent_id, parents, lineage_hash, persona_inputs(elixir), prompt, ev, llm)

    def _reflect_params(self, plan: Plan, llm: LLM) -> tuple[dict[str, Any], tuple[ScoreRow, ...]]:
        """A reflect plan's params with its brief, and the parent's rows on the plan's minibatch. The brief
        is the minibatch's traces (message, the parent's answer — its sample 0 — and the judge's feedback).
        The parent's minibatch rows are its recorded ones where it has them, else it is scored on those
        probes now (billed to this unit; a request made before is served by the response cache), and the
        brief shows the answers that scoring judged; a probe with recorded rows has its answer asked again
        (the request its evaluation made, so the response cache serves it). Only train probes: the plan's
        minibatch is drawn from them."""
        parent = plan.parents[0]
        batch = self._minibatch_probes(plan)
        elixir = Elixir.model_validate(parent.elixir)
        answers: dict[str, str] = {}
        missing = self._missing_rows(parent, batch)
        rows = self._parent_rows(parent, elixir, batch, missing, llm, answers)
        scored_now = {p.id for p in missing.probes}
        seed = sample_seed(self.config.seed, 0)
        for probe in batch.probes:
            if probe.id in scored_now:  # its reply is in ``answers`` (a failed one is not asked again)
                continue
            try:
                answers[probe.id] = reply(llm, elixir, parent.system_prompt, probe, seed=seed)
            except FurnaceError as err:
                if isinstance(err, BudgetExceeded):
                    raise
        brief = trace_brief(rows, batch, answers, dict(self.config.scorers))
        return {**plan.params, "feedback": brief}, rows

    def _minibatch_probes(self, plan: Plan) -> ProbeSet:
        """The train probes of a reflect plan's minibatch."""
        ids = [str(i) for i in plan.params.get("minibatch", [])]
        return self.train.model_copy(update={"probes": [p for p in self.train.probes if p.id in ids]})

    @staticmethod
    def _missing_rows(parent: IndividualRecord, batch: ProbeSet) -> ProbeSet:
        """The probes of ``batch`` ``parent`` has no recorded (unfailed) rows on: scored by a reflect unit."""
        have = {r.probe for r in parent.scores if not r.failed}
        return batch.model_copy(update={"probes": [p for p in batch.probes if p.id not in have]})

    def _parent_rows(
        self,
        parent: IndividualRecord,
        elixir: Elixir,
        batch: ProbeSet,
        missing: ProbeSet,
        llm: LLM,
        answers: dict[str, str],
    ) -> tuple[ScoreRow, ...]:
        """``parent``'s per-probe rows on ``batch``: recorded, else (the probes of ``missing``,
        :meth:`_missing_rows`) scored now (the same samples and seeds as any evaluation of it, so a request
        made before is free; their sample-0 replies into ``answers``)."""
        recorded = {p.id for p in batch.probes} - {p.id for p in missing.probes}
        rows = tuple(r for r in parent.scores if r.probe in recorded)
        if not missing.probes:
            return rows
        return (*rows, *self._score_on(llm, elixir, parent.system_prompt, missing, answers))

    def _score_on(
        self, llm: LLM, elixir: Elixir, prompt: str, batch: ProbeSet, answers: dict[str, str] | None = None
    ) -> tuple[ScoreRow, ...]:
        """The per-probe rows of ``elixir`` on ``batch`` (a minibatch of train probes): every sample, the
        seeds every evaluation of it uses (``answers``: filled with the sample-0 replies)."""
        scorers = {k: w for k, w in self.config.scorers.items() if SCORERS[k].per_probe}
        ev = evaluate_agent(
            llm,
            elixir,
            prompt,
            batch,
            scorers,
            seed=self.config.seed,
            parallel=self._probes_per_unit,
            pool=self._probe_pool,
            samples=self.config.samples_per_probe,
            panel=self.panel,
            answers=answers,
        )
        return ev.scores

    def _minibatch(
        self, plan: Plan, elixir: Elixir, prompt: str, llm: LLM, parent_rows: Sequence[ScoreRow]
    ) -> tuple[ScoreRow, tuple[ScoreRow, ...]]:
        """Score a reflected child on its plan's minibatch (the same samples and seeds as its parent's) and
        decide: accepted (value 1) only when its minibatch fitness beats its parent's (``parent_rows``: the
        parent's rows there). Returns the decision row (probe ``*``, scorer ``minibatch``) and the child's
        minibatch rows."""
        batch = self._minibatch_probes(plan)
        ids = [p.id for p in batch.probes]
        scorers = {k: w for k, w in self.config.scorers.items() if SCORERS[k].per_probe}
        rows = self._score_on(llm, elixir, prompt, batch)
        child = minibatch_score(rows, ids, scorers)
        parent = minibatch_score(parent_rows, ids, scorers)
        accepted = child is not None and parent is not None and child > parent
        shown = "?" if child is None else f"{child:.3f}"
        against = "?" if parent is None else f"{parent:.3f}"
        verdict = "accepted" if accepted else "rejected"
        reason = f"{verdict}: {shown} vs parent {against} on {', '.join(ids)}"
        return ScoreRow("*", MINIBATCH, 1.0 if accepted else 0.0, reason), rows

    def _record(
        self,
        generation: int,
        plan: Plan,
        agent_id: str,
        parents: tuple[str, ...],
        lineage_hash: str | None,
        elixir: dict[str, Any],
        prompt: str,
        ev: Any,
        llm: _CountingLLM,
    ) -> IndividualRecord:
        spent = llm.spent
        return IndividualRecord(
            experiment_id=self.experiment_id,
            generation=generation,
            agent_id=agent_id,
            slot=plan.slot,
            operator=plan.operator,
            parents=parents,
            lineage_hash=lineage_hash,
            elixir=elixir,
            system_prompt=prompt,
            fitness=ev.fitness,
            objectives=ev.objectives,
            scores=ev.scores,
            failures=len(ev.failure_reasons),
            failure_reasons=ev.failure_reasons,
            calls=spent.model_calls,
            tokens=spent.total_tokens,
            cost_usd=round(spent.cost_usd, 9),
            plan=plan_key(plan),
        )

    def unit(
        self,
        order: int,
        generation: int,
        plan: Plan,
        population: Sequence[Peer],
        known: dict[str, IndividualRecord],
        *,
        retry: bool = False,
    ) -> Unit:
        """The unit that makes and scores ``plan`` (``order``: its place in the run, its priority;
        ``retry``: its slot holds a record that must be made again)."""
        return Unit(
            self.unit_key(generation, plan),
            plan.slot,
            partial(self.evaluate_unit, generation, plan, population, known, order),
            (generation, plan, tuple(population), dict(known), order),
            order,
            retry,
        )

    # --- the loop ---------------------------------------------------------

    def run(self) -> ExperimentReport:
        """Run (or resume) the experiment and return its report."""
        cfg = self.config
        workers = min(max(cfg.children_per_generation, len(self.seeds), 1), 64)
        runner = self.unit_runner or ThreadUnitRunner(workers)
        # one set of threads for every unit's probes (a unit's own pool would start and join threads per individual)
        self._probe_threads = workers * self._threads_per_unit
        self._probe_pool = pool(self._probe_threads, name="furnace-probe")
        try:
            self._open(cfg)
        except BaseException:
            self._close_threads(runner)
            raise
        schedule = Schedule(self, random.Random(cfg.seed), runner)
        self.metered.reserving = True  # max_calls is kept unit by unit (the schedule), never refused per call
        try:
            try:
                schedule.run()
            except BudgetExceeded as err:  # raised once every unit under way has finished: the meter is final
                self.status = budget_stop(str(err), self.metered.meter.as_dict())
            finally:
                self._close_threads(runner)
        except BaseException:
            self.metered.reserving = False
            self._writer.close()  # everything finished is on disk before the run dies
            raise
        try:
            held_out = self._held_out(schedule.history)
        finally:
            self.metered.reserving = False
        everyone = self._stored.individuals(self.experiment_id)
        report = build_report(
            everyone,
            schedule.history,
            experiment_id=self.experiment_id,
            name=self.config.name,
            model=self.llm.model_name,
            status=self.status,
            board=self.board,
            totals=self.run_totals().as_dict(),
            judge_model=self.judge_model,
            run_spent=self.metered.meter.as_dict(),
            untraced=self._untraced() if self._ledger_before else (),
            held_out=held_out,
            **self._panel_figures(everyone),
            human=schedule.human_summary(),
        )
        # the experiment's status and summary in the unit of work of the last records, then everything is on disk
        self._writer.put(
            Deferred(partial(self.results.finish_experiment, self.experiment_id, self.status, report.summary()))
        )
        self._writer.close()
        snapshot_soon(self.results)  # the status and held-out figures reach the snapshots analysis and ask read
        log_held_out(self.tracker, report.held_out_steps(), self._held_out_assessments(held_out))
        self.tracker.finish(
            self.status,
            report.tags(),
            report.artifacts(),
            {**report.totals, **report.held_out_metrics(), **report.judge_metrics()},
        )
        traces = getattr(self.tracker, "trace_totals", None)  # what the tracker exported (MLflow counts them)
        return replace(report, traces=dict(traces)) if traces else report

    def _held_out_assessments(self, held: dict[str, Any]) -> dict[str, list[Assessment]]:
        """Each tested agent's held-out assessments, by the name of the trace of its (first) evaluation."""
        first: dict[str, IndividualRecord] = {}
        for r in sorted(self._stored.individuals(self.experiment_id), key=lambda r: (r.generation, r.slot)):
            first.setdefault(r.agent_id, r)
        named = {
            trace_name(first[a].generation, first[a].slot): held_out_assessments(row)
            for a, row in held.get("agents", {}).items()
            if a in first
        }
        return {name: items for name, items in named.items() if items}

    def _panel_figures(self, records: Sequence[IndividualRecord]) -> dict[str, Any]:
        """With a panel: the judges' agreement and each agent's fitness by judge (the report's ``judges``
        and leaderboard columns); nothing for one judge."""
        if self.panel is None:
            return {}
        over = self.validation_ids
        return {
            "judges": panel_agreement(records, self.config.scorers, self.panel, over=over),
            "by_judge": {r.agent_id: fitness_by_judge(r, self.config.scorers, self.panel, over=over) for r in records},
        }

    def _held_out(self, history: Sequence[GenerationRecord]) -> dict[str, Any]:
        """After the search: the top ``reevaluate_top`` re-evaluated on validation with fresh samples (the
        champion is the best of them there), then every generation's best, the leaderboard and the
        champion scored on the **test** probes (each with a seeded 95% bootstrap interval over its test
        probes) — for the report only; nothing here reaches an operator or selection. Each step runs
        when what it may cost fits in the budget (:meth:`_step_fits`); a budget stop keeps what was done
        (``stopped``)."""
        cfg = self.config
        everyone: dict[str, IndividualRecord] = {}
        for r in self._stored.individuals(self.experiment_id):
            everyone.setdefault(r.agent_id, r)
        ranked = sorted((r for r in everyone.values() if r.has_score), key=rank_key)
        out: dict[str, Any] = {
            "splits": {name: [p.id for p in probes] for name, probes in self.probes.splits().items()},
            "samples_per_probe": cfg.samples_per_probe,
            "confidence": 0.95,
            "agents": {},
            "generations": [],
        }
        if not ranked or not self.score_held_out:
            return out
        bests = [g.survivors[0] for g in history if g.survivors]
        # what the figures depend on: a rerun that finds the same reads them back (no model call)
        out["key"] = content_key(
            {
                "ranked": [[r.agent_id, r.fitness] for r in ranked[: max(LEADERBOARD, cfg.reevaluate_top)]],
                "bests": bests,
                "scorers": {k: [w, SCORERS[k].version] for k, w in sorted(cfg.scorers.items())},
                "probes": out["splits"],
            }
        )
        if self._held_before.get("key") == out["key"] and "stopped" not in self._held_before:
            return self._held_before
        root = start_trace(self.tracker, HELD_OUT, {"experiment": self.experiment_id, "splits": out["splits"]}, "chain")
        llm = _CountingLLM(self.metered, parent=root, unit=HELD_OUT)
        try:
            top = ranked[: cfg.reevaluate_top]
            board = list(dict.fromkeys([*(r.agent_id for r in ranked[:LEADERBOARD]), *bests]))
            test, train = self.test, self.train
            at_once = {r.agent_id for r in top} <= set(board) and self._steps_fit(
                (len(top), self.validation), (len(board), test), (len(board), train)
            )
            found: dict[tuple[str, str], Evaluation]  # (split, agent) -> its evaluation there
            if at_once:  # the champion is on the board: the three steps as one, a single drain at the end
                members = [everyone[a] for a in board if a in everyone]
                found = self._held_out_steps(llm, [("validation", top), ("test", members), ("train", members)])
            else:
                self._step_fits((len(top), self.validation))
                found = self._held_out_steps(llm, [("validation", top)])
            reevaluated = {
                r.agent_id: round(again.fitness, 6)
                for r in top
                if not (again := found[("validation", r.agent_id)]).failure_reasons
            }
            order = {r.agent_id: i for i, r in enumerate(ranked)}
            champion = min(
                (r for r in top if r.agent_id in reevaluated),
                key=lambda r: (-reevaluated[r.agent_id], order[r.agent_id]),
                default=ranked[0],
            )
            winner = ranked[0]
            out["champion"] = champion.agent_id
            out["winner"] = winner.agent_id
            if winner.agent_id in reevaluated:
                out["reevaluation"] = {
                    "agent_id": winner.agent_id,
                    "fitness": round(winner.fitness, 6),
                    "reevaluated": reevaluated[winner.agent_id],
                    "drop": round(winner.fitness - reevaluated[winner.agent_id], 6),
                    "top": {a: reevaluated[a] for a in reevaluated},
                }
            wanted = list(dict.fromkeys([champion.agent_id, *board]))
            members = [everyone[a] for a in wanted if a in everyone]
            if not at_once:
                self._step_fits((len(members), test))
                found |= self._held_out_steps(llm, [("test", members)])
                # train fitness, for the report: the search scored each member on validation (and a reflected
                # child on its minibatch), so the train probes are answered here (a request made before is free)
                self._step_fits((len(members), train))
                found |= self._held_out_steps(llm, [("train", members)])
            tested = [found.get(("test", r.agent_id)) for r in members]
            trained = [found[("train", r.agent_id)] for r in members]
            for r, ev, on_train in zip(members, tested, trained, strict=True):
                row: dict[str, Any] = {"validation": round(r.fitness, 6), "train": round(on_train.fitness, 6)}
                if r.agent_id in reevaluated:
                    row["reevaluated"] = reevaluated[r.agent_id]
                row.update(test_figures(ev, row["train"], cfg.scorers, seed=cfg.seed, agent_id=r.agent_id))
                if self.panel is not None and "test" in row and ev is not None:
                    row["test_by_judge"] = judge_fitness(ev.scores, cfg.scorers, self.panel.judges)
                out["agents"][r.agent_id] = row
            out["generations"] = [
                {"generation": g.generation, "agent_id": g.survivors[0]} for g in history if g.survivors
            ]
        except BudgetExceeded as err:
            out["stopped"] = f"held-out evaluation stopped: {err}"
            if not self.status.startswith("stopped"):  # the status names the first stop (the search's)
                self.status = budget_stop(str(err), self.metered.meter.as_dict())
        except BaseException as err:
            if root is not None:
                root.end(error=f"{err.__class__.__name__}: {err}"[:300])
            raise
        if root is not None:
            root.end({"champion": out.get("champion"), "tested": len(out["agents"])}, error=out.get("stopped"))
        return out

    def _step_fits(self, *steps: tuple[int, ProbeSet | None]) -> None:
        """Raise :class:`BudgetExceeded` unless the held-out ``steps`` fit in the budget together
        (:meth:`_over_budget`)."""
        why = self._over_budget(*steps)
        if why is not None:
            raise BudgetExceeded(why)

    def _steps_fit(self, *steps: tuple[int, ProbeSet | None]) -> bool:
        """Whether the held-out ``steps`` fit in the budget together (:meth:`_over_budget`)."""
        return self._over_budget(*steps) is None

    def _over_budget(self, *steps: tuple[int, ProbeSet | None]) -> str | None:
        """Why the held-out ``steps`` (``members`` scored on ``probes`` each) do not fit in what ``max_calls``
        leaves, all of them together (None: they fit): checked before they run, when no call is under way,
        so a step runs whole or not at all, whatever the threads do."""
        limit = self.config.budget.max_calls
        if limit is None:
            return None
        answer = (1 + judge_calls(self.config.scorers, self.panel)) * max(1, self.config.samples_per_probe)
        need = answer * sum(members * len(probes.probes) for members, probes in steps if probes is not None)
        spent = self.metered.meter.model_calls
        if need and spent + need > limit:
            return f"budget.max_calls {limit} reached (the next step may make {need} model calls, {limit - spent} left)"
        return None

    def _held_out_steps(
        self, llm: LLM, steps: Sequence[tuple[str, Sequence[IndividualRecord]]]
    ) -> dict[tuple[str, str], Evaluation]:
        """Each step's members scored on its split (``validation``: with fresh samples, numbered after the
        search's; ``test`` and ``train``: from sample 0), every member of every step a few at once, their
        probes and judge calls on one set of threads (the metered model bounds the calls); a split the
        experiment lacks (no test probes) is skipped."""
        first = {"validation": self.config.samples_per_probe, "test": 0, "train": 0}
        splits = {"validation": self.validation, "test": self.test, "train": self.train}
        jobs = [(split, r, on) for split, members in steps if (on := splits[split]) is not None for r in members]
        if not jobs:
            return {}

        workers = min(len(jobs), self.config.concurrency)
        with pool(workers * self._threads_per_unit, name="furnace-held-probe") as probe_threads:

            def score(job: tuple[str, IndividualRecord, ProbeSet]) -> Evaluation:
                split, record, probes = job
                return self._extra(llm, record, probes, first[split], probe_threads)

            scored = parallel_map(score, jobs, workers=workers, name="furnace-held")
        return {(split, r.agent_id): ev for (split, r, _), ev in zip(jobs, scored, strict=True)}

    def _extra(
        self, llm: LLM, record: IndividualRecord, probes: ProbeSet, first_sample: int, threads: Executor
    ) -> Evaluation:
        """``record`` scored on ``probes`` (samples numbered from ``first_sample``; its probes and judge calls
        on ``threads``), its per-agent rows (diversity) as recorded: the fitness of the same objectives on
        other probes."""
        per_probe = {k: w for k, w in self.config.scorers.items() if SCORERS[k].per_probe}
        ev = evaluate_agent(
            llm,
            Elixir.model_validate(record.elixir),
            record.system_prompt,
            probes,
            per_probe,
            seed=self.config.seed,
            parallel=self._probes_per_unit,
            samples=self.config.samples_per_probe,
            first_sample=first_sample,
            panel=self.panel,
            pool=threads,
        )
        shared = tuple(r for r in record.scores if r.probe == "*" and r.scorer in self.config.scorers)
        return combine((*ev.scores, *shared), self.config.scorers)

    def _close_threads(self, runner: UnitRunner) -> None:
        """Close the unit runner and the run's probe threads (idle by now: every unit waited for its
        probes, so no join on the wall); the pool given to the evolution, if any, is kept."""
        try:
            runner.close()
        finally:
            own, self._probe_pool = self._probe_pool, self.probe_pool
            if own is not None and own is not self.probe_pool:
                own.shutdown(wait=False)

    def _open(self, cfg: ExperimentConfig) -> None:
        """Mark the experiment running (tracker too), and read what earlier runs of it recorded."""
        before = self.results.get_experiment(self.experiment_id)
        self._held_before: dict[str, Any] = dict((before.summary or {}).get("held_out") or {}) if before else {}
        self.results.start_experiment(
            ExperimentRecord(self.experiment_id, cfg.name, cfg.model_dump(mode="json"), cfg.seed, self.llm.model_name)
        )
        self.tracker.start_experiment(
            self.experiment_id,
            _flat_params(cfg),
            {**self.run_tags, "furnace.experiment_id": self.experiment_id, "furnace.model": self.llm.model_name},
        )
        self._writer = RecordWriter(self.results)
        for_run = getattr(self.breeder, "for_run", None)  # new agents written behind, with the records
        self._breed = for_run(self._writer.put) if callable(for_run) else self.breeder
        self._recorded: dict[int, dict[int, IndividualRecord]] = {}
        # the experiment's individuals as the store holds them: what was read at the start, then every
        # write this run queues, applied with the same semantics (the report is built from it, no read-back)
        self._stored = MemoryResults()
        for rec in self.results.individuals(self.experiment_id):  # one read: what a previous run finished
            self._recorded.setdefault(rec.generation, {})[rec.slot] = rec
            self._stored.save_individual(rec)
        # what earlier runs spent per generation: a rerun adds to it, never overwrites it
        self._spent_before = {g.generation: _generation_totals(g) for g in self.results.generations(self.experiment_id)}
        # and what the call ledger says they spent on it, calls of units a killed run never finished included
        self._ledger_before = _ledger_by_generation(self.llm)

    def _save(self, record: IndividualRecord, *, replace: bool) -> None:
        """Queue ``record``'s write (saved in the background, batched, as units finish; ``replace``: it
        replaces what is recorded at its slot) and apply it to the run's view of the stored records."""
        self._writer.put(Replacement(record) if replace else record)
        if replace:
            self._stored.replace_individual(record)
        else:
            self._stored.save_individual(record)

    def write_with_records(self, write: Callable[[], None]) -> None:
        """Queue ``write`` on the run's record writer: done in order with the records put after it, in
        their unit of work (a record is never saved without what was queued before it)."""
        self._writer.put(Deferred(write))

    def save_with_records(self, store: Any, agent: Any) -> None:
        """Queue ``agent``'s save to ``store`` on the run's record writer (an agent bred in another
        process): saved before the records put after it, with the other new agents of its batch."""
        self._writer.put(NewAgent(store, agent))

    def unit_meter(self, generation: int, slot: int) -> CallTotals:
        """The calls of the unit at ``(generation, slot)`` evaluated in this process (until its generation closes)."""
        return self._made((generation, slot))[0]

    def account_unit(self, generation: int, slot: int, spent: CallTotals) -> None:
        """Count the calls a unit made in another process (``furnace.evolution.isolated``): the run's
        meter (budget) and its generation's figures see them as if they were made here."""
        self.metered.account(spent)
        self._keep_meter((generation, slot), spent, remote=True)

    def credit_unit(self, generation: int, slot: int) -> CallTotals:
        """What the finished unit at ``(generation, slot)`` is credited with (called in plan order): the
        metered model's book (:class:`~furnace.evolution.metering.CallBook`), else (no book, or a unit run in
        another process) the calls it made. Its generation's figures count the same."""
        where = (generation, slot)
        made, remote = self._made(where)
        if remote:
            return made
        spent = self.metered.credit(unit_label(generation, slot))
        if spent is None:
            return made
        self._keep_meter(where, spent)
        return spent

    def credit_bound(self, where: tuple[int, int], earlier: Sequence[tuple[int, int]]) -> int | None:
        """At most how many model calls the unit at ``where`` (run here) will be credited with for what it
        asked so far, the units ``earlier`` (before it in plan order, not credited yet) under way
        (:meth:`~furnace.evolution.metering.CallBook.upper`); None without a book or for a unit run in
        another process (its calls are not in this process's book)."""
        book = self.metered.book
        if book is None or self._made(where)[1]:
            return None
        return book.upper(unit_label(*where), [unit_label(*w) for w in earlier])

    def _untraced(self) -> list[dict[str, Any]]:
        """The units whose traces show fewer tokens than the call ledger holds for them (a resumed run:
        a killed run's spans that never reached the tracker), each with both figures; empty when the
        tracker keeps no traces or the model no ledger. In one run that was not killed they agree."""
        traced_tokens = getattr(self.tracker, "traced_tokens", None)
        read = getattr(self.llm, "run_calls", None)
        if not callable(traced_tokens) or not callable(read):
            return []
        traced: dict[str, int] = traced_tokens()
        if not traced:
            return []
        spent: dict[tuple[int, int], int] = {}
        for call in read():
            where = parse_unit(call.unit)
            if where is not None:
                spent[where] = spent.get(where, 0) + call.prompt_tokens + call.completion_tokens
        out = []
        for (generation, slot), tokens in sorted(spent.items()):
            name = trace_name(generation, slot)
            if tokens > traced.get(name, 0):
                out.append({"trace": name, "tokens": tokens, "traced_tokens": traced.get(name, 0)})
        return out

    def run_totals(self) -> CallTotals:
        """This experiment's totals: from the call ledger (every run of it, interrupted ones included)
        when the model keeps one, else this process's meter."""
        from_ledger = getattr(self.llm, "run_totals", None)
        return from_ledger() if callable(from_ledger) else self.metered.meter

    def _finish_generation(
        self, generation: int, population: Sequence[IndividualRecord], weights: dict[str, float], spent: CallTotals
    ) -> GenerationRecord:
        fits = [p.fitness for p in population]
        record = GenerationRecord(
            self.experiment_id,
            generation,
            tuple(p.agent_id for p in population),
            max(fits, default=0.0),
            round(sum(fits) / len(fits), 9) if fits else 0.0,
            weights,
            spent.model_calls,
            spent.cached_calls,
            spent.total_tokens,
            round(spent.cost_usd, 9),
        )
        self._writer.put(record)  # after its individuals (one FIFO writer): a saved generation is complete
        if self.on_generation is not None:
            self.on_generation(record, population)
        best = population[0] if population else None
        self.tracker.log_generation(
            generation,
            {
                "best_fitness": record.best_fitness,
                "mean_fitness": record.mean_fitness,
                # this generation's figures (as steps); whole-run totals are logged at finish
                "generation_model_calls": spent.model_calls,
                "generation_tokens": spent.total_tokens,
                "generation_cost_usd": spent.cost_usd,
                "generation_cache_hit_rate": spent.hit_rate,
                **{f"weight_{k}": v for k, v in weights.items()},
            },
            {
                "best_agent": best.agent_id if best else "",
                "best_lineage_hash": (best.lineage_hash or "") if best else "",
            },
        )
        return record


def unit_label(generation: int, slot: int) -> str:
    """The name a unit's calls carry in the call ledger (``CallRecord.unit``)."""
    return f"g{generation}/s{slot}"


def parse_unit(label: str) -> tuple[int, int] | None:
    """``(generation, slot)`` of a :func:`unit_label`, or None for another label (or none)."""
    head, _, tail = label.partition("/")
    if head[:1] == "g" and head[1:].isdigit() and tail[:1] == "s" and tail[1:].isdigit():
        return int(head[1:]), int(tail[1:])
    return None


def _ledger_by_generation(llm: LLM) -> dict[int, CallTotals]:
    """What the call ledger holds for the run of ``llm`` (a ``CachedLLM`` view), by the generation its
    rows name (rows naming no unit are left out); empty when the model keeps no ledger."""
    read = getattr(llm, "run_calls", None)
    if not callable(read):
        return {}
    rows: dict[int, list[CallRecord]] = {}
    for call in read():
        where = parse_unit(call.unit)
        if where is not None:
            rows.setdefault(where[0], []).append(call)
    return {g: sum_calls(calls) for g, calls in rows.items()}


def _end_failed(step: Span | None, err: BaseException) -> None:
    """End ``step`` with ``err`` (a fusion's error as it is; anything else, the budget stop
    included, with its class name)."""
    if step is not None:
        plain = isinstance(err, FurnaceError) and not isinstance(err, BudgetExceeded)
        step.end(error=(str(err) if plain else f"{err.__class__.__name__}: {err}")[:300])


def _generation_totals(g: GenerationRecord) -> CallTotals:
    """A stored generation record's figures as totals."""
    return CallTotals(
        calls=g.calls + g.cached_calls, cached_calls=g.cached_calls, completion_tokens=g.tokens, cost_usd=g.cost_usd
    )


def experiment_inputs(seeds: Sequence[Elixir], probes: ProbeSet, *, judge_model: str | None = None) -> dict[str, Any]:
    """What besides the config shapes a run: the seeds' content, the probes and a separate judge model."""
    out: dict[str, Any] = {"seeds": [e.content_hash for e in seeds], "probes": probes.model_dump(mode="json")}
    if judge_model:
        out["judge"] = judge_model
    return out


def _flat_params(cfg: ExperimentConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = value

    walk("", cfg.model_dump(mode="json"))
    return out
