"""The candidate space: every legal combination of parallel degrees and per-GPU settings, scored
by the cost model, with each rejected candidate kept as a (reason, detail) record."""

from __future__ import annotations

import heapq
import itertools
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pydantic import Field

from planner.catalog.frameworks import load_framework
from planner.cost.pipeline import bubble_is_a_share, runs_combined_1f1b
from planner.cost.sharding import gathers_fp8_params
from planner.cost.stage import microbatch_time
from planner.cost.step import (
    MicrobatchTime,
    StageMemory,
    StageMemoryProfile,
    StepCost,
    estimate_memory,
    lean_prefetch_memory,
    memory_profiles,
    pipeline_steps,
    prefetch_yields_to_memory,
    representative_stages,
    step_time_floor,
)
from planner.errors import SpecError
from planner.search.evaluate import score
from planner.search.pipeline import framework_split
from planner.search.rules import (
    EP_OVERLAP_FULL_RECOMPUTE,
    layout_violations,
    tp_heads_rule,
    workload_domains,
)
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.result import Rejection
from planner.specs.solver_config import TIME_QUANTUM_S
from planner.specs.workload import TrainWorkload
from planner.units import GiB

CP_MIN_TOKENS_PER_RANK = 1024
"""Context parallelism is tried while each rank keeps at least this many tokens of a sequence."""
RECOMPUTE_ORDER: tuple[Recompute, ...] = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
"""Recomputation from weakest (fastest, most memory) to strongest."""
ZERO_STAGES: tuple[int, ...] = (1, 0, 2, 3)
"""ZeRO stages tried (ZeRO-1, Megatron's distributed optimizer, first: on a tie, at dp x cp = 1,
the ranking keeps the first row), each with its own recompute ladder (RECOMPUTE_ORDER): at one ZeRO stage a
stronger recompute only adds compute for less memory, so the first rung that fits is the fastest
of that stage and the stronger ones are skipped. Across stages only one dominance is used: ZeRO-2
is ZeRO-1 plus a reduce-scatter of every micro-batch's gradients (cost.step.dp_exposed_time:
identical at one micro-batch, slower beyond), so ZeRO-2 is tried only with a recompute weaker
than the one that fitted at ZeRO-1. ZeRO-0 (an all-reduce, no sharded optimizer) and ZeRO-3
(parameters gathered every micro-batch, the reduction hidden behind forward and backward) can
each beat ZeRO-1 on the cost model, so both are always tried (tests/test_search.py checks the
dominances used)."""
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
    offload: float = 0.0
    """The activation-offload share the search gave it to fit
    (``SolverConfig.offload_as_needed``; 0 = the workload's own)."""

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
    stopped_at: float | None = None
    """With a budget that ran out: the least objective bound of the structures left unvisited
    (0 when some were never bounded); None when every structure was visited or pruned."""


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
    replicate_kv = load_framework(workload.framework).tp_beyond_kv_heads
    tps = [
        t for t in divisors(num_gpus) if not tp_heads_rule(model, t, replicate_kv=replicate_kv)
    ]  # TP beyond a scale-up domain is priced over the scale-out fabric, not refused
    out = []
    for tp in tps:
        for cp in divisors(num_gpus // tp):
            if cp > 1 and workload.seq_len // cp < CP_MIN_TOKENS_PER_RANK:
                continue
            for pp in divisors(num_gpus // (tp * cp)):
                if pp <= model.num_layers:
                    out.append((tp, cp, pp, num_gpus // (tp * cp * pp)))
    return out


def vpp_choices(model: ModelSpec, pp: int) -> list[int]:
    """Virtual stages per pipeline rank worth trying: every divisor of the layers per stage (of
    either count when pp does not divide the layers), so that each model chunk gets whole
    layers; 1 without pipelining.

    >>> from planner.catalog import load_model
    >>> vpp_choices(load_model("405B"), 16)  # 126 layers: 7 or 8 per stage
    [1, 2, 4, 7, 8]
    """
    if pp == 1:
        return [1]
    low, high = model.num_layers // pp, -(-model.num_layers // pp)
    return sorted({v for n in {low, high} if n for v in divisors(n)})


def mbs_choices(workload: TrainWorkload, dp: int) -> list[int]:
    """Micro-batch sizes in increasing order: every divisor of the sequences per data-parallel
    replica (dp x mbs must divide the global batch); memory, not a fixed cap, stops them
    (:func:`_visit_structure`). [1] when dp does not divide the batch (the rule rejects it).

    >>> mbs_choices(TrainWorkload(global_batch=48), 4)
    [1, 2, 3, 4, 6, 12]
    """
    if workload.global_batch % dp:
        return [1]
    return divisors(workload.global_batch // dp)


def _inner_choices(
    model: ModelSpec, workload: TrainWorkload, fields: dict[str, object], fix: dict[str, object]
) -> tuple[list[int], list[int]]:
    """(vpp values, mbs values in increasing order) of one structure, pins applied."""
    pp, dp = int(fields["pp"]), int(fields["dp"])  # type: ignore[call-overload]
    vpps = [int(fix["vpp"])] if "vpp" in fix else vpp_choices(model, pp)  # type: ignore[call-overload]
    mbss = [int(fix["mbs"])] if "mbs" in fix else mbs_choices(workload, dp)  # type: ignore[call-overload]
    return vpps, mbss


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


def _bare_layout(fields: dict[str, object], mbs: int) -> Layout:
    """A structure's layout at micro-batch ``mbs`` with nothing that only adds time: no
    interleaving, no recomputation, ZeRO-1 (the layout the lower bounds are taken on)."""
    return Layout.model_construct(**fields, vpp=1, mbs=mbs, recompute=Recompute.NONE, zero=1)


LayoutKey = tuple[object, ...]


def _layout_key(layout: Layout) -> LayoutKey:
    """Every field of ``layout``, as a hashable key."""
    return (layout.tp, layout.pp, layout.vpp, layout.dp, layout.cp, layout.ep, layout.etp,
            layout.mbs, layout.recompute, layout.zero, layout.precision)  # fmt: skip


class SweepBudget:
    """Work the split sweep may still do, in units of about a millisecond of one laptop-class
    CPU core (:data:`SWEEP_UNITS_PER_S`): :data:`SWEEP_BOUND_UNITS` per structure or layout
    bounded under any split, :func:`tight_bound_units` per tight bound,
    :data:`SWEEP_SPLIT_UNITS` per layout split and :data:`SWEEP_CP_SAT_UNITS` more for a split
    CP-SAT solves (its time limit when it stops there). Counted in work rather than seconds so
    that the same search gives the same answer on any machine."""

    def __init__(self, units: float) -> None:
        self.left = units

    def spend(self, units: float) -> None:
        """Count ``units`` of work done."""
        self.left -= units

    @property
    def exhausted(self) -> bool:
        """Whether nothing is left."""
        return self.left <= 0


SWEEP_UNITS_PER_S = 1000
"""Budget units per second of work: a unit is about a millisecond."""
SWEEP_BOUND_UNITS = 0.5
"""Budget units of one bound under any split, its time tables and the branch and bound's work
around it: 0.35-0.53 ms measured all in (`_sweep_rows`' wall time over its bounds; Qwen3-235B on
256 H100, gpt-oss-120b on 64 H100, DeepSeek-V3 with and without MTP on 2,048 H800, 70B and 405B
dense; 2026-12-06). Until then it was charged 2, four times its cost, so the sweep spent its
budget bounding a MoE model's 3,000-4,000 pipelined structures and had none left to split."""
SWEEP_SPLIT_UNITS = 30
"""Budget units of one split (one solved by a recurrence, layer counts or a branch and bound
takes 10-100 ms, measured)."""
SWEEP_CP_SAT_UNITS = 200
"""Budget units one split solved by CP-SAT to proven optimality adds (0.05-0.3 s measured); one
stopped by its time limit adds a unit per millisecond of the limit."""
SWEEP_TIGHT_BOUND_UNITS = 1
"""Budget units of one tight split bound before its rank-load programme (its partition
tables). Fitted with :data:`RANK_LOAD_WORK_PER_UNIT` on 939 tight bounds of seven searches
(DeepSeek-V3 on 2,048 H800 with and without MTP, and on 256 B200; Qwen3-235B on 256 H100;
gpt-oss-120b on 64 H100; 70B on 64 H100; 405B on 1,024 H100; 2026-12-06): 1.2 ms + 1.8e-5 ms a
cell of the programme's tables (median error 47%; counted in programme rows, count vectors x
ranks, the fit's median error was 105%). Until then a bound was charged 2 units + 1 per 100 rows,
two to three times its cost on DeepSeek-V3 and under its cost on gpt-oss-120b's two kinds of
18 layers."""
RANK_LOAD_WORK_PER_UNIT = 50_000
"""Rank-load programme cells (count vectors^2 x ranks x programmes,
:func:`planner.search.solve.stage_data.rank_load_work`) per budget unit: 0.9 ms at the 1.8e-5 ms
a cell measured above (a unit is about a millisecond). Since 2026-12-06 the count-vector tables
are built once per shape (``stage_data._count_grid``) and a cell costs 0.6-0.9e-5 ms
(gpt-oss-120b on 64 B200, DeepSeek-V3 on 1,024 H100); since 2026-12-08 its minimums run over
the pairs of count vectors that fit inside one another alone (``stage_data._count_pairs``), 2.4x
faster again (the 1,073 programmes of four MoE searches: 4.0 -> 1.7 s, 0.63e-5 ms a cell, on the
same machine). The charge is kept, so a search spends its budget on the same bounds and splits
as before and returns the same plan, sooner."""


def tight_bound_units(work: int) -> int:
    """Budget units of one tight split bound whose rank-load programme has size ``work``
    (DeepSeek-V3's 3 dense and 58 MoE layers on PP16: 236 count vectors, 891,136 cells, 15 ms
    measured).

    >>> tight_bound_units(0), tight_bound_units(236 * 236 * 16)
    (1, 18)
    """
    return SWEEP_TIGHT_BOUND_UNITS + work // RANK_LOAD_WORK_PER_UNIT


class StageTimes:
    """Micro-batch times (:func:`planner.cost.stage.microbatch_time`, on the layout's own comm
    domains) of the layouts one search bounds, by (layout, stage), each computed once: a
    structure's bound and its rows' bounds ask for many of the same, and a row scored without
    recomputation reuses its bound's."""

    def __init__(
        self,
        model: ModelSpec,
        cluster: ClusterSpec,
        workload: TrainWorkload,
        *,
        any_split: bool = False,
        budget: SweepBudget | None = None,
    ) -> None:
        self.model, self.cluster, self.workload = model, cluster, workload
        self.any_split = any_split
        """Whether the bounds must hold under every stage split of a pipelined layout, not only
        the split it is scored under (the search's split sweep, :func:`build_candidates`)."""
        self._times: dict[tuple[LayoutKey, int], MicrobatchTime] = {}
        self._splits: dict[tuple[int, int, Recompute], PipelineSplit | None] = {}
        self._any_split: dict[LayoutKey, float] = {}
        self.budget = budget
        """What each new bound under any split is charged to (the split sweep's budget)."""

    def split(self, layout: Layout) -> PipelineSplit | None:
        """The layers' split every layout of ``layout``'s pp, vpp and recomputation is scored
        under: the framework's own where it places them (Nanotron,
        :func:`planner.search.pipeline.framework_split`), else None (the even split; CP-SAT
        splits the ranked ones later)."""
        key = (layout.pp, layout.vpp, layout.recompute)
        if key not in self._splits:
            self._splits[key] = framework_split(self.model, self.workload, layout)
        return self._splits[key]

    def stages(self, layout: Layout) -> list[int]:
        """The stages whose micro-batch times a step of ``layout`` is priced from: the
        representative ones of the even split, every stage of an explicit one."""
        if self.split(layout) is not None:
            return list(range(layout.pp))
        return representative_stages(layout.pp, self.model, self.workload.seq_len)

    def any_split_time(self, layout: Layout) -> float:
        """A lower bound (s) of the slowest rank's micro-batch time of ``layout`` (without
        recomputation or interleaving, at ZeRO-1) under every stage split, and so of every
        layout of its degrees and micro-batch: :func:`planner.search.solve.stage_data.
        any_split_time_bound` on its time tables, less their rounding
        (:func:`planner.search.solve.stage_data.rounding_slack`)."""
        key = _layout_key(layout)
        found = self._any_split.get(key)
        if found is None:
            from planner.search.solve.stage_data import (
                any_split_time_bound,
                rounding_slack,
                stage_time_tables,
            )

            if self.budget is not None:
                self.budget.spend(SWEEP_BOUND_UNITS)
            problem = stage_time_tables(self.model, self.cluster, self.workload, layout)
            slack = rounding_slack(problem)
            found = max(0, any_split_time_bound(problem) - slack) * TIME_QUANTUM_S
            self._any_split[key] = found
        return found

    def time(self, layout: Layout, stage: int) -> MicrobatchTime:
        """The critical-path time of one micro-batch of ``layout`` on ``stage``."""
        key = (_layout_key(layout), stage)
        found = self._times.get(key)
        if found is None:
            domains = workload_domains(self.model, self.cluster, self.workload, layout)
            found = microbatch_time(self.model, self.cluster.accelerator, self.workload, layout,
                                    stage=stage, domains=domains,
                                    split=self.split(layout))  # fmt: skip
            self._times[key] = found
        return found


def times_key(workload: TrainWorkload, layout: Layout) -> tuple[Recompute, bool]:
    """What the micro-batch times of a layout depend on beyond its degrees, vpp and mbs: its
    recomputation, and whether its ZeRO stage gathers FP8 parameters
    (:func:`planner.cost.sharding.gathers_fp8_params`; then torchao's casts skip the weights,
    :func:`planner.cost.stage.dynamic_cast_time`). Rows of one (vpp, mbs) with the same key
    share their stage times; ZeRO-1 has the smallest (gathering in FP8 only removes work).

    >>> lay = Layout(zero=0, precision="fp8")
    >>> w = TrainWorkload(fp8_param_gather=True, fp8_casts="tensorwise")
    >>> times_key(w, lay) == times_key(w, lay.model_copy(update={"zero": 3}))
    False
    >>> plain = TrainWorkload()
    >>> times_key(plain, lay) == times_key(plain, Layout(zero=3, precision="fp8"))
    True
    """
    return layout.recompute, gathers_fp8_params(workload, layout)


def likeliest_slowest_first(stages: list[int], pp: int) -> list[int]:
    """``stages`` (representative stages of a ``pp``-stage pipeline) in the order their
    micro-batch is likeliest to be the slowest: the last middle stage (it has the most layers of
    the first ones), the last (the output layer and loss), then the others from the last back.

    >>> likeliest_slowest_first([0, 1, 2, 31], 32), likeliest_slowest_first([0, 1], 2)
    ([2, 31, 1, 0], [1, 0])
    """
    middle = [s for s in stages if 0 < s < pp - 1][-1:]
    return middle + sorted((s for s in stages if s not in middle), reverse=True)


class SlowestStage:
    """The slowest micro-batch time of ``layout``'s representative stages without
    recomputation or interleaving, at ZeRO-1 (the time every recompute, vpp and ZeRO stage at
    its degrees and mbs only add to: ZeRO >= 1 is what lets FP8 parameters be gathered, which
    removes per-call weight casts, :func:`times_key`), found a stage at a time, the likeliest
    slowest first (:func:`likeliest_slowest_first`): ``value``, the slowest found so far, is a lower bound of
    it that only grows, and exact once every stage is known. A bound that already prunes with
    the stages known needs no more of them."""

    def __init__(self, times: StageTimes, layout: Layout) -> None:
        self._times = times
        plain = layout.recompute is Recompute.NONE and layout.vpp == 1 and layout.zero == 1
        self.layout = (
            layout
            if plain
            else layout.model_copy(update={"recompute": Recompute.NONE, "vpp": 1, "zero": 1})
        )
        self.stages = times.stages(self.layout)
        self._order = likeliest_slowest_first(self.stages, self.layout.pp)
        self._found: dict[int, MicrobatchTime] = {}
        self.value = float("-inf")
        self.refine()

    def refine(self) -> bool:
        """Evaluate one more stage; False when every stage is known already."""
        if len(self._found) == len(self.stages):
            return False
        stage = self._order[len(self._found)]
        found = self._found[stage] = self._times.time(self.layout, stage)
        self.value = max(self.value, found.total)
        return True

    def stage_times(self) -> list[MicrobatchTime]:
        """Every representative stage's time, in stage order."""
        while self.refine():
            pass
        return [self._found[s] for s in self.stages]


class AnySplitStage:
    """:class:`SlowestStage`'s stand-in for a pipelined layout in the split sweep: a lower bound
    of its slowest rank's micro-batch time under every stage split
    (:meth:`StageTimes.any_split_time`), exact at once (``refine`` has nothing to add)."""

    def __init__(self, times: StageTimes, layout: Layout) -> None:
        self.layout = layout.model_copy(update={"recompute": Recompute.NONE, "vpp": 1, "zero": 1})
        self.value = times.any_split_time(self.layout)

    def refine(self) -> bool:
        """Nothing to tighten: the bound is exact from the start."""
        return False


def stage_floor(times: StageTimes, layout: Layout) -> SlowestStage | AnySplitStage:
    """The micro-batch-time bound a layout is pruned on: :class:`AnySplitStage` for a pipelined
    layout when the bounds must hold under every split (:attr:`StageTimes.any_split`), else
    :class:`SlowestStage`."""
    if times.any_split and layout.pp > 1:
        return AnySplitStage(times, layout)
    return SlowestStage(times, layout)


class StructureBound:
    """Step-time lower bound of every layout of a structure, tightened a stage at a time
    (:meth:`refine`) up to its exact value: the compute floor, the bound of
    :func:`planner.cost.step.step_time_lower_bound` at the structure's largest micro-batch M
    (the time per sequence only falls as the micro-batch grows), plus the bubble
    (pp - 1) / V x the slowest stage's micro-batch time at the smallest micro-batch (a
    micro-batch's time only grows with its size), V being the largest vpp tried (no bubble
    under DualPipe or zero bubble, whose bubbles are shares of the chunk's passes). ``value``
    never falls as stages are added, so each step of the way is a lower bound of the last."""

    def __init__(
        self,
        times: StageTimes,
        fields: dict[str, object],
        fix: dict[str, object],
    ) -> None:
        self._times, self._fields = times, fields
        vpps, mbss = _inner_choices(times.model, times.workload, fields, fix)
        self._floor = stage_floor(times, _bare_layout(fields, max(mbss)))
        pp = int(fields["pp"])  # type: ignore[call-overload]
        self._smallest = min(mbss) if pp > 1 else None
        shrunk = bubble_is_a_share(times.workload.pipeline_schedule)
        self._bubble_scale = 0.0 if shrunk else (pp - 1) / max(vpps)
        self._bubble: SlowestStage | AnySplitStage | None = None

    @property
    def value(self) -> float:
        """The bound with the stages evaluated so far."""
        floor = step_time_floor(self._times.workload, self._floor.layout, self._floor.value)
        if self._bubble is None:
            return floor
        return floor + self._bubble_scale * self._bubble.value

    def refine(self) -> bool:
        """Evaluate one more stage; False when the bound is exact already."""
        if self._floor.refine():
            return True
        if self._smallest is not None and self._bubble is None:
            self._bubble = stage_floor(self._times, _bare_layout(self._fields, self._smallest))
            return True
        return self._bubble is not None and self._bubble.refine()

    def exact(self) -> float:
        """The bound with every stage evaluated."""
        while self.refine():
            pass
        return self.value


def distinct_figures(value: float, limit: float) -> tuple[str, str]:
    """``value`` and ``limit`` to 3 significant figures, or as many more (up to 9) as it takes
    for two different numbers not to print the same.

    >>> distinct_figures(3.17406, 3.174), distinct_figures(12.5, 10.0)
    (('3.1741', '3.174'), ('12.5', '10'))
    """
    for digits in range(3, 10):
        shown = f"{value:.{digits}g}", f"{limit:.{digits}g}"
        if shown[0] != shown[1]:
            return shown
    return shown


def misses_target(bound: StructureBound, limit_s: float) -> bool:
    """Whether a structure's step-time bound exceeds ``limit_s``, tightened only as far as it
    takes: each value is a lower bound of the exact one, so one above the limit settles it, and
    one at or below it once exact settles the other way."""
    while bound.value <= limit_s and bound.refine():
        pass
    return bound.value > limit_s


MemoryEstimate = list[StageMemoryProfile]
"""What a layout's memory is made of (:func:`planner.cost.step.memory_profiles`): valid for
every ZeRO stage and micro-batch of its degrees, vpp, recomputation and precision."""
MemoryTable = dict[LayoutKey, MemoryEstimate]
"""Memory estimates of one model and workload, by the layout fields they depend on."""


class MemoryMemo:
    """Memory profiles of layouts kept across searches of one model and workload in one
    process (a what-if sweep): a layout's memory depends on the model, the workload and the
    layout only (:func:`planner.cost.step.memory_profiles`), not on the cluster's network, so
    the scenarios of a NIC or oversubscription sweep re-use them. Bounded: the last
    ``MAX_WORKLOADS`` (model, workload) pairs, ``MAX_LAYOUTS`` layouts each."""

    MAX_WORKLOADS = 4
    MAX_LAYOUTS = 100_000

    def __init__(self) -> None:
        self.tables: OrderedDict[tuple[ModelSpec, TrainWorkload], MemoryTable]
        self.tables = OrderedDict()

    def table(self, model: ModelSpec, workload: TrainWorkload) -> MemoryTable:
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


def memory_estimates(model: ModelSpec, workload: TrainWorkload) -> MemoryTable:
    """The memory estimates a search of ``model`` under ``workload`` fills and reads: the
    sweep's table while searches share them (:func:`shared_memory_estimates`), else a new one
    for this search's passes alone (its GPU counts and the split sweep's second pass visit
    the same layouts)."""
    return _MEMO.table(model, workload) if _MEMO is not None else {}


def share_memory_estimates_for_process() -> None:
    """From now on, this process's searches share memory estimates (a sweep's worker)."""
    global _MEMO
    _MEMO = _MEMO or MemoryMemo()


class _Collector:
    """Accumulates scored candidates and rejections while the structures are visited."""

    def __init__(self, cluster: ClusterSpec, request: SpaceRequest) -> None:
        self.request = request
        self.memo: MemoryTable | None = None
        self.feasible: list[Candidate] = []
        self.rejected: list[tuple[float, int, Layout, str, str | Callable[[], str]]] = []
        self.counts: Counter[str] = Counter()
        self.enumerated = 0
        self.ruled_out = 0
        """Rows and structures a step-time target ruled out by their bound, never enumerated
        (counted as the target's rejections, and so in the layout total)."""
        self.capacity = cluster.accelerator.usable_memory_bytes * (1.0 - request.memory_headroom)
        self.headroom = request.memory_headroom
        self.best_by_structure: dict[tuple[object, ...], float] = {}
        self.prune_top = 0
        self.offload_mode = "none"
        """How the search may offload activations (FrameworkSpec.activation_offload), or none."""
        self.profiles: dict[tuple[int, Recompute], list[StageMemoryProfile]] = {}
        """Memory profiles of the structure being visited, by (vpp, recompute)."""
        self.times: StageTimes | None = None
        """Micro-batch times of the search's layouts (set by :func:`build_candidates`)."""
        self.known: dict[LayoutKey, StepCost] = {}
        """Costs of layouts an earlier pass of the same search found to fit (the split sweep
        re-visits layouts the first pass scored)."""
        self._kth: float | None = None  # cached k-th best (None = recompute)
        self.budget: SweepBudget | None = None
        """No structure is visited once this is spent (None: no limit)."""
        self.stopped_at: float | None = None
        """The least bound of the structures left when it was spent (0: some never bounded)."""

    def expired(self) -> bool:
        """Whether the budget is spent."""
        return self.budget is not None and self.budget.exhausted

    def kth_best(self, k: int) -> float:
        if self._kth is None:
            values = heapq.nsmallest(k, self.best_by_structure.values())
            self._kth = values[k - 1] if len(values) >= k else float("inf")
        return self._kth

    def may_improve(self, layout: Layout, floor_s: float) -> bool:
        """Whether a row with this step-time lower bound may improve its structure's best or
        enter the best ``prune_top`` structures."""
        value = objective_value(self.request.objective, layout.num_gpus, floor_s)
        best = self.best_by_structure.get(structure_key(layout), float("inf"))
        return value < min(best, self.kth_best(self.prune_top)) * (1 + PRUNE_SLACK)

    def bounded(self, layout: Layout, steps: float, slowest: SlowestStage) -> bool:
        """Whether a row whose step takes ``steps`` micro-batch times of ``slowest`` (a lower
        bound of its step time) can neither improve its structure's best nor enter the best
        ``prune_top`` structures (then it is counted, not scored). The stages are evaluated
        only until one prunes the row: a partial slowest time bounds the whole one. A row whose
        bound exceeds a step-time target is counted as the target's (it cannot meet it)."""
        limit = self.request.max_step_s
        while True:
            floor_s = steps * slowest.value
            if limit is not None and floor_s > limit:
                self.counts["target"] += 1
                self.ruled_out += 1
                return True
            if not self.may_improve(layout, floor_s):
                self.counts["bounded"] += 1
                return True
            if not slowest.refine():
                return False

    def reject(
        self, layout: Layout, reason: str, detail: str | Callable[[], str], excess: float
    ) -> None:
        """Count a rejection; ``detail`` may be a function that writes it (only the closest
        rejections are kept, so most details are never written)."""
        self.counts[reason] += 1
        self.rejected.append((excess, len(self.rejected), layout, reason, detail))

    def closest_rejections(self, count: int) -> list[Rejection]:
        """The ``count`` rejections closest to their limit (the rules broken last)."""
        out = []
        for excess, _, layout, reason, detail in heapq.nsmallest(count, self.rejected):
            out.append(
                Rejection(
                    layout=layout,
                    reason=reason,
                    detail=detail if isinstance(detail, str) else detail(),
                    excess=excess if excess != float("inf") else None,
                )
            )
        return out

    def accept(
        self, layout: Layout, cost: StepCost, cluster: ClusterSpec, offload: float = 0.0
    ) -> None:
        limit = self.request.max_step_s
        # under any split the even split's time says nothing of the target: the structure's
        # bound met it (_visit_order), and the split sweep checks each row's own
        sweeping = self.times is not None and self.times.any_split
        if limit is not None and cost.step_time_s > limit and not sweeping:
            took, target = distinct_figures(cost.step_time_s, limit)
            detail = f"{layout.short()} takes {took} s per step, above the {target} s target"
            self.reject(layout, "target", detail, cost.step_time_s - limit)
            return
        self.feasible.append(Candidate(layout=layout, cost=cost, cluster=cluster, offload=offload))
        key = structure_key(layout)
        value = objective_value(self.request.objective, layout.num_gpus, cost.step_time_s)
        if value < self.best_by_structure.get(key, float("inf")):
            self.best_by_structure[key] = value
            self._kth = None


def structure_key(layout: Layout) -> tuple[object, ...]:
    """The GPU count and the structure (STRUCTURE_FIELDS) of a layout."""
    return (layout.num_gpus, *(str(getattr(layout, k)) for k in STRUCTURE_FIELDS))


def _visit_structure(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    fields: dict[str, object],
    request: SpaceRequest,
    out: _Collector,
) -> None:
    """Score every (vpp, mbs) of one structure: per ZeRO stage the first recompute rung that
    fits (ZERO_STAGES). Memory only grows with the micro-batch, so micro-batches grow until
    nothing fits, and a rung that did not fit at one micro-batch is not tried at a larger one.
    With branch and bound, a (vpp, mbs) whose lower bound (:class:`SlowestStage` at that mbs,
    times the micro-batches of a step and the bubble) cannot beat this structure's best nor the
    k-th best structure is skipped."""
    fix, bounds = request.fix, request.bounds
    profile = load_framework(workload.framework)
    deepest = profile.max_zero_with_pp if int(fields["pp"]) > 1 else 3  # type: ignore[call-overload]
    zeros = [
        z
        for z in ZERO_STAGES
        if z in profile.zero_stages
        and z <= deepest
        and _pinned({"zero": z}, fix)
        and _within({"zero": z}, bounds)
    ]
    recomputes = [r for r in RECOMPUTE_ORDER if _pinned({"recompute": r}, fix)]
    ep = int(fields["ep"])  # type: ignore[call-overload]
    if runs_combined_1f1b(workload, ep) and Recompute.FULL in recomputes:
        recomputes.remove(Recompute.FULL)  # rules.ep_overlap_rules
        if not recomputes and zeros:  # pinned: say why nothing is left
            layout = Layout.model_construct(
                **fields, vpp=1, mbs=1, recompute=Recompute.FULL, zero=zeros[0]
            )
            out.enumerated += 1
            out.reject(layout, "framework", EP_OVERLAP_FULL_RECOMPUTE, float("inf"))
            return
    if not zeros or not recomputes:
        return
    vpps, mbss = _inner_choices(model, workload, fields, fix)
    first_rung = {vpp: dict.fromkeys(zeros, 0) for vpp in vpps}  # weakest rung that may fit
    out.profiles = {}
    for mbs in mbss:
        floor: SlowestStage | None = None
        for vpp in [v for v in vpps if v in first_rung]:
            if not _within({"vpp": vpp, "mbs": mbs}, bounds):
                continue
            layout = Layout.model_construct(
                **fields, vpp=vpp, mbs=mbs, recompute=recomputes[0], zero=zeros[0]
            )
            violations = layout_violations(
                model, cluster, workload, layout, num_gpus=layout.num_gpus
            )
            if violations:
                out.enumerated += 1
                out.reject(layout, violations[0][0], violations[0][1], float("inf"))
                continue
            if out.prune_top and out.times is not None:
                floor = floor or stage_floor(out.times, layout)
                if out.bounded(layout, pipeline_steps(workload, layout), floor):
                    continue
            none_times = None
            if isinstance(floor, SlowestStage) and recomputes[0] is Recompute.NONE:
                none_times = (times_key(workload, floor.layout), floor.stage_times())
            rungs = (recomputes, first_rung[vpp], none_times)
            if not _visit_ladder(model, cluster, workload, layout, rungs, out):
                del first_rung[vpp]  # nothing fits: a larger mbs holds more activations


def _profiles(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    memo: MemoryTable | None,
    split: PipelineSplit | None = None,
) -> MemoryEstimate:
    """memory_profiles (under ``split``, the framework's own, which pp, vpp and recompute
    decide: :meth:`StageTimes.split`), through the sweep's memo when there is one."""
    if memo is None:
        return memory_profiles(model, workload, layout, split=split)
    key = (layout.tp, layout.cp, layout.pp, layout.dp, layout.ep, layout.etp, layout.vpp,
           layout.recompute, layout.precision)  # fmt: skip
    profiles = memo.get(key)
    if profiles is None:
        profiles = memory_profiles(model, workload, layout, split=split)
        if len(memo) < MemoryMemo.MAX_LAYOUTS:
            memo[key] = profiles
    return profiles


def _split(
    out: _Collector, model: ModelSpec, workload: TrainWorkload, layout: Layout
) -> PipelineSplit | None:
    """The split ``layout`` is scored under in this search (:meth:`StageTimes.split`)."""
    if out.times is not None:
        return out.times.split(layout)
    return framework_split(model, workload, layout)


def _visit_ladder(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    base: Layout,
    ladder: tuple[list[Recompute], dict[int, int], tuple[object, list[MicrobatchTime]] | None],
    out: _Collector,
) -> bool:
    """Climb each ZeRO stage's recompute ladder for ``base``'s (vpp, mbs) from the first rung
    that may fit, score the first that fits and record it; whether any rung fitted.
    ``ladder``: the recompute rungs, the first rung per ZeRO stage, and the per-stage times
    without recomputation when known, with their :func:`times_key`."""
    recomputes, first_rung, none_times = ladder
    fitted: dict[int, int] = {}  # ZeRO stage -> the recompute rung that fitted
    offloaded = False  # a rung fitted with offloaded activations (offload_as_needed)
    # per-stage times by times_key, or (times_key, offload share)
    times: dict[object, list[MicrobatchTime]] = {}
    chunks: dict[object, float | None] = {}  # the slowest chunk's time, by the same keys
    if none_times is not None:
        times[none_times[0]] = none_times[1]
    for zero, start in first_rung.items():
        for rung in range(start, len(recomputes)):
            if zero == 2 and 1 in fitted and rung >= fitted[1]:
                break  # dominated by ZeRO-1 at the same or a weaker recompute
            out.enumerated += 1
            recompute = recomputes[rung]
            layout = base.model_copy(update={"recompute": recompute, "zero": zero})
            known_cost = out.known.get(_layout_key(layout))
            if known_cost is not None:  # it fits: scored by an earlier pass
                fitted[zero] = rung
                out.accept(layout, known_cost, cluster)
                break
            split = _split(out, model, workload, layout)
            key = (base.vpp, recompute)
            if key not in out.profiles:  # what memory is made of: the same for every mbs, ZeRO
                out.profiles[key] = _profiles(model, workload, layout, out.memo, split)
            m = workload.global_batch // (layout.dp * layout.mbs)
            peak = max(p.peak(workload, layout, m) for p in out.profiles[key])
            if peak > out.capacity and _fits_unprefetched(model, cluster, workload, layout,
                                                          split, out.capacity):  # fmt: skip
                cost = score(model, cluster, workload, layout, split=split)
                fitted[zero] = rung
                out.accept(layout, cost, cluster)
                break
            if peak > out.capacity:
                share = offload_share_to_fit(
                    out.profiles[key], workload, layout, m, out.capacity, out.offload_mode
                )
                if share is not None:  # fits only offloaded: a stronger rung may fit without
                    _accept_offloaded(model, cluster, workload, layout, share, (times, chunks),
                                      out)  # fmt: skip
                    offloaded = True
                    continue
                first_rung[zero] = rung + 1
                words = _memory_words(
                    layout, out.profiles[key], workload, out.capacity, cluster, out.headroom,
                    model=model, split=split,
                )  # fmt: skip
                out.reject(layout, "memory", words, peak - out.capacity)
                continue
            memory = estimate_memory(model, workload, layout, profiles=out.profiles[key])
            fitted[zero] = rung
            known = times_key(workload, layout)
            cost = score(model, cluster, workload, layout, memory=memory, split=split,
                         times=times.get(known), chunk_s=chunks.get(known))  # fmt: skip
            times[known] = cost.stage_times
            chunks[known] = cost.slowest_chunk_s
            out.accept(layout, cost, cluster)
            break
    return bool(fitted) or offloaded


def _fits_unprefetched(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    split: PipelineSplit | None,
    capacity: float,
) -> bool:
    """Whether a layout that does not fit ``capacity`` with its ZeRO-3 prefetch fits without it,
    where the framework's scheduler gives the prefetch up to memory
    (:func:`planner.cost.step.prefetch_yields_to_memory`) and the search keeps no headroom (the
    scheduler fills memory to the limit, :func:`planner.cost.step.estimate_step`)."""
    if capacity < cluster.accelerator.usable_memory_bytes:
        return False
    lean = prefetch_lean_total(model, workload, layout, split)
    return lean is not None and lean <= capacity


def searches_offload(offload_as_needed: bool, workload: TrainWorkload) -> bool:
    """Whether a search may offload activations where a layout fits only so: asked for
    (SolverConfig.offload_as_needed) and the workload states no share of its own (a stated
    share, 0 included, is kept for every candidate).

    >>> searches_offload(True, TrainWorkload()), searches_offload(True, TrainWorkload(
    ...     activation_offload_fraction=0.0))
    (True, False)
    """
    return offload_as_needed and "activation_offload_fraction" not in workload.model_fields_set


def offload_share_to_fit(
    profiles: list[StageMemoryProfile],
    workload: TrainWorkload,
    layout: Layout,
    num_microbatches: int,
    capacity_bytes: float,
    mode: str,
) -> float | None:
    """The smallest activation-offload share the framework can express (``mode``,
    FrameworkSpec.activation_offload) that brings every stage within ``capacity_bytes``; None
    when no share does, the framework cannot offload this layout, or the workload already
    gives a share. ``layers``: k of the L layers, 0 < k < L, without pipeline parallelism or
    recomputation (Megatron-LM); ``all``: every saved tensor. A stage's peak only falls as the
    share grows (the stored activations are A k (1 - f) + f A / L with k >= 1 micro-batches in
    flight), so the smallest k is found by bisection; the offload time only grows with the
    share, so the smallest is the fastest.

    >>> from planner.catalog import load_model
    >>> from planner.catalog.frameworks import resolve_workload
    >>> from planner.cost.step import memory_profiles
    >>> w = resolve_workload({"framework": "maxtext", "global_batch": 512})
    >>> lay = Layout(dp=256, zero=3, mbs=2, recompute="full")
    >>> profiles = memory_profiles(load_model("70B"), w, lay)
    >>> offload_share_to_fit(profiles, w, lay, 1, 31.2 * 2**30, "all")
    1.0
    >>> offload_share_to_fit(profiles, w, lay, 1, 31.2 * 2**30, "none") is None
    True
    """
    if mode == "none" or workload.activation_offload_fraction > 0:
        return None
    if mode == "layers" and (layout.pp > 1 or layout.recompute is not Recompute.NONE):
        return None

    def fits(share: float) -> bool:
        w = workload.model_copy(update={"activation_offload_fraction": share})
        return max(p.memory(w, layout, num_microbatches).total for p in profiles) <= capacity_bytes

    if mode == "all":
        return 1.0 if fits(1.0) else None
    layers = max(p.num_layers for p in profiles)
    low, high = 0, layers - 1  # shares k / L: low does not fit (0), high may not either
    if high < 1 or not fits(high / layers):
        return None
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid / layers):
            high = mid
        else:
            low = mid
    return high / layers


def _accept_offloaded(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    share: float,
    known: tuple[dict[object, list[MicrobatchTime]], dict[object, float | None]],
    out: _Collector,
) -> None:
    """Score ``layout`` with ``share`` of its saved activations offloaded and record it;
    ``known``: the micro-batch times per stage and of the slowest chunk scored so far."""
    times, chunks = known
    offloaded = workload.model_copy(update={"activation_offload_fraction": share})
    profiles = out.profiles[(layout.vpp, layout.recompute)]  # offload does not change them
    memory = estimate_memory(model, offloaded, layout, profiles=profiles)
    key = (times_key(offloaded, layout), share)
    cost = score(model, cluster, offloaded, layout, memory=memory, times=times.get(key),
                 chunk_s=chunks.get(key), split=_split(out, model, workload, layout))  # fmt: skip
    times[key] = cost.stage_times
    chunks[key] = cost.slowest_chunk_s
    out.accept(layout, cost, cluster, offload=share)


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
    memory_headroom: float = 0.0
    """Share of usable memory a candidate must leave free (SolverConfig.memory_headroom)."""
    offload_as_needed: bool = False
    """Offload saved activations where a layout needs it to fit, unless the workload states a
    share (SolverConfig.offload_as_needed)."""


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
    any_split: bool = False,
    known: list[Candidate] | None = None,
    times: StageTimes | None = None,
    budget: SweepBudget | None = None,
    memo: MemoryTable | None = None,
) -> CandidateSet:
    """Enumerate, check the rules, score, and split into feasible candidates and rejections.

    ``incumbents`` (structure -> best objective) is shared between calls for several GPU counts,
    so a bound found on one count prunes the others.

    For each structure (parallel degrees, precision) and (vpp, mbs) the memory ladder is climbed
    until a rung fits (ZERO_STAGES). With ``prune_top`` = k > 0, structures are visited in
    order of a valid lower bound of the objective and the visit stops once the bound reaches
    the k-th best structure found (branch and bound: the best k structures are exactly those of
    the full enumeration). ``prune_top`` = 0 scores everything (the exhaustive reference).

    ``any_split``: only pipelined layouts, pruned on bounds that hold under every stage split
    (:class:`AnySplitStage`) rather than under the even split they are scored with: the split
    sweep, which finds the layouts a better split may lift above ``incumbents``
    (:func:`planner.search.engine.search`). ``known``: candidates an earlier pass scored, whose
    costs are reused (those it offloaded to fit are scored again). ``times``: the micro-batch
    times and bounds to use and fill (a fresh :class:`StageTimes` by default). ``budget``
    (with ``prune_top``): visit no structure once it is spent, and say how far the ones left
    might go (:attr:`CandidateSet.stopped_at`). ``memo``: memory estimates to use and fill,
    shared by the passes of one search (by default :func:`memory_estimates`: a sweep's, else
    this call's own).
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
    if any_split:
        structures = [f for f in structures if int(f["pp"]) > 1]  # type: ignore[call-overload]
    out = _Collector(cluster, request)
    out.prune_top = prune_top
    out.times = times or StageTimes(model, cluster, workload, any_split=any_split)
    out.known = {_layout_key(c.layout): c.cost for c in known or () if not c.offload}
    out.memo = memo if memo is not None else memory_estimates(model, workload)
    if incumbents is not None:
        out.best_by_structure = incumbents
    if searches_offload(request.offload_as_needed, workload) and (
        cluster.accelerator.host_link_GB_per_s
    ):
        out.offload_mode = load_framework(workload.framework).activation_offload
    out.budget = budget
    for fields in _visit_order(model, cluster, workload, structures, request, out):
        _visit_structure(model, cluster, workload, fields, request, out)
    return CandidateSet(
        feasible=out.feasible,
        num_enumerated=out.enumerated + out.counts.get("bounded", 0) + out.ruled_out,
        rejections=out.closest_rejections(20),
        rejection_counts=dict(out.counts),
        stopped_at=out.stopped_at,
    )


def _visit_order(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    structures: list[dict[str, object]],
    request: SpaceRequest,
    out: _Collector,
) -> Iterator[dict[str, object]]:
    """The structures to visit, in order of their step-time lower bound
    (:class:`StructureBound`, ties by enumeration order), stopping once the bound reaches the
    k-th best structure found (``out.prune_top`` = k; 0 = every structure, in enumeration
    order).

    A bound costs a micro-batch's time on every representative stage, at two micro-batch
    sizes, so it is tightened lazily: every structure enters a heap keyed by its bound from one
    stage (a lower bound of its bound), and the structure on top gets one more stage and goes
    back, until its bound is exact; a structure is visited when its exact bound is the smallest
    key. Every key being a lower bound of its structure's exact bound, that visits the same
    structures in the same order as sorting them all by the exact bound, and skips the stages
    of every structure the bound prunes before they are needed. With a step-time target every
    structure's bound is first tightened until it misses the target or is exact
    (:func:`misses_target`), to count the ones the target rules out."""
    if not out.prune_top or out.times is None:
        yield from structures
        return
    k, objective, gpus = out.prune_top, request.objective, cluster.num_accelerators
    heap: list[tuple[float, int]] = []
    bounds: dict[int, StructureBound] = {}
    for i, fields in enumerate(structures):
        if out.expired():
            out.stopped_at = 0.0  # structures never bounded: nothing is known of them
            return
        bound = StructureBound(out.times, fields, request.fix)
        if request.max_step_s is not None and misses_target(bound, request.max_step_s):
            out.counts["target"] += 1
            out.ruled_out += 1
            continue
        bounds[i] = bound
        heap.append((objective_value(objective, gpus, bound.value), i))
    heapq.heapify(heap)
    while heap:
        value, i = heapq.heappop(heap)
        if value >= out.kth_best(k) * (1 + PRUNE_SLACK):
            out.counts["bounded"] += 1 + len(heap)
            return
        if bounds[i].refine():
            heapq.heappush(heap, (objective_value(objective, gpus, bounds[i].value), i))
            continue
        if out.expired():
            out.stopped_at = value  # every structure left is bounded by at least this
            return
        yield structures[i]


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


def _memory_words(
    layout: Layout,
    profiles: list[StageMemoryProfile],
    workload: TrainWorkload,
    capacity: float,
    cluster: ClusterSpec,
    headroom: float = 0.0,
    *,
    model: ModelSpec,
    split: PipelineSplit | None,
) -> Callable[[], str]:
    """The memory_detail sentence of the stage that does not fit, written when asked for (where
    the prefetch yields to memory, with the least it needs without it)."""

    def words() -> str:
        m = workload.global_batch // (layout.dp * layout.mbs)
        mem = max((p.memory(workload, layout, m) for p in profiles), key=lambda s: s.total)
        return memory_detail(layout, mem, capacity, cluster, headroom,
                             lean_total=prefetch_lean_total(model, workload, layout, split))  # fmt: skip

    return words


def prefetch_lean_total(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    split: PipelineSplit | None = None,
) -> float | None:
    """The binding stage's memory without the prefetched ZeRO-3 unit where the prefetch yields
    to memory (:func:`planner.cost.step.prefetch_yields_to_memory`), else None."""
    if not prefetch_yields_to_memory(workload, layout):
        return None
    return max(m.total for m in lean_prefetch_memory(model, workload, layout, split=split)[1])


def memory_detail(
    layout: Layout,
    mem: StageMemory,
    capacity: float,
    cluster: ClusterSpec,
    headroom: float = 0.0,
    *,
    lean_total: float | None = None,
) -> str:
    """Sentence naming what of the binding stage's memory ``mem`` does not fit ``capacity`` and
    by how much (the optimizer step's transient gradient copy in place of the activations when
    it is the larger). ``capacity`` is the usable memory less the share ``headroom`` a search
    keeps free; the sentence shows both, so its figures add up. ``lean_total``: the least the
    step needs where the framework's scheduler gives up its ZeRO-3 prefetch at the memory peak
    (:func:`planner.cost.step.lean_prefetch_memory`), said beside the shortfall."""
    acc = cluster.accelerator
    total = mem.total
    held = f"activations {mem.activations / GiB:.1f}"
    if mem.step_transient > mem.activations:
        held = (
            f"the optimizer step's fp32 gradient copy {mem.step_transient / GiB:.1f}, after the "
            f"activations ({mem.activations / GiB:.1f}) are freed"
        )
    usable = (
        f"{acc.usable_memory_bytes / GiB:.1f} GiB usable ({acc.total_memory_bytes / GiB:.1f} GiB "
        f"({acc.hbm_GB:g} GB part) minus {acc.efficiency.memory_reserve_GB:g} GB runtime reserve)"
    )
    if headroom:
        usable += f", of which the search fills {capacity / GiB:.1f} (it keeps {headroom:.0%} free)"
    over = f"over by {(total - capacity) / GiB:.1f} GiB"
    if lean_total is not None and capacity < lean_total < total:
        over += (
            f" ({(lean_total - capacity) / GiB:.1f} GiB where XLA's scheduler gives up its "
            "prefetched weight at the memory peak)"
        )
    if headroom and total <= acc.usable_memory_bytes:
        # it would fit all of the usable memory: say how to score it as a run that fitted
        over += " (it fits all of the usable memory: layout estimate scores a layout that ran)"
    return (
        f"{layout.short()} needs {total / GiB:.1f} GiB per GPU (weights {mem.weights / GiB:.1f}, "
        f"grads + optimizer {(mem.grads + mem.optimizer) / GiB:.1f}, {held}) but "
        f"{acc.name} has {usable}: {over}"
    )
