"""Probe sets: user messages an agent answers, optionally with a target brief.

File format (``furnace/resources/probes/<name>.yaml``)::

    name: writing-en
    language: en
    brief:                # optional target brief for every probe of the set
      expertise: [copywriting, storytelling]
      tone: {formality: 0.3, humor: 0.7}
      constraints: {max_length: 800, must_use_markdown: true}
    probes:
      - id: launch
        message: Write a short launch note for our new tea brand.
        brief: {...}      # optional, overrides the set's brief
        rubric:           # optional held-out rubric, overrides the set's
          expect: [tasting notes, a call to action]   # what a good answer contains
          avoid: [discount codes]                     # what a good answer leaves out
        split: test       # optional: train | validation | test (see below)

Brief and rubric describe the *target*. Only the judge sees them (and ``brief_fit``);
the persona's reply and the fusion operators never do, so a search is judged
against what the user wants, not against the persona's own words.

**Splits.** Every probe belongs to one split: ``train`` (its judge feedback drives the
reflective operator), ``validation`` (selection's fitness) or ``test`` (scored only to
report held-out fitness; never shown to an operator). A probe may name its split; the
others are split deterministically by id (:data:`SPLIT_RATIO`, see :meth:`ProbeSet.splits`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from furnace import resources
from furnace.domain.elixir import format_validation_error
from furnace.domain.errors import InputError, NotFound, short_path
from furnace.scoring.brief import Brief

PROBES_DIR = resources.PROBES_DIR

Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")
SPLIT_RATIO = {"train": 0.5, "validation": 0.25, "test": 0.25}
"""The share of each split in a set (unmarked probes fill the splits up to it: see :meth:`ProbeSet.splits`)."""


class Rubric(BaseModel):
    """A held-out description of a good answer: descriptors it should contain and avoid."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    expect: list[str] = Field(default_factory=list, max_length=40)
    avoid: list[str] = Field(default_factory=list, max_length=40)


class Probe(BaseModel):
    """One user message; ``brief`` and ``rubric`` describe the target answer (optional)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9._-]{1,60}$")
    message: str = Field(min_length=1, max_length=4000)
    brief: Brief | None = None
    rubric: Rubric | None = None
    split: Split | None = None


def _split_order(probe_id: str) -> str:
    """Where an unmarked probe falls in the deterministic split order (a hash of its id)."""
    return hashlib.sha256(probe_id.encode("utf-8")).hexdigest()


def split_quota(n: int) -> dict[str, int]:
    """How many of ``n`` probes each split gets: test and validation a quarter each (rounded, at least
    one of each from 3 probes; validation one from 2), train the rest (at least one)."""
    test = max(1, round(n * SPLIT_RATIO["test"])) if n >= 3 else 0
    validation = max(1, round(n * SPLIT_RATIO["validation"])) if n >= 2 else 0
    return {"train": n - test - validation, "validation": validation, "test": test}


class ProbeSet(BaseModel):
    """A named list of probes with an optional set-wide brief."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    language: Literal["zh", "en"] = "en"
    brief: Brief | None = None
    rubric: Rubric | None = None
    probes: list[Probe] = Field(min_length=1, max_length=200)

    @model_validator(mode="after")
    def _unique_ids(self) -> ProbeSet:
        ids = [p.id for p in self.probes]
        if len(ids) != len(set(ids)):
            raise ValueError("probe ids must be unique")
        self.splits()  # a set whose marks leave a split empty is refused here
        return self

    def splits(self) -> dict[str, list[Probe]]:
        """The probes of each split, in file order. A probe's ``split`` mark is kept; the unmarked ones,
        in the order of a hash of their id, fill ``test``, then ``validation``, up to :func:`split_quota`
        of the whole set, and the rest go to ``train``. So the split of an unmarked probe depends only on
        the ids of the set, never on the run. A set of 3 or more probes always has a test probe (marks
        that leave none are refused), and every set has a train probe."""
        quota = split_quota(len(self.probes))
        marked = {p.id: p.split for p in self.probes if p.split is not None}
        counts = {name: sum(1 for s in marked.values() if s == name) for name in SPLITS}
        assigned = dict(marked)
        for probe in sorted((p for p in self.probes if p.split is None), key=lambda p: _split_order(p.id)):
            for name in ("test", "validation", "train"):
                if name == "train" or counts[name] < quota[name]:
                    assigned[probe.id] = name
                    counts[name] += 1
                    break
        if counts["train"] == 0:
            raise ValueError("a probe set needs at least one train probe (its feedback drives reflection)")
        if len(self.probes) >= 3 and counts["test"] == 0:
            raise ValueError("a probe set of 3 or more probes needs at least one test probe (held-out fitness)")
        return {name: [p for p in self.probes if assigned[p.id] == name] for name in SPLITS}

    def split_of(self, probe_id: str) -> str | None:
        """The split of ``probe_id`` (None when the set has no such probe)."""
        for name, probes in self.splits().items():
            if any(p.id == probe_id for p in probes):
                return name
        return None

    def subset(self, split: str) -> ProbeSet:
        """The set restricted to one split. ``validation`` of a set without validation probes (a set of
        one probe) is its train probes: selection then reads what feedback read, and the report says so."""
        parts = self.splits()
        probes = parts[split] or (parts["train"] if split == "validation" else [])
        if not probes:
            raise ValueError(f"probe set {self.name!r} has no {split} probes")
        return self.model_copy(update={"probes": probes})

    def without(self, split: str) -> ProbeSet:
        """The set without one split's probes (``without("test")``: every probe the search may read)."""
        drop = {p.id for p in self.splits()[split]}
        return self.model_copy(update={"probes": [p for p in self.probes if p.id not in drop]})

    def brief_for(self, probe: Probe) -> Brief | None:
        """The probe's own brief, else the set's."""
        return probe.brief or self.brief

    def rubric_for(self, probe: Probe) -> Rubric | None:
        """The probe's own rubric, else the set's."""
        return probe.rubric or self.rubric

    def target_for(self, probe: Probe) -> dict[str, Any] | None:
        """What the judge scores ``probe``'s answer against (brief and rubric), or None."""
        return target_inputs(self.brief_for(probe), self.rubric_for(probe), self.language)

    def head(self, n: int | None) -> ProbeSet:
        """The first ``n`` probes (all when ``n`` is None); their splits are those of the shorter set."""
        if n is None:
            return self
        try:
            return ProbeSet.model_validate(
                {
                    **self.model_dump(mode="json", exclude_none=True),
                    "probes": [p.model_dump(mode="json", exclude_none=True) for p in self.probes[:n]],
                }
            )
        except ValidationError as err:
            raise InputError(
                f"probe set {self.name}: first {n} probes: {format_validation_error(err, root='')}"
            ) from None


