"""A migration (``layout migrate``) as a report to share: Markdown, or one self-contained HTML
page with the two plans side by side, where each side's step goes (and the old layout run as
it is on the new hardware, where it runs), each side's memory against its own capacity, the
layout changes and why, and the economics. Pure functions of a MigrateResult
(``layout migrate --report FILE``).
"""

from __future__ import annotations

from string import Template

from planner.report.html import CSS, html_table
from planner.report.markdown import TERM_LABELS, TERM_ORDER, migrate_rows, seconds_or_dash
from planner.report.page import html_document
from planner.report.quote import html_text, markdown_cell
from planner.report.search_report import (
    CHART_WIDTH,
    MEMORY_COLORS,
    exposed_time_chart,
    gfm_table,
    memory_stack_chart,
    memory_terms,
)
from planner.report.svg import bar_chart
from planner.specs.result import Plan, shared_device_noun
from planner.specs.scenarios import MigrateResult
from planner.units import format_seconds

BODY = Template("""<p class="meta">$meta</p>
<p class="summary">$summary</p>
<h2>The two plans</h2>
$sides
<h2>Layout changes and why</h2>
$changes
<h2>Where the step goes</h2>
<p class="caption">Exposed seconds per optimizer step by term, and each side's tokens per second
per $noun; communication hidden behind compute is not drawn.</p>
$time_chart
$rate_chart
<h2>Memory per $noun</h2>
<p class="caption">Peak on the stage that needs the most, against each cluster's usable
memory (HBM less the runtime reserve): $usable.</p>
$memory_chart
<p class="note">$note</p>
""")
"""The page under its title (planner.report.page.html_document)."""


def _title(result: MigrateResult) -> str:
    return f"Moving {result.model} from {result.from_plan.cluster} to {result.to_plan.cluster}"


def side_rows(result: MigrateResult) -> list[list[str]]:
    """The terminal answer's side-by-side rows (what, from, to), with the clusters first and
    the whole job's tokens/s."""
    before, after = result.from_plan, result.to_plan
    rows = migrate_rows(result, memory_label="memory peak / usable", job_rate=True)
    return [["cluster", before.cluster, after.cluster], *(list(row) for row in rows)]


def change_rows(result: MigrateResult) -> list[list[str]]:
    """One row per layout field that changes: field, from, to, why."""
    return [[c.field, c.from_value, c.to_value, c.reason] for c in result.changes]


def summary_sentence(result: MigrateResult) -> str:
    """The move in one sentence: the speed-up, the layouts, and the old layout on the new."""
    before, after = result.from_plan, result.to_plan
    text = (
        f"{result.speedup:.2f}x the tokens/s: {before.layout_text()} on {before.cluster} "
        f"({format_seconds(before.step_time_s)} per step) becomes {after.layout_text()} on "
        f"{after.cluster} ({format_seconds(after.step_time_s)})."
    )
    if not result.changes:
        text += " The same layout is best on both."
    return f"{text} Old layout on the new hardware: {result.old_layout_note}."


def _sides(result: MigrateResult) -> list[tuple[str, Plan]]:
    """The plans the charts compare: the old best, the old layout on the new hardware (when it
    runs there), the new best."""
    out = [(f"from: {result.from_plan.cluster}", result.from_plan)]
    if result.old_layout_on_new is not None:
        out.append((f"old layout on {result.to_plan.cluster}", result.old_layout_on_new))
    out.append((f"to: {result.to_plan.cluster}", result.to_plan))
    return out


def time_chart(result: MigrateResult) -> str:
    """Each side's exposed step time, stacked by term."""
    sides = _sides(result)
    return exposed_time_chart([label for label, _ in sides], [p for _, p in sides])


