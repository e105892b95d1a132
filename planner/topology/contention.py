"""Fast path: route one dimension's flows over the wiring arithmetic and find its bottleneck.

A flow inside a scale-up domain takes the domain's only shortest path (switch port in and out, the
direct mesh link, or the torus links in dimension order, a wrap-around tie split in half). A flow
between domains goes NIC -> leaf (-> spine -> leaf) -> NIC (rail-optimized) or NIC -> ToR -> pod
(-> spine -> pod) -> ToR -> NIC; the ``planes`` copies each carry 1/planes of it over 1/planes of
the capacity, which leaves every ratio unchanged. The per-rank bus bandwidth is

    W = min over edges e of capacity_e / load_e,   load_e = sum of the weights crossing e,

the weighted form of "per-flow bandwidth = min over its path of capacity / flows on the edge".
:mod:`planner.topology.oracle` computes the same on the networkx graph; tests check they agree.
All-to-all loads are counted rather than listed (:mod:`planner.topology.alltoall`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.specs.comm import CommDomain
from planner.topology.flows import ALL_TO_ALL, Flows, family_flows, group_matrix, window
from planner.topology.structure import Fabric, IntArray, describe_rate

PORT_NAMES = {
    "nvswitch": "NVSwitch port",
    "nvlink_rack": "NVLink switch port",
    "mesh": "mesh link",
    "torus": "ICI link",
}
"""Words for the scale-up edge of each SystemSpec.kind."""


@dataclass(frozen=True, slots=True)
class Bottleneck:
    """The busiest edge of one edge class."""

    bytes_per_s: float
    """Per-rank bus bandwidth the class allows: capacity / load of its busiest edge."""
    load: float
    """Weighted flows on that edge."""
    tier: str
    """scale_up or scale_out."""
    link: str
    """The edge class in words."""

    @classmethod
    def of(cls, capacity: float, load: float, tier: str, link: str) -> Bottleneck:
        """The bottleneck of an edge of ``capacity`` carrying ``load`` (unbounded when idle)."""
        return cls(capacity / load if load else float("inf"), load, tier, link)


def _busiest(keys: IntArray, weights: np.ndarray) -> float:
    """Largest total weight on any one key (keys are small non-negative edge indices)."""
    if len(keys) == 0:
        return 0.0
    return float(np.bincount(keys, weights=weights).max())


def _class(name: str, tier: str, capacity: float, keys: IntArray, w: np.ndarray) -> Bottleneck:
    return Bottleneck.of(capacity, _busiest(keys, w), tier, name)


def torus_link_loads(fabric: Fabric, src: IntArray, dst: IntArray, w: np.ndarray) -> np.ndarray:
    """Weighted flows on each directed ICI link (index = rank x 2 dims + 2 axis + direction:
    the link leaving ``rank`` along ``axis``, 1 = towards higher coordinates) of
    dimension-order routes, splitting a wrap-around tie (distance = extent / 2) evenly over both
    directions.

    Along one axis a route covers an interval of the links of one line of the torus (the other
    coordinates fixed: those already routed at the destination's, the rest at the source's),
    so each axis and direction is a difference array (+w where the interval starts, -w past
    its end, a wrapped interval in two pieces) summed along the axis: O(routes + links), not
    O(routes x hops) (tests/test_topology.py checks it against routing hop by hop)."""
    shape, dims = fabric.slice_shape, len(fabric.slice_shape)
    per_domain, domains = fabric.per_domain, -(-fabric.num_accelerators // fabric.per_domain)
    loads = np.zeros((fabric.num_accelerators, dims, 2))
    if len(src) == 0:
        return loads.reshape(-1)
    base = src - src % per_domain
    cur, goal = fabric.coords(src), fabric.coords(dst)
    place = np.cumprod((1, *shape[:-1]))
    grid = (domains, *reversed(shape))  # a rank's coordinates, axis 0 fastest
    for axis, extent in enumerate(shape):
        delta = goal[:, axis] - cur[:, axis]
        if fabric.wrap[axis]:
            delta %= extent
            options = [
                (1, delta, np.where(2 * delta < extent, 1.0, 0.0)),
                (-1, extent - delta, np.where(2 * delta > extent, 1.0, 0.0)),
            ]
            tie = 2 * delta == extent
            options[0][2][tie] = options[1][2][tie] = 0.5
        else:
            options = [(1, delta, (delta > 0) * 1.0), (-1, -delta, (delta < 0) * 1.0)]
        line = base + cur @ place - cur[:, axis] * place[axis]  # the rank at position 0
        for direction, hops, share in options:
            active = (share > 0) & (hops > 0)
            if not active.any():
                continue
            h, weight = hops[active], w[active] * share[active]
            # the links a route takes leave positions first .. first + h - 1 (mod extent)
            first = cur[active, axis] if direction > 0 else cur[active, axis] - h + 1
            first %= extent
            end = first + h
            at = line[active]
            starts = [at + first * place[axis], at[end > extent]]
            stops = [at[end < extent] + end[end < extent] * place[axis],
                     at[end > extent] + (end[end > extent] - extent) * place[axis]]  # fmt: skip
            change = np.bincount(np.concatenate(starts), minlength=domains * per_domain,
                                 weights=np.concatenate([weight, weight[end > extent]]))  # fmt: skip
            change -= np.bincount(np.concatenate(stops), minlength=domains * per_domain,
                                  weights=np.concatenate([weight[end < extent],
                                                          weight[end > extent]]))  # fmt: skip
            summed = np.cumsum(change.reshape(grid), axis=dims - axis)
            loads[:, axis, int(direction > 0)] = summed.reshape(-1)[: fabric.num_accelerators]
        cur[:, axis] = goal[:, axis]
    return loads.reshape(-1)


def scale_up_bottlenecks(
    fabric: Fabric, src: IntArray, dst: IntArray, w: np.ndarray
) -> list[Bottleneck]:
    """Bottlenecks of flows that stay inside their domain."""
    cap, name = fabric.link_bytes_per_s, PORT_NAMES[fabric.kind]
    if len(src) == 0:
        return []
    if fabric.kind == "mesh":
        return [_class(name, "scale_up", cap, src * fabric.per_domain + dst % fabric.per_domain, w)]
    if fabric.kind == "torus":
        load = float(torus_link_loads(fabric, src, dst, w).max())
        return [Bottleneck.of(cap, load, "scale_up", name)]
    return [
        _class(name + " (out)", "scale_up", cap, src, w),
        _class(name + " (in)", "scale_up", cap, dst, w),
    ]


def scale_out_bottlenecks(
    fabric: Fabric, src: IntArray, dst: IntArray, w: np.ndarray
) -> list[Bottleneck]:
    """Bottlenecks of flows between domains (NICs, leaf or ToR/pod up-links)."""
    if len(src) == 0:
        return []
    nic = f"{fabric.fabric_kind} NIC"
    out = [
        _class(nic + " (out)", "scale_out", fabric.nic_bytes_per_s, fabric.nic(src), w),
        _class(nic + " (in)", "scale_out", fabric.nic_bytes_per_s, fabric.nic(dst), w),
    ]
    if fabric.rail_optimized:
        up = fabric.leaf(src) != fabric.leaf(dst)
        cap = fabric.leaf_up_bytes_per_s
        out += [
            _class("rail leaf up-link to spine", "scale_out", cap, fabric.leaf(src[up]), w[up]),
            _class("spine down-link to rail leaf", "scale_out", cap, fabric.leaf(dst[up]), w[up]),
        ]
        return out
    cap = fabric.tor_up_bytes_per_s
    out += [
        _class("ToR up-link", "scale_out", cap, fabric.node(src), w),
        _class("ToR down-link", "scale_out", cap, fabric.node(dst), w),
    ]
    up = fabric.unit(src) != fabric.unit(dst)
    cap = fabric.pod_up_bytes_per_s
    out += [
        _class("pod up-link to spine", "scale_out", cap, fabric.unit(src[up]), w[up]),
        _class("spine down-link to pod", "scale_out", cap, fabric.unit(dst[up]), w[up]),
    ]
    return out


def route_bottlenecks(fabric: Fabric, flows: Flows) -> list[Bottleneck]:
    """Every edge class's bottleneck for a set of concurrent flows."""
    src, dst, w = flows
    inside = fabric.domain(src) == fabric.domain(dst)
    return scale_up_bottlenecks(fabric, src[inside], dst[inside], w[inside]) + (
        scale_out_bottlenecks(fabric, src[~inside], dst[~inside], w[~inside])
    )


