"""Score one serving layout: topology -> CommDomains -> serving cost terms -> a ServePlan.

The operating point of a layout is its concurrency (sequences decoded together per replica): the
largest the KV cache holds, cut by the TPOT/TTFT targets (binary search: both grow with the
batch), by a requested concurrency, or by an offered request rate (Little's law fixed point).
The search over layouts is in :mod:`planner.search.serving_search`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from planner.cost.serving import (
    decode_ceiling_tokens_per_s,
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
from planner.cost.serving_time import PassLoad, PassTime, ServeSetup, decode_token_time, ttft_time
from planner.errors import SpecError
from planner.search.trust import serve_band
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.formats import NumberFormat
from planner.specs.model import ModelSpec
from planner.specs.result import PlacementEntry, ServeLayout, ServeMemory, ServePlan
from planner.specs.workload import ServeWorkload
from planner.topology import group_domain, placement_entry
from planner.topology.flows import ALL_TO_ALL, P2P
from planner.units import MS, GiB

ONLINE_ITERATIONS = 30
"""Fixed-point iterations of Little's law for an offered request rate."""
KV_FORMATS: tuple[NumberFormat, ...] = (
    NumberFormat.BF16,
    NumberFormat.FP16,
    NumberFormat.FP8,
    NumberFormat.INT8,
)
"""KV-cache formats every engine can store whatever the tensor cores run (FP4 KV needs them)."""


def compute_format(workload: ServeWorkload, cluster: ClusterSpec) -> NumberFormat:
    """The GEMM format: as asked, else the weight format when the tensor cores run it, else
    bf16 (weight-only quantisation)."""
    if workload.compute_precision is not None:
        return workload.compute_precision
    acc = cluster.accelerator
    return workload.precision if acc.supports(workload.precision) else NumberFormat.BF16


def check_serve_workload(model: ModelSpec, cluster: ClusterSpec, workload: ServeWorkload) -> None:
    """Raise SpecError when the workload cannot run on this hardware (not a layout problem)."""
    acc = cluster.accelerator
    fmt = compute_format(workload, cluster)
    if not acc.supports(fmt):
        formats = ", ".join(sorted(str(f) for f in acc.peak_TFLOP_per_s))
        raise SpecError(
            f"compute precision '{fmt}' is not supported by {acc.name} (its tensor cores run: "
            f"{formats})"
        )
    if workload.kv_precision not in KV_FORMATS and not acc.supports(workload.kv_precision):
        raise SpecError(f"kv-precision '{workload.kv_precision}' is not supported by {acc.name}")
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


