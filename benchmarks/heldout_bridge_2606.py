"""Held-out check on NVIDIA's Megatron-Bridge releases after the fitted ones: the 26.06, 26.06.01
and 26.08 NeMo-container pre-training tables on DGX-GB300, DGX-GB200, DGX-B300 and DGX-H100 (run by
hand, a few seconds):

    python benchmarks/heldout_bridge_2606.py

Nothing is fitted on these rows (the newest release in the fit is 26.04.01, the N and NGB rows of
tests/validation/training.yaml). Measurements: NVIDIA-NeMo/Megatron-Bridge at tag v0.6.0,
docs/performance-summary-archive.md ('26.06.01 NeMo Container', '26.06 NeMo Container') and
docs/performance-summary.md ('26.08 NeMo Container'), Pre-Training, degrees and Tokens / sec / GPU as
the tables give them (VP n/a = 1). Models the planner has no architecture for are left out (Kimi K2,
trained with Muon; Nemotron 3 Nano and Super, hybrid Mamba; DeepSeek-V4 Flash), and so are the
26.06.01 GPT-OSS 120B rows, which the table footnotes as a known cuDNN regression (GB300 20,288 and
GB200 18,304 tokens/s/GPU against 33,166 and 28,947 in 26.06, the same presets).

Settings, read per row from the code of the release: 26.06 -> tag v0.5.0 (2026-06-16; its
docs/releases/software-versions.md names Megatron-Bridge 0.5.0), 26.06.01 -> v0.5.1 (2026-07-20),
26.08 -> v0.6.0 (2026-08-19; the last two by date). In v0.5.x the launcher loads the
``WorkloadBaseConfig`` preset ``{MODEL}_PRETRAIN_CONFIG_{GPU}_{PRECISION}_{VARIANT}`` of
scripts/performance/configs/<family>/<family>_workload_base_configs.py, default variant "v2"
(scripts/performance/argument_parser.py), falling back to V1 where no V2 exists
(scripts/performance/utils/utils.py ``get_workload_base_config``: Qwen3-30B-A3B), then its
``*_llm_pretrain.py`` builder and utils/overrides.py; perf_plugins.py sets
``NVTE_CUTEDSL_FUSED_GROUPED_MLP`` from the preset's ``cutedsl_fused_grouped_mlp``. In v0.6.0 each
run is a flat recipe, src/megatron/bridge/perf_recipes/<family>/<gpu>/*.py, whose
``_benchmark_common`` turns the TE op fuser off and whose full-iteration helper
(``_enable_deepseek_full_iteration_mxfp8``, ``_apply_gpt_oss_120b_full_iter_fp8mx_configs``,
``_enable_hybridep_full_iteration_mxfp8``), called after it, turns it back on. Every preset's GBS,
MBS, TP, PP, CP, VP and EP were checked against its table row; each row's comment names it.

What every row shares: the distributed optimizer (ZeRO-1; no Megatron FSDP, no CPU offload in any
row here), expert tensor parallelism 1, bf16 gradient reduction (``grad_reduce_in_fp32`` False), TE
cross-entropy (the perf overrides replace GPT-OSS's "native"). Every MoE row routes with
``moe_router_force_load_balancing`` and dispatches through the flex dispatcher's HybridEP backend
(deduplicated, 32 SMs reserved). Every MXFP8 MoE run on GB300 and GB200, and the Qwen3 runs on B300,
is one full-iteration CUDA graph (no MoE host sync) with the expert-parallel all-to-all overlapped
(with delayed weight gradients) and the CuTeDSL fused grouped MLP; the other B300 MoE runs graph only
attention, router and preprocessing and overlap nothing. Not expressible in the planner's settings
(in the comments only): the experts padded to ``moe_expert_rank_capacity_factor`` 1.5 with paged
stashing that the full-iteration graphs use, FP8 attention, ``fp8_output_proj``, HybridEP's SM
reservation, NVFP4's 4-bit parameter all-gather (``fp4_param_gather``).

A Llama 3.1 405B split of 128 virtual stages over 126 layers, whose first stage holds only the
embedding and last only the loss (GB200, PP 16 x VP 8), was refused as "pp x vpp exceeds the layers"
until 2026-12-06; a given split now decides (``planner.search.rules.layout_violations``).
"""

