"""Markdown and terminal text for migrations and what-if sweeps: pure functions of the result
models (MigrateResult, WhatIfResult) -> text. The helpers here (labels, summary sentence, knob
effects) are shared with the HTML report so that both say the same thing."""

from __future__ import annotations

from collections import Counter, defaultdict

from planner.report.quote import markdown_cell, markdown_text, terminal_lines
from planner.report.width import COLUMNS
from planner.specs.result import Plan, placement_label, shared_device_noun
from planner.specs.scenarios import (
    Bottleneck,
    Economics,
    KnobValue,
    MigrateResult,
    Scenario,
    WhatIfResult,
)
from planner.units import format_seconds

TERM_ORDER: tuple[str, ...] = (
    "compute",
    "tp_comm",
    "cp_comm",
    "ep_comm",
    "moe_sync",
    "offload",
    "pp_bubble",
    "pp_comm",
    "dp_comm",
    "optimizer",
    "step_sync",
)
TERM_LABELS: dict[str, str] = {
    "compute": "compute",
    "tp_comm": "TP comm",
    "cp_comm": "CP comm",
    "ep_comm": "EP all-to-all",
    "moe_sync": "MoE host sync",
    "offload": "activation offload",
    "pp_bubble": "PP bubble",
    "pp_comm": "PP sends",
    "dp_comm": "DP comm",
    "optimizer": "optimizer",
    "step_sync": "per-step host overhead",
}
DEGREE_COLUMNS: tuple[str, ...] = ("TP", "PP", "VPP", "DP", "CP", "EP", "mbs", "recompute", "ZeRO")


