"""One micro-batch on one pipeline stage: tensor-core time, memory-bound time, and the TP, CP and
EP communication on its critical path (its memory: :mod:`planner.cost.stage_memory`)."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from planner.cost.comm import (
    all_gather_time,
    all_to_all_time,
    overlapped_exposed_time,
    p2p_time,
    reduce_scatter_time,
)
from planner.cost.compute import (
    attention_exp_bound_factors,
    attention_head_dims,
    cross_entropy_time,
    flash_backward_flop_ratio,
    logits_flops_per_token,
    matmul_time,
    ring_attention_extra_launches,
    ring_attention_merge_bytes_per_token,
)
from planner.cost.expert import (
    ep_comm_per_microbatch,
    ep_exposed_per_microbatch,
    expert_load_factor,
    exposed_moe_sync_time,
    moe_sync_time,
)
from planner.cost.gemm import (
    CLAMPED_GLU_BYTES_PER_VALUE,
    EINSUM_DISPATCH_GEMMS,
    PERMUTE_BYTES_PER_ROUTED_VALUE,
    EinsumDispatch,
    GemmRoofline,
    GemmShape,
    eager_extra_bytes_per_token,
    einsum_dispatch,
    einsum_dispatch_gemms,
    elementwise_bytes_per_token,
    gemm_backward_times,
    gemm_time,
    grouped_tile_rows,
    is_routed_expert,
    layer_gemms,
    norm_bytes_per_token,
    norm_residual_bytes_per_token,
    padded_to_tiles,
    routed_token_share,
    unfused_kernel_bytes_per_token,
    unfused_kernel_launches,
)
from planner.cost.memory import (
    ACTIVATION_BYTES,
    recomputed_fraction,
    saved_tensor_widths,
)
from planner.cost.params import norms_per_layer
from planner.cost.partition import StageContents, stage_contents
from planner.cost.profile import layer_table
from planner.cost.sharding import gathers_fp8_params
from planner.cost.stage_memory import activation_bytes_per_microbatch
from planner.errors import InternalError
from planner.specs.base import FrozenSpec
from planner.specs.comm import CommDomain, traffic_domain
from planner.specs.formats import NumberFormat, bytes_per_value
from planner.specs.framework import CpImpl
from planner.specs.hardware import AcceleratorSpec, GemmTiling
from planner.specs.layout import Layout, Recompute
from planner.specs.model import CLAMPED_ACTIVATIONS, ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.workload import TrainWorkload
from planner.units import GB, US

CAST_BYTES_PER_VALUE = 3.0
"""Quantising a bf16 tensor to an 8- or 4-bit format reads 2 bytes and writes about 1 per value."""

DYNAMIC_CAST_BYTES_PER_VALUE = ACTIVATION_BYTES + CAST_BYTES_PER_VALUE
"""A cast with its own scale pass (torchao ``hp_tensor_to_float8_dynamic``): the amax reads the
bf16 tensor (2 bytes a value), then the cast reads it again and writes 8 bits (3): 5 bytes."""

LAYOUT_COPY_BYTES_PER_VALUE = 2 * bytes_per_value(NumberFormat.FP8)
"""An 8-bit operand copied into the other memory layout: read 1 byte, write 1."""


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
    offload_s: float = 0.0
    """Exposed copies of offloaded activations to and from host memory
    (:func:`activation_offload_time`)."""
    pp_sync_s: float = 0.0
    """Host synchronisations of the stage's pipeline receives (:func:`pp_sync_time`)."""
    ep_comm_unpaired_s: float = 0.0
    """Under ``ep_comm_overlap``: what the all-to-all adds over ``ep_comm_s`` to a micro-batch
    whose forward and backward run with no other micro-batch beside them (the passes the
    schedule leaves unpaired, :func:`planner.cost.step.unpaired_microbatches`); not part of
    :attr:`total`, which is a paired micro-batch's. 0 without the overlap."""
    moe_sync_unpaired_s: float = 0.0
    """The same for the dispatcher's host syncs over ``moe_sync_s``."""

    @property
    def total(self) -> float:
        """Sum of the terms (s)."""
        comm = self.tp_comm_s + self.cp_comm_s + self.ep_comm_s
        syncs = self.moe_sync_s + self.pp_sync_s
        return self.forward_s + self.backward_s + comm + syncs + self.offload_s


class GemmRates(NamedTuple):
    """What a GEMM's time needs from the accelerator in one format (:func:`_rates`)."""

    peak_flop_per_s: float
    """Dense peak in the format."""
    efficiency: float
    """GEMM efficiency in the format."""
    bytes_per_value: float
    """Bytes per operand value."""
    hbm_bytes_per_s: float
    """Effective HBM bandwidth (bandwidth x eta_hbm)."""
    kernel_overhead_s: float
    """Fixed cost per kernel."""
    expert_gemm: float
    """Grouped expert GEMMs' factor."""
    tiling: GemmTiling | None = None
    """Tile and wave model (:attr:`AcceleratorSpec.gemm_tiling`)."""
    expert_rows: float = 1.0
    """Rows the busiest rank's routed-expert GEMMs run over its balanced share
    (:func:`planner.cost.expert.expert_load_factor`: routing imbalance, or capacity padding)."""
    expert_tiles: tuple[int, int, int] | None = None
    """The framework's grouped-GEMM (rows, model dimension, FFN dimension) tiles that straddle
    the experts (``TrainWorkload.grouped_gemm_tiles``); priced on an accelerator without a tile
    model. None = none."""
    dispatch: EinsumDispatch | None = None
    """GShard's einsum dispatch (:func:`planner.cost.gemm.einsum_dispatch`); None = a grouped
    GEMM."""

    def roofline(self, *, expert: bool = False) -> GemmRoofline:
        """One GEMM's roofline in this format; a grouped expert GEMM's at the expert factor."""
        factor = self.expert_gemm if expert else 1.0
        return GemmRoofline(
            self.peak_flop_per_s,
            self.efficiency * factor,
            self.bytes_per_value,
            self.hbm_bytes_per_s,
            self.kernel_overhead_s,
            self.tiling,
        )


class LinearTime(NamedTuple):
    """Seconds of one layer's linear GEMMs for one micro-batch on one GPU, by pass."""

    forward: float
    """Forward GEMMs."""
    dgrad: float
    """Input-gradient GEMMs."""
    wgrad: float
    """Weight-gradient GEMMs."""
    inputs_per_token: float
    """GEMM input values per token (what low-precision casts read)."""
    weights: float = 0.0
    """Weight values of the layer's GEMMs on this GPU (what a per-call weight cast reads)."""
    outputs_per_token: float = 0.0
    """GEMM output values per token (what a low-precision backward casts as output gradients)."""