from __future__ import annotations

from heldout import Row, host_sync_by_graph_scope, predict_row, print_summary, scored

from planner.catalog import load_cluster
from planner.errors import InfeasibleError, SpecError

EVERY = {"grad_reduce_dtype": "bf16", "cross_entropy": "te"}
"""What every row sets (module docstring)."""

# --- Llama 3.1 405B (llama31_workload_base_configs.py, llama31_llm_pretrain.py; recipe
# recipes/llama/llama3.py llama31_405b_pretrain_config): GBS 1536, seq 8192, no CUDA graphs, no
# recompute, sequence parallel; the V2 presets turn off the V1 FP8 presets' Megatron FSDP and CPU
# offloading; TP userbuffer overlap of all ten collectives for FP8 and MXFP8, forced off for NVFP4;
# fp8_param_gather from the fp8_cs / mxfp8 precision configs (NVFP4 gathers 4-bit parameters
# instead, no setting here); every layer in the low-precision format.
L405B = {**EVERY, "global_batch": 1536, "seq_len": 8192, "cuda_graph_scope": ()}
L405B_FP8 = {**L405B, "precision": "fp8", "tp_comm_overlap": True, "fp8_param_gather": True}
L405B_MXFP8 = {**L405B, "precision": "mxfp8", "tp_comm_overlap": True, "fp8_param_gather": True}
L405B_NVFP4 = {**L405B, "precision": "nvfp4", "tp_comm_overlap": False, "fp8_param_gather": False}
SLOTS = {
    "account_for_embedding_in_pipeline_split": True,
    "account_for_loss_in_pipeline_split": True,
}
"""The Llama 3.1 405B and Qwen3-235B recipes: the embedding and the loss each take a layer's slot."""

# --- MoE: HybridEP, fp8_param_gather (mxfp8 and fp8_cs precision configs).
MOE = {**EVERY, "seq_len": 4096, "moe_dispatch_dedup": True, "fp8_param_gather": True}
GRAPHED = {
    **MOE,
    "precision": "mxfp8",
    "cuda_graph_scope": ("full_iteration",),
    "ep_comm_overlap": True,
    "fused_grouped_mlp": True,
}
"""A full-iteration CUDA graph, the all-to-all overlapped, the CuTeDSL fused grouped MLP."""
PARTIAL = ("attn", "moe_router", "moe_preprocess")
"""TE CUDA graphs over attention, the router and preprocessing: the MoE host sync stays."""
DSV3 = {"tp_comm_overlap": False, "mtp_num_layers": 1, "optimizer_state_dtype": "bf16"}
"""The DeepSeek-V3 recipe: no TP overlap, one MTP layer, the precision-aware optimizer's bf16
moments."""
DSV3_16 = "Et*4|(t*4|)*14tmL"
"""PP 2 x VP 8 (GB300's pp_layout) and PP 4 x VP 4 (the recipe's layout map)."""
DSV3_B300 = "Et*8|(t*8|)*6t*5mL"
"""The recipe's layout map for PP 8 x VP 1."""
GPT_OSS = {"global_batch": 1280, "tp_comm_overlap": False}
QWEN = {"tp_comm_overlap": True}
"""qwen3_llm_pretrain.py builds CommOverlapConfig(tp_comm_overlap=True); Bridge drops it at TP 1."""
NO_RECOMPUTE = {"tp": 1, "cp": 1, "recompute": "none"}

Config = tuple[str, str, dict[str, object], dict[str, object]]
"""(model, cluster, workload fields, layout fields) of one run's configuration."""


