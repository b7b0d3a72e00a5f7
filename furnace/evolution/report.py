"""The experiment report: leaderboard, best lineage, operator stats, Pareto front, totals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from furnace.evolution.records import GenerationRecord, IndividualRecord, resolved_seeds
from furnace.evolution.selection import OperatorBoard, rank_key
from furnace.scoring.fitness import pareto_front


@dataclass(frozen=True)
class ExperimentReport:
    """Everything a user wants to see after a run (also the ``--json`` output)."""

    experiment_id: str
    name: str
    model: str
    status: str
    generations: list[dict[str, Any]]
    leaderboard: list[dict[str, Any]]
    best_prompt: str
    lineage: list[dict[str, Any]]
    operators: dict[str, dict[str, float]]
    pareto: list[dict[str, Any]]
    totals: dict[str, float]
    failures: int = 0
    failed_individuals: list[dict[str, Any]] = field(default_factory=list)
    judge_model: str = ""
    unscored: list[dict[str, Any]] = field(default_factory=list)
    seeds: list[str] = field(default_factory=list)  # the initial population as run: id@version
    run_spent: dict[str, float] = field(default_factory=dict)  # this invocation's figures (what the budget counted)
    untraced: list[dict[str, Any]] = field(default_factory=list)  # units whose traces show fewer tokens than the ledger

    @property
    def best(self) -> dict[str, Any] | None:
        return self.leaderboard[0] if self.leaderboard else None

    def result_signature(self) -> dict[str, Any]:
        """The parts that must be identical between an interrupted and an uninterrupted run."""
        return {
            "leaderboard": self.leaderboard,
            "lineage": self.lineage,
            "generations": [
                {k: g[k] for k in ("generation", "best_fitness", "mean_fitness", "survivors")} for g in self.generations
            ],
            "pareto": self.pareto,
        }

    def summary(self) -> dict[str, Any]:
        best = self.best or {}
        return {
            "best_agent": best.get("agent_id"),
            "best_fitness": best.get("fitness"),
            "generations": len(self.generations),
            "failures": self.failures,
            "unscored": len(self.unscored),
            "judge_model": self.judge_model,
            **self.totals,
        }

    def tags(self) -> dict[str, str]:
        best = self.best or {}
        return {
            "furnace.status": self.status,
            "furnace.best_agent": str(best.get("agent_id", "")),
            "furnace.best_lineage_hashes": ",".join(
                n["lineage_hash"][:16] for n in self.lineage if n.get("lineage_hash")
            ),
        }

    def artifacts(self) -> dict[str, Any]:
        return {
            "best_prompt.md": self.best_prompt,
            "lineage.json": self.lineage,
            "leaderboard.json": self.leaderboard,
            "operators.json": self.operators,
            "pareto.json": self.pareto,
        }

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def _lineage(best: IndividualRecord | None, everyone: dict[str, IndividualRecord]) -> list[dict[str, Any]]:
    """The best agent and its ancestors inside the experiment (breadth first)."""
    if best is None:
        return []
    out, queue, seen = [], [best.agent_id], set()
    while queue:
        aid = queue.pop(0)
        if aid in seen or aid not in everyone:
            continue
        seen.add(aid)
        r = everyone[aid]
        out.append(
            {
                "agent_id": aid,
                "generation": r.generation,
                "operator": r.operator,
                "parents": list(r.parents),
                "fitness": r.fitness,
                "lineage_hash": r.lineage_hash,
            }
        )
        queue.extend(r.parents)
    return out


def build_report(
    records: Sequence[IndividualRecord],
    history: Sequence[GenerationRecord],
    *,
    experiment_id: str,
    name: str,
    model: str,
    status: str,
    board: OperatorBoard,
    totals: dict[str, Any],
    judge_model: str = "",
    run_spent: dict[str, Any] | None = None,
    untraced: Sequence[dict[str, Any]] = (),
) -> ExperimentReport:
    """Assemble the report of one run from its individual records (every generation), its
    generation history, the operator board, the experiment's totals (the call ledger's: every run
    of it) and ``run_spent``, what this invocation spent (the meter the budget reads)."""
    everyone: dict[str, IndividualRecord] = {}
    for r in records:  # earliest generation wins for lineage
        everyone.setdefault(r.agent_id, r)
    unique = sorted(everyone.values(), key=rank_key)
    ok = [r for r in unique if r.scored]  # unscored individuals are listed apart, never ranked
    leaderboard = [
        {
            "agent_id": r.agent_id,
            "generation": r.generation,
            "operator": r.operator,
            "fitness": round(r.fitness, 6),
            "objectives": r.objectives,
        }
        for r in ok[:10]
    ]
    best = ok[0] if ok else None
    keys = sorted({k for r in ok for k in r.objectives})
    front_ids = pareto_front({r.agent_id: r.objectives for r in ok}, keys)
    pareto = [
        {"agent_id": a, "fitness": round(everyone[a].fitness, 6), "objectives": everyone[a].objectives}
        for a in front_ids
    ]
    unscored = [
        {
            "agent_id": r.agent_id,
            "generation": r.generation,
            "operator": r.operator,
            "unscored": list(r.unscored),
            "reasons": list(r.failure_reasons[:3]),
        }
        for r in unique
        if not r.scored
    ]
    failed = [
        {
            "agent_id": r.agent_id,
            "generation": r.generation,
            "failures": r.failures,
            "reasons": list(r.failure_reasons[:3]),
        }
        for r in records
        if r.failures
    ]
    return ExperimentReport(
        experiment_id=experiment_id,
        name=name,
        model=model,
        status=status,
        generations=[
            {
                "generation": g.generation,
                "best_fitness": round(g.best_fitness, 6),
                "mean_fitness": round(g.mean_fitness, 6),
                "survivors": list(g.survivors),
                "weights": g.operator_weights,
            }
            for g in history
        ],
        leaderboard=leaderboard,
        best_prompt=best.system_prompt if best else "",
        lineage=_lineage(best, everyone),
        operators={k: v.as_dict() | {"weight": board.weights().get(k, 0.0)} for k, v in sorted(board.stats.items())},
        pareto=pareto,
        totals=totals,
        failures=sum(r.failures for r in records),
        failed_individuals=failed[:20],
        seeds=resolved_seeds(records),
        judge_model=judge_model or model,
        unscored=unscored[:50],
        run_spent=dict(run_spent if run_spent is not None else totals),
        untraced=list(untraced),
    )


PARETO_SHOWN = 12  # front members named in the printed report; the rest are counted


def cut_list(ids: Sequence[str], shown: int = PARETO_SHOWN) -> str:
    """``a, b, c`` in full, or the first ``shown`` then ``… and N more``."""
    if len(ids) <= shown:
        return ", ".join(ids)
    return ", ".join(ids[:shown]) + f", … and {len(ids) - shown} more"


def spent_text(t: Mapping[str, Any]) -> str:
    """What a set of call figures (:meth:`CallTotals.as_dict`) counts, each count named: the budget
    stop line and the report's totals line both say it this way. ``calls`` are model calls."""
    return (
        f"{int(t['calls'])} model calls ({int(t.get('attempts', 0))} attempts, {int(t.get('failed_attempts', 0))}"
        f" failed) + {int(t['cached_calls'])} cache hits (hit rate {t['cache_hit_rate']:.0%}),"
        f" {int(t['failed_calls'])} failed calls; tokens {int(t['tokens'])}, cost ${t['cost_usd']:.4f}"
    )


