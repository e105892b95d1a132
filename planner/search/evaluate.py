"""Score one layout: topology -> CommDomains -> cost model -> a Plan."""

from __future__ import annotations

import math

from planner.cost.sharding import gathers_fp8_params
from planner.cost.stage import FUSED_GROUPED_MLP_FORMATS, asks_tp_overlap, runs_torchao_casts
from planner.cost.step import MicrobatchTime, StageMemory, StepCost, estimate_step
from planner.search.pipeline import pipeline_stages
from planner.search.rules import fused_grouped_mlp_formats, workload_domains
from planner.search.trust import train_band
from planner.specs.cluster import ClusterSpec
from planner.specs.formats import EIGHT_BIT_PARAM_FORMATS, NumberFormat
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.result import MemoryBreakdown, PipelineSplitInfo, PlacementEntry, Plan
from planner.specs.solver_config import DEFAULT_MEMORY_HEADROOM
from planner.specs.workload import DEFAULT_RECOMPUTE_MODULES, TrainWorkload
from planner.topology import placement
from planner.topology.hierarchy import shard_domains
from planner.units import HOUR_S, TFLOP, GiB


def score(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    memory: tuple[list[int], list[StageMemory]] | None = None,
    times: list[MicrobatchTime] | None = None,
    split: PipelineSplit | None = None,
    chunk_s: float | None = None,
) -> StepCost:
    """The cost model's StepCost for ``layout`` on ``cluster`` (``memory``, ``times``,
    ``split`` and ``chunk_s``: see :func:`planner.cost.step.estimate_step`)."""
    domains = workload_domains(model, cluster, workload, layout) | shard_domains(
        cluster, layout, workload.zero_shard_group
    )
    return estimate_step(
        model, cluster.accelerator, workload, layout, domains, memory=memory, times=times,
        split=split, chunk_s=chunk_s,
    )  # fmt: skip


def fits(cost: StepCost, cluster: ClusterSpec, headroom: float = 0.0) -> bool:
    """Whether every stage's peak memory fits the accelerator's usable memory, less the share
    ``headroom`` a search keeps free (``SolverConfig.memory_headroom``)."""
    capacity = cluster.accelerator.usable_memory_bytes * (1.0 - headroom)
    return max(s.total for s in cost.stage_memory) <= capacity


def memory_breakdown(cost: StepCost, cluster: ClusterSpec) -> MemoryBreakdown:
    """Memory of the binding stage in GiB."""
    stage = cost.peak_stage
    mem = cost.peak_memory
    acc = cluster.accelerator
    return MemoryBreakdown(
        peak_gib=mem.total / GiB,
        capacity_gib=acc.usable_memory_bytes / GiB,
        hbm_gib=acc.total_memory_bytes / GiB,  # what the driver exposes, as serving reports
        weights_gib=mem.weights / GiB,
        grads_gib=mem.grads / GiB,
        optimizer_gib=mem.optimizer / GiB,
        activations_gib=mem.activations / GiB,
        optimizer_step_gib=mem.step_transient / GiB,
        binding_stage=stage,
    )


def memory_warnings(cost: StepCost, cluster: ClusterSpec) -> list[str]:
    """A layout that fits, but only inside the share of usable memory a search leaves free
    (``SolverConfig.memory_headroom``, for allocator fragmentation and what the memory model
    does not see), said: ``estimate`` accepts it, as a published layout that ran must be, and the
    user learns that a search would not have offered it.

    >>> from planner.catalog import load_cluster
    >>> from planner.cost.step import StageMemory
    >>> cluster = load_cluster("hgx_h100x8")
    >>> usable = cluster.accelerator.usable_memory_bytes
    >>> def cost(peak):  # a StepCost stand-in: only its peak memory is read
    ...     return type("C", (), {"peak_memory": StageMemory(weights=peak, grads=0.0,
    ...         optimizer=0.0, activations=0.0)})()
    >>> memory_warnings(cost(0.99 * usable), cluster)[0][:40]
    'memory at 99.0% of usable (74.2 of 75.0 '
    >>> memory_warnings(cost(0.90 * usable), cluster), memory_warnings(cost(1.1 * usable), cluster)
    ([], [])
    """
    usable = cluster.accelerator.usable_memory_bytes
    peak = cost.peak_memory.total
    headroom = DEFAULT_MEMORY_HEADROOM
    if peak > usable or peak <= (1.0 - headroom) * usable:
        return []
    return [
        f"memory at {peak / usable:.1%} of usable ({peak / GiB:.1f} of {usable / GiB:.1f} GiB): "
        f"it fits, but inside the {headroom:.0%} a search keeps free by default "
        "(--memory-headroom) for allocator fragmentation and the memory model's error, so a "
        "real run may not fit"
    ]


