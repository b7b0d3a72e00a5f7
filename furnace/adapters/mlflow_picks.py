"""People's picks in MLflow: each pick is a HUMAN feedback assessment on both candidates' traces.

An experiment run with MLflow traces every individual (``individual g<generation> s<slot>``,
:mod:`furnace.adapters.mlflow_tracker`); a pick between two of them adds, on each one's trace, a
``human_preference`` assessment: 1.0 for the chosen candidate, 0.0 for the other, 0.5 each for a
tie, with ``source_type=HUMAN`` and ``source_id`` the person, the reason as rationale and the pick
(id, probe, opponent, position shown) as metadata. Undoing a pick deletes its assessments. A pick
whose candidates have no trace (the experiment ran with ``--no-mlflow``) is not logged.

After every pick and undo, what the picks say of the judges is logged on the experiment's run
(:func:`log_calibration`): per judge, ``people_agreement/<judge>`` with the ends of its 95%
interval and the decided picks behind it, and the whole calibration as ``calibration.json``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from furnace import offline_env

offline_env.apply()

import mlflow  # noqa: E402
from mlflow import MlflowClient  # noqa: E402
from mlflow.entities import AssessmentSource, AssessmentSourceType  # noqa: E402
from mlflow.tracing.constant import TraceTagKey  # noqa: E402

from furnace.adapters.mlflow_tracker import _TAG_ID, MLFLOW_EXPERIMENT  # noqa: E402
from furnace.scoring.picks import Pick  # noqa: E402

ASSESSMENT = "human_preference"
_PICK_ID = "furnace.pick_id"


def _run(client: MlflowClient, experiment_id: str, mlflow_experiment: str) -> Any:
    """The experiment's (parent) MLflow run, or None."""
    found = client.get_experiment_by_name(mlflow_experiment)
    if found is None:
        return None
    runs = client.search_runs([found.experiment_id], filter_string=f"tags.`{_TAG_ID}` = '{experiment_id}'")
    return next((r for r in runs if "mlflow.parentRunId" not in r.data.tags), None)


def _traces(tracking_uri: str, experiment_id: str, mlflow_experiment: str) -> dict[str, object]:
    """The experiment run's traces by name (the newest of a name: a rerun's), or {} without a run."""
    client = MlflowClient(tracking_uri=tracking_uri)
    parent = _run(client, experiment_id, mlflow_experiment)
    if parent is None:
        return {}
    mlflow.set_tracking_uri(tracking_uri)
    traces = mlflow.search_traces(
        locations=[parent.info.experiment_id], run_id=parent.info.run_id, include_spans=False, return_type="list"
    )
    by_name: dict[str, object] = {}
    for trace in sorted(traces, key=lambda t: t.info.request_time):
        by_name[trace.info.tags.get(TraceTagKey.TRACE_NAME, "")] = trace
    return by_name


def _sides(pick: Pick) -> list[tuple[str, int, str, str, float]]:
    """(agent, generation, opponent, shown as, value) for both candidates of a pick."""
    won = {"A": (1.0, 0.0), "B": (0.0, 1.0), "tie": (0.5, 0.5)}[pick.choice]
    return [
        (pick.agent_a, pick.generation_a, pick.agent_b, "A", won[0]),
        (pick.agent_b, pick.generation_b, pick.agent_a, "B", won[1]),
    ]


def log_picks(
    tracking_uri: str,
    picks: Iterable[Pick],
    slots: Mapping[tuple[str, int], int],
    *,
    mlflow_experiment: str = MLFLOW_EXPERIMENT,
) -> int:
    """Log each pick on its candidates' traces (``slots``: (agent, generation) -> slot, which names the
    trace); a pick already logged is not logged again. Returns the assessments added."""
    picks = list(picks)
    if not picks:
        return 0
    traces = _traces(tracking_uri, picks[0].experiment_id, mlflow_experiment)
    added = 0
    for pick in picks:
        for agent, generation, opponent, shown, value in _sides(pick):
            slot = slots.get((agent, generation))
            trace = traces.get(f"individual g{generation} s{slot}") if slot is not None else None
            if trace is None:
                continue
            info = trace.info  # type: ignore[attr-defined]
            if any((a.metadata or {}).get(_PICK_ID) == pick.pick_id for a in info.assessments):
                continue
            mlflow.log_feedback(
                trace_id=info.trace_id,
                name=ASSESSMENT,
                value=value,
                source=AssessmentSource(AssessmentSourceType.HUMAN, pick.who),
                rationale=pick.reason or None,
                metadata={_PICK_ID: pick.pick_id, "probe": pick.probe, "opponent": opponent, "shown_as": shown},
            )
            added += 1
    return added


def withdraw_pick(tracking_uri: str, pick: Pick, *, mlflow_experiment: str = MLFLOW_EXPERIMENT) -> int:
    """Delete an undone pick's assessments from its candidates' traces; returns how many went."""
    removed = 0
    for trace in _traces(tracking_uri, pick.experiment_id, mlflow_experiment).values():
        info = trace.info  # type: ignore[attr-defined]
        for assessment in info.assessments:
            if (assessment.metadata or {}).get(_PICK_ID) == pick.pick_id:
                mlflow.delete_assessment(trace_id=info.trace_id, assessment_id=assessment.assessment_id)
                removed += 1
    return removed


def _metric_name(judge: str) -> str:
    """A judge's name as MLflow accepts it in a metric key (a panel's ``a + b`` included)."""
    return re.sub(r"[^0-9A-Za-z_\-. :/]", "_", judge)


def log_calibration(
    tracking_uri: str,
    experiment_id: str,
    calibration: Mapping[str, Any],
    *,
    step: int,
    mlflow_experiment: str = MLFLOW_EXPERIMENT,
) -> bool:
    """Log what people's picks say of each judge (``calibration``: ``Calibration.as_dict()``) on the
    experiment's run at ``step`` (the pick events so far: each pick and each undo is one), and the whole
    as ``calibration.json``; a judge with no decided pick logs only its count. False without a run."""
    client = MlflowClient(tracking_uri=tracking_uri)
    run = _run(client, experiment_id, mlflow_experiment)
    if run is None:
        return False
    run_id = run.info.run_id
    client.log_metric(run_id, "people_picks", float(calibration["picks"]), step=step)
    for judge in calibration["judges"]:
        name = _metric_name(str(judge["judge"]))
        client.log_metric(run_id, f"people_picks/{name}", float(judge["picks"]), step=step)
        if judge["agreement"] is not None and judge["interval"] is not None:
            low, high = judge["interval"]
            client.log_metric(run_id, f"people_agreement/{name}", float(judge["agreement"]), step=step)
            client.log_metric(run_id, f"people_agreement_low/{name}", float(low), step=step)
            client.log_metric(run_id, f"people_agreement_high/{name}", float(high), step=step)
    client.log_dict(run_id, dict(calibration), "calibration.json")
    return True
