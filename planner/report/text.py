"""Terminal rendering of plans and search results: pure functions of result models -> text."""

from __future__ import annotations

from planner.report.markdown import TERM_ORDER
from planner.report.quote import terminal_lines, terminal_text
from planner.report.width import COLUMNS
from planner.search.explain import rejection_histogram
from planner.specs.result import Plan, SearchResult
from planner.units import format_seconds


def breakdown_line(term: str, seconds: float, total_s: float) -> str:
    """One row of a time breakdown: term, seconds with a unit, share of the total.

    >>> breakdown_line("compute", 0.5, 1.0)
    '  compute        500 ms   50.0%'
    """
    return f"  {term:<10} {format_seconds(seconds):>10}  {100 * seconds / total_s:5.1f}%"


def band_text(pct: float | None, level: float | None) -> str:
    """The ± band after a prediction, with the share of runs it is meant to hold.

    >>> band_text(12.4, 0.8), band_text(5.0, None), band_text(None, None)
    (' (±12%, 80% band)', ' (±5%)', '')
    """
    if pct is None:
        return ""
    return f" (±{pct:.0f}%" + ("" if level is None else f", {100 * level:.0f}% band") + ")"


def _band(plan: Plan) -> str:
    return band_text(plan.uncertainty_pct, plan.uncertainty_level)


def mfu_text(plan: Plan) -> str:
    """MFU as the plan runs it: over the BF16 dense peak for bf16; for a faster format, over
    that format's peak, with the BF16-convention figure labelled (it can pass 100%).

    >>> import planner
    >>> mfu_text(planner.estimate(model="8B", cluster="hgx_h100x8", layout={"tp": 2}))[:4]
    'MFU '
    """
    fmt = str(plan.layout.precision)
    if plan.mfu_precision_peak is None or fmt == "bf16":
        return f"MFU {100 * plan.mfu:.1f}%"
    why = f": {fmt} GEMMs run faster than BF16's peak" if plan.mfu > 1 else ""
    return (
        f"MFU {100 * plan.mfu_precision_peak:.1f}% of the {fmt} peak "
        f"(BF16-equivalent {100 * plan.mfu:.1f}%{why})"
    )


def workload_text(plan: Plan) -> str:
    """'8,192-token sequences x 512 = 4,194,304 tokens per step (4.19M)', from the plan's
    workload (or its tokens per step alone for a plan saved before schema 1.3)."""
    tokens = plan.tokens_per_s * plan.step_time_s
    if plan.workload is None:
        return f"{tokens:,.0f} tokens per step"
    w = plan.workload
    return (
        f"{w.seq_len:,}-token sequences x {w.global_batch:,} = {w.tokens_per_step:,} tokens "
        f"per step ({w.tokens_per_step / 1e6:.3g}M)"
    )


def economics_text(plan: Plan) -> str:
    """$ per million tokens and energy per token (J, and kWh per million tokens)."""
    kwh = plan.joules_per_token * 1e6 / 3.6e6
    per_gpu = plan.tokens_per_s_per_gpu  # price and power per GPU, back from the per-token figures
    price = plan.usd_per_million_tokens / 1e6 * per_gpu * 3600.0
    watts = plan.joules_per_token * per_gpu
    return (
        f"${plan.usd_per_million_tokens:.3g} per million tokens (${price:.3g} per GPU-hour); "
        f"{plan.joules_per_token:.3g} J per token at {watts:,.0f} W per GPU "
        f"({kwh:.3g} kWh per million tokens)"
    )


OBJECTIVE_UNITS = {"cost": "$/M tokens", "energy": "J/token"}
"""How a runner-up line labels its objective figure."""


def objective_figure(plan: Plan, objective: str) -> str:
    """The objective's figure of ``plan`` in its unit (step time for time and target).

    >>> import planner
    >>> p = planner.estimate(model="8B", cluster="hgx_h100x8", layout={"tp": 2})
    >>> objective_figure(p, "cost").startswith("$"), objective_figure(p, "energy")[-7:]
    (True, 'J/token')
    """
    if objective == "cost":
        return f"${plan.usd_per_million_tokens:.3g}/M tokens"
    if objective == "energy":
        return f"{plan.joules_per_token:.3g} J/token"
    return format_seconds(plan.step_time_s)


