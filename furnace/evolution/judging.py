"""What each judge of a panel said, and how far the judges agree, from the stored score rows.

With ``judges: [a, b]`` every individual's score rows hold each judge's verdicts (rows named
``<scorer>@<judge>``, :mod:`furnace.scoring.panel`) beside the panel's. From those rows alone:

- :func:`judge_rows` — an individual's rows as if only one judge had scored (its rows under the
  scorer's own name, the other rows unchanged), so :func:`~furnace.evolution.evaluate.combine`
  gives that judge's objectives and fitness;
- :func:`judge_fitness` — each judge's fitness of one individual (None when that judge failed);
- :func:`judge_scores` — each judge's *own* part: the weighted mean of the judge objectives alone
  (what the judges' rankings are compared on; shared objectives such as constraints would make
  any two judges look alike);
- :func:`panel_agreement` — Spearman's rank correlation of the judges' own scores over agents and
  Krippendorff's alpha (interval) over (agent, probe) scores (a judge's score of a probe: the mean
  of its judge rubrics there), with their readings in words (:mod:`furnace.scoring.agreement`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

from furnace.evolution.evaluate import combine
from furnace.evolution.records import IndividualRecord, ScoreRow
from furnace.scoring.agreement import krippendorff_alpha, read_alpha, read_spearman, spearman
from furnace.scoring.fitness import SCORERS
from furnace.scoring.panel import Panel, split_scorer


def _judged(scorer: str) -> bool:
    spec = SCORERS.get(scorer)
    return spec is not None and spec.kind == "judge"


def judge_rows(rows: Iterable[ScoreRow], judge: str) -> list[ScoreRow]:
    """``rows`` as ``judge`` alone would have scored them: its own rows under the scorer's name, the
    panel's and the other judges' rows dropped, every other scorer's rows kept."""
    out = []
    for row in rows:
        scorer, by = split_scorer(row.scorer)
        if by == judge:
            out.append(ScoreRow(row.probe, scorer, row.value, row.reason, row.failed, row.feedback))
        elif by is None and not _judged(scorer):
            out.append(row)
    return out


def judge_fitness(
    rows: Sequence[ScoreRow], scorers: Mapping[str, float], judges: Sequence[str], *, over: Sequence[str] | None = None
) -> dict[str, float | None]:
    """Each judge's fitness of one individual over the probes ``over`` (None: that judge failed somewhere)."""
    out: dict[str, float | None] = {}
    for judge in judges:
        ev = combine(judge_rows(rows, judge), scorers, over=over)
        out[judge] = None if ev.unscored else round(ev.fitness, 6)
    return out


def judge_scores(
    rows: Sequence[ScoreRow], scorers: Mapping[str, float], judges: Sequence[str], *, over: Sequence[str] | None = None
) -> dict[str, float | None]:
    """Each judge's own score of one individual: the weighted mean of its judge objectives (None: it failed)."""
    judged = {k: w for k, w in scorers.items() if w > 0 and _judged(k)}
    out: dict[str, float | None] = {}
    for judge in judges:
        ev = combine(judge_rows(rows, judge), judged, over=over)
        out[judge] = None if ev.unscored or not ev.objectives else round(ev.fitness, 6)
    return out


def probe_scores(rows: Iterable[ScoreRow], judges: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """probe -> judge -> that judge's mean over its judge rubrics on the probe (None where it failed)."""
    values: dict[str, dict[str, list[float]]] = {}
    failed: set[tuple[str, str]] = set()
    for row in rows:
        scorer, judge = split_scorer(row.scorer)
        if judge is None or judge not in judges or row.probe == "*" or not _judged(scorer):
            continue
        if row.failed:
            failed.add((row.probe, judge))
        values.setdefault(row.probe, {}).setdefault(judge, []).append(row.value)
    return {
        probe: {j: None if (probe, j) in failed or j not in by else sum(by[j]) / len(by[j]) for j in judges}
        for probe, by in values.items()
    }


def panel_agreement(
    records: Iterable[IndividualRecord],
    scorers: Mapping[str, float],
    panel: Panel,
    *,
    over: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The judges' agreement over an experiment's individuals (each agent's first record): Spearman of their
    own scores over the agents (``over``: the probes fitness reads, validation) for each pair of judges, and
    Krippendorff's alpha over every (agent, probe) they both scored; each with its reading."""
    everyone: dict[str, IndividualRecord] = {}
    for r in records:
        everyone.setdefault(r.agent_id, r)
    own = {a: judge_scores(r.scores, scorers, panel.judges, over=over) for a, r in everyone.items()}
    pairs = []
    for a, b in combinations(panel.judges, 2):
        ranked_a = {agent: s[a] for agent, s in own.items() if s[a] is not None and s[b] is not None}
        ranked_b = {agent: s[b] for agent, s in own.items() if s[a] is not None and s[b] is not None}
        rho = spearman(ranked_a, ranked_b)  # type: ignore[arg-type]
        pairs.append(
            {
                "judges": [a, b],
                "spearman": None if rho is None else round(rho, 6),
                "agents": len(ranked_a),
                "reading": read_spearman(rho, who=f"{a} and {b}"),
            }
        )
    units = {
        (agent, probe): values
        for agent, r in everyone.items()
        for probe, values in probe_scores(r.scores, panel.judges).items()
    }
    alpha = krippendorff_alpha(units)
    paired = sum(1 for values in units.values() if sum(v is not None for v in values.values()) >= 2)
    return {
        "judges": list(panel.judges),
        "fitness_judge": panel.fitness_judge,
        "fitness": panel.rule,
        "spearman": pairs[0]["spearman"] if len(pairs) == 1 else None,
        "pairs": pairs,
        "alpha": None if alpha is None else round(alpha, 6),
        "units": paired,
        "readings": [p["reading"] for p in pairs] + [read_alpha(alpha)],
    }


def fitness_by_judge(
    record: IndividualRecord, scorers: Mapping[str, float], panel: Panel | None, *, over: Sequence[str] | None = None
) -> dict[str, float | None]:
    """A leaderboard row's per-judge fitness (empty without a panel)."""
    if panel is None:
        return {}
    return judge_fitness(record.scores, scorers, panel.judges, over=over)


def panel_lines(judges: Mapping[str, Any], leaderboard: Sequence[Mapping[str, Any]] = (), shown: int = 5) -> list[str]:
    """The report's judges section: who judged, how fitness reads them, their agreement in words, and the
    top of the leaderboard's fitness by judge."""
    if not judges:
        return []
    names = list(judges["judges"])
    lines = [
        f"judges: {', '.join(names)} (fitness: {judges['fitness']})",
        *(f"  {text}" for text in judges["readings"]),
        f"  (Spearman over agents, on each judge's own scores; alpha over {judges['units']} (agent, probe) scores)",
    ]
    rows = [row for row in leaderboard if row.get("judges")][:shown]
    if rows:
        widths = [max(7, len(n)) for n in names]
        lines.append(
            f"  {'agent':<26} {'fitness':>7}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, widths, strict=True))
        )
        for row in rows:
            values = [row["judges"].get(n) for n in names]
            cells = "  ".join(
                f"{'failed' if v is None else format(v, '.3f'):>{w}}" for v, w in zip(values, widths, strict=True)
            )
            lines.append(f"  {row['agent_id'][:26]:<26} {row['fitness']:>7.3f}  {cells}")
    return [*lines, ""]
