"""The experiment report: leaderboard, best lineage, operator stats, Pareto front, totals, and the
held-out figures (test fitness with its interval beside train fitness, the champion's re-evaluation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from furnace.domain.text import signed
from furnace.evolution.judging import panel_lines
from furnace.evolution.records import GenerationRecord, IndividualRecord, resolved_seeds
from furnace.evolution.selection import OperatorBoard, rank_key
from furnace.scoring.fitness import pareto_front

# one agent's held-out figures, as the report, `experiment show`, the app, MLflow and the notebooks name them
HELD_OUT_FIELDS = ("train_fitness", "test_fitness", "test_low", "test_high", "train_test_gap")


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
    held_out: dict[str, Any] = field(default_factory=dict)  # splits, test fitness per agent, re-evaluation
    rejected: int = 0  # reflected children that did not beat their parent on their minibatch
    judges: dict[str, Any] = field(default_factory=dict)  # a panel's judges and agreement (evolution.judging)
    # the ``human`` objective: people's ratings (Bradley–Terry) of picked agents, the picks and the pairs asked
    human: dict[str, Any] = field(default_factory=dict)
    # the run's traces once the tracker finished: started, exported (in the store), missing; {} untraced
    traces: dict[str, int] = field(default_factory=dict)

    @property
    def best(self) -> dict[str, Any] | None:
        """The champion: the best of the top re-evaluated with fresh samples (else the fittest)."""
        champion = self.held_out.get("champion")
        found = next((row for row in self.leaderboard if row["agent_id"] == champion), None)
        return found or (self.leaderboard[0] if self.leaderboard else None)

    def held_out_metrics(self) -> dict[str, float]:
        """The champion's held-out figures as metrics (MLflow): test fitness and its interval, train
        fitness, the train–test gap, and how much the search's winner fell on re-evaluation."""
        best = self.best or {}
        out = {f"champion_{k}": float(best[k]) for k in HELD_OUT_FIELDS if best.get(k) is not None}
        again = self.held_out.get("reevaluation")
        if again:
            out["reevaluation_drop"] = float(again["drop"])
        return out

    def held_out_steps(self) -> dict[int, dict[str, float]]:
        """Each generation's best's held-out figures as metrics at ``step = generation`` (MLflow):
        ``best_train_fitness``, ``best_test_fitness`` with ``best_test_low``/``best_test_high`` (its 95%
        interval) and ``best_train_test_gap``; a generation whose best was not scored on test has none."""
        keys = [f"best_{k}" for k in HELD_OUT_FIELDS]
        steps = {g["generation"]: {k: float(g[k]) for k in keys if g.get(k) is not None} for g in self.generations}
        return {gen: metrics for gen, metrics in steps.items() if metrics}

    def judge_metrics(self) -> dict[str, float]:
        """A panel's agreement as metrics (MLflow): ``judges_spearman`` (the first pair of judges) and
        ``judges_alpha``, each only when computed."""
        pairs = self.judges.get("pairs") or [{}]
        figures = {"judges_spearman": pairs[0].get("spearman"), "judges_alpha": self.judges.get("alpha")}
        return {k: float(v) for k, v in figures.items() if v is not None}

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
            **({"judges": self.judges} if self.judges else {}),
            **held_out_summary(self),
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
            "held_out.json": self.held_out,
            **({"judges.json": self.judges} if self.judges else {}),
            **({"human.json": self.human} if self.human else {}),  # people's ratings and the pairs asked
        }

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def minibatch_decision(record: IndividualRecord) -> dict[str, Any] | None:
    """A reflected child's minibatch decision (``accepted`` and the scores, in ``reason``), or None."""
    row = record.minibatch
    return None if row is None else {"accepted": row.value == 1.0, "reason": row.reason}


def held_out_summary(report: ExperimentReport) -> dict[str, Any]:
    """What the stored summary keeps of the held-out figures (``experiment show``, the app)."""
    best = report.best or {}
    out: dict[str, Any] = {"champion": best.get("agent_id")}
    for key in HELD_OUT_FIELDS:
        if best.get(key) is not None:
            out[key] = best[key]
    out["held_out"] = dict(report.held_out)
    return out


def held_out_columns(row: dict[str, Any] | None) -> dict[str, Any]:
    """One agent's held-out figures (from ``held_out.agents``) as leaderboard fields."""
    row = row or {}
    out: dict[str, Any] = {"train_fitness": row.get("train")}
    if row.get("test") is not None:
        out.update(
            test_fitness=row["test"], test_low=row["test_low"], test_high=row["test_high"], train_test_gap=row["gap"]
        )
    if row.get("reevaluated") is not None:
        out["reevaluated"] = row["reevaluated"]
    return out


