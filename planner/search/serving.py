"""Score one serving layout: topology -> CommDomains -> serving cost terms -> a ServePlan.

The operating point of a layout (its concurrency and latencies) is chosen in
:mod:`planner.search.serving_point`; the search over layouts is in
:mod:`planner.search.serving_search`.
"""

from __future__ import annotations

import math

from planner.catalog.engines import engine_vendor_rule, load_engine
from planner.cost.serving import (
    decode_ceiling_tokens_per_s,
    decode_hbm_floor_s,
    free_kv_bytes,
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token,
    kv_cache_tokens,
    kv_replication,
    max_concurrent_sequences,
    weight_bytes_per_gpu,
    weight_bytes_read_per_token,
    workspace_bytes_per_gpu,
)
from planner.cost.serving_cycle import idle_prefill_s
from planner.cost.serving_time import ServeSetup
from planner.errors import SpecError
from planner.search.serving_point import (
    TARGETS,
    OperatingPoint,
    capacity_requests_per_s,
    target_value_s,
)
from planner.search.trust import serve_band
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.engine import ServingEngineSpec
from planner.specs.formats import NumberFormat, bits_per_value
from planner.specs.hardware import AcceleratorSpec
from planner.specs.model import ModelSpec
from planner.specs.result import (
    PlacementEntry,
    ServeEngine,
    ServeLatency,
    ServeLayout,
    ServeMemory,
    ServePlan,
    TargetCheck,
)
from planner.specs.workload import ServeWorkload
from planner.topology import group_domain, placement_entry
from planner.topology.flows import ALL_TO_ALL, P2P
from planner.units import MS, GiB

KV_FORMATS: tuple[NumberFormat, ...] = (
    NumberFormat.BF16,
    NumberFormat.FP16,
    NumberFormat.FP8,
    NumberFormat.INT8,
)
"""KV-cache formats every engine can store whatever the tensor cores run (FP4 KV needs them)."""


def weight_format(model: ModelSpec, workload: ServeWorkload) -> NumberFormat:
    """The weight format served: as asked, else the checkpoint's (``quantization_config``),
    else bf16."""
    if workload.precision is not None:
        return workload.precision
    return model.quantization.weights if model.quantization is not None else NumberFormat.BF16


def kv_format(model: ModelSpec, workload: ServeWorkload) -> NumberFormat:
    """The KV-cache format: as asked, else the checkpoint's stated KV format, else FP8 with
    8-bit or narrower weights (TensorRT-LLM ModelOpt checkpoints carry FP8 KV scales;
    ``examples/llm_ptq/hf_ptq.py --kv_cache_qformat`` defaults to fp8), else the weights'
    16-bit format."""
    if workload.kv_precision is not None:
        return workload.kv_precision
    quant = model.quantization
    if quant is not None and quant.kv_cache is not None:
        return quant.kv_cache
    weights = weight_format(model, workload)
    return NumberFormat.FP8 if bits_per_value(weights) <= 8 else weights


def resolve_formats(model: ModelSpec, workload: ServeWorkload) -> ServeWorkload:
    """``workload`` with its weight and KV formats filled in (:func:`weight_format`,
    :func:`kv_format`)."""
    return workload.model_copy(
        update={
            "precision": weight_format(model, workload),
            "kv_precision": kv_format(model, workload),
        }
    )


def compute_format(workload: ServeWorkload, cluster: ClusterSpec) -> NumberFormat:
    """The GEMM format: as asked, else the weight format when the tensor cores run it, else
    bf16 (weight-only quantisation)."""
    if workload.compute_precision is not None:
        return workload.compute_precision
    acc = cluster.accelerator
    weights = workload.precision or NumberFormat.BF16
    return weights if acc.supports(weights) else NumberFormat.BF16


def check_serve_workload(model: ModelSpec, cluster: ClusterSpec, workload: ServeWorkload) -> None:
    """Raise SpecError when the workload cannot run on this hardware (not a layout problem)."""
    acc = cluster.accelerator
    engine = load_engine(workload.engine)
    why = engine_vendor_rule(engine, acc.vendor, acc.name)
    if why:
        raise SpecError(f"serving engine '{engine.name}' {why}")
    fmt = compute_format(workload, cluster)
    if not acc.supports(fmt):
        formats = ", ".join(sorted(str(f) for f in acc.peak_TFLOP_per_s))
        raise SpecError(
            f"compute precision '{fmt}' is not supported by {acc.name} (its tensor cores run: "
            f"{formats})"
        )
    kv = workload.kv_precision or NumberFormat.BF16
    if kv not in KV_FORMATS and not acc.supports(kv):
        raise SpecError(f"kv-precision '{kv}' is not supported by {acc.name}")
    if workload.context > model.max_context:
        raise SpecError(
            f"context {workload.context} exceeds the {model.max_context}-token context of "
            f"model '{model.name}'"
        )


