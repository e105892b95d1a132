"""Held-out check on MoE runs of parts the calibration has no MoE rows for: NVIDIA's DGX-GB300, DGX-GB200 and
DGX-B300 MoE runs of the 26.04.01 NeMo container (run by hand, a few seconds):

    python benchmarks/heldout_blackwell_2604.py

These rows are not in tests/validation/ and nothing is fitted on them: the blackwell family's
factors were fitted on HGX B200 rows and three dense GB200/GB300 rows (NGB1-3), no MoE
run on those parts (the same tables' DGX-B200 and DGX-H100 rows are in the
calibration set, N13-N21, and are left out here). GB300 and GB200 differ in their 72-GPU NVLink
domain (EP 32-64 stays on NVLink), B300 and GB300 in their Blackwell Ultra GPUs. Source of the
measurements: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md (snapshot
067f987d, 2026-08-22), '26.04.01 NeMo Container', Pre-Training, DGX-GB300 / DGX-GB200 / DGX-B300
rows of DeepSeekV3, GPT OSS 120B, Qwen3_30B_a3B and Qwen3_235B_a22B (degrees and Tokens / sec /
GPU as the tables give them; VP n/a = 1). Settings from tag v0.4.2 (2026-05-28) of the same
repository, scripts/performance/configs/<family>/: the V2 config of the table's precision (its GBS
checked against the table; Qwen3-30B-A3B has no V2 on these GPUs and ``get_workload_base_config``
falls back to V1, GBS 512 as in the table), the family's ``*_llm_pretrain.py`` and
src/megatron/bridge/recipes/<family>/ for what the configs leave to the recipe.

What every row shares: all three ``*_llm_pretrain.py`` set ``grad_reduce_in_fp32 = False`` (bf16
gradient reduction); every config sets ``expert_tensor_parallel_size`` 1 and uses the distributed
optimizer (ZeRO-1); no config uses ``cuda_graph_impl`` "full_iteration" or a full-layer scope (the
scopes are [], attn / moe_router / moe_preprocess, or none), so under the validation rows' rule
(``planner.accuracy.rows.moe_layer_graphed``, which each row's scope is checked against) the MoE
layer keeps its per-layer host sync in every row. ``_set_common_perf_overrides``
(scripts/performance/utils/overrides.py) sets ``cross_entropy_fusion_impl = "te"`` on every model
after the recipe, so GPT-OSS's recipe value "native" does not reach these runs: every row uses the
workload default ``te``. Each row records the config it was read from.

The pipeline splits are the runs' own, scored as given (``layout estimate
--pipeline-model-parallel-layout``; 2026-12-05, twenty-ninth session: until then the planner split
these layers itself and the MTP module was left out): DeepSeek-V3's ``pp_layout`` (GB300: the
config's "Et*4|(t*4|)*14tmL", 4 layers per virtual stage and 1 + MTP + loss in the last; GB200 and
B300: the recipe's ``set_deepseek_v3_pipeline_model_parallel_layout`` map for (4, 4), the same
string, and for (8, 1), "Et*8|(t*8|)*6t*5mL", as read in the search index's copy of
recipes/deepseek/deepseek_v3.py [U: that v0.4.2 holds the same map]) with its MTP layer
(``mtp_num_layers`` 1; its bf16 Adam moments are ``optimizer_state_dtype``), and Qwen3-235B's
``account_for_embedding/loss_in_pipeline_split`` (96 slots over 94 layers). Not expressible:
HybridEP's SM reservation (``moe_hybridep_num_sms`` 32); the partial CUDA graphs over attention
and the router.
"""

from __future__ import annotations

from heldout import Row, host_sync_by_graph_scope, predict_rows

FRAMEWORK = {
    "grad_reduce_dtype": "bf16",
    "seq_len": 4096,
}
"""What every 26.04.01 MoE config sets (module docstring)."""

HYBRIDEP = {"moe_dispatch_dedup": True, "ep_comm_overlap": False}
"""``moe_flex_dispatcher_backend="hybridep"``, ``moe_a2a_overlap`` False."""

