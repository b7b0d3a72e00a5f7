"""The evolution loop: select, breed, evaluate concurrently, keep survivors, repeat.

Reproducible and resumable by construction:

- one ``random.Random(config.seed)`` drives every choice, and only the main
  thread draws from it, in a fixed order;
- a run always replays from generation 0: a slot whose individual is already
  recorded is read back (no fusion, no model call), so an interrupted run
  continues where it stopped and ends exactly where an uninterrupted run ends;
- records are written from the main thread, one transaction per individual,
  idempotent by natural keys.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from furnace.domain.canonical import content_key
from furnace.domain.elixir import Elixir, ElixirRef
from furnace.domain.errors import BudgetExceeded, FurnaceError
from furnace.domain.render import render_prompt
from furnace.evolution.config import ExperimentConfig
from furnace.evolution.evaluate import evaluate_agent, failed_evaluation
from furnace.evolution.metering import MeteredLLM, completion_totals, error_totals
from furnace.evolution.records import ExperimentRecord, ExperimentResults, GenerationRecord, IndividualRecord
from furnace.evolution.report import ExperimentReport, build_report
from furnace.evolution.selection import OperatorBoard, choose_operator, survivors, tournament
from furnace.evolution.tracker import NullTracker, Span, Tracker, start_trace
from furnace.evolution.units import ThreadUnitRunner, Unit, UnitRunner
from furnace.evolution.writer import RecordWriter
from furnace.llm.cache import CallTotals
from furnace.llm.seam import LLM, Completion, LLMRequest
from furnace.scoring.base import persona_inputs
from furnace.scoring.fitness import SCORERS
from furnace.scoring.probes import ProbeSet


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


@dataclass(frozen=True)
class Plan:
    """One slot of a generation: what to make (drawn in the main thread)."""

    slot: int
    operator: str
    parents: tuple[IndividualRecord, ...] = ()
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    elixir: Elixir | None = None  # generation 0: the library elixir itself


@dataclass(frozen=True)
class Progress:
    """A progress event for the CLI's bar."""

    generation: int
    generations: int
    done: int
    total: int
    best: float
    message: str = ""


