"""Hugging Face config.json import: each supported family, round trips against the catalog,
and the one-line SpecErrors for unsupported types and missing keys."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from planner.catalog import load_model
from planner.catalog.hf import SUPPORTED_MODEL_TYPES, model_from_hf_config
from planner.cost.params import active_params, embedding_params, total_params
from planner.errors import SpecError
from planner.specs.model import ModelSpec

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"

# The configs below copy the architecture keys of the real config.json files (token ids and
# auto_map left out; quantization_config kept where the checkpoint has one: DeepSeek-V3,
# gpt-oss); the importer ignores keys it does not model.

# https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json
LLAMA_3_1_70B: dict[str, object] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "hidden_act": "silu",
    "hidden_size": 8192,
    "initializer_range": 0.02,
    "intermediate_size": 28672,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 128256,
}

# https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
MIXTRAL_8X7B: dict[str, object] = {
    "architectures": ["MixtralForCausalLM"],
    "attention_dropout": 0.0,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mixtral",
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.02,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 32000,
}

# https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json
DEEPSEEK_V3: dict[str, object] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
    "attention_bias": False,
    "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001,
    "ep_size": 1,
    "first_k_dense_replace": 3,
    "hidden_act": "silu",
    "hidden_size": 7168,
    "initializer_range": 0.02,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 10000,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "v_head_dim": 128,
    "vocab_size": 129280,
}

# https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json
GPT_OSS_120B: dict[str, object] = {
    "architectures": ["GptOssForCausalLM"],
    "quantization_config": {
        "modules_to_not_convert": [
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ],
        "quant_method": "mxfp4",
    },
    "attention_bias": True,
    "attention_dropout": 0.0,
    "experts_per_token": 4,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2880,
    "initial_context_length": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072,
    "model_type": "gpt_oss",
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "num_local_experts": 128,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "rope_type": "yarn",
        "truncate": False,
    },
    "rope_theta": 150000,
    "router_aux_loss_coef": 0.9,
    "sliding_window": 128,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": False,
    "use_cache": True,
    "vocab_size": 201088,
}

# https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json
QWEN3_30B_A3B: dict[str, object] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "max_window_layers": 48,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "output_router_logits": False,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.001,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

# https://huggingface.co/openai-community/gpt2/blob/main/config.json (GPT-2 small, 124M)
GPT2: dict[str, object] = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "embd_pdrop": 0.1,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "vocab_size": 50257,
}

# Nemotron-4 340B (arXiv 2406.11704 Table 1) in the keys transformers'
# convert_nemotron_nemo_to_hf.py writes: NVIDIA ships this model with a NeMo
# model_config.yaml only, so no config.json of its own exists.
NEMOTRON_4_340B: dict[str, object] = {
    "architectures": ["NemotronForCausalLM"],
    "hidden_act": "relu2",
    "hidden_size": 18432,
    "intermediate_size": 73728,
    "max_position_embeddings": 4096,
    "model_type": "nemotron",
    "norm_eps": 1e-05,
    "num_attention_heads": 96,
    "num_hidden_layers": 96,
    "num_key_value_heads": 8,
    "partial_rotary_factor": 0.5,
    "rope_theta": 10000,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 256000,
}

# https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json
MISTRAL_7B: dict[str, object] = {
    "architectures": ["MistralForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 32000,
}

# https://huggingface.co/Qwen/Qwen2-7B-Instruct/blob/main/config.json
QWEN2_7B: dict[str, object] = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 152064,
}

# https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
QWEN3_8B: dict[str, object] = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 12288,
    "max_position_embeddings": 40960,
    "max_window_layers": 36,
    "model_type": "qwen3",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

# https://huggingface.co/google/gemma-7b/blob/main/config.json (no tie_word_embeddings key: tied)
GEMMA_7B: dict[str, object] = {
    "architectures": ["GemmaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 2,
    "eos_token_id": 1,
    "head_dim": 256,
    "hidden_act": "gelu",
    "hidden_size": 3072,
    "initializer_range": 0.02,
    "intermediate_size": 24576,
    "max_position_embeddings": 8192,
    "model_type": "gemma",
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 16,
    "pad_token_id": 0,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.38.0.dev0",
    "use_cache": True,
    "vocab_size": 256000,
}

# https://huggingface.co/google/gemma-2-9b/blob/main/config.json
GEMMA_2_9B: dict[str, object] = {
    "architectures": ["Gemma2ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0,
    "bos_token_id": 2,
    "cache_implementation": "hybrid",
    "eos_token_id": 1,
    "final_logit_softcapping": 30.0,
    "head_dim": 256,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "gemma2",
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "pad_token_id": 0,
    "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "sliding_window_size": 4096,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.45.2",
    "use_cache": True,
    "vocab_size": 256000,
}

# https://huggingface.co/google/gemma-3-1b-pt/blob/main/config.json
GEMMA_3_1B: dict[str, object] = {
    "architectures": ["Gemma3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attn_logit_softcapping": None,
    "bos_token_id": 2,
    "cache_implementation": "hybrid",
    "eos_token_id": 1,
    "final_logit_softcapping": None,
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 1152,
    "initializer_range": 0.02,
    "intermediate_size": 6912,
    "max_position_embeddings": 32768,
    "model_type": "gemma3_text",
    "num_attention_heads": 4,
    "num_hidden_layers": 26,
    "num_key_value_heads": 1,
    "pad_token_id": 0,
    "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06,
    "rope_local_base_freq": 10000,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.50.0.dev0",
    "use_cache": True,
    "vocab_size": 262144,
}

# https://huggingface.co/Qwen/Qwen1.5-MoE-A2.7B/blob/main/config.json
QWEN1_5_MOE_A2_7B: dict[str, object] = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "decoder_sparse_step": 1,
    "eos_token_id": 151643,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 5632,
    "max_position_embeddings": 8192,
    "max_window_layers": 21,
    "model_type": "qwen2_moe",
    "moe_intermediate_size": 1408,
    "norm_topk_prob": False,
    "num_attention_heads": 16,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 16,
    "output_router_logits": False,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 5632,
    "sliding_window": 32768,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.36.0.dev0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

# https://huggingface.co/deepseek-ai/DeepSeek-V2-Lite/blob/main/config.json
DEEPSEEK_V2_LITE: dict[str, object] = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001,
    "bos_token_id": 100000,
    "eos_token_id": 100001,
    "first_k_dense_replace": 1,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 10944,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v2",
    "moe_intermediate_size": 1408,
    "moe_layer_freq": 1,
    "n_group": 1,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "norm_topk_prob": False,
    "num_attention_heads": 16,
    "num_experts_per_tok": 6,
    "num_hidden_layers": 27,
    "num_key_value_heads": 16,
    "pretraining_tp": 1,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 10000,
    "routed_scaling_factor": 1.0,
    "scoring_func": "softmax",
    "seq_aux": True,
    "tie_word_embeddings": False,
    "topk_group": 1,
    "topk_method": "greedy",
    "torch_dtype": "bfloat16",
    "transformers_version": "4.33.1",
    "use_cache": True,
    "v_head_dim": 128,
    "vocab_size": 102400,
}

# https://huggingface.co/zai-org/GLM-4.5-Air/blob/main/config.json
GLM_4_5_AIR: dict[str, object] = {
    "architectures": ["Glm4MoeForCausalLM"],
    "attention_bias": True,
    "attention_dropout": 0.0,
    "eos_token_id": [151329, 151336, 151338],
    "first_k_dense_replace": 1,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 10944,
    "max_position_embeddings": 131072,
    "model_type": "glm4_moe",
    "moe_intermediate_size": 1408,
    "n_group": 1,
    "n_routed_experts": 128,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 96,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 46,
    "num_key_value_heads": 8,
    "num_nextn_predict_layers": 1,
    "pad_token_id": 151329,
    "partial_rotary_factor": 0.5,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "routed_scaling_factor": 1.0,
    "tie_word_embeddings": False,
    "topk_group": 1,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.54.1",
    "use_cache": True,
    "use_qk_norm": False,
    "vocab_size": 151552,
}

# The text_config of https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E/blob/main/config.json
# (the keys the mapping reads; moe_layers and no_rope_layers left to Llama4TextConfig's defaults)
LLAMA_4_SCOUT_TEXT: dict[str, object] = {
    "attention_bias": False,
    "attention_chunk_size": 8192,
    "attention_dropout": 0.0,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "interleave_moe_layer_step": 1,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "max_position_embeddings": 10485760,
    "model_type": "llama4_text",
    "num_attention_heads": 40,
    "num_experts_per_tok": 1,
    "num_hidden_layers": 48,
    "num_key_value_heads": 8,
    "num_local_experts": 16,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 16.0,
        "high_freq_factor": 1.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "use_qk_norm": True,
    "vocab_size": 202048,
}

# Llama 4 Maverick's text_config differs in its experts (128), their interleaving (every other
# layer; the dense ones 16384 wide) and its RoPE (no scaling, no q/k norm)
LLAMA_4_MAVERICK_TEXT: dict[str, object] = {
    **LLAMA_4_SCOUT_TEXT,
    "interleave_moe_layer_step": 2,
    "max_position_embeddings": 1048576,
    "num_local_experts": 128,
    "rope_scaling": None,
    "use_qk_norm": False,
}

ROUND_TRIPS = [
    ("llama3.1-70b", LLAMA_3_1_70B),
    ("mixtral-8x7b", MIXTRAL_8X7B),
    ("deepseek-v3", DEEPSEEK_V3),
    ("gpt-oss-120b", GPT_OSS_120B),
    ("qwen3-30b-a3b", QWEN3_30B_A3B),
    ("nemotron4-340b", NEMOTRON_4_340B),
]
"""(catalog name, config.json) pairs that describe the same architecture."""

EXACT_TOTALS = [
    ("gpt2", GPT2, 124_439_808),
    ("mistral-7b", MISTRAL_7B, 7_241_732_096),
    ("qwen2-7b", QWEN2_7B, 7_615_616_512),
    ("qwen3-8b", QWEN3_8B, 8_190_735_360),
    # Gemma reports (arXiv 2403.08295 Table 2: 7,751,248,896 non-embedding; 2503.19786 Table 1:
    # 1B = 698M non-embedding + 302M embedding) plus V x D of the tied embedding
    ("gemma-7b", GEMMA_7B, 8_537_680_896),
    ("gemma-2-9b", GEMMA_2_9B, 9_241_705_984),  # with the two post-norms of each layer
    ("gemma-3-1b", GEMMA_3_1B, 999_885_952),
]
"""Configs without a catalog entry, with their checkpoints' parameter counts."""


