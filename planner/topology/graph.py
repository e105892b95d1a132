"""The cluster as a networkx graph: accelerators, switches and NICs; edges carry bandwidth.

Builders follow networkx's generator style (``networkx/generators/lattice.py``): each is a small
function returning a new graph, composed from smaller ones. Every edge has :data:`BANDWIDTH`
(bytes/s per direction, full duplex), :data:`LATENCY` (the per-step collective latency of its
tier, s) and :data:`TIER`; every node has :data:`KIND`. Accelerators are named ``acc<rank>`` and
carry :data:`RANK`, :data:`DOMAIN`, :data:`NODE` and :data:`LOCAL` (and torus coordinates).

Nothing here is read by the cost model: :mod:`planner.topology.oracle` turns a graph into
:class:`~planner.specs.comm.CommDomain` values (STYLE.md rule 8).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import networkx as nx

from planner.errors import SpecError
from planner.specs.cluster import ClusterSpec
from planner.topology.structure import Fabric, fabric_of

KIND = "kind"
"""Node attribute: accelerator, switch, nic, leaf, tor, pod or spine."""
RANK = "rank"
"""Accelerator attribute: global rank."""
DOMAIN = "domain"
"""Accelerator / switch attribute: scale-up domain index."""
NODE = "node"
"""Accelerator / NIC attribute: node (server, tray, host) index."""
LOCAL = "local"
"""Accelerator attribute: index inside its node."""
AXES = ("x", "y", "z")
"""Accelerator attributes of a torus: coordinate per axis."""
BANDWIDTH = "bandwidth_bytes_per_s"
"""Edge attribute: capacity per direction (bytes/s)."""
LATENCY = "latency_s"
"""Edge attribute: per-step collective latency of the edge's tier (s)."""
TIER = "tier"
"""Edge attribute: scale_up or scale_out."""
SCALE_UP, SCALE_OUT = "scale_up", "scale_out"


def accelerator(rank: int) -> str:
    """Node name of an accelerator.

    >>> accelerator(3)
    'acc3'
    """
    return f"acc{rank}"


def _add_accelerators(graph: nx.Graph, fabric: Fabric, ranks: range) -> None:
    for r in ranks:
        attrs = {
            KIND: "accelerator",
            RANK: r,
            DOMAIN: r // fabric.per_domain,
            NODE: r // fabric.per_node,
            LOCAL: r % fabric.per_node,
        }
        pos = r % fabric.per_domain
        for axis, extent in zip(AXES, fabric.slice_shape, strict=False):
            attrs[axis] = pos % extent
            pos //= extent
        graph.add_node(accelerator(r), **attrs)


def _up_edge(fabric: Fabric) -> dict[str, object]:
    return {BANDWIDTH: fabric.link_bytes_per_s, LATENCY: fabric.up_latency_s, TIER: SCALE_UP}


def switched_domain_graph(fabric: Fabric, domain: int = 0) -> nx.Graph:
    """One NVSwitch board or NVLink rack: every accelerator has one port of its full NVLink
    bandwidth into a non-blocking switch (the board's NVSwitch chips, or the rack's 18 switch
    trays, as one node). Source: hardware.md section 3 ("every GPU reaches the other 7 at full
    NVLink rate"; NVL72 = one 72-GPU NVLink domain)."""
    graph = nx.Graph()
    first = domain * fabric.per_domain
    ranks = range(first, min(first + fabric.per_domain, fabric.num_accelerators))
    _add_accelerators(graph, fabric, ranks)
    switch = f"sw{domain}"
    graph.add_node(switch, **{KIND: "switch", DOMAIN: domain})
    graph.add_edges_from(((accelerator(r), switch) for r in ranks), **_up_edge(fabric))
    return graph


def mesh_domain_graph(fabric: Fabric, domain: int = 0) -> nx.Graph:
    """A switchless full mesh (AMD MI300X / MI355X 8-GPU board): one Infinity Fabric link per
    pair, each 1/num_links of the headline, so point-to-point sees 1/7 of it (hardware.md 4)."""
    graph = nx.Graph()
    first = domain * fabric.per_domain
    ranks = range(first, min(first + fabric.per_domain, fabric.num_accelerators))
    _add_accelerators(graph, fabric, ranks)
    pairs = itertools.combinations((accelerator(r) for r in ranks), 2)
    graph.add_edges_from(pairs, **_up_edge(fabric))
    return graph