@lru_cache(maxsize=4096)
def _layer_linear_time(
    model: ModelSpec,
    tokens: float,
    moe_layer: bool,
    degrees: tuple[int, int, int],
    rates: GemmRates,
    names: frozenset[str] | None = None,
) -> LinearTime:
    """One layer's GEMMs on one GPU (:func:`planner.cost.gemm.gemm_time` forward,
    :func:`planner.cost.gemm.gemm_backward_times` backward); only the GEMMs called ``names``
    when given."""
    tp, ep, etp = degrees
    gemms = layer_gemms(model, tokens, moe_layer=moe_layer, tp=tp, ep=ep, etp=etp)
    dispatch = rates.dispatch
    if moe_layer and dispatch is not None:
        gemms += einsum_dispatch_gemms(
            model, tokens, group_tokens=dispatch.group_tokens,
            local_group_tokens=dispatch.local_group_tokens,
            capacity_factor=dispatch.capacity_factor, tp=tp,
        )  # fmt: skip
    if names is not None:
        gemms = [g for g in gemms if g.name in names]
    forward = dgrad = wgrad = 0.0
    for g in gemms:
        expert = is_routed_expert(g)
        roof = rates.roofline(expert=expert)
        timed = _routed_expert_shape(g, rates) if expert else g
        forward += gemm_time(timed, **roof._asdict())
        d, w = gemm_backward_times(timed, roof)
        dgrad += d
        # the dispatch mask is boolean (a cast of the combine weights): no gradient flows to it
        wgrad += 0.0 if g.name == "moe_dispatch" else w
    # values per token of the TP group's tokens, as the memory-bound terms read them: a routed
    # expert's rows are the rank's share of those tokens (routed_token_share)
    share = routed_token_share(tp, etp)
    rows = [g.m * g.count / (share if is_routed_expert(g) else 1.0) for g in gemms]
    inputs = sum(r * g.k for r, g in zip(rows, gemms, strict=True)) / tokens
    outputs = sum(r * g.n for r, g in zip(rows, gemms, strict=True)) / tokens
    weights = sum(g.k * g.n * g.count for g in gemms if g.name not in EINSUM_DISPATCH_GEMMS)
    return LinearTime(forward, dgrad, wgrad, inputs, weights, outputs)


def _routed_expert_shape(gemm: GemmShape, rates: GemmRates) -> GemmShape:
    """A routed-expert GEMM as the busiest rank runs it: its rows scaled by the load
    (``rates.expert_rows``), and, with the framework's grouped-GEMM tiles on an accelerator
    without a tile model, its rows, reduction and columns padded as those tiles cover them
    (:func:`planner.cost.gemm.grouped_tile_rows`: every expert after the first that starts
    inside a row tile computes it again)."""
    rows = gemm.m * rates.expert_rows
    k, n = gemm.k, gemm.n
    if rates.expert_tiles is not None and rates.tiling is None and gemm.count:
        tile_rows, tile_model, tile_ffn = rates.expert_tiles
        rows = grouped_tile_rows(rows * gemm.count, gemm.count, tile_rows) / gemm.count
        if gemm.name == "expert_down":  # F -> D
            k, n = padded_to_tiles(k, tile_ffn), padded_to_tiles(n, tile_model)
        else:  # D -> F (or 2F gated)
            k, n = padded_to_tiles(k, tile_model), padded_to_tiles(n, tile_ffn)
    if (rows, k, n) == (gemm.m, gemm.k, gemm.n):
        return gemm
    return GemmShape(name=gemm.name, m=rows, k=k, n=n, count=gemm.count)


EXPERT_DOWN_GEMM = frozenset({"expert_down"})
"""The routed experts' second projection (:func:`planner.cost.gemm.layer_gemms` name)."""

