"""Serving cost terms: weight and KV-cache bytes per GPU, KV capacity and concurrency.

Symbols (legend in :mod:`planner.cost`): L layers, D hidden, N query heads, K kv heads, H head
dim, r_kv / r_rope the MLA latent and rotary dims, b bytes per value, T tokens of context.
Sources: the KV formulas and sharding rules of ``shared/reference/serving-formulas.md`` 6a-6b
(Pope et al. 2022, arXiv 2211.05102; the JAX scaling book "inference"; DeepSeek FlashMLA README;
TensorRT-LLM blog 3 on attention DP). Time terms (prefill, decode) are in
:mod:`planner.cost.serving_time`.
"""

from __future__ import annotations

import math

from planner.cost.compute import is_sliding_layer
from planner.cost.params import (
    attention_params_per_layer,
    embedding_params,
    layer_dense_and_expert_params,
    layer_norms,
    norm_params,
)
from planner.cost.serving_moe import experts_touched
from planner.specs.formats import NumberFormat, bits_per_value, bytes_per_value
from planner.specs.model import ModelSpec
from planner.specs.result import ServeLayout

HIGH_PRECISION_BYTES = 2.0
"""Bytes per value of the parts quantisation recipes leave in 16-bit: embeddings, the output
projection (lm_head) and norms (NVIDIA TensorRT-Model-Optimizer ``modelopt/torch/quantization/
config.py`` disables the ``*lm_head*`` quantizer by default; vLLM/llm-compressor FP8 recipes
``ignore=["lm_head"]``; embeddings are lookups, not GEMMs)."""
MLA_FP8_SCALE_BLOCK = 128
"""FlashMLA's FP8 KV format keeps one FP32 scale per 128 latent values and the rotary part in
BF16: 512 FP8 + 16 B of scales + 128 B of BF16 RoPE = 656 B per token and layer (DeepSeek
FlashMLA README, V3.2)."""


def kv_values_per_token_per_layer(model: ModelSpec) -> int:
    """Values one token adds to one layer's cache.

    MHA/GQA/MQA: 2 K H (a key and a value vector per KV head). MLA: r_kv + r_rope (the joint
    latent and the shared rotary key, DeepSeek-V2 arXiv 2405.04434 section 2.1.2).

    >>> from planner.cost.params import _tiny
    >>> kv_values_per_token_per_layer(_tiny())  # 2 * 4 heads * 16
    128
    """
    if model.mla is not None:
        return model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
    return 2 * model.num_kv_heads * model.head_dim


def kv_bytes_per_token_per_layer(model: ModelSpec, kv_format: NumberFormat) -> float:
    """Bytes one token adds to one layer's cache: values x b (block scales included).

    MLA below 16 bits follows FlashMLA's layout (see :data:`MLA_FP8_SCALE_BLOCK`): the latent in
    ``kv_format`` plus one FP32 scale per 128 values (8-bit formats), the rotary part in BF16.

    >>> from planner.cost.params import _tiny
    >>> kv_bytes_per_token_per_layer(_tiny(), NumberFormat.FP8)
    128.0
    """
    if model.mla is None:
        return kv_values_per_token_per_layer(model) * bytes_per_value(kv_format)
    latent, rope = model.mla.kv_lora_rank, model.mla.qk_rope_head_dim
    if bits_per_value(kv_format) >= 16:
        return (latent + rope) * bytes_per_value(kv_format)
    scales = 4.0 * latent / MLA_FP8_SCALE_BLOCK if bits_per_value(kv_format) == 8 else 0.0
    return latent * bytes_per_value(kv_format) + scales + rope * HIGH_PRECISION_BYTES


def cached_tokens(model: ModelSpec, layer_index: int, context: int) -> int:
    """Tokens a layer keeps for a sequence of ``context`` tokens: T, or min(T, window) on a
    sliding-window layer (gpt-oss, Mistral).

    >>> from planner.cost.params import _tiny
    >>> cached_tokens(_tiny(), 0, 4096)
    4096
    """
    if model.sliding_window is not None and is_sliding_layer(model, layer_index):
        return min(context, model.sliding_window)
    return context


