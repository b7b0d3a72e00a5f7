"""mutation: a small, seeded, rate-bounded perturbation of one elixir.

Four genes, each changed with probability ``rate`` (at least one always is), all
drawn from the one seeded ``random.Random``:

1. ``tone``: one tone dimension shifts up or down by at most ``min(0.2, rate)``, clamped to [0, 1];
2. ``principle``: one principle is reworded by the REWRITE task (sub-result cached by
   the principle, language, seed, temperature, model and op version) — a paraphrase,
   never a stock prefix; kept as it is when no rewording fits;
3. ``emphasis``: one principle or one area of expertise moves to the front — what the
   persona leads with (a model weighs what comes first; the offline reply answers from
   the first expertise and principles when nothing in the message picks another);
4. ``constraint``: one constraint is tightened (a length limit added or lowered, a
   forbidden topic added, or the markdown requirement added) — guardrails never
   loosen: ``forbidden_topics``, ``conflicts_with`` and the limits are kept or tightened.

**Moves.** Each change is a *move* named by a key (:func:`neighbourhood` lists a persona's
moves per gene and kind): ``tone-up:<dimension>`` / ``tone-down:<dimension>``,
``reword:<principle>``, ``lead-principle:<principle>`` / ``lead-expertise:<item>``,
``max_length:<n>``, ``topic:<topic>``, ``markdown:``. Without the ``moves`` param the operator
draws them: for each drawn gene a kind (a tone dimension, a list, a kind of constraint),
then a move of that kind, uniformly. With ``moves`` (what an experiment passes: see
``furnace.evolution.reflection.MovePlanner``) it makes exactly those moves; only the size
of a tone shift and the wording of a paraphrase are drawn.

A mutant always differs from its parent: when every move comes back unchanged (no
paraphrase rule fits the principle, nothing to reorder, every constraint already at its
tightest, a move that no longer applies), the remaining genes are tried in a seeded order
until one changes; the notes say what was kept and what changed instead.

The same parent, seed and params always give the same child. (op_version 2 changed
tone, one principle and one constraint every time: every mutant tightened a
constraint, and nothing could change what a persona leads with. op_version 3 could
return an exact copy: 10 % of the children on the search benchmark's Chinese target,
whose best seed has two principles no zh paraphrase rule fits, each costing a full
evaluation for nothing. op_version 4 could only draw its moves; version 5 also takes them
as the ``moves`` param, and draws a tone shift as a direction and a size.)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from furnace.domain.elixir import MAX_LIST, Elixir, Tone, parse_elixir
from furnace.domain.errors import InputError
from furnace.domain.lineage import ResolutionNote
from furnace.fusion.operators import prompts
from furnace.fusion.operators.base import OperatorContext, OperatorResult

MAX_TONE_SHIFT = 0.2
LENGTH_CHOICES = (120, 200, 300, 500)
TOPIC_POOL = {
    "en": ("politics", "medical diagnoses", "legal advice", "gambling", "personal investment advice"),
    "zh": ("政治", "医疗诊断", "法律意见", "赌博", "个人投资建议"),
}
GENES = ("tone", "principle", "emphasis", "constraint")
MOVE_KINDS = (
    "tone-up",
    "tone-down",
    "reword",
    "lead-principle",
    "lead-expertise",
    "max_length",
    "topic",
    "markdown",
)


@dataclass
class _Genome:
    """What a mutation changes, as it is being changed."""

    tone: Tone
    principles: list[str]
    expertise: list[str]
    constraints: dict[str, Any]

    @classmethod
    def of(cls, elixir: Elixir) -> _Genome:
        return cls(elixir.tone, list(elixir.principles), list(elixir.expertise), elixir.constraints.model_dump())

    def changed(self, parent: Elixir) -> bool:
        """Whether anything differs from ``parent``."""
        return (
            self.tone != parent.tone
            or self.principles != list(parent.principles)
            or self.expertise != list(parent.expertise)
            or self.constraints != parent.constraints.model_dump()
        )


def _neighbourhood(state: _Genome, language: str) -> dict[str, dict[str, list[str]]]:
    hood: dict[str, dict[str, list[str]]] = {gene: {} for gene in GENES}
    for dim in Tone.DIMENSIONS:
        value = getattr(state.tone, dim)
        keys = [f"tone-up:{dim}"] if value < 1.0 else []
        keys += [f"tone-down:{dim}"] if value > 0.0 else []
        hood["tone"][dim] = keys
    hood["principle"]["reword"] = [f"reword:{p}" for p in state.principles]
    hood["emphasis"]["principles"] = [f"lead-principle:{p}" for p in state.principles[1:]]
    hood["emphasis"]["expertise"] = [f"lead-expertise:{x}" for x in state.expertise[1:]]
    c = state.constraints
    hood["constraint"]["length"] = [
        f"max_length:{n}" for n in LENGTH_CHOICES if c["max_length"] is None or n < c["max_length"]
    ]
    taken = {t.casefold() for t in c["forbidden_topics"]}
    if len(c["forbidden_topics"]) < MAX_LIST:
        pool = TOPIC_POOL.get(language, TOPIC_POOL["en"])
        hood["constraint"]["topic"] = [f"topic:{t}" for t in pool if t.casefold() not in taken]
    hood["constraint"]["markdown"] = [] if c["must_use_markdown"] else ["markdown:"]
    return {g: {k: keys for k, keys in kinds.items() if keys} for g, kinds in hood.items()}


def neighbourhood(elixir: Elixir) -> dict[str, dict[str, list[str]]]:
    """Every single move a mutation can make on ``elixir``: gene -> kind -> move keys (in a fixed
    order; a gene or kind with no move is left out)."""
    hood = _neighbourhood(_Genome.of(elixir), elixir.language)
    return {gene: kinds for gene, kinds in hood.items() if kinds}


def chosen_genes(rng: random.Random, rate: float) -> tuple[str, ...]:
    """The genes this mutation changes: each with probability ``rate``, at least one (seeded)."""
    genes = tuple(g for g in GENES if rng.random() < rate)
    return genes or (rng.choice(GENES),)


def check_moves(moves: Any) -> list[str]:
    """The ``moves`` param as a list of well-formed move keys (InputError otherwise)."""
    if not isinstance(moves, list | tuple) or not all(isinstance(m, str) for m in moves):
        raise InputError("moves must be a list of move keys", field="moves")
    for key in moves:
        if key.partition(":")[0] not in MOVE_KINDS:
            raise InputError(f"unknown move {key!r} (kinds: {', '.join(MOVE_KINDS)})", field="moves")
    return list(moves)


class Mutation:
    """Seeded perturbation of one elixir (each gene with probability ``rate``: tone, one principle's wording,
    what it leads with, one constraint), or exactly the moves it is given."""

    name = "mutation"
    op_version = "5"
    min_parents = 1
    max_parents: int | None = 1

    def param_defaults(self) -> dict[str, Any]:
        """Rate 0.25 keeps the child recognisable; rewrite temperature 0.7; moves drawn (none given)."""
        return {"rate": 0.25, "temperature": 0.7, "moves": []}

    def max_calls(self, parents: Sequence[Elixir], params: dict[str, Any]) -> int:
        """One rewrite per ``reword`` move given, and one more: a drawn principle move (at most one gene of
        each kind is drawn, and the redraw when nothing changed skips the genes drawn)."""
        moves = params.get("moves") or ()
        return sum(1 for m in moves if str(m).startswith("reword:")) + 1

    def apply(self, parents: Sequence[Elixir], ctx: OperatorContext) -> OperatorResult:
        """The mutant of the single parent."""
        (parent,) = parents
        rate = float(ctx.params["rate"])
        if not 0.0 < rate <= 1.0:
            raise InputError(f"rate must be in (0, 1], got {rate:g}", field="rate")
        given = check_moves(ctx.params.get("moves") or [])
        rng = ctx.rng
        state = _Genome.of(parent)
        if given:
            genes: tuple[str, ...] = ()
            notes = [self._move(key, parent, state, rng, rate, ctx) for key in given]
        else:
            genes = chosen_genes(rng, rate)
            notes = [self._draw(gene, parent, state, rng, rate, ctx) for gene in genes]
        if not state.changed(parent):  # every move came back as it was: change another gene
            for gene in rng.sample([g for g in GENES if g not in genes], len(GENES) - len(genes)):
                notes.append(self._draw(gene, parent, state, rng, rate, ctx))
                if state.changed(parent):
                    break
        data = parent.model_dump(mode="json", exclude={"content_hash", "version", "created_at", "deleted_at"})
        data.update(
            id=ctx.child_id,
            name=(parent.name + f" ~{ctx.params.get('seed', 0)}")[:120],
            tone=state.tone.model_dump(),
            principles=state.principles,
            expertise=state.expertise,
            constraints=state.constraints,
        )
        return OperatorResult(child=parse_elixir(data), notes=notes)

    def _draw(
        self, gene: str, parent: Elixir, state: _Genome, rng: random.Random, rate: float, ctx: OperatorContext
    ) -> ResolutionNote:
        """Draw one move of ``gene`` (a kind, then a move of it) and make it."""
        kinds = _neighbourhood(state, parent.language)[gene]
        if not kinds:
            reason = {
                "principle": "no principle to reword",
                "emphasis": "nothing to reorder",
                "constraint": "every constraint is already at its tightest",
            }.get(gene, "nothing to change")
            return ResolutionNote(field=gene, chose="kept", reason=reason)
        keys = kinds[rng.choice(list(kinds))]
        return self._move(rng.choice(keys), parent, state, rng, rate, ctx)

    def _move(
        self, key: str, parent: Elixir, state: _Genome, rng: random.Random, rate: float, ctx: OperatorContext
    ) -> ResolutionNote:
        """Make the move ``key`` on ``state``; the note says what changed, or why nothing did."""
        kind, _, arg = key.partition(":")
        if kind in ("tone-up", "tone-down"):
            bound = min(MAX_TONE_SHIFT, rate)
            size = round(rng.uniform(0.0, bound), 3) or min(0.001, bound)  # a shift that rounds to 0 still shifts
            old = getattr(state.tone, arg)
            new = round(min(1.0, max(0.0, old + (size if kind == "tone-up" else -size))), 3)
            state.tone = state.tone.model_copy(update={arg: new})
            reason = f"seeded shift {new - old:+.3f} (|Δ| ≤ {bound:g}), clamped to [0, 1]"
            return ResolutionNote(field=f"tone.{arg}", chose=f"{old:g} → {new:g}", reason=reason)
        if kind == "reword":
            return self._reword(arg, parent, state, ctx)
        if kind in ("lead-principle", "lead-expertise"):
            name = "principles" if kind == "lead-principle" else "expertise"
            items: list[str] = getattr(state, name)
            if arg not in items[1:]:
                return ResolutionNote(field=f"{name}[0]", chose="kept", reason=f"{arg!r} is first or absent")
            index = items.index(arg)
            setattr(state, name, [arg, *items[:index], *items[index + 1 :]])
            return ResolutionNote(field=f"{name}[0]", chose=arg, reason=f"mutation moved {name}[{index}] first")
        return self._tighten(kind, arg, state)

    def _reword(self, principle: str, parent: Elixir, state: _Genome, ctx: OperatorContext) -> ResolutionNote:
        principles = state.principles
        if principle not in principles:
            return ResolutionNote(field="principles", chose="kept", reason=f"no principle {principle!r} to reword")
        index = principles.index(principle)
        reworded = self._rewrite(principle, parent.language, ctx)
        others = {p.casefold() for i, p in enumerate(principles) if i != index}
        if reworded.casefold() in others:
            reworded = principle  # the new wording would duplicate another principle
        principles[index] = reworded
        return ResolutionNote(
            field=f"principles[{index}]",
            chose=reworded,
            reason=f"reworded {principle!r} (REWRITE)"
            if reworded != principle
            else "no paraphrase rule fits this principle (or the rewording would repeat another); kept",
        )

    @staticmethod
    def _tighten(kind: str, arg: str, state: _Genome) -> ResolutionNote:
        """Tighten one constraint (guardrails only ever tighten; a move that would not is kept)."""
        c = dict(state.constraints)
        if kind == "max_length":
            old, value = c["max_length"], int(arg)
            if old is not None and value >= old:
                return ResolutionNote(field="constraints.max_length", chose="kept", reason=f"{old} is tighter")
            c["max_length"] = value
            reason = "mutation added a length limit" if old is None else f"mutation lowered the length limit from {old}"
            note = ResolutionNote(field="constraints.max_length", chose=str(value), reason=reason)
        elif kind == "topic":
            topics = list(c["forbidden_topics"])
            if arg.casefold() in {t.casefold() for t in topics} or len(topics) >= MAX_LIST:
                return ResolutionNote(field="constraints.forbidden_topics", chose="kept", reason=f"{arg!r} is there")
            c["forbidden_topics"] = [*topics, arg]
            note = ResolutionNote(
                field="constraints.forbidden_topics", chose=f"+{arg}", reason="mutation added a forbidden topic"
            )
        else:
            c["must_use_markdown"] = True
            note = ResolutionNote(
                field="constraints.must_use_markdown",
                chose="markdown",
                reason="mutation added the markdown requirement",
            )
        state.constraints = c
        return note

    def _rewrite(self, principle: str, language: str, ctx: OperatorContext) -> str:
        seed = int(ctx.params.get("seed", 0))
        temperature = float(ctx.params["temperature"])
        key = {
            "principle": principle,
            "language": language,
            "seed": seed,
            "temperature": temperature,
            "model": ctx.llm.model_name,
            "op_version": self.op_version,
        }

        def compute() -> str:
            request = prompts.build_rewrite_request(principle, language=language, temperature=temperature, seed=seed)
            return prompts.parse_rewrite(ctx.complete(request))

        return str(ctx.cached("rewrite", key, compute))
