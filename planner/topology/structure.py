"""Where every rank sits: the cluster's wiring as arithmetic (no graph).

Ranks are numbered domain by domain (a domain is an NVSwitch board, an NVLink rack, a mesh
board or a TPU slice), node by node inside a domain. The scale-out fabric hangs below it:

* every node (server, tray, TPU host) has ``accelerators_per_node / per_nic`` NICs; a NIC serves
  ``per_nic`` accelerators (more than one when ``nics_per_accelerator < 1``, as TPU hosts);
* rail-optimized (NVIDIA SuperPOD): NIC ``i`` of every node of a scalable unit (SU) plugs into
  the leaf of rail ``i`` of that SU, and leaves join through the spine; the leaf up-links are
  sized ``SU NICs x NIC rate / oversubscription`` (hardware.md section 8);
* top-of-rack: every node has a ToR switch (non-blocking up-links), the ToRs of an SU meet at a
  pod switch, and pods join through the spine with the same taper;
* ``planes`` copies of that leaf/spine network each carry ``1/planes`` of every NIC.

The spine of each plane is one aggregated, internally non-blocking switch (the usual fat-tree
abstraction), so a flow has exactly one path per plane. The same :class:`Fabric` drives the graph
builders, the fast contention counter and the metrics, so all three place ranks identically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.specs.cluster import ClusterSpec
from planner.units import GB, GBIT

IntArray = np.ndarray


@dataclass(frozen=True, slots=True)
class Fabric:
    """Plain numbers describing one cluster's wiring (hashable: the cache key of its costs)."""

    kind: str
    """Scale-up wiring: nvswitch, nvlink_rack, mesh or torus (SystemSpec.kind)."""
    num_accelerators: int
    """Accelerators in the cluster N."""
    per_domain: int
    """Accelerators per scale-up domain D."""
    per_node: int
    """Accelerators per node (server, tray, TPU host) g."""
    per_nic: int
    """Accelerators sharing one NIC q (1 when every accelerator has its own)."""
    nic_bytes_per_s: float
    """Bandwidth of one NIC node per direction (bytes/s): nics_per_accelerator x rate x q."""
    unit_nodes: int
    """Nodes per scalable unit U."""
    rail_optimized: bool
    """Rail-optimized leaves (True) or top-of-rack switches (False)."""
    oversubscription: float
    """Leaf (rail) or pod (ToR) up-link taper into the spine."""
    planes: int
    """Independent copies of the leaf/spine network."""
    link_bytes_per_s: float
    """Scale-up capacity per edge per direction: accelerator-switch port (switched), one mesh
    link (mesh: headline / num_links), one ICI link (torus)."""
    up_latency_s: float
    """Per-step latency of the scale-up tier (s)."""
    up_efficiency: float
    """Fraction of scale-up line rate a collective reaches."""
    out_latency_s: float
    """Per-step latency of the scale-out tier (s)."""
    out_efficiency: float
    """Fraction of NIC line rate a collective reaches."""
    fabric_kind: str
    """Scale-out technology (infiniband, roce, dcn)."""
    slice_shape: tuple[int, ...] = ()
    """Torus extents, axis 0 fastest-varying in rank order; () when not a torus."""
    wrap: tuple[bool, ...] = ()
    """Per torus axis: whether it has wrap-around links."""

    @property
    def num_domains(self) -> int:
        """Scale-up domains."""
        return -(-self.num_accelerators // self.per_domain)

    @property
    def num_nodes(self) -> int:
        """Nodes (servers, trays, hosts)."""
        return -(-self.num_accelerators // self.per_node)

    @property
    def num_nics(self) -> int:
        """NIC nodes (the last may serve fewer accelerators than ``per_nic``)."""
        return -(-self.num_accelerators // self.per_nic)

    @property
    def nics_per_node(self) -> int:
        """NIC nodes per node = rails per scalable unit."""
        return self.per_node // self.per_nic

    @property
    def num_units(self) -> int:
        """Scalable units (the last may be partly filled)."""
        return -(-self.num_nodes // self.unit_nodes)

    @property
    def leaf_up_bytes_per_s(self) -> float:
        """Rail leaf to spine (all planes together): U NICs x rate / oversubscription."""
        return self.unit_nodes * self.nic_bytes_per_s / self.oversubscription

    @property
    def tor_up_bytes_per_s(self) -> float:
        """ToR to pod (all planes): non-blocking, the node's NICs."""
        return self.nics_per_node * self.nic_bytes_per_s

    @property
    def pod_up_bytes_per_s(self) -> float:
        """Pod to spine (all planes): the SU's NICs / oversubscription."""
        return self.unit_nodes * self.nics_per_node * self.nic_bytes_per_s / self.oversubscription

    @property
    def period(self) -> int:
        """Ranks after which the wiring repeats (domains, nodes and scalable units)."""
        return math.lcm(self.per_domain, self.per_node * self.unit_nodes)

    @property
    def scale_out_bytes_per_s(self) -> float:
        """Scale-out bandwidth per accelerator (bytes/s)."""
        return self.nic_bytes_per_s / self.per_nic

    @property
    def has_spine(self) -> bool:
        """Whether some cross-node flow must climb above the first switch."""
        if self.rail_optimized:
            return self.num_units * self.nics_per_node > 1
        return self.num_units > 1

    def domain(self, ranks: IntArray) -> IntArray:
        """Scale-up domain of each rank."""
        return ranks // self.per_domain

    def node(self, ranks: IntArray) -> IntArray:
        """Global node index of each rank."""
        return ranks // self.per_node

    def nic(self, ranks: IntArray) -> IntArray:
        """Global NIC index of each rank."""
        return ranks // self.per_nic

    def leaf(self, ranks: IntArray) -> IntArray:
        """First switch above the NIC: rail leaf ``unit * rails + rail`` or the node's ToR."""
        node = self.node(ranks)
        if not self.rail_optimized:
            return node
        rail = (ranks % self.per_node) // self.per_nic
        return (node // self.unit_nodes) * self.nics_per_node + rail

    def unit(self, ranks: IntArray) -> IntArray:
        """Scalable unit of each rank."""
        return self.node(ranks) // self.unit_nodes

    def coords(self, ranks: IntArray) -> IntArray:
        """Torus coordinates (len(ranks) x num_dims), axis 0 fastest."""
        pos = ranks % self.per_domain
        out = np.empty((len(ranks), len(self.slice_shape)), dtype=np.int64)
        for axis, extent in enumerate(self.slice_shape):
            out[:, axis] = pos % extent
            pos = pos // extent
        return out


def torus_wraparound(shape: tuple[int, ...], multiple: int, num_dims: int) -> tuple[bool, ...]:
    """Which torus axes have wrap-around links.

    3-D TPUs (v4, v5p, TPU7x) close the torus through optical switches only on slices built of
    whole 4x4x4 cubes, so every axis must be a multiple of ``multiple``; 2-D TPUs (v5e, v6e) wrap
    each full-length axis on its own (Google Cloud TPU v4 / v5p / v5e docs; hardware.md section 6).

    >>> torus_wraparound((4, 4, 4), 4, 3), torus_wraparound((2, 4, 4), 4, 3)
    ((True, True, True), (False, False, False))
    >>> torus_wraparound((8, 16), 16, 2)
    (False, True)
    """
    if num_dims == 3 and any(a % multiple for a in shape):
        return tuple(False for _ in shape)
    return tuple(a >= multiple and a % multiple == 0 for a in shape)


def box_axes(
    shape: tuple[int, ...], size: int, stride: int
) -> tuple[tuple[int, int, int], ...] | None:
    """(axis, extent, step) of the sub-box a group of ``size`` ranks ``stride`` apart occupies on a
    torus of ``shape`` (axis 0 fastest), or None when the group is not an aligned box.

    >>> box_axes((4, 4, 4), 64, 1)
    ((0, 4, 1), (1, 4, 1), (2, 4, 1))
    >>> box_axes((4, 4, 4), 4, 2)
    ((0, 2, 2), (1, 2, 1))
    >>> box_axes((4, 4, 4), 2, 3) is None
    True
    """
    axes: list[tuple[int, int, int]] = []
    prefix, step_ranks, remaining = 1, stride, size
    for axis, extent in enumerate(shape):
        if remaining == 1:
            break
        if step_ranks % (prefix * extent) == 0:
            prefix *= extent
            continue
        if step_ranks % prefix or extent % (step_ranks // prefix):
            return None
        step = step_ranks // prefix
        span = extent // step
        count = min(remaining, span)
        if (remaining < span and extent % (step * remaining)) or remaining % count:
            return None
        if count > 1:
            axes.append((axis, count, step))
        remaining //= count
        step_ranks = prefix * extent
        prefix *= extent
    return tuple(axes) if remaining == 1 else None


def fabric_of(cluster: ClusterSpec) -> Fabric:
    """The :class:`Fabric` of a cluster (catalog numbers converted once to SI)."""
    system, fabric = cluster.system, cluster.fabric
    per_domain = cluster.accelerators_per_domain
    per_node = math.gcd(per_domain, system.accelerators_per_node)
    share = fabric.nics_per_accelerator
    per_nic = math.gcd(per_node, max(1, round(1 / share))) if share < 1 else 1
    link = system.scale_up
    shape: tuple[int, ...] = ()
    wrap: tuple[bool, ...] = ()
    link_bytes_per_s = link.bytes_per_s
    if system.kind == "mesh":
        link_bytes_per_s = link.bytes_per_s / link.num_links
    if system.torus is not None and cluster.slice_shape is not None:
        shape = tuple(cluster.slice_shape)
        wrap = torus_wraparound(shape, system.torus.wraparound_multiple, system.torus.num_dims)
    return Fabric(
        kind=system.kind,
        num_accelerators=cluster.num_accelerators,
        per_domain=per_domain,
        per_node=per_node,
        per_nic=per_nic,
        nic_bytes_per_s=fabric.nic_Gbps * GBIT * share * per_nic,
        unit_nodes=fabric.scalable_unit_nodes,
        rail_optimized=fabric.rail_optimized,
        oversubscription=fabric.oversubscription,
        planes=fabric.planes,
        link_bytes_per_s=link_bytes_per_s,
        up_latency_s=link.latency_s,
        up_efficiency=link.efficiency,
        out_latency_s=fabric.latency_s,
        out_efficiency=fabric.efficiency,
        fabric_kind=fabric.kind,
        slice_shape=shape,
        wrap=wrap,
    )


def describe_rate(bytes_per_s: float) -> str:
    """``'50.0 GB/s'``.

    >>> describe_rate(5e10)
    '50.0 GB/s'
    """
    return f"{bytes_per_s / GB:.1f} GB/s"
