"""A training search as a report to share: Markdown, or one self-contained HTML page with the
best plan's figures, where each ranked layout's step goes and how full its memory is (inline
SVG bar charts with axes; no scripts, nothing fetched), the runners-up with why each loses, and
what the search weighed. Pure functions of a SearchResult (``layout search --report FILE``).
"""

from __future__ import annotations

from string import Template

from planner.report.html import CSS, html_table
from planner.report.markdown import (
    TERM_LABELS,
    TERM_ORDER,
    memory_cell,
    money,
    seconds_or_dash,
    short_mfu,
)
from planner.report.page import html_document
from planner.report.quote import html_text, markdown_cell
from planner.report.svg import TERM_COLORS, diverging_bar_chart, stacked_bar_chart
from planner.report.text import OBJECTIVE_WORDS, objective_figure, plan_lines, solver_line
from planner.search.explain import rejection_histogram
from planner.specs.result import Plan, SearchResult, shared_device_noun
from planner.units import format_seconds

MEMORY_COLORS: dict[str, str] = {
    "weights": "#4c72b0",
    "gradients": "#55a868",
    "optimizer state": "#8172b3",
    "activations": "#dd8452",
    "optimizer step's fp32 gradients": "#c44e52",
}
"""Colour per memory term of the memory chart."""

CHART_WIDTH = 1040
"""Width of the report's charts (px): the page's width, so that the bars keep room beside a
ranked layout's label."""

RANKED_HEADER = [
    "#",
    "layout",
    "step",
    "tokens/s",
    "MFU",
    "$/M tokens",
    "memory GiB",
    "why not",
]
"""Columns of the ranked-layouts table."""

BODY = Template("""<p class="meta">$meta</p>
<p class="summary">$summary</p>
$figures
<h2>Where each ranked layout's step goes</h2>
<p class="caption">Exposed seconds per optimizer step by term: communication hidden behind
compute is not drawn; the best layout is row 1.</p>
$time_chart
$difference
<h2>Memory per $noun on the stage that needs the most</h2>
<p class="caption">$memory_caption</p>
$memory_chart
<h2>Ranked layouts and why the runners-up lose</h2>
$ranked_table
<h2>What the search weighed</h2>
<p>$search</p>
<details><summary>The best plan in full</summary>
<pre>$plan</pre>
</details>
""")
"""The page under its title (planner.report.page.html_document)."""


def _title(result: SearchResult) -> str:
    return f"Training {result.best.model} on {result.best.cluster}"


def _plans(result: SearchResult) -> list[Plan]:
    return [result.best, *result.alternatives]


def plan_label(rank: int, plan: Plan) -> str:
    """A ranked layout's chart label: '1. TP4 PP2 DP2 mbs1 none zero1 bf16'."""
    return f"{rank}. {plan.layout_text()}"


def summary_sentence(result: SearchResult) -> str:
    """The answer in one sentence: the best layout, its step, throughput and memory, and by how
    much the runner-up loses (by step time, or by the objective the search ranked on)."""
    best = result.best
    noun = best.device_noun
    objective = result.objective
    ranked = ""
    if objective != "time":
        words = OBJECTIVE_WORDS[objective].format(noun=noun)
        ranked = f"Ranked by {words}: "
    text = f"{ranked}{'the best' if ranked else 'Best'} layout {plan_figures_text(best)}"
    text += f", {objective_figure(best, objective)}." if objective in ("cost", "energy") else "."
    if result.alternatives:
        second = result.alternatives[0]
        slower = second.step_time_s / best.step_time_s - 1 if best.step_time_s else 0.0
        text += (
            f" The runner-up, {second.layout_text()}, takes {format_seconds(second.step_time_s)}"
            f" ({100 * slower:+.1f}%)"
        )
        if objective in ("cost", "energy"):
            text += f" at {objective_figure(second, objective)}"
        text += "."
    return text


def ranked_rows(result: SearchResult) -> list[list[str]]:
    """One row per ranked layout, best first (:data:`RANKED_HEADER`)."""
    return [
        [
            str(rank),
            p.layout_text(),
            format_seconds(p.step_time_s)
            + ("" if p.uncertainty_pct is None else f" ±{p.uncertainty_pct:.0f}%"),
            f"{p.tokens_per_s:,.0f}",
            short_mfu(p),
            money(p.usd_per_million_tokens),
            memory_cell(p),
            p.why_not or "the best",
        ]
        for rank, p in enumerate(_plans(result), start=1)
    ]


