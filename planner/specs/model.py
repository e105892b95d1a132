"""Model architecture spec: dense and MoE transformers, MHA/GQA/MQA/MLA attention."""

from __future__ import annotations

import weakref
from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat
from planner.specs.text import HubId, Label, Name, Text

FfnActivation = Literal["swiglu", "geglu", "gelu", "relu2", "relu", "swiglu_oai"]
GATED_ACTIVATIONS: frozenset[str] = frozenset({"swiglu", "geglu", "swiglu_oai"})
CLAMPED_ACTIVATIONS: frozenset[str] = frozenset({"swiglu_oai"})
"""Gated activations that clamp their inputs first: gpt-oss's SwiGLU clips the gate half from
above and the linear half on both sides at ``swiglu_limit`` (7.0) before
``quick_gelu(gate) * (linear + 1)`` (Hugging Face config.json, model card arXiv 2508.10925).
Megatron-LM runs the clamps unfused (:func:`planner.cost.gemm.unfused_kernel_bytes_per_token`)."""


class MLASpec(FrozenSpec):
    """Multi-head latent attention (DeepSeek-V2/V3, arXiv 2405.04434 section 2.1)."""

    q_lora_rank: NonNegativeInt
    """Rank of the query down-projection; 0 means queries are projected directly."""
    kv_lora_rank: PositiveInt
    """Rank of the joint key/value latent (what the KV cache stores per token and layer)."""
    qk_rope_head_dim: PositiveInt
    """Per-head dimension of the decoupled rotary key/query part (shared key across heads)."""
    qk_nope_head_dim: PositiveInt
    """Per-head dimension of the non-rotary key/query part."""
    v_head_dim: PositiveInt
    """Per-head value dimension."""


