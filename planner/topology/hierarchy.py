"""What each parallel group sees of the cluster, from the two-tier hierarchy (scale-up domain,
scale-out fabric), as plain :class:`CommDomain` values.

Ranks are ordered as Megatron-LM orders them (``RankGenerator``, order ``tp-cp-ep-dp-pp``): TP
innermost, then CP, DP, and PP outermost. A group of size n whose members are ``stride`` ranks
apart spans ``stride * n`` consecutive ranks; it stays inside one scale-up domain when that span
fits in (and divides) the domain, and otherwise crosses the scale-out fabric, where each rank
injects through its own NIC(s) (rail-optimized: the same local GPU index of every server shares a
rail, so a cross-server group is one leaf hop away inside a scalable unit). A group that spans
more servers than one scalable unit crosses the spine and gets the NIC bandwidth divided by the
oversubscription ratio, since every rank of the unit sends across the taper at once.
"""

from __future__ import annotations

from planner.specs.cluster import ClusterSpec
from planner.specs.comm import CommDomain
from planner.specs.layout import Layout
from planner.specs.result import PlacementEntry
from planner.units import GB

RANK_ORDER: tuple[str, ...] = ("tp", "cp", "dp", "pp")
"""Parallel dimensions from innermost (adjacent ranks) to outermost."""


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


def scale_up_domain(cluster: ClusterSpec, size: int) -> CommDomain:
    """A group of ``size`` ranks inside one scale-up domain.

    NVSwitch / NVLink rack: every rank injects its full NVLink bandwidth (non-blocking switch).
    Switchless mesh (MI300X): a rank reaches each peer over one of ``num_links`` links, so a
    group of n uses n-1 of them (hardware.md section 4 trap). Torus (TPU ICI): a ring along a
    wrapped axis sends both ways, 2 links per rank (JAX scaling book, "sharding").
    """
    system = cluster.system
    link = system.scale_up
    bandwidth = link.bytes_per_s
    if system.kind == "mesh":
        bandwidth = link.bytes_per_s * min(size - 1, link.num_links) / link.num_links
    elif system.kind == "torus":
        bandwidth = link.bytes_per_s * 2
    return CommDomain(
        size=size,
        bandwidth_bytes_per_s=bandwidth,
        latency_s=link.latency_s,
        efficiency=link.efficiency,
        tier="scale_up",
        description=f"{system.kind} {bandwidth / GB:.0f} GB/s",
    )


def scale_out_domain(cluster: ClusterSpec, size: int, span_ranks: int) -> CommDomain:
    """A group of ``size`` ranks spread over ``span_ranks`` consecutive ranks across domains.

    Per-rank bandwidth is the accelerator's NIC bandwidth, divided by the oversubscription when
    the span exceeds one scalable unit (the spine taper is shared by every rank of the unit).
    """
    fabric = cluster.fabric
    bandwidth = fabric.bytes_per_s_per_accelerator
    per_node = min(cluster.system.accelerators_per_node, cluster.accelerators_per_domain)
    unit_ranks = fabric.scalable_unit_nodes * per_node
    crosses_spine = span_ranks > unit_ranks
    note = ""
    if crosses_spine and fabric.oversubscription > 1:
        bandwidth /= fabric.oversubscription
        note = f", {fabric.oversubscription:g}:1 spine"
    return CommDomain(
        size=size,
        bandwidth_bytes_per_s=bandwidth,
        latency_s=fabric.latency_s,
        efficiency=fabric.efficiency,
        tier="scale_out",
        description=f"{fabric.kind} {bandwidth / GB:.1f} GB/s per rank{note}",
    )


def group_domain(cluster: ClusterSpec, size: int, stride: int) -> CommDomain:
    """The CommDomain of one group of ``size`` ranks, ``stride`` apart."""
    if size == 1:
        return CommDomain(
            size=1,
            bandwidth_bytes_per_s=1.0,
            latency_s=0.0,
            efficiency=1.0,
            tier="local",
            description="no communication",
        )
    span = stride * (size - 1) + 1
    per_domain = cluster.accelerators_per_domain
    if stride * size <= per_domain and per_domain % (stride * size) == 0:
        return scale_up_domain(cluster, size)
    return scale_out_domain(cluster, size, span)


def comm_domains(cluster: ClusterSpec, layout: Layout) -> dict[str, CommDomain]:
    """CommDomain of every parallel dimension of ``layout`` on ``cluster``.

    EP groups are carved from the innermost ranks of the data-parallel dimension (Megatron's
    expert-data-parallel layout), so an EP group has stride tp x cp.
    """
    out = {
        dim: group_domain(cluster, size, stride)
        for dim, (size, stride) in dimension_strides(layout).items()
    }
    out["ep"] = group_domain(cluster, layout.ep, layout.tp * layout.cp)
    # Gradient reduction groups: dense parameters over dp x cp (cp sits just inside dp), routed
    # experts over the expert-data-parallel ranks (dp x cp x tp / (ep x etp), outside the EP group).
    out["dp_cp"] = group_domain(cluster, layout.dp * layout.cp, layout.tp)
    edp = max(1, layout.dp * layout.cp * layout.tp // (layout.ep * layout.etp))
    out["edp"] = group_domain(cluster, edp, layout.ep * layout.etp)
    return out


def placement(cluster: ClusterSpec, layout: Layout) -> dict[str, PlacementEntry]:
    """Where each dimension's groups land: tier, bottleneck link and the first group's ranks."""
    domains = comm_domains(cluster, layout)
    out: dict[str, PlacementEntry] = {}
    for dim, (size, stride) in dimension_strides(layout).items():
        dom = domains[dim]
        out[dim] = PlacementEntry(
            size=size,
            stride=stride,
            tier=dom.tier,
            within_domain=dom.tier != "scale_out",
            link=dom.description,
            bandwidth_GB_per_s=0.0 if dom.tier == "local" else dom.bandwidth_bytes_per_s / GB,
            example_group=[i * stride for i in range(min(size, 16))],
        )
    return out