# DeepSeek-V3: deepseek_llm_pretrain.py sets recompute_granularity "selective"; the recipe
# (recipes/deepseek/deepseek_v3.py) sets CommOverlapConfig(tp_comm_overlap=False), MTP 1 layer.
DSV3 = {
    **HYBRIDEP,
    "global_batch": 4096,
    "precision": "mxfp8",
    "tp_comm_overlap": False,
    "optimizer_state_dtype": "bf16",  # deepseek_v3.py: precision-aware optimizer, bf16 moments
    "mtp_num_layers": 1,
}
DSV3_16_STAGES = "Et*4|(t*4|)*14tmL"
"""The GB300 config's ``pp_layout`` and the recipe's map for (pp 4, vpp 4)."""
QWEN_SLOTS = {
    "account_for_embedding_in_pipeline_split": True,
    "account_for_loss_in_pipeline_split": True,
}
"""Qwen3-235B's recipe: the embedding and the loss each take a layer's slot."""
# GPT-OSS 120B: no recompute in the recipe (recompute_granularity None) unless the config lists
# modules; comm_overlap None (GB300, B300) or CommOverlapConfig(tp_comm_overlap=tp > 1) (GB200).
GPT_OSS = {"global_batch": 1280, "precision": "bf16", "tp_comm_overlap": False}
# Qwen3: qwen3_llm_pretrain.py sets recompute_granularity None and
# CommOverlapConfig(tp_comm_overlap=True), dispatcher "flex" with the config's backend.
PARTIAL = ("attn", "moe_router", "moe_preprocess")
"""The partial CUDA-graph scope most configs set."""
ROUTER = ("moe_router", "moe_preprocess")
"""Qwen3-30B-A3B's scope."""
QWEN = {**HYBRIDEP, "precision": "mxfp8", "tp_comm_overlap": True}

