"""One training step: combine the per-stage micro-batch times, the pipeline schedule, the data-
parallel synchronisation and the optimizer into a step time; and the per-stage memory.

Overlap policy (named, explicit; ``OVERLAP_POLICY`` below). Overlapped communication is never
free: beyond the part that outlasts its compute, the accelerator's ``overlap_contention`` fraction
of the overlapped time is charged (:func:`planner.cost.stage.overlapped_exposed_time`).
- TP collectives hide behind the layer's GEMMs when ``tp_comm_overlap`` is on, else are exposed;
  EP all-to-all is exposed unless ``ep_comm_overlap`` hides it behind another micro-batch's
  compute; the CP K/V ring hides behind attention; the MoE dispatcher's host sync is exposed,
  except what the other micro-batch's expert backward runs through under ``ep_comm_overlap``;
  the passes that schedule leaves unpaired (the first forward and the last backward, the
  pipeline's warmup and cooldown) expose their all-to-all and syncs (:func:`unpaired_microbatches`).
- DP: the last gradient bucket's reduction and the first bucket's gather are exposed.
- DP gradient reduce-scatter (all-reduce at ZeRO-0) overlaps with the backward pass of the last
  micro-batch, and the ZeRO parameter all-gather with the forward of the first one
  (Megatron-LM ``--overlap-grad-reduce`` / ``--overlap-param-gather``); ZeRO-2/3 reduce every
  micro-batch, ZeRO-3 gathers parameters for every forward and backward. Without that overlap
  (``TrainWorkload.dp_comm_overlap`` False: Megatron-LM before 2023-08, DeepSpeed below ZeRO-3)
  the whole reduction and gather are exposed.
- Pipeline sends are exposed: 2 per micro-batch per virtual stage, plus the fill.
- Each step adds the accelerator's fitted ``step_overhead_ms`` (none where unknown): the host
  synchronisation and relaunch of an eager training loop, the step's small collectives,
  amortised over the loop's ``host_sync_interval`` (:func:`host_sync_time`).
The step time is the sum of the exposed terms (``breakdown_s``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import lru_cache

from pydantic import Field

from planner.cost.comm import (
    all_gather_time,
    overlapped_exposed_time,
    p2p_time,
    reduce_scatter_time,
    ring_all_reduce_time,
)
from planner.cost.compute import model_flops_per_token
from planner.cost.memory import (
    ACTIVATION_BYTES,
    GRAD_BYTES,
    MASTER_WEIGHT_BYTES,
    MOMENT_BYTES,
    stage_layers,
)
from planner.cost.partition import StageContents, chunk_contents, stage_contents
from planner.cost.pipeline import (
    bubble_is_a_share,
    combined_1f1b_unpaired_microbatches,
    dualpipe_bubble_time,
    dualpipe_unpaired_microbatches,
    zero_bubble_share,
)
from planner.cost.profile import layer_table
from planner.cost.sharding import (
    all_reduces_whole_buffer,
    dp_sync_overlapped,
    fsdp2_buffer_copy_bytes,
    gathered_param_bytes,
    param_gathers_per_microbatch,
    reduces_in_buckets,
    reduces_once_per_step,
    shard_ranks,
    zero3_reshards,
)
from planner.cost.stage import MicrobatchTime, microbatch_time
from planner.cost.stage_memory import (
    StageMemory,
    StageMemoryProfile,
    stage_memory_profile,
    stage_params_per_gpu,
)
from planner.specs.base import FrozenSpec
from planner.specs.comm import CommDomain
from planner.specs.formats import NumberFormat, bytes_per_value
from planner.specs.hardware import AcceleratorSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.workload import TrainWorkload
from planner.units import MS

OVERLAP_POLICY = (
    "tp-behind-gemms-if-enabled; ep-exposed-or-behind-other-microbatch; cp-behind-attention; "
    "dp-behind-one-microbatch-but-last-bucket; pp-sends-exposed; overlap-contention"
)
"""Name of the overlap policy this module implements (reported with every estimate)."""
OPTIMIZER_STEP_BYTES_PER_PARAM = 30.0
"""Adam step traffic per parameter with fp32 moments: read fp32 master, m, v, grad (16 B), write
master, m, v (12 B) and the bf16 weight (2 B)."""


def optimizer_step_bytes_per_param(workload: TrainWorkload) -> float:
    """HBM traffic of the Adam step per parameter: :data:`OPTIMIZER_STEP_BYTES_PER_PARAM` with
    the two moments read and written in ``workload.optimizer_state_dtype``.

    Without a master copy (``master_copy`` False) the step reads and writes the bf16 parameter
    (2 + 2 B) instead of the fp32 master (4 + 4 B) beside the bf16 weight it writes.

    >>> optimizer_step_bytes_per_param(TrainWorkload(optimizer_state_dtype="bf16"))
    22.0
    >>> optimizer_step_bytes_per_param(TrainWorkload(optimizer_state_dtype="bf16",
    ...     master_copy=False))
    16.0
    """
    saved = 2 * 2 * (MOMENT_BYTES["fp32"] - MOMENT_BYTES[workload.optimizer_state_dtype])
    if not workload.master_copy:
        # no fp32 master read and written; the bf16 weight read instead (its write is counted)
        saved += 2 * MASTER_WEIGHT_BYTES - bytes_per_value(NumberFormat.BF16)
    return OPTIMIZER_STEP_BYTES_PER_PARAM - saved


__all__ = [
    "OVERLAP_POLICY",
    "StageMemory",
    "StepCost",
    "estimate_memory",
    "estimate_step",
    "representative_stages",
    "step_time_floor",
    "step_time_lower_bound",
]


class StepCost(FrozenSpec):
    """The cost model's answer for one layout."""

    step_time_s: float
    """Predicted step time (s): the sum of ``breakdown_s``."""
    breakdown_s: dict[str, float]
    """Exposed seconds per term."""
    stages: list[int]
    """Pipeline stages evaluated (the first, second and last bound time and memory)."""
    stage_memory: list[StageMemory]
    """Memory of one GPU of each evaluated stage, aligned with ``stages``."""
    model_flops_per_step: float
    """Model FLOPs of one step (no recompute)."""
    num_microbatches: int = Field(ge=1)
    """Micro-batches per step per pipeline."""
    stage_times: list[MicrobatchTime] = Field(default_factory=list)
    """Critical-path time of one micro-batch on each evaluated stage, aligned with ``stages``
    (they do not depend on the ZeRO stage, so the search reuses them across ZeRO stages)."""
    slowest_chunk_s: float | None = None
    """Micro-batch time of the slowest model chunk of an interleaved pipeline, which prices the
    bubble (:func:`slowest_chunk_time`); None without interleaving. Like ``stage_times`` it
    does not depend on the ZeRO stage."""
    unprefetched_share: float = Field(default=0.0, ge=0.0, le=1.0)
    """Share of ZeRO-3's layer passes whose gathers wait for memory instead of being prefetched
    (:func:`unprefetched_share`; 0 where the prefetch fits or the framework does not yield it)."""

    @property
    def peak_stage(self) -> int:
        """Stage with the largest memory."""
        totals = [s.total for s in self.stage_memory]
        return self.stages[totals.index(max(totals))]

    @property
    def peak_memory(self) -> StageMemory:
        """Memory of the stage with the largest total."""
        return max(self.stage_memory, key=lambda s: s.total)