class MoESpec(FrozenSpec):
    """Mixture-of-experts feed-forward layers."""

    num_experts: PositiveInt
    """Routed experts per MoE layer."""
    top_k: PositiveInt
    """Routed experts each token is sent to."""
    expert_ffn_hidden_size: PositiveInt
    """Intermediate width of one routed expert."""
    num_shared_experts: NonNegativeInt = 0
    """Always-active shared experts per MoE layer (DeepSeek); 0 = none."""
    shared_expert_ffn_hidden_size: NonNegativeInt = 0
    """Intermediate width of one shared expert; 0 = same as a routed expert."""
    first_dense_layers: NonNegativeInt = 0
    """Leading layers that use a dense FFN instead of MoE (DeepSeek-V3: 3)."""
    layer_step: PositiveInt = 1
    """After the leading dense layers, every ``layer_step``-th layer is MoE and the others are
    dense: layer i is MoE when (i + 1) is a multiple of it (Hugging Face Llama 4's
    ``interleave_moe_layer_step``, Qwen2/3-MoE's ``decoder_sparse_step``: Llama 4 Maverick
    alternates, 2); 1 = every layer."""
    router_bias: bool = False
    """The router's gate projection has its own bias: E values added to the gate's logits before
    the score function, so they move both which experts are chosen and their weights (gpt-oss's
    ``router.bias``, Hugging Face GptOssTopKRouter). Not the aux-loss-free selection bias
    (:attr:`router_expert_bias`), whose E values a MoE layer counts apart."""
    router_score: Literal["softmax", "sigmoid"] = "softmax"
    """The gate's score function: ``softmax`` over the experts (Mixtral, Qwen3, DeepSeek-V2,
    gpt-oss) or a per-expert ``sigmoid`` (DeepSeek-V3, Kimi K2, GLM-4.5, MiniMax-M2, Llama 4;
    arXiv 2412.19437 section 2.1.2 eq. 15). Hugging Face ``scoring_func`` in the DeepSeek
    configs; Megatron-LM ``--moe-router-score-function``."""
    router_expert_bias: bool = False
    """Auxiliary-loss-free load balancing: a per-expert bias b_i added to the scores only to pick
    the top-k experts, the gating weights coming from the unbiased scores (DeepSeek-V3, arXiv
    2412.19437 section 2.1.2 eq. 16; Wang et al. 2024, arXiv 2408.15664). Hugging Face
    ``topk_method: noaux_tc`` and the checkpoint's ``e_score_correction_bias`` (E values per
    MoE layer, counted as :attr:`router_bias` is); Megatron-LM
    ``--moe-router-enable-expert-bias``."""
    router_topk_norm: bool = True
    """The chosen experts' weights are renormalised to sum to one: softmax over the top-k logits
    (Mixtral, gpt-oss), or the top-k of the scores divided by their sum (Hugging Face
    ``norm_topk_prob`` true: Qwen3-MoE's released configs, DeepSeek-V3, GLM-4.5). False: the
    top-k scores weigh the experts as they are (``norm_topk_prob`` false: DeepSeek-V2, Qwen1.5-MoE,
    OLMoE); Megatron-LM ``--moe-router-pre-softmax`` for a softmax router."""
    router_topk_scale: PositiveFloat = 1.0
    """Factor on the routed experts' gating weights (DeepSeek-V3 2.5, Kimi K2 2.827, DeepSeek-V2
    16): Hugging Face ``routed_scaling_factor``; Megatron-LM
    ``--moe-router-topk-scaling-factor``. 1 = unscaled."""
    router_num_groups: PositiveInt = 1
    """Group-limited routing: the experts form this many equal groups of consecutive experts
    (Hugging Face ``n_group``, Megatron-LM ``moe_router_num_groups``); 1 = no groups."""
    router_group_topk: PositiveInt | None = None
    """Groups a token's experts are chosen from (``topk_group``, ``moe_router_group_topk``:
    DeepSeek-V3 4 of 8, DeepSeek-V2 3 of 8; the top-k experts then come from those groups
    only); None = every group."""

    @property
    def shared_expert_width(self) -> int:
        """Intermediate width of one shared expert (the routed width when not given)."""
        return self.shared_expert_ffn_hidden_size or self.expert_ffn_hidden_size

    @property
    def router_bias_params(self) -> int:
        """Bias values of one MoE layer's router: E for a gate bias (:attr:`router_bias`), E for
        an aux-loss-free selection bias (:attr:`router_expert_bias`); no published router has
        both."""
        return self.num_experts * (int(self.router_bias) + int(self.router_expert_bias))

    @property
    def limits_groups(self) -> bool:
        """Whether routing draws a token's experts from fewer groups than there are."""
        topk = self.router_group_topk
        return topk is not None and topk < self.router_num_groups

    @model_validator(mode="after")
    def _top_k_le_experts(self) -> MoESpec:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds num_experts ({self.num_experts})")
        if self.num_experts % self.router_num_groups:
            raise ValueError(
                f"router_num_groups ({self.router_num_groups}) does not divide num_experts "
                f"({self.num_experts})"
            )
        topk = self.router_group_topk
        if topk is not None and topk > self.router_num_groups:
            raise ValueError(
                f"router_group_topk ({topk}) exceeds router_num_groups ({self.router_num_groups})"
            )
        if topk is not None and topk * self.num_experts // self.router_num_groups < self.top_k:
            raise ValueError(
                f"router_group_topk ({topk}) groups of {self.num_experts // self.router_num_groups}"
                f" experts hold fewer than top_k ({self.top_k})"
            )
        return self


class CheckpointQuantization(FrozenSpec):
    """How a published checkpoint stores its weights (Hugging Face ``quantization_config``):
    what a serving deployment loads unless told otherwise."""

    weights: NumberFormat
    """Format of the quantised linear weights (``fp8`` for DeepSeek-V3's block-scaled E4M3,
    ``mxfp4`` for gpt-oss's experts)."""
    kv_cache: NumberFormat | None = None
    """KV-cache format the checkpoint carries scales for (compressed-tensors
    ``kv_cache_scheme``, ModelOpt ``kv_cache_quant_algo``); None = not stated."""
    experts_only: bool = False
    """Only the routed experts are quantised; attention, router, shared and dense FFN stay
    16-bit (gpt-oss ``modules_to_not_convert``: self_attn, router, embeddings, lm_head)."""
    source: Text = ""
    """Where the quantisation comes from (the checkpoint's config.json)."""


