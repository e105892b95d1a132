"""One training step: combine compute, communication, bubble and optimizer into a step time,
and the memory terms into a per-stage peak.

Overlap policy (named, explicit):
- TP, CP and EP collectives sit on the critical path of every micro-batch (exposed).
- DP gradient reduce-scatter (all-reduce at ZeRO-0) overlaps with the backward pass of the last
  micro-batch, and the ZeRO parameter all-gather with the forward of the first one
  (Megatron-LM ``--overlap-grad-reduce`` / ``--overlap-param-gather``); only the excess is exposed.
- Pipeline sends are exposed: 2 per micro-batch per virtual stage, plus the fill.
The step time is the sum of the exposed terms (``breakdown_s``).
"""

from __future__ import annotations

from pydantic import Field

from planner.cost.comm import (
    all_gather_time,
    all_to_all_time,
    p2p_time,
    reduce_scatter_time,
    ring_all_reduce_time,
)
from planner.cost.compute import logits_flops_per_token, matmul_time, model_flops_per_token
from planner.cost.memory import (
    ACTIVATION_BYTES,
    OPTIMIZER_BYTES_PER_PARAM,
    activation_bytes_per_layer,
    logits_bytes,
    stage_layers,
    weight_bytes,
)
from planner.cost.params import embedding_params, norm_params
from planner.cost.pipeline import microbatches_in_flight
from planner.cost.profile import layer_table
from planner.specs.base import FrozenSpec
from planner.specs.comm import CommDomain
from planner.specs.formats import NumberFormat
from planner.specs.hardware import AcceleratorSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.workload import TrainWorkload

GRAD_BYTES = 4.0
"""Gradients are accumulated and reduced in fp32 (Megatron-LM forces
``accumulate_allreduce_grads_in_fp32`` for bf16 training)."""
OPTIMIZER_STEP_BYTES_PER_PARAM = 30.0
"""Adam step traffic per parameter: read fp32 master, m, v, grad (16 B), write master, m, v (12 B)
and the bf16 weight (2 B)."""


class StageMemory(FrozenSpec):
    """Memory of one GPU of one pipeline stage (bytes)."""

    weights: float
    """Weights held (bytes)."""
    grads: float
    """Gradient buffers (bytes)."""
    optimizer: float
    """Optimizer state (bytes)."""
    activations: float
    """Activations of the micro-batches in flight, plus logits on the last stage (bytes)."""

    @property
    def total(self) -> float:
        """Sum of the terms (bytes)."""
        return self.weights + self.grads + self.optimizer + self.activations


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

    @property
    def peak_stage(self) -> int:
        """Stage with the largest memory."""
        totals = [s.total for s in self.stage_memory]
        return self.stages[totals.index(max(totals))]

    @property
    def peak_memory(self) -> StageMemory:
        """Memory of the stage with the largest total."""
        return max(self.stage_memory, key=lambda s: s.total)


def microbatch_compute_time(
    model: ModelSpec, acc: AcceleratorSpec, workload: TrainWorkload, layout: Layout, stage: int
) -> tuple[float, float]:
    """(forward, backward) tensor-core time of one micro-batch on one GPU of ``stage``.

    Linear layers run at the precision's dense peak x GEMM efficiency over tp (and, for tokens,
    cp); attention cores at bf16 peak x attention efficiency. Backward = 2 x forward; full
    recompute adds one forward, selective recompute the attention cores' forward
    (Korthikanti et al. 2022, section 5).
    """
    tokens = layout.mbs * workload.seq_len / layout.cp
    fmt = layout.precision
    layers = stage_layers(model, layout.pp, stage)
    table = layer_table(model, workload.seq_len)
    linear = table.total("linear_flops", layers)
    attention = table.total("attention_flops", layers)
    logits = logits_flops_per_token(model) if stage == layout.pp - 1 else 0.0
    t_linear = matmul_time(
        tokens * linear / layout.tp,
        peak_flop_per_s=acc.peak_flop_per_s(fmt),
        efficiency=acc.gemm_efficiency(fmt),
    )
    bf16 = NumberFormat.BF16
    t_logits = matmul_time(
        tokens * logits / layout.tp,
        peak_flop_per_s=acc.peak_flop_per_s(bf16),
        efficiency=acc.gemm_efficiency(bf16),
    )
    t_attention = matmul_time(
        tokens * attention / layout.tp,
        peak_flop_per_s=acc.peak_flop_per_s(bf16),
        efficiency=acc.efficiency.attention,
    )
    forward = t_linear + t_attention + t_logits
    backward = 2.0 * forward
    if layout.recompute is Recompute.FULL:
        backward += t_linear + t_attention
    elif layout.recompute is Recompute.SELECTIVE:
        backward += t_attention
    return forward, backward


