"""Held-out check on NVIDIA NeMo AutoModel's own pre-training benchmarks on H100 (run by hand, a
few seconds):

    python benchmarks/heldout_automodel.py

Nothing is fitted on these rows, and no row of this framework is in the validation set: AutoModel
is a PyTorch-native trainer (FSDP2 ``fully_shard``, DTensor, ``torch.distributed.pipelining``)
with Transformer Engine's linear, RMSNorm and attention modules and DeepEP for the MoE dispatch.
Its rows run under its own profile (``topologies/frameworks/automodel.yaml``, which extends
torchtitan's and cites each setting), written from its code before these rows were scored.

Measurements: NVIDIA-NeMo/Automodel ``docs/performance-summary.md``, "Pre-Training Performance",
"System: DGX-H100, Precision: BF16" (added at commit 89e3a9fdd, 2025-10-06; the Llama 3.1 70B
row at 2013a4dd6, 2026-04-10): each row's step time ("Time per Global Step") and tokens/s/GPU,
which is GBS x sequence / (step x GPUs) [D: checked for every row]. The Nemotron V3 rows (hybrid
Mamba layers, no architecture in the planner) and the LoRA fine-tuning table are left out.

Layouts, from each row's benchmark config (``examples/benchmark/configs/*.yaml`` at 2c236e081,
2025-10-08, the commit that added the 1,024-GPU DeepSeek-V3 config the table lists; the Llama row
from ``examples/llm_pretrain/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml`` at 2013a4dd6):
FSDP2 over the data-parallel ranks (ZeRO-3; with pipeline parallelism the stage stays gathered and
gradients sync on the last micro-batch), experts over ``ep_size`` ranks carved from them,
``pp_schedule: interleaved1f1b`` with the table's VP, ``activation_checkpointing: true`` (every
decoder block checkpointed: full recomputation; GPT-OSS 120B sets it false). What a row sets beyond
the profile: GPT-OSS's ``attn: flex`` (FlexAttention's Triton kernels: ``flash2``) and the Llama
row's ``attn_implementation: sdpa`` (SDPA's flash kernel under PyTorch's context parallelism).

Where the table and the config disagree, the table's degrees are used and the row says so.
"""

from __future__ import annotations

from heldout import Row, predict_rows
from heldout import step_tokens_per_s_per_gpu as tokens_per_s_per_gpu

FRAMEWORK = {"framework": "automodel"}
"""AutoModel's profile (module docstring)."""
MOE = {"seq_len": 4096, "precision": "bf16"}
"""What every MoE row sets: 4,096-token sequences, BF16 (``attn: te`` is the profile's
attention; the GPT-OSS rows state theirs)."""
FLEX_ATTENTION = {"attention_kernel": "flash2"}
"""``attn: flex``: FlexAttention's Triton kernels."""


SPLIT_61_LAYERS_32_STAGES = "Ett|" + "tt|" * 28 + "t|t|tL"
"""The pipeline split the DeepSeek-V3 and Kimi K2 runs used, scored as given (a Megatron-LM
layout string: E the embedding, t a decoder layer, L the output layer and loss, | between model
chunks, chunk c on rank c mod pp). ``layers_per_stage: 2`` gives ceil(61 / 2) + 1 = 32 virtual
stages (``calculate_virtual_stages``), a multiple of PP 4 and of PP 8; the 61 layers are dealt
61 // 32 = 1 a stage plus one more to each of the first 61 % 32 = 29 stages, the embedding on
the first and the norm and LM head on the last (``generate_hf_model_fqn_per_model_part``),
``nemo_automodel/components/distributed/pipelining/functional.py`` at 2c236e081 [R]."""


