"""The candidate space: every legal combination of parallel degrees and per-GPU settings, scored
by the cost model, with each rejected candidate kept as a (reason, detail) record."""

from __future__ import annotations

import itertools
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import Field

from planner.cost.stage import StageMemory
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
RECOMPUTE_ORDER: tuple[Recompute, ...] = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
"""Recomputation from weakest (fastest, most memory) to strongest."""
MEMORY_LADDER: tuple[tuple[Recompute, int], ...] = tuple(
    (recompute, zero)
    for zero in (0, 1, 2, 3)
    for recompute in RECOMPUTE_ORDER
)
"""(recompute, ZeRO stage) from least to most memory-saving. A stronger recompute only adds
compute, and a higher ZeRO stage only adds communication (ZeRO-2 reduce-scatters every
micro-batch's gradients, ZeRO-3 also gathers the parameters), both for less memory: so once a
rung fits, every later rung whose recompute is no weaker is dominated and skipped, and a higher
ZeRO stage is tried only with a weaker recompute than any that fitted (ZeRO-2 with no recompute
may beat ZeRO-1 with selective). ZeRO-0 is tried only when pinned (``--fix zero=0``): it is dominated
by ZeRO-1 whenever dp x cp > 1 (the distributed optimizer moves 6 instead of 8 bytes per
parameter, holds less and steps a shard of the optimizer), and identical at dp x cp = 1
(tests/test_search.py checks the dominance on the cost model)."""
Bounds = dict[str, tuple[int | None, int | None]]
"""Layout field -> (lowest, highest) allowed value, from --min / --max."""
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
    cluster: ClusterSpec
    """The (sub-)cluster it runs on: the whole cluster, or the first ``num_gpus`` of it."""

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


def _within(fields: dict[str, object], bounds: Bounds) -> bool:
    """Whether every bounded numeric field lies in its [low, high] (--min / --max)."""
    for key, value in fields.items():
        low, high = bounds.get(key, (None, None))
        number = int(value)  # type: ignore[call-overload]
        if (low is not None and number < low) or (high is not None and number > high):
            return False
    return True


def enumerate_structures(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    fix: dict[str, object],
    *,
    precisions: list[NumberFormat],
    bounds: Bounds,
) -> list[dict[str, object]]:
    """Parallel degrees and precision (the structure) of every candidate, pins applied."""
    out = []
    n = cluster.num_accelerators
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
                numeric = {k: v for k, v in fields.items() if k != "precision"}
                if _pinned(fields, fix) and _within(numeric, bounds):
                    out.append(fields)
    return out


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


MemoryEstimate = tuple[list[int], list[StageMemory]]
LayoutKey = tuple[object, ...]


class MemoryMemo:
    """Memory estimates of layouts kept across searches of one model and workload in one
    process (a what-if sweep): a layout's memory depends on the model, the workload and the
    layout only (:func:`planner.cost.step.estimate_memory`), not on the cluster's network, so
    the scenarios of a NIC or oversubscription sweep re-use them. Bounded: the last
    ``MAX_WORKLOADS`` (model, workload) pairs, ``MAX_LAYOUTS`` layouts each."""

    MAX_WORKLOADS = 4
    MAX_LAYOUTS = 100_000

    def __init__(self) -> None:
        self.tables: OrderedDict[tuple[ModelSpec, TrainWorkload], dict[LayoutKey, MemoryEstimate]]
        self.tables = OrderedDict()

    def table(self, model: ModelSpec, workload: TrainWorkload) -> dict[LayoutKey, MemoryEstimate]:
        """The estimates of ``model`` under ``workload`` (a new table if none)."""
        key = (model, workload)
        if key in self.tables:
            self.tables.move_to_end(key)
        else:
            self.tables[key] = {}
            while len(self.tables) > self.MAX_WORKLOADS:
                self.tables.popitem(last=False)
        return self.tables[key]


_MEMO: MemoryMemo | None = None
"""The process's memo while a sweep shares memory estimates (None: every search computes its
own, as a single ``layout search`` does)."""