def unused_settings(model: ModelSpec, workload: TrainWorkload, layout: Layout) -> list[str]:
    """Framework settings the user gave that this layout or model does not use (said, not
    silently dropped)."""
    out = []
    custom = workload.recompute_modules != DEFAULT_RECOMPUTE_MODULES
    if custom and layout.recompute is not Recompute.SELECTIVE:
        out.append(
            f"recompute modules {','.join(workload.recompute_modules)} apply to selective "
            f"recomputation; this layout uses {layout.recompute}"
        )
    if layout.recompute is not Recompute.SELECTIVE and _saved_tensors_given(workload):
        saved = ",".join(workload.saved_tensors or ()) or "none"
        out.append(
            f"saved tensors {saved} apply to selective recomputation; this layout uses "
            f"{layout.recompute}"
        )
    if workload.recompute_num_layers is not None and layout.recompute is not Recompute.FULL:
        out.append(
            f"recompute-num-layers {workload.recompute_num_layers} applies to full "
            f"recomputation; this layout uses {layout.recompute}"
        )
    if model.moe is None and _moe_settings_given(workload):
        out.append(f"the MoE settings have no effect: {model.name} has no experts")
    if _fp8_param_gather_given(workload) and not gathers_fp8_params(workload, layout):
        if layout.zero == 0:
            why = "ZeRO 0 gathers nothing"
        elif workload.fp8_casts == "rowwise" and layout.precision == NumberFormat.FP8:
            why = "torchao's rowwise float8 gathers its parameters in bf16"
        else:
            why = f"this layout runs {layout.precision}"
        formats = " and ".join(str(f) for f in EIGHT_BIT_PARAM_FORMATS)
        out.append(f"fp8-param-gather applies to {formats} with ZeRO >= 1; {why}")
    fused = workload.fused_grouped_mlp and model.moe is not None
    if fused and layout.precision not in FUSED_GROUPED_MLP_FORMATS:
        out.append(
            f"fused-grouped-mlp applies to {fused_grouped_mlp_formats('and')}; this layout runs "
            f"{layout.precision} "
            "(its experts run unfused)"
        )
    profile = _profile_workload(workload)
    if workload.weight_cast != profile.weight_cast and layout.precision in (
        NumberFormat.BF16, NumberFormat.FP16,
    ):  # fmt: skip
        out.append(
            f"weight-cast {workload.weight_cast} applies to 8- and 4-bit recipes; this layout "
            f"runs {layout.precision}"
        )
    if workload.weight_cast != profile.weight_cast and runs_torchao_casts(
        workload, layout.precision
    ):
        out.append(
            f"weight-cast {workload.weight_cast} has no effect under torchao's "
            f"{workload.fp8_casts} casts: they cast a weight on every call exactly when it is "
            "not gathered in fp8"
        )
    added_overlap = workload.tp_comm_overlap and not profile.tp_comm_overlap
    if added_overlap and layout.tp > 1 and not workload.sequence_parallel:
        out.append(
            "tp-overlap pipelines the TP collectives of sequence parallelism; this workload "
            "runs without it (its collectives stay in line)"
        )
    if workload.fp8_casts != profile.fp8_casts and layout.precision != NumberFormat.FP8:
        out.append(
            f"fp8-casts {workload.fp8_casts} applies to the fp8 recipe; this layout runs "
            f"{layout.precision}"
        )
    if workload.fsdp_gather_unit != profile.fsdp_gather_unit and layout.zero < 3:
        out.append(
            f"fsdp-gather-unit {workload.fsdp_gather_unit} applies to ZeRO-3; this layout uses "
            f"ZeRO-{layout.zero}"
        )
    return out


MOE_FIELDS = (
    "ep_comm_overlap",
    "moe_dispatch_dedup",
    "moe_host_sync",
    "expert_load_imbalance",
    "moe_capacity_factor",
    "moe_expert_compute",
    "moe_routing_group",
    "grouped_gemm_tiles",
)
"""TrainWorkload fields that only an MoE layer uses."""


