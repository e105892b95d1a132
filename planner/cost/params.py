"""Parameter counts computed from the architecture (never typed in).

Symbols (legend in :mod:`planner.cost`): D hidden size, L layers, N query heads, K kv heads,
H head dim, F dense FFN width, E routed experts, k top-k, V vocab.

A linear map from a to b holds a*b weights (+ b biases when it has a bias). Counts follow the
Hugging Face reference implementations of each architecture (LlamaForCausalLM,
MixtralForCausalLM, DeepseekV3ForCausalLM, GptOssForCausalLM, Qwen3MoeForCausalLM, GPT2LMHeadModel).
"""

from __future__ import annotations

from planner.specs.model import ModelSpec


def norm_params(model: ModelSpec) -> int:
    """Parameters of one normalisation layer: D for RMSNorm, 2D (scale + bias) for LayerNorm.

    >>> from planner.cost.params import _tiny
    >>> norm_params(_tiny())
    64
    """
    return model.hidden_size * (2 if model.norm == "layernorm" else 1)


def norms_per_layer(model: ModelSpec) -> int:
    """Normalisation layers of one block: two (before attention and before the FFN), or one
    shared by both in a parallel block (``ModelSpec.parallel_block``).

    >>> from planner.cost.params import _tiny
    >>> norms_per_layer(_tiny()), norms_per_layer(_tiny().model_copy(update={"parallel_block": True}))
    (2, 1)
    """
    return 1 if model.parallel_block else 2


def layer_norms(model: ModelSpec) -> int:
    """Normalisation layers of one block, counting each weight vector and each pass:
    :func:`norms_per_layer`, twice that with post-norms (``ModelSpec.post_norms``: Gemma 2 and 3
    normalise each sub-block's input and its output).

    >>> from planner.cost.params import _tiny
    >>> layer_norms(_tiny()), layer_norms(_tiny().model_copy(update={"post_norms": True}))
    (2, 4)
    """
    return norms_per_layer(model) * (2 if model.post_norms else 1)


def attention_params_per_layer(model: ModelSpec) -> int:
    """Weights of one attention block (projections, biases, q/k norms, sinks; not the pre-norm).

    MHA/GQA/MQA: q D*N*H, k and v D*K*H each, out N*H*D.
    MLA (DeepSeek-V2 arXiv 2405.04434 eqs. 37-47): q down D*r_q (+ norm r_q) and up
    r_q*N*(H_nope+H_rope) (or D*N*(H_nope+H_rope) without a q latent); kv down
    D*(r_kv+H_rope) (+ norm r_kv) and up r_kv*N*(H_nope+H_v); out N*H_v*D.

    >>> from planner.cost.params import _tiny
    >>> attention_params_per_layer(_tiny())  # 4 heads x 16 = 64 = D: 4 D^2
    16384
    """
    d, n = model.hidden_size, model.num_attention_heads
    if model.mla is not None:
        m = model.mla
        qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = d * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * n * qk_head
        else:
            q = d * n * qk_head
        kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        kv += m.kv_lora_rank * n * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + n * m.v_head_dim * d
    q_dim = n * model.head_dim
    kv_dim = model.num_kv_heads * model.head_dim
    count = d * q_dim + 2 * d * kv_dim + q_dim * d
    if model.attention_bias:
        count += q_dim + 2 * kv_dim
    if model.attention_output_bias:
        count += d
    if model.qk_norm:
        count += 2 * model.head_dim
    if model.attention_sinks:
        count += n
    return count


def ffn_params(model: ModelSpec, width: int) -> int:
    """Weights of one FFN (dense layer or one expert) of intermediate width ``width``.

    Gated (SwiGLU/GeGLU): gate, up D*F and down F*D = 3DF; plain (GELU, ReLU^2): 2DF.
    Biases: gated 2F + D, plain F + D.

    >>> from planner.cost.params import _tiny
    >>> ffn_params(_tiny(), 128)  # 3 * 64 * 128
    24576
    """
    d = model.hidden_size
    matrices = 3 if model.gated_ffn else 2
    count = matrices * d * width
    if model.mlp_bias:
        count += (2 * width if model.gated_ffn else width) + d
    return count


