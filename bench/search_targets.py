"""The search bench's targets: a YAML file of hidden targets, each with library seeds and a probe set split
into train, validation and test.

Format (``bench/search_targets.yaml`` is the shipped one)::

    my-target:
      seeds: [security-auditor, socratic-math-tutor]     # library elixir ids
      probes:                                            # the experiment probe format, plus `split` per probe
        name: my-target
        language: en
        brief: {expertise: [...], tone: {...}, constraints: {...}}
        probes:
          - {id: a, message: ..., split: train, rubric: {expect: [...], avoid: [...]}}

A probe without ``split`` is placed by its id: the first 8 hex digits of sha256(id) as a fraction below
0.5 → train, below 0.7 → validation, else test; a set of 3 or more probes always has at least one train,
one validation and one test probe (the unmarked probes with the highest fractions move). Feedback and
reflection read train only, the final pick among a method's candidates is made on validation, and test is
scored only for the report. This split honours ``split:`` keys exactly; :meth:`Target.marked` hands it to the
experiment loop as every probe's ``split`` mark, so the loop and every other method search on the same split.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from furnace.domain.errors import InputError
from furnace.scoring.probes import ProbeSet, parse_probe_set

SPLITS = ("train", "validation", "test")
RATIO = (0.5, 0.7)  # train below 0.5, validation below 0.7, test above
DEFAULT_FILE = Path(__file__).resolve().parent / "search_targets.yaml"


@dataclass(frozen=True)
class Target:
    """One hidden target: its seeds and its probe set, split."""

    name: str
    seeds: tuple[str, ...]
    probes: ProbeSet
    split: dict[str, str]  # probe id -> train | validation | test

    def part(self, split: str) -> ProbeSet:
        """The probes of one split (same name, brief and rubric)."""
        return self.probes.model_copy(update={"probes": [p for p in self.probes.probes if self.split[p.id] == split]})

    def marked(self) -> ProbeSet:
        """Every probe with its split as its ``split`` mark (what the experiment loop is given: it then reads
        feedback from train, selects on validation and keeps test from every operator)."""
        probes = [p.model_copy(update={"split": self.split[p.id]}) for p in self.probes.probes]
        return self.probes.model_copy(update={"probes": probes})


def _fraction(probe_id: str) -> float:
    return int(hashlib.sha256(probe_id.encode()).hexdigest()[:8], 16) / 2**32


def split_ids(marked: dict[str, str | None]) -> dict[str, str]:
    """Each probe's split: its mark, else by the fraction of its id (see the module doc)."""
    out: dict[str, str] = {}
    for pid, mark in marked.items():
        f = _fraction(pid)
        out[pid] = mark or ("train" if f < RATIO[0] else "validation" if f < RATIO[1] else "test")
    free = sorted((pid for pid, mark in marked.items() if not mark), key=_fraction, reverse=True)
    if len(out) >= 3:
        for need in ("test", "validation", "train"):
            if need not in out.values():
                counts = {s: list(out.values()).count(s) for s in SPLITS}
                movable = [pid for pid in free if counts[out[pid]] > 1]
                if movable:
                    out[movable[0]] = need
                    free.remove(movable[0])
    return out


def parse_target(name: str, data: Any, known: set[str], source: str) -> Target:
    """One target of a targets file (``InputError`` naming the problem)."""
    where = f"{source}: target {name!r}"
    if not isinstance(data, dict) or set(data) - {"seeds", "probes"} or "probes" not in data:
        raise InputError(f"{where}: must be a mapping with 'seeds' (elixir ids) and 'probes' (a probe set)")
    seeds = data.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, str) for s in seeds):
        raise InputError(f"{where}: 'seeds' must be a non-empty list of library elixir ids")
    unknown = [s for s in seeds if s not in known]
    if unknown:
        raise InputError(f"{where}: unknown seed elixir(s): {', '.join(unknown)}")
    probes = data["probes"]
    if not isinstance(probes, dict) or not isinstance(probes.get("probes"), list):
        raise InputError(f"{where}: 'probes' must be a probe set with a list of probes")
    marked: dict[str, str | None] = {}
    clean = []
    for item in probes["probes"]:
        if not isinstance(item, dict):
            raise InputError(f"{where}: every probe must be a mapping")
        mark = item.get("split")
        if mark is not None and mark not in SPLITS:
            raise InputError(f"{where}: probe {item.get('id')!r}: split must be one of {', '.join(SPLITS)}")
        marked[str(item.get("id"))] = mark
        clean.append({k: v for k, v in item.items() if k != "split"})
    probe_set = parse_probe_set({**probes, "probes": clean}, source=f"{where}: probes")
    split = split_ids(marked)
    missing = [s for s in ("train", "test") if s not in split.values()]
    if missing:
        raise InputError(f"{where}: needs at least one {' and one '.join(missing)} probe")
    return Target(name, tuple(seeds), probe_set, split)


def load_targets(path: Path | str = DEFAULT_FILE, *, known: set[str]) -> dict[str, Target]:
    """Every target of a targets file (``InputError`` for anything malformed)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise InputError(f"{path.name}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict) or not data:
        raise InputError(f"{path.name}: must map target names to {{seeds, probes}}")
    return {str(name): parse_target(str(name), spec, known, path.name) for name, spec in data.items()}
