"""What-if reports: the self-contained HTML (parses, holds the SVG charts, fetches nothing) and
the Markdown, for the issue's six-scenario 405B sweep; a headless-Chromium screenshot when
Chromium is installed."""

from __future__ import annotations

import re
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

import planner
from planner.report.html import whatif_html
from planner.report.markdown import migrate_text, scenario_label, whatif_markdown, whatif_text
from planner.report.quote import html_text
from planner.report.svg import bar_chart, degree_grid, stacked_bar_chart
from planner.specs.scenarios import WhatIfResult
from planner.units import format_seconds
from tests.test_migrate import run_main

CHROMIUM = Path("/usr/bin/chromium")
SWEEP = ["nic_gbps=200,400,800", "oversubscription=1,2"]


@pytest.fixture(scope="module")
def sweep() -> WhatIfResult:
    """The issue's report: 405B on 4,096 H100, three NIC speeds x two spine tapers."""
    return planner.whatif(model="405B", cluster="hgx_h100x4096", vary=SWEEP)


@pytest.fixture(scope="module")
def mixed() -> WhatIfResult:
    """A sweep with a plan, an infeasible and an invalid scenario."""
    return planner.whatif(
        model="70B", cluster="hgx_h100x8", workload={"seq_len": 4096, "global_batch": 64},
        vary=["gpus=8,12,64"], fix={"zero": 1},
    )  # fmt: skip


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.svg_titles: list[str] = []
        self._in_svg_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data: str) -> None:
        if self.tags and self.tags[-1] == "title" and "svg" in self.tags:
            self.svg_titles.append(data)


def _parse(html: str) -> _Collector:
    parser = _Collector()
    parser.feed(html)
    parser.close()
    return parser


def test_sweep_has_six_scenarios_with_plans(sweep: WhatIfResult) -> None:
    assert len(sweep.scenarios) == 6
    assert all(s.plan is not None for s in sweep.scenarios)


def test_html_parses_and_holds_the_charts(sweep: WhatIfResult) -> None:
    html = whatif_html(sweep)
    parsed = _parse(html)
    # Pareto scatter, one step-time heatmap (two knobs), and under <details>: step time, cost,
    # time breakdown, layout degrees
    assert parsed.tags.count("svg") == 6
    titles = " | ".join(parsed.svg_titles)
    for chart in (
        "Throughput against cost",
        "Step time",
        "$ per million tokens",
        "Exposed time per step by term",
        "Parallel degrees",
    ):
        assert chart in titles
    assert parsed.tags.count("rect") > 6 * 4
    assert html.count("<tr") >= 1 + 6  # the scenario table
    for scenario in sweep.scenarios:
        assert scenario_label(scenario) in html


def test_html_charts_have_axes_ticks_and_gridlines(sweep: WhatIfResult) -> None:
    html = whatif_html(sweep)
    pareto = html[html.index("Throughput against cost</title>") :]
    pareto = pareto[: pareto.index("</svg>")]
    assert "$ per million tokens (lower is better)" in pareto and "tokens/s, whole job" in pareto
    assert pareto.count('stroke="#e1e4e8"') >= 6  # gridlines on both axes
    assert pareto.count("<circle") == 6 and ">fastest<" in pareto  # the winner is marked
    bars = html[html.index("<title>Step time</title>") :]
    bars = bars[: bars.index("</svg>")]
    assert "seconds per step" in bars and bars.count('stroke="#e1e4e8"') >= 3


def test_html_heatmap_of_two_knobs_marks_the_fastest(sweep: WhatIfResult) -> None:
    from planner.report.html import fastest, step_heatmaps

    charts = step_heatmaps(sweep)
    assert len(charts) == 1  # two knobs: one grid
    grid = charts[0]
    win = fastest(sweep)
    assert win is not None and win.plan is not None
    assert grid.count('stroke="#d1242f"') == 1  # one outlined cell: the fastest scenario
    assert f">{format_seconds(win.plan.step_time_s)}<" in grid
    assert ">nic_gbps<" in grid and ">oversubscription<" in grid