def reevaluation_text(again: dict[str, Any]) -> str:
    """How the search's winner scored again on fresh samples, as the figures print to 3 places: ``fell from
    0.691 to 0.680``, ``rose from 0.691 to 0.692`` or ``held at 0.691`` (the exact drop is ``again["drop"]``)."""
    before, after = f"{again['fitness']:.3f}", f"{again['reevaluated']:.3f}"
    if before == after:
        return f"held at {after}"
    return f"{'fell' if again['reevaluated'] < again['fitness'] else 'rose'} from {before} to {after}"


def interval_text(row: dict[str, Any]) -> str:
    """``0.812 [0.770, 0.851]`` for an agent's test fitness and interval, ``-`` when not scored."""
    if row.get("test_fitness") is None:
        return "-"
    return f"{row['test_fitness']:.3f} [{row['test_low']:.3f}, {row['test_high']:.3f}]"


def gap_text(row: dict[str, Any]) -> str:
    """An agent's train - test gap as every face prints it (:func:`~furnace.domain.text.signed`), ``-``
    when not scored."""
    gap = row.get("train_test_gap")
    return "-" if gap is None else signed(gap)


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
                **({"minibatch": m} if (m := minibatch_decision(r)) else {}),
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
    held_out: dict[str, Any] | None = None,
    judges: dict[str, Any] | None = None,
    by_judge: Mapping[str, Mapping[str, float | None]] | None = None,
    human: dict[str, Any] | None = None,
) -> ExperimentReport:
    """Assemble the report of one run from its individual records (every generation), its
    generation history, the operator board, the experiment's totals (the call ledger's: every run
    of it) and ``run_spent``, what this invocation spent (the meter the budget reads). ``held_out``: the
    engine's held-out figures (test fitness per agent, the champion and the re-evaluation); the best
    agent (lineage, prompt) is the champion. Reflected children rejected on their minibatch are counted,
    never ranked. ``judges``: a panel's agreement (:func:`furnace.evolution.judging.panel_agreement`);
    ``by_judge``: each agent's fitness by judge (a leaderboard column). ``human``: people's ratings
    (``ratings``: agent -> its ``human`` objective) when the experiment weights it; each leaderboard row
    then has ``human`` (None: nobody picked it) beside the judges' fitness."""
    held = held_out or {}
    rated = (human or {}).get("ratings")
    tested = held.get("agents", {})
    everyone: dict[str, IndividualRecord] = {}
    for r in records:  # earliest generation wins for lineage
        everyone.setdefault(r.agent_id, r)
    unique = sorted(everyone.values(), key=rank_key)
    ok = [r for r in unique if r.has_score]  # unscored individuals are listed apart
    leaderboard = [
        {
            "agent_id": r.agent_id,
            "generation": r.generation,
            "operator": r.operator,
            "fitness": round(r.fitness, 6),
            **held_out_columns(tested.get(r.agent_id)),
            "objectives": r.objectives,
            **({"judges": dict(by_judge.get(r.agent_id, {}))} if by_judge else {}),
            **({"human": rated.get(r.agent_id)} if rated is not None else {}),
        }
        for r in ok[:10]
    ]
    champion = held.get("champion")
    best = everyone.get(champion) if champion in everyone else (ok[0] if ok else None)
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
                **(
                    {f"best_{k}": v for k, v in held_out_columns(tested.get(g.survivors[0])).items()}
                    if g.survivors
                    else {}
                ),
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
        held_out=dict(held),
        rejected=sum(1 for r in unique if r.rejected),
        judges=dict(judges or {}),
        human=dict(human or {}),
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
        *(
            []
            if report.judges
            else [f"judge: {judge}" + (" (the same model as the agents)" if judge == report.model else "")]
        ),
        f"seeds: {', '.join(report.seeds)}",
        "",
    ]
    lines += panel_lines(report.judges, report.leaderboard)
    lines += held_out_lines(report)
    lines.append("generation  best    mean   best's train  best's test [95% interval]")
    for g in report.generations:
        train = g.get("best_train_fitness")
        lines.append(
            f"{g['generation']:>10}  {g['best_fitness']:.3f}  {g['mean_fitness']:.3f}  "
            f"{(f'{train:.3f}' if train is not None else '-'):>12}  "
            + interval_text({k[5:]: v for k, v in g.items() if k.startswith("best_")})
        )
    lines += ["", "leaderboard (fitness: validation; train and test [95% interval]; gap = train - test)"]
    keys = sorted({k for row in report.leaderboard for k in row["objectives"]})
    people = bool(report.human)  # the human objective: people's rating beside the judges' objectives
    lines.append(
        f"  {'#':>2} {'agent':<26} {'gen':>3} {'operator':<9} {'fitness':>7} {'train':>6} {'test [95% interval]':<22}"
        f" {'gap':>6}  " + " ".join(f"{k[:9]:>9}" for k in keys) + (f" {'people':>9}" if people else "")
    )
    for i, row in enumerate(report.leaderboard, 1):
        objs = " ".join(f"{row['objectives'].get(k, 0):>9.3f}" for k in keys)
        if people:
            objs += f" {row['human']:>9.3f}" if row.get("human") is not None else f" {'unpicked':>9}"
        train = f"{row['train_fitness']:.3f}" if row.get("train_fitness") is not None else "-"
        lines.append(
            f"  {i:>2} {row['agent_id'][:26]:<26} {row['generation']:>3} {row['operator']:<9} "
            f"{row['fitness']:>7.3f} {train:>6} {interval_text(row):<22} {gap_text(row):>6}  {objs}"
        )
    lines += human_lines(report)
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
    lines += ["", "champion's lineage"]
    for node in report.lineage[:12]:
        parents = ", ".join(node["parents"]) or "library"
        lh = (node["lineage_hash"] or "")[:12]
        lines.append(
            f"  {node['agent_id']} (gen {node['generation']}, {node['operator']}{', ' + lh if lh else ''}) <- {parents}"
        )
    if report.rejected:
        lines.append(
            f"  rejected on their minibatch (never evaluated on validation): {report.rejected} reflected children"
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
    lines += traces_lines(report.traces)
    if report.failures:
        lines.append(
            f"failure scores recorded: {report.failures} (see `furnace experiment show {report.experiment_id}`)"
        )
    return "\n".join(lines)


def human_lines(report: ExperimentReport) -> list[str]:
    """What the report says about the ``human`` objective: the picks, and the pairs still waiting."""
    human = report.human
    if not human:
        return []
    line = (
        f"people: the human objective (weight {human.get('weight', 0):g}) is people's Bradley–Terry rating from "
        f"{human.get('picks', 0)} picks, {len(human.get('ratings') or {})} agents rated; an unpicked agent's fitness "
        "is over the judges' objectives (their weights renormalised)"
    )
    asks = human.get("asks") or []
    if asks:
        last = asks[-1]
        line += f"; after generation {last['generation']}: {last['waiting']} of {last['asked']} pairs waiting"
    return ["", line]


TRACES_WHY = "see the MLflow run's tag furnace.traces and the warning above it (docs/experiments.md, MLflow)"


def traces_lines(traces: Mapping[str, int]) -> list[str]:
    """The report's line on traces, when any trace of the run was not exported to the store; none else."""
    if not traces.get("missing"):
        return []
    return [f"traces: {traces['exported']} of {traces['started']} exported; {traces['missing']} missing — {TRACES_WHY}"]


def held_out_lines(report: ExperimentReport) -> list[str]:
    """The report's held-out header: the splits, samples, the champion's train and test fitness (with its
    interval and the gap) and how much the search's winner fell when re-evaluated with fresh samples."""
    held = report.held_out
    splits = held.get("splits") or {}
    if not splits:
        return []
    lines = [
        f"probes: {len(splits.get('train', []))} train (feedback, reflection), "
        f"{len(splits.get('validation', []))} validation (selection), {len(splits.get('test', []))} test "
        f"(report only); {held.get('samples_per_probe', 1)} samples per probe"
    ]
    best = report.best or {}
    if best:
        train = best.get("train_fitness")
        gap = best.get("train_test_gap")
        lines.append(
            f"champion {best['agent_id']}: validation {best['fitness']:.3f}, train "
            + (f"{train:.3f}" if train is not None else "-")
            + f", test {interval_text(best)}"
            + (f", train - test gap {signed(gap)}" if gap is not None else "")
        )
    again = held.get("reevaluation")
    if again:
        chosen = "the champion" if again["agent_id"] == best.get("agent_id") else f"champion {best.get('agent_id')}"
        lines.append(
            f"re-evaluation with fresh samples: the search's winner {again['agent_id']} {reevaluation_text(again)}; "
            f"{chosen} is the best of the top {len(again['top'])} re-evaluated"
        )
    if held.get("stopped"):
        lines.append(str(held["stopped"]))
    return [*lines, ""]