def _profile_workload(workload: TrainWorkload) -> TrainWorkload:
    """The workload ``workload``'s framework profile sets by itself (what the user did not give)."""
    from planner.catalog.frameworks import resolve_workload

    return resolve_workload({"framework": workload.framework})


def _fp8_param_gather_given(workload: TrainWorkload) -> bool:
    """Whether FP8 parameter gathers were asked for beyond the framework profile's default
    (torchtitan's float8 guide turns them on; a bf16 plan under it is not told so)."""
    return workload.fp8_param_gather and not _profile_workload(workload).fp8_param_gather


def _saved_tensors_given(workload: TrainWorkload) -> bool:
    """Whether the save list differs from the framework profile's (MaxText's and torchtitan's
    own lists are not the user's)."""
    return workload.saved_tensors != _profile_workload(workload).saved_tensors


def offload_warnings(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    split: PipelineSplit | None = None,
) -> list[str]:
    """What an offloading plan holds in host memory, which the planner does not check: the
    activations that leave the busiest GPU (its stored activations without offload less those
    with it), and that times the accelerators of a node, to set against the node's DRAM."""
    from planner.cost.step import estimate_memory

    share = workload.activation_offload_fraction
    if share <= 0:
        return []
    kept = estimate_memory(model, workload, layout, split=split)[1]
    whole = estimate_memory(
        model, workload.model_copy(update={"activation_offload_fraction": 0.0}), layout,
        split=split,
    )[1]  # fmt: skip
    per_gpu = max(w.activations - k.activations for w, k in zip(whole, kept, strict=True))
    per_node = cluster.system.accelerators_per_node
    return [
        f"{100 * share:.0f}% of the saved activations go to host memory: {per_gpu / GiB:.1f} GiB "
        f"per GPU, {per_node * per_gpu / GiB:.0f} GiB per node of {per_node}; host DRAM is not "
        "modelled, check the node has it"
    ]


def batch_warnings(workload: TrainWorkload, layout: Layout) -> list[str]:
    """Why a large cluster's plan may run far below its peak: a global batch with fewer
    sequences than GPUs caps data parallelism at the batch (dp x mbs <= global batch), so
    every layout spreads each sequence over at least num_gpus / global_batch GPUs of tensor,
    pipeline and context parallelism, whatever they cost.

    >>> batch_warnings(TrainWorkload(global_batch=512), Layout(tp=16, pp=4, cp=2, dp=128))[0][:65]
    'the global batch (512 sequences) is smaller than the 16,384 GPUs:'
    >>> batch_warnings(TrainWorkload(global_batch=512), Layout(tp=8, dp=64))
    []
    """
    gpus = layout.num_gpus
    if workload.global_batch >= gpus:
        return []
    least = math.ceil(gpus / workload.global_batch)
    split = layout.tp * layout.pp * layout.cp
    return [
        f"the global batch ({workload.global_batch:,} sequences) is smaller than the {gpus:,} "
        f"GPUs: every layout must spread a sequence over at least {least} GPUs of tensor, "
        f"pipeline or context parallelism (this one: TP x PP x CP = {split}); a --global-batch "
        f"of {gpus:,} sequences or more would let data parallelism give each GPU its own"
    ]


def tp_overlap_warnings(
    workload: TrainWorkload, layout: Layout, tp: PlacementEntry | None
) -> list[str]:
    """Why a layout's TP collectives are priced in line although the workload overlaps them:
    its TP groups (placement ``tp``) cross scale-up domains, where the overlap cannot run
    (:func:`planner.cost.stage.tp_overlap_reaches`).

    >>> across = PlacementEntry(size=16, stride=1, tier="scale_out", within_domain=False,
    ...     link="", bandwidth_GB_per_s=400.0, example_group=[0])
    >>> tp_overlap_warnings(TrainWorkload(), Layout(tp=16), across)[0][:52]
    'TP 16 spans scale-up domains: its collectives cannot'
    >>> tp_overlap_warnings(TrainWorkload(tp_comm_overlap=False), Layout(tp=16), across)
    []
    """
    if not asks_tp_overlap(workload) or layout.tp == 1 or tp is None or tp.within_domain:
        return []
    return [
        f"TP {layout.tp} spans scale-up domains: its collectives cannot overlap their GEMMs "
        "there (the overlap maps its peers' buffers inside one NVLink or ICI domain), so they "
        "are priced in line and the exports leave the overlap off"
    ]


