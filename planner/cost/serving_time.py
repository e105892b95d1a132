"""Serving time terms: one forward pass of a pipeline stage that decodes a batch and prefills
prompts at once (in-flight batching), and the per-token latency, TTFT and throughput built on it.

Per layer on one GPU (serving-formulas.md 6c-6d; each kernel is its own roofline, kernels do not
overlap, Williams et al. 2009):

    t_layer = sum_gemm max(2 m k n / (P eta_gemm), b (m k + k n + m n) / (W_hbm eta_hbm)) + t_kernel
            + max(KV bytes read / (W_hbm eta_hbm), attention FLOPs / (P_bf16 eta_attn)) + t_kernel
            + TP all-reduce (2 per layer; alpha-beta over the group's CommDomain)
            + EP dispatch + combine (MoE layers) + n_other t_kernel

GEMM shapes come from :mod:`planner.cost.gemm` (Megatron column/row split). A token's latency is
pp stage passes (pp micro-batches in flight keep every stage busy), so TPOT = pp x t_stage and a
replica emits B / TPOT tokens/s. Efficiencies, bandwidths and the per-kernel cost are the
accelerator's catalog data; nothing here is a hardware number.
"""

from __future__ import annotations

import math
from functools import lru_cache

from planner.cost.comm import all_gather_time, all_to_all_time, p2p_time, ring_all_reduce_time
from planner.cost.compute import attention_core_flops_per_token, is_sliding_layer
from planner.cost.gemm import (
    ROUTED_EXPERT_PREFIX,
    GemmShape,
    attention_gemms,
    ffn_gemms,
    gemm_time,
)
from planner.cost.memory import ACTIVATION_BYTES
from planner.cost.serving import (
    cached_tokens,
    kv_bytes_per_token_per_layer,
    kv_heads_per_gpu,
    layers_per_stage,
    linear_formats,
)
from planner.cost.serving_moe import busiest_rank_experts, experts_touched, grouped_gemm_time
from planner.specs.base import FrozenSpec
from planner.specs.comm import CommDomain
from planner.specs.engine import ServingEngineSpec
from planner.specs.formats import NumberFormat, bytes_per_value
from planner.specs.hardware import AcceleratorSpec
from planner.specs.model import ModelSpec
from planner.specs.result import ServeLayout
from planner.specs.workload import ServeWorkload
from planner.units import US

FUSED_NORM_BYTES_PER_HIDDEN = 16.0
"""HBM bytes per hidden unit per token of a serving layer's two fused residual-add + RMSNorm
kernels (vLLM ``fused_add_rms_norm``, TensorRT-LLM / SGLang equivalents), bf16: each reads the
input and the residual and writes the normed output and the new residual, 4 x 2 bytes."""
GATED_ACTIVATION_BYTES_PER_WIDTH = 6.0
"""HBM bytes per FFN unit per token of the gated activation (``silu_and_mul``): read gate and
up (2 x 2 bytes), write the product (2 bytes); a plain activation reads and writes F (4)."""
ROTARY_BYTES_PER_VALUE = 4.0
"""HBM bytes per rotated query/key value (read and write in bf16, fused with the KV append)."""
PERMUTE_BYTES_PER_COPY_HIDDEN = 8.0
"""HBM bytes per routed copy per hidden unit of the MoE permutation and its inverse: write the
copy, read it into the up GEMM (the GEMMs count their own operands), write the down output and
read it back in the weighted combine, bf16 (4 x 2 bytes)."""

OTHER_KERNELS_PER_LAYER = 5
"""Kernels of a decode layer besides its GEMMs and attention: two RMSNorm (+ residual add),
rotary embedding + KV-cache append, and the gated activation (the unfused kernels of a vLLM /
TensorRT-LLM Llama layer; fused variants are absorbed by the calibrated kernel_overhead_us)."""