def kv_bytes_per_sequence(model: ModelSpec, kv_format: NumberFormat, context: int) -> float:
    """KV-cache bytes of one sequence of ``context`` tokens over the whole model:
    sum over layers of (bytes per token and layer) x cached tokens.

    >>> from planner.cost.params import _tiny
    >>> kv_bytes_per_sequence(_tiny(), NumberFormat.BF16, 10)  # 2 layers * 256 B * 10
    5120.0
    """
    per_layer = kv_bytes_per_token_per_layer(model, kv_format)
    return sum(per_layer * cached_tokens(model, i, context) for i in range(model.num_layers))


def kv_bytes_per_token(model: ModelSpec, kv_format: NumberFormat, context: int) -> float:
    """KV-cache bytes per token of context, whole model (sliding layers averaged over T).

    Llama 3.1 70B in FP8: 2 x 80 x 8 x 128 x 1 B = 163,840 B = 160 KiB (DESIGN.md section 4).

    >>> from planner.cost.params import _tiny
    >>> kv_bytes_per_token(_tiny(), NumberFormat.FP8, 100)
    256.0
    """
    return kv_bytes_per_sequence(model, kv_format, context) / context


def kv_heads_per_gpu(model: ModelSpec, attention_tp: int) -> float:
    """KV heads one GPU stores of a sequence it serves: K / tp, but at least one whole head
    (heads are replicated when tp > K); MLA's single latent is replicated on every rank.

    >>> from planner.cost.params import _tiny
    >>> kv_heads_per_gpu(_tiny(), 8)  # 4 KV heads over 8 ranks: one head each
    1.0
    """
    if model.mla is not None:
        return 1.0
    return max(model.num_kv_heads / attention_tp, 1.0)


def kv_replication(model: ModelSpec, attention_tp: int) -> float:
    """Copies of each KV value across the attention-TP group: tp x heads per GPU / K (MLA: tp).
    TensorRT-LLM blog 3: for MLA the duplication factor equals the TP size.

    >>> from planner.cost.params import _tiny
    >>> kv_replication(_tiny(), 8), kv_replication(_tiny(), 2)
    (2.0, 1.0)
    """
    heads = 1 if model.mla is not None else model.num_kv_heads
    return attention_tp * kv_heads_per_gpu(model, attention_tp) / heads


def heaviest_window(values: list[float], width: int) -> int:
    """Start of the ``width`` consecutive values with the largest sum (the first on a tie): the
    fullest pipeline stage when layers differ (MoE layers after leading dense ones).

    >>> heaviest_window([1.0, 1.0, 3.0, 3.0, 3.0], 2)
    2
    """
    return max(range(len(values) - width + 1), key=lambda i: (sum(values[i : i + width]), -i))


def layers_per_stage(model: ModelSpec, pp: int) -> int:
    """Layers on the fullest pipeline stage: ceil(L / pp).

    >>> from planner.cost.params import _tiny
    >>> layers_per_stage(_tiny(), 2)
    1
    """
    return math.ceil(model.num_layers / pp)


def kv_bytes_per_sequence_per_gpu(
    model: ModelSpec, kv_format: NumberFormat, context: int, layout: ServeLayout
) -> float:
    """KV bytes one GPU of the fullest stage stores for one sequence it serves:
    sequence bytes x (heads per GPU / K) x (ceil(L/pp) / L).

    >>> from planner.cost.params import _tiny
    >>> kv_bytes_per_sequence_per_gpu(_tiny(), NumberFormat.BF16, 10, ServeLayout(tp=2))
    2560.0
    """
    heads = 1 if model.mla is not None else model.num_kv_heads
    share = kv_heads_per_gpu(model, layout.attention_tp) / heads
    stage = layers_per_stage(model, layout.pp) / model.num_layers
    return kv_bytes_per_sequence(model, kv_format, context) * share * stage


