"""Full-graph computation: route every flow of every group over the networkx graph.

The reference the fast path (:mod:`planner.topology.contention`) is tested against, and the way
to cost a graph that an edit made asymmetric (a failed link, a degraded port). Flows are built
here from plain member lists and graph attributes, independently of :mod:`flows`:

* inside a domain a flow follows the scale-up edges, between domains the scale-out edges (no
  other accelerator or NIC in between);
* every flow is split evenly over all its shortest paths (hop count), networkx's
  ``predecessor`` BFS; on a torus only the dimension-ordered ones (x first, then y, then z:
  how ICI routes), so a tie between the two ways round a wrapped axis splits in half;
* the per-rank bus bandwidth is ``min over directed edges of capacity / weighted load``.

It walks every rank, so it is meant for clusters of up to a few thousand accelerators.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator

import networkx as nx

from planner.errors import InfeasibleError
from planner.specs.cluster import ClusterSpec
from planner.specs.comm import CommDomain
from planner.specs.layout import Layout
from planner.topology.contention import Bottleneck, local_domain, to_comm_domain
from planner.topology.flows import ALL_TO_ALL, P2P, SHIFT
from planner.topology.graph import AXES, BANDWIDTH, DOMAIN, KIND, SCALE_UP, TIER, accelerator
from planner.topology.structure import Fabric, fabric_of

Flow = tuple[int, int, float]


def _domain_pattern(graph: nx.Graph, kind: str, members: list[int], weight: float) -> list[Flow]:
    """Ring-collective flows of members that share one domain (see planner.topology.flows)."""
    n = len(members)
    if n < 2:
        return []
    if kind == "mesh":
        return [(a, b, weight / (n - 1)) for a, b in itertools.permutations(members, 2)]
    if kind != "torus":
        return [(members[i], members[(i + 1) % n], weight) for i in range(n)]
    coords = {
        m: tuple(graph.nodes[accelerator(m)][a] for a in AXES if a in graph.nodes[accelerator(m)])
        for m in members
    }
    values = [sorted({c[axis] for c in coords.values()}) for axis in range(len(coords[members[0]]))]
    spanned = [axis for axis, v in enumerate(values) if len(v) > 1]
    by_coord = {c: m for m, c in coords.items()}
    if len(by_coord) != n or set(by_coord) != set(itertools.product(*values)):
        half = weight / 2
        return [
            f
            for i in range(n)
            for f in ((members[i], members[(i + 1) % n], half), (members[i], members[i - 1], half))
        ]
    flows = []
    for m, c in coords.items():
        for axis in spanned:
            vals = values[axis]
            j = vals.index(c[axis])
            for step in (1, -1):
                other = (*c[:axis], vals[(j + step) % len(vals)], *c[axis + 1 :])
                flows.append((m, by_coord[other], weight / (2 * len(spanned))))
    return flows


def _ring_flows(graph: nx.Graph, kind: str, members: list[int]) -> list[Flow]:
    domains = [graph.nodes[accelerator(m)][DOMAIN] for m in members]
    if len(set(domains)) == 1:
        return _domain_pattern(graph, kind, members, 1.0)
    blocks = [
        [m for m, _ in run]
        for _, run in itertools.groupby(zip(members, domains, strict=True), key=lambda x: x[1])
    ]
    channels = min(len(b) for b in blocks)
    flows = []
    for i, block in enumerate(blocks):
        following = blocks[(i + 1) % len(blocks)]
        flows += [(block[j], following[j], 1.0 / channels) for j in range(channels)]
        flows += _domain_pattern(graph, kind, block, (len(block) - 1) / len(block))
    return flows


def group_flows(
    graph: nx.Graph, kind: str, size: int, stride: int, pattern: str, num_ranks: int
) -> list[Flow]:
    """Every flow of every group of ``size`` ranks ``stride`` apart among ``num_ranks`` ranks."""
    flows: list[Flow] = []
    for base in range(num_ranks):
        if (base // stride) % size or base + (size - 1) * stride >= num_ranks:
            continue
        members = [base + k * stride for k in range(size)]
        if pattern == P2P:
            flows += [(a, b, 1.0) for a, b in itertools.pairwise(members)]
        elif pattern == SHIFT:
            flows += [(a, b, 1.0) for a, b in zip(members, members[1:] + members[:1], strict=True)]
        elif pattern == ALL_TO_ALL:
            flows += [(a, b, 1 / (size - 1)) for a, b in itertools.permutations(members, 2)]
        else:
            flows += _ring_flows(graph, kind, members)
    return flows


def _paths(pred: dict[str, list[str]], source: str, target: str) -> Iterator[list[str]]:
    if target == source:
        yield [source]
        return
    for p in pred[target]:
        for path in _paths(pred, source, p):
            yield [*path, target]


def _axes_in_order(graph: nx.Graph, path: list[str]) -> bool:
    """Whether a torus path moves along axis 0 first, then 1, then 2 (dimension order)."""
    axes = []
    for u, v in itertools.pairwise(path):
        cu, cv = graph.nodes[u], graph.nodes[v]
        axes.append(next(i for i, a in enumerate(AXES) if cu.get(a) != cv.get(a)))
    return axes == sorted(axes)


def _tier_graphs(graph: nx.Graph) -> tuple[nx.Graph, nx.Graph]:
    up, out = nx.Graph(), nx.Graph()
    for u, v, tier in graph.edges(data=TIER):
        (up if tier == SCALE_UP else out).add_edge(u, v)
    return up, out


def route_loads(graph: nx.Graph, flows: list[Flow]) -> dict[tuple[str, str], float]:
    """Weighted load per directed edge, each flow split evenly over its shortest paths."""
    up, out = _tier_graphs(graph)
    endpoints = {n for n, k in graph.nodes(data=KIND) if k in ("accelerator", "nic")}
    preds: dict[tuple[int, str], dict[str, list[str]]] = {}
    loads: dict[tuple[str, str], float] = defaultdict(float)
    for src, dst, weight in flows:
        a, b = accelerator(src), accelerator(dst)
        inside = graph.nodes[a][DOMAIN] == graph.nodes[b][DOMAIN]
        view = up if inside else out
        key = (int(inside), a)
        if key not in preds:
            preds[key] = nx.predecessor(view, a) if a in view else {}
        if b not in preds[key]:
            raise InfeasibleError(f"no path from rank {src} to rank {dst} in the graph")
        paths = [
            p
            for p in _paths(preds[key], a, b)
            if (not inside and not endpoints & set(p[2:-2]))
            or (inside and (AXES[0] not in graph.nodes[a] or _axes_in_order(graph, p)))
        ]
        for path in paths:
            for u, v in itertools.pairwise(path):
                loads[u, v] += weight / len(paths)
    return loads


def graph_bottlenecks(graph: nx.Graph, flows: list[Flow]) -> list[Bottleneck]:
    """The busiest directed edge of each tier."""
    worst: dict[str, Bottleneck] = {}
    for (u, v), load in route_loads(graph, flows).items():
        edge = graph.edges[u, v]
        rate = edge[BANDWIDTH] / load
        if edge[TIER] not in worst or rate < worst[edge[TIER]].bytes_per_s:
            worst[edge[TIER]] = Bottleneck(rate, load, edge[TIER], f"{u} -> {v}")
    return list(worst.values())


def oracle_domain(
    graph: nx.Graph, fabric: Fabric, size: int, stride: int, pattern: str, num_ranks: int
) -> CommDomain:
    """CommDomain of one family computed on the full graph."""
    if size == 1:
        return local_domain()
    flows = group_flows(graph, fabric.kind, size, stride, pattern, num_ranks)
    return to_comm_domain(fabric, size, graph_bottlenecks(graph, flows))


def graph_comm_domains(
    graph: nx.Graph, cluster: ClusterSpec, layout: Layout
) -> dict[str, CommDomain]:
    """Like :func:`planner.topology.comm_domains`, but on a (possibly edited) graph."""
    from planner.topology.hierarchy import families

    fabric = fabric_of(cluster)
    return {
        dim: oracle_domain(graph, fabric, size, stride, pattern, layout.num_gpus)
        for dim, (size, stride, pattern) in families(layout).items()
    }
