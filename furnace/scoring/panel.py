"""A panel of judges: every judge scorer asked of each judge, and the one score fitness uses.

An experiment that lists ``judges: [a, b]`` has each judge rubric (fidelity, preference, tone)
scored by each judge. Each judge's verdict is kept as its own score row, named
``<scorer>@<judge>`` (:func:`judge_scorer`; a model name may itself contain ``@``, a scorer's
never does, so :func:`split_scorer` cuts at the first one). The row named by the scorer alone
is the panel's score, the one objectives and fitness read: the mean of the judges, or one
judge's score when the experiment names a ``fitness_judge`` (:meth:`Panel.combine`).

A judge that fails is a failure, never a score: its row is a failure row, and so is the
panel's, so the objective is unscored for that agent (a rerun asks again; the other judge's
answer comes from the response cache).

Each judge's call is routed to that judge by the request's ``route``
(:class:`RoutedJudge`), through the same meter, budget and response cache as every call: the
cache key holds the model that answers, so two judges never share a cached verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from furnace.llm.seam import LLM, Completion, LLMRequest
from furnace.scoring.base import Score
from furnace.scoring.feedback import join_clauses

SEPARATOR = "@"


def judge_scorer(scorer: str, judge: str) -> str:
    """The name of one judge's score rows for ``scorer``: ``fidelity@model``."""
    return f"{scorer}{SEPARATOR}{judge}"


def split_scorer(name: str) -> tuple[str, str | None]:
    """``(scorer, judge)`` of a score row's scorer name; ``judge`` is None for a panel's or a lone judge's row."""
    scorer, sep, judge = name.partition(SEPARATOR)
    return scorer, (judge if sep else None)


class RoutedJudge:
    """``llm`` with every request routed to the judge ``name`` (a :class:`~furnace.llm.routing.TaskRouter`
    below the meter sends it there)."""

    def __init__(self, llm: LLM, name: str) -> None:
        self.llm, self.model_name = llm, name

    def complete(self, request: LLMRequest) -> Completion:
        return self.llm.complete(request.model_copy(update={"route": self.model_name}))


@dataclass(frozen=True)
class Panel:
    """Two or more judges (model names, in the experiment's order) and the one whose score is fitness's
    (None: the mean of the judges)."""

    judges: tuple[str, ...]
    fitness_judge: str | None = None

    def __post_init__(self) -> None:
        if len(self.judges) < 2 or len(set(self.judges)) != len(self.judges):
            raise ValueError(f"a panel is two or more different judges, got {list(self.judges)}")
        if self.fitness_judge is not None and self.fitness_judge not in self.judges:
            raise ValueError(f"fitness_judge {self.fitness_judge!r} is not one of the judges")

    @property
    def rule(self) -> str:
        """How the panel's score is made, in words."""
        if self.fitness_judge is not None:
            return f"{self.fitness_judge}'s score (fitness_judge)"
        return f"mean of {len(self.judges)} judges"

    def combine(self, verdicts: Mapping[str, Score]) -> Score:
        """The panel's score: a failure when any judge failed (naming it), else the mean of the judges (or
        the ``fitness_judge``'s), with each judge's value in the reason and their feedback joined."""
        failed = [name for name in self.judges if verdicts[name].failed]
        if failed:
            return Score.failure("; ".join(f"judge {name} failed: {verdicts[name].reason}" for name in failed))
        values = {name: verdicts[name].value for name in self.judges}
        value = values[self.fitness_judge] if self.fitness_judge else sum(values.values()) / len(values)
        shown = ", ".join(f"{name} {v:.3f}" for name, v in values.items())
        first = [self.fitness_judge] if self.fitness_judge else []
        order = [*first, *(n for n in self.judges if n not in first)]
        clauses = dict.fromkeys(c.strip() for n in order for c in verdicts[n].feedback.split(";") if c.strip())
        return Score(round(value, 6), f"{self.rule} ({shown})", feedback=join_clauses(clauses))
