"""The lineage neighbourhood of one node as a graph (nodes, labelled edges) and as DOT.

Edges carry the operator and the parent version the child was made from
(``crossover · v2``). The walk is the store's recursive ancestry/descendancy
query; agents inside the neighbourhood add their full parent list (a crossover
child shows both parents, not only the one the walk came through).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from furnace.domain.agent import AGENT_PREFIX
from furnace.domain.errors import FurnaceError
from furnace.domain.threads import parallel_map
from furnace.storage.store import ElixirStore

MAX_NODES = 150  # beyond this the graph is unreadable; the table still lists everyone
MAX_DETAILS = 40  # nodes whose name/version/parents are loaded (one store read each)
DETAIL_THREADS = 8


@dataclass(frozen=True)
class GraphNode:
    """One node: ``depth`` < 0 for ancestors, 0 for the root, > 0 for descendants."""

    id: str
    depth: int
    kind: str  # "agent" | "elixir"
    name: str = ""
    version: int | None = None


@dataclass(frozen=True)
class GraphEdge:
    """parent → child, made by ``operator`` from ``parent_version`` (None = not pinned)."""

    parent: str
    child: str
    operator: str
    parent_version: int | None = None

    @property
    def label(self) -> str:
        return self.operator + (f" · v{self.parent_version}" if self.parent_version else "")


@dataclass
class LineageGraph:
    """An agent's (or elixir's) ancestors and descendants with the edges between them."""

    root: str
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    total_nodes: int = 0

    @property
    def truncated(self) -> bool:
        return self.total_nodes > len(self.nodes)


def lineage_graph(
    store: ElixirStore,
    node_id: str,
    *,
    max_depth: int | None = None,
    max_nodes: int = MAX_NODES,
    max_details: int = MAX_DETAILS,
    edge_versions: Callable[[list[str]], Mapping[tuple[str, str], int]] | None = None,
) -> LineageGraph:
    """The neighbourhood of ``node_id``; raises NotFound for an unknown id.

    ``edge_versions(child ids)`` (one bulk read, e.g. the analysis layer's ``lineage_edges``) pins the
    parent version on edges beyond the ``max_details`` nodes read one by one.
    """
    root = store.get_elixir(node_id)
    ancestors = store.ancestors(node_id, max_depth=max_depth)
    descendants = store.descendants(node_id, max_depth=max_depth)
    walked = [(n, -n.depth) for n in ancestors] + [(n, n.depth) for n in descendants]
    walked.sort(key=lambda item: (abs(item[1]), item[0].id))
    kept = walked[: max(0, max_nodes - 1)]
    ids = {node_id} | {n.id for n, _ in kept}
    edges: dict[tuple[str, str], GraphEdge] = {}
    for n, depth in kept:
        if n.via is None:
            continue
        parent, child = (n.id, n.via) if depth < 0 else (n.via, n.id)
        edges[(parent, child)] = GraphEdge(parent, child, n.operator or "?")
    detailed = [node_id] + [n.id for n, _ in kept[:max_details]]
    # each read is one short-lived connection
    details = parallel_map(lambda i: _detail(store, i, ids), detailed, workers=DETAIL_THREADS, name="furnace-lineage")
    found = dict(zip(detailed, details, strict=True))
    for _name, _version, pinned in found.values():
        edges.update({(e.parent, e.child): e for e in pinned})
    if edge_versions is not None:
        unpinned = sorted({e.child for e in edges.values() if e.parent_version is None})
        versions = edge_versions(unpinned) if unpinned else {}
        for key, e in list(edges.items()):
            if e.parent_version is None and versions.get(key):
                edges[key] = GraphEdge(e.parent, e.child, e.operator, versions[key])
    nodes = [GraphNode(node_id, 0, _kind(node_id), root.name, root.version)]
    for n, depth in kept:
        name, version, _ = found.get(n.id, ("", None, []))
        nodes.append(GraphNode(n.id, depth, _kind(n.id), name, version))
    return LineageGraph(
        node_id, nodes, sorted(edges.values(), key=lambda e: (e.parent, e.child)), total_nodes=len(walked) + 1
    )


def _kind(node_id: str) -> str:
    return "agent" if node_id.startswith(AGENT_PREFIX) else "elixir"


def _detail(store: ElixirStore, node_id: str, ids: set[str]) -> tuple[str, int | None, list[GraphEdge]]:
    """Name and version of a node; for an agent, its pinned parents (inside ``ids``) as versioned edges."""
    try:
        if node_id.startswith(AGENT_PREFIX):
            agent = store.get_agent(node_id)
            lin = agent.lineage
            pinned = [GraphEdge(p.id, node_id, lin.operator, p.version) for p in lin.parents if p.id in ids]
            return agent.elixir.name, agent.elixir.version, pinned
        elixir = store.get_elixir(node_id)
        return elixir.name, elixir.version, []
    except FurnaceError:  # a tampered or missing record stays a bare node (no name in the table)
        return "", None, []


def node_version_labels(graph: LineageGraph) -> dict[str, str]:
    """Per node, the version(s) shown on it: the exact versions its children were bred from
    (``v1``, ``v1, v3``; ``v1 (now v3)`` when the latest differs), else its own version."""
    bred: dict[str, set[int]] = defaultdict(set)
    for e in graph.edges:
        if e.parent_version:
            bred[e.parent].add(e.parent_version)
    labels: dict[str, str] = {}
    for n in graph.nodes:
        used = sorted(bred.get(n.id, ()))
        if used:
            now = f" (now v{n.version})" if n.version and n.version not in used else ""
            labels[n.id] = ", ".join(f"v{v}" for v in used) + now
        elif n.version:
            labels[n.id] = f"v{n.version}"
    return labels


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def to_dot(graph: LineageGraph) -> str:
    """Graphviz DOT: ancestors above, descendants below; the root highlighted."""
    lines = [
        "digraph lineage {",
        "  rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, fillcolor="#f5f5f5"];',
        '  edge [fontname="Helvetica", fontsize=9, color="#666666"];',
    ]
    bred = node_version_labels(graph)
    for n in graph.nodes:
        title = n.name or n.id
        sub = n.id if n.name and n.name != n.id else ""
        version = f" {bred[n.id]}" if bred.get(n.id) else ""
        label = _quote(f"{title}{version}")[:-1] + (f"\\n{_quote(sub)[1:-1]}" if sub else "") + '"'
        colour = "#ffd8a8" if n.depth == 0 else ("#d0ebff" if n.kind == "agent" else "#f5f5f5")
        shape = ", shape=ellipse" if n.kind == "agent" else ""
        lines.append(f"  {_quote(n.id)} [label={label}, fillcolor={_quote(colour)}{shape}];")
    for e in graph.edges:
        lines.append(f"  {_quote(e.parent)} -> {_quote(e.child)} [label={_quote(e.label)}];")
    lines.append("}")
    return "\n".join(lines)


def graph_rows(graph: LineageGraph) -> list[dict[str, object]]:
    """The graph as table rows: one per node with its relation and how it is linked."""
    into: dict[str, list[str]] = {}
    for e in graph.edges:
        into.setdefault(e.child, []).append(f"{e.parent} ({e.label})")
    rows: list[dict[str, object]] = []
    for n in graph.nodes:
        relation = "root" if n.depth == 0 else ("ancestor" if n.depth < 0 else "descendant")
        rows.append(
            {
                "id": n.id,
                "name": n.name,
                "version": n.version,
                "kind": n.kind,
                "relation": relation,
                "depth": abs(n.depth),
                "made from": ", ".join(sorted(into.get(n.id, []))),
            }
        )
    return rows


def collapsible(graph: LineageGraph) -> list[str]:
    """Nodes with something to collapse: the root and descendants that have children in the graph,
    ancestors that have parents in it."""
    depth = {n.id: n.depth for n in graph.nodes}
    out: set[str] = set()
    for e in graph.edges:
        if e.parent not in depth or e.child not in depth:
            continue
        if depth[e.parent] >= 0 and depth[e.child] > depth[e.parent]:
            out.add(e.parent)
        if depth[e.child] < 0 and depth[e.parent] < depth[e.child]:
            out.add(e.child)
    return sorted(out)


def hidden_by(graph: LineageGraph, collapsed: set[str] | frozenset[str]) -> dict[str, set[str]]:
    """For each collapsed node, the nodes it hides: everything beyond it away from the root (its
    descendants for the root and descendants, its ancestors for an ancestor)."""
    depth = {n.id: n.depth for n in graph.nodes}
    down: dict[str, list[str]] = defaultdict(list)
    up: dict[str, list[str]] = defaultdict(list)
    for e in graph.edges:
        down[e.parent].append(e.child)
        up[e.child].append(e.parent)
    out: dict[str, set[str]] = {}
    for c in sorted(collapsed):
        if c not in depth:
            continue
        ancestor = depth[c] < 0
        step = up if ancestor else down
        seen: set[str] = set()
        todo = list(step.get(c, []))
        while todo:
            n = todo.pop()
            beyond = depth.get(n, 0) < depth[c] if ancestor else depth.get(n, 0) > depth[c]
            if n in seen or n == graph.root or not beyond:
                continue
            seen.add(n)
            todo += step.get(n, [])
        out[c] = seen
    return out


LABEL_CHARS = 30  # a node's label on the chart, at most: it must fit the gap to the next depth's column


def _tell_apart(nodes: list[dict[str, object]]) -> None:
    """Give every node a ``short`` label for the chart: at most LABEL_CHARS and unique (bred children of
    the same parents share a name, and long names share a beginning: those end with the end of their id);
    the full ``label`` stays for the tooltip."""

    def clip(text: str, room: int) -> str:
        return text if len(text) <= room else text[: room - 1].rstrip() + "…"

    clipped = Counter(clip(str(n["label"]), LABEL_CHARS) for n in nodes)
    for n in nodes:
        short = clip(str(n["label"]), LABEL_CHARS)
        if clipped[short] > 1:
            tail = f" ·{str(n['id'])[-6:]}"
            short = clip(str(n["label"]), LABEL_CHARS - len(tail)) + tail
        n["short"] = short


def explorer_layout(
    graph: LineageGraph,
    *,
    depths: tuple[int, int] | None = None,
    search: str = "",
    collapsed: set[str] | frozenset[str] = frozenset(),
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Node and edge rows for the interactive explorer: depth left to right (ancestors left of the root),
    the nodes of one depth stacked top to bottom in their parents' order (few crossings), so labels never
    overlap at any size. ``depths`` keeps nodes with depth in [lo, hi]; ``search`` (case-insensitive,
    id or name) marks matches; each node in ``collapsed`` hides what lies beyond it (:func:`hidden_by`)
    and its label counts them (``+N``)."""
    lo, hi = depths or (min(n.depth for n in graph.nodes), max(n.depth for n in graph.nodes))
    hides = hidden_by(graph, collapsed)
    gone = set().union(*hides.values()) if hides else set()
    kept = [n for n in graph.nodes if (lo <= n.depth <= hi or n.depth == 0) and n.id not in gone]
    versions = node_version_labels(graph)
    parents: dict[str, list[str]] = defaultdict(list)
    for e in graph.edges:
        parents[e.child].append(e.parent)
    row: dict[str, float] = {}
    needle = search.strip().lower()
    nodes: list[dict[str, object]] = []
    for depth in sorted({n.depth for n in kept}):
        layer = [n for n in kept if n.depth == depth]

        def order(n: GraphNode) -> tuple[float, str]:
            near = [row[p] for p in parents.get(n.id, []) if p in row] + [
                row[e.child] for e in graph.edges if e.parent == n.id and e.child in row
            ]
            return (sum(near) / len(near) if near else 0.0, n.id)

        for i, n in enumerate(sorted(layer, key=order)):
            row[n.id] = float(i)
            title = n.name or n.id
            folded = len(hides.get(n.id, ()))
            nodes.append(
                {
                    "id": n.id,
                    "name": n.name,
                    "kind": "root" if n.depth == 0 else n.kind,
                    "depth": n.depth,
                    "row": i,
                    "label": f"{title} {versions.get(n.id, '')}".strip()
                    + (f" (+{folded} collapsed)" if folded else ""),
                    "match": bool(needle) and (needle in n.id.lower() or needle in n.name.lower()),
                    "collapsed": folded,
                }
            )
    _tell_apart(nodes)
    depth_of = {n.id: n.depth for n in kept}
    edges = [
        {
            "parent": e.parent,
            "child": e.child,
            "label": e.label,
            "x": depth_of[e.parent],
            "y": row[e.parent],
            "x2": depth_of[e.child],
            "y2": row[e.child],
        }
        for e in graph.edges
        if e.parent in row and e.child in row
    ]
    return nodes, edges
