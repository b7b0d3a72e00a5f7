"""Held-out evaluation: probe splits that never leak into an operator, repeated samples, bootstrap
intervals, re-evaluation of the top, and reflect's minibatch acceptance."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from experiments.helpers import PureBreeder, library
from furnace.domain.errors import InputError
from furnace.evolution.config import parse_config
from furnace.evolution.engine import Evolution
from furnace.evolution.local import memory_evolution
from furnace.evolution.records import MemoryResults
from furnace.evolution.report import render_report
from furnace.llm.cache import CachedLLM, MemoryCallLedger, MemoryResponseCache
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.seam import LLMRequest, TaskKind
from furnace.scoring.fitness import bootstrap_interval
from furnace.scoring.probes import load_probe_set, parse_probe_set, split_quota


def _set(n: int, marks: dict[int, str] | None = None) -> Any:
    probes = [{"id": f"p{i:02d}", "message": f"question number {i}"} for i in range(n)]
    for i, split in (marks or {}).items():
        probes[i]["split"] = split
    return parse_probe_set({"name": "s", "probes": probes})


# --- splits -------------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 25))
def test_unmarked_probes_split_by_the_documented_ratio_with_a_test_probe_from_three(n):
    parts = _set(n).splits()
    sizes = {k: len(v) for k, v in parts.items()}
    assert sizes == split_quota(n) and sum(sizes.values()) == n and sizes["train"] >= 1
    assert (sizes["test"] >= 1) == (n >= 3)
    assert abs(sizes["test"] - n / 4) <= 1 and abs(sizes["validation"] - n / 4) <= 1
    again = _set(n).splits()  # deterministic: a function of the ids only
    assert {k: [p.id for p in v] for k, v in parts.items()} == {k: [p.id for p in v] for k, v in again.items()}


def test_marks_are_kept_and_the_rest_fill_the_quota():
    parts = _set(8, {0: "test", 1: "test", 2: "validation"}).splits()
    assert [p.id for p in parts["test"]] == ["p00", "p01"]  # the quota of 8 is 2: no unmarked probe added
    assert "p02" in [p.id for p in parts["validation"]] and len(parts["validation"]) == 2


def test_marks_that_leave_no_test_probe_are_refused():
    with pytest.raises(InputError, match="test probe"):
        _set(3, {0: "train", 1: "train", 2: "validation"})
    with pytest.raises(InputError, match="train probe"):
        _set(2, {0: "test", 1: "validation"})


def test_a_rule_across_the_probes_is_refused_in_the_files_name_not_an_elixirs():
    data = {"name": "edge", "probes": [{"id": "a", "message": "m", "split": "test"}, {"id": "b", "message": "n"}]}
    with pytest.raises(InputError) as refused:
        parse_probe_set(data, source="edge.yaml")
    assert str(refused.value).startswith("edge.yaml: a probe set needs at least one train probe")
    assert "elixir" not in str(refused.value)


@pytest.mark.parametrize("name", ["writing-en", "writing-zh", "support-en"])
def test_shipped_sets_have_at_least_twelve_probes_and_every_split(name):
    probes = load_probe_set(name)
    parts = probes.splits()
    assert len(probes.probes) >= 12 and all(parts[k] for k in ("train", "validation", "test"))
    assert {load_probe_set("writing-zh").language, probes.language} >= {"zh"}


# --- no leak ------------------------------------------------------------------


class Recorder:
    """The model seam, recording every request (thread-safe)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_name = inner, inner.model_name
        self.requests: list[LLMRequest] = []
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> Any:
        with self._lock:
            self.requests.append(request)
        return self.inner.complete(request)


def _text(request: LLMRequest) -> str:
    return " ".join(m.content for m in request.messages) + repr(request.inputs)


LEAK = {
    "name": "leak",
    "seed": 5,
    "population": 4,
    "generations": 3,
    "operators": {"crossover": 0.2, "mutation": 0.3, "reflect": 0.5},
    "selection": {"tournament_size": 2, "elitism": 1},
    "probes": {"set": "writing-en"},
    "scorers": {"constraints": 0.2, "fidelity": 0.5, "tone": 0.3},
    "samples_per_probe": 2,
    "minibatch": 2,
    "concurrency": 4,
}