def memory_terms(plan: Plan) -> dict[str, float]:
    """The binding stage's memory by term (GiB): the state, then the activations or, where it
    is larger, the fp32 gradient copy the optimizer step allocates once they are freed (the
    peak counts the larger of the two, ``MemoryBreakdown.optimizer_step_gib``)."""
    mem = plan.memory
    step = mem.optimizer_step_gib > mem.activations_gib
    return {
        "weights": mem.weights_gib,
        "gradients": mem.grads_gib,
        "optimizer state": mem.optimizer_gib,
        "activations": 0.0 if step else mem.activations_gib,
        "optimizer step's fp32 gradients": mem.optimizer_step_gib if step else 0.0,
    }


def time_chart(result: SearchResult) -> str:
    """The ranked layouts' exposed step time, stacked by term."""
    plans = _plans(result)
    return exposed_time_chart([plan_label(i, p) for i, p in enumerate(plans, start=1)], plans)


def exposed_time_chart(labels: list[str], plans: list[Plan]) -> str:
    """One bar per plan (``labels``): its exposed seconds per step, stacked by the terms any of
    them has."""
    terms = [t for t in TERM_ORDER if any(p.breakdown_s.get(t) for p in plans)]
    return stacked_bar_chart(
        labels,
        [
            (TERM_LABELS[t], [p.breakdown_s.get(t, 0.0) for p in plans], TERM_COLORS[t])
            for t in terms
        ],
        title="Exposed time per step by term",
        value_format=format_seconds,
        axis_label="exposed seconds per step",
        width=CHART_WIDTH,
    )


def signed_seconds(value: float) -> str:
    """A time difference with its sign: '+3.43 s', '-109 us', '0'.

    >>> signed_seconds(3.43), signed_seconds(-0.000109), signed_seconds(0.0)
    ('+3.43 s', '-109 us', '0')
    """
    if value == 0:
        return "0"
    return ("+" if value > 0 else "-") + format_seconds(abs(value))


def difference_chart(result: SearchResult) -> str:
    """How each runner-up's exposed time differs from the best's, term by term (to the right
    what it adds, to the left what it saves; the tick is the net, its extra step time); empty
    without runners-up."""
    if not result.alternatives:
        return ""
    best = result.best
    plans = _plans(result)
    terms = [t for t in TERM_ORDER if any(p.breakdown_s.get(t) for p in plans)]
    alternatives = result.alternatives
    caption = (
        '<p class="caption">Each runner-up against the best, term by term: to the right the '
        "exposed time it adds, to the left what it saves; the black tick is the net, the step "
        "time it loses by.</p>"
    )
    chart = diverging_bar_chart(
        [plan_label(i, p) for i, p in enumerate(alternatives, start=2)],
        [
            (
                TERM_LABELS[t],
                [p.breakdown_s.get(t, 0.0) - best.breakdown_s.get(t, 0.0) for p in alternatives],
                TERM_COLORS[t],
            )
            for t in terms
        ],
        title="Exposed time per step against the best layout",
        value_format=signed_seconds,
        axis_label="seconds per step more (+) or less (-) than the best",
        width=CHART_WIDTH,
    )
    return caption + "\n" + chart


def memory_chart(result: SearchResult) -> str:
    """The ranked layouts' peak memory per accelerator, stacked by term, with the usable
    capacity drawn as a limit line."""
    plans = _plans(result)
    return memory_stack_chart(
        [plan_label(i, p) for i, p in enumerate(plans, start=1)],
        plans,
        limit=("usable", min(p.memory.capacity_gib for p in plans)),
    )


def memory_stack_chart(
    labels: list[str], plans: list[Plan], *, limit: tuple[str, float] | None = None
) -> str:
    """One bar per plan (``labels``): its peak memory per accelerator, stacked by the terms of
    :func:`memory_terms` any of them has; ``limit`` a capacity line."""
    per_plan = [memory_terms(p) for p in plans]
    names = [n for n in MEMORY_COLORS if any(terms[n] > 0 for terms in per_plan)]
    return stacked_bar_chart(
        labels,
        [(n, [terms[n] for terms in per_plan], MEMORY_COLORS[n]) for n in names],
        title=f"Peak memory per {shared_device_noun(plans)}",
        value_format=lambda v: f"{v:,.1f} GiB",
        axis_label="GiB (2^30 bytes)",
        limit=limit,
        width=CHART_WIDTH,
    )


def search_words(result: SearchResult) -> str:
    """How many layouts were weighed, which limits rejected the others, and what chose."""
    rejected = rejection_histogram(result.rejections)
    return (
        f"{result.num_candidates:,} layouts weighed, {result.num_feasible:,} feasible"
        + (f"; rejected: {rejected}" if rejected else "")
        + f". {solver_line(result)}; {result.search_time_s:.2f} s."
    )


def _memory_caption(result: SearchResult) -> str:
    """What the memory chart draws, with the usable memory and the share the search kept free
    (``SolverInfo.memory_headroom``)."""
    capacity = {round(p.memory.capacity_gib, 1) for p in _plans(result)}
    return memory_caption(sorted(capacity), result.solver.memory_headroom)


