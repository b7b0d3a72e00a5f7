"""Reflective evolution and per-probe Pareto selection, end to end on the offline engine."""

from __future__ import annotations

import random

import pytest

from experiments.helpers import library
from furnace.domain.errors import InputError
from furnace.evolution.config import parse_config
from furnace.evolution.local import memory_evolution
from furnace.evolution.records import IndividualRecord, ScoreRow
from furnace.evolution.reflection import BreedingMemory, founder_partner
from furnace.evolution.selection import pareto_parent, probe_frontier, probe_scores
from furnace.fusion.operators.mutation import neighbourhood
from furnace.scoring.base import persona_inputs
from furnace.scoring.probes import load_probe_set

CONFIG = {
    "name": "reflect",
    "seed": 4,
    "population": 4,
    "generations": 2,
    "seeds": {"language": "en"},
    "operators": {"mutation": 0.3, "reflect": 0.7},
    "selection": {"tournament_size": 2, "elitism": 1},
    "probes": {"set": "writing-en", "limit": 2},
    "scorers": {"constraints": 0.2, "fidelity": 0.5, "tone": 0.3},
    "concurrency": 2,
}


def run(**overrides):
    cfg = parse_config({**CONFIG, **overrides})
    seeds = [e for e in library() if e.language == "en"][: cfg.population]
    evo = memory_evolution(cfg, seeds)
    report = evo.run()
    records = evo.results.individuals(evo.experiment_id)
    return evo, report, records


def facts(records):
    return [(r.generation, r.slot, r.agent_id, r.lineage_hash, r.fitness, r.scores) for r in records]


@pytest.mark.parametrize("selection", ["tournament", "pareto"])
def test_same_seed_and_model_give_identical_lineage_hashes_and_scores(selection):
    _, first, a = run(selection=selection)
    _, second, b = run(selection=selection)
    assert facts(a) == facts(b) and first.result_signature() == second.result_signature()
    reflected = [r for r in a if r.operator == "reflect" and r.scores]
    assert reflected and all(r.lineage_hash for r in reflected)


def test_the_default_search_is_reproducible_and_its_mutants_change_what_they_lead_with():
    data = {k: v for k, v in CONFIG.items() if k not in ("operators", "selection")} | {"generations": 3}
    cfg = parse_config(data)
    assert cfg.operators == {"crossover": 0.2, "mutation": 0.8}
    assert (cfg.selection.tournament_size, cfg.selection.elitism) == (5, 2)  # elitism: half the population
    seeds = [e for e in library() if e.language == "en"][: cfg.population]
    runs = []
    for _ in range(2):
        evo = memory_evolution(cfg, seeds)
        evo.run()
        runs.append((evo, evo.results.individuals(evo.experiment_id)))
    (_, a), (_, b) = runs
    assert facts(a) == facts(b)
    assert [len([r for r in a if r.generation == g]) for g in range(4)] == [4, 2, 2, 2]  # the other half
    by_id = {r.agent_id: r for r in a}
    led = [
        r
        for r in a
        if r.operator == "mutation"
        and r.elixir["principles"][0] != by_id[r.parents[0]].elixir["principles"][0]
        and sorted(r.elixir["principles"]) == sorted(by_id[r.parents[0]].elixir["principles"])
    ]
    mutants = [r for r in a if r.operator == "mutation"]
    assert mutants
    assert led or any(r.elixir["expertise"][0] != by_id[r.parents[0]].elixir["expertise"][0] for r in mutants), (
        "no mutant moved a principle or an area of expertise to the front"
    )


def test_reflect_children_read_their_parents_feedback_and_are_on_the_operator_board():
    evo, report, records = run()
    assert "reflect" in report.operators and report.operators["reflect"]["children"] > 0
    for child in (r for r in records if r.operator == "reflect" and r.scores):
        (parent_id,) = child.parents
        parent = next(r for r in records if r.agent_id == parent_id)
        notes = [s.feedback for s in parent.scores if s.feedback]
        assert notes, "a reflected parent had judge feedback to read"
        assert child.elixir != parent.elixir