def test_no_test_probe_ever_reaches_an_operator_or_selection():
    cfg = parse_config(LEAK)
    seeds = [e for e in library() if e.language == "en"][: cfg.population]
    model = Recorder(OfflineEngine())
    evo = memory_evolution(cfg, seeds, llm=CachedLLM(model))
    report = evo.run()
    assert report.status == "finished"
    parts = evo.probes.splits()
    test = [p.message for p in parts["test"]]
    validation = [p.message for p in parts["validation"]]
    assert test and validation and model.requests
    search = [r for r in model.requests if r.unit != "held-out"]
    operators = [r for r in search if r.task not in (TaskKind.REPLY, TaskKind.JUDGE)]
    reflects = [r for r in operators if r.task == TaskKind.REFLECT]
    assert reflects and any("answer:" in _text(r) for r in reflects)  # traces: the parent's answers
    for request in search:  # every operator's request, every answer and judgement the search read
        assert not any(message in _text(request) for message in test), request.unit
    for request in reflects:  # feedback and reflection read train probes only
        assert not any(message in _text(request) for message in validation)
    # the test probes were scored, for the report only
    held = [r for r in model.requests if r.unit == "held-out"]
    assert any(message in _text(r) for r in held for message in test)
    assert report.best and report.best["test_fitness"] is not None
    for g in report.generations:  # every generation's best was scored on test, and the report shows it
        best = report.held_out["agents"][g["survivors"][0]]
        assert best["validation"] == pytest.approx(g["best_fitness"]) and best["test"] is not None
        assert (g["best_test_fitness"], g["best_test_low"], g["best_test_high"]) == (
            best["test"],
            best["test_low"],
            best["test_high"],
        )
    assert report.best["test_low"] <= report.best["test_fitness"] <= report.best["test_high"]
    assert report.best["train_test_gap"] == pytest.approx(report.best["train_fitness"] - report.best["test_fitness"])
    # the selection fitness is the validation probes' only
    ids = {p.id for p in parts["validation"]}
    for r in evo.results.individuals(evo.experiment_id):
        if r.scored and r.objectives:
            from furnace.evolution.evaluate import combine

            assert r.fitness == combine([s for s in r.scores if s.probe in ids], cfg.scorers).fitness


def test_the_search_answers_validation_and_only_reflection_minibatches_of_train():
    """As GEPA: every individual is scored on validation (selection's probes); a train probe is answered
    during the search only on a reflect plan's minibatch (the parent's, when it has no rows there, and the
    child's); the report's members answer the rest of train after the search."""
    cfg = parse_config(LEAK)
    seeds = [e for e in library() if e.language == "en"][: cfg.population]
    model = Recorder(OfflineEngine())
    evo = memory_evolution(cfg, seeds, llm=CachedLLM(model))
    report = evo.run()
    parts = evo.probes.splits()
    message_of = {p.id: p.message for p in evo.probes.probes}
    records = evo.results.individuals(evo.experiment_id)
    minibatches: dict[str, set[str]] = {}  # unit -> its minibatch's probe ids
    for r in records:
        for s in r.scores:
            if s.scorer == "minibatch":
                unit = f"g{r.generation}/s{r.slot}"
                minibatches[unit] = set(s.reason.split(" on ")[1].split(", "))
    assert minibatches
    train = {p.id for p in parts["train"]}
    replies = [r for r in model.requests if r.task == TaskKind.REPLY and r.unit != "held-out"]
    for request in replies:
        asked = {pid for pid, message in message_of.items() if message in _text(request)}
        if asked & train:  # a train probe in the search: only a reflect unit's minibatch
            assert asked <= minibatches.get(str(request.unit), set()), request.unit
    for r in records:  # a seed, a crossover or a mutant holds rows of validation probes only
        if r.operator != "reflect" and r.scores:
            assert {s.probe for s in r.scores} - {"*"} <= {p.id for p in parts["validation"]}
    # after the search, the report's members answer the whole train split (their train fitness)
    held = [r for r in model.requests if r.unit == "held-out" and r.task == TaskKind.REPLY]
    assert {pid for pid in train if any(message_of[pid] in _text(r) for r in held)} | {
        pid for b in minibatches.values() for pid in b
    } == train
    assert report.best and report.best["train_fitness"] is not None


# --- samples, determinism, reruns ----------------------------------------------


SAMPLED = {**LEAK, "name": "sampled", "samples_per_probe": 3, "generations": 2, "probes": {"set": "writing-en"}}


