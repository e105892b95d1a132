"""Memory per accelerator: weights, gradients, optimizer state, activations.

Weights/gradients/optimizer follow the mixed-precision accounting of Megatron-LM's distributed
optimizer (``docs/source/api-guide/dist_optimizer.md``: bf16 params + fp32 grads = 6 bytes per
parameter, + 12 bytes of fp32 master weights and Adam moments, sharded over data-parallel ranks
by the distributed optimizer: 6 + 12/d) and ZeRO (Rajbhandari et al. 2020, arXiv 1910.02054,
section 5: stage 1 shards optimizer state, 2 adds gradients, 3 adds parameters).
Activations follow Korthikanti et al. 2022 (arXiv 2205.05198), section 4, generalised to GQA,
gated FFNs, MoE and flash attention (derivation in :func:`activation_bytes_per_layer`).
"""

from __future__ import annotations

import math
from functools import lru_cache

from planner.cost.compute import attention_head_dims
from planner.cost.params import layer_norms
from planner.specs.formats import NumberFormat, bits_per_value, bytes_per_value, element_bits
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.workload import TrainWorkload

ACTIVATION_BYTES = 2.0
"""Activations are stored in bf16 (2 bytes per value)."""
MASTER_WEIGHT_BYTES = 4.0
"""The fp32 master copy of a parameter."""
MASTER_REMAINDER_BYTES = 2.0
"""The low 16 bits of the fp32 master copy, beside a bf16 parameter that holds the high 16
(Megatron-LM OptimizerConfig ``store_param_remainders``, default True with the precision-aware
optimizer on Transformer Engine >= 2.1)."""
MOMENT_BYTES = {"fp32": 4.0, "bf16": 2.0}
"""Bytes of each Adam moment by ``TrainWorkload.optimizer_state_dtype``."""
GRAD_BYTES = {"fp32": 4.0, "bf16": 2.0}
"""Bytes per gradient by reduction dtype. Megatron-LM docs/source/api-guide/dist_optimizer.md:
bf16 params + fp32 grads = 6 + 12/d bytes per parameter; bf16 grads = 4 + 16/d (the fp32 main
gradient shard; the planner holds it only while the optimizer steps, :data:`SHARDED_MAIN_GRAD_BYTES`)."""
SHARDED_MAIN_GRAD_BYTES = {"fp32": 0.0, "bf16": 4.0}
"""fp32 copy of the gradient (shard) the optimizer step makes when gradients reduce in bf16;
held only during the step (:class:`planner.cost.sharding.ShardedState` ``step_transient``)."""
LOGIT_BYTES: dict[str, float] = {"unfused": 4.0, "native": 4.0, "te": 2.0}
"""Bytes per logit the loss keeps for its backward, by implementation
(``TrainWorkload.cross_entropy``): Megatron-LM's vocab-parallel cross entropy, plain or jit-fused,
upcasts the logits and keeps the fp32 softmax (``theoretical_memory_usage.py``: 4 s b V / t on the
last stage); Transformer Engine's fused kernel (``transformer_engine/pytorch/cross_entropy.py``
``CrossEntropyFunction``) saves its bf16 input and writes the gradient into it in place: 2 s b V / t.
"""


FP32_LOGIT_COPY_BYTES = 4.0
"""Bytes per logit a loss adds at its forward peak when the model's fp32 cast of the logits
stays alive beside the fp32 softmax it computes (``TrainWorkload.framework_buffers``
``fp32_logits``): 4 (the kept input) on top of :data:`LOGIT_BYTES` (the softmax), 8 in all.
Nanotron at c252843 (src/nanotron/models/llama.py:874-880, 909): ``cast_to_fp32`` makes the
logits fp32 and ``LlamaForTraining.forward`` (l.1006-1021) holds that tensor in a local while
the loss runs; ``_ShardedCrossEntropy.forward``
(src/nanotron/parallel/tensor_parallel/functional.py:40-85) writes ``sharded_logits -
logits_max`` into a new fp32 tensor, exponentiates and normalises it in place and saves it as
the softmax. The backward reuses the softmax in place and casts it to bf16 (6 bytes), below the
forward's 8."""
TP_GATHER_BUFFERS = 2
"""Persistent full-sequence buffers a framework keeps for tensor parallelism's all-gathers
(``TrainWorkload.framework_buffers`` ``tp_gather_buffers``): Nanotron's ``MemoryBuffer``
singleton (src/nanotron/parallel/utils.py:14-28, never freed) holds ``"allgather"`` (the
column-parallel linear's gathered input, forward and backward re-gather,
src/nanotron/parallel/tensor_parallel/functional.py:153-156, 286-288) and ``"allgather2"`` (the
row-parallel linear's gathered output gradient, l.491-493), each b s D bf16 values for the
full sequence."""


