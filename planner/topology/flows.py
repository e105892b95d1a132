"""Who sends to whom when every group of one parallel dimension runs its collective at once.

A dimension of ``size`` n and ``stride`` s forms groups ``{b, b + s, ..., b + (n-1) s}``. Its
traffic is a set of flows ``(src, dst, weight)``; a flow's weight is its share of one rank's
collective traffic, so a rank's flows weigh 1 in total. The patterns (NCCL's algorithms, the JAX
scaling book for TPUs):

* ``ring`` (all-reduce, reduce-scatter, all-gather). Inside one scale-up domain: a ring in rank
  order on a switch; every peer on a switchless mesh (RCCL drives all links, hardware.md 4);
  one bidirectional ring per torus axis the group spans, 1/(2 x axes) each (scaling book
  "sharding": T = V / (W_ici x axes)). Across domains NCCL runs c rings (channels), c = the
  fewest members any domain holds: member j of a domain sends 1/c to member j of the next
  domain (the same rail), and (c_b - 1)/c_b inside its domain (nccl-tests PERFORMANCE.md bus
  bandwidth; hardware.md section 9, 2 nodes x 8 GPUs ~ 8 NICs of bus bandwidth).
* ``all_to_all`` (MoE dispatch): every member sends 1/(n-1) to every other member.
* ``p2p`` (pipeline send/recv): member k sends to member k+1, weight 1.
* ``shift`` (ring attention's send/recv, context parallelism's ``p2p``): member k sends to member
  k+1 and the last to the first, weight 1 each: one point-to-point send per rank, which NCCL
  carries over the one path between the two GPUs (inside a domain the NVLink port, across domains
  one NIC), not striped over a domain's rails as a collective ring's channels are.
"""

from __future__ import annotations

import math

import numpy as np

from planner.topology.structure import Fabric, IntArray, box_axes

RING, ALL_TO_ALL, P2P, SHIFT = "ring", "all_to_all", "p2p", "shift"
PATTERNS = (RING, ALL_TO_ALL, P2P, SHIFT)
Flows = tuple[IntArray, IntArray, np.ndarray]


def window(fabric: Fabric, size: int, stride: int, num_ranks: int) -> int:
    """Ranks whose flows decide the answer: one period of groups and wiring together.

    Groups repeat every n s ranks and the wiring every :attr:`Fabric.period` ranks, so every edge
    load of the first ``lcm`` ranks recurs later, and a trailing partial window carries a subset
    of those flows (fewer, never more, per edge).

    >>> from planner.catalog import load_cluster
    >>> from planner.topology.structure import fabric_of
    >>> window(fabric_of(load_cluster("hgx_h100x4096")), 8, 8, 4096)
    256
    """
    span = size * stride
    return min(num_ranks, math.lcm(span, fabric.period)) // span * span


def group_matrix(num_ranks: int, size: int, stride: int) -> IntArray:
    """Ranks of every group (one row each) among the first ``num_ranks`` ranks.

    >>> group_matrix(8, 2, 2).tolist()
    [[0, 2], [1, 3], [4, 6], [5, 7]]
    """
    span = size * stride
    base = np.arange(num_ranks // span)[:, None] * span + np.arange(stride)[None, :]
    return base.reshape(-1, 1) + np.arange(size)[None, :] * stride


def _concat(parts: list[Flows]) -> Flows:
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))  # type: ignore[return-value]


def _pairs(rows: IntArray, weight: np.ndarray) -> Flows:
    """Every ordered pair inside each row, with the row's weight."""
    n = rows.shape[1]
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    src, dst = rows[:, i].reshape(-1), rows[:, j].reshape(-1)
    return src, dst, np.repeat(weight, n * (n - 1))


def _shift(rows: IntArray, weight: np.ndarray, shift: int) -> Flows:
    """Each member to the member ``shift`` places on, cyclically."""
    n = rows.shape[1]
    return rows.reshape(-1), np.roll(rows, -shift, axis=1).reshape(-1), np.repeat(weight, n)


