"""Read-only, parameterised queries for the lab assistant over furnace's own tables.

Every statement is a fixed template; values from the user's question are only
ever bound as parameters, never spliced into SQL. The table names below are
the whole reach of the assistant.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from furnace.assistant.answer import AssistantState
from furnace.assistant.results import Query
from furnace.assistant.scope import Catalogue, Scope
from furnace.domain.elixir import Elixir
from furnace.evolution.records import ExperimentResults
from furnace.evolution.report import interval_text
from furnace.storage.duckdb.analysis import rejected_sql
from furnace.views.experiments import held_out_fields

# The latest, not withdrawn, version of every library elixir.
_LATEST_LIBRARY = (
    "FROM elixir_versions e WHERE origin = 'library' AND deleted_at IS NULL "
    "AND version = (SELECT max(version) FROM elixir_versions x WHERE x.id = e.id)"
)
# An optional equality filter: binds the value twice (NULL = no filter).
_EQ = "(CAST(? AS VARCHAR) IS NULL OR {col} = ?)"
_TIME = "(CAST(? AS TIMESTAMP) IS NULL OR {col} >= ?) AND (CAST(? AS TIMESTAMP) IS NULL OR {col} < ?)"


def _ranked(row: str) -> str:
    """SQL true for an individual (``row``: its alias in ``experiment_individuals``) whose fitness is a score:
    nothing failed, and a reflected child won on its minibatch (a rejected one was never evaluated on
    validation: its stored 0 is no score): ``IndividualRecord.has_score`` in SQL, the rule every ranking reads."""
    return f"({row}.failures = 0 AND NOT {rejected_sql(row)})"


def _naive(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=None) if value and value.tzinfo else value


def _short(value: Any, limit: int = 160) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_MAX_DEPTH = 64
# Every node reachable upwards from ? (edges child -> parent), with its depth.
_UP = (
    "WITH RECURSIVE up(node, child, operator, parent_version, depth) AS ("
    " SELECT parent, child, operator, parent_version, 1 FROM lineage_edges WHERE child = ?"
    " UNION ALL SELECT e.parent, e.child, e.operator, e.parent_version, up.depth + 1"
    f" FROM lineage_edges e JOIN up ON e.child = up.node WHERE up.depth < {_MAX_DEPTH}) "
)
_DOWN = (
    "WITH RECURSIVE down(node, parent, operator, parent_version, depth) AS ("
    " SELECT child, parent, operator, parent_version, 1 FROM lineage_edges WHERE parent = ?"
    " UNION ALL SELECT e.child, e.parent, e.operator, e.parent_version, down.depth + 1"
    f" FROM lineage_edges e JOIN down ON e.parent = down.node WHERE down.depth < {_MAX_DEPTH}) "
)
# Agents bred (at any depth) from a persona, or every agent when the persona is NULL.
_BRED_FROM = (
    "(CAST(? AS VARCHAR) IS NULL OR {col} IN ("
    "WITH RECURSIVE d(node, depth) AS (SELECT child, 1 FROM lineage_edges WHERE parent = ?"
    " UNION ALL SELECT e.child, d.depth + 1 FROM lineage_edges e JOIN d ON e.parent = d.node"
    f" WHERE d.depth < {_MAX_DEPTH})"
    " SELECT node FROM d))"
)


# One row per agent from per-(agent, experiment) rows: the experiment of its best score (the first scored
# among equals). What every answer that gives an agent one fitness and one experiment keeps.
_BEST_EXPERIMENT = (
    "QUALIFY row_number() OVER (PARTITION BY agent_id ORDER BY fitness DESC NULLS LAST, created_at, experiment_id) = 1"
)


def _kind(node: str) -> str:
    return "agent" if node.startswith("agt-") else "persona"


def experiment_verifier(results: ExperimentResults) -> Callable[[Sequence[str]], None]:
    """Check experiments through the store's verified readers: the record and summary, every generation
    and every individual with its scores; a row written outside furnace raises SealError naming it."""

    def verify(experiment_ids: Sequence[str]) -> None:
        for experiment_id in dict.fromkeys(experiment_ids):
            results.get_experiment(experiment_id)
            results.generations(experiment_id)
            results.individuals(experiment_id)

    return verify


class Reader(Protocol):
    """Where the assistant's DuckDB SQL runs: the Parquet snapshot of the live store
    (:class:`~furnace.storage.duckdb.snapshot.SnapshotReader`)."""

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[tuple[Any, ...]]: ...

    def query_dicts(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[dict[str, Any]]: ...


class Sessions(Protocol):
    """Where assistant sessions are kept (the live store: a snapshot is read-only)."""

    def load_state(self, session_id: str) -> AssistantState: ...

    def save_state(self, state: AssistantState) -> None: ...


class DuckDBAssistData:
    """The assistant's :class:`~furnace.assistant.results.AssistData` on DuckDB."""

    def __init__(
        self,
        db: Reader,
        *,
        sessions: Sessions,
        history: Callable[[str], list[Elixir]],
        verify_agents: Callable[[Sequence[str]], None] | None = None,
        verify_experiments: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        """``verify_agents`` (the store's) checks every agent a lineage answer names, so the
        assistant never shows a tampered agent's lineage; None only for fixtures without seals.
        ``verify_experiments`` (:func:`experiment_verifier` on the store's results) checks the experiments
        whose rows an answer reports (fitness, objectives, parents, scores, generations), only those.
        ``sessions`` and ``history`` (the live store's, verified): where sessions live and persona
        versions are read."""
        self.db = db
        self.verify_agents = verify_agents or (lambda ids: None)
        self.verify_experiments = verify_experiments or (lambda ids: None)
        self.sessions = sessions
        self.history = history

    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        return self.db.query_dicts(sql, params)

    def _results(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """Rows of the experiment tables, each experiment they come from verified against its seals."""
        rows = self._rows(sql, params)
        self.verify_experiments([r["experiment_id"] for r in rows if r.get("experiment_id")])
        return rows

    def _held_out(self, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The held-out figures of the experiments ``rows`` come from, as each stored summary keeps them
        (``{}`` before it finished). ``rows`` are :meth:`_results` rows: their experiments, summaries
        included, were verified against their seals."""
        wanted = list(dict.fromkeys(r["experiment_id"] for r in rows if r.get("experiment_id")))
        if not wanted:
            return {}
        sql = "SELECT experiment_id, summary FROM experiments WHERE list_contains(?, experiment_id)"
        out: dict[str, dict[str, Any]] = {}
        for row in self._rows(sql, [wanted]):
            summary = json.loads(row["summary"]) if isinstance(row["summary"], str) else row["summary"]
            out[row["experiment_id"]] = dict((summary or {}).get("held_out") or {})
        return out

    def _tested(
        self, rows: list[dict[str, Any]], agent: str = "agent_id", figures: dict[str, dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        """``rows`` (from :meth:`_results`) with each agent's held-out figures from its experiment (the views'
        ``held_out_fields``: train fitness, test fitness with its 95% interval, the train-test gap; None where
        not tested) and ``test``, the test fitness and interval as the report writes it (None: not tested)."""
        figures = self._held_out(rows) if figures is None else figures
        for row in rows:
            fields = held_out_fields(figures.get(row.get("experiment_id") or "", {}), row.get(agent) or "")
            row.update(fields, test=interval_text(fields) if fields["test_fitness"] is not None else None)
        return rows

    def _champions(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Experiment rows (from :meth:`_results`) with their champion (``held_out.champion``: the agent the
        report names best) and its held-out figures."""
        figures = self._held_out(rows)
        for row in rows:
            row["champion"] = figures.get(row["experiment_id"], {}).get("champion")
        return self._tested(rows, agent="champion", figures=figures)

    def catalogue(self) -> Catalogue:
        personas = self._rows(f"SELECT id, name {_LATEST_LIBRARY}", [])
        experiments = self._rows("SELECT experiment_id, name FROM experiments ORDER BY created_at DESC", [])
        operators = self.db.query(
            "SELECT DISTINCT operator FROM lineage_edges WHERE operator IS NOT NULL AND operator <> 'seed' "
            "ORDER BY operator",
            [],
        )
        return Catalogue(
            personas={r["id"]: r["name"] for r in personas},
            experiments={r["experiment_id"]: r["name"] for r in experiments},
            operators=[r[0] for r in operators],
        )

    def known_agent(self, agent_id: str) -> bool:
        sql = "SELECT 1 FROM agents WHERE id = ? UNION ALL SELECT 1 FROM lineage_edges WHERE child = ? LIMIT 1"
        return bool(self.db.query(sql, [agent_id, agent_id]))

    @staticmethod
    def _t(scope: Scope) -> list[Any]:
        since, until = _naive(scope.since), _naive(scope.until)
        return [since, since, until, until]

    @staticmethod
    def _start(q: Query) -> str | None:
        return q.agents[0] if q.agents else q.scope.persona

    # --- agents and operators ---------------------------------------------

    def top_agents(self, q: Query) -> list[dict[str, Any]]:
        """Bred agents by their best score (:func:`_ranked`: a failed or rejected record ranks nowhere), one row
        per agent: an agent scored in several experiments (its id is its lineage's, so two runs can breed the
        same agent) is listed once, with the experiment of its best score (:data:`_BEST_EXPERIMENT`) and that
        experiment's generation, operator and held-out figures; its other experiments' scores are not counted."""
        s = q.scope
        sql = (
            "SELECT agent_id, experiment_id, fitness, generation, operator, created_at FROM ("
            "SELECT agent_id, experiment_id, max(fitness) AS fitness, min(generation) AS generation, "
            "any_value(operator) AS operator, min(created_at) AS created_at "
            "FROM experiment_individuals i WHERE operator <> 'seed' AND "
            + _ranked("i")
            + " AND "
            + _EQ.format(col="experiment_id")
            + " AND "
            + _BRED_FROM.format(col="agent_id")
            + " AND "
            + _TIME.format(col="created_at")
            + " GROUP BY agent_id, experiment_id) per_experiment "
            + _BEST_EXPERIMENT
            + " ORDER BY fitness DESC, agent_id LIMIT ?"
        )
        rows = self._results(sql, [s.experiment, s.experiment, s.persona, s.persona, *self._t(s), q.limit])
        return self._tested(rows)

    def agents(self, q: Query) -> list[dict[str, Any]]:
        """Every bred agent (the agents table), with the operator and parents that made it and its best
        score in an experiment (None for an agent fused outside one, or never scored there: see :func:`_ranked`),
        with the experiment (and generation) of that score as :meth:`top_agents` names it, oldest first."""
        s = q.scope
        sql = (
            "SELECT a.id AS agent_id, e.operator, e.parents, i.experiment_id, i.generation, i.fitness, a.created_at "
            "FROM agents a "
            "LEFT JOIN (SELECT child, string_agg(DISTINCT operator, ', ' ORDER BY operator) AS operator, "
            " string_agg(parent, ', ' ORDER BY parent) AS parents FROM lineage_edges GROUP BY child) e "
            " ON e.child = a.id "
            "LEFT JOIN (SELECT agent_id, experiment_id, generation, fitness FROM ("
            "SELECT agent_id, experiment_id, min(generation) AS generation, min(created_at) AS created_at, "
            " max(x.fitness) FILTER (WHERE "
            + _ranked("x")
            + ") AS fitness FROM experiment_individuals x WHERE operator <> 'seed' AND "
            + _EQ.format(col="experiment_id")
            + " GROUP BY agent_id, experiment_id) per_experiment "
            + _BEST_EXPERIMENT
            + ") i ON i.agent_id = a.id WHERE "
            "(CAST(? AS VARCHAR) IS NULL OR i.agent_id IS NOT NULL) AND "
            + _EQ.format(col="a.id")
            + " AND (CAST(? AS VARCHAR) IS NULL OR list_contains(string_split(e.operator, ', '), ?)) AND "
            + _BRED_FROM.format(col="a.id")
            + " AND "
            + _TIME.format(col="a.created_at")
            + " ORDER BY a.created_at, a.id LIMIT ?"
        )
        params = [s.experiment, s.experiment, s.experiment, s.agent, s.agent, s.operator, s.operator]
        return self._tested(self._results(sql, [*params, s.persona, s.persona, *self._t(s), q.limit]))

    def seeds(self, q: Query) -> list[dict[str, Any]]:
        """The seed personas of experiments (generation 0, operator ``seed``), fittest first (a seed a failure
        left unscored has no fitness, and comes last)."""
        s = q.scope
        sql = (
            "SELECT agent_id AS persona_id, experiment_id, CASE WHEN failures = 0 THEN fitness END AS fitness, "
            "failures, created_at FROM experiment_individuals WHERE operator = 'seed' AND "
            + _EQ.format(col="experiment_id")
            + " AND "
            + _EQ.format(col="agent_id")
            + " AND "
            + _TIME.format(col="created_at")
            + " ORDER BY fitness DESC NULLS LAST, persona_id, experiment_id LIMIT ?"
        )
        rows = self._results(sql, [s.experiment, s.experiment, s.persona, s.persona, *self._t(s), q.limit])
        return self._tested(rows, agent="persona_id")

    def operators(self, q: Query) -> list[dict[str, Any]]:
        s = q.scope
        sql = (
            "SELECT experiment_id, agent_id, operator, parents, fitness, failures, "
            + _ranked("i")
            + " AS ranked FROM experiment_individuals i WHERE "
            + _EQ.format(col="experiment_id")
            + " AND "
            + _TIME.format(col="created_at")
        )
        rows = self._results(sql, [s.experiment, s.experiment, *self._t(s)])
        fitness = {(r["experiment_id"], r["agent_id"]): r["fitness"] for r in rows if r["ranked"]}
        bred = self._bred_from(s.persona)
        stats: dict[str, dict[str, Any]] = {}
        for r in rows:
            if r["operator"] == "seed" or (bred is not None and r["agent_id"] not in bred):
                continue
            parents = [fitness.get((r["experiment_id"], p)) for p in json.loads(r["parents"] or "[]")]
            known = [f for f in parents if f is not None]
            st = stats.setdefault(r["operator"], {"children": 0, "improved": 0, "compared": 0, "fit": [], "fails": 0})
            st["children"] += 1
            if r["ranked"]:  # a failed or rejected child has no score: it counts as no improvement
                st["fit"].append(r["fitness"])
            st["fails"] += int(r["failures"] or 0)
            if known:
                st["compared"] += 1
                st["improved"] += int(bool(r["ranked"]) and r["fitness"] > max(known))
        out = [
            {
                "operator": op,
                "children": st["children"],
                "improved": st["improved"],
                "success_rate": round(st["improved"] / st["compared"], 4) if st["compared"] else None,
                "mean_fitness": round(sum(st["fit"]) / len(st["fit"]), 4) if st["fit"] else None,
                "best_fitness": round(max(st["fit"]), 4) if st["fit"] else None,
                "failures": st["fails"],
            }
            for op, st in stats.items()
        ]
        out.sort(key=lambda r: (-(r["success_rate"] or 0), -(r["mean_fitness"] or 0), r["operator"]))
        return out[: q.limit]

    def _bred_from(self, persona: str | None) -> set[str] | None:
        if persona is None:
            return None
        return {r[0] for r in self.db.query(_DOWN + "SELECT DISTINCT node FROM down", [persona])}

    # --- lineage -------------------------------------------------------------

    def ancestors(self, q: Query) -> list[dict[str, Any]]:
        sql = (
            _UP + "SELECT min(depth) AS depth, node AS ancestor, child, operator, parent_version FROM up "
            "GROUP BY node, child, operator, parent_version ORDER BY depth, ancestor, child LIMIT ?"
        )
        start = self._start(q)
        rows = self._rows(sql, [start, q.limit])
        self.verify_agents([n for n in (start, *(r["ancestor"] for r in rows), *(r["child"] for r in rows)) if n])
        for row in rows:
            row["kind"] = _kind(row["ancestor"])
        return rows

    def descendants(self, q: Query) -> list[dict[str, Any]]:
        s = q.scope
        sql = (
            _DOWN + "SELECT min(depth) AS depth, node AS descendant, parent, operator, parent_version FROM down "
            "WHERE (CAST(? AS VARCHAR) IS NULL OR node IN "
            "(SELECT agent_id FROM experiment_individuals WHERE experiment_id = ?)) "
            "GROUP BY node, parent, operator, parent_version ORDER BY depth, descendant, parent LIMIT ?"
        )
        start = self._start(q)
        rows = self._rows(sql, [start, s.experiment, s.experiment, q.limit])
        self.verify_agents([n for n in (start, *(r["descendant"] for r in rows)) if n])
        return rows

    def _depths(self, node: str) -> dict[str, int]:
        rows = self.db.query(_UP + "SELECT node, min(depth) FROM up GROUP BY node", [node])
        return {node: 0, **{r[0]: int(r[1]) for r in rows}}

    def common_ancestors(self, q: Query) -> list[dict[str, Any]]:
        nodes = [*q.agents, *([q.scope.persona] if q.scope.persona else [])][:2]
        a, b = self._depths(nodes[0]), self._depths(nodes[1])
        common = sorted((set(a) & set(b)) - set(nodes), key=lambda n: (a[n] + b[n], n))
        self.verify_agents([*a, *b])
        return [{"ancestor": n, "kind": _kind(n), "depth_a": a[n], "depth_b": b[n]} for n in common][: q.limit]

    # --- personas --------------------------------------------------------------

    def persona_versions(self, q: Query) -> list[dict[str, Any]]:
        s = q.scope
        sql = (
            "SELECT id, version, name, content_hash, created_at, deleted_at IS NOT NULL AS deleted "
            "FROM elixir_versions WHERE origin = 'library' AND "
            + _EQ.format(col="id")
            + " AND "
            + _TIME.format(col="created_at")
            + " ORDER BY id, version DESC LIMIT ?"
        )
        return self._rows(sql, [s.persona, s.persona, *self._t(s), q.limit])

    def persona_diff(self, q: Query) -> list[dict[str, Any]]:
        from furnace.domain.diff import diff_elixirs

        persona = q.scope.persona
        assert persona is not None
        history = {e.version: e for e in self.history(persona)}
        if len(history) < 2 and not q.versions:
            return []
        versions = sorted(history)
        if len(q.versions) >= 2:
            before, after = q.versions[0], q.versions[1]
        elif len(q.versions) == 1:
            after = q.versions[0]
            before = max((v for v in versions if v < after), default=after)
        else:
            before, after = versions[-2], versions[-1]
        if before not in history or after not in history:
            missing = before if before not in history else after
            return [
                {
                    "id": persona,
                    "from_version": before,
                    "to_version": after,
                    "field": "(error)",
                    "before": None,
                    "after": f"{persona} has no version {missing} (has {versions})",
                }
            ]
        return [
            {
                "id": persona,
                "from_version": before,
                "to_version": after,
                "field": c.field,
                "before": _short(c.before),
                "after": _short(c.after),
            }
            for c in diff_elixirs(history[before], history[after])
        ][: q.limit]

    # --- failures and feedback -----------------------------------------------------

    def failures(self, q: Query) -> list[dict[str, Any]]:
        s = q.scope
        exp, persona, t = [s.experiment, s.experiment], [s.persona, s.persona], self._t(s)
        out: list[dict[str, Any]] = []
        for row in self._results(
            "SELECT agent_id, experiment_id, failures, failure_reasons, created_at FROM experiment_individuals "
            "WHERE failures > 0 AND "
            + _EQ.format(col="experiment_id")
            + " AND "
            + _BRED_FROM.format(col="agent_id")
            + " AND "
            + _TIME.format(col="created_at")
            + " ORDER BY created_at DESC LIMIT ?",
            [*exp, *persona, *t, q.limit],
        ):
            reasons = json.loads(row["failure_reasons"] or "[]")
            out.append(
                {
                    "where": f"experiment {row['experiment_id']}",
                    "subject": row["agent_id"],
                    "what": f"{row['failures']} failed step(s)",
                    "reason": "; ".join(str(r) for r in reasons)[:300],
                    "created_at": row["created_at"],
                }
            )
        for row in self._results(
            "SELECT s.experiment_id, s.agent_id, s.probe, s.scorer, s.reason, i.created_at "
            "FROM experiment_scores s LEFT JOIN experiment_individuals i USING (experiment_id, generation, agent_id) "
            "WHERE s.failed AND "
            + _EQ.format(col="s.experiment_id")
            + " AND "
            + _BRED_FROM.format(col="s.agent_id")
            + " AND "
            + _TIME.format(col="i.created_at")
            + " ORDER BY i.created_at DESC LIMIT ?",
            [*exp, *persona, *t, q.limit],
        ):
            out.append(
                {
                    "where": f"experiment {row['experiment_id']}",
                    "subject": row["agent_id"],
                    "what": f"unscored {row['scorer']} on {row['probe']}",
                    "reason": row["reason"][:300],
                    "created_at": row["created_at"],
                }
            )
        if s.experiment is None:
            for row in self._rows(
                "SELECT c.run_id, c.speaker_index, c.error, c.created_at FROM arena_checkpoints c "
                "JOIN arena_runs r USING (run_id) WHERE c.status = 'failed' AND (CAST(? AS VARCHAR) IS NULL OR "
                "r.session_id IN (SELECT session_id FROM arena_members WHERE member_id = ?)) AND "
                + _TIME.format(col="c.created_at")
                + " ORDER BY c.created_at DESC LIMIT ?",
                [*persona, *t, q.limit],
            ):
                out.append(
                    {
                        "where": "arena",
                        "subject": f"{row['run_id']} speaker {row['speaker_index'] + 1}",
                        "what": "speaker failed",
                        "reason": (row["error"] or "")[:300],
                        "created_at": row["created_at"],
                    }
                )
        if s.persona is None:
            for row in self._rows(
                "SELECT run_id, task, model, status, created_at FROM llm_calls WHERE status <> 'ok' AND "
                "(CAST(? AS VARCHAR) IS NULL OR run_id = ?) AND "
                + _TIME.format(col="created_at")
                + " ORDER BY created_at DESC LIMIT ?",
                [*exp, *t, q.limit],
            ):
                out.append(
                    {
                        "where": "model call",
                        "subject": row["run_id"] or "-",
                        "what": f"{row['task']} on {row['model']}",
                        "reason": row["status"],
                        "created_at": row["created_at"],
                    }
                )
        out.sort(key=lambda r: r["created_at"] or datetime.min, reverse=True)
        return out[: q.limit]

    def judge_feedback(self, q: Query) -> list[dict[str, Any]]:
        s = q.scope
        agent = q.agents[0] if q.agents else None
        sql = (
            "SELECT s.agent_id, s.experiment_id, s.probe, s.scorer, s.value, s.feedback, s.reason "
            "FROM experiment_scores s LEFT JOIN experiment_individuals i USING (experiment_id, generation, agent_id) "
            "WHERE NOT s.failed AND (s.feedback <> '' OR s.reason <> '') AND s.probe <> '*' AND "
            + _EQ.format(col="s.experiment_id")
            + " AND "
            + _EQ.format(col="s.agent_id")
            + " AND "
            + _BRED_FROM.format(col="s.agent_id")
            + " AND "
            + _TIME.format(col="i.created_at")
            + " ORDER BY s.value, s.agent_id, s.probe, s.scorer LIMIT ?"
        )
        params = [s.experiment, s.experiment, agent, agent, s.persona, s.persona, *self._t(s), q.limit]
        return self._results(sql, params)

    # --- experiments -------------------------------------------------------------------

    def experiment_compare(self, q: Query) -> list[dict[str, Any]]:
        s = q.scope
        named = list(q.experiments) or None
        sql = (
            "SELECT e.experiment_id, e.name, count(g.generation) AS generations, max(g.best_fitness) AS best_fitness, "
            "round(avg(g.mean_fitness), 4) AS mean_fitness, "
            "(SELECT count(*) FROM llm_calls c WHERE c.run_id = e.experiment_id AND NOT c.cached) AS calls, "
            "(SELECT coalesce(sum(c.prompt_tokens + c.completion_tokens), 0) FROM llm_calls c "
            " WHERE c.run_id = e.experiment_id) AS tokens, "
            "(SELECT round(coalesce(sum(c.cost_usd), 0), 6) FROM llm_calls c WHERE c.run_id = e.experiment_id) "
            "AS cost_usd, e.created_at "
            "FROM experiments e LEFT JOIN experiment_generations g USING (experiment_id) WHERE "
            "(CAST(? AS VARCHAR[]) IS NULL OR list_contains(?, e.experiment_id)) AND "
            + _EQ.format(col="e.experiment_id")
            + " AND "
            "(CAST(? AS VARCHAR) IS NULL OR CAST(e.config AS VARCHAR) LIKE '%' || ? || '%') AND "
            + _TIME.format(col="e.created_at")
            + " GROUP BY e.experiment_id, e.name, e.created_at ORDER BY e.created_at DESC LIMIT ?"
        )
        params = [named, named, s.experiment, s.experiment, s.persona, s.persona, *self._t(s), q.limit]
        return self._champions(self._results(sql, params))

    def experiments(self, q: Query) -> list[dict[str, Any]]:
        s = q.scope
        sql = (
            "SELECT e.experiment_id, e.name, e.status, e.model, e.created_at, "
            "(SELECT max(best_fitness) FROM experiment_generations g WHERE g.experiment_id = e.experiment_id) "
            "AS best_fitness FROM experiments e WHERE "
            + _EQ.format(col="e.experiment_id")
            + " AND (CAST(? AS VARCHAR) IS NULL OR CAST(e.config AS VARCHAR) LIKE '%' || ? || '%') AND "
            + _TIME.format(col="e.created_at")
            + " ORDER BY e.created_at DESC LIMIT ?"
        )
        rows = self._results(sql, [s.experiment, s.experiment, s.persona, s.persona, *self._t(s), q.limit])
        return self._champions(rows)

    # --- writing, preferences, arena ------------------------------------------------------

    def content_versions(self, q: Query) -> list[dict[str, Any]]:
        s = q.scope
        sql = (
            "SELECT v.content_id, c.persona_id, c.topic, v.version, v.title, v.source, v.created_at "
            "FROM content_versions v JOIN contents c ON c.id = v.content_id WHERE "
            + _EQ.format(col="c.persona_id")
            + " AND "
            + _TIME.format(col="v.created_at")
            + " ORDER BY v.created_at DESC, v.content_id, v.version DESC LIMIT ?"
        )
        return self._rows(sql, [s.persona, s.persona, *self._t(s), q.limit])

    def arena_runs(self, q: Query) -> list[dict[str, Any]]:
        s = q.scope
        sql = (
            "SELECT r.run_id, r.session_id, r.turn, r.message, r.directive, r.status, r.created_at, "
            "(SELECT count(*) FROM arena_replies p WHERE p.run_id = r.run_id) AS replies FROM arena_runs r WHERE "
            "(CAST(? AS VARCHAR) IS NULL OR r.session_id IN "
            "(SELECT session_id FROM arena_members WHERE member_id = ?)) AND "
            + _TIME.format(col="r.created_at")
            + " ORDER BY r.created_at DESC, r.run_id LIMIT ?"
        )
        return self._rows(sql, [s.persona, s.persona, *self._t(s), q.limit])

    def revisions(self, q: Query) -> list[dict[str, Any]]:
        scope = q.scope
        sql = (
            "SELECT id AS revision_id, content_id, persona_id, from_version, to_version, suggestions, created_at "
            "FROM revisions WHERE "
            + _EQ.format(col="persona_id")
            + " AND "
            + _TIME.format(col="created_at")
            + " ORDER BY created_at DESC, id LIMIT ?"
        )
        rows = self._rows(sql, [scope.persona, scope.persona, *self._t(scope), q.limit])
        for row in rows:
            suggestions = json.loads(row.pop("suggestions") or "[]")
            row["suggestion"] = " / ".join(str(s) for s in suggestions)
            row["step"] = f"V{row.pop('from_version')}→V{row.pop('to_version')}"
        return rows

    def preferences(self, q: Query) -> list[dict[str, Any]]:
        scope = q.scope
        sql = f"SELECT id, body {_LATEST_LIBRARY} AND {_EQ.format(col='id')} ORDER BY id"
        out = []
        for row in self._rows(sql, [scope.persona, scope.persona]):
            body = json.loads(row["body"])
            for pref in body.get("style_preferences") or []:
                out.append(
                    {
                        "persona_id": row["id"],
                        "dimension": pref.get("dimension"),
                        "value": pref.get("value"),
                        "count": pref.get("count", 1),
                        "weight": pref.get("weight"),
                        "evidence": pref.get("evidence", ""),
                    }
                )
        out.sort(key=lambda p: (-(p["count"] or 0), -(p["weight"] or 0), p["persona_id"], p["dimension"] or ""))
        return out[: q.limit]

    def personas(self, q: Query) -> list[dict[str, Any]]:
        scope = q.scope
        sql = f"SELECT id, name, version, body {_LATEST_LIBRARY} AND {_EQ.format(col='id')} ORDER BY id LIMIT ?"
        rows = self._rows(sql, [scope.persona, scope.persona, q.limit])
        for row in rows:
            body = json.loads(row.pop("body"))
            row["language"] = body.get("language")
            row["expertise"] = ", ".join(body.get("expertise") or [])
        return rows

    # --- costs ----------------------------------------------------------------------------

    def costs(self, q: Query) -> list[dict[str, Any]]:
        """Totals from the call ledger; with a persona in scope, from the per-agent accounting of the
        agents bred from that persona (the ledger does not know personas)."""
        s = q.scope
        if s.persona is not None or q.group in ("persona", "operator"):
            return self._agent_costs(q)
        key = {"task": "task", "experiment": "run_id", "day": "CAST(created_at AS DATE)"}[q.group]
        name = {"task": "task", "experiment": "experiment_id", "day": "day"}[q.group]
        sql = (
            f"SELECT {key} AS {name}, count(*) FILTER (WHERE NOT cached AND status = 'ok') AS calls, "
            "count(*) FILTER (WHERE cached) AS cached_calls, "
            "count(*) FILTER (WHERE status <> 'ok') AS failed_attempts, "
            "coalesce(sum(prompt_tokens + completion_tokens), 0) AS tokens, "
            "round(coalesce(sum(cost_usd), 0), 6) AS cost_usd FROM llm_calls "
            "WHERE (CAST(? AS VARCHAR) IS NULL OR run_id = ?) AND "
            + _TIME.format(col="created_at")
            + f" GROUP BY {key} ORDER BY {'day DESC' if q.group == 'day' else 'calls DESC'}, {name} LIMIT ?"
        )
        return self._rows(sql, [s.experiment, s.experiment, *self._t(s), q.limit])

    def _agent_costs(self, q: Query) -> list[dict[str, Any]]:
        s = q.scope
        key = {
            "task": "experiment_id",
            "experiment": "experiment_id",
            "operator": "operator",
            "day": "CAST(created_at AS DATE)",
            "persona": "?",
        }[q.group]
        name = {
            "task": "experiment_id",
            "experiment": "experiment_id",
            "operator": "operator",
            "day": "day",
            "persona": "persona_id",
        }[q.group]
        params: list[Any] = [s.persona] if q.group == "persona" else []
        sql = (
            f"SELECT {key} AS {name}, sum(calls) AS calls, 0 AS cached_calls, sum(failures) AS failed_attempts, "
            "sum(tokens) AS tokens, round(sum(cost_usd), 6) AS cost_usd FROM experiment_individuals WHERE "
            + _EQ.format(col="experiment_id")
            + " AND "
            + _BRED_FROM.format(col="agent_id")
            + " AND "
            + _TIME.format(col="created_at")
            + f" GROUP BY {name} ORDER BY calls DESC, {name} LIMIT ?"
        )
        return self._rows(sql, [*params, s.experiment, s.experiment, s.persona, s.persona, *self._t(s), q.limit])

    # --- sessions ----------------------------------------------------------

    def load_state(self, session_id: str) -> AssistantState:
        return self.sessions.load_state(session_id)

    def save_state(self, state: AssistantState) -> None:
        self.sessions.save_state(state)