def optimizer_state_bytes_per_param(
    dtype: str, *, remainders: bool = False, master: bool = True
) -> float:
    """Bytes of optimizer state per parameter the optimizer steps: the fp32 master copy (or,
    with ``remainders``, its low 16 bits beside the bf16 parameter; none without ``master``,
    ``TrainWorkload.master_copy``) and Adam's two moments in ``dtype`` (Megatron-LM
    ``--use-precision-aware-optimizer`` with ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype``,
    arguments.py; ``--main-params-dtype fp16`` is not modelled).

    >>> optimizer_state_bytes_per_param("fp32"), optimizer_state_bytes_per_param("bf16")
    (12.0, 8.0)
    >>> optimizer_state_bytes_per_param("bf16", remainders=True)
    6.0
    >>> optimizer_state_bytes_per_param("bf16", master=False)  # torch.optim.Adam on bf16 weights
    4.0
    """
    if not master:
        return 2.0 * MOMENT_BYTES[dtype]
    copy = MASTER_REMAINDER_BYTES if remainders else MASTER_WEIGHT_BYTES
    return copy + 2.0 * MOMENT_BYTES[dtype]


def stage_layers(model: ModelSpec, pp: int, stage: int) -> range:
    """Layer indices on pipeline stage ``stage`` of ``pp`` (contiguous, as even as possible;
    the remainder goes to the middle stages, which hold neither embedding nor logits)."""
    return _stage_layers(model.num_layers, pp, stage)


@lru_cache(maxsize=4096)
def _stage_layers(num_layers: int, pp: int, stage: int) -> range:
    base, extra = divmod(num_layers, pp)
    counts = [base] * pp
    middle = list(range(1, pp - 1)) or list(range(pp))
    for i in range(extra):
        counts[middle[i % len(middle)]] += 1
    start = sum(counts[:stage])
    return range(start, start + counts[stage])


def recomputed_fraction(workload: TrainWorkload, layout: Layout, num_layers: float) -> float:
    """Share of a stage's ``num_layers`` layers that full recomputation re-runs: all of them, or
    with ``workload.recompute_num_layers`` = N (Megatron's block method) the first N of each of
    the stage's vpp chunks; 0 without full recomputation.

    >>> recomputed_fraction(TrainWorkload(recompute_num_layers=5), Layout(recompute="full"), 32)
    0.15625
    """
    if layout.recompute is not Recompute.FULL or num_layers == 0:
        return 0.0
    if workload.recompute_num_layers is None:
        return 1.0
    return min(1.0, workload.recompute_num_layers * layout.vpp / num_layers)


def weight_bytes(params: float, fmt: NumberFormat, *, low_precision_params: bool = False) -> float:
    """Bytes of weights: bf16 copy (2 B) plus, for low-precision training, the cast copy the
    GEMMs read (Transformer Engine keeps an fp8/fp4 weight cache: bytes_per_value(fmt)).
    ``low_precision_params`` (an 8-bit format only): the compute parameters are the fp8 tensors
    themselves, with no bf16 copy (Megatron-LM ``--fp8-param-gather``: "Keep the compute param
    in fp8 (do not use any other intermediate dtype)"; the fp32 master copy is the optimizer's).

    >>> weight_bytes(1e9, NumberFormat.BF16)
    2000000000.0
    >>> weight_bytes(1e9, NumberFormat.FP8)
    3000000000.0
    >>> weight_bytes(1e9, NumberFormat.FP8, low_precision_params=True)
    1000000000.0
    """
    if fmt in (NumberFormat.BF16, NumberFormat.FP16):
        return params * 2.0
    if low_precision_params and element_bits(fmt) == 8:
        return params * bytes_per_value(fmt)
    return params * (2.0 + bytes_per_value(fmt))