def serve_violations(
    model: ModelSpec, cluster: ClusterSpec, layout: ServeLayout
) -> list[tuple[str, str]]:
    """Every (reason code, detail) the layout breaks, memory and targets excluded."""
    out: list[tuple[str, str]] = []
    n = cluster.num_accelerators
    if layout.num_gpus > n:
        out.append(("degrees", f"tp x pp x replicas = {layout.num_gpus} exceeds the {n} GPUs"))
    if layout.tp % layout.attention_dp:
        out.append(
            ("divisibility", f"attention_dp ({layout.attention_dp}) must divide tp ({layout.tp})")
        )
    atp = layout.attention_tp
    if model.num_attention_heads % atp:
        out.append(
            (
                "divisibility",
                f"tp / attention_dp ({atp}) must divide the {model.num_attention_heads} "
                f"attention heads of '{model.name}'",
            )
        )
    k = model.num_kv_heads
    if model.mla is None and k % atp and atp % k:
        out.append(
            (
                "divisibility",
                f"tp / attention_dp ({atp}) and the {k} KV heads must divide one another",
            )
        )
    if layout.pp > model.num_layers:
        out.append(("divisibility", f"pp ({layout.pp}) exceeds the {model.num_layers} layers"))
    if model.moe is None and layout.ep > 1:
        out.append(("divisibility", f"ep > 1 but model '{model.name}' has no experts"))
    if layout.tp % layout.ep or (model.moe is not None and model.moe.num_experts % layout.ep):
        out.append(
            ("divisibility", f"ep ({layout.ep}) must divide tp ({layout.tp}) and the experts")
        )
    return out


def engine_accelerator(acc: AcceleratorSpec, engine: ServingEngineSpec) -> AcceleratorSpec:
    """The accelerator as the engine's kernels use it: its GEMM (every format) and attention
    efficiencies times the engine's ``compute_efficiency``; bandwidths and overheads as they are.

    >>> from planner.catalog import load_cluster
    >>> from planner.catalog.engines import load_engine
    >>> acc = load_cluster("hgx_h100x8").accelerator
    >>> trt = load_engine("tensorrt-llm")
    >>> engine_accelerator(acc, trt) is acc  # the reference engine runs the fitted kernels
    True
    """
    factor = engine.compute_efficiency
    if factor == 1.0:
        return acc
    eff = acc.efficiency
    scaled = eff.model_copy(
        update={
            "gemm": {fmt: value * factor for fmt, value in eff.gemm.items()},
            "attention": eff.attention * factor,
        }
    )
    return acc.model_copy(update={"efficiency": scaled})


def serve_setup(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: ServeWorkload,
    layout: ServeLayout,
    engine: ServingEngineSpec | None = None,
) -> ServeSetup:
    """The cost model's inputs: each group's CommDomain from the topology (ranks ordered tp
    innermost, then pp, then replicas), all groups of the deployment communicating at once;
    the workload's engine profile (or ``engine``) with its kernels' speed."""
    ranks = layout.num_gpus
    engine = engine or load_engine(workload.engine)
    return ServeSetup(
        model=model,
        accelerator=engine_accelerator(cluster.accelerator, engine),
        layout=layout,
        compute_format=compute_format(workload, cluster),
        attention_comm=group_domain(cluster, layout.attention_tp, 1, num_ranks=ranks),
        tp_comm=group_domain(cluster, layout.tp, 1, num_ranks=ranks),
        ep_comm=group_domain(cluster, layout.ep, 1, pattern=ALL_TO_ALL, num_ranks=ranks),
        pp_comm=group_domain(cluster, layout.pp, layout.tp, pattern=P2P, num_ranks=ranks),
        routing_skew=workload.routing_skew,
        engine=engine,
    )