@contextmanager
def shared_memory_estimates() -> Iterator[None]:
    """Within the block, searches of the same model and workload share memory estimates."""
    global _MEMO
    previous, _MEMO = _MEMO, MemoryMemo()
    try:
        yield
    finally:
        _MEMO = previous


def share_memory_estimates_for_process() -> None:
    """From now on, this process's searches share memory estimates (a sweep's worker)."""
    global _MEMO
    _MEMO = _MEMO or MemoryMemo()


class _Collector:
    """Accumulates scored candidates and rejections while the structures are visited."""

    def __init__(self, cluster: ClusterSpec, request: SpaceRequest) -> None:
        self.request = request
        self.memo: dict[LayoutKey, MemoryEstimate] | None = None
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
        finite = excess if excess != float("inf") else None
        rejection = Rejection(layout=layout, reason=reason, detail=detail, excess=finite)
        self.rejected.append((excess, rejection))

    def accept(self, layout: Layout, cost: StepCost, cluster: ClusterSpec) -> None:
        limit = self.request.max_step_s
        if limit is not None and cost.step_time_s > limit:
            detail = (
                f"{layout.short()} takes {cost.step_time_s:.3g} s per step, above the "
                f"{limit:.3g} s target"
            )
            self.reject(layout, "target", detail, cost.step_time_s - limit)
            return
        self.feasible.append(Candidate(layout=layout, cost=cost, cluster=cluster))
        key = (layout.num_gpus, *(str(getattr(layout, k)) for k in STRUCTURE_FIELDS))
        value = objective_value(self.request.objective, layout.num_gpus, cost.step_time_s)
        self.best_by_structure[key] = min(self.best_by_structure.get(key, float("inf")), value)


def _visit_structure(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    fields: dict[str, object],
    request: SpaceRequest,
    out: _Collector,
) -> None:
    """Score every (vpp, mbs) of one structure, climbing the memory ladder until a rung fits."""
    fix, bounds = request.fix, request.bounds
    ladder = [
        (r, z)
        for r, z in MEMORY_LADDER
        if _pinned({"recompute": r, "zero": z}, fix)
        and _within({"zero": z}, bounds)
        and (z != 0 or fix.get("zero") == 0)
    ]
    pp, cp = int(fields["pp"]), int(fields["cp"])  # type: ignore[call-overload]
    for vpp, mbs in _inner_choices(workload, pp, cp, fix):
        if not _within({"vpp": vpp, "mbs": mbs}, bounds):
            continue
        fitted_rung: int | None = None  # the weakest recompute that fitted at a lower ZeRO
        for recompute, zero in ladder:
            rung = RECOMPUTE_ORDER.index(recompute)
            if fitted_rung is not None and rung >= fitted_rung:
                continue  # dominated: as fast or faster at a lower ZeRO, same or weaker recompute
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
            memory = _memory(model, workload, layout, out.memo)
            mem = max(memory[1], key=lambda s: s.total)
            if mem.total > out.capacity:
                states = mem.grads + mem.optimizer
                detail = memory_detail(
                    layout, mem.total, mem.weights, states, mem.activations, out.capacity, cluster
                )
                out.reject(layout, "memory", detail, mem.total - out.capacity)
                continue
            fitted_rung = rung if fitted_rung is None else min(fitted_rung, rung)
            out.accept(layout, score(model, cluster, workload, layout, memory=memory), cluster)


def _memory(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    memo: dict[LayoutKey, MemoryEstimate] | None,
) -> MemoryEstimate:
    """estimate_memory, through the sweep's memo when there is one."""
    if memo is None:
        return estimate_memory(model, workload, layout)
    key = (layout.tp, layout.cp, layout.pp, layout.dp, layout.ep, layout.etp, layout.vpp,
           layout.mbs, layout.recompute, layout.zero, layout.precision)  # fmt: skip
    memory = memo.get(key)
    if memory is None:
        memory = estimate_memory(model, workload, layout)
        if len(memo) < MemoryMemo.MAX_LAYOUTS:
            memo[key] = memory
    return memory


