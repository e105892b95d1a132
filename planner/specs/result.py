"""Results: a scored layout (Plan), a search's answer (SearchResult), rejected candidates.

These are the JSON contract of DESIGN.md section 8: change them only additively and bump
``SCHEMA_VERSION``'s minor number when adding fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from planner.specs.base import FrozenSpec
from planner.specs.cluster_state import StateReport, SubproblemInfo
from planner.specs.comm import Tier
from planner.specs.formats import NumberFormat
from planner.specs.hardware import DeviceNoun
from planner.specs.layout import Layout
from planner.specs.text import Name, Text
from planner.specs.workload import TrainWorkload

SCHEMA_VERSION = "1.19"


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
    optimizer_step_gib: NonNegativeFloat = 0.0
    """The fp32 copy of bf16 gradients the optimizer step allocates once the backward has
    freed the activations (GiB); the peak counts the larger of it and the activations."""
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


PLACEMENT_LABELS: dict[str, str] = {
    "dp_cp": "DPxCP",
    "edp": "EDP",
    "dp_shard": "SHARD",
    "dp_replicate": "REPLICA",
}
"""Report names of the placement's gradient-reduction groups (data x context parallel, expert
data parallel, hybrid sharding's shard and replica groups); a dimension's entry is named by the
dimension in capitals."""


def placement_label(key: str) -> str:
    """How reports name the placement entry ``key``.

    >>> placement_label("tp"), placement_label("dp_cp"), placement_label("edp")
    ('TP', 'DPxCP', 'EDP')
    """
    return PLACEMENT_LABELS.get(key, key.upper())


SolvedBy = Literal["cp-sat", "bound", "recurrence", "layer-counts", "branch-and-bound"]
"""How a pipeline split was settled (:attr:`StageSolveInfo.solved_by`)."""


class StageSolveInfo(FrozenSpec):
    """One pipeline-stage partition a search or an estimate solved (DESIGN.md section 7); the
    placement and fleet sub-problems are :class:`planner.specs.cluster_state.SubproblemInfo`."""

    name: Literal["pipeline_stages"]
    """Which sub-problem: ``pipeline_stages`` = which layers go to which pipeline stage and how
    many of each stage's layers recompute in full."""
    subject: Text
    """What it was solved for: the layout, in its short form."""
    num_variables: NonNegativeInt
    """Variables of the CP-SAT model."""
    num_constraints: NonNegativeInt
    """Constraints of the CP-SAT model."""
    status: str
    """OPTIMAL, FEASIBLE (time limit hit), INFEASIBLE, MODEL_INVALID or UNKNOWN."""
    objective: float
    """Objective value of the integer model (``objective_unit``)."""
    best_bound: float
    """Proven lower bound on the objective (``objective_unit``); equals it when OPTIMAL."""
    baseline: float | None = None
    """The same objective for the even split (the planner's default), when the even split is a
    solution of the model (it may not fit memory); None otherwise."""
    objective_unit: str
    """What the objective counts, in words."""
    wall_s: NonNegativeFloat
    """Wall time of building and solving the model (s)."""
    solved_by: SolvedBy = "cp-sat"
    """``cp-sat``: the model was solved; ``bound``: the even split, or from schema 1.7 the even
    layer counts with the fewest recomputed layers that fit (:func:`planner.search.solve.
    stage_data.least_recompute_assignment`), already meets a lower bound of the integer model
    (:func:`planner.search.solve.stage_data.lower_bound`, or for interleaved splits
    :func:`~planner.search.solve.stage_data.rank_load_lower_bound`), so it is optimal and no
    model was built; ``recurrence`` (schema 1.6): without interleaving, the min-max
    linear-partition recurrence's split (:func:`planner.search.solve.stage_data.
    contiguous_partition`) fits with nothing recomputed, so it is optimal and no model was
    built; ``layer-counts`` (schema 1.7): every layer is of one kind, so the partition by layer and
    recompute counts (:func:`planner.search.solve.stage_data.uniform_partition`) is the optimum
    and no model was built; ``branch-and-bound`` (schema 1.8): an interleaved split of several
    kinds of layer that recomputes nothing, proved optimal by a depth-first walk of the chunk
    sizes (:func:`planner.search.solve.branch.branch_and_bound_partition`), no model built."""