def test_same_seed_gives_the_identical_report_with_several_samples():
    cfg = parse_config(SAMPLED)
    seeds = [e for e in library() if e.language == "en"][: cfg.population]
    first = memory_evolution(cfg, seeds).run()
    second = memory_evolution(cfg, seeds).run()
    assert first.result_signature() == second.result_signature()
    assert first.held_out == second.held_out and first.held_out["agents"]
    assert render_report(first).split("calls:")[0] == render_report(second).split("calls:")[0]


def test_each_sample_is_its_own_cached_request_and_a_rerun_makes_no_model_call():
    cfg = parse_config(SAMPLED)
    seeds = [e for e in library() if e.language == "en"][: cfg.population]
    cache, ledger = MemoryResponseCache(), MemoryCallLedger()
    model = Recorder(OfflineEngine())
    results = MemoryResults()
    first = memory_evolution(cfg, seeds, llm=CachedLLM(model, cache, ledger), results=results).run()
    replies = [r for r in model.requests if r.task == TaskKind.REPLY and r.unit == "g0/s0"]
    per_probe: dict[str, set[tuple[int, int | None]]] = {}
    for r in replies:
        per_probe.setdefault(r.inputs["message"], set()).add((r.sample_index, r.seed))
    # every search probe answered samples_per_probe times, each sample with its own index and seed
    assert per_probe and all(len(s) == 3 for s in per_probe.values())
    assert all(len({seed for _, seed in s}) == 3 and {i for i, _ in s} == {0, 1, 2} for s in per_probe.values())
    # the re-evaluation used fresh samples (numbers after the first three), never an old one
    fresh = [r for r in model.requests if r.unit == "held-out" and r.task == TaskKind.REPLY and r.sample_index >= 3]
    assert fresh and first.held_out["reevaluation"]["top"]
    before = len(model.requests)
    again = memory_evolution(cfg, seeds, llm=CachedLLM(model, cache, ledger), results=results).run()
    assert len(model.requests) == before  # the rerun is served from the caches: 0 model calls
    assert again.result_signature() == first.result_signature() and again.held_out == first.held_out
    fresh_store = memory_evolution(cfg, seeds, llm=CachedLLM(model, cache, ledger), results=MemoryResults()).run()
    assert len(model.requests) == before and fresh_store.held_out == first.held_out  # from the response cache


def test_the_report_says_how_much_the_winner_fell_on_re_evaluation():
    cfg = parse_config(SAMPLED)
    seeds = [e for e in library() if e.language == "en"][: cfg.population]
    report = memory_evolution(cfg, seeds).run()
    again = report.held_out["reevaluation"]
    assert again["drop"] == pytest.approx(again["fitness"] - again["reevaluated"])
    assert report.best["agent_id"] == report.held_out["champion"]
    top = again["top"]
    assert top[report.held_out["champion"]] == max(top.values())
    text = render_report(report)
    before, after = f"{again['fitness']:.3f}", f"{again['reevaluated']:.3f}"
    if before == after:
        said = f"held at {after}"
    else:
        said = f"{'fell' if again['drop'] > 0 else 'rose'} from {before} to {after}"
    assert f"re-evaluation with fresh samples: the search's winner {again['agent_id']} {said};" in text
    assert "train - test gap" in text and "test [95% interval]" in text


class _HoldsTheFirstReevaluation(Recorder):
    """Holds the held-out evaluation's first re-evaluation reply until a held-out reply to a test probe
    arrives (or 30 s pass): ``overlapped`` tells whether the test scoring started while it was held."""

    def __init__(self, inner: Any, test: list[str], samples: int) -> None:
        super().__init__(inner)
        self.test, self.samples = test, samples
        self.test_asked = threading.Event()
        self.held = threading.Lock()
        self.overlapped: bool | None = None

    def complete(self, request: LLMRequest) -> Any:
        held_out = request.unit == "held-out" and request.task == TaskKind.REPLY
        if held_out and any(message in _text(request) for message in self.test):
            self.test_asked.set()
        elif held_out and request.sample_index >= self.samples and self.held.acquire(blocking=False):
            self.overlapped = self.test_asked.wait(30)
        return super().complete(request)


