"""FLOPs of a transformer and the time the tensor cores need for them.

A matmul of an (a x b) input by a (b x c) weight costs 2abc FLOPs (one multiply, one add), so a
token passing through a linear layer with P weights costs 2P forward FLOPs; backward costs twice
the forward (input and weight gradients): training = 3x forward = "6 N per token"
(Kaplan et al. 2020, arXiv 2001.08361, section 2.1; Narayanan et al. SC'21, appendix).
"""

from __future__ import annotations

import math
from functools import lru_cache

from planner.cost.params import layer_params
from planner.specs.framework import CpImpl
from planner.specs.model import ModelSpec


def mean_attended_positions(seq_len: int, window: int | None, *, chunked: bool = False) -> float:
    """Average keys a query attends to under a causal mask, optionally with a sliding window or,
    ``chunked``, within fixed chunks of ``window`` tokens (Llama 4's chunked attention: a query
    sees the earlier tokens of its own chunk only).

    Full causal: (T + 1) / 2. Window w < T: (w(w + 1)/2 + (T - w) w) / T. Chunks of c, with
    T = k c + r: (k c(c + 1)/2 + r(r + 1)/2) / T.

    >>> mean_attended_positions(4, None)
    2.5
    >>> mean_attended_positions(4, 2)
    1.75
    >>> mean_attended_positions(4, 2, chunked=True)  # chunks [1, 2] [1, 2]
    1.5
    """
    if window is None or window >= seq_len:
        return (seq_len + 1) / 2
    if chunked:
        chunks, rest = divmod(seq_len, window)
        return (chunks * window * (window + 1) / 2 + rest * (rest + 1) / 2) / seq_len
    return (window * (window + 1) / 2 + (seq_len - window) * window) / seq_len


def attention_head_dims(model: ModelSpec) -> tuple[int, int]:
    """(query/key, value) head dims: MLA's own (nope + rope, v_head_dim), else head_dim twice."""
    if model.mla is not None:
        return model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim, model.mla.v_head_dim
    return model.head_dim, model.head_dim


def attention_exp_bound_factors(
    model: ModelSpec, flops_per_exp: float | None
) -> tuple[float, float]:
    """(forward, backward) slow-down of flash attention over its tensor-core time when the
    softmax exponentials, one per score in each pass, outlast the matmuls on the special-function
    units: ``max(1, R / f)`` with R the accelerator's dense bf16 tensor FLOPs per exp2 result
    (``flops_per_exp``; 256 on Hopper, 512 on B200, whose tensor cores doubled while its 16
    MUFU.EX2 per clock per SM did not) and f the matmul FLOPs per score: 2 (H_qk + H_v) forward
    (Q K^T, P V), 6 H_qk + 4 H_v backward (the recomputed scores, dV, dP, dQ, dK).
    Source: Zadouri, Hoehnerbach, Shah, Liu, Thakkar and Dao, "FlashAttention-4"
    (Dao-AILab/flash-attention, assets/fa4_paper.pdf): on B200 the forward pass is bound by the
    exponential units. None models no bound (accelerators without the figure).

    >>> from planner.catalog import load_model
    >>> attention_exp_bound_factors(load_model("gpt-oss-120b"), 512.0)  # head_dim 64
    (2.0, 1.0)
    >>> attention_exp_bound_factors(load_model("gpt-oss-120b"), 256.0)
    (1.0, 1.0)
    """
    if flops_per_exp is None:
        return 1.0, 1.0
    qk, v = attention_head_dims(model)
    return max(1.0, flops_per_exp / (2.0 * (qk + v))), max(
        1.0, flops_per_exp / (6.0 * qk + 4.0 * v)
    )


def ring_attention_steps(cp: int) -> float:
    """Ring steps of one context-parallel rank, each weighted by the share of the rank's queries
    (or keys) it computes: (3 cp + 1) / 4 for causal attention over Megatron's load-balanced
    chunks (each rank holds chunks r and 2 cp - 1 - r). Step 0 is the rank's diagonal block (all
    its queries); of the other cp - 1 steps, r attend all the queries to the first half of the
    arriving keys and cp - 1 - r only the second half of the queries to all of them
    (Transformer Engine ``AttnFuncWithCPAndKVP2P.forward``, transformer_engine/pytorch/attention/
    dot_product_attention/context_parallel.py; the backward mirrors it). Averaged over ranks:
    1 + (cp - 1) / 2 + (cp - 1) / 4. 1 without context parallelism.

    >>> ring_attention_steps(1), ring_attention_steps(2), ring_attention_steps(8)
    (1.0, 1.75, 6.25)
    """
    return (3.0 * cp + 1.0) / 4.0