def local_domain() -> CommDomain:
    """A group of one rank: no communication."""
    return CommDomain(
        size=1,
        bandwidth_bytes_per_s=1.0,
        latency_s=0.0,
        efficiency=1.0,
        tier="local",
        description="no communication",
    )


def _sharing(load: float) -> str:
    """How busy the bottleneck edge is, in words.

    >>> print(_sharing(32.0), "/", _sharing(1.0), "/", _sharing(0.125))
    32 ranks share it / one rank's traffic / it carries 0.125 of a rank's traffic
    """
    if abs(load - 1) < 1e-9:
        return "one rank's traffic"
    if load > 1:
        return f"{load:.3g} ranks share it"
    return f"it carries {load:.3g} of a rank's traffic"


def to_comm_domain(fabric: Fabric, size: int, bottlenecks: list[Bottleneck]) -> CommDomain:
    """The CommDomain of a family: the edge class with the least effective bandwidth binds."""
    eta = {"scale_up": fabric.up_efficiency, "scale_out": fabric.out_efficiency}
    alpha = {"scale_up": fabric.up_latency_s, "scale_out": fabric.out_latency_s}
    used = [b for b in bottlenecks if b.load > 0]
    if not used:
        return local_domain().model_copy(update={"size": size})
    worst = min(used, key=lambda b: b.bytes_per_s * eta[b.tier])
    tiers = {b.tier for b in used}
    tier = "scale_out" if "scale_out" in tiers else "scale_up"
    taper = ""
    if "spine" in worst.link and fabric.oversubscription > 1:
        taper = f", {fabric.oversubscription:g}:1 taper"
    return CommDomain(
        size=size,
        bandwidth_bytes_per_s=worst.bytes_per_s,
        latency_s=max(alpha[t] for t in tiers),
        efficiency=eta[worst.tier],
        tier=tier,
        description=f"{describe_rate(worst.bytes_per_s)} per rank, bound by {worst.link} "
        f"({_sharing(worst.load)}{taper})",
    )