def serve_setup(
    model: ModelSpec, cluster: ClusterSpec, workload: ServeWorkload, layout: ServeLayout
) -> ServeSetup:
    """The cost model's inputs: each group's CommDomain from the topology (ranks ordered tp
    innermost, then pp, then replicas), all groups of the deployment communicating at once."""
    ranks = layout.num_gpus
    return ServeSetup(
        model=model,
        accelerator=cluster.accelerator,
        layout=layout,
        compute_format=compute_format(workload, cluster),
        attention_comm=group_domain(cluster, layout.attention_tp, 1, num_ranks=ranks),
        tp_comm=group_domain(cluster, layout.tp, 1, num_ranks=ranks),
        ep_comm=group_domain(cluster, layout.ep, 1, pattern=ALL_TO_ALL, num_ranks=ranks),
        pp_comm=group_domain(cluster, layout.pp, layout.tp, pattern=P2P, num_ranks=ranks),
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
    return ServeMemoryCost(
        weights=weights,
        workspace=workspace,
        capacity=capacity,
        kv_pool=pool,
        kv_per_sequence=per_sequence,
        tokens=tokens * layout.attention_dp,
        sequences=max_concurrent_sequences(tokens, workload.context) * layout.attention_dp,
    )


class OperatingPoint(FrozenSpec):
    """A layout at its chosen concurrency."""

    concurrency: int
    """Sequences decoded together per replica."""
    limit: str
    """What bounds the concurrency."""
    tpot: PassTime
    """Time per output token by term."""
    ttft_s: float
    """Time to first token joining this batch (s)."""


def steady_load(workload: ServeWorkload, concurrency: float, pp: int) -> PassLoad:
    """What one stage pass carries in steady state: concurrency / pp decoding sequences at the
    mean context ISL + OSL/2, and the prompts of the requests that replace finished ones
    (ISL / OSL prompt tokens per decoded token). Fewer sequences than stages fill only
    some stages: a micro-batch holds at least one sequence."""
    micro = max(concurrency / pp, min(concurrency, 1.0))
    return PassLoad(
        decode_sequences=micro,
        context=workload.prompt_len + workload.output_len / 2,
        prefill_tokens=micro * workload.prompt_len / workload.output_len,
        prompt_len=workload.prompt_len,
    )


def tpot_at(setup: ServeSetup, workload: ServeWorkload, concurrency: float) -> PassTime:
    """Time per output token at ``concurrency`` sequences (steady state)."""
    load = steady_load(workload, concurrency, setup.layout.pp)
    return decode_token_time(setup, concurrency=concurrency, load=load)


def ttft_at(setup: ServeSetup, workload: ServeWorkload, concurrency: float) -> float:
    """Time to first token of a prompt joining ``concurrency`` running sequences (s)."""
    running = steady_load(workload, concurrency, setup.layout.pp)
    return ttft_time(
        setup,
        running=running,
        prompt_len=workload.prompt_len,
        chunk_tokens=workload.max_batch_tokens,
    )


def largest_batch(upper: int, ok: Callable[[int], bool]) -> int:
    """Largest b in [1, upper] with ok(b), for ok monotone (true then false); 0 if none.

    >>> largest_batch(100, lambda b: b * b <= 50)
    7
    """
    if upper < 1 or not ok(1):
        return 0
    low, high = 1, upper
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if ok(mid) else (low, mid - 1)
    return low


def _online_concurrency(
    setup: ServeSetup, workload: ServeWorkload, qps: float, upper: int
) -> float:
    """Little's law: C = qps x (TTFT + OSL x TPOT(C)), iterated from C = 1."""
    c = 1.0
    for _ in range(ONLINE_ITERATIONS):
        busy = (
            ttft_at(setup, workload, c) + workload.output_len * tpot_at(setup, workload, c).total_s
        )
        c = min(float(upper), max(1.0, qps * busy))
    return c


def operating_point(
    setup: ServeSetup, workload: ServeWorkload, max_sequences: int
) -> OperatingPoint | tuple[str, str]:
    """The concurrency this layout runs at, or (reason code, detail) when no batch meets the
    limits."""
    pp = setup.layout.pp
    upper, limit = max_sequences, "kv_cache"
    if workload.max_batch_tokens * pp < upper:
        upper, limit = workload.max_batch_tokens * pp, "max_batch_tokens"
    if workload.concurrency is not None:
        if workload.concurrency > max_sequences:
            return "kv_cache", (
                f"concurrency {workload.concurrency} exceeds the {max_sequences} "
                f"{workload.context}-token sequences the KV cache holds"
            )
        upper, limit = workload.concurrency, "requested"
    elif workload.objective == "latency" and workload.target_tokens_per_s is None:
        upper, limit = 1, "requested"
    for name, target, measure in (
        ("tpot", workload.tpot_ms, lambda b: tpot_at(setup, workload, b).total_s),
        ("ttft", workload.ttft_ms, lambda b: ttft_at(setup, workload, b)),
    ):
        if target is None:
            continue
        best = largest_batch(upper, lambda b, m=measure, t=target: m(b) <= t * MS)
        if best == 0:
            what = "decode step" if name == "tpot" else "time to first token"
            return name, (
                f"{setup.layout.short()}: batch-1 {what} {measure(1) / MS:.1f} ms exceeds "
                f"--{name}-ms {target:g}"
            )
        if best < upper:
            upper, limit = best, name
    concurrency: float = upper
    if workload.qps is not None and workload.concurrency is None:
        online = _online_concurrency(setup, workload, workload.qps, upper)
        if online < upper:
            concurrency, limit = online, "offered_load"
    return OperatingPoint(
        concurrency=max(1, round(concurrency)),
        limit=limit,
        tpot=tpot_at(setup, workload, concurrency),
        ttft_s=ttft_at(setup, workload, concurrency),
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


def to_serve_plan(
    setup: ServeSetup,
    cluster: ClusterSpec,
    workload: ServeWorkload,
    mem: ServeMemoryCost,
    point: OperatingPoint,
) -> ServePlan:
    """Wrap the cost terms into the user-facing ServePlan."""
    model, layout, acc = setup.model, setup.layout, cluster.accelerator
    tpot = point.tpot.total_s
    per_replica = point.concurrency / tpot
    read = weight_bytes_read_per_token(model, layout.precision, layout)
    idle = PassLoad(decode_sequences=0, context=1, prefill_tokens=0)
    prefill = ttft_time(
        setup, running=idle, prompt_len=workload.prompt_len, chunk_tokens=workload.max_batch_tokens
    )
    band = serve_band(acc)
    warnings = list(band.warnings)
    if layout.precision in (NumberFormat.NVFP4, NumberFormat.MXFP4):
        warnings.append(f"{layout.precision} serving is validated on one published run only")
    return ServePlan(
        model=model.name,
        cluster=cluster.name,
        cluster_description=cluster.describe(),
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
        prefill_s=prefill,
        throughput_tokens_per_s=per_replica * layout.replicas,
        throughput_tokens_per_s_per_gpu=per_replica / layout.gpus_per_replica,
        fits=mem.sequences >= 1,
        memory=ServeMemory(
            hbm_gib=acc.total_memory_bytes / GiB,
            capacity_gib=mem.capacity / GiB,
            weights_gib=mem.weights / GiB,
            workspace_gib=mem.workspace / GiB,
            kv_cache_gib=mem.kv_pool / GiB,
        ),
        breakdown_s=point.tpot.as_dict(),
        placement=serve_placement(cluster, layout),
        uncertainty_pct=band.uncertainty_pct,
        uncertainty_level=band.level,
        warnings=warnings,
    )


def replicas_for(per_replica_tokens_per_s: float, target: float) -> int:
    """Replicas needed to sustain ``target`` output tokens/s.

    >>> replicas_for(1000.0, 2500.0)
    3
    """
    return max(1, math.ceil(target / per_replica_tokens_per_s))
