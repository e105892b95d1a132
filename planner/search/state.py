"""Search and estimate on the cluster as it is (``--cluster-state``): the layout from the existing
search, the accelerators and rank order from the CP-SAT placement, and the price of both.

* The GPU counts the search may use are what the state leaves: free accelerators in whole units
  of the system (an HGX board, an NVL72 tray) per scale-up domain, on nodes at least as fast as
  a speed level. Level 1 uses healthy nodes only; each slower level adds the nodes of that speed
  and runs the whole step at it (the slowest rank sets the pace). Each level is searched with
  the accelerator's FLOP/s scaled to its speed (:func:`~planner.catalog.variants.slowed_accelerator`).
* The best plans of a level are placed in turn (:mod:`planner.search.placement`) until one keeps
  its TP and EP groups inside scale-up domains; that placement is priced with the flows of the
  actual rank -> accelerator map (:func:`~planner.topology.placed.placed_domains`) and the speed
  of its slowest node.
* The answer says what the holes cost: the same request on the cluster with nothing down, taken
  or slow (``step_time_s_healthy``), and the same layout on the first free GPUs in Megatron order
  (``default_order``).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict

import numpy as np

from planner.catalog.clusters import domain_split
from planner.catalog.variants import slowed_accelerator
from planner.cost.step import estimate_step
from planner.errors import InfeasibleError, InternalError, SpecError
from planner.search import engine
from planner.search.evaluate import evaluate, to_plan
from planner.search.explain import why_not
from planner.search.pipeline import plan_split
from planner.search.placement import (
    Placement,
    block_size,
    default_positions,
    inside_block_size,
    solve_placement,
)
from planner.search.rules import check_workload, cp_a2a_heads, layout_violations
from planner.search.space import objective_value
from planner.specs.cluster import ClusterSpec
from planner.specs.cluster_state import ClusterState, DefaultOrder, StateReport, SubproblemInfo
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.result import PipelineSplitInfo, Plan, SearchResult
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import TrainWorkload
from planner.topology.hierarchy import placement_entries
from planner.topology.placed import groups_split, nominal_positions, placed_domains
from planner.topology.state import Availability, apply_state
from planner.topology.structure import fabric_of

MAX_SPEED_LEVELS = 4
"""Speed levels searched, fastest first (healthy nodes only, then adding the next slowest
factor's nodes, ...): each is one search."""
MIN_TRIED_PLANS = 5
"""Plans of a level offered to the placement, best first, before the count is lowered to what
the best plan's blocks fit."""
_POSITIONS: OrderedDict[str, np.ndarray] = OrderedDict()
"""Recent placements by key (the placement file re-uses the search's solution)."""
MAX_CACHED_PLACEMENTS = 8


def _key(cluster: ClusterSpec, layout: Layout, state: ClusterState) -> str:
    text = cluster.describe() + layout.model_dump_json() + state.model_dump_json()
    return hashlib.sha256(text.encode()).hexdigest()


def _remember(key: str, positions: np.ndarray) -> None:
    _POSITIONS[key] = positions
    _POSITIONS.move_to_end(key)
    while len(_POSITIONS) > MAX_CACHED_PLACEMENTS:
        _POSITIONS.popitem(last=False)


def largest_legal_count(cluster: ClusterSpec, cap: int) -> int | None:
    """The largest legal size (whole units per domain, the ``<system>x<N>`` rule) of at most
    ``cap`` accelerators, or None."""
    if cluster.system.torus is not None:
        for n in range(cap, 0, -1):
            if engine._split(cluster, n) is not None:
                return n
        return None
    for n in range(cap, 0, -1):
        if n == cluster.num_accelerators or domain_split(cluster.system, n) is not None:
            return n
    return None


def sub_cluster_of(cluster: ClusterSpec, num_gpus: int) -> ClusterSpec:
    """The regular sub-cluster of ``num_gpus`` a layout is scored on (SpecError if not legal)."""
    if num_gpus > cluster.num_accelerators:
        raise SpecError(
            f"the layout uses {num_gpus} accelerators; {cluster.name} has "
            f"{cluster.num_accelerators}"
        )
    try:
        return engine.sub_cluster(cluster, num_gpus)
    except InternalError:
        nearest = largest_legal_count(cluster, num_gpus)
        raise SpecError(
            f"the layout uses {num_gpus} accelerators, not a legal size of "
            f"{cluster.system.name} (whole {cluster.system.unit_size}-accelerator units per "
            f"domain); nearest below: {nearest}"
        ) from None


def _slowed(cluster: ClusterSpec, speed: float) -> ClusterSpec:
    if speed >= 1.0:
        return cluster
    return cluster.model_copy(
        update={"accelerator": slowed_accelerator(cluster.accelerator, speed)}
    )


def price_placement(
    model: ModelSpec,
    plan_cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    availability: Availability,
    positions: np.ndarray,
    *,
    split: PipelineSplit | None = None,
    split_info: PipelineSplitInfo | None = None,
) -> Plan:
    """The plan of ``layout`` with rank r on accelerator ``positions[r]``: every dimension's
    bandwidth from that map's flows, every rank at the speed of the slowest node used, its
    layers on the stages as ``split`` places them (default the even split). MFU and the memory
    check stay against the rated accelerator (``plan_cluster``'s)."""
    heads = cp_a2a_heads(model, workload, layout.tp)
    domains = placed_domains(
        availability.fabric, layout, positions, workload.zero_shard_group, heads
    )
    speed = availability.speed_of(positions)
    acc = slowed_accelerator(plan_cluster.accelerator, speed)
    workload = workload.model_copy(update={"precision": layout.precision})
    cost = estimate_step(model, acc, workload, layout, domains, split=split)
    plan = to_plan(model, plan_cluster, workload, layout, cost, split=split, split_info=split_info)
    entries = placement_entries(domains, layout, workload.cp_comm, workload.zero_shard_group)
    return plan.model_copy(update={"placement": entries})


def _default_order(
    model: ModelSpec,
    plan_cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    availability: Availability,
) -> DefaultOrder | None:
    positions = default_positions(availability, layout.num_gpus)
    if positions is None:
        return None
    plan = price_placement(model, plan_cluster, workload, layout, availability, positions)
    return DefaultOrder(
        step_time_s=plan.step_time_s,
        speed_factor=availability.speed_of(positions),
        slow_nodes_used=availability.slow_nodes_among(positions),
        groups_split=groups_split(availability.fabric, layout, positions),
    )


def _warnings(availability: Availability, placement: Placement, layout: Layout,
              split: dict[str, int]) -> list[str]:  # fmt: skip
    out = []
    slow = availability.slow_nodes_among(placement.positions)
    if slow:
        speed = availability.speed_of(placement.positions)
        out.append(
            f"cluster state: slow node(s) {', '.join(slow[:8])}{' ...' if len(slow) > 8 else ''}"
            f" used (no faster placement holds {layout.num_gpus} ranks); every step runs at "
            f"{speed:.0%} of the rated FLOP/s"
        )
    if not placement.whole_blocks:
        parts = [
            f"{n} {dim.upper()} group(s)" for dim, n in split.items() if n and dim in ("tp", "ep")
        ]
        if parts:
            out.append(
                "cluster state: no placement keeps every TP and EP group inside one scale-up "
                f"domain; {', '.join(parts)} span two or more, priced as such"
            )
    return out


def placed_plan(
    model: ModelSpec,
    plan_cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    availability: Availability,
    placement: Placement,
    *,
    healthy_step_s: float,
    state_name: str,
    source: Plan | None = None,
) -> Plan:
    """The plan of ``layout`` on the placement, with its cluster-state report; ``source``, the
    plan the search chose, gives its pipeline split (the placement moves ranks, not layers)."""
    split = plan_split(source) if source is not None else None
    plan = price_placement(
        model, plan_cluster, workload, layout, availability, placement.positions,
        split=split, split_info=source.pipeline_split if split is not None else None,  # type: ignore[union-attr]
    )  # fmt: skip
    fab, positions = availability.fabric, placement.positions
    split = groups_split(fab, layout, positions)
    speed = availability.speed_of(positions)
    report = StateReport(
        state=state_name,
        gpus_total=fab.num_accelerators,
        gpus_down=int(availability.down.sum()),
        gpus_taken=int(availability.taken.sum()),
        gpus_free=int(availability.free.sum()),
        slow_nodes={f"node{k}": float(s) for k, s in enumerate(availability.node_speed) if s < 1.0},
        gpus_used=len(positions),
        nodes_used=len(np.unique(positions // fab.per_node)),
        domains_used=len(np.unique(positions // fab.per_domain)),
        slow_nodes_used=availability.slow_nodes_among(positions),
        speed_factor=speed,
        groups_split=split,
        step_time_s_healthy=healthy_step_s,
        step_time_s=plan.step_time_s,
        holes_cost_pct=100.0 * (plan.step_time_s / healthy_step_s - 1.0),
        default_order=_default_order(model, plan_cluster, workload, layout, availability),
        placement_solve=placement.info,
    )
    warnings = [*plan.warnings, *_warnings(availability, placement, layout, split)]
    return plan.model_copy(update={"cluster_state": report, "warnings": warnings})


def _place(availability: Availability, plan: Plan, config: SolverConfig) -> tuple[Placement, int]:
    """The plan's placement in whole blocks (:func:`block_size`); when the free nodes cannot
    hold those, in blocks of its TP and EP groups alone (:func:`inside_block_size`), which
    leaves a CP or DP group to cross domains (priced) rather than split a TP group."""
    per_domain = availability.fabric.per_domain
    block = block_size(plan.placement, per_domain)
    placement = solve_placement(availability, plan.num_gpus, block, config)
    inside = inside_block_size(plan.placement, per_domain)
    if not placement.whole_blocks and inside != block:
        relaxed = solve_placement(availability, plan.num_gpus, inside, config)
        if relaxed.whole_blocks:
            return relaxed, inside
    return placement, block


def estimate_on_state(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    state: ClusterState,
    *,
    config: SolverConfig | None = None,
    state_name: str = "Python object",
) -> Plan:
    """Score ``layout`` on the free accelerators of ``cluster`` under ``state``: placed by
    CP-SAT, priced on that placement; InfeasibleError when too few are free."""
    config = config or SolverConfig()
    availability = apply_state(cluster, state)
    sub = sub_cluster_of(cluster, layout.num_gpus)
    check_workload(model, sub, workload)
    if layout.precision != workload.precision:
        layout = layout.model_copy(update={"precision": workload.precision})
    violations = layout_violations(model, sub, workload, layout)
    if violations:
        raise SpecError("; ".join(detail for _, detail in violations))
    nominal = evaluate(model, sub, workload, layout)
    placement, _ = _place(availability, nominal, config)
    _remember(_key(cluster, layout, state), placement.positions)
    return placed_plan(
        model, sub, workload, layout, availability, placement,
        healthy_step_s=nominal.step_time_s, state_name=state_name,
    )  # fmt: skip


def _level_counts(
    cluster: ClusterSpec, availability: Availability, cap: int
) -> list[tuple[float, int]]:
    """(speed level, largest legal GPU count using nodes at least that fast), fastest first,
    each count larger than the previous level's, at most MAX_SPEED_LEVELS."""
    unit = cluster.system.unit_size
    free = availability.free_per_node > 0
    speeds = sorted({1.0, *(float(s) for s in availability.node_speed[free])}, reverse=True)
    out: list[tuple[float, int]] = []
    for speed in speeds:
        usable = availability.usable_gpus(min_speed=speed, unit=unit)
        n = largest_legal_count(cluster, min(usable, cap)) if usable else None
        if n is not None and (not out or n > out[-1][1]):
            out.append((speed, n))
        if len(out) == MAX_SPEED_LEVELS:
            break
    return out


def _rank_key(plan: Plan, config: SolverConfig) -> tuple[float, float]:
    if config.target_step_time_s is not None:
        meets = plan.step_time_s <= config.target_step_time_s
        return (plan.num_gpus if meets else float("inf"), plan.step_time_s)
    return (objective_value(config.objective, plan.num_gpus, plan.step_time_s), 0.0)


def search_on_state(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    state: ClusterState,
    *,
    fix: dict[str, object] | None = None,
    config: SolverConfig | None = None,
    bounds: dict[str, tuple[int | None, int | None]] | None = None,
    precisions: list[NumberFormat] | None = None,
    gpus: int | None = None,
    state_name: str = "Python object",
) -> SearchResult:
    """Best layout and placement on the cluster as ``state`` leaves it (see the module doc)."""
    start = time.perf_counter()
    config = config or SolverConfig()
    availability = apply_state(cluster, state)
    kwargs = {"fix": fix, "bounds": bounds, "precisions": precisions}
    healthy = engine.search(model, cluster, workload, config=config, gpus=gpus, **kwargs)
    levels = _level_counts(cluster, availability, gpus or cluster.num_accelerators)
    if not levels:
        raise InfeasibleError(
            f"the cluster state leaves no whole {cluster.system.unit_size}-accelerator unit of "
            f"{cluster.name} free ({int(availability.down.sum()):,} down, "
            f"{int(availability.taken.sum()):,} taken)"
        )
    wider = config.model_copy(update={"top": max(config.top, MIN_TRIED_PLANS)})
    solves: list[SubproblemInfo] = []
    best: tuple[tuple[float, float], Plan, SearchResult] | None = None
    failure: InfeasibleError | None = None
    for speed, count in levels:
        try:
            found = _search_level(
                model, cluster, workload, availability, speed, count, wider, kwargs, solves
            )
        except InfeasibleError as exc:
            failure = failure or exc
            continue
        result, nominal_cluster, nominal_plan, placement = found
        layout = nominal_plan.layout
        plan = placed_plan(
            model, nominal_cluster, workload, layout, availability, placement,
            healthy_step_s=healthy.best.step_time_s, state_name=state_name,
            source=nominal_plan,
        )  # fmt: skip
        _remember(_key(cluster, layout, state), placement.positions)
        key = _rank_key(plan, config)
        if best is None or key < best[0]:
            best = (key, plan, result)
    if best is None:
        assert failure is not None
        raise failure
    _, plan, result = best
    others = [p for p in [result.best, *result.alternatives] if p.layout != plan.layout]
    alternatives = [
        p.model_copy(update={"why_not": why_not(p, plan)}) for p in others[: config.top - 1]
    ]
    return SearchResult(
        best=plan,
        alternatives=alternatives,
        search_time_s=time.perf_counter() - start,
        num_candidates=result.num_candidates,
        num_feasible=result.num_feasible,
        rejections=result.rejections,
        solver=result.solver,
        subproblems=solves,
    )


def _search_level(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    availability: Availability,
    speed: float,
    count: int,
    config: SolverConfig,
    kwargs: dict[str, object],
    solves: list[SubproblemInfo],
) -> tuple[SearchResult, ClusterSpec, Plan, Placement]:
    """Search at one speed level with at most ``count`` GPUs and place its plans, best first,
    until one keeps its blocks inside domains; then once more with the count the best plan's
    blocks fit; else the best plan as placed (groups straddling, priced)."""
    slowed = _slowed(cluster, speed)
    first: tuple[SearchResult, ClusterSpec, Plan, Placement] | None = None
    for _ in range(2):
        result = engine.search(
            model, slowed, workload, config=config, gpus=count,
            extra_counts=near_counts(cluster, count), **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip
        for plan in [result.best, *result.alternatives]:
            placement, block = _place(availability, plan, config)
            if placement.info is not None:
                solves.append(placement.info)
            nominal = sub_cluster_of(cluster, plan.num_gpus)
            found = (result, nominal, plan, placement)
            if placement.whole_blocks:
                return found
            first = first or found
        block = block_size(result.best.placement, availability.fabric.per_domain)
        fits = _block_capacity(availability, block, speed)
        lower = largest_legal_count(cluster, min(count, fits)) if fits else None
        if lower is None or lower >= count:
            break
        count = lower
    assert first is not None
    return first


NEAR_FACTORS = tuple(range(3, 32, 2))
"""Odd factors m of the extra counts m x 2^a x unit a cluster state's search weighs: a layout's
degrees multiply to its GPU count and a power-of-two batch makes DP a power of two, so with a
few nodes missing the best count is often 15 x 64 or 31 x 32, not the next rung of the
1-1.5-2-3 ladder (960 or 992 of 1,016 free, not 768: 405B's holes cost fell from +37% to +13%
on hgx_h100x1024 with one node down)."""


NEAR_WINDOW = 7 / 8
"""Extra counts are weighed down to this share of the cap (the ladder covers the rest)."""


def near_counts(cluster: ClusterSpec, cap: int) -> tuple[int, ...]:
    """For each odd m in NEAR_FACTORS, the largest m x 2^a x unit at most ``cap``, when it is
    at least NEAR_WINDOW of it.

    >>> from planner.catalog import load_cluster
    >>> sorted(near_counts(load_cluster("hgx_h100x1024"), 1016))[-3:]
    [928, 960, 992]
    """
    unit = cluster.system.unit_size
    out = set()
    for m in NEAR_FACTORS:
        n = m * unit
        if n > cap:
            continue
        while 2 * n <= cap:
            n *= 2
        if n >= NEAR_WINDOW * cap:
            out.add(n)
    return tuple(sorted(out))


def _block_capacity(availability: Availability, block: int, speed: float) -> int:
    """Accelerators that whole blocks of ``block`` can occupy on nodes at least ``speed`` fast:
    per domain, its free accelerators rounded down to whole blocks."""
    ok = availability.node_speed >= speed
    per_domain = np.bincount(availability.node_domain, weights=availability.free_per_node * ok)
    return int(sum(int(g) // block * block for g in per_domain))


def plan_positions(
    plan: Plan,
    cluster: ClusterSpec,
    state: ClusterState | None = None,
    config: SolverConfig | None = None,
) -> np.ndarray:
    """Rank -> accelerator position of ``plan`` on the physical ``cluster``: the CP-SAT
    placement under ``state`` (the one the search or estimate found, else solved again), or
    without a state the regular sub-cluster the plan was scored on, domain by domain (a
    128-GPU plan on two 72-GPU racks uses 64 of each, as it was scored)."""
    n = plan.num_gpus
    if state is None:
        if n == cluster.num_accelerators:
            return np.arange(n)
        sub = sub_cluster_of(cluster, n)
        return nominal_positions(fabric_of(cluster), n, sub.accelerators_per_domain)
    cached = _POSITIONS.get(_key(cluster, plan.layout, state))
    if cached is not None:
        return cached
    availability = apply_state(cluster, state)
    placement, _ = _place(availability, plan, config or SolverConfig())
    _remember(_key(cluster, plan.layout, state), placement.positions)
    return placement.positions


def state_capacity(cluster: ClusterSpec, state: ClusterState, global_batch: int) -> object:
    """``per_replica -> dp``: for a layout given without ``dp``, the largest data-parallel degree
    whose GPUs are a legal size (whole units per domain) within the free accelerators of
    ``state`` and that divides ``global_batch`` (else the largest legal one)."""
    availability = apply_state(cluster, state)
    usable = availability.usable_gpus(unit=cluster.system.unit_size)

    def dp_for(per_replica: int) -> int:
        legal = [
            dp
            for dp in range(max(1, usable // per_replica), 0, -1)
            if largest_legal_count(cluster, dp * per_replica) == dp * per_replica
        ]
        dividing = [dp for dp in legal if global_batch % dp == 0]
        return (dividing or legal or [1])[0]

    return dp_for
