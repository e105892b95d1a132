"""Search and estimate: the entry points that tie candidates, solver, validator and explanations."""

from __future__ import annotations

import time

from planner.catalog.clusters import build_cluster, domain_split
from planner.errors import InfeasibleError, InternalError, SpecError
from planner.search.arguments import check_bounds, check_fix, positive_count, shown
from planner.search.cpsat import LayoutSolver
from planner.search.evaluate import evaluate, fits, score, to_plan
from planner.search.exhaustive import exhaustive_ranking
from planner.search.explain import infeasible_message, no_candidates_message, why_not
from planner.search.rules import check_workload, layout_violations
from planner.search.space import (
    STRUCTURE_FIELDS,
    Candidate,
    CandidateSet,
    SpaceRequest,
    build_candidates,
    memory_detail,
    merge_candidate_sets,
    objective_value,
)
from planner.search.table import to_quanta
from planner.search.validate import validate_plan
from planner.specs.cluster import ClusterSpec
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout
from planner.specs.model import ModelSpec
from planner.specs.result import Plan, SearchResult, SolverInfo
from planner.specs.solver_config import TIME_QUANTUM_S, SolverConfig
from planner.specs.workload import TrainWorkload

DIMENSIONS: tuple[str, ...] = (
    "tp",
    "cp",
    "pp",
    "vpp",
    "dp",
    "ep",
    "etp",
    "mbs",
    "recompute",
    "zero",
    "precision",
)
"""Layout fields the CP-SAT model carries as one-hot dimension variables."""
STRUCTURE: tuple[str, ...] = STRUCTURE_FIELDS
"""Fields that tell runners-up apart (each alternative has different parallel degrees)."""
_RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}
_PRECISION_CODES = {str(f): i for i, f in enumerate(NumberFormat)}


def _row(layout: Layout) -> dict[str, int]:
    row = {d: getattr(layout, d) for d in DIMENSIONS if d not in ("recompute", "precision")}
    row["recompute"] = _RECOMPUTE_CODES[str(layout.recompute)]
    row["precision"] = _PRECISION_CODES[str(layout.precision)]
    return row


def dominant_rows(candidates: list[Candidate], costs: list[int]) -> list[int]:
    """Per structure (parallel degrees, precision, GPU count) the cheapest row, the first on a
    tie, in candidate order: no other row of a structure can be the optimum or a runner-up, since
    runners-up differ in structure (DESIGN.md section 7: prune what is dominated)."""
    best: dict[tuple[object, ...], int] = {}
    for i, c in enumerate(candidates):
        key = (c.layout.num_gpus, *c.structure)
        if key not in best or costs[i] < costs[best[key]]:
            best[key] = i
    return sorted(best.values())


def _rank_cpsat(
    candidates: list[Candidate], costs: list[int], config: SolverConfig
) -> tuple[list[int], SolverInfo]:
    keep = dominant_rows(candidates, costs)
    solver = LayoutSolver(
        [costs[i] for i in keep],
        [_row(candidates[i].layout) for i in keep],
        list(STRUCTURE),
        config,
    )
    first = solver.solve()
    if first.index < 0:
        raise InternalError(f"CP-SAT ended {first.status} on a non-empty candidate set")
    chosen = [first.index]
    while len(chosen) < min(config.top, len({c.structure for c in candidates})):
        solver.exclude_structure(chosen[-1])
        nxt = solver.solve()
        if nxt.index < 0:
            break
        chosen.append(nxt.index)
    chosen = [keep[i] for i in chosen]
    info = SolverInfo(
        name="cp-sat",
        status=first.status,
        objective=first.objective_s,
        best_bound=first.best_bound_s,
        time_quantum_s=TIME_QUANTUM_S,
    )
    return chosen, info


def _rank_exhaustive(
    candidates: list[Candidate], costs: list[int], config: SolverConfig
) -> tuple[list[int], SolverInfo]:
    chosen = exhaustive_ranking(costs, [c.structure for c in candidates], config.top)
    best = costs[chosen[0]] * TIME_QUANTUM_S
    return chosen, SolverInfo(
        name="exhaustive",
        status="OPTIMAL",
        objective=best,
        best_bound=best,
        time_quantum_s=TIME_QUANTUM_S,
    )


