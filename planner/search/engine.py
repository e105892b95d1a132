"""Search and estimate: the entry points that tie candidates, solver, validator and explanations."""

from __future__ import annotations

import time

from planner.errors import InfeasibleError, InternalError, SpecError
from planner.search.cpsat import LayoutSolver
from planner.search.evaluate import evaluate, fits, score, to_plan
from planner.search.exhaustive import exhaustive_ranking
from planner.search.explain import infeasible_message, why_not
from planner.search.rules import check_workload, layout_violations
from planner.search.space import STRUCTURE_FIELDS, Candidate, build_candidates, memory_detail
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


def _rank_cpsat(
    candidates: list[Candidate], costs: list[int], config: SolverConfig
) -> tuple[list[int], SolverInfo]:
    solver = LayoutSolver(costs, [_row(c.layout) for c in candidates], list(STRUCTURE), config)
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


def search(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    *,
    fix: dict[str, object] | None = None,
    config: SolverConfig | None = None,
) -> SearchResult:
    """Best layout and runners-up of ``model`` on ``cluster`` for ``workload``.

    Raises InfeasibleError (naming the binding limit) when no layout fits, SpecError on bad input.
    """
    start = time.perf_counter()
    config = config or SolverConfig()
    check_workload(model, cluster, workload)
    prune = 0 if config.solver == "exhaustive" else config.top
    candidates = build_candidates(model, cluster, workload, dict(fix or {}), prune_top=prune)
    feasible = candidates.feasible
    if not feasible:
        raise InfeasibleError(
            infeasible_message(candidates, model=model.name, cluster=cluster.name)
        )
    costs = to_quanta([c.cost.step_time_s for c in feasible])
    rank = _rank_exhaustive if config.solver == "exhaustive" else _rank_cpsat
    chosen, info = rank(feasible, costs, config)
    plans = [
        to_plan(model, cluster, workload, feasible[i].layout, feasible[i].cost) for i in chosen
    ]
    for plan in plans:
        validate_plan(plan, model, cluster, workload)
    best = plans[0]
    alternatives = [p.model_copy(update={"why_not": why_not(p, best)}) for p in plans[1:]]
    return SearchResult(
        best=best,
        alternatives=alternatives,
        search_time_s=time.perf_counter() - start,
        num_candidates=candidates.num_enumerated,
        num_feasible=len(feasible),
        rejections=candidates.rejection_counts,
        solver=info,
    )


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