RECOMPUTED_GEMMS: dict[str, frozenset[str]] = {
    "mla_up_proj": frozenset({"q_up", "kv_up"}),
    "mlp": frozenset({"up", "down"}),
    "shared_experts": frozenset({"shared_up", "shared_down"}),
    "moe": frozenset(
        {"router", "expert_up", "expert_down", "shared_up", "shared_down"} | EINSUM_DISPATCH_GEMMS
    ),
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
    rates: GemmRates,
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
        streamed += (num_dense + num_moe) * norm_bytes_per_token(model)
    if ("moe_act" in modules or "moe" in modules) and model.moe is not None:
        act = (3.0 if model.gated_ffn else 2.0) * ACTIVATION_BYTES
        if model.ffn_activation in CLAMPED_ACTIVATIONS:
            act += CLAMPED_GLU_BYTES_PER_VALUE[0]
        streamed += num_moe * model.moe.top_k * act * model.moe.expert_ffn_hidden_size
    if "moe" in modules and model.moe is not None:  # permute and unpermute again
        streamed += num_moe * PERMUTE_BYTES_PER_ROUTED_VALUE * model.hidden_size * model.moe.top_k
    return time + tokens * streamed / tp / hbm


def attention_efficiency(acc: AcceleratorSpec, workload: TrainWorkload) -> float:
    """Fraction of the bf16 peak the fused attention kernel reaches: the accelerator's
    (calibrated on the vendor's kernel), times FlashAttention-2's relative speed on this part
    when the framework runs FA2 (``workload.attention_kernel``).

    >>> from planner.catalog import load_accelerator
    >>> h100 = load_accelerator("h100_sxm")
    >>> fa2 = TrainWorkload(attention_kernel="flash2")
    >>> attention_efficiency(h100, fa2) == h100.efficiency.attention * 0.6
    True
    """
    relative = acc.flash2_attention_relative
    if workload.attention_kernel == "flash2" and relative is not None:
        return acc.efficiency.attention * relative
    return acc.efficiency.attention


SAVED_GEMM_OUTPUTS: dict[str, tuple[str, ...]] = {
    "qkv": ("q", "k", "v"),
    "q_up": ("q",),
    "kv_up": ("k", "v"),
    "mla_down": (),
    "router": (),
    "out": ("out",),
    "up": ("mlp_gate", "mlp_up"),
    "down": ("mlp_down",),
    "expert_up": ("mlp_gate", "mlp_up"),
    "expert_down": ("mlp_down",),
    "shared_up": ("mlp_gate", "mlp_up"),
    "shared_down": ("mlp_down",),
}
"""Which save-list names (:data:`planner.specs.workload.SavedTensor`) each GEMM
(:func:`planner.cost.gemm.layer_gemms`) produces, in output-column order; a GEMM whose output no
name keeps (MLA's latent down projection, the router) is always recomputed."""


def unsaved_output_share(model: ModelSpec, gemm: str, saved: tuple[str, ...]) -> float:
    """Share of ``gemm``'s output columns a save list does not keep, i.e. the share of its
    forward the backward recomputes (outputs weighted by their widths,
    :func:`planner.cost.memory.saved_tensor_widths`).

    >>> from planner.catalog import load_model
    >>> unsaved_output_share(load_model("8B"), "qkv", ("q", "v"))  # K of Q + 2K: 1024 / 6144
    0.16666666666666666
    """
    names = SAVED_GEMM_OUTPUTS.get(gemm, ())
    if not names:
        return 1.0
    widths = saved_tensor_widths(model, moe_layer=False)
    total = sum(widths[n] for n in names)
    if total == 0:
        return 0.0
    return sum(widths[n] for n in names if n not in saved) / total


def save_list_recompute_time(
    model: ModelSpec,
    saved: tuple[str, ...],
    *,
    tokens: float,
    counts: tuple[float, float],
    degrees: tuple[int, int, int],
    rates: GemmRates,
    forward_s: tuple[float, float],
) -> float:
    """Backward seconds a save-list policy adds to one micro-batch on one GPU: the forward of
    every GEMM share whose output is not kept (:func:`unsaved_output_share`), the memory-bound
    kernels (elementwise outputs are never on a save list), and the attention core unless its
    output (``context``) is kept. ``counts`` = (dense, MoE) layers; ``forward_s`` = the
    forward's (attention core, memory-bound + unfused kernels) seconds."""
    num_dense, num_moe = counts
    attention_s, streamed_s = forward_s
    time = streamed_s + (0.0 if "context" in saved else attention_s)
    for moe_layer, count in ((False, num_dense), (True, num_moe)):
        if not count:
            continue
        gemms = layer_gemms(
            model, tokens, moe_layer=moe_layer, tp=degrees[0], ep=degrees[1], etp=degrees[2]
        )
        for name in {g.name for g in gemms}:
            share = unsaved_output_share(model, name, saved)
            if share:
                one = _layer_linear_time(
                    model, tokens, moe_layer, degrees, rates, frozenset({name})
                )
                time += count * share * one[0]
    return time


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
    wgrad_extra: float = 0.0
    """What the weight-gradient GEMMs add when they run in bf16 and the rest in a low-precision
    format (``TrainWorkload.bf16_wgrad_formats``)."""
    linear_backward: float = 0.0
    """The linear GEMMs' backward (input and weight gradients,
    :func:`planner.cost.gemm.gemm_backward_times`)."""
    weight_cast: float = 0.0
    """One pass of quantizing the layers' weights when each GEMM call does it
    (:func:`weight_cast_time`): in the forward and again in the input-gradient GEMMs."""

    @property
    def recomputable(self) -> float:
        """What full recomputation runs again (s): the whole forward of these layers."""
        return (
            self.linear + self.attention + self.memory_bound + self.unfused_forward
            + self.weight_cast
        )  # fmt: skip


def weight_cast_time(
    weights: float, fmt: NumberFormat, workload: TrainWorkload, hbm_bytes_per_s: float
) -> float:
    """Seconds of one pass quantizing ``weights`` weight values to ``fmt`` when every GEMM call
    quantizes its weight (``workload.weight_cast`` per_call): each value read in bf16 and
    written in the 8-bit format (CAST_BYTES_PER_VALUE) at the effective HBM bandwidth, a
    memory-bound pass like the activation casts. AQT (google/aqt ``config_v3``, as MaxText's
    ``quantization: int8`` configures it) computes the per-channel range of the weight operand
    and quantizes it inside every dot_general, and again for the input-gradient dot
    (``dlhs``), so a training step with full recomputation pays three passes per micro-batch
    over the weights each GPU holds gathered. Nothing for bf16 or a per-step (cached) cast.

    >>> w = TrainWorkload(weight_cast="per_call")
    >>> weight_cast_time(1e9, NumberFormat.INT8, w, 1e12)  # 1e9 values x 3 B at 1 TB/s
    0.003
    >>> weight_cast_time(1e9, NumberFormat.BF16, w, 1e12)
    0.0
    >>> weight_cast_time(1e9, NumberFormat.INT8, TrainWorkload(), 1e12)  # cached per step
    0.0
    """
    if workload.weight_cast != "per_call" or fmt in (NumberFormat.BF16, NumberFormat.FP16):
        return 0.0
    return CAST_BYTES_PER_VALUE * weights / hbm_bytes_per_s


FUSED_GROUPED_MLP_FORMATS = (NumberFormat.MXFP8, NumberFormat.NVFP4)
"""Formats Transformer Engine's fused grouped MLP runs in: its cuDNN front-end CuTe DSL kernels
take block-scaled inputs (32-value MXFP8 or 16-value NVFP4 scale blocks; NVIDIA/TransformerEngine
``transformer_engine/pytorch/ops/fused/forward_grouped_mlp.py``,
``ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8``, and ``backward_grouped_mlp.py``,
``BackwardGroupedMLP_CuTeGEMMDSwiGLU_MXFP8``)."""

FUSED_GROUPED_MLP_SM_MAJOR = 10
"""Compute-capability major version the fused grouped MLP runs on: the forward op's
``is_supported`` returns False unless ``get_device_compute_capability()[0] == 10`` (the kernels
are cuDNN front-end's ``grouped_gemm_glu_wrapper_sm100`` and ``grouped_gemm_quant_wrapper_sm100``;
same file as :data:`FUSED_GROUPED_MLP_FORMATS`)."""


def runs_fused_grouped_mlp(
    model: ModelSpec, acc: AcceleratorSpec, workload: TrainWorkload, fmt: NumberFormat
) -> bool:
    """Whether the routed experts run as Transformer Engine's fused grouped MLP
    (``TrainWorkload.fused_grouped_mlp``): asked for, an MoE model, a block-scaled format
    (:data:`FUSED_GROUPED_MLP_FORMATS`) and a compute capability 10.x GPU
    (:data:`FUSED_GROUPED_MLP_SM_MAJOR`); otherwise TE falls back to the unfused ops.

    >>> from planner.catalog import load_accelerator, load_model
    >>> m, w = load_model("gpt-oss-20b"), TrainWorkload(fused_grouped_mlp=True)
    >>> [runs_fused_grouped_mlp(m, load_accelerator(a), w, f) for a, f in (
    ...     ("gb300", NumberFormat.MXFP8), ("gb300", NumberFormat.FP8),
    ...     ("h100_sxm", NumberFormat.MXFP8))]
    [True, False, False]
    """
    return (
        workload.fused_grouped_mlp
        and model.moe is not None
        and fmt in FUSED_GROUPED_MLP_FORMATS
        and acc.compute_capability_major == FUSED_GROUPED_MLP_SM_MAJOR
    )


def layers_forward(
    model: ModelSpec,
    acc: AcceleratorSpec,
    workload: TrainWorkload,
    layout: Layout,
    layers: tuple[range, ...],
    *,
    cp_ring: int | None = None,
) -> LayersForward:
    """Forward time of ``layers`` (index ranges) for one micro-batch on one GPU.

    GEMMs: :mod:`planner.cost.gemm` at the precision's peak; attention cores (flash attention) at
    the bf16 peak x attention efficiency, slowed where the exponential units bound them
    (:func:`planner.cost.compute.attention_exp_bound_factors`, each pass on its own), the
    backward running the five matmuls of :func:`planner.cost.compute.flash_backward_flop_ratio`,
    and FlashAttention-2's speed where the framework runs it (:func:`attention_efficiency`);
    memory-bound kernels at HBM bandwidth x eta_hbm, with the casts of low-precision inputs, the
    eager kernels of an uncompiled framework (:func:`planner.cost.gemm.
    eager_extra_bytes_per_token`) and the kernels the framework leaves unfused
    (:func:`planner.cost.gemm.unfused_kernel_bytes_per_token`, their own backward traffic).
    Under Transformer Engine's fused grouped MLP (:func:`runs_fused_grouped_mlp`) the routed
    experts' activation, biases, clamps and the cast of the second projection's input run in
    the GEMM epilogues, so none of them is a pass of its own.
    Ring context parallelism adds its merges to the attention (:func:`ring_attention_merge_time`;
    ``cp_ring`` the ring's size under hierarchical ``a2a+p2p``, None = cp).
    """
    tokens = layout.mbs * workload.seq_len / layout.cp
    fmt = layout.precision
    table = layer_table(model, workload.seq_len)
    num_layers = sum(len(r) for r in layers)
    num_moe = table.sum("moe_layers", layers)
    num_dense = num_layers - num_moe
    rates = _rates(acc, fmt, workload, layout)
    hbm = rates[3]
    degrees = (layout.tp, layout.ep, layout.etp)
    none = LinearTime(0.0, 0.0, 0.0, 0.0)
    dense = _layer_linear_time(model, tokens, False, degrees, rates) if num_dense else none
    moe = _layer_linear_time(model, tokens, True, degrees, rates) if num_moe else none
    dense_in, moe_in = dense.inputs_per_token, moe.inputs_per_token
    linear = num_dense * dense.forward + num_moe * moe.forward
    wgrad = num_dense * dense.wgrad + num_moe * moe.wgrad
    linear_backward = num_dense * dense.dgrad + num_moe * moe.dgrad + wgrad
    bf16 = NumberFormat.BF16
    wgrad_extra = 0.0
    if fmt in workload.bf16_wgrad_formats:  # the weight-gradient GEMMs at bf16 speed
        slow = _rates(acc, bf16, workload, layout)
        slow_wgrad = sum(
            count * _layer_linear_time(model, tokens, moe_layer, degrees, slow).wgrad
            for count, moe_layer in ((num_dense, False), (num_moe, True))
            if count
        )
        wgrad_extra = max(0.0, slow_wgrad - wgrad)
    if workload.flash_attention:
        attention_mma = matmul_time(
            tokens * table.sum("attention_flops", layers) / layout.tp,
            peak_flop_per_s=acc.peak_flop_per_s(bf16),
            efficiency=attention_efficiency(acc, workload),
        )
        exp_forward, exp_backward = attention_exp_bound_factors(model, acc.bf16_flops_per_exp)
        attention = attention_mma * exp_forward
        attention_backward = flash_backward_flop_ratio(model) * attention_mma * exp_backward
        if runs_ring_steps(workload, layout):
            merge_forward, merge_backward = ring_attention_merge_time(
                model, layout, tokens=tokens, num_layers=num_layers, rates=rates,
                impl=workload.cp_impl, ring=cp_ring,
            )  # fmt: skip
            attention += merge_forward
            attention_backward += merge_backward
    else:
        attention = unfused_attention_time(model, acc, workload, layout, num_layers)
        attention_backward = 2.0 * attention
    fused_mlp = bool(num_moe) and runs_fused_grouped_mlp(model, acc, workload, fmt)
    streamed = num_dense * elementwise_bytes_per_token(model, moe_layer=False)
    streamed += num_moe * elementwise_bytes_per_token(model, moe_layer=True, fused_mlp=fused_mlp)
    if not workload.fused_elementwise:
        streamed += num_dense * eager_extra_bytes_per_token(model, moe_layer=False)
        streamed += num_moe * eager_extra_bytes_per_token(model, moe_layer=True)
    casts = (0.0, 0.0)
    torchao = runs_torchao_casts(workload, fmt)
    if torchao:
        casts = dynamic_cast_time(
            inputs=num_dense * dense_in + num_moe * moe_in,
            outputs=num_dense * dense.outputs_per_token + num_moe * moe.outputs_per_token,
            weights=num_dense * dense.weights + num_moe * moe.weights,
            tokens=tokens / layout.tp,
            hbm_bytes_per_s=hbm,
            weight_casts=not gathers_fp8_params(workload, layout),
        )
    elif fmt not in (NumberFormat.BF16, NumberFormat.FP16):
        if fused_mlp:  # the first projection's epilogue writes the second's quantized input
            down = _layer_linear_time(model, tokens, True, degrees, rates, EXPERT_DOWN_GEMM)
            moe_in -= down.inputs_per_token
        streamed += CAST_BYTES_PER_VALUE * (num_dense * dense_in + num_moe * moe_in)
    memory_bound = tokens * streamed / layout.tp / hbm
    if not workload.sequence_parallel and layout.tp > 1:
        # norms and residual adds run on every TP rank's full sequence
        repeated = norm_residual_bytes_per_token(model) * num_layers
        memory_bound += tokens * repeated * (1.0 - 1.0 / layout.tp) / hbm
    unfused_forward, unfused_backward = _unfused_kernel_time(
        model, tokens=tokens, num_dense=num_dense, num_moe=num_moe, layout=layout, rates=rates,
        fused_mlp=fused_mlp,
    )  # fmt: skip
    unfused_forward += casts[0]
    unfused_backward += casts[1]
    weight_cast = 0.0  # under torchao's casts (above) the weights' casts are fp8_casts' to price
    if not torchao:
        weight_cast = weight_cast_time(
            num_dense * dense.weights + num_moe * moe.weights, fmt, workload, hbm
        )
    return LayersForward(
        linear, attention, attention_backward, memory_bound, unfused_forward, unfused_backward,
        num_moe, wgrad_extra, linear_backward, weight_cast,
    )  # fmt: skip


def runs_torchao_casts(workload: TrainWorkload, fmt: NumberFormat) -> bool:
    """Whether ``fmt``'s GEMM operands are quantized by torchao's dynamic-scaling float8 casts
    (``TrainWorkload.fp8_casts`` tensorwise or rowwise; FP8 only, :func:`dynamic_cast_time`)
    rather than priced as Transformer Engine's fused casts.

    >>> runs_torchao_casts(TrainWorkload(fp8_casts="tensorwise"), NumberFormat.FP8)
    True
    >>> runs_torchao_casts(TrainWorkload(fp8_casts="tensorwise"), NumberFormat.MXFP8)
    False
    """
    return fmt == NumberFormat.FP8 and workload.fp8_casts != "fused"


def dynamic_cast_time(
    *,
    inputs: float,
    outputs: float,
    weights: float,
    tokens: float,
    hbm_bytes_per_s: float,
    weight_casts: bool = False,
) -> tuple[float, float]:
    """(forward, backward) seconds of torchao's float8 casts with dynamic scaling
    (``TrainWorkload.fp8_casts`` tensorwise or rowwise) for ``tokens`` tokens (the GPU's share,
    over tp as the other memory-bound kernels) through GEMMs that read ``inputs`` and write
    ``outputs`` values per token and hold ``weights`` weight values, at the effective HBM
    bandwidth. Forward: each input's scale pass and cast (DYNAMIC_CAST_BYTES_PER_VALUE);
    tensorwise weights arrive in fp8 (FSDP's float8 all-gather casts the shard), and
    ``weight_casts`` (a weight not gathered in fp8: rowwise, whose parameters gather in bf16,
    no float8 all-gather, or no ZeRO gather at all) casts each weight on every call too, and
    again for the input gradient. Backward: each output gradient's scale pass and cast, and the
    layout copies ``torch._scaled_mm`` needs (LAYOUT_COPY_BYTES_PER_VALUE): the weight
    (column-major for the input gradient), the output gradient transposed and the input
    column-major (the weight gradient). torchao
    float8_linear.py (``manual_float8_matmul_with_args_in_float8``: the forward saves the
    float8 input and weight; the backward casts the output gradient) and float8_ops.py
    (``preprocess_addmm``: ``a.contiguous()`` when A is not row-major, ``b.t().contiguous().t()``
    when B is), both at 2024-10 commits of pytorch/ao. Kernels torch.compile may fuse (a scale
    pass into its producer, a cast with its transposed copy) are counted as eager runs them.

    >>> f, b = dynamic_cast_time(inputs=10, outputs=20, weights=1e6, tokens=1e5,
    ...                          hbm_bytes_per_s=1e12)
    >>> round(f * 1e6, 3), round(b * 1e6, 3)  # 5 B x 10 x 1e5; (2 x 10 + 7 x 20) x 1e5 + 2e6
    (5.0, 18.0)
    >>> f, b = dynamic_cast_time(inputs=10, outputs=20, weights=1e6, tokens=1e5,
    ...                          hbm_bytes_per_s=1e12, weight_casts=True)
    >>> round(f * 1e6, 3), round(b * 1e6, 3)  # + 5 B x 1e6 each way
    (10.0, 23.0)
    """
    forward = DYNAMIC_CAST_BYTES_PER_VALUE * inputs * tokens
    per_token = LAYOUT_COPY_BYTES_PER_VALUE * inputs
    per_token += (DYNAMIC_CAST_BYTES_PER_VALUE + LAYOUT_COPY_BYTES_PER_VALUE) * outputs
    backward = per_token * tokens + LAYOUT_COPY_BYTES_PER_VALUE * weights
    if weight_casts:
        forward += DYNAMIC_CAST_BYTES_PER_VALUE * weights
        backward += DYNAMIC_CAST_BYTES_PER_VALUE * weights
    return forward / hbm_bytes_per_s, backward / hbm_bytes_per_s


def _rates(
    acc: AcceleratorSpec,
    fmt: NumberFormat,
    workload: TrainWorkload | None = None,
    layout: Layout | None = None,
) -> GemmRates:
    """What a GEMM's time needs from ``acc`` in ``fmt``, and from the workload how its routed
    experts run (their load, the framework's grouped-GEMM tiles, an einsum dispatch: these need
    ``workload`` and ``layout``)."""
    rows, tiles, dispatch = 1.0, None, None
    if workload is not None and layout is not None:
        rows, tiles = expert_load_factor(workload), workload.grouped_gemm_tiles
        if workload.moe_expert_compute == "einsum":  # per-expert einsums: no grouped kernel
            tiles = None
        dispatch = einsum_dispatch(workload, layout)
    return GemmRates(
        acc.peak_flop_per_s(fmt),
        acc.gemm_efficiency(fmt),
        bytes_per_value(fmt),
        acc.hbm_bytes_per_s * acc.efficiency.hbm,
        acc.efficiency.kernel_overhead_us * US,
        acc.efficiency.expert_gemm,
        acc.gemm_tiling,
        rows,
        tiles,
        dispatch,
    )


RING_CP_COMMS = frozenset({"p2p", "a2a+p2p"})
"""Context-parallel forms Transformer Engine runs as ring steps, merging the partial outputs."""


def runs_ring_steps(workload: TrainWorkload, layout: Layout) -> bool:
    """Whether attention runs as context-parallel ring steps whose partial outputs are merged:
    Transformer Engine's ring forms (:data:`RING_CP_COMMS`), PyTorch's ``context_parallel``
    under every form (``TrainWorkload.cp_impl``).

    >>> runs_ring_steps(TrainWorkload(cp_comm="allgather"), Layout(cp=2))
    False
    >>> runs_ring_steps(TrainWorkload(cp_comm="allgather", cp_impl="pytorch"), Layout(cp=2))
    True
    """
    if layout.cp == 1:
        return False
    return workload.cp_impl == "pytorch" or workload.cp_comm in RING_CP_COMMS


def ring_attention_merge_time(
    model: ModelSpec,
    layout: Layout,
    *,
    tokens: float,
    num_layers: int,
    rates: GemmRates,
    impl: CpImpl = "te",
    ring: int | None = None,
) -> tuple[float, float]:
    """(forward, backward) seconds that ring attention adds to ``num_layers`` layers' attention
    for one micro-batch of ``tokens`` (local) tokens on one GPU: the partial outputs' merge and
    gradient accumulation at HBM bandwidth x eta_hbm
    (:func:`planner.cost.compute.ring_attention_merge_bytes_per_token`, heads split over tp) and
    the further kernels' fixed cost (:func:`planner.cost.compute.ring_attention_extra_launches`),
    of Transformer Engine's or PyTorch's implementation (``impl``). ``ring``: the ring's size
    when it is not cp, under hierarchical ``a2a+p2p``, whose ranks each hold their domain's
    tokens for a share of the heads after the all-to-all, so the bytes per local token and
    head are those of a ring of that size (:func:`cp_comm_per_microbatch`)."""
    size = layout.cp if ring is None else ring
    forward_bytes, backward_bytes = ring_attention_merge_bytes_per_token(model, size, impl)
    forward_launches, backward_launches = ring_attention_extra_launches(size, impl)
    scale = tokens * num_layers / layout.tp / rates.hbm_bytes_per_s
    overhead = num_layers * rates.kernel_overhead_s
    return (
        forward_bytes * scale + forward_launches * overhead,
        backward_bytes * scale + backward_launches * overhead,
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
    return gemm_time(projection, **rates.roofline()._asdict())


EXPERT_MLP_GEMMS = frozenset({"expert_up", "expert_down", "shared_up", "shared_down"})
"""The GEMMs of an MoE layer's expert MLP (:func:`planner.cost.gemm.layer_gemms` names):
routed and shared experts."""


def expert_dgrad_time(
    model: ModelSpec, acc: AcceleratorSpec, workload: TrainWorkload, layout: Layout
) -> float:
    """Seconds of one MoE layer's expert MLP input-gradient GEMMs (routed and shared experts)
    for one micro-batch on one GPU (:func:`planner.cost.gemm.gemm_backward_times`): the
    expert backward that Megatron-LM's combined 1F1B queues ahead of the other micro-batch's
    dispatch (its weight gradients wait until after it, ``--delay-wgrad-compute``), which runs
    through that dispatch's host sync (:func:`planner.cost.expert.exposed_moe_sync_time`)."""
    tokens = layout.mbs * workload.seq_len / layout.cp
    degrees = (layout.tp, layout.ep, layout.etp)
    rates = _rates(acc, layout.precision, workload, layout)
    return _layer_linear_time(model, tokens, True, degrees, rates, EXPERT_MLP_GEMMS).dgrad


def microbatch_compute(
    model: ModelSpec,
    acc: AcceleratorSpec,
    workload: TrainWorkload,
    layout: Layout,
    stage: int,
    *,
    split: PipelineSplit | None = None,
    contents: StageContents | None = None,
    cp_ring: int | None = None,
) -> tuple[float, float, float, float]:
    """(forward, backward, attention-core forward, linear-GEMM forward) seconds of one
    micro-batch on ``stage`` (its layers under ``split``, or the even split; or ``contents``
    when given, e.g. one layer for the stage partition's tables). ``cp_ring``: the ring size of
    hierarchical context parallelism (:func:`layers_forward`).

    The layers: :func:`layers_forward`; the linear GEMMs' backward at its own shapes
    (:func:`planner.cost.gemm.gemm_backward_times`), 2 x forward for the rest (input and weight
    gradients; the weight gradients at bf16 speed for ``TrainWorkload.bf16_wgrad_formats``); the
    stage holding the output layer adds the logits GEMM and the loss's passes
    over the logits (:func:`head_forward`, once per MTP module too); full recompute adds the
    forward of the layers it recomputes, selective the modules ``workload.recompute_modules``
    names (:func:`selective_recompute_time`) or the GEMM shares and elementwise work a save list
    does not keep (:func:`save_list_recompute_time`).
    """
    contents = contents or stage_contents(model, workload, layout, stage, split)
    part = layers_forward(model, acc, workload, layout, contents.layers, cp_ring=cp_ring)
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
        2.0 * (forward - part.attention - part.linear)
        + part.linear_backward
        + part.attention_backward
        + loss_backward
        + part.unfused_backward
        + part.wgrad_extra
    )
    # a per-call weight cast: once in the forward, once for the input-gradient GEMMs
    forward += loss_forward + part.unfused_forward + part.weight_cast
    backward += part.weight_cast
    if layout.recompute is Recompute.FULL:
        if contents.recomputed is None:
            fraction = recomputed_fraction(workload, layout, contents.num_layers)
            backward += fraction * part.recomputable
        elif contents.num_recomputed:
            again = layers_forward(
                model, acc, workload, layout, contents.recomputed, cp_ring=cp_ring
            )
            backward += again.recomputable
    elif layout.recompute is Recompute.SELECTIVE and workload.saved_tensors is not None:
        backward += save_list_recompute_time(
            model,
            workload.saved_tensors,
            tokens=layout.mbs * workload.seq_len / layout.cp,
            counts=(contents.num_layers - part.num_moe, part.num_moe),
            degrees=(layout.tp, layout.ep, layout.etp),
            rates=_rates(acc, layout.precision, workload, layout),
            forward_s=(part.attention, part.memory_bound + part.unfused_forward),
        )
    elif layout.recompute is Recompute.SELECTIVE:
        backward += selective_recompute_time(
            model,
            workload,
            tokens=layout.mbs * workload.seq_len / layout.cp,
            num_dense=int(contents.num_layers - part.num_moe),
            num_moe=part.num_moe,
            degrees=(layout.tp, layout.ep, layout.etp),
            rates=_rates(acc, layout.precision, workload, layout),
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
    rates: GemmRates,
    fused_mlp: bool = False,
) -> tuple[float, float]:
    """(forward, backward) seconds of a micro-batch's unfused framework kernels on one GPU
    (:func:`planner.cost.gemm.unfused_kernel_bytes_per_token`): their HBM traffic at
    HBM bandwidth x eta_hbm, sharded over tp like the other memory-bound kernels, plus the fixed
    per-kernel cost of each launch; ``fused_mlp``: the MoE layers' experts run fused
    (:func:`runs_fused_grouped_mlp`)."""
    hbm, overhead = rates[3], rates[4]
    local_experts = model.moe.num_experts / layout.ep if model.moe is not None else 0.0
    forward = backward = launches = 0.0
    for count, moe_layer in ((num_dense, False), (num_moe, True)):
        if not count:
            continue
        fused = fused_mlp and moe_layer
        f, b = unfused_kernel_bytes_per_token(model, moe_layer=moe_layer, fused_mlp=fused)
        forward += count * tokens * f / layout.tp / hbm
        backward += count * tokens * b / layout.tp / hbm
        launches += count * unfused_kernel_launches(
            model, moe_layer=moe_layer, local_experts=local_experts, fused_mlp=fused
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
    rates: tuple[float, float],
    recomputed_layers: float | None = None,
    moe_layers: float = 0.0,
) -> float:
    """Exposed TP collectives of one micro-batch: with sequence parallelism, per layer 2
    all-gathers and 2 reduce-scatters of the (B T D) bf16 activation forward and the same
    backward (Korthikanti et al. 2022, section 4.2.2; the same bytes as the 2 + 2 all-reduces
    without SP, ``workload.sequence_parallel`` False), one of each per pass in a parallel block
    (its attention and FFN share the gathered input and reduce their summed output); full
    recompute repeats the forward ones.

    With ``workload.tp_comm_overlap`` (Megatron-LM --tp-comm-overlap with userbuffers, which
    needs sequence parallelism; torchtitan's async TP) each collective is decomposed into tp
    chunks pipelined with the GEMM that consumes or produces it (Wang et al., "Overlap
    Communication with Dependent Computation via Decomposition", ASPLOS 2023): one chunk in tp
    cannot overlap (the first all-gather chunk before the GEMM starts, the last reduce-scatter
    chunk after it ends) and is exposed; the rest hides behind the layer's linear GEMM time
    (forward ``linear_s``, x3 with the backward) up to the contention; and every overlapped GEMM
    runs as tp smaller GEMMs, paying tp - 1 more fixed per-kernel costs
    (:func:`tp_overlap_split_time`); a group that crosses scale-up domains cannot overlap
    (:func:`overlaps_tp_comm`). ``rates`` = (per-kernel seconds, contention share);
    ``recomputed_layers``: how many of the ``num_layers`` recompute in full (None = the layout's
    rule). ``moe_layers`` of the ``num_layers`` have a mixture-of-experts FFN, whose sub-block
    has the collectives of :func:`moe_block_tp_collectives` instead of the dense FFN's pair."""
    if tp.size == 1:
        return 0.0
    message = ACTIVATION_BYTES * layout.mbs * workload.seq_len / layout.cp * model.hidden_size
    pair = all_gather_time(message, tp) + reduce_scatter_time(message, tp)
    blocks = norms_per_layer(model)  # sub-blocks with a collective pair each (one if parallel)
    moe_blocks, routed = float(blocks), 0.0
    if moe_layers and model.moe is not None and blocks == 2:  # a parallel block shares its pair
        moe_blocks, routed = moe_block_tp_collectives(model, layout, message, tp)
    if recomputed_layers is None:  # the layout's rule (the even split)
        recomputed_layers = recomputed_fraction(workload, layout, num_layers) * num_layers
    passes = (num_layers + 0.5 * recomputed_layers) / num_layers if num_layers else 0.0
    # forward and backward: 2 pairs per sub-block; the routed copies' expert-TP pair is exposed
    comm = 2 * pair * passes * (blocks * (num_layers - moe_layers) + moe_blocks * moe_layers)
    exposed_routed = 2 * routed * passes * moe_layers
    if not overlaps_tp_comm(workload, tp):
        return comm + exposed_routed  # no overlap: off, without SP, or across domains
    kernel_s, contention = rates
    tail = comm / tp.size
    split = tp_overlap_split_time(model, tp.size, kernel_s) * passes * num_layers
    overlapped = overlapped_exposed_time(comm - tail, 3.0 * linear_s, contention)
    return tail + overlapped + split + exposed_routed


def tp_overlap_reaches(tp: CommDomain) -> bool:
    """Whether a TP group's collectives can be decomposed and pipelined with its GEMMs: only
    when the group stays inside one scale-up domain. Transformer Engine's userbuffers (Megatron-LM
    ``--tp-comm-overlap``) map every TP peer's buffer into each rank, by POSIX file descriptors
    passed over Unix sockets on one host or by fabric handles inside a multi-node NVLink domain
    (``register_user_buffer_collective`` in transformer_engine/common/comm_gemm_overlap/
    userbuffers/userbuffers-host.cpp, its peers "total GPUs in NVLINK domain"; ``initialize_ub``
    takes each TP group as one NVLink domain; "the comm+GEMM overlap is currently only possible
    with single-node tensor-parallelism", NVIDIA/TransformerEngine issue 1071) [R];
    torch's symmetric memory, under torchtitan's async TP, maps peer memory the same way, and
    XLA's collective matmul rotates shards with ICI collective permutes [U]. A group that
    crosses a NIC runs its collectives in line.

    >>> up = CommDomain(size=8, bandwidth_bytes_per_s=450e9, latency_s=0, efficiency=1,
    ...                 tier="scale_up")
    >>> tp_overlap_reaches(up), tp_overlap_reaches(up.model_copy(update={"size": 16,
    ...     "tier": "scale_out"}))
    (True, False)
    """
    return tp.tier != "scale_out"  # as the plan's placement says ``within_domain``


def asks_tp_overlap(workload: TrainWorkload) -> bool:
    """Whether the workload overlaps its TP collectives with their GEMMs where the group allows:
    ``workload.tp_comm_overlap``, which needs sequence parallelism (Megatron-LM's overlap
    decomposes the all-gathers and reduce-scatters of SP)."""
    return workload.tp_comm_overlap and workload.sequence_parallel


def overlaps_tp_comm(workload: TrainWorkload, tp: CommDomain) -> bool:
    """Whether the TP collectives are pipelined with their GEMMs: the workload asks for it
    (:func:`asks_tp_overlap`) and the group stays inside one scale-up domain
    (:func:`tp_overlap_reaches`)."""
    return asks_tp_overlap(workload) and tp_overlap_reaches(tp)


def moe_block_tp_collectives(
    model: ModelSpec, layout: Layout, message_bytes: float, tp: CommDomain
) -> tuple[float, float]:
    """(sub-blocks' worth of TP collective pairs, seconds of the routed copies' expert-TP pair)
    of one MoE layer's FFN sub-block, one pass, under sequence parallelism, besides its
    attention's pair (1). Megatron-Core: the shared experts run as a tensor-parallel MLP
    (``SharedExpertMLP``: an all-gather into its first projection, a reduce-scatter out of its
    second, as a dense FFN's); the routed tokens stay sequence-parallel, each rank all-to-alls
    its own T / tp (:func:`planner.cost.gemm.routed_token_share`), and only with expert TP > 1
    does ``dispatch_postprocess`` all-gather what arrives over the expert-TP group and the
    combine reduce-scatter it back: top_k x etp / tp times the activation, not overlapped by
    the TP userbuffers (it sits between the all-to-all and the grouped GEMM). That pair is
    priced on the TP group's links (the expert-TP group is inside it).

    >>> from planner.catalog import load_model
    >>> dom = CommDomain(size=2, bandwidth_bytes_per_s=100e9, latency_s=0.0, efficiency=1.0,
    ...                  tier="scale_up")
    >>> mixtral = load_model("mixtral-8x7b")
    >>> moe_block_tp_collectives(mixtral, Layout(tp=2, etp=1, dp=4, ep=8), 1e9, dom)
    (1.0, 0.0)
    >>> blocks, routed = moe_block_tp_collectives(mixtral, Layout(tp=2, etp=2, dp=4, ep=4),
    ...                                           1e9, dom)
    >>> blocks, round(routed, 3)  # top-2: all-gather + reduce-scatter of 2e9 bytes, half each
    (1.0, 0.02)
    >>> moe_block_tp_collectives(load_model("deepseek-v3"), Layout(tp=2, etp=1, dp=64, ep=64),
    ...                          1e9, dom)[0]  # the shared expert's pair
    2.0
    """
    moe = model.moe
    assert moe is not None  # internal: called for MoE layers only
    blocks = 1.0 + (1.0 if moe.num_shared_experts else 0.0)
    if layout.etp == 1:
        return blocks, 0.0
    routed = message_bytes * moe.top_k * layout.etp / layout.tp
    return blocks, all_gather_time(routed, tp) + reduce_scatter_time(routed, tp)


def tp_overlap_split_time(model: ModelSpec, tp: int, kernel_overhead_s: float) -> float:
    """Fixed cost per layer of running the GEMMs next to TP collectives as tp chunks when the
    collectives are overlapped (userbuffers ring exchange, async TP): (tp - 1) more kernels for
    each of the layer's column- and row-parallel GEMMs (2 per sub-block: QKV and output, FFN up
    and down) in each of its three passes (forward, input-gradient and weight-gradient).

    >>> from planner.cost.params import _tiny
    >>> tp_overlap_split_time(_tiny(), 8, 4e-6) * 1e6  # 7 x 4 GEMMs x 3 passes x 4 us
    336.0
    """
    return (tp - 1) * 2 * norms_per_layer(model) * 3 * kernel_overhead_s


def cp_kv_values_per_token(model: ModelSpec) -> float:
    """Key and value values per token one context-parallel rank exchanges: 2 K H, or with MLA
    the up-projected keys and values, N (H_nope + H_rope + H_v) (Megatron-LM's MLA context
    parallelism exchanges them, not the latent)."""
    if model.mla is not None:
        mla = model.mla
        heads = model.num_attention_heads
        return heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim)
    return 2.0 * model.num_kv_heads * model.head_dim


