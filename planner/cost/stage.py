"""One micro-batch on one pipeline stage: tensor-core time, memory-bound time, and the TP, CP and
EP communication on its critical path; and the stage's memory."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from planner.cost.comm import (
    all_gather_time,
    overlapped_exposed_time,
    p2p_time,
    reduce_scatter_time,
)
from planner.cost.compute import (
    attention_exp_bound_factors,
    cross_entropy_time,
    logits_flops_per_token,
    matmul_time,
)
from planner.cost.expert import ep_comm_per_microbatch, ep_exposed_per_microbatch, moe_sync_time
from planner.cost.gemm import (
    CLAMPED_GLU_BYTES_PER_VALUE,
    NORM_BYTES_PER_HIDDEN,
    NORM_RESIDUAL_BYTES_PER_HIDDEN,
    PERMUTE_BYTES_PER_ROUTED_VALUE,
    GemmShape,
    elementwise_bytes_per_token,
    gemm_time,
    layer_gemms,
    unfused_kernel_bytes_per_token,
    unfused_kernel_launches,
)
from planner.cost.memory import (
    ACTIVATION_BYTES,
    GRAD_BYTES,
    OPTIMIZER_BYTES_PER_PARAM,
    SHARDED_MAIN_GRAD_BYTES,
    activation_bytes_per_layer,
    activation_bytes_per_token,
    logits_bytes,
    recomputed_fraction,
    replicated_values_without_sp,
    selective_recompute_saved_values,
    stage_layers,
    weight_bytes,
)
from planner.cost.params import embedding_params, norm_params
from planner.cost.partition import StageContents, stage_contents
from planner.cost.pipeline import microbatches_in_flight
from planner.cost.profile import layer_table
from planner.specs.base import FrozenSpec
from planner.specs.comm import CommDomain
from planner.specs.formats import NumberFormat, bytes_per_value
from planner.specs.hardware import AcceleratorSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import CLAMPED_ACTIVATIONS, ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.workload import TrainWorkload
from planner.units import US

CAST_BYTES_PER_VALUE = 3.0
"""Quantising a bf16 tensor to an 8- or 4-bit format reads 2 bytes and writes about 1 per value."""


class MicrobatchTime(FrozenSpec):
    """Critical-path seconds of one micro-batch on one GPU of one stage."""

    forward_s: float
    """Forward compute (GEMMs, attention, memory-bound kernels, logits)."""
    backward_s: float
    """Backward compute, including any recomputed forward."""
    tp_comm_s: float
    """Exposed tensor-parallel collectives."""
    cp_comm_s: float
    """Exposed context-parallel K/V exchange."""
    ep_comm_s: float
    """Exposed expert-parallel all-to-all."""
    moe_sync_s: float = 0.0
    """Host synchronisation of the MoE token dispatcher (:func:`moe_sync_time`)."""

    @property
    def total(self) -> float:
        """Sum of the terms (s)."""
        comm = self.tp_comm_s + self.cp_comm_s + self.ep_comm_s
        return self.forward_s + self.backward_s + comm + self.moe_sync_s


@lru_cache(maxsize=4096)
def _layer_linear_time(
    model: ModelSpec,
    tokens: float,
    moe_layer: bool,
    degrees: tuple[int, int, int],
    rates: tuple[float, float, float, float, float, float],
    names: frozenset[str] | None = None,
) -> tuple[float, float]:
    """(GEMM seconds, GEMM input values per token) of one layer's forward on one GPU; only the
    GEMMs called ``names`` when given."""
    tp, ep, etp = degrees
    peak, efficiency, bpv, hbm, overhead, expert_gemm = rates
    gemms = layer_gemms(model, tokens, moe_layer=moe_layer, tp=tp, ep=ep, etp=etp)
    if names is not None:
        gemms = [g for g in gemms if g.name in names]
    time = sum(
        gemm_time(
            g,
            peak_flop_per_s=peak,
            efficiency=efficiency * (expert_gemm if g.name.startswith("expert_") else 1.0),
            bytes_per_value=bpv,
            hbm_bytes_per_s=hbm,
            kernel_overhead_s=overhead,
        )
        for g in gemms
    )
    inputs = sum(g.m * g.k * g.count for g in gemms) / tokens
    return time, inputs


RECOMPUTED_GEMMS: dict[str, frozenset[str]] = {
    "mla_up_proj": frozenset({"q_up", "kv_up"}),
    "mlp": frozenset({"up", "down"}),
    "shared_experts": frozenset({"shared_up", "shared_down"}),
    "moe": frozenset({"router", "expert_up", "expert_down", "shared_up", "shared_down"}),
}
"""GEMMs (:func:`planner.cost.gemm.layer_gemms` names) each recompute module re-runs."""


def selective_recompute_time(
    model: ModelSpec,
    workload: TrainWorkload,
    *,
    tokens: float,
    num_dense: int,
    num_moe: float,
    degrees: tuple[int, int, int],
    rates: tuple[float, float, float, float, float, float],
    attention_s: float,
) -> float:
    """Backward seconds selective recomputation adds to one micro-batch on one GPU: the forward
    of each module in ``workload.recompute_modules`` once more (Megatron-LM
    ``--recompute-modules``): the attention core (``core_attn``, Korthikanti et al. 2022 section
    5), the GEMMs of ``mla_up_proj`` / ``mlp`` (dense layers) / ``shared_experts``, and the
    memory-bound kernels of ``layernorm`` (two norms: read + write D, bf16) and ``moe_act``
    (each routed copy's activation: read 2F write F gated, read F write F plain, and a clamped
    activation's clamps, :data:`planner.cost.gemm.CLAMPED_GLU_BYTES_PER_VALUE` forward) at HBM
    bandwidth x eta_hbm; ``moe`` re-runs the router, the experts, their activation and the
    permutation (its all-to-all is in :func:`planner.cost.expert.ep_comm_per_microbatch`).
    ``tp`` shards all of it."""
    modules = workload.recompute_modules
    hbm = rates[3]
    tp = degrees[0]
    time = attention_s if "core_attn" in modules else 0.0
    for module, names in RECOMPUTED_GEMMS.items():
        if module not in modules or (module == "shared_experts" and "moe" in modules):
            continue
        if num_dense:
            time += num_dense * _layer_linear_time(model, tokens, False, degrees, rates, names)[0]
        if num_moe:
            time += num_moe * _layer_linear_time(model, tokens, True, degrees, rates, names)[0]
    streamed = 0.0
    if "layernorm" in modules:
        streamed += (num_dense + num_moe) * NORM_BYTES_PER_HIDDEN * model.hidden_size
    if ("moe_act" in modules or "moe" in modules) and model.moe is not None:
        act = (3.0 if model.gated_ffn else 2.0) * ACTIVATION_BYTES
        if model.ffn_activation in CLAMPED_ACTIVATIONS:
            act += CLAMPED_GLU_BYTES_PER_VALUE[0]
        streamed += num_moe * model.moe.top_k * act * model.moe.expert_ffn_hidden_size
    if "moe" in modules and model.moe is not None:  # permute and unpermute again
        streamed += num_moe * PERMUTE_BYTES_PER_ROUTED_VALUE * model.hidden_size * model.moe.top_k
    return time + tokens * streamed / tp / hbm


class LayersForward(NamedTuple):
    """Forward seconds of a set of layers for one micro-batch on one GPU, by kind of work."""

    linear: float
    """Linear GEMMs."""
    attention: float
    """Attention cores (forward)."""
    attention_backward: float
    """Attention cores (backward)."""
    memory_bound: float
    """Norms, activations, residuals, casts at HBM bandwidth."""
    unfused_forward: float
    """Kernels the framework leaves unfused, forward."""
    unfused_backward: float
    """The same, backward."""
    num_moe: float
    """MoE layers among them."""

    @property
    def recomputable(self) -> float:
        """What full recomputation runs again (s): the whole forward of these layers."""
        return self.linear + self.attention + self.memory_bound + self.unfused_forward


def layers_forward(
    model: ModelSpec,
    acc: AcceleratorSpec,
    workload: TrainWorkload,
    layout: Layout,
    layers: tuple[range, ...],
) -> LayersForward:
    """Forward time of ``layers`` (index ranges) for one micro-batch on one GPU.

    GEMMs: :mod:`planner.cost.gemm` at the precision's peak; attention cores (flash attention) at
    the bf16 peak x attention efficiency, slowed where the exponential units bound them
    (:func:`planner.cost.compute.attention_exp_bound_factors`, each pass on its own); memory-bound
    kernels at HBM bandwidth x eta_hbm, with the casts of low-precision inputs and the kernels the
    framework leaves unfused (:func:`planner.cost.gemm.unfused_kernel_bytes_per_token`, their own
    backward traffic).
    """
    tokens = layout.mbs * workload.seq_len / layout.cp
    fmt = layout.precision
    table = layer_table(model, workload.seq_len)
    num_layers = sum(len(r) for r in layers)
    num_moe = table.sum("moe_layers", layers)
    num_dense = num_layers - num_moe
    rates = _rates(acc, fmt)
    hbm = rates[3]
    degrees = (layout.tp, layout.ep, layout.etp)
    dense_t, dense_in = (
        _layer_linear_time(model, tokens, False, degrees, rates) if num_dense else (0, 0)
    )
    moe_t, moe_in = _layer_linear_time(model, tokens, True, degrees, rates) if num_moe else (0, 0)
    linear = num_dense * dense_t + num_moe * moe_t
    bf16 = NumberFormat.BF16
    if workload.flash_attention:
        attention_mma = matmul_time(
            tokens * table.sum("attention_flops", layers) / layout.tp,
            peak_flop_per_s=acc.peak_flop_per_s(bf16),
            efficiency=acc.efficiency.attention,
        )
        exp_forward, exp_backward = attention_exp_bound_factors(model, acc.bf16_flops_per_exp)
        attention = attention_mma * exp_forward
        attention_backward = 2.0 * attention_mma * exp_backward
    else:
        attention = unfused_attention_time(model, acc, workload, layout, num_layers)
        attention_backward = 2.0 * attention
    streamed = num_dense * elementwise_bytes_per_token(model, moe_layer=False)
    streamed += num_moe * elementwise_bytes_per_token(model, moe_layer=True)
    if fmt not in (NumberFormat.BF16, NumberFormat.FP16):
        streamed += CAST_BYTES_PER_VALUE * (num_dense * dense_in + num_moe * moe_in)
    memory_bound = tokens * streamed / layout.tp / hbm
    if not workload.sequence_parallel and layout.tp > 1:
        # norms and residual adds run on every TP rank's full sequence
        repeated = NORM_RESIDUAL_BYTES_PER_HIDDEN * model.hidden_size * num_layers
        memory_bound += tokens * repeated * (1.0 - 1.0 / layout.tp) / hbm
    unfused_forward, unfused_backward = _unfused_kernel_time(
        model, tokens=tokens, num_dense=num_dense, num_moe=num_moe, layout=layout, rates=rates
    )
    return LayersForward(
        linear, attention, attention_backward, memory_bound, unfused_forward, unfused_backward,
        num_moe,
    )  # fmt: skip


def _rates(
    acc: AcceleratorSpec, fmt: NumberFormat
) -> tuple[float, float, float, float, float, float]:
    """(peak FLOP/s, GEMM efficiency, bytes per value, effective HBM bytes/s, kernel overhead s,
    expert-GEMM factor) of ``acc`` in ``fmt``."""
    return (
        acc.peak_flop_per_s(fmt),
        acc.gemm_efficiency(fmt),
        bytes_per_value(fmt),
        acc.hbm_bytes_per_s * acc.efficiency.hbm,
        acc.efficiency.kernel_overhead_us * US,
        acc.efficiency.expert_gemm,
    )


def head_forward(
    model: ModelSpec, acc: AcceleratorSpec, workload: TrainWorkload, layout: Layout
) -> tuple[float, float, float]:
    """(logits forward, loss forward, loss backward) seconds of one pass of the output layer
    and loss for one micro-batch: the logits GEMM at the bf16 peak and the loss's passes over
    the logits (:func:`planner.cost.compute.cross_entropy_time`)."""
    tokens = layout.mbs * workload.seq_len / layout.cp
    bf16 = NumberFormat.BF16
    logits = matmul_time(
        tokens * logits_flops_per_token(model) / layout.tp,
        peak_flop_per_s=acc.peak_flop_per_s(bf16),
        efficiency=acc.gemm_efficiency(bf16),
    )
    hbm = acc.hbm_bytes_per_s * acc.efficiency.hbm
    loss_forward, loss_backward = cross_entropy_time(
        tokens, model.vocab_size / layout.tp, workload.cross_entropy, hbm
    )
    return logits, loss_forward, loss_backward


def mtp_projection_time(
    model: ModelSpec, acc: AcceleratorSpec, workload: TrainWorkload, layout: Layout
) -> float:
    """Forward seconds of one MTP module's 2D -> D projection (DeepSeek-V3 ``eh_proj``,
    column-parallel over tp; arXiv 2412.19437 section 2.2) for one micro-batch; its two norms
    are not counted."""
    d = model.hidden_size
    tokens = layout.mbs * workload.seq_len / layout.cp
    rates = _rates(acc, layout.precision)
    projection = GemmShape(name="mtp_proj", m=tokens, k=2 * d, n=d / layout.tp, count=1)
    return gemm_time(
        projection,
        peak_flop_per_s=rates[0],
        efficiency=rates[1],
        bytes_per_value=rates[2],
        hbm_bytes_per_s=rates[3],
        kernel_overhead_s=rates[4],
    )


def microbatch_compute(
    model: ModelSpec,
    acc: AcceleratorSpec,
    workload: TrainWorkload,
    layout: Layout,
    stage: int,
    *,
    split: PipelineSplit | None = None,
    contents: StageContents | None = None,
) -> tuple[float, float, float, float]:
    """(forward, backward, attention-core forward, linear-GEMM forward) seconds of one
    micro-batch on ``stage`` (its layers under ``split``, or the even split; or ``contents``
    when given, e.g. one layer for the stage partition's tables).

    The layers: :func:`layers_forward`; backward = 2 x forward otherwise (input and weight
    gradients); the stage holding the output layer adds the logits GEMM and the loss's passes
    over the logits (:func:`head_forward`, once per MTP module too); full recompute adds the
    forward of the layers it recomputes, selective the modules ``workload.recompute_modules``
    names (:func:`selective_recompute_time`).
    """
    contents = contents or stage_contents(model, workload, layout, stage, split)
    part = layers_forward(model, acc, workload, layout, contents.layers)
    logits = loss_forward = loss_backward = 0.0
    heads = contents.num_heads
    if heads:
        logits, loss_forward, loss_backward = (
            heads * t for t in head_forward(model, acc, workload, layout)
        )
    if contents.mtp:
        logits += contents.mtp * mtp_projection_time(model, acc, workload, layout)
    forward = part.linear + part.attention + part.memory_bound + logits
    backward = (
        2.0 * (forward - part.attention)
        + part.attention_backward
        + loss_backward
        + part.unfused_backward
    )
    forward += loss_forward + part.unfused_forward
    if layout.recompute is Recompute.FULL:
        if contents.recomputed is None:
            fraction = recomputed_fraction(workload, layout, contents.num_layers)
            backward += fraction * part.recomputable
        elif contents.num_recomputed:
            again = layers_forward(model, acc, workload, layout, contents.recomputed)
            backward += again.recomputable
    elif layout.recompute is Recompute.SELECTIVE:
        backward += selective_recompute_time(
            model,
            workload,
            tokens=layout.mbs * workload.seq_len / layout.cp,
            num_dense=int(contents.num_layers - part.num_moe),
            num_moe=part.num_moe,
            degrees=(layout.tp, layout.ep, layout.etp),
            rates=_rates(acc, layout.precision),
            attention_s=part.attention,
        )
    return forward, backward, part.attention, part.linear


def _unfused_kernel_time(
    model: ModelSpec,
    *,
    tokens: float,
    num_dense: int,
    num_moe: float,
    layout: Layout,
    rates: tuple[float, float, float, float, float, float],
) -> tuple[float, float]:
    """(forward, backward) seconds of a micro-batch's unfused framework kernels on one GPU
    (:func:`planner.cost.gemm.unfused_kernel_bytes_per_token`): their HBM traffic at
    HBM bandwidth x eta_hbm, sharded over tp like the other memory-bound kernels, plus the fixed
    per-kernel cost of each launch."""
    hbm, overhead = rates[3], rates[4]
    local_experts = model.moe.num_experts / layout.ep if model.moe is not None else 0.0
    forward = backward = launches = 0.0
    for count, moe_layer in ((num_dense, False), (num_moe, True)):
        if not count:
            continue
        f, b = unfused_kernel_bytes_per_token(model, moe_layer=moe_layer)
        forward += count * tokens * f / layout.tp / hbm
        backward += count * tokens * b / layout.tp / hbm
        launches += count * unfused_kernel_launches(
            model, moe_layer=moe_layer, local_experts=local_experts
        )
    # the launches' fixed cost split evenly between the two passes
    return forward + launches * overhead / 2, backward + launches * overhead / 2


def unfused_attention_time(
    model: ModelSpec, acc: AcceleratorSpec, workload: TrainWorkload, layout: Layout, num_layers: int
) -> float:
    """Forward time of unfused attention on one GPU: batched score and context GEMMs over the full
    T x T square (the causal mask is applied, not skipped) at the bf16 GEMM efficiency, and the
    scale-mask-softmax (+ dropout) pass over the N T scores of every token through HBM: read and
    write 2 bytes each, plus with dropout a 1-byte mask and a 2-byte output (Megatron-LM's
    ``FusedScaleMaskSoftmax`` path, Shoeybi et al. 2019)."""
    tokens = layout.mbs * workload.seq_len / layout.cp
    heads = model.num_attention_heads / layout.tp
    if model.mla is not None:
        head_dims = model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim + model.mla.v_head_dim
    else:
        head_dims = 2 * model.head_dim
    bf16 = NumberFormat.BF16
    flops = 2.0 * tokens * heads * head_dims * workload.seq_len * num_layers
    gemms = matmul_time(
        flops, peak_flop_per_s=acc.peak_flop_per_s(bf16), efficiency=acc.gemm_efficiency(bf16)
    )
    score_bytes = (4.0 + (5.0 if model.dropout else 0.0)) * tokens * heads * workload.seq_len
    return gemms + score_bytes * num_layers / (acc.hbm_bytes_per_s * acc.efficiency.hbm)


def tp_comm_per_microbatch(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    num_layers: int,
    tp: CommDomain,
    *,
    linear_s: float,
    contention: float,
    recomputed_layers: float | None = None,
) -> float:
    """Exposed TP collectives of one micro-batch: with sequence parallelism, per layer 2
    all-gathers and 2 reduce-scatters of the (B T D) bf16 activation forward and the same
    backward (Korthikanti et al. 2022, section 4.2.2; the same bytes as the 2 + 2 all-reduces
    without SP, ``workload.sequence_parallel`` False); full recompute repeats the forward ones.
    With ``workload.tp_comm_overlap`` (Megatron-LM --tp-comm-overlap, userbuffers, which needs
    sequence parallelism) each collective is pipelined with the GEMM that consumes or
    produces it, so it hides behind the layer's linear GEMM time (forward ``linear_s``, x3 with
    backward) up to the contention; otherwise it is fully exposed. ``recomputed_layers``: how
    many of the ``num_layers`` recompute in full (None = the layout's rule)."""
    if tp.size == 1:
        return 0.0
    message = ACTIVATION_BYTES * layout.mbs * workload.seq_len / layout.cp * model.hidden_size
    per_layer = 4 * all_gather_time(message, tp) + 4 * reduce_scatter_time(message, tp)
    if recomputed_layers is None:  # the layout's rule (the even split)
        recomputed_layers = recomputed_fraction(workload, layout, num_layers) * num_layers
    comm = per_layer * (num_layers + 0.5 * recomputed_layers)
    if not (workload.tp_comm_overlap and workload.sequence_parallel):
        return comm  # Megatron's TP-communication overlap needs sequence parallelism
    return overlapped_exposed_time(comm, 3.0 * linear_s, contention)


def cp_comm_per_microbatch(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    num_layers: int,
    *,
    cp: CommDomain,
    attention_forward_s: float,
    contention: float = 0.0,
) -> float:
    """Ring-attention K/V exchange (Megatron-LM context parallelism, p2p ring): per layer cp - 1
    sends of the local K and V forward, and of K, V and their gradients backward, overlapped with
    the attention of the previous chunk; only the excess over the attention time is exposed
    (Liu et al., "Ring Attention", arXiv 2310.01889, section 3)."""
    if cp.size == 1:
        return 0.0
    tokens = layout.mbs * workload.seq_len / layout.cp
    if model.mla is not None:
        kv_values = model.num_attention_heads * (
            model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim + model.mla.v_head_dim
        )
    else:
        kv_values = 2 * model.num_kv_heads * model.head_dim
    chunk = ACTIVATION_BYTES * tokens * kv_values / layout.tp
    forward = (cp.size - 1) * p2p_time(chunk, cp)
    backward = 2 * forward
    attention_per_layer = attention_forward_s / max(num_layers, 1)
    exposed = overlapped_exposed_time(forward, attention_per_layer, contention)
    exposed += overlapped_exposed_time(backward, 2 * attention_per_layer, contention)
    return exposed * num_layers


def microbatch_time(
    model: ModelSpec,
    acc: AcceleratorSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    stage: int,
    domains: dict[str, CommDomain],
    split: PipelineSplit | None = None,
    contents: StageContents | None = None,
) -> MicrobatchTime:
    """Everything on the critical path of one micro-batch on ``stage`` (its layers under
    ``split``, or the even split; or ``contents`` when given)."""
    contents = contents or stage_contents(model, workload, layout, stage, split)
    forward, backward, attention, linear = microbatch_compute(
        model, acc, workload, layout, stage, contents=contents
    )
    contention = acc.efficiency.overlap_contention
    num_layers = contents.num_layers
    table = layer_table(model, workload.seq_len)
    num_moe = table.sum("moe_layers", contents.layers)
    recomputed_moe = None
    if contents.recomputed is not None and layout.recompute is Recompute.FULL:
        recomputed_moe = table.sum("moe_layers", contents.recomputed)
    if model.moe is not None and workload.expert_load_imbalance > 1.0:
        share = num_moe / max(num_layers, 1)
        factor = 1.0 + share * (workload.expert_load_imbalance - 1.0)
        forward, backward = forward * factor, backward * factor
    ep_comm = ep_comm_per_microbatch(
        model, workload, layout, num_moe, domains["ep"], recomputed_moe_layers=recomputed_moe
    )
    # built without validation: the search makes hundreds of thousands (floats from the model)
    return MicrobatchTime.model_construct(
        forward_s=forward,
        backward_s=backward,
        tp_comm_s=tp_comm_per_microbatch(
            model,
            workload,
            layout,
            num_layers,
            domains["tp"],
            linear_s=linear,
            contention=contention,
            recomputed_layers=None if contents.recomputed is None else contents.num_recomputed,
        ),
        cp_comm_s=cp_comm_per_microbatch(
            model,
            workload,
            layout,
            num_layers,
            cp=domains["cp"],
            attention_forward_s=attention,
            contention=contention,
        ),
        ep_comm_s=ep_exposed_per_microbatch(
            ep_comm, compute_s=forward + backward, workload=workload, contention=contention
        ),
        moe_sync_s=moe_sync_time(acc, workload, num_moe),
    )


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


def stage_params_per_gpu(
    model: ModelSpec,
    layout: Layout,
    stage: int,
    seq_len: int,
    *,
    contents: StageContents | None = None,
) -> tuple[float, float]:
    """(dense, expert) parameters held by one GPU of ``stage`` (holding ``contents``; default:
    the even split without MTP modules).

    Dense weights (attention, norms, router, dense FFN, shared experts, embeddings) are split over
    tp, routed experts over ep (whole experts) x etp. The first stage holds the input embedding
    (and learned positions), the last the final norm and output projection; a tied embedding is
    replicated on the last stage when pp > 1, as Megatron-LM does. An MTP module adds its
    layer (in ``contents.layers``), its 2D x D projection and two norms, and a rank other than
    the last that holds one also holds a copy of the output projection.
    """
    if contents is None:
        last = stage == layout.pp - 1
        layers = (stage_layers(model, layout.pp, stage),)
        contents = StageContents(layers, None, stage == 0, last, 0, last)
    table = layer_table(model, seq_len)
    dense = table.sum("dense_params", contents.layers)
    expert = table.sum("expert_params", contents.layers)
    vocab_table = model.vocab_size * model.hidden_size
    if contents.first:
        dense += embedding_params(model) - (0 if model.tied_embeddings else vocab_table)
    if contents.output_weights and (not model.tied_embeddings or layout.pp > 1):
        dense += vocab_table
    if contents.last:
        dense += norm_params(model)
    d = model.hidden_size
    dense += contents.mtp * (2 * d * d + 2 * norm_params(model))
    return dense / layout.tp, expert / (layout.ep * layout.etp)


def _selective_saved_bytes(
    model: ModelSpec, modules: tuple[str, ...], fmt: NumberFormat, num_moe: float, num_dense: float
) -> float:
    """Stored bytes per token selective recomputation removes from a stage."""
    saved = 0.0
    for count, moe_layer in ((num_moe, True), (num_dense, False)):
        if count:
            values, inputs = selective_recompute_saved_values(model, modules, moe_layer=moe_layer)
            saved += count * activation_bytes_per_token(values, inputs, fmt)
    return saved


def activation_bytes_per_microbatch(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, contents: StageContents
) -> float:
    """Activation bytes one micro-batch leaves on one GPU of a stage holding ``contents``
    (Korthikanti et al. 2022 section 4, per layer :func:`planner.cost.memory.
    activation_bytes_per_layer`'s terms): the layers that keep their activations store them all
    (minus what selective recomputation drops), the layers recomputed in full only their input
    (2 s b h / t), and each MTP module also the input of its 2D -> D projection."""
    tokens = layout.mbs * workload.seq_len / layout.cp
    table = layer_table(model, workload.seq_len)
    layers, num_layers = contents.layers, contents.num_layers
    full = layout.recompute is Recompute.FULL
    if contents.recomputed is None:  # the layout's rule: a share of every layer
        share = recomputed_fraction(workload, layout, num_layers)
        recomputed = share * num_layers

        def kept(field: str) -> float:
            return (1.0 - share) * table.sum(field, layers)
    else:
        recomputed = contents.num_recomputed if full else 0
        dropped = contents.recomputed if full else ()

        def kept(field: str) -> float:
            return table.sum(field, layers) - table.sum(field, dropped)

    kept_layers = num_layers - recomputed
    per_token = ACTIVATION_BYTES * model.hidden_size * recomputed
    if kept_layers > 0:
        per_token += activation_bytes_per_token(
            kept("activation_values"), kept("gemm_input_values"), layout.precision
        )
        scores_recomputed = (
            layout.recompute is Recompute.SELECTIVE and "core_attn" in workload.recompute_modules
        )
        if not workload.flash_attention and not scores_recomputed:
            per_token += ACTIVATION_BYTES * kept("score_values")
        if layout.recompute is Recompute.SELECTIVE:
            num_moe = table.sum("moe_layers", layers)
            per_token -= _selective_saved_bytes(
                model, workload.recompute_modules, layout.precision, num_moe, num_layers - num_moe
            )
    projection = 2.0 * model.hidden_size
    per_token += contents.mtp * activation_bytes_per_token(projection, projection, layout.precision)
    per_microbatch = tokens * per_token / layout.tp
    if not workload.sequence_parallel and layout.tp > 1:
        # what plain TP keeps whole on every rank: the layer inputs that full recomputation
        # stores, and the norm inputs/outputs and dropout masks of the layers that keep theirs
        whole = ACTIVATION_BYTES * model.hidden_size * recomputed
        whole += kept_layers * ACTIVATION_BYTES * replicated_values_without_sp(model)
        per_microbatch += tokens * whole * (1.0 - 1.0 / layout.tp)
    return per_microbatch


def stage_memory(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    stage: int,
    num_microbatches: int,
    *,
    split: PipelineSplit | None = None,
) -> StageMemory:
    """Memory of one GPU of ``stage`` (its layers under ``split``, or the even split): weights,
    grads and optimizer state sharded per the ZeRO stage (dense over dp x cp, experts over the
    expert-data-parallel group), and the activations of the micro-batches in flight (1F1B /
    interleaved, :func:`activation_bytes_per_microbatch`), the working set of a layer being
    recomputed, and fp32 logits per output-layer pass on the stage that holds the loss."""
    profile = stage_memory_profile(model, workload, layout, stage, split=split)
    return profile.memory(workload, layout, num_microbatches)


class StageMemoryProfile(NamedTuple):
    """What a stage's memory is made of, before the ZeRO stage, the micro-batch size and the
    micro-batches in flight are applied (:meth:`memory`): the search climbs ZeRO stages and
    micro-batches on one profile."""

    stage: int
    """Pipeline stage."""
    dense_params: float
    """Dense parameters per GPU (:func:`stage_params_per_gpu`)."""
    expert_params: float
    """Routed-expert parameters per GPU."""
    activations_per_sequence: float
    """Activations of one micro-batch in flight, per sequence of the micro-batch (bytes)."""
    fixed_per_sequence: float
    """Held once, per sequence: the recomputed layer's working set and the fp32 logits."""

    def parts(
        self, workload: TrainWorkload, layout: Layout, num_microbatches: int
    ) -> tuple[float, float, float, float]:
        """(weights, gradients, optimizer state, activations) bytes at ``layout``'s ZeRO stage,
        micro-batch and interleaving (every activation term is proportional to the tokens of a
        micro-batch)."""
        weights, grads, optimizer = state_bytes(
            workload, layout, self.dense_params, self.expert_params
        )
        in_flight = microbatches_in_flight(layout.pp, layout.vpp, num_microbatches, self.stage)
        per_sequence = self.activations_per_sequence * in_flight + self.fixed_per_sequence
        return weights, grads, optimizer, layout.mbs * per_sequence

    def memory(self, workload: TrainWorkload, layout: Layout, num_microbatches: int) -> StageMemory:
        """The StageMemory of :meth:`parts`."""
        weights, grads, optimizer, activations = self.parts(workload, layout, num_microbatches)
        return StageMemory.model_construct(
            weights=weights, grads=grads, optimizer=optimizer, activations=activations
        )


def stage_memory_profile(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    stage: int,
    *,
    split: PipelineSplit | None = None,
) -> StageMemoryProfile:
    """The :class:`StageMemoryProfile` of ``stage``: it depends on the parallel degrees, the
    precision, the recomputation and (through ``recompute_num_layers``) vpp, not on the ZeRO
    stage nor the micro-batch size."""
    contents = stage_contents(model, workload, layout, stage, split)
    dense, expert = stage_params_per_gpu(model, layout, stage, workload.seq_len, contents=contents)
    activations = activation_bytes_per_microbatch(model, workload, layout, contents)
    fixed = contents.num_heads * logits_bytes(model, layout, workload.seq_len)
    recomputes = contents.recomputed is None or contents.num_recomputed > 0
    if layout.recompute is Recompute.FULL and recomputes:
        fixed += recompute_working_bytes(model, workload, layout)
    return StageMemoryProfile(stage, dense, expert, activations / layout.mbs, fixed / layout.mbs)


def state_bytes(
    workload: TrainWorkload, layout: Layout, dense: float, expert: float
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer state) bytes one GPU holds for ``dense`` and ``expert``
    parameters per GPU (:func:`stage_params_per_gpu`), sharded per the ZeRO stage: dense over
    dp x cp, experts over the expert-data-parallel group (Rajbhandari et al. 2020 section 5)."""
    dp = layout.dp * layout.cp
    edp = max(1, dp * layout.tp // (layout.ep * layout.etp))

    def sharded(per_param: float, zero_stage: int) -> float:
        if layout.zero < zero_stage:
            return per_param * (dense + expert)
        return per_param * (dense / dp + expert / edp)

    weights = weight_bytes(dense + expert, layout.precision)
    if layout.zero >= 3:
        weights = weight_bytes(dense / dp + expert / edp, layout.precision)
    grads = sharded(GRAD_BYTES[workload.grad_reduce_dtype], 2)
    optimizer = sharded(
        OPTIMIZER_BYTES_PER_PARAM + SHARDED_MAIN_GRAD_BYTES[workload.grad_reduce_dtype], 1
    )
    return weights, grads, optimizer


def recompute_working_bytes(model: ModelSpec, workload: TrainWorkload, layout: Layout) -> float:
    """Activations of the one layer being recomputed in the backward pass (stored as selective
    recomputation stores them), held on top of the micro-batches in flight."""
    working = layout.model_copy(update={"recompute": Recompute.SELECTIVE})
    return activation_bytes_per_layer(
        model, working, workload.seq_len, layer_index=model.num_layers - 1
    )