def _catalog(name: str) -> ModelSpec:
    data = yaml.safe_load((MODELS_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    return ModelSpec.model_validate(data)


def _without(config: dict[str, object], *keys: str) -> dict[str, object]:
    return {k: v for k, v in config.items() if k not in keys}


PHI_3_MINI = {
    "model_type": "phi3",
    "hidden_act": "silu",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "max_position_embeddings": 4096,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "sliding_window": 2047,
    "tie_word_embeddings": False,
    "vocab_size": 32064,
    "attention_bias": False,
}
"""microsoft/Phi-3-mini-4k-instruct config.json (keys the planner reads)."""

OLMO_2_7B = {
    "model_type": "olmo2",
    "attention_bias": False,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "max_position_embeddings": 4096,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "rope_scaling": None,
    "rope_theta": 500000,
    "tie_word_embeddings": False,
    "vocab_size": 100352,
}
"""allenai/OLMo-2-1124-7B config.json (keys the planner reads)."""

OLMOE_1B_7B = {
    "model_type": "olmoe",
    "architectures": ["OlmoeForCausalLM"],
    "attention_bias": False,
    "clip_qkv": None,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 1024,
    "max_position_embeddings": 4096,
    "num_attention_heads": 16,
    "num_experts": 64,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 16,
    "num_key_value_heads": 16,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "vocab_size": 50304,
}
"""allenai/OLMoE-1B-7B-0924 config.json (keys the planner reads)."""

GRANITE_3_0_2B = {
    "model_type": "granite",
    "architectures": ["GraniteForCausalLM"],
    "attention_bias": False,
    "attention_multiplier": 0.015625,
    "embedding_multiplier": 12.0,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "logits_scaling": 8.0,
    "max_position_embeddings": 4096,
    "mlp_bias": False,
    "num_attention_heads": 32,
    "num_hidden_layers": 40,
    "num_key_value_heads": 8,
    "residual_multiplier": 0.22,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
    "vocab_size": 49155,
}
"""ibm-granite/granite-3.0-2b-base config.json (keys the planner reads)."""

GRANITE_3_0_1B_A400M = {
    "model_type": "granitemoe",
    "architectures": ["GraniteMoeForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 1024,
    "intermediate_size": 512,
    "max_position_embeddings": 4096,
    "num_attention_heads": 16,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 24,
    "num_key_value_heads": 8,
    "num_local_experts": 32,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
    "vocab_size": 49155,
}
"""ibm-granite/granite-3.0-1b-a400m-base config.json (keys the planner reads)."""

STARCODER2_3B = {
    "model_type": "starcoder2",
    "architectures": ["Starcoder2ForCausalLM"],
    "attention_dropout": 0.1,
    "embedding_dropout": 0.1,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 3072,
    "intermediate_size": 12288,
    "max_position_embeddings": 16384,
    "norm_epsilon": 1e-05,
    "num_attention_heads": 24,
    "num_hidden_layers": 30,
    "num_key_value_heads": 2,
    "residual_dropout": 0.1,
    "rope_theta": 999999.4420358813,
    "sliding_window": 4096,
    "use_bias": True,
    "vocab_size": 49152,
}
"""bigcode/starcoder2-3b config.json (keys the planner reads; no tie_word_embeddings key)."""

COMMAND_R = {
    "model_type": "cohere",
    "architectures": ["CohereForCausalLM"],
    "attention_bias": False,
    "hidden_act": "silu",
    "hidden_size": 8192,
    "intermediate_size": 22528,
    "layer_norm_eps": 1e-05,
    "logit_scale": 0.0625,
    "max_position_embeddings": 8192,
    "num_attention_heads": 64,
    "num_hidden_layers": 40,
    "num_key_value_heads": 64,
    "rope_theta": 8000000.0,
    "use_qk_norm": False,
    "vocab_size": 256000,
}
"""CohereForAI/c4ai-command-r-v01 config.json (keys the planner reads)."""

PHI_3_5_MOE = {
    "model_type": "phimoe",
    "architectures": ["PhiMoEForCausalLM"],
    "attention_bias": True,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 6400,
    "lm_head_bias": True,
    "max_position_embeddings": 131072,
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 16,
    "original_max_position_embeddings": 4096,
    "rope_scaling": {
        "long_mscale": 1.243163121016122,
        "original_max_position_embeddings": 4096,
        "short_mscale": 1.243163121016122,
        "type": "longrope",
    },
    "rope_theta": 10000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "vocab_size": 32064,
}
"""microsoft/Phi-3.5-MoE-instruct config.json (keys the planner reads; rope_scaling's 32-value
long_factor and short_factor lists left out)."""

COMMAND_R7B = {
    "model_type": "cohere2",
    "architectures": ["Cohere2ForCausalLM"],
    "attention_bias": False,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "layer_norm_eps": 1e-05,
    "logit_scale": 0.25,
    "max_position_embeddings": 8192,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rope_theta": 50000.0,
    "sliding_window": 4096,
    "sliding_window_pattern": 4,
    "vocab_size": 256000,
}
"""CohereForAI/c4ai-command-r7b-12-2024 config.json (keys the planner reads)."""

OLMO_3_7B = {
    "model_type": "olmo3",
    "architectures": ["Olmo3ForCausalLM"],
    "attention_bias": False,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 8,
    "max_position_embeddings": 65536,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "rope_scaling": {
        "attention_factor": 1.2079441541679836,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "yarn",
    },
    "rope_theta": 500000,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "vocab_size": 100278,
}
"""allenai/Olmo-3-1025-7B config.json (keys the planner reads)."""

SMOLLM3_3B = {
    "model_type": "smollm3",
    "architectures": ["SmolLM3ForCausalLM"],
    "attention_bias": False,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "max_position_embeddings": 65536,
    "mlp_bias": False,
    "no_rope_layer_interval": 4,
    "no_rope_layers": [1, 1, 1, 0] * 9,
    "num_attention_heads": 16,
    "num_hidden_layers": 36,
    "num_key_value_heads": 4,
    "rope_scaling": None,
    "rope_theta": 5000000.0,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "use_sliding_window": False,
    "vocab_size": 128256,
}
"""HuggingFaceTB/SmolLM3-3B config.json (keys the planner reads)."""

GLM_4_9B_0414 = {
    "model_type": "glm4",
    "architectures": ["Glm4ForCausalLM"],
    "attention_bias": True,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 13696,
    "max_position_embeddings": 32768,
    "num_attention_heads": 32,
    "num_hidden_layers": 40,
    "num_key_value_heads": 2,
    "partial_rotary_factor": 0.5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "vocab_size": 151552,
}
"""THUDM/GLM-4-9B-0414 config.json (keys the planner reads)."""

SEED_OSS_36B = {
    "model_type": "seed_oss",
    "architectures": ["SeedOssForCausalLM"],
    "attention_bias": True,
    "attention_out_bias": False,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "intermediate_size": 27648,
    "max_position_embeddings": 524288,
    "mlp_bias": False,
    "num_attention_heads": 80,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
    "rope_scaling": {"rope_type": "default"},
    "rope_theta": 10000000.0,
    "tie_word_embeddings": False,
    "vocab_size": 155136,
}
"""ByteDance-Seed/Seed-OSS-36B-Base config.json (keys the planner reads; its dropout keys left
out)."""

ERNIE_4_5_0_3B = {
    "model_type": "ernie4_5",
    "architectures": ["Ernie4_5_ForCausalLM"],
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "max_position_embeddings": 131072,
    "num_attention_heads": 16,
    "num_hidden_layers": 18,
    "num_key_value_heads": 2,
    "rope_theta": 500000,
    "tie_word_embeddings": True,
    "use_bias": False,
    "vocab_size": 103424,
}
"""baidu/ERNIE-4.5-0.3B-PT config.json (keys the planner reads; its first release named the
remote-code class Ernie4_5_ForCausalLM)."""

ERNIE_4_5_21B_A3B = {
    "model_type": "ernie4_5_moe",
    "architectures": ["Ernie4_5_MoeForCausalLM"],
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2560,
    "intermediate_size": 12288,
    "max_position_embeddings": 131072,
    "moe_intermediate_size": 1536,
    "moe_k": 6,
    "moe_layer_end_index": 27,
    "moe_layer_interval": 1,
    "moe_layer_start_index": 1,
    "moe_num_experts": 64,
    "moe_num_shared_experts": 2,
    "num_attention_heads": 20,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rope_theta": 500000.0,
    "tie_word_embeddings": True,
    "use_bias": False,
    "vocab_size": 103424,
}
"""baidu/ERNIE-4.5-21B-A3B-PT config.json (keys the planner reads)."""

MINIMAX_M2 = {
    "model_type": "minimax_m2",
    "architectures": ["MiniMaxM2ForCausalLM"],
    "attn_type_list": [1] * 62,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 3072,
    "intermediate_size": 1536,
    "max_position_embeddings": 196608,
    "num_attention_heads": 48,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 62,
    "num_key_value_heads": 8,
    "num_local_experts": 256,
    "num_mtp_modules": 3,
    "rope_theta": 5000000,
    "rotary_dim": 64,
    "scoring_func": "sigmoid",
    "shared_intermediate_size": 0,
    "tie_word_embeddings": False,
    "use_qk_norm": True,
    "use_routing_bias": True,
    "vocab_size": 200064,
}
"""MiniMaxAI/MiniMax-M2 config.json (keys the planner reads; its FP8 quantization_config left
out)."""

HUNYUAN_NTK_ALPHA = {
    "alpha": 1000.0,
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "type": "dynamic",
}
"""The rope_scaling of the released HunYuan configs below (Hy-MT2-7B, Hunyuan-A13B)."""

HY_MT2_7B = {
    "model_type": "hunyuan_v1_dense",
    "architectures": ["HunYuanDenseV1ForCausalLM"],
    "attention_bias": False,
    "attention_head_dim": 128,
    "cla_share_factor": 2,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 262144,
    "mlp_bias": False,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rope_scaling": HUNYUAN_NTK_ALPHA,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
    "use_cla": False,
    "use_qk_norm": True,
    "vocab_size": 128167,
}
"""tencent/Hy-MT2-7B config.json (keys the planner reads)."""

HUNYUAN_A13B = {
    "model_type": "hunyuan_v1_moe",
    "architectures": ["HunYuanMoEV1ForCausalLM"],
    "attention_bias": False,
    "attention_head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 3072,
    "max_position_embeddings": 32768,
    "mlp_bias": False,
    "moe_intermediate_size": [3072] * 32,
    "moe_topk": [8] * 32,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 64,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_shared_expert": [1] * 32,
    "rope_scaling": HUNYUAN_NTK_ALPHA,
    "rope_theta": 10000.0,
    "routed_scaling_factor": 1.0,
    "tie_word_embeddings": True,
    "use_cla": False,
    "use_mixed_mlp_moe": True,
    "use_qk_norm": True,
    "vocab_size": 128167,
}
"""tencent/Hunyuan-A13B-Instruct config.json (keys the planner reads, from the copy in a GitHub
mirror of Tencent's Hunyuan-A13B repository, models/config.json). That copy, written for the
remote code, names its model_type ``hunyuan`` (read by its architectures: test below); here it
carries transformers' ``hunyuan_v1_moe``."""

EXAONE_4_0_32B = {
    "model_type": "exaone4",
    "architectures": ["Exaone4ForCausalLM"],
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "intermediate_size": 27392,
    "max_position_embeddings": 131072,
    "num_attention_heads": 40,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
    "rope_scaling": {
        "factor": 16.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 1000000,
    "sliding_window": 4096,
    "sliding_window_pattern": 4,
    "tie_word_embeddings": False,
    "vocab_size": 102400,
}
"""LGAI-EXAONE/EXAONE-4.0-32B config.json (keys the planner reads, from the copy in
TensorRT-LLM's EXAONE 4.0 test, with the 64 layers and the 4096-token window its comments say
the release has where the test shrinks them)."""

DOTS_LLM1_INST = {
    "model_type": "dots1",
    "architectures": ["Dots1ForCausalLM"],
    "attention_bias": False,
    "first_k_dense_replace": 1,
    "hidden_size": 4096,
    "intermediate_size": 10944,
    "max_position_embeddings": 32768,
    "moe_intermediate_size": 1408,
    "n_routed_experts": 128,
    "n_shared_experts": 2,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts_per_tok": 6,
    "num_hidden_layers": 62,
    "num_key_value_heads": 32,
    "rope_theta": 10000000,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "vocab_size": 152064,
}
"""rednote-hilab/dots.llm1.inst config.json (keys the planner reads, from a trimmed copy of the
mlx-community dots.llm1.inst-mixed-4-6bit config, whose MLX quantization key is left out; like
the release, it has no head_dim, n_group or topk_group)."""

APERTUS_8B = {
    "model_type": "apertus",
    "architectures": ["ApertusForCausalLM"],
    "attention_bias": False,
    "hidden_act": "xielu",
    "hidden_size": 4096,
    "intermediate_size": 21504,
    "max_position_embeddings": 65536,
    "mlp_bias": False,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "post_norm": False,
    "qk_norm": True,
    "rope_scaling": {
        "factor": 8,
        "high_freq_factor": 4,
        "low_freq_factor": 1,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 12000000,
    "tie_word_embeddings": False,
    "vocab_size": 131072,
}
"""swiss-ai/Apertus-8B-2509 config.json (keys the planner reads, from a copy in an Apertus
config-parsing test)."""

# https://huggingface.co/EleutherAI/pythia-12b-deduped/blob/main/config.json
PYTHIA_12B: dict[str, object] = {
    "architectures": ["GPTNeoXForCausalLM"],
    "hidden_act": "gelu",
    "hidden_size": 5120,
    "initializer_range": 0.02,
    "intermediate_size": 20480,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "gpt_neox",
    "num_attention_heads": 40,
    "num_hidden_layers": 36,
    "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "use_cache": True,
    "use_parallel_residual": True,
    "vocab_size": 50688,
}
"""EleutherAI/pythia-12b-deduped config.json (pythia-12b's network; the keys of the release, from a
GPTNeoXConfig printout in a public notebook, less the keys transformers 4.45 adds on loading:
attention_bias, partial_rotary_factor, rope_theta, the dropouts)."""

# https://huggingface.co/tiiuae/falcon-7b-instruct/blob/main/config.json
FALCON_7B: dict[str, object] = {
    "alibi": False,
    "apply_residual_connection_post_layernorm": False,
    "architectures": ["FalconForCausalLM"],
    "attention_dropout": 0.0,
    "bias": False,
    "hidden_dropout": 0.0,
    "hidden_size": 4544,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "falcon",
    "multi_query": True,
    "new_decoder_architecture": False,
    "num_attention_heads": 71,
    "num_hidden_layers": 32,
    "num_kv_heads": 71,
    "parallel_attn": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.28.1",
    "use_cache": True,
    "vocab_size": 65024,
}
"""tiiuae/falcon-7b-instruct config.json (falcon-7b's network; from the copy in Tenstorrent
tt-metal's models/demos/ttnn_falcon7b/tt/model_config.py). Like the release it has no
ffn_hidden_size, max_position_embeddings, activation or tie_word_embeddings: FalconConfig's
defaults; its num_kv_heads is ignored under multi_query."""

# https://huggingface.co/tiiuae/falcon-40b-instruct/blob/main/config.json: the 7B's keys, these
# five with other values (the release lists the same keys)
FALCON_40B: dict[str, object] = {
    **FALCON_7B,
    "hidden_size": 8192,
    "new_decoder_architecture": True,
    "num_attention_heads": 128,
    "num_hidden_layers": 60,
    "num_kv_heads": 8,
}
"""tiiuae/falcon-40b-instruct config.json (falcon-40b's network; from the copy in Tenstorrent
tt-metal's models/demos/falcon40b/tt/model_config.py); its multi_query is ignored by the new
decoder architecture."""

# https://huggingface.co/bigcode/gpt_bigcode-santacoder/blob/main/config.json
SANTACODER: dict[str, object] = {
    "activation_function": "gelu_pytorch_tanh",
    "architectures": ["GPTBigCodeForCausalLM"],
    "attention_softmax_in_fp32": True,
    "multi_query": True,
    "attn_pdrop": 0.1,
    "embd_pdrop": 0.1,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt_bigcode",
    "n_embd": 2048,
    "n_head": 16,
    "n_inner": 8192,
    "n_layer": 24,
    "n_positions": 2048,
    "resid_pdrop": 0.1,
    "scale_attention_softmax_in_fp32": True,
    "scale_attn_weights": True,
    "use_cache": True,
    "vocab_size": 49280,
}
"""bigcode/gpt_bigcode-santacoder config.json (from the field-for-field copy in a GPTBigCode port's
tests; the summary_* keys of the sequence-classification head left out). No verbatim copy of
bigcode/starcoder's was found, so StarCoder is not tested here."""

# https://huggingface.co/microsoft/phi-2/blob/main/config.json
PHI_2: dict[str, object] = {
    "architectures": ["PhiForCausalLM"],
    "attention_dropout": 0.0,
    "embd_pdrop": 0.0,
    "hidden_act": "gelu_new",
    "hidden_size": 2560,
    "initializer_range": 0.02,
    "intermediate_size": 10240,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "phi",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "partial_rotary_factor": 0.4,
    "qk_layernorm": False,
    "resid_pdrop": 0.1,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "use_cache": True,
    "vocab_size": 51200,
}
"""microsoft/phi-2 config.json (from the copy in dotnet/machinelearning,
src/Microsoft.ML.GenAI.Phi/Resource/Config/phi-2-config.json)."""

# https://huggingface.co/databricks/dbrx-base/blob/main/config.json
DBRX: dict[str, object] = {
    "architectures": ["DbrxForCausalLM"],
    "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "model_type": "", "rope_theta": 500000},
    "d_model": 6144,
    "emb_pdrop": 0.0,
    "ffn_config": {
        "ffn_hidden_size": 10752,
        "model_type": "",
        "moe_jitter_eps": 0,
        "moe_loss_weight": 0.05,
        "moe_num_experts": 16,
        "moe_top_k": 4,
    },
    "initializer_range": 0.02,
    "max_seq_len": 32768,
    "model_type": "dbrx",
    "n_heads": 48,
    "n_layers": 40,
    "output_router_logits": False,
    "resid_pdrop": 0.0,
    "router_aux_loss_coef": 0.05,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 100352,
}
"""databricks DBRX config.json (dbrx-base and dbrx-instruct share it; from the copy of the
release's remote-code config in a fork of huggingface/transformers,
src/transformers/models/dbrx/config.json). It has no ffn_act_fn and no
moe_normalize_expert_weights: DbrxFFNConfig's SiLU GLU and 1."""

PUBLISHED_TOTALS = [
    ("qwen1.5-moe-a2.7b", QWEN1_5_MOE_A2_7B, 14.3e9, 2.7e9),  # model card: 14.3B, 2.7B active
    ("deepseek-v2-lite", DEEPSEEK_V2_LITE, 15.7e9, None),  # model card: 15.7B
    ("phi-3-mini", PHI_3_MINI, 3.8e9, None),  # model card: 3.8B
    ("olmo-2-7b", OLMO_2_7B, 7.3e9, None),  # model card: 7.3B (OLMo 2 report: 7B class)
    ("olmoe-1b-7b", OLMOE_1B_7B, 6.9e9, 1.3e9),  # arXiv 2409.02060: 6.9B total, 1.3B active
    ("granite-3.0-2b", GRANITE_3_0_2B, 2.5e9, None),  # Granite 3.0 report: 2.5B
    ("granite-3.0-1b-a400m", GRANITE_3_0_1B_A400M, 1.3e9, None),  # report: 1.3B total
    ("starcoder2-3b", STARCODER2_3B, 3.0e9, None),  # model card: 3B (tied: 3.03B)
    ("command-r", COMMAND_R, 35e9, None),  # model card: 35 billion parameters
    ("phi-3.5-moe", PHI_3_5_MOE, 41.9e9, 6.6e9),  # model card: 42B total, 6.6B active
    ("ernie-4.5-0.3b", ERNIE_4_5_0_3B, 0.36e9, None),  # model card: 0.36B params
]
"""Configs whose checkpoints' exact counts are not at hand: the model card's rounded figures."""

SIZE_CLASS_TOTALS = [
    ("olmo-3-7b", OLMO_3_7B, 7e9),  # model card and arXiv 2512.13961: 7B (computed 7.30B)
    ("smollm3-3b", SMOLLM3_3B, 3e9),  # model card and release blog: 3B (computed 3.08B)
    ("glm-4-9b-0414", GLM_4_9B_0414, 9e9),  # model name and card: 9B (computed 9.40B)
    ("seed-oss-36b", SEED_OSS_36B, 36e9),  # model card table: Parameters 36B (computed 36.15B)
    # model card: 80 billion total parameters (computed 80.39B; 13B active: focused test below)
    ("hunyuan-a13b", HUNYUAN_A13B, 80e9),
]
"""Configs whose model cards give the total in whole billions only: the computed count rounds
to it (a check to the card's precision, +-0.5B; the focused tests below check the layers that
make each family differ exactly)."""


def test_every_supported_family_has_a_config_here() -> None:
    configs = [c for _, c in ROUND_TRIPS] + [c for _, c, _ in EXACT_TOTALS]
    configs += [c for _, c, *_ in PUBLISHED_TOTALS] + [GLM_4_5_AIR, LLAMA_4_SCOUT_TEXT, COMMAND_R7B]
    configs += [c for _, c, _ in SIZE_CLASS_TOTALS] + [ERNIE_4_5_21B_A3B, MINIMAX_M2]
    configs += [HY_MT2_7B, EXAONE_4_0_32B, DOTS_LLM1_INST, APERTUS_8B]
    configs += [PYTHIA_12B, FALCON_7B, FALCON_40B, SANTACODER, PHI_2, DBRX]
    configs += [QWEN3_VL_4B_TEXT, QWEN3_VL_30B_A3B_TEXT, QWEN2_5_VL_7B_TEXT]
    configs += [{**QWEN2_5_VL_7B_TEXT, "model_type": "qwen2_vl_text"}]
    # refused with a one-line error (test_wrappers_are_refused and the vision-language ones)
    wrappers = {
        "gemma3",
        "llama4",
        "qwen3_vl",
        "qwen3_vl_moe",
        "mistral3",
        "qwen2_vl",
        "qwen2_5_vl",
    }
    assert {c["model_type"] for c in configs} | wrappers == set(SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize(
    ("name", "config", "total", "active"), PUBLISHED_TOTALS, ids=[n for n, *_ in PUBLISHED_TOTALS]
)
def test_published_total(
    name: str, config: dict[str, object], total: float, active: float | None
) -> None:
    spec = model_from_hf_config(config, name=name)
    assert round(total_params(spec) / 1e8) == round(total / 1e8)  # to the card's 0.1B
    if active is not None:
        assert round(active_params(spec) / 1e8) == round(active / 1e8)


def test_gemma_layers() -> None:
    gemma2 = model_from_hf_config(GEMMA_2_9B, name="g2")
    assert gemma2.post_norms and gemma2.tied_embeddings and gemma2.ffn_activation == "geglu"
    assert (gemma2.sliding_window, gemma2.num_sliding_window_layers) == (4096, 21)  # every other
    gemma3 = model_from_hf_config(GEMMA_3_1B, name="g3")
    assert gemma3.qk_norm and (gemma3.sliding_window, gemma3.num_sliding_window_layers) == (512, 22)
    # five local layers to one global: layers 5, 11, 17 and 23 of 26 are global
    untied = model_from_hf_config({**GEMMA_7B, "tie_word_embeddings": False}, name="g")
    assert not untied.tied_embeddings
    v2 = model_from_hf_config(DEEPSEEK_V2_LITE, name="v2")
    assert v2.mla is not None and v2.mla.q_lora_rank == 0 and v2.moe is not None
    assert not v2.moe.router_bias and v2.moe.num_shared_experts == 2
    # scoring_func softmax, topk_method greedy, routed_scaling_factor 1.0: no selection bias
    assert (v2.moe.router_score, v2.moe.router_expert_bias, v2.moe.router_topk_scale) == (
        "softmax", False, 1.0,
    )  # fmt: skip


def test_moe_families_without_shared_experts() -> None:
    olmoe = model_from_hf_config(OLMOE_1B_7B, name="olmoe")
    assert olmoe.moe is not None and (olmoe.moe.num_experts, olmoe.moe.top_k) == (64, 8)
    assert olmoe.qk_norm and olmoe.moe.num_shared_experts == 0 and olmoe.ffn_hidden_size == 0
    granite = model_from_hf_config(GRANITE_3_0_1B_A400M, name="granite-moe")
    assert granite.moe is not None and (granite.moe.num_experts, granite.moe.top_k) == (32, 8)
    # the report's 400M active leaves the tied embedding out: 24 x (3.15M attention + 8 x
    # 1.57M expert + 32.8K router + norms) = 378M
    assert round((active_params(granite) - embedding_params(granite)) / 1e8) == 4


def test_starcoder2_and_cohere_layers() -> None:
    sc2 = model_from_hf_config(STARCODER2_3B, name="sc2")
    assert (sc2.norm, sc2.ffn_activation, sc2.tied_embeddings) == ("layernorm", "gelu", True)
    assert sc2.attention_bias and sc2.attention_output_bias and sc2.mlp_bias and sc2.dropout
    assert (sc2.sliding_window, sc2.num_sliding_window_layers) == (4096, 30)
    no_bias = model_from_hf_config({**STARCODER2_3B, "use_bias": False}, name="sc2")
    assert not (no_bias.attention_bias or no_bias.mlp_bias)
    command_r = model_from_hf_config(COMMAND_R, name="command-r")
    assert command_r.parallel_block and command_r.tied_embeddings and not command_r.qk_norm
    assert command_r.norm == "layernorm" and command_r.ffn_activation == "swiglu"
    r7b = model_from_hf_config(COMMAND_R7B, name="r7b")
    # three local layers to one global: layers 3, 7, ..., 31 of 32 are global
    assert r7b.parallel_block and (r7b.sliding_window, r7b.num_sliding_window_layers) == (4096, 24)
    # the 7B of its name is the count without the 1.05B tied embedding: 32 x (41.9M attention +
    # 176.2M MLP) = 6.98B
    assert round((total_params(r7b) - embedding_params(r7b)) / 1e8) == 70


def test_longrope_is_read_as_the_extension_it_makes() -> None:
    # Phi-3: the pre-training context at the top level, no factor: 131072 / 4096 = 32
    spec = model_from_hf_config(PHI_3_5_MOE, name="phi-3.5-moe")
    assert spec.rope_scaling is not None and spec.rope_attention_factor == 1.0
    assert (spec.rope_scaling.kind, spec.rope_scaling.factor) == ("longrope", 32.0)
    assert spec.rope_scaling.original_context == 4096 and spec.norm == "layernorm"
    phi3_128k = {
        **PHI_3_MINI,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "su"},  # the first Phi-3-mini-128k configs' name for it
    }
    mini = model_from_hf_config(phi3_128k, name="phi-3-mini-128k")
    assert mini.rope_scaling is not None and mini.rope_scaling.kind == "longrope"
    with pytest.raises(SpecError, match="original_max_position_embeddings") as err:
        model_from_hf_config({**PHI_3_MINI, "rope_scaling": {"type": "longrope"}}, name="p")
    assert "\n" not in str(err.value)


def test_glm4_moe_against_its_report() -> None:
    # zai-org/GLM-4.5-Air model card: "106 billion total parameters and 12 billion active
    # parameters" (active without the embeddings); the checkpoint's MTP layer is not a decoder layer
    spec = model_from_hf_config(GLM_4_5_AIR, name="glm-4.5-air")
    assert abs(total_params(spec) / 106e9 - 1) < 0.01
    assert abs((active_params(spec) - embedding_params(spec)) / 12e9 - 1) < 0.02
    assert spec.moe is not None and spec.moe.first_dense_layers == 1
    # DeepSeek-V3's router (Glm4MoeTopkRouter): sigmoid, the aux-loss-free selection bias, no
    # gate bias; GLM-4.5-Air's routed_scaling_factor is 1.0 (GLM-4.5's 2.5)
    assert spec.moe.router_expert_bias and not spec.moe.router_bias
    assert (spec.moe.router_score, spec.moe.router_topk_scale) == ("sigmoid", 1.0)
    glm_4_5 = model_from_hf_config({**GLM_4_5_AIR, "routed_scaling_factor": 2.5}, name="g")
    assert glm_4_5.moe is not None and glm_4_5.moe.router_topk_scale == 2.5
    assert spec.rotary_fraction == 0.5 and spec.attention_bias and not spec.attention_output_bias


@pytest.mark.parametrize(
    ("model_type", "text"), [("gemma3", GEMMA_3_1B), ("llama4", LLAMA_4_SCOUT_TEXT)]
)
def test_wrappers_are_refused(model_type: str, text: dict[str, object]) -> None:
    wrapper = {"model_type": model_type, "text_config": dict(text)}
    with pytest.raises(SpecError, match="save its text_config") as err:
        model_from_hf_config(wrapper, name="w")
    assert "\n" not in str(err.value) and str(err.value).startswith("w: ")  # names the model


def test_llama4_against_its_model_cards() -> None:
    # meta-llama model cards: Scout 17B active / 109B total, Maverick 17B active / 400B total
    # (the whole multimodal checkpoints; the decoders alone compute to 107.8B and 400.7B)
    scout = model_from_hf_config(LLAMA_4_SCOUT_TEXT, name="scout")
    maverick = model_from_hf_config(LLAMA_4_MAVERICK_TEXT, name="maverick")
    assert abs(total_params(scout) / 109e9 - 1) < 0.015
    assert abs(total_params(maverick) / 400e9 - 1) < 0.01
    for spec in (scout, maverick):
        assert abs(active_params(spec) / 17e9 - 1) < 0.015
        # three chunked (RoPE) layers to one global (NoPE) one
        assert (spec.local_attention, spec.sliding_window) == ("chunked", 8192)
        assert spec.num_sliding_window_layers == 36
        # Llama4Router: the sigmoid of each chosen expert's logit, no bias, unscaled
        assert spec.moe is not None and spec.moe.router_score == "sigmoid"
        assert not (spec.moe.router_bias or spec.moe.router_expert_bias)
    assert scout.num_moe_layers == 48 and maverick.num_moe_layers == 24
    assert maverick.ffn_hidden_size == 16384 and maverick.is_moe_layer(1)
    assert not maverick.is_moe_layer(0)
    halves = model_from_hf_config({**LLAMA_4_MAVERICK_TEXT, "no_rope_layer_interval": 2}, name="m")
    assert halves.num_sliding_window_layers == 24  # every other layer NoPE, global
    bad = {**LLAMA_4_MAVERICK_TEXT, "moe_layers": [0, 1]}
    with pytest.raises(SpecError, match="cannot be expressed"):
        model_from_hf_config(bad, name="m")


@pytest.mark.parametrize(("name", "config"), ROUND_TRIPS, ids=[n for n, _ in ROUND_TRIPS])
def test_round_trip_matches_catalog(name: str, config: dict[str, object]) -> None:
    imported = model_from_hf_config(config, name=name)
    catalog = _catalog(name)
    assert total_params(imported) == total_params(catalog)
    assert active_params(imported) == active_params(catalog)
    ignore: dict[str, object] = {
        "source": True, "hub_id": True, "published": True, "quantization": {"source"},
    }  # fmt: skip
    assert imported.model_dump(exclude=ignore) == catalog.model_dump(exclude=ignore)


@pytest.mark.parametrize(
    ("name", "config", "total"), EXACT_TOTALS, ids=[n for n, *_ in EXACT_TOTALS]
)
def test_exact_total(name: str, config: dict[str, object], total: int) -> None:
    assert total_params(model_from_hf_config(config, name=name)) == total


def test_source_names_the_model_type() -> None:
    spec = model_from_hf_config(QWEN3_30B_A3B, name="q")
    assert spec.source == "Hugging Face config.json (model_type=qwen3_moe)"
    assert spec.family == "qwen3_moe"


def test_gpt2_mapping() -> None:
    spec = model_from_hf_config(GPT2, name="gpt2")
    assert (spec.hidden_size, spec.num_layers, spec.num_attention_heads) == (768, 12, 12)
    assert (spec.head_dim, spec.num_kv_heads, spec.ffn_hidden_size) == (64, 12, 3072)
    assert (spec.max_context, spec.position_embedding, spec.norm) == (1024, "learned", "layernorm")
    assert spec.tied_embeddings and spec.dropout and spec.ffn_activation == "gelu"
    assert spec.attention_bias and spec.attention_output_bias and spec.mlp_bias
    assert model_from_hf_config({**GPT2, "n_inner": 1000}, name="g").ffn_hidden_size == 1000


def test_head_dim_and_kv_heads_defaults() -> None:
    spec = model_from_hf_config(_without(LLAMA_3_1_70B, "num_key_value_heads"), name="mha")
    assert spec.head_dim == 8192 // 64
    assert spec.num_kv_heads == 64
    assert spec.attention_kind == "mha"


def test_tied_embeddings() -> None:
    assert not model_from_hf_config(QWEN3_8B, name="q").tied_embeddings
    tied = model_from_hf_config({**QWEN3_8B, "tie_word_embeddings": True}, name="q")
    assert tied.tied_embeddings
    assert total_params(model_from_hf_config(QWEN3_8B, name="q")) - total_params(tied) == (
        151936 * 4096
    )


def test_attention_biases() -> None:
    qwen2 = model_from_hf_config(QWEN2_7B, name="q")
    assert qwen2.attention_bias and not qwen2.attention_output_bias and not qwen2.mlp_bias
    llama = model_from_hf_config({**LLAMA_3_1_70B, "attention_bias": True}, name="l")
    assert llama.attention_bias and llama.attention_output_bias
    assert not model_from_hf_config(QWEN3_8B, name="q").attention_bias
    assert model_from_hf_config(QWEN3_8B, name="q").qk_norm


def test_sliding_windows() -> None:
    mistral = model_from_hf_config(MISTRAL_7B, name="m")
    assert (mistral.sliding_window, mistral.num_sliding_window_layers) == (4096, 32)
    assert model_from_hf_config(MIXTRAL_8X7B, name="m").sliding_window is None
    assert model_from_hf_config(QWEN2_7B, name="q").sliding_window is None
    qwen = model_from_hf_config(
        {**QWEN2_7B, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20},
        name="q",
    )
    assert (qwen.sliding_window, qwen.num_sliding_window_layers) == (4096, 8)


def test_gpt_oss_mapping() -> None:
    spec = model_from_hf_config(GPT_OSS_120B, name="g")
    assert spec.moe is not None and spec.moe.router_bias  # the gate's own bias
    assert not spec.moe.router_expert_bias and spec.moe.router_score == "softmax"
    assert spec.moe.router_topk_scale == 1.0
    assert (spec.moe.num_experts, spec.moe.top_k, spec.moe.expert_ffn_hidden_size) == (128, 4, 2880)
    assert (spec.sliding_window, spec.num_sliding_window_layers) == (128, 18)
    assert spec.attention_sinks and spec.ffn_activation == "swiglu_oai"
    # Older configs name top-k only num_experts_per_tok and have no layer_types list.
    bare = _without(GPT_OSS_120B, "experts_per_token", "layer_types")
    assert model_from_hf_config(bare, name="g") == spec


def test_yarn_attention_factor() -> None:
    """gpt-oss: YaRN factor 32 and no mscale keys -> 0.1 ln 32 + 1 = 1.3466; DeepSeek-V3 gives
    mscale = mscale_all_dim = 1, so its factors cancel; no rope_scaling -> 1."""
    assert model_from_hf_config(GPT_OSS_120B, name="g").rope_attention_factor == 1.3466
    assert model_from_hf_config(DEEPSEEK_V3, name="d").rope_attention_factor == 1.0
    plain = _without(GPT_OSS_120B, "rope_scaling")
    assert model_from_hf_config(plain, name="g").rope_attention_factor == 1.0
    given = {**GPT_OSS_120B, "rope_scaling": {"rope_type": "yarn", "attention_factor": 1.2}}
    assert model_from_hf_config(given, name="g").rope_attention_factor == 1.2


def test_deepseek_mla_without_q_latent() -> None:
    lite = {**DEEPSEEK_V3, "q_lora_rank": None}
    spec = model_from_hf_config(lite, name="d")
    assert spec.mla is not None and spec.mla.q_lora_rank == 0
    assert spec.head_dim == 192 and spec.num_kv_heads == 128
    full = model_from_hf_config(DEEPSEEK_V3, name="d")
    direct_q = 7168 * 128 * 192
    latent_q = 7168 * 1536 + 1536 + 1536 * 128 * 192
    assert total_params(spec) - total_params(full) == 61 * (direct_q - latent_q)


def test_qwen3_moe_leading_dense_layers() -> None:
    spec = model_from_hf_config({**QWEN3_30B_A3B, "mlp_only_layers": [0, 1]}, name="q")
    assert spec.moe is not None and spec.moe.first_dense_layers == 2
    assert spec.ffn_hidden_size == 6144
    with pytest.raises(SpecError, match="cannot be expressed"):
        model_from_hf_config({**QWEN3_30B_A3B, "mlp_only_layers": [5]}, name="q")


def test_decoder_sparse_step_interleaves_dense_layers() -> None:
    # Qwen3MoeDecoderLayer: MoE where (layer_idx + 1) % decoder_sparse_step == 0, else a dense
    # MLP of intermediate_size (6144 here)
    spec = model_from_hf_config({**QWEN3_30B_A3B, "decoder_sparse_step": 2}, name="q")
    assert spec.moe is not None and spec.moe.layer_step == 2
    assert [spec.is_moe_layer(i) for i in range(4)] == [False, True, False, True]
    assert spec.num_moe_layers == 24 and spec.ffn_hidden_size == 6144
    every = model_from_hf_config(QWEN3_30B_A3B, name="q")
    dense_mlp = 3 * 2048 * 6144
    experts = 128 * 3 * 2048 * 768 + 2048 * 128  # and the router
    assert total_params(every) - total_params(spec) == 24 * (experts - dense_mlp)


@pytest.mark.parametrize("model_type", ["bert", "mamba", None])
@pytest.mark.parametrize("architectures", [None, ["BertModel"], ["LlamaForCausalLM", "Qwen2X"]])
def test_unknown_model_type(model_type: str | None, architectures: list[str] | None) -> None:
    config = {**LLAMA_3_1_70B, "model_type": model_type, "architectures": architectures}
    for key in ("model_type", "architectures"):
        if config[key] is None:
            del config[key]
    with pytest.raises(SpecError) as info:
        model_from_hf_config(config, name="x")
    message = str(info.value)
    assert "\n" not in message
    assert (repr(model_type) if model_type else "no model_type") in message
    if architectures is not None:  # a class it does not know is named, not silently dropped
        assert f"architectures {architectures!r}" in message
    for supported in SUPPORTED_MODEL_TYPES:
        assert supported in message


KIMI_K2: dict[str, object] = {
    **{k: v for k, v in DEEPSEEK_V3.items() if k != "quantization_config"},
    "model_type": "kimi_k2",
    "architectures": ["DeepseekV3ForCausalLM"],
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "n_routed_experts": 384,
    "first_k_dense_replace": 1,
    "n_group": 1,
    "topk_group": 1,
    "vocab_size": 163840,
    "num_nextn_predict_layers": 0,
    "routed_scaling_factor": 2.827,
}
"""moonshotai/Kimi-K2-Instruct config.json's network as DeepSeek-V3's with its differences (64
heads, 384 routed experts, one dense layer, a 163,840-token vocabulary, routed_scaling_factor
2.827); its own model_type."""


def test_non_attention_networks_say_why_they_are_refused() -> None:
    config = {"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"]}
    with pytest.raises(SpecError, match="Gated DeltaNet linear-attention layers") as err:
        model_from_hf_config(config, name="q3n")
    assert "\n" not in str(err.value) and "supported model_type values" in str(err.value)


def test_an_unknown_model_type_is_read_by_its_architectures() -> None:
    # Kimi K2 ships model_type "kimi_k2" for a DeepseekV3ForCausalLM; its report (arXiv
    # 2507.20534): 1.04 trillion parameters, 32 billion activated
    spec = model_from_hf_config(KIMI_K2, name="kimi-k2")
    assert spec.family == "deepseek_v3" and spec.mla is not None and spec.moe is not None
    assert "model_type=kimi_k2, read as deepseek_v3 by its architectures" in spec.source
    assert (spec.moe.router_score, spec.moe.router_expert_bias) == ("sigmoid", True)
    assert spec.moe.router_topk_scale == 2.827 and spec.moe == _catalog("kimi-k2").moe
    assert abs(total_params(spec) / 1.04e12 - 1) < 0.02
    assert abs(active_params(spec) / 32e9 - 1) < 0.03


def test_deepseek_router_is_read_from_its_config() -> None:
    """scoring_func, topk_method and routed_scaling_factor decide the router: DeepSeek-V3's
    (sigmoid, noaux_tc's aux-loss-free selection bias, 2.5), or a V3-style config that routes
    by softmax greedily (no selection bias, no groups); the parameter count differs by the
    bias's E values a MoE layer and nothing else."""
    v3 = model_from_hf_config(DEEPSEEK_V3, name="deepseek-v3")
    assert v3.moe is not None and v3.moe == _catalog("deepseek-v3").moe
    assert (v3.moe.router_score, v3.moe.router_expert_bias) == ("sigmoid", True)
    assert v3.moe.router_topk_scale == 2.5 and not v3.moe.router_bias
    greedy = {**DEEPSEEK_V3, "scoring_func": "softmax", "topk_method": "greedy"}
    softmax = model_from_hf_config(greedy, name="v3-softmax")
    assert softmax.moe is not None
    assert (softmax.moe.router_score, softmax.moe.router_expert_bias) == ("softmax", False)
    assert not softmax.moe.limits_groups and softmax.moe.router_topk_scale == 2.5
    assert total_params(v3) - total_params(softmax) == 58 * 256  # 58 MoE layers x E
    # keys left out: DeepSeek-V3's own router, and transformers' DeepseekV2Config for V2
    bare_v3 = _without(DEEPSEEK_V3, "scoring_func", "topk_method", "routed_scaling_factor")
    assert model_from_hf_config(bare_v3, name="deepseek-v3") == v3
    bare_v2 = _without(DEEPSEEK_V2_LITE, "scoring_func", "topk_method", "routed_scaling_factor")
    assert model_from_hf_config(bare_v2, name="v2") == model_from_hf_config(
        DEEPSEEK_V2_LITE, name="v2"
    )


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("scoring_func", "tanh", "scoring_func 'tanh' is not supported"),
        ("scoring_func", 1, "scoring_func 1 is not supported"),
        ("topk_method", "aux_free", "topk_method 'aux_free' is not supported"),
        ("topk_method", True, "topk_method True is not supported"),
        ("routed_scaling_factor", "2.5", "must be a positive number"),
        ("routed_scaling_factor", True, "must be a positive number"),
        ("routed_scaling_factor", 0, "must be a positive number"),
        ("routed_scaling_factor", float("nan"), "must be a positive number"),
    ],
)
def test_a_router_key_of_the_wrong_kind_is_a_one_line_error(
    key: str, value: object, words: str
) -> None:
    with pytest.raises(SpecError, match=re.escape(words)) as err:
        model_from_hf_config({**DEEPSEEK_V3, key: value}, name="v3")
    assert "\n" not in str(err.value) and str(err.value).startswith("v3: ")


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (LLAMA_3_1_70B, "hidden_size"),
        (LLAMA_3_1_70B, "intermediate_size"),
        (MIXTRAL_8X7B, "num_local_experts"),
        (DEEPSEEK_V3, "kv_lora_rank"),
        (GPT_OSS_120B, "vocab_size"),
        (QWEN3_30B_A3B, "moe_intermediate_size"),
        (GPT2, "n_embd"),
        (NEMOTRON_4_340B, "max_position_embeddings"),
    ],
)
def test_missing_key_is_named(config: dict[str, object], key: str) -> None:
    with pytest.raises(SpecError, match=f"lacks '{key}'"):
        model_from_hf_config(_without(config, key), name="x")


