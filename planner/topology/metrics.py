"""Reported facts about a cluster's network, from the wiring arithmetic (no graph is built, so a
131,072-GPU cluster answers in milliseconds); tests check every figure against the networkx
graph on small clusters.

* node and edge counts of :func:`planner.topology.graph.cluster_graph`, by node kind;
* bisection bandwidth: the max-flow (per direction) from the first half of the ranks to the
  second, as an exact min cut. Above the domains the fabric is a tree (each plane's spine is one
  node, planes are identical), so the cut is a dynamic programme over its levels; a domain split
  by the halves adds its own cut (NVSwitch: min side x port; mesh: a x b links; torus: the links
  across the last axis, 2 per line with wrap-around; Dally & Towles, "Principles and Practices of
  Interconnection Networks", ch. 3);
* diameter: the most hops between two accelerators on the routes flows take (scale-up inside a
  domain, scale-out between domains).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from planner.specs.cluster import ClusterSpec
from planner.topology.contention import family_domain
from planner.topology.structure import Fabric, fabric_of
from planner.units import GB


def node_counts(fabric: Fabric) -> dict[str, int]:
    """Nodes of the cluster graph by kind.

    >>> from planner.catalog import load_cluster
    >>> node_counts(fabric_of(load_cluster("hgx_h100x512")))["leaf"]
    16
    """
    planes = fabric.planes
    counts = Counter(accelerator=fabric.num_accelerators, nic=fabric.num_nics)
    if fabric.kind in ("nvswitch", "nvlink_rack"):
        counts["switch"] = fabric.num_domains
    if fabric.rail_optimized:
        counts["leaf"] = planes * fabric.num_units * fabric.nics_per_node
    else:
        counts["tor"] = planes * fabric.num_nodes
        counts["pod"] = planes * fabric.num_units if fabric.num_nodes > 1 else 0
    counts["spine"] = planes if fabric.has_spine else 0
    return {kind: n for kind, n in counts.items() if n}


def _domain_links(fabric: Fabric) -> int:
    d = fabric.per_domain
    if fabric.kind == "mesh":
        return d * (d - 1) // 2
    if fabric.kind != "torus":
        return d
    return sum(
        d // e * (e if wrap and e > 2 else e - 1)
        for e, wrap in zip(fabric.slice_shape, fabric.wrap, strict=True)
    )


def edge_count(fabric: Fabric) -> int:
    """Edges (links) of the cluster graph."""
    counts = node_counts(fabric)
    planes, nics = fabric.planes, counts["nic"]
    edges = fabric.num_domains * _domain_links(fabric) + fabric.num_accelerators
    edges += nics * planes
    if fabric.rail_optimized:
        return edges + (counts["leaf"] if fabric.has_spine else 0)
    if "pod" in counts:
        edges += counts["tor"]
    return edges + (counts["pod"] if fabric.has_spine else 0)


def _level(
    cost: tuple[np.ndarray, np.ndarray], parent: np.ndarray, capacity: float, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Min-cut DP one level up a tree: cost of each parent on the source / sink side."""
    on_s, on_t = cost
    to_s = np.minimum(on_s, on_t + capacity)
    to_t = np.minimum(on_t, on_s + capacity)
    return np.bincount(parent, to_s, size), np.bincount(parent, to_t, size)


