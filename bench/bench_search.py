"""Search benchmark: which search finds personas that hold on questions it never saw, at an equal budget?

Hidden targets (``bench/search_targets.yaml``, or ``--targets FILE``): library seeds and a probe set
whose brief and per-probe rubrics only the judge sees, split into **train** (the only probes whose
feedback an operator reads), **validation** (the final pick among a method's candidates) and **test**
(scored only for this report; no operator, no selection ever sees it). Every method starts from the
same seeds, whose evaluation it pays for, and is stopped at the same budget of model calls; the calls it
is billed are the calls it reports:

- ``best-seed``: the seeds scored on train, the best of them unchanged (a trivial baseline);
- ``copy-feedback``: the best seed with the judge's train feedback pasted in, one principle per train
  probe ("When asked about <the probe's words>, <the feedback's words>") and its tone, length and
  format clauses applied; up to three rounds, no search (the trivial baseline the offline world must
  not reward on test);
- ``random``: children of random seeds (crossover or mutation), no selection;
- ``hill``: mutation-only hill climbing from the best seed (7 mutants per step, the best kept if better);
- ``evolution``: the experiment loop with the experiment defaults;
- ``evo+reflect``: with the reflective operator (crossover 0.4, mutation 0.2, reflect 0.4; a tournament
  of 3 and one elite); ``evo+reflect+pareto`` (not run by default): with per-probe Pareto selection;
- ``gepa``: ``gepa.optimize`` (the optional ``bench`` extra) with ``trainset`` = train and ``valset`` =
  validation, furnace's model seam as its task model (REPLY + JUDGE) and reflection model (REFLECT).

Every method sees the same split. The experiment loop (``evolution``, ``evo+reflect``) is given every
probe marked with its split: it scores each individual on validation and selects there (its fitness),
reads feedback from train minibatches (a reflected child and its parent), and its champion is its best by
validation, on the whole budget. Its own held-out scoring is switched off, so no method pays for test.
``random``, ``hill`` and both baselines search on train and then score their best ``VALIDATE_TOP``
candidates by train on validation (billed, out of the same budget: the search is stopped that many
validation evaluations early); the best there is the champion. gepa picks its own champion on its valset,
on the whole budget. The bench then scores every champion on **test** (the loop's and gepa's on train too)
the same way, through an unbilled model, outside every method's budget: that is what it reports (median
and IQR over seeds, paired win rates), beside its train fitness and the calls billed, and how many calls
each method needed to reach gepa's test median at the budget (the first point at which its current best
reaches it on test). A loop is stopped at the budget (it reserves the budget unit by unit in plan order
and stops before the first unit that does not fit: the same seed stops at the same unit at any
concurrency); its fitness comes from the generations it completed (the children of a generation the
budget ended before its last child are billed but not credited). Effective concurrency (calls x 50
ms / wall, the first seed with the latency-injected fake) is measured as before for furnace's loop against
gepa's.

Fitness is the weighted mean of fidelity 0.5, tone 0.3 and constraints 0.2 against the target; offline,
the optimiser on a synthetic landscape, not language quality (docs/experiments.md).

``python -m bench search [--targets FILE] [--seeds A-B] [--budget N] [--methods a,b] [--json]``; no
flags: the shipped targets, seeds 1-10, budget 400, every method. The exit code follows the targets.
``python -m bench.bench_search --ci`` runs the small variant the tests use; ``--steps`` and ``--where``
print the diagnoses in docs/experiments.md. With ``FURNACE_MODEL`` set the same targets run against that
model (slow and billed; not in CI).
"""

from __future__ import annotations

import json
import os
import random
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.search_targets import DEFAULT_FILE, Target, load_targets
from furnace import resources
from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.errors import BudgetExceeded, FurnaceError, InputError
from furnace.domain.render import render_prompt
from furnace.evolution.config import parse_config
from furnace.evolution.evaluate import Evaluation, evaluate_agent
from furnace.evolution.local import memory_evolution
from furnace.llm.cache import CachedLLM
from furnace.llm.fakes import SlowLLM
from furnace.llm.seam import Completion, LLMRequest
from furnace.scoring.feedback import clause_slot, parse_clauses
from furnace.scoring.probes import ProbeSet

LATENCY = 0.05
CONCURRENCY = 16  # model calls in flight (furnace's knob; gepa's loop is sequential by design)
BATCH = 7  # children per step for random fusion and hill climbing (= an evolution generation's 7 children)
SCORERS = {"fidelity": 0.5, "tone": 0.3, "constraints": 0.2}
CALLS_PER_PROBE = 3  # a reply and two judge calls (fidelity, tone); constraints is a rule
VALIDATE_TOP = 3  # candidates (best by train) each method scores on validation for its final pick
COPY_ROUNDS = 3
OUT = Path(os.environ.get("FURNACE_BENCH_OUT") or Path(__file__).resolve().parent / "out")
METHODS = ("best-seed", "copy-feedback", "random", "hill", "evolution", "evo+reflect", "gepa")
EXTRA = ("evo+reflect+pareto",)
SELECTS_ON_VALIDATION = ("gepa", "evolution", "evo+reflect", "evo+reflect+pareto")  # their own pick, whole budget
OPERATORS: dict[str, dict[str, float] | None] = {
    "evolution": None,  # the experiment defaults (what a config that names no operators gets)
    "evo+reflect": {"crossover": 0.4, "mutation": 0.2, "reflect": 0.4},
    "evo+reflect+pareto": {"crossover": 0.4, "mutation": 0.2, "reflect": 0.4},
}
SELECTION: dict[str, dict[str, Any]] = {
    "evo+reflect": {"tournament_size": 3, "elitism": 1},
    "evo+reflect+pareto": {"method": "pareto", "tournament_size": 3, "elitism": 1},
}