def cp_comm_per_microbatch(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    num_layers: int,
    *,
    cp: CommDomain,
    attention_s: tuple[float, float],
    contention: float = 0.0,
    hierarchy: tuple[CommDomain, CommDomain] | None = None,
) -> float:
    """Exposed context-parallel communication of one micro-batch (``attention_s`` = the stage's
    attention-core forward and backward seconds), by ``workload.cp_comm``; causal chunks are
    load-balanced (Megatron's 2 cp chunks, torchtitan's head-tail order), so every rank and
    every ring step carry the same attention work:

    - ``p2p`` (ring attention, Liu et al., arXiv 2310.01889 section 3): per layer cp - 1 steps,
      each sending the local K and V (forward) or K, V and their gradients (backward) while the
      attention of one chunk runs; a step's send hides behind that step's attention (1 / cp of
      the layer's), the excess and the contention share are exposed;
    - ``allgather`` (Llama 3, arXiv 2407.21783 section 3.3.2; torchtitan, MaxText): K and V are
      all-gathered before attention (again in the backward) and their gradients reduce-scattered
      after it, all on the critical path;
    - ``a2a`` (DeepSpeed-Ulysses, arXiv 2309.14509): queries, keys, values and the output are
      all-to-all'ed between the sequence and the head split, forward and backward, exposed;
    - ``a2a+p2p`` (hierarchical, Megatron Core ``hierarchical_context_parallel_sizes``): the
      all-to-all inside each scale-up domain (``hierarchy[0]``, as ``a2a``), then the ring of
      ``p2p`` across the domains (``hierarchy[1]``): each rank then holds its domain's tokens
      for 1 / (all-to-all size) of the heads, so a ring step sends as many bytes as under
      ``p2p`` and there are ring size - 1 of them. Without ``hierarchy``, a ring over all cp
      ranks.

    ``cp``: the CP groups' domain for the variant (:func:`planner.specs.comm.traffic_domain`):
    for the ring, each step a rank sends to its neighbour alone
    (:data:`planner.topology.flows.SHIFT`), so where the ring crosses scale-up domains the send
    has one NIC, not the rails an NCCL ring stripes its channels over (Transformer Engine's ring
    attention, ``flash_attn_p2p_communicate`` in ``transformer_engine/pytorch/attention/
    dot_product_attention/context_parallel.py``: an ``isend`` to the next CP rank and an
    ``irecv`` from the previous one per step); an NCCL ring collective for ``allgather``; an
    all-to-all for ``a2a``.
    """
    if cp.size == 1:
        return 0.0
    tokens = layout.mbs * workload.seq_len / layout.cp
    chunk = ACTIVATION_BYTES * tokens * cp_kv_values_per_token(model) / layout.tp
    forward_s, backward_s = (t / max(num_layers, 1) for t in attention_s)
    if workload.cp_comm == "allgather":
        gather = all_gather_time(cp.size * chunk, cp)
        return num_layers * (2 * gather + reduce_scatter_time(cp.size * chunk, cp))
    q_values = model.num_attention_heads * attention_head_dims(model)[0]
    local = ACTIVATION_BYTES * tokens * q_values / layout.tp

    def heads_exchange(group: CommDomain) -> float:
        """q and the output, k and v all-to-all'ed, forward and backward, exposed."""
        if group.size == 1:
            return 0.0
        per_pass = 2 * all_to_all_time(local, group) + all_to_all_time(chunk, group)
        return num_layers * 2 * per_pass

    if workload.cp_comm == "a2a":
        return heads_exchange(cp)
    exposed_a2a, ring = 0.0, cp
    if workload.cp_comm == "a2a+p2p" and hierarchy is not None:
        exposed_a2a, ring = heads_exchange(hierarchy[0]), hierarchy[1]
    if ring.size == 1:
        return exposed_a2a
    send = p2p_time(chunk, ring)
    steps = ring.size - 1
    exposed = steps * overlapped_exposed_time(send, forward_s / ring.size, contention)
    exposed += steps * overlapped_exposed_time(2 * send, backward_s / ring.size, contention)
    return exposed_a2a + exposed * num_layers


