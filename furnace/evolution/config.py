"""Experiment configuration: the YAML file, validated with errors that name the field.

See ``furnace/resources/experiments/demo.yaml`` for an annotated example. The experiment id
is derived from the config's content and the model, so running the same file
against the same model resumes the same experiment.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from furnace.domain.canonical import content_key
from furnace.domain.elixir import format_validation_error
from furnace.domain.errors import InputError, NotFound
from furnace.scoring.fitness import SCORERS

KNOWN_OPERATORS = ("crossover", "mutation", "ensemble", "reflect")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Selection(_Strict):
    """Parent selection with elitism: ``tournament`` (the fittest of ``tournament_size``) or
    ``pareto`` (GEPA's per-probe frontier: members best on at least one probe, drawn in
    proportion to the probes they lead). ``selection: pareto`` is short for ``{method: pareto}``.

    Defaults (chosen on the search benchmark, ``python -m bench search``): a tournament of 5 and,
    in an experiment, ``elitism`` = half the population — so a generation is the other half, the
    best half always survives, and each plan sees children taken in at most that many places back.
    (With a tournament of 3 and one elite, 7 children of 8 per generation, a 400-call search did not
    beat random fusion.)"""

    method: Literal["tournament", "pareto"] = "tournament"
    tournament_size: int = Field(default=5, ge=1, le=64)
    elitism: int = Field(default=1, ge=0)


class Budget(_Strict):
    """Hard limits on the model calls of one run (non-cached calls; cached ones are free)."""

    max_calls: int | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    max_usd: float | None = Field(default=None, ge=0)
    usd_per_1k_tokens: float = Field(default=0.0, ge=0, description="price used by the estimate")


class ProbeChoice(_Strict):
    """Which probe set to use and how many of its probes."""

    set: str = "writing-en"
    limit: int | None = Field(default=None, gt=0)


class Seeds(_Strict):
    """The initial population: library elixirs by id, or matching a query (first N by id)."""

    ids: tuple[str, ...] = ()
    query: str | None = None
    language: str | None = None


def _check_weights(weights: dict[str, float], known: Iterable[str], what: str) -> dict[str, float]:
    """Named non-negative weights, every name known, at least one positive."""
    known = list(known)
    for name, weight in weights.items():
        if name not in known:
            raise ValueError(f"unknown {what} {name!r} (known: {', '.join(known)})")
        if weight < 0:
            raise ValueError(f"weight of {name} must be >= 0, got {weight}")
    if not any(w > 0 for w in weights.values()):
        raise ValueError(f"at least one {what} needs a positive weight")
    return weights


class ExperimentConfig(_Strict):
    """One evolution experiment."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,59}$")
    seed: int = 0
    population: int = Field(default=8, ge=2, le=512)
    generations: int = Field(default=3, ge=0, le=200)
    seeds: Seeds = Seeds()
    # mutation-heavy: on the search benchmark crossover (a union of both parents) rarely beats its parents
    operators: dict[str, float] = Field(default_factory=lambda: {"crossover": 0.2, "mutation": 0.8})
    mutation_rate: float = Field(default=0.25, gt=0, le=1)
    adapt_operators: bool = True
    selection: Selection = Selection()
    probes: ProbeChoice = ProbeChoice()
    scorers: dict[str, float] = Field(
        default_factory=lambda: {"constraints": 0.2, "fidelity": 0.2, "tone": 0.2, "brief_fit": 0.3, "diversity": 0.1}
    )
    model: str | None = Field(default=None, description="litellm model string; unset = FURNACE_MODEL / offline")
    judge_model: str | None = Field(
        default=None, description="the judge scorers' model; unset = FURNACE_JUDGE_MODEL, else the model"
    )
    # two or more judges (``judge_models`` is an alias): each judge scorer asked of each; fitness reads
    # their mean, or ``fitness_judge``'s score (furnace.scoring.panel; docs/evaluation.md)
    judges: tuple[str, ...] = ()
    fitness_judge: str | None = None
    concurrency: int = Field(default=4, ge=1, le=256)
    budget: Budget = Budget()
    # replies per (persona, probe), each with its own derived seed; a probe's score is their mean
    samples_per_probe: int = Field(default=3, ge=1, le=20)
    # the final top-k re-evaluated on validation with fresh samples before the champion is chosen
    reevaluate_top: int = Field(default=3, ge=0, le=20)
    # train probes a reflected child must beat its parent on before it is evaluated on validation
    minibatch: int = Field(default=3, ge=1, le=50)
    # with the ``human`` objective weighted: blind pairs asked of people after each generation, and how long a
    # run waits for them (0: ask, never wait; the run goes on with the ratings it has) — docs/evaluation.md
    human_pairs: int = Field(default=4, ge=1, le=100)
    human_wait_s: float = Field(default=0.0, ge=0, le=7 * 24 * 3600)

    @model_validator(mode="before")
    @classmethod
    def _default_elitism(cls, data: Any) -> Any:
        """``selection.elitism`` unset: half the population (at least 1)."""
        if not isinstance(data, dict):
            return data
        selection = data.get("selection", {})
        if isinstance(selection, str):
            selection = {"method": selection}
        population = data.get("population", 8)
        if isinstance(selection, dict) and "elitism" not in selection and isinstance(population, int):
            data = {**data, "selection": {**selection, "elitism": max(1, population // 2)}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _judges_alias(cls, data: Any) -> Any:
        """``judge_models`` is ``judges``; one judge listed is ``judge_model``."""
        if not isinstance(data, dict):
            return data
        if "judge_models" in data:
            if "judges" in data:
                raise ValueError("judges and judge_models are the same field: give one")
            data = {k: v for k, v in data.items() if k != "judge_models"} | {"judges": data["judge_models"]}
        judges = data.get("judges")
        if isinstance(judges, list | tuple) and len(judges) == 1 and "fitness_judge" not in data:
            if data.get("judge_model") not in (None, judges[0]):
                raise ValueError("judges and judge_model name different judges: give one")
            data = {k: v for k, v in data.items() if k != "judges"} | {"judge_model": judges[0]}
        return data

    @field_validator("judges")
    @classmethod
    def _check_judges(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        names = [j.strip() for j in v]
        if any(not j for j in names):
            raise ValueError("a judge is a model name, got an empty one")
        twice = sorted({j for j in names if names.count(j) > 1})
        if twice:
            raise ValueError(f"judges lists {', '.join(twice)} twice")
        return tuple(names)

    @field_validator("selection", mode="before")
    @classmethod
    def _selection_shorthand(cls, v: Any) -> Any:
        return {"method": v} if isinstance(v, str) else v

    @field_validator("operators")
    @classmethod
    def _check_operators(cls, v: dict[str, float]) -> dict[str, float]:
        return _check_weights(v, KNOWN_OPERATORS, "operator")

    @field_validator("scorers")
    @classmethod
    def _check_scorers(cls, v: dict[str, float]) -> dict[str, float]:
        return _check_weights(v, SCORERS, "scorer")

    @model_validator(mode="after")
    def _check_panel(self) -> ExperimentConfig:
        if self.judges and self.judge_model is not None:
            raise ValueError("give either judge_model (one judge) or judges (two or more), not both")
        if len(self.judges) == 1:
            raise ValueError("fitness_judge chooses among two or more judges; one judge is judge_model")
        if self.fitness_judge is not None and self.fitness_judge not in self.judges:
            listed = ", ".join(self.judges) or "none"
            raise ValueError(f"fitness_judge {self.fitness_judge!r} must be one of the judges (listed: {listed})")
        return self

    @model_validator(mode="after")
    def _check_human(self) -> ExperimentConfig:
        if self.scorers.get("human", 0) > 0 and not any(w > 0 for k, w in self.scorers.items() if k != "human"):
            raise ValueError(
                "scorers: human needs another positive weight (an agent nobody has picked is scored on the others)"
            )
        return self

    @model_validator(mode="after")
    def _check_elitism(self) -> ExperimentConfig:
        if self.selection.elitism >= self.population:
            raise ValueError(
                f"selection.elitism ({self.selection.elitism}) must be smaller than population ({self.population})"
            )
        return self

    # --- derived ---------------------------------------------------------

    @property
    def children_per_generation(self) -> int:
        return self.population - self.selection.elitism

    def experiment_id(self, model_name: str, inputs: Any = None) -> str:
        """Stable id: the name plus a hash of the config, the model and ``inputs`` (the seed
        elixirs' content hashes, the probe set and a separate judge model), so changed inputs never
        resume old records. (The judge is named in ``inputs`` as resolved, so it is left out here; a panel of
        ``judges`` and its ``fitness_judge`` are in the hash only when set, so other ids never change; so is
        how long a run waits for people's picks, and how many pairs it asks unless ``human`` is weighted.)"""
        unset = {name for name in ("judges", "fitness_judge") if not getattr(self, name)}
        if self.scorers.get("human", 0) <= 0:
            unset.add("human_pairs")
        config = self.model_dump(mode="json", exclude={"judge_model", "human_wait_s", *unset})
        # a pin (id@version) names what ``inputs`` already holds by content: pinning the versions an
        # unpinned run resolved to is the same experiment
        config["seeds"]["ids"] = [ref.split("@", 1)[0] for ref in config["seeds"]["ids"]]
        digest = content_key({"config": config, "model": self.model or model_name, "inputs": inputs})
        return f"exp-{self.name.lower()}-{digest[:10]}"


def parse_config(data: Any, *, source: str = "experiment") -> ExperimentConfig:
    """Validate untrusted data; every problem becomes an :class:`InputError` naming the field."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: an experiment file must be a mapping of fields")
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as err:
        loc = ".".join(str(p) for p in err.errors()[0]["loc"])
        raise InputError(f"{source}: {format_validation_error(err, root='')}", field=loc or None) from None


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and validate an experiment YAML file."""
    path = Path(path)
    if not path.exists():
        raise NotFound(f"experiment file {path} not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as err:  # where it went wrong, as the importer says it
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise InputError(f"{path.name}: {where}{err.problem or err.context or 'not valid YAML'}") from None
    except yaml.YAMLError as err:
        raise InputError(f"{path.name}: not valid YAML ({str(err).splitlines()[0]})") from None
    return parse_config(data, source=path.name)