class PipelineStage(FrozenSpec):
    """One model chunk of the pipeline (with vpp = 1, one pipeline stage), in layer order."""

    stage: NonNegativeInt
    """Chunk index in layer order (0 .. pp x vpp - 1)."""
    rank: NonNegativeInt
    """Pipeline rank that runs it (stage mod pp)."""
    first_layer: NonNegativeInt
    """Index of its first decoder layer (0-based)."""
    num_layers: NonNegativeInt
    """Decoder layers it holds."""
    recompute_layers: NonNegativeInt
    """How many of its first layers recompute in full in the backward pass."""
    embedding: bool
    """Holds the input embedding (the first chunk)."""
    loss: bool
    """Holds the final norm, the output layer and the loss (the last chunk)."""
    mtp_layers: NonNegativeInt = 0
    """Multi-token-prediction modules it holds (workload ``mtp_num_layers``)."""
    peak_gib: NonNegativeFloat
    """Peak memory of one GPU of its pipeline rank (GiB)."""
    time_s: NonNegativeFloat
    """Critical-path time of one micro-batch (forward, backward, exposed TP/CP/EP
    communication) on its pipeline rank (s)."""


class PipelineSplitInfo(FrozenSpec):
    """How the layers were split over the pipeline stages, and what the split gained."""

    method: Literal[
        "even",
        "cp-sat",
        "recurrence",
        "bound",
        "layer-counts",
        "branch-and-bound",
        "framework",
        "given",
    ]
    """``even``: the planner's default (as even as possible, the remainder on the middle
    stages, every layer recomputed under full recomputation); ``cp-sat``: the CP-SAT partition
    (layers and recomputed layers per stage), used because the cost model scores it faster or
    it fits where the even split does not; ``recurrence`` (schema 1.6): the same, found by the
    min-max linear-partition recurrence where it is exact (no interleaving, nothing
    recomputed, memory not binding); ``bound`` (schema 1.7): the even layer counts with the
    fewest recomputed layers that fit, used because it meets a lower bound of the partition
    problem (so it is optimal without a solve) and the cost model scores it faster than
    recomputing every layer; ``layer-counts`` (schema 1.7): the exact partition of a model whose
    layers are all of one kind, by layer and recompute counts per rank; ``branch-and-bound``
    (schema 1.8): the exact interleaved partition of a model with several kinds of layer that
    recomputes nothing, found by a depth-first walk of the chunk sizes; ``framework``: the
    split the framework makes itself and the user cannot change (Nanotron's cost-balanced
    placement, schema 1.4); ``given`` (schema 1.12): the split the user gave (``layout
    estimate --pipeline-model-parallel-layout`` and Megatron-LM's other split flags)."""
    even_step_time_s: NonNegativeFloat
    """Step time of the same layout with the even split (s)."""
    even_peak_gib: NonNegativeFloat
    """Peak memory per GPU of the same layout with the even split (GiB)."""
    even_fits: bool
    """The even split fits memory."""
    subproblem: StageSolveInfo | None = None
    """The CP-SAT solve, when one ran."""

    @property
    def optimised(self) -> str | None:
        """The optimised split in words ("the CP-SAT split", "the min-max recurrence's split",
        "the bound-proven split"), None for the even split or the framework's own."""
        return {
            "cp-sat": "the CP-SAT split",
            "recurrence": "the min-max recurrence's split",
            "bound": "the bound-proven split",
            "layer-counts": "the exact layer-count split",
            "branch-and-bound": "the branch-and-bound split",
        }.get(self.method)