def linear_formats(
    model: ModelSpec, weight_format: NumberFormat
) -> tuple[NumberFormat, NumberFormat]:
    """(non-expert, routed-expert) formats of the linear weights served in ``weight_format``:
    both ``weight_format``, except when it is the checkpoint's own format and the checkpoint
    quantises only its experts (gpt-oss MXFP4: attention, router and dense layers stay BF16).

    >>> from planner.cost.params import _tiny
    >>> linear_formats(_tiny(), NumberFormat.FP8)
    (<NumberFormat.FP8: 'fp8'>, <NumberFormat.FP8: 'fp8'>)
    """
    quant = model.quantization
    if quant is not None and quant.experts_only and quant.weights == weight_format:
        return NumberFormat.BF16, weight_format
    return weight_format, weight_format


def replicated_attention_params(model: ModelSpec) -> int:
    """Attention parameters every attention-TP rank holds whole: MLA's latent down projections
    D (r_q + r_kv + r_rope) and their norms (DeepSeek-V2 arXiv 2405.04434 eqs. 37-47; engines
    split only the up and output projections over heads); 0 for MHA/GQA.

    >>> from planner.cost.params import _tiny
    >>> replicated_attention_params(_tiny())
    0
    """
    mla = model.mla
    if mla is None:
        return 0
    ranks = (mla.q_lora_rank or 0) + mla.kv_lora_rank
    return model.hidden_size * (ranks + mla.qk_rope_head_dim) + ranks


def split_attention_params(model: ModelSpec, attention_tp: int) -> float:
    """Attention parameters on one GPU: the replicated part plus the rest / attention-TP.

    >>> from planner.cost.params import _tiny
    >>> split_attention_params(_tiny(), 2) * 2 == attention_params_per_layer(_tiny())
    True
    """
    whole = replicated_attention_params(model)
    return whole + (attention_params_per_layer(model) - whole) / attention_tp


def _layer_weight_bytes(
    model: ModelSpec, layer_index: int, layout: ServeLayout, weight_format: NumberFormat
) -> float:
    """One block's weights on one GPU: attention / attention-TP, dense FFN and shared experts /
    tp, routed experts / tp (ep ranks x tp/ep expert-TP), norms replicated."""
    dense, routed = layer_dense_and_expert_params(model, layer_index)
    attention = attention_params_per_layer(model)
    norms = layer_norms(model) * norm_params(model)
    ffn_dense = dense - attention - norms
    dense_fmt, expert_fmt = linear_formats(model, weight_format)
    attention_here = split_attention_params(model, layout.attention_tp)
    linear = (attention_here + ffn_dense / layout.tp) * bytes_per_value(dense_fmt)
    linear += routed / layout.tp * bytes_per_value(expert_fmt)
    return linear + norms * HIGH_PRECISION_BYTES


def weight_bytes(model: ModelSpec, weight_format: NumberFormat) -> float:
    """Stored weights of the whole model: linear layers in ``weight_format`` (block scales
    included), embeddings, lm_head and norms in 16-bit (:data:`HIGH_PRECISION_BYTES`).

    >>> from planner.cost.params import _tiny
    >>> weight_bytes(_tiny(), NumberFormat.BF16)  # 2 B x (2 blocks x 41,088 + 128,000 + 64)
    420480.0
    """
    single = ServeLayout()
    blocks = sum(
        _layer_weight_bytes(model, i, single, weight_format) for i in range(model.num_layers)
    )
    return blocks + (embedding_params(model) + norm_params(model)) * HIGH_PRECISION_BYTES