def fabric_bisection(fabric: Fabric) -> float:
    """Max-flow (bytes/s) through the scale-out fabric from ranks < N/2 to the rest."""
    ranks = np.arange(fabric.num_accelerators)
    inf = np.inf
    first = ranks < fabric.num_accelerators / 2
    cost = (np.where(first, 0.0, inf), np.where(first, inf, 0.0))
    bw = fabric.nic_bytes_per_s
    nics = fabric.num_nics
    cost = _level(cost, fabric.nic(ranks), bw, nics)
    nic_rank = np.arange(nics) * fabric.per_nic
    if fabric.rail_optimized:
        leaves = fabric.num_units * fabric.nics_per_node
        cost = _level(cost, fabric.leaf(nic_rank), bw, leaves)
        up = fabric.leaf_up_bytes_per_s if fabric.has_spine else 0.0
        cost = _level(cost, np.zeros(leaves, dtype=np.int64), up, 1)
        return float(min(cost[0][0], cost[1][0]))
    cost = _level(cost, fabric.node(nic_rank), bw, fabric.num_nodes)
    tor_up = fabric.tor_up_bytes_per_s if fabric.num_nodes > 1 else 0.0
    cost = _level(cost, np.arange(fabric.num_nodes) // fabric.unit_nodes, tor_up, fabric.num_units)
    up = fabric.pod_up_bytes_per_s if fabric.has_spine else 0.0
    cost = _level(cost, np.zeros(fabric.num_units, dtype=np.int64), up, 1)
    return float(min(cost[0][0], cost[1][0]))


def domain_bisection(fabric: Fabric) -> float:
    """Cut (bytes/s) between the two halves of one scale-up domain (rank order)."""
    half, link = fabric.per_domain // 2, fabric.link_bytes_per_s
    if half == 0:
        return 0.0
    if fabric.kind == "mesh":
        return half * (fabric.per_domain - half) * link
    if fabric.kind != "torus":
        return half * link
    axis = max(i for i, extent in enumerate(fabric.slice_shape) if extent > 1)
    last, wrap = fabric.slice_shape[axis], fabric.wrap[axis]
    return fabric.per_domain // last * (2 if wrap and last > 2 else 1) * link


def bisection(fabric: Fabric) -> dict[str, float]:
    """Bisection bandwidth (bytes/s per direction): total, and its scale-up / scale-out parts.

    >>> from planner.catalog import load_cluster
    >>> bisection(fabric_of(load_cluster("tpu_v5e_16x16")))["scale_up"] / 1e9
    1600.0
    """
    straddled = fabric.num_domains % 2 == 1
    up = domain_bisection(fabric) if straddled else 0.0
    out = fabric_bisection(fabric)
    return {"total": up + out, "scale_up": up, "scale_out": out}


def diameter(fabric: Fabric) -> dict[str, int]:
    """Most hops between two accelerators: inside a domain, between domains, overall."""
    if fabric.kind == "mesh":
        up = 1
    elif fabric.kind == "torus":
        up = sum(
            e // 2 if w else e - 1 for e, w in zip(fabric.slice_shape, fabric.wrap, strict=True)
        )
    else:
        up = 2
    up = up if fabric.per_domain > 1 else 0
    if fabric.num_domains == 1:
        out = 0
    elif fabric.rail_optimized:
        out = 6 if fabric.has_spine else 4
    else:
        out = 8 if fabric.has_spine else 6
    return {"scale_up": up, "scale_out": out, "total": max(up, out)}


def tiers(cluster: ClusterSpec) -> list[dict[str, object]]:
    """The two tiers with their per-accelerator bandwidth (GB/s), latency (us) and efficiency."""
    fabric = fabric_of(cluster)
    return [
        {
            "tier": "scale_up",
            "kind": fabric.kind,
            "GB_per_s_per_accelerator": cluster.system.scale_up.bandwidth_GB_per_s,
            "latency_us": fabric.up_latency_s * 1e6,
            "efficiency": fabric.up_efficiency,
        },
        {
            "tier": "scale_out",
            "kind": fabric.fabric_kind,
            "GB_per_s_per_accelerator": fabric.scale_out_bytes_per_s / GB,
            "latency_us": fabric.out_latency_s * 1e6,
            "efficiency": fabric.out_efficiency,
        },
    ]


def topology_summary(cluster: ClusterSpec) -> dict[str, object]:
    """Everything ``layout show`` reports about the network, JSON-ready (GB/s = 1e9 B/s).

    The two ring figures are what one rank sees when every group runs at once: a ring over one
    whole domain, and a ring over one accelerator of every domain (the widest DP ring).
    """
    fabric = fabric_of(cluster)
    n, per, many = fabric.num_accelerators, fabric.per_domain, fabric.num_domains > 1
    bis = bisection(fabric)
    inside = family_domain(fabric, per, 1, "ring", n)
    across = family_domain(fabric, fabric.num_domains, per, "ring", n) if many else None
    return {
        "nodes": node_counts(fabric),
        "num_links": edge_count(fabric),
        "num_domains": fabric.num_domains,
        "accelerators_per_node": fabric.per_node,
        "num_scalable_units": fabric.num_units,
        "wiring": "rail-optimized" if fabric.rail_optimized else "top-of-rack",
        "planes": fabric.planes,
        "spine": "one aggregated non-blocking switch per plane" if fabric.has_spine else None,
        "tiers": tiers(cluster),
        "ring_in_domain_GB_per_s_per_accelerator": inside.bandwidth_bytes_per_s / GB,
        "ring_across_domains_GB_per_s_per_accelerator": (
            across.bandwidth_bytes_per_s / GB if across else None
        ),
        "ring_across_domains_bottleneck": across.description if across else None,
        "bisection_GB_per_s": bis["total"] / GB,
        "bisection_scale_up_GB_per_s": bis["scale_up"] / GB,
        "bisection_scale_out_GB_per_s": bis["scale_out"] / GB,
        "diameter_hops": diameter(fabric),
        "torus_wraparound": list(fabric.wrap) or None,
    }