def test_wrong_type_and_invalid_spec_are_one_line_spec_errors() -> None:
    with pytest.raises(SpecError, match="'hidden_size' must be an integer"):
        model_from_hf_config({**LLAMA_3_1_70B, "hidden_size": "8192"}, name="x")
    with pytest.raises(SpecError) as info:
        model_from_hf_config({**LLAMA_3_1_70B, "num_key_value_heads": 7}, name="x")
    assert "\n" not in str(info.value)
    assert "num_kv_heads" in str(info.value)


@pytest.mark.parametrize(
    ("scaling", "message"),
    [
        (["yarn"], "rope_scaling must be an object"),
        ({"rope_type": "yarn", "factor": "big"}, "rope_scaling factor must be a number, got 'big'"),
        # issue 17: a boolean or text is not a number (float(True) is 1.0, float("32") 32.0)
        ({"rope_type": "yarn", "factor": True}, "rope_scaling factor must be a number, got True"),
        ({"rope_type": "yarn", "factor": "32"}, "rope_scaling factor must be a number"),
        ({"rope_type": "yarn", "factor": 32.0, "mscale": False}, "mscale must be a number"),
        ({"rope_type": "yarn", "attention_factor": True}, "attention_factor must be a number"),
        ({"rope_type": "yarn", "factor": 0.5}, "factor 0.5 must be from 1 to 1024"),
        ({"rope_type": "yarn", "factor": 1e300}, "factor 1e\\+300 must be from 1 to 1024"),
        ({"rope_type": "yarn", "factor": 32.0, "mscale_all_dim": float("nan")}, "must be from"),
    ],
)
def test_malformed_rope_scaling_is_a_one_line_spec_error(scaling: object, message: str) -> None:
    with pytest.raises(SpecError, match=message) as info:
        model_from_hf_config({**GPT_OSS_120B, "rope_scaling": scaling}, name="g")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("quantization", "weights", "kv"),
    [
        ({"quant_method": "fp8", "fmt": "e4m3"}, "fp8", None),
        ({"quant_method": "fbgemm_fp8"}, "fp8", None),
        (
            {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"},
            "fp8",
            "fp8",
        ),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4", None),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
                "kv_cache_scheme": {"num_bits": 8, "type": "float"},
            },
            "fp8",
            "fp8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}
                },
            },
            "nvfp4",
            None,
        ),
    ],
)
def test_quantization_config_sets_the_checkpoint_format(
    quantization: dict[str, object], weights: str, kv: str | None
) -> None:
    """Issue 20: an FP8 (or FP4) checkpoint implies its weight format (and its KV format when
    it carries KV scales); serving then loads that format unless told otherwise."""
    from planner.api import serve_estimate

    config = {**LLAMA_3_1_70B, "quantization_config": quantization}
    model = model_from_hf_config(config, name="q")
    assert model.quantization is not None
    assert str(model.quantization.weights) == weights
    assert (None if model.quantization.kv_cache is None else str(model.quantization.kv_cache)) == kv
    if weights == "fp8":
        plan = serve_estimate(model=model, cluster="hgx_h200x1", layout={"tp": 1})
        assert str(plan.layout.precision) == "fp8"
        assert str(plan.layout.kv_precision) == "fp8"  # given, or FP8 weights imply FP8 KV


