"""Search and estimate: the entry points that tie candidates, solver, validator and explanations."""

from __future__ import annotations

import math
import os
import time
from typing import Literal, NamedTuple

from planner.catalog.clusters import build_cluster, domain_split
from planner.catalog.frameworks import resolve_workload
from planner.errors import InfeasibleError, InternalError, SpecError
from planner.search.arguments import check_bounds, check_fix, positive_count, shown
from planner.search.evaluate import evaluate, fits, score, to_plan
from planner.search.exhaustive import exhaustive_ranking
from planner.search.explain import (
    infeasible_message,
    lean_state_hint,
    no_candidates_message,
    why_not,
)
from planner.search.pipeline import framework_split, places_own_layers
from planner.search.rank import rank_rows
from planner.search.rules import check_workload, layout_violations, tp_heads_rule
from planner.search.space import (
    STRUCTURE_FIELDS,
    SWEEP_CP_SAT_UNITS,
    SWEEP_SPLIT_UNITS,
    SWEEP_UNITS_PER_S,
    AnySplitStage,
    Candidate,
    CandidateSet,
    MemoryTable,
    SpaceRequest,
    StageTimes,
    SweepBudget,
    build_candidates,
    memory_detail,
    memory_estimates,
    merge_candidate_sets,
    objective_value,
    prefetch_lean_total,
    searches_offload,
    structure_key,
    tight_bound_units,
)
from planner.search.table import to_quanta
from planner.search.validate import validate_plan
from planner.specs.cluster import ClusterSpec
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.result import (
    PipelineSplitInfo,
    Plan,
    SearchResult,
    SolverInfo,
    SplitSweepInfo,
)
from planner.specs.solver_config import TIME_QUANTUM_S, SolverConfig
from planner.specs.workload import TrainWorkload
from planner.units import GiB

STRUCTURE: tuple[str, ...] = STRUCTURE_FIELDS
"""Fields that tell runners-up apart (each alternative has different parallel degrees)."""


def _rank_sorted(
    candidates: list[Candidate], costs: list[int], config: SolverConfig
) -> tuple[list[int], SolverInfo]:
    """The best ``config.top`` rows with distinct structures, by a numpy sort of the scored table
    (search/rank.py): exact, so the status is OPTIMAL and the bound is the objective."""
    chosen = rank_rows(costs, [c.structure for c in candidates], config.top)
    return chosen, _sorted_info("sort", costs[chosen[0]])


def _rank_exhaustive(
    candidates: list[Candidate], costs: list[int], config: SolverConfig
) -> tuple[list[int], SolverInfo]:
    chosen = exhaustive_ranking(costs, [c.structure for c in candidates], config.top)
    return chosen, _sorted_info("exhaustive", costs[chosen[0]])


def _sorted_info(name: str, best_quanta: int) -> SolverInfo:
    best = best_quanta * TIME_QUANTUM_S
    return SolverInfo(
        name=name,  # type: ignore[arg-type]
        status="OPTIMAL",
        objective=best,
        best_bound=best,
        time_quantum_s=TIME_QUANTUM_S,
    )


def gpu_counts(
    cluster: ClusterSpec,
    gpus: int | None,
    *,
    fewest: bool,
    group_sizes: tuple[int, ...] = (),
    extra: tuple[int, ...] = (),
) -> list[int]:
    """GPU counts the search may use: the cap (``gpus``, else the cluster's size) and, when
    fewer GPUs can win (``fewest``: a step-time target, or a cost or energy objective, where a
    smaller job spends less per token), the smaller legal sub-clusters on a 1-1.5-2-3-4-6-8
    ladder of scale-up units, so the count itself is a decision. The set depends on the cap's
    value only: ``gpus`` equal to the cluster's size is the same search as no ``gpus``.

    ``group_sizes``: TP degrees the model allows that do not divide the scale-up domain (16 on
    72-GPU NVL72 racks). With every GPU in use one such group in nine straddles two racks and
    runs its collectives over the NICs; the count that fills each domain with whole groups
    (2 x 64 of 2 x 72) is added, so the search weighs leaving GPUs idle against straddling
    (:func:`tiling_counts`). ``extra``: more counts to weigh (legal ones at most the cap are
    kept; a cluster state's search adds the counts just below what is free)."""
    if gpus is not None:
        gpus = positive_count("gpus", gpus)
    cap = gpus or cluster.num_accelerators
    if cap > cluster.num_accelerators:
        raise SpecError(
            f"--gpus {shown(cap)} exceeds the {cluster.num_accelerators} accelerators of "
            f"{cluster.name}"
        )
    if _split(cluster, cap) is None:
        raise SpecError(
            f"--gpus {cap} is not a legal size of {cluster.system.name} "
            f"(whole {cluster.system.unit_size}-accelerator units per domain"
            + (", legal slice shapes)" if cluster.system.torus is not None else ")")
        )
    tiled = tiling_counts(cluster, cap, group_sizes)
    more = {n for n in extra if 0 < n < cap and _split(cluster, n) is not None}
    unit = cluster.system.unit_size
    ladder = {
        unit * m * 2**k for k in range(40) for m in LADDER_FACTORS if unit * m * 2**k <= 2 * cap
    }
    if not fewest:
        return sorted({cap, *tiled, *more, *_near_count(cluster, cap, ladder)})
    ladder |= {unit, cap, *tiled, *more}
    return sorted(n for n in ladder if n <= cap and _split(cluster, n) is not None)


LADDER_FACTORS = (2, 3)
"""The odd-free and the x3 rungs of the GPU-count ladder (whole units x m x 2^k): counts of 1,
1.5, 2, 3, 4, 6, 8, ... units."""


def _near_count(cluster: ClusterSpec, cap: int, ladder: set[int]) -> list[int]:
    """The largest count of the 1-1.5-2-3 ladder below ``cap`` when the cap's odd factor is not on the
    ladder (above 3: NVL72 racks, 72 = 8 x 9, 144 = 16 x 9), else none. A power-of-two batch
    puts the odd factor on tp x pp x cp (nine pipeline stages), where the ladder's count,
    leaving a few GPUs idle, may well be faster: gpt-oss-20b on 144 GB200s ran 1.84 s a step at
    PP9 and 1.13 s on 128 GPUs, which the time objective did not weigh.

    >>> from planner.catalog import load_cluster
    >>> ladder = {8 * m * 2**k for k in range(12) for m in (2, 3)}
    >>> _near_count(load_cluster("gb200_nvl72x144"), 144, ladder)
    [128]
    >>> _near_count(load_cluster("hgx_h100x96"), 96, ladder)  # 96 = 32 x 3
    []
    """
    odd = cap
    while odd % 2 == 0:
        odd //= 2
    if odd <= max(LADDER_FACTORS):
        return []
    below = [n for n in ladder if n < cap and _split(cluster, n) is not None]
    return [max(below)] if below else []