def test_html_shows_memory_mfu_band_runners_up_and_provenance(sweep: WhatIfResult) -> None:
    from planner.report.markdown import memory_cell, short_mfu, step_with_band

    command = "layout whatif --model 405B --cluster hgx_h100x4096 --vary nic_gbps=200,400,800"
    html = whatif_html(sweep.model_copy(update={"command": command}))
    assert html_text(command) in html and f"layout {planner.__version__}" in html
    assert sweep.created[:10] in html
    for s in sweep.scenarios:
        assert s.plan is not None
        assert html_text(step_with_band(s.plan)) in html  # e.g. 5.35 s ±14%
        assert memory_cell(s.plan) in html and short_mfu(s.plan) in html
    assert "Runners-up in" in html and "why not" in html
    win = min(sweep.scenarios, key=lambda s: s.plan.step_time_s)  # type: ignore[union-attr]
    for alt in win.alternatives:
        assert html_text(alt.why_not or "") in html


def test_html_stays_compact_at_36_scenarios() -> None:
    """The per-scenario charts and tables sit under <details>: what is open is the summary,
    the overview charts and one table row per scenario."""
    result = planner.whatif(
        model="8B", cluster="hgx_h100x64", workload={"seq_len": 4096, "global_batch": 64},
        vary=["nic_gbps=200,400,800", "oversubscription=1,2,4", "domain_size=8,16",
              "precision=bf16,fp8"],
    )  # fmt: skip
    from planner.report.html import step_heatmaps

    html = whatif_html(result)
    opened = re.sub(r"<details>.*?</details>", "", html, flags=re.DOTALL)
    facets = len(step_heatmaps(result))  # one per value pair of the two other knobs: 4 or 6
    assert facets in (4, 6)
    assert opened.count("<svg") == 1 + facets  # the Pareto plot and the small multiples
    heights = [float(h) for h in re.findall(r'<svg class="chart"[^>]* height="([\d.]+)"', opened)]
    assert max(heights) < 400  # no chart grows a row per scenario
    assert opened.count("<tr") == 1 + 36 + 1 + 3  # scenario table, runners-up table
    assert html.count("<details>") == 4


def test_html_is_self_contained(sweep: WhatIfResult) -> None:
    html = whatif_html(sweep)
    parsed = _parse(html)
    assert "script" not in parsed.tags and "link" not in parsed.tags and "img" not in parsed.tags
    for name, value in parsed.attrs:
        if name in ("src", "href", "xlink:href"):
            assert not re.match(r"\s*(https?:)?//", value or ""), (name, value)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", html)
    assert not re.search(r"@import", html)
    assert "https://" not in html and "http://" not in html


def test_html_is_a_pure_function(sweep: WhatIfResult) -> None:
    assert whatif_html(sweep) == whatif_html(
        WhatIfResult.model_validate_json(sweep.model_dump_json())
    )


def test_markdown_has_the_same_content(sweep: WhatIfResult) -> None:
    md = whatif_markdown(sweep)
    assert md.startswith("# What-if: llama3.1-405b on hgx_h100x4096")
    for heading in ("## Scenarios", "## Where the time goes", "## Layout per scenario"):
        assert heading in md
    scenario_rows = [line for line in md.splitlines() if line.startswith("| nic_gbps=")]
    assert len(scenario_rows) == 3 * 6  # scenario, breakdown and layout tables
    assert "$" in md and "fastest" in md


def test_reports_render_infeasible_and_invalid_scenarios(mixed: WhatIfResult) -> None:
    statuses = [s.status for s in mixed.scenarios]
    assert statuses == ["infeasible", "invalid", "ok"]
    html = whatif_html(mixed)
    _parse(html)
    assert html.count("no plan") >= 2 * 3  # bar, stacked-bar and degree charts
    assert "infeasible:" in whatif_markdown(mixed) and "invalid:" in whatif_text(mixed)
    assert "2 scenario(s) have no feasible plan" in " ".join(whatif_text(mixed).split())