class ServeSetup(FrozenSpec):
    """Everything a serving pass needs: the model, the GPU, the layout and its links."""

    model: ModelSpec
    """The model."""
    accelerator: AcceleratorSpec
    """The GPU (efficiencies from its catalog entry and calibration)."""
    layout: ServeLayout
    """The replica's split."""
    compute_format: NumberFormat
    """Format the GEMMs run in."""
    attention_comm: CommDomain
    """The attention-TP group (tp / attention_dp ranks)."""
    tp_comm: CommDomain
    """The tp group (FFN all-reduce, or all-gather + reduce-scatter with attention DP)."""
    ep_comm: CommDomain
    """The expert-parallel group (dispatch / combine all-to-all)."""
    pp_comm: CommDomain
    """Stage-to-stage sends."""
    routing_skew: float = 0.0
    """Zipf exponent of the experts' shares of the router's choices (0 = uniform)."""
    engine: ServingEngineSpec | None = None
    """The serving engine: its exposed host time per iteration (None = none, the GPU alone)."""


class PassLoad(FrozenSpec):
    """What one pass of a stage carries, per replica micro-batch."""

    decode_sequences: float
    """Sequences producing one token each in this pass."""
    context: float
    """Mean tokens of context of a decoding sequence."""
    prefill_tokens: float = 0.0
    """Prompt tokens prefilled in the same pass."""
    prompt_len: int = 1
    """Length of the prompts being prefilled (sets their causal attention span)."""
    prompt_on_one_rank: bool = False
    """The prefill tokens are one prompt, all on one attention-DP rank (TTFT); False = spread."""

    def per_rank(self, attention_dp: int) -> tuple[float, float]:
        """(decoding sequences, prefill tokens) on the busiest attention-DP rank: a share of
        the sequences but at least one while any decode, the whole prompt when on one rank.

        >>> PassLoad(decode_sequences=3, context=8).per_rank(4)
        (1.0, 0.0)
        """
        decode = max(self.decode_sequences / attention_dp, min(self.decode_sequences, 1.0))
        prefill = (
            self.prefill_tokens if self.prompt_on_one_rank else self.prefill_tokens / attention_dp
        )
        return decode, prefill


class PassTime(FrozenSpec):
    """Seconds by term; ``total_s`` is their sum."""

    linear_s: float = 0.0
    """GEMMs (weights streamed or FLOPs, whichever binds), lm_head included."""
    attention_s: float = 0.0
    """Attention kernels (KV read at decode, FLOPs at prefill)."""
    tp_comm_s: float = 0.0
    """Tensor-parallel all-reduces (attention and FFN)."""
    ep_comm_s: float = 0.0
    """Expert dispatch and combine."""
    pp_comm_s: float = 0.0
    """Sends to the next stage."""
    overhead_s: float = 0.0
    """Fixed cost of the non-GEMM kernels."""
    elementwise_s: float = 0.0
    """HBM traffic of the non-GEMM kernels (norms, residual adds, rotary, activation, MoE
    permutation) over the streaming bandwidth."""
    engine_s: float = 0.0
    """The engine's time outside the kernels: launch gaps and syncs per layer, host work per
    request (:meth:`planner.specs.engine.ServingEngineSpec.iteration_s`)."""

    @property
    def total_s(self) -> float:
        """Sum of the terms (s)."""
        return sum(self.as_dict().values())

    def as_dict(self) -> dict[str, float]:
        """Terms keyed as in ServePlan.breakdown_s."""
        return {
            "linear": self.linear_s,
            "attention": self.attention_s,
            "tp_comm": self.tp_comm_s,
            "ep_comm": self.ep_comm_s,
            "pp_comm": self.pp_comm_s,
            "overhead": self.overhead_s,
            "elementwise": self.elementwise_s,
            "engine": self.engine_s,
        }

    def scaled(self, factor: float) -> PassTime:
        """Every term times ``factor`` (pp passes per token)."""
        return PassTime.model_construct(**{f"{k}_s": v * factor for k, v in self.as_dict().items()})


PASS_TERMS: tuple[str, ...] = tuple(PassTime().as_dict())
"""The terms of a PassTime, keyed as in ServePlan.breakdown_s."""


