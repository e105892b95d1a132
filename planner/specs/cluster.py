"""A resolved cluster: a system, how many of its accelerators, and the scale-out fabric."""

from __future__ import annotations

from pydantic import Field, PositiveFloat, PositiveInt

from planner.specs.base import FrozenSpec
from planner.specs.hardware import AcceleratorSpec, FabricSpec, SystemSpec
from planner.specs.text import Name


class ClusterSpec(FrozenSpec):
    """What a cluster name (``hgx_b200x16``) or cluster YAML resolved to."""

    name: Name
    """The name as the user gave it (or the YAML file's ``name``)."""
    system: SystemSpec
    """The scale-up building block."""
    accelerator: AcceleratorSpec
    """The accelerator of the system."""
    fabric: FabricSpec
    """The scale-out fabric, after any what-if edits."""
    num_accelerators: PositiveInt
    """Accelerators in the cluster."""
    num_domains: PositiveInt
    """Scale-up domains (NVLink domains, racks, TPU slices) the accelerators are spread over."""
    accelerators_per_domain: PositiveInt
    """Accelerators used in each domain (N / num_domains)."""
    slice_shape: tuple[int, ...] | None = None
    """TPU slice torus shape (e.g. (4, 4, 4)); None for GPU systems."""
    price_per_gpu_hour_usd: PositiveFloat
    """Price of one accelerator-hour used for cost figures (USD)."""
    edits: dict[str, str] = Field(default_factory=dict)
    """What-if edits applied to the catalog system (knob -> value as given)."""

    @property
    def num_nodes(self) -> int:
        """Servers (hosts) in the cluster."""
        per_node = min(self.system.accelerators_per_node, self.accelerators_per_domain)
        return -(-self.num_accelerators // per_node)

    def describe(self) -> str:
        """One line saying what the name resolved to."""
        acc = self.accelerator
        shape = ""
        if self.slice_shape is not None:
            shape = " slice " + "x".join(str(a) for a in self.slice_shape)
        fab = self.fabric
        rail = "rail-optimized" if fab.rail_optimized else "ToR"
        over = f", {fab.oversubscription:g}:1 oversubscribed" if fab.oversubscription > 1 else ""
        return (
            f"{self.name}: {self.num_accelerators} x {acc.name} "
            f"({acc.hbm_GB:g} GB, {acc.hbm_bandwidth_GB_per_s / 1000:g} TB/s) in "
            f"{self.num_domains} {self.system.kind} domain(s) of {self.accelerators_per_domain}"
            f"{shape} [{self.system.name}]; scale-out {fab.nics_per_accelerator:g} x "
            f"{fab.nic_Gbps:g} Gb/s per accelerator, {rail}{over}"
        )


class ClusterEdits(FrozenSpec):
    """What-if edits of a catalog system (CLI flags ``--nic-gbps`` ...); None = keep."""

    nic_gbps: float | None = Field(default=None, ge=1.0, le=100_000.0)
    """NIC line rate (Gb/s; 1 Gb/s to 100 Tb/s)."""
    nics_per_gpu: float | None = Field(default=None, ge=0.01, le=64.0)
    """Scale-out NICs per accelerator (fractions: one NIC shared by several accelerators)."""
    oversubscription: float | None = Field(default=None, ge=1.0, le=1000.0)
    """Spine taper above a scalable unit (1 = non-blocking)."""
    rail_optimized: bool | None = None
    """Rail-optimized wiring (True) or top-of-rack (False)."""
    domain_size: PositiveInt | None = Field(default=None, le=2**20)
    """Accelerators per scale-up domain (e.g. an NVL36 or NVL144 what-if)."""
    price_per_gpu_hour: PositiveFloat | None = Field(default=None, le=10_000.0)
    """Price of one accelerator-hour (USD; at most 10,000)."""

    def as_dict(self) -> dict[str, str]:
        """The edits that are set, as text (for the plan's record)."""
        return {k: str(v) for k, v in self.model_dump().items() if v is not None}


class ClusterFile(FrozenSpec):
    """A cluster described in YAML: a catalog system, a size and optional edits."""

    name: Name
    """Name to report."""
    system: Name
    """Catalog system name (``hgx_h100``)."""
    num_accelerators: PositiveInt
    """Accelerators in the cluster (same spreading rule as ``<system>x<N>``)."""
    edits: ClusterEdits = Field(default_factory=ClusterEdits)
    """What-if edits of the system."""