@dataclass
class RunResult:
    """One (target, method, seed) run: its champion's fitness on each split and the calls it was billed."""

    target: str
    method: str
    seed: int
    train: float
    validation: float
    test: float
    calls: int
    wall_s: float
    latency_s: float
    curve: list[tuple[int, float]] = field(default_factory=list)  # (calls billed, current best's test fitness)
    operators: dict[str, dict[str, float]] = field(default_factory=dict)
    status: str = "finished"
    champion: str = ""

    @property
    def concurrency(self) -> float | None:
        """Effective concurrency: calls x latency / wall over the whole run (only with injected latency)."""
        return self.calls * self.latency_s / self.wall_s if self.latency_s and self.wall_s else None


@dataclass
class _Candidate:
    calls: int  # calls billed when it was scored
    elixir: Elixir
    score: float  # what the method ranks it by: train fitness; validation for the loop and gepa


class _Counting:
    """The model, counting the calls it answers that are not cache hits (the validation bill)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_name, self.calls = inner, inner.model_name, 0
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> Completion:
        done = self.inner.complete(request)
        if not done.cached:
            with self._lock:
                self.calls += 1
        return done


def _library() -> dict[str, Elixir]:
    found = [
        parse_elixir(yaml.safe_load(p.read_text(encoding="utf-8")))
        for p in sorted(resources.LIBRARY_DIR.glob("*.yaml"))
    ]
    return {e.id: e for e in found}


def targets_from(path: Path | str = DEFAULT_FILE) -> dict[str, Target]:
    """The targets of a targets file, checked against the library."""
    return load_targets(path, known=set(_library()))


def _model(latency: float) -> Any:
    """The configured model (``FURNACE_MODEL`` with its api base and key; offline when unset) behind an
    in-memory response cache; the 50 ms fake latency is added to the offline engine only."""
    from furnace.runtime import build_llm
    from furnace.settings import FurnaceSettings

    settings = FurnaceSettings()
    llm = build_llm(settings)
    return CachedLLM(SlowLLM(llm.inner, latency)) if latency and not settings.model else llm


def validation_reserve(target: Target) -> int:
    """The calls a furnace method keeps back for its final pick on validation."""
    return VALIDATE_TOP * len(target.part("validation").probes) * CALLS_PER_PROBE


def _setup(
    target: Target, method: str, seed: int, budget: int, latency: float, generations: int = 200
) -> tuple[Any, Any, list[Elixir]]:
    """The experiment (on every probe of the target, each marked with its split; metered at the method's
    search budget), the model behind it and the seeds. The loop then scores its individuals on validation
    (its fitness; feedback from train minibatches) and picks its own champion; its held-out scoring is
    switched off: the bench scores every method's champion on train and test itself, outside the budget."""
    library = _library()
    seeds = [library[i] for i in target.seeds]
    search_budget = budget if method in SELECTS_ON_VALIDATION else budget - validation_reserve(target)
    data: dict[str, Any] = {
        "name": f"search-{target.name}-{method.replace('+', '-')}",
        "seed": seed,
        "population": len(seeds),
        "generations": generations,  # 200: the budget ends the run
        "selection": SELECTION.get(method, {}),
        "scorers": SCORERS,
        "concurrency": CONCURRENCY,
        "samples_per_probe": 1,  # one reply per probe, as every other method here
        "reevaluate_top": 0,
        "budget": {"max_calls": max(1, search_budget)},
    }
    operators = OPERATORS.get(method)
    if operators is not None:
        data["operators"] = operators
    cfg = parse_config(data)  # the other methods use only its seed, budget and mutation rate
    model = _model(latency)
    evo = memory_evolution(cfg, seeds, llm=model, probes=target.marked())
    evo.score_held_out = False  # no held-out calls inside the loop: one yardstick (the bench's) for every method
    return evo, model, seeds


def _evaluate(llm: Any, elixir: Elixir, probes: ProbeSet, seed: int) -> Evaluation:
    return evaluate_agent(llm, elixir, render_prompt(elixir), probes, SCORERS, seed=seed, parallel=4)


def _spent(evo: Any) -> int:
    return int(evo.metered.meter.model_calls)


# --- the methods: each returns its candidates (in the order they were scored) and operator figures -----


def _seed_population(evo: Any, seeds: Sequence[Elixir], pool: Any) -> list[tuple[Elixir, Evaluation]]:
    train = evo.train
    evaluated = list(pool.map(lambda e: (e, _evaluate(evo.metered, e, train, evo.config.seed)), seeds))
    return evaluated


def _seeds_as_candidates(evo: Any, evaluated: Sequence[tuple[Elixir, Evaluation]]) -> list[_Candidate]:
    calls = _spent(evo)
    return [_Candidate(calls, e, ev.fitness) for e, ev in evaluated]


def _best_seed(evo: Any, seeds: Sequence[Elixir]) -> tuple[list[_Candidate], dict[str, Any], str]:
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        evaluated = _seed_population(evo, seeds, pool)
    return _seeds_as_candidates(evo, evaluated), {}, "finished"


_HAN_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")
_EN_WORD = re.compile(r"[a-z][a-z'-]{3,}")
_NEGATION = re.compile(r"^(?:does not|doesn't|fails to|never|没有|没|未)\s*", re.I)
_COPY_STEP = {"tone": 0.2, "conciseness": 0.2}


def _probe_words(message: str, language: str) -> str:
    """What a copier ties a pasted principle to: two content words (en) or the longest Han phrase (zh)."""
    if language == "zh":
        runs = _HAN_RUN.findall(message)
        return max(runs, key=len)[:6] if runs else message[:6]
    words = [w for w in _EN_WORD.findall(message.casefold()) if w not in {"what", "does", "should", "with"}]
    return " ".join(dict.fromkeys(words[:2]))