def test_a_reflect_without_usable_feedback_is_a_recorded_failure_not_a_copy():
    # probes without a target: tone is judged against the persona's own settings, which yields no feedback
    _, report, records = run(
        scorers={"constraints": 0.5, "tone": 0.5},
        operators={"reflect": 1.0},
        probes={"set": "support-en", "limit": 2},
    )
    failed = [r for r in records if r.operator == "reflect"]
    assert failed and all(not r.scores and r.failures == 1 for r in failed)
    assert all("reflect: no feedback to act on" in r.failure_reasons[0] for r in failed)
    assert report.operators["reflect"]["failures"] == len({r.agent_id for r in failed}) > 0
    assert report.operators["reflect"]["successes"] == 0


def _ind(agent_id, fitness, per_probe):
    rows = tuple(ScoreRow(p, "fidelity", v, "") for p, v in per_probe.items()) + (ScoreRow("*", "diversity", 1, ""),)
    return IndividualRecord("e", 1, agent_id, 0, "seed", (), None, {}, "", fitness, {}, rows)


def test_probe_frontier_keeps_every_member_best_on_some_probe():
    pop = [
        _ind("a", 0.9, {"p1": 0.9, "p2": 0.9, "p3": 0.1}),
        _ind("b", 0.5, {"p1": 0.2, "p2": 0.2, "p3": 0.8}),  # lower fitness, but leads p3
        _ind("c", 0.6, {"p1": 0.5, "p2": 0.5, "p3": 0.5}),  # dominated on every probe
        _ind("d", 0.4, {"p1": 0.9, "p2": 0.1, "p3": 0.1}),  # ties a on p1
    ]
    assert probe_scores(pop[0], {"fidelity": 1.0, "diversity": 1.0}) == {"p1": 0.9, "p2": 0.9, "p3": 0.1}
    assert probe_frontier(pop, {"fidelity": 1.0}) == {"a": 2, "b": 1, "d": 1}
    # an experiment's pool: its validation probes only (b leads p3 alone, a train probe here)
    assert probe_frontier(pop, {"fidelity": 1.0}, {"p1", "p2"}) == {"a": 2, "d": 1}
    draws = [pareto_parent(pop, {"fidelity": 1.0}, random.Random(s), 2).agent_id for s in range(200)]
    assert set(draws) == {"a", "b", "d"} and draws.count("a") > draws.count("b")
    # no per-probe scores at all: a tournament
    bare = [IndividualRecord("e", 1, x, 0, "seed", (), None, {}, "", f, {}) for x, f in (("x", 0.1), ("y", 0.9))]
    assert pareto_parent(bare, {"fidelity": 1.0}, random.Random(0), 2).agent_id == "y"


def test_selection_shorthand_and_bad_values():
    assert parse_config({**CONFIG, "selection": "pareto"}).selection.method == "pareto"
    assert parse_config(CONFIG).selection.method == "tournament"
    with pytest.raises(InputError, match="selection"):
        parse_config({**CONFIG, "selection": "roulette"})
    assert load_probe_set("writing-en").target_for(load_probe_set("writing-en").probes[0])["language"] == "en"


def test_crossover_crosses_the_selected_parent_with_a_founder():
    cfg = {"operators": {"crossover": 0.7, "mutation": 0.3}, "generations": 3, "population": 5}
    _, _, records = run(**cfg)
    founders = {r.agent_id for r in records if r.generation == 0}
    crossed = [r for r in records if r.operator == "crossover"]
    assert crossed, "no crossover was drawn"
    for r in crossed:
        assert len(r.parents) == 2 and r.parents[1] in founders and r.parents[1] != r.parents[0]
    assert any(r.parents[0] not in founders for r in crossed)  # the first parent comes from selection