def test_int4_checkpoints_are_refused_in_one_line() -> None:
    config = {**LLAMA_3_1_70B, "quantization_config": {"quant_method": "awq", "bits": 4}}
    with pytest.raises(SpecError, match="no planner weight format"):
        model_from_hf_config(config, name="awq")


def test_a_checkpoint_folder_loads_its_config(tmp_path: Path) -> None:
    """``--model <folder>`` reads the folder's config.json, as transformers' from_pretrained
    does; the folder's name names the model when the config does not."""
    import json

    name, config = ROUND_TRIPS[0]
    folder = tmp_path / "My-Checkpoint"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    loaded = load_model(str(folder))
    assert total_params(loaded) == total_params(_catalog(name))
    assert loaded.name == config.get("_name_or_path", "My-Checkpoint")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SpecError, match="is a directory"):
        load_model(str(empty))


def test_group_limited_routing_is_read_from_the_router_keys() -> None:
    """DeepSeek-V3's router picks 4 of 8 expert groups (``n_group``, ``topk_group``); V2-Lite's
    ``greedy`` router ignores its single group; a group count that does not divide the experts
    is a one-line SpecError."""
    v3 = model_from_hf_config(DEEPSEEK_V3, name="d").moe
    assert v3 is not None and (v3.router_num_groups, v3.router_group_topk) == (8, 4)
    assert v3.limits_groups
    lite = model_from_hf_config(DEEPSEEK_V2_LITE, name="l").moe
    assert lite is not None and not lite.limits_groups and lite.router_num_groups == 1
    with pytest.raises(SpecError, match="router_num_groups") as err:
        model_from_hf_config({**DEEPSEEK_V3, "n_group": 7}, name="d")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("name", "config", "total"), SIZE_CLASS_TOTALS, ids=[n for n, *_ in SIZE_CLASS_TOTALS]
)
def test_size_class_total(name: str, config: dict[str, object], total: float) -> None:
    spec = model_from_hf_config(config, name=name)
    assert round(total_params(spec) / 1e9) == round(total / 1e9)  # to the card's whole billion