def target_inputs(brief: Brief | None, rubric: Rubric | None, language: str = "en") -> dict[str, Any] | None:
    """The target as judge inputs: the brief's fields plus the rubric's ``expect``/``avoid``."""
    if brief is None and rubric is None:
        return None
    data: dict[str, Any] = brief.model_dump(mode="json", exclude_none=True) if brief else {}
    data.setdefault("language", language)
    if rubric is not None:
        data.update(expect=list(rubric.expect), avoid=list(rubric.avoid))
    return data


def parse_probe_set(data: Any, *, source: str = "probe set") -> ProbeSet:
    """Validate untrusted data into a :class:`ProbeSet` or raise :class:`InputError`."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: must be a mapping with 'name' and 'probes'")
    try:
        return ProbeSet.model_validate(data)
    except ValidationError as err:
        loc = ".".join(str(p) for p in err.errors()[0]["loc"])
        raise InputError(f"{source}: {format_validation_error(err, root='')}", field=loc or None) from None


def load_probe_set(name_or_path: str | Path, *, search_dir: Path | None = None) -> ProbeSet:
    """Load a probe set by file path or by name from ``furnace/resources/probes/``."""
    path = Path(name_or_path)
    bases = [d for d in (search_dir, PROBES_DIR) if d is not None]
    if not path.suffix:
        for base in bases:
            candidate = base / f"{name_or_path}.yaml"
            if candidate.exists():
                path = candidate
                break
    if not path.is_file():
        if path.suffix:
            raise NotFound(f"probe set file {short_path(path)} not found", field="probes")
        shipped = ", ".join(sorted(p.stem for p in PROBES_DIR.glob("*.yaml")))
        folders = " or ".join(short_path(b) for b in dict.fromkeys(bases))
        raise NotFound(
            f"probe set {str(name_or_path)!r} not found: no {name_or_path}.yaml in {folders} (shipped sets: "
            f"{shipped}; or give a probe file's path)",
            field="probes",
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise InputError(f"{path.name}: not valid YAML ({str(err).splitlines()[0]})") from None
    return parse_probe_set(data, source=path.name)