def ring_attention_merge_bytes_per_token(
    model: ModelSpec, cp: int, impl: CpImpl = "te"
) -> tuple[float, float]:
    """(forward, backward) HBM bytes per token per layer that ring attention (context
    parallelism run as ring steps) moves beyond one flash-attention call, outside the attention
    kernels' own reads of Q, K and V. s = :func:`ring_attention_steps`; per output value N H_v,
    query value N H_qk, key and value K (H_qk + H_v).

    ``te``, Transformer Engine (``AttnFuncWithCPAndKVP2P``): each step's kernel writes a partial
    bf16 output and its log-sum-exp, and fused kernels merge them
    (``flash_attn_fwd_out_correction``: the output kept in fp32, rescaled by exp(lse_step - lse)
    and accumulated; ``out.to(bf16)`` at the end). Forward per output value: the partial writes
    2 (s - 1), the first step's merge 6 (read 2, write 4), the others' 10 (s - 1) (read 2, fp32
    read-modify-write 8), the cast 6: 12 s. Backward: every step's kernel rereads O and dO (4
    per query value) and writes partial dQ (2), added into dQ (``dq.add_``: 6), so 12 (s - 1) per
    query value; partial dK and dV are written (2) and added into the gradients that travel the
    ring (6), 8 (s - 1) per key and value.

    ``pytorch``, PyTorch's ``context_parallel`` (torch.distributed.tensor.experimental
    ``_templated_ring_attention``, ``_SDPAMerger``, ``_partial_update``), in eager ops with fp32
    accumulators: forward, each step's output cast to fp32 (6 s), the merge ``out -
    sigmoid(lse_step - lse) * (out - out_step)`` as three ops (12 + 8 + 12 for every step after
    the first), a full copy (``torch.cat``, 8) on each half-query step ((cp - 1) / 2 of them on
    average), the partial writes 2 (s - 1) and the final cast 6: 40 s - 28 + 4 (cp - 1).
    Backward: per query value the rereads and partial writes 6 (s - 1), ``grad_query +=`` on
    an fp32 accumulator (10 a step), the half-step copies 4 (cp - 1), zeros and final cast 10;
    per key and value the partial writes 2 (s - 1), the fp32 additions 10 s, the fp32 buffer
    concatenated for the ring every step (8 cp), the half-step copies 4 (cp - 1), zeros and cast
    10.

    The rereads of O and dO are counted per query value (N H_qk), not per output value (N H_v):
    the same where the head dims are equal; under MLA (H_qk 192, H_v 128) 4 N (H_qk - H_v)
    bytes per token and step too many. The per-(token, head) log-sum-exp merges (fp32, 1 / head_dim of these)
    are left out. 0 without context parallelism.

    >>> from planner.cost.params import _tiny
    >>> ring_attention_merge_bytes_per_token(_tiny(), 1)
    (0.0, 0.0)
    >>> ring_attention_merge_bytes_per_token(_tiny(), 2)  # 4 heads (4 KV) of 16: 12 x 1.75 x 64
    (1344.0, 1344.0)
    >>> ring_attention_merge_bytes_per_token(_tiny(), 2, "pytorch")  # forward (70 - 28 + 4) x 64
    (2944.0, 8576.0)
    """
    if cp <= 1:
        return 0.0, 0.0
    steps = ring_attention_steps(cp)
    qk, v = attention_head_dims(model)
    out, query = model.num_attention_heads * v, model.num_attention_heads * qk
    key_value = model.num_kv_heads * (qk + v)
    if impl == "pytorch":
        halves = 4.0 * (cp - 1)
        forward = (40.0 * steps - 28.0 + halves) * out
        backward = (6.0 * (steps - 1.0) + 10.0 * steps + halves + 10.0) * query + (
            2.0 * (steps - 1.0) + 10.0 * steps + 8.0 * cp + halves + 10.0
        ) * key_value
        return forward, backward
    return 12.0 * steps * out, (steps - 1.0) * (12.0 * query + 8.0 * key_value)


