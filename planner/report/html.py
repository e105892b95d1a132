"""The what-if report as one self-contained HTML page: inline CSS and inline SVG charts, no
scripts, no fonts, images or styles fetched from anywhere. A pure function of a WhatIfResult.

The page a team lead would forward: what was run (command, version, date), the answer in one
paragraph and one line of figures, throughput against cost (the Pareto front, the winner
marked), step time over the two knobs that move it most (small multiples over the others),
one compact table with memory, MFU and the ± band of every scenario, and the winner's
runners-up; the per-scenario charts and tables are collapsed under ``<details>``, so a sweep of
36 scenarios stays a page of about two screens.
"""

from __future__ import annotations

import itertools
from string import Template
from typing import get_args

from planner.report.markdown import (
    DEGREE_COLUMNS,
    DETAIL_HEADER,
    RUNNER_HEADER,
    TERM_LABELS,
    TERM_ORDER,
    breakdown_rows,
    degree_row,
    detail_cells,
    hours_column,
    knob_effects,
    knob_text,
    memory_cell,
    money,
    run_header,
    run_rows,
    runner_rows,
    scenario_label,
    short_mfu,
    summary_sentence,
    whatif_noun,
)
from planner.report.page import html_document
from planner.report.quote import html_text
from planner.report.svg import (
    TERM_COLORS,
    Point,
    bar_chart,
    degree_grid,
    heatmap,
    scatter_chart,
    stacked_bar_chart,
)
from planner.specs.hardware import DeviceNoun
from planner.specs.scenarios import KnobValue, Scenario, WhatIfResult
from planner.units import format_seconds

CSS = """body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 20px auto;
       max-width: 1120px; padding: 0 16px; color: #1f2328; background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 4px 0; }
h2 { font-size: 16px; margin: 22px 0 6px 0; border-bottom: 1px solid #d0d7de; padding-bottom: 3px; }
p.meta { color: #59636e; font-size: 12px; margin: 0 0 10px 0; }
p.meta code { background: #f6f8fa; padding: 1px 4px; border-radius: 3px; font-size: 12px;
              word-break: break-all; }
p.summary { font-size: 14px; line-height: 1.45; background: #f6f8fa; border-left: 4px solid #3b6ea5;
            padding: 8px 12px; margin: 8px 0; }
div.figures { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0; }
div.figure { border: 1px solid #d0d7de; border-radius: 6px; padding: 6px 10px; min-width: 120px; }
div.figure b { display: block; font-size: 17px; }
div.figure span { color: #59636e; font-size: 11px; }
p.note { color: #59636e; font-size: 12px; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0; }
th, td { border: 1px solid #d0d7de; padding: 2px 5px; text-align: left; vertical-align: top; }
th { font-size: 11px; }
th { background: #f6f8fa; }
tr.best td { background: #fff5e6; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
p.caption { color: #59636e; font-size: 12px; margin: 2px 0 6px 0; }
.charts { display: flex; flex-wrap: wrap; gap: 14px; align-items: flex-start; }
svg.chart { max-width: 100%; height: auto; }
pre { background: #f6f8fa; padding: 8px 12px; font-size: 12px; white-space: pre-wrap; }
details { margin: 8px 0; }
summary { cursor: pointer; font-weight: 600; font-size: 14px; }
"""
"""The report's style sheet."""

BODY = Template("""<p class="meta">$meta</p>
<p class="summary">$summary</p>
$figures
<h2>Throughput against cost, and step time over the knobs</h2>
<p class="caption">$caption</p>
<div class="charts">
$pareto
$heatmaps
</div>
<h2>Scenarios</h2>
$scenario_table
$runners_up
<details><summary>Step time and cost per scenario</summary>
<div class="charts">
$step_chart
$cost_chart
</div>
</details>
<details><summary>Where the time goes</summary>
$breakdown_chart
$breakdown_table
</details>
<details><summary>Layout per scenario</summary>
$degree_chart
</details>
<details><summary>Runners-up of every scenario</summary>
$all_runners_up
</details>
$run_section
<p class="note">$context</p>
""")
"""The page under its title (planner.report.page.html_document)."""

