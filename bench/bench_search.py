"""Search benchmark: does the search beat chance at an equal model-call budget, with spread?

Three hidden targets (two English, one Chinese): each is a probe set whose brief and
held-out per-probe rubrics only the judge sees — operators see scores and judge feedback,
never the target. Every method starts from the same library seeds (whose evaluation it
pays for) and stops at the same budget of non-cached model calls:

- ``random``: children of random library seeds (crossover or mutation), no selection;
- ``hill``: mutation-only hill climbing from the best seed (7 mutants per step, the best kept if better);
- ``evolution``: the experiment loop with the experiment defaults (crossover 0.2 + mutation 0.8,
  a tournament of 5, the best half of the population survives each generation; a crossover's
  second parent is a founder the line does not descend from, each in turn; a run tries every
  mutation move of a line once before it repeats one);
- ``evo+reflect``: with the reflective operator (crossover 0.4, mutation 0.2, reflect 0.4; a tournament
  of 3 and one elite);
- ``evo+reflect+pareto``: the same with per-probe Pareto parent selection;
- ``gepa``: ``gepa.optimize`` (when the optional ``bench`` extra is installed) on the same
  objective, with furnace's model seam as its task model (REPLY + JUDGE) and as its
  reflection model (the REFLECT task), seeded with the best library seed.

Fitness is the weighted mean of fidelity 0.5, tone 0.3 and constraints 0.2 against the
target (offline: the optimiser on a synthetic landscape, not language quality). Reported:
median and IQR of the best fitness over the seeds, win rate per pair, calls spent (from the
meter), effective concurrency (calls x 50 ms / wall, measured on the first seed with the
latency-injected fake; the other seeds run without latency, which changes no result; furnace
runs 16 calls in flight), and per-operator success. Fitness counts only what the budget paid for,
in a reproducible unit: for the loop, the generations whose calls add up to at most the budget, in
plan order (the loop runs ``SLACK`` past it, so those are complete whatever the thread timing);
completed batches of 7 children for random fusion and hill climbing; full-set evaluations for gepa.
One table is printed; JSON and a PNG (best fitness vs calls spent, one line per method,
median over seeds) go to ``bench/out/`` (or ``FURNACE_BENCH_OUT``).

``python -m bench search`` runs it in full (targets make the exit non-zero when missed);
``python -m bench.bench_search --ci`` runs the small variant the tests use; ``--task family-life-zh
--seeds 1-10 --methods random,evolution`` runs a subset (same budget; its targets decide the exit code);
``--steps`` prints what one mutation step from each task's best seed reaches and ``--where --seeds 1-40``
where an evolution's children went (operator success, the mutation moves it planned, how many runs
reached the best single move): the diagnoses in docs/experiments.md.
With ``FURNACE_MODEL`` set the same tasks run against that model (slow and billed; not in CI).
"""

from __future__ import annotations

import json
import os
import random
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

from furnace import resources
from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.errors import BudgetExceeded, FurnaceError
from furnace.domain.render import render_prompt
from furnace.evolution.config import parse_config
from furnace.evolution.evaluate import Evaluation, evaluate_agent
from furnace.evolution.local import memory_evolution
from furnace.llm.cache import CachedLLM
from furnace.llm.fakes import SlowLLM
from furnace.scoring.probes import ProbeSet, parse_probe_set

LATENCY = 0.05
SLACK = 2.0  # the loop runs this share past the budget, so that the generations within the budget all complete
CONCURRENCY = 16  # model calls in flight (furnace's knob; gepa's loop is sequential by design)
BATCH = 7  # children per step for random fusion and hill climbing (= an evolution generation's 7 children)
SCORERS = {"fidelity": 0.5, "tone": 0.3, "constraints": 0.2}
OUT = Path(os.environ.get("FURNACE_BENCH_OUT") or Path(__file__).resolve().parent / "out")
METHODS = ("random", "hill", "evolution", "evo+reflect", "evo+reflect+pareto", "gepa")
OPERATORS: dict[str, dict[str, float] | None] = {
    "evolution": None,  # the experiment defaults (what a config that names no operators gets)
    "evo+reflect": {"crossover": 0.4, "mutation": 0.2, "reflect": 0.4},
    "evo+reflect+pareto": {"crossover": 0.4, "mutation": 0.2, "reflect": 0.4},
}
# evolution: the experiment defaults (a tournament of 5, the best half survives: a generation is half the
# population); the reflect methods keep a tournament of 3 and one elite (a generation of 7 children in flight)
SELECTION: dict[str, dict[str, Any]] = {
    "evo+reflect": {"tournament_size": 3, "elitism": 1},
    "evo+reflect+pareto": {"method": "pareto", "tournament_size": 3, "elitism": 1},
}