def moe_layer_params(model: ModelSpec, *, active: bool) -> int:
    """Weights of one MoE FFN: router D*E (+E bias values,
    :attr:`~planner.specs.model.MoESpec.router_bias_params`), routed experts (all, or top-k when
    ``active``), shared experts.

    >>> from planner.cost.params import _tiny
    >>> moe_layer_params(_tiny(), active=False)
    0
    """
    moe = model.moe
    if moe is None:
        return 0
    router = model.hidden_size * moe.num_experts + moe.router_bias_params
    routed = (moe.top_k if active else moe.num_experts) * ffn_params(
        model, moe.expert_ffn_hidden_size
    )
    shared_width = moe.shared_expert_width
    shared = moe.num_shared_experts * ffn_params(model, shared_width)
    return router + routed + shared


def layer_dense_and_expert_params(model: ModelSpec, layer_index: int) -> tuple[int, int]:
    """(dense, routed-expert) weights of one block: dense parts are split over tp, routed experts
    over ep x etp. The router and shared experts count as dense.

    >>> from planner.cost.params import _tiny
    >>> layer_dense_and_expert_params(_tiny(), 0)
    (41088, 0)
    """
    dense = attention_params_per_layer(model) + layer_norms(model) * norm_params(model)
    moe = model.moe
    if moe is None or not model.is_moe_layer(layer_index):
        return dense + ffn_params(model, model.ffn_hidden_size), 0
    router = model.hidden_size * moe.num_experts + moe.router_bias_params
    shared_width = moe.shared_expert_width
    dense += router + moe.num_shared_experts * ffn_params(model, shared_width)
    return dense, moe.num_experts * ffn_params(model, moe.expert_ffn_hidden_size)


def embedding_params(model: ModelSpec) -> int:
    """Input embedding V*D, learned positions max_context*D, and the output projection V*D
    unless tied.

    >>> from planner.cost.params import _tiny
    >>> embedding_params(_tiny())  # 2 * 1000 * 64
    128000
    """
    count = model.vocab_size * model.hidden_size
    if not model.tied_embeddings:
        count += model.vocab_size * model.hidden_size
    if model.position_embedding == "learned":
        count += model.max_context * model.hidden_size
    return count


def layer_params(model: ModelSpec, layer_index: int, *, active: bool = False) -> int:
    """Weights of transformer block ``layer_index`` (0-based): attention, its norms, FFN or MoE."""
    count = attention_params_per_layer(model) + layer_norms(model) * norm_params(model)
    if model.is_moe_layer(layer_index):
        return count + moe_layer_params(model, active=active)
    return count + ffn_params(model, model.ffn_hidden_size)


def total_params(model: ModelSpec) -> int:
    """All parameters: embeddings, every block, the final norm."""
    blocks = sum(layer_params(model, i) for i in _layer_kinds(model))
    return embedding_params(model) + blocks + norm_params(model)


def active_params(model: ModelSpec) -> int:
    """Parameters a token passes through (top-k routed experts only); equals total for dense."""
    blocks = sum(layer_params(model, i, active=True) for i in _layer_kinds(model))
    return embedding_params(model) + blocks + norm_params(model)


def _layer_kinds(model: ModelSpec) -> list[int]:
    """Layer indices, one per layer (kept as a list so sums read as 'over the layers')."""
    return list(range(model.num_layers))


def _tiny() -> ModelSpec:
    """A tiny dense model for doctests: D 64, 4 heads of 16, F 128, V 1000, 2 layers."""
    return ModelSpec(
        name="tiny",
        source="doctest",
        hidden_size=64,
        num_layers=2,
        num_attention_heads=4,
        num_kv_heads=4,
        head_dim=16,
        ffn_hidden_size=128,
        ffn_activation="swiglu",
        vocab_size=1000,
        max_context=2048,
    )
