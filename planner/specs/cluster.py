"""A resolved cluster: a system, how many of its accelerators, and the scale-out fabric."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, PlainValidator, PositiveFloat, PositiveInt

from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat
from planner.specs.hardware import AcceleratorSpec, FabricSpec, SystemSpec
from planner.specs.text import Name, Text, check_name


def _name_or_mapping(value: object) -> str | dict[str, Any] | None:
    """A cluster file's ``accelerator``: a name or path (name characters only), or a mapping
    validated later as an AcceleratorSpec (so that its errors name its own keys)."""
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, str):
        return check_name(value)
    raise ValueError(
        f"must be a catalog name, a YAML path or a mapping, not {type(value).__name__}"
    )


NameOrMapping = Annotated[str | dict[str, Any] | None, PlainValidator(_name_or_mapping)]

ACCELERATOR_EDITS = ("hbm_gb", "hbm_tbps", "power_cap_w")
"""The ClusterEdits fields that change the accelerator (the rest change the system or fabric)."""


class BaseHardware(FrozenSpec):
    """The system and accelerator a cluster is built from, before any what-if edit, and where
    each came from when it is not the catalog's."""

    system: SystemSpec
    """The system as catalogued, or as its file gives it."""
    accelerator: AcceleratorSpec
    """The accelerator as catalogued or as its file gives it, with its family's calibration."""
    system_origin: Text = ""
    """Where the system came from, in words: '' = the catalog; else ``from '<file>'``."""
    accelerator_origin: Text = ""
    """Where the accelerator came from, in words: '' = the system's catalog accelerator; else
    ``from '<file>'``, ``inline in '<cluster file>'`` or ``from the catalog, named in ...``."""


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
    part_of: PositiveInt | None = None
    """When a search uses only the first ``num_accelerators`` of a larger cluster (``--gpus``,
    a cost or energy objective, a step-time target): that cluster's size; None = the whole
    cluster is used."""
    base: BaseHardware | None = None
    """The system and accelerator before the what-if edits, and their origins (None for a
    cluster built by hand): what a what-if sweep re-applies its knobs to."""

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
        used = f"{self.num_accelerators}"
        if self.part_of is not None and self.part_of != self.num_accelerators:
            used += f" of {self.part_of}"
        line = (
            f"{self.name}: {used} x {acc.name} "
            f"({acc.hbm_GB:g} GB, {acc.hbm_bandwidth_GB_per_s / 1000:g} TB/s) in "
            f"{self.num_domains} {self.system.kind} domain(s) of {self.accelerators_per_domain}"
            f"{shape} [{self.system.name}]; scale-out {fab.nics_per_accelerator:g} x "
            f"{fab.nic_Gbps:g} Gb/s per accelerator, {rail}{over}"
        )
        return "; ".join([line, *self.changes()])

    def changes(self) -> list[str]:
        """What differs from the catalog, in words: the origin of a system or accelerator that
        is not the catalog's, and every what-if edit (an accelerator edit with what it
        replaced). Empty for a catalog cluster as named."""
        out: list[str] = []
        base = self.base
        if base is not None and base.system_origin:
            out.append(f"system {self.system.name} {base.system_origin}")
        if base is not None and base.accelerator_origin:
            out.append(f"accelerator {self.accelerator.name} {base.accelerator_origin}")
        if self.edits:
            out.append("edits " + ", ".join(self._edit_text(k, v) for k, v in self.edits.items()))
        return out

    def _edit_text(self, knob: str, value: str) -> str:
        try:
            text = f"{knob}={float(value):g}"
        except ValueError:  # rail_optimized: True / False
            text = f"{knob}={value}"
        if self.base is None or knob not in ACCELERATOR_EDITS:
            return text
        rated, acc = self.base.accelerator, self.accelerator
        if knob == "hbm_gb":
            return f"{text} (was {rated.hbm_GB:g} GB)"
        if knob == "hbm_tbps":
            return f"{text} (was {rated.hbm_bandwidth_GB_per_s / 1000:g} TB/s)"
        scale = acc.peak_TFLOP_per_s[NumberFormat.BF16] / rated.peak_TFLOP_per_s[NumberFormat.BF16]
        return f"{text} (TDP {rated.tdp_W:g} W; FLOP/s peaks x{scale:.3f})"


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
    hbm_gb: float | None = Field(default=None, ge=1.0, le=4096.0)
    """HBM capacity per accelerator as the spec sheet quotes it (GB; 1 to 4,096). The memory the
    driver exposes scales by the same ratio."""
    hbm_tbps: float | None = Field(default=None, ge=0.1, le=100.0)
    """HBM bandwidth per accelerator (TB/s = 1e12 bytes/s; 0.1 to 100)."""
    power_cap_w: float | None = Field(default=None, gt=0, le=100_000.0)
    """Power limit per accelerator (W, as ``nvidia-smi -pl`` sets it): from a quarter of the TDP
    (topologies/power_cap.yaml) up to the TDP. It lowers the FLOP/s peaks (not the HBM) and is
    the power the energy figures use."""

    def as_dict(self) -> dict[str, str]:
        """The edits that are set, as text (for the plan's record)."""
        return {k: str(v) for k, v in self.model_dump().items() if v is not None}


class ClusterFile(FrozenSpec):
    """A cluster described in YAML: a catalog system, a size and optional edits."""

    name: Name
    """Name to report."""
    system: Name
    """Catalog system name (``hgx_h100``), or a system YAML file (a path ending in .yaml or .yml,
    relative to this file; a name's characters) with the schema of ``topologies/systems/*.yaml``."""
    num_accelerators: PositiveInt
    """Accelerators in the cluster (same spreading rule as ``<system>x<N>``)."""
    accelerator: NameOrMapping = None
    """The accelerator, instead of the system's: a catalog name, an accelerator YAML file (a
    path ending in .yaml or .yml, relative to this file; a name's characters) or the accelerator
    itself as a mapping, with the schema of ``topologies/accelerators/*.yaml``. None = the
    system's."""
    edits: ClusterEdits = Field(default_factory=ClusterEdits)
    """What-if edits of the system."""