def plan_lines(plan: Plan) -> list[str]:
    """The headline, workload, memory and time breakdown of one plan."""
    mem = plan.memory
    lines = [
        f"cluster : {plan.cluster_description}",
        f"model   : {plan.model}",
        f"workload: {workload_text(plan)}",
        f"layout  : {plan.layout.short()}  ({plan.num_gpus} GPUs)",
        f"step    : {format_seconds(plan.step_time_s)}{_band(plan)}"
        f"   tokens/s/GPU {plan.tokens_per_s_per_gpu:,.0f}"
        f"   model TFLOP/s/GPU {plan.model_tflops_per_gpu:,.0f}   {mfu_text(plan)}",
        f"cost    : {economics_text(plan)}",
        f"memory  : {mem.peak_gib:.1f} / {mem.capacity_gib:.1f} GiB usable "
        f"(stage {mem.binding_stage}: weights {mem.weights_gib:.1f}, grads {mem.grads_gib:.1f}, "
        f"optimizer {mem.optimizer_gib:.1f}, activations {mem.activations_gib:.1f})"
        + ("" if plan.fits else "  DOES NOT FIT"),
        "time per step (exposed):",
    ]
    total = plan.step_time_s or 1.0
    for key in TERM_ORDER:
        value = plan.breakdown_s.get(key, 0.0)
        if value > 0:
            lines.append(breakdown_line(key, value, total))
    lines.append("placement:")
    for dim, entry in plan.placement.items():
        if entry.size > 1:
            where = "inside one domain" if entry.within_domain else "across domains"
            lines.append(
                f"  {dim.upper():<3} {entry.size:>5} x stride {entry.stride:<5} {where}: {entry.link}"
            )
    lines += [f"warning : {w}" for w in plan.warnings]
    return [terminal_text(line) for line in lines]  # names come from user files: one line each


OBJECTIVE_WORDS = {
    "time": "shortest step time",
    "cost": "lowest $ per token",
    "energy": "lowest energy per token",
    "target": "fewest GPUs that meet the step-time target, then shortest step",
}


def search_text(result: SearchResult) -> str:
    """The full terminal answer of ``layout search`` (lines within 100 columns)."""
    objective = result.objective
    lines = plan_lines(result.best)
    if objective != "time":
        lines.insert(
            3, f"ranked  : by {OBJECTIVE_WORDS[objective]} (best {objective_figure(result.best, objective)})"
        )
    if result.alternatives:
        unit = OBJECTIVE_UNITS.get(objective)
        lines.append("runners-up:" + (f" (step time, {unit})" if unit else " (step time)"))
        for i, alt in enumerate(result.alternatives, start=2):
            figures = format_seconds(alt.step_time_s)
            if unit:
                figures += f", {objective_figure(alt, objective)}"
            lines.append(f"  {i}. {alt.layout.short()}  {figures}: {alt.why_not}")
    rejected = rejection_histogram(result.rejections)
    lines.append(
        f"search  : {result.num_candidates} layouts, {result.num_feasible} feasible"
        + (f", rejected: {rejected}" if rejected else "")
        + f"; {result.solver.name} {result.solver.status} in {result.search_time_s:.2f} s"
        + _gap(result.solver.status, result.solver.objective, result.solver.best_bound)
    )
    return terminal_lines(lines, width=COLUMNS)


def _gap(status: str, objective: float, bound: float) -> str:
    """' (time limit hit: ...)' with the optimality gap when the solver did not prove optimality.

    >>> _gap("FEASIBLE", 2.0, 1.5)
    ' (time limit hit: best found 2 s, proven bound 1.5 s, gap 25.0%)'
    """
    if status == "OPTIMAL":
        return ""
    gap = 100.0 * (objective - bound) / objective if objective else 0.0
    return f" (time limit hit: best found {objective:.6g} s, proven bound {bound:.6g} s, gap {gap:.1f}%)"


def estimate_text(plan: Plan) -> str:
    """The terminal answer of ``layout estimate`` (lines within 100 columns)."""
    return terminal_lines(plan_lines(plan), width=COLUMNS)
