"""Training search reports (``layout search --report``): the HTML page parses, holds its three
charts with their axes and the usable-memory line, and says what the text report says; the
Markdown holds the same tables; the CLI writes both and still refuses serving-only flags."""

from __future__ import annotations

from pathlib import Path

import pytest

import planner
from planner.report.markdown import TERM_LABELS
from planner.report.quote import html_text, markdown_cell
from planner.report.search_report import (
    difference_chart,
    memory_terms,
    plan_sentence,
    ranked_rows,
    search_html,
    search_markdown,
    signed_seconds,
)
from planner.specs.result import SearchResult
from planner.units import format_seconds
from tests.test_migrate import run_main
from tests.test_report import CHROMIUM, _parse, chromium_screenshot

ARGS = ["search", "--model", "8B", "--cluster", "hgx_h100x16", "--seq-len", "4096"]


@pytest.fixture(scope="module")
def result() -> SearchResult:
    """Llama 3.1 8B on 16 H100: a best plan and four runners-up."""
    return planner.search(model="8B", cluster="hgx_h100x16", workload={"seq_len": 4096})


def test_the_search_has_runners_up(result: SearchResult) -> None:
    assert len(result.alternatives) == 4


def test_html_parses_and_holds_three_charts(result: SearchResult) -> None:
    page = search_html(result, command="layout search --model 8B")
    parsed = _parse(page)
    assert parsed.tags.count("svg") == 3
    titles = " | ".join(parsed.svg_titles)
    for chart in (
        "Exposed time per step by term",
        "Exposed time per step against the best layout",
        "Peak memory per GPU",
    ):
        assert chart in titles
    assert "<script" not in page and "http" not in page.split("<body>")[1]  # fetches nothing
    assert html_text("layout search --model 8B") in page
    # one table row per ranked layout (plus the header), the best highlighted
    assert page.count("<tr") == 1 + 1 + len(result.alternatives)
    assert page.count('<tr class="best">') == 1
    assert format_seconds(result.best.step_time_s) in page


def test_memory_chart_draws_the_usable_capacity(result: SearchResult) -> None:
    page = search_html(result)
    memory = page[page.index("Peak memory per GPU</title>") :]
    memory = memory[: memory.index("</svg>")]
    usable = min(p.memory.capacity_gib for p in [result.best, *result.alternatives])
    assert "stroke-dasharray" in memory and f">usable {usable:,.1f} GiB<" in memory
    assert memory.count('stroke="#e1e4e8"') >= 3  # gridlines


def test_memory_terms_add_up_to_the_peak(result: SearchResult) -> None:
    for plan in [result.best, *result.alternatives]:
        assert sum(memory_terms(plan).values()) == pytest.approx(plan.memory.peak_gib, rel=1e-6)


def test_difference_chart_nets_are_the_step_time_lost(result: SearchResult) -> None:
    """Each runner-up's net (the tick and its label) is its step time minus the best's: the
    terms of a breakdown add up to its step."""
    chart = difference_chart(result)
    best = result.best
    for alt in result.alternatives:
        delta = sum(alt.breakdown_s.values()) - sum(best.breakdown_s.values())
        assert delta == pytest.approx(alt.step_time_s - best.step_time_s, abs=1e-9)
        assert f">{html_text(signed_seconds(delta))}<" in chart
    assert difference_chart(result.model_copy(update={"alternatives": []})) == ""


def test_signed_seconds() -> None:
    assert signed_seconds(0.758) == "+758 ms" and signed_seconds(-3.34) == "-3.34 s"


def test_ranked_rows_say_why_each_runner_up_loses(result: SearchResult) -> None:
    rows = ranked_rows(result)
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5"]
    assert rows[0][-1] == "the best"
    assert [r[-1] for r in rows[1:]] == [a.why_not for a in result.alternatives]