def attention_value_widths(model: ModelSpec) -> tuple[float, float, float]:
    """(queries, keys or values, output-projection input) values per token of one attention
    block: N H, K H each and N H (Korthikanti section 4.1); with MLA, N (H_nope + H_rope) queries,
    the up-projected keys and values N (H_nope + H_rope + H_v) / 2 each, and N H_v."""
    qk_dim, v_dim = attention_head_dims(model)
    heads = model.num_attention_heads
    if model.mla is not None:
        return heads * qk_dim, heads * (qk_dim + v_dim) / 2, heads * v_dim
    return heads * qk_dim, model.num_kv_heads * model.head_dim, heads * v_dim


def ffn_internal_values(model: ModelSpec, width: int) -> float:
    """Values per token inside one FFN of width F beyond its input: fc1 output and activation
    output, 3 F gated (gate and up, then F) and 2 F plain."""
    return 3 * width if model.gated_ffn else 2 * width


def moe_block_values(model: ModelSpec) -> tuple[float, float]:
    """(values, of which GEMM inputs) per token one MoE block stores after its input: every
    routed copy's and shared expert's FFN values (:func:`ffn_activation_values`), and their up-
    and down-projection inputs (D + F each)."""
    moe = model.moe
    if moe is None:
        return 0.0, 0.0
    d, routed, shared = model.hidden_size, moe.expert_ffn_hidden_size, moe.shared_expert_width
    values = moe.top_k * ffn_activation_values(model, routed)
    values += moe.num_shared_experts * ffn_activation_values(model, shared)
    inputs = moe.top_k * (d + routed) + moe.num_shared_experts * (d + shared)
    return values, inputs


def attention_activation_values(model: ModelSpec, seq_len: int, *, store_scores: bool) -> float:
    """Values stored per sequence by one attention block (per token x T, not sharded).

    Korthikanti section 4.1: QKV input D, Q N H, K and V K H each, output-projection input N H,
    dropout mask D/2 (1 byte) when the model uses dropout; when the score matrix is stored (no
    flash attention, no selective recompute): softmax output N T, and with dropout its mask
    N T / 2 and output N T. Flash attention keeps instead the fp32 log-sum-exp (2 N values).
    """
    q_dim, kv_dim, out_dim = attention_value_widths(model)
    per_token = model.hidden_size + q_dim + 2 * kv_dim + out_dim
    if model.dropout:
        per_token += model.hidden_size / 2
    if store_scores:
        heads_t = model.num_attention_heads * seq_len
        per_token += heads_t * (2.5 if model.dropout else 1.0)
    else:
        per_token += 2 * model.num_attention_heads
    return per_token * seq_len


def ffn_activation_values(model: ModelSpec, width: int) -> float:
    """Values stored per token by one FFN of width F.

    Plain (GELU): input D, fc1 output F, activation output F (+ dropout mask D/2) = Korthikanti's
    19 s b h / 2 bytes at F = 4D. Gated (SwiGLU, Megatron's fused kernel): input D, fc1 output
    2F (gate and up), activation output F.
    """
    values = model.hidden_size + ffn_internal_values(model, width)
    if model.dropout:
        values += model.hidden_size / 2
    return values


def layer_activation_values_per_token(model: ModelSpec, layer_index: int, seq_len: int) -> float:
    """Values per token stored by one layer with flash attention and no recompute, unsharded:
    the norm inputs (2 D; D for a parallel block's one norm; twice that with post-norms),
    attention values, FFN (or top-k routed + shared experts) values."""
    per_token = float(layer_norms(model) * model.hidden_size)
    per_token += attention_activation_values(model, seq_len, store_scores=False) / seq_len
    if model.is_moe_layer(layer_index):
        per_token += moe_block_values(model)[0]
    else:
        per_token += ffn_activation_values(model, model.ffn_hidden_size)
    return per_token