def rate_chart(result: MigrateResult) -> str:
    """Each side's tokens per second per accelerator."""
    sides = _sides(result)
    noun = shared_device_noun([p for _, p in sides])
    return bar_chart(
        [label for label, _ in sides],
        [p.tokens_per_s_per_gpu for _, p in sides],
        title=f"Tokens/s per {noun}",
        value_format=lambda v: f"{v:,.0f}",
        width=CHART_WIDTH,
        axis_label=f"tokens per second per {noun}",
    )


def memory_chart(result: MigrateResult) -> str:
    """Each side's peak memory per accelerator, stacked by term (each cluster has its own
    capacity: the caption says both)."""
    sides = _sides(result)
    return memory_stack_chart([label for label, _ in sides], [p for _, p in sides])


def _usable(result: MigrateResult) -> str:
    return ", ".join(
        f"{p.cluster} {p.memory.capacity_gib:,.1f} GiB" for p in (result.from_plan, result.to_plan)
    )


def _note(result: MigrateResult) -> str:
    wl = result.workload
    return (
        f"Workload: {wl.seq_len:,}-token sequences x {wl.global_batch:,} per step, {wl.precision}. "
        "Cost at the catalog (or given) price per accelerator-hour; energy with every "
        "accelerator at TDP (an upper bound)."
    )


def migrate_html(result: MigrateResult, *, command: str | None = None) -> str:
    """The report as one self-contained HTML document (``command``: the command line that
    made it, shown under the title)."""
    noun = shared_device_noun((result.from_plan, result.to_plan))
    changes = (
        html_table(["field", "from", "to", "why"], change_rows(result))
        if result.changes
        else "<p>None: the same layout is best on both.</p>"
    )
    page_body = BODY.substitute(
        meta=f"<code>{html_text(command or 'planner.migrate(...) (Python API)')}</code>",
        summary=html_text(summary_sentence(result)),
        sides=html_table(["", "from", "to"], side_rows(result)),
        changes=changes,
        noun=html_text(noun),
        time_chart=time_chart(result),
        rate_chart=rate_chart(result),
        usable=html_text(_usable(result)),
        memory_chart=memory_chart(result),
        note=html_text(_note(result)),
    )
    return html_document(html_text(_title(result)), CSS, page_body)


def migrate_markdown(result: MigrateResult, *, command: str | None = None) -> str:
    """The report in Markdown: the same sections, the charts as tables."""
    lines = [f"# {markdown_cell(_title(result))}", ""]
    if command:
        quoted = command.replace("`", "'")
        lines += [f"Made by `{quoted}`", ""]
    lines += [markdown_cell(summary_sentence(result)), "", "## The two plans", ""]
    lines += gfm_table(["", "from", "to"], side_rows(result))
    lines += ["", "## Layout changes and why", ""]
    if result.changes:
        lines += gfm_table(["field", "from", "to", "why"], change_rows(result))
    else:
        lines.append("None: the same layout is best on both.")
    sides = _sides(result)
    plans = [p for _, p in sides]
    terms = [t for t in TERM_ORDER if any(p.breakdown_s.get(t) for p in plans)]
    lines += ["", "## Exposed time per step by term", ""]
    lines += gfm_table(
        ["", *(TERM_LABELS[t] for t in terms), "step"],
        [
            [label, *(seconds_or_dash(p.breakdown_s.get(t, 0.0)) for t in terms),
             format_seconds(p.step_time_s)]
            for label, p in sides
        ],
    )  # fmt: skip
    names = [n for n in MEMORY_COLORS if any(memory_terms(p)[n] > 0 for p in plans)]
    lines += ["", "## Memory per accelerator (GiB, binding stage)", ""]
    lines += gfm_table(
        ["", *names, "peak", "usable"],
        [
            [label, *(f"{memory_terms(p)[n]:.1f}" for n in names),
             f"{p.memory.peak_gib:.1f}", f"{p.memory.capacity_gib:.1f}"]
            for label, p in sides
        ],
    )  # fmt: skip
    lines += ["", markdown_cell(_note(result))]
    return "\n".join(lines) + "\n"