class Plan(FrozenSpec):
    """One layout scored by the cost model."""

    schema_version: str = SCHEMA_VERSION
    """Version of this JSON shape (major.minor; minor bumps are additive)."""
    mode: Literal["train"] = "train"
    """Training plan."""
    model: Name
    """Model catalog name."""
    cluster: Name
    """Cluster as given."""
    cluster_description: Text
    """What the cluster name resolved to."""
    device_noun: DeviceNoun = "GPU"
    """What the reports call one accelerator (the catalog's ``device_noun``: ``chip`` on TPUs);
    the JSON keys say ``gpu`` whatever the part (schema 1.16)."""
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
    """Model FLOPs utilisation: model FLOP/s over the BF16 dense peak (the usual convention;
    above 1 is possible when the GEMMs run in a faster format, e.g. NVFP4 at 4x BF16's rate)."""
    mfu_precision_peak: NonNegativeFloat | None = None
    """Model FLOP/s over the dense peak of the format the GEMMs run in (``layout.precision``):
    the utilisation of what runs, at most 1; equals ``mfu`` for bf16 (schema 1.3)."""
    usd_per_million_tokens: NonNegativeFloat = 0.0
    """Price of a million training tokens: GPUs x step time x price per GPU-hour / tokens."""
    joules_per_token: NonNegativeFloat = 0.0
    """Energy per token at the accelerators' TDP: GPUs x TDP x step time / tokens (J)."""
    fits: bool
    """Peak memory fits the capacity."""
    memory: MemoryBreakdown
    """Memory per accelerator."""
    breakdown_s: dict[str, float]
    """Exposed seconds per step by term (compute, tp_comm, cp_comm, ep_comm, pp_bubble, pp_comm,
    dp_comm, optimizer, step_sync); they sum to step_time_s."""
    placement: dict[str, PlacementEntry]
    """Per parallel dimension: where its groups land; with context or expert parallelism also
    the gradient-reduction groups ``dp_cp`` (dp x cp ranks, the dense gradients) and ``edp``
    (the expert-data-parallel ranks, the routed experts' gradients) that ``dp_comm`` is priced
    on, and with hybrid sharding ``dp_shard`` and ``dp_replicate`` (schema 1.18)."""
    uncertainty_pct: float | None = None
    """Half-width of the error band of this prediction, in percent: the ``uncertainty_level``
    quantile of |predicted/measured - 1| over held-out validation runs (leave one source out) of
    the closest regime (accelerator family x dense/MoE), widened by the factors of
    ``topologies/trust.yaml`` when the plan extrapolates (``warnings`` says which); None when no
    family has held-out runs."""
    uncertainty_level: float | None = None
    """Share of runs the band is meant to hold (0.8 = an 80% band); None with no band."""
    warnings: list[str] = Field(default_factory=list)
    """What the prediction does not know (outside validated regimes, ignored settings)."""
    why_not: str | None = None
    """For an alternative: why it loses to the best plan."""
    cluster_state: StateReport | None = None
    """With ``--cluster-state``: what is down, taken or slow, the placement chosen on what is
    left, and what the holes cost (step time with and without them); None without a state."""
    pipeline_stages: list[PipelineStage] = Field(default_factory=list)
    """Per model chunk (pp x vpp, layer order): its layers, recomputed layers, and its rank's
    peak memory and micro-batch time. Empty for plans saved by layout before 1.3."""
    pipeline_split: PipelineSplitInfo | None = None
    """How the layers were split over the stages (even or CP-SAT) and the even split's figures;
    None with one stage."""
    workload: TrainWorkload | None = None
    """The workload the plan was scored on (sequence length, global batch, framework
    settings); None in plans saved before schema 1.3."""

    @property
    def offload_share(self) -> float:
        """The share of its saved activations the plan offloads to host memory (0 without a
        recorded workload)."""
        return self.workload.activation_offload_fraction if self.workload is not None else 0.0

    def layout_text(self) -> str:
        """The layout in words (``Layout.short``), then ``offload N%`` when it offloads that share
        of its saved activations to host memory (a search offloads where a layout fits only so).

        >>> from planner.specs.layout import Layout
        >>> from planner.specs.workload import TrainWorkload
        >>> Plan.model_construct(layout=Layout(dp=8), workload=TrainWorkload(
        ...     activation_offload_fraction=0.25)).layout_text()
        'TP1 PP1 DP8 mbs1 none zero1 bf16 offload 25%'
        """
        share = self.offload_share
        offload = f" offload {100 * share:.0f}%" if share > 0 else ""
        return self.layout.short() + offload