def test_olmo3_and_smollm3_layers() -> None:
    olmo3 = model_from_hf_config(OLMO_3_7B, name="olmo-3-7b")
    # three local layers to one global: layers 3, 7, ..., 31 of 32 are global
    assert (olmo3.sliding_window, olmo3.num_sliding_window_layers) == (4096, 24)
    assert olmo3.qk_norm and not olmo3.post_norms
    assert round(olmo3.rope_attention_factor, 4) == 1.2079  # YaRN: 0.1 ln 8 + 1, as given
    bare = model_from_hf_config(_without(OLMO_3_7B, "layer_types"), name="olmo-3-7b")
    assert bare.num_sliding_window_layers == 24  # Olmo3Config's default layer_types
    # OLMo 2's layer: 4 D^2 attention + 3 D F MLP + two norms + one head's q/k norm weights
    layer = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096 + 2 * 128
    assert total_params(olmo3) - embedding_params(olmo3) == 32 * layer + 4096
    smol = model_from_hf_config(SMOLLM3_3B, name="smollm3-3b")
    assert smol.tied_embeddings and embedding_params(smol) == 128256 * 2048
    assert smol.num_sliding_window_layers == 0 and smol.num_kv_heads == 4
    # NoPE layers hold the same weights: the default interval gives the same spec
    assert model_from_hf_config(_without(SMOLLM3_3B, "no_rope_layers"), name="smollm3-3b") == smol
    windowed = {**SMOLLM3_3B, "use_sliding_window": True, "sliding_window": 4096}
    slid = model_from_hf_config(windowed, name="s")
    assert (slid.sliding_window, slid.num_sliding_window_layers) == (4096, 9)  # the NoPE ones
    with pytest.raises(SpecError, match="no_rope_layers must list one 0/1 flag per layer"):
        model_from_hf_config({**SMOLLM3_3B, "no_rope_layers": [1, 0]}, name="s")


def test_glm4_seed_oss_and_ernie_dense_layers() -> None:
    glm4 = model_from_hf_config(GLM_4_9B_0414, name="glm-4-9b-0414")
    assert glm4.post_norms and glm4.rotary_fraction == 0.5 and glm4.num_kv_heads == 2
    assert glm4.attention_bias and not glm4.attention_output_bias and not glm4.mlp_bias
    no_post = glm4.model_copy(update={"post_norms": False})
    assert total_params(glm4) - total_params(no_post) == 40 * 2 * 4096  # the two extra norms
    no_bias = glm4.model_copy(update={"attention_bias": False})
    assert total_params(glm4) - total_params(no_bias) == 40 * (32 * 128 + 2 * 2 * 128)  # q, k, v
    default_rotary = _without(GLM_4_9B_0414, "partial_rotary_factor")
    assert model_from_hf_config(default_rotary, name="g").rotary_fraction == 0.5
    seed = model_from_hf_config(SEED_OSS_36B, name="seed-oss-36b")
    assert seed.attention_bias and not seed.attention_output_bias and not seed.mlp_bias
    assert (seed.num_attention_heads * seed.head_dim, seed.hidden_size) == (10240, 5120)
    out_bias = model_from_hf_config({**SEED_OSS_36B, "attention_out_bias": True}, name="s")
    assert total_params(out_bias) - total_params(seed) == 64 * 5120
    assert model_from_hf_config({**SEED_OSS_36B, "residual_dropout": 0.1}, name="s").dropout
    ernie = model_from_hf_config(ERNIE_4_5_0_3B, name="ernie-4.5-0.3b")
    assert ernie.tied_embeddings and (ernie.head_dim, ernie.num_kv_heads) == (128, 2)
    assert not (ernie.attention_bias or ernie.attention_output_bias or ernie.mlp_bias)
    biased = model_from_hf_config({**ERNIE_4_5_0_3B, "use_bias": True}, name="e")
    assert biased.attention_bias and biased.attention_output_bias and biased.mlp_bias
    renamed = model_from_hf_config({**ERNIE_4_5_0_3B, "model_type": "ernie"}, name="e")
    assert renamed.family == "ernie4_5"  # read by its architectures Ernie4_5_ForCausalLM


def test_ernie_moe_against_its_model_card() -> None:
    spec = model_from_hf_config(ERNIE_4_5_21B_A3B, name="ernie-4.5-21b-a3b")
    moe = spec.moe
    assert moe is not None
    assert (moe.num_experts, moe.top_k, moe.expert_ffn_hidden_size) == (64, 6, 1536)
    # two shared experts are one always-on MLP 2 x 1536 wide; layer 0 is dense
    assert (moe.num_shared_experts, moe.shared_expert_ffn_hidden_size) == (1, 3072)
    assert moe.first_dense_layers == 1 and spec.ffn_hidden_size == 12288
    # softmax scores plus the e_score_correction_bias selection bias; no gate bias
    assert moe.router_expert_bias and not moe.router_bias and moe.router_score == "softmax"
    assert spec.num_moe_layers == 27 and spec.tied_embeddings
    # baidu/ERNIE-4.5-21B-A3B-PT model card: 21B total, 3B active. Computed 21.83B: 27 MoE
    # layers x (754.97M experts + 23.59M shared + 15.73M attention + 0.16M router) = 21.45B,
    # plus the dense layer 0 (110.1M) and the tied 264.8M embedding; the card's 21B is the
    # whole-billion part of the model's name. Active: 3.09B without the embedding (27 x (6 x
    # 11.80M + 23.59M + 15.73M + 0.16M) + 110.1M), 3.35B with it
    assert int(total_params(spec) / 1e9) == 21
    assert round((active_params(spec) - embedding_params(spec)) / 1e9) == 3
    every_other = model_from_hf_config({**ERNIE_4_5_21B_A3B, "moe_layer_interval": 2}, name="e")
    assert every_other.num_moe_layers == 14  # layers 1, 3, ..., 27
    default_shared = model_from_hf_config(
        _without(ERNIE_4_5_21B_A3B, "moe_num_shared_experts"), name="ernie-4.5-21b-a3b"
    )
    assert default_shared == spec  # Ernie4_5_MoeConfig's default: 2
    with pytest.raises(SpecError, match="cannot be expressed") as err:
        model_from_hf_config({**ERNIE_4_5_21B_A3B, "moe_layer_end_index": 20}, name="e")
    assert "\n" not in str(err.value)


def test_minimax_m2_against_its_model_card() -> None:
    spec = model_from_hf_config(MINIMAX_M2, name="minimax-m2")
    moe = spec.moe
    assert moe is not None
    assert (moe.num_experts, moe.top_k, moe.expert_ffn_hidden_size) == (256, 8, 1536)
    assert moe.num_shared_experts == 0 and spec.ffn_hidden_size == 0
    # scoring_func sigmoid, use_routing_bias: the selection bias, no gate bias
    assert moe.router_expert_bias and not moe.router_bias and moe.router_score == "sigmoid"
    unbiased = model_from_hf_config({**MINIMAX_M2, "use_routing_bias": False}, name="m")
    assert unbiased.moe is not None and not unbiased.moe.router_expert_bias
    with pytest.raises(SpecError, match="scoring_func 'softplus' is not supported"):
        model_from_hf_config({**MINIMAX_M2, "scoring_func": "softplus"}, name="m")
    assert spec.num_moe_layers == 62 and spec.qk_norm and spec.rotary_fraction == 0.5
    assert spec.sliding_window is None and not spec.tied_embeddings
    # MiniMaxAI/MiniMax-M2 model card: 230 billion total, 10 billion active. Computed 228.69B:
    # 62 x (3623.9M experts + 44.0M attention + 0.79M router) = 227.46B plus the 1.23B untied
    # embedding and output layer, 230B to two figures (its 3 MTP modules are not in the model).
    # Active: 9.80B without the embeddings (62 x (8 x 14.16M + 44.0M + 0.79M)), 11.03B with them
    assert round(total_params(spec) / 1e10) == 23
    assert round((active_params(spec) - embedding_params(spec)) / 1e9) == 10
    lightning = {**MINIMAX_M2, "attn_type_list": [0] + [1] * 61}
    with pytest.raises(SpecError, match="lightning") as err:
        model_from_hf_config(lightning, name="m")
    assert "\n" not in str(err.value)
    older = {"model_type": "minimax", "architectures": ["MiniMaxForCausalLM"]}
    with pytest.raises(SpecError, match="lightning \\(linear\\) attention layers"):
        model_from_hf_config(older, name="minimax-text-01")