def memory_caption(capacities_gib: list[float], headroom: float | None = None) -> str:
    """The memory chart's caption: what it stacks, the usable line (``capacities_gib``) and,
    for a search, the share of it the search kept free."""
    usable = " or ".join(f"{c:,.1f}" for c in capacities_gib)
    text = (
        f"Weights, gradients and optimizer state as sharded, and the activations in flight (or "
        f"the optimizer step's fp32 gradient copy, where that is the larger); the line marks the "
        f"{usable} GiB usable (HBM less the runtime reserve)"
    )
    return text + (f", of which the search kept {100 * headroom:g}% free." if headroom else ".")


def _figures(result: SearchResult) -> str:
    return _figure_cards(result.best, "best layout")


def _figure_cards(plan: Plan, what: str) -> str:
    """The plan's figures as a row of cards, the first naming its layout as ``what``."""
    noun = plan.device_noun
    band = "" if plan.uncertainty_pct is None else f"±{plan.uncertainty_pct:.0f}% (80% band)"
    cards = [
        (plan.layout_text(), f"{what}, {plan.num_gpus:,} {noun}s"),
        (format_seconds(plan.step_time_s), f"per step {band}".strip()),
        (f"{plan.tokens_per_s_per_gpu:,.0f}", f"tokens/s per {noun}"),
        (short_mfu(plan), "MFU" + ("" if str(plan.layout.precision) == "bf16" else " (peak)")),
        (money(plan.usd_per_million_tokens), "per million tokens"),
        (f"{memory_cell(plan)} GiB", f"peak / usable memory per {noun}"),
    ]
    body = "".join(
        f'<div class="figure"><b>{html_text(value)}</b><span>{html_text(label)}</span></div>'
        for value, label in cards
    )
    return f'<div class="figures">{body}</div>'


def _meta(command: str | None) -> str:
    made = command or "planner.search(...) (Python API)"
    return f"<code>{html_text(made)}</code>"


def search_html(result: SearchResult, *, command: str | None = None) -> str:
    """The report as one self-contained HTML document (``command``: the command line that
    made it, shown under the title)."""
    page_body = BODY.substitute(
        meta=_meta(command),
        summary=html_text(summary_sentence(result)),
        figures=_figures(result),
        time_chart=time_chart(result),
        difference=difference_chart(result),
        noun=html_text(result.best.device_noun),
        memory_caption=html_text(_memory_caption(result)),
        memory_chart=memory_chart(result),
        ranked_table=html_table(RANKED_HEADER, ranked_rows(result), best=0),
        search=html_text(search_words(result)),
        plan="\n".join(html_text(line) for line in plan_lines(result.best)),
    )
    return html_document(html_text(_title(result)), CSS, page_body)


PLAN_BODY = Template("""<p class="meta">$meta</p>
<p class="summary">$summary</p>
$figures
<h2>Where the step goes</h2>
<p class="caption">Exposed seconds per optimizer step by term: communication hidden behind
compute is not drawn.</p>
$time_chart
<h2>Memory per $noun on the stage that needs the most</h2>
<p class="caption">$memory_caption</p>
$memory_chart
<h2>The plan in full</h2>
<pre>$plan</pre>
""")
"""The page of one scored layout (``layout estimate --report``) under its title."""


def plan_sentence(plan: Plan) -> str:
    """One scored layout in one sentence: its step, throughput and memory, and whether it fits."""
    fits = "" if plan.fits else " It does not fit in memory."
    return f"{plan_figures_text(plan)}.{fits}"


def plan_figures_text(plan: Plan) -> str:
    """'TP4 PP2 DP2 ... on 16 GPUs: 112.87 s per step (±19%, 80% band), 2,323 tokens/s per
    GPU, MFU 46.4%, 143.9 / 169.7 GiB of memory per GPU (peak / usable)'."""
    noun = plan.device_noun
    band = "" if plan.uncertainty_pct is None else f" (±{plan.uncertainty_pct:.0f}%, 80% band)"
    return (
        f"{plan.layout_text()} on {plan.num_gpus:,} {noun}s: "
        f"{format_seconds(plan.step_time_s)} per step{band}, "
        f"{plan.tokens_per_s_per_gpu:,.0f} tokens/s per {noun}, MFU {short_mfu(plan)}, "
        f"{memory_cell(plan)} GiB of memory per {noun} (peak / usable)"
    )