class RopeScaling(FrozenSpec):
    """How the rotary frequencies are stretched past the context the model was pre-trained on
    (Hugging Face ``rope_scaling``). It changes no FLOP or byte the planner counts (YaRN's
    attention factor aside: :attr:`ModelSpec.rope_attention_factor`); the exports pass it on so
    that the framework builds the same model."""

    kind: Literal["llama3", "yarn", "linear", "longrope"]
    """``llama3``: Llama 3.1's per-band frequency scaling (Meta, Llama 3 herd paper, and
    ``_compute_llama3_parameters`` in transformers); ``yarn``: YaRN (Peng et al. 2023, arXiv
    2309.00071); ``linear``: position interpolation (Chen et al. 2023, arXiv 2306.15595);
    ``longrope``: LongRoPE's searched per-dimension rescale factors (Ding et al. 2024, arXiv
    2402.13753; Phi-3 and Phi-3.5 long-context models), whose factor lists are not kept: they
    change no count, and no training framework the exports write takes them."""
    factor: PositiveFloat = 1.0
    """Context extension s (Llama 3.1: 8; gpt-oss: 32; DeepSeek-V3: 40; 1 when not given)."""
    original_context: PositiveInt | None = None
    """Pre-training context the scaling starts from (``original_max_position_embeddings``);
    None when the config does not give it (linear)."""
    low_freq_factor: PositiveFloat | None = None
    """llama3 only: wavelengths longer than original_context / low_freq_factor are scaled by
    the full factor."""
    high_freq_factor: PositiveFloat | None = None
    """llama3 only: wavelengths shorter than original_context / high_freq_factor are kept."""
    beta_fast: PositiveFloat | None = None
    """yarn only: the ramp's fast boundary (rotations); None = the framework default (32)."""
    beta_slow: PositiveFloat | None = None
    """yarn only: the ramp's slow boundary (rotations); None = the framework default (1)."""
    mscale: float | None = None
    """yarn only (DeepSeek): the attention factor's coefficient; None = not given."""
    mscale_all_dim: float | None = None
    """yarn only (DeepSeek): the coefficient it is divided by; None = not given."""
    truncate: bool | None = None
    """yarn only: round the correction range to whole dimensions (Hugging Face ``truncate``,
    default true; gpt-oss: false); None = not given."""


class PublishedCounts(FrozenSpec):
    """Published parameter counts, used only to test the computed ones."""

    total_params_B: PositiveFloat
    """Total parameters as published (billions)."""
    active_params_B: PositiveFloat | None = None
    """Parameters active per token (MoE), as published (billions)."""
    source: Text
    """Where the published counts come from."""


SIZE_LIMITS: dict[str, int] = {
    "hidden_size": 2**20,
    "num_layers": 2**14,
    "num_attention_heads": 2**14,
    "num_kv_heads": 2**14,
    "head_dim": 2**14,
    "ffn_hidden_size": 2**24,
    "vocab_size": 2**24,
    "max_context": 2**30,
    "sliding_window": 2**30,
    "moe.num_experts": 2**16,
    "moe.top_k": 2**16,
    "moe.expert_ffn_hidden_size": 2**24,
    "moe.num_shared_experts": 2**10,
    "moe.shared_expert_ffn_hidden_size": 2**24,
    "moe.layer_step": 2**14,
    "mla.q_lora_rank": 2**20,
    "mla.kv_lora_rank": 2**20,
    "mla.qk_rope_head_dim": 2**14,
    "mla.qk_nope_head_dim": 2**14,
    "mla.v_head_dim": 2**14,
}
"""Largest value of each size the planner accepts: 100x beyond any published model, and small
enough that the cost model's float arithmetic stays finite."""


_HASHES: dict[int, int] = {}
"""Hash of each live ModelSpec by id (see ModelSpec.__hash__)."""