def weight_bytes_per_gpu(
    model: ModelSpec, weight_format: NumberFormat, layout: ServeLayout
) -> float:
    """Weights on one GPU of the fullest stage: the heaviest ceil(L/pp) consecutive blocks
    (MoE layers after leading dense ones weigh more) plus the vocabulary (embedding and
    lm_head, vocab-parallel over tp; both on one GPU when pp = 1, one of them on the first and
    last stage otherwise).

    >>> from planner.cost.params import _tiny
    >>> weight_bytes_per_gpu(_tiny(), NumberFormat.BF16, ServeLayout(tp=1))
    420480.0
    """
    per_stage = layers_per_stage(model, layout.pp)
    sizes = [_layer_weight_bytes(model, i, layout, weight_format) for i in range(model.num_layers)]
    start = heaviest_window(sizes, per_stage)
    blocks = sum(sizes[start : start + per_stage])
    vocab = embedding_params(model) / layout.tp
    if layout.pp > 1 and not model.tied_embeddings:
        vocab /= 2
    return blocks + (vocab + norm_params(model)) * HIGH_PRECISION_BYTES


def workspace_bytes_per_gpu(model: ModelSpec, max_batch_tokens: int, layout: ServeLayout) -> float:
    """Activation workspace of one forward step of ``max_batch_tokens`` tokens in 16-bit: the
    residual stream and normed input (2D), the QKV output ((N + 2K) H / attention-TP) and the
    FFN intermediate (up + gate 2F and the activation F, / tp) live at once. Engines size this
    by a dry run at max_num_tokens (TensorRT-LLM, vLLM ``profile_run``).

    >>> from planner.cost.params import _tiny
    >>> workspace_bytes_per_gpu(_tiny(), 10, ServeLayout())  # 10 * 2 * (128 + 192 + 384)
    14080.0
    """
    d = model.hidden_size
    qkv = (model.num_attention_heads + 2 * model.num_kv_heads) * model.head_dim
    width = model.ffn_hidden_size
    if model.moe is not None:
        width = max(width, model.moe.top_k * model.moe.expert_ffn_hidden_size)
    per_token = 2 * d + qkv / layout.attention_tp + 3 * width / layout.tp
    return max_batch_tokens * HIGH_PRECISION_BYTES * per_token


def free_kv_bytes(
    capacity_bytes: float, weights_bytes: float, workspace_bytes: float, fraction: float
) -> float:
    """KV-cache pool of one GPU: (capacity - weights - workspace) x fraction, never negative.
    ``capacity_bytes`` is HBM minus the runtime reserve; ``fraction`` is TensorRT-LLM's
    kv_cache_free_gpu_mem_fraction.

    DESIGN.md section 4 (B200, 180 GB - 70 GB FP8 weights - 10 GB reserve):

    >>> free_kv_bytes(170e9, 70e9, 0.0, 1.0)
    100000000000.0
    """
    return max(0.0, capacity_bytes - weights_bytes - workspace_bytes) * fraction


