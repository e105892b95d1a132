"""Terminal rendering of plans and search results: pure functions of result models -> text."""

from __future__ import annotations

from planner.report.markdown import TERM_ORDER
from planner.report.quote import terminal_lines, terminal_text
from planner.report.width import COLUMNS
from planner.search.explain import rejection_histogram
from planner.specs.cluster_state import SubproblemInfo
from planner.specs.result import Plan, SearchResult, SplitSweepInfo, placement_label
from planner.units import format_seconds, run_length


def plural(count: float, noun: str, many: str | None = None) -> str:
    """``count noun`` with the noun in agreement: 1 GPU, 8 GPUs, 1 replica, 2.5 replicas.

    >>> plural(1, "GPU"), plural(8, "GPU"), plural(2, "sequence"), plural(1, "replica")
    ('1 GPU', '8 GPUs', '2 sequences', '1 replica')
    """
    text = f"{count:,}" if isinstance(count, int) else f"{count:,.3g}"
    return f"{text} {noun if count == 1 else (many or noun + 's')}"


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
    """'8,192-token sequences x 512 = 4,194,304 tokens per step (4.19M), framework megatron',
    from the plan's workload (or its tokens per step alone for a plan saved before schema
    1.3): the framework profile too, which a search without ``--framework`` picks by the
    accelerator (MaxText on a TPU)."""
    tokens = plan.tokens_per_s * plan.step_time_s
    if plan.workload is None:
        return f"{tokens:,.0f} tokens per step"
    w = plan.workload
    return (
        f"{w.seq_len:,}-token sequences x {w.global_batch:,} = {w.tokens_per_step:,} tokens "
        f"per step ({w.tokens_per_step / 1e6:.3g}M), framework {w.framework}"
    )


