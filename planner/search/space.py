"""The candidate space: every legal combination of parallel degrees and per-GPU settings, scored
by the cost model, with each rejected candidate kept as a (reason, detail) record."""

from __future__ import annotations

import itertools
from collections import Counter

from planner.cost.step import StepCost, estimate_memory, step_time_lower_bound
from planner.errors import SpecError
from planner.search.evaluate import score
from planner.search.rules import layout_violations
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.result import Rejection
from planner.specs.workload import TrainWorkload
from planner.topology import comm_domains
from planner.units import GiB

MICRO_BATCH_CHOICES: tuple[int, ...] = (1, 2, 4, 8)
"""Micro-batch sizes tried (sequences)."""
MICROBATCH_TOKENS_SATURATE = 16384
"""Tokens per micro-batch beyond which larger micro-batches no longer raise GEMM efficiency
(M >= 16k rows fill every tile wave on current GPUs); larger ones only add memory and bubble, so
they are tried only when pinned."""
VPP_CHOICES: tuple[int, ...] = (1, 2, 4, 8)
"""Virtual pipeline stages per rank tried."""
CP_MIN_TOKENS_PER_RANK = 1024
"""Context parallelism is tried while each rank keeps at least this many tokens of a sequence."""
MEMORY_LADDER: tuple[tuple[Recompute, int], ...] = (
    (Recompute.NONE, 1),
    (Recompute.SELECTIVE, 1),
    (Recompute.FULL, 1),
    (Recompute.NONE, 3),
    (Recompute.SELECTIVE, 3),
    (Recompute.FULL, 3),
)
"""(recompute, ZeRO stage) from least to most memory-saving. Within one ZeRO stage a stronger
recompute only adds compute, so once a rung fits the stronger recomputes of that stage are
dominated and skipped. ZeRO-0 is dominated by ZeRO-1 whenever dp x cp > 1 (the distributed
optimizer moves 6 instead of 8 bytes per parameter and holds less), and identical at dp x cp = 1."""
PRUNE_SLACK = 1e-9
"""Relative margin on the branch-and-bound test (guards float rounding)."""
STRUCTURE_FIELDS: tuple[str, ...] = ("tp", "cp", "pp", "dp", "ep", "etp", "precision")
"""Fields that tell runners-up apart (each alternative has different parallel degrees)."""
PINNABLE: tuple[str, ...] = (
    "tp",
    "pp",
    "vpp",
    "dp",
    "cp",
    "ep",
    "etp",
    "mbs",
    "recompute",
    "zero",
    "precision",
)
"""Layout fields a user may pin with --fix."""


class Candidate(FrozenSpec):
    """A legal layout that fits, with its cost."""

    layout: Layout
    """The layout."""
    cost: StepCost
    """Its cost-model answer."""

    @property
    def structure(self) -> tuple[object, ...]:
        """The parallel degrees and precision (STRUCTURE_FIELDS) that tell runners-up apart."""
        return tuple(str(getattr(self.layout, k)) for k in STRUCTURE_FIELDS)


class CandidateSet(FrozenSpec):
    """The outcome of enumeration."""

    feasible: list[Candidate]
    """Candidates that obey every rule and fit memory."""
    num_enumerated: int
    """Layouts enumerated."""
    rejections: list[Rejection]
    """A sample of rejected layouts (the closest to fitting first) with their reasons."""
    rejection_counts: dict[str, int]
    """Rejected layouts by reason code."""


def divisors(n: int) -> list[int]:
    """Divisors of n in increasing order.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    """
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _ep_choices(model: ModelSpec, data_ranks: int) -> list[int]:
    if model.moe is None:
        return [1]
    return [d for d in divisors(data_ranks) if model.moe.num_experts % d == 0]