def ring_attention_extra_launches(cp: int, impl: CpImpl = "te") -> tuple[float, float]:
    """(forward, backward) kernels per layer that ring attention launches beyond one
    flash-attention call. ``te`` (Transformer Engine ``AttnFuncWithCPAndKVP2P``): per further
    step the attention kernel and the merge (forward: the log-sum-exp and output corrections;
    backward: the dQ and dK/dV additions), plus the forward's first merge and final cast.
    ``pytorch`` (eager ``_templated_ring_attention``): per further step forward the kernel, the
    cast and five merge ops, backward the kernel, three additions, the concatenation and a copy;
    plus the casts and zero-fills around the loop.

    >>> ring_attention_extra_launches(1), ring_attention_extra_launches(4)
    ((0.0, 0.0), (11.0, 9.0))
    >>> ring_attention_extra_launches(4, "pytorch")
    (23.0, 22.0)
    """
    if cp <= 1:
        return 0.0, 0.0
    if impl == "pytorch":
        return 7.0 * (cp - 1) + 2.0, 6.0 * (cp - 1) + 4.0
    return 3.0 * (cp - 1) + 2.0, 3.0 * (cp - 1)


def flash_backward_flop_ratio(model: ModelSpec) -> float:
    """Tensor-core FLOPs of flash attention's backward over its forward: (6 H_qk + 4 H_v) /
    (2 H_qk + 2 H_v) per score. The forward runs two matmuls (S = Q K^T, O = P V); the backward
    recomputes S (flash attention stores no scores) and runs dV = P^T dO, dP = dO V^T,
    dQ = dS K and dK = dS^T Q: five (Dao, "FlashAttention-2", arXiv 2307.08691, section 3.1.2
    and Algorithm 2; the flash-attention benchmarks count the backward as 2.5x the forward).
    The model-FLOP convention (backward = 2x forward) leaves the recomputed S out.

    >>> from planner.catalog import load_model
    >>> flash_backward_flop_ratio(load_model("70B"))  # H_qk = H_v = 128
    2.5
    >>> round(flash_backward_flop_ratio(load_model("671B")), 3)  # MLA: H_qk 192, H_v 128
    2.6
    """
    qk, v = attention_head_dims(model)
    return (6.0 * qk + 4.0 * v) / (2.0 * qk + 2.0 * v)


def attention_core_flops_per_token(model: ModelSpec, seq_len: int, *, sliding: bool) -> float:
    """Forward FLOPs per token of the score (Q K^T) and context (A V) matmuls of one layer.

    2 N H_qk t_avg + 2 N H_v t_avg with t_avg the mean attended positions (causal masking halves
    the full-square 2 N H T of Megatron's count; flash attention skips the masked blocks).
    MLA uses its own head dims (H_qk = nope + rope, H_v = v_head_dim).

    >>> from planner.cost.params import _tiny
    >>> attention_core_flops_per_token(_tiny(), 3, sliding=False)  # 2*4*(16+16)*2
    512.0
    """
    qk_dim, v_dim = attention_head_dims(model)
    window = model.sliding_window if sliding else None
    positions = mean_attended_positions(seq_len, window, chunked=model.local_attention == "chunked")
    return 2.0 * model.num_attention_heads * (qk_dim + v_dim) * positions


def is_sliding_layer(model: ModelSpec, layer_index: int) -> bool:
    """Whether layer ``layer_index`` is one of the ``num_sliding_window_layers`` local ones
    (sliding window or chunk): every layer but the global ones of :func:`global_layers`.

    >>> from planner.cost.params import _tiny
    >>> m = _tiny().model_copy(update={"num_layers": 12, "sliding_window": 8,
    ...                                "num_sliding_window_layers": 10})
    >>> [i for i in range(12) if not is_sliding_layer(m, i)]  # Gemma 3's five local to one
    [5, 11]
    """
    local = model.num_sliding_window_layers
    if not local:
        return False
    return layer_index not in global_layers(model.num_layers, model.num_layers - local)


@lru_cache(maxsize=256)
def global_layers(num_layers: int, num_global: int) -> frozenset[int]:
    """The full-attention layers among local ones: the last of every round(L / G) layers, as
    gpt-oss and Gemma 2 (every other layer, the odd ones global), Gemma 3 (five local to one)
    and Llama 4 (three chunked to one) place them; where rounding leaves fewer than G such
    layers, G spread evenly (floor((j + 1) L / G) - 1).

    >>> sorted(global_layers(36, 18))[:3], sorted(global_layers(26, 4)), len(global_layers(10, 6))
    ([1, 3, 5], [5, 11, 17, 23], 6)
    """
    if num_global <= 0:
        return frozenset()
    stride = max(1, round(num_layers / num_global))
    picks = [i for i in range(num_layers) if (i + 1) % stride == 0][:num_global]
    if len(picks) < num_global:
        picks = [math.floor((j + 1) * num_layers / num_global) - 1 for j in range(num_global)]
    return frozenset(picks)


