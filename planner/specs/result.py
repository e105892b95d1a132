"""Results: a scored layout (Plan), a search's answer (SearchResult), rejected candidates.

These are the JSON contract of DESIGN.md section 8: change them only additively and bump
``SCHEMA_VERSION``'s minor number when adding fields.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt

from planner.specs.base import FrozenSpec
from planner.specs.comm import Tier
from planner.specs.layout import Layout

SCHEMA_VERSION = "1.1"


class MemoryBreakdown(FrozenSpec):
    """Memory per accelerator on the pipeline stage that needs the most (GiB = 2**30 bytes)."""

    peak_gib: NonNegativeFloat
    """Predicted peak allocation on the binding stage (GiB)."""
    capacity_gib: NonNegativeFloat
    """Memory available to tensors: HBM minus the runtime reserve (GiB)."""
    hbm_gib: NonNegativeFloat
    """Total device memory (GiB)."""
    weights_gib: NonNegativeFloat
    """Model weights held by one accelerator (GiB)."""
    grads_gib: NonNegativeFloat
    """Gradient buffers (GiB)."""
    optimizer_gib: NonNegativeFloat
    """Optimizer state: fp32 master weights and Adam moments, as sharded (GiB)."""
    activations_gib: NonNegativeFloat
    """Activations of the micro-batches in flight, plus logits (GiB)."""
    binding_stage: NonNegativeInt
    """Index of the pipeline stage whose memory is reported (0 = first)."""


class PlacementEntry(FrozenSpec):
    """Where one parallel dimension's groups land on the cluster."""

    size: int
    """Group size (the parallel degree)."""
    stride: int
    """Rank distance between consecutive members (TP innermost = 1)."""
    tier: Tier
    """Highest tier the group crosses."""
    within_domain: bool
    """Every group stays inside one scale-up (NVLink/ICI) domain."""
    link: str
    """The bottleneck link, in words."""
    bandwidth_GB_per_s: NonNegativeFloat
    """Bottleneck bandwidth per rank per direction, before efficiency (GB/s)."""
    example_group: list[int]
    """Global ranks of the first group."""


class Plan(FrozenSpec):
    """One layout scored by the cost model."""

    schema_version: str = SCHEMA_VERSION
    """Version of this JSON shape (major.minor; minor bumps are additive)."""
    mode: Literal["train"] = "train"
    """Training plan."""
    model: str
    """Model catalog name."""
    cluster: str
    """Cluster as given."""
    cluster_description: str
    """What the cluster name resolved to."""
    num_gpus: int
    """Accelerators the layout uses."""
    layout: Layout
    """The parallel layout."""
    step_time_s: NonNegativeFloat
    """Predicted time of one optimizer step (s)."""
    tokens_per_s: NonNegativeFloat
    """Tokens processed per second by the whole job."""
    tokens_per_s_per_gpu: NonNegativeFloat
    """Tokens per second per accelerator."""
    model_tflops_per_gpu: NonNegativeFloat
    """Model FLOPs (6 N_active per token + attention, no recompute) per second per GPU (TFLOP/s)."""
    mfu: NonNegativeFloat
    """Model FLOPs utilisation: model FLOP/s over the BF16 dense peak."""
    fits: bool
    """Peak memory fits the capacity."""
    memory: MemoryBreakdown
    """Memory per accelerator."""
    breakdown_s: dict[str, float]
    """Exposed seconds per step by term (compute, tp_comm, cp_comm, ep_comm, pp_bubble, pp_comm,
    dp_comm, optimizer); they sum to step_time_s."""
    placement: dict[str, PlacementEntry]
    """Per parallel dimension: where its groups land."""
    uncertainty_pct: float | None = None
    """Typical error of this prediction: the median |predicted/measured - 1| of the validation
    rows of the closest regime (accelerator family x dense/MoE), in percent; None when the
    family has no validated runs (see ``warnings``)."""
    warnings: list[str] = Field(default_factory=list)
    """What the prediction does not know (outside validated regimes, ignored settings)."""
    why_not: str | None = None
    """For an alternative: why it loses to the best plan."""


class Rejection(FrozenSpec):
    """A candidate layout the search rejected, with the rule it broke."""

    layout: Layout
    """The rejected layout."""
    reason: str
    """Reason code (``memory``, ``divisibility``, ``batch``, ``placement``, ``pin``)."""
    detail: str
    """The rule and the values, in words."""


class SolverInfo(FrozenSpec):
    """How the solver ended."""

    name: Literal["cp-sat", "exhaustive"]
    """Solver used."""
    status: str
    """OPTIMAL, FEASIBLE (time limit hit), INFEASIBLE or UNKNOWN."""
    objective: float
    """Objective value in seconds per step."""
    best_bound: float
    """Proven lower bound on the objective (s); equals objective when optimal."""
    time_quantum_s: float
    """Resolution of the integer objective (s)."""


class SearchResult(FrozenSpec):
    """The answer of ``layout search``."""

    schema_version: str = SCHEMA_VERSION
    """Version of this JSON shape."""
    best: Plan
    """The best plan."""
    alternatives: list[Plan]
    """Runners-up, best first, each with ``why_not``."""
    search_time_s: NonNegativeFloat
    """Wall time of the search (s)."""
    num_candidates: int
    """Layouts enumerated."""
    num_feasible: int
    """Layouts that passed every rule and fit memory."""
    rejections: dict[str, int]
    """Rejected layouts counted by reason code."""
    solver: SolverInfo
    """Solver status."""