def framework_layer_values(model: ModelSpec, buffers: tuple[str, ...], *, moe_layer: bool) -> float:
    """Values per token one layer keeps beyond :func:`layer_activation_values_per_token`'s set
    for the ``buffers`` (``TrainWorkload.framework_buffers``) that are saved activations,
    unsharded (tensor parallelism splits heads and FFN width, so both shard over tp):

    - ``mha_qkv_copy``: 2 x (KV width) when the model has as many KV heads as heads (no MLA).
      Nanotron at c252843, src/nanotron/models/llama.py:469-475: that path makes one
      contiguous [3, b, s, h, d] copy of the QKV output and takes q, k and v as views of it;
      l.654-658 concatenate k and v into a second contiguous [b, s, 2, h, d] copy for
      flash-attn's rotary, which rotates q in place (flash_attn/layers/rotary.py
      ``RotaryEmbedding.forward``: ``inplace=True``), and flash-attn saves q. So the 3-wide
      storage stays whole beside the 2-wide copy: q + 2 KV + 2 KV, against the q + 2 KV the
      set counts. Its GQA path (l.449-468) copies q, k and v apart: nothing more.
    - ``glu_act``: F on a gated dense layer. ``GLUActivation.forward`` (llama.py:199-201) runs
      ``act(gate) * up`` unfused: SiLU saves its input (a view of the 2F gate/up output), the
      product saves the SiLU output (F) and up, and the down projection its input (F): 4F,
      against the fused kernel's 3F. MoE layers are not counted (not read).

    >>> from planner.cost.params import _tiny
    >>> framework_layer_values(_tiny(), ("mha_qkv_copy", "glu_act"), moe_layer=False)  # 2x64 + 128
    256.0
    >>> framework_layer_values(_tiny(), (), moe_layer=False)
    0.0
    """
    values = 0.0
    mha = model.mla is None and model.num_kv_heads == model.num_attention_heads
    if "mha_qkv_copy" in buffers and mha:
        values += 2.0 * attention_value_widths(model)[1]
    if "glu_act" in buffers and model.gated_ffn and not moe_layer:
        values += model.ffn_hidden_size
    return values


def tp_gather_buffer_bytes(
    model: ModelSpec, layout: Layout, seq_len: int, buffers: tuple[str, ...]
) -> float:
    """Bytes of the persistent tensor-parallel all-gather buffers one GPU holds for a
    micro-batch (``tp_gather_buffers`` in ``buffers``, tp > 1): :data:`TP_GATHER_BUFFERS` x
    b s D bf16 values (full sequence: gathered, not sharded over tp). Held once, not per
    micro-batch in flight: each buffer is reused by every layer and micro-batch.

    >>> from planner.cost.params import _tiny
    >>> buffers = ("tp_gather_buffers",)
    >>> tp_gather_buffer_bytes(_tiny(), Layout(tp=2, mbs=2), 10, buffers)  # 2 x 2 B x 2 x 10 x 64
    5120.0
    >>> tp_gather_buffer_bytes(_tiny(), Layout(tp=1, mbs=2), 10, buffers)
    0.0
    """
    if "tp_gather_buffers" not in buffers or layout.tp == 1:
        return 0.0
    tokens = layout.mbs * seq_len / layout.cp
    return TP_GATHER_BUFFERS * ACTIVATION_BYTES * tokens * model.hidden_size


def layer_gemm_input_values_per_token(model: ModelSpec, layer_index: int) -> float:
    """Values per token among the stored activations that are inputs of linear layers (QKV and
    output projections, FFN up and down, per routed copy). Low-precision recipes store these in
    the GEMM's format (Transformer Engine saves the quantised input for the weight gradient)."""
    values = float(model.hidden_size + attention_value_widths(model)[2])
    if model.is_moe_layer(layer_index):
        values += moe_block_values(model)[1]
    else:
        values += model.hidden_size + model.ffn_hidden_size
    return values


