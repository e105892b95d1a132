"""Settings the Megatron-LM and Megatron-Bridge exports share: both configure Megatron Core's
TransformerConfig and DistributedDataParallelConfig, one as flags, one as overrides.

Names and semantics from NVIDIA/Megatron-LM tag ``core_v0.19.0``:
``megatron/core/transformer/transformer_config.py`` (``cp_comm_type``: "p2p", "all_gather",
"a2a", "a2a+p2p"; CPU offloading refused with pipeline parallelism or recomputation),
``megatron/core/model_parallel_config.py`` (``hierarchical_context_parallel_sizes``,
``cpu_offloading_num_layers``), ``megatron/core/distributed/distributed_data_parallel_config.py``
(``num_distributed_optimizer_instances``: the factor by which the DP domain is sharded) and
``megatron/core/transformer/enums.py`` (``AttnBackend``: flash, fused, unfused, local, auto).
"""

from __future__ import annotations

from planner.cost.sharding import gathers_fp8_params
from planner.report.export.assumed import fused_grouped_mlp_assumed
from planner.report.export.job import ExportJob
from planner.specs.layout import Recompute
from planner.specs.workload import TrainWorkload

CP_COMM_TYPE = {"p2p": "p2p", "a2a": "a2a", "a2a+p2p": "a2a+p2p", "allgather": "all_gather"}
"""The planner's context-parallel algorithm -> Megatron Core's ``cp_comm_type`` spelling."""


def attention_backend(workload: TrainWorkload) -> str:
    """Megatron's ``attention_backend``: ``fused`` (cuDNN through Transformer Engine, the
    vendor kernel), ``flash`` (the flash-attn package) or ``local`` (unfused, Megatron's own)."""
    if not workload.flash_attention:
        return "local"
    return "flash" if workload.attention_kernel == "flash2" else "fused"


def cp_hierarchy(job: ExportJob) -> tuple[int, int]:
    """(all-to-all size, ring size) of ``a2a+p2p`` context parallelism on the job's cluster, as
    the cost model prices it (:func:`planner.topology.hierarchy.cp_hierarchy_sizes`, the
    all-to-all the largest that splits a rank's heads: :func:`planner.search.rules.
    cp_a2a_heads`)."""
    from planner.search.rules import cp_a2a_heads
    from planner.topology.hierarchy import cp_hierarchy_sizes

    plan, workload = job.train
    heads = cp_a2a_heads(job.model, workload, plan.layout.tp)
    return cp_hierarchy_sizes(plan.layout, job.cluster.accelerators_per_domain, heads)


def cp_comm_args(job: ExportJob, type_name: str, sizes_name: str) -> list[str]:
    """Megatron's CP algorithm as (name, value) tokens: ``type_name`` and, for ``a2a+p2p``,
    ``sizes_name`` with the (all-to-all, ring) sizes."""
    kind = job.train[1].cp_comm
    job.express("cp_comm")
    if job.train[1].cp_impl == "te":  # Megatron-LM's context parallelism is Transformer Engine's
        job.express("cp_impl")
    args = [type_name, CP_COMM_TYPE[kind]]
    if kind == "a2a+p2p":
        args += [sizes_name, *(str(size) for size in cp_hierarchy(job))]
    return args


def moe_capacity(job: ExportJob) -> str | None:
    """The expert capacity factor to pad to, or None for dropless experts.

    ``moe_capacity_factor`` when set; else, with the MoE layers in CUDA graphs
    (``moe_host_sync`` off), the modelled load imbalance, since graphs need static shapes. The
    DeepEP dispatcher cannot pad: a note says so and nothing is set."""
    workload = job.train[1]
    if workload.moe_expert_compute == "grouped":  # Megatron-LM's experts: grouped GEMMs
        job.express("moe_expert_compute")
    capacity = workload.moe_capacity_factor
    graphs = not workload.moe_host_sync
    if capacity is None and not graphs:
        job.express("moe_capacity_factor")  # dropless: Megatron's default
        return None
    if workload.moe_dispatch_dedup:
        job.note(
            "Megatron's DeepEP dispatcher cannot pad experts to capacity: the padded experts "
            "the prediction assumes need the all-to-all dispatcher"
        )
        return None
    if capacity is None:
        job.express("moe_capacity_factor", "expert_load_imbalance")
        return f"{workload.expert_load_imbalance:g}"
    job.express("moe_capacity_factor")
    return f"{capacity:g}"


def optimizer_instances(job: ExportJob) -> int | None:
    """``num_distributed_optimizer_instances``: the DP x CP ranks over the hybrid shard group
    (``zero_shard_group``), None without one; a note when the group does not divide them."""
    layout, workload = job.train[0].layout, job.train[1]
    group = workload.zero_shard_group
    if group is None or layout.zero == 0:
        return None
    ranks = layout.dp * layout.cp
    if ranks % group:
        job.note(f"the ZeRO shard group of {group} does not divide the {ranks} DP x CP ranks")
        return None
    job.express("zero_shard_group")
    return ranks // group