def test_top_k_weights_are_renormalised_as_norm_topk_prob_says() -> None:
    """``norm_topk_prob`` false (Qwen1.5-MoE, DeepSeek-V2-Lite; OLMoE's config leaves it at
    OlmoeConfig's false) keeps the top-k softmax weights as they are; true (GLM-4.5-Air) and the
    families that take the softmax over the top-k logits (Mixtral) renormalise them."""
    cases = [
        (QWEN1_5_MOE_A2_7B, False),
        (DEEPSEEK_V2_LITE, False),
        (OLMOE_1B_7B, False),
        (GLM_4_5_AIR, True),
        (MIXTRAL_8X7B, True),
        ({**QWEN1_5_MOE_A2_7B, "norm_topk_prob": True}, True),
    ]
    for config, normalised in cases:
        spec = model_from_hf_config(config, name="m")
        assert spec.moe is not None and spec.moe.router_topk_norm is normalised, config


def test_hunyuan_dense_and_moe_against_their_model_cards() -> None:
    dense = model_from_hf_config(HY_MT2_7B, name="hy-mt2-7b")
    assert (
        dense.qk_norm and dense.tied_embeddings and (dense.head_dim, dense.num_kv_heads) == (128, 8)
    )
    assert not (dense.attention_bias or dense.attention_output_bias or dense.mlp_bias)
    # NTK-alpha: a fixed base 10000 x 1000^(128 / 126), no scaling on top
    assert dense.rope_scaling is None and dense.rope_attention_factor == 1.0
    assert abs(dense.rope_theta / (10000.0 * 1000.0 ** (128 / 126)) - 1) < 1e-12
    # the 7B of its name is the count without the 0.52B tied embedding: 32 x (41.94M attention
    # + 176.16M MLP + norms) = 6.98B (7.50B with it)
    assert round((total_params(dense) - embedding_params(dense)) / 1e8) == 70
    with pytest.raises(SpecError, match="use_cla true cannot be expressed") as err:
        model_from_hf_config({**HY_MT2_7B, "use_cla": True}, name="h")
    assert "\n" not in str(err.value)
    llama_style = {**HY_MT2_7B, "rope_scaling": {"type": "dynamic", "factor": 2.0}}
    with pytest.raises(SpecError, match="rope_scaling type 'dynamic' is not supported"):
        model_from_hf_config(llama_style, name="h")  # dynamic NTK without an alpha
    moe_model = model_from_hf_config(HUNYUAN_A13B, name="hunyuan-a13b")
    moe = moe_model.moe
    assert moe is not None and moe_model.num_moe_layers == 32 and moe_model.ffn_hidden_size == 0
    assert (moe.num_experts, moe.top_k, moe.expert_ffn_hidden_size) == (64, 8, 3072)
    assert (moe.num_shared_experts, moe.shared_expert_ffn_hidden_size) == (1, 3072)
    # HunYuanMoEV1Moe: softmax over a plain gate, top-k weights renormalised, unscaled
    assert moe.router_score == "softmax" and moe.router_topk_norm and moe.router_topk_scale == 1.0
    assert not (moe.router_bias or moe.router_expert_bias) and moe.router_num_groups == 1
    assert moe_model.qk_norm and moe_model.head_dim == 128  # from attention_head_dim
    # model card: 13 billion active parameters: 32 x ((8 + 1 shared) x 37.75M + 41.94M attention
    # + 0.26M router + norms) + the 0.52B tied embedding = 12.75B
    assert round(active_params(moe_model) / 1e9) == 13
    scalars = {"moe_topk": 8, "num_experts": 64, "moe_intermediate_size": 3072}
    assert (
        model_from_hf_config(
            {**HUNYUAN_A13B, **scalars, "num_shared_expert": 1}, name="hunyuan-a13b"
        )
        == moe_model
    )
    remote = model_from_hf_config({**HUNYUAN_A13B, "model_type": "hunyuan"}, name="a13b")
    assert remote.family == "hunyuan_v1_moe"  # the remote-code copy, read by its architectures
    unshared = model_from_hf_config({**HUNYUAN_A13B, "use_mixed_mlp_moe": False}, name="u")
    assert total_params(moe_model) - total_params(unshared) == 32 * 3 * 4096 * 3072
    mixed = {**HUNYUAN_A13B, "moe_topk": [8] * 31 + [2]}
    with pytest.raises(SpecError, match=r"moe_topk .* cannot be expressed") as err:
        model_from_hf_config(mixed, name="h")
    assert "\n" not in str(err.value)


def test_exaone4_against_its_model_card() -> None:
    spec = model_from_hf_config(EXAONE_4_0_32B, name="exaone-4.0-32b")
    # three local layers to one global: layers 3, 7, ..., 63 of 64 are global (and NoPE)
    assert (spec.sliding_window, spec.num_sliding_window_layers) == (4096, 48)
    assert spec.qk_norm and not spec.post_norms and spec.head_dim == 128
    assert not (spec.attention_bias or spec.attention_output_bias or spec.mlp_bias)
    assert spec.rope_scaling is not None and spec.rope_scaling.kind == "llama3"
    # model card: Number of Parameters (without embeddings): 30.95B = 64 x (62.91M attention +
    # 420.74M MLP + two norms + the 2 x 128 q/k norm weights) + the final norm
    assert round((total_params(spec) - embedding_params(spec)) / 1e7) == 3095
    letters = model_from_hf_config({**EXAONE_4_0_32B, "sliding_window_pattern": "LLLG"}, name="e")
    assert letters == spec.model_copy(update={"name": "e"})
    # a text pattern repeats from layer 0, the last layer always global: 42 of layers 0-62
    three = model_from_hf_config({**EXAONE_4_0_32B, "sliding_window_pattern": "LLG"}, name="e")
    assert three.num_sliding_window_layers == 42
    small = model_from_hf_config({**EXAONE_4_0_32B, "sliding_window": None}, name="e")
    assert (small.sliding_window, small.num_sliding_window_layers) == (None, 0)  # 1.2B: none
    listed = {**EXAONE_4_0_32B, "layer_types": ["sliding_attention", "full_attention"] * 32}
    assert model_from_hf_config(listed, name="e").num_sliding_window_layers == 32
    with pytest.raises(SpecError, match="must be a text of L") as err:
        model_from_hf_config({**EXAONE_4_0_32B, "sliding_window_pattern": "LXG"}, name="e")
    assert "\n" not in str(err.value)


def test_dots1_against_its_model_card() -> None:
    spec = model_from_hf_config(DOTS_LLM1_INST, name="dots.llm1.inst")
    moe = spec.moe
    assert moe is not None
    assert (moe.num_experts, moe.top_k, moe.expert_ffn_hidden_size) == (128, 6, 1408)
    # two shared experts are one always-on MLP 2 x 1408 wide; layer 0 is dense
    assert (moe.num_shared_experts, moe.shared_expert_ffn_hidden_size) == (1, 2816)
    assert moe.first_dense_layers == 1 and spec.ffn_hidden_size == 10944
    # DeepSeek-V3's router: sigmoid, the selection bias, no gate bias, no groups
    assert moe.router_score == "sigmoid" and moe.router_expert_bias and not moe.router_bias
    assert (moe.router_topk_norm, moe.router_topk_scale, moe.router_num_groups) == (True, 2.5, 1)
    assert spec.mla is None and spec.attention_kind == "mha" and spec.qk_norm
    assert spec.sliding_window is None
    defaults = _without(DOTS_LLM1_INST, "norm_topk_prob", "routed_scaling_factor")
    default_moe = model_from_hf_config(defaults, name="d").moe
    assert default_moe is not None  # Dots1Config: norm_topk_prob false, routed_scaling_factor 1
    assert (default_moe.router_topk_norm, default_moe.router_topk_scale) == (False, 1.0)
    # no use_sliding_window switch: layers from max_window_layers on slide when a window is set
    windowed = {**DOTS_LLM1_INST, "sliding_window": 4096, "max_window_layers": 60}
    assert model_from_hf_config(windowed, name="d").num_sliding_window_layers == 2
    # README: 142B total, 14B activated. Computed 142.77B: 61 MoE layers x (2214.6M experts +
    # 34.6M shared + 67.1M attention + 0.5M router) + the dense layer 0 (201.6M) = 141.53B, and
    # the 1.25B untied embedding and output layer; the card's 142B is the count without them, or
    # the whole-billion part of the count with them. Active: 61 x (6 x 17.3M + 34.6M + 67.1M +
    # 0.5M) + 201.6M = 12.77B, 14.02B with the embeddings
    assert round((total_params(spec) - embedding_params(spec)) / 1e9) == 142
    assert int(total_params(spec) / 1e9) == 142
    assert round(active_params(spec) / 1e9) == 14


def test_apertus_xielu_is_refused_with_the_reason() -> None:
    with pytest.raises(SpecError, match="hidden_act 'xielu' cannot be expressed") as err:
        model_from_hf_config(APERTUS_8B, name="apertus-8b")
    assert "\n" not in str(err.value) and str(err.value).startswith("apertus-8b: ")
    # the same network with a plain activation ModelSpec has: Llama's attention with per-head
    # q/k norms and a plain MLP without biases (ApertusMLP builds none)
    relu2 = model_from_hf_config({**APERTUS_8B, "hidden_act": "relu2", "mlp_bias": True}, name="a")
    assert relu2.ffn_activation == "relu2" and not relu2.gated_ffn and relu2.qk_norm
    assert not relu2.mlp_bias and (relu2.num_kv_heads, relu2.ffn_hidden_size) == (8, 21504)


def test_gpt_neox_against_the_pythia_card() -> None:
    spec = model_from_hf_config(PYTHIA_12B, name="pythia-12b")
    assert (spec.num_kv_heads, spec.head_dim, spec.ffn_activation) == (40, 128, "gelu")
    assert spec.parallel_block and spec.norm == "layernorm" and not spec.tied_embeddings
    assert (spec.position_embedding, spec.rotary_fraction, spec.rope_theta) == ("rope", 0.25, 1e4)
    assert spec.attention_bias and spec.attention_output_bias and spec.mlp_bias
    # D 5120, L 36, F 20480, V 50688: attention 4 D^2 + 4 D (q, k, v and dense biases) =
    # 104,878,080; MLP 2 D F + F + D = 209,740,800; one LayerNorm 2 D = 10,240: 314,629,120 a
    # layer, x 36 = 11,326,648,320; embedding and output layer 2 V D = 519,045,120; final norm
    assert embedding_params(spec) == 519_045_120
    assert total_params(spec) == 11_845_703_680
    # EleutherAI/pythia-12b card: 11,846,072,320 total (11,327,027,200 without the embeddings),
    # which counts the parallel layer's second LayerNorm: 36 x 2 D
    assert total_params(spec) + 36 * 2 * 5120 == 11_846_072_320
    # GPTNeoXConfig's defaults for the keys a config leaves out: a parallel layer, a quarter of
    # each head rotated at base 10,000, biases on q, k, v and dense, an untied output layer
    bare = _without(PYTHIA_12B, "use_parallel_residual", "rotary_pct", "rotary_emb_base")
    assert model_from_hf_config(bare, name="pythia-12b") == spec
    assert model_from_hf_config({**PYTHIA_12B, "attention_bias": True}, name="pythia-12b") == spec
    unbiased = model_from_hf_config({**PYTHIA_12B, "attention_bias": False}, name="p")
    assert not unbiased.attention_bias and unbiased.mlp_bias
    assert total_params(spec) - total_params(unbiased) == 36 * 4 * 5120
    # the newer spellings come first; a sequential layer has two norms
    newer = {**PYTHIA_12B, "partial_rotary_factor": 0.5, "rope_theta": 1e6}
    assert (model_from_hf_config(newer, name="p").rotary_fraction, 1e6) == (0.5, 1e6)
    sequential = model_from_hf_config({**PYTHIA_12B, "use_parallel_residual": False}, name="p")
    assert not sequential.parallel_block
    assert total_params(sequential) - total_params(spec) == 36 * 2 * 5120