def plan_html(plan: Plan, *, command: str | None = None) -> str:
    """One scored layout (``layout estimate --report``) as a self-contained HTML page: its
    figures, its exposed step by term, its memory against the usable capacity, the full plan."""
    page_body = PLAN_BODY.substitute(
        meta=f"<code>{html_text(command or 'planner.estimate(...) (Python API)')}</code>",
        summary=html_text(plan_sentence(plan)),
        figures=_figure_cards(plan, "layout"),
        time_chart=exposed_time_chart([plan.layout_text()], [plan]),
        noun=html_text(plan.device_noun),
        memory_caption=html_text(memory_caption([plan.memory.capacity_gib])),
        memory_chart=memory_stack_chart(
            [plan.layout_text()], [plan], limit=("usable", plan.memory.capacity_gib)
        ),
        plan="\n".join(html_text(line) for line in plan_lines(plan)),
    )
    title = f"{plan.model} on {plan.cluster}: {plan.layout_text()}"
    return html_document(html_text(title), CSS, page_body)


def plan_markdown(plan: Plan, *, command: str | None = None) -> str:
    """One scored layout in Markdown: the sentence, its time and memory tables, the full plan."""
    title = f"{plan.model} on {plan.cluster}: {plan.layout_text()}"
    lines = [f"# {markdown_cell(title)}", ""]
    if command:
        quoted = command.replace("`", "'")
        lines += [f"Made by `{quoted}`", ""]
    lines += [markdown_cell(plan_sentence(plan)), ""]
    terms = [t for t in TERM_ORDER if plan.breakdown_s.get(t)]
    lines += ["## Exposed time per step by term", ""]
    lines += gfm_table(
        [*(TERM_LABELS[t] for t in terms), "step"],
        [[*(format_seconds(plan.breakdown_s[t]) for t in terms), format_seconds(plan.step_time_s)]],
    )
    names = [n for n, v in memory_terms(plan).items() if v > 0]
    lines += ["", f"## Memory per {plan.device_noun} (GiB, binding stage)", ""]
    lines += gfm_table(
        [*names, "peak", "usable"],
        [[*(f"{memory_terms(plan)[n]:.1f}" for n in names), f"{plan.memory.peak_gib:.1f}",
          f"{plan.memory.capacity_gib:.1f}"]],
    )  # fmt: skip
    lines += ["", "## The plan in full", "", "```", *plan_lines(plan), "```"]
    return "\n".join(lines) + "\n"


def search_markdown(result: SearchResult, *, command: str | None = None) -> str:
    """The report in Markdown: the same sections, the charts as tables."""
    lines = [f"# {markdown_cell(_title(result))}", ""]
    if command:
        quoted = command.replace("`", "'")
        lines += [f"Made by `{quoted}`", ""]
    lines += [markdown_cell(summary_sentence(result)), ""]
    lines += ["## Ranked layouts and why the runners-up lose", ""]
    lines += gfm_table(RANKED_HEADER, ranked_rows(result))
    lines += ["", "## Exposed time per step by term", ""]
    lines += gfm_table(*time_rows(result))
    lines += ["", f"## Memory per {result.best.device_noun} (GiB, binding stage)", ""]
    lines += gfm_table(*memory_rows(result))
    lines += ["", "## What the search weighed", "", markdown_cell(search_words(result)), ""]
    lines += ["## The best plan in full", "", "```", *plan_lines(result.best), "```"]
    return "\n".join(lines) + "\n"


def time_rows(result: SearchResult) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of each ranked layout's exposed seconds per term and its step."""
    plans = _plans(result)
    terms = [t for t in TERM_ORDER if any(p.breakdown_s.get(t) for p in plans)]
    header = ["#", *(TERM_LABELS[t] for t in terms), "step"]
    rows = []
    for i, p in enumerate(plans, start=1):
        seconds = [seconds_or_dash(p.breakdown_s.get(t, 0.0)) for t in terms]
        rows.append([str(i), *seconds, format_seconds(p.step_time_s)])
    return header, rows


def memory_rows(result: SearchResult) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of each ranked layout's memory terms, peak and usable GiB."""
    plans = _plans(result)
    names = [n for n in MEMORY_COLORS if any(memory_terms(p)[n] > 0 for p in plans)]
    rows = []
    for i, p in enumerate(plans, start=1):
        terms = [f"{memory_terms(p)[n]:.1f}" for n in names]
        rows.append([str(i), *terms, f"{p.memory.peak_gib:.1f}", f"{p.memory.capacity_gib:.1f}"])
    return ["#", *names, "peak", "usable"], rows


def gfm_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A GFM table, every cell quoted for Markdown (layouts and reasons hold user names); the
    text columns (layout, why not, and a first column without a name) left-aligned, the
    figures right-aligned."""
    out = ["| " + " | ".join(markdown_cell(h) for h in header) + " |"]
    text = ("", "layout", "why not", "field", "from", "to", "why")
    aligns = ("---" if h in text else "---:" for h in header)
    out.append("|" + "|".join(aligns) + "|")
    out += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows]
    return out