def test_time_to_train_section_when_tokens_are_given() -> None:
    result = planner.whatif(
        model="8B", cluster="hgx_h100x8", workload={"seq_len": 4096, "global_batch": 64},
        vary=["nic_gbps=200,400"], tokens=1e12,
    )  # fmt: skip
    assert "Time to train" in whatif_html(result) and "## Time to train" in whatif_markdown(result)
    assert "Time to train" not in whatif_html(result.model_copy(update={"scenarios": []}))


def test_svg_primitives_escape_and_scale() -> None:
    svg = bar_chart(["<a&b>"], [2.0], title="t<", value_format=lambda v: f"{v} s")
    assert "&lt;a&amp;b&gt;" in svg and "t&lt;" in svg
    stacked = stacked_bar_chart(["x", "y"], [("c", [1.0, None], "#000"), ("d", [1.0, None], "#111")],
                                title="s", value_format=str)  # fmt: skip
    assert "no plan" in stacked and stacked.count("<rect") == 2 + 2  # two legend swatches
    grid = degree_grid(["x"], ["TP", "mode"], [[8, "full"]], title="g")
    assert ">8<" in grid and ">full<" in grid


def test_migrate_text_side_by_side() -> None:
    result = planner.migrate(
        model="8B", from_cluster="hgx_h100x8", to_cluster="hgx_b200x8",
        workload={"seq_len": 4096, "global_batch": 64}, tokens=1e12,
    )  # fmt: skip
    text = migrate_text(result)
    for needle in (
        "from",
        "to",
        "layout",
        "$ / M tokens",
        "J / token",
        "time to train",
        "speed-up",
    ):
        assert needle in text


def test_cli_writes_both_reports(tmp_path: Path) -> None:
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    argv = ["whatif", "--model", "405B", "--cluster", "hgx_h100x4096", "--workers", "3",
            "--report", str(html), "--report", str(md)]  # fmt: skip
    argv += [arg for v in SWEEP for arg in ("--vary", v)]
    code, _, err = run_main(argv)
    assert code == 0, err
    page = html.read_text(encoding="utf-8")
    assert page.count("<svg") == 6
    assert html_text(" ".join(["layout", *argv])) in page  # the command line that made it
    assert md.read_text(encoding="utf-8").count("| nic_gbps=") == 18
    assert f"wrote {html}" in err and f"wrote {md}" in err


# --- headless Chromium ----------------------------------------------------------------------


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of pixel bytes) of an 8-bit, non-interlaced RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = bpp = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows = zlib.decompress(idat), width * bpp, []
    previous = bytearray(stride)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def chromium_screenshot(html: str, tmp_path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, pixel rows) of headless Chromium's 1200 x 1400 screenshot of ``html``."""
    page, shot = tmp_path / "report.html", tmp_path / "shot.png"
    page.write_text(html, encoding="utf-8")
    subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1400",
         f"--screenshot={shot}", page.as_uri()],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert shot.exists(), "chromium wrote no screenshot"
    data = shot.read_bytes()
    assert len(data) > 20_000
    return _png_pixels(data)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed")
def test_headless_chromium_screenshot_is_not_blank(sweep: WhatIfResult, tmp_path: Path) -> None:
    width, height, rows = chromium_screenshot(whatif_html(sweep), tmp_path)
    assert (width, height) == (1200, 1400)
    bpp = len(rows[0]) // width
    sample = {row[x : x + 3] for row in rows[::10] for x in range(0, len(row), bpp * 10)}
    assert len(sample) > 20  # many colours: text, bars, tables
    white = bytes((255, 255, 255))
    inked = sum(
        1 for row in rows[::10] for x in range(0, len(row), bpp * 10) if row[x : x + 3] != white
    )
    assert inked > 0.05 * (height // 10) * (width // 10)