class SpaceRequest(FrozenSpec):
    """What the user allows: pins, bounds, precisions, the objective and a step-time target."""

    fix: dict[str, object] = Field(default_factory=dict)
    """Pinned layout fields (--fix)."""
    bounds: dict[str, tuple[int | None, int | None]] = Field(default_factory=dict)
    """Field -> (lowest, highest) (--min / --max)."""
    precisions: list[NumberFormat] = Field(default_factory=list)
    """Precisions to try (empty = the workload's)."""
    objective: str = "time"
    """time, cost or energy (cost and energy rank by GPU-seconds per token)."""
    max_step_s: float | None = None
    """Candidates slower than this are rejected (--target-step-time)."""


def objective_value(objective: str, num_gpus: int, step_time_s: float) -> float:
    """Value to minimise: seconds per step, or GPU-seconds per step (cost, energy: per token the
    price and TDP are constant factors on one cluster)."""
    return step_time_s if objective == "time" else num_gpus * step_time_s


def build_candidates(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    request: SpaceRequest | None = None,
    *,
    prune_top: int = 0,
    incumbents: dict[tuple[object, ...], float] | None = None,
) -> CandidateSet:
    """Enumerate, check the rules, score, and split into feasible candidates and rejections.

    ``incumbents`` (structure -> best objective) is shared between calls for several GPU counts,
    so a bound found on one count prunes the others.

    For each structure (parallel degrees, precision) and (vpp, mbs) the memory ladder is climbed
    until a rung fits (MEMORY_LADDER). With ``prune_top`` = k > 0, structures are visited in
    order of a valid lower bound of the objective and the visit stops once the bound reaches
    the k-th best structure found (branch and bound: the best k structures are exactly those of
    the full enumeration). ``prune_top`` = 0 scores everything (the exhaustive reference).
    """
    request = request or SpaceRequest()
    unknown = set(request.fix) - set(PINNABLE)
    if unknown:
        raise SpecError(
            f"cannot pin '{sorted(unknown)[0]}'; pinnable fields: {', '.join(PINNABLE)}"
        )
    structures = enumerate_structures(
        model,
        cluster,
        workload,
        request.fix,
        bounds=request.bounds,
        precisions=request.precisions or [workload.precision],
    )
    out = _Collector(cluster, request)
    if _MEMO is not None:
        out.memo = _MEMO.table(model, workload)
    if incumbents is not None:
        out.best_by_structure = incumbents
    order = structures
    limits: list[float] = []
    if prune_top:
        keyed = []
        for i, fields in enumerate(structures):
            floor = _lower_bound(model, cluster, workload, fields, request.fix)
            if request.max_step_s is not None and floor > request.max_step_s:
                out.counts["target"] += 1
                continue
            keyed.append((objective_value(request.objective, cluster.num_accelerators, floor), i))
        keyed.sort()
        order = [structures[i] for _, i in keyed]
        limits = [v for v, _ in keyed]
    for position, fields in enumerate(order):
        if prune_top and limits[position] >= out.kth_best(prune_top) * (1 + PRUNE_SLACK):
            out.counts["bounded"] += len(order) - position
            break
        _visit_structure(model, cluster, workload, fields, request, out)
    out.rejected.sort(key=lambda item: item[0])
    return CandidateSet(
        feasible=out.feasible,
        num_enumerated=out.enumerated + out.counts.get("bounded", 0),
        rejections=[r for _, r in out.rejected[:20]],
        rejection_counts=dict(out.counts),
    )


def merge_candidate_sets(sets: list[CandidateSet]) -> CandidateSet:
    """One CandidateSet from several (one per GPU count)."""
    counts: Counter[str] = Counter()
    for cs in sets:
        counts.update(cs.rejection_counts)
    rejections = sorted(
        (r for cs in sets for r in cs.rejections),
        key=lambda r: (r.reason not in ("memory", "target"), r.reason, r.excess or 0.0),
    )
    return CandidateSet(
        feasible=[c for cs in sets for c in cs.feasible],
        num_enumerated=sum(cs.num_enumerated for cs in sets),
        rejections=rejections[:20],
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
