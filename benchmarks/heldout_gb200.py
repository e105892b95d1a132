"""Held-out check on MoE runs of parts the calibration has no MoE rows for: NVIDIA's GB200 NVL72 MoE runs of
the 26.08 NeMo container (run by hand, a few seconds):

    python benchmarks/heldout_gb200.py

These rows are not in tests/validation/ and nothing is fitted on them: the blackwell family's
factors were fitted on HGX B200 rows and three dense GB200/GB300 rows (NGB1-3), no MoE
run on those parts, and GB200 differs in its 72-GPU NVLink domain (EP 32-64
stays on NVLink). Source of the measurements: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md
(snapshot 067f987d, 2026-08-22), '26.08 NeMo Container', DGX-GB200 rows. Settings from the recipes
of the same snapshot, src/megatron/bridge/perf_recipes/<family>/gb200/: every MXFP8 MoE config
applies a full-iteration CUDA-graph helper (``_apply_gpt_oss_120b_full_iter_fp8mx_configs``,
``_enable_deepseek_full_iteration_mxfp8``, ``_enable_hybridep_full_iteration_mxfp8``: HybridEP
dispatch, ``overlap_moe_expert_parallel_comm``, no host sync), bf16 gradient reduction.
"""

from __future__ import annotations

from heldout import Row, predict_rows

FRAMEWORK = {
    "moe_dispatch_dedup": True,
    "ep_comm_overlap": True,
    "moe_host_sync": False,
    "grad_reduce_dtype": "bf16",
    "precision": "mxfp8",
}
"""What the GB200 MXFP8 recipes set (module docstring)."""

ROWS: list[Row] = [
    # (id, model, cluster, workload, layout, measured tokens/s/GPU)
    ("DSV3", "671B", "gb200_nvl72x256", {"seq_len": 4096, "global_batch": 4096,
     "recompute_modules": ("mla_up_proj",)},
     {"tp": 1, "pp": 4, "vpp": 4, "ep": 64, "mbs": 1, "recompute": "selective"}, 4912.0),
    ("GPT-OSS", "gpt-oss-120b", "gb200_nvl72x64", {"seq_len": 4096, "global_batch": 1280,
     "recompute_modules": ("layernorm", "moe_act")},
     {"tp": 1, "pp": 1, "ep": 64, "mbs": 4, "recompute": "selective"}, 28672.0),
    ("Q30B", "qwen3-30b-a3b", "gb200_nvl72x8", {"seq_len": 4096, "global_batch": 512},
     {"tp": 1, "pp": 1, "ep": 8, "mbs": 4, "recompute": "none"}, 39936.0),
    ("Q235B", "qwen3-235b-a22b", "gb200_nvl72x256", {"seq_len": 4096, "global_batch": 8192},
     {"tp": 1, "pp": 8, "vpp": 3, "ep": 32, "mbs": 1, "recompute": "none"}, 7280.0),
]  # fmt: skip


def main() -> None:
    """Predict each row (:func:`heldout.predict_rows`)."""
    predict_rows(ROWS, FRAMEWORK, id_width=8, layout_width=45)


if __name__ == "__main__":
    main()