def torus_graph(fabric: Fabric, domain: int = 0) -> nx.Graph:
    """A TPU slice: an ICI torus of ``slice_shape`` with one link of the catalog's per-link
    bandwidth between neighbours, and wrap-around links on the axes that have them (JAX scaling
    book, "TPUs"; Google Cloud TPU docs)."""
    graph = nx.Graph()
    first = domain * fabric.per_domain
    _add_accelerators(graph, fabric, range(first, first + fabric.per_domain))
    shape = fabric.slice_shape
    strides = [1]
    for extent in shape[:-1]:
        strides.append(strides[-1] * extent)
    for pos in range(fabric.per_domain):
        for axis, extent in enumerate(shape):
            coord = pos // strides[axis] % extent
            if extent == 1 or (coord == extent - 1 and not fabric.wrap[axis]):
                continue
            neighbour = pos + ((coord + 1) % extent - coord) * strides[axis]
            if extent == 2 and coord == 1:
                continue
            graph.add_edge(
                accelerator(first + pos), accelerator(first + neighbour), **_up_edge(fabric)
            )
    return graph


def _nic_edges(graph: nx.Graph, fabric: Fabric, ranks: range) -> None:
    out = {BANDWIDTH: fabric.nic_bytes_per_s, LATENCY: fabric.out_latency_s, TIER: SCALE_OUT}
    for r in ranks:
        nic = f"nic{r // fabric.per_nic}"
        if nic not in graph:
            graph.add_node(nic, **{KIND: "nic", NODE: r // fabric.per_node})
        graph.add_edge(accelerator(r), nic, **out)


def _switch_edge(
    graph: nx.Graph, lower: str, upper: str, bytes_per_s: float, fabric: Fabric
) -> None:
    graph.add_edge(
        lower, upper, **{BANDWIDTH: bytes_per_s, LATENCY: fabric.out_latency_s, TIER: SCALE_OUT}
    )


def _accelerators_and_nics(fabric: Fabric) -> nx.Graph:
    """A scale-out graph's first layer: every accelerator and its NIC edges."""
    graph = nx.Graph()
    ranks = range(fabric.num_accelerators)
    _add_accelerators(graph, fabric, ranks)
    _nic_edges(graph, fabric, ranks)
    return graph


def rail_fat_tree_graph(fabric: Fabric) -> nx.Graph:
    """Rail-optimized two-tier fat tree (NVIDIA DGX SuperPOD): NIC i of every node of a
    scalable unit on rail i's leaf, leaves joined by the spine with up-links of
    ``U x NIC / oversubscription``; ``planes`` copies, each with 1/planes of every NIC.
    Source: hardware.md section 8 (DGX H100 SuperPOD: SU = 32 nodes under 8 rail leaves)."""
    graph = _accelerators_and_nics(fabric)
    planes = fabric.planes
    for nic in range(fabric.num_nics):
        node = nic // fabric.nics_per_node
        unit, rail = node // fabric.unit_nodes, nic % fabric.nics_per_node
        for plane in range(planes):
            leaf = f"leaf{unit}.{rail}.{plane}"
            graph.add_node(leaf, **{KIND: "leaf"})
            _switch_edge(graph, f"nic{nic}", leaf, fabric.nic_bytes_per_s / planes, fabric)
            if fabric.has_spine:
                graph.add_node(f"spine{plane}", **{KIND: "spine"})
                _switch_edge(
                    graph, leaf, f"spine{plane}", fabric.leaf_up_bytes_per_s / planes, fabric
                )
    return graph


def tor_fat_tree_graph(fabric: Fabric) -> nx.Graph:
    """Top-of-rack three-tier Clos (Meta's RoCE clusters, a TPU data-center network): each
    node's NICs on its ToR (non-blocking up-links), ToRs of a scalable unit on a pod switch,
    pods joined by the spine with up-links of ``SU NICs / oversubscription``. Source:
    hardware.md section 8 (Llama 3 cluster: full-bisection pods, 1:7 above)."""
    graph = _accelerators_and_nics(fabric)
    planes = fabric.planes
    for nic in range(fabric.num_nics):
        node = nic // fabric.nics_per_node
        for plane in range(planes):
            tor, pod = f"tor{node}.{plane}", f"pod{node // fabric.unit_nodes}.{plane}"
            graph.add_node(tor, **{KIND: "tor"})
            _switch_edge(graph, f"nic{nic}", tor, fabric.nic_bytes_per_s / planes, fabric)
            if fabric.num_nodes > 1:
                graph.add_node(pod, **{KIND: "pod"})
                _switch_edge(graph, tor, pod, fabric.tor_up_bytes_per_s / planes, fabric)
            if fabric.has_spine:
                graph.add_node(f"spine{plane}", **{KIND: "spine"})
                _switch_edge(
                    graph, pod, f"spine{plane}", fabric.pod_up_bytes_per_s / planes, fabric
                )
    return graph


SCALE_UP_BUILDERS = {
    "nvswitch": switched_domain_graph,
    "nvlink_rack": switched_domain_graph,
    "mesh": mesh_domain_graph,
    "torus": torus_graph,
}
"""Scale-up builder per SystemSpec.kind."""


def fabric_graph(fabric: Fabric) -> nx.Graph:
    """The whole cluster: every scale-up domain, plus the scale-out fabric (TPU multi-slice:
    the slices joined over the data-center network)."""
    build_domain = SCALE_UP_BUILDERS[fabric.kind]
    scale_out = rail_fat_tree_graph if fabric.rail_optimized else tor_fat_tree_graph
    parts = [build_domain(fabric, d) for d in range(fabric.num_domains)]
    return nx.compose_all([*parts, scale_out(fabric)])


def cluster_graph(cluster: ClusterSpec) -> nx.Graph:
    """The graph of a resolved cluster (what-if edits already applied to its specs).

    >>> from planner.catalog import load_cluster
    >>> g = cluster_graph(load_cluster("hgx_h100x16"))
    >>> sorted(nx.get_node_attributes(g, KIND).values()).count("accelerator")
    16
    """
    return fabric_graph(fabric_of(cluster))


def without_links(graph: nx.Graph, links: list[tuple[str, str]]) -> nx.Graph:
    """A copy of ``graph`` with failed links removed (what-if: a cable or port down)."""
    out = graph.copy()
    out.remove_edges_from(links)
    return out


def without_nodes(graph: nx.Graph, nodes: list[str]) -> nx.Graph:
    """A copy of ``graph`` with failed switches or NICs removed (what-if: a leaf down)."""
    out = graph.copy()
    out.remove_nodes_from(nodes)
    return out


def with_bandwidth(graph: nx.Graph, links: list[tuple[str, str]], scale: float) -> nx.Graph:
    """A copy of ``graph`` whose given links run at ``scale`` of their capacity (a degraded
    link, e.g. 0.5 for a port trained down to half rate)."""
    out = graph.copy()
    for u, v in links:
        out.edges[u, v][BANDWIDTH] *= scale
    return out


GRAPHML_MAX_ACCELERATORS = 32_768
"""Largest cluster whose graph ``layout show --graphml`` materialises (memory and time)."""


def graphml_lines(cluster: ClusterSpec) -> Iterator[str]:
    """GraphML text of the cluster graph, line by line (the CLI writes it to a file).

    Attribute names are the module constants (:data:`BANDWIDTH` in bytes/s, :data:`LATENCY` in s).
    """
    if cluster.num_accelerators > GRAPHML_MAX_ACCELERATORS:
        raise SpecError(
            f"--graphml: {cluster.num_accelerators:,} accelerators is above the "
            f"{GRAPHML_MAX_ACCELERATORS:,} whose graph is written; use a smaller cluster "
            f"(the symmetric summary of 'layout show' covers any size)"
        )
    return nx.generate_graphml(cluster_graph(cluster))