ROWS: list[Row] = [
    # (id, model, cluster, workload (with the config's cuda_graph_scope), layout, measured)
    # DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_FP8_MX_V2 (= GB300_V1, GBS 4096): hybridep, no a2a
    # overlap, recompute_modules [mla_up_proj], cuda_graph_scope [] (impl none), pp_layout
    # "Et*4|(t*4|)*14tmL"
    ("DSV3-GB300", "deepseek-v3", "gb300_nvl72x256",
     {**DSV3, "recompute_modules": ("mla_up_proj",), "cuda_graph_scope": ()},
     {"tp": 1, "pp": 2, "vpp": 8, "ep": 32, "mbs": 2, "recompute": "selective",
      "pipeline_split": DSV3_16_STAGES}, 4992.0),
    # DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V2 (= GB200_V1, GBS 4096): hybridep, no a2a
    # overlap, recompute_modules [mlp], cuda_graph_scope attn/moe_router/moe_preprocess
    ("DSV3-GB200", "deepseek-v3", "gb200_nvl72x256",
     {**DSV3, "recompute_modules": ("mlp",), "cuda_graph_scope": PARTIAL},
     {"tp": 1, "pp": 4, "vpp": 4, "ep": 64, "mbs": 1, "recompute": "selective",
      "pipeline_split": DSV3_16_STAGES}, 4256.0),
    # DEEPSEEK_V3_PRETRAIN_CONFIG_B300_FP8_MX_V2 (= B300_V2): hybridep, no a2a overlap,
    # recompute_modules [mla_up_proj], cuda_graph_scope attn/moe_router/moe_preprocess, vpp None
    ("DSV3-B300", "deepseek-v3", "hgx_b300x256",
     {**DSV3, "recompute_modules": ("mla_up_proj",), "cuda_graph_scope": PARTIAL},
     {"tp": 1, "pp": 8, "vpp": 1, "ep": 8, "mbs": 2, "recompute": "selective",
      "pipeline_split": "Et*8|(t*8|)*6t*5mL"}, 3456.0),
    # GPT_OSS_120B_PRETRAIN_CONFIG_GB300_BF16_V2: alltoall (no flex backend), no a2a overlap,
    # no recompute, cuda_graph_scope attn/moe_router/moe_preprocess
    ("GPTOSS-GB300", "gpt-oss-120b", "gb300_nvl72x64",
     {**GPT_OSS, "moe_dispatch_dedup": False, "ep_comm_overlap": False,
      "cuda_graph_scope": PARTIAL},
     {"tp": 1, "pp": 1, "vpp": 1, "ep": 64, "mbs": 4, "recompute": "none"}, 19200.0),
    # GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2: alltoall, moe_a2a_overlap True,
    # recompute_modules [layernorm, moe_act], no CUDA graphs
    ("GPTOSS-GB200", "gpt-oss-120b", "gb200_nvl72x64",
     {**GPT_OSS, "moe_dispatch_dedup": False, "ep_comm_overlap": True,
      "recompute_modules": ("layernorm", "moe_act"), "cuda_graph_scope": ()},
     {"tp": 1, "pp": 1, "vpp": 1, "ep": 64, "mbs": 4, "recompute": "selective"}, 16640.0),
    # GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2: hybridep, no a2a overlap, no recompute,
    # cuda_graph_scope attn/moe_router/moe_preprocess
    ("GPTOSS-B300", "gpt-oss-120b", "hgx_b300x64",
     {**GPT_OSS, **HYBRIDEP, "cuda_graph_scope": PARTIAL},
     {"tp": 1, "pp": 1, "vpp": 1, "ep": 8, "mbs": 4, "recompute": "none"}, 15232.0),
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1 (= GB300_FP8_CS_V1; no V2): hybridep, no a2a
    # overlap, cuda_graph_scope moe_router/moe_preprocess
    ("Q30B-GB300", "qwen3-30b-a3b", "gb300_nvl72x8",
     {**QWEN, "global_batch": 512, "cuda_graph_scope": ROUTER},
     {"tp": 1, "pp": 1, "vpp": 1, "ep": 8, "mbs": 8, "recompute": "none"}, 31744.0),
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1 (no V2): hybridep, no a2a overlap,
    # cuda_graph_scope moe_router/moe_preprocess
    ("Q30B-GB200", "qwen3-30b-a3b", "gb200_nvl72x8",
     {**QWEN, "global_batch": 512, "cuda_graph_scope": ROUTER},
     {"tp": 1, "pp": 1, "vpp": 1, "ep": 8, "mbs": 4, "recompute": "none"}, 26112.0),
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1 (= B300_FP8_CS_V1; no V2): hybridep, no a2a
    # overlap, cuda_graph_scope moe_router/moe_preprocess
    ("Q30B-B300", "qwen3-30b-a3b", "hgx_b300x8",
     {**QWEN, "global_batch": 512, "cuda_graph_scope": ROUTER},
     {"tp": 1, "pp": 1, "vpp": 1, "ep": 8, "mbs": 8, "recompute": "none"}, 30720.0),
    # QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2 (= GB300_BF16_V2 with vpp 12): hybridep,
    # no a2a overlap, cuda_graph_scope attn/moe_router/moe_preprocess
    ("Q235B-GB300", "qwen3-235b-a22b", "gb300_nvl72x256",
     {**QWEN, "global_batch": 8192, "cuda_graph_scope": PARTIAL},
     {"tp": 1, "pp": 4, "vpp": 12, "ep": 32, "mbs": 2, "recompute": "none",
      "pipeline_split": QWEN_SLOTS}, 6944.0),
    # QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2 (= GB200_FP8_CS_V2 with vpp 3): hybridep,
    # no a2a overlap, cuda_graph_scope attn/moe_router/moe_preprocess
    ("Q235B-GB200", "qwen3-235b-a22b", "gb200_nvl72x256",
     {**QWEN, "global_batch": 8192, "cuda_graph_scope": PARTIAL},
     {"tp": 1, "pp": 8, "vpp": 3, "ep": 32, "mbs": 1, "recompute": "none",
      "pipeline_split": QWEN_SLOTS}, 5680.0),
    # QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2 (= B300_FP8_CS_V2): hybridep,
    # moe_a2a_overlap False, no CUDA graphs, vpp None
    ("Q235B-B300", "qwen3-235b-a22b", "hgx_b300x256",
     {**QWEN, "global_batch": 8192, "cuda_graph_scope": ()},
     {"tp": 1, "pp": 8, "vpp": 1, "ep": 8, "mbs": 2, "recompute": "none",
      "pipeline_split": QWEN_SLOTS}, 5936.0),
]  # fmt: skip


def main() -> None:
    """Predict each row (:func:`heldout.predict_rows`), its host sync decided by its CUDA-graph
    scope as for the validation rows (``planner.accuracy.rows.moe_layer_graphed``)."""
    rows = [
        (row_id, model, cluster, host_sync_by_graph_scope(workload), layout, measured)
        for row_id, model, cluster, workload, layout, measured in ROWS
    ]
    predict_rows(rows, FRAMEWORK, id_width=12, layout_width=50)


if __name__ == "__main__":
    main()