def expected_experts_touched(num_experts: int, top_k: int, tokens: float) -> float:
    """Experts that receive at least one of ``tokens`` tokens under uniform top-k routing:
    E (1 - (1 - k/E)^tokens) (:func:`planner.cost.serving_moe.experts_touched`).

    >>> expected_experts_touched(8, 2, 1)
    2.0
    >>> round(expected_experts_touched(256, 8, 1000), 1)
    256.0
    """
    return experts_touched(num_experts, top_k, tokens)


def _stream_bytes_per_s(setup: ServeSetup) -> float:
    return setup.accelerator.decode_stream_bytes_per_s


def _gemms_time(setup: ServeSetup, gemms: list[GemmShape], weight_format: NumberFormat) -> float:
    """Dense GEMMs, each its own kernel: roofline of FLOPs and streamed bytes + t_kernel. No
    tile and wave model (:func:`planner.cost.gemm.wave_efficiency`, training's): a decode step's
    few-row GEMMs run the libraries' small-M and split-K kernels, not the large tiles it assumes
    (with it, TensorRT-LLM's held-out serving error went from 8.8% to 17.5%)."""
    acc = setup.accelerator
    peak = acc.peak_flop_per_s(setup.compute_format)
    efficiency = acc.gemm_efficiency(setup.compute_format)
    width = bytes_per_value(weight_format)
    stream = _stream_bytes_per_s(setup)
    overhead = acc.efficiency.kernel_overhead_us * US
    total = 0.0
    for g in gemms:
        total += gemm_time(
            g,
            peak_flop_per_s=peak,
            efficiency=efficiency,
            bytes_per_value=width,
            hbm_bytes_per_s=stream,
            kernel_overhead_s=overhead,
        )
    return total


def moe_time(setup: ServeSetup, tokens: float) -> float:
    """The MoE block of one layer on the busiest GPU for ``tokens`` tokens of the tp group: the
    router (a dense GEMM), shared experts (dense, split over tp) and the routed experts as two
    grouped GEMMs (up + gate, down; :mod:`planner.cost.serving_moe`). The busiest of the ep
    ranks streams the weights of its touched experts, each split over tp / ep (expert TP), and
    multiplies the token copies routed to it."""
    model, lay, acc = setup.model, setup.layout, setup.accelerator
    moe = model.moe
    assert moe is not None
    dense_fmt, expert_fmt = linear_formats(model, lay.precision)
    router = GemmShape(name="router", m=tokens, k=model.hidden_size, n=moe.num_experts, count=1)
    gemms = [router]
    if moe.num_shared_experts:
        shared = moe.num_shared_experts * moe.shared_expert_width
        gemms += ffn_gemms(model, tokens, shared / lay.tp, prefix="shared_", count=1)
    total = _gemms_time(setup, gemms, dense_fmt)
    rank = busiest_rank_experts(
        moe.num_experts, moe.top_k, tokens, ep=lay.ep, skew=setup.routing_skew
    )
    width = moe.expert_ffn_hidden_size * lay.ep / lay.tp
    flop_rate = (
        acc.peak_flop_per_s(setup.compute_format)
        * acc.gemm_efficiency(setup.compute_format)
        * acc.efficiency.expert_gemm
    )
    for g in ffn_gemms(model, rank.token_copies, width, prefix=ROUTED_EXPERT_PREFIX, count=1):
        total += grouped_gemm_time(
            flops=g.flops,
            weight_bytes=rank.experts * g.k * g.n * bytes_per_value(expert_fmt),
            activation_bytes=g.m * (g.k + g.n) * ACTIVATION_BYTES,
            flop_per_s=flop_rate,
            stream_bytes_per_s=_stream_bytes_per_s(setup),
            kernel_overhead_s=acc.efficiency.kernel_overhead_us * US,
        )
    return total


def _decode_attention_dims(model: ModelSpec) -> tuple[int, int]:
    """(score dim, value dim) a decode query multiplies per cached token: H, H; MLA in its
    absorbed form works in the latent: r_kv + r_rope, r_kv (DeepSeek FlashMLA)."""
    if model.mla is not None:
        rank = model.mla.kv_lora_rank
        return rank + model.mla.qk_rope_head_dim, rank
    return model.head_dim, model.head_dim


