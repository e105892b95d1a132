"""What each parallel group sees of the cluster, as plain :class:`CommDomain` values.

Ranks are ordered as Megatron-LM orders them (``RankGenerator``, order ``tp-cp-ep-dp-pp``): TP
innermost, then CP, DP, and PP outermost; EP groups are carved from the innermost ranks of the
data-parallel dimension (expert-data-parallel), so an EP group has stride tp x cp. A dimension of
size n and stride s forms the groups ``{b, b + s, ..., b + (n-1) s}``.

For each dimension every group runs its collective at once (ring for TP/CP/DP, all-to-all for EP,
send/recv for PP, see :mod:`planner.topology.flows`), the flows are routed over the cluster's
wiring and the busiest edge sets the per-rank bandwidth (:mod:`planner.topology.contention`), so
sharing is real: when every DP ring of a scalable unit leaves through a 2:1 spine, each gets half.

This is the search's hot path, so answers are cached: per cluster (by identity), per dimension
shape ``(size, stride, pattern, ranks)`` and per layout. A family is evaluated on one period of
its groups and of the wiring (at most ``lcm(n s, wiring period)`` ranks, not the whole cluster),
so a 100,000-accelerator cluster costs milliseconds per new shape and microseconds per repeat.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.specs.cluster import ClusterSpec
from planner.specs.comm import CP_FAMILY, CommDomain, traffic_domain
from planner.specs.layout import Layout
from planner.specs.result import PlacementEntry
from planner.topology.contention import family_domain
from planner.topology.flows import ALL_TO_ALL, P2P, RING, SHIFT
from planner.topology.structure import Fabric, fabric_of
from planner.units import GB

RANK_ORDER: tuple[str, ...] = ("tp", "cp", "dp", "pp")
"""Parallel dimensions from innermost (adjacent ranks) to outermost."""
PATTERN = {"tp": RING, "cp": SHIFT, "dp": RING, "pp": P2P, "ep": ALL_TO_ALL}
"""Communication pattern of each dimension's groups. Context parallelism's is ring attention's
neighbour sends (Megatron-LM's default ``cp_comm_type`` p2p, :func:`planner.cost.stage.
cp_comm_per_microbatch`); its all-gather and all-to-all variants run on the
``cp_collective`` and ``cp_all_to_all`` families of :func:`cp_level_families`
(:func:`planner.specs.comm.traffic_domain`)."""
MAX_CACHED = 200_000
"""Entries kept per cache before it is cleared (bounds memory in long sessions)."""

_CLUSTERS: dict[int, tuple[ClusterSpec, int]] = {}
_FABRIC_IDS: dict[Fabric, int] = {}
_FABRICS: list[Fabric] = []
_FAMILIES: dict[tuple[int, int, int, str, int], CommDomain] = {}
_LAYOUTS: dict[tuple[int, ...], dict[str, CommDomain]] = {}


def dimension_strides(layout: Layout) -> dict[str, tuple[int, int]]:
    """(size, stride) of each dimension under :data:`RANK_ORDER`.

    >>> dimension_strides(Layout(tp=4, pp=2, dp=2))["dp"]
    (2, 4)
    """
    sizes = {"tp": layout.tp, "cp": layout.cp, "dp": layout.dp, "pp": layout.pp}
    out: dict[str, tuple[int, int]] = {}
    stride = 1
    for dim in RANK_ORDER:
        out[dim] = (sizes[dim], stride)
        stride *= sizes[dim]
    return out


def families(layout: Layout) -> dict[str, tuple[int, int, str]]:
    """(size, stride, pattern) of every dimension, EP included (EP groups are ``etp`` apart:
    Megatron-Core's MoE parallel folding, see :func:`gradient_families`).

    >>> families(Layout(tp=8, dp=4, ep=4))["ep"]
    (4, 1, 'all_to_all')
    """
    out = {dim: (n, s, PATTERN[dim]) for dim, (n, s) in dimension_strides(layout).items()}
    out["ep"] = (layout.ep, layout.etp, PATTERN["ep"])
    return out


def gradient_families(layout: Layout) -> dict[str, tuple[int, int, str]]:
    """(size, stride, pattern) of the gradient-reduction groups: dense parameters over dp x cp
    (cp sits just inside dp), routed experts over the expert-data-parallel ranks.

    Experts follow Megatron-Core's MoE parallel folding (Liu et al. 2025, arXiv 2504.14960): the
    expert ranks are ordered etp, ep, edp, so an EP group is ``etp`` apart and the
    expert-data-parallel group (dp x cp x tp / (ep x etp) ranks) is ``etp x ep`` apart.

    >>> gradient_families(Layout(tp=2, dp=8, ep=4))["edp"]
    (4, 4, 'ring')
    """
    edp = max(1, layout.dp * layout.cp * layout.tp // (layout.ep * layout.etp))
    return {
        "dp_cp": (layout.dp * layout.cp, layout.tp, RING),
        "edp": (edp, layout.ep * layout.etp, RING),
    }


def shard_families(layout: Layout, shard_group: int | None) -> dict[str, tuple[int, int, str]]:
    """(size, stride, pattern) of hybrid sharding's groups of the dense state
    (``TrainWorkload.zero_shard_group``; PyTorch HSDP, Megatron's distributed-optimizer
    instances): ``dp_shard``, ``shard_group`` consecutive data-parallel ranks ``tp`` apart, and
    ``dp_replicate``, the replicas of one shard, ``shard_group`` x ``tp`` apart; none unless the
    group splits the dp x cp ranks into more than one shard.

    >>> shard_families(Layout(tp=2, dp=16), 8)["dp_replicate"]
    (2, 16, 'ring')
    >>> shard_families(Layout(dp=16), 16), shard_families(Layout(dp=16), None)
    ({}, {})
    """
    ranks = layout.dp * layout.cp
    if shard_group is None or shard_group in (1, ranks) or ranks % shard_group:
        return {}
    return {
        "dp_shard": (shard_group, layout.tp, RING),
        "dp_replicate": (ranks // shard_group, layout.tp * shard_group, RING),
    }


def cp_hierarchy_sizes(
    layout: Layout, per_domain: int, heads: int | None = None
) -> tuple[int, int]:
    """(all-to-all size, ring size) of hierarchical ``a2a+p2p`` context parallelism: the CP
    ranks inside one scale-up domain exchange heads, the domains pass K/V round a ring
    (Megatron Core ``hierarchical_context_parallel_sizes``). CP ranks follow TP in the rank
    order, so a domain of ``per_domain`` accelerators holds the largest divisor of cp that fits
    per_domain / tp; with ``heads`` (the head groups a TP rank's all-to-all can split,
    :func:`planner.search.rules.a2a_head_groups`) the largest that also divides it, since the
    all-to-all splits the rank's query and KV heads over its group: Llama 3 70B's 4 KV heads
    a rank at TP 2 run as 4 x 2 on a 72-GPU NVLink domain, where 8 x 1 cannot split them.

    >>> cp_hierarchy_sizes(Layout(tp=2, cp=8), 8), cp_hierarchy_sizes(Layout(tp=8, cp=4), 8)
    ((4, 2), (1, 4))
    >>> cp_hierarchy_sizes(Layout(tp=2, cp=8), 72), cp_hierarchy_sizes(Layout(tp=2, cp=8), 72, 4)
    ((8, 1), (4, 2))
    """
    room = max(1, per_domain // layout.tp)
    inner = max(
        d
        for d in range(1, layout.cp + 1)
        if layout.cp % d == 0 and d <= room and (heads is None or heads % d == 0)
    )
    return inner, layout.cp // inner


def cp_level_families(
    layout: Layout, per_domain: int, heads: int | None = None
) -> dict[str, tuple[int, int, str]]:
    """(size, stride, pattern) of the context-parallel families besides the ring of ``cp``
    itself: the same groups running an NCCL ring collective (``cp_collective``, the
    ``allgather`` variant) and an all-to-all (``cp_all_to_all``, the ``a2a`` variant,
    DeepSpeed-Ulysses), and the two levels of hierarchical context parallelism
    (:func:`cp_hierarchy_sizes`, ``heads`` as there): ``cp_a2a`` inside a scale-up domain,
    ``cp_ring`` across, whose K/V pass between neighbours as under ``p2p``; none without context
    parallelism.

    >>> cp_level_families(Layout(tp=2, cp=8), 8)["cp_ring"]
    (2, 8, 'shift')
    """
    if layout.cp == 1:
        return {}
    inner, outer = cp_hierarchy_sizes(layout, per_domain, heads)
    return {
        CP_FAMILY["allgather"]: (layout.cp, layout.tp, RING),
        CP_FAMILY["a2a"]: (layout.cp, layout.tp, ALL_TO_ALL),
        "cp_a2a": (inner, layout.tp, ALL_TO_ALL),
        "cp_ring": (outer, layout.tp * inner, SHIFT),
    }


def _fabric_id(cluster: ClusterSpec) -> int:
    """Small integer naming the cluster's wiring; the cluster object is kept so ids stay unique."""
    entry = _CLUSTERS.get(id(cluster))
    if entry is not None and entry[0] is cluster:
        return entry[1]
    fabric = fabric_of(cluster)
    if fabric not in _FABRIC_IDS:
        _FABRIC_IDS[fabric] = len(_FABRICS)
        _FABRICS.append(fabric)
    if len(_CLUSTERS) > 1024:
        _CLUSTERS.clear()
    _CLUSTERS[id(cluster)] = (cluster, _FABRIC_IDS[fabric])
    return _FABRIC_IDS[fabric]


def _family(fabric_id: int, size: int, stride: int, pattern: str, num_ranks: int) -> CommDomain:
    key = (fabric_id, size, stride, pattern, num_ranks)
    found = _FAMILIES.get(key)
    if found is None:
        if len(_FAMILIES) > MAX_CACHED:
            _FAMILIES.clear()
        found = family_domain(_FABRICS[fabric_id], size, stride, pattern, num_ranks)
        _FAMILIES[key] = found
    return found


def group_domain(
    cluster: ClusterSpec,
    size: int,
    stride: int,
    *,
    pattern: str = RING,
    num_ranks: int = 0,
) -> CommDomain:
    """The CommDomain of the groups of ``size`` ranks ``stride`` apart, all communicating at
    once among the first ``num_ranks`` ranks (0 = the whole cluster).

    >>> from planner.catalog import load_cluster
    >>> group_domain(load_cluster("hgx_h100x64"), 8, 8).tier
    'scale_out'
    """
    ranks = num_ranks or cluster.num_accelerators
    return _family(_fabric_id(cluster), size, stride, pattern, ranks)


def comm_domains(
    cluster: ClusterSpec, layout: Layout, cp_heads: int | None = None
) -> dict[str, CommDomain]:
    """CommDomain of every parallel dimension of ``layout`` on ``cluster`` (cached);
    ``cp_heads`` sizes hierarchical context parallelism's levels (:func:`cp_hierarchy_sizes`'s
    ``heads``; :func:`planner.search.rules.cp_a2a_heads` gives it for a model and workload).

    >>> from planner.catalog import load_cluster
    >>> comm_domains(load_cluster("hgx_h100x16"), Layout(tp=8, dp=2))["tp"].tier
    'scale_up'
    """
    fabric_id = _fabric_id(cluster)
    key = (fabric_id, layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp, cp_heads)
    found = _LAYOUTS.get(key)
    if found is None:
        if len(_LAYOUTS) > MAX_CACHED:
            _LAYOUTS.clear()
        ranks = layout.num_gpus
        shapes = {
            **families(layout),
            **gradient_families(layout),
            **cp_level_families(layout, _FABRICS[fabric_id].per_domain, cp_heads),
        }
        found = {
            dim: _family(fabric_id, size, stride, pattern, ranks)
            for dim, (size, stride, pattern) in shapes.items()
        }
        _LAYOUTS[key] = found
    return dict(found)


def placement_entry(domain: CommDomain, size: int, stride: int) -> PlacementEntry:
    """The PlacementEntry of groups of ``size`` ranks ``stride`` apart that see ``domain``."""
    return PlacementEntry(
        size=size,
        stride=stride,
        tier=domain.tier,
        within_domain=domain.tier != "scale_out",
        link=domain.description,
        bandwidth_GB_per_s=0.0 if domain.tier == "local" else domain.bandwidth_bytes_per_s / GB,
        example_group=[i * stride for i in range(min(size, 16))],
    )


GRADIENT_GROUPS: tuple[str, ...] = ("dp_cp", "edp", "dp_shard", "dp_replicate")
"""The placement entries of the gradient-reduction groups (:func:`gradient_families`,
:func:`shard_families`), which :func:`placement_shapes` adds where they are not the
data-parallel groups themselves."""


def placement_shapes(
    layout: Layout, shard_group: int | None = None
) -> dict[str, tuple[int, int, str]]:
    """(size, stride, pattern) of every group a plan's placement reports: each dimension's
    (:func:`families`), and the gradient-reduction groups the data-parallel synchronisation
    (``dp_comm``) is priced on where they are other groups than DP's: ``dp_cp`` with context
    parallelism (the dense gradients reduce over dp x cp ranks), ``edp`` with expert
    parallelism (the routed experts' over the expert-data-parallel ranks), and with hybrid
    sharding (``shard_group``) ``dp_shard`` and ``dp_replicate`` (:func:`shard_families`).

    >>> sorted(placement_shapes(Layout(tp=8, cp=8)))
    ['cp', 'dp', 'dp_cp', 'ep', 'pp', 'tp']
    >>> placement_shapes(Layout(tp=8, cp=8))["dp_cp"]
    (8, 8, 'ring')
    >>> "edp" in placement_shapes(Layout(tp=2, dp=8, ep=4))
    True
    """
    shapes = families(layout)
    grads = gradient_families(layout)
    if layout.cp > 1:
        shapes["dp_cp"] = grads["dp_cp"]
    if layout.ep > 1:
        shapes["edp"] = grads["edp"]
    return shapes | shard_families(layout, shard_group)


def shard_domains(
    cluster: ClusterSpec, layout: Layout, shard_group: int | None
) -> dict[str, CommDomain]:
    """The CommDomains of hybrid sharding's groups (:func:`shard_families`) on ``cluster``,
    every group communicating at once; none without hybrid sharding."""
    return {
        dim: group_domain(cluster, size, stride, pattern=pattern, num_ranks=layout.num_gpus)
        for dim, (size, stride, pattern) in shard_families(layout, shard_group).items()
    }


def placement_entries(
    domains: dict[str, CommDomain],
    layout: Layout,
    cp_comm: str = "p2p",
    shard_group: int | None = None,
) -> dict[str, PlacementEntry]:
    """The PlacementEntry of every group of :func:`placement_shapes` on its domain in
    ``domains`` (the nominal ones of :func:`placement`, or a placement's on a cluster state);
    the CP groups' as the workload's ``cp_comm`` uses them (:func:`traffic_domain`)."""
    return {
        dim: placement_entry(traffic_domain(domains, dim, cp_comm), size, stride)
        for dim, (size, stride, _) in placement_shapes(layout, shard_group).items()
    }


def placement(
    cluster: ClusterSpec, layout: Layout, cp_comm: str = "p2p", shard_group: int | None = None
) -> dict[str, PlacementEntry]:
    """Where each group of :func:`placement_shapes` lands on ``cluster``: tier, bottleneck link
    and the first group's ranks (:func:`placement_entries`); with ``shard_group`` (hybrid
    sharding) the shard and replica groups too."""
    domains = comm_domains(cluster, layout) | shard_domains(cluster, layout, shard_group)
    return placement_entries(domains, layout, cp_comm, shard_group)


def rank_table(
    cluster: ClusterSpec, layout: Layout, positions: Sequence[int] | None = None
) -> list[dict[str, int]]:
    """One row per rank: node, local index, domain, and per dimension the group index and the
    rank's position in it (for ``--placement`` and launchers). ``positions``: the accelerator
    of each rank when not the first ``num_gpus`` in order (a placement on a cluster state, or
    a sub-cluster spread over its domains).

    >>> from planner.catalog import load_cluster
    >>> row = rank_table(load_cluster("hgx_h100x16"), Layout(tp=4, dp=4))[5]
    >>> row["node"], row["local"], row["tp_group"], row["tp_index"], row["dp_group"]
    (0, 5, 1, 1, 1)
    """
    fabric = fabric_of(cluster)
    shapes = families(layout)
    rows = []
    for rank in range(layout.num_gpus):
        where = rank if positions is None else int(positions[rank])
        row = {
            "rank": rank,
            "node": where // fabric.per_node,
            "local": where % fabric.per_node,
            "domain": where // fabric.per_domain,
        }
        for dim, (size, stride, _) in shapes.items():
            row[f"{dim}_group"] = rank % stride + stride * (rank // (stride * size))
            row[f"{dim}_index"] = rank // stride % size
        rows.append(row)
    return rows
