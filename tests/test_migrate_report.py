"""Migration reports (``layout migrate --report``): the HTML page parses and holds its three
charts (each side's step by term, tokens/s, memory), the Markdown the same tables, and both say
what the terminal answer says: the speed-up, the layout changes and why, the old layout ported."""

from __future__ import annotations

from pathlib import Path

import pytest

import planner
from planner.report.migrate_report import change_rows, migrate_html, migrate_markdown, side_rows
from planner.report.quote import html_text
from planner.specs.scenarios import MigrateResult
from tests.test_migrate import run_main
from tests.test_report import _parse

ARGS = ["migrate", "--model", "70B", "--from", "hgx_h100x64", "--to", "hgx_b200x64"]


@pytest.fixture(scope="module")
def result() -> MigrateResult:
    """Llama 3.1 70B from 64 H100 to 64 B200: less pipelining, more data parallelism."""
    return planner.migrate(model="70B", from_cluster="hgx_h100x64", to_cluster="hgx_b200x64")


def test_html_parses_and_holds_three_charts(result: MigrateResult) -> None:
    page = migrate_html(result, command="layout migrate --model 70B")
    parsed = _parse(page)
    assert parsed.tags.count("svg") == 3
    titles = " | ".join(parsed.svg_titles)
    for chart in ("Exposed time per step by term", "Tokens/s per GPU", "Peak memory per GPU"):
        assert chart in titles
    assert "<script" not in page
    assert f"{result.speedup:.2f}x the tokens/s" in page
    assert html_text(result.old_layout_note) in page
    # the old best, the old layout ported (it runs on B200), the new best: one bar row each
    rows = page[page.index("Exposed time per step by term</title>") :]
    rows = rows[: rows.index("</svg>")]
    for label in ("from: hgx_h100x64", "old layout on hgx_b200x64", "to: hgx_b200x64"):
        assert f">{label}<" in rows


def test_tables_hold_both_sides_and_every_change(result: MigrateResult) -> None:
    sides = {row[0]: row[1:] for row in side_rows(result)}
    assert sides["cluster"] == ["hgx_h100x64", "hgx_b200x64"]
    assert sides["layout"] == [result.from_plan.layout_text(), result.to_plan.layout_text()]
    assert [row[0] for row in change_rows(result)] == [c.field for c in result.changes]
    assert result.changes  # 70B moves off pipelining on B200's larger memory
    text = migrate_markdown(result)
    assert text.startswith("# Moving llama3.1-70b from hgx_h100x64 to hgx_b200x64\n")
    for heading in ("## The two plans", "## Layout changes and why", "## Exposed time per step"):
        assert heading in text
    assert text.count("| to: hgx_b200x64 |") == 2  # the time and the memory tables


def test_cli_writes_both_reports_and_the_api_the_same_page(
    result: MigrateResult, tmp_path: Path
) -> None:
    html, md = tmp_path / "m.html", tmp_path / "m.md"
    code, out, err = run_main([*ARGS, "--report", str(html), "--report", str(md)])
    assert code == 0, err
    assert "speed-up:" in out
    assert html.read_text(encoding="utf-8").count("<svg") == 3
    assert "## Layout changes and why" in md.read_text(encoding="utf-8")
    assert f"wrote {html}" in err and f"wrote {md}" in err
    assert planner.render_report(result) == migrate_html(result)
    assert planner.render_report(result, format="markdown") == migrate_markdown(result)


def test_migrate_takes_workload_settings_by_their_cli_names(result: MigrateResult) -> None:
    """As search does: ``seq_len=4096`` is ``workload={"seq_len": 4096}``."""
    named = planner.migrate(
        model="70B", from_cluster="hgx_h100x64", to_cluster="hgx_b200x64", seq_len=4096
    )
    given = planner.migrate(
        model="70B", from_cluster="hgx_h100x64", to_cluster="hgx_b200x64",
        workload={"seq_len": 4096},
    )  # fmt: skip
    assert named.workload == given.workload and named.workload.seq_len == 4096
    for side in ("from_plan", "to_plan"):
        a, b = getattr(named, side), getattr(given, side)
        assert (a.layout, a.step_time_s) == (b.layout, b.step_time_s)
