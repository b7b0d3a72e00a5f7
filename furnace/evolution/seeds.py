"""Choosing the initial population from the elixir library."""

from __future__ import annotations

from typing import Any

from furnace.domain.elixir import Elixir
from furnace.domain.errors import InputError
from furnace.evolution.config import ExperimentConfig


def select_seeds(store: Any, config: ExperimentConfig) -> list[Elixir]:
    """Library elixirs named in ``seeds.ids`` (in that order), else the first ``population``
    matching ``seeds.query``/``seeds.language``, sorted by id. At least two are needed."""
    s = config.seeds
    if s.ids:
        found = [store.get_elixir(i) for i in s.ids]
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
        raise InputError(
            f"seeds: the library has {len(found)} matching elixir(s), an experiment needs at least 2 "
            "(import some: furnace import furnace/resources/elixirs)",
            field="seeds",
        )
    return found