def attention_time(setup: ServeSetup, layer_index: int, load: PassLoad) -> float:
    """One layer's attention on one GPU: decode reads each sequence's cache (bytes = sequences
    x cached tokens x bytes per token-layer x heads per GPU / K) or is bound by its FLOPs
    2 (N / tp_attn)(H_qk + H_v) T; prefill costs its causal FLOPs; plus one kernel."""
    model, acc, lay = setup.model, setup.accelerator, setup.layout
    eff = acc.efficiency
    sequences, prefill = load.per_rank(lay.attention_dp)
    if sequences <= 0 and prefill <= 0:
        return 0.0
    span = cached_tokens(model, layer_index, math.ceil(load.context))
    heads = 1 if model.mla is not None else model.num_kv_heads
    share = kv_heads_per_gpu(model, lay.attention_tp) / heads
    kv_bytes = sequences * span * kv_bytes_per_token_per_layer(model, lay.kv_precision) * share
    qk, v = _decode_attention_dims(model)
    flop_rate = acc.peak_flop_per_s(NumberFormat.BF16) * eff.attention
    decode_flops = sequences * 2.0 * model.num_attention_heads / lay.attention_tp * (qk + v) * span
    sliding = is_sliding_layer(model, layer_index)
    per_prompt_token = attention_core_flops_per_token(model, load.prompt_len, sliding=sliding)
    prefill_flops = prefill * per_prompt_token / lay.attention_tp
    memory = kv_bytes / _stream_bytes_per_s(setup)
    return (
        max(memory, decode_flops / flop_rate)
        + prefill_flops / flop_rate
        + eff.kernel_overhead_us * US
    )


def one_shot_all_reduce_time(message_bytes: float, domain: CommDomain) -> float:
    """Small-message all-reduce of serving engines: one kernel in which every rank reads the
    n - 1 peers' S-byte buffers over NVLink and sums them, between two barriers:
    (n - 1) S / (W eta) + 2 alpha (vLLM ``csrc/custom_all_reduce.cuh`` one-stage path,
    TensorRT-LLM ``customAllReduceKernels.cu`` ONESHOT). Decode messages (tokens x D) are small,
    so this beats the ring's 2 (n - 1) latency steps; engines switch to the ring (or two-shot)
    above a size threshold, hence :func:`serving_all_reduce_time` takes the faster of the two.

    >>> d = CommDomain(size=8, bandwidth_bytes_per_s=1e9, latency_s=1e-6, efficiency=1,
    ...                tier="scale_up")
    >>> round(one_shot_all_reduce_time(1e3, d) * 1e6, 1)  # 7 kB at 1 GB/s + 2 us
    9.0
    """
    n = domain.size
    if n == 1:
        return 0.0
    return (n - 1) * message_bytes / domain.effective_bytes_per_s + 2.0 * domain.latency_s


def serving_all_reduce_time(message_bytes: float, domain: CommDomain) -> float:
    """The faster of the one-shot and the ring all-reduce inside one scale-up domain (custom
    all-reduce kernels need peer memory access); the ring across domains.

    >>> one = CommDomain(size=1, bandwidth_bytes_per_s=1, latency_s=0, efficiency=1, tier="local")
    >>> serving_all_reduce_time(1e6, one)
    0.0
    """
    ring = ring_all_reduce_time(message_bytes, domain)
    if domain.tier != "scale_up" or domain.num_domains > 1:
        return ring
    return min(ring, one_shot_all_reduce_time(message_bytes, domain))