def activation_offload_time(
    offloaded_bytes: float,
    acc: AcceleratorSpec,
    *,
    compute_s: tuple[float, float],
    contention: float,
) -> float:
    """Exposed seconds of moving ``offloaded_bytes`` of one micro-batch's activations to host
    memory during its forward and back during its backward over the host link (one direction
    each, ``AcceleratorSpec.host_link_GB_per_s``), each copy running under its pass's compute
    (``compute_s`` = forward, backward) on copy engines: only what outlasts the pass, plus the
    contention share of the overlapped time, is exposed (:func:`overlapped_exposed_time`; the
    copies also stream the activations through HBM).

    >>> from planner.catalog import load_accelerator
    >>> gb200 = load_accelerator("gb200")  # 450 GB/s per direction
    >>> activation_offload_time(45e9, gb200, compute_s=(0.05, 0.1), contention=0.0)
    0.05
    """
    if offloaded_bytes <= 0.0:
        return 0.0
    if acc.host_link_GB_per_s is None:
        raise InternalError(f"{acc.name} has no host link figure; check_workload refuses offload")
    copy_s = offloaded_bytes / (acc.host_link_GB_per_s * GB)
    forward_s, backward_s = compute_s
    return overlapped_exposed_time(copy_s, forward_s, contention) + overlapped_exposed_time(
        copy_s, backward_s, contention
    )