def test_founder_partner_is_never_the_first_parent_and_none_without_another_founder():
    a, b, c = (_ind(x, 0.5, {"p": 0.5}) for x in ("a", "b", "c"))
    rng = random.Random(1)
    assert {founder_partner(a, [a, b, c], rng).agent_id for _ in range(40)} == {"b", "c"}
    assert founder_partner(a, [a], rng) is None and founder_partner(a, [], rng) is None


def _member(agent_id, elixir):
    return IndividualRecord("e", 1, agent_id, 0, "seed", (), None, persona_inputs(elixir), "", 0.5, {}, ())


@pytest.mark.parametrize("rate", [0.25, 1.0])
def test_breeding_memory_plans_every_move_of_a_line_once_before_repeating_any(rate):
    elixir = next(e for e in library() if e.id == "data-science-mentor")
    every = [key for kinds in neighbourhood(elixir).values() for keys in kinds.values() for key in keys]

    def plan(seed):
        memory, rng = BreedingMemory(), random.Random(seed)
        members = [_member("a", elixir), _member("b", elixir)]  # a founder and its near-copy: one line
        memory.took(members[1], [members[0]])
        keys = []
        for i in range(3 * len(every)):
            keys.append(memory.moves(members[i % 2], rate, rng))
        return keys

    calls = plan(7)
    assert calls == plan(7)  # the same generator gives the same plans
    flat = [key for call in calls for key in call]
    assert all(call for call in calls) and all(len(call) == len(set(call)) for call in calls)
    cycle = flat[: len(every)]
    assert sorted(cycle) == sorted(every)  # every move once before any move twice
    assert len(flat) > len(every) and set(flat[len(every) :]) <= set(every)  # then a new cycle
    if rate == 1.0:
        assert len(calls[0]) == 4  # rate is each gene's chance, as in the operator
    other = BreedingMemory()
    other.moves(_member("c", elixir), rate, random.Random(1))
    fresh_line = other.moves(_member("d", elixir), rate, random.Random(1))  # another founder: its own line
    assert fresh_line == BreedingMemory().moves(_member("d", elixir), rate, random.Random(1))


def test_breeding_memory_crosses_a_line_with_founders_it_does_not_descend_from_each_in_turn():
    a, b, c, d = (_ind(x, 0.5, {"p": 0.5}) for x in ("a", "b", "c", "d"))
    founders = [a, b, c, d]
    memory, rng = BreedingMemory(), random.Random(3)
    child = _ind("x", 0.6, {"p": 0.6})
    memory.took(child, [a, b])  # x descends from a and b
    picks = [memory.partner(child, founders, rng).agent_id for _ in range(6)]
    assert all(set(picks[i : i + 2]) == {"c", "d"} for i in (0, 2, 4))  # never its own founders; each in turn
    grandchild = _ind("y", 0.7, {"p": 0.7})
    memory.took(grandchild, [child, c])
    assert memory.line(grandchild) == {"a", "b", "c"}
    assert memory.partner(grandchild, founders, rng).agent_id == "d"
    last = _ind("z", 0.8, {"p": 0.8})
    memory.took(last, [grandchild, d])
    assert memory.partner(last, founders, rng) is None  # descends from every founder: the loop mutates it instead
    assert memory.partner(a, founders, rng).agent_id in {"b", "c", "d"}  # a founder's line is itself


def test_the_loop_passes_planned_moves_to_its_mutations():
    cfg = parse_config({**CONFIG, "operators": {"mutation": 1.0}, "generations": 3})
    seeds = [e for e in library() if e.language == "en"][: cfg.population]
    evo = memory_evolution(cfg, seeds)
    evo.run()
    mutants = [r for r in evo.results.individuals(evo.experiment_id) if r.operator == "mutation" and r.scores]
    assert mutants
    planned = [evo.breeder.store.get_agent(r.agent_id).lineage.params["moves"] for r in mutants]
    assert all(planned) and all(isinstance(k, str) for keys in planned for k in keys)
    flat = [k for keys in planned for k in keys]
    assert len(flat) == len(set(flat))  # a short run is within one cycle: no move planned twice