# The hidden targets. Descriptors are partly in library principles (reachable by recombination)
# and partly nowhere in the library (reachable only through feedback).
EN_SEEDS = [  # the English library: every English target starts from the same seeds
    "academic-editor",
    "data-science-mentor",
    "empathetic-coach",
    "go-reviewer",
    "legal-plain-language",
    "security-auditor",
    "socratic-math-tutor",
    "viral-copywriter",
]
TASKS: dict[str, dict[str, Any]] = {
    "launch-coach-en": {
        "seeds": EN_SEEDS,
        "probes": {
            "name": "launch-coach-en",
            "language": "en",
            "brief": {
                "expertise": ["product launches", "habit building"],
                "tone": {"formality": 0.3, "conciseness": 0.7, "humor": 0.7, "empathy": 0.8},
                "constraints": {"max_length": 450, "must_use_markdown": True},
                "language": "en",
            },
            "probes": [
                {
                    "id": "launch-note",
                    "message": "Write a short launch note for our new oolong tea brand.",
                    "rubric": {"expect": ["call to action", "tasting notes"], "avoid": ["guarantee"]},
                },
                {
                    "id": "churn-numbers",
                    "message": "Our monthly churn went from 3% to 5%. How should I explain this to the team?",
                    "rubric": {"expect": ["simplest baseline", "retention cohort"]},
                },
                {
                    "id": "apology",
                    "message": "Draft a friendly apology email for a delayed shipment.",
                    "rubric": {"expect": ["concrete next step", "delivery date"], "avoid": ["diagnose"]},
                },
            ],
        },
    },
    "careful-reviewer-en": {
        "seeds": EN_SEEDS,
        "probes": {
            "name": "careful-reviewer-en",
            "language": "en",
            "brief": {
                "expertise": ["threat modelling", "calculus"],
                "tone": {"formality": 0.7, "conciseness": 0.6, "humor": 0.2, "empathy": 0.7},
                "constraints": {"max_length": 600, "must_use_markdown": True},
                "language": "en",
            },
            "probes": [
                {
                    "id": "login-review",
                    "message": "Please review my login handler; it stores the session token in a cookie.",
                    "rubric": {"expect": ["severity", "attacker gains", "rotate session"], "avoid": ["praise"]},
                },
                {
                    "id": "derivative",
                    "message": "I keep getting the derivative of x squared times sine x wrong. Help?",
                    "rubric": {"expect": ["guiding question", "product rule"]},
                },
                {
                    "id": "renewal-clause",
                    "message": "What does the automatic renewal clause in my tenancy agreement mean?",
                    "rubric": {"expect": ["everyday words", "notice period"]},
                },
            ],
        },
    },
    "family-life-zh": {
        "seeds": [
            "classical-poetry-guide-zh",
            "home-chef-zh",
            "lifestyle-blogger-zh",
            "oncall-sre-zh",
            "personal-finance-zh",
            "skincare-science-writer-zh",
        ],
        "probes": {
            "name": "family-life-zh",
            "language": "zh",
            "brief": {
                "expertise": ["家庭预算", "防晒"],
                "tone": {"formality": 0.4, "conciseness": 0.6, "humor": 0.5, "empathy": 0.8},
                "constraints": {"max_length": 500, "must_use_markdown": True},
                "language": "zh",
            },
            "probes": [
                {
                    "id": "meal-plan",
                    "message": "这个月想省点钱，一周的饭菜该怎么安排？",
                    "rubric": {"expect": ["克数", "采购清单"]},
                },
                {
                    "id": "emergency-fund",
                    "message": "应急基金到底该存多少钱？",
                    "rubric": {"expect": ["应急基金", "具体数字", "收支记账"], "avoid": ["个股"]},
                },
                {
                    "id": "sunscreen",
                    "message": "夏天带孩子出门，防晒霜怎么选？",
                    "rubric": {"expect": ["补涂频率", "儿童肤质"]},
                },
            ],
        },
    },
}