def test_markdown_holds_the_same_tables(result: SearchResult) -> None:
    text = search_markdown(result, command="layout search --model `8B`")
    assert text.startswith("# Training llama3.1-8b on hgx_h100x16\n")
    assert "Made by `layout search --model '8B'`" in text  # a backtick cannot end the span
    for heading in (
        "## Ranked layouts and why the runners-up lose",
        "## Exposed time per step by term",
        "## Memory per GPU (GiB, binding stage)",
        "## What the search weighed",
    ):
        assert heading in text
    assert TERM_LABELS["compute"] in text and "| usable |" in text
    first = next(line for line in text.splitlines() if line.startswith("| 1 |"))
    assert first.endswith("| the best |")


def test_cli_writes_both_reports(tmp_path: Path) -> None:
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    code, out, err = run_main([*ARGS, "--report", str(html), "--report", str(md)])
    assert code == 0, err
    assert "layout  :" in out  # the terminal answer is printed as without --report
    assert html.read_text(encoding="utf-8").count("<svg") == 3
    assert "## Ranked layouts" in md.read_text(encoding="utf-8")
    assert f"wrote {html}" in err and f"wrote {md}" in err


def test_serving_only_flags_are_still_refused_in_training(tmp_path: Path) -> None:
    code, _, err = run_main([*ARGS, "--pareto", str(tmp_path / "p.csv")])
    assert code == 2 and "--pareto is a serving flag" in err
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed")
def test_headless_chromium_screenshot_is_not_blank(result: SearchResult, tmp_path: Path) -> None:
    width, height, rows = chromium_screenshot(search_html(result), tmp_path)
    assert (width, height) == (1200, 1400)
    bpp = len(rows[0]) // width
    sample = {row[x : x + 3] for row in rows[::10] for x in range(0, len(row), bpp * 10)}
    assert len(sample) > 20  # text, bars of several colours, tables


def test_the_python_api_writes_the_reports_the_cli_writes(result: SearchResult) -> None:
    assert planner.render_report(result) == search_html(result)
    assert planner.render_report(result, format="markdown") == search_markdown(result)
    serve = planner.serve_search(model="8B", cluster="hgx_h100x8")
    assert planner.render_report(serve, format="markdown").startswith("# Serving llama3.1-8b")
    assert "<svg" in planner.render_report(serve)


def test_a_cost_ranked_report_says_so_and_compares_the_cost() -> None:
    cheap = planner.search(
        model="8B", cluster="hgx_h100x16", seq_len=4096, config={"objective": "cost"}
    )
    sentence = search_markdown(cheap).splitlines()[2]
    assert sentence.startswith("Ranked by lowest $ per token: the best layout ")
    second = cheap.alternatives[0]
    assert f"at ${second.usd_per_million_tokens:.3g}/M tokens." in sentence.replace("\\", "")


def test_estimate_writes_the_plan_report_and_serving_estimates_refuse_it(tmp_path: Path) -> None:
    html, md = tmp_path / "e.html", tmp_path / "e.md"
    argv = ["estimate", "--model", "8B", "--cluster", "hgx_h100x8", "--tp", "2", "--seq-len",
            "4096", "--report", str(html), "--report", str(md)]  # fmt: skip
    code, _, err = run_main(argv)
    assert code == 0, err
    page = html.read_text(encoding="utf-8")
    assert page.count("<svg") == 2 and "stroke-dasharray" in page  # time, memory + usable line
    assert md.read_text(encoding="utf-8").startswith("# llama3.1-8b on hgx_h100x8: TP2 ")
    plan = planner.estimate(model="8B", cluster="hgx_h100x8", layout={"tp": 2}, seq_len=4096)
    sentence = markdown_cell(plan_sentence(plan))
    assert sentence in planner.render_report(plan, format="markdown")
    assert sentence in md.read_text(encoding="utf-8")  # the CLI scored the same plan
    serve = ["estimate", "--mode", "serve", "--model", "8B", "--cluster", "hgx_h100x8",
             "--report", str(tmp_path / "s.md")]  # fmt: skip
    code, _, err = run_main(serve)
    assert code == 2 and "--report of a serving estimate" in err
    assert not (tmp_path / "s.md").exists()