class Rejection(FrozenSpec):
    """A candidate layout the search rejected, with the rule it broke."""

    layout: Layout
    """The rejected layout."""
    reason: str
    """Reason code (``memory``, ``divisibility``, ``batch``, ``placement``, ``pin``)."""
    detail: str
    """The rule and the values, in words."""
    excess: float | None = None
    """How far over its limit, in the limit's unit (bytes for memory, seconds for a step-time
    target); None for rules that are simply broken."""


class SplitSweepInfo(FrozenSpec):
    """What the split sweep did (schema 1.10, ``unproven`` 1.11, ``least_bound_gpus`` 1.12;
    docs/search.md, "Split layouts the even split ranks low")."""

    budget: int
    """Work units it was given (SolverConfig.split_sweep_budget)."""
    bounded: int
    """Layouts it gave a tight bound under any split."""
    split: int
    """Layouts it split because their bound beat the best plan."""
    finished: bool
    """Whether it ended with no layout left whose bound beats the best plan (the best plan is
    then the cost model's best)."""
    unresolved: int
    """Layouts left unsplit whose bound still beats the best plan (0 when finished, or when it
    ran out before every pipelined structure was bounded)."""
    least_bound_s: float | None
    """The least objective bound left (s, or GPU-seconds with a cost or energy objective; 0
    when some structures were never bounded); None when finished."""
    unproven: int = 0
    """Layouts whose split CP-SAT's time limit stopped short of a proof while their bound under
    any split (its proven bound) still beats the best plan (schema 1.11): they leave the sweep
    unfinished as the unresolved ones do."""
    least_bound_gpus: int | None = None
    """With a step-time target (schema 1.12), the GPU count the sweep stopped on short of a
    proof: ``least_bound_s`` is then a step time on that many GPUs, which may meet the target
    where fewer GPUs than the best plan's are named; None when finished or without a target."""


class SolverInfo(FrozenSpec):
    """How the ranking ended, and the CP-SAT sub-problems solved."""

    name: Literal["sort", "exhaustive", "cp-sat"]
    """How the best layout was chosen among the scored ones: ``sort`` (a numpy sort of the
    candidates that branch and bound kept), ``exhaustive`` (every candidate scored, a plain
    sort); ``cp-sat`` only in plans saved by layout before 1.3 (an argmin over the same table)."""
    status: str
    """OPTIMAL (the best plan is the cost model's best over the layouts and splits searched),
    FEASIBLE (the split sweep's budget ran out with layouts left whose bound under any split
    beats it; ``best_bound`` is the least of those bounds), INFEASIBLE or UNKNOWN."""
    objective: float
    """Objective value in seconds per step."""
    best_bound: float
    """Proven lower bound on the objective (s); equals objective when optimal (0 when the split
    sweep ran out before it bounded every pipelined structure). With a step-time target, where
    the objective is the best plan's step time on its GPU count, it is the least step-time
    bound left on ``split_sweep.least_bound_gpus`` GPUs."""
    time_quantum_s: float
    """Resolution of the integer objective (s)."""
    method: Text = ""
    """What was enumerated, sorted and solved, in words."""
    subproblems: list[StageSolveInfo] = Field(default_factory=list)
    """Each CP-SAT sub-problem solved (one pipeline-stage partition per returned plan with pp >
    1), with its size, status, objective and bound."""
    split_sweep: SplitSweepInfo | None = None
    """What the split sweep did; None where it did not run (``--split-sweep 0``, the even split,
    or a framework that places its layers itself)."""
    gpu_counts: list[int] = Field(default_factory=list)
    """The GPU counts the search weighed, ascending (schema 1.12): the cluster's size or the
    ``--gpus`` cap, and with a step-time target or a cost or energy objective the smaller legal
    counts on a 1-1.5-2 ladder of scale-up units (``engine.gpu_counts``): a count off the ladder
    is weighed only when named with ``--gpus``. Empty in plans saved before 1.12."""
    memory_headroom: float | None = None
    """The share of usable memory a searched layout had to leave free (schema 1.13;
    ``--memory-headroom``, SolverConfig.memory_headroom): no plan of the search uses more than
    (1 - it) x usable. None in plans saved before 1.13."""


