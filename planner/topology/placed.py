"""What each parallel group sees when the ranks sit on chosen accelerators (a placement), not on
the first N in rank order: the same flows and bottleneck rule as :mod:`hierarchy`, over
explicit groups.

A placement is an array ``positions`` (rank -> accelerator position of the cluster, see
:mod:`planner.topology.structure`). Groups are the logical groups of the layout (Megatron
order, :func:`planner.topology.hierarchy.families`) mapped through it; every group of a
dimension communicates at once and the busiest edge binds, so one group that straddles two
scale-up domains sets the pace of its whole dimension, as it does in a synchronous step.
"""

from __future__ import annotations

import numpy as np

from planner.specs.comm import CommDomain
from planner.specs.layout import Layout
from planner.topology.alltoall import all_to_all_bottlenecks
from planner.topology.contention import local_domain, route_bottlenecks, to_comm_domain
from planner.topology.flows import (
    ALL_TO_ALL,
    P2P,
    SHIFT,
    Flows,
    _concat,
    _crossing_ring,
    _shift,
    domain_flows,
    group_matrix,
)
from planner.topology.hierarchy import (
    cp_level_families,
    families,
    gradient_families,
    shard_families,
)
from planner.topology.structure import Fabric, IntArray


def nominal_positions(fabric: Fabric, num_ranks: int, per_domain: int) -> IntArray:
    """Positions of a job of ``num_ranks`` ranks spread ``per_domain`` to a domain over the
    first domains of ``fabric`` (how a sub-cluster such as 2 x 64 of two 72-GPU racks sits on
    them): rank r goes to domain ``r // per_domain``, slot ``r % per_domain`` of it.

    >>> from planner.catalog import load_cluster
    >>> from planner.topology.structure import fabric_of
    >>> fab = fabric_of(load_cluster("gb200_nvl72x144"))
    >>> nominal_positions(fab, 128, 64)[[63, 64, 127]].tolist()
    [63, 72, 135]
    """
    ranks = np.arange(num_ranks)
    return ranks // per_domain * fabric.per_domain + ranks % per_domain


def _stride_of(groups: IntArray) -> int | None:
    """The common step of groups that are arithmetic progressions (None otherwise)."""
    if groups.shape[1] < 2:
        return 1
    steps = np.diff(groups, axis=1)
    first = int(steps[0, 0])
    return first if first > 0 and bool((steps == first).all()) else None


def _ring_flows(fabric: Fabric, groups: IntArray) -> Flows:
    """Ring-collective flows of explicit groups (see :mod:`planner.topology.flows`)."""
    ones = np.ones(len(groups))
    domain = fabric.domain(groups)
    inside = (domain == domain[:, :1]).all(axis=1)
    stride = _stride_of(groups)
    parts: list[Flows] = []
    if inside.any():
        rows = groups[inside]
        if fabric.kind == "torus" and stride is None:  # not a box: a bidirectional ring
            parts += [_shift(rows, ones[inside] / 2, 1), _shift(rows, ones[inside] / 2, -1)]
        else:
            parts.append(domain_flows(fabric, rows, ones[inside], stride or 1))
    if not inside.all():
        parts.append(_crossing_ring(fabric, groups[~inside], stride or 1))
    return _concat(parts)


def explicit_domain(fabric: Fabric, groups: IntArray, pattern: str) -> CommDomain:
    """CommDomain of explicit groups (one row of positions each) all communicating at once."""
    size = groups.shape[1]
    if size == 1 or len(groups) == 0:
        return local_domain()
    domain = fabric.domain(groups)
    spanned = int(max(len(np.unique(row)) for row in domain[: min(len(domain), 4096)]))
    if pattern == ALL_TO_ALL:
        found = to_comm_domain(
            fabric, size, all_to_all_bottlenecks(fabric, groups, _stride_of(groups) or 1)
        )
        return found.model_copy(update={"num_domains": spanned})
    if pattern == P2P:
        flows: Flows = (
            groups[:, :-1].reshape(-1),
            groups[:, 1:].reshape(-1),
            np.ones(groups[:, 1:].size),
        )
    elif pattern == SHIFT:
        flows = _shift(groups, np.ones(len(groups)), 1)
    else:
        flows = _ring_flows(fabric, groups)
    return to_comm_domain(fabric, size, route_bottlenecks(fabric, flows))


def layout_groups(
    layout: Layout,
    per_domain: int = 0,
    shard_group: int | None = None,
    cp_heads: int | None = None,
) -> dict[str, tuple[IntArray, str]]:
    """Logical groups (rank matrix) and pattern of every dimension of ``layout``, the gradient
    families (dp_cp, edp) included, with ``per_domain`` (accelerators per scale-up domain)
    the levels of hierarchical context parallelism (the keys of
    :func:`planner.topology.comm_domains`), and with ``shard_group`` hybrid sharding's shard and
    replica groups (:func:`planner.topology.hierarchy.shard_families`); ``cp_heads`` as
    :func:`planner.topology.comm_domains`'s."""
    shapes = {**families(layout), **gradient_families(layout)}
    if per_domain:
        shapes.update(cp_level_families(layout, per_domain, cp_heads))
    shapes.update(shard_families(layout, shard_group))
    n = layout.num_gpus
    return {
        dim: (group_matrix(n, size, stride), pattern)
        for dim, (size, stride, pattern) in shapes.items()
    }


def placed_domains(
    fabric: Fabric,
    layout: Layout,
    positions: IntArray,
    shard_group: int | None = None,
    cp_heads: int | None = None,
) -> dict[str, CommDomain]:
    """CommDomain of every dimension of ``layout`` when rank r runs on ``positions[r]``
    (``shard_group``: hybrid sharding's groups too; ``cp_heads``: how hierarchical context
    parallelism splits; :func:`layout_groups`).

    >>> from planner.catalog import load_cluster
    >>> from planner.topology.structure import fabric_of
    >>> fab = fabric_of(load_cluster("hgx_h100x16"))
    >>> placed_domains(fab, Layout(tp=8, dp=2), np.arange(16))["tp"].tier
    'scale_up'
    """
    out = {}
    shapes = layout_groups(layout, fabric.per_domain, shard_group, cp_heads)
    for dim, (groups, pattern) in shapes.items():
        out[dim] = explicit_domain(fabric, positions[groups], pattern)
    return out


def groups_split(fabric: Fabric, layout: Layout, positions: IntArray) -> dict[str, int]:
    """Per dimension (tp, cp, dp, pp, ep), the groups whose members sit in several scale-up
    domains when rank r runs on ``positions[r]``.

    >>> from planner.catalog import load_cluster
    >>> from planner.topology.structure import fabric_of
    >>> fab = fabric_of(load_cluster("gb200_nvl72x144"))
    >>> groups_split(fab, Layout(tp=16, dp=9), np.arange(144))["tp"]
    1
    """
    out = {}
    for dim, (groups, _) in layout_groups(layout).items():
        if dim not in ("tp", "cp", "dp", "pp", "ep"):
            continue
        domain = fabric.domain(positions[groups])
        out[dim] = int((~(domain == domain[:, :1]).all(axis=1)).sum()) if groups.size else 0
    return out
