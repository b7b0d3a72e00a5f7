"""Agents side by side on the same probes: answers, scores per objective, prompts diffed.

Works for agents (their stored system prompt) and library elixirs (their
rendered prompt) alike. Answers and judge verdicts go through the given LLM,
so with the response cache a second look costs no model call.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from furnace.domain.agent import AGENT_PREFIX
from furnace.domain.elixir import Elixir
from furnace.domain.errors import InputError, LLMError
from furnace.domain.render import render_prompt
from furnace.evolution.evaluate import evaluate_agent, reply, split_held_out
from furnace.evolution.records import ScoreRow
from furnace.evolution.report import held_out_columns
from furnace.llm.seam import LLM
from furnace.scoring.probes import ProbeSet
from furnace.storage.store import ElixirStore

MIN_AGENTS, MAX_AGENTS = 2, 4
DEFAULT_SCORERS: dict[str, float] = {"constraints": 0.25, "fidelity": 0.25, "tone": 0.25, "brief_fit": 0.25}


@dataclass(frozen=True)
class ProbeAnswer:
    """One agent's answer to one probe (``error`` when the model call failed)."""

    probe_id: str
    message: str
    answer: str
    error: str = ""


@dataclass(frozen=True)
class AgentCard:
    """Everything one column of the comparison shows."""

    id: str
    name: str
    kind: str  # "agent" | "elixir"
    version: int
    system_prompt: str
    answers: tuple[ProbeAnswer, ...]
    objectives: dict[str, float]
    fitness: float
    scores: tuple[ScoreRow, ...]
    # fitness outside the probes' test split (``train_fitness``), on it with its 95% interval, and the gap
    held_out: dict[str, Any] = field(default_factory=dict)


def load_subject(store: ElixirStore, subject_id: str) -> tuple[Elixir, str, str]:
    """(elixir, system prompt, kind) of an agent or a library elixir."""
    if subject_id.startswith(AGENT_PREFIX):
        agent = store.get_agent(subject_id)
        return agent.elixir, agent.system_prompt, "agent"
    elixir = store.get_elixir(subject_id)
    return elixir, render_prompt(elixir), "elixir"


def compare_agents(
    store: ElixirStore,
    llm: LLM,
    subject_ids: Sequence[str],
    probes: ProbeSet,
    *,
    scorers: Mapping[str, float] | None = None,
    seed: int = 0,
) -> list[AgentCard]:
    """Answer and score ``probes`` with each of 2–4 agents or elixirs."""
    ids = list(dict.fromkeys(i.strip() for i in subject_ids if i.strip()))
    if not MIN_AGENTS <= len(ids) <= MAX_AGENTS:
        raise InputError(f"compare takes {MIN_AGENTS} to {MAX_AGENTS} distinct agents, got {len(ids)}", field="agents")
    weights = dict(scorers or DEFAULT_SCORERS)
    cards = []
    for subject_id in ids:
        elixir, prompt, kind = load_subject(store, subject_id)
        answers = []
        for probe in probes.probes:
            try:
                answers.append(ProbeAnswer(probe.id, probe.message, reply(llm, elixir, prompt, probe, seed=seed)))
            except LLMError as err:
                answers.append(ProbeAnswer(probe.id, probe.message, "", error=str(err)))
        evaluation = evaluate_agent(llm, elixir, prompt, probes, weights, seed=seed)
        _, held = split_held_out(evaluation, probes, weights, seed=seed, agent_id=subject_id)
        cards.append(
            AgentCard(
                subject_id,
                elixir.name,
                kind,
                elixir.version,
                prompt,
                tuple(answers),
                evaluation.objectives,
                evaluation.fitness,
                evaluation.scores,
                held_out_columns(held) if "test" in held or "test_unscored" in held else {},
            )
        )
    return cards


def objective_rows(cards: Sequence[AgentCard]) -> list[dict[str, object]]:
    """One row per objective, one column per agent (plus the weighted fitness over every probe shown); when
    the probes include test-split ones, the fitness outside them, the test fitness with its 95% interval and
    the train-test gap (the held-out figures as an experiment's report names them; None: not scored)."""
    keys = sorted({k for c in cards for k in c.objectives})
    rows: list[dict[str, object]] = [
        {"objective": k, **{c.id: round(c.objectives.get(k, 0.0), 3) for c in cards}} for k in keys
    ]
    rows.append({"objective": "fitness (weighted)", **{c.id: round(c.fitness, 3) for c in cards}})
    held = (
        ("train_fitness", "train fitness (outside the test split)"),
        ("test_fitness", "test fitness"),
        ("test_low", "test 95% low"),
        ("test_high", "test 95% high"),
        ("train_test_gap", "train − test gap"),
    )
    if any(c.held_out for c in cards):
        for key, label in held:
            values = {c.id: c.held_out.get(key) for c in cards}
            rows.append({"objective": label, **{a: None if v is None else round(v, 3) for a, v in values.items()}})
    return rows


def prompt_diff(a: AgentCard, b: AgentCard) -> str:
    """A unified diff of two agents' system prompts."""
    lines = difflib.unified_diff(
        a.system_prompt.splitlines(), b.system_prompt.splitlines(), fromfile=a.id, tofile=b.id, lineterm="", n=1
    )
    return "\n".join(lines)