def selective_recompute_saved_values(
    model: ModelSpec, modules: tuple[str, ...], *, moe_layer: bool
) -> tuple[float, float]:
    """(values, of which GEMM inputs) per token that selective recomputation of ``modules``
    drops from one layer's stored activations (unsharded; Megatron-LM ``--recompute-modules``
    checkpoints the module's input, which the layer stores anyway, and discards its internals).

    - ``layernorm``: the norm outputs: the attention input D, and the FFN input D on a dense
      layer (routed experts keep their own permuted copies of it).
    - ``moe_act``: each routed copy's activation output, the down-projection input (k F).
    - ``mla_up_proj``: MLA's up-projected queries, keys and values (rebuilt from the latents).
    - ``mlp``: a dense layer's FFN internals (2F or 3F gated; not the expert layers).
    - ``shared_experts``: the shared experts' internals.
    - ``moe``: the whole MoE block after its input: every routed copy's and shared expert's
      values (the dispatch runs again), which includes what ``moe_act`` and ``shared_experts``
      would drop.
    - ``core_attn``: nothing with fused attention (the score path is never stored).

    >>> from planner.cost.params import _tiny
    >>> selective_recompute_saved_values(_tiny(), ("layernorm",), moe_layer=False)
    (128.0, 128.0)
    """
    d = model.hidden_size
    values = inputs = 0.0
    moe = model.moe
    is_moe = moe_layer and moe is not None
    if "layernorm" in modules:  # a parallel block has one norm output, shared
        outputs = d if is_moe or model.parallel_block else 2.0 * d
        values += outputs
        inputs += outputs
    whole_moe = "moe" in modules and is_moe
    if whole_moe:
        block_values, block_inputs = moe_block_values(model)
        values += block_values
        inputs += block_inputs
    if "moe_act" in modules and is_moe and not whole_moe:
        values += moe.top_k * moe.expert_ffn_hidden_size  # type: ignore[union-attr]
        inputs += moe.top_k * moe.expert_ffn_hidden_size  # type: ignore[union-attr]
    if "mla_up_proj" in modules and model.mla is not None:
        q_dim, kv_dim, _ = attention_value_widths(model)
        values += q_dim + 2.0 * kv_dim
    if "mlp" in modules and not is_moe:
        width = model.ffn_hidden_size
        values += ffn_internal_values(model, width)
        inputs += width
    if "shared_experts" in modules and is_moe and not whole_moe and moe.num_shared_experts:  # type: ignore[union-attr]
        width = moe.shared_expert_width  # type: ignore[union-attr]
        values += moe.num_shared_experts * ffn_internal_values(model, width)  # type: ignore[union-attr]
        inputs += moe.num_shared_experts * width  # type: ignore[union-attr]
    return values, inputs


def saved_tensor_widths(model: ModelSpec, *, moe_layer: bool) -> dict[str, float]:
    """Values per token of each tensor a save-list recomputation policy can keep
    (:data:`planner.specs.workload.SavedTensor`), unsharded: the query, key and value projections'
    outputs (:func:`attention_value_widths`), the attention core's output (N H_v, with its fp32
    log-sum-exp, 2 N values, which the backward needs), the output projection's (D), and the
    FFN's gate and up projections' outputs (F each; a plain FFN has no gate) and down
    projection's (D); in an MoE layer each routed copy's and shared expert's.

    >>> from planner.cost.params import _tiny
    >>> saved_tensor_widths(_tiny(), moe_layer=False)["mlp_up"], _tiny().ffn_hidden_size
    (128.0, 128)
    """
    q, kv, context = attention_value_widths(model)
    d = model.hidden_size
    moe = model.moe
    if moe_layer and moe is not None:
        width = moe.top_k * moe.expert_ffn_hidden_size
        width += moe.num_shared_experts * moe.shared_expert_width
        down = d * (moe.top_k + moe.num_shared_experts)
    else:
        width, down = model.ffn_hidden_size, d
    return {
        "q": q,
        "k": kv,
        "v": kv,
        "context": context + 2.0 * model.num_attention_heads,
        "out": float(d),
        "mlp_gate": float(width) if model.gated_ffn else 0.0,
        "mlp_up": float(width),
        "mlp_down": float(down),
    }


def save_list_values(model: ModelSpec, saved: tuple[str, ...], *, moe_layer: bool) -> float:
    """Values per token one layer stores under a save-list recomputation policy: its input (D)
    and the ``saved`` tensors (:func:`saved_tensor_widths`); everything else is recomputed from
    them in the backward (JAX ``checkpoint_policies.save_only_these_names``).

    >>> from planner.cost.params import _tiny
    >>> save_list_values(_tiny(), (), moe_layer=False)  # the layer input only, as full recompute
    64.0
    """
    widths = saved_tensor_widths(model, moe_layer=moe_layer)
    return float(model.hidden_size + sum(widths[name] for name in saved))


def replicated_values_without_sp(model: ModelSpec) -> float:
    """Values per token per layer that tensor parallelism without sequence parallelism keeps
    whole on every rank: the two norm inputs, the two norm outputs (the inputs of the column-
    parallel QKV and FFN-up GEMMs) and, with dropout, the two 1-byte dropout masks; Korthikanti
    et al. 2022 eq. 2: the 10 s b h bytes of sbh(10 + 24/t + 5as/(ht)).

    >>> from planner.cost.params import _tiny
    >>> replicated_values_without_sp(_tiny())  # 4 x 64
    256.0
    """
    norms = layer_norms(model)  # a post-norm's input and output are whole on every rank too
    return 2.0 * norms * model.hidden_size + (model.hidden_size if model.dropout else 0.0)