def optimizer_step_time(
    dense_params: float,
    expert_params: float,
    workload: TrainWorkload,
    layout: Layout,
    *,
    hbm_bytes_per_s: float,
) -> float:
    """The optimizer step of a rank holding ``dense_params`` and ``expert_params`` per GPU:
    its shard (dense parameters over the ZeRO shard ranks, :func:`planner.cost.sharding.
    shard_ranks`, experts over the expert-data-parallel group dp x cp x tp / (ep x etp); all of
    them at ZeRO-0) streamed at :func:`optimizer_step_bytes_per_param` bytes each, at the
    effective HBM bandwidth.

    >>> optimizer_step_time(1e9, 0.0, TrainWorkload(), Layout(dp=8), hbm_bytes_per_s=1e12) > 0
    True
    """
    edp = max(1, layout.dp * layout.cp * layout.tp // (layout.ep * layout.etp))
    if layout.zero >= 1:
        shard = dense_params / shard_ranks(workload, layout) + expert_params / edp
    else:
        shard = dense_params + expert_params
    return optimizer_step_bytes_per_param(workload) * shard / hbm_bytes_per_s


def host_sync_time(step_overhead_ms: float | None, workload: TrainWorkload) -> float:
    """Seconds per step the training loop loses to host synchronisation: the fitted cost of one
    sync (``AcceleratorEfficiency.step_overhead_ms``; none where unknown) over the steps between
    syncs (``TrainWorkload.host_sync_interval``; None = the loop never stops the host).

    An eager loop that reads the gradient norm or the loss on the host waits for the device to
    drain, and the device then idles while the host launches the optimizer's and the next
    step's first kernels (docs/calibration.md, "A fixed cost per step"); a loop that reads them
    every N steps pays that once in N.

    >>> from planner.specs.workload import TrainWorkload
    >>> round(host_sync_time(80.0, TrainWorkload()) * 1e3, 3)
    80.0
    >>> round(host_sync_time(80.0, TrainWorkload(host_sync_interval=10)) * 1e3, 3)
    8.0
    >>> host_sync_time(80.0, TrainWorkload(host_sync_interval=None))
    0.0
    """
    if not step_overhead_ms or workload.host_sync_interval is None:
        return 0.0
    return step_overhead_ms * MS / workload.host_sync_interval


def representative_stages(pp: int, model: ModelSpec | None = None, seq_len: int = 0) -> list[int]:
    """Stages that bound time and memory: the first (embedding, most micro-batches in flight),
    the second (the first middle stage: pp - 1 in flight), the last (logits), and, for a model
    whose layers differ in size (leading dense layers before the MoE ones), every middle stage
    up to the first that holds the most parameters: later middle stages have no more layers,
    no more parameters and fewer micro-batches in flight, so none of them can be the peak.

    >>> representative_stages(1), representative_stages(2), representative_stages(8)
    ([0], [0, 1], [0, 1, 7])
    """
    stages = {0, min(1, pp - 1), pp - 1}
    if model is not None and pp > 3:
        heaviest = _first_heaviest_middle_stage(model, pp, seq_len)
        stages.update(range(1, heaviest + 1))
    return sorted(stages)


@lru_cache(maxsize=4096)
def _first_heaviest_middle_stage(model: ModelSpec, pp: int, seq_len: int) -> int:
    table = layer_table(model, seq_len)
    weights = []
    for stage in range(1, pp - 1):
        layers = stage_layers(model, pp, stage)
        weights.append(
            (table.total("dense_params", layers) + table.total("expert_params", layers), -stage)
        )
    return -max(weights)[1]


def pipeline_bubble_time(
    workload: TrainWorkload,
    layout: Layout,
    slowest: MicrobatchTime,
    chunk_s: float | None = None,
) -> float:
    """Idle time of the slowest stage per step: pp - 1 times a model chunk's micro-batch time
    (forward and backward) under 1F1B and its interleaved form, the share of it zero bubble
    leaves (:func:`planner.cost.pipeline.zero_bubble_share`), or DualPipe's
    (:func:`planner.cost.pipeline.dualpipe_bubble_time`).

    The fill and drain of the pipeline pass one micro-batch through the pp - 1 other ranks, a
    chunk at a time: with v equal chunks per rank that is (pp - 1)/v rank micro-batch times
    (Narayanan et al. SC'21, section 2.2). Chunks are rarely equal (layers that do not divide
    by pp x v, the embedding on the first chunk, the output layer and loss on the last, a
    stage split that moves layers between chunks), and a ramp waits on the slower ones, so the
    bubble is priced at the slowest chunk's time ``chunk_s`` (:func:`slowest_chunk_time`),
    never less than the rank's average chunk (``slowest.total`` / v). Without interleaving the
    chunk is the rank.

    >>> t = MicrobatchTime(forward_s=1.0, backward_s=2.0, tp_comm_s=0, cp_comm_s=0, ep_comm_s=0)
    >>> w, layout = TrainWorkload(), Layout(pp=4, vpp=2)
    >>> pipeline_bubble_time(w, layout, t), pipeline_bubble_time(w, layout, t, chunk_s=2.0)
    (4.5, 6.0)
    >>> pipeline_bubble_time(TrainWorkload(pipeline_schedule="zero_bubble"), layout, t)  # 4.5 / 3
    1.5
    """
    if workload.pipeline_schedule == "dualpipe":
        return dualpipe_bubble_time(layout.pp, slowest.forward_s, slowest.backward_s)
    chunk = slowest.total / layout.vpp
    if chunk_s is not None:
        chunk = max(chunk, chunk_s)
    if workload.pipeline_schedule == "zero_bubble":
        return (layout.pp - 1) * chunk * zero_bubble_share(slowest.forward_s, slowest.backward_s)
    return (layout.pp - 1) * chunk


def unpaired_microbatches(workload: TrainWorkload, layout: Layout, num_microbatches: int) -> float:
    """Micro-batches' worth of passes whose expert-parallel all-to-all and dispatcher syncs no
    other micro-batch hides under ``ep_comm_overlap``: Megatron-LM's combined 1F1B (the ``1f1b``
    schedule) leaves its first forward and last backward, and a pipeline's warmup and cooldown,
    unpaired (:func:`planner.cost.pipeline.combined_1f1b_unpaired_microbatches`), DualPipe the
    passes of its end ranks' warmup and drain
    (:func:`planner.cost.pipeline.dualpipe_unpaired_microbatches`); 0 without the overlap, and
    under the schedules that do not pair passes for it (zero bubble, GPipe).

    >>> unpaired_microbatches(TrainWorkload(ep_comm_overlap=True), Layout(pp=1), 5)
    1.0
    >>> unpaired_microbatches(TrainWorkload(), Layout(pp=1), 5)
    0.0
    >>> w = TrainWorkload(ep_comm_overlap=True, pipeline_schedule="dualpipe")
    >>> unpaired_microbatches(w, Layout(pp=16), 120)
    23.0
    """
    if not workload.ep_comm_overlap:
        return 0.0
    if workload.pipeline_schedule == "1f1b":
        return combined_1f1b_unpaired_microbatches(layout.pp, layout.vpp, num_microbatches)
    if workload.pipeline_schedule == "dualpipe" and layout.pp > 1:
        return float(dualpipe_unpaired_microbatches(layout.pp, num_microbatches))
    return 0.0


def pipeline_steps(workload: TrainWorkload, layout: Layout) -> float:
    """Micro-batch times one step takes on the slowest stage: m + (pp - 1) / vpp (the bubble of
    equal chunks, a lower bound of the cost model's: it prices the bubble at the slowest chunk,
    never below the rank's average chunk, :func:`pipeline_bubble_time`). Under DualPipe the
    bubble is a share of the forward only (:func:`planner.cost.pipeline.dualpipe_bubble_time`),
    and under zero bubble a share of the chunk that depends on its forward and backward
    (:func:`planner.cost.pipeline.zero_bubble_share`), so it counts nothing: m.

    >>> pipeline_steps(TrainWorkload(global_batch=64), Layout(pp=4, vpp=3, dp=2, mbs=4))
    9.0
    """
    m = workload.global_batch // (layout.dp * layout.mbs)
    if bubble_is_a_share(workload.pipeline_schedule):
        return float(m)
    return m + (layout.pp - 1) / layout.vpp


def slowest_chunk_time(
    model: ModelSpec,
    acc: AcceleratorSpec,
    workload: TrainWorkload,
    layout: Layout,
    domains: dict[str, CommDomain],
    split: PipelineSplit | None = None,
) -> float:
    """Micro-batch time (forward and backward, with its communication) of the slowest of the
    pp x vpp model chunks of an interleaved pipeline (:func:`planner.cost.partition.
    chunk_contents`), each scored as a one-chunk rank by :func:`planner.cost.stage.
    microbatch_time`. Chunks alike in what they hold are scored once, and a chunk that holds
    no more of any kind of work than another with the same extras (output layer, MTP modules,
    pipeline receives read on the host) is not scored: it is never the slower."""
    one_chunk = layout.model_copy(update={"vpp": 1})
    slowest = 0.0
    for chunk, contents in chunks_to_score(
        model, workload, layout.pp, layout.vpp, layout.recompute, split
    ):
        slowest = max(slowest, microbatch_time(
            model, acc, workload, one_chunk, stage=chunk % layout.pp, domains=domains,
            contents=contents,
        ).total)  # fmt: skip
    return slowest


@lru_cache(maxsize=4096)
def chunks_to_score(
    model: ModelSpec,
    workload: TrainWorkload,
    pp: int,
    vpp: int,
    recompute: Recompute,
    split: PipelineSplit | None,
) -> tuple[tuple[int, StageContents], ...]:
    """The model chunks :func:`slowest_chunk_time` scores, with what each holds: one of each
    group of chunks alike in their extras (output layer, MTP modules, pipeline receives read on
    the host) and their work, and of those not one that holds no more of each kind of work than
    another of its group. What a chunk holds depends on the pipeline's pp, vpp, recomputation
    and split only, not on the other degrees, so the chunks are found once for every layout
    that shares them (cached).

    >>> from planner.cost.params import _tiny
    >>> [c for c, _ in chunks_to_score(_tiny(), TrainWorkload(), 2, 2, Recompute.NONE, None)]
    [1, 3]
    """
    layout = Layout(pp=pp, vpp=vpp, recompute=recompute)
    table = layer_table(model, workload.seq_len)
    edge = (0, pp - 1)
    found: dict[tuple[object, ...], dict[tuple[float, ...], tuple[int, StageContents]]] = {}
    for chunk in range(pp * vpp):
        contents = chunk_contents(model, workload, layout, chunk, split)
        extras = (  # the embedding (first) costs no time of its own: it is not an extra
            contents.last,
            contents.mtp,
            workload.pp_host_sync and chunk % pp in edge,  # receives read on the host
        )
        work = (
            float(contents.num_layers),
            table.sum("moe_layers", contents.layers),
            table.sum("attention_flops", contents.layers),
            table.sum("linear_flops", contents.layers),
            float(contents.num_recomputed),
        )
        found.setdefault(extras, {}).setdefault(work, (chunk, contents))

    def dominated(work: tuple[float, ...], group: Mapping[tuple[float, ...], object]) -> bool:
        """Another chunk of the group holds at least as much of each kind of work."""
        return any(
            other != work and all(o >= w for o, w in zip(other, work, strict=True))
            for other in group
        )

    return tuple(
        (chunk, contents)
        for group in found.values()
        for work, (chunk, contents) in group.items()
        if not dominated(work, group)
    )


def pipeline_send_time(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, domains: dict[str, CommDomain]
) -> float:
    """Exposed pipeline point-to-point time of one step: 2 (m v + pp - 1) sends (a forward and
    a backward one for each of the m x v chunk passes a rank makes, and for the pp - 1 steps of
    the fill and drain) of one micro-batch's activations, mbs x seq / cp x hidden at
    ACTIVATION_BYTES, each rank sending its 1/tp share. It does not depend on how the layers
    are split over the stages (the search's split sweep bounds a split's step with it).

    >>> from planner.catalog import load_model, load_cluster
    >>> from planner.topology import comm_domains
    >>> c = load_cluster("hgx_h100x16")
    >>> pipeline_send_time(load_model("8B"), TrainWorkload(), Layout(dp=16), comm_domains(c,
    ...     Layout(dp=16)))
    0.0
    """
    if layout.pp == 1:
        return 0.0
    m = workload.global_batch // (layout.dp * layout.mbs)
    message = ACTIVATION_BYTES * layout.mbs * workload.seq_len / layout.cp * model.hidden_size
    sends = 2 * (m * layout.vpp + layout.pp - 1)
    return sends * p2p_time(message / layout.tp, domains["pp"])


def dp_exposed_time(
    dense_params: float,
    expert_params: float,
    layout: Layout,
    domains: dict[str, CommDomain],
    *,
    slowest: MicrobatchTime,
    num_microbatches: int,
    workload: TrainWorkload | None = None,
    contention: float = 0.0,
    tail_params: float = 0.0,
    units: int = 1,
    unprefetched: float = 0.0,
) -> float:
    """Exposed data-parallel synchronisation of one step.

    Dense gradients reduce over dp x cp, expert gradients over the expert-data-parallel group.
    ZeRO >= 1: reduce-scatter of the gradients (``grad_dtype``) + all-gather of bf16 parameters;
    ZeRO-0: all-reduce; a ZeRO-1 that all-reduces its whole gradient buffer after the backward
    (:func:`planner.cost.sharding.all_reduces_whole_buffer`, Nanotron's): the all-reduce and
    the gather, neither overlapped.
    The reduction overlaps the last micro-batch's backward, the gather the first one's forward;
    ZeRO-2/3 reduce-scatter every micro-batch's gradients (sharded gradients cannot accumulate
    locally), and ZeRO-3 gathers bf16 parameters in every micro-batch's forward and, when it
    reshards, backward (Rajbhandari et al. 2020, section 5; PyTorch FSDP), unless it keeps the
    stage gathered across micro-batches under pipeline parallelism
    (:func:`planner.cost.sharding.reduces_once_per_step`: one reduction and one gather per step,
    as ZeRO-1). ``workload`` gives the gradient dtype and ZeRO-3's resharding (default:
    TrainWorkload's).
    With one reduction per step, gradients reduce in buckets as the backward produces them; the
    last bucket (``tail_params``: :func:`dp_tail_params`) is ready only when the backward ends,
    so its reduce-scatter is exposed, and the next forward waits for the first bucket's
    all-gather (Li et al., "PyTorch Distributed", VLDB 2020, section 3.2.3; Megatron-LM
    ``--overlap-grad-reduce`` / ``--overlap-param-gather`` buckets).
    ZeRO-3 gathers and reduces a stage's parameters per micro-batch in ``units`` collectives,
    one per wrapped module (:func:`fsdp_units`): each pays the collective's latency, so a stage
    of L layers pays L latencies per pass where one gather of the whole stage would pay one
    (:func:`split_collective_time`). Below ZeRO-3 a reduction behind the backward runs one
    collective per gradient bucket (:func:`planner.cost.sharding.reduces_in_buckets`,
    :func:`ddp_bucket_params` parameters; one reduce-scatter and one all-gather each), each
    paying the ring's (n - 1) alpha: Nemotron-4 15B at TP 8 holds 1.95B parameters per GPU,
    49 buckets of 40M, so over 288 data-parallel ranks it pays 49 x 287 alpha per collective
    where one buffer would pay 287.
    ``unprefetched``: the share of a resharding ZeRO-3's layer passes whose gathers and
    reductions wait for the running unit to be freed (:func:`unprefetched_share`): they run in
    line, the rest behind the rest of the compute.
    """
    workload = workload or TrainWorkload()
    grad_bytes = GRAD_BYTES[workload.grad_reduce_dtype]
    param_bytes = gathered_param_bytes(workload, layout)
    dp = domains.get("dp_cp", domains["dp"])
    edp = domains.get("edp", dp)
    if dp.size == 1 and edp.size == 1:
        return 0.0
    sharded_reduce = layout.zero >= 1 and not all_reduces_whole_buffer(workload, layout)
    reduce_time = reduce_scatter_time if sharded_reduce else ring_all_reduce_time
    shard, replicas = domains.get("dp_shard"), domains.get("dp_replicate")

    def dense_reduce(num_bytes: float) -> float:
        if shard is None or replicas is None or not sharded_reduce:
            return reduce_time(num_bytes, dp)
        # hybrid sharding: reduce-scatter inside the shard group, then all-reduce the shard
        # across its replicas (PyTorch HSDP; Zhao et al. VLDB 2023 section 3.2.2)
        return reduce_time(num_bytes, shard) + ring_all_reduce_time(
            num_bytes / shard.size, replicas
        )

    def dense_gather(num_bytes: float) -> float:
        return all_gather_time(num_bytes, shard if shard is not None else dp)

    # ZeRO-3 reducing and gathering per micro-batch makes one call per wrapped module (one
    # for the stage when it keeps its parameters gathered over the step); below ZeRO-3 a
    # reduction behind the backward makes one per gradient bucket, one buffer without overlap
    calls = expert_calls = 1
    if layout.zero >= 3:
        calls = expert_calls = 1 if reduces_once_per_step(workload, layout) else units
    elif reduces_in_buckets(workload, layout):
        bucket = ddp_bucket_params(layout, workload)
        calls = max(1, math.ceil(dense_params / bucket))
        expert_calls = max(1, math.ceil(expert_params / bucket))
    reduce = split_collective_time(dense_reduce, grad_bytes * dense_params, calls)
    reduce += split_collective_time(
        lambda b: reduce_time(b, edp), grad_bytes * expert_params, expert_calls
    )
    gather = 0.0
    if layout.zero >= 1:
        gather = split_collective_time(dense_gather, param_bytes * dense_params, calls)
        gather += split_collective_time(
            lambda b: all_gather_time(b, edp), param_bytes * expert_params, expert_calls
        )
    tail = min(tail_params, dense_params)
    tail_reduce = dense_reduce(grad_bytes * tail)
    tail_gather = dense_gather(param_bytes * tail) if layout.zero >= 1 else 0.0

    def bucketed(total: float, last: float, compute: float) -> float:
        """The last bucket's collective exposed, the rest behind ``compute``."""
        return last + overlapped_exposed_time(max(0.0, total - last), compute, contention)

    if not reduces_once_per_step(workload, layout):
        if not dp_sync_overlapped(workload, layout):
            # ZeRO-2 without overlap: each backward's reduction runs after it, exposed
            return num_microbatches * reduce + gather
        # Sharded gradients cannot wait for the last micro-batch: every backward reduce-scatters
        # its gradients, the last bucket after the backward ends (and ZeRO-3 re-gathers the
        # parameters for every forward, and backward when it reshards, prefetching them behind
        # the compute).
        gathers = param_gathers_per_microbatch(workload, layout) * gather
        compute = slowest.backward_s + (slowest.forward_s if layout.zero >= 3 else 0.0)
        hidden = max(0.0, reduce - tail_reduce) + gathers
        in_line = unprefetched if layout.zero >= 3 else 0.0
        per_microbatch = (
            tail_reduce
            + in_line * hidden
            + overlapped_exposed_time(
                (1.0 - in_line) * hidden, (1.0 - in_line) * compute, contention
            )
        )
        first_gather = tail_gather
        if layout.zero < 3:
            first_gather = bucketed(gather, tail_gather, slowest.forward_s)
        return num_microbatches * per_microbatch + first_gather
    if not dp_sync_overlapped(workload, layout):
        # the whole reduction after the last backward, the gather after the optimizer step
        return reduce + gather
    exposed = bucketed(reduce, tail_reduce, slowest.backward_s)
    rounds = math.ceil(num_microbatches / layout.pp)
    if workload.pp_grad_sync == "round" and layout.zero >= 3 and rounds > 1:
        # each earlier round's reduction hides behind the rounds that follow it
        later = (num_microbatches - layout.pp) * (slowest.forward_s + slowest.backward_s)
        exposed += overlapped_exposed_time((rounds - 1) * reduce, later, contention)
    return (
        exposed
        + tail_gather
        + overlapped_exposed_time(max(0.0, gather - tail_gather), slowest.forward_s, contention)
    )


def split_collective_time(
    collective: Callable[[float], float], num_bytes: float, units: int
) -> float:
    """Time of ``units`` collectives that move ``num_bytes`` between them in equal shares:
    ``units`` x collective(num_bytes / units), so the bandwidth term is the one collective's and
    the latency term (ring: (n - 1) alpha per all-gather or reduce-scatter, nccl-tests
    doc/PERFORMANCE.md; NVIDIA/nccl src/graph/tuning.cc adds it per call) is paid ``units``
    times. 0 for an empty buffer, as no framework launches one.

    >>> from planner.cost.comm import all_gather_time
    >>> from planner.specs.comm import CommDomain
    >>> d = CommDomain(size=8, bandwidth_bytes_per_s=1e9, latency_s=1e-5, efficiency=1,
    ...                tier="scale_out")
    >>> round(split_collective_time(lambda b: all_gather_time(b, d), 8e6, 1) * 1e3, 3)  # 7 + 0.07
    7.07
    >>> round(split_collective_time(lambda b: all_gather_time(b, d), 8e6, 10) * 1e3, 3)  # 7 + 0.7
    7.7
    """
    if num_bytes <= 0:
        return 0.0
    return units * collective(num_bytes / units)


def fsdp_units(contents: StageContents) -> int:
    """Separately gathered modules of a pipeline rank under ZeRO-3: one per transformer layer
    (PyTorch FSDP's auto-wrap policy and FSDP2's per-block ``fully_shard`` in torchtitan,
    torchtitan/models/llama3/infra/parallelize.py apply_fsdp; Megatron-FSDP's per-module
    units; XLA's scan over layers gathers each layer's weights in its iteration) plus one for
    the rest the rank holds (embedding, final norm, output layer).

    >>> from planner.cost.partition import StageContents
    >>> fsdp_units(StageContents((range(0, 4),), None, True, False, 0, False))
    5
    """
    rest = 1 if contents.first or contents.last or contents.output_weights else 0
    return max(1, contents.num_layers + rest)


DDP_BUCKET_PARAMS = 40e6
"""Megatron-LM's gradient bucket: max(40M, 1M x dp) parameters when the reduction overlaps
the backward (megatron/training/training.py, ``get_model``: ``ddp_config.bucket_size``)."""

DDP_BUCKET_PARAMS_PER_RANK = 1e6
"""The 1M x dp term of that bucket size (same source): larger data-parallel groups get larger
buckets."""


def ddp_bucket_params(layout: Layout, workload: TrainWorkload | None = None) -> float:
    """Parameters per gradient bucket: the workload's ``ddp_bucket_params``, else
    Megatron-Core's max(40M, 1M x dp x cp).

    >>> ddp_bucket_params(Layout(dp=96)), ddp_bucket_params(Layout(dp=8))
    (96000000.0, 40000000.0)
    """
    if workload is not None and workload.ddp_bucket_params is not None:
        return workload.ddp_bucket_params
    return max(DDP_BUCKET_PARAMS, DDP_BUCKET_PARAMS_PER_RANK * layout.dp * layout.cp)


def dp_tail_params(
    model: ModelSpec, layout: Layout, stage: int = 0, workload: TrainWorkload | None = None
) -> float:
    """Parameters per GPU in the bucket that reduces after ``stage``'s backward ends: a full
    bucket (:func:`ddp_bucket_params`), or on the first stage the input embedding (the
    first parameters, so the last gradients) when it is larger, for it is never split across
    buckets.

    >>> from planner.cost.params import _tiny
    >>> dp_tail_params(_tiny(), Layout(dp=8))
    40000000.0
    """
    bucket = ddp_bucket_params(layout, workload)
    if stage != 0:
        return bucket
    return max(bucket, model.vocab_size * model.hidden_size / layout.tp)


def prefetch_yields_to_memory(workload: TrainWorkload, layout: Layout) -> bool:
    """Whether the next ZeRO-3 gather starts early only while memory allows: XLA's gathers
    (``fsdp_gather_unit`` "weight") are scheduled by its latency-hiding scheduler, which under
    its memory limit picks, before any rule that starts or finishes an asynchronous collective,
    the instruction that frees memory or keeps the peak under the limit
    (``kMemoryPeakOverLimit``, ``kDecreaseMemoryOverLimit``: "If out of memory reduce memory at
    all costs", xla/service/latency_hiding_scheduler.cc; ``SchedulerConfig.memory_limit``) [R].
    PyTorch FSDP and Megatron-FSDP prefetch by a fixed rule. Priced for a resharding ZeRO-3
    without pipeline parallelism, whose activations rise over one forward and fall over one
    backward (:func:`unprefetched_share`).

    >>> prefetch_yields_to_memory(TrainWorkload(fsdp_gather_unit="weight"), Layout(zero=3))
    True
    >>> prefetch_yields_to_memory(TrainWorkload(), Layout(zero=3))
    False
    """
    return (
        layout.zero >= 3
        and layout.pp == 1
        and workload.fsdp_gather_unit == "weight"
        and workload.unsharded_param_layers > 1.0
        and zero3_reshards(workload, layout)
        and not reduces_once_per_step(workload, layout)
    )


def unprefetched_share(
    peak_bytes: float, lean_peak_bytes: float, activation_bytes: float, capacity_bytes: float
) -> float | None:
    """Share of the layer passes that run without the prefetched unit so that a step whose
    peak with it (``peak_bytes``) exceeds ``capacity_bytes`` fits; None when it does not fit
    even without it (``lean_peak_bytes``, one unit fewer). The activations (``activation_bytes``
    at the peak) rise over the forward and fall over the backward, layer by layer, so the
    peak is over the limit by ``peak_bytes - capacity_bytes`` on the passes where the
    activations exceed ``activation_bytes`` less that excess: that share of each pass, the last
    forward layers and the first backward ones, leaves the next unit's gather (and its
    reduction) until the running one is freed.

    >>> unprefetched_share(30.0, 26.0, 10.0, 32.0), unprefetched_share(34.0, 30.0, 16.0, 32.0)
    (0.0, 0.125)
    >>> unprefetched_share(40.0, 36.0, 16.0, 32.0) is None
    True
    """
    if peak_bytes <= capacity_bytes:
        return 0.0
    if lean_peak_bytes > capacity_bytes or activation_bytes <= 0.0:
        return None
    return min(1.0, (peak_bytes - capacity_bytes) / activation_bytes)


def _memory_with_prefetch(
    model: ModelSpec,
    acc: AcceleratorSpec,
    workload: TrainWorkload,
    layout: Layout,
    memory: tuple[list[int], list[StageMemory]],
    split: PipelineSplit | None,
) -> tuple[tuple[list[int], list[StageMemory]], float]:
    """(memory, unprefetched share): where the prefetch yields to memory
    (:func:`prefetch_yields_to_memory`) and the step fits the accelerator's usable memory only
    without it at its peak, the share of the passes that run so (:func:`unprefetched_share`)
    and the memory filled to the limit, as the scheduler fills it (each stage between its
    memory with one unit fewer in flight and with all of them: a search that keeps memory
    headroom does not count on the scheduler to give up its prefetch); else as given, 0."""
    if not prefetch_yields_to_memory(workload, layout):
        return memory, 0.0
    capacity = acc.usable_memory_bytes
    peak = max(memory[1], key=lambda m: m.total)
    if peak.total <= capacity:
        return memory, 0.0
    lean = lean_prefetch_memory(model, workload, layout, split=split)
    lean_peak = max(m.total for m in lean[1])
    share = unprefetched_share(peak.total, lean_peak, peak.activations, capacity)
    if share is None:
        return memory, 0.0  # it does not fit either way: its memory as the framework runs it
    filled = (capacity - lean_peak) / (peak.total - lean_peak)
    return (
        memory[0],
        [
            low.model_copy(
                update={
                    "weights": low.weights + filled * (high.weights - low.weights),
                    "grads": low.grads + filled * (high.grads - low.grads),
                }
            )
            for low, high in zip(lean[1], memory[1], strict=True)
        ],
    ), share


def lean_prefetch_memory(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    split: PipelineSplit | None = None,
) -> tuple[list[int], list[StageMemory]]:
    """:func:`estimate_memory` with one ZeRO-3 unit fewer in flight (no prefetched unit): the
    least a step whose prefetch yields to memory needs (:func:`prefetch_yields_to_memory`)."""
    lean = workload.model_copy(
        update={"unsharded_param_layers": max(1.0, workload.unsharded_param_layers - 1.0)}
    )
    return estimate_memory(model, lean, layout, split=split)


def estimate_memory(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    split: PipelineSplit | None = None,
    profiles: list[StageMemoryProfile] | None = None,
) -> tuple[list[int], list[StageMemory]]:
    """(stages, memory of one GPU of each) for the stages that bound the peak (every stage
    under an explicit ``split``); ``profiles``: :func:`memory_profiles` of this layout at any
    ZeRO stage and micro-batch, when already known."""
    m = workload.global_batch // (layout.dp * layout.mbs)
    profiles = profiles or memory_profiles(model, workload, layout, split=split)
    return [p.stage for p in profiles], [p.memory(workload, layout, m) for p in profiles]


def memory_profiles(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    split: PipelineSplit | None = None,
) -> list[StageMemoryProfile]:
    """The memory profile (:func:`planner.cost.stage_memory.stage_memory_profile`) of each stage that
    bounds the peak; valid for every ZeRO stage and micro-batch of ``layout``'s degrees,
    recomputation and vpp."""
    stages = _stages(model, workload, layout, split)
    return [stage_memory_profile(model, workload, layout, s, split=split) for s in stages]


def _stages(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, split: PipelineSplit | None
) -> list[int]:
    """The stages to evaluate: the representative ones of the even split, or all of them."""
    if split is not None:
        return list(range(layout.pp))
    return representative_stages(layout.pp, model, workload.seq_len)


def estimate_step(
    model: ModelSpec,
    acc: AcceleratorSpec,
    workload: TrainWorkload,
    layout: Layout,
    domains: dict[str, CommDomain],
    *,
    memory: tuple[list[int], list[StageMemory]] | None = None,
    times: list[MicrobatchTime] | None = None,
    split: PipelineSplit | None = None,
    chunk_s: float | None = None,
) -> StepCost:
    """Predicted step time, breakdown and per-stage memory of ``layout``; ``memory``, ``times``
    (the per-stage micro-batch times of this layout at any ZeRO stage) and ``chunk_s`` (its
    slowest chunk's, :attr:`StepCost.slowest_chunk_s`) when already known; ``split`` assigns the
    layers to stages (default: the even split).

    Pipeline: the slowest stage sets the pace; step = m x t_stage + the bubble, (pp - 1) x the
    slowest model chunk's micro-batch time ((pp - 1)/v x t_stage when the v chunks are equal,
    Narayanan et al. SC'21, arXiv 2104.04473, section 2.2; :func:`pipeline_bubble_time`).
    """
    m = workload.global_batch // (layout.dp * layout.mbs)
    stages = _stages(model, workload, layout, split)
    times = times or [
        microbatch_time(model, acc, workload, layout, stage=s, domains=domains, split=split)
        for s in stages
    ]
    slowest = max(times, key=lambda t: t.total)
    breakdown = {
        "compute": m * (slowest.forward_s + slowest.backward_s),
        "tp_comm": m * slowest.tp_comm_s,
        "cp_comm": m * slowest.cp_comm_s,
        "ep_comm": m * slowest.ep_comm_s,
        "moe_sync": m * slowest.moe_sync_s,
        "offload": m * slowest.offload_s,
    }
    unpaired = unpaired_microbatches(workload, layout, m)
    breakdown["ep_comm"] += unpaired * slowest.ep_comm_unpaired_s
    breakdown["moe_sync"] += unpaired * slowest.moe_sync_unpaired_s
    if chunk_s is None and layout.vpp > 1 and workload.pipeline_schedule != "dualpipe":
        chunk_s = slowest_chunk_time(model, acc, workload, layout, domains, split)
    breakdown["pp_bubble"] = pipeline_bubble_time(workload, layout, slowest, chunk_s)
    breakdown["pp_comm"] = pipeline_send_time(model, workload, layout, domains)
    breakdown["pp_comm"] += m * slowest.pp_sync_s  # the receives' host syncs (pp_host_sync)
    params = {
        s: stage_params_per_gpu(
            model,
            layout,
            s,
            workload.seq_len,
            contents=stage_contents(model, workload, layout, s, split),
        )
        for s in stages
    }
    hbm = acc.hbm_bytes_per_s * acc.efficiency.hbm
    copy_bytes = fsdp2_buffer_copy_bytes(workload, layout, m)
    memory = memory or estimate_memory(model, workload, layout, split=split)
    memory, unprefetched = _memory_with_prefetch(model, acc, workload, layout, memory, split)
    breakdown["dp_comm"] = max(
        dp_exposed_time(
            *params[s],
            layout,
            domains,
            slowest=slowest,
            num_microbatches=m,
            workload=workload,
            contention=acc.efficiency.overlap_contention,
            tail_params=dp_tail_params(model, layout, stage=s, workload=workload),
            units=fsdp_units(stage_contents(model, workload, layout, s, split)),
            unprefetched=unprefetched,
        )
        + copy_bytes * sum(params[s]) / hbm  # FSDP2's copies around its collectives
        for s in stages
    )
    breakdown["optimizer"] = optimizer_step_time(
        *max(params.values(), key=sum), workload, layout, hbm_bytes_per_s=hbm
    )
    breakdown["step_sync"] = host_sync_time(acc.efficiency.step_overhead_ms, workload)
    flops = model_flops_per_token(model, workload.seq_len) * workload.tokens_per_step
    stages, memories = memory
    return StepCost(
        step_time_s=sum(breakdown.values()),
        breakdown_s=breakdown,
        stages=stages,
        stage_memory=memories,
        model_flops_per_step=flops,
        num_microbatches=m,
        stage_times=times,
        slowest_chunk_s=chunk_s,
        unprefetched_share=unprefetched,
    )


def step_time_lower_bound(
    model: ModelSpec,
    acc: AcceleratorSpec,
    workload: TrainWorkload,
    layout: Layout,
    domains: dict[str, CommDomain],
) -> float:
    """A lower bound on the step time of every layout that shares ``layout``'s parallel degrees
    and precision, whatever its micro-batch size (up to ``layout.mbs``), interleaving,
    recomputation or ZeRO stage.

    Per sequence, the critical-path time of one micro-batch (compute, TP, CP and EP
    communication) does not grow with the micro-batch size (per-kernel and per-collective fixed
    costs are amortised, GEMM rooflines only improve) and only grows with recomputation; the
    bubble, pipeline sends, exposed DP time and the optimizer are non-negative. So
    global_batch / dp x (slowest stage's micro-batch time at recompute none) / mbs bounds it.
    """
    plain = layout.model_copy(update={"recompute": Recompute.NONE, "vpp": 1})
    stages = representative_stages(layout.pp, model, workload.seq_len)
    slowest = max(
        microbatch_time(model, acc, workload, plain, stage=s, domains=domains).total for s in stages
    )
    return step_time_floor(workload, layout, slowest)


def step_time_floor(workload: TrainWorkload, layout: Layout, slowest_s: float) -> float:
    """global_batch / dp x ``slowest_s`` / mbs: the bound of :func:`step_time_lower_bound`
    given its slowest stage's micro-batch time. It never falls as ``slowest_s`` grows, so the
    slowest of some of the stages gives a lower bound of it.

    >>> step_time_floor(TrainWorkload(global_batch=64), Layout(dp=8, mbs=2), 0.5)
    2.0
    """
    return workload.global_batch / layout.dp * slowest_s / layout.mbs