@dataclass
class RunResult:
    """One (task, method, seed) run."""

    task: str
    method: str
    seed: int
    best: float
    calls: int
    wall_s: float
    latency_s: float
    curve: list[tuple[int, float]] = field(default_factory=list)
    operators: dict[str, dict[str, float]] = field(default_factory=dict)
    status: str = "finished"
    spent: int = 0  # every call the run made (the loop runs past the budget; ``calls`` is what is credited)

    @property
    def concurrency(self) -> float | None:
        """Effective concurrency: calls x latency / wall over the whole run (only with injected latency)."""
        return (self.spent or self.calls) * self.latency_s / self.wall_s if self.latency_s and self.wall_s else None


def _library() -> dict[str, Elixir]:
    found = [
        parse_elixir(yaml.safe_load(p.read_text(encoding="utf-8")))
        for p in sorted(resources.LIBRARY_DIR.glob("*.yaml"))
    ]
    return {e.id: e for e in found}


def _model(latency: float) -> Any:
    """The configured model (``FURNACE_MODEL`` with its api base and key; offline when unset) behind an
    in-memory response cache; the 50 ms fake latency is added to the offline engine only."""
    from furnace.runtime import build_llm
    from furnace.settings import FurnaceSettings

    settings = FurnaceSettings()
    llm = build_llm(settings)
    return CachedLLM(SlowLLM(llm.inner, latency)) if latency and not settings.model else llm


class _Tracker:
    """Best fitness so far against calls spent (read from the meter)."""

    def __init__(self, meter: Callable[[], int]) -> None:
        self.meter, self.best, self.curve = meter, 0.0, []
        self._lock = threading.Lock()

    def saw(self, fitness: float) -> None:
        with self._lock:
            self.best = max(self.best, fitness)
            self.curve.append((self.meter(), round(self.best, 6)))


def _setup(task: str, method: str, seed: int, budget: int, latency: float) -> tuple[Any, ProbeSet, list[Elixir]]:
    spec = TASKS[task]
    library = _library()
    seeds = [library[i] for i in spec["seeds"]]
    probes = parse_probe_set(spec["probes"], source=task)
    data: dict[str, Any] = {
        "name": f"search-{task}-{method.replace('+', '-')}",
        "seed": seed,
        "population": len(seeds),
        "generations": 200,
        "selection": SELECTION.get(method, {}),
        "scorers": SCORERS,
        "concurrency": CONCURRENCY,
        "samples_per_probe": 1,  # one reply per probe, as every other method here
        "reevaluate_top": 0,
        "budget": {"max_calls": budget + (int(budget * SLACK) if method in OPERATORS else 0)},
    }
    operators = OPERATORS.get(method)
    if operators is not None:
        data["operators"] = operators
    cfg = parse_config(data)  # random fusion and hill climbing use only its seed, budget and mutation rate
    evo = memory_evolution(cfg, seeds, llm=_model(latency), probes=probes)
    return evo, probes, seeds


def _evaluate(evo: Any, elixir: Elixir, probes: ProbeSet) -> Evaluation:
    return evaluate_agent(evo.metered, elixir, render_prompt(elixir), probes, SCORERS, seed=evo.config.seed)


def _evolution(evo: Any, tracker: _Tracker, budget: int) -> tuple[dict[str, dict[str, float]], str, int]:
    """Run the loop past the budget (``SLACK``) and credit it, in plan order, with the generations whose
    calls add up to at most ``budget``: its fitness, operator figures and calls. (Stopping the loop at
    the budget itself made the result depend on thread timing: whether the last generation completed
    depended on how many calls of the next one were in flight — family-life-zh seed 4 gave 0.657 or
    0.690 in four identical runs.) Returns the operator figures, the status and the credited calls."""
    report = evo.run()
    gens = sorted(evo.results.generations(evo.experiment_id), key=lambda g: g.generation)
    calls, credited, note = 0, -1, ""
    for gen in gens:
        if calls + gen.calls - gen.cached_calls > budget:
            break
        calls += gen.calls - gen.cached_calls  # model calls (the budget counts these)
        credited = gen.generation
        tracker.best = max(tracker.best, gen.best_fitness)
        tracker.curve.append((calls, round(tracker.best, 6)))
    else:
        if report.status.startswith("stopped"):  # every complete generation fit: the next might have too, so the
            # credit is conservative (the loop gets less than the budget could have bought) and says so
            note = "; the slack ran out: credited only the complete generations"
    records = [r for r in evo.results.individuals(evo.experiment_id) if 0 < r.generation <= credited]
    fitness = {r.agent_id: r.fitness for r in evo.results.individuals(evo.experiment_id)}
    ops: dict[str, dict[str, float]] = {}
    for r in records:
        stat = ops.setdefault(r.operator, {"children": 0, "successes": 0, "failures": 0})
        stat["children"] += 1
        stat["failures"] += int(not r.scores)
        stat["successes"] += int(
            bool(r.scores) and r.fitness > max((fitness.get(p, 0.0) for p in r.parents), default=0)
        )
    status = f"{report.status}; credited generations 0-{credited} ({calls} calls){note}"
    return {k: {**v, "success_rate": _rate(v)} for k, v in ops.items()}, status, calls