def activation_bytes_per_token(values: float, gemm_inputs: float, fmt: NumberFormat) -> float:
    """Bytes of ``values`` stored activations of which ``gemm_inputs`` are kept in ``fmt``.

    >>> activation_bytes_per_token(10, 4, NumberFormat.BF16)
    20.0
    >>> activation_bytes_per_token(10, 4, NumberFormat.FP8)
    16.0
    """
    if fmt in (NumberFormat.BF16, NumberFormat.FP16):
        return ACTIVATION_BYTES * values
    return ACTIVATION_BYTES * values - (ACTIVATION_BYTES - bytes_per_value(fmt)) * gemm_inputs


def score_activation_values_per_token(model: ModelSpec, seq_len: int) -> float:
    """Values per token of the stored score path when attention is not fused: softmax output
    N T, and with dropout its 1-byte mask (N T / 2 values) and output N T (Korthikanti et al.
    2022, section 4.1: 5 a s^2 b bytes per layer with dropout)."""
    return model.num_attention_heads * seq_len * (2.5 if model.dropout else 1.0)


def activation_bytes_per_layer(
    model: ModelSpec, layout: Layout, seq_len: int, *, layer_index: int
) -> float:
    """Activation bytes one GPU stores for one layer and one micro-batch.

    Korthikanti et al. 2022 (arXiv 2205.05198) eq. 2 with tensor + sequence parallelism:
    s b h (34 + 5 a s / h) / t for GPT (dropout, MHA, F = 4h); the terms here reduce to it.
    Values per token (:func:`layer_activation_values_per_token`) x 2 bytes x tokens, divided by
    tp (sequence parallelism shards every term) and cp (each rank holds T / cp tokens). The
    planner assumes fused (flash) attention, so the s^2 score terms are never stored (the same
    saving selective recompute gives); full recompute keeps only the layer input, 2 s b h / t.
    """
    tokens = layout.mbs * seq_len / layout.cp
    if layout.recompute is Recompute.FULL:
        return ACTIVATION_BYTES * tokens * model.hidden_size / layout.tp
    values = layer_activation_values_per_token(model, layer_index, seq_len)
    return ACTIVATION_BYTES * tokens * values / layout.tp


def logits_bytes(
    model: ModelSpec,
    layout: Layout,
    seq_len: int,
    cross_entropy: str = "unfused",
    *,
    fp32_copy: bool = False,
) -> float:
    """Logits of one micro-batch the loss keeps on the last stage: b s V / t values
    (vocab-parallel) at :data:`LOGIT_BYTES` of the ``cross_entropy`` implementation (fp32, 4 s b
    V / t; Transformer Engine's fused loss 2 s b V / t), plus :data:`FP32_LOGIT_COPY_BYTES` per
    logit when the fp32 input stays alive beside the softmax (``fp32_copy``).

    >>> from planner.cost.params import _tiny
    >>> logits_bytes(_tiny(), Layout(tp=2), 10), logits_bytes(_tiny(), Layout(tp=2), 10, "te")
    (20000.0, 10000.0)
    >>> logits_bytes(_tiny(), Layout(tp=2), 10, fp32_copy=True)  # 8 B x 10 x 1000 / 2
    40000.0
    """
    values = layout.mbs * seq_len / layout.cp * model.vocab_size / layout.tp
    per_logit = LOGIT_BYTES[cross_entropy] + (FP32_LOGIT_COPY_BYTES if fp32_copy else 0.0)
    return per_logit * values


def model_weight_bytes(
    total_params: float, fmt: NumberFormat, *, with_scales: bool = True
) -> float:
    """Bytes of a model's weights stored in ``fmt``: params x bits / 8 (+ block scales).

    DESIGN.md section 4: 70B dense is 140 GB in BF16, 70 GB in FP8, 35 GB in FP4 (element bits).

    >>> model_weight_bytes(70e9, NumberFormat.FP8) / 1e9
    70.0
    >>> model_weight_bytes(70e9, NumberFormat.NVFP4, with_scales=False) / 1e9
    35.0
    """
    bits = bits_per_value(fmt) if with_scales else element_bits(fmt)
    return total_params * bits / 8.0


def fewest_accelerators_for_weights(
    weight_bytes: float, usable_bytes_per_accelerator: float
) -> int:
    """Fewest accelerators whose usable memory holds the weights alone: ceil(W / M).

    >>> fewest_accelerators_for_weights(141e9, 75e9)
    2
    """
    return max(1, math.ceil(weight_bytes / usable_bytes_per_accelerator))