def _comm_times(
    setup: ServeSetup, tokens_attn: float, tokens_ffn: float, *, moe_layer: bool
) -> tuple[float, float]:
    """(TP, EP) communication of one layer. The attention output is all-reduced over the
    attention-TP group. Without attention DP every rank of the tp group holds every token, so
    the FFN, dense or MoE, ends in an all-reduce over tp (each rank runs its experts on the
    tokens routed to them and the partial outputs are summed: vLLM / SGLang expert parallelism
    without DP). With attention DP the ranks hold different tokens: a dense FFN all-gathers its
    input and reduce-scatters its output over tp; a MoE layer with ep > 1 dispatches k copies of
    each local token to the experts' ranks and combines them back (all-to-all over ep, at decode
    sizes bound by the per-peer latency), plus an all-reduce over the expert-TP ranks when
    tp > ep."""
    model, lay = setup.model, setup.layout
    row = model.hidden_size * ACTIVATION_BYTES
    tp = serving_all_reduce_time(tokens_attn * row, setup.attention_comm)
    ep = 0.0
    if lay.attention_dp == 1:
        tp += serving_all_reduce_time(tokens_ffn * row, setup.tp_comm)
    elif moe_layer and model.moe is not None and lay.ep > 1:
        copies = tokens_ffn / lay.ep * model.moe.top_k
        ep = 2.0 * all_to_all_time(copies * row, setup.ep_comm)
        if lay.tp > lay.ep:
            tp += serving_all_reduce_time(tokens_ffn / lay.ep * row, setup.tp_comm)
    else:
        tp += 2.0 * all_gather_time(tokens_ffn * row, setup.tp_comm)
    return tp, ep


def elementwise_bytes(
    model: ModelSpec, layout: ServeLayout, *, tokens_attn: float, tokens_ffn: float, moe_layer: bool
) -> float:
    """HBM bytes one GPU's non-GEMM kernels of one layer move: the two fused residual + norm
    kernels on every token of the rank (replicated over tp in inference, which has no sequence
    parallelism), rotary on the rank's q and k heads, the gated activation over the FFN width
    on this GPU (the routed copies' expert width for MoE, with the permutation traffic).

    >>> from planner.cost.params import _tiny
    >>> elementwise_bytes(_tiny(), ServeLayout(), tokens_attn=1, tokens_ffn=1, moe_layer=False)
    2304.0

    (16 x 64 norm bytes + 4 x (4 + 4) x 16 rotary + 6 x 128 activation.)
    """
    d = model.hidden_size
    rotated = (model.num_attention_heads + model.num_kv_heads) * model.head_dim
    act = GATED_ACTIVATION_BYTES_PER_WIDTH if model.gated_ffn else 4.0
    attn = tokens_attn * (FUSED_NORM_BYTES_PER_HIDDEN * d)
    attn += tokens_attn * ROTARY_BYTES_PER_VALUE * rotated / layout.attention_tp
    moe = model.moe
    if moe_layer and moe is not None:
        copies = tokens_ffn * moe.top_k / layout.ep
        width = moe.expert_ffn_hidden_size * layout.ep / layout.tp
        ffn = copies * (act * width + PERMUTE_BYTES_PER_COPY_HIDDEN * d)
        if moe.num_shared_experts:
            shared = moe.num_shared_experts * moe.shared_expert_width / layout.tp
            ffn += tokens_ffn * act * shared
    else:
        ffn = tokens_ffn * act * model.ffn_hidden_size / layout.tp
    return attn + ffn


def layer_time(setup: ServeSetup, layer_index: int, load: PassLoad) -> PassTime:
    """One block of the stage on one GPU for ``load``: attention on the busiest attention-DP
    rank's tokens, the FFN on every token of the tp group (gathered)."""
    model, lay = setup.model, setup.layout
    tokens_attn = sum(load.per_rank(lay.attention_dp))
    tokens_ffn = load.decode_sequences + load.prefill_tokens
    moe_layer = model.is_moe_layer(layer_index)
    dense_fmt, _ = linear_formats(model, lay.precision)
    gemms = attention_gemms(model, tokens_attn, lay.attention_tp)
    if not moe_layer:
        gemms += ffn_gemms(model, tokens_ffn, model.ffn_hidden_size / lay.tp, prefix="", count=1)
    linear = _gemms_time(setup, gemms, dense_fmt)
    if moe_layer:
        linear += moe_time(setup, tokens_ffn)
    tp, ep = _comm_times(setup, tokens_attn, tokens_ffn, moe_layer=moe_layer)
    # built without validation: the search makes tens of thousands (floats from the model)
    return PassTime.model_construct(
        linear_s=linear,
        attention_s=attention_time(setup, layer_index, load),
        tp_comm_s=tp,
        ep_comm_s=ep,
        overhead_s=OTHER_KERNELS_PER_LAYER * setup.accelerator.efficiency.kernel_overhead_us * US,
        elementwise_s=elementwise_bytes(
            model, lay, tokens_attn=tokens_attn, tokens_ffn=tokens_ffn, moe_layer=moe_layer
        )
        / _stream_bytes_per_s(setup),
    )