def pasted(evo: Any, parent: Elixir, ev: Evaluation, round_: int) -> Elixir | None:
    """The parent with its train feedback pasted in: per probe one principle holding that probe's content
    clauses in the judge's words (the negation dropped), tied to the probe's words; tone, length and format
    clauses applied as fields. None when the feedback asks for nothing."""
    language = parent.language
    data = parent.model_dump(mode="json", exclude={"content_hash", "version", "created_at", "deleted_at"})
    principles, tone, limits = list(data["principles"]), dict(data["tone"]), dict(data["constraints"])
    messages = {p.id: p.message for p in evo.train.probes}
    style: dict[str, tuple[str, int]] = {}
    for probe in sorted(messages):
        content: list[str] = []
        for row in ev.scores:
            if row.probe != probe:
                continue
            for category, detail in parse_clauses(row.feedback):
                if category in ("gap", "missing"):
                    content.append(_NEGATION.sub("", detail))
                elif category == "avoid":
                    content.append(("不要" if language == "zh" else "leave out: ") + detail)
                else:
                    slot = clause_slot(f"{category}: {detail}")
                    if slot is not None:
                        style.setdefault(slot[0], (detail, slot[1]))
        if content:
            joined = "；".join(content) if language == "zh" else "; ".join(content)
            words = _probe_words(messages[probe], language)
            text = f"谈到{words}时，{joined}。" if language == "zh" else f"When asked about {words}, {joined}."
            if text not in principles and len(principles) < 40:
                principles.insert(0, text[:600])
    for slot, (detail, direction) in style.items():
        if slot.startswith("tone."):
            dim = slot.split(".", 1)[1]
            tone[dim] = round(min(1.0, max(0.0, tone[dim] + 0.2 * direction)), 3)
        elif slot == "constraints.must_use_markdown":
            limits["must_use_markdown"] = direction > 0
        elif slot == "constraints.max_length":
            limits["max_length"] = int(detail.split()[-1])
    data.update(principles=principles, tone=tone, constraints=limits, id=f"{parent.id}-copy{round_}")
    child = parse_elixir(data)
    return None if child.content_hash == parent.content_hash else child


def _copy_feedback(evo: Any, seeds: Sequence[Elixir]) -> tuple[list[_Candidate], dict[str, Any], str]:
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        evaluated = _seed_population(evo, seeds, pool)
    candidates = _seeds_as_candidates(evo, evaluated)
    current, ev = max(evaluated, key=lambda pair: (pair[1].fitness, pair[0].id))
    status = "finished"
    for round_ in range(1, COPY_ROUNDS + 1):
        child = pasted(evo, current, ev, round_)
        if child is None:
            status = f"round {round_}: nothing left to paste"
            break
        try:
            ev = _evaluate(evo.metered, child, evo.train, evo.config.seed)
        except BudgetExceeded:
            status = f"stopped at the budget in round {round_}"
            break
        candidates.append(_Candidate(_spent(evo), child, ev.fitness))
        current = child
    return candidates, {}, status


def _breed_and_score(evo: Any, parents: Sequence[Elixir], op: str, seed: int) -> tuple[Elixir, Evaluation] | None:
    params = {"rate": evo.config.mutation_rate} if op == "mutation" else {}
    try:
        bred = evo.breeder([p.ref for p in parents], op, seed, params, evo.metered)
    except BudgetExceeded:
        raise
    except FurnaceError:
        return None  # a refused fusion: its calls are spent, nothing to score
    return bred.elixir, _evaluate(evo.metered, bred.elixir, evo.train, evo.config.seed)


def _complete_batch(futures: Sequence[Any]) -> list[Any] | None:
    """Every future's result, or None when the budget ran out inside the batch (the batch is then
    discarded whole: which of its members finished would depend on thread timing)."""
    outs, cut = [], False
    for fut in futures:
        try:
            outs.append(fut.result())
        except BudgetExceeded:
            cut = True
    return None if cut else outs


def _random(evo: Any, seeds: Sequence[Elixir]) -> tuple[list[_Candidate], dict[str, Any], str]:
    rng = random.Random(evo.config.seed)
    stats = {"children": 0, "successes": 0, "failures": 0}
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        evaluated = _seed_population(evo, seeds, pool)
        candidates = _seeds_as_candidates(evo, evaluated)
        scored = {e.id: ev.fitness for e, ev in evaluated}
        while True:
            batch = []
            for _ in range(BATCH):
                op = rng.choice(["crossover", "mutation"])
                parents = rng.sample(list(seeds), 2 if op == "crossover" else 1)
                batch.append((parents, op, rng.randrange(2**31)))
            outs = _complete_batch([pool.submit(_breed_and_score, evo, p, op, s) for p, op, s in batch])
            if outs is None:
                break
            calls = _spent(evo)
            for (parents, _, _), out in zip(batch, outs, strict=True):
                stats["children"] += 1
                if out is None:
                    stats["failures"] += 1
                    continue
                candidates.append(_Candidate(calls, out[0], out[1].fitness))
                stats["successes"] += int(out[1].fitness > max(scored[p.id] for p in parents))
    return candidates, {"random fusion": {**stats, "success_rate": _rate(stats)}}, "finished"


def _hill(evo: Any, seeds: Sequence[Elixir]) -> tuple[list[_Candidate], dict[str, Any], str]:
    rng = random.Random(evo.config.seed)
    stats = {"children": 0, "successes": 0, "failures": 0}
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        evaluated = _seed_population(evo, seeds, pool)
        candidates = _seeds_as_candidates(evo, evaluated)
        current, current_ev = max(evaluated, key=lambda pair: (pair[1].fitness, pair[0].id))
        while True:
            seeds_ = [rng.randrange(2**31) for _ in range(BATCH)]
            outs = _complete_batch([pool.submit(_breed_and_score, evo, [current], "mutation", s) for s in seeds_])
            if outs is None:
                break
            calls = _spent(evo)
            best_child = None
            for out in outs:
                stats["children"] += 1
                if out is None:
                    stats["failures"] += 1
                    continue
                candidates.append(_Candidate(calls, out[0], out[1].fitness))
                if out[1].fitness > current_ev.fitness:
                    stats["successes"] += 1
                    if best_child is None or out[1].fitness > best_child[1].fitness:
                        best_child = out
            if best_child is not None:
                current, current_ev = best_child
    return candidates, {"mutation": {**stats, "success_rate": _rate(stats)}}, "finished"