def _seed_population(evo: Any, probes: ProbeSet, seeds: Sequence[Elixir], tracker: _Tracker, pool: Any) -> list:
    evaluated = list(pool.map(lambda e: (e, _evaluate(evo, e, probes)), seeds))
    for _, ev in evaluated:
        tracker.saw(ev.fitness)
    return evaluated


def _breed_and_score(evo: Any, probes: ProbeSet, parents: Sequence[Elixir], op: str, seed: int) -> Any:
    params = {"rate": evo.config.mutation_rate} if op == "mutation" else {}
    try:
        bred = evo.breeder([p.ref for p in parents], op, seed, params, evo.metered)
    except BudgetExceeded:
        raise
    except FurnaceError:
        return None  # a refused fusion: its calls are spent, nothing to score
    return bred.elixir, _evaluate(evo, bred.elixir, probes)


def _random(evo: Any, probes: ProbeSet, seeds: Sequence[Elixir], tracker: _Tracker) -> dict[str, dict[str, float]]:
    rng = random.Random(evo.config.seed)
    stats = {"children": 0, "successes": 0, "failures": 0}
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        scored = {e.id: ev.fitness for e, ev in _seed_population(evo, probes, seeds, tracker, pool)}
        while True:
            batch = []
            for _ in range(BATCH):
                op = rng.choice(["crossover", "mutation"])
                parents = rng.sample(list(seeds), 2 if op == "crossover" else 1)
                batch.append((parents, op, rng.randrange(2**31)))
            outs = _complete_batch([pool.submit(_breed_and_score, evo, probes, p, op, s) for p, op, s in batch])
            if outs is None:
                break
            for (parents, _, _), out in zip(batch, outs, strict=True):
                stats["children"] += 1
                if out is None:
                    stats["failures"] += 1
                    continue
                tracker.saw(out[1].fitness)
                stats["successes"] += int(out[1].fitness > max(scored[p.id] for p in parents))
    return {"random fusion": {**stats, "success_rate": _rate(stats)}}


def _hill(evo: Any, probes: ProbeSet, seeds: Sequence[Elixir], tracker: _Tracker) -> dict[str, dict[str, float]]:
    rng = random.Random(evo.config.seed)
    stats = {"children": 0, "successes": 0, "failures": 0}
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        evaluated = _seed_population(evo, probes, seeds, tracker, pool)
        current, current_ev = max(evaluated, key=lambda pair: (pair[1].fitness, pair[0].id))
        while True:
            seeds_ = [rng.randrange(2**31) for _ in range(BATCH)]
            outs = _complete_batch(
                [pool.submit(_breed_and_score, evo, probes, [current], "mutation", s) for s in seeds_]
            )
            if outs is None:
                break
            best_child = None
            for out in outs:
                stats["children"] += 1
                if out is None:
                    stats["failures"] += 1
                    continue
                tracker.saw(out[1].fitness)
                if out[1].fitness > current_ev.fitness:
                    stats["successes"] += 1
                    if best_child is None or out[1].fitness > best_child[1].fitness:
                        best_child = out
            if best_child is not None:
                current, current_ev = best_child
    return {"mutation": {**stats, "success_rate": _rate(stats)}}


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


def _rate(stats: dict[str, int]) -> float:
    return round(stats["successes"] / stats["children"], 4) if stats["children"] else 0.0


def gepa_available() -> bool:
    try:
        import gepa  # noqa: F401
    except ImportError:
        return False
    return True