def _layer_kind(model: ModelSpec, index: int) -> tuple[bool, bool]:
    moe = model.is_moe_layer(index)
    return moe, is_sliding_layer(model, index)


@lru_cache(maxsize=256)
def stage_layer_kinds(model: ModelSpec) -> tuple[tuple[bool, bool], ...]:
    """Kind (MoE?, sliding?) of every layer, in order (cached per model: frozen specs hash)."""
    return tuple(_layer_kind(model, i) for i in range(model.num_layers))


LayerKind = tuple[bool, bool]
"""A layer's kind for serving: (MoE?, sliding-window attention?)."""


@lru_cache(maxsize=256)
def stage_windows(
    model: ModelSpec, per_stage: int
) -> tuple[dict[LayerKind, int], tuple[tuple[int, dict[LayerKind, int]], ...]]:
    """The first layer of each kind, and the stages ``per_stage`` consecutive layers can be
    told apart by: for each distinct count of layers by kind a window of that many layers holds,
    the first window that holds it (its start, its counts). Every window of one count vector
    takes the same time, so the slowest stage is the slowest of these, the earliest on a tie
    (cached per model and stage size: frozen specs hash).

    >>> from planner.cost.params import _tiny
    >>> stage_windows(_tiny(), 1)
    ({(False, False): 0}, ((0, {(False, False): 1}),))
    """
    kinds = stage_layer_kinds(model)
    first_of: dict[LayerKind, int] = {}
    for i, kind in enumerate(kinds):
        first_of.setdefault(kind, i)
    seen: dict[tuple[tuple[LayerKind, int], ...], tuple[int, dict[LayerKind, int]]] = {}
    for start in range(len(kinds) - per_stage + 1):
        counts: dict[LayerKind, int] = {}
        for kind in kinds[start : start + per_stage]:
            counts[kind] = counts.get(kind, 0) + 1
        seen.setdefault(tuple(sorted(counts.items())), (start, counts))
    return first_of, tuple(seen.values())


def stage_pass_time(setup: ServeSetup, load: PassLoad) -> PassTime:
    """One pass of the fullest stage: the slowest ceil(L/pp) consecutive blocks (each layer kind,
    dense or MoE, full or sliding attention, is computed once; MoE layers after leading dense
    ones make the later stages slower), the lm_head for the sequences that emit a token (16-bit,
    vocab split over tp) and the send to the next stage."""
    model, lay = setup.model, setup.layout
    first_of, windows = stage_windows(model, layers_per_stage(model, lay.pp))
    per_kind = {kind: layer_time(setup, i, load).as_dict() for kind, i in first_of.items()}
    totals = {kind: sum(terms.values()) for kind, terms in per_kind.items()}
    _, counts = max(
        windows,
        key=lambda w: (sum(totals[kind] * n for kind, n in w[1].items()), -w[0]),
    )
    terms = dict.fromkeys(PASS_TERMS, 0.0)
    for kind, count in counts.items():
        for key, value in per_kind[kind].items():
            terms[key] += value * count
    emitting = load.decode_sequences + load.prefill_tokens / max(load.prompt_len, 1)
    head = GemmShape(
        name="lm_head", m=emitting, k=model.hidden_size, n=model.vocab_size / lay.tp, count=1
    )
    terms["linear"] += _gemms_time(setup, [head], NumberFormat.BF16)
    activations = (load.decode_sequences + load.prefill_tokens) * model.hidden_size
    terms["pp_comm"] += p2p_time(activations * ACTIVATION_BYTES, setup.pp_comm)
    terms["engine"] += engine_iteration_time(setup, load)
    return PassTime.model_construct(**{f"{k}_s": v for k, v in terms.items()})


