"""Text and Markdown renderings of a ValidationReport: pure functions of the report.

The Markdown (``docs/accuracy.md``) carries no wall times and dates only from the data, so that
regenerating it from the same code and data reproduces it byte for byte.
"""

from __future__ import annotations

from planner.accuracy.band import BandReport, RegimeBand
from planner.accuracy.rows import FRAMEWORK_ROWS_FILE
from planner.accuracy.run import RowResult, Summary, ValidationReport
from planner.report.quote import terminal_lines

COMMAND = "layout validate --markdown docs/accuracy.md"
"""The command that regenerates docs/accuracy.md."""
_HEADERS = ("id", "model", "cluster", "prec", "layout", "predicted", "measured", "error")
_LAYOUT_ORDER = ("tp", "pp", "vpp", "dp", "cp", "ep", "mbs", "recompute", "zero")


def layout_short(result: RowResult) -> str:
    """Layout of a row, ``*`` marking fields the source did not state (chosen by search).

    vpp, cp and ep are shown only when above 1.
    """
    values = (
        dict(result.stated)
        if result.layout is None
        else {k: getattr(result.layout, k) for k in _LAYOUT_ORDER}
    )
    parts = []
    for key in _LAYOUT_ORDER:
        value = values.get(key)
        if value is None or (key in ("vpp", "cp", "ep") and value == 1):
            continue
        if key == "recompute":
            text = str(value)
        elif key in ("mbs", "zero"):
            text = f"{key}{value}"
        else:
            text = f"{key.upper()}{value}"
        parts.append(text + ("" if key in result.stated else "*"))
    return " ".join(parts)


def _tokens(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def _pct(value: float | None, *, signed: bool = True) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f}%" if signed else f"{100 * value:.1f}%"


def row_cells(result: RowResult) -> list[str]:
    """The table cells of one row."""
    if result.status == "ok":
        error = _pct(result.error) + ("" if result.fits in (True, None) else " !")
    else:
        error = "n/a"
    return [
        result.id,
        result.model,
        result.cluster,
        result.precision,
        layout_short(result),
        _tokens(result.predicted_tokens_per_s_per_gpu),
        _tokens(result.measured_tokens_per_s_per_gpu),
        error,
    ]


def summary_cells(summary: Summary) -> list[str]:
    """The table cells of one summary."""
    worst = f" ({summary.worst})" if summary.worst else ""
    return [
        summary.group,
        str(summary.rows),
        str(summary.evaluated),
        str(summary.not_evaluated),
        _pct(summary.median_abs_error, signed=False),
        _pct(summary.max_abs_error, signed=False) + worst,
        _pct(summary.bias),
    ]


_SUMMARY_HEADERS = ("group", "rows", "evaluated", "not eval.", "median |err|", "max |err|", "bias")


