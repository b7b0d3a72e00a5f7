"""An individual's scores as assessments on its trace: one per objective, and its fitness.

An objective a failure left unscored (a failed answer or judgement, a failed fusion) is an
assessment with an error and no value, never a 0 (the same rule as the records). A judge's
objective names the judge model as its source and carries the judge's feedback per probe.
"""

from __future__ import annotations

from collections.abc import Mapping

from furnace.evolution.records import IndividualRecord, ScoreRow
from furnace.evolution.tracker import Assessment
from furnace.scoring.fitness import SCORERS

MAX_RATIONALE = 2000


def individual_assessments(
    record: IndividualRecord, scorers: Mapping[str, float], *, judge_model: str
) -> list[Assessment]:
    """The objectives of ``scorers`` (weight > 0) and the fitness of ``record`` as assessments."""
    by_scorer: dict[str, list[ScoreRow]] = {}
    for row in record.scores:
        by_scorer.setdefault(row.scorer, []).append(row)
    out = [
        _objective(name, by_scorer.get(name, []), record, judge_model)
        for name in sorted(scorers)
        if scorers[name] > 0 and name != "human"  # people's picks are logged as HUMAN assessments of their own
    ]
    if record.scored:
        out.append(Assessment("fitness", record.fitness, "weighted mean of the objectives", source="furnace.fitness"))
    else:
        why = "; ".join(record.failure_reasons) or "unscored"
        out.append(Assessment("fitness", None, error=f"unscored ({', '.join(record.unscored)}): {why}"[:1000]))
    return out


def _objective(name: str, rows: list[ScoreRow], record: IndividualRecord, judge_model: str) -> Assessment:
    spec = SCORERS.get(name)
    judged = spec is not None and spec.kind == "judge"
    source = {"judge": judge_model} if judged else {"source": f"{name}:{spec.version}" if spec else name}
    rationale = "\n".join(_line(r) for r in rows if not r.failed)[:MAX_RATIONALE]
    metadata = {f"probe.{r.probe}": r.value for r in rows if not r.failed}
    failed = [r for r in rows if r.failed]
    if failed or name not in record.objectives:
        reasons = [f"{r.probe}: {r.reason}" for r in failed] or list(record.failure_reasons) or ["not scored"]
        return Assessment(name, None, rationale, error="; ".join(reasons)[:1000], metadata=metadata, **source)
    return Assessment(name, record.objectives[name], rationale, metadata=metadata, **source)


def _line(row: ScoreRow) -> str:
    note = f" — {row.feedback}" if row.feedback else ""
    return f"{row.probe}: {row.value:.3f} {row.reason}{note}".strip()