def _evolution(evo: Any) -> tuple[list[_Candidate], dict[str, Any], str]:
    """The loop, stopped at the search budget; credited with the generations it completed (a saved
    generation is complete), billed every call it made. A candidate's score is its fitness (validation)."""
    report = evo.run()
    gens = sorted(evo.results.generations(evo.experiment_id), key=lambda g: g.generation)
    records = evo.results.individuals(evo.experiment_id)
    calls, candidates = 0, []
    for gen in gens:
        calls += gen.calls - gen.cached_calls
        for r in records:
            if r.generation == gen.generation and r.has_score:
                candidates.append(_Candidate(calls, parse_elixir(r.elixir), r.fitness))
    credited = gens[-1].generation if gens else -1
    fitness = {r.agent_id: r.fitness for r in records}
    ops: dict[str, dict[str, float]] = {}
    for r in records:
        if not 0 < r.generation <= credited:
            continue
        stat = ops.setdefault(r.operator, {"children": 0, "successes": 0, "failures": 0})
        stat["children"] += 1
        stat["failures"] += int(not r.scores)
        stat["successes"] += int(
            bool(r.scores) and r.fitness > max((fitness.get(p, 0.0) for p in r.parents), default=0)
        )
    status = f"{report.status}; credited generations 0-{credited}"
    return candidates, {k: {**v, "success_rate": _rate(v)} for k, v in ops.items()}, status


def _rate(stats: dict[str, Any]) -> float:
    return round(stats["successes"] / stats["children"], 4) if stats["children"] else 0.0


def gepa_available() -> bool:
    try:
        import gepa  # noqa: F401
    except ImportError:
        return False
    return True


def _gepa(evo: Any, seeds: Sequence[Elixir], target: Target) -> tuple[list[_Candidate], dict[str, Any], str, float]:
    """gepa.optimize with a furnace adapter: the candidate is the persona (elixir JSON); trainset = the
    train probes (its minibatches and their traces feed reflection), valset = the validation probes (its
    candidate pool and champion); proposals come from the REFLECT task. Returns the candidates in the order
    gepa scored them on its valset (their ``score`` is the valset score), the operator figures,
    the status and the champion's valset score."""
    import gepa
    from gepa.core.adapter import EvaluationBatch

    from furnace.fusion.operators.reflect import apply_edits, build_reflect_request, parse_reflect
    from furnace.scoring.feedback import reflection_brief

    train, valid = target.part("train"), target.part("validation")
    by_id = {p.id: p for p in [*train.probes, *valid.probes]}
    messages = {p.id: p.message for p in train.probes}
    stats = {"children": 0, "successes": 0, "failures": 0}
    on_valset: list[_Candidate] = []
    valset_ids = {p.id for p in valid.probes}

    class Adapter:
        def evaluate(self, batch: list[str], candidate: dict[str, str], capture_traces: bool = False) -> Any:
            elixir = parse_elixir(json.loads(candidate["persona"]))
            one = [train.model_copy(update={"probes": [by_id[pid]]}) for pid in batch]
            with ThreadPoolExecutor(min(10, len(batch))) as pool:  # like gepa's batch completion
                evals = list(pool.map(lambda ps: _evaluate(evo.metered, elixir, ps, evo.config.seed), one))
            scores = [ev.fitness for ev in evals]
            if set(batch) == valset_ids:  # a valset evaluation: gepa's candidate pool
                on_valset.append(_Candidate(_spent(evo), elixir, sum(scores) / len(scores)))
            traces = [list(ev.scores) for ev in evals] if capture_traces else None
            return EvaluationBatch(outputs=[None] * len(batch), scores=scores, trajectories=traces)

        def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any, components: list[str]) -> Any:
            rows = [row for trace in eval_batch.trajectories or [] for row in trace]
            return {"persona": [{"rows": rows}]}

        def propose_new_texts(self, candidate: dict[str, str], dataset: Any, components: list[str]) -> dict[str, str]:
            parent = parse_elixir(json.loads(candidate["persona"]))
            rows = [row for record in dataset["persona"] for row in record["rows"]]
            brief = reflection_brief(rows, messages, weakest=2)
            stats["children"] += 1
            proposal = parse_reflect(evo.metered.complete(build_reflect_request(parent, brief, seed=evo.config.seed)))
            data, _ = apply_edits(parent, proposal["edits"])
            if not data:
                stats["failures"] += 1
                return dict(candidate)
            child = parse_elixir({**data, "id": f"gepa-{stats['children']}"})
            return {"persona": json.dumps(child.model_dump(mode="json", exclude={"created_at", "deleted_at"}))}

    class Stop:
        def __call__(self, state: Any) -> bool:
            return evo.metered.exhausted(extra_calls=0) is not None

    class Quiet:
        def log(self, message: str) -> None:
            pass

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        evaluated = _seed_population(evo, seeds, pool)
    start, _ = max(evaluated, key=lambda pair: (pair[1].fitness, pair[0].id))
    seed_text = json.dumps(start.model_dump(mode="json", exclude={"created_at", "deleted_at"}))
    status = "finished"
    try:
        gepa.optimize(
            seed_candidate={"persona": seed_text},
            trainset=[p.id for p in train.probes],
            valset=sorted(valset_ids),
            adapter=Adapter(),
            stop_callbacks=[Stop()],
            reflection_minibatch_size=2,
            seed=evo.config.seed,
            logger=Quiet(),
            display_progress_bar=False,
            raise_on_exception=True,
            skip_perfect_score=False,
        )
    except BudgetExceeded:  # the budget ends gepa's loop mid-step
        status = "stopped at the budget"
    stats["successes"] = max(0, len({c.elixir.content_hash for c in on_valset}) - 1)  # accepted beyond the seed
    best = max(on_valset, key=lambda c: c.score) if on_valset else _Candidate(_spent(evo), start, 0.0)
    return on_valset, {"reflect (gepa)": {**stats, "success_rate": _rate(stats)}}, status, best.score


