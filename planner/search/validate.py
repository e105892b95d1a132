"""Solver-independent checks on any plan that leaves the search."""

from __future__ import annotations

import math

from planner.errors import InternalError
from planner.search.evaluate import score
from planner.search.pipeline import plan_split
from planner.search.rules import layout_violations
from planner.specs.cluster import ClusterSpec
from planner.specs.model import ModelSpec
from planner.specs.result import Plan
from planner.specs.workload import TrainWorkload


def plan_problems(
    plan: Plan, model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload
) -> list[str]:
    """Everything wrong with ``plan``: broken rules, memory over capacity, a breakdown that does
    not add up, or a step time the float cost model does not reproduce."""
    problems = [detail for _, detail in layout_violations(model, cluster, workload, plan.layout)]
    if not plan.fits or plan.memory.peak_gib > plan.memory.capacity_gib:
        problems.append(
            f"peak {plan.memory.peak_gib:.1f} GiB exceeds {plan.memory.capacity_gib:.1f} GiB"
        )
    total = sum(plan.breakdown_s.values())
    if not math.isclose(total, plan.step_time_s, rel_tol=1e-9):
        problems.append(f"breakdown sums to {total} s, step time is {plan.step_time_s} s")
    rescored = score(model, cluster, workload, plan.layout, split=plan_split(plan)).step_time_s
    if not math.isclose(rescored, plan.step_time_s, rel_tol=1e-9):
        problems.append(f"re-scored step time {rescored} s differs from {plan.step_time_s} s")
    if any(v < 0 for v in plan.breakdown_s.values()):
        problems.append("a breakdown term is negative")
    problems += _stage_problems(plan, model)
    return problems


def _stage_problems(plan: Plan, model: ModelSpec) -> list[str]:
    """The pipeline stages must be pp x vpp chunks in layer order covering every layer once,
    with no more recomputed layers than a chunk holds."""
    stages = plan.pipeline_stages
    if not stages:
        return []
    layout, out = plan.layout, []
    if len(stages) != layout.pp * layout.vpp:
        out.append(f"{len(stages)} pipeline stages for pp x vpp = {layout.pp * layout.vpp}")
    first = 0
    for s in stages:
        if s.first_layer != first or s.rank != s.stage % layout.pp:
            out.append(f"pipeline stage {s.stage} starts at layer {s.first_layer}, not {first}")
        if s.recompute_layers > s.num_layers:
            out.append(f"pipeline stage {s.stage} recomputes more layers than it holds")
        first += s.num_layers
    if first != model.num_layers:
        out.append(f"pipeline stages hold {first} layers, the model has {model.num_layers}")
    return out


def validate_plan(
    plan: Plan, model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload
) -> None:
    """Raise InternalError when :func:`plan_problems` finds anything."""
    problems = plan_problems(plan, model, cluster, workload)
    if problems:
        raise InternalError(f"plan {plan.layout.short()} failed validation: {'; '.join(problems)}")