def _degree_choices(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload, num_gpus: int
) -> list[tuple[int, int, int, int]]:
    """(tp, cp, pp, dp) combinations that multiply to ``num_gpus`` and can be legal."""
    heads = model.num_kv_heads if model.mla is None else model.num_attention_heads
    tps = [t for t in divisors(num_gpus) if heads % t == 0 and t <= cluster.accelerators_per_domain]
    out = []
    for tp in tps:
        for cp in divisors(num_gpus // tp):
            if cp > 1 and workload.seq_len // cp < CP_MIN_TOKENS_PER_RANK:
                continue
            for pp in divisors(num_gpus // (tp * cp)):
                if pp <= model.num_layers:
                    out.append((tp, cp, pp, num_gpus // (tp * cp * pp)))
    return out


def _inner_choices(
    workload: TrainWorkload, pp: int, cp: int, fix: dict[str, object]
) -> list[tuple[int, int]]:
    """(vpp, mbs) pairs worth trying."""
    vpps = VPP_CHOICES if pp > 1 else (1,)
    tokens = workload.seq_len // cp
    mbss = [m for m in MICRO_BATCH_CHOICES if m == 1 or m * tokens <= MICROBATCH_TOKENS_SATURATE]
    if "mbs" in fix:
        mbss = [int(fix["mbs"])]  # type: ignore[call-overload]
    if "vpp" in fix:
        vpps = (int(fix["vpp"]),)  # type: ignore[call-overload]
    return [(v, m) for v in vpps for m in mbss]


def _pinned(fields: dict[str, object], fix: dict[str, object]) -> bool:
    return all(str(fields[k]) == str(v) for k, v in fix.items() if k in fields)


def enumerate_structures(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    fix: dict[str, object],
    *,
    gpu_counts: list[int],
    precisions: list[NumberFormat],
) -> list[dict[str, object]]:
    """Parallel degrees and precision (the structure) of every candidate, pins applied."""
    out = []
    for n in gpu_counts:
        for tp, cp, pp, dp in _degree_choices(model, cluster, workload, n):
            for ep in _ep_choices(model, dp * cp * tp):
                etps = [1] if model.moe is None or tp == 1 else [1, tp]
                for etp, precision in itertools.product(etps, precisions):
                    fields: dict[str, object] = {
                        "tp": tp,
                        "cp": cp,
                        "pp": pp,
                        "dp": dp,
                        "ep": ep,
                        "etp": etp,
                        "precision": precision,
                    }
                    if _pinned(fields, fix):
                        out.append(fields)
    return out


def _structure_key(fields: dict[str, object]) -> tuple[object, ...]:
    return tuple(str(fields[k]) for k in STRUCTURE_FIELDS)


def _lower_bound(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    fields: dict[str, object],
    fix: dict[str, object],
) -> float:
    """Step-time lower bound of a structure (cost.step.step_time_lower_bound) at its largest
    micro-batch."""
    mbs = max(m for _, m in _inner_choices(workload, int(fields["pp"]), int(fields["cp"]), fix))  # type: ignore[call-overload]
    layout = Layout.model_construct(**fields, vpp=1, mbs=mbs, recompute=Recompute.NONE, zero=1)
    domains = comm_domains(cluster, layout)
    return step_time_lower_bound(model, cluster.accelerator, workload, layout, domains)


class _Collector:
    """Accumulates scored candidates and rejections while the structures are visited."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.feasible: list[Candidate] = []
        self.rejected: list[tuple[float, Rejection]] = []
        self.counts: Counter[str] = Counter()
        self.enumerated = 0
        self.capacity = cluster.accelerator.usable_memory_bytes
        self.best_by_structure: dict[tuple[object, ...], float] = {}

    def kth_best(self, k: int) -> float:
        values = sorted(self.best_by_structure.values())
        return values[k - 1] if len(values) >= k else float("inf")

    def reject(self, layout: Layout, reason: str, detail: str, excess: float) -> None:
        self.counts[reason] += 1
        self.rejected.append((excess, Rejection(layout=layout, reason=reason, detail=detail)))


def _visit_structure(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    fields: dict[str, object],
    fix: dict[str, object],
    out: _Collector,
) -> None:
    """Score every (vpp, mbs) of one structure, climbing the memory ladder until a rung fits."""
    ladder = [(r, z) for r, z in MEMORY_LADDER if _pinned({"recompute": r, "zero": z}, fix)]
    for vpp, mbs in _inner_choices(workload, int(fields["pp"]), int(fields["cp"]), fix):  # type: ignore[call-overload]
        fitted_zero: set[int] = set()
        for recompute, zero in ladder:
            if zero in fitted_zero:
                continue
            out.enumerated += 1
            layout = Layout.model_construct(
                **fields, vpp=vpp, mbs=mbs, recompute=recompute, zero=zero
            )
            violations = layout_violations(
                model, cluster, workload, layout, num_gpus=layout.num_gpus
            )
            if violations:
                out.reject(layout, violations[0][0], violations[0][1], float("inf"))
                break
            memory = estimate_memory(model, workload, layout)
            mem = max(memory[1], key=lambda s: s.total)
            if mem.total > out.capacity:
                detail = memory_detail(
                    layout,
                    mem.total,
                    mem.weights,
                    mem.grads + mem.optimizer,
                    mem.activations,
                    out.capacity,
                    cluster,
                )
                out.reject(layout, "memory", detail, mem.total - out.capacity)
                continue
            fitted_zero.add(zero)
            cost = score(model, cluster, workload, layout, memory=memory)
            out.feasible.append(Candidate(layout=layout, cost=cost))
            key = _structure_key(fields)
            best = out.best_by_structure.get(key, float("inf"))
            out.best_by_structure[key] = min(best, cost.step_time_s)


def build_candidates(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    fix: dict[str, object],
    *,
    gpu_counts: list[int] | None = None,
    precisions: list[NumberFormat] | None = None,
    prune_top: int = 0,
) -> CandidateSet:
    """Enumerate, check the rules, score, and split into feasible candidates and rejections.

    For each structure (parallel degrees, precision, GPU count) and (vpp, mbs) the memory ladder
    is climbed until a rung fits (MEMORY_LADDER). With ``prune_top`` = k > 0, structures are
    visited in order of a valid step-time lower bound and the visit stops once the bound reaches
    the k-th best structure found (branch and bound: the best k structures are exactly those of
    the full enumeration). ``prune_top`` = 0 scores everything (the exhaustive reference).
    """
    unknown = set(fix) - set(PINNABLE)
    if unknown:
        raise SpecError(
            f"cannot pin '{sorted(unknown)[0]}'; pinnable fields: {', '.join(PINNABLE)}"
        )
    structures = enumerate_structures(
        model,
        cluster,
        workload,
        fix,
        gpu_counts=gpu_counts or [cluster.num_accelerators],
        precisions=precisions or [workload.precision],
    )
    out = _Collector(cluster)
    if prune_top:
        bounds = [
            (_lower_bound(model, cluster, workload, f, fix), i) for i, f in enumerate(structures)
        ]
        order = [structures[i] for _, i in sorted(bounds)]
        limits = sorted(bounds)
    else:
        order, limits = structures, []
    for position, fields in enumerate(order):
        if prune_top and limits[position][0] >= out.kth_best(prune_top) * (1 + PRUNE_SLACK):
            out.counts["bounded"] += len(order) - position
            break
        _visit_structure(model, cluster, workload, fields, fix, out)
    out.rejected.sort(key=lambda item: item[0])
    return CandidateSet(
        feasible=out.feasible,
        num_enumerated=out.enumerated + out.counts.get("bounded", 0),
        rejections=[r for _, r in out.rejected[:20]],
        rejection_counts=dict(out.counts),
    )


def memory_detail(
    layout: Layout,
    total: float,
    weights: float,
    states: float,
    activations: float,
    capacity: float,
    cluster: ClusterSpec,
) -> str:
    """Sentence naming what does not fit and by how much."""
    acc = cluster.accelerator
    return (
        f"{layout.short()} needs {total / GiB:.1f} GiB per GPU (weights {weights / GiB:.1f}, "
        f"grads + optimizer {states / GiB:.1f}, activations {activations / GiB:.1f}) but "
        f"{acc.name} has {capacity / GiB:.1f} GiB usable ({acc.total_memory_bytes / GiB:.1f} GiB "
        f"({acc.hbm_GB:g} GB part) minus {acc.efficiency.memory_reserve_GB:g} GB runtime reserve): "
        f"over by {(total - capacity) / GiB:.1f} GiB"
    )