# --- one run: search, the final pick on validation, the report on test --------------------------------


def _distinct_best(candidates: Sequence[_Candidate], n: int) -> list[_Candidate]:
    out: list[_Candidate] = []
    seen: set[str] = set()
    for c in sorted(candidates, key=lambda c: (-c.score, c.calls, c.elixir.id)):
        if c.elixir.content_hash not in seen:
            seen.add(c.elixir.content_hash)
            out.append(c)
        if len(out) == n:
            break
    return out


def _curve(candidates: Sequence[_Candidate], test_of: Callable[[Elixir], float]) -> list[tuple[int, float]]:
    """(calls billed, test fitness of the best so far by the method's own score) at each new best."""
    curve: list[tuple[int, float]] = []
    best: _Candidate | None = None
    for c in sorted(candidates, key=lambda c: c.calls):
        if best is None or c.score > best.score:
            best = c
            curve.append((c.calls, round(test_of(c.elixir), 6)))
    return curve


def run_one(target: Target, method: str, seed: int, budget: int, latency: float, generations: int = 200) -> RunResult:
    """One method on one target with one seed, at ``budget`` model calls (the loop: at most ``generations``)."""
    evo, model, seeds = _setup(target, method, seed, budget, latency, generations)
    started = time.perf_counter()
    validation_score: float | None = None
    if method in OPERATORS:
        candidates, operators, status = _evolution(evo)
    elif method == "random":
        candidates, operators, status = _random(evo, seeds)
    elif method == "hill":
        candidates, operators, status = _hill(evo, seeds)
    elif method == "best-seed":
        candidates, operators, status = _best_seed(evo, seeds)
    elif method == "copy-feedback":
        candidates, operators, status = _copy_feedback(evo, seeds)
    elif method == "gepa":
        candidates, operators, status, validation_score = _gepa(evo, seeds, target)
    else:
        raise ValueError(f"unknown method {method!r}")
    calls = _spent(evo)
    if method in SELECTS_ON_VALIDATION:  # its candidates carry their validation score: the method's own pick
        champion = max(candidates, key=lambda c: (c.score, -c.calls)) if candidates else None
        if method != "gepa":
            validation_score = champion.score if champion else 0.0
        train_fit = 0.0  # scored below, unbilled: these methods score their candidates on train partly or not at all
    else:  # the best few by train, scored on validation (billed); the best there is the champion
        counting = _Counting(model)
        valid = target.part("validation")
        top = _distinct_best(candidates, VALIDATE_TOP)
        scored = [(_evaluate(counting, c.elixir, valid, seed).fitness, c) for c in top]
        validation_score, champion = max(scored, key=lambda pair: (pair[0], pair[1].score, -pair[1].calls))
        calls += counting.calls
        train_fit = champion.score
    wall = time.perf_counter() - started
    test_set = target.part("test")
    memo: dict[str, float] = {}

    def test_of(elixir: Elixir) -> float:  # reporting only: never billed, never seen by the method
        if elixir.content_hash not in memo:
            memo[elixir.content_hash] = _evaluate(model, elixir, test_set, seed).fitness
        return memo[elixir.content_hash]

    curve = _curve(candidates, test_of)
    final_test = test_of(champion.elixir) if champion else 0.0
    curve.append((calls, round(final_test, 6)))
    if method in SELECTS_ON_VALIDATION and champion is not None:  # the champion on train, unbilled (report only)
        train_fit = _evaluate(model, champion.elixir, target.part("train"), seed).fitness
    return RunResult(
        target.name,
        method,
        seed,
        round(train_fit, 6),
        round(validation_score or 0.0, 6),
        round(final_test, 6),
        calls,
        wall,
        latency,
        curve,
        operators,
        status,
        champion.elixir.id if champion else "",
    )


# --- statistics and output ---------------------------------------------------------------


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """(q1, median, q3) with linear interpolation (exact for any n >= 1)."""
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def win_rate(a: Sequence[float], b: Sequence[float]) -> float:
    """Share of seeds where ``a`` beats ``b`` (ties count half)."""
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x, y in zip(a, b, strict=True)) / len(a)


def calls_to_reach(curve: Sequence[tuple[int, float]], level: float) -> int | None:
    """The calls billed when the run's current best first reached ``level`` on test (None: never)."""
    return next((calls for calls, test in curve if test >= level - 1e-9), None)