class _CountingLLM:
    """Counts one unit's calls and tokens (per-individual accounting) and, when the unit is
    traced, records each call as a span under ``parent`` (task, input/output summaries, tokens)."""

    def __init__(self, inner: LLM, parent: Span | None = None) -> None:
        self.inner, self.model_name = inner, inner.model_name
        self.spent = CallTotals()
        self.parent = parent
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> Completion:
        span = None
        if self.parent is not None:
            last = request.messages[-1].content if request.messages else ""
            span = self.parent.child(f"model {request.task.value}", {"message": last[:200], "seed": request.seed})
        try:
            c = self.inner.complete(request)
        except Exception as err:
            if span is not None:
                span.end(error=f"{err.__class__.__name__}: {err}"[:300])
            with self._lock:
                self.spent = self.spent.plus(error_totals(err))
            raise
        if span is not None:
            span.end(
                {
                    "text": c.text[:200],
                    "tokens": c.usage.total_tokens,
                    "cached": c.cached,
                    "latency_s": round(c.latency_s, 4),
                }
            )
        with self._lock:
            self.spent = self.spent.plus(completion_totals(c))
        return c


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass
class Evolution:
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

    def __post_init__(self) -> None:
        self.seeds = list(self.seeds)[: self.config.population]
        self.metered = MeteredLLM(self.llm, concurrency=self.config.concurrency, budget=self.config.budget)
        self.experiment_id = self.config.experiment_id(self.llm.model_name, experiment_inputs(self.seeds, self.probes))
        self.board = OperatorBoard(dict(self.config.operators), adapt=self.config.adapt_operators)
        self._embed_lock = threading.Lock()
        self._vectors: dict[str, list[float]] = {}
        self.status = "finished"

    # --- helpers ---------------------------------------------------------

    def _vector(self, agent_id: str, prompt: str) -> list[float] | None:
        if self.embedder is None:
            return None
        with self._embed_lock:
            if agent_id not in self._vectors:
                self._vectors[agent_id] = self.embedder.embed([prompt])[0]
            return self._vectors[agent_id]

    def _emit(self, **kwargs: Any) -> None:
        if self.progress is not None:
            self.progress(Progress(**kwargs))

    def _plan(
        self, population: Sequence[IndividualRecord], rng: random.Random, weights: dict[str, float]
    ) -> list[Plan]:
        plans = []
        size = self.config.selection.tournament_size
        for slot in range(self.config.children_per_generation):
            op = choose_operator(weights, rng)
            first = tournament(population, size, rng)
            parents: tuple[IndividualRecord, ...] = (first,)
            if op != "mutation":
                second = first
                for _ in range(5):  # a distinct partner if the population allows
                    second = tournament(population, size, rng)
                    if second.agent_id != first.agent_id:
                        break
                parents = (first, second) if second.agent_id != first.agent_id else (first,)
                if len(parents) == 1:
                    op = "mutation"
            params = {"rate": self.config.mutation_rate} if op == "mutation" else {}
            plans.append(Plan(slot, op, parents, rng.randrange(2**31), params))
        return plans

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

    def evaluate_unit(
        self, generation: int, plan: Plan, population: Sequence[IndividualRecord], known: dict[str, IndividualRecord]
    ) -> IndividualRecord:
        """One individual: breed (unless a library seed), evaluate, build its record (no write).
        Traced (when the tracker traces) as a root span with a fusion and an evaluation step."""
        root = start_trace(
            self.tracker,
            f"individual g{generation} s{plan.slot}",
            {
                "experiment": self.experiment_id,
                "generation": generation,
                "slot": plan.slot,
                "operator": plan.operator,
                "parents": [p.agent_id for p in plan.parents],
            },
        )
        try:
            record = self._evaluate_unit(generation, plan, population, known, root)
        except BaseException as err:
            if root is not None:
                root.end(error=f"{err.__class__.__name__}: {err}"[:300])
            raise
        if root is not None:
            root.end({"agent_id": record.agent_id, "fitness": record.fitness, "failures": record.failures})
        return record

    def _evaluate_unit(
        self,
        generation: int,
        plan: Plan,
        population: Sequence[IndividualRecord],
        known: dict[str, IndividualRecord],
        root: Span | None,
    ) -> IndividualRecord:
        llm = _CountingLLM(self.metered)
        if plan.elixir is not None:
            elixir, prompt = plan.elixir, render_prompt(plan.elixir)
            agent_id, lineage_hash, parents = elixir.id, None, tuple[str, ...]()
        else:
            parents = tuple(p.agent_id for p in plan.parents)
            refs = [Elixir.model_validate(p.elixir).ref for p in plan.parents]
            step = root.child(f"fuse {plan.operator}", {"seed": plan.seed, **plan.params}) if root else None
            llm.parent = step
            try:
                bred = self.breeder(refs, plan.operator, plan.seed, plan.params, llm)
            except BudgetExceeded:
                raise
            except FurnaceError as err:
                if step is not None:
                    step.end(error=str(err)[:300])
                ev = failed_evaluation(f"fusion failed: {err}", self.config.scorers)
                return self._record(
                    generation, plan, f"failed-g{generation}-s{plan.slot}", parents, None, {}, "", ev, llm
                )
            if step is not None:
                step.end({"agent_id": bred.agent_id, "lineage_hash": bred.lineage_hash})
            if bred.agent_id in known:  # same child already evaluated in this generation
                return known[bred.agent_id]
            elixir, prompt, agent_id, lineage_hash = bred.elixir, bred.system_prompt, bred.agent_id, bred.lineage_hash
        peers = (
            [(e.id, render_prompt(e)) for e in self.seeds]
            if plan.elixir is not None
            else [(p.agent_id, p.system_prompt) for p in population]
        )
        others = [v for pid, text in peers if pid != agent_id and (v := self._vector(pid, text)) is not None]
        step = root.child("evaluate", {"agent_id": agent_id, "probes": len(self.probes.probes)}) if root else None
        llm.parent = step
        ev = evaluate_agent(
            llm,
            elixir,
            prompt,
            self.probes,
            self.config.scorers,
            seed=self.config.seed,
            vector=self._vector(agent_id, prompt),
            population_vectors=others,
            parallel=min(4, self.config.concurrency),
        )
        if step is not None:
            step.end({"fitness": ev.fitness, "objectives": ev.objectives, "failures": len(ev.failure_reasons)})
        return self._record(generation, plan, agent_id, parents, lineage_hash, persona_inputs(elixir), prompt, ev, llm)

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
            calls=llm.spent.calls,
            tokens=llm.spent.total_tokens,
            cost_usd=round(llm.spent.cost_usd, 9),
        )

    def _run_generation(
        self, generation: int, plans: list[Plan], population: Sequence[IndividualRecord]
    ) -> list[IndividualRecord]:
        """Evaluate every slot (recorded ones read back), save new records from this thread."""
        existing = self._recorded.get(generation, [])
        by_slot = {r.slot: r for r in existing}
        known = {r.agent_id: r for r in existing}
        out: dict[int, IndividualRecord] = {p.slot: by_slot[p.slot] for p in plans if p.slot in by_slot}
        todo = [p for p in plans if p.slot not in out]
        best = max((r.fitness for r in [*out.values(), *population]), default=0.0)
        self._emit(
            generation=generation, generations=self.config.generations, done=len(out), total=len(plans), best=best
        )
        units = [
            Unit(
                self.unit_key(generation, p),
                p.slot,
                partial(self.evaluate_unit, generation, p, population, known),
                (generation, p, tuple(population), dict(known)),
            )
            for p in todo
        ]
        runner = self.unit_runner or ThreadUnitRunner(min(max(self.config.concurrency * 2, 1), 64))
        for unit, record in runner(units):
            if record.experiment_id == self.experiment_id and record.slot == unit.slot:
                self._writer.put(record)  # saved in the background, batched, in order
            out[unit.slot] = record
            best = max(best, record.fitness)
            self._emit(
                generation=generation, generations=self.config.generations, done=len(out), total=len(plans), best=best
            )
        return [out[p.slot] for p in plans]

    # --- the loop ---------------------------------------------------------

    def run(self) -> ExperimentReport:
        """Run (or resume) the experiment and return its report."""
        cfg = self.config
        self.results.start_experiment(
            ExperimentRecord(self.experiment_id, cfg.name, cfg.model_dump(mode="json"), cfg.seed, self.llm.model_name)
        )
        self.tracker.start_experiment(
            self.experiment_id,
            _flat_params(cfg),
            {"furnace.experiment_id": self.experiment_id, "furnace.model": self.llm.model_name},
        )
        rng = random.Random(cfg.seed)
        self._writer = RecordWriter(self.results)
        self._recorded: dict[int, list[IndividualRecord]] = {}
        for rec in self.results.individuals(self.experiment_id):  # one read: what a previous run finished
            self._recorded.setdefault(rec.generation, []).append(rec)
        population: list[IndividualRecord] = []
        history: list[GenerationRecord] = []
        plans = [Plan(i, "seed", elixir=e) for i, e in enumerate(self.seeds)]
        generation = 0
        try:
            while generation <= cfg.generations:
                before = self.metered.meter
                weights = self.board.weights()
                if generation > 0:
                    reason = self.metered.exhausted(extra_calls=0)
                    if reason:
                        self.status = f"stopped: {reason}"
                        break
                    plans = self._plan(population, rng, weights)
                children = self._run_generation(generation, plans, population)
                if generation == 0:
                    population = survivors([], children, cfg.population, 0)
                else:
                    fitness = {p.agent_id: p.fitness for p in population}
                    seen: set[str] = set()
                    for child in children:
                        if child.agent_id in seen:
                            continue
                        seen.add(child.agent_id)
                        parent_best = max((fitness.get(p, 0.0) for p in child.parents), default=0.0)
                        self.board.record(
                            child.operator, child.fitness, parent_best, failed=child.failures > 0 and not child.scores
                        )
                    viable = [c for c in children if c.scores]  # a failed fusion never displaces a member
                    population = survivors(population, viable, cfg.population, cfg.selection.elitism)
                history.append(
                    self._finish_generation(generation, population, weights, self.metered.meter.minus(before))
                )
                generation += 1
        except BudgetExceeded as err:
            self.status = f"stopped: {err}"
        finally:
            self._writer.flush()  # everything finished is on disk before the run reports or dies
        report = build_report(self, population, history)
        self.results.finish_experiment(self.experiment_id, self.status, report.summary())
        self.tracker.finish(self.status, report.tags(), report.artifacts(), report.totals)
        return report

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


def experiment_inputs(seeds: Sequence[Elixir], probes: ProbeSet) -> dict[str, Any]:
    """What besides the config shapes a run: the seeds' content and the probes."""
    return {"seeds": [e.content_hash for e in seeds], "probes": probes.model_dump(mode="json")}


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