def budget_stop(reason: str, spent: Mapping[str, Any]) -> str:
    """The status of a run the budget stopped: the limit, then what this run spent (its calls in
    flight included: they count against the limit, so a ``max_calls`` stop shows that many)."""
    return f"stopped: {reason} after {spent_text(spent)}"


_SAME = ("calls", "cached_calls", "attempts", "tokens")
UNTRACED_WHY = (
    "an earlier run paid for calls whose spans never reached MLflow (a killed run's: written in the"
    " background, or still under way; or a run made without MLflow)"
)


def render_report(report: ExperimentReport) -> str:
    """The human-readable report printed by ``furnace experiment run``."""
    judge = report.judge_model or report.model
    lines = [
        f"experiment {report.experiment_id} ({report.name}) — {report.status}",
        f"model: {report.model}",
        f"judge: {judge}" + (" (the same model as the agents)" if judge == report.model else ""),
        f"seeds: {', '.join(report.seeds)}",
        "",
    ]
    lines.append("generation  best    mean")
    for g in report.generations:
        lines.append(f"{g['generation']:>10}  {g['best_fitness']:.3f}  {g['mean_fitness']:.3f}")
    lines += ["", "leaderboard"]
    keys = sorted({k for row in report.leaderboard for k in row["objectives"]})
    lines.append(
        f"  {'#':>2} {'agent':<26} {'gen':>3} {'operator':<9} {'fitness':>7}  " + " ".join(f"{k[:9]:>9}" for k in keys)
    )
    for i, row in enumerate(report.leaderboard, 1):
        objs = " ".join(f"{row['objectives'].get(k, 0):>9.3f}" for k in keys)
        lines.append(
            f"  {i:>2} {row['agent_id'][:26]:<26} {row['generation']:>3} {row['operator']:<9} "
            f"{row['fitness']:>7.3f}  {objs}"
        )
    if report.unscored:
        lines += [
            "",
            f"unscored ({len(report.unscored)}): a failure, not a score — kept out of selection; a rerun retries",
        ]
        for row in report.unscored[:10]:
            reason = row["reasons"][0] if row["reasons"] else ""
            lines.append(
                f"  {row['agent_id'][:26]:<26} gen {row['generation']:>2}  {', '.join(row['unscored'])}: {reason[:90]}"
            )
    lines += ["", "best agent's lineage"]
    for node in report.lineage[:12]:
        parents = ", ".join(node["parents"]) or "library"
        lh = (node["lineage_hash"] or "")[:12]
        lines.append(
            f"  {node['agent_id']} (gen {node['generation']}, {node['operator']}{', ' + lh if lh else ''}) <- {parents}"
        )
    lines += ["", "operators     children  success  failures  weight"]
    for name, s in report.operators.items():
        lines.append(
            f"  {name:<11} {int(s['children']):>8}  {s['success_rate']:>7.0%}  "
            f"{int(s['failures']):>8}  {s['weight']:.2f}"
        )
    lines += ["", f"pareto front ({len(report.pareto)}): " + cut_list([p["agent_id"] for p in report.pareto])]
    t, mine = report.totals, report.run_spent or report.totals
    earlier = any(int(t[k]) != int(mine.get(k, 0)) for k in _SAME)  # earlier runs of the experiment spent too
    lines += ["", f"calls: {spent_text(t)}" + (" (every run of this experiment)" if earlier else "")]
    if earlier:
        lines.append(f"this run: {spent_text(mine)}")
    if report.untraced:
        lost = sum(int(u["tokens"]) - int(u["traced_tokens"]) for u in report.untraced)
        lines.append(
            f"traces short of the ledger by {lost} tokens ({len(report.untraced)} units): {UNTRACED_WHY}; "
            + cut_list([f"{u['trace']} ({int(u['traced_tokens'])} of {int(u['tokens'])})" for u in report.untraced], 6)
        )
    if report.failures:
        lines.append(
            f"failure scores recorded: {report.failures} (see `furnace experiment show {report.experiment_id}`)"
        )
    return "\n".join(lines)