def offload_layers(job: ExportJob) -> int | None:
    """``cpu_offloading_num_layers``: the offloaded share of the layers, rounded (at least 1,
    fewer than all, as Megatron requires); None, with a note, where Megatron refuses CPU
    offloading (pipeline parallelism, recomputation) or the plan offloads nothing."""
    layout, workload = job.train[0].layout, job.train[1]
    fraction = workload.activation_offload_fraction
    if fraction <= 0:
        return None
    num_layers = job.model.num_layers
    if layout.pp > 1 or layout.recompute is not Recompute.NONE:
        why = "pipeline parallelism" if layout.pp > 1 else "activation recomputation"
        job.note(
            f"Megatron-LM refuses CPU activation offloading with {why} "
            "(--cpu-offloading-num-layers; TransformerConfig.__post_init__): the offload the "
            "prediction assumes is not set. Megatron-core 0.19's --fine-grained-activation-"
            "offloading composes with both, but offloads the inputs of the --offload-modules "
            "it names (attention, norms, MoE experts: no dense MLP input), not a share of "
            "every saved activation"
        )
        job.express("activation_offload_fraction")
        return None
    job.express("activation_offload_fraction")
    return min(num_layers - 1, max(1, round(fraction * num_layers)))


def fp8_param_gather(job: ExportJob) -> bool:
    """Whether to set ``fp8_param_gather``: where the prediction gathered the parameters in 8
    bits (:func:`planner.cost.sharding.gathers_fp8_params`: asked for, an 8-bit recipe and a
    distributed optimizer, which Megatron asserts). Elsewhere the prediction did not assume it
    (the plan's warning says the setting went unused), so there is nothing to carry."""
    job.express("fp8_param_gather")
    return gathers_fp8_params(job.train[1], job.train[0].layout)


FUSED_GROUPED_MLP_ENV = ("NVTE_CUTEDSL_FUSED_GROUPED_MLP", "1")
"""The environment variable that lets Transformer Engine's op fuser pick its CuTe DSL fused
grouped MLP; Megatron Core builds its fused expert ops only with it set
(``megatron/core/transformer/moe/experts.py`` line 398 at core_v0.19.0)."""


def fused_grouped_mlp(job: ExportJob) -> bool:
    """Whether to run the routed experts through Transformer Engine's op fuser
    (``use_transformer_engine_op_fuser``) with its fused grouped MLP: where the prediction
    assumed it (:func:`planner.report.export.assumed.fused_grouped_mlp_assumed`), and then
    :data:`FUSED_GROUPED_MLP_ENV` is set too. Elsewhere (not asked for, or asked for where it
    does not run: bf16, a GPU other than compute capability 10.x) the experts were priced
    unfused, as Megatron's ``TEGroupedMLP`` runs them without the flag."""
    job.express("fused_grouped_mlp")
    if not fused_grouped_mlp_assumed(job):
        return False
    job.set_env(*FUSED_GROUPED_MLP_ENV)
    return True


def precision_aware_optimizer(job: ExportJob) -> bool:
    """Whether to set Megatron Core's precision-aware optimizer with bf16 Adam moments: the
    prediction assumes them (``optimizer_state_dtype``) and the layout runs the distributed
    optimizer, which ``OptimizerConfig.__post_init__`` asserts with it (optimizer_config.py,
    core_v0.19.0 line 434); marks the setting expressed when it is set (else a note says it)."""
    layout, workload = job.train[0].layout, job.train[1]
    if workload.optimizer_state_dtype == "bf16" and layout.zero in (1, 2):
        job.express("optimizer_state_dtype")
        return True
    return False


def mcore_defaults(job: ExportJob) -> None:
    """Settings that are Megatron Core's behaviour without a flag: bf16 parameters with an
    fp32 master copy in the optimizer (``fp32_params``, ``master_copy``), fused elementwise
    kernels (bias-activation, RoPE and norm fusions on by default), the 1F1B schedule
    (interleaved with virtual stages)."""
    workload = job.train[1]
    if not workload.fp32_params:
        job.express("fp32_params")
    if workload.master_copy:
        job.express("master_copy")
    if workload.fused_elementwise:
        job.express("fused_elementwise")
    if workload.pipeline_schedule == "1f1b":
        job.express("pipeline_schedule")


UNEXPRESSED_WHERE = {
    "pipeline_schedule": "Megatron-LM runs 1F1B (interleaved with virtual stages), not DualPipe, "
    "zero bubble or GPipe (with --overlap-moe-expert-parallel-comm for DualPipe's overlap)",
    "fp32_params": "Megatron-LM keeps bf16 parameters and an fp32 master copy in the optimizer",
    "master_copy": "Megatron-LM's optimizer always keeps an fp32 master copy of the bf16 "
    "parameters (or its 16-bit remainder)",
    "fused_elementwise": "Megatron-LM fuses them by default (TE and its bias-activation, RoPE "
    "and norm fusions)",
    "reshard_after_forward": "Megatron-FSDP (optim_grads_params) decides it",
    "unsharded_param_layers": "Megatron-FSDP's double buffer decides it",
    "saved_tensors": "Megatron-LM recomputes by module (--recompute-modules), not by a save list",
}
"""Where a Megatron Core setting the export cannot set lives instead (note tails)."""