def llama_405b(
    cluster: str, workload: dict[str, object], tp: int, pp: int, vpp: int, cp: int = 1
) -> Config:
    """A Llama 3.1 405B configuration: micro-batch 1, no recompute, the recipe's embedding and loss
    slots."""
    layout = {"tp": tp, "pp": pp, "vpp": vpp, "cp": cp, "mbs": 1, "recompute": "none"}
    return ("llama3.1-405b", cluster, workload, {**layout, "pipeline_split": SLOTS})


CONFIGS: dict[str, Config] = {
    # LLAMA31_405B_PRETRAIN_CONFIG_GB300_FP8_CS_V2: userbuffer TP overlap, conns 32
    "L405B-GB300-FP8": llama_405b("gb300_nvl72x256", L405B_FP8, tp=4, pp=8, vpp=4),
    # LLAMA31_405B_PRETRAIN_CONFIG_GB300_FP8_MX_V2: TP 2, CP 2, userbuffer TP overlap
    "L405B-GB300-MXFP8": llama_405b("gb300_nvl72x256", L405B_MXFP8, tp=2, pp=8, vpp=4, cp=2),
    # LLAMA31_405B_PRETRAIN_CONFIG_GB300_NVFP4_V2: no TP overlap, fp4_param_gather
    "L405B-GB300-NVFP4": llama_405b("gb300_nvl72x256", L405B_NVFP4, tp=4, pp=8, vpp=4),
    # LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V2: userbuffer TP overlap
    "L405B-GB200-FP8": llama_405b("gb200_nvl72x256", L405B_FP8, tp=4, pp=16, vpp=4),
    # LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_MX_V2: 128 slots over 128 virtual stages
    "L405B-GB200-MXFP8": llama_405b("gb200_nvl72x256", L405B_MXFP8, tp=4, pp=16, vpp=8),
    # LLAMA31_405B_PRETRAIN_CONFIG_GB200_NVFP4_V2: 128 stages; param-gather overlap disabled
    # (llama31_llm_pretrain.py disable_param_gather_overlap; not priced)
    "L405B-GB200-NVFP4": llama_405b("gb200_nvl72x256", L405B_NVFP4, tp=4, pp=16, vpp=8),
    # LLAMA31_405B_PRETRAIN_CONFIG_H100_FP8_CS_V2: TP 8, CP 2, userbuffer TP overlap, conns 1
    "L405B-H100-FP8": llama_405b("hgx_h100x1024", L405B_FP8, tp=8, pp=8, vpp=8, cp=2),
    # v0.5.x DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_FP8_MX_V2; v0.6.0
    # deepseek_v3_pretrain_256gpu_gb300_fp8mx_config: pp_layout, recompute_modules [], FP8
    # attention, fp8_output_proj, capacity 1.5 + paged stash
    "DSV3-GB300": ("deepseek-v3", "gb300_nvl72x256", {**GRAPHED, **DSV3, "global_batch": 4096},
        {**NO_RECOMPUTE, "pp": 2, "vpp": 8, "ep": 32, "mbs": 1, "pipeline_split": DSV3_16}),
    # DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_FP8_MX_GBS15360: the same at GBS 15360
    "DSV3-GB300-GBS15360": ("deepseek-v3", "gb300_nvl72x256",
        {**GRAPHED, **DSV3, "global_batch": 15360},
        {**NO_RECOMPUTE, "pp": 2, "vpp": 8, "ep": 32, "mbs": 1, "pipeline_split": DSV3_16}),
    # v0.5.x DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V2; v0.6.0
    # deepseek_v3_pretrain_256gpu_gb200_fp8mx_config: recompute mla_up_proj, fp8_output_proj, no
    # FP8 attention (v0.6.0's TE-graph scope is replaced by the full-iteration helper)
    "DSV3-GB200": ("deepseek-v3", "gb200_nvl72x256",
        {**GRAPHED, **DSV3, "global_batch": 4096, "recompute_modules": ("mla_up_proj",)},
        {"tp": 1, "cp": 1, "recompute": "selective", "pp": 4, "vpp": 4, "ep": 64, "mbs": 1,
         "pipeline_split": DSV3_16}),
    # DEEPSEEK_V3_PRETRAIN_CONFIG_B300_FP8_MX_V2 (= B300_V2): TE graphs attn/router/preprocess,
    # no overlap, no fused MLP, recompute mla_up_proj
    "DSV3-B300": ("deepseek-v3", "hgx_b300x256",
        {**MOE, **DSV3, "precision": "mxfp8", "global_batch": 4096, "cuda_graph_scope": PARTIAL,
         "recompute_modules": ("mla_up_proj",)},
        {"tp": 1, "cp": 1, "recompute": "selective", "pp": 8, "vpp": 1, "ep": 8, "mbs": 2,
         "pipeline_split": DSV3_B300}),
    # v0.5.0 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_FP8_MX_V2; v0.6.0
    # gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config: EP 16, FP8 attention, fp8_output_proj
    "GPTOSS-GB300": ("gpt-oss-120b", "gb300_nvl72x64", {**GRAPHED, **GPT_OSS},
        {**NO_RECOMPUTE, "pp": 1, "vpp": 1, "ep": 16, "mbs": 4}),
    # v0.5.0 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_FP8_MX_V2 (recompute_modules []); v0.6.0
    # gpt_oss_120b_pretrain_64gpu_gb200_fp8mx_config, whose [layernorm, moe_act] recompute is
    # overwritten with [] after the full-iteration helper: nothing is recomputed
    "GPTOSS-GB200": ("gpt-oss-120b", "gb200_nvl72x64", {**GRAPHED, **GPT_OSS},
        {**NO_RECOMPUTE, "pp": 1, "vpp": 1, "ep": 64, "mbs": 4}),
    # GPT_OSS_120B_PRETRAIN_CONFIG_B300_FP8_MX_V2 (= B300_BF16_V2 in MXFP8): TE graphs
    # attn/router/preprocess, no overlap, no fused MLP, bf16 attention
    "GPTOSS-B300": ("gpt-oss-120b", "hgx_b300x64",
        {**MOE, **GPT_OSS, "precision": "mxfp8", "cuda_graph_scope": PARTIAL},
        {**NO_RECOMPUTE, "pp": 1, "vpp": 1, "ep": 8, "mbs": 4}),
    # v0.5.x QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1 (no V2); v0.6.0
    # qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config
    "Q30B-GB300": ("qwen3-30b-a3b", "gb300_nvl72x8", {**GRAPHED, **QWEN, "global_batch": 512},
        {**NO_RECOMPUTE, "pp": 1, "vpp": 1, "ep": 8, "mbs": 8}),
    # v0.5.x QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1 (no V2); v0.6.0
    # qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_config
    "Q30B-GB200": ("qwen3-30b-a3b", "gb200_nvl72x8", {**GRAPHED, **QWEN, "global_batch": 512},
        {**NO_RECOMPUTE, "pp": 1, "vpp": 1, "ep": 8, "mbs": 4}),
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1 (no V2): full-iteration graph as on NVL72
    "Q30B-B300": ("qwen3-30b-a3b", "hgx_b300x8", {**GRAPHED, **QWEN, "global_batch": 512},
        {**NO_RECOMPUTE, "pp": 1, "vpp": 1, "ep": 8, "mbs": 8}),
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 (no V2): EP 16 over two nodes, no graphs, no
    # overlap, no fused MLP
    "Q30B-H100": ("qwen3-30b-a3b", "hgx_h100x16",
        {**MOE, **QWEN, "precision": "fp8", "global_batch": 1024, "cuda_graph_scope": ()},
        {**NO_RECOMPUTE, "pp": 1, "vpp": 1, "ep": 16, "mbs": 1}),
    # v0.5.x QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2; v0.6.0
    # qwen3_235b_a22b_pretrain_256gpu_gb300_fp8mx_config: embedding and loss slots
    "Q235B-GB300": ("qwen3-235b-a22b", "gb300_nvl72x256", {**GRAPHED, **QWEN, "global_batch": 8192},
        {**NO_RECOMPUTE, "pp": 4, "vpp": 12, "ep": 32, "mbs": 2, "pipeline_split": SLOTS}),
    # v0.5.x QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2; v0.6.0
    # qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config: embedding and loss slots
    "Q235B-GB200": ("qwen3-235b-a22b", "gb200_nvl72x256", {**GRAPHED, **QWEN, "global_batch": 8192},
        {**NO_RECOMPUTE, "pp": 8, "vpp": 3, "ep": 32, "mbs": 1, "pipeline_split": SLOTS}),
}  # fmt: skip

