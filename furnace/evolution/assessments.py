"""An individual's scores as assessments on its trace: one per objective, and its fitness; after the
search, its held-out figures beside them (test fitness with its interval, train fitness, the gap).

An objective a failure left unscored (a failed answer or judgement, a failed fusion) is an
assessment with an error and no value, never a 0 (the same rule as the records); so are the objectives
and the fitness of a reflected child rejected on its minibatch (never evaluated on validation: its
stored 0 is no score), the error saying so. A judge's
objective names the judge model as its source and carries the judge's feedback per probe.

With a panel of judges (``judges: [a, b]``) a judge objective is one assessment per judge (the same
name, ``source_id`` = that judge's model, its value that judge's objective, or its error when it
failed) and the panel's value that fitness reads (the same name again, from code: ``furnace.judges``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from furnace.evolution.evaluate import combine
from furnace.evolution.judging import judge_rows
from furnace.evolution.records import IndividualRecord, ScoreRow
from furnace.evolution.tracker import Assessment
from furnace.scoring.fitness import SCORERS
from furnace.scoring.panel import Panel, judge_scorer

MAX_RATIONALE = 2000


def individual_assessments(
    record: IndividualRecord,
    scorers: Mapping[str, float],
    *,
    judge_model: str,
    panel: Panel | None = None,
    over: Sequence[str] | None = None,
) -> list[Assessment]:
    """The objectives of ``scorers`` (weight > 0) and the fitness of ``record`` as assessments (with a
    ``panel``: each judge's objectives too, over the probes ``over`` as the fitness reads them)."""
    by_scorer: dict[str, list[ScoreRow]] = {}
    for row in record.scores:
        by_scorer.setdefault(row.scorer, []).append(row)
    out = []
    for name in sorted(scorers):
        if scorers[name] <= 0 or name == "human":  # people's picks are logged as HUMAN assessments of their own
            continue
        if panel is not None and SCORERS[name].kind == "judge":
            out += [_judged(name, by_scorer.get(judge_scorer(name, j), []), record, j, over) for j in panel.judges]
            panel_source = f"furnace.judges: {panel.rule}"
            out.append(_objective(name, by_scorer.get(name, []), record, judge_model, source=panel_source))
        else:
            out.append(_objective(name, by_scorer.get(name, []), record, judge_model))
    rejected = _rejected(record)
    if rejected:
        out.append(Assessment("fitness", None, error=rejected))
    elif record.scored:
        out.append(Assessment("fitness", record.fitness, "weighted mean of the objectives", source="furnace.fitness"))
    else:
        why = "; ".join(record.failure_reasons) or "unscored"
        out.append(Assessment("fitness", None, error=f"unscored ({', '.join(record.unscored)}): {why}"[:1000]))
    return out


def _rejected(record: IndividualRecord) -> str:
    """Why ``record`` has no score when it is a reflected child rejected on its minibatch, else ``""``."""
    verdict = record.minibatch
    if verdict is None or not record.rejected:
        return ""
    return f"rejected on its minibatch, never evaluated on validation ({verdict.reason})"[:1000]


def _judged(
    name: str, rows: list[ScoreRow], record: IndividualRecord, judge: str, over: Sequence[str] | None
) -> Assessment:
    """One judge's objective of a panel: its mean over the probes fitness reads (``over``), or its failures."""
    value = combine(judge_rows(record.scores, judge), {name: 1.0}, over=over).objectives.get(name)
    if value is None or any(r.failed for r in rows):
        return _objective(name, rows, record, judge)
    return _objective(name, rows, record, judge, value=value)


def _objective(
    name: str,
    rows: list[ScoreRow],
    record: IndividualRecord,
    judge_model: str,
    *,
    source: str = "",
    value: float | None = None,
) -> Assessment:
    spec = SCORERS.get(name)
    judged = spec is not None and spec.kind == "judge" and not source
    source_of = {"judge": judge_model} if judged else {"source": source or (f"{name}:{spec.version}" if spec else name)}
    rationale = "\n".join(_line(r) for r in rows if not r.failed)[:MAX_RATIONALE]
    metadata = {f"probe.{r.probe}": r.value for r in rows if not r.failed}
    failed = [r for r in rows if r.failed]
    if failed or (value is None and name not in record.objectives):
        reasons = [f"{r.probe}: {r.reason}" for r in failed] or list(record.failure_reasons)
        reasons = reasons or [_rejected(record) or "not scored"]
        return Assessment(name, None, rationale, error="; ".join(reasons)[:1000], metadata=metadata, **source_of)
    shown = record.objectives[name] if value is None else value
    return Assessment(name, shown, rationale, metadata=metadata, **source_of)


def _line(row: ScoreRow) -> str:
    note = f" — {row.feedback}" if row.feedback else ""
    return f"{row.probe}: {row.value:.3f} {row.reason}{note}".strip()


def held_out_assessments(row: Mapping[str, Any]) -> list[Assessment]:
    """One tested agent's held-out figures (a row of the engine's ``held_out.agents``) as assessments on
    its trace, beside its ``fitness`` (validation): ``train_fitness``, ``test_fitness`` (its 95% interval
    in the rationale and metadata) and ``train_test_gap``. A test evaluation that failed is an
    assessment with an error, never a 0; an agent never scored on test (a set without test probes) has none."""
    if row.get("test") is None and not row.get("test_unscored"):
        return []
    source = "furnace.held_out"
    out = [
        Assessment(
            "train_fitness",
            float(row["train"]),
            "fitness on the train probes (feedback came from these)",
            source=source,
        )
    ]
    if row.get("test") is None:
        why = "; ".join(row["test_unscored"])
        return [*out, Assessment("test_fitness", None, error=f"unscored: {why}"[:1000], source=source)]
    low, high, gap = float(row["test_low"]), float(row["test_high"]), float(row["gap"])
    return [
        *out,
        Assessment(
            "test_fitness",
            float(row["test"]),
            f"fitness on the held-out test probes, 95% bootstrap interval [{low:.3f}, {high:.3f}]",
            source=source,
            metadata={"test_low": low, "test_high": high, "train_test_gap": gap},
        ),
        Assessment("train_test_gap", gap, "train fitness minus test fitness", source=source),
    ]