def test_falcon_against_its_model_cards() -> None:
    f7b = model_from_hf_config(FALCON_7B, name="falcon-7b")
    # multi_query: one key and value head, whatever num_kv_heads says; a parallel layer with one
    # LayerNorm; no biases; RoPE; the embedding tied to the output layer (FalconConfig's default)
    assert (f7b.num_kv_heads, f7b.head_dim, f7b.attention_kind) == (1, 64, "mqa")
    assert f7b.parallel_block and f7b.norm == "layernorm" and f7b.tied_embeddings
    assert not (f7b.attention_bias or f7b.attention_output_bias or f7b.mlp_bias)
    assert (f7b.position_embedding, f7b.rope_theta, f7b.dropout) == ("rope", 1e4, False)
    # FalconConfig's defaults for the keys the release leaves out: ffn_hidden_size 4 x 4544,
    # max_position_embeddings 2048, activation gelu
    assert (f7b.ffn_hidden_size, f7b.max_context, f7b.ffn_activation) == (18176, 2048, "gelu")
    # D 4544, 71 heads of 64, F 18176, V 65024: attention 2 D^2 + 2 x 64 D = 41,877,504; MLP
    # 2 D F = 165,183,488; one LayerNorm 2 D = 9,088: 207,070,080 a layer, x 32 = 6,626,242,560;
    # the tied embedding V D = 295,469,056; final norm 9,088
    assert total_params(f7b) == 6_921_720_704
    # the model card's 7B; the hub's 7.22B counts the output layer the checkpoint stores beside
    # the embedding it is tied to: + V D
    assert round((total_params(f7b) + 65024 * 4544) / 1e7) == 722
    f40b = model_from_hf_config(FALCON_40B, name="falcon-40b")
    # the new decoder architecture: 8 key/value groups (multi_query ignored), always parallel
    assert (f40b.num_kv_heads, f40b.attention_kind, f40b.parallel_block) == (8, "gqa", True)
    assert (f40b.ffn_hidden_size, f40b.tied_embeddings) == (32768, True)
    # D 8192, 128 heads of 64 in 8 groups, F 32768: attention 2 D^2 + 2 x 8 x 64 D =
    # 142,606,336; MLP 2 D F = 536,870,912; LayerNorm 16,384 (the second, ln_mlp, is the one
    # parallel_block leaves out: 60 x 2 D = 983,040 in all): 679,493,632 a layer, x 60 =
    # 40,769,617,920; tied embedding 532,676,608; final norm 16,384
    assert total_params(f40b) == 41_302_310_912
    # the model card's 40B; the hub's 41.8B counts the stored output layer too: + V D
    assert round((total_params(f40b) + 65024 * 8192) / 1e8) == 418
    # the first releases' spellings read the same network
    old = _without(FALCON_40B, "num_attention_heads", "num_hidden_layers", "num_kv_heads")
    old |= {"n_head": 128, "n_layer": 60, "n_head_kv": 8}
    assert model_from_hf_config(old, name="falcon-40b") == f40b
    assert model_from_hf_config(_without(FALCON_7B, "multi_query"), name="falcon-7b") == f7b
    mha = model_from_hf_config({**FALCON_7B, "multi_query": False}, name="f")
    assert mha.num_kv_heads == 71
    untied = model_from_hf_config({**FALCON_7B, "tie_word_embeddings": False}, name="f")
    assert not untied.tied_embeddings
    # falcon-rw-1b's form: ALiBi, biases, a sequential layer of two LayerNorms, MHA
    rw = {
        **FALCON_7B, "alibi": True, "bias": True, "parallel_attn": False, "multi_query": False,
        "hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 24,
        "vocab_size": 50304,
    }  # fmt: skip
    rw_1b = model_from_hf_config(rw, name="falcon-rw-1b")
    assert (rw_1b.position_embedding, rw_1b.parallel_block, rw_1b.num_kv_heads) == (
        "alibi", False, 32,
    )  # fmt: skip
    assert rw_1b.attention_bias and rw_1b.attention_output_bias and rw_1b.mlp_bias
    assert rw_1b.rope_scaling is None and rw_1b.ffn_hidden_size == 8192
    with pytest.raises(SpecError, match="is not a multiple of num_attention_heads") as err:
        model_from_hf_config({**FALCON_7B, "num_attention_heads": 70}, name="f")
    assert "\n" not in str(err.value)


def test_gpt_bigcode_against_the_santacoder_card() -> None:
    spec = model_from_hf_config(SANTACODER, name="santacoder")
    # multi_query: one key and value head; GPT-2's learned positions, LayerNorm, biases, tied
    # embeddings; tanh GELU; dropout in training
    assert (spec.num_kv_heads, spec.head_dim, spec.attention_kind) == (1, 128, "mqa")
    assert (spec.position_embedding, spec.max_context, spec.norm) == ("learned", 2048, "layernorm")
    assert spec.tied_embeddings and spec.dropout and spec.ffn_activation == "gelu"
    assert spec.attention_bias and spec.attention_output_bias and spec.mlp_bias
    assert not spec.parallel_block and spec.ffn_hidden_size == 8192
    # D 2048, 16 heads of 128, F 8192, V 49280: attention 2 D^2 + 2 x 128 D + biases (2 D +
    # 256) = 8,917,248; MLP 2 D F + F + D = 33,564,672; two LayerNorms 8,192: 42,490,112 a
    # layer, x 24 = 1,019,762,688; tied embedding V D = 100,925,440 and 2048 learned positions
    # x D = 4,194,304; final norm 4,096. bigcode/santacoder card: 1.1B parameters
    assert embedding_params(spec) == 105_119_744
    assert total_params(spec) == 1_124_886_528
    # GPTBigCodeConfig's defaults: multi_query, n_inner 4 x n_embd, the tanh GELU
    bare = _without(SANTACODER, "multi_query", "n_inner", "activation_function")
    assert model_from_hf_config(bare, name="santacoder") == spec
    mha = model_from_hf_config({**SANTACODER, "multi_query": False}, name="s")
    assert mha.num_kv_heads == 16
    assert total_params(mha) - total_params(spec) == 24 * 2 * (2048 + 1) * (2048 - 128)
    # the names of GPTBigCodeConfig's attribute_map read the same network
    renamed = {
        **_without(SANTACODER, "n_embd", "n_head", "n_layer", "n_positions"),
        "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 24,
        "max_position_embeddings": 2048,
    }  # fmt: skip
    assert model_from_hf_config(renamed, name="santacoder") == spec


def test_phi_against_the_phi_2_card() -> None:
    spec = model_from_hf_config(PHI_2, name="phi-2")
    # attention and MLP on one LayerNorm, 40% of each head rotated, biases everywhere, untied
    assert spec.parallel_block and spec.norm == "layernorm" and not spec.tied_embeddings
    assert (spec.rotary_fraction, spec.rope_theta, spec.num_kv_heads) == (0.4, 1e4, 32)
    assert spec.attention_bias and spec.attention_output_bias and spec.mlp_bias
    assert (spec.ffn_activation, spec.qk_norm, spec.dropout) == ("gelu", False, True)
    # D 2560, F 10240, V 51200: attention 4 D^2 + 4 D = 26,224,640; MLP 2 D F + F + D =
    # 52,441,600; one LayerNorm 5,120: 78,671,360 a layer, x 32 = 2,517,483,520; embedding and
    # output layer 2 V D = 262,144,000; final norm 5,120
    assert total_params(spec) == 2_779_632_640
    # microsoft/phi-2 card: 2.7 billion parameters; the hub's 2.78B counts the output layer's
    # bias as well (V = 51,200 values, not counted here)
    assert round((total_params(spec) + 51200) / 1e7) == 278
    # PhiConfig's defaults: half of each head rotated, no q/k norm, MHA, untied
    bare = _without(PHI_2, "partial_rotary_factor", "qk_layernorm", "num_key_value_heads")
    defaults = model_from_hf_config(_without(bare, "tie_word_embeddings"), name="phi-2")
    assert defaults == spec.model_copy(update={"rotary_fraction": 0.5})
    # qk_layernorm: the per-head norm on q and k, counted as RMSNorm's 2 x head_dim a layer
    normed = model_from_hf_config({**PHI_2, "qk_layernorm": True}, name="p")
    assert normed.qk_norm and total_params(normed) - total_params(spec) == 32 * 2 * 80


def _dbrx_with_ffn(**changes: object) -> dict[str, object]:
    """DBRX with ``changes`` to its ffn_config."""
    ffn = DBRX["ffn_config"]
    assert isinstance(ffn, dict)
    return {**DBRX, "ffn_config": {**ffn, **changes}}


def test_dbrx_against_its_model_card() -> None:
    spec = model_from_hf_config(DBRX, name="dbrx")
    moe = spec.moe
    assert moe is not None
    assert (moe.num_experts, moe.top_k, moe.expert_ffn_hidden_size) == (16, 4, 10752)
    assert moe.num_shared_experts == 0 and spec.ffn_hidden_size == 0 and spec.num_moe_layers == 40
    # DbrxRouter: softmax over the 16, the top 4 divided by their 1-norm (sum to one), no bias
    assert moe.router_score == "softmax" and moe.router_topk_norm
    assert not (moe.router_bias or moe.router_expert_bias)
    assert (spec.num_kv_heads, spec.head_dim, spec.rope_theta) == (8, 128, 5e5)
    assert (spec.ffn_activation, spec.norm, spec.max_context) == ("swiglu", "layernorm", 32768)
    assert not (spec.attention_bias or spec.attention_output_bias or spec.mlp_bias)
    assert not spec.tied_embeddings and not spec.parallel_block
    # D 6144, 48 heads of 128 in 8 groups, 16 experts of 10752, V 100352: attention D^2 + 2 x
    # 1024 D + D^2 = 88,080,384; one GLU expert 3 x D x 10752 = 198,180,864; router 16 D =
    # 98,304; two norms 24,576 (the spec's LayerNorm counts a bias DBRX's has not):
    # 3,259,097,088 a layer, x 40 = 130,363,883,520; embedding and output layer 2 V D =
    # 1,233,125,376; final norm 12,288. Active: 4 experts, 880,926,720 a layer
    assert total_params(spec) == 131_597_021_184
    assert active_params(spec) == 36_470_206_464
    # databricks/dbrx-base card: 132B total parameters, 36B active on any input
    assert round(total_params(spec) / 1e9) == 132 and round(active_params(spec) / 1e9) == 36
    # DbrxAttentionConfig's and DbrxFFNConfig's defaults: one key/value head, base 10,000, a
    # SiLU GLU expert, the top-k weights renormalised
    bare = model_from_hf_config({**DBRX, "attn_config": None}, name="d")
    assert (bare.num_kv_heads, bare.rope_theta) == (1, 10000.0)
    spelled = _dbrx_with_ffn(ffn_act_fn={"name": "silu"}, moe_normalize_expert_weights=1)
    assert model_from_hf_config(spelled, name="dbrx") == spec
    unnormalised = model_from_hf_config(_dbrx_with_ffn(moe_normalize_expert_weights=None), name="d")
    assert unnormalised.moe is not None and not unnormalised.moe.router_topk_norm
    gelu = _dbrx_with_ffn(ffn_act_fn={"name": "gelu", "approximate": "tanh"})
    assert model_from_hf_config(gelu, name="d").ffn_activation == "geglu"


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (_dbrx_with_ffn(moe_normalize_expert_weights=2.0), "not by another p-norm"),
        (_dbrx_with_ffn(ffn_act_fn={"name": "relu"}), "ffn_act_fn.name 'relu' is not supported"),
        (_dbrx_with_ffn(ffn_act_fn="silu"), "ffn_act_fn must be an object"),
        ({**DBRX, "ffn_config": [16, 4]}, "ffn_config must be an object"),
        ({**DBRX, "tie_word_embeddings": True}, "tie_word_embeddings true cannot be expressed"),
        ({**FALCON_7B, "activation": "swiglu"}, "activation 'swiglu' is not supported"),
    ],
)
def test_new_families_refuse_in_one_line(config: dict[str, object], words: str) -> None:
    with pytest.raises(SpecError, match=re.escape(words)) as err:
        model_from_hf_config(config, name="m")
    assert "\n" not in str(err.value) and str(err.value).startswith("m: ")


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (PYTHIA_12B, "intermediate_size"),
        (FALCON_7B, "vocab_size"),
        (FALCON_40B, "num_attention_heads"),
        (SANTACODER, "n_positions"),
        (PHI_2, "max_position_embeddings"),
        (DBRX, "d_model"),
        # the expert sizes are required, as every family's sizes are (DbrxFFNConfig's are a toy's)
        (_without(DBRX, "ffn_config"), "ffn_config.moe_num_experts"),
    ],
)
def test_new_families_name_a_missing_key(config: dict[str, object], key: str) -> None:
    with pytest.raises(SpecError, match=re.escape(f"lacks '{key}'")) as err:
        model_from_hf_config(_without(config, key), name="m")
    assert "\n" not in str(err.value) and str(err.value).startswith("m: ")


def test_new_families_are_read_by_their_architectures() -> None:
    cases = [(PYTHIA_12B, "gpt_neox"), (FALCON_7B, "falcon"), (SANTACODER, "gpt_bigcode")]
    cases += [(PHI_2, "phi"), (DBRX, "dbrx")]
    for config, family in cases:
        spec = model_from_hf_config({**config, "model_type": "custom"}, name="m")
        assert spec.family == family and "read as" in spec.source


def _as_transformers_5(config: dict[str, object], **extra: object) -> dict[str, object]:
    """``config`` as transformers 5 saves it: ``rope_theta`` and ``rope_scaling`` folded into
    one ``rope_parameters`` mapping (its ``rope_type`` "default" without scaling)."""
    scaling = config.get("rope_scaling") or {"rope_type": "default"}
    params = {**scaling, "rope_theta": config["rope_theta"], **extra}  # type: ignore[dict-item]
    return {**_without(config, "rope_theta", "rope_scaling"), "rope_parameters": params}


def test_transformers_5_rope_parameters_read_as_the_legacy_keys() -> None:
    """A config saved by transformers 5 has no top-level rope_theta or rope_scaling: read
    without rope_parameters, Llama 3.1 70B would be RoPE at base 10,000 and no llama3 scaling,
    which the export would then spell (--rotary-base 10000)."""
    for config, name in ((LLAMA_3_1_70B, "llama-3.1-70b"), (GPT_OSS_120B, "gpt-oss-120b"),
                         (QWEN3_8B, "qwen3-8b")):  # fmt: skip
        legacy = model_from_hf_config(config, name=name)
        assert model_from_hf_config(_as_transformers_5(config), name=name) == legacy
    v5 = model_from_hf_config(_as_transformers_5(LLAMA_3_1_70B), name="l")
    assert v5.rope_theta == 500000.0 and v5.rope_scaling is not None
    assert (v5.rope_scaling.kind, v5.rope_scaling.factor) == ("llama3", 8.0)
    # YaRN's attention factor comes from the same mapping: 0.1 ln(32) + 1 for gpt-oss's 32x
    assert model_from_hf_config(
        _as_transformers_5(GPT_OSS_120B), name="g"
    ).rope_attention_factor == (pytest.approx(1.3466, abs=1e-4))
    # multimodal RoPE's split of the rotated dimensions changes nothing; the rotated share is read
    mrope = _as_transformers_5(QWEN3_8B, mrope_section=[24, 20, 20], partial_rotary_factor=0.5)
    spec = model_from_hf_config(mrope, name="q")
    assert spec.rotary_fraction == 0.5 and spec.rope_scaling is None and spec.rope_theta == 1e6