def pp_sync_time(
    acc: AcceleratorSpec, workload: TrainWorkload, layout: Layout, stage: int
) -> float:
    """Host-synchronisation time of one micro-batch's pipeline receives on ``stage``, when the
    framework reads each received tensor's metadata on the host (``workload.pp_host_sync``):
    one sync per receive, the activation from the stage before (every stage but the first) and
    the gradient from the stage after (every stage but the last), each chunk's. Each costs what
    the accelerator's fitted mid-step host synchronisation costs (``moe_sync_overhead_us``: the
    stream drains and then waits on the host's relaunch, fitted where the MoE dispatcher makes
    the same stall).

    >>> from planner.catalog import load_accelerator
    >>> h100, w = load_accelerator("h100_sxm"), TrainWorkload(pp_host_sync=True)
    >>> [pp_sync_time(h100, w, Layout(pp=4), s) / (h100.efficiency.moe_sync_overhead_us * 1e-6)
    ...  for s in range(4)]
    [1.0, 2.0, 2.0, 1.0]
    >>> pp_sync_time(h100, TrainWorkload(), Layout(pp=4), 1)
    0.0
    """
    if not workload.pp_host_sync or layout.pp == 1:
        return 0.0
    receives = int(stage > 0) + int(stage < layout.pp - 1)
    return receives * layout.vpp * acc.efficiency.moe_sync_overhead_us * US