def knob_text(value: KnobValue) -> str:
    """A knob value as a user types it.

    >>> knob_text(400.0), knob_text(True), knob_text("fp8")
    ('400', 'true', 'fp8')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def scenario_label(scenario: Scenario) -> str:
    """``nic_gbps=400, oversubscription=2``."""
    return ", ".join(f"{k}={knob_text(v)}" for k, v in scenario.vary.items())


def degree_row(plan: Plan) -> list[int | str]:
    """The layout fields of DEGREE_COLUMNS, in order."""
    lay = plan.layout
    return [lay.tp, lay.pp, lay.vpp, lay.dp, lay.cp, lay.ep, lay.mbs, str(lay.recompute), lay.zero]


def money(usd: float) -> str:
    """Dollars with sensible precision.

    >>> money(3.456), money(12_345_678)
    ('$3.46', '$12,345,678')
    """
    return f"${usd:,.2f}" if usd < 1000 else f"${usd:,.0f}"


def bottleneck_text(neck: Bottleneck | None) -> str:
    """``DP comm 575 ms over 25.0 GB/s per rank, bound by ...`` or 'none exposed'."""
    if neck is None:
        return "no communication exposed"
    return (
        f"{TERM_LABELS.get(neck.term, neck.term)} {format_seconds(neck.exposed_s)} over {neck.link}"
    )


def _ok(result: WhatIfResult) -> list[Scenario]:
    return [s for s in result.scenarios if s.plan is not None]


def knob_effects(result: WhatIfResult) -> dict[str, float]:
    """Per knob: the largest relative step-time spread it causes with the other knobs held
    fixed (0.25 = the slowest value is 25% slower than the fastest)."""
    effects: dict[str, float] = {}
    for knob in result.knobs:
        groups: dict[tuple[tuple[str, str], ...], list[float]] = defaultdict(list)
        for s in _ok(result):
            key = tuple((k, knob_text(v)) for k, v in s.vary.items() if k != knob)
            groups[key].append(s.plan.step_time_s)  # type: ignore[union-attr]
        spreads = [max(t) / min(t) - 1.0 for t in groups.values() if len(t) > 1 and min(t) > 0]
        effects[knob] = max(spreads, default=0.0)
    return effects


def _effect_text(knob: str, spread: float) -> str:
    if spread < 0.005:
        return f"{knob} leaves the step time unchanged (under 0.5%)"
    return f"{knob} moves the step time by up to {100 * spread:.0f}%"


def summary_sentence(result: WhatIfResult) -> str:
    """One paragraph: fastest and slowest scenario, what each knob moves, the usual bottleneck."""
    ok = _ok(result)
    head = f"{len(result.scenarios)} scenarios of {result.model} on {result.cluster}"
    if not ok:
        return f"{head}: no scenario has a feasible plan."
    fast = min(ok, key=lambda s: s.plan.step_time_s)  # type: ignore[union-attr]
    slow = max(ok, key=lambda s: s.plan.step_time_s)  # type: ignore[union-attr]
    fp, sp = fast.plan, slow.plan
    assert fp is not None and sp is not None and fast.economics is not None
    text = (
        f"{head}: the fastest is {scenario_label(fast)}, {fp.layout_text()} at "
        f"{format_seconds(fp.step_time_s)} per step ({fp.tokens_per_s:,.0f} tokens/s, "
        f"{money(fast.economics.usd_per_million_tokens)} per million tokens)"
    )
    if slow is not fast:
        text += (
            f"; the slowest is {scenario_label(slow)} at {format_seconds(sp.step_time_s)} "
            f"({sp.step_time_s / fp.step_time_s:.2f}x)"
        )
    effects = sorted(knob_effects(result).items(), key=lambda kv: -kv[1])
    text += ". " + "; ".join(_effect_text(knob, spread) for knob, spread in effects)
    necks = Counter(TERM_LABELS.get(s.bottleneck.term, "") for s in ok if s.bottleneck)
    if necks:
        name, count = necks.most_common(1)[0]
        text += f". The slowest exposed link is most often {name} ({count} of {len(ok)})"
    missing = len(result.scenarios) - len(ok)
    if missing:
        text += f". {missing} scenario(s) have no feasible plan"
    return text + "."


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A GFM table; every cell quoted (:func:`markdown_cell`): labels hold user-given values."""
    lines = [
        "| " + " | ".join(markdown_cell(h) for h in header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += [
        "| " + " | ".join(markdown_cell(cell.replace("|", "/")) for cell in row) + " |"
        for row in rows
    ]
    return lines


def scenario_rows(result: WhatIfResult) -> list[list[str]]:
    """Scenario table rows: label, layout, step time, tokens/s, $/M tokens, J/token, bottleneck."""
    rows = []
    for s in result.scenarios:
        if s.plan is None or s.economics is None:
            rows.append([scenario_label(s), f"{s.status}: {s.error or ''}", "", "", "", "", ""])
            continue
        rows.append(
            [
                scenario_label(s),
                s.plan.layout_text(),
                format_seconds(s.plan.step_time_s),
                f"{s.plan.tokens_per_s:,.0f}",
                money(s.economics.usd_per_million_tokens),
                f"{s.economics.joules_per_token:.3g}",
                bottleneck_text(s.bottleneck),
            ]
        )
    return rows


SCENARIO_HEADER = ["scenario", "layout", "step", "tokens/s", "$/M tokens", "J/token", "bottleneck"]

DETAIL_HEADER = [
    "layout", "step", "tokens/s", "$/M tokens", "J/token", "memory GiB", "MFU", "bottleneck",
]  # fmt: skip
"""The report tables' columns after the scenario: step with its ± band, peak / usable memory
per GPU, MFU (of the running format's peak when not bf16)."""


def step_with_band(plan: Plan) -> str:
    """'5.35 s ±14%' (no band when the plan has none)."""
    band = "" if plan.uncertainty_pct is None else f" ±{plan.uncertainty_pct:.0f}%"
    return f"{format_seconds(plan.step_time_s)}{band}"


def short_mfu(plan: Plan) -> str:
    """'48.8%' over the BF16 peak for bf16, '42.7% of fp8' over the running format's peak."""
    fmt = str(plan.layout.precision)
    if plan.mfu_precision_peak is None or fmt == "bf16":
        return f"{100 * plan.mfu:.1f}%"
    return f"{100 * plan.mfu_precision_peak:.1f}% of {fmt}"


def memory_cell(plan: Plan) -> str:
    """Peak / usable GiB per GPU."""
    return f"{plan.memory.peak_gib:.1f} / {plan.memory.capacity_gib:.1f}"


def detail_cells(scenario: Scenario) -> list[str]:
    """The DETAIL_HEADER cells of a scenario (its status and reason when it has no plan)."""
    if scenario.plan is None or scenario.economics is None:
        return [f"{scenario.status}: {scenario.error or ''}", *[""] * (len(DETAIL_HEADER) - 1)]
    p = scenario.plan
    return [
        p.layout_text(),
        step_with_band(p),
        f"{p.tokens_per_s:,.0f}",
        money(scenario.economics.usd_per_million_tokens),
        f"{scenario.economics.joules_per_token:.3g}",
        memory_cell(p),
        short_mfu(p),
        short_bottleneck(scenario.bottleneck),
    ]


def runner_rows(scenario: Scenario) -> list[list[str]]:
    """The scenario's best layout and runners-up: rank, layout, step, $/M tokens, why not."""
    if scenario.plan is None:
        return []
    plans = [scenario.plan, *scenario.alternatives]
    return [
        [str(rank), p.layout_text(), step_with_band(p), money(p.usd_per_million_tokens),
         p.why_not or "the best"]
        for rank, p in enumerate(plans, start=1)
    ]  # fmt: skip


RUNNER_HEADER = ["#", "layout", "step", "$/M tokens", "why not"]


def made_by(result: WhatIfResult) -> str:
    """'Made by `layout whatif ...` (layout 0.1.0, 2026-12-02 01:25:22 UTC)'."""
    command = result.command or "planner.whatif(...) (Python API)"
    version = f"layout {result.version}" if result.version else "layout"
    when = result.created.replace("T", " ").replace("+00:00", " UTC")
    return f"{command} ({version}{', ' + when if when else ''})"


def seconds_or_dash(seconds: float) -> str:
    return format_seconds(seconds) if seconds > 0 else "-"


def breakdown_rows(result: WhatIfResult) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the exposed time per term; terms that are zero everywhere are left out."""
    terms = [
        t for t in TERM_ORDER if any(s.plan and s.plan.breakdown_s.get(t) for s in result.scenarios)
    ]
    rows = [
        [scenario_label(s)]
        + [seconds_or_dash(s.plan.breakdown_s.get(t, 0.0)) if s.plan else "" for t in terms]
        for s in result.scenarios
    ]
    return ["scenario", *(TERM_LABELS[t] for t in terms)], rows


def run_rows(result: WhatIfResult) -> list[list[str]]:
    """Time-to-train rows (empty when no token or step count was given)."""
    rows = []
    for s in result.scenarios:
        run = s.economics.run if s.economics else None
        if run is not None:
            rows.append(
                [
                    scenario_label(s),
                    f"{run.steps:,}",
                    f"{run.wall_clock_days:,.1f}",
                    f"{run.gpu_hours:,.0f}",
                    money(run.cost_usd),
                    f"{run.energy_MWh:,.0f}",
                ]
            )
    return rows


def hours_column(noun: str) -> str:
    """The time-to-train hours column in the plans' word for one accelerator: 'GPU-hours',
    'chip-hours'."""
    return f"{noun}-hours"


def run_header(noun: str) -> list[str]:
    """The time-to-train columns, the hours in ``noun``-hours (:func:`whatif_noun`).

    >>> run_header("chip")[3]
    'chip-hours'
    """
    return ["scenario", "steps", "days", hours_column(noun), "cost", "MWh at TDP"]


def whatif_noun(result: WhatIfResult) -> str:
    """One accelerator in words for a what-if report (:func:`shared_device_noun` of its plans)."""
    return shared_device_noun(s.plan for s in result.scenarios if s.plan is not None)


def whatif_markdown(result: WhatIfResult) -> str:
    """The what-if report in Markdown (for a pull request): the same content as the HTML."""
    wl = result.workload
    context = (
        f"Base cluster: {result.cluster_description}. Workload: seq-len {wl.seq_len}, global batch "
        f"{wl.global_batch}, {wl.precision}. Cost at the catalog price per "
        f"{whatif_noun(result)}-hour; energy with "
        "every accelerator at TDP (an upper bound)."
    )
    ok = [s for s in result.scenarios if s.plan is not None]
    fastest = min(ok, key=lambda s: s.plan.step_time_s) if ok else None  # type: ignore[union-attr]
    runners = (
        ["", f"## Runners-up in {markdown_text(scenario_label(fastest))}", "",
         *_table(RUNNER_HEADER, runner_rows(fastest))]
        if fastest is not None and fastest.alternatives else []
    )  # fmt: skip
    lines = [
        f"# What-if: {markdown_text(result.model)} on {markdown_text(result.cluster)}",
        "",
        f"Made by {markdown_text(made_by(result))}; {len(result.scenarios)} scenarios planned "
        f"in {result.elapsed_s:.1f} s.",
        "",
        markdown_text(summary_sentence(result)),
        "",
        markdown_text(context),
        "",
        "## Scenarios",
        "",
        *_table(
            ["scenario", *DETAIL_HEADER],
            [[scenario_label(s), *detail_cells(s)] for s in result.scenarios],
        ),
        *runners,
        "",
        "## Where the time goes (exposed seconds per step)",
        "",
        *_table(*breakdown_rows(result)),
        "",
        "## Layout per scenario",
        "",
        *_table(
            ["scenario", *DEGREE_COLUMNS],
            [
                [scenario_label(s)] + [str(v) for v in degree_row(s.plan)]
                if s.plan
                else [scenario_label(s)] + [""] * len(DEGREE_COLUMNS)
                for s in result.scenarios
            ],
        ),
    ]
    runs = run_rows(result)
    if runs:
        lines += ["", "## Time to train", "", *_table(run_header(whatif_noun(result)), runs)]
    return "\n".join(lines) + "\n"


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header), fmt.format(*("-" * w for w in widths))] + [
        fmt.format(*r) for r in rows
    ]


def short_bottleneck(neck: Bottleneck | None) -> str:
    """The bottleneck for a terminal table: dimension, exposed time and the tier it runs on
    ('DP 58 ms scale-out'); the link in words is in the reports and the JSON."""
    if neck is None:
        return "none exposed"
    tier = "scale-up" if neck.within_domain else "scale-out"
    return f"{placement_label(neck.dimension)} {format_seconds(neck.exposed_s)} {tier}"


def terminal_scenario_table(result: WhatIfResult) -> tuple[str, list[str]]:
    """The scenario table for a terminal: one column per knob (its value), the layout without
    the words every scenario shares (returned, to print once), step time, tokens/s, $ per
    million tokens and the bottleneck's dimension, time and tier; J/token and the link in words
    are in ``--report`` and ``--json``."""
    words = [s.plan.layout.short().split() for s in result.scenarios if s.plan is not None]
    tails = [w[-3:] for w in words]  # recompute, ZeRO, precision
    shared = tails[0] if tails and all(t == tails[0] for t in tails) else []
    mbs = [w[-4] for w in words]
    if shared and all(m == mbs[0] for m in mbs):
        shared = [mbs[0], *shared]
    rows = []
    for s in result.scenarios:
        knobs = [knob_text(s.vary[k]) for k in result.knobs]
        if s.plan is None or s.economics is None:
            rows.append([*knobs, f"{s.status}: {s.error or ''}", "", "", "", ""])
            continue
        layout = s.plan.layout.short().split()
        kept = layout[: len(layout) - len(shared)] if shared else layout
        rows.append(
            [
                *knobs,
                " ".join(kept),
                format_seconds(s.plan.step_time_s),
                f"{s.plan.tokens_per_s:,.0f}",
                money(s.economics.usd_per_million_tokens),
                short_bottleneck(s.bottleneck),
            ]
        )
    header = [*result.knobs, "layout", "step", "tokens/s", "$/M tok", "bottleneck"]
    note = f"every layout: {' '.join(shared)}" if shared else ""
    return note, _aligned(header, rows)


def whatif_text(result: WhatIfResult) -> str:
    """The terminal answer of ``layout whatif`` (prose wrapped at 100 columns; the table as
    :func:`terminal_scenario_table` writes it)."""
    prose = [f"cluster : {result.cluster_description}", "", summary_sentence(result), ""]
    note, table = terminal_scenario_table(result)
    if note:
        prose.append(note)
    runs = run_rows(result)
    if runs:
        table += ["", "time to train:", *_aligned(run_header(whatif_noun(result)), runs)]
    return (
        terminal_lines(prose, width=COLUMNS)
        + "\n"
        + terminal_lines(line.rstrip() for line in table)
    )


def economics_rows(
    before: Economics, after: Economics, noun: str = "GPU"
) -> list[tuple[str, str, str]]:
    rows = [
        (
            f"$ / {noun}-hour",
            money(before.price_per_gpu_hour_usd),
            money(after.price_per_gpu_hour_usd),
        ),
        ("$ / M tokens", money(before.usd_per_million_tokens), money(after.usd_per_million_tokens)),
        ("J / token at TDP", f"{before.joules_per_token:.3g}", f"{after.joules_per_token:.3g}"),
    ]
    if before.run is not None and after.run is not None:
        b, a = before.run, after.run
        rows += [
            ("time to train", f"{b.wall_clock_days:,.1f} days", f"{a.wall_clock_days:,.1f} days"),
            (hours_column(noun), f"{b.gpu_hours:,.0f}", f"{a.gpu_hours:,.0f}"),
            ("cost", money(b.cost_usd), money(a.cost_usd)),
            ("energy at TDP", f"{b.energy_MWh:,.1f} MWh", f"{a.energy_MWh:,.1f} MWh"),
        ]
    return rows


def mfu_cell(plan: Plan) -> str:
    """MFU for a table cell: over the BF16 peak for bf16; else over the running format's peak,
    the BF16-convention figure labelled ('26.1% of nvfp4 peak (BF16-eq. 104.3%)')."""
    fmt = str(plan.layout.precision)
    if plan.mfu_precision_peak is None or fmt == "bf16":
        return f"{100 * plan.mfu:.1f}%"
    return f"{100 * plan.mfu_precision_peak:.1f}% of {fmt} peak (BF16-eq. {100 * plan.mfu:.1f}%)"


def framework_row(before: Plan, after: Plan) -> list[tuple[str, str, str]]:
    """A 'framework' row when the two sides run different ones (no framework named: each
    side's accelerator picked its default, MaxText on a TPU), else none."""
    if before.workload is None or after.workload is None:
        return []
    if before.workload.framework == after.workload.framework:
        return []
    return [("framework", before.workload.framework, after.workload.framework)]


def migrate_rows(
    result: MigrateResult, *, memory_label: str = "memory peak", job_rate: bool = False
) -> list[tuple[str, str, str]]:
    """The two plans side by side as (what, from, to) rows: layout, framework (when they
    differ), step, tokens/s per accelerator (and of the whole job with ``job_rate``), MFU,
    peak / usable memory under ``memory_label``, then the economics."""
    before, after = result.from_plan, result.to_plan
    noun = shared_device_noun((before, after))
    mem = lambda p: f"{p.memory.peak_gib:.1f} / {p.memory.capacity_gib:.1f} GiB"  # noqa: E731
    job = [("tokens/s", f"{before.tokens_per_s:,.0f}", f"{after.tokens_per_s:,.0f}")]
    return [
        ("layout", before.layout_text(), after.layout_text()),
        *framework_row(before, after),
        ("step", format_seconds(before.step_time_s), format_seconds(after.step_time_s)),
        (
            f"tokens/s/{noun}",
            f"{before.tokens_per_s_per_gpu:,.0f}",
            f"{after.tokens_per_s_per_gpu:,.0f}",
        ),
        *(job if job_rate else []),
        ("MFU", mfu_cell(before), mfu_cell(after)),
        (memory_label, mem(before), mem(after)),
        *economics_rows(result.from_economics, result.to_economics, noun),
    ]


def migrate_text(result: MigrateResult) -> str:
    """The terminal answer of ``layout migrate``: both plans side by side, the changes, the port."""
    before, after = result.from_plan, result.to_plan
    rows = migrate_rows(result)
    width = max(len(r[1]) for r in rows) + 2
    label = max(17, max(len(r[0]) for r in rows) + 1)  # 'tokens/s/accelerator' is 20 wide
    lines = [
        f"model   : {result.model} (seq-len {result.workload.seq_len}, global batch "
        f"{result.workload.global_batch}, {result.workload.precision})",
        f"from    : {before.cluster_description}",
        f"to      : {after.cluster_description}",
        "",
        f"{'':<{label}}{'from':<{width}}to",
        *(f"{name:<{label}}{a:<{width}}{b}" for name, a, b in rows),
        "",
        f"speed-up: {result.speedup:.2f}x tokens/s",
        "changes :" if result.changes else "changes : none (the same layout is best on both)",
        *(f"  {c.reason}" for c in result.changes),
        f"old layout on new: {result.old_layout_note}",
    ]
    lines += [f"warning : {w}" for w in dict.fromkeys(before.warnings + after.warnings)]
    return terminal_lines(lines, width=COLUMNS)
