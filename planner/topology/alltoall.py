"""All-to-all (MoE dispatch/combine) edge loads by counting, not by listing n^2 flows.

Every member sends 1/(n-1) of its buffer to each other member, so the load a member puts on an
edge class is (members it reaches through that class) / (n-1), and a shared edge sums its
members. Counting members of the same group per domain, leaf, node or scalable unit gives the
same loads as routing every pair (the oracle checks it), in O(ranks log ranks):

* NIC (each way): ``n - same_domain`` peers leave the domain through the member's NIC;
* rail leaf up-link: peers in another domain *and* on another leaf (inclusion-exclusion);
* ToR up-link: every peer outside the domain; pod up-link: those outside the scalable unit.

All-pairs traffic is symmetric, so every down-link carries what the matching up-link does. On a
torus, pairs inside a slice are routed in dimension order in bounded chunks.
"""

from __future__ import annotations

import math

import numpy as np

from planner.topology.contention import (
    PORT_NAMES,
    Bottleneck,
    scale_up_bottlenecks,
    torus_link_loads,
)
from planner.topology.structure import Fabric, IntArray, box_axes

CHUNK_PAIRS = 1_000_000
"""Most (src, dst) pairs materialised at once when routing torus all-to-all pairs."""
MAX_ROUTED_PAIRS = 200_000
"""Above this many pairs a torus all-to-all that is not an aligned box is estimated as the box
of its coordinate extents instead of routed pair by pair (keeps a new shape under ~1 s)."""


def _same(groups: IntArray, *keys: IntArray) -> IntArray:
    """Per member: members of its own group sharing all ``keys`` with it (itself included)."""
    row = np.broadcast_to(np.arange(len(groups))[:, None], groups.shape).reshape(-1)
    flats = [k.reshape(-1) for k in keys]
    sizes = [int(f.max(initial=0)) + 1 for f in flats]
    if len(groups) * math.prod(sizes) < 2**62:  # one integer per (group, keys): a 1-D unique
        code = row
        for flat, size in zip(flats, sizes, strict=True):
            code = code * size + flat
    else:
        code = np.stack([row, *flats], axis=1)
    _, inverse, counts = np.unique(
        code, axis=0 if code.ndim == 2 else None, return_inverse=True, return_counts=True
    )
    return counts[inverse.reshape(-1)].reshape(groups.shape)


def _edge(name: str, capacity: float, owner: IntArray, load: np.ndarray) -> Bottleneck:
    """Busiest edge of a class whose per-member load is summed over ``owner``."""
    worst = float(np.bincount(owner.reshape(-1), weights=load.reshape(-1)).max())
    return Bottleneck.of(capacity, worst, "scale_out", name)


def scale_out_loads(fabric: Fabric, groups: IntArray) -> list[Bottleneck]:
    """NIC and switch up-link bottlenecks of an all-to-all in every group at once."""
    n = groups.shape[1]
    domain = fabric.domain(groups)
    same_domain = _same(groups, domain)
    leaving = (n - same_domain) / (n - 1)
    nic = f"{fabric.fabric_kind} NIC"
    out = [
        _edge(nic + " (out)", fabric.nic_bytes_per_s, fabric.nic(groups), leaving),
        _edge(nic + " (in)", fabric.nic_bytes_per_s, fabric.nic(groups), leaving),
    ]
    if fabric.rail_optimized:
        leaf = fabric.leaf(groups)
        climbing = n - same_domain - _same(groups, leaf) + _same(groups, domain, leaf)
        cap = fabric.leaf_up_bytes_per_s
        load = climbing / (n - 1)
        out += [
            _edge("rail leaf up-link to spine", cap, leaf, load),
            _edge("spine down-link to rail leaf", cap, leaf, load),
        ]
        return out
    unit = fabric.unit(groups)
    climbing = n - same_domain - _same(groups, unit) + _same(groups, domain, unit)
    node, cap = fabric.node(groups), fabric.pod_up_bytes_per_s
    out += [
        _edge("ToR up-link", fabric.tor_up_bytes_per_s, node, leaving),
        _edge("ToR down-link", fabric.tor_up_bytes_per_s, node, leaving),
        _edge("pod up-link to spine", cap, unit, climbing / (n - 1)),
        _edge("spine down-link to pod", cap, unit, climbing / (n - 1)),
    ]
    return out