def test_the_held_out_steps_run_as_one_and_give_what_they_give_one_after_another(monkeypatch):
    """Re-evaluating the top, and scoring the members on test and on train, run at once when the champion
    can only be one of the members and the three fit in the budget together: the test probes are asked
    while the re-evaluation is still under way, and the figures are those of the steps one after another."""
    cfg = parse_config(SAMPLED)
    seeds = [e for e in library() if e.language == "en"][: cfg.population]
    probe = memory_evolution(cfg, seeds)
    test = [p.message for p in probe.probes.splits()["test"]]
    model = _HoldsTheFirstReevaluation(OfflineEngine(), test, cfg.samples_per_probe)
    at_once = memory_evolution(cfg, seeds, llm=CachedLLM(model)).run()
    assert model.overlapped is True
    monkeypatch.setattr(Evolution, "_steps_fit", lambda self, *steps: False)  # one step after another
    stepwise_model = _HoldsTheFirstReevaluation(OfflineEngine(), test, cfg.samples_per_probe)
    monkeypatch.setattr(stepwise_model.test_asked, "wait", lambda timeout=None: stepwise_model.test_asked.is_set())
    stepwise = memory_evolution(cfg, seeds, llm=CachedLLM(stepwise_model)).run()
    assert stepwise_model.overlapped is False  # the test probes waited for the re-evaluation's end
    assert at_once.held_out == stepwise.held_out and at_once.held_out["agents"]
    assert at_once.result_signature() == stepwise.result_signature()
    assert sorted(map(_key, model.requests)) == sorted(map(_key, stepwise_model.requests))


def test_held_out_steps_that_do_not_fit_together_run_one_after_another_and_stop_where_they_did():
    """What the search left of the budget covers the re-evaluation but not the test scoring too: the steps
    are checked one by one (the re-evaluation runs, the test scoring does not start), as before they could
    run at once."""
    cfg = parse_config(SAMPLED)
    seeds = [e for e in library() if e.language == "en"][: cfg.population]
    unlimited = memory_evolution(cfg, seeds).run()
    assert unlimited.held_out["agents"]
    evo = memory_evolution(cfg, seeds)
    scored = evo._held_out

    def held_out_with_little_left(history: Any) -> Any:
        top = cfg.reevaluate_top * len(evo.validation.probes) * 3 * cfg.samples_per_probe  # reply + 2 judges
        left = cfg.budget.model_copy(update={"max_calls": evo.metered.meter.model_calls + top + 1})
        evo.config = cfg.model_copy(update={"budget": left})
        return scored(history)

    evo._held_out = held_out_with_little_left  # type: ignore[method-assign]
    stopped = evo.run()
    assert stopped.held_out["reevaluation"] == unlimited.held_out["reevaluation"]
    assert "held-out evaluation stopped" in stopped.held_out["stopped"]
    assert stopped.held_out["agents"] == {}


def _key(request: LLMRequest) -> str:
    return request.cache_key("offline")


def test_the_estimate_counts_every_sample():
    from furnace.evolution.estimate import estimate

    one = parse_config({**SAMPLED, "samples_per_probe": 1})
    three = parse_config(SAMPLED)
    probes = load_probe_set("writing-en")
    assert estimate(three, probes).calls > 2.5 * estimate(one, probes).calls


# --- bootstrap ----------------------------------------------------------------


def test_bootstrap_intervals_cover_the_true_mean_at_the_stated_rate():
    rng = random.Random(20261206)
    true_mean = 0.6
    trials, covered = 400, 0
    for t in range(trials):
        values = [min(1.0, max(0.0, rng.gauss(true_mean, 0.15))) for _ in range(40)]
        low, high = bootstrap_interval(values, seed=t, resamples=500)
        covered += low <= true_mean <= high
    assert abs(covered / trials - 0.95) <= 0.05


def test_bootstrap_is_seeded_and_degenerate_cases_are_points():
    values = [0.2, 0.5, 0.9, 0.4]
    assert bootstrap_interval(values, seed=3) == bootstrap_interval(values, seed=3)
    assert bootstrap_interval([0.7], seed=1) == (0.7, 0.7) and bootstrap_interval([], seed=1) == (0.0, 0.0)


# --- minibatch acceptance ---------------------------------------------------------