def microbatch_tp_comm_time(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, stage: int, tp: CommDomain
) -> float:
    """Exposed TP communication of one micro-batch on ``stage``.

    Megatron TP with sequence parallelism: per layer 2 all-gathers + 2 reduce-scatters of the
    (B T D) activation forward and the same backward (Korthikanti et al. 2022, section 4.2.2),
    the same bytes as 2 + 2 all-reduces without SP; full recompute repeats the forward ones.
    """
    if tp.size == 1:
        return 0.0
    message = 2.0 * layout.mbs * workload.seq_len / layout.cp * model.hidden_size
    per_layer = 4 * all_gather_time(message, tp) + 4 * reduce_scatter_time(message, tp)
    if layout.recompute is Recompute.FULL:
        per_layer *= 1.5
    return per_layer * len(stage_layers(model, layout.pp, stage))


def microbatch_ep_comm_time(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, stage: int, ep: CommDomain
) -> float:
    """EP all-to-all of one micro-batch: dispatch + combine, forward and backward, per MoE layer,
    each moving the k routed copies of the rank's tokens (B T k D bf16 values)."""
    moe = model.moe
    if moe is None or ep.size == 1:
        return 0.0
    local_bytes = (
        2.0 * layout.mbs * workload.seq_len / layout.cp / layout.tp * moe.top_k * model.hidden_size
    )
    num_moe_layers = layer_table(model, workload.seq_len).total(
        "moe_layers", stage_layers(model, layout.pp, stage)
    )
    return 4 * all_to_all_time(local_bytes, ep) * num_moe_layers


def stage_params_per_gpu(
    model: ModelSpec, layout: Layout, stage: int, seq_len: int
) -> tuple[float, float]:
    """(dense, expert) parameters held by one GPU of ``stage``.

    Dense weights (attention, norms, router, dense FFN, shared experts, embeddings) are split over
    tp, routed experts over ep (whole experts) x etp. The first stage holds the input embedding
    (and learned positions), the last the final norm and output projection; a tied embedding is
    replicated on the last stage when pp > 1, as Megatron-LM does.
    """
    layers = stage_layers(model, layout.pp, stage)
    table = layer_table(model, seq_len)
    dense = table.total("dense_params", layers)
    expert = table.total("expert_params", layers)
    vocab_table = model.vocab_size * model.hidden_size
    if stage == 0:
        dense += embedding_params(model) - (0 if model.tied_embeddings else vocab_table)
    if stage == layout.pp - 1:
        if not model.tied_embeddings or layout.pp > 1:
            dense += vocab_table
        dense += norm_params(model)
    return dense / layout.tp, expert / (layout.ep * layout.etp)


def stage_memory(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, stage: int, num_microbatches: int
) -> StageMemory:
    """Memory of one GPU of ``stage``: weights, grads, optimizer (sharded per ZeRO stage) and the
    activations of the micro-batches in flight (1F1B / interleaved), plus fp32 logits on the last
    stage."""
    dense, expert = stage_params_per_gpu(model, layout, stage, workload.seq_len)
    params = dense + expert
    dp = layout.dp * layout.cp
    weights = weight_bytes(params, layout.precision) / (dp if layout.zero >= 3 else 1)
    grads = GRAD_BYTES * params / (dp if layout.zero >= 2 else 1)
    optimizer = OPTIMIZER_BYTES_PER_PARAM * params / (dp if layout.zero >= 1 else 1)
    layers = stage_layers(model, layout.pp, stage)
    tokens = layout.mbs * workload.seq_len / layout.cp
    if layout.recompute is Recompute.FULL:
        values = model.hidden_size * len(layers)
    else:
        values = layer_table(model, workload.seq_len).total("activation_values", layers)
    per_mb = ACTIVATION_BYTES * tokens * values / layout.tp
    in_flight = microbatches_in_flight(layout.pp, layout.vpp, num_microbatches, stage)
    activations = per_mb * in_flight
    if layout.recompute is Recompute.FULL:
        activations += _one_layer_working_set(model, workload, layout)
    if stage == layout.pp - 1:
        activations += logits_bytes(model, layout, workload.seq_len)
    return StageMemory(weights=weights, grads=grads, optimizer=optimizer, activations=activations)