class ModelSpec(FrozenSpec):
    """A decoder-only transformer. Parameter counts are computed, never typed in."""

    def __hash__(self) -> int:
        """The hash of the field values, computed once per instance: the cost model's caches look
        a model up hundreds of thousands of times in one search, and a nested frozen model
        hashes all its fields every time. The entry goes when the instance does."""
        key = id(self)
        found = _HASHES.get(key)
        if found is None:
            found = hash(tuple(self.__dict__[name] for name in type(self).model_fields))
            _HASHES[key] = found
            weakref.finalize(self, _HASHES.pop, key, None)
        return found

    name: Name
    """Catalog name (``llama3.1-70b``)."""
    family: Label = ""
    """Model family (llama, mixtral, deepseek_v3, gpt_oss, qwen3_moe, gpt3, nemotron)."""
    source: Text
    """Paper or Hugging Face config the architecture comes from."""
    hub_id: HubId | None = None
    """Hugging Face hub id (``meta-llama/Llama-3.1-8B``) of the checkpoint whose configuration
    the architecture reproduces, when there is one; ``--model`` accepts it for this catalog
    model."""
    hidden_size: PositiveInt
    """Model width D."""
    num_layers: PositiveInt
    """Transformer blocks L."""
    num_attention_heads: PositiveInt
    """Query heads N."""
    num_kv_heads: PositiveInt
    """Key/value heads K (N = MHA, 1 = MQA, between = GQA). Ignored for MLA."""
    head_dim: PositiveInt
    """Per-head dimension H of queries, keys and values (MLA uses its own dims)."""
    ffn_hidden_size: NonNegativeInt
    """Intermediate width F of the dense FFN layers (0 if every layer is MoE)."""
    ffn_activation: FfnActivation
    """FFN activation; the gated ones (swiglu, geglu) have three weight matrices."""
    vocab_size: PositiveInt
    """Vocabulary size V."""
    tied_embeddings: bool = False
    """Input embedding and output projection share one matrix."""
    max_context: PositiveInt
    """Longest sequence the model supports (tokens)."""
    position_embedding: Literal["rope", "learned", "alibi"] = "rope"
    """Rotary (no parameters), learned absolute positions (max_context x D parameters), or ALiBi
    (a per-head linear bias on the scores, applied inside the attention kernel; Press et al.
    2021, arXiv 2108.12409)."""
    rope_attention_factor: PositiveFloat = 1.0
    """YaRN's attention (concentration) factor that scales the rotary cos/sin, ``0.1 ln(s) + 1``
    for a context extension s (Peng et al. 2023, arXiv 2309.00071, eq. 22); 1 without YaRN.
    Megatron-LM's fused RoPE kernel does not take it, so a factor other than 1 runs RoPE unfused
    (:func:`planner.cost.gemm.unfused_kernel_bytes_per_token`)."""
    rope_theta: PositiveFloat = 10000.0
    """RoPE base frequency theta (Hugging Face ``rope_theta``; 10,000 in Su et al. 2021 and the
    frameworks' default; Llama 3.1: 500,000)."""
    rope_scaling: RopeScaling | None = None
    """Context extension of the rotary frequencies; None = none."""
    rotary_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    """Share of each head's dimensions that RoPE rotates (Hugging Face
    ``partial_rotary_factor``, Megatron ``--rotary-percent``; Nemotron-4: 0.5)."""
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    """Normalisation; layernorm has a bias vector as well as a scale."""
    parallel_block: bool = False
    """Attention and FFN read the same normalised input and their outputs are summed into the
    residual at once (GPT-J; PaLM, arXiv 2204.02311 section 2; MegaScale's parallel transformer
    block): one norm per layer instead of two, and with tensor parallelism one reduction of the
    summed outputs instead of one per sub-block."""
    post_norms: bool = False
    """Each sub-block's output is normalised again before the residual add (Gemma 2 and 3's
    ``post_attention_layernorm`` and ``post_feedforward_layernorm``, Hugging Face
    ``Gemma2DecoderLayer``): one more norm per sub-block, its weights, HBM passes and saved
    input; the tensor-parallel collectives are unchanged."""
    attention_bias: bool = False
    """Q/K/V projections have biases (Qwen2, GPT-2, gpt-oss)."""
    attention_output_bias: bool = False
    """The attention output projection has a bias (GPT-2, gpt-oss)."""
    mlp_bias: bool = False
    """FFN projections have biases (GPT-2, gpt-oss)."""
    qk_norm: bool = False
    """Per-head RMSNorm on queries and keys (Qwen3)."""
    attention_sinks: bool = False
    """One learned sink logit per head (gpt-oss)."""
    dropout: bool = False
    """Training uses dropout (GPT-3-era models): dropout masks are stored as activations."""
    sliding_window: PositiveInt | None = None
    """Window of the sliding-window attention layers (tokens); None = all layers full."""
    num_sliding_window_layers: NonNegativeInt = 0
    """How many of the layers use the sliding window (gpt-oss: every other layer)."""
    local_attention: Literal["sliding", "chunked"] = "sliding"
    """How those local layers restrict attention: a window of the last ``sliding_window``
    tokens, or chunks of ``sliding_window`` tokens, each query seeing its own chunk only (Llama
    4's ``attention_chunk_size``). Serving bounds a chunked layer's KV cache by the chunk, as a
    window's."""
    mla: MLASpec | None = None
    """Multi-head latent attention; None for MHA/GQA/MQA."""
    moe: MoESpec | None = None
    """Mixture-of-experts FFN; None for a dense model."""
    published: PublishedCounts | None = None
    """Published parameter counts, to test the computed ones against."""
    quantization: CheckpointQuantization | None = None
    """How the published checkpoint stores its weights; None = 16-bit (serving loads this
    format unless ``precision`` is given; training ignores it)."""

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        for key, limit in SIZE_LIMITS.items():
            part, _, field = key.rpartition(".")
            owner = getattr(self, part) if part else self
            value = getattr(owner, field) if owner is not None else None
            if value is not None and value > limit:
                shown = (
                    str(value)
                    if len(str(value)) <= 20
                    else f"{str(value)[:6]}...e{len(str(value)) - 1}"
                )
                raise ValueError(f"{key} ({shown}) exceeds the {limit:,} the planner accepts")
        if self.mla is None and self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads ({self.num_kv_heads}) must divide "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.num_sliding_window_layers > self.num_layers:
            raise ValueError("num_sliding_window_layers exceeds num_layers")
        if self.num_sliding_window_layers and self.sliding_window is None:
            raise ValueError("num_sliding_window_layers > 0 needs sliding_window")
        if self.num_dense_layers and self.ffn_hidden_size == 0:
            raise ValueError("ffn_hidden_size must be > 0 when the model has dense FFN layers")
        if self.moe is not None and self.moe.first_dense_layers > self.num_layers:
            raise ValueError("moe.first_dense_layers exceeds num_layers")
        return self

    @property
    def attention_kind(self) -> Literal["mha", "gqa", "mqa", "mla"]:
        """Attention variant derived from the head counts."""
        if self.mla is not None:
            return "mla"
        if self.num_kv_heads == self.num_attention_heads:
            return "mha"
        return "mqa" if self.num_kv_heads == 1 else "gqa"

    @property
    def gated_ffn(self) -> bool:
        """True when the FFN has gate, up and down matrices."""
        return self.ffn_activation in GATED_ACTIVATIONS

    def is_moe_layer(self, layer_index: int) -> bool:
        """Whether layer ``layer_index`` (0-based) has a mixture-of-experts FFN: past the leading
        dense layers, every ``moe.layer_step``-th one (:attr:`MoESpec.layer_step`)."""
        moe = self.moe
        if moe is None or layer_index < moe.first_dense_layers:
            return False
        return (layer_index + 1) % moe.layer_step == 0

    @property
    def num_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts."""
        return sum(1 for i in range(self.num_layers) if self.is_moe_layer(i))

    @property
    def num_dense_layers(self) -> int:
        """Layers whose FFN is dense."""
        return self.num_layers - self.num_moe_layers
