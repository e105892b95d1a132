"""The candidate space: every legal combination of parallel degrees and per-GPU settings, scored
by the cost model, with each rejected candidate kept as a (reason, detail) record."""

from __future__ import annotations

import itertools
from collections import Counter

from planner.cost.step import StepCost
from planner.errors import SpecError
from planner.search.evaluate import fits, score
from planner.search.rules import layout_violations
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.result import Rejection
from planner.specs.workload import TrainWorkload
from planner.units import GiB

MICRO_BATCH_CHOICES: tuple[int, ...] = (1, 2, 4, 8)
"""Micro-batch sizes tried (sequences)."""
VPP_CHOICES: tuple[int, ...] = (1, 2, 4, 8)
"""Virtual pipeline stages per rank tried."""
ZERO_CHOICES: tuple[int, ...] = (0, 1)
"""ZeRO stages tried: none, and the distributed optimizer (stage 1)."""
PINNABLE: tuple[str, ...] = ("tp", "pp", "vpp", "dp", "cp", "ep", "etp", "mbs", "recompute", "zero")
"""Layout fields a user may pin with --fix."""


class Candidate(FrozenSpec):
    """A legal layout that fits, with its cost."""

    layout: Layout
    """The layout."""
    cost: StepCost
    """Its cost-model answer."""

    @property
    def structure(self) -> tuple[int, int, int, int]:
        """The parallel degrees (tp, pp, dp, ep) that tell runners-up apart."""
        lay = self.layout
        return (lay.tp, lay.pp, lay.dp, lay.ep)


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


def _ep_choices(model: ModelSpec, dp: int) -> list[int]:
    if model.moe is None:
        return [1]
    return [d for d in divisors(dp) if model.moe.num_experts % d == 0]


def enumerate_layouts(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload, fix: dict[str, object]
) -> list[Layout]:
    """Every combination of degrees and settings (rules not yet applied), honouring pins."""
    n = cluster.num_accelerators
    heads = model.num_kv_heads if model.mla is None else model.num_attention_heads
    out: list[Layout] = []
    for tp in divisors(n):
        if heads % tp:
            continue
        for pp in divisors(n // tp):
            if pp > model.num_layers:
                continue
            dp = n // (tp * pp)
            combos = itertools.product(
                VPP_CHOICES if pp > 1 else (1,),
                _ep_choices(model, dp),
                MICRO_BATCH_CHOICES,
                tuple(Recompute),
                ZERO_CHOICES,
            )
            for vpp, ep, mbs, recompute, zero in combos:
                fields = {
                    "tp": tp,
                    "pp": pp,
                    "vpp": vpp,
                    "dp": dp,
                    "ep": ep,
                    "mbs": mbs,
                    "recompute": recompute,
                    "zero": zero,
                    "precision": workload.precision,
                }
                fields.update(fix)
                out.append(Layout.model_validate(fields))
    return list(dict.fromkeys(out))


def build_candidates(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload, fix: dict[str, object]
) -> CandidateSet:
    """Enumerate, check the rules, score, and split into feasible candidates and rejections."""
    unknown = set(fix) - set(PINNABLE)
    if unknown:
        raise SpecError(
            f"cannot pin '{sorted(unknown)[0]}'; pinnable fields: {', '.join(PINNABLE)}"
        )
    layouts = enumerate_layouts(model, cluster, workload, fix)
    feasible: list[Candidate] = []
    rejected: list[tuple[float, Rejection]] = []
    counts: Counter[str] = Counter()
    capacity = cluster.accelerator.usable_memory_bytes
    for layout in layouts:
        violations = layout_violations(model, cluster, workload, layout)
        if violations:
            reason, detail = violations[0]
            counts[reason] += 1
            rejected.append((float("inf"), Rejection(layout=layout, reason=reason, detail=detail)))
            continue
        cost = score(model, cluster, workload, layout)
        if fits(cost, cluster):
            feasible.append(Candidate(layout=layout, cost=cost))
            continue
        counts["memory"] += 1
        mem = cost.peak_memory
        detail = memory_detail(
            layout,
            mem.total,
            mem.weights,
            mem.grads + mem.optimizer,
            mem.activations,
            capacity,
            cluster,
        )
        rejected.append(
            (mem.total - capacity, Rejection(layout=layout, reason="memory", detail=detail))
        )
    rejected.sort(key=lambda item: item[0])
    return CandidateSet(
        feasible=feasible,
        num_enumerated=len(layouts),
        rejections=[r for _, r in rejected[:20]],
        rejection_counts=dict(counts),
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