def gpu_counts(cluster: ClusterSpec, gpus: int | None, *, fewest: bool) -> list[int]:
    """GPU counts the search may use: the cap (``gpus``, else the cluster's size) and, when
    fewer GPUs can win (``fewest``: a step-time target, or a cost or energy objective, where a
    smaller job spends less per token), the smaller legal sub-clusters on a 1-1.5-2-3-4-6-8
    ladder of scale-up units, so the count itself is a decision. The set depends on the cap's
    value only: ``gpus`` equal to the cluster's size is the same search as no ``gpus``."""
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
    if not fewest:
        return [cap]
    unit = cluster.system.unit_size
    ladder = {unit * m * 2**k for k in range(40) for m in (2, 3) if unit * m * 2**k <= 2 * cap}
    ladder |= {unit, cap}
    return sorted(n for n in ladder if n <= cap and _split(cluster, n) is not None)


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
) -> list[CandidateSet]:
    """One candidate set per GPU count. Pruned searches share their incumbents across counts:
    largest count first for time, cost and energy (more GPUs rarely lose on time, so its plans
    bound the rest); with a step-time target, fewest first, stopping once ``top`` structures
    meet the target (a larger count can never need fewer GPUs)."""
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
) -> SearchResult:
    """Best layout and runners-up of ``model`` on ``cluster`` for ``workload``.

    ``fix`` pins fields, ``bounds`` limits them (--min/--max), ``precisions`` lets the search
    choose the format (--precision auto), ``gpus`` caps the accelerators used (fewer may win on
    cost). Raises InfeasibleError (naming the binding limit) when no layout fits, SpecError on
    bad input.
    """
    start = time.perf_counter()
    config = config or SolverConfig()
    fix, bounds = check_fix(fix), check_bounds(bounds)
    for fmt in precisions or [workload.precision]:
        check_workload(model, cluster, workload.model_copy(update={"precision": fmt}))
    request = SpaceRequest(
        fix=fix,
        bounds=bounds,
        precisions=list(precisions or []),
        objective=config.objective,
        max_step_s=config.target_step_time_s,
    )
    fewest = config.target_step_time_s is not None
    prune = 0 if config.solver == "exhaustive" else config.top
    sets = _candidate_sets(
        model,
        cluster,
        workload,
        request,
        counts=gpu_counts(cluster, gpus, fewest=fewest or config.objective in ("cost", "energy")),
        prune=prune,
        fewest=fewest,
        top=config.top,
    )
    feasible = [c for cs in sets for c in cs.feasible]
    candidates = merge_candidate_sets(sets)
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
        if not candidates.rejections and candidates.rejection_counts.get("target"):
            raise InfeasibleError(
                _target_message(model, cluster, workload, request, gpus, config, candidates)
            )
        raise InfeasibleError(
            infeasible_message(candidates, model=model.name, cluster=cluster.name)
        )
    costs = _objective_costs(feasible, config)
    rank = _rank_exhaustive if config.solver == "exhaustive" else _rank_cpsat
    chosen, info = rank(feasible, costs, config)
    plans = [_plan(model, feasible[i], workload) for i in chosen]
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
        num_feasible=len(feasible),
        rejections=candidates.rejection_counts,
        solver=info,
    )


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
        f"{best.cost.step_time_s:.3g} s per step ({best.cost.step_time_s / target:.1f}x the target)"
    )


def _plan(model: ModelSpec, candidate: Candidate, workload: TrainWorkload) -> Plan:
    """The validated plan of one chosen candidate."""
    workload = workload.model_copy(update={"precision": candidate.layout.precision})
    plan = to_plan(model, candidate.cluster, workload, candidate.layout, candidate.cost)
    validate_plan(plan, model, candidate.cluster, workload)
    return plan


def estimate(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload, layout: Layout
) -> Plan:
    """Score one given layout. SpecError when it breaks a rule; the plan says whether it fits."""
    check_workload(model, cluster, workload)
    if layout.precision != workload.precision:
        layout = layout.model_copy(update={"precision": workload.precision})
    violations = layout_violations(model, cluster, workload, layout)
    if violations:
        raise SpecError("; ".join(detail for _, detail in violations))
    return evaluate(model, cluster, workload, layout)


def not_fitting_message(
    plan: Plan, model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload
) -> str:
    """The one-line reason an estimated layout does not fit."""
    cost = score(model, cluster, workload, plan.layout)
    if fits(cost, cluster):
        return ""
    mem = cost.peak_memory
    return memory_detail(
        plan.layout,
        mem.total,
        mem.weights,
        mem.grads + mem.optimizer,
        mem.activations,
        cluster.accelerator.usable_memory_bytes,
        cluster,
    )