def tiling_counts(cluster: ClusterSpec, cap: int, group_sizes: tuple[int, ...]) -> list[int]:
    """Legal counts below ``cap`` that give every domain whole groups of a size in
    ``group_sizes`` that does not divide the domain's share.

    >>> from planner.catalog import load_cluster
    >>> tiling_counts(load_cluster("gb200_nvl72x144"), 144, (16, 32))
    [128]
    >>> tiling_counts(load_cluster("hgx_h100x64"), 64, (8,))
    []
    """
    if cluster.system.torus is not None:
        return []
    split = domain_split(cluster.system, cap)
    if split is None:
        return []
    domains, per_domain = split
    out = set()
    for size in group_sizes:
        if size <= per_domain and per_domain % size:
            n = domains * (per_domain // size * size)
            if 0 < n < cap and _split(cluster, n) is not None:
                out.add(n)
    return sorted(out)


def _split(cluster: ClusterSpec, num_gpus: int) -> dict[str, object] | None:
    """How ``num_gpus`` accelerators of ``cluster`` are spread (the ClusterSpec fields), or None
    when that count is not a legal size: whole units per domain, and for TPUs a legal slice
    shape (a sub-cluster must not keep the full cluster's torus shape)."""
    if num_gpus == cluster.num_accelerators:
        return {}
    if cluster.system.torus is None:
        split = domain_split(cluster.system, num_gpus)
        if split is None:
            return None
        return {"num_domains": split[0], "accelerators_per_domain": split[1]}
    try:
        shaped = build_cluster(cluster.system.name, num_gpus, name=cluster.name)
    except SpecError:
        return None
    return {
        "num_domains": shaped.num_domains,
        "accelerators_per_domain": shaped.accelerators_per_domain,
        "slice_shape": shaped.slice_shape,
    }


def sub_cluster(cluster: ClusterSpec, num_gpus: int) -> ClusterSpec:
    """The first ``num_gpus`` accelerators of ``cluster``, spread by the same rule."""
    if num_gpus == cluster.num_accelerators:
        return cluster
    split = _split(cluster, num_gpus)
    if split is None:
        raise InternalError(f"{num_gpus} is not a legal size of {cluster.system.name}")
    part_of = cluster.part_of or cluster.num_accelerators
    return cluster.model_copy(update={"num_accelerators": num_gpus, "part_of": part_of, **split})


def _straddling_tp(
    model: ModelSpec,
    cluster: ClusterSpec,
    fix: dict[str, object] | None,
    bounds: dict[str, tuple[int | None, int | None]] | None,
) -> tuple[int, ...]:
    """TP degrees the model, the pins and the bounds allow that do not divide the cluster's
    scale-up domain share (the groups that would straddle two domains)."""
    per_domain = cluster.accelerators_per_domain
    low, high = (bounds or {}).get("tp", (None, None))
    pinned = (fix or {}).get("tp")
    return tuple(
        t
        for t in range(2, per_domain + 1)
        if per_domain % t
        and not tp_heads_rule(model, t)
        and (pinned is None or pinned == t)
        and (low is None or t >= low)
        and (high is None or t <= high)
    )


def _candidate_sets(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    request: SpaceRequest,
    *,
    counts: list[int],
    prune: int,
    fewest: bool,
    top: int,
    memo: MemoryTable | None = None,
) -> list[CandidateSet]:
    """One candidate set per GPU count. Pruned searches share their incumbents across counts:
    largest count first for time, cost and energy (more GPUs rarely lose on time, so its plans
    bound the rest); with a step-time target, fewest first, stopping once ``top`` structures
    meet the target (a larger count can never need fewer GPUs). ``memo``: the search's memory
    estimates (:func:`planner.search.space.memory_estimates`)."""
    incumbents: dict[tuple[object, ...], float] | None = {} if prune else None
    order = sorted(counts) if fewest else sorted(counts, reverse=True)
    sets = []
    for n in order:
        if (
            fewest
            and prune
            and sets
            and len({c.structure for s in sets for c in s.feasible}) >= top
        ):
            break
        sets.append(
            build_candidates(
                model,
                sub_cluster(cluster, n),
                workload,
                request,
                prune_top=prune,
                incumbents=None if fewest else incumbents,
                memo=memo,
            )
        )
    return sets


def _objective_costs(candidates: list[Candidate], config: SolverConfig) -> list[int]:
    """Integer objective per candidate (the single float -> int boundary is to_quanta)."""
    if config.target_step_time_s is not None:
        steps = to_quanta([c.cost.step_time_s for c in candidates])
        scale = max(steps) + 1
        return [c.layout.num_gpus * scale + q for c, q in zip(candidates, steps, strict=True)]
    return to_quanta(
        [
            objective_value(config.objective, c.layout.num_gpus, c.cost.step_time_s)
            for c in candidates
        ]
    )


def search(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    *,
    fix: dict[str, object] | None = None,
    config: SolverConfig | None = None,
    bounds: dict[str, tuple[int | None, int | None]] | None = None,
    precisions: list[NumberFormat] | None = None,
    gpus: int | None = None,
    extra_counts: tuple[int, ...] = (),
) -> SearchResult:
    """Best layout and runners-up of ``model`` on ``cluster`` for ``workload``.

    ``fix`` pins fields, ``bounds`` limits them (--min/--max), ``precisions`` lets the search
    choose the format (--precision auto), ``gpus`` caps the accelerators used (fewer may win on
    cost); ``extra_counts`` are more GPU counts to weigh (a cluster state's). Raises
    InfeasibleError (naming the binding limit) when no layout fits, SpecError on bad input.
    """
    start = time.perf_counter()
    config = config or SolverConfig()
    workload = resolve_workload(workload, cluster.accelerator.vendor)
    fix, bounds = check_fix(fix), check_bounds(bounds)
    relabel = "recompute" not in (fix or {})  # a pinned recompute keeps its label
    for fmt in precisions or [workload.precision]:
        check_workload(model, cluster, workload.model_copy(update={"precision": fmt}))
    request = SpaceRequest(
        fix=fix,
        bounds=bounds,
        precisions=list(precisions or []),
        objective=config.objective,
        max_step_s=config.target_step_time_s,
        memory_headroom=config.memory_headroom,
        offload_as_needed=config.offload_as_needed,
    )
    fewest = config.target_step_time_s is not None
    prune = 0 if config.solver == "exhaustive" else _ranked_count(config)
    counts = gpu_counts(
        cluster,
        gpus,
        fewest=fewest or config.objective in ("cost", "energy"),
        group_sizes=_straddling_tp(model, cluster, fix, bounds),
        extra=extra_counts,
    )
    # the memory of a layout is the same in every pass and on every GPU count: estimated once
    memo = memory_estimates(model, workload)
    sets = _candidate_sets(
        model,
        cluster,
        workload,
        request,
        counts=counts,
        prune=prune,
        fewest=fewest,
        top=_ranked_count(config),
        memo=memo,
    )
    feasible = [c for cs in sets for c in cs.feasible]
    candidates = merge_candidate_sets(sets)
    exhaustive = config.solver == "exhaustive"  # every layout: the sweep has no budget
    budget = SweepBudget(UNLIMITED if exhaustive else config.split_sweep_budget)
    targeted = fewest and sweeps_splits(config, workload)
    swept: SplitSweep | None = None
    if not feasible:
        if candidates.num_enumerated == 0 and not candidates.rejection_counts and (fix or bounds):
            raise SpecError(
                no_candidates_message(
                    model,
                    cluster,
                    workload,
                    fix or {},
                    bounds or {},
                    [str(f) for f in precisions or [workload.precision]],
                )
            )
        plans: list[Plan] = []
        if targeted and candidates.rejection_counts.get("target"):  # none meets it evenly split
            plans, swept = _target_split_sweep(
                model, cluster, workload, request, [], config, counts,
                known=[], done=[], budget=budget, unproven=[], best_gpus=max(counts),
                relabel=relabel, memo=memo,
            )  # fmt: skip
        if not plans:
            if not candidates.rejections and candidates.rejection_counts.get("target"):
                raise InfeasibleError(
                    _target_message(model, cluster, workload, request, gpus, config, candidates)
                    + _target_sweep_note(swept)
                )
            capacity = cluster.accelerator.usable_memory_bytes * (1.0 - config.memory_headroom)
            hint = lean_state_hint(model, cluster, workload, candidates, capacity)
            raise InfeasibleError(
                infeasible_message(candidates, model=model.name, cluster=cluster.name, hint=hint)
                + _target_sweep_note(swept)
            )
        info = _sorted_info("exhaustive" if exhaustive else "sort", 0)  # what the sweep found
    else:
        costs = _objective_costs(feasible, config)
        rank = _rank_exhaustive if exhaustive else _rank_sorted
        # CP-SAT splits the best split_candidates layouts whatever --top asks, so that a layout
        # the even split ranks second can win once split with --top 1 as with --top 5
        pool = config.model_copy(update={"top": _ranked_count(config)})
        chosen, info = rank(feasible, costs, pool)
        ranked = [feasible[i] for i in chosen]
        plans = _split_plans(model, ranked, workload, config, relabel=relabel)
        unproven = [
            (candidate.layout.num_gpus, bound)
            for candidate, plan in zip(ranked, plans, strict=True)
            if (bound := _unproven_bound(model, candidate, workload, plan, config)) is not None
        ]
        plans.sort(key=lambda p: _plan_objective(p, config))  # a better split may reorder them
        done = [c.layout for c in ranked]
        if targeted:
            plans, swept = _target_split_sweep(
                model, cluster, workload, request, plans, config, counts,
                known=feasible, done=done, budget=budget, unproven=unproven, relabel=relabel,
                memo=memo,
            )  # fmt: skip
        elif sweeps_splits(config, workload):
            rows, stopped = [(0.0, c) for c in feasible], None
            if prune:  # the layouts branch and bound scored are those the even split ranks well
                rows, stopped = _sweep_rows(model, cluster, workload, request, plans, config,
                                            counts, known=feasible, budget=budget,
                                            memo=memo)  # fmt: skip
            plans, swept = _split_sweep(
                model, workload, config, plans, rows, done, budget,
                unproven=[b for _, b in unproven], relabel=relabel,
            )  # fmt: skip
            swept = _with_unvisited(swept, stopped)
    offload = searches_offload(config.offload_as_needed, workload)
    info = _solver_info(info, plans, config, offload=offload, swept=swept)  # every split solved
    info = info.model_copy(update={"gpu_counts": sorted(counts)})
    plans = distinct_layouts(plans)[: config.top]
    best = plans[0]
    objective = "target" if fewest else config.objective
    alternatives = [
        p.model_copy(update={"why_not": why_not(p, best, objective)}) for p in plans[1:]
    ]
    return SearchResult(
        objective=objective,  # type: ignore[arg-type]
        best=best,
        alternatives=alternatives,
        search_time_s=time.perf_counter() - start,
        num_candidates=candidates.num_enumerated,
        num_feasible=len(feasible) or len(plans),
        rejections=candidates.rejection_counts,
        solver=info,
    )


def sweeps_splits(config: SolverConfig, workload: TrainWorkload) -> bool:
    """Whether the search runs the split sweep (:func:`_split_sweep`; with a step-time target
    :func:`_target_split_sweep`): where CP-SAT splits the ranked layouts (``--stage-split
    cp-sat``, the framework not placing its layers itself), unless its budget is 0."""
    return (
        config.stage_split == "cp-sat"
        and config.split_sweep_budget > 0
        and not places_own_layers(workload)
    )


SWEEP_ROWS_SHARE = 0.5
"""Share of the split sweep's budget, as it stands when its rows are gathered, that bounding them
under any split (:func:`_sweep_rows`: the structures best bound first) may spend; the rest
tightens the best of those bounds and splits the layouts they leave (:func:`_split_sweep`).
Without the cap a search whose even split ranks a poor plan first spends nearly all of it
bounding the many structures that plan fails to prune, and splits none. Measured on DeepSeek-V3
on 2,048 H800 at the default 3,000 units (2026-12-06): with MTP, uncapped, the rows took 2,798
units, 13 tight bounds and no split followed, and the search returned 12.03 s; capped at half it
returns 10.68 s; without MTP 10.86 s -> 9.83 s; in FP8 the same plan, no longer proven (its rows
needed 1,890 units); Qwen3-235B on 256 H100, gpt-oss-120b on 64 H100 and 405B on 1,024 H100
return the same plans. Structures the cap leaves unvisited keep the search from claiming its
best plan is the cost model's best (the least bound is then 0 or theirs)."""

UNLIMITED = 2**62
"""The split sweep's budget under ``--solver exhaustive``, which splits whatever it must."""
SWEEP_TOLERANCE = 1e-4
"""Relative margin by which a layout's bound under any split must beat a plan for the split
sweep to split it: one within 0.01% could win by no more than that, below the 4 significant
digits plans print, and the bound holds only a floor of the DP synchronisation and optimizer
terms (:func:`planner.search.solve.stages.dp_sync_step_floor`), whose rest is about that size
where a layout's variants (ZeRO stages) tie with the plan."""


class SplitSweep(NamedTuple):
    """What the split sweep did."""

    bounded: int
    """Pipelined layouts it bounded under any split."""
    split: int
    """Layouts it split because their bound beat the best plan."""
    unresolved: int
    """Layouts left unsplit when its budget ran out whose bound still beat the best plan."""
    least_bound: float | None
    """The least objective bound among those and the unproven splits, and of the structures the
    sweep did not reach (0 when it did not bound them all; None when nothing is left: the plans
    are the cost model's best)."""
    unvisited: bool = False
    """Whether its budget ran out before every pipelined structure was visited."""
    unproven: int = 0
    """Layouts split (ranked or swept) whose split CP-SAT's time limit left unproven, with a
    bound under any split (:func:`_unproven_bound`) that still beats the best plan."""
    gpus: int | None = None
    """With a step-time target, the GPU count the sweep stopped at short of a proof (the least
    bound is a step time on that many GPUs); None otherwise."""


def _sweep_threshold(plans: list[Plan], config: SolverConfig) -> float:
    """The objective a layout must beat to enter the ``config.top`` plans (inf while fewer)."""
    values = sorted(_plan_objective(p, config)[0] for p in plans)
    return values[config.top - 1] if len(values) >= config.top else float("inf")


def _sweep_rows(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    request: SpaceRequest,
    plans: list[Plan],
    config: SolverConfig,
    counts: list[int],
    *,
    known: list[Candidate],
    budget: SweepBudget,
    memo: MemoryTable | None = None,
) -> tuple[list[tuple[float, Candidate]], float | None]:
    """The pipelined layouts a better split might make faster than the best plan, each with
    a step-time lower bound under any split: branch and bound again over the pipelined
    structures, pruned on bounds that hold under every split (:func:`planner.search.space.
    build_candidates` with ``any_split``), the plans found so far as the incumbents (a plan's
    objective, after its split, bounds its structure's best). Each row's bound is the one it
    was pruned on, :meth:`~planner.search.space.StageTimes.any_split_time`, as a step
    (:func:`planner.search.solve.stages.step_lower_bound`: the pipeline's micro-batch times of
    it, the DP synchronisation no split avoids, what no split changes). No structure is
    visited once its share of ``budget`` (:data:`SWEEP_ROWS_SHARE`) is spent; the second value
    is then the least bound of those left (0 when some were never bounded), else None."""
    from planner.search.solve.stages import step_lower_bound

    share = SweepBudget(budget.left * SWEEP_ROWS_SHARE)
    start = share.left
    incumbents = {structure_key(p.layout): _plan_objective(p, config)[0] for p in plans}
    rows: list[tuple[float, Candidate]] = []
    stopped: float | None = None
    for n in sorted(counts, reverse=True):
        part = sub_cluster(cluster, n)
        times = StageTimes(model, part, workload, any_split=True, budget=share)
        found = build_candidates(
            model,
            part,
            workload,
            request,
            prune_top=1,
            incumbents=incumbents,
            any_split=True,
            known=known,
            times=times,
            budget=share,
            memo=memo,
        )
        for row in found.feasible:
            work = candidate_workload(row, workload)
            slowest_s = AnySplitStage(times, row.layout).value
            rows.append((step_lower_bound(model, row.cluster, work, row.layout, slowest_s), row))
        if found.stopped_at is not None:
            stopped = found.stopped_at if stopped is None else min(stopped, found.stopped_at)
    budget.spend(start - share.left)
    return rows, stopped


def _split_sweep(
    model: ModelSpec,
    workload: TrainWorkload,
    config: SolverConfig,
    plans: list[Plan],
    rows: list[tuple[float, Candidate]],
    done: list[Layout],
    budget: SweepBudget,
    *,
    unproven: list[float] | None = None,
    ceiling: float | None = None,
    relabel: bool = True,
) -> tuple[list[Plan], SplitSweep]:
    """Split, best bound first, every pipelined layout of ``rows`` (but ``done``, split
    already) whose step-time bound under any split beats the best plan; a split plan replaces
    its structure's plan when faster, or enters the ``config.top`` plans as a runner-up. The
    even split ranks a layout; this finds the ones it ranks too low (docs/search.md, "Split
    layouts the even split ranks low"). The runners-up are the best of what was split: a
    layout that could only displace a runner-up is not swept for.

    A split CP-SAT's time limit stopped proves only its own bound (:func:`_unproven_bound`;
    ``unproven``: those of the ranked layouts' splits): where that still beats the best plan
    the layout stays unresolved, counted and its bound reported, as a layout the budget left
    unsplit is.

    A row enters with its cheap bound (:func:`_sweep_rows`) and is split only once its tight
    one (:func:`planner.search.solve.stages.split_step_lower_bound`, which keeps memory, and so
    the recomputation a split needs) still comes first, so most rows are ruled out by a bound
    alone. The tight bound comes in two steps where the layout recomputes in full by the block
    method: first with each rank's recomputation free, then, if the row still comes first, with
    the one count N every chunk shares (twice the work, and what kept DeepSeek-V3's FP8 search
    from running CP-SAT to its time limit on a layout that could not win). Work stops when
    ``budget`` is spent: the rows left whose bound beats the best plan are counted, and the
    least of their bounds is how far below it the cost model's optimum might lie.

    ``ceiling``: an objective no plan may exceed (the step-time target, one GPU count at a
    time: :func:`_target_split_sweep`); ``plans`` may then be empty, and a row is split while
    its bound meets the ceiling and beats the best plan."""
    import heapq

    from planner.search.solve.stages import (
        split_shares_recompute_count,
        split_step_lower_bound,
    )

    unproven = list(unproven or [])

    heap = [  # (bound, row index, bound level: 0 cheap, 1 tight, 2 tight with N shared, row)
        (objective_value(config.objective, row.layout.num_gpus, bound), i, 0, row)
        for i, (bound, row) in enumerate(rows)
        if row.layout.pp > 1 and row.layout not in done
    ]
    heapq.heapify(heap)
    bounded = split = 0
    while heap:
        value, i, level, row = heap[0]
        threshold = _sweep_ceiling(plans, config, ceiling)
        if value >= threshold:
            break  # no row left can beat the best plan
        same = [p for p in plans if _same_structure(p.layout, row.layout)]
        if same and value >= _plan_objective(same[0], config)[0] * (1 - SWEEP_TOLERANCE):
            heapq.heappop(heap)  # it cannot beat its own structure's plan
            continue
        if budget.exhausted:
            left = sum(1 for item in heap if item[0] < threshold)
            return plans, _swept(plans, config, bounded, split, unproven, left, value, ceiling)
        heapq.heappop(heap)
        row_workload = candidate_workload(row, workload)
        shares = split_shares_recompute_count(row_workload, row.layout, config)
        if level == 0 or (level == 1 and shares):
            bounded += int(level == 0)
            bound, work = split_step_lower_bound(
                model, row.cluster, row_workload, row.layout, config=config, share_count=level == 1
            )
            budget.spend(tight_bound_units(work))
            if bound is not None:  # None: no split fits, the even split it was ranked on stays
                value = max(value, objective_value(config.objective, row.layout.num_gpus, bound))
                heapq.heappush(heap, (value, i, level + 1 if shares else 2, row))
            continue
        split += 1
        plan = _split_plan(model, row, workload, config, relabel=relabel)
        budget.spend(SWEEP_SPLIT_UNITS)
        info = plan.pipeline_split.subproblem if plan.pipeline_split else None
        if info is not None and info.solved_by == "cp-sat":  # one that did not prove its
            budget.spend(  # optimum ran to its time limit
                SWEEP_CP_SAT_UNITS
                if info.status == "OPTIMAL"
                else round(SWEEP_UNITS_PER_S * config.stage_time_limit_s)
            )
        proved = _unproven_bound(model, row, workload, plan, config)
        if proved is not None:
            unproven.append(max(value, proved))
        objective = _plan_objective(plan, config)
        if same and _plan_objective(same[0], config) <= objective:
            continue  # no better than its structure's plan
        if not same and objective[0] >= _sweep_threshold(plans, config):
            continue  # split, it still ranks below the runners-up
        if ceiling is not None and objective[0] > ceiling:
            continue  # split, it still misses the target
        plans = [p for p in plans if not _same_structure(p.layout, plan.layout)] + [plan]
        plans.sort(key=lambda p: _plan_objective(p, config))
    return plans, _swept(plans, config, bounded, split, unproven, 0, None, ceiling)


def _with_unvisited(swept: SplitSweep, stopped: float | None) -> SplitSweep:
    """``swept`` with the structures its rows left unvisited (``stopped``: the least bound of
    those left, :func:`_sweep_rows`; None when it visited them all), which bound what the sweep
    could not."""
    if stopped is None:
        return swept
    least = stopped if swept.least_bound is None else min(stopped, swept.least_bound)
    return swept._replace(least_bound=least, unvisited=True)


def _sweep_ceiling(plans: list[Plan], config: SolverConfig, ceiling: float | None) -> float:
    """The objective a row's bound must fall below to be split: the best plan's, less the
    sweep's tolerance, and at most just above ``ceiling`` (a bound equal to it may meet it)."""
    best = _plan_objective(plans[0], config)[0] * (1 - SWEEP_TOLERANCE) if plans else math.inf
    return best if ceiling is None else min(best, math.nextafter(ceiling, math.inf))


def _target_split_sweep(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    request: SpaceRequest,
    plans: list[Plan],
    config: SolverConfig,
    counts: list[int],
    *,
    known: list[Candidate],
    done: list[Layout],
    budget: SweepBudget,
    unproven: list[tuple[int, float]],
    best_gpus: int | None = None,
    relabel: bool = True,
    memo: MemoryTable | None = None,
) -> tuple[list[Plan], SplitSweep]:
    """The split sweep under a step-time target, where plans rank by GPU count, then step time.
    The ranking saw only layouts whose even split meets the target; a pipelined layout on fewer
    GPUs whose even split misses it may meet it split, and one on the best plan's count may beat
    its step time. So the time sweep (:func:`_split_sweep`) runs one GPU count at a time, fewest
    first, up to the best plan's, the target its ceiling: rows are the pipelined layouts on that
    count whose bound under any split meets the target (:func:`_sweep_rows`; a structure whose
    bound misses it is not visited), and the count's plans (none below the best plan's) its
    incumbents. It stops at the first count below the best plan's where a split meets the
    target (its fastest split is then the best plan: no larger count can use fewer GPUs), or
    where its budget runs out or CP-SAT's time limit leaves a split unproven there (``gpus``
    says which count, and the least bound is a step time on it). ``best_gpus``: the count to
    sweep up to when there are no ``plans`` (no layout met the target evenly split)."""
    target = config.target_step_time_s
    assert target is not None
    timed = config.model_copy(update={"target_step_time_s": None, "objective": "time"})
    ask = request.model_copy(update={"objective": "time"})
    best_gpus = best_gpus or plans[0].num_gpus
    bounded = split = 0
    for n in sorted({c for c in counts if c <= best_gpus}):
        here = [p for p in plans if p.num_gpus == n]
        rows, stopped = _sweep_rows(
            model,
            cluster,
            workload,
            ask,
            here,
            timed,
            [n],
            known=known,
            budget=budget,
            memo=memo,
        )
        found, swept = _split_sweep(
            model, workload, timed, here, rows, done, budget,
            unproven=[b for g, b in unproven if g == n], ceiling=target, relabel=relabel,
        )  # fmt: skip
        bounded, split = bounded + swept.bounded, split + swept.split
        swept = _with_unvisited(swept, stopped)
        plans = [p for p in plans if p.num_gpus != n] + found
        plans.sort(key=lambda p: _plan_objective(p, config))
        if swept.least_bound is not None:
            return plans, swept._replace(bounded=bounded, split=split, gpus=n)
        if found and n < best_gpus:
            break  # the fewest GPUs that meet the target, at their fastest split
    return plans, SplitSweep(bounded, split, 0, None)


def _target_sweep_note(swept: SplitSweep | None) -> str:
    """What a target sweep that found nothing left open, for the no-layout message: '' when it
    did not run or settled every count."""
    if swept is None or swept.least_bound is None or swept.gpus is None:
        return ""
    return (
        f"; the split sweep stopped on {swept.gpus:,} GPUs, where a split might still meet the "
        "target (--split-sweep N gives it more)"
    )


def _swept(
    plans: list[Plan],
    config: SolverConfig,
    bounded: int,
    split: int,
    unproven: list[float],
    left: int,
    least: float | None,
    ceiling: float | None = None,
) -> SplitSweep:
    """The sweep's account: ``left`` layouts unsplit with ``least`` the least bound among them
    (None: none), and of ``unproven`` (the bounds of splits CP-SAT did not prove) those that
    still beat the best plan (and meet ``ceiling``)."""
    threshold = _sweep_ceiling(plans, config, ceiling)
    open_bounds = [b for b in unproven if b < threshold]
    if open_bounds:
        least = min(open_bounds) if least is None else min(least, *open_bounds)
    return SplitSweep(bounded, split, left, least, unproven=len(open_bounds))


def _unproven_bound(
    model: ModelSpec,
    candidate: Candidate,
    workload: TrainWorkload,
    plan: Plan,
    config: SolverConfig,
) -> float | None:
    """The objective bound under any split of a layout whose split CP-SAT's time limit stopped
    (:func:`planner.search.solve.stages.solved_step_lower_bound`: the cost model's optimum of
    the layout may lie anywhere from it to the plan), or None when its split is proven: solved
    exactly, proved optimal or proved to have no split that fits, or not solved at all."""
    split = plan.pipeline_split
    info = split.subproblem if split is not None else None
    if info is None or info.status in ("OPTIMAL", "INFEASIBLE"):
        return None
    from planner.search.solve.stages import solved_step_lower_bound

    layout = candidate.layout
    bound = solved_step_lower_bound(
        model, candidate.cluster, candidate_workload(candidate, workload), layout, info
    )
    return objective_value(config.objective, layout.num_gpus, bound)


def _same_structure(a: Layout, b: Layout) -> bool:
    """Whether two layouts have the same GPU count, parallel degrees and precision."""
    return structure_key(a) == structure_key(b)


def _target_message(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    request: SpaceRequest,
    gpus: int | None,
    config: SolverConfig,
    candidates: CandidateSet,
) -> str:
    """Why no layout meets --target-step-time, with the best step time achievable: the
    fastest layout that fits on all the GPUs allowed (a search without the target)."""
    target = config.target_step_time_s
    head = (
        f"no layout of '{model.name}' on {cluster.name} can meet the {target:.3g} s step-time "
        f"target: the step-time lower bound of all {candidates.rejection_counts['target']:,} "
        "layouts exceeds it"
    )
    cap = gpus or cluster.num_accelerators
    fastest = build_candidates(
        model,
        sub_cluster(cluster, cap),
        workload,
        request.model_copy(update={"max_step_s": None, "objective": "time"}),
        prune_top=1,
    ).feasible
    if not fastest:
        return head + f"; and no layout fits on {cap} GPUs"
    best = min(fastest, key=lambda c: c.cost.step_time_s)
    return (
        f"{head}; the fastest that fits on {cap} GPUs, {best.layout.short()}, takes "
        f"{best.cost.step_time_s:.3g} s per step ({best.cost.step_time_s / target:.3g}x the target)"
    )


def _ranked_count(config: SolverConfig) -> int:
    """Layouts the ranking keeps (and branch and bound must not prune): ``top``, or with the
    CP-SAT stage split at least ``split_candidates``, which are split and ranked again."""
    if config.stage_split == "cp-sat":
        return max(config.top, config.split_candidates)
    return config.top


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


_SPLIT_THREADS_CAP: int | None = None
"""At most this many split threads in this process (None: one per usable CPU): a sweep's worker
process, which already has a CPU of its own, solves its splits one at a time."""


def cap_split_threads(threads: int | None) -> None:
    """From now on, run at most ``threads`` split solves at once in this process (None: no cap);
    a what-if sweep's workers set 1 (planner.search.pool.start_worker)."""
    global _SPLIT_THREADS_CAP
    _SPLIT_THREADS_CAP = threads


def split_threads(config: SolverConfig, jobs: int) -> int:
    """Threads that run the pipeline-split solves of ``jobs`` candidates side by side: one per
    core this process may use (:func:`available_cores`, at most :func:`cap_split_threads`'s
    cap), each solve keeping its ``config.num_workers`` CP-SAT workers, never more than the
    jobs. CP-SAT releases the GIL while it solves (measured: four time-limited 0.5 s solves take
    2.2 s in sequence and 1.2 s on two threads here), so the solves run in parallel; building
    each model and re-scoring its split stay serial.

    >>> split_threads(SolverConfig(num_workers=64), 5)  # a solve wants every CPU: one at a time
    1
    >>> split_threads(SolverConfig(), 1)
    1
    """
    cpus = available_cores()
    if _SPLIT_THREADS_CAP is not None:
        cpus = min(cpus, _SPLIT_THREADS_CAP)
    return max(1, min(jobs, cpus // config.num_workers))


def _split_plans(
    model: ModelSpec,
    candidates: list[Candidate],
    workload: TrainWorkload,
    config: SolverConfig,
    *,
    relabel: bool = True,
) -> list[Plan]:
    """:func:`_split_plan` of each candidate (``relabel`` passed on), in order, the solves on
    :func:`split_threads` threads. Each solve has its own limit, counted in CP-SAT's
    deterministic work (:func:`planner.search.solve.cpsat.configured_solver`), and its own
    single-worker solver, so it returns the same split either way, whether it proves its optimum
    or stops at its limit, however the threads share the CPU."""
    threads = split_threads(config, len(candidates))
    if threads == 1 or config.stage_split != "cp-sat":
        return [_split_plan(model, c, workload, config, relabel=relabel) for c in candidates]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(
            pool.map(lambda c: _split_plan(model, c, workload, config, relabel=relabel), candidates)
        )


def candidate_workload(candidate: Candidate, workload: TrainWorkload) -> TrainWorkload:
    """The workload a candidate was scored under: its precision, and the activation-offload
    share the search gave it to fit (SolverConfig.offload_as_needed)."""
    update: dict[str, object] = {"precision": candidate.layout.precision}
    if candidate.offload:
        update["activation_offload_fraction"] = candidate.offload
    return workload.model_copy(update=update)


def _split_plan(
    model: ModelSpec,
    candidate: Candidate,
    workload: TrainWorkload,
    config: SolverConfig,
    *,
    check: bool = True,
    relabel: bool = True,
) -> Plan:
    """The plan of one chosen candidate (validated when ``check``), its pipeline split by
    CP-SAT when ``config.stage_split`` asks and the cost model scores that split no slower; a
    full-recompute split that recomputes nothing is the layout without recomputation
    (:func:`as_no_recompute`) unless ``relabel`` is False (the user pinned the setting)."""
    workload = candidate_workload(candidate, workload)
    layout, cluster, even = candidate.layout, candidate.cluster, candidate.cost
    split = cost = info = None
    own = framework_split(model, workload, layout)
    if own is not None:  # the framework places its layers itself (Nanotron)
        return _framework_split_plan(model, candidate, workload, own, check=check)
    if layout.pp > 1 and config.stage_split == "cp-sat" and not places_own_layers(workload):
        from planner.search.solve.stages import optimise_pipeline  # imports OR-Tools

        split, cost, info = optimise_pipeline(
            model, cluster, workload, layout, even=even, config=config
        )
        if relabel and split is not None and recomputes_nothing(layout, split):
            layout, split = as_no_recompute(layout, split)
            cost = score(model, cluster, workload, layout, split=split)
    split_info = None
    if layout.pp > 1:
        split_info = PipelineSplitInfo(
            method="even" if split is None or info is None else info.solved_by,
            even_step_time_s=even.step_time_s,
            even_peak_gib=even.peak_memory.total / GiB,
            even_fits=fits(even, cluster),
            subproblem=info,
        )
    plan = to_plan(
        model, cluster, workload, layout, cost or even, split=split, split_info=split_info
    )
    if check:
        validate_plan(plan, model, cluster, workload)
    return plan


def recomputes_nothing(layout: Layout, split: PipelineSplit) -> bool:
    """Whether a full-recompute layout's split recomputes no layer in any chunk (the stage
    solve's choice where every rank fits with nothing recomputed): the plan is the layout
    without recomputation, and is labelled so.

    >>> full = Layout(pp=2, recompute="full")
    >>> recomputes_nothing(full, PipelineSplit(chunk_layers=(4, 4), recompute_layers=(0, 0)))
    True
    >>> recomputes_nothing(full, PipelineSplit(chunk_layers=(4, 4), recompute_layers=(0, 1)))
    False
    """
    return (
        layout.recompute is Recompute.FULL
        and split.recompute_layers is not None
        and not any(split.recompute_layers)
    )


def as_no_recompute(layout: Layout, split: PipelineSplit) -> tuple[Layout, PipelineSplit]:
    """``layout`` and ``split`` of :func:`recomputes_nothing` as the same plan without
    recomputation (Megatron-LM runs it without ``--recompute-granularity``)."""
    return (
        layout.model_copy(update={"recompute": Recompute.NONE}),
        split.model_copy(update={"recompute_layers": None}),
    )


def distinct_layouts(plans: list[Plan]) -> list[Plan]:
    """``plans`` (best first) with each layout once, at its best: a full-recompute candidate
    whose split recomputes nothing becomes the layout without recomputation
    (:func:`as_no_recompute`), which the search may also have split on its own.

    >>> from planner.specs.result import Plan
    >>> a = Plan.model_construct(layout=Layout(pp=2), step_time_s=1.0)
    >>> b = Plan.model_construct(layout=Layout(pp=2), step_time_s=1.1)
    >>> [p.step_time_s for p in distinct_layouts([a, b])]
    [1.0]
    """
    seen: set[Layout] = set()
    kept = []
    for plan in plans:
        if plan.layout not in seen:
            seen.add(plan.layout)
            kept.append(plan)
    return kept


def _framework_split_plan(
    model: ModelSpec,
    candidate: Candidate,
    workload: TrainWorkload,
    split: PipelineSplit,
    *,
    check: bool,
) -> Plan:
    """The plan of ``candidate`` (scored under ``split``, the framework's own) with the even
    split's figures beside it for comparison."""
    layout, cluster = candidate.layout, candidate.cluster
    cost = candidate.cost  # the search scored it under this split (space.StageTimes.split)
    info = _beside_even(model, cluster, workload, layout, "framework")
    plan = to_plan(model, cluster, workload, layout, cost, split=split, split_info=info)
    if check:
        validate_plan(plan, model, cluster, workload)
    return plan


def _given_split_plan(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    split: PipelineSplit,
    *,
    placed: bool,
) -> Plan:
    """The plan of ``layout`` scored under the split the user gave (``method`` "given"), with
    the even split's figures beside it; SpecError where the split is not one of this layout
    (its chunks are not pp x vpp, its layers not the model's) or the framework places its
    layers itself (``placed``)."""
    if placed:
        raise SpecError(
            f"the {workload.framework} framework places its pipeline layers itself; a given "
            "pipeline split cannot be run there"
        )
    chunks = layout.pp * layout.vpp
    if layout.pp == 1 or split.num_chunks != chunks:
        raise SpecError(
            f"the given pipeline split has {split.num_chunks} chunks, the layout pp x vpp = "
            f"{layout.pp} x {layout.vpp} = {chunks}"
            + (" (a split needs pp > 1)" if layout.pp == 1 else "")
        )
    if sum(split.chunk_layers) != model.num_layers:
        raise SpecError(
            f"the given pipeline split holds {sum(split.chunk_layers)} decoder layers, "
            f"{model.name} has {model.num_layers}"
        )
    cost = score(model, cluster, workload, layout, split=split)
    info = _beside_even(model, cluster, workload, layout, "given")
    return to_plan(model, cluster, workload, layout, cost, split=split, split_info=info)


def _beside_even(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    method: Literal["framework", "given"],
) -> PipelineSplitInfo:
    """How a split no solve chose (the framework's own, or the user's) was ``method``-made, with
    the even split's step time, peak memory and fit beside it for comparison."""
    even = score(model, cluster, workload, layout)
    return PipelineSplitInfo(
        method=method,
        even_step_time_s=even.step_time_s,
        even_peak_gib=even.peak_memory.total / GiB,
        even_fits=fits(even, cluster),
    )


def given_split_of(plan: Plan) -> PipelineSplit | None:
    """The split a plan estimated under a given split records in its stages (decoder layers
    and MTP modules per chunk); None for any other plan."""
    if plan.pipeline_split is None or plan.pipeline_split.method != "given":
        return None
    stages = sorted(plan.pipeline_stages, key=lambda s: s.stage)
    holding = [s.stage for s in stages if s.mtp_layers]
    return PipelineSplit(
        chunk_layers=tuple(s.num_layers for s in stages),
        mtp_chunk=holding[0] if holding else None,
    )


def _plan_objective(plan: Plan, config: SolverConfig) -> tuple[float, float]:
    """What the ranking minimises, for a plan: (GPUs, step time) with a step-time target, else
    (step time or GPU-seconds per step, 0)."""
    if config.target_step_time_s is not None:
        return float(plan.num_gpus), plan.step_time_s
    return objective_value(config.objective, plan.num_gpus, plan.step_time_s), 0.0


def _solver_info(
    info: SolverInfo,
    plans: list[Plan],
    config: SolverConfig,
    *,
    offload: bool = False,
    swept: SplitSweep | None = None,
) -> SolverInfo:
    """The ranking's info with the best plan's objective (after its split), the sub-problems
    solved and what was enumerated, sorted and solved, in words (``offload``: the search could
    offload activations where a layout fits only so; ``swept``: what the split sweep did)."""
    subproblems = [
        p.pipeline_split.subproblem
        for p in plans
        if p.pipeline_split is not None and p.pipeline_split.subproblem is not None
    ]
    best = plans[0]
    value = objective_value(config.objective, best.num_gpus, best.step_time_s)
    if config.target_step_time_s is not None:
        value = best.step_time_s
    ranked = (
        "every layout scored"
        if config.solver == "exhaustive"
        else (
            "layouts scored in order of a valid step-time lower bound, pruned by branch and bound"
        )
    )
    offload = (
        " (and, where a layout fits only so, the smallest activation-offload share its "
        "framework can express)"
        if offload
        else ""
    )
    method = (
        f"enumerated: parallel degrees, vpp, micro-batch, recompute, ZeRO stage, precision"
        f"{offload}; {ranked}, evenly split over pipeline stages, and ranked by a sort"
    )
    if any(p.pipeline_split is not None and p.pipeline_split.method == "framework" for p in plans):
        method += (
            f"; the best {_ranked_count(config)} were then split over their pipeline stages as "
            "the framework splits them itself (its cost rule) and ranked again"
        )
    elif config.stage_split == "cp-sat":
        method += (
            f"; the layers of the best {_ranked_count(config)} were then split over their "
            "pipeline stages (CP-SAT, or exactly without it where a recurrence, layer counts, "
            "a branch and bound or a lower bound settles the split: each split's solved_by) "
            "and they were ranked again"
        )
    status, bound = info.status, value
    if swept is not None:
        if config.target_step_time_s is not None:
            method += (
                "; then, one GPU count at a time from the fewest up to the best plan's, every "
                "other pipelined layout a split might let meet the target (or, on the best "
                "plan's count, beat its step time) was bounded under any split "
                f"({swept.bounded:,} needed the tight bound) and the {swept.split:,} whose bound "
                "did were split too (the split sweep)"
            )
        else:
            method += (
                "; then every other pipelined layout a split might make faster than the best "
                f"plan was bounded under any split ({swept.bounded:,} needed the tight bound) "
                f"and the {swept.split:,} whose bound beat it were split too, a split one "
                "joining the runners-up where it beats them (the split sweep)"
            )
        if swept.least_bound is None:
            method += ": the best plan is the cost model's best"
        else:
            method += _unfinished_words(swept, config)
            status, bound = "FEASIBLE", swept.least_bound
    sweep_info = None
    if swept is not None:
        sweep_info = SplitSweepInfo(
            budget=config.split_sweep_budget,
            bounded=swept.bounded,
            split=swept.split,
            finished=swept.least_bound is None,
            unresolved=swept.unresolved,
            least_bound_s=swept.least_bound,
            unproven=swept.unproven,
            least_bound_gpus=swept.gpus,
        )
    return info.model_copy(
        update={"objective": value, "best_bound": bound, "status": status, "method": method,
                "subproblems": subproblems, "split_sweep": sweep_info,
                "memory_headroom": config.memory_headroom}
    )  # fmt: skip


def _unfinished_words(swept: SplitSweep, config: SolverConfig) -> str:
    """What kept the split sweep from proving the best plan, in words (``swept`` has a least
    bound left): its budget, CP-SAT's time limit on the splits, or both."""
    reasons = []
    budget = f"its budget ({config.split_sweep_budget:,} units) ran out"
    if swept.unvisited:
        reasons.append(f"{budget} before it reached every pipelined structure")
    elif swept.unresolved:
        reasons.append(
            f"{budget} with {swept.unresolved:,} layouts left unsplit whose bound beats it"
        )
    if swept.unproven:
        reasons.append(
            f"CP-SAT's time limit ({config.stage_time_limit_s:g} s a split) stopped "
            f"{swept.unproven:,} splits short of a proof, their bounds below it"
        )
    assert swept.least_bound is not None
    bound_words = (
        "nothing is known of those not yet bounded"
        if swept.least_bound <= 0
        else f"the least bound left is {swept.least_bound:.6g}"
    )
    if swept.gpus is not None:  # a step-time target: the count it stopped on
        bound_words += f"{' s' if swept.least_bound > 0 else ''}, on {swept.gpus:,} GPUs"
    more = "--split-sweep N gives it more" if swept.unvisited or swept.unresolved else None
    return (
        f", until {' and '.join(reasons)} ({bound_words}): the best plan is not proven the cost "
        f"model's best{f' ({more})' if more else ''}"
    )


def estimate(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    config: SolverConfig | None = None,
    split: PipelineSplit | None = None,
) -> Plan:
    """Score one given layout. SpecError when it breaks a rule; the plan says whether it fits.
    With ``config`` asking for it (``stage_split``), CP-SAT splits the pipeline; without a
    config the even split is scored (the validation set's published runs). A framework that
    places its layers itself (``FrameworkSpec.pipeline_split`` ``cost``) gets its own split
    either way. ``split``: the layers per chunk the run used (:mod:`planner.search.
    given_split`), scored as given, with the even split's figures beside it."""
    workload = resolve_workload(workload, cluster.accelerator.vendor)
    check_workload(model, cluster, workload)
    if layout.precision != workload.precision:
        layout = layout.model_copy(update={"precision": workload.precision})
    violations = layout_violations(model, cluster, workload, layout, split=split)
    if violations:
        raise SpecError("; ".join(detail for _, detail in violations))
    own = framework_split(model, workload, layout)
    if split is not None:
        placed = places_own_layers(workload)
        return _given_split_plan(model, cluster, workload, layout, split, placed=placed)
    if own is not None:  # the framework places its layers itself (Nanotron)
        cost = score(model, cluster, workload, layout, split=own)
        candidate = Candidate(layout=layout, cost=cost, cluster=cluster)
        return _framework_split_plan(model, candidate, workload, own, check=False)
    even_only = config is None or config.stage_split == "even" or places_own_layers(workload)
    if layout.pp == 1 or even_only:
        return evaluate(model, cluster, workload, layout)
    candidate = Candidate(
        layout=layout, cost=score(model, cluster, workload, layout), cluster=cluster
    )
    return _split_plan(model, candidate, workload, config, check=False, relabel=False)


def not_fitting_message(
    plan: Plan, model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload
) -> str:
    """The one-line reason an estimated layout does not fit (under the split it was given)."""
    cost = score(model, cluster, workload, plan.layout, split=given_split_of(plan))
    if fits(cost, cluster):
        return ""
    lean = prefetch_lean_total(model, workload, plan.layout, given_split_of(plan))
    return memory_detail(
        plan.layout, cost.peak_memory, cluster.accelerator.usable_memory_bytes, cluster,
        lean_total=lean,
    )  # fmt: skip
