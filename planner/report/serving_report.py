"""The serving search as a report: Markdown, or one self-contained HTML page with the
throughput/latency frontier drawn as an inline SVG (axes, ticks, gridlines; no scripts, nothing
fetched). Pure functions of a ServeSearchResult (``layout search --mode serve --report FILE``).
"""

from __future__ import annotations

from string import Template

from planner.report.page import html_document
from planner.report.quote import html_text, markdown_cell
from planner.report.serving import disaggregated_lines, serve_plan_lines
from planner.report.svg import xy_chart
from planner.specs.result import ParetoPoint, ServeSearchResult, TargetCheck
from planner.units import MS

FRONTIER_HEADER = [
    "layout",
    "sequences per replica",
    "tokens/s per user",
    "tokens/s per GPU",
    "TPOT (ms)",
    "TTFT (ms)",
]
"""Columns of the frontier table."""

CSS = """body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px auto;
       max-width: 1100px; padding: 0 16px; color: #1f2328; background: #ffffff; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
pre { background: #f6f8fa; padding: 10px 14px; font-size: 12px; overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
svg.chart { max-width: 100%; height: auto; }
"""
"""The report's style sheet."""

BODY = Template("""<h2>Best plan</h2>
<pre>$plan</pre>
<h2>Throughput per GPU against speed per user</h2>
$chart
$table
$disaggregated
""")
"""The page under its title (planner.report.page.html_document)."""


def _title(result: ServeSearchResult) -> str:
    best = result.best
    return f"Serving {best.model} on {best.cluster}"


def point_verdict(point: ParetoPoint, targets: list[TargetCheck]) -> str:
    """A frontier point against the search's TPOT and TTFT targets: "meets", or the targets it
    misses (the point's TTFT is a prompt joining the running batch, no queueing; an end-to-end
    target is not judged per point).

    >>> from planner.specs.result import ServeLayout
    >>> q = ParetoPoint(layout=ServeLayout(), concurrency=8, tokens_per_s_per_gpu=100.0,
    ...                 tokens_per_s_per_user=25.0, tpot_s=0.04, ttft_s=0.2)
    >>> tpot = TargetCheck(name="tpot", target_ms=30.0, achieved_ms=29.0, met=True)
    >>> point_verdict(q, [tpot]), point_verdict(q, [])
    ('misses TPOT 30 ms', '')
    """
    achieved = {"tpot": point.tpot_s / MS, "ttft": point.ttft_s / MS}
    missed = [
        f"{t.name.upper()} {t.target_ms:g} ms"
        for t in targets
        if t.name in achieved and achieved[t.name] > t.target_ms
    ]
    judged = [t for t in targets if t.name in achieved]
    if not judged:
        return ""
    return "misses " + ", ".join(missed) if missed else "meets"


def frontier_rows(result: ServeSearchResult) -> list[list[str]]:
    """One row per frontier point, fastest per user first; the chosen plan's layout and
    batch marked, and with latency targets a last column saying which each point meets."""
    best, targets = result.best, result.best.targets
    chosen = (best.layout.tp, best.layout.pp, best.layout.ep, best.layout.attention_dp)
    rows = []
    for p in result.pareto:
        name = p.layout.short().split(" x")[0]
        lay = p.layout
        if (lay.tp, lay.pp, lay.ep, lay.attention_dp) == chosen and p.concurrency == (
            best.concurrency
        ):
            name += " (chosen)"
        row = [
            name,
            f"{p.concurrency:,}",
            f"{p.tokens_per_s_per_user:,.1f}",
            f"{p.tokens_per_s_per_gpu:,.0f}",
            f"{p.tpot_s * 1e3:,.1f}",
            f"{p.ttft_s * 1e3:,.0f}",
        ]
        verdict = point_verdict(p, targets)
        rows.append([*row, verdict] if verdict else row)
    return rows


def frontier_header(result: ServeSearchResult) -> list[str]:
    """:data:`FRONTIER_HEADER`, with the targets column when the search had latency targets."""
    judged = any(t.name in ("tpot", "ttft") for t in result.best.targets)
    return [*FRONTIER_HEADER, "targets"] if judged else FRONTIER_HEADER


def frontier_chart(points: list[ParetoPoint]) -> str:
    """The frontier as an SVG: tokens/s per user (x) against tokens/s per GPU (y)."""
    data = [
        (
            p.tokens_per_s_per_user,
            p.tokens_per_s_per_gpu,
            f"{p.layout.short().split(' x')[0]}, {p.concurrency} per replica",
        )
        for p in points
    ]
    return xy_chart(
        data,
        title="Pareto frontier over layouts and batch sizes",
        x_label="output tokens/s per user",
        y_label="output tokens/s per GPU",
        value_format=lambda v: f"{v:,.0f}",
    )


def serving_markdown(result: ServeSearchResult) -> str:
    """The report in Markdown (the frontier as a table)."""
    lines = [f"# {markdown_cell(_title(result))}", "", "## Best plan", "", "```"]
    lines += serve_plan_lines(result.best)
    lines += ["```", "", "## Throughput per GPU against speed per user", ""]
    header = frontier_header(result)
    lines.append("| " + " | ".join(header) + " |")
    lines.append("| --- |" + " ---: |" * (len(header) - 1))
    for row in frontier_rows(result):
        lines.append("| " + " | ".join(markdown_cell(c) for c in row) + " |")
    if result.disaggregated is not None:
        lines += ["", "## Disaggregated prefill and decode", "", "```"]
        lines += disaggregated_lines(result.disaggregated, result.best.device_noun)
        lines.append("```")
    return "\n".join(lines) + "\n"


def _pre_text(lines: list[str]) -> str:
    """Lines for a <pre> block: each escaped for HTML on its own, joined by real line breaks
    (escaping the joined text would show the breaks as a visible ``\\n``).

    >>> _pre_text(["a < b", "c"])
    'a &lt; b\\nc'
    """
    return "\n".join(html_text(line) for line in lines)


def serving_html(result: ServeSearchResult) -> str:
    """The report as one self-contained HTML page with the frontier plot."""
    head = "".join(f"<th>{html_text(h)}</th>" for h in frontier_header(result))
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{html_text(c)}</td>' if i else f"<td>{html_text(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in frontier_rows(result)
    )
    split = ""
    if result.disaggregated is not None:
        text = _pre_text(disaggregated_lines(result.disaggregated, result.best.device_noun))
        split = f"<h2>Disaggregated prefill and decode</h2>\n<pre>{text}</pre>"
    page_body = BODY.substitute(
        plan=_pre_text(serve_plan_lines(result.best)),
        chart=frontier_chart(result.pareto) if result.pareto else "<p>no frontier</p>",
        table=f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>",
        disaggregated=split,
    )
    return html_document(html_text(_title(result)), CSS, page_body)