def _one_layer_working_set(model: ModelSpec, workload: TrainWorkload, layout: Layout) -> float:
    """Activations of one layer rebuilt during full recompute (its un-recomputed size)."""
    plain = layout.model_copy(update={"recompute": Recompute.SELECTIVE})
    return activation_bytes_per_layer(
        model, plain, workload.seq_len, layer_index=model.num_layers - 1
    )


def dp_exposed_time(
    grad_bytes: float,
    param_bytes: float,
    layout: Layout,
    dp: CommDomain,
    *,
    forward_s: float,
    backward_s: float,
) -> float:
    """Exposed data-parallel communication: gradient reduce-scatter (ZeRO >= 1) or all-reduce
    (ZeRO-0) beyond the last micro-batch's backward, and the ZeRO parameter all-gather beyond the
    first micro-batch's forward."""
    if dp.size == 1:
        return 0.0
    if layout.zero >= 1:
        reduce = reduce_scatter_time(grad_bytes, dp)
        gather = all_gather_time(param_bytes, dp)
    else:
        reduce = ring_all_reduce_time(grad_bytes, dp)
        gather = 0.0
    return max(0.0, reduce - backward_s) + max(0.0, gather - forward_s)


def representative_stages(pp: int) -> list[int]:
    """Stages that bound time and memory: the first (embedding, most micro-batches in flight),
    the second (the first middle stage: most layers, pp - 1 in flight) and the last (logits).
    Middle stages after the second have no more layers and fewer micro-batches in flight.

    >>> representative_stages(1), representative_stages(2), representative_stages(8)
    ([0], [0, 1], [0, 1, 7])
    """
    return sorted({0, min(1, pp - 1), pp - 1})


def estimate_step(
    model: ModelSpec,
    acc: AcceleratorSpec,
    workload: TrainWorkload,
    layout: Layout,
    domains: dict[str, CommDomain],
) -> StepCost:
    """Predicted step time, breakdown and per-stage memory of ``layout``.

    Pipeline: the slowest stage sets the pace; step = (m + (pp - 1)/v) x t_stage, the second term
    being the bubble (Narayanan et al. SC'21, section 2.2).
    """
    m = workload.global_batch // (layout.dp * layout.mbs)
    stages = representative_stages(layout.pp)
    timings = []
    for s in stages:
        fwd, bwd = microbatch_compute_time(model, acc, workload, layout, s)
        tp = microbatch_tp_comm_time(model, workload, layout, s, domains["tp"])
        ep = microbatch_ep_comm_time(model, workload, layout, s, domains["ep"])
        timings.append((fwd, bwd, tp, ep))
    slowest = max(timings, key=lambda t: sum(t))
    fwd, bwd, tp_mb, ep_mb = slowest
    per_mb = fwd + bwd + tp_mb + ep_mb
    breakdown = {
        "compute": m * (fwd + bwd),
        "tp_comm": m * tp_mb,
        "cp_comm": 0.0,
        "ep_comm": m * ep_mb,
        "pp_bubble": (layout.pp - 1) / layout.vpp * per_mb,
    }
    act_message = 2.0 * layout.mbs * workload.seq_len / layout.cp * model.hidden_size / layout.tp
    sends = 2 * (m * layout.vpp + layout.pp - 1) if layout.pp > 1 else 0
    breakdown["pp_comm"] = sends * p2p_time(act_message, domains["pp"])
    memories = [stage_memory(model, workload, layout, s, m) for s in stages]
    dense, expert = max(
        (stage_params_per_gpu(model, layout, s, workload.seq_len) for s in stages), key=sum
    )
    params = dense + expert
    breakdown["dp_comm"] = dp_exposed_time(
        GRAD_BYTES * params, 2.0 * params, layout, domains["dp"], forward_s=fwd, backward_s=bwd
    )
    shard = params / (layout.dp * layout.cp if layout.zero >= 1 else 1)
    breakdown["optimizer"] = (
        OPTIMIZER_STEP_BYTES_PER_PARAM * shard / (acc.hbm_bytes_per_s * acc.efficiency.hbm)
    )
    flops = model_flops_per_token(model, workload.seq_len) * workload.tokens_per_step
    return StepCost(
        step_time_s=sum(breakdown.values()),
        breakdown_s=breakdown,
        stages=list(stages),
        stage_memory=memories,
        model_flops_per_step=flops,
        num_microbatches=m,
    )
