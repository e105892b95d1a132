"""Held-out check on NVIDIA's Megatron-Core MoE team's own Qwen3-235B-A22B runs on 256 H100 (run by
hand, a few seconds):

    python benchmarks/heldout_moe_zoo.py

Nothing is fitted on these rows. Measurements: yanring/Megatron-MoE-ModelZoo (the Megatron-Core MoE
model zoo: "production-ready training recipes ... built on Megatron-Core"), commit e865051 (HEAD,
2026-05-16), best_practice/qwen3/readme.md, "Performance Results", "H100": 256 H100 (NVLink 4,
InfiniBand 8 x 50 GB/s), BF16, 4,096-token sequences, GBS 2048, one step time per row;
tokens/s/GPU = 2048 x 4096 / (step x 256) [D]. The Qwen3-Next-80B-A3B row (gated DeltaNet
layers, which the planner has no architecture for) is left out, and so are the long-context and
GB200 / GB300 tables, which print TFLOP/s only (their FLOP count is the code's, not stated).

Settings every row shares, read from the same commit: the model's training config
(model_configs/benchmarking/Qwen3-235B-A22B.yaml: the distributed optimizer, overlapped gradient
reduce and parameter gather, sequence parallelism, expert TP 1, TE cross-entropy fusion, the
embedding and the loss each taking a layer's slot in the pipeline split, grouped GEMMs, permute and
router fusion) and sbatch_benchmarking.sh (BF16 adds ``--tp-comm-overlap``; ``DISPATCHER=deepep``
is the flex dispatcher's DeepEP backend, which sends a token once to each rank, ``alltoall`` the
plain all-to-all; ``A2A_OVERLAP=1`` adds ``--overlap-moe-expert-parallel-comm
--delay-wgrad-compute``). The gradients reduce in fp32 (``--bf16`` without
``--grad-reduce-in-bf16``). The table's "recompute" column: "norm, act" is selective recompute of
``layernorm`` and ``moe_act``; "full" full recompute; empty none. Not stated, taken as the
planner's defaults [U]: the router's load balance (dropless, the planner's balanced default; the
readme's commands add ``--moe-router-force-load-balancing`` "for benchmark"), and CUDA graphs (none
stated in the table; the current script graphs the router and preprocessing, which leaves the MoE
layer's host sync: ``planner.accuracy.rows.moe_layer_graphed``).
"""

from __future__ import annotations

from heldout import Row, predict_rows, step_tokens_per_s_per_gpu

EVERY = {
    "seq_len": 4096,
    "global_batch": 2048,
    "precision": "bf16",
    "tp_comm_overlap": True,
    "cross_entropy": "te",
    "moe_host_sync": True,
}
"""What every row sets (module docstring)."""
DEEPEP = {**EVERY, "moe_dispatch_dedup": True}
"""The flex dispatcher's DeepEP backend: a token once to each rank."""
NORM_ACT = {"recompute_modules": ("layernorm", "moe_act")}
"""The table's "norm, act": selective recompute of the norms and the experts' activation."""
SLOTS = {
    "account_for_embedding_in_pipeline_split": True,
    "account_for_loss_in_pipeline_split": True,
}
"""The model config's embedding and loss slots (94 layers + 2 = 96 slots over pp x vpp chunks)."""
MODEL, CLUSTER = "qwen3-235b-a22b", "hgx_h100x256"


def tokens_per_s_per_gpu(step_s: float) -> float:
    """The table's step time as tokens/s/GPU: 2048 x 4096 tokens over 256 GPUs."""
    return step_tokens_per_s_per_gpu(2048, 4096, step_s, 256)


ROWS: list[Row] = [
    # "Cross-node EP strategy", DeepEP, TP 2, EP 32, PP 8, VPP 4, DP 16, MBS 1, GA 128, "norm,
    # act", 19.7 s, 245 TF/GPU (Megatron-LM moe_dev f3e6c5)
    ("ZQ1", MODEL, CLUSTER, {**DEEPEP, **NORM_ACT},
     {"tp": 2, "pp": 8, "vpp": 4, "ep": 32, "cp": 1, "mbs": 1, "recompute": "selective",
      "pipeline_split": SLOTS}, tokens_per_s_per_gpu(19.7)),
    # the same with "+1f1b overlap" (A2A_OVERLAP=1): 17.6 s, 276 TF/GPU
    ("ZQ2", MODEL, CLUSTER, {**DEEPEP, **NORM_ACT, "ep_comm_overlap": True},
     {"tp": 2, "pp": 8, "vpp": 4, "ep": 32, "cp": 1, "mbs": 1, "recompute": "selective",
      "pipeline_split": SLOTS}, tokens_per_s_per_gpu(17.6)),
    # "Intra-node EP strategy", DeepEP, TP 2, EP 8, PP 1, EDP 32, DP 128, FSDP On (Megatron FSDP:
    # parameters, gradients and optimizer sharded), MBS 4, GA 4, full recompute, 17.6 s, 276 TF/GPU
    # (main 1e057005)
    ("ZQ3", MODEL, CLUSTER, {**DEEPEP},
     {"tp": 2, "pp": 1, "vpp": 1, "ep": 8, "cp": 1, "mbs": 4, "recompute": "full", "zero": 3},
     tokens_per_s_per_gpu(17.6)),
    # A2A dispatcher, TP 2, EP 8, PP 32, VPP 3 (96 chunks, one slot each), DP 4, MBS 1, GA 512,
    # "norm, act", 24.2 s, 200 TF/GPU (main 1e057005)
    ("ZQ4", MODEL, CLUSTER, {**EVERY, **NORM_ACT},
     {"tp": 2, "pp": 32, "vpp": 3, "ep": 8, "cp": 1, "mbs": 1, "recompute": "selective",
      "pipeline_split": SLOTS}, tokens_per_s_per_gpu(24.2)),
    # DeepEP, TP 4, EP 8, PP 8, VPP 4, DP 8 (EDP 4), MBS 1, GA 256, no recompute, 29.0 s,
    # 167 TF/GPU (main 1e057005)
    ("ZQ5", MODEL, CLUSTER, {**DEEPEP},
     {"tp": 4, "pp": 8, "vpp": 4, "ep": 8, "cp": 1, "mbs": 1, "recompute": "none",
      "pipeline_split": SLOTS}, tokens_per_s_per_gpu(29.0)),
]  # fmt: skip


def main() -> None:
    predict_rows(ROWS, {}, id_width=5, layout_width=48)


if __name__ == "__main__":
    main()