def kv_cache_tokens(free_bytes: float, bytes_per_token: float) -> int:
    """Tokens of context a KV pool holds: floor(free / bytes per token).

    >>> kv_cache_tokens(100e9, 163840)  # DESIGN.md section 4: ~610,000 tokens
    610351
    """
    return int(free_bytes // bytes_per_token) if bytes_per_token > 0 else 0


def max_concurrent_sequences(tokens: int, context: int) -> int:
    """Sequences of full context a pool of ``tokens`` holds (worst case, every sequence at full
    length; average occupancy admits ~1.3-1.5x more, serving-formulas.md 6b).

    >>> max_concurrent_sequences(610351, 32768)  # DESIGN.md section 4: ~18 at 32k
    18
    """
    return tokens // context


def decode_ceiling_tokens_per_s(bandwidth_bytes_per_s: float, weight_bytes_read: float) -> float:
    """Batch-1 decode ceiling: bandwidth / weight bytes read per token (no KV, no overheads).

    DESIGN.md section 4: 70B FP8 on one H100 (3.35 TB/s) ~48 tok/s.

    >>> round(decode_ceiling_tokens_per_s(3.35e12, 69.5e9))
    48
    """
    return bandwidth_bytes_per_s / weight_bytes_read if weight_bytes_read > 0 else 0.0


def weight_bytes_read_per_token(
    model: ModelSpec, weight_format: NumberFormat, layout: ServeLayout
) -> float:
    """Weight bytes one GPU streams per decode step at batch 1, summed over the pipeline's
    stages: every block and the lm_head (V D), but not the input embedding (a row lookup); a MoE
    layer reads only the k routed experts a single token uses.

    >>> from planner.cost.params import _tiny
    >>> weight_bytes_read_per_token(_tiny(), NumberFormat.BF16, ServeLayout())  # 2 (82,176 + 64,000 + 64)
    292480.0
    """
    return weight_bytes_read_per_step(model, weight_format, layout, tokens=1.0)


def weight_bytes_read_per_step(
    model: ModelSpec,
    weight_format: NumberFormat,
    layout: ServeLayout,
    *,
    tokens: float,
    skew: float = 0.0,
) -> float:
    """Weight bytes one GPU streams in a forward step of ``tokens`` tokens, summed over the
    pipeline's stages: every block (a MoE layer only the experts the step touches, uniform or
    skewed routing, :func:`planner.cost.serving_moe.experts_touched`, an even 1/ep share of
    them) and the lm_head (16-bit, V D / tp); not the input embedding (a row lookup). The
    numerator of the decode HBM floor.

    >>> from planner.cost.params import _tiny
    >>> weight_bytes_read_per_step(_tiny(), NumberFormat.BF16, ServeLayout(), tokens=1.0)
    292480.0
    """
    dense_fmt, expert_fmt = linear_formats(model, weight_format)
    moe = model.moe
    touched = experts_touched(moe.num_experts, moe.top_k, tokens, skew) if moe else 0.0
    attention = attention_params_per_layer(model)
    norms = layer_norms(model) * norm_params(model)
    total = 0.0
    for i in range(model.num_layers):
        dense, routed = layer_dense_and_expert_params(model, i)
        if routed and moe is not None:
            routed *= touched / moe.num_experts
        ffn_dense = dense - attention - norms
        attention_here = split_attention_params(model, layout.attention_tp)
        linear = (attention_here + ffn_dense / layout.tp) * bytes_per_value(dense_fmt)
        total += linear + routed / layout.tp * bytes_per_value(expert_fmt)
        total += norms * HIGH_PRECISION_BYTES
    lm_head = model.vocab_size * model.hidden_size / layout.tp
    return total + (lm_head + norm_params(model)) * HIGH_PRECISION_BYTES


def decode_hbm_floor_s(
    model: ModelSpec,
    layout: ServeLayout,
    *,
    sequences: float,
    context: float,
    hbm_bytes_per_s: float,
    skew: float = 0.0,
) -> float:
    """The HBM floor of one decode step of ``sequences`` sequences at mean ``context``: (weight
    bytes the step touches + KV bytes it reads) per GPU over the spec-sheet bandwidth, no
    efficiency, no fixed costs, no communication. A decode step can never be faster.

    KV read per GPU = sequences per attention-DP rank x the per-GPU KV bytes of a sequence at
    ``context`` tokens (sliding layers read only their window). Tiny model, one sequence of 10
    tokens: (292,480 B of weights + 10 x 2 layers x 256 B of KV) / 1 GB/s.

    >>> from planner.cost.params import _tiny
    >>> decode_hbm_floor_s(_tiny(), ServeLayout(), sequences=1, context=10, hbm_bytes_per_s=1e9)
    0.0002976
    """
    weights = weight_bytes_read_per_step(
        model, layout.precision, layout, tokens=sequences, skew=skew
    )
    per_rank = max(sequences / layout.attention_dp, min(sequences, 1.0))
    kv = (
        per_rank
        * kv_bytes_per_sequence_per_gpu(model, layout.kv_precision, max(1, round(context)), layout)
        * layout.pp
    )
    return (weights + kv) / hbm_bytes_per_s
