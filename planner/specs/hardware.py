"""Accelerator, scale-up system and scale-out fabric specs (the hardware catalog's schema).

YAML keys carry their unit (``hbm_GB``, ``peak_TFLOP_per_s``); the SI properties below convert
them once with the constants of :mod:`planner.units`. Marketing figures are SI (GB, TB/s).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Literal, NamedTuple

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat
from planner.specs.text import Label, Name, Text
from planner.specs.trust import HeldoutRecord
from planner.units import GB, GBIT, TFLOP, US, GiB, MiB

Fraction = float

LinkKind = Literal["scale_up", "scale_out"]
"""The two link tiers a collective can be bottlenecked on: the system's scale-up link, or the
scale-out fabric."""
DeviceNoun = Literal["GPU", "chip"]
"""What reports call one accelerator (``AcceleratorSpec.device_noun``)."""


MIN_PLAUSIBLE_FRACTION = 0.01
"""Smallest fraction of a spec-sheet peak (FLOP/s, HBM or link bandwidth) a catalog entry or a
calibration overlay may claim. Published kernels reach 30-90% of peak (topologies/accelerators
sources); a factor below 1% is a broken measurement (a CPU dry run measures ~1e-6) or a typo,
and would print step times of hundreds of digits. A ``calibrate --measure --dry-run`` overlay
may hold such values: it is refused by ``--calibration`` instead."""


def check_fraction(where: str, value: float, *, floor: float = MIN_PLAUSIBLE_FRACTION) -> None:
    """ValueError unless ``floor <= value <= 1`` (the plausible range of an efficiency).

    >>> check_fraction("gemm.bf16", 0.6)
    >>> check_fraction("gemm.bf16", 1e-300)
    Traceback (most recent call last):
    ...
    ValueError: gemm.bf16 must be in [0.01, 1] (a fraction of the peak), got 1e-300
    """
    if not floor <= value <= 1.0:
        raise ValueError(
            f"{where} must be in [{floor:g}, 1] (a fraction of the peak), got {value:g}"
        )


class AcceleratorEfficiency(FrozenSpec):
    """Achievable fractions of the spec-sheet peaks: the calibrated, per-accelerator factors."""

    gemm: dict[NumberFormat, float] = Field(default_factory=dict)
    """Fraction of the dense peak a large GEMM reaches, per input format (0-1]. A format missing
    here uses the bf16 value."""
    attention: float = Field(gt=0, le=1)
    """Fraction of the bf16 dense peak reached by fused (flash) attention kernels (0-1]."""
    hbm: float = Field(gt=0, le=1)
    """Fraction of the HBM bandwidth reached by streaming (memory-bound) kernels (0-1]."""
    decode_hbm: float | None = Field(default=None, gt=0, le=1)
    """Fraction of the HBM bandwidth that serving's weight and KV-cache streaming reaches
    (decode GEMVs and paged-attention reads over large contiguous buffers, kernels launched from
    CUDA graphs); None = ``hbm``, which is fitted on training's mix of short elementwise kernels.
    Fixed costs (per kernel, per step) are separate terms, not folded in here."""
    expert_gemm: float = Field(gt=0, le=1)
    """Efficiency of grouped (MoE expert) GEMMs relative to a dense GEMM of the same total size:
    many small per-expert problems in one launch, ragged token counts, permuted inputs (0-1]."""
    overlap_contention: float = Field(ge=0, le=1)
    """Fraction of a communication's overlapped time that still slows the compute it hides
    behind (NCCL kernels occupy SMs and HBM bandwidth): 0 = free overlap, 1 = no overlap."""
    kernel_overhead_us: float = Field(ge=0, le=100)
    """Fixed time of one GPU kernel beyond its roofline: launch latency and the partial last wave
    of thread blocks (microseconds). Makes small GEMMs (after TP/EP sharding) reach a lower
    fraction of peak: t = max(FLOPs / (P eta), bytes / W) + t_kernel."""
    moe_sync_overhead_us: float = Field(default=0.0, ge=0, le=20000)
    """Host-side time per MoE layer per micro-batch (forward + backward) when the dropless token
    dispatcher synchronises with the host (microseconds): it copies the per-expert token counts
    to the CPU to size the all-to-all and the grouped GEMM, so the launch queue drains and the
    layer's remaining kernel launches are exposed. 0 = not calibrated. The same figure prices a
    pipeline receive that reads its tensor's metadata on the host, the same mid-step stall
    (:func:`planner.cost.stage.pp_sync_time`, Nanotron)."""
    step_overhead_ms: float | None = Field(default=None, ge=0, le=1000)
    """Fixed time of one optimizer step beyond its micro-batches and modelled communication
    (milliseconds): an eager PyTorch training loop synchronises with the host every step
    (Megatron-LM's gradient-norm ``.item()`` in ``clip_grad_norm_fp32``, the loss it logs), after
    which the accelerator idles while the CPU launches the optimizer's kernels and the next
    iteration's first ones; plus the step's small latency-bound collectives (gradient norm,
    loss) and whatever data loading the compute does not hide. None = unknown: a family without a
    fit takes the fitted families' mean (:mod:`planner.catalog.transfer`); a catalog 0 says the
    step has no such cost (XLA's compiled step on TPU)."""
    memory_reserve_GB: float = Field(ge=0)
    """Memory per accelerator not available to tensors: CUDA/driver context, communicator
    buffers, allocator fragmentation (GB, 1e9 bytes)."""

    @model_validator(mode="after")
    def _fractions_in_range(self) -> AcceleratorEfficiency:
        for fmt, value in self.gemm.items():
            check_fraction(f"efficiency.gemm.{fmt}", value)
        for key in ("attention", "hbm", "expert_gemm"):
            check_fraction(f"efficiency.{key}", getattr(self, key))
        if self.decode_hbm is not None:
            check_fraction("efficiency.decode_hbm", self.decode_hbm)
        return self


class GemmTiling(NamedTuple):
    """How a GPU's GEMM library covers a GEMM's output: each compute unit (SM, CU) computes one
    ``tile_rows`` x ``tile_cols`` output tile at a time, and the tiles run in waves of
    ``compute_units`` (:func:`planner.cost.gemm.wave_efficiency`)."""

    compute_units: int
    """SMs (NVIDIA) or CUs (AMD) the tiles are spread over."""
    tile_rows: int
    """Output rows of one unit's tile."""
    tile_cols: int
    """Output columns of one unit's tile."""


HBM_MIB_PER_GB_RANGE = (0.9, 1.05)
"""Bounds of ``hbm_total_MiB / (hbm_GB x 1024)`` an accelerator spec may have: every catalogued
part is inside (0.94-1.0), and a copy whose ``hbm_GB`` was edited without its driver total
(96 against 81,559 MiB: 0.83) is refused rather than planned at the old capacity."""


class AcceleratorSpec(FrozenSpec):
    """One accelerator model as sold (one GPU, or one TPU chip)."""

    name: Name
    """Catalog name, lower case (``h100_sxm``)."""
    family: Name
    """Architecture family (ampere, hopper, blackwell, cdna3, ...): accelerators of one family
    share the calibration fitted on any of them (``topologies/calibration/<family>.yaml``)."""
    vendor: Name
    """Vendor name (NVIDIA, AMD, Google)."""
    device_noun: DeviceNoun = "GPU"
    """What reports call one of these: ``GPU``, or ``chip`` for a TPU (Google sizes TPU jobs
    and slices in chips, ``v5p-512`` = 256 chips). Words only: JSON field names keep ``gpu``
    (``num_gpus``, ``tokens_per_s_per_gpu``) whatever the part."""
    description: Text = ""
    """Free text: SKU, memory type, form factor."""
    hbm_GB: PositiveFloat
    """Device memory usable by the runtime (GB = 1e9 bytes)."""
    hbm_total_MiB: PositiveInt | None = None
    """Device memory as the driver reports it (nvidia-smi ``memory.total``, MiB = 2**20 bytes);
    vendors' "80 GB" parts hold 80 GiB, so this is what allocation limits use. None = use
    ``hbm_GB``."""
    hbm_bandwidth_GB_per_s: PositiveFloat
    """Device memory bandwidth (GB/s = 1e9 bytes/s)."""
    peak_TFLOP_per_s: dict[NumberFormat, PositiveFloat]
    """Dense (no 2:4 sparsity) tensor-core peak per input format (TFLOP/s). A format that is
    absent is not supported by the hardware."""
    tdp_W: PositiveFloat
    """Thermal design power of one accelerator (W)."""
    bf16_flops_per_exp: PositiveFloat | None = None
    """Dense bf16 tensor-core FLOPs per exponential (MUFU.EX2 result), per clock per SM: how
    many matmul FLOPs per softmax score flash attention needs before the special-function units
    stop bounding it (:func:`planner.cost.compute.attention_exp_bound_factors`). None: no bound
    modelled."""
    flash2_attention_relative: PositiveFloat | None = Field(default=None, le=1.0)
    """Speed of FlashAttention-2 relative to the vendor's fused attention (cuDNN, FA3) on this
    part, for frameworks that run FA2 (``TrainWorkload.attention_kernel``); None = FA2 is the
    best kernel here (Ampere) or not catalogued."""
    compute_units: PositiveInt | None = None
    """Streaming multiprocessors (NVIDIA) or compute units (AMD) the GEMM tiles are spread
    over. None (TPUs, whose MXUs work through a GEMM's tiles in sequence): no wave model."""
    gemm_tile: tuple[PositiveInt, PositiveInt] | None = None
    """Output tile (rows, columns) one compute unit computes at a time in the kernel library's
    large-GEMM kernels (:class:`GemmTiling`); None: no tile or wave quantization modelled."""
    compute_capability: str | None = Field(default=None, pattern=r"^[0-9]{1,2}\.[0-9]$")
    """CUDA compute capability (``"9.0"`` Hopper, ``"10.0"`` B200 and GB200, ``"10.3"`` B300 and
    GB300), which decides the kernels a framework can run on the part (e.g. Transformer Engine's
    fused grouped MLP needs 10.x, :func:`planner.cost.gemm.runs_fused_grouped_mlp`); None for
    accelerators that are not CUDA GPUs or not catalogued."""
    host_link_GB_per_s: PositiveFloat | None = None
    """Device-to-host bandwidth per direction (GB/s): PCIe, NVLink-C2C to a Grace CPU, the TPU's
    host PCIe; what activation offload (``TrainWorkload.activation_offload_fraction``) moves
    over. None = not catalogued (offload is then refused)."""
    efficiency: AcceleratorEfficiency
    """Achievable fractions of the peaks (calibrated data)."""
    sources: dict[Name, Text]
    """Where each number came from: keys name the field (``hbm_GB``, ``peak_TFLOP_per_s``, ...)."""
    calibration: CalibrationRecord | None = None
    """The calibration overlay applied to ``efficiency`` (None = catalog priors only); set by the
    catalog loader, not written in the accelerator YAML."""

    @model_validator(mode="after")
    def _has_bf16_and_sources(self) -> AcceleratorSpec:
        if NumberFormat.BF16 not in self.peak_TFLOP_per_s:
            raise ValueError("peak_TFLOP_per_s must give a bf16 peak")
        given = [k for k in ("compute_units", "gemm_tile") if getattr(self, k) is not None]
        if len(given) == 1:
            raise ValueError(f"{given[0]} needs its pair: the tile model takes compute_units and "
                             "gemm_tile together")  # fmt: skip
        if self.hbm_total_MiB is not None:
            expected = self.hbm_GB * GiB / MiB  # the "80 GB" figures are GiB-based
            if (
                not HBM_MIB_PER_GB_RANGE[0]
                <= self.hbm_total_MiB / expected
                <= HBM_MIB_PER_GB_RANGE[1]
            ):
                raise ValueError(
                    f"hbm_total_MiB {self.hbm_total_MiB:,} (the driver's total) does not match "
                    f"hbm_GB {self.hbm_GB:g} (about {expected:,.0f} MiB: the GB figures are "
                    f"GiB-based): one of them is stale; correct it, or drop hbm_total_MiB to "
                    f"take the total from hbm_GB"
                )
        required = ("hbm_GB", "hbm_bandwidth_GB_per_s", "peak_TFLOP_per_s", "tdp_W", "efficiency")
        if self.compute_capability is not None:
            given.append("compute_capability")
        for key in (*required, *given):
            if not self.sources.get(key):
                raise ValueError(f"sources.{key} is missing: every number needs a source")
        return self

    @property
    def gemm_tiling(self) -> GemmTiling | None:
        """The tile and wave model's data (``compute_units`` and ``gemm_tile``), None without
        both."""
        if self.compute_units is None or self.gemm_tile is None:
            return None
        return GemmTiling(self.compute_units, *self.gemm_tile)

    @property
    def compute_capability_major(self) -> int | None:
        """The major version of ``compute_capability`` (10 for ``"10.3"``), None without one."""
        if self.compute_capability is None:
            return None
        return int(self.compute_capability.split(".")[0])

    @property
    def hbm_bytes(self) -> float:
        """Device memory in bytes."""
        return self.hbm_GB * GB

    @property
    def hbm_bytes_per_s(self) -> float:
        """Device memory bandwidth in bytes/s."""
        return self.hbm_bandwidth_GB_per_s * GB

    @property
    def decode_stream_bytes_per_s(self) -> float:
        """HBM bytes/s serving's weight and KV streaming reaches: bandwidth x ``decode_hbm``
        (``hbm`` when the catalog gives no serving figure)."""
        eff = self.efficiency
        return self.hbm_bytes_per_s * (eff.decode_hbm if eff.decode_hbm is not None else eff.hbm)

    @property
    def total_memory_bytes(self) -> float:
        """Device memory the driver exposes (bytes): ``hbm_total_MiB`` when known, else hbm_GB."""
        if self.hbm_total_MiB is not None:
            return self.hbm_total_MiB * MiB
        return self.hbm_GB * GB

    @property
    def usable_memory_bytes(self) -> float:
        """Memory left for tensors after the runtime reserve (bytes)."""
        return self.total_memory_bytes - self.efficiency.memory_reserve_GB * GB

    def supports(self, fmt: NumberFormat) -> bool:
        """Whether the tensor cores run this format natively."""
        return fmt in self.peak_TFLOP_per_s

    def peak_flop_per_s(self, fmt: NumberFormat) -> float:
        """Dense peak FLOP/s for GEMMs whose inputs are in ``fmt``."""
        return self.peak_TFLOP_per_s[fmt] * TFLOP

    def gemm_efficiency(self, fmt: NumberFormat) -> float:
        """Fraction of the dense peak reached by large GEMMs in ``fmt`` (with a tile model,
        :attr:`gemm_tiling`, by GEMMs whose tiles fill every wave; the cost model multiplies in
        each shape's :func:`planner.cost.gemm.wave_efficiency`)."""
        return self.efficiency.gemm.get(fmt, self.efficiency.gemm.get(NumberFormat.BF16, 1.0))

    def ridge_flop_per_byte(self, fmt: NumberFormat) -> float:
        """Roofline ridge point: peak FLOP/s over HBM bytes/s (FLOP/byte).

        Source: Williams et al., "Roofline", CACM 2009; JAX scaling book, "roofline".
        """
        return self.peak_flop_per_s(fmt) / self.hbm_bytes_per_s


class LinkSpec(FrozenSpec):
    """A link kind: the bandwidth one accelerator can inject into it, its latency and efficiency."""

    bandwidth_GB_per_s: PositiveFloat
    """Per accelerator, per direction (GB/s). For NVLink: 18 links x 25 (H100) or 50 (B200) GB/s.
    For a switchless mesh: the sum over the accelerator's links. For a torus: per link."""
    num_links: PositiveInt = 1
    """Links per accelerator that the bandwidth is spread over (mesh: 7 peers; torus: per axis
    direction). A point-to-point transfer on a mesh uses one of them."""
    latency_us: float = Field(ge=0)
    """Per-step latency of a collective on this link kind (microseconds)."""
    efficiency: float = Field(ge=MIN_PLAUSIBLE_FRACTION, le=1)
    """Fraction of the line rate that collective bus bandwidth reaches (0-1]."""

    @property
    def bytes_per_s(self) -> float:
        """Per-accelerator, per-direction bandwidth in bytes/s."""
        return self.bandwidth_GB_per_s * GB

    @property
    def latency_s(self) -> float:
        """Per-step latency in seconds."""
        return self.latency_us * US


class FabricSpec(FrozenSpec):
    """The scale-out network between scale-up domains."""

    kind: Literal["infiniband", "roce", "dcn"] = "infiniband"
    """Technology: InfiniBand, RoCE Ethernet, or a TPU data-center network."""
    nic_Gbps: PositiveFloat
    """Line rate of one NIC port (Gb/s, 1e9 bits/s)."""
    nics_per_accelerator: PositiveFloat
    """Scale-out NIC ports per accelerator (fractional when a host's NICs are shared)."""
    rail_optimized: bool = True
    """GPU i of every server sits on rail i's leaf switch (NVIDIA SuperPOD wiring)."""
    oversubscription: float = Field(default=1.0, ge=1.0)
    """Leaf up-link taper above a scalable unit (1 = non-blocking, 2 = 2:1)."""
    scalable_unit_nodes: PositiveInt = 32
    """Servers per scalable unit (non-blocking leaf group); DGX SuperPOD uses 32."""
    planes: PositiveInt = 1
    """Independent network planes the NIC bandwidth is split across."""
    latency_us: float = Field(ge=0)
    """Per-step latency of a collective crossing the fabric (microseconds)."""
    efficiency: float = Field(ge=MIN_PLAUSIBLE_FRACTION, le=1)
    """Fraction of NIC line rate reached by collective bus bandwidth (0-1]."""
    source: Text
    """Where the NIC, wiring and efficiency figures come from."""

    @property
    def bytes_per_s_per_accelerator(self) -> float:
        """Scale-out bandwidth one accelerator can inject, per direction (bytes/s)."""
        return self.nic_Gbps * GBIT * self.nics_per_accelerator

    @property
    def latency_s(self) -> float:
        """Per-step latency in seconds."""
        return self.latency_us * US


class TorusSpec(FrozenSpec):
    """TPU ICI torus rules: which slice shapes exist and where they wrap around."""

    num_dims: Literal[2, 3]
    """2 for v5e/v6e, 3 for v4/v5p/TPU7x."""
    max_axis: PositiveInt
    """Largest legal extent of one axis in a single slice."""
    max_slice_chips: PositiveInt
    """Largest single slice (chips); beyond it a job spans several slices over the DCN."""
    wraparound_multiple: PositiveInt
    """An axis whose extent is a multiple of this (and at least this) has wrap-around links."""
    chips_per_host: PositiveInt
    """Chips attached to one host VM."""
    accelerator_types: dict[Name, Literal[1, 2]] = Field(default_factory=dict)
    """Google Cloud accelerator-type prefixes that name slices of this system (``v5p`` in
    ``v5p-256``), each with the devices its N counts per chip: 2 where N counts TensorCores
    (v4, v5p, TPU7x: ``v5p-256`` is 128 chips), 1 where it counts chips (v5e, v6e)."""


class SystemSpec(FrozenSpec):
    """A scale-up building block: an HGX board, an NVL72 rack, an AMD UBB, a TPU pod."""

    name: Name
    """Catalog name, used as the ``<system>`` of cluster names (``hgx_b200``)."""
    description: Text = ""
    """Free text: what the system is."""
    accelerator: Name
    """Catalog name of the accelerator (a file in ``topologies/accelerators``)."""
    kind: Literal["nvswitch", "nvlink_rack", "mesh", "torus"]
    """How the scale-up domain is wired: NVSwitch board, NVLink rack, switchless full mesh, or
    an ICI torus."""
    domain_size: PositiveInt
    """Accelerators in one scale-up domain (8 for HGX, 72 for NVL72; for a torus, one pod)."""
    unit_size: PositiveInt
    """Smallest whole unit a domain is built from (8-GPU board, 4-GPU NVL72 tray, 4-chip host)."""
    accelerators_per_node: PositiveInt
    """Accelerators per server / host (8 on HGX, 4 on an NVL72 tray)."""
    scale_up: LinkSpec
    """The scale-up link (NVLink, Infinity Fabric, ICI)."""
    scale_out: FabricSpec
    """The default scale-out fabric; cluster edits may change it."""
    torus: TorusSpec | None = None
    """Torus rules (TPU systems only)."""
    price_per_gpu_hour_usd: PositiveFloat
    """Indicative rental price of one accelerator-hour (USD); override with --price-per-gpu-hour."""
    sources: dict[Name, Text]
    """Where each number came from: keys name the field."""

    @model_validator(mode="after")
    def _consistent(self) -> SystemSpec:
        if self.domain_size % self.unit_size:
            raise ValueError(
                f"unit_size ({self.unit_size}) must divide domain_size ({self.domain_size})"
            )
        if (self.kind == "torus") != (self.torus is not None):
            raise ValueError("a torus block is required exactly when kind is 'torus'")
        for key in ("domain_size", "scale_up", "scale_out", "price_per_gpu_hour_usd"):
            if not self.sources.get(key):
                raise ValueError(f"sources.{key} is missing: every number needs a source")
        return self


class ResidualSummary(FrozenSpec):
    """Prediction errors (predicted / measured - 1) over a set of validation rows."""

    count: int = Field(ge=0)
    """Rows."""
    median_abs: float = Field(ge=0)
    """Median of |error| (fraction, 0.1 = 10%)."""
    max_abs: float = Field(ge=0)
    """Largest |error| (fraction)."""
    bias: float
    """Mean signed error (fraction; > 0 = optimistic)."""

    @classmethod
    def of(cls, errors: Sequence[float]) -> ResidualSummary:
        """Count, median |error|, max |error| and mean signed error of ``errors`` (non-empty).

        >>> ResidualSummary.of([0.1, -0.3, 0.2]).median_abs
        0.2
        """
        return cls(
            count=len(errors),
            median_abs=statistics.median(abs(e) for e in errors),
            max_abs=max(abs(e) for e in errors),
            bias=statistics.fmean(errors),
        )


class EfficiencyFit(FrozenSpec):
    """Fitted efficiency factors; a field left None keeps the catalog prior."""

    gemm: dict[NumberFormat, float] | None = None
    """Large-GEMM fraction of dense peak per format."""
    attention: float | None = Field(default=None, gt=0, le=1)
    """Flash-attention fraction of the bf16 peak."""
    hbm: float | None = Field(default=None, gt=0, le=1)
    """Streaming-kernel fraction of HBM bandwidth."""
    kernel_overhead_us: float | None = Field(default=None, ge=0, le=100)
    """Fixed per-kernel time (us)."""
    expert_gemm: float | None = Field(default=None, gt=0, le=1)
    """Grouped expert GEMM efficiency relative to dense GEMMs."""
    overlap_contention: float | None = Field(default=None, ge=0, le=1)
    """Slowdown fraction of overlapped communication."""
    moe_sync_overhead_us: float | None = Field(default=None, ge=0, le=20000)
    """Host-synchronisation time per MoE layer per micro-batch (us)."""
    step_overhead_ms: float | None = Field(default=None, ge=0, le=1000)
    """Fixed time per optimizer step (ms)."""
    link_efficiency: dict[LinkKind, float] | None = None
    """Collective bus bandwidth over the link's line rate, per link kind (0-1]: the ``efficiency``
    of the system's ``scale_up`` link or of the ``scale_out`` fabric. Written by measured overlays
    (``layout calibrate --measure``); ``--calibration`` applies it to the cluster's links."""

    @model_validator(mode="after")
    def _links_in_range(self) -> EfficiencyFit:
        for kind, value in (self.link_efficiency or {}).items():
            if not 0.0 < value <= 1.0:
                raise ValueError(
                    f"efficiency.link_efficiency.{kind} must be in (0, 1], got {value}"
                )
        return self


class GemmMeasurement(FrozenSpec):
    """One measured GEMM: (m x k) @ (k x n) with inputs in ``format``, forward, one kernel."""

    format: NumberFormat
    """Input format (bf16; fp8 = E4M3 inputs through ``torch._scaled_mm``, bf16 output)."""
    m: PositiveInt
    """Rows of the input."""
    k: PositiveInt
    """Reduction dimension."""
    n: PositiveInt
    """Output columns."""
    time_us: PositiveFloat
    """Time of one call (microseconds; best of the timed repeats)."""
    TFLOP_per_s: PositiveFloat
    """Achieved throughput: 2 m k n / time (TFLOP/s)."""


class AttentionMeasurement(FrozenSpec):
    """One measured causal ``scaled_dot_product_attention`` forward (bf16)."""

    batch: PositiveInt
    """Sequences."""
    heads: PositiveInt
    """Attention heads (queries = keys = values)."""
    seq_len: PositiveInt
    """Tokens per sequence."""
    head_dim: PositiveInt
    """Head dimension (queries, keys and values)."""
    time_us: PositiveFloat
    """Time of one call (microseconds)."""
    TFLOP_per_s: PositiveFloat
    """Achieved throughput with the planner's causal FLOP count
    (``planner.cost.compute.attention_core_flops_per_token``) (TFLOP/s)."""


class CopyMeasurement(FrozenSpec):
    """One measured device-to-device copy of a large buffer (the HBM bandwidth probe)."""

    buffer_bytes: PositiveInt
    """Size of the copied buffer (bytes); the copy reads and writes it once each."""
    time_us: PositiveFloat
    """Time of one copy (microseconds)."""
    GB_per_s: PositiveFloat
    """Achieved bandwidth: 2 x buffer_bytes / time (GB/s = 1e9 bytes/s)."""


class CollectiveMeasurement(FrozenSpec):
    """One measured collective over ``ranks`` local accelerators (nccl-tests conventions)."""

    op: Literal["all_reduce", "all_gather", "all_to_all"]
    """The collective."""
    link: LinkKind = "scale_up"
    """The link kind the ranks talk over (one node: scale_up)."""
    ranks: int = Field(ge=2)
    """Ranks in the group."""
    message_bytes: PositiveInt
    """Buffer size S: all-reduce the buffer, all-gather the gathered output, all-to-all each
    rank's send buffer (bytes)."""
    time_us: PositiveFloat
    """Time of one call, slowest rank (microseconds)."""
    bus_GB_per_s: PositiveFloat
    """Bus bandwidth: S / time x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather and
    all-to-all (NVIDIA/nccl-tests doc/PERFORMANCE.md) (GB/s)."""


class MeasurementRecord(FrozenSpec):
    """The ``measurements`` block of a measured overlay: what ``layout calibrate --measure`` saw
    on the local machine, and on what. The overlay's factors are fitted from these values."""

    date: Label
    """When the measurements were taken (ISO 8601 date-time, UTC)."""
    device_name: Label
    """The device as the runtime names it (``torch.cuda.get_device_name``; 'cpu' for a dry run)."""
    device_count: PositiveInt
    """Devices visible to the run."""
    backend: Literal["cuda", "rocm", "cpu"]
    """The torch device backend measured (cpu only for ``--dry-run``)."""
    dry_run: bool = False
    """True when the CPU stood in for the accelerator (tiny shapes; the factors are not real)."""
    accelerator: Name
    """Catalog accelerator whose peaks and HBM bandwidth the efficiencies are fractions of."""
    system: Name | None = None
    """Catalog system whose link bandwidth the link efficiencies are fractions of."""
    driver_version: Label | None = None
    """GPU driver version (``nvidia-smi``), when known."""
    cuda_version: Label | None = None
    """CUDA (or HIP) runtime version torch was built with, when any."""
    torch_version: Label
    """PyTorch version."""
    duration_s: float = Field(ge=0)
    """Wall time of the measurements (s)."""
    gemm: list[GemmMeasurement] = Field(default_factory=list)
    """GEMM grid."""
    attention: list[AttentionMeasurement] = Field(default_factory=list)
    """Causal attention grid."""
    hbm: list[CopyMeasurement] = Field(default_factory=list)
    """Large copies."""
    collectives: list[CollectiveMeasurement] = Field(default_factory=list)
    """Collectives over message sizes (empty with one device)."""
    link_latency_us: dict[LinkKind, float] = Field(default_factory=dict)
    """Fitted per-step collective latency per link kind (microseconds); informational."""
    skipped: list[Text] = Field(default_factory=list)
    """What was not measured, and why (one device, no fp8 support, time budget)."""

    @model_validator(mode="after")
    def _consistent(self) -> MeasurementRecord:
        if self.backend == "cpu" and not self.dry_run:
            raise ValueError("a cpu measurement must be marked dry_run: true")
        for kind, value in self.link_latency_us.items():
            if not 0.0 <= value <= 1e6:
                raise ValueError(f"link_latency_us.{kind} must be in [0, 1e6], got {value}")
        if not (self.gemm or self.attention or self.hbm or self.collectives):
            raise ValueError("measurements hold no measurement")
        return self


class CalibrationRecord(FrozenSpec):
    """A calibration overlay (``topologies/calibration/<family>.yaml``): efficiency factors fitted
    against published runs, applied to every accelerator of the family. A measured overlay
    (``layout calibrate --measure``, docs/calibration.md) has the same form plus a
    ``measurements`` block, and is applied with ``--calibration FILE``."""

    family: Name
    """Accelerator family the fit applies to."""
    fitted_on: list[Name]
    """Accelerators whose validation rows were used."""
    date: Label
    """When the fit was made (ISO date)."""
    method: Text
    """How: data set, loss, optimiser."""
    rows: list[Name]
    """Validation row ids used."""
    efficiency: EfficiencyFit
    """The fitted factors."""
    residuals: dict[Name, ResidualSummary]
    """Errors after the fit: 'all', and per regime ('dense', 'moe'); a measured overlay's are
    those of the fitted kernel model against its measurements ('all', 'gemm', 'attention',
    'hbm', 'collectives')."""
    heldout: HeldoutRecord | None = None
    """Out-of-sample error bands per regime (leave one source out) that the printed ± band
    uses; None for a measured or hand-written overlay (the band then falls back and widens)."""
    measurements: MeasurementRecord | None = None
    """The local measurements a measured overlay was fitted on (None for fits to published runs)."""
    transferred_from: list[Name] = Field(default_factory=list)
    """Families whose fitted/prior ratios this record carries over to a family without a fit
    (:func:`planner.catalog.store.transferred_calibration`); empty for a fit or a measurement."""

    @property
    def dry_run(self) -> bool:
        """Written by ``calibrate --measure --dry-run`` (CPU, tiny shapes): not a calibration."""
        return self.measurements is not None and self.measurements.dry_run

    @model_validator(mode="after")
    def _plausible_factors(self) -> CalibrationRecord:
        """A fitted or measured overlay's fractions lie in [MIN_PLAUSIBLE_FRACTION, 1]; a dry
        run's need not (``--calibration`` refuses it whole)."""
        if self.dry_run:
            return self
        fit = self.efficiency
        for fmt, value in (fit.gemm or {}).items():
            check_fraction(f"efficiency.gemm.{fmt}", value)
        for kind, value in (fit.link_efficiency or {}).items():
            check_fraction(f"efficiency.link_efficiency.{kind}", value)
        for key in ("attention", "hbm", "expert_gemm"):
            value = getattr(fit, key)
            if value is not None:
                check_fraction(f"efficiency.{key}", value)
        return self

    @model_validator(mode="after")
    def _measured_on_fitted(self) -> CalibrationRecord:
        if self.measurements is not None and self.measurements.accelerator not in self.fitted_on:
            raise ValueError(
                f"measurements.accelerator '{self.measurements.accelerator}' must be listed in "
                "fitted_on"
            )
        return self