def engine_iteration_time(setup: ServeSetup, load: PassLoad) -> float:
    """The engine's time in one pass of a stage outside its kernels (s): launch gaps and syncs
    of each of the stage's layers, and host work for each request the pass carries (decoding
    sequences and prompts being prefilled; a prompt cut into chunks counts once per chunk):
    t_engine = L_stage t_layer + (B_decode + prefill tokens / prompt length) t_request
    (:class:`planner.specs.engine.ServingEngineSpec`, fitted on the engine's validation rows).
    Zero without an engine."""
    if setup.engine is None:
        return 0.0
    requests = load.decode_sequences + load.prefill_tokens / max(load.prompt_len, 1)
    layers = layers_per_stage(setup.model, setup.layout.pp)
    return setup.engine.iteration_s(layers, requests)


def decode_token_time(setup: ServeSetup, *, concurrency: float, load: PassLoad) -> PassTime:
    """Time per output token (TPOT) of a replica decoding ``concurrency`` sequences: pp passes of
    micro-batches of concurrency / pp sequences (``load`` gives the context and the prefill
    tokens per pass). Replica throughput = concurrency / TPOT."""
    pp = setup.layout.pp
    sequences = max(concurrency / pp, min(concurrency, 1.0))
    micro = load.model_copy(update={"decode_sequences": sequences})
    return stage_pass_time(setup, micro).scaled(pp)


def ttft_time(setup: ServeSetup, *, running: PassLoad, prompt_len: int, chunk_tokens: int) -> float:
    """Time to first token of one prompt joining a replica that decodes ``running`` per pass:
    it waits for the iteration in progress to end (schedulers admit requests at iteration
    boundaries, Yu et al., "Orca", OSDI'22; a random arrival waits half an iteration on average),
    then the prompt is cut into ceil(ISL / chunk) chunks that ride (chunks + pp - 1) stage passes
    (TensorRT-LLM / vLLM chunked prefill). Queueing behind other requests is not modelled.

    TTFT grows with the running batch: each pass also streams the weights and the running KV.
    """
    chunks = math.ceil(prompt_len / chunk_tokens)
    load = running.model_copy(
        update={
            "prefill_tokens": prompt_len / chunks,
            "prompt_len": prompt_len,
            "prompt_on_one_rank": True,
        }
    )
    wait = 0.0
    if running.decode_sequences > 0:
        wait = 0.5 * stage_pass_time(setup, running).total_s
    return wait + (chunks + setup.layout.pp - 1) * stage_pass_time(setup, load).total_s


def wave_time(setup: ServeSetup, workload: ServeWorkload, batch: int) -> float:
    """One wave of ``batch`` identical requests started together: their prompts prefilled
    (chunks of max_batch_tokens per attention-DP rank, pp passes each), then output_len decode
    steps at the mean context with no prompts mixed in (s)."""
    if batch <= 0:
        return 0.0
    lay = setup.layout
    tokens = batch * workload.prompt_len
    chunks = math.ceil(tokens / (workload.max_batch_tokens * lay.attention_dp))
    prompts = PassLoad(
        decode_sequences=0,
        context=1,
        prefill_tokens=tokens / chunks,
        prompt_len=workload.prompt_len,
    )
    prefill = (chunks + lay.pp - 1) * stage_pass_time(setup, prompts).total_s
    decoding = PassLoad(
        decode_sequences=batch / lay.pp, context=workload.prompt_len + workload.output_len / 2
    )
    step = decode_token_time(setup, concurrency=batch, load=decoding).total_s
    return prefill + workload.output_len * step


def uniform_requests_throughput(
    setup: ServeSetup, workload: ServeWorkload, batch: int, num_requests: int
) -> float:
    """Output tokens/s of a replica serving ``num_requests`` identical requests issued at once
    (trtllm-bench's synthetic uniform ISL/OSL): they run in waves of ``batch`` that start and
    finish together, the last wave holding the remainder."""
    full, rest = divmod(num_requests, batch)
    total = full * wave_time(setup, workload, batch) + wave_time(setup, workload, rest)
    return num_requests * workload.output_len / total