def _gepa(evo: Any, probes: ProbeSet, seeds: Sequence[Elixir], tracker: _Tracker) -> dict[str, dict[str, float]]:
    """gepa.optimize with a furnace adapter: the candidate is the persona (elixir JSON), evaluation
    answers and judges each probe through the seam, proposals come from the REFLECT task."""
    import gepa
    from gepa.core.adapter import EvaluationBatch

    from furnace.fusion.operators.reflect import apply_edits, build_reflect_request, parse_reflect
    from furnace.scoring.feedback import reflection_brief

    by_id = {p.id: p for p in probes.probes}
    messages = {p.id: p.message for p in probes.probes}
    stats = {"children": 0, "successes": 0, "failures": 0}
    seen: set[str] = set()

    class Adapter:
        def evaluate(self, batch: list[str], candidate: dict[str, str], capture_traces: bool = False) -> Any:
            elixir = parse_elixir(json.loads(candidate["persona"]))
            one = [probes.model_copy(update={"probes": [by_id[pid]]}) for pid in batch]
            with ThreadPoolExecutor(min(10, len(batch))) as pool:  # like gepa's batch completion
                evals = list(pool.map(lambda ps: _evaluate(evo, elixir, ps), one))
            scores = [ev.fitness for ev in evals]
            if set(batch) == set(by_id):  # a full-set evaluation (gepa's valset: the seed and accepted candidates)
                tracker.saw(sum(scores) / len(scores))
                seen.add(candidate["persona"])
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
        evaluated = _seed_population(evo, probes, seeds, tracker, pool)
    start, _ = max(evaluated, key=lambda pair: (pair[1].fitness, pair[0].id))
    seed_text = json.dumps(start.model_dump(mode="json", exclude={"created_at", "deleted_at"}))
    try:
        result = gepa.optimize(
            seed_candidate={"persona": seed_text},
            trainset=list(by_id),
            valset=list(by_id),
            adapter=Adapter(),
            stop_callbacks=[Stop()],
            reflection_minibatch_size=2,
            seed=evo.config.seed,
            logger=Quiet(),
            display_progress_bar=False,
            raise_on_exception=True,
            skip_perfect_score=False,
        )
        seen.update(c["persona"] for c in result.candidates)
    except BudgetExceeded:  # the budget ends gepa's loop mid-step
        pass
    stats["successes"] = max(0, len(seen) - 1)  # candidates gepa accepted beyond the seed
    return {"reflect (gepa)": {**stats, "success_rate": _rate(stats)}}