MEASURED: dict[str, dict[str, float]] = {
    "26.06": {
        "L405B-GB300-FP8": 1048.0, "L405B-GB300-MXFP8": 952.0, "L405B-GB300-NVFP4": 1413.0,
        "L405B-GB200-FP8": 843.0, "L405B-GB200-MXFP8": 783.0, "L405B-GB200-NVFP4": 1166.0,
        "L405B-H100-FP8": 326.0,
        "DSV3-GB300": 6338.0, "DSV3-GB300-GBS15360": 6422.0, "DSV3-GB200": 4969.0,
        "DSV3-B300": 3541.0,
        "GPTOSS-GB300": 33166.0, "GPTOSS-GB200": 28947.0, "GPTOSS-B300": 18534.0,
        "Q30B-GB300": 45275.0, "Q30B-GB200": 40706.0, "Q30B-B300": 40769.0, "Q30B-H100": 8826.0,
        "Q235B-GB300": 9015.0, "Q235B-GB200": 7376.0,
    },
    "26.06.01": {  # v0.5.1: these presets and builders unchanged from v0.5.0
        "DSV3-GB300": 6304.0, "DSV3-GB200": 4928.0,
        "Q30B-GB300": 44544.0, "Q30B-GB200": 40960.0,
        "Q235B-GB300": 9008.0, "Q235B-GB200": 7360.0,
    },
    "26.08": {  # v0.6.0 flat recipes perf_recipes/<family>/<gpu>/
        "DSV3-GB300": 6288.0, "DSV3-GB200": 4912.0,
        "GPTOSS-GB300": 33024.0, "GPTOSS-GB200": 28672.0,
        "Q30B-GB300": 44544.0, "Q30B-GB200": 39936.0,
        "Q235B-GB300": 8816.0, "Q235B-GB200": 7280.0,
    },
}  # fmt: skip
"""Tokens / sec / GPU per release and configuration, as the tables print them."""