def domains_spanned(fabric: Fabric, size: int, stride: int) -> int:
    """Scale-up domains one group of ``size`` ranks ``stride`` apart touches.

    >>> from planner.catalog import load_cluster
    >>> from planner.topology.structure import fabric_of
    >>> domains_spanned(fabric_of(load_cluster("hgx_h100x64")), 32, 1)
    4
    """
    per_domain = fabric.per_domain
    if stride >= per_domain:
        return size
    return max(1, min(size, -(-stride * size // per_domain)))


def family_domain(
    fabric: Fabric, size: int, stride: int, pattern: str, num_ranks: int
) -> CommDomain:
    """CommDomain of the groups of ``size`` ranks ``stride`` apart among ``num_ranks`` ranks.

    >>> from planner.catalog import load_cluster
    >>> from planner.topology.structure import fabric_of
    >>> board = fabric_of(load_cluster("hgx_h100x8"))
    >>> family_domain(board, 8, 1, "ring", 8).bandwidth_bytes_per_s
    450000000000.0
    """
    if size == 1:
        return local_domain()
    num_ranks = min(num_ranks, fabric.num_accelerators)
    size_seen = min(size, max(2, num_ranks // stride))
    ranks = window(fabric, size_seen, stride, num_ranks)
    if pattern == ALL_TO_ALL:
        from planner.topology.alltoall import all_to_all_bottlenecks

        groups = group_matrix(ranks, size_seen, stride)
        if groups.size == 0:
            return local_domain().model_copy(update={"size": size})
        found = to_comm_domain(fabric, size, all_to_all_bottlenecks(fabric, groups, stride))
        return found.model_copy(update={"num_domains": domains_spanned(fabric, size, stride)})
    flows = family_flows(fabric, size_seen, stride, pattern, ranks)
    return to_comm_domain(fabric, size, route_bottlenecks(fabric, flows))
