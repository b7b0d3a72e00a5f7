"""Choosing the initial population from the elixir library, and telling a rerun that forked.

A seed is named by id (its latest version when the experiment is prepared) or pinned as ``id@version``.
An experiment's id hashes the seeds' content, so a rerun after a seed was edited starts a new experiment:
:func:`seed_fork` says which seeds changed since the last run of the same config.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from furnace.domain.elixir import Elixir
from furnace.domain.errors import InputError, NotFound
from furnace.evolution.config import ExperimentConfig
from furnace.evolution.records import ExperimentResults, resolved_seeds

_PINNED = re.compile(r"^(?P<id>[^@\s]+)@(?P<version>\d+)$")
_IMPORT_HINT = "import the sample library: furnace import --library; or your own: furnace import FILE_OR_FOLDER"


def parse_seed(ref: str) -> tuple[str, int | None]:
    """``"go-reviewer"`` -> ``("go-reviewer", None)`` (latest); ``"go-reviewer@2"`` -> ``("go-reviewer", 2)``."""
    if "@" not in ref:
        return ref, None
    m = _PINNED.match(ref)
    if m is None or int(m["version"]) < 1:
        raise InputError(f"seeds.ids: {ref!r} is not id or id@version (a version is 1 or more)", field="seeds.ids")
    return m["id"], int(m["version"])


def select_seeds(store: Any, config: ExperimentConfig) -> list[Elixir]:
    """Library elixirs named in ``seeds.ids`` (in that order; ``id@version`` pins a version), else the
    first ``population`` matching ``seeds.query``/``seeds.language``, sorted by id. At least two are needed."""
    s = config.seeds
    if s.ids:
        try:
            found = [store.get_elixir(i, version=v) for i, v in map(parse_seed, s.ids)]
        except NotFound as err:
            raise NotFound(f"seeds.ids: {err} ({_IMPORT_HINT})", field="seeds.ids") from None
        withdrawn = [e.id for e in found if e.withdrawn]
        if withdrawn:
            raise InputError(f"seeds.ids: {', '.join(withdrawn)} withdrawn from the library", field="seeds.ids")
    else:
        found = [
            e
            for e in store.list_elixirs(query=s.query, origin="library")
            if s.language is None or e.language == s.language
        ]
        found.sort(key=lambda e: e.id)
    found = found[: config.population]
    if len(found) < 2:
        raise InputError(_too_few(store, config, len(found)), field="seeds.ids" if s.ids else "seeds")
    return found


def _too_few(store: Any, config: ExperimentConfig, matched: int) -> str:
    """Why fewer than two seeds: ``seeds.ids`` names one; no library to draw from (how to import one); or
    the library's elixirs that ``seeds.query``/``seeds.language`` leave (and the languages it has)."""
    s = config.seeds
    if s.ids:
        return f"seeds.ids: names {matched} elixir, an experiment needs at least 2"
    library = store.list_elixirs(origin="library")
    if len(library) < 2:
        return f"seeds: the library has {len(library)} elixir(s), an experiment needs at least 2 ({_IMPORT_HINT})"
    asked = " and ".join(
        f"{field} {value!r}" for field, value in (("seeds.query", s.query), ("seeds.language", s.language)) if value
    )
    languages = Counter(e.language for e in library)
    has = ", ".join(f"{n} {language}" for language, n in sorted(languages.items()))
    return (
        f"seeds: {matched} of the library's {len(library)} elixirs match {asked}, an experiment needs at least 2 "
        f"(the library has {has})"
    )


@dataclass(frozen=True)
class SeedFork:
    """A rerun of a config whose seeds resolved to other versions than its last run's."""

    previous_id: str
    changed: tuple[str, ...]  # "go-reviewer@1 -> go-reviewer@2", "+ new-seed@1", "- old-seed@3"

    def message(self, experiment_id: str) -> str:
        return (
            f"seeds changed since {self.previous_id} ({'; '.join(self.changed)}): a new experiment starts "
            f"({experiment_id}). To rerun the old one, pin its seeds as id@version in seeds.ids"
        )


def seed_fork(
    results: ExperimentResults, config: ExperimentConfig, seeds: list[Elixir], experiment_id: str
) -> SeedFork | None:
    """The latest other experiment of the same name and config whose seeds resolved differently, and how;
    None when this run resumes (or repeats) its own records, or no such experiment exists."""
    if any(r.experiment_id == experiment_id for r in results.list_experiments()):
        return None
    same = config.model_dump(mode="json")
    earlier = [r for r in results.list_experiments() if r.name == config.name and r.config == same]
    now = [f"{e.id}@{e.version}" for e in seeds]
    for record in earlier:  # the store lists the most recently updated first
        before = resolved_seeds(results.individuals(record.experiment_id))
        if before and before != now:
            return SeedFork(record.experiment_id, _changes(before, now))
    return None


def _changes(before: list[str], now: list[str]) -> tuple[str, ...]:
    old = dict(ref.rsplit("@", 1) for ref in before)
    new = dict(ref.rsplit("@", 1) for ref in now)
    out = [f"{i}@{old[i]} -> {i}@{new[i]}" for i in new if i in old and old[i] != new[i]]
    out += [f"+ {i}@{new[i]}" for i in new if i not in old]
    out += [f"- {i}@{old[i]}" for i in old if i not in new]
    return tuple(out) or ("the seeds' order",)