class SearchResult(FrozenSpec):
    """The answer of ``layout search``."""

    schema_version: str = SCHEMA_VERSION
    """Version of this JSON shape."""
    objective: Literal["time", "cost", "energy", "target"] = "time"
    """What the ranking minimised: step time, $ per token (``usd_per_million_tokens``), joules
    per token (``joules_per_token``), or with a step-time target the fewest GPUs that meet it,
    then step time (schema 1.3)."""
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
    subproblems: list[SubproblemInfo] = Field(default_factory=list)
    """Each CP-SAT sub-problem solved for this answer (placement on ``--cluster-state``), with
    its size, status, objective and bound."""


class ServeLayout(FrozenSpec):
    """How a serving deployment is split: identical replicas of tp x pp GPUs each.

    Inside a replica, dense weights are split over tp (Megatron column/row parallel), layers over
    pp, routed experts over ep (ep divides tp; each expert is further split over tp / ep), and
    the attention of different sequences over ``attention_dp`` ranks of tp / attention_dp GPUs
    each (DeepSeek / SGLang / TensorRT-LLM "attention DP", which avoids replicating an MLA or
    small-GQA KV cache over tp).
    """

    tp: PositiveInt = 1
    """Tensor-parallel degree of a replica (1 = off)."""
    pp: PositiveInt = 1
    """Pipeline stages of a replica (1 = off)."""
    ep: PositiveInt = 1
    """Expert-parallel degree inside the tp group (1 = experts tensor-split over tp)."""
    attention_dp: PositiveInt = 1
    """Attention data-parallel ranks inside the tp group (1 = attention tensor-parallel)."""
    replicas: PositiveInt = 1
    """Independent model replicas (data parallel)."""
    precision: NumberFormat = NumberFormat.BF16
    """Format of the stored linear-layer weights."""
    kv_precision: NumberFormat = NumberFormat.BF16
    """Format of the KV cache."""

    @property
    def gpus_per_replica(self) -> int:
        """GPUs of one replica (tp x pp)."""
        return self.tp * self.pp

    @property
    def num_gpus(self) -> int:
        """GPUs of the deployment (tp x pp x replicas)."""
        return self.gpus_per_replica * self.replicas

    @property
    def attention_tp(self) -> int:
        """GPUs that split one sequence's attention (tp / attention_dp)."""
        return max(1, self.tp // self.attention_dp)

    def short(self) -> str:
        """Compact form, e.g. ``TP2 PP1 x4 replicas fp8 kv-fp8``."""
        parts = [f"TP{self.tp}", f"PP{self.pp}"]
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.attention_dp > 1:
            parts.append(f"DP-attention{self.attention_dp}")
        return " ".join(parts) + f" x{self.replicas} {self.precision} kv-{self.kv_precision}"


class ServeMemory(FrozenSpec):
    """Memory of one GPU of a serving replica (GiB = 2**30 bytes)."""

    hbm_gib: NonNegativeFloat
    """Total device memory (GiB)."""
    capacity_gib: NonNegativeFloat
    """Memory available to tensors: HBM minus the runtime reserve (GiB)."""
    weights_gib: NonNegativeFloat
    """Weights held by the GPU (binding pipeline stage) (GiB)."""
    workspace_gib: NonNegativeFloat
    """Activation workspace of one forward step of max_batch_tokens tokens (GiB)."""
    kv_cache_gib: NonNegativeFloat
    """KV-cache pool: the free memory times the KV-cache fraction (GiB)."""


class ServeLatency(FrozenSpec):
    """Request latencies at the plan's load (seconds): with queueing under a request rate
    (Poisson arrivals; model in :mod:`planner.cost.serving_queue`), else for a request that
    joins the running batch without waiting."""

    request_rate_per_s: NonNegativeFloat | None = None
    """Requests/s offered to the deployment; None = saturated (no rate given)."""
    max_request_rate_per_s: NonNegativeFloat
    """Requests/s the deployment completes with every batch slot busy (its capacity)."""
    queue_mean_s: NonNegativeFloat
    """Mean wait for a batch slot and for the prefill (s)."""
    ttft_mean_s: NonNegativeFloat
    """Mean time to first token (s)."""
    ttft_p50_s: NonNegativeFloat
    """Median time to first token (s)."""
    ttft_p90_s: NonNegativeFloat
    """90th-percentile time to first token (s)."""
    e2e_mean_s: NonNegativeFloat
    """Mean end-to-end latency of a request: TTFT + (OSL - 1) x TPOT (s)."""
    e2e_p50_s: NonNegativeFloat
    """Median end-to-end latency (s)."""
    e2e_p90_s: NonNegativeFloat
    """90th-percentile end-to-end latency (s)."""


class TargetCheck(FrozenSpec):
    """One latency target against what the plan achieves."""

    name: Literal["tpot", "ttft", "e2e"]
    """Which target: mean time per output token, time to first token, end-to-end latency."""
    percentile: int | None = None
    """Percentile the target applies to (None = the mean)."""
    target_ms: PositiveFloat
    """The target (ms)."""
    achieved_ms: NonNegativeFloat
    """What the plan achieves (ms)."""
    met: bool
    """achieved <= target."""


class ServeEngine(FrozenSpec):
    """The engine settings the prediction assumed; exports spell them as each engine does."""

    max_num_seqs: PositiveInt
    """Sequences one replica batches at most (vLLM ``--max-num-seqs``, SGLang
    ``--max-running-requests``, TensorRT-LLM ``max_batch_size``)."""
    max_num_tokens: PositiveInt
    """Token budget of one forward pass (vLLM ``--max-num-batched-tokens``, SGLang
    ``--chunked-prefill-size``, TensorRT-LLM ``max_num_tokens``)."""
    mixed_prefill: bool
    """Prefill chunks ride the decode passes (chunked prefill mixed with decodes)."""
    kv_cache_fraction: float
    """Share of the free memory given to the KV cache."""
    max_model_len: PositiveInt
    """Context each sequence may reach (tokens)."""
    profile: Name = "tensorrt-llm"
    """Engine profile whose overheads priced the plan (``topologies/engines/``)."""


class ServePlan(FrozenSpec):
    """One serving layout scored by the cost model (DESIGN.md section 8)."""

    schema_version: str = SCHEMA_VERSION
    """Version of this JSON shape."""
    mode: Literal["serve"] = "serve"
    """Serving plan."""
    model: Name
    """Model catalog name."""
    cluster: Name
    """Cluster as given."""
    cluster_description: Text
    """What the cluster name resolved to."""
    device_noun: DeviceNoun = "GPU"
    """What the reports call one accelerator (``chip`` on TPUs; schema 1.16)."""
    num_gpus: int
    """Accelerators the deployment uses (tp x pp x replicas)."""
    layout: ServeLayout
    """The serving layout."""
    compute_precision: NumberFormat
    """Format the GEMMs run in."""
    weights_gib_per_gpu: NonNegativeFloat
    """Weights held by one GPU (GiB)."""
    kv_bytes_per_token: NonNegativeFloat
    """KV-cache bytes of one token of context over the whole model (sliding-window layers
    averaged over the context)."""
    kv_bytes_per_token_per_gpu: NonNegativeFloat
    """KV-cache bytes one GPU stores per token of a sequence it serves (after TP/PP split and
    replication when tp exceeds the KV heads)."""
    kv_replication: float
    """Copies of each KV value across the attention-TP group (1 = no duplication)."""
    kv_cache_tokens: NonNegativeInt
    """Tokens of context the KV cache of one replica holds."""
    max_concurrent_sequences: NonNegativeInt
    """Sequences of full context length one replica holds at once."""
    concurrency: NonNegativeInt
    """Sequences decoded together per replica in this plan (the largest the KV cache and the
    latency targets allow, or the requested concurrency)."""
    concurrency_limit: str
    """What bounds ``concurrency``: kv_cache, tpot, ttft, requested, offered_load or
    max_batch_tokens."""
    decode_step_s: NonNegativeFloat
    """Mean time per output token (TPOT) of a sequence at this concurrency: a decode iteration
    plus the prefill work interleaved with it (s)."""
    decode_tokens_per_s_per_sequence: NonNegativeFloat
    """Output tokens/s one sequence sees (1 / decode_step_s)."""
    batch1_ceiling_tokens_per_s: NonNegativeFloat
    """Bandwidth ceiling at batch 1: HBM bandwidth / weight bytes read per token, over the
    pipeline (no overheads)."""
    ttft_s: NonNegativeFloat
    """Time to first token of one prompt, joining the running batch (no queueing) (s)."""
    prefill_s: NonNegativeFloat
    """Prefill of one prompt on an idle replica (s)."""
    throughput_tokens_per_s: NonNegativeFloat
    """Output tokens/s of the whole deployment."""
    throughput_tokens_per_s_per_gpu: NonNegativeFloat
    """Output tokens/s per GPU."""
    fits: bool
    """Weights, workspace and at least one full-context sequence fit every GPU."""
    memory: ServeMemory
    """Memory per GPU."""
    breakdown_s: dict[str, float]
    """Time per output token by term (linear, attention, tp_comm, ep_comm, pp_comm, overhead,
    elementwise: the HBM traffic of norms, rotary and activations, and prefill: the prompt
    chunks interleaved with the decode iterations), seconds; they sum to decode_step_s."""
    placement: dict[str, PlacementEntry]
    """Per parallel dimension: where its groups land."""
    decode_iteration_s: NonNegativeFloat = 0.0
    """One decode-only iteration at this concurrency (no prompt tokens in it) (s)."""
    decode_hbm_floor_s: NonNegativeFloat = 0.0
    """HBM floor of that iteration: weight bytes it touches + KV bytes it reads, per GPU, over
    the spec-sheet bandwidth (s); the iteration can never be faster."""
    context_tokens: NonNegativeFloat = 0.0
    """Mean context of a decoding sequence the prediction assumes (tokens)."""
    latency: ServeLatency | None = None
    """Request latencies at this load (with queueing under a request rate)."""
    targets: list[TargetCheck] = Field(default_factory=list)
    """Each latency target against the achieved figure."""
    engine: ServeEngine | None = None
    """The engine settings the prediction assumed."""
    uncertainty_pct: float | None = None
    """Half-width of the error band (percent): the ``uncertainty_level`` quantile of |error| of
    the serving validation rows of this accelerator family, each predicted with the engine's
    overheads fitted without its source, widened by the factors of ``topologies/trust.yaml``
    (``warnings`` says which); None when no family has serving rows."""
    uncertainty_level: float | None = None
    """Share of runs the band is meant to hold (0.8 = an 80% band); None with no band."""
    warnings: list[str] = Field(default_factory=list)
    """What the prediction does not know."""
    why_not: str | None = None
    """For an alternative: why it loses to the best plan."""


class ParetoPoint(FrozenSpec):
    """One (layout, batch) on the throughput-per-GPU vs per-user frontier."""

    layout: ServeLayout
    """The replica layout (replicas: as many as the cluster holds)."""
    concurrency: PositiveInt
    """Sequences per replica."""
    tokens_per_s_per_gpu: NonNegativeFloat
    """Output tokens/s per GPU."""
    tokens_per_s_per_user: NonNegativeFloat
    """Output tokens/s one sequence sees (1 / TPOT)."""
    tpot_s: NonNegativeFloat
    """Mean time per output token (s)."""
    ttft_s: NonNegativeFloat
    """Time to first token joining that batch, without queueing (s)."""


class ServePool(FrozenSpec):
    """One pool of a disaggregated deployment: identical instances of one layout."""

    role: Literal["prefill", "decode"]
    """What the pool runs."""
    layout: ServeLayout
    """One instance's layout (``replicas`` = instances)."""
    instances: PositiveInt
    """Instances in the pool."""
    num_gpus: PositiveInt
    """GPUs of the pool."""
    concurrency: PositiveInt
    """Decode: sequences per instance; prefill: prompts one forward pass carries."""
    requests_per_s: NonNegativeFloat
    """Requests/s the pool completes at full load."""


class DisaggregatedPlan(FrozenSpec):
    """Prefill and decode on separate pools (xPyD), with the KV cache sent between them."""

    prefill: ServePool
    """The prefill pool (x instances)."""
    decode: ServePool
    """The decode pool (y instances)."""
    num_gpus: PositiveInt
    """GPUs of both pools."""
    kv_transfer_s: NonNegativeFloat
    """Time to send one prompt's KV cache from a prefill to a decode instance (s)."""
    kv_link: Text
    """The link the KV cache crosses (from the cluster graph)."""
    ttft_s: NonNegativeFloat
    """Prefill on an idle instance + KV transfer + the first decode step (s)."""
    tpot_s: NonNegativeFloat
    """Time per output token of the decode pool (decode-only iterations) (s)."""
    throughput_tokens_per_s: NonNegativeFloat
    """Output tokens/s of the deployment: the slower pool's requests/s x OSL."""
    throughput_tokens_per_s_per_gpu: NonNegativeFloat
    """Output tokens/s per GPU."""
    aggregated_tokens_per_s_per_gpu: NonNegativeFloat
    """The best aggregated plan's tokens/s per GPU, for comparison."""
    speedup: float
    """Disaggregated over aggregated tokens/s per GPU."""
    verdict: Text
    """Which wins, and why, in one sentence."""


class ServeSolverInfo(FrozenSpec):
    """How the serving search's solver ended."""

    name: Literal["sort", "exhaustive", "cp-sat"]
    """How the best layout was chosen: ``sort`` (numpy) or ``exhaustive`` (a plain sort);
    ``cp-sat`` only in plans saved by layout before 1.3."""
    status: str
    """OPTIMAL, FEASIBLE, INFEASIBLE or UNKNOWN."""
    objective: str
    """What was optimised, in words (e.g. 'max throughput_tokens_per_s_per_gpu')."""
    objective_value: float
    """The best plan's objective value in the unit named by ``objective``."""


class ServeSearchResult(FrozenSpec):
    """The answer of ``layout search --mode serve``."""

    schema_version: str = SCHEMA_VERSION
    """Version of this JSON shape."""
    mode: Literal["serve"] = "serve"
    """Serving search."""
    best: ServePlan
    """The best plan."""
    alternatives: list[ServePlan]
    """Runners-up, best first, each with ``why_not``."""
    search_time_s: NonNegativeFloat
    """Wall time of the search (s)."""
    num_candidates: int
    """Layouts enumerated."""
    num_feasible: int
    """Layouts that fit and meet the targets."""
    rejections: dict[str, int]
    """Rejected layouts counted by reason code."""
    solver: ServeSolverInfo
    """Solver status."""
    pareto: list[ParetoPoint] = Field(default_factory=list)
    """Output tokens/s per GPU against tokens/s per user over every feasible layout and batch
    size (powers of two up to what the KV cache and the token budget hold; latency targets
    ignored): the non-dominated points, fastest per user first."""
    disaggregated: DisaggregatedPlan | None = None
    """The best prefill/decode split (with ``disaggregate``), compared with ``best``."""


def common_noun(nouns: Iterable[str]) -> str:
    """One word for a set of accelerators named by ``nouns`` (their ``device_noun``s): the noun
    when they all share it, 'accelerator' when they mix GPUs and TPU chips, 'GPU' with none.

    >>> common_noun([]), common_noun(["chip", "chip"]), common_noun(["chip", "GPU"])
    ('GPU', 'chip', 'accelerator')
    """
    distinct = set(nouns)
    if len(distinct) > 1:
        return "accelerator"
    return distinct.pop() if distinct else "GPU"


def shared_device_noun(plans: Iterable[Plan | ServePlan]) -> str:
    """The word for one accelerator across ``plans`` (a migration's two, a sweep's scenarios):
    :func:`common_noun` of their ``device_noun``.

    >>> shared_device_noun([]), shared_device_noun([Plan.model_construct(device_noun="chip")])
    ('GPU', 'chip')
    >>> shared_device_noun([Plan.model_construct(device_noun="chip"), Plan.model_construct()])
    'accelerator'
    """
    return common_noun(plan.device_noun for plan in plans)