def aligned_table(headers: tuple[str, ...], rows: list[list[str]], right: set[int]) -> list[str]:
    """A plain-text table with the columns in ``right`` right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str] | tuple[str, ...]) -> str:
        out = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _notes(report: ValidationReport) -> list[tuple[str, str]]:
    notes = [(r.id, f"not evaluated: {r.reason}") for r in report.rows if r.status != "ok"]
    notes += [
        (r.id, f"predicted not to fit (the real run did): {r.fit_note}")
        for r in report.rows
        if r.status == "ok" and r.fits is False
    ]
    return notes


_HELDOUT_HEADERS = ("group", "held-out rows", "median |err|", "max |err|", "bias")


def _stats_cells(name: str, errors: list[float]) -> list[str]:
    ordered = sorted(abs(e) for e in errors)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return [
        name,
        str(len(errors)),
        _pct(median, signed=False),
        _pct(ordered[-1], signed=False),
        _pct(sum(errors) / len(errors)),
    ]


def out_of_sample_errors(report: ValidationReport) -> dict[str, float]:
    """Row id -> an error no fit saw: the leave-one-source-out error stored in the overlays for
    a fitted row (``band.errors``), the row's own error for a row no overlay was fitted on (a
    framework that does not calibrate, a family too small to fit); {} without stored bands."""
    band = report.band
    if band is None or not band.errors:
        return {}
    fitted = set(band.fitted_rows)
    out = {}
    for row in report.rows:
        if row.id in band.errors:
            out[row.id] = band.errors[row.id]
        elif row.id not in fitted and row.error is not None:
            out[row.id] = row.error
    return out


def heldout_tables(report: ValidationReport) -> tuple[list[list[str]], list[list[str]]]:
    """The out-of-sample errors (:func:`out_of_sample_errors`) overall and per family x regime,
    then per framework profile (the rows' ``framework``): ([], []) without them."""
    errors = out_of_sample_errors(report)
    rows = {r.id: r for r in report.rows if r.id in errors}
    if not rows:
        return [], []
    groups: dict[str, list[float]] = {}
    frameworks: dict[str, list[float]] = {}
    for rid, row in rows.items():
        groups.setdefault(f"{row.accelerator} {row.kind}", []).append(errors[rid])
        frameworks.setdefault(row.framework, []).append(errors[rid])
    overall = [errors[rid] for rid in rows]
    by_group = [_stats_cells("all", overall)]
    by_group += [_stats_cells(name, groups[name]) for name in sorted(groups)]
    by_framework = [_stats_cells(name, frameworks[name]) for name in sorted(frameworks)]
    return by_group, by_framework


def validation_text(report: ValidationReport) -> str:
    """The terminal answer of ``layout validate``."""
    lines = [
        f"validation set: {report.data} (data as of {report.data_date}); "
        f"tokens/s/GPU predicted vs measured, error = predicted/measured - 1",
        "",
        *aligned_table(_HEADERS, [row_cells(r) for r in report.rows], {5, 6, 7}),
        "* = not stated by the source, chosen by search;  ! = planner predicts it does not fit",
    ]
    by_group, _ = heldout_tables(report)
    if by_group:
        lines += [
            "",
            "out of sample (Megatron-LM rows: each source predicted by factors fitted without "
            "it; other frameworks' rows: never fitted):",
            *aligned_table(_HELDOUT_HEADERS, by_group, {1, 2, 3, 4}),
        ]
    lines += [
        "",
        "every row with the shipped factors (in-sample for the Megatron-LM rows they are "
        "fitted on):"
        if by_group
        else "",
        *aligned_table(
            _SUMMARY_HEADERS,
            [summary_cells(s) for s in (report.overall, *report.families)],
            {1, 2, 3, 4, 5, 6},
        ),
    ]
    notes = _notes(report)
    if notes:
        lines += ["", *(f"{rid}: {text}" for rid, text in notes)]
    overall = report.overall
    lines += [
        "",
        f"{overall.evaluated} of {overall.rows} rows evaluated "
        f"({overall.not_evaluated} not evaluated) in {report.total_time_s:.1f} s",
    ]
    return terminal_lines(lines)  # row ids and notes come from a user's --rows file


def markdown_row(cells: list[str] | tuple[str, ...]) -> str:
    """One Markdown table row (pipes in cells escaped)."""
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def markdown_table(headers: tuple[str, ...], rows: list[list[str]], right: set[int]) -> list[str]:
    """A Markdown table with the columns in ``right`` right-aligned."""
    rule = ["---:" if i in right else "---" for i in range(len(headers))]
    return [markdown_row(headers), markdown_row(rule), *(markdown_row(r) for r in rows)]


def validation_markdown(report: ValidationReport) -> str:
    """``docs/accuracy.md``: the same table and summaries, deterministic for given code and data."""
    lines = [
        "# Accuracy: predicted vs published training throughput",
        "",
        f"Generated by `{COMMAND}` from `{report.data}` and the framework rows beside it "
        f"(`{FRAMEWORK_ROWS_FILE}`; sources dated up to "
        f"{report.data_date}; every row names its source, see `tests/validation/README.md`). "
        "Do not edit by hand.",
        "",
        "What is compared: tokens/s per GPU, the planner's prediction against the published "
        "measurement (MFU is not compared: sources count FLOPs differently). "
        "Error = predicted / measured - 1; positive means the planner is optimistic. "
        "Layout fields the source states are pinned; the rest (`*`) are chosen by "
        "`layout search`. Rows the planner rejects are listed with the reason and left out "
        "of the statistics.",
        "",
        "Framework settings the tables leave out (MoE dispatcher, EP overlap, recompute modules, "
        "CUDA-graph scope, loss implementation, an unstated virtual pipeline) come from the "
        "recipe each run used, `tests/validation/recipes.yaml`, which cites it. Each row runs "
        "under its framework's profile (`topologies/frameworks/`).",
        "",
        *_heldout_markdown(report),
        "## In sample",
        "",
        "Every row predicted with the shipped overlays: in-sample for the Megatron-LM rows the "
        "factors are fitted on (`layout calibrate --fit`), out of sample for the rest; the "
        "out-of-sample errors of every row are above.",
        "",
        *markdown_table(
            _SUMMARY_HEADERS,
            [summary_cells(s) for s in (report.overall, *report.families)],
            {1, 2, 3, 4, 5, 6},
        ),
        "",
        "## Rows",
        "",
        *markdown_table(_HEADERS, [row_cells(r) for r in report.rows], {5, 6, 7}),
        "",
        "`*` not stated by the source, chosen by search; `!` the planner predicts the layout "
        "does not fit memory (the real run did).",
    ]
    notes = _notes(report)
    if notes:
        lines += ["", "## Notes", "", *(f"- **{rid}**: {text}" for rid, text in notes)]
    if report.band is not None:
        lines += ["", *band_markdown(report.band)]
    return "\n".join(lines) + "\n"


def _heldout_markdown(report: ValidationReport) -> list[str]:
    """The out-of-sample section that opens docs/accuracy.md (nothing without stored errors)."""
    by_group, by_framework = heldout_tables(report)
    if not by_group:
        return []
    return [
        "## Out of sample",
        "",
        "The efficiency factors are fitted on the Megatron-LM rows only (the profile that "
        "`calibrates`, `topologies/frameworks/megatron.yaml`: its sources state their recipes). "
        "Each Megatron-LM source (a row id's letters) is predicted by factors refitted on the "
        "family's other sources (`python benchmarks/cross_validate.py`; stored in "
        "`topologies/calibration/<family>.yaml`, `heldout:`). The other frameworks' rows "
        "(torchtitan, FSDP, DeepSpeed, Nanotron, MaxText, HAI-LLM) are never fitted: they are "
        "predicted through their framework profile with the Megatron-fitted factors, so their "
        "errors test the profiles. A family with fewer than 6 Megatron-LM rows (TPU, AMD) is not "
        "fitted: its catalog priors are scaled by the fitted families' mean fitted/prior ratio "
        "(`planner/catalog/transfer.py`, checked leaving one family out in docs/calibration.md), "
        "and its rows are held out with it. Megatron-LM rows marked `fit: false` are never "
        "fitted either (NeMo's long-sequence tables, the LS rows: fitted, they made every "
        "held-out check worse; docs/calibration.md; and the DGX rows, DGX Cloud's NeMo tables "
        "added after the fit as a check on it). These are the errors to expect on a run "
        "no fit saw.",
        "",
        *markdown_table(_HELDOUT_HEADERS, by_group, {1, 2, 3, 4}),
        "",
        "Per framework profile:",
        "",
        *markdown_table(("framework", *_HELDOUT_HEADERS[1:]), by_framework, {1, 2, 3, 4}),
        "",
    ]


_BAND_HEADERS = (
    "family",
    "regime",
    "held-out rows",
    "in-sample median",
    "held-out median",
    "band (before widening)",
    "inside",
    "inside (band without the row)",
    "validated",
)


def _band_cells(row: RegimeBand) -> list[str]:
    def share(n: int) -> str:
        return f"{n} ({100 * n / row.rows:.0f}%)"

    in_sample = "-" if row.in_sample_median_pct is None else f"{row.in_sample_median_pct:.1f}%"
    return [
        row.family,
        row.regime,
        str(row.rows),
        in_sample,
        f"{row.heldout_median_pct:.1f}%",
        f"±{row.band_pct:.1f}%",
        share(row.inside),
        share(row.inside_without_row),
        row.envelope or "-",
    ]


def _coverage_sentence(band: BandReport) -> str:
    """Totals over the training bands, and a plain statement for each check below the level."""
    training = [r for r in band.regimes if r.family != "pooled" and r.regime != "serving"]
    rows = sum(r.rows for r in training)
    inside = sum(r.inside for r in training)
    loo = sum(r.inside_without_row for r in training)
    text = (
        f"On the {rows} leave-one-source-out training rows, {inside} ({100 * inside / rows:.0f}%) "
        f"lie inside their regime's band (by construction about the level) and {loo} "
        f"({100 * loo / rows:.0f}%) inside the band recomputed without them."
    )
    low = [c for c in band.checks if c.inside / c.rows < band.level]
    for check in low:
        text += (
            f" On `{check.name}` coverage is below the stated {100 * band.level:.0f}%: "
            f"{check.inside} of {check.rows} rows."
        )
    return text


def band_markdown(band: BandReport) -> list[str]:
    """The docs/accuracy.md section on the ± band: level, stored bands, widening, coverage."""
    level = f"{100 * band.level:.0f}%"
    widen = band.widen.model_dump()
    return [
        "## The ± band",
        "",
        f"Every plan prints its prediction with a band, `step : 52.6 s (±14%, {level} band)`: the "
        f"|error| a new run of the same regime is expected to stay within {level} of the time. "
        "It comes from out-of-sample errors, not from the in-sample ones above: leave one source "
        "out (a row id's letter), refit the family's factors on its other sources, predict the "
        f"held-out rows; the band is the split-conformal {level} quantile of their |error| "
        "(the ceil((n+1) x level)-th smallest). `python benchmarks/cross_validate.py --write` "
        "stores the errors and bands in `topologies/calibration/<family>.yaml` (`heldout:`) "
        "without touching the fitted factors. Serving bands use the serving rows' held-out "
        "errors: each row predicted with the engine's two overheads fitted without its source "
        "(`benchmarks/fit_serving_engine.py`; the GPU terms are the training fit's). A family "
        "without rows takes the pooled band of its regime; a plan "
        "that extrapolates (below) multiplies its band by the factors of `topologies/trust.yaml`, "
        "each with its justification there, and says so in a warning.",
        "",
        *markdown_table(_BAND_HEADERS, [_band_cells(r) for r in band.regimes], {2, 3, 4, 5, 6, 7}),
        "",
        _coverage_sentence(band),
        "",
        *markdown_table(
            ("extrapolation", "band x"),
            [[name, f"{value['factor']:g}"] for name, value in widen.items()],
            {1},
        ),
        "",
        "Coverage of the printed band on published runs no fit saw (each row predicted with its "
        "published layout, its band as the plan prints it):",
        "",
        *markdown_table(
            ("benchmark", "rows", "inside", "median band", "median |err|", "measured"),
            [
                [
                    f"`{c.command}`",
                    str(c.rows),
                    f"{c.inside} ({100 * c.inside / c.rows:.0f}%)",
                    f"±{c.median_band_pct:.1f}%",
                    f"{c.median_abs_error_pct:.1f}%",
                    c.date,
                ]
                for c in band.checks
            ],
            {1, 2, 3, 4},
        ),
        "",
        "These sets are not a blind test: their median errors were published before the "
        "widening factors were chosen (by judgment, not fitted to them), and the long-sequence "
        "rows measured the one widening they exercise (`beyond_longest_sequence`), so their "
        "coverage is in sample for it. Their rows share models and a software release, so "
        "misses come in groups rather than one at a time.",
    ]