ROWS: list[Row] = [
    # DeepSeek V3 671B, 256 GPUs, GBS 512, MBS 1, LBS 8, GA 1, TP 1 PP 4 EP 64 VP 8, FSDP 64,
    # 8.18 s, 1,002 tokens/s/GPU (deepseek_v3_te_deepep.yaml: layers_per_stage 2)
    ("AM1", "deepseek-v3", "hgx_h100x256", {**MOE, "global_batch": 512},
     {"tp": 1, "pp": 4, "vpp": 8, "ep": 64, "cp": 1, "mbs": 1, "recompute": "full", "zero": 3,
      "pipeline_split": SPLIT_61_LAYERS_32_STAGES},
     tokens_per_s_per_gpu(512, 4096, 8.18, 256)),
    # DeepSeek V3 671B, 1,024 GPUs, GBS 8192, MBS 1, LBS 8, GA 4, PP 4 EP 64 VP 8, FSDP 256,
    # 37.87 s, 865 (the config at 2c236e081 sets layers_per_stage 4, VP 4; the table's VP 8 is
    # used, which is the 256-GPU config's layers_per_stage 2 and its split)
    ("AM2", "deepseek-v3", "hgx_h100x1024", {**MOE, "global_batch": 8192},
     {"tp": 1, "pp": 4, "vpp": 8, "ep": 64, "cp": 1, "mbs": 1, "recompute": "full", "zero": 3,
      "pipeline_split": SPLIT_61_LAYERS_32_STAGES},
     tokens_per_s_per_gpu(8192, 4096, 37.87, 1024)),
    # Kimi K2, 256 GPUs, GBS 512, MBS 1, LBS 8, GA 2, PP 8 EP 32 VP 4, FSDP 32, 8.86 s, 924
    ("AM3", "kimi-k2", "hgx_h100x256", {**MOE, "global_batch": 512},
     {"tp": 1, "pp": 8, "vpp": 4, "ep": 32, "cp": 1, "mbs": 1, "recompute": "full", "zero": 3,
      "pipeline_split": SPLIT_61_LAYERS_32_STAGES},
     tokens_per_s_per_gpu(512, 4096, 8.86, 256)),
    # Qwen3 MoE 30B, 8 GPUs, GBS 512 (the config: 256), MBS 4, LBS 4, GA 16, EP 8, FSDP 8,
    # 22.14 s, 11,842 (the 2025-10-06 table; 21.773 s from 2026-01-28, after a norm fusion and a
    # RoPE cache)
    ("AM4", "qwen3-30b-a3b", "hgx_h100x8", {**MOE, "global_batch": 512},
     {"tp": 1, "pp": 1, "ep": 8, "cp": 1, "mbs": 4, "recompute": "full", "zero": 3},
     tokens_per_s_per_gpu(512, 4096, 22.14, 8)),
    # GPT-OSS 20B, 8 GPUs, GBS 256, MBS 2, LBS 2, GA 16, FSDP 8 (the table's EP "-"; the config
    # sets ep_size 8 and DeepEP), 10.04 s, 13,058
    ("AM5", "gpt-oss-20b", "hgx_h100x8", {**MOE, **FLEX_ATTENTION, "global_batch": 256},
     {"tp": 1, "pp": 1, "ep": 8, "cp": 1, "mbs": 2, "recompute": "full", "zero": 3},
     tokens_per_s_per_gpu(256, 4096, 10.04, 8)),
    # GPT-OSS 120B, 64 GPUs, GBS 512, MBS 2, LBS 2, GA 4, FSDP 64 (EP "-"; the config: ep_size 64,
    # activation_checkpointing false), 4.30 s, 7,626
    ("AM6", "gpt-oss-120b", "hgx_h100x64", {**MOE, **FLEX_ATTENTION, "global_batch": 512},
     {"tp": 1, "pp": 1, "ep": 64, "cp": 1, "mbs": 2, "recompute": "none", "zero": 3},
     tokens_per_s_per_gpu(512, 4096, 4.30, 64)),
    # Llama 3.1 70B, 64 GPUs, GBS 128, MBS 1, LBS 1, GA 4, 8,192-token sequences, CP 2, FSDP 32,
    # "TE + fsdp2_prefetch", 18.90 s, 866.77: activation_checkpointing, torch.compile
    # (enable_compile: the elementwise ops fused), attn_implementation sdpa (required for cp > 1:
    # PyTorch's context parallelism around SDPA's flash kernel), TE FusedAdam
    ("AM7", "llama3.1-70b", "hgx_h100x64",
     {"seq_len": 8192, "precision": "bf16", "global_batch": 128, "attention_kernel": "flash2"},
     {"tp": 1, "pp": 1, "cp": 2, "mbs": 1, "recompute": "full", "zero": 3},
     tokens_per_s_per_gpu(128, 8192, 18.90, 64)),
]  # fmt: skip


def main() -> None:
    predict_rows(ROWS, FRAMEWORK, id_width=4, layout_width=44)


if __name__ == "__main__":
    main()