CHART_PAIR_WIDTH = 520
"""Width of two charts shown side by side (px)."""
MAX_FACETS = 16
"""Small multiples of the step-time heatmap drawn at most (the table has every scenario)."""
_NUMERIC = {
    "step", "tokens/s", "$/M tokens", "J/token", "memory GiB", "MFU", "steps", "days",
    "cost", "MWh at TDP", "#",
    *(hours_column(noun) for noun in (*get_args(DeviceNoun), "accelerator")),
}  # fmt: skip
_NOWRAP = {"layout", "bottleneck"}


def html_table(header: list[str], rows: list[list[str]], *, best: int | None = None) -> str:
    """A plain HTML table (cells escaped; numeric columns right-aligned; row ``best``
    highlighted)."""
    head = "".join(f"<th>{html_text(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cells = "".join(
            f'<td class="num">{html_text(c)}</td>' if h in _NUMERIC or h in TERM_LABELS.values()
            else f'<td class="nowrap">{html_text(c)}</td>' if h in _NOWRAP and len(c) < 48
            else f"<td>{html_text(c)}</td>"
            for h, c in zip(header, row, strict=True)
        )  # fmt: skip
        css = ' class="best"' if i == best else ""
        body.append(f"<tr{css}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# --- the figures ---------------------------------------------------------------------------------


def _ok(result: WhatIfResult) -> list[Scenario]:
    return [s for s in result.scenarios if s.plan is not None and s.economics is not None]


def fastest(result: WhatIfResult) -> Scenario | None:
    """The winner: the scenario with the shortest step (highest throughput), None if none
    has a plan."""
    ok = _ok(result)
    return min(ok, key=lambda s: s.plan.step_time_s) if ok else None  # type: ignore[union-attr]


def _figures(result: WhatIfResult) -> str:
    """The winner's figures as a row of cards."""
    win = fastest(result)
    if win is None or win.plan is None or win.economics is None:
        return ""
    plan, eco = win.plan, win.economics
    band = "" if plan.uncertainty_pct is None else f"±{plan.uncertainty_pct:.0f}% (80% band)"
    cards = [
        (scenario_label(win), "fastest scenario"),
        (plan.layout_text(), f"best layout, {plan.num_gpus:,} {plan.device_noun}s"),
        (format_seconds(plan.step_time_s), f"per step {band}".strip()),
        (f"{plan.tokens_per_s:,.0f}", "tokens/s"),
        (money(eco.usd_per_million_tokens), "per million tokens"),
        (short_mfu(plan), "MFU" + ("" if str(plan.layout.precision) == "bf16" else " (peak)")),
        (f"{memory_cell(plan)} GiB", f"peak / usable memory per {plan.device_noun}"),
    ]
    body = "".join(
        f'<div class="figure"><b>{html_text(value)}</b><span>{html_text(label)}</span></div>'
        for value, label in cards
    )
    return f'<div class="figures">{body}</div>'


def pareto_chart(result: WhatIfResult) -> str:
    """Tokens/s of the whole job against $ per million tokens, one point per scenario; the
    Pareto front joined; the fastest (and the cheapest, when another) marked."""
    ok = _ok(result)
    if not ok:
        return ""
    win = fastest(result)
    cheap = min(ok, key=lambda s: s.economics.usd_per_million_tokens)  # type: ignore[union-attr]
    points = []
    for s in ok:
        assert s.plan is not None and s.economics is not None
        mark = "fastest" if s is win else "cheapest" if s is cheap else ""
        points.append(Point(scenario_label(s), s.economics.usd_per_million_tokens,
                            s.plan.tokens_per_s, mark=mark))  # fmt: skip
    return scatter_chart(
        points,
        title="Throughput against cost",
        x_label="$ per million tokens (lower is better)",
        y_label="tokens/s, whole job",
        width=CHART_PAIR_WIDTH,
        x_format=lambda v: f"${v:.3g}",
    )


def _axes_knobs(result: WhatIfResult) -> tuple[str, str] | None:
    """The two knobs of the heatmap: those that move the step time most (given order on a
    tie); None with fewer than two knobs of two values or more."""
    multi = [k for k, values in result.knobs.items() if len(values) > 1]
    if len(multi) < 2:
        return None
    effects = knob_effects(result)
    ranked = sorted(multi, key=lambda k: (-effects.get(k, 0.0), multi.index(k)))
    first, second = ranked[0], ranked[1]
    # the knob with more values runs down the rows (columns stay narrow)
    if len(result.knobs[second]) > len(result.knobs[first]):
        first, second = second, first
    return first, second


def step_heatmaps(result: WhatIfResult) -> list[str]:
    """Step time over the two knobs that move it most, one small heatmap per combination of
    the other knobs (at most MAX_FACETS), on one colour scale; the fastest cell outlined."""
    axes = _axes_knobs(result)
    if axes is None:
        return []
    rows_knob, cols_knob = axes
    others = [k for k in result.knobs if k not in axes]
    by_key: dict[tuple[str, ...], Scenario] = {
        tuple(knob_text(s.vary[k]) for k in result.knobs): s for s in result.scenarios
    }
    steps = [s.plan.step_time_s for s in _ok(result)]  # type: ignore[union-attr]
    scale = (min(steps), max(steps)) if steps else None
    win = fastest(result)
    facets = list(itertools.product(*(result.knobs[k] for k in others)))
    charts = []
    for facet in facets[:MAX_FACETS]:
        fixed = dict(zip(others, facet, strict=True))
        values: list[list[float | None]] = []
        best: tuple[int, int] | None = None
        for i, r in enumerate(result.knobs[rows_knob]):
            row: list[float | None] = []
            for j, c in enumerate(result.knobs[cols_knob]):
                vary: dict[str, KnobValue] = {**fixed, rows_knob: r, cols_knob: c}
                scenario = by_key.get(tuple(knob_text(vary[k]) for k in result.knobs))
                plan = scenario.plan if scenario is not None else None
                row.append(plan.step_time_s if plan is not None else None)
                if scenario is not None and scenario is win:
                    best = (i, j)
            values.append(row)
        title = ", ".join(f"{k}={knob_text(v)}" for k, v in fixed.items()) or (
            f"Step time by {rows_knob} and {cols_knob}"
        )
        charts.append(
            heatmap(
                [knob_text(v) for v in result.knobs[rows_knob]],
                [knob_text(v) for v in result.knobs[cols_knob]],
                values,
                title=title,
                row_title=rows_knob,
                col_title=cols_knob,
                value_format=format_seconds,
                best=best,
                scale=scale,
                cell_w=68.0,
            )
        )
    if len(facets) > MAX_FACETS:
        charts.append(
            f'<p class="note">{MAX_FACETS} of {len(facets)} combinations of '
            f"{html_text(', '.join(others))} drawn; the table has every scenario.</p>"
        )
    return charts


# --- tables ------------------------------------------------------------------------------------


def summary_header(result: WhatIfResult) -> list[str]:
    """One column per knob (its value), then the detail columns."""
    return [*result.knobs, *DETAIL_HEADER]


def summary_rows(result: WhatIfResult) -> list[list[str]]:
    """One row per scenario: its knob values, the best layout, step time with its ± band,
    throughput, cost, energy, peak / usable memory, MFU and the bottleneck (or why there is
    no plan)."""
    return [
        [*(knob_text(s.vary[k]) for k in result.knobs), *detail_cells(s)] for s in result.scenarios
    ]


def runners_up(result: WhatIfResult) -> str:
    """The fastest scenario's best layout and its runners-up, with why they lose."""
    win = fastest(result)
    if win is None or not win.alternatives:
        return ""
    return f"<h2>Runners-up in {html_text(scenario_label(win))}</h2>\n" + html_table(
        RUNNER_HEADER, runner_rows(win), best=0
    )


def all_runners_up(result: WhatIfResult) -> str:
    """Every scenario's layouts, best first."""
    rows = []
    for s in _ok(result):
        rows += [[scenario_label(s), *row] for row in runner_rows(s)]
    return html_table(["scenario", *RUNNER_HEADER], rows) if rows else "<p>No plans.</p>"


# --- the page ------------------------------------------------------------------------------------


def _charts(result: WhatIfResult) -> dict[str, str]:
    labels = [scenario_label(s) for s in result.scenarios]
    plans = [s.plan for s in result.scenarios]
    cost = [s.economics.usd_per_million_tokens if s.economics else None for s in result.scenarios]
    terms = [t for t in TERM_ORDER if any(p and p.breakdown_s.get(t) for p in plans)]
    return {
        "step_chart": bar_chart(
            labels,
            [p.step_time_s if p else None for p in plans],
            title="Step time",
            value_format=format_seconds,
            width=CHART_PAIR_WIDTH,
            axis_label="seconds per step",
        ),
        "cost_chart": bar_chart(
            labels,
            cost,
            title="$ per million tokens",
            value_format=money,
            color="#55a868",
            width=CHART_PAIR_WIDTH,
            axis_label="USD per million tokens",
        ),
        "breakdown_chart": stacked_bar_chart(
            labels,
            [
                (
                    TERM_LABELS[t],
                    [p.breakdown_s.get(t, 0.0) if p else None for p in plans],
                    TERM_COLORS[t],
                )
                for t in terms
            ],
            title="Exposed time per step by term",
            value_format=format_seconds,
            axis_label="exposed seconds per step",
        ),
        "degree_chart": degree_grid(
            labels,
            list(DEGREE_COLUMNS),
            [degree_row(p) if p else None for p in plans],
            title="Parallel degrees and settings of the best layout",
        ),
    }


def _meta(result: WhatIfResult) -> str:
    command = result.command or "planner.whatif(...) (Python API)"
    made = f"layout {result.version}" if result.version else "layout"
    when = result.created.replace("T", " ").replace("+00:00", " UTC")
    return (
        f"<code>{html_text(command)}</code><br>{html_text(made)}"
        f"{html_text(', ' + when if when else '')}; "
        f"{len(result.scenarios)} scenarios planned in {result.elapsed_s:.1f} s"
    )


def _caption(result: WhatIfResult) -> str:
    """What the overview charts show, in words."""
    text = (
        "Left: each scenario's tokens/s against its $ per million tokens; the dashed line joins "
        "the Pareto front (no other scenario is both cheaper and faster), red marks the fastest "
        "and the cheapest."
    )
    axes = _axes_knobs(result)
    if axes is not None:
        others = [k for k in result.knobs if k not in axes]
        per = f", one grid per {' x '.join(others)}" if others else ""
        text += (
            f" Right: step time by {axes[0]} (rows) and {axes[1]} (columns), the two knobs "
            f"that move it most{per}; darker is slower on one scale, the fastest outlined."
        )
    return text


def whatif_html(result: WhatIfResult) -> str:
    """The what-if report as one self-contained HTML document."""
    wl = result.workload
    runs = run_rows(result)
    noun = whatif_noun(result)
    header = run_header(noun)
    run_section = f"<h2>Time to train</h2>\n{html_table(header, runs)}" if runs else ""
    context = (
        f"Base cluster: {result.cluster_description}. Workload: {wl.seq_len:,}-token sequences x "
        f"{wl.global_batch:,} per step, {wl.precision}. Step times carry their 80% band (the "
        "spread of held-out errors of the closest validated regime). Cost at the catalog price "
        f"per {noun}-hour; energy with every accelerator at TDP (an upper bound). MFU is over the "
        "BF16 dense peak, or over the running format's peak where it says so."
    )
    win = fastest(result)
    best_row = result.scenarios.index(win) if win is not None else None
    page_body = BODY.substitute(
        caption=html_text(_caption(result)),
        meta=_meta(result),
        summary=html_text(summary_sentence(result)),
        figures=_figures(result),
        pareto=pareto_chart(result),
        heatmaps="\n".join(step_heatmaps(result)),
        scenario_table=html_table(summary_header(result), summary_rows(result), best=best_row),
        runners_up=runners_up(result),
        breakdown_table=html_table(*breakdown_rows(result)),
        all_runners_up=all_runners_up(result),
        run_section=run_section,
        context=html_text(context),
        **_charts(result),
    )
    return html_document(html_text(f"What-if: {result.model} on {result.cluster}"), CSS, page_body)