def run_one(task: str, method: str, seed: int, budget: int, latency: float) -> RunResult:
    """One method on one task with one seed, at ``budget`` non-cached calls."""
    evo, probes, seeds = _setup(task, method, seed, budget, latency)
    tracker = _Tracker(lambda: evo.metered.meter.model_calls)
    status = "finished"
    credited: int | None = None
    started = time.perf_counter()
    if method in OPERATORS:
        operators, status, credited = _evolution(evo, tracker, budget)
    elif method == "random":
        operators = _random(evo, probes, seeds, tracker)
    elif method == "hill":
        operators = _hill(evo, probes, seeds, tracker)
    elif method == "gepa":
        operators = _gepa(evo, probes, seeds, tracker)
    else:
        raise ValueError(f"unknown method {method!r}")
    wall = time.perf_counter() - started
    spent = evo.metered.meter.model_calls
    return RunResult(
        task,
        method,
        seed,
        round(tracker.best, 6),
        spent if credited is None else credited,
        wall,
        latency,
        tracker.curve,
        operators,
        status,
        spent,
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


def summarise(runs: Sequence[RunResult], methods: Sequence[str]) -> dict[str, Any]:
    """Per task and method: median, IQR, calls, concurrency, operators; win rates per pair."""
    out: dict[str, Any] = {}
    for task in sorted({r.task for r in runs}):
        rows: dict[str, Any] = {}
        for method in methods:
            mine = sorted((r for r in runs if r.task == task and r.method == method), key=lambda r: r.seed)
            if not mine:
                continue
            q1, med, q3 = quartiles([r.best for r in mine])
            timed = [r.concurrency for r in mine if r.concurrency is not None]
            ops: dict[str, dict[str, float]] = {}
            for r in mine:
                for name, s in r.operators.items():
                    acc = ops.setdefault(name, {"children": 0, "successes": 0, "failures": 0})
                    for k in acc:
                        acc[k] += s.get(k, 0)
            rows[method] = {
                "best": [r.best for r in mine],
                "median": round(med, 4),
                "iqr": round(q3 - q1, 4),
                "calls": [r.calls for r in mine],
                "effective_concurrency": round(statistics.median(timed), 2) if timed else None,
                "operators": {k: {**v, "success_rate": _rate(v)} for k, v in sorted(ops.items())},
            }
        wins = {
            f"{a} vs {b}": round(win_rate(rows[a]["best"], rows[b]["best"]), 2) for a in rows for b in rows if a != b
        }
        out[task] = {"methods": rows, "win_rate": wins}
    return out


def targets(summary: dict[str, Any]) -> list[tuple[str, bool]]:
    """The issue's targets, each with whether it is met."""
    checks = []
    for task, data in summary.items():
        rows = data["methods"]
        if "evo+reflect" in rows and "random" in rows:
            gap = rows["evo+reflect"]["median"] - rows["random"]["median"]
            spread = max(rows["evo+reflect"]["iqr"], rows["random"]["iqr"])
            text = f"{task}: evo+reflect beats random by more than the IQR ({gap:+.3f} > {spread:.3f})"
            checks.append((text, gap > spread))
        if "evolution" in rows and "random" in rows:
            gap = rows["evolution"]["median"] - rows["random"]["median"]
            spread = max(rows["evolution"]["iqr"], rows["random"]["iqr"])
            text = f"{task}: evolution (no reflect) beats random by more than the IQR ({gap:+.3f} > {spread:.3f})"
            checks.append((text, gap > spread))
        ours = rows.get("evo+reflect", {}).get("effective_concurrency")
        theirs = rows.get("gepa", {}).get("effective_concurrency")
        if ours and theirs:
            checks.append((f"{task}: furnace concurrency {ours:.1f} >= 5x gepa's {theirs:.1f}", ours >= 5 * theirs))
    return checks


def table(summary: dict[str, Any]) -> str:
    """The printed table: one row per (task, method)."""
    lines = [
        f"   {'task':<20} {'method':<19} {'median':>6} {'IQR':>6} {'calls':>7} {'conc.':>5} "
        f"{'win vs random':>13}  operator success"
    ]
    for task, data in summary.items():
        for method, row in data["methods"].items():
            conc = f"{row['effective_concurrency']:.1f}" if row["effective_concurrency"] is not None else "-"
            win = data["win_rate"].get(f"{method} vs random")
            ops = ", ".join(
                f"{k} {int(v['successes'])}/{int(v['children'])}"
                + (f" ({int(v['failures'])} failed)" if v["failures"] else "")
                for k, v in row["operators"].items()
            )
            calls = int(statistics.median(row["calls"]))
            won = "-" if win is None else f"{win:.0%}"
            lines.append(
                f"   {task:<20} {method:<19} {row['median']:>6.3f} {row['iqr']:>6.3f} "
                f"{calls:>7} {conc:>5} {won:>13}  {ops}"
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
    """Best fitness vs calls spent, one line per method (median over seeds), one panel per task."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("   (matplotlib not installed: no figure)")
        return None
    tasks = sorted({r.task for r in runs})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for method in METHODS:
            curves = [r.curve for r in runs if r.task == task and r.method == method]
            if curves:
                xs, ys = _median_curve(curves, budget)
                ax.plot(xs, ys, label=method, drawstyle="steps-post")
        ax.set_title(task)
        ax.set_xlabel("model calls spent")
        ax.set_ylabel("best fitness (median of seeds)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run_search(
    *,
    tasks: Sequence[str] = tuple(TASKS),
    seeds: Sequence[int] = (1, 2, 3, 4, 5),
    budget: int = 400,
    methods: Sequence[str] = METHODS,
    timed_seeds: Sequence[int] = (1,),
    out: Path | None = OUT,
    name: str = "search",
) -> dict[str, Any]:
    """Every (task, method, seed) run, summarised; JSON and PNG written under ``out`` (unless None)."""
    chosen = [m for m in methods if m != "gepa" or gepa_available()]
    if "gepa" in methods and "gepa" not in chosen:
        print("   gepa is not installed (pip install 'furnace[bench]'): skipping the gepa comparison")
    runs = [
        run_one(task, method, seed, budget, LATENCY if seed in timed_seeds else 0.0)
        for task in tasks
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
        "summary": summary,
        "runs": [asdict(r) | {"effective_concurrency": r.concurrency} for r in runs],
    }
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
        png = figure(runs, budget, out / f"{name}.png")
        result["files"] = [str(out / f"{name}.json")] + ([str(png)] if png else [])
    return result


def run() -> bool:
    """The full benchmark: print the table and the targets; True when every target is met."""
    result = run_search()
    print(table(result["summary"]))
    checks = targets(result["summary"])
    for text, ok in checks:
        print(f"   {'ok  ' if ok else 'MISS'} {text}")
    for path in result.get("files", []):
        print(f"   wrote {path}")
    return all(ok for _, ok in checks)


def run_ci(out: Path | None = None) -> dict[str, Any]:
    """The small variant (one task per language, 2 seeds, small budget, no latency, no gepa)."""
    return run_search(
        tasks=("launch-coach-en", "family-life-zh"),
        seeds=(1, 2),
        budget=120,
        methods=("random", "hill", "evolution", "evo+reflect"),
        timed_seeds=(),
        out=out,
        name="search-ci",
    )


def single_steps(task: str, samples: int = 200) -> dict[str, Any]:
    """What one mutation step from the task's best seed reaches: every deterministic single move (one tone
    dimension by +-0.1/+-0.2, one principle or area of expertise moved first, one constraint tightened),
    the share of ``samples`` seeded mutants (rate 0.25) that beat the seed by more than 0.01, and the best
    crossover of the best seed with another seed (what random fusion can draw in one step)."""
    evo, probes, seeds = _setup(task, "random", 1, 10**7, 0.0)
    scored = [(_evaluate(evo, e, probes).fitness, e) for e in seeds]
    base, best = max(scored, key=lambda pair: (pair[0], pair[1].id))
    data = best.model_dump(mode="json", exclude={"content_hash", "version", "created_at", "deleted_at"})

    def gain(**update: Any) -> float:
        return round(_evaluate(evo, parse_elixir({**data, **update}), probes).fitness - base, 4)

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
        _evaluate(evo, evo.breeder([best.ref], "mutation", s, {"rate": 0.25}, evo.metered).elixir, probes).fitness
        for s in range(samples)
    ]
    crosses = [
        (_evaluate(evo, evo.breeder([best.ref, o.ref], "crossover", 1, {}, evo.metered).elixir, probes).fitness, o.id)
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
        evo, _, _ = _setup(task, method, seed, 400, 0.0)
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
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return [int(x) for x in text.split(",") if x]


def main(argv: Sequence[str]) -> int:
    """``--ci``: the small variant; ``--steps``: the single-step diagnosis; ``--task T[,T]``, ``--seeds 1-10``,
    ``--methods a,b``: a subset (its targets are checked for what ran; the budget stays 400); nothing: the full run."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.bench_search")
    parser.add_argument("--ci", action="store_true")
    parser.add_argument("--steps", action="store_true")
    parser.add_argument("--where", action="store_true")
    parser.add_argument("--task", default=",".join(TASKS))
    parser.add_argument("--seeds", default="1-5")
    parser.add_argument("--methods", default=",".join(METHODS))
    args = parser.parse_args(list(argv))
    tasks = [t for t in args.task.split(",") if t]
    unknown = [t for t in tasks if t not in TASKS] + [m for m in args.methods.split(",") if m not in METHODS]
    if unknown:
        parser.error(f"unknown task or method: {', '.join(unknown)}")
    if args.ci:
        print(table(run_ci(OUT)["summary"]))
        return 0
    if args.steps:
        for task in tasks:
            print(_steps_text(single_steps(task)))
        return 0
    if args.where:
        for task in tasks:
            print(_where_text(where_children_went(task, _seed_list(args.seeds))))
        return 0
    if argv:
        seeds = _seed_list(args.seeds)  # no injected latency: no concurrency figures, nothing timing-dependent
        result = run_search(tasks=tasks, seeds=seeds, methods=args.methods.split(","), timed_seeds=(), out=None)
        print(table(result["summary"]))
        checks = targets(result["summary"])
        for text, ok in checks:
            print(f"   {'ok  ' if ok else 'MISS'} {text}")
        return 0 if all(ok for _, ok in checks) else 1
    return 0 if run() else 1


if __name__ == "__main__":
    from furnace import offline_env

    offline_env.apply()
    sys.exit(main(sys.argv[1:]))