def cp_levels(
    workload: TrainWorkload, domains: dict[str, CommDomain]
) -> tuple[CommDomain, CommDomain] | None:
    """The (all-to-all, ring) domains of hierarchical context parallelism when the workload
    runs it (``cp_comm`` ``a2a+p2p``) and the topology gives them
    (:func:`planner.topology.hierarchy.comm_domains`); None otherwise."""
    if workload.cp_comm == "a2a+p2p" and "cp_a2a" in domains and "cp_ring" in domains:
        return domains["cp_a2a"], domains["cp_ring"]
    return None


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
    levels = cp_levels(workload, domains)
    ring = levels[1].size if levels is not None else None
    forward, backward, attention, linear = microbatch_compute(
        model, acc, workload, layout, stage, contents=contents, cp_ring=ring
    )
    contention = acc.efficiency.overlap_contention
    num_layers = contents.num_layers
    table = layer_table(model, workload.seq_len)
    num_moe = table.sum("moe_layers", contents.layers)
    recomputed_moe = None
    if contents.recomputed is not None and layout.recompute is Recompute.FULL:
        recomputed_moe = table.sum("moe_layers", contents.recomputed)
    ep_comm = ep_comm_per_microbatch(
        model, workload, layout, num_moe, domains["ep"], recomputed_moe_layers=recomputed_moe
    )
    ep_exposed = ep_exposed_per_microbatch(
        ep_comm, compute_s=forward + backward, workload=workload, contention=contention
    )
    sync = moe_sync_time(acc, workload, num_moe)
    sync_exposed = exposed_moe_sync_time(
        sync,
        expert_dgrad_time(model, acc, workload, layout) if workload.ep_comm_overlap else 0.0,
        num_moe,
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
            rates=(acc.efficiency.kernel_overhead_us * US, contention),
            recomputed_layers=None if contents.recomputed is None else contents.num_recomputed,
            moe_layers=num_moe,
        ),
        cp_comm_s=cp_comm_per_microbatch(
            model,
            workload,
            layout,
            num_layers,
            cp=traffic_domain(domains, "cp", workload.cp_comm),
            attention_s=(attention, attention * flash_backward_flop_ratio(model)),
            contention=contention,
            hierarchy=levels,
        ),
        ep_comm_s=ep_exposed,
        moe_sync_s=sync_exposed,
        ep_comm_unpaired_s=ep_comm - ep_exposed,
        moe_sync_unpaired_s=sync - sync_exposed,
        pp_sync_s=pp_sync_time(acc, workload, layout, stage),
        offload_s=activation_offload_time(
            workload.activation_offload_fraction
            * activation_bytes_per_microbatch(model, workload, layout, contents),
            acc,
            compute_s=(forward, backward),
            contention=contention,
        )
        if workload.activation_offload_fraction > 0.0
        else 0.0,
    )
