"""What the loop hands each operator: its parents (tournament or per-probe Pareto) and its params.

A multi-parent operator's (crossover's) second parent is a *founder* — a scored seed of
generation 0 the first parent does not descend from, each in turn (:class:`BreedingMemory`) —
not a second tournament winner.
Selection fills the population with the best line within a generation or two (with elitism =
half, the weaker seeds are displaced by the first children), so two tournament winners are
near-copies whose union adds nothing (on the search benchmark's Chinese target: 46 such
crossovers over 10 seeds, none better than its parent); a founder brings back the material
selection dropped (there: personal-finance x lifestyle-blogger, 防晒 and a warmer tone, +0.06).

A mutation's moves are planned by the loop (:class:`BreedingMemory`): genes drawn as the operator
draws them (each with probability ``mutation_rate``, at least one), then, within a gene, a move
the run has not planned on the parent's line yet (a line: the founders a member descends from) —
without replacement: a gene with nothing left gives way to one with moves left, and only once every
move of the parent has been planned are they all open again. A persona's neighbourhood is small (on
the search benchmark's launch-coach-en: 4 principles and 4 areas of expertise it could lead with, 8
tone directions, 5 rewordings, 4 length limits, 5 topics) and the move that pays can be a single one
of them ("start from the simplest baseline" first, +0.033): drawn with replacement, the ~26 mutants
of a 400-call run tried a failed move up to four times and missed that one in 30 of 100 runs.

``reflect`` reads traces, as GEPA's reflective proposer does: the loop draws a *minibatch* of
train probes (seeded, in plan order; the plan's ``minibatch`` param), and the unit builds the
reflection brief from them (:func:`trace_brief`): per probe the message, the parent's answer
(its sample 0: the reply the unit's scoring judged, or read back from the response cache for a
recorded row) and the judge's feedback, weakest first. Only
train probes ever reach it: validation and test probes never appear in an operator's request.
The child is then scored on the minibatch and kept only if it beats its parent there
(:func:`minibatch_score`; the engine records the decision).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from furnace.domain.elixir import Elixir
from furnace.evolution.config import ExperimentConfig
from furnace.evolution.evaluate import probe_fitness
from furnace.evolution.records import IndividualRecord, ScoreRow
from furnace.evolution.selection import pareto_parent, tournament
from furnace.fusion.operators.mutation import chosen_genes, neighbourhood
from furnace.scoring.feedback import MAX_BRIEF, clause, parse_clauses
from furnace.scoring.probes import ProbeSet

SINGLE_PARENT = ("mutation", "reflect")
ANSWER_SHOWN = 400  # characters of the parent's answer a trace shows


def parent_picker(
    config: ExperimentConfig,
    population: Sequence[IndividualRecord],
    rng: random.Random,
    probes: Sequence[str] | None = None,
) -> Callable[[], IndividualRecord]:
    """A draw of one parent by the configured selection method (``probes``: the per-probe Pareto pool's
    instances, an experiment's validation probes)."""
    size = config.selection.tournament_size
    if config.selection.method == "pareto":
        return lambda: pareto_parent(population, config.scorers, rng, size, probes)
    return lambda: tournament(population, size, rng)


def founder_partner(
    first: IndividualRecord, founders: Sequence[IndividualRecord], rng: random.Random
) -> IndividualRecord | None:
    """The second parent of a multi-parent operator: a founder other than ``first``, drawn
    uniformly (None when there is none: the loop then mutates ``first`` instead). The loop draws
    through its :class:`BreedingMemory` (``partner``), which also leaves out ``first``'s own founders
    and takes each founder in turn."""
    pool = [f for f in founders if f.agent_id != first.agent_id]
    return rng.choice(pool) if pool else None


class BreedingMemory:
    """What a run has tried, so it tries everything once before it repeats anything: the founders it
    crossed with (:meth:`partner`) and, per *line* (the set of founders a member descends from), the
    moves of its mutations (:meth:`moves`). Fed in plan order, and with each child as it is taken in
    (for its founders), so a run and its replay see the same.

    A mutant's moves are drawn from the run's generator: the genes as the operator draws them (a drawn
    gene whose moves have all been planned on the line gives way to a gene with moves left), then per
    gene a kind (a tone dimension, a list, a kind of constraint) and a move of it that no earlier plan
    on the line has made. Once every move of the parent has been planned on its line, all are open
    again (a new cycle). Moves are named by content (``mutation.neighbourhood``), so a move tried on
    one member of a line is not tried again on its near-copies (its neutral variants); a crossover
    starts a new line with a fresh neighbourhood."""

    def __init__(self) -> None:
        self.planned: dict[frozenset[str], set[str]] = {}  # a line's founders -> the moves planned on it
        self.partners: set[str] = set()
        self.roots: dict[str, frozenset[str]] = {}  # agent id -> the founders it descends from

    def took(self, child: IndividualRecord, parents: Sequence[IndividualRecord]) -> None:
        """Record ``child``'s founders (its parents' founders; a founder is its own)."""
        self.roots[child.agent_id] = frozenset().union(*(self.line(p) for p in parents))

    def line(self, ind: IndividualRecord) -> frozenset[str]:
        """The founders ``ind`` descends from (itself, for a founder)."""
        return self.roots.get(ind.agent_id, frozenset({ind.agent_id}))

    def partner(
        self, first: IndividualRecord, founders: Sequence[IndividualRecord], rng: random.Random
    ) -> IndividualRecord | None:
        """A founder ``first`` does not descend from (crossing a line with its own founder pairs
        near-copies), one not yet taken as a partner — each in turn, then all again. None when
        ``first`` descends from every founder (the loop then mutates it instead)."""
        pool = [f for f in founders if f.agent_id not in self.line(first)]
        if not pool:
            return None
        fresh = [f for f in pool if f.agent_id not in self.partners]
        if not fresh:
            self.partners -= {f.agent_id for f in pool}  # every partner has had its turn: a new cycle
            fresh = pool
        chosen = rng.choice(fresh)
        self.partners.add(chosen.agent_id)
        return chosen

    def moves(self, parent: IndividualRecord, rate: float, rng: random.Random) -> list[str]:
        """The moves of one mutant of ``parent`` (recorded as planned)."""
        hood = neighbourhood(Elixir.model_validate(parent.elixir))
        every = {key for kinds in hood.values() for keys in kinds.values() for key in keys}
        planned = self.planned.setdefault(self.line(parent), set())
        if every <= planned:
            planned -= every  # a new cycle
        fresh = {
            gene: {kind: [k for k in keys if k not in planned] for kind, keys in kinds.items()}
            for gene, kinds in hood.items()
        }
        fresh = {gene: {k: v for k, v in kinds.items() if v} for gene, kinds in fresh.items()}
        fresh = {gene: kinds for gene, kinds in fresh.items() if kinds}
        genes: list[str] = []
        for gene in chosen_genes(rng, rate):
            if gene not in fresh or gene in genes:  # nothing left to try there: another gene with moves left
                left = [g for g in sorted(fresh) if g not in genes]
                if not left:
                    continue
                gene = rng.choice(left)
            genes.append(gene)
        keys: list[str] = []
        for gene in genes:
            kinds = fresh[gene]
            key = rng.choice(kinds[rng.choice(list(kinds))])
            planned.add(key)
            keys.append(key)
        return keys


def operator_params(
    op: str,
    parent: IndividualRecord,
    config: ExperimentConfig,
    probes: ProbeSet,
    moves: Callable[[], list[str]] | None = None,
    rng: random.Random | None = None,
) -> dict[str, Any]:
    """The params the loop sets for ``op`` (the rest are the operator's defaults); ``moves`` plans a
    mutation's moves (drawn by the operator without it). ``probes`` are the train probes: a reflect
    plan's minibatch is drawn from them with ``rng`` (the first ones without it)."""
    if op == "mutation":
        params: dict[str, Any] = {"rate": config.mutation_rate}
        if moves is not None:
            params["moves"] = moves()
        return params
    if op == "reflect":
        ids = [p.id for p in probes.probes]
        size = min(config.minibatch, len(ids))
        chosen = set(rng.sample(ids, size) if rng is not None else ids[:size])
        return {"minibatch": [i for i in ids if i in chosen]}
    return {}


def minibatch_score(rows: Sequence[ScoreRow], probe_ids: Sequence[str], scorers: dict[str, float]) -> float | None:
    """The mean per-probe fitness (:func:`~furnace.evolution.evaluate.probe_fitness`) over ``probe_ids``;
    None when a probe has no scored row (nothing to compare)."""
    per_probe = probe_fitness([r for r in rows if r.probe in probe_ids], scorers)
    if any(p not in per_probe for p in probe_ids) or not probe_ids:
        return None
    return round(sum(per_probe[p] for p in probe_ids) / len(probe_ids), 6)


def trace_brief(
    rows: Sequence[ScoreRow], minibatch: ProbeSet, answers: dict[str, str], scorers: dict[str, float]
) -> str:
    """The reflection brief of a minibatch: one block per probe, weakest first (then by id) — its
    score, message, the parent's answer and the judge's feedback clauses (each once). Empty when no
    probe of the minibatch has feedback: there is nothing to reflect on."""
    if not any(r.feedback for r in rows if r.probe in {p.id for p in minibatch.probes}):
        return ""
    per_probe = probe_fitness(rows, scorers)
    ranked = sorted(minibatch.probes, key=lambda p: (per_probe.get(p.id, 0.0), p.id))
    blocks = []
    for probe in ranked:
        lines = [f"probe: {probe.id} ({per_probe.get(probe.id, 0.0):.2f})", f"message: {_flat(probe.message, 300)}"]
        if probe.id in answers:
            lines.append(f"answer: {_flat(answers[probe.id], ANSWER_SHOWN)}")
        own = sorted((r for r in rows if r.probe == probe.id), key=lambda r: r.scorer)
        notes = [clause(c, d) if c else d for r in own for c, d in parse_clauses(r.feedback)]
        blocks.append("\n".join([*lines, *dict.fromkeys(notes)]))  # each clause once, in order
    return "\n\n".join(blocks)[:MAX_BRIEF]


def _flat(text: str, limit: int) -> str:
    """One line (clause separators made commas, so an answer never reads as a feedback clause)."""
    return " ".join(text.replace(";", ",").split())[:limit]