def prefetch_warnings(cost: StepCost) -> list[str]:
    """Why a ZeRO-3 plan's gathers are partly in line: it fits only where the compiler's
    scheduler gives up its prefetch at the memory peak (:func:`planner.cost.step.
    unprefetched_share`)."""
    share = cost.unprefetched_share
    if share <= 0.0:
        return []
    return [
        f"fits only where XLA's scheduler gives up its ZeRO-3 prefetch at the memory peak: on "
        f"{share:.0%} of the layer passes (the last forward layers, the first backward ones) "
        "the next weight is gathered, and its gradient reduced, in line; it uses memory up to "
        "the limit, so a search with memory headroom does not choose it"
    ]


def _moe_settings_given(workload: TrainWorkload) -> bool:
    """Whether an MoE-only field differs from the framework profile's workload (a profile's
    own value, such as DeepSpeed's capacity-padded einsum dispatch without a host sync, is not
    the user's)."""
    profile = _profile_workload(workload)
    return any(getattr(workload, f) != getattr(profile, f) for f in MOE_FIELDS)


def to_plan(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    cost: StepCost,
    *,
    split: PipelineSplit | None = None,
    split_info: PipelineSplitInfo | None = None,
) -> Plan:
    """Wrap a StepCost (scored with ``split``, default the even one) into the user-facing Plan;
    ``split_info`` says how the split was chosen (default: even, when pp > 1)."""
    acc = cluster.accelerator
    step = cost.step_time_s
    tokens_per_s = workload.tokens_per_step / step
    model_flops_per_gpu = cost.model_flops_per_step / step / layout.num_gpus
    band = train_band(model, cluster, workload, layout, step_s=step)
    warnings = band.warnings + unused_settings(model, workload, layout)
    warnings += memory_warnings(cost, cluster)
    warnings += offload_warnings(model, cluster, workload, layout, split=split)
    warnings += batch_warnings(workload, layout)
    where = placement(cluster, layout, workload.cp_comm, workload.zero_shard_group)
    warnings += tp_overlap_warnings(workload, layout, where.get("tp"))
    warnings += prefetch_warnings(cost)
    return Plan(
        model=model.name,
        cluster=cluster.name,
        cluster_description=cluster.describe(),
        device_noun=cluster.accelerator.device_noun,
        num_gpus=layout.num_gpus,
        layout=layout,
        step_time_s=step,
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=tokens_per_s / layout.num_gpus,
        model_tflops_per_gpu=model_flops_per_gpu / TFLOP,
        mfu=model_flops_per_gpu / acc.peak_flop_per_s(NumberFormat.BF16),  # DESIGN.md section 8
        mfu_precision_peak=model_flops_per_gpu / acc.peak_flop_per_s(layout.precision),
        usd_per_million_tokens=layout.num_gpus
        * step
        * cluster.price_per_gpu_hour_usd
        / HOUR_S
        / workload.tokens_per_step
        * 1e6,
        joules_per_token=layout.num_gpus * acc.tdp_W * step / workload.tokens_per_step,
        fits=fits(cost, cluster),
        memory=memory_breakdown(cost, cluster),
        breakdown_s=dict(cost.breakdown_s),
        placement=where,
        uncertainty_pct=band.uncertainty_pct,
        uncertainty_level=band.level,
        warnings=warnings,
        workload=workload,
        pipeline_stages=pipeline_stages(model, cluster, workload, layout, split),
        pipeline_split=split_info or even_split_info(cost, cluster, layout),
    )


def even_split_info(
    cost: StepCost, cluster: ClusterSpec, layout: Layout
) -> PipelineSplitInfo | None:
    """The PipelineSplitInfo of a plan scored with the even split (None with one stage)."""
    if layout.pp == 1:
        return None
    return PipelineSplitInfo(
        method="even",
        even_step_time_s=cost.step_time_s,
        even_peak_gib=cost.peak_memory.total / GiB,
        even_fits=fits(cost, cluster),
    )


def evaluate(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload, layout: Layout
) -> Plan:
    """Plan for ``layout`` (no rule checks; see :func:`planner.search.rules.layout_violations`)."""
    return to_plan(model, cluster, workload, layout, score(model, cluster, workload, layout))