def rows(release: str) -> list[Row]:
    """The held-out rows of one release: each measured configuration, its id ``<config>/<release>``."""
    return [
        (f"{name}/{release}", *CONFIGS[name], measured)
        for name, measured in MEASURED[release].items()
    ]


def main() -> None:
    """Predict each row (its MoE host sync decided by its CUDA-graph scope, as for the validation
    rows: ``planner.accuracy.rows.moe_layer_graphed``) and print one line a row, then the summary
    per release, per part and overall."""
    groups: dict[str, tuple[list[float], list[float]]] = {}
    levels: set[float | None] = set()
    for release in MEASURED:
        for name, model, cluster, workload, layout, measured in rows(release):
            fields = host_sync_by_graph_scope(workload)
            try:
                plan = predict_row((name, model, cluster, fields, layout, measured), {})
            except (SpecError, InfeasibleError) as exc:
                print(f"{name:28s} {cluster:16s} not evaluated: {' '.join(str(exc).split())}")
                continue
            error, band, words = scored(plan, measured)
            levels.add(plan.uncertainty_level)
            part = load_cluster(cluster).accelerator.name.upper()  # the catalog's name
            for group in (release, part, "all"):
                errors, bands = groups.setdefault(group, ([], []))
                errors.append(error)
                bands.append(band)
            print(f"{name:28s} {cluster:16s} {plan.layout.short():48s} {words}")
    parts = sorted(g for g in groups if g not in MEASURED and g != "all")
    for group in (*MEASURED, *parts, "all"):
        if group in groups:
            print(f"-- {group}")
            print_summary(*groups[group], levels)


if __name__ == "__main__":
    main()