def _torus_pairs(fabric: Fabric, groups: IntArray) -> list[Bottleneck]:
    """Route every same-slice pair in dimension order, a chunk of groups at a time."""
    n = groups.shape[1]
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    dims = len(fabric.slice_shape)
    loads = np.zeros(fabric.num_accelerators * 2 * dims)
    step = max(1, CHUNK_PAIRS // (n * (n - 1)))
    for first in range(0, len(groups), step):
        rows = groups[first : first + step]
        src, dst = rows[:, i].reshape(-1), rows[:, j].reshape(-1)
        inside = fabric.domain(src) == fabric.domain(dst)
        weight = np.full(int(inside.sum()), 1.0 / (n - 1))
        loads += torus_link_loads(fabric, src[inside], dst[inside], weight)
    return [_ici(fabric, float(loads.max()))]


def _ici(fabric: Fabric, load: float, note: str = "") -> Bottleneck:
    cap = fabric.link_bytes_per_s
    return Bottleneck.of(cap, load, "scale_up", "ICI link" + note)


def torus_box_load(fabric: Fabric, axes: tuple[tuple[int, int, int], ...], n: int) -> float:
    """Load of the busiest ICI link when every group (an aligned box) runs an all-to-all with
    dimension-order routing.

    Along axis i (e members, t links apart) a link is crossed by the pairs whose route spans it:
    (e^2 - e mod 2)/8 on a ring closed by wrap-around (shortest way round, ties halved),
    floor(e^2/4) on a line; dimension order leaves the other box axes free on one side each (a factor
    prod_{j != i} e_j), the t groups interleaved on the line share it (a factor t), and every
    pair carries 1/(n-1): load_i = t P_i prod_{j != i} e_j / (n-1).

    >>> from planner.catalog import load_cluster
    >>> from planner.topology.structure import fabric_of
    >>> cube = fabric_of(load_cluster("tpu_v5p_4x4x4"))
    >>> round(torus_box_load(cube, ((0, 4, 1), (1, 4, 1), (2, 4, 1)), 64), 4)  # 2 x 16 / 63
    0.5079
    """
    worst = 0.0
    for axis, extent, step in axes:
        ring = fabric.wrap[axis] and extent * step == fabric.slice_shape[axis]
        pairs = (extent * extent - extent % 2) / 8 if ring else extent * extent // 4
        others = n // extent
        worst = max(worst, step * pairs * others / (n - 1))
    return worst


def _torus_loads(fabric: Fabric, groups: IntArray, stride: int) -> list[Bottleneck]:
    """Closed form for aligned boxes inside a slice, else route the pairs (bounded work)."""
    n = groups.shape[1]
    inside = fabric.domain(groups[:, 0]) == fabric.domain(groups[:, -1])
    axes = box_axes(fabric.slice_shape, n, stride)
    if inside.all() and axes is not None:
        return [_ici(fabric, torus_box_load(fabric, axes, n))]
    if groups.size * (n - 1) <= MAX_ROUTED_PAIRS:
        return _torus_pairs(fabric, groups)
    coords = fabric.coords(groups[0])
    extents = tuple((axis, len(set(coords[:, axis])), 1) for axis in range(coords.shape[1]))
    load = torus_box_load(fabric, tuple(a for a in extents if a[1] > 1), n)
    return [_ici(fabric, load, " (estimated as a box)")]


def scale_up_loads(fabric: Fabric, groups: IntArray, stride: int) -> list[Bottleneck]:
    """Scale-up bottlenecks of an all-to-all in every group at once."""
    n = groups.shape[1]
    if fabric.kind == "torus":
        return _torus_loads(fabric, groups, stride)
    peers = (_same(groups, fabric.domain(groups)) - 1).reshape(-1)
    if not peers.any():
        return []
    if fabric.kind == "mesh":  # one flow of 1/(n-1) on each directed link between two members
        cap = fabric.link_bytes_per_s
        return [Bottleneck(cap * (n - 1), 1.0 / (n - 1), "scale_up", PORT_NAMES["mesh"])]
    ranks = groups.reshape(-1)
    return scale_up_bottlenecks(fabric, ranks, ranks, peers / (n - 1))


def all_to_all_bottlenecks(fabric: Fabric, groups: IntArray, stride: int) -> list[Bottleneck]:
    """Every edge class's bottleneck when each group runs an all-to-all."""
    return scale_up_loads(fabric, groups, stride) + scale_out_loads(fabric, groups)