def economics_text(plan: Plan) -> str:
    """$ per million tokens and energy per token (J, and kWh per million tokens)."""
    kwh = plan.joules_per_token * 1e6 / 3.6e6
    per_gpu = plan.tokens_per_s_per_gpu  # price and power per GPU, back from the per-token figures
    price = plan.usd_per_million_tokens / 1e6 * per_gpu * 3600.0
    watts = plan.joules_per_token * per_gpu
    noun = plan.device_noun
    return (
        f"${plan.usd_per_million_tokens:.3g} per million tokens (${price:.3g} per {noun}-hour); "
        f"{plan.joules_per_token:.3g} J per token at {watts:,.0f} W per {noun} "
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
    noun = plan.device_noun
    lines = [
        f"cluster : {plan.cluster_description}",
        f"model   : {plan.model}",
        f"workload: {workload_text(plan)}",
        f"layout  : {plan.layout_text()}  ({plural(plan.num_gpus, noun)})",
        f"step    : {format_seconds(plan.step_time_s)}{_band(plan)}"
        f"   tokens/s/{noun} {plan.tokens_per_s_per_gpu:,.0f}"
        f"   model TFLOP/s/{noun} {plan.model_tflops_per_gpu:,.0f}   {mfu_text(plan)}",
        f"cost    : {economics_text(plan)}",
        f"memory  : {mem.peak_gib:.1f} / {mem.capacity_gib:.1f} GiB usable "
        f"(stage {mem.binding_stage}: weights {mem.weights_gib:.1f}, grads {mem.grads_gib:.1f}, "
        f"optimizer {mem.optimizer_gib:.1f}, activations {mem.activations_gib:.1f}"
        + (
            f"; the optimizer step's fp32 gradient copy {mem.optimizer_step_gib:.1f} once they "
            "are freed"
            if mem.optimizer_step_gib > mem.activations_gib
            else ""
        )
        + ")"
        + ("" if plan.fits else "  DOES NOT FIT"),
        "time per step (exposed):",
    ]
    total = plan.step_time_s or 1.0
    for key in TERM_ORDER:
        value = plan.breakdown_s.get(key, 0.0)
        if value > 0:
            lines.append(breakdown_line(key, value, total))
    lines += pipeline_lines(plan)
    lines.append("placement:")
    shown = {placement_label(d): e for d, e in plan.placement.items() if e.size > 1}
    width = max([3, *(len(label) for label in shown)])
    for label, entry in shown.items():
        where = "inside one domain" if entry.within_domain else "across domains"
        lines.append(
            f"  {label:<{width}} {entry.size:>5} x stride {entry.stride:<5} {where}: {entry.link}"
        )
    lines += state_lines(plan)
    lines += [f"warning : {w}" for w in plan.warnings]
    return [terminal_text(line) for line in lines]  # names come from user files: one line each


def state_lines(plan: Plan) -> list[str]:
    """What a cluster state left, where the job went, and what the holes cost (none without a
    state)."""
    report = plan.cluster_state
    if report is None:
        return []
    slow = ", ".join(f"{k} x{v:g}" for k, v in list(report.slow_nodes.items())[:6])
    more = " ..." if len(report.slow_nodes) > 6 else ""
    noun = plan.device_noun
    lines = [
        f"state   : {report.state}: {report.gpus_free:,} of "
        f"{plural(report.gpus_total, noun)} free "
        f"({report.gpus_down:,} down, {report.gpus_taken:,} taken)"
        + (f"; slow: {slow}{more}" if slow else ""),
        f"placed  : {plural(report.gpus_used, noun)} on {plural(report.nodes_used, 'node')} in "
        f"{plural(report.domains_used, 'domain')}; slowest node x{report.speed_factor:g}"
        + (f" ({', '.join(report.slow_nodes_used[:4])})" if report.slow_nodes_used else "")
        + "; groups across domains: "
        + ", ".join(f"{k.upper()} {v}" for k, v in report.groups_split.items() if v or k == "tp"),
        f"holes   : {format_seconds(report.step_time_s)} per step vs "
        f"{format_seconds(report.step_time_s_healthy)} on the healthy cluster "
        f"({report.holes_cost_pct:+.1f}%)",
    ]
    default = report.default_order
    if default is not None:
        split = ", ".join(f"{k.upper()} {v}" for k, v in default.groups_split.items() if v)
        lines.append(
            f"default : first free {noun}s in Megatron order: {format_seconds(default.step_time_s)} "
            f"({100 * (default.step_time_s / report.step_time_s - 1):+.1f}%), slowest node "
            f"x{default.speed_factor:g}" + (f", groups across domains: {split}" if split else "")
        )
    solve = report.placement_solve
    if solve is not None:
        lines.append(f"cp-sat  : {subproblem_text(solve)}")
    return lines


def subproblem_text(info: SubproblemInfo) -> str:
    """One CP-SAT sub-problem in words.

    >>> from planner.specs.cluster_state import SubproblemInfo
    >>> print(subproblem_text(SubproblemInfo(name="placement", variables=8, constraints=12,
    ...     status="OPTIMAL", objective=28, best_bound=28, objective_terms="x",
    ...     solve_time_s=0.001)))
    placement: 8 variables, 12 constraints, OPTIMAL in 0.001 s (objective 28, bound 28)
    """
    return (
        f"{info.name}: {info.variables:,} variables, {info.constraints:,} constraints, "
        f"{info.status} in {info.solve_time_s:.3g} s (objective {info.objective:.6g}, "
        f"bound {info.best_bound:.6g})"
    )


def pipeline_lines(plan: Plan) -> list[str]:
    """How the layers fall on the pipeline stages and, for a CP-SAT split, what it gained over
    the even split (step time and peak memory)."""
    info = plan.pipeline_split
    if info is None or not plan.pipeline_stages:
        return []
    stages = plan.pipeline_stages
    layers = run_length([s.num_layers for s in stages])
    redone = ""
    if str(plan.layout.recompute) == "full":
        redone = "; recomputed " + run_length([s.recompute_layers for s in stages])
    mtp = [s.stage for s in stages if s.mtp_layers]
    where = f"; MTP on stage {mtp[0]}" if mtp else ""
    lines = [f"pipeline: {info.method} split, layers per stage {layers}{redone}{where}"]
    if info.method != "even":
        gain = 100.0 * (1.0 - plan.step_time_s / info.even_step_time_s)
        even = f"{format_seconds(info.even_step_time_s)}" + ("" if info.even_fits else
                                                              " (does not fit)")  # fmt: skip
        lines.append(
            f"          even split {even}, peak {info.even_peak_gib:.1f} GiB -> "
            f"{format_seconds(plan.step_time_s)} ({-gain:+.1f}% step time), peak "
            f"{plan.memory.peak_gib:.1f} GiB"
        )
    return lines


def solver_line(result: SearchResult) -> str:
    """What chose the plans: the sort, and the CP-SAT sub-problems with their sizes."""
    info = result.solver
    solved = [s for s in info.subproblems if s.solved_by == "cp-sat"]
    exact = sum(s.solved_by == "recurrence" for s in info.subproblems)
    counted = sum(s.solved_by == "layer-counts" for s in info.subproblems)
    walked = sum(s.solved_by == "branch-and-bound" for s in info.subproblems)
    bound = len(info.subproblems) - len(solved) - exact - counted - walked
    line = f"{info.name} {info.status}"
    if solved:
        statuses = "/".join(sorted({s.status for s in solved}))
        variables = max(s.num_variables for s in solved)
        line += f"; CP-SAT split {len(solved)} pipeline(s) ({statuses}, <= {variables} variables)"
    if exact:
        line += f"; {exact} split(s) solved exactly by the min-max partition recurrence"
    if counted:
        line += f"; {counted} split(s) solved exactly by layer counts (one kind of layer)"
    if walked:
        line += f"; {walked} split(s) proved optimal by branch and bound (several kinds of layer)"
    if bound:
        line += f"; {bound} split(s) optimal by a lower bound, no solve"
    sweep = info.split_sweep
    if sweep is not None and sweep.finished:
        beat = (  # with a target the best is the fewest GPUs, then the shortest step
            f"meet the target on fewer {result.best.device_noun}s or beat the best"
            if result.objective == "target"
            else "beat the best"
        )
        line += (
            f"; split sweep: {sweep.bounded} layout(s) bounded under any split, {sweep.split} "
            f"split, none left that could {beat}"
        )
    return line


def counts_words(counts: list[int], noun: str = "GPU") -> str:
    """The accelerator counts a search weighed, in words (the ladder is
    ``engine.gpu_counts``'s), ``noun`` the plan's word for one (``Plan.device_noun``).

    >>> counts_words([8, 16, 24, 32, 48, 64])
    'weighed 8, 16, 24, 32, 48 and 64 GPUs (a ladder of whole scale-up units; --gpus N weighs N too)'
    >>> counts_words([64, 128], "chip")[:26]
    'weighed 64 and 128 chips ('
    """
    listed = ", ".join(f"{n:,}" for n in counts[:-1]) + f" and {counts[-1]:,}"
    return f"weighed {listed} {noun}s (a ladder of whole scale-up units; --gpus N weighs N too)"


OBJECTIVE_WORDS = {
    "time": "shortest step time",
    "cost": "lowest $ per token",
    "energy": "lowest energy per token",
    "target": "fewest {noun}s that meet the step-time target, then shortest step",
}
"""How the search line names its ranking, ``{noun}`` the plan's ``device_noun``."""


def search_text(result: SearchResult) -> str:
    """The full terminal answer of ``layout search`` (lines within 100 columns)."""
    objective = result.objective
    noun = result.best.device_noun
    lines = plan_lines(result.best)
    if objective != "time":
        lines.insert(
            3,
            f"ranked  : by {OBJECTIVE_WORDS[objective].format(noun=noun)} "
            f"(best {objective_figure(result.best, objective)})",
        )
        counts = result.solver.gpu_counts
        if len(counts) > 1:
            lines.insert(4, f"counts  : {counts_words(counts, noun)}")
    if result.alternatives:
        unit = OBJECTIVE_UNITS.get(objective)
        lines.append("runners-up:" + (f" (step time, {unit})" if unit else " (step time)"))
        for i, alt in enumerate(result.alternatives, start=2):
            figures = format_seconds(alt.step_time_s)
            if unit:
                figures += f", {objective_figure(alt, objective)}"
            lines.append(f"  {i}. {alt.layout_text()}  {figures}: {alt.why_not}")
    rejected = rejection_histogram(result.rejections)
    lines.append(
        f"search  : {result.num_candidates} layouts, {result.num_feasible} feasible"
        + (f", rejected: {rejected}" if rejected else "")
        + f"; {solver_line(result)} in {result.search_time_s:.2f} s"
        + _gap(
            result.solver.status,
            result.solver.objective,
            result.solver.best_bound,
            result.solver.split_sweep,
            best_gpus=result.best.num_gpus,
            noun=noun,
        )
    )
    if len(result.subproblems) > 1:
        lines += [f"cp-sat  : {subproblem_text(info)}" for info in result.subproblems]
    return terminal_lines(lines, width=COLUMNS)


WORK_LIMIT = " (a limit on CP-SAT's deterministic work: any machine stops them at the same split)"
"""What a split stopped by CP-SAT's time limit means for the next run of the same search: the
limit counts CP-SAT's work, not wall time (:data:`planner.search.solve.cpsat.
DETERMINISTIC_S_PER_LIMIT_S`), so a slower or busier machine ends with the same splits."""


def _gap(
    status: str,
    objective: float,
    bound: float,
    sweep: SplitSweepInfo | None = None,
    best_gpus: int | None = None,
    noun: str = "GPU",
) -> str:
    """' (split sweep ...)' with the optimality gap when the search did not prove its best plan
    the cost model's best: the split sweep (SolverConfig.split_sweep_budget) ran out with
    layouts left whose bound under any split beats it (a bound of 0: some never bounded), or
    CP-SAT's time limit stopped splits whose bound still beats it (``sweep.unproven``).

    >>> _gap("FEASIBLE", 2.0, 1.5)[:73]
    ' (split sweep budget spent: best found 2 s, proven bound 1.5 s, gap 25.0%'
    >>> "nothing below the best plan is ruled out" in _gap("FEASIBLE", 2.0, 0.0)
    True
    >>> sweep = SplitSweepInfo(budget=9, bounded=3, split=2, finished=False, unresolved=0,
    ...                        least_bound_s=1.5, unproven=2)
    >>> _gap("FEASIBLE", 2.0, 1.5, sweep)[:58]
    ' (split sweep: 2 split(s) stopped by the CP-SAT time limit'

    With a step-time target the bound is a step time on ``sweep.least_bound_gpus`` GPUs (the
    plan's ``noun``), fewer than the best plan's ``best_gpus`` here:

    >>> sweep = sweep.model_copy(update={"unproven": 0, "unresolved": 2, "least_bound_gpus": 8})
    >>> _gap("FEASIBLE", 2.0, 3.1, sweep, best_gpus=16)[:86]
    ' (split sweep budget spent: on 8 GPUs a split might still meet the target, bound 3.1 s'
    """
    if status == "OPTIMAL":
        return ""
    more = "; --split-sweep N gives it more)"
    gpus = sweep.least_bound_gpus if sweep is not None else None
    if sweep is not None and gpus is not None and best_gpus is not None and gpus < best_gpus:
        spent = bool(sweep.unresolved or not sweep.unproven)  # the budget, not CP-SAT alone
        why = "split sweep budget spent" if spent else (
            f"split sweep: {sweep.unproven} split(s) stopped by the CP-SAT time limit"
            f"{WORK_LIMIT}"
        )  # fmt: skip
        what = f"bound {bound:.6g} s" if bound > 0 else "some layouts never bounded"
        return f" ({why}: on {gpus:,} {noun}s a split might still meet the target, {what}" + (
            more if spent else ")"
        )
    if bound <= 0:
        return (
            " (split sweep budget spent before every pipelined layout was bounded: nothing "
            "below the best plan is ruled out" + more
        )
    gap = 100.0 * (objective - bound) / objective if objective else 0.0
    figures = f"best found {objective:.6g} s, proven bound {bound:.6g} s, gap {gap:.1f}%"
    if sweep is not None and sweep.unproven:
        stopped = f"{sweep.unproven} split(s) stopped by the CP-SAT time limit{WORK_LIMIT}"
        if sweep.unresolved:
            return f" (split sweep budget spent and {stopped}: {figures}" + more
        return f" (split sweep: {stopped}: {figures})"
    return f" (split sweep budget spent: {figures}" + more


def estimate_text(plan: Plan) -> str:
    """The terminal answer of ``layout estimate`` (lines within 100 columns)."""
    return terminal_lines(plan_lines(plan), width=COLUMNS)