class ServeMemoryCost(FrozenSpec):
    """Bytes per GPU and the KV capacity of one replica."""

    weights: float
    """Weights on the fullest GPU (bytes)."""
    workspace: float
    """Activation workspace (bytes)."""
    capacity: float
    """HBM minus the runtime reserve (bytes)."""
    kv_pool: float
    """KV-cache pool per GPU (bytes)."""
    kv_per_sequence: float
    """KV bytes per GPU of one full-context sequence."""
    tokens: int
    """Tokens of context one replica holds."""
    sequences: int
    """Full-context sequences one replica holds."""
    sequences_at_mean: int
    """Sequences one replica holds at their mean context ISL + OSL / 2."""


def memory_cost(
    model: ModelSpec, cluster: ClusterSpec, workload: ServeWorkload, layout: ServeLayout
) -> ServeMemoryCost:
    """Weights, workspace, KV pool and capacity of one GPU; a replica holds attention_dp times
    one GPU's sequences (each attention-DP rank caches its own sequences)."""
    weights = weight_bytes_per_gpu(model, layout.precision, layout)
    workspace = workspace_bytes_per_gpu(model, workload.max_batch_tokens, layout)
    capacity = cluster.accelerator.usable_memory_bytes
    pool = free_kv_bytes(capacity, weights, workspace, workload.kv_cache_fraction)
    per_sequence = kv_bytes_per_sequence_per_gpu(
        model, layout.kv_precision, workload.context, layout
    )
    tokens = kv_cache_tokens(pool, per_sequence / workload.context)
    mean = math.ceil(workload.prompt_len + workload.output_len / 2)
    per_mean = kv_bytes_per_sequence_per_gpu(model, layout.kv_precision, mean, layout)
    return ServeMemoryCost(
        weights=weights,
        workspace=workspace,
        capacity=capacity,
        kv_pool=pool,
        kv_per_sequence=per_sequence,
        tokens=tokens * layout.attention_dp,
        sequences=max_concurrent_sequences(tokens, workload.context) * layout.attention_dp,
        sequences_at_mean=int(pool // per_mean) * layout.attention_dp if per_mean else 0,
    )


def serve_placement(cluster: ClusterSpec, layout: ServeLayout) -> dict[str, PlacementEntry]:
    """Where the tp, pp, ep and attention-DP groups land (tp innermost)."""
    shapes = {
        "tp": (layout.tp, 1, "ring"),
        "pp": (layout.pp, layout.tp, P2P),
        "ep": (layout.ep, 1, ALL_TO_ALL),
        "attention_dp": (layout.attention_dp, layout.attention_tp, "ring"),
        "replicas": (layout.replicas, layout.gpus_per_replica, "ring"),
    }
    return {
        dim: placement_entry(
            group_domain(cluster, size, stride, pattern=pattern, num_ranks=layout.num_gpus),
            size,
            stride,
        )
        for dim, (size, stride, pattern) in shapes.items()
    }


def memory_detail(
    layout: ServeLayout, mem: ServeMemoryCost, cluster: ClusterSpec, context: int
) -> tuple[str, str]:
    """(reason code, sentence) for a layout whose weights or first sequence do not fit."""
    acc = cluster.accelerator
    need = mem.weights + mem.workspace
    if need > mem.capacity:
        return "memory", (
            f"{layout.short()} needs {mem.weights / GiB:.1f} GiB of weights + "
            f"{mem.workspace / GiB:.1f} GiB workspace per GPU but {acc.name} has "
            f"{mem.capacity / GiB:.1f} GiB usable: over by {(need - mem.capacity) / GiB:.1f} GiB"
        )
    return "kv_cache", (
        f"{layout.short()} leaves {mem.kv_pool / GiB:.2f} GiB of KV cache per GPU, less than the "
        f"{mem.kv_per_sequence / GiB:.2f} GiB one {context}-token sequence needs"
    )


def _targets(workload: ServeWorkload, point: OperatingPoint) -> list[TargetCheck]:
    """Each latency target the workload sets, against the achieved figure."""
    out = []
    for name, _ in TARGETS:
        target = getattr(workload, name)
        if target is None:
            continue
        achieved = target_value_s(name, point.state, point.times, workload.slo_percentile) / MS
        out.append(
            TargetCheck(
                name=name.removesuffix("_ms"),  # type: ignore[arg-type]
                percentile=None if name == "tpot_ms" else workload.slo_percentile,
                target_ms=target,
                achieved_ms=achieved,
                met=achieved <= target * (1 + 1e-9),
            )
        )
    return out


def _latency(
    setup: ServeSetup, workload: ServeWorkload, mem: ServeMemoryCost, point: OperatingPoint
) -> ServeLatency:
    t = point.times
    slots = min(mem.sequences or point.concurrency, workload.max_batch_tokens * setup.layout.pp)
    if workload.concurrency is not None:
        slots = workload.concurrency
    capacity = capacity_requests_per_s(setup, workload, max(1, slots))
    return ServeLatency(
        request_rate_per_s=workload.request_rate,
        max_request_rate_per_s=capacity * setup.layout.replicas,
        queue_mean_s=t.queue_mean_s,
        ttft_mean_s=t.ttft_mean_s,
        ttft_p50_s=t.ttft_p50_s,
        ttft_p90_s=t.ttft_p90_s,
        e2e_mean_s=t.e2e_mean_s,
        e2e_p50_s=t.e2e_p50_s,
        e2e_p90_s=t.e2e_p90_s,
    )


def to_serve_plan(
    setup: ServeSetup,
    cluster: ClusterSpec,
    workload: ServeWorkload,
    mem: ServeMemoryCost,
    point: OperatingPoint,
) -> ServePlan:
    """Wrap the cost terms into the user-facing ServePlan."""
    model, layout, acc = setup.model, setup.layout, cluster.accelerator
    state = point.state
    tpot = state.tpot_s
    per_replica = point.concurrency / tpot
    read = weight_bytes_read_per_token(model, layout.precision, layout)
    band = serve_band(acc, setup.engine)
    warnings = [*band.warnings, *point.warnings]
    if layout.precision in (NumberFormat.NVFP4, NumberFormat.MXFP4):
        warnings.append(f"{layout.precision} serving is validated on few published runs")
    floor = decode_hbm_floor_s(
        model,
        layout,
        sequences=point.concurrency,
        context=state.context,
        hbm_bytes_per_s=acc.hbm_bytes_per_s,
        skew=setup.routing_skew,
    )
    return ServePlan(
        model=model.name,
        cluster=cluster.name,
        cluster_description=cluster.describe(),
        device_noun=cluster.accelerator.device_noun,
        num_gpus=layout.num_gpus,
        layout=layout,
        compute_precision=setup.compute_format,
        weights_gib_per_gpu=mem.weights / GiB,
        kv_bytes_per_token=kv_bytes_per_token(model, layout.kv_precision, workload.context),
        kv_bytes_per_token_per_gpu=mem.kv_per_sequence / workload.context,
        kv_replication=kv_replication(model, layout.attention_tp),
        kv_cache_tokens=mem.tokens,
        max_concurrent_sequences=mem.sequences,
        concurrency=point.concurrency,
        concurrency_limit=point.limit,
        decode_step_s=tpot,
        decode_tokens_per_s_per_sequence=1.0 / tpot,
        batch1_ceiling_tokens_per_s=decode_ceiling_tokens_per_s(acc.hbm_bytes_per_s, read),
        ttft_s=point.ttft_s,
        prefill_s=idle_prefill_s(setup, workload),
        throughput_tokens_per_s=per_replica * layout.replicas,
        throughput_tokens_per_s_per_gpu=per_replica / layout.gpus_per_replica,
        fits=mem.sequences >= 1 or point.concurrency <= mem.sequences_at_mean,
        memory=ServeMemory(
            hbm_gib=acc.total_memory_bytes / GiB,
            capacity_gib=mem.capacity / GiB,
            weights_gib=mem.weights / GiB,
            workspace_gib=mem.workspace / GiB,
            kv_cache_gib=mem.kv_pool / GiB,
        ),
        breakdown_s={**state.decode.as_dict(), "prefill": state.prefill_per_token_s},
        placement=serve_placement(cluster, layout),
        uncertainty_pct=band.uncertainty_pct,
        uncertainty_level=band.level,
        warnings=warnings,
        decode_iteration_s=state.decode.total_s,
        decode_hbm_floor_s=floor,
        context_tokens=state.context,
        latency=_latency(setup, workload, mem, point),
        targets=_targets(workload, point),
        engine=ServeEngine(
            max_num_seqs=max(1, point.concurrency),
            max_num_tokens=workload.max_batch_tokens,
            mixed_prefill=workload.mixed_prefill,
            kv_cache_fraction=workload.kv_cache_fraction,
            max_model_len=workload.context,
            profile=workload.engine,
        ),
    )


def replicas_for(per_replica_tokens_per_s: float, target: float) -> int:
    """Replicas needed to sustain ``target`` output tokens/s.

    >>> replicas_for(1000.0, 2500.0)
    3
    """
    return max(1, math.ceil(target / per_replica_tokens_per_s))
