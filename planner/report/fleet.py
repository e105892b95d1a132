"""Terminal rendering of ``layout pack``: a pure function of the PackResult."""

from __future__ import annotations

from planner.report.quote import terminal_lines
from planner.report.text import plural, subproblem_text
from planner.specs.fleet import PackedJob, PackResult
from planner.specs.result import Plan, common_noun
from planner.units import format_seconds


def _where(job: PackedJob) -> str:
    """The domains a job holds, compactly: ``d0:64 d1:64``."""
    shares = [f"d{s.domain}:{s.gpus}" for s in job.allocation[:6]]
    more = f" (+{len(job.allocation) - 6} domains)" if len(job.allocation) > 6 else ""
    return " ".join(shares) + more


def _job_line(job: PackedJob) -> str:
    plan = job.plan
    layout = plan.layout.short()
    if isinstance(plan, Plan):
        rate = f"{job.tokens_per_s:,.0f} tok/s, step {format_seconds(plan.step_time_s)}"
    else:
        rate = f"{job.tokens_per_s:,.0f} output tok/s"
    goal = f"target {job.target.describe()}" if job.target is not None else f"weight {job.weight:g}"
    return (
        f"  {job.name:<14} {job.mode:<5} {job.model:<18} {job.partition:<16} "
        f"{plural(job.num_gpus, plan.device_noun):>11}  {layout:<36} {rate} "
        f"({100 * job.share_of_best:.0f}% of its best; {goal})  [{_where(job)}]"
    )


def pack_text(result: PackResult) -> str:
    """The full terminal answer of ``layout pack``."""
    lines = [f"cluster : {result.cluster}"]
    used = [part for part in result.partitions if part.gpus_used] or result.partitions
    pool_noun = common_noun(part.device_noun for part in used)
    for part in result.partitions:
        lines.append(
            f"  {part.name}: {part.gpus_used:,} of {part.gpus_free:,} free {part.device_noun}s used "
            f"({part.gpus_total:,} in all): {part.cluster_description}"
        )
    lines.append(f"objective: {result.objective} = {result.objective_value:.4g}")
    lines.append("jobs:")
    lines += [_job_line(job) for job in result.jobs]
    lines.append(
        f"pack    : {plural(result.gpus_used, pool_noun)} used; {result.rows_considered} candidate rows "
        f"in {result.search_time_s:.2f} s"
    )
    lines += [f"cp-sat  : {subproblem_text(info)}" for info in result.subproblems]
    return terminal_lines(lines)
