"""The what-if report as one self-contained HTML page: inline CSS and inline SVG charts, no
scripts, no fonts, images or styles fetched from anywhere. A pure function of a WhatIfResult."""

from __future__ import annotations

from string import Template

from planner.report.markdown import (
    DEGREE_COLUMNS,
    RUN_HEADER,
    SCENARIO_HEADER,
    TERM_LABELS,
    TERM_ORDER,
    breakdown_rows,
    degree_row,
    money,
    run_rows,
    scenario_label,
    scenario_rows,
    summary_sentence,
)
from planner.report.quote import html_text
from planner.report.svg import TERM_COLORS, bar_chart, degree_grid, stacked_bar_chart
from planner.specs.scenarios import WhatIfResult
from planner.units import format_seconds

PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title</title>
<style>
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px auto;
       max-width: 1100px; padding: 0 16px; color: #1f2328; background: #ffffff; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
p.summary { font-size: 15px; line-height: 1.5; background: #f6f8fa; border-left: 4px solid #3b6ea5;
            padding: 10px 14px; }
p.note { color: #59636e; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
svg.chart { max-width: 100%; height: auto; }
</style>
</head>
<body>
<h1>$title</h1>
<p class="summary">$summary</p>
<p class="note">$context</p>
<h2>Scenarios</h2>
$scenario_table
<h2>Step time and cost per scenario</h2>
<div class="charts">
$step_chart
$cost_chart
</div>
<h2>Where the time goes</h2>
$breakdown_chart
$breakdown_table
<h2>Layout per scenario</h2>
$degree_chart
$run_section
</body>
</html>
""")

CHART_PAIR_WIDTH = 520
"""Width of the two bar charts shown side by side (px)."""
_NUMERIC = {
    "step",
    "tokens/s",
    "$/M tokens",
    "J/token",
    "steps",
    "days",
    "GPU-hours",
    "cost",
    "MWh at TDP",
}


def html_table(header: list[str], rows: list[list[str]]) -> str:
    """A plain HTML table (cells escaped; numeric columns right-aligned)."""
    head = "".join(f"<th>{html_text(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{html_text(c)}</td>' if h in _NUMERIC or h in TERM_LABELS.values()
            else f"<td>{html_text(c)}</td>"
            for h, c in zip(header, row, strict=True)
        )  # fmt: skip
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


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
        ),
        "cost_chart": bar_chart(
            labels,
            cost,
            title="$ per million tokens",
            value_format=money,
            color="#55a868",
            width=CHART_PAIR_WIDTH,
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
        ),
        "degree_chart": degree_grid(
            labels,
            list(DEGREE_COLUMNS),
            [degree_row(p) if p else None for p in plans],
            title="Parallel degrees and settings of the best layout",
        ),
    }


def whatif_html(result: WhatIfResult) -> str:
    """The what-if report as one self-contained HTML document."""
    wl = result.workload
    runs = run_rows(result)
    run_section = f"<h2>Time to train</h2>\n{html_table(RUN_HEADER, runs)}" if runs else ""
    context = (
        f"Base cluster: {result.cluster_description}. Workload: seq-len {wl.seq_len}, global "
        f"batch {wl.global_batch}, {wl.precision}. Cost at the catalog price per GPU-hour; energy "
        f"with every accelerator at TDP (an upper bound). {len(result.scenarios)} scenarios "
        f"planned in {result.elapsed_s:.1f} s."
    )
    return PAGE.substitute(
        title=html_text(f"What-if: {result.model} on {result.cluster}"),
        summary=html_text(summary_sentence(result)),
        context=html_text(context),
        scenario_table=html_table(SCENARIO_HEADER, scenario_rows(result)),
        breakdown_table=html_table(*breakdown_rows(result)),
        run_section=run_section,
        **_charts(result),
    )