def _axis_rings(
    rows: IntArray, weight: np.ndarray, axes: tuple[tuple[int, int, int], ...]
) -> Flows:
    """A bidirectional ring along each axis of a box, 1/(2 x axes) of the weight each way."""
    n = rows.shape[1]
    extents = [extent for _, extent, _ in axes]
    k = np.arange(n)
    digits, place = [], 1
    for extent in extents:
        digits.append((k // place) % extent)
        place *= extent
    parts: list[Flows] = []
    share = np.repeat(weight, n) / (2 * len(axes))
    place = 1
    for digit, extent in zip(digits, extents, strict=True):
        for step in (1, -1):
            neighbour = k + ((digit + step) % extent - digit) * place
            parts.append((rows.reshape(-1), rows[:, neighbour].reshape(-1), share))
        place *= extent
    return _concat(parts)


def domain_flows(fabric: Fabric, rows: IntArray, weight: np.ndarray, stride: int) -> Flows:
    """Ring-collective flows of groups (rows of equal length) that each sit in one domain."""
    n = rows.shape[1]
    if n == 1 or len(rows) == 0:
        return _concat([])
    if fabric.kind == "mesh":
        return _pairs(rows, weight / (n - 1))
    if fabric.kind != "torus":
        return _shift(rows, weight, 1)
    axes = box_axes(fabric.slice_shape, n, stride)
    if axes is None:
        return _concat([_shift(rows, weight / 2, 1), _shift(rows, weight / 2, -1)])
    return _axis_rings(rows, weight, axes)


def _blocks(fabric: Fabric, groups: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Per member: its block (run of members in one domain) start, size, and the group's c."""
    domain = fabric.domain(groups)
    new = np.ones_like(domain, dtype=bool)
    new[:, 1:] = domain[:, 1:] != domain[:, :-1]
    k = np.broadcast_to(np.arange(groups.shape[1]), groups.shape)
    start = np.maximum.accumulate(np.where(new, k, 0), axis=1)
    ends = np.where(np.roll(new, -1, axis=1) | (k == groups.shape[1] - 1), k, groups.shape[1])
    end = np.minimum.accumulate(ends[:, ::-1], axis=1)[:, ::-1]
    size = end - start + 1
    channels = size.min(axis=1, keepdims=True)
    return start, size, np.broadcast_to(channels, groups.shape)


def _crossing_ring(fabric: Fabric, groups: IntArray, stride: int) -> Flows:
    """NCCL rings over groups that span domains: rail-to-rail between domains, plus the ring
    inside each domain's block."""
    start, size, channels = _blocks(fabric, groups)
    n = groups.shape[1]
    k = np.broadcast_to(np.arange(n), groups.shape)
    position = k - start
    next_start = (start + size) % n
    rows_idx = np.broadcast_to(np.arange(groups.shape[0])[:, None], groups.shape)
    sends = position < channels
    dst = groups[rows_idx[sends], (next_start + position)[sends]]
    parts: list[Flows] = [(groups[sends], dst, 1.0 / channels[sends])]
    firsts = np.nonzero(position == 0)
    for block in sorted(set(size[firsts].tolist())):  # not np.unique: it imports numpy.ma
        if block < 2:
            continue
        chosen = size[firsts] == block
        rows = groups[firsts[0][chosen][:, None], firsts[1][chosen][:, None] + np.arange(block)]
        inner = np.full(len(rows), (block - 1) / block)
        parts.append(domain_flows(fabric, rows, inner, stride))
    return _concat(parts)


def family_flows(fabric: Fabric, size: int, stride: int, pattern: str, num_ranks: int) -> Flows:
    """All flows of one dimension's groups among the first ``num_ranks`` ranks (one window)."""
    groups = group_matrix(num_ranks, size, stride)
    ones = np.ones(len(groups))
    if pattern == P2P:
        return groups[:, :-1].reshape(-1), groups[:, 1:].reshape(-1), np.ones(groups[:, 1:].size)
    if pattern == SHIFT:
        return _shift(groups, ones, 1)
    if pattern == ALL_TO_ALL:
        return _pairs(groups, ones / (size - 1))
    domain = fabric.domain(groups)
    inside = domain[:, 0] == domain[:, -1]
    parts = [domain_flows(fabric, groups[inside], ones[inside], stride)]
    if not inside.all():
        parts.append(_crossing_ring(fabric, groups[~inside], stride))
    return _concat(parts)