def linear_flops_per_token(model: ModelSpec, layer_index: int) -> float:
    """Forward FLOPs per token of the linear layers of one block: 2 x its active weights.

    >>> from planner.cost.params import _tiny
    >>> linear_flops_per_token(_tiny(), 0)  # 2 * (4 D^2 + 3 D F + 2 D)
    82176.0
    """
    return 2.0 * layer_params(model, layer_index, active=True)


def logits_flops_per_token(model: ModelSpec) -> float:
    """Forward FLOPs per token of the output projection: 2 V D.

    >>> from planner.cost.params import _tiny
    >>> logits_flops_per_token(_tiny())
    128000.0
    """
    return 2.0 * model.vocab_size * model.hidden_size


CROSS_ENTROPY_BYTES_PER_LOGIT: dict[str, tuple[float, float]] = {
    "unfused": (42.0, 18.0),
    "native": (30.0, 10.0),
    "te": (2.0, 4.0),
}
"""(forward, backward) HBM bytes per logit (per token per vocabulary entry on this GPU) of the
loss, by implementation (Megatron-LM ``megatron/core/tensor_parallel/cross_entropy.py`` and
``fusions/fused_cross_entropy.py``, counted pass by pass; bf16 logits of 2 bytes, fp32 copies of
4; every Megatron path transposes the [s, b, V] logits to [b, s, V] and back, 4 bytes each way).
- ``unfused`` (``VocabParallelCrossEntropy``): ``.float()`` 2 + 4, max 4, subtract in place
  4 + 4, exp in place 4 + 4, sum 4, divide in place 4 + 4, transpose 4 = 42; backward: scale the
  saved softmax in place 4 + 4, cast to bf16 4 + 2, transpose 4 = 18.
- ``native`` (``--cross-entropy-loss-fusion``, the same steps in jit-fused groups): cast + max
  2 + 4, subtract + exp 4 + 4, sum 4, divide 4 + 4, transpose 4 = 30; backward: one fused
  kernel 4 + 2, transpose 4 = 10.
- ``te`` (``--cross-entropy-fusion-impl te``: one online-softmax kernel on the bf16 logits):
  read 2 forward; read 2 and write the bf16 gradient 2 backward."""


def cross_entropy_time(
    tokens: float, vocab_per_gpu: float, impl: str, hbm_bytes_per_s: float
) -> tuple[float, float]:
    """(forward, backward) seconds of the loss over ``tokens`` tokens and ``vocab_per_gpu``
    vocabulary entries (V / tp): memory-bound, bytes per logit x logits / bandwidth
    (:data:`CROSS_ENTROPY_BYTES_PER_LOGIT`).

    >>> cross_entropy_time(1000, 1000, "te", 1e9)
    (0.002, 0.004)
    """
    forward, backward = CROSS_ENTROPY_BYTES_PER_LOGIT[impl]
    logits = tokens * vocab_per_gpu
    return forward * logits / hbm_bytes_per_s, backward * logits / hbm_bytes_per_s


@lru_cache(maxsize=64)
def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Training model FLOPs per token (forward + backward, no recompute): 3 x forward of every
    block (linear + causal attention) and the logits. This is the MFU numerator."""
    forward = logits_flops_per_token(model)
    for i in range(model.num_layers):
        forward += linear_flops_per_token(model, i)
        forward += attention_core_flops_per_token(
            model, seq_len, sliding=is_sliding_layer(model, i)
        )
    return 3.0 * forward


def matmul_time(flops: float, *, peak_flop_per_s: float, efficiency: float) -> float:
    """Time of compute-bound matmuls: FLOPs / (peak x eta).

    >>> matmul_time(1e12, peak_flop_per_s=1e15, efficiency=0.5)
    0.002
    """
    return flops / (peak_flop_per_s * efficiency)


def roofline_time(
    flops: float, num_bytes: float, *, peak_flop_per_s: float, bytes_per_s: float
) -> float:
    """Roofline: max(FLOPs / peak, bytes / bandwidth) (Williams et al., CACM 2009).

    >>> roofline_time(2e9, 1e9, peak_flop_per_s=1e12, bytes_per_s=1e12)
    0.002
    """
    return max(flops / peak_flop_per_s, num_bytes / bytes_per_s)


def matmul_flops_and_bytes(b: int, k: int, n: int, bytes_per_value: float) -> tuple[float, float]:
    """FLOPs and HBM bytes of (b x k) @ (k x n): 2bkn and bpv (bk + kn + bn).

    >>> matmul_flops_and_bytes(1, 8192, 8192, 2)[0] == 2 * 8192**2
    True
    """
    return 2.0 * b * k * n, bytes_per_value * (b * k + k * n + b * n)