def summarise(runs: Sequence[RunResult], methods: Sequence[str]) -> dict[str, Any]:
    """Per target and method: test median and IQR, train median, calls, win rates (paired by seed) and
    calls to reach gepa's test median."""
    out: dict[str, Any] = {}
    for name in sorted({r.target for r in runs}, key=lambda t: [r.target for r in runs].index(t)):
        rows: dict[str, Any] = {}
        for method in methods:
            mine = sorted((r for r in runs if r.target == name and r.method == method), key=lambda r: r.seed)
            if not mine:
                continue
            q1, med, q3 = quartiles([r.test for r in mine])
            timed = [r.concurrency for r in mine if r.concurrency is not None]
            ops: dict[str, dict[str, float]] = {}
            for r in mine:
                for op, s in r.operators.items():
                    acc = ops.setdefault(op, {"children": 0, "successes": 0, "failures": 0})
                    for k in acc:
                        acc[k] += s.get(k, 0)
            rows[method] = {
                "test": [r.test for r in mine],
                "train": [r.train for r in mine],
                "test_median": round(med, 4),
                "test_iqr": round(q3 - q1, 4),
                "train_median": round(statistics.median(r.train for r in mine), 4),
                "calls": int(statistics.median(r.calls for r in mine)),
                "effective_concurrency": round(statistics.median(timed), 2) if timed else None,
                "operators": {k: {**v, "success_rate": _rate(v)} for k, v in sorted(ops.items())},
            }
        for row in rows.values():
            row["win_vs_random"] = round(win_rate(row["test"], rows["random"]["test"]), 2) if "random" in rows else None
        gepa_level = rows.get("gepa", {}).get("test_median")
        for method, row in rows.items():
            mine = sorted((r for r in runs if r.target == name and r.method == method), key=lambda r: r.seed)
            reached = [calls_to_reach(r.curve, gepa_level) for r in mine] if gepa_level is not None else []
            row["reached_gepa"] = sum(c is not None for c in reached) if reached else None
            hits = sorted(c for c in reached if c is not None)
            row["calls_to_gepa"] = hits[len(hits) // 2] if len(hits) * 2 > len(reached) > 0 else None
        wins = {
            f"{a} vs {b}": round(win_rate(rows[a]["test"], rows[b]["test"]), 2) for a in rows for b in rows if a != b
        }
        out[name] = {"methods": rows, "win_rate": wins}
    return out


def _beats(rows: dict[str, Any], a: str, b: str) -> tuple[float, float, bool]:
    gap = rows[a]["test_median"] - rows[b]["test_median"]
    spread = max(rows[a]["test_iqr"], rows[b]["test_iqr"])
    return gap, spread, gap > spread


def targets(summary: dict[str, Any], budget: int = 400) -> list[tuple[str, bool]]:
    """The issue's targets (on test fitness), each with whether it is met."""
    checks = []
    with_gepa = 0
    ahead = 0
    for name, data in summary.items():
        rows = data["methods"]
        for other in ("copy-feedback", "hill"):
            if "evo+reflect" in rows and other in rows:
                gap, spread, ok = _beats(rows, "evo+reflect", other)
                checks.append(
                    (f"{name}: evo+reflect beats {other} on test by more than the IQR ({gap:+.3f} > {spread:.3f})", ok)
                )
        if "evo+reflect" in rows and "gepa" in rows:
            with_gepa += 1
            ahead += rows["evo+reflect"]["test_median"] >= rows["gepa"]["test_median"]
            reach = rows["evo+reflect"]["calls_to_gepa"]
            checks.append(
                (
                    f"{name}: evo+reflect reaches gepa's {budget}-call test fitness "
                    f"({rows['gepa']['test_median']:.3f}) within {budget} calls (median over seeds: "
                    f"{reach if reach is not None else 'not reached'})",
                    reach is not None and reach <= budget,
                )
            )
        ours = rows.get("evo+reflect", {}).get("effective_concurrency")
        theirs = rows.get("gepa", {}).get("effective_concurrency")
        if ours and theirs:
            checks.append((f"{name}: furnace concurrency {ours:.1f} >= 5x gepa's {theirs:.1f}", ours >= 5 * theirs))
    if with_gepa:
        need = -(-2 * with_gepa // 3)  # 2 of 3 targets
        checks.append(
            (
                f"evo+reflect's test median >= gepa's at {budget} calls on {ahead} of {with_gepa} targets "
                f"(need {need})",
                ahead >= need,
            )
        )
    return checks


def as_json(summary: dict[str, Any]) -> dict[str, Any]:
    """``{target: {method: {test_median, test_iqr, train_median, calls, win_vs_random}}}``."""
    keys = ("test_median", "test_iqr", "train_median", "calls", "win_vs_random")
    return {t: {m: {k: row[k] for k in keys} for m, row in data["methods"].items()} for t, data in summary.items()}


def table(summary: dict[str, Any]) -> str:
    """The printed table: one row per (target, method)."""
    lines = [
        f"   {'target':<20} {'method':<19} {'test':>6} {'IQR':>6} {'train':>6} {'calls':>6} {'conc.':>5} "
        f"{'win vs random':>13} {'to gepa':>8}  operator success"
    ]
    for name, data in summary.items():
        for method, row in data["methods"].items():
            conc = f"{row['effective_concurrency']:.1f}" if row["effective_concurrency"] is not None else "-"
            win = row["win_vs_random"]
            ops = ", ".join(
                f"{k} {int(v['successes'])}/{int(v['children'])}"
                + (f" ({int(v['failures'])} failed)" if v["failures"] else "")
                for k, v in row["operators"].items()
            )
            won = "-" if win is None else f"{win:.0%}"
            reach = row.get("calls_to_gepa")
            reach_text = "-" if row.get("reached_gepa") is None else (str(reach) if reach is not None else "never")
            lines.append(
                f"   {name:<20} {method:<19} {row['test_median']:>6.3f} {row['test_iqr']:>6.3f} "
                f"{row['train_median']:>6.3f} {row['calls']:>6} {conc:>5} {won:>13} {reach_text:>8}  {ops}"
            )
    return "\n".join(lines)


def _median_curve(curves: Sequence[list[tuple[int, float]]], budget: int, points: int = 40) -> tuple[list, list]:
    xs = [round(budget * i / points) for i in range(points + 1)]
    ys = []
    for x in xs:
        at = [max([b for c, b in curve if c <= x], default=0.0) for curve in curves]
        ys.append(statistics.median(at))
    return xs, ys


def figure(runs: Sequence[RunResult], budget: int, path: Path) -> Path | None:
    """Test fitness of the current best vs calls billed, one line per method (median over seeds)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("   (matplotlib not installed: no figure)")
        return None
    names = list(dict.fromkeys(r.target for r in runs))
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        for method in (*METHODS, *EXTRA):
            curves = [r.curve for r in runs if r.target == name and r.method == method]
            if curves:
                xs, ys = _median_curve(curves, budget)
                ax.plot(xs, ys, label=method, drawstyle="steps-post")
        ax.set_title(name)
        ax.set_xlabel("model calls billed")
        ax.set_ylabel("test fitness of the current best (median)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run_search(
    *,
    chosen_targets: dict[str, Target] | None = None,
    seeds: Sequence[int] = tuple(range(1, 11)),
    budget: int = 400,
    methods: Sequence[str] = METHODS,
    timed_seeds: Sequence[int] = (1,),
    out: Path | None = OUT,
    name: str = "search",
) -> dict[str, Any]:
    """Every (target, method, seed) run, summarised; JSON and PNG written under ``out`` (unless None)."""
    chosen_targets = chosen_targets if chosen_targets is not None else targets_from()
    chosen = [m for m in methods if m != "gepa" or gepa_available()]
    if "gepa" in methods and "gepa" not in chosen:
        print("   gepa is not installed (pip install 'furnace[bench]'): skipping the gepa comparison")
    for target in chosen_targets.values():
        if budget <= validation_reserve(target) + len(target.seeds) * len(target.part("train").probes) * 3:
            raise InputError(f"--budget {budget} does not cover {target.name}'s seeds and its validation pick")
    runs = [
        run_one(target, method, seed, budget, LATENCY if seed in timed_seeds else 0.0)
        for target in chosen_targets.values()
        for method in chosen
        for seed in seeds
    ]
    summary = summarise(runs, chosen)
    result = {
        "budget_calls": budget,
        "seeds": list(seeds),
        "latency_s": LATENCY,
        "scorers": SCORERS,
        "model": os.environ.get("FURNACE_MODEL") or "offline",
        "splits": {t.name: t.split for t in chosen_targets.values()},
        "summary": summary,
        "runs": [asdict(r) | {"effective_concurrency": r.concurrency} for r in runs],
    }
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
        png = figure(runs, budget, out / f"{name}.png")
        result["files"] = [str(out / f"{name}.json")] + ([str(png)] if png else [])
    return result


def _report(result: dict[str, Any], budget: int) -> bool:
    print(table(result["summary"]))
    checks = targets(result["summary"], budget)
    for text, ok in checks:
        print(f"   {'ok  ' if ok else 'MISS'} {text}")
    for path in result.get("files", []):
        print(f"   wrote {path}")
    return all(ok for _, ok in checks)


def run() -> bool:
    """The full benchmark: print the table and the targets; True when every target is met."""
    return _report(run_search(), 400)


CI_TARGET = "careful-reviewer-en"


def run_ci(out: Path | None = None) -> dict[str, Any]:
    """The small variant (one target, three seeds, a small budget, no latency, no gepa)."""
    every = targets_from()
    return run_search(
        chosen_targets={CI_TARGET: every[CI_TARGET]},
        seeds=(1, 2, 3),
        budget=400,  # the full bench's budget: the loop completes a few generations
        methods=("best-seed", "copy-feedback", "evo+reflect"),
        timed_seeds=(),
        out=out,
        name="search-ci",
    )


def single_steps(task: str, samples: int = 200) -> dict[str, Any]:
    """What one mutation step from the target's best seed reaches (on its train probes): every deterministic
    single move (one tone dimension by +-0.1/+-0.2, one principle or area of expertise moved first,
    one constraint tightened),
    the share of ``samples`` seeded mutants (rate 0.25) that beat the seed by more than 0.01, and the best
    crossover of the best seed with another seed (what random fusion can draw in one step)."""
    evo, _, seeds = _setup(targets_from()[task], "random", 1, 10**7, 0.0)
    probes = evo.train
    scored = [(_evaluate(evo.metered, e, probes, 1).fitness, e) for e in seeds]
    base, best = max(scored, key=lambda pair: (pair[0], pair[1].id))
    data = best.model_dump(mode="json", exclude={"content_hash", "version", "created_at", "deleted_at"})

    def gain(**update: Any) -> float:
        return round(_evaluate(evo.metered, parse_elixir({**data, **update}), probes, 1).fitness - base, 4)

    moves: list[tuple[float, str]] = []
    for dim, old in data["tone"].items():
        for delta in (-0.2, -0.1, 0.1, 0.2):
            new = round(min(1.0, max(0.0, old + delta)), 3)
            if new != old:
                moves.append((gain(tone={**data["tone"], dim: new}), f"tone.{dim} {old:g}->{new:g}"))
    for name in ("principles", "expertise"):
        items = data[name]
        for i in range(1, len(items)):
            moved = [items[i], *items[:i], *items[i + 1 :]]
            moves.append((gain(**{name: moved}), f"{name}[{i}] first ({items[i][:24]})"))
    limits = data["constraints"]
    for n in (120, 200, 300, 500):
        if limits["max_length"] is None or n < limits["max_length"]:
            moves.append((gain(constraints={**limits, "max_length": n}), f"max_length {n}"))
    if not limits["must_use_markdown"]:
        moves.append((gain(constraints={**limits, "must_use_markdown": True}), "markdown"))
    mutants = [
        _evaluate(
            evo.metered, evo.breeder([best.ref], "mutation", s, {"rate": 0.25}, evo.metered).elixir, probes, 1
        ).fitness
        for s in range(samples)
    ]
    crosses = [
        (
            _evaluate(
                evo.metered, evo.breeder([best.ref, o.ref], "crossover", 1, {}, evo.metered).elixir, probes, 1
            ).fitness,
            o.id,
        )
        for o in seeds
        if o.id != best.id
    ]
    cross_best, partner = max(crosses)
    return {
        "task": task,
        "best_seed": best.id,
        "fitness": round(base, 4),
        "moves": sorted(moves, reverse=True),
        "mutants_improving": round(sum(f > base + 0.01 for f in mutants) / samples, 3) if samples else None,
        "mutants_worse": round(sum(f < base - 0.01 for f in mutants) / samples, 3) if samples else None,
        "best_crossover": (round(cross_best - base, 4), partner),
    }


def where_children_went(task: str, seeds: Sequence[int], method: str = "evolution") -> dict[str, Any]:
    """Where an evolution's children go (the diagnosis in docs/experiments.md): per operator, children
    and successes over ``seeds`` (no latency, budget 400); the mutations' moves (lineage params: planned,
    distinct per run); and how many runs reached the task's best single move from its best seed."""
    steps = single_steps(task, samples=0)
    goal = steps["fitness"] + 0.9 * max(steps["moves"][0][0], 0.0)
    ops: dict[str, list[int]] = {}
    moves = distinct = reached = 0
    for seed in seeds:
        evo, _, _ = _setup(targets_from()[task], method, seed, 400, 0.0)
        report = evo.run()
        for name, stat in report.operators.items():
            acc = ops.setdefault(name, [0, 0])
            acc[0] += int(stat["children"])
            acc[1] += int(stat["successes"])
        records = evo.results.individuals(evo.experiment_id)
        keys = [
            key
            for r in records
            if r.operator == "mutation" and r.lineage_hash
            for key in evo.breeder.store.get_agent(r.agent_id).lineage.params.get("moves", [])
        ]
        moves, distinct = moves + len(keys), distinct + len(set(keys))
        reached += max((r.fitness for r in records if r.scored), default=0.0) >= goal
    return {
        "task": task,
        "runs": len(seeds),
        "operators": {k: {"children": v[0], "successes": v[1]} for k, v in sorted(ops.items())},
        "planned_moves": moves,
        "distinct_moves_per_run": distinct,
        "reached_best_single_move": reached,
        "goal": round(goal, 4),
    }


def _where_text(where: dict[str, Any]) -> str:
    ops = ", ".join(f"{k} {v['successes']}/{v['children']}" for k, v in where["operators"].items())
    return (
        f"   {where['task']}: {where['runs']} runs; operator success {ops}; mutation moves planned "
        f"{where['planned_moves']} ({where['distinct_moves_per_run']} distinct keys within their run: a key "
        f"recurs only on another line or in a new cycle); runs reaching "
        f"the best single move (fitness >= {where['goal']:.3f}): {where['reached_best_single_move']}/{where['runs']}"
    )


def _steps_text(steps: dict[str, Any], top: int = 5) -> str:
    moves = ", ".join(f"{d:+.3f} {what}" for d, what in steps["moves"][:top])
    gain, partner = steps["best_crossover"]
    return (
        f"   {steps['task']}: best seed {steps['best_seed']} {steps['fitness']:.3f}; mutants better by > 0.01: "
        f"{steps['mutants_improving']:.0%} (worse: {steps['mutants_worse']:.0%}); best crossover of it: "
        f"{gain:+.3f} (x {partner})\n     best single moves: {moves}"
    )


def _seed_list(text: str) -> list[int]:
    """``1-10`` or ``1,2,5``."""
    if re.fullmatch(r"\d+-\d+", text):
        lo, hi = (int(x) for x in text.split("-", 1))
        if lo > hi:
            raise InputError(f"--seeds {text!r}: the range is empty (give A-B with A <= B)")
        return list(range(lo, hi + 1))
    if re.fullmatch(r"\d+(,\d+)*", text):
        return [int(x) for x in text.split(",")]
    raise InputError(f"--seeds {text!r}: give a range A-B or a list 1,2,5")


def main(argv: Sequence[str]) -> int:
    """``--targets FILE``, ``--seeds A-B``, ``--budget N``, ``--methods a,b``, ``--json``; ``--ci``: the small
    variant; ``--steps`` / ``--where``: the diagnoses. Bad input: one line, exit 1 (nothing written)."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:  # one line, exit 1 (as every bad input)
            print(f"error: {message}", file=sys.stderr)
            raise SystemExit(1)

    parser = Parser(prog="python -m bench search")
    parser.add_argument("--targets", default=str(DEFAULT_FILE))
    parser.add_argument("--task", default="", help="only these targets of the file (comma-separated)")
    parser.add_argument("--seeds", default="1-10")
    parser.add_argument("--budget", type=int, default=400)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--ci", action="store_true")
    parser.add_argument("--steps", action="store_true")
    parser.add_argument("--where", action="store_true")
    args = parser.parse_args(list(argv))
    try:
        every = targets_from(args.targets)
        names = [t for t in args.task.split(",") if t] or list(every)
        methods = [m for m in args.methods.split(",") if m]
        unknown = [t for t in names if t not in every] + [m for m in methods if m not in (*METHODS, *EXTRA)]
        if unknown:
            raise InputError(f"unknown target or method: {', '.join(unknown)}")
        seeds = _seed_list(args.seeds)
        if args.budget <= 0:
            raise InputError("--budget must be a positive number of model calls")
        if args.ci:
            print(table(run_ci(OUT)["summary"]))
            return 0
        if args.steps:
            for name in names:
                print(_steps_text(single_steps(name)))
            return 0
        if args.where:
            for name in names:
                print(_where_text(where_children_went(name, seeds)))
            return 0
        timed = (seeds[0],) if not argv else ()  # the concurrency figures: the full run's first seed only
        result = run_search(
            chosen_targets={n: every[n] for n in names},
            seeds=seeds,
            budget=args.budget,
            methods=methods,
            timed_seeds=timed,
            out=None if args.json else OUT,
        )
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    checks = targets(result["summary"], args.budget)
    if args.json:
        print(json.dumps(as_json(result["summary"]), indent=2, ensure_ascii=False))
        return 0 if all(ok for _, ok in checks) else 1
    return 0 if _report(result, args.budget) else 1


if __name__ == "__main__":
    from furnace import offline_env

    offline_env.apply()
    sys.exit(main(sys.argv[1:]))