def test_rope_parameters_per_layer_type_and_contradictions() -> None:
    per_layer = {
        **_without(QWEN3_8B, "rope_theta", "rope_scaling"),
        "rope_parameters": {
            "full_attention": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                               "original_max_position_embeddings": 32768},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    }  # fmt: skip
    spec = model_from_hf_config(per_layer, name="q")  # the global layers' entry
    assert spec.rope_theta == 1e6 and spec.rope_scaling is not None
    assert (spec.rope_scaling.kind, spec.rope_scaling.factor) == ("yarn", 4.0)
    same = {**per_layer, "rope_parameters": {"a": {"rope_theta": 2e6}, "b": {"rope_theta": 2e6}}}
    assert model_from_hf_config(same, name="q").rope_theta == 2e6
    refusals = [
        ({**per_layer, "rope_parameters": {"a": {"rope_theta": 1e6}, "b": {"rope_theta": 1e4}}},
         "gives layer types \\['a', 'b'\\] different RoPE"),
        ({**_as_transformers_5(QWEN3_8B), "rope_theta": 5e5}, "rope_theta 500000.0 contradicts"),
        ({**_as_transformers_5(LLAMA_3_1_70B), "rope_scaling": {"rope_type": "linear",
                                                               "factor": 2.0}},
         "rope_scaling contradicts rope_parameters"),
        ({**QWEN3_8B, "rope_parameters": "yarn"}, "rope_parameters must be an object"),
    ]  # fmt: skip
    for config, message in refusals:
        with pytest.raises(SpecError, match=message) as err:
            model_from_hf_config(config, name="qwen3-8b")
        assert "\n" not in str(err.value) and str(err.value).startswith("qwen3-8b: ")
    # the same value given in both places is no contradiction
    both = {**_as_transformers_5(QWEN3_8B), "rope_theta": 1000000}
    assert model_from_hf_config(both, name="q").rope_theta == 1e6


QWEN3_VL_ROPE: dict[str, object] = {
    "rope_scaling": {
        "mrope_interleaved": True,
        "mrope_section": [24, 20, 20],
        "rope_type": "default",
    },
    "rope_theta": 5000000,
}
"""The RoPE keys every Qwen3-VL text_config below gives, alike: M-RoPE over 64 of a 128-wide
head's frequency pairs, split 24 / 20 / 20 over time, height and width, at base 5,000,000."""

# https://huggingface.co/Qwen/Qwen3-VL-4B-Instruct/blob/main/config.json, its text_config (the
# copy a public training script passes to Qwen3VLConfig, transformers_version 4.57.0.dev0)
QWEN3_VL_4B_TEXT: dict[str, object] = {
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "dtype": "bfloat16",
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2560,
    "initializer_range": 0.02,
    "intermediate_size": 9728,
    "max_position_embeddings": 262144,
    "model_type": "qwen3_vl_text",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    **QWEN3_VL_ROPE,
    "tie_word_embeddings": True,
    "use_cache": True,
    "vocab_size": 151936,
}

QWEN3_30B_A3B_ARCHITECTURE = (
    "attention_bias", "decoder_sparse_step", "head_dim", "hidden_size", "intermediate_size",
    "mlp_only_layers", "moe_intermediate_size", "norm_topk_prob", "num_attention_heads",
    "num_experts", "num_experts_per_tok", "num_hidden_layers", "num_key_value_heads",
    "rms_norm_eps", "vocab_size",
)  # fmt: skip
"""The keys Qwen3-VL-30B-A3B's text_config gives with Qwen3-30B-A3B's values (checked key by key
against the transcription below): the same network, with its own context and RoPE."""

# https://huggingface.co/Qwen/Qwen3-VL-30B-A3B-Instruct/blob/main/config.json: its text_config as a
# public parser test transcribes it from the release (commit 1fc78ad; the keys it reads): fifteen
# keys with Qwen3-30B-A3B's values, and these four of its own; the wrapper's tie_word_embeddings
# (false) is outside it, and the test below adds it
QWEN3_VL_30B_A3B_TEXT: dict[str, object] = {
    **{k: QWEN3_30B_A3B[k] for k in QWEN3_30B_A3B_ARCHITECTURE},
    "max_position_embeddings": 262144,
    "model_type": "qwen3_vl_moe_text",
    **QWEN3_VL_ROPE,
}


def test_qwen3_vl_language_models_are_qwen3_decoders() -> None:
    """Qwen3-VL's decoders are Qwen3-4B's and Qwen3-30B-A3B's networks (their model cards: 4.0B,
    3.6B without embeddings; 30.5B total, 3.3B active), M-RoPE's section split changing nothing
    a step costs."""
    dense = model_from_hf_config(QWEN3_VL_4B_TEXT, name="qwen3-vl-4b")
    assert dense.qk_norm and dense.tied_embeddings and dense.sliding_window is None
    assert (dense.head_dim, dense.num_kv_heads, dense.rope_theta) == (128, 8, 5e6)
    # 36 x (2560 x (4096 + 2 x 1024) + 4096 x 2560 attention + 3 x 2560 x 9728 MLP) = 3.61B,
    # and the 0.39B tied embedding: 4.02B
    assert round((total_params(dense) - embedding_params(dense)) / 1e8) == 36
    assert round(total_params(dense) / 1e8) == 40
    wrapped = {**QWEN3_VL_30B_A3B_TEXT, "tie_word_embeddings": False}
    moe_model = model_from_hf_config(wrapped, name="qwen3-vl-30b-a3b")
    moe = moe_model.moe
    assert moe is not None and moe_model.ffn_hidden_size == 0
    assert (moe.num_experts, moe.top_k, moe.expert_ffn_hidden_size) == (128, 8, 768)
    assert moe.router_topk_norm and moe_model.sliding_window is None
    # 48 x (128 x 3 x 2048 x 768 experts + 2048 x 8192 + 4096 x 2048 attention) = 29.9B, and the
    # untied 0.62B embedding and output layer: 30.5B; the catalog's Qwen3-30B-A3B, the same
    # network, counts the same total and active parameters (3.35B; its card says 3.3B)
    assert round(total_params(moe_model) / 1e8) == 305
    catalog = load_model("qwen3-30b-a3b")
    assert total_params(moe_model) == total_params(catalog)
    assert active_params(moe_model) == active_params(catalog)
    # the router always renormalises (Qwen3VLMoeTextTopKRouter): a false norm_topk_prob is moot
    unnormed = {**wrapped, "norm_topk_prob": False}
    assert model_from_hf_config(unnormed, name="q") == moe_model.model_copy(update={"name": "q"})
    for config, key in ((_without(QWEN3_VL_4B_TEXT, "head_dim"), "head_dim"),
                        (QWEN3_VL_30B_A3B_TEXT, "tie_word_embeddings")):  # fmt: skip
        with pytest.raises(SpecError, match=f"lacks '{key}'.*write it out") as err:
            model_from_hf_config(config, name="q")
        assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("model_type", "text_type"),
    [("qwen3_vl", "qwen3_vl_text"), ("qwen3_vl_moe", "qwen3_vl_moe_text"), ("mistral3", "mistral")],
)
def test_vision_language_wrappers_name_their_text_type(model_type: str, text_type: str) -> None:
    wrapper = {"model_type": model_type, "text_config": dict(QWEN3_VL_4B_TEXT)}
    with pytest.raises(SpecError, match=f"as a {text_type} config.json") as err:
        model_from_hf_config(wrapper, name="w")
    assert "\n" not in str(err.value) and "vision encoder is not planned" in str(err.value)


@pytest.mark.parametrize("model_type", ["qwen3_5", "qwen3_5_moe", "qwen3_5_text"])
def test_qwen3_5_hybrid_layers_are_refused(model_type: str) -> None:
    with pytest.raises(SpecError, match="Gated DeltaNet") as err:
        model_from_hf_config({**QWEN3_8B, "model_type": model_type}, name="q")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({**LLAMA_3_1_70B, "rope_scaling": {"rope_type": ["yarn"], "factor": 2.0}},
         "rope_scaling type \\['yarn'\\] is not supported"),
        ({**QWEN3_8B, "rope_parameters": {"rope_type": {"a": 1}, "rope_theta": 1000000}},
         "rope_scaling type \\{'a': 1\\} is not supported"),
        # a flat mapping whose rope_type is an object is not read as one layer type's entry
        ({**QWEN3_8B, "rope_parameters": {"rope_type": {"yarn": 1}}},
         "rope_scaling type \\{'yarn': 1\\} is not supported"),
        ({**DEEPSEEK_V3, "quantization_config": {"quant_method": ["fp8"]}},
         "quant_method must be a text, got \\['fp8'\\]"),
        ({**GPT_OSS_120B, "quantization_config": {"quant_method": "mxfp4",
                                                  "modules_to_not_convert": 1.5}},
         "modules_to_not_convert must be a list, got 1.5"),
        ({**DEEPSEEK_V3, "quantization_config": {"quant_method": "modelopt", "quant_algo": []}},
         "modelopt quant_algo \\[\\] is not supported"),
        ({**LLAMA_4_SCOUT_TEXT, "num_hidden_layers": 10**30},
         "num_hidden_layers \\(1000000000000000000000000000000\\) exceeds the 16,384 layers"),
        ({**ERNIE_4_5_21B_A3B, "num_hidden_layers": 10**12}, "exceeds the 16,384 layers"),
    ],
)  # fmt: skip
def test_hostile_values_are_one_line_refusals(config: dict[str, object], message: str) -> None:
    """Values of the wrong kind where a text or a list belongs, and layer counts no model has,
    are refused in one line naming the key (found by feeding every config here every key's
    wrong kinds: these were TypeErrors, or a loop over 10^30 layers)."""
    with pytest.raises(SpecError, match=message) as err:
        model_from_hf_config(config, name="m")
    assert "\n" not in str(err.value) and str(err.value).startswith("m: ")


# https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/config.json as transformers 4.54
# saves it: its text_config (the copy Qwen-Image's text encoder builds its Qwen2_5_VLConfig from,
# less the per-layer layer_types list, 28 x "full_attention", and the token ids)
QWEN2_5_VL_7B_TEXT: dict[str, object] = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "attention_dropout": 0.0,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "max_position_embeddings": 128000,
    "max_window_layers": 28,
    "model_type": "qwen2_5_vl_text",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"mrope_section": [16, 24, 24], "rope_type": "default", "type": "default"},
    "rope_theta": 1000000.0,
    "sliding_window": None,
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 152064,
}


def test_qwen2_5_vl_language_model_is_qwen2_5_7b() -> None:
    """Qwen2.5-VL-7B's decoder is Qwen2.5-7B's network (its model card: 7.61B parameters, 6.53B
    without the untied embedding and output layer): Qwen2's layer, biases on q, k and v."""
    spec = model_from_hf_config(QWEN2_5_VL_7B_TEXT, name="qwen2.5-vl-7b")
    assert spec.attention_bias and not spec.attention_output_bias and not spec.tied_embeddings
    assert spec.sliding_window is None and spec.rope_theta == 1e6 and spec.rope_scaling is None
    # 28 x (3584 x (3584 + 2 x 512 + 3584) attention + 4,608 q/k/v biases + 3 x 3584 x 18944
    # MLP + two norms) = 28 x 233.07M = 6.53B, and 2 x 152064 x 3584 = 1.09B untied: 7.62B
    assert round((total_params(spec) - embedding_params(spec)) / 1e7) == 653
    assert round(total_params(spec) / 1e7) == 762
    # the first releases wrote M-RoPE as rope type "mrope" (read as plain RoPE, as transformers
    # does) and could leave rope_theta to the class, whose default is 1,000,000
    first = {**_without(QWEN2_5_VL_7B_TEXT, "rope_theta"),
             "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}  # fmt: skip
    assert model_from_hf_config(first, name="qwen2.5-vl-7b") == spec
    # a Qwen2-VL text config maps alike
    assert model_from_hf_config({**first, "model_type": "qwen2_vl_text"}, name="qwen2.5-vl-7b") == (
        spec.model_copy(
            update={
                "family": "qwen2_vl_text",
                "source": spec.source.replace("qwen2_5_vl_text", "qwen2_vl_text"),
            }
        )
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        # the first Qwen2.5-VL releases: the language model's keys at the top level
        ({**QWEN2_5_VL_7B_TEXT, "model_type": "qwen2_5_vl"},
         "its language model's keys at the top level: save it with model_type qwen2_5_vl_text"),
        # transformers 4.54 on: the keys in text_config
        ({"model_type": "qwen2_5_vl", "text_config": QWEN2_5_VL_7B_TEXT},
         "save its text_config.*as a qwen2_5_vl_text config.json"),
        ({"model_type": "qwen2_vl", "text_config": QWEN2_5_VL_7B_TEXT},
         "as a qwen2_vl_text config.json"),
    ],
)  # fmt: skip
def test_qwen2_vl_wrappers_say_what_to_save(config: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        model_from_hf_config(config, name="w")
    assert "\n" not in str(err.value) and "vision encoder is not planned" in str(err.value)
