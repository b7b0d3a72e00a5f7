"""``furnace fuse``, ``furnace agent show|promote`` and ``furnace lineage``."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import click

from furnace.cli.context import emit, json_option
from furnace.domain.agent import Agent, LineageNode
from furnace.runtime import Runtime


def _agent_data(agent: Agent) -> dict[str, Any]:
    lin = agent.lineage
    return {
        "id": agent.id,
        "name": agent.elixir.name,
        "lineage_hash": agent.lineage_hash,
        "operator": lin.operator,
        "op_version": lin.op_version,
        "parents": [str(p) for p in lin.parents],
        "params": lin.params,
        "members": [str(m) for m in agent.members],
        "tools": list(agent.tools),
        "resolution_notes": [n.model_dump() for n in lin.resolution_notes],
    }


def _notes_text(agent: Agent) -> list[str]:
    notes = agent.lineage.resolution_notes
    if not notes:
        return ["resolution notes: none"]
    return ["resolution notes:"] + [f"  - {n.field}: chose {n.chose!r} — {n.reason}" for n in notes]


def _summary(agent: Agent) -> list[str]:
    lin = agent.lineage
    lines = [
        f"agent         {agent.id}",
        f"name          {agent.elixir.name}",
        f"operator      {lin.operator} (op_version {lin.op_version})",
        f"parents       {', '.join(str(p) for p in lin.parents)}",
        f"lineage_hash  {agent.lineage_hash}",
    ]
    if agent.members:
        lines.append(f"members       {', '.join(str(m) for m in agent.members)}")
    return lines


def _tree(root: str, label: str, nodes: list[LineageNode], arrow: str) -> str:
    children: dict[str, list[LineageNode]] = defaultdict(list)
    for n in nodes:
        children[n.via or root].append(n)
    lines = [label]

    def walk(node_id: str, prefix: str) -> None:
        kids = sorted(children.get(node_id, []), key=lambda n: n.id)
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            op = f"  {arrow} {kid.operator}" if kid.operator else ""
            lines.append(f"{prefix}{'└── ' if last else '├── '}{kid.id}{op}")
            walk(kid.id, prefix + ("    " if last else "│   "))

    walk(root, "")
    return "\n".join(lines)


def _fuse_with_prefect(
    obj: Runtime,
    parents: list[str],
    operator: str | None,
    seed: int,
    params: dict[str, Any] | None,
    probe_set: str,
    limit: int,
    track: bool,
    as_json: bool,
) -> None:
    """``furnace fuse --prefect``: the fusion-generation flow (fuse, score, log), then the agent as stored."""
    from furnace.adapters.prefect_server import prefect_api
    from furnace.scoring.probes import load_probe_set
    from furnace_flows.fusion_generation import fusion_generation  # the launcher edge cli -> flows (lazy)

    load_probe_set(probe_set)  # an unknown probe set is an input error before the flow starts
    with prefect_api(
        obj.settings.home,
        timeout_s=obj.settings.prefect_start_timeout_s,
        on_status=lambda line: click.echo(line, err=True),
    ):
        row = fusion_generation(
            parents,
            operator=operator,
            seed=seed,
            params=params,
            probe_set=probe_set,
            limit=limit,
            home=str(obj.settings.home),
            track=track,
        )
    agent = obj.store.get_agent(row["agent_id"])  # read back: verified like every agent read
    from furnace.evolution.report import HELD_OUT_FIELDS, gap_text, interval_text

    scored = {k: row.get(k) for k in ("fitness", *HELD_OUT_FIELDS, "objectives", "failures")}
    data = _agent_data(agent) | {"from_cache": row["from_cache"], "probes": probe_set, **scored}
    verdict = f"{row['fitness']:.3f} on {probe_set} ({limit} probe(s), test held out)"
    if row.get("test_fitness") is not None:
        verdict += f"; test {interval_text(row)}, train - test gap {gap_text(row)}"
    if row["failures"]:
        verdict = f"unscored: {row['failures'][0]}"
    human = "\n".join(
        _summary(agent)
        + [f"from cache    {'yes' if row['from_cache'] else 'no'}", f"fitness       {verdict}"]
        + _notes_text(agent)
    )
    emit(data, as_json=as_json, human=human)


@click.command("fuse")
@click.argument("parents", nargs=-1, required=True)
@click.option(
    "--operator",
    type=click.Choice(["crossover", "mutation", "ensemble", "reflect"]),
    default=None,
    help="Default: mutation for one parent, ensemble when expertise is far apart, else crossover.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--rate", type=float, default=None, help="Mutation rate in (0, 1] (default 0.25).")
@click.option(
    "--feedback",
    "feedback",
    multiple=True,
    help="reflect: feedback to act on (repeatable), e.g. 'missing: statistics' or a revision suggestion.",
)
@click.option(
    "--prefect",
    is_flag=True,
    help="Run the fusion-generation flow: fuse, score the child on --probes, log to MLflow "
    "(PREFECT_API_URL, or a temporary server).",
)
@click.option("--probes", "probe_set", default="writing-en", show_default=True, help="--prefect: probe set.")
@click.option("--limit", type=click.IntRange(1, 200), default=3, show_default=True, help="--prefect: probes used.")
@click.option("--no-mlflow", is_flag=True, help="--prefect: do not log to MLflow.")
@json_option
@click.pass_obj
def fuse_cmd(
    obj: Runtime,
    parents: tuple[str, ...],
    operator: str | None,
    seed: int,
    rate: float | None,
    feedback: tuple[str, ...],
    prefect: bool,
    probe_set: str,
    limit: int,
    no_mlflow: bool,
    as_json: bool,
) -> None:
    """Fuse elixirs (ID or ID@VERSION) into an agent, through the synthesis cache."""
    from furnace.fusion.fuse import fuse
    from furnace.scoring.feedback import revision_feedback

    params: dict[str, Any] | None = {"rate": rate} if rate is not None else None
    if feedback:
        if operator != "reflect":
            raise click.UsageError("--feedback goes with --operator reflect")
        params = {**(params or {}), "feedback": revision_feedback(list(feedback))}
    if prefect:
        _fuse_with_prefect(obj, list(parents), operator, seed, params, probe_set, limit, not no_mlflow, as_json)
        return
    result = fuse(
        obj.store,
        list(parents),
        llm=obj.llm,
        embedder=obj.embedder,
        cache=obj.synthesis_cache,
        operator=operator,
        seed=seed,
        params=params,
        settings=obj.settings,
    )
    data = _agent_data(result.agent) | {"from_cache": result.from_cache, "model_calls": result.model_calls}
    cache_line = "yes" if result.from_cache else f"no ({result.model_calls} model call(s))"
    human = "\n".join(_summary(result.agent) + [f"from cache    {cache_line}"] + _notes_text(result.agent))
    emit(data, as_json=as_json, human=human)


@click.group("agent")
def agent_group() -> None:
    """Fusion products: show, ask and promote agents."""


@agent_group.command("show")
@click.argument("agent_id")
@json_option
@click.pass_obj
def show_cmd(obj: Runtime, agent_id: str, as_json: bool) -> None:
    """Show an agent (lineage verified on read) and its system prompt."""
    agent = obj.store.get_agent(agent_id)
    data = _agent_data(agent) | {
        "system_prompt": agent.system_prompt,
        "elixir": agent.elixir.model_dump(mode="json"),
    }
    human = "\n".join(_summary(agent) + _notes_text(agent) + ["", "system prompt:", agent.system_prompt])
    emit(data, as_json=as_json, human=human)


@agent_group.command("answer")
@click.argument("agent_id")
@click.argument("message")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--no-mlflow", is_flag=True, help="Do not trace the answer to MLflow.")
@json_option
@click.pass_obj
def answer_cmd(obj: Runtime, agent_id: str, message: str, seed: int, no_mlflow: bool, as_json: bool) -> None:
    """Ask an agent; a committee routes the message by meaning to one member, who answers in its own voice.
    The answer and its model calls are an MLflow trace (experiment furnace-agents), as a served answer is."""
    from furnace.adapters.mlflow_answers import AnswerTraces, traced_answer

    agent = obj.store.get_agent(agent_id)
    traces = None if no_mlflow else AnswerTraces(obj.settings.tracking_uri)
    try:
        out = traced_answer(
            traces,
            agent,
            message,
            obj.llm,
            tags={"furnace.face": "cli"},
            store=obj.store,
            cache=obj.synthesis_cache,
            seed=seed,
            embedder=obj.embedder,
        )
        human = f"[{out.leader_name} leads: {out.reason}]\n{out.text}" if out.leader is not None else out.text
        emit({"agent": agent.id} | out.transcript(), as_json=as_json, human=human)
    finally:
        if traces is not None:
            traces.close()  # the trace written before the process exits


@agent_group.command("promote")
@click.argument("agent_id")
@click.option("--name", default=None, help="Library name (default: the agent's name).")
@json_option
@click.pass_obj
def promote_cmd(obj: Runtime, agent_id: str, name: str | None, as_json: bool) -> None:
    """Copy an agent into the library as an elixir, keeping the lineage link."""
    from furnace.fusion.fuse import promote

    ref = promote(obj.store, agent_id, name)
    emit(
        ref.model_dump() | {"from_agent": agent_id},
        as_json=as_json,
        human=f"promoted {agent_id} → {ref.id} v{ref.version} ({ref.content_hash[:12]})",
    )
    from furnace.cli.registry_cmd import register_promoted  # the prompt registry part (issue 8)

    register_promoted(obj, agent_id, ref, quiet=as_json)


@click.command("lineage")
@click.argument("node_id")
@click.option("--descendants", is_flag=True, help="Show descendants instead of ancestors.")
@json_option
@click.pass_obj
def lineage_cmd(obj: Runtime, node_id: str, descendants: bool, as_json: bool) -> None:
    """The ancestry (or descendants) of an agent or elixir, as a tree."""
    store = obj.store
    nodes = store.descendants(node_id) if descendants else store.ancestors(node_id)
    if not nodes:  # an unknown id is an error, a root without relatives is not
        (store.get_agent if node_id.startswith("agt-") else store.get_elixir)(node_id)
    key = "descendants" if descendants else "ancestors"
    data = {"id": node_id, key: [n.model_dump() for n in nodes]}
    arrow = "→" if descendants else "←"
    human = _tree(node_id, node_id, nodes, arrow) if nodes else f"{node_id}: no {key}"
    emit(data, as_json=as_json, human=human)


def register(cli: click.Group) -> None:
    """Add ``fuse``, ``agent`` and ``lineage`` to the ``furnace`` command."""
    cli.add_command(fuse_cmd)
    cli.add_command(agent_group)
    cli.add_command(lineage_cmd)