class Reflector(PureBreeder):
    """A breeder whose reflected child answers better (``better``) or worse than its parent."""

    def __init__(self, seeds: Any, better: bool) -> None:
        super().__init__(seeds)
        self.better = better
        self.briefs: list[str] = []

    def __call__(self, parents, operator, seed, params, llm):  # type: ignore[no-untyped-def]
        bred = super().__call__(parents, "mutation" if operator == "reflect" else operator, seed, params, llm)
        if operator != "reflect":
            return bred
        self.briefs.append(params["feedback"])
        tag = "BETTER" if self.better else "WORSE"
        from furnace.domain.elixir import parse_elixir
        from furnace.domain.render import render_prompt

        data = bred.elixir.model_dump(mode="json", exclude={"content_hash", "version", "created_at", "deleted_at"})
        parent = self.known[parents[0].content_hash]
        child = parse_elixir({**data, "name": f"{tag} {parent.name}"[:120]})
        self.known[child.content_hash] = child
        return type(bred)(bred.agent_id, child, render_prompt(child), bred.lineage_hash)


def _tagged_llm() -> FakeLLM:
    """Replies carry the persona's name; the judge scores an answer by its tags (a child marked WORSE
    scores 0.2, each BETTER adds 0.1 to 0.5) and always says what is missing."""

    def respond(request: LLMRequest) -> Any:
        if request.task == TaskKind.REPLY:
            return f"{request.inputs['persona']['name']}: an answer to {request.inputs['message']}"
        if request.task == TaskKind.JUDGE:
            text = " ".join(m.content for m in request.messages)
            score = 0.2 if "WORSE" in text else min(0.99, 0.5 + 0.1 * text.count("BETTER"))
            return {"score": score, "reason": "tagged", "feedback": "missing: warmth"}
        return "ok"

    return FakeLLM(respond=respond, model_name="tagged")


@pytest.mark.parametrize("better", [False, True])
def test_minibatch_acceptance_rejects_a_worse_child_and_keeps_a_better_one(better):
    seeds = library()[:4]
    cfg = parse_config(
        {
            "name": "mb",
            "seed": 2,
            "population": 4,
            "generations": 2,
            "operators": {"reflect": 1.0},
            "selection": {"tournament_size": 2, "elitism": 1},
            "probes": {"set": "writing-en", "limit": 8},
            "scorers": {"fidelity": 1.0},
            "samples_per_probe": 2,
            "minibatch": 2,
        }
    )
    breeder = Reflector(seeds, better)
    evo = Evolution(cfg, load_probe_set("writing-en").head(8), seeds, _tagged_llm(), breeder, MemoryResults())
    report = evo.run()
    records = evo.results.individuals(evo.experiment_id)
    children = [r for r in records if r.operator == "reflect"]
    train = {p.id for p in evo.train.probes}
    assert children and breeder.briefs and all("answer:" in b for b in breeder.briefs)
    for child in children:
        (decision,) = [s for s in child.scores if s.scorer == "minibatch"]
        batch = decision.reason.split(" on ")[1].split(", ")
        assert len(batch) == 2 and set(batch) <= train  # the minibatch: train probes, recorded
        probes = {s.probe for s in child.scores if s.scorer != "minibatch"}
        if better:
            assert decision.value == 1.0 and decision.reason.startswith("accepted")
            assert probes >= {p.id for p in evo.validation.probes}  # then evaluated on validation
        else:
            assert decision.value == 0.0 and decision.reason.startswith("rejected")
            assert probes == set(batch)  # never evaluated on validation
    survivors = {a for g in evo.results.generations(evo.experiment_id) for a in g.survivors}
    taken = {c.agent_id for c in children} & survivors
    ranked = {row["agent_id"] for row in report.leaderboard}
    if better:
        assert taken and report.rejected == 0
    else:
        assert not taken and not ({c.agent_id for c in children} & ranked) and report.rejected == len(children)
    lineage = {n["agent_id"]: n for n in report.lineage}
    assert all("minibatch" in lineage[c.agent_id] for c in children if c.agent_id in lineage)


@pytest.mark.parametrize(
    ("fitness", "reevaluated", "said"),
    [
        (0.691, 0.6921, "rose from 0.691 to 0.692"),
        (0.7, 0.68, "fell from 0.700 to 0.680"),
        (0.668054, 0.668099, "held at 0.668"),
    ],
)
def test_the_re_evaluation_says_whether_the_winner_fell_or_rose(fitness, reevaluated, said) -> None:
    from furnace.domain.text import signed
    from furnace.evolution.report import reevaluation_text

    # a winner that scored higher again was said to have "fallen", by a "drop -0.000"
    assert reevaluation_text({"fitness": fitness, "reevaluated": reevaluated, "drop": fitness - reevaluated}) == said
    assert signed(-0.0004) == "+0.000" and signed(-0.0125) == "-0.013"
