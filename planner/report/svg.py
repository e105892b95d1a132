"""Hand-written inline SVG charts for the HTML reports: no JavaScript, no fonts or images to
fetch, no plotting dependency. Each function is pure: data in, one ``<svg>`` element out.

Charts are horizontal bars, so that long scenario labels stay readable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from planner.report.quote import html_text

WIDTH = 760
"""Chart width in CSS pixels (the SVG also scales with the page through ``viewBox``)."""
ROW = 26
"""Height of one bar row (px)."""
TOP = 34
"""Space above the first row for the title (px)."""
CHAR_PX = 6.6
"""Approximate width of one character of 12 px sans-serif text (for label columns)."""
TITLE_CHAR_PX = 8.2
"""Approximate width of one character of a 14 px bold title."""
BAR_COLOR = "#3b6ea5"
NO_DATA = "#b0b0b0"
TERM_COLORS: dict[str, str] = {
    "compute": "#4c72b0",
    "tp_comm": "#dd8452",
    "cp_comm": "#937860",
    "ep_comm": "#da8bc3",
    "moe_sync": "#ccb974",
    "offload": "#64b5cd",
    "pp_bubble": "#c44e52",
    "pp_comm": "#8172b3",
    "dp_comm": "#55a868",
    "optimizer": "#8c8c8c",
    "step_sync": "#bcbcbc",
}
"""Colour per time-breakdown term (seaborn 'deep' palette); unknown terms get grey."""

Formatter = Callable[[float], str]


LABEL_MAX_PX = 380.0
"""Widest row-label column (px): a ranked layout's label ('4. TP2 PP16 VPP2 DP64 EP16 mbs1 none
zero1 fp8') fits whole."""
LEGEND_CHAR_PX = 7.4
"""Width of one legend character (px): wider than CHAR_PX, as a browser's default sans-serif
(DejaVu Sans) sets 12 px text, so that the entries of a row do not run into each other."""


def _label_width(labels: Sequence[str]) -> float:
    return min(LABEL_MAX_PX, 16 + CHAR_PX * max((len(label) for label in labels), default=4))


def _open(height: float, title: str, width: int = WIDTH) -> list[str]:
    return [
        f'<svg class="chart" role="img" viewBox="0 0 {width} {height:.0f}" '
        f'width="{width}" height="{height:.0f}" font-family="sans-serif" font-size="12">',
        f"<title>{html_text(title)}</title>",
        f'<text x="0" y="16" font-size="14" font-weight="bold">{html_text(title)}</text>',
    ]


def _row_label(y: float, label_w: float, label: str) -> str:
    return (
        f'<text x="{label_w - 8:.1f}" y="{y + ROW / 2 + 4:.1f}" text-anchor="end">'
        f"{html_text(label)}</text>"
    )


def _no_plan(y: float, label_w: float) -> str:
    """The grey 'no plan' marker of a scenario row the search found infeasible."""
    return f'<text x="{label_w:.1f}" y="{y + ROW / 2 + 4:.1f}" fill="{NO_DATA}">no plan</text>'


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float | None],
    *,
    title: str,
    value_format: Formatter,
    color: str = BAR_COLOR,
    width: int = WIDTH,
    axis_label: str = "",
) -> str:
    """Horizontal bars, one per label, over a value axis with ticks and gridlines; a None
    value is drawn as 'no plan'.

    >>> "<rect" in bar_chart(["a"], [1.0], title="t", value_format=str)
    True
    """
    label_w = _label_width(labels)
    bar_w = width - label_w - 70
    ticks = nice_ticks(0.0, max((v for v in values if v is not None), default=0.0) or 1.0, 4)
    peak = ticks[-1]
    bottom = TOP + ROW * len(labels) + 4
    parts = _open(bottom + AXIS_SPACE, title, width)
    parts += _x_axis(label_w, label_w + bar_w, bottom, ticks, lambda v: label_w + bar_w * v / peak,
                     top=TOP, label=axis_label or title, fmt=value_format)  # fmt: skip
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = TOP + i * ROW
        parts.append(_row_label(y, label_w, label))
        if value is None:
            parts.append(_no_plan(y, label_w))
            continue
        w = max(1.0, bar_w * value / peak)
        parts.append(
            f'<rect x="{label_w:.1f}" y="{y + 4:.1f}" width="{w:.1f}" height="{ROW - 8}" '
            f'fill="{color}"><title>{html_text(label)}: {html_text(value_format(value))}</title></rect>'
        )
        parts.append(
            f'<text x="{label_w + w + 6:.1f}" y="{y + ROW / 2 + 4:.1f}">'
            f"{html_text(value_format(value))}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


LEGEND_ROW = 18
"""Height of one legend row (px)."""


def _legend_rows(
    items: Sequence[tuple[str, str]], x0: float, x1: float
) -> list[list[tuple[str, str]]]:
    """The legend's items in rows that fit between ``x0`` and ``x1``, in order (an item wider
    than the space gets a row of its own).

    >>> [len(r) for r in _legend_rows([("compute", "#000")] * 5, 0, 200)]
    [2, 2, 1]
    """
    rows: list[list[tuple[str, str]]] = [[]]
    x = x0
    for item in items:
        step = 28 + LEGEND_CHAR_PX * len(item[0])
        if rows[-1] and x + step > x1:
            rows.append([])
            x = x0
        rows[-1].append(item)
        x += step
    return rows


def _legend(
    items: Sequence[tuple[str, str]], y: float, x0: float, x1: float = WIDTH
) -> tuple[list[str], float]:
    """The legend's SVG, wrapped into rows between ``x0`` and ``x1`` from baseline ``y``, and
    the height it takes beyond one row."""
    parts = []
    rows = _legend_rows(items, x0, x1)
    for r, row in enumerate(rows):
        x, base = x0, y + r * LEGEND_ROW
        for name, color in row:
            parts.append(
                f'<rect x="{x:.1f}" y="{base - 10:.1f}" width="12" height="12" fill="{color}"/>'
            )
            parts.append(f'<text x="{x + 16:.1f}" y="{base:.1f}">{html_text(name)}</text>')
            x += 28 + LEGEND_CHAR_PX * len(name)
    return parts, (len(rows) - 1) * LEGEND_ROW


def stacked_bar_chart(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None], str]],
    *,
    title: str,
    value_format: Formatter,
    axis_label: str = "",
    limit: tuple[str, float] | None = None,
    width: int = WIDTH,
) -> str:
    """Horizontal stacked bars: ``series`` is (name, one value per label, colour); the legend
    sits under the title, a value axis with ticks and gridlines under the bars. Rows whose
    values are all None are drawn as 'no plan'. ``limit`` (name, value) draws a dashed
    vertical line at the value across the rows, named at its top (a capacity).

    >>> chart = stacked_bar_chart(["a"], [("x", [3.0], "#000")], title="t", value_format=str,
    ...                           limit=("usable", 5.0))
    >>> 'stroke-dasharray' in chart and ">usable 5.0<" in chart
    True
    """
    label_w = _label_width(labels)
    bar_w = width - label_w - 90
    totals = [sum(s[1][i] or 0.0 for s in series) for i in range(len(labels))]
    high = max([*totals, limit[1] if limit is not None else 0.0])
    ticks = nice_ticks(0.0, high or 1.0, 4)
    peak = ticks[-1]
    legend, extra = _legend([(name, color) for name, _, color in series], TOP + 4, label_w, width)
    top = TOP + 18 + extra + (LEGEND_ROW if limit is not None else 0)
    bottom = top + ROW * len(labels) + 4
    parts = _open(bottom + AXIS_SPACE, title, width)
    parts += legend
    parts += _x_axis(label_w, label_w + bar_w, bottom, ticks, lambda v: label_w + bar_w * v / peak,
                     top=top, label=axis_label or title, fmt=value_format)  # fmt: skip
    if limit is not None:
        x = label_w + bar_w * limit[1] / peak
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 2:.1f}" x2="{x:.1f}" y2="{bottom:.1f}" '
            'stroke="#c44e52" stroke-width="1.5" stroke-dasharray="5,3"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{top - 4:.1f}" text-anchor="middle" fill="#c44e52">'
            f"{html_text(limit[0])} {html_text(value_format(limit[1]))}</text>"
        )
    for i, label in enumerate(labels):
        y = top + i * ROW
        parts.append(_row_label(y, label_w, label))
        if all(s[1][i] is None for s in series):
            parts.append(_no_plan(y, label_w))
            continue
        x = label_w
        for name, values, color in series:
            value = values[i] or 0.0
            w = bar_w * value / peak
            if w <= 0:
                continue
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 4:.1f}" width="{w:.1f}" height="{ROW - 8}" '
                f'fill="{color}"><title>{html_text(label)}: {html_text(name)} '
                f"{html_text(value_format(value))}</title></rect>"
            )
            x += w
        parts.append(
            f'<text x="{x + 6:.1f}" y="{y + ROW / 2 + 4:.1f}">{html_text(value_format(totals[i]))}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def diverging_bar_chart(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float], str]],
    *,
    title: str,
    value_format: Formatter,
    axis_label: str = "",
    width: int = WIDTH,
) -> str:
    """Horizontal bars of signed parts around a zero line: per row, ``series`` (name, one value
    per label, colour) stack to the right when positive and to the left when negative, and a
    black tick marks the row's net sum, written beside it. For the differences of several
    layouts from one (what each term adds or saves).

    >>> chart = diverging_bar_chart(["b"], [("x", [2.0], "#111"), ("y", [-0.5], "#222")],
    ...                             title="t", value_format=str)
    >>> chart.count("<rect") - 2, ">1.5<" in chart  # two parts, the net written (less legend)
    (2, True)
    """
    label_w = _label_width(labels)
    bar_w = width - label_w - 110
    ups = [sum(max(0.0, s[1][i]) for s in series) for i in range(len(labels))]
    downs = [sum(min(0.0, s[1][i]) for s in series) for i in range(len(labels))]
    reach = max([*ups, *(-d for d in downs)], default=0.0) or 1.0
    ticks = nice_ticks(0.0, reach, 3)
    span = ticks[-1]
    scale = bar_w / (2 * span)
    zero = label_w + bar_w / 2
    legend, extra = _legend([(name, color) for name, _, color in series], TOP + 4, label_w, width)
    top = TOP + 18 + extra
    bottom = top + ROW * len(labels) + 4
    parts = _open(bottom + AXIS_SPACE, title, width)
    parts += legend
    both = [-t for t in reversed(ticks[1:])] + ticks
    parts += _x_axis(label_w, label_w + bar_w, bottom, both, lambda v: zero + v * scale, top=top,
                     label=axis_label or title, fmt=value_format)  # fmt: skip
    parts.append(
        f'<line x1="{zero:.1f}" y1="{top:.1f}" x2="{zero:.1f}" y2="{bottom:.1f}" '
        f'stroke="{AXIS_COLOR}"/>'
    )
    for i, label in enumerate(labels):
        y = top + i * ROW
        parts.append(_row_label(y, label_w, label))
        right, left = zero, zero
        for name, values, color in series:
            value = values[i]
            w = abs(value) * scale
            if w <= 0:
                continue
            x = right if value > 0 else left - w
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 6:.1f}" width="{w:.1f}" height="{ROW - 12}" '
                f'fill="{color}"><title>{html_text(label)}: {html_text(name)} '
                f"{html_text(value_format(value))}</title></rect>"
            )
            if value > 0:
                right += w
            else:
                left -= w
        net = sum(s[1][i] for s in series)
        x = zero + net * scale
        parts.append(
            f'<line x1="{x:.1f}" y1="{y + 2:.1f}" x2="{x:.1f}" y2="{y + ROW - 2:.1f}" '
            'stroke="#000000" stroke-width="2"/>'
        )
        parts.append(
            f'<text x="{right + 6:.1f}" y="{y + ROW / 2 + 4:.1f}">{html_text(value_format(net))}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _shade(value: object, column_max: float) -> str:
    """Cell colour: light grey for 1 (or text), light to mid blue for larger degrees (log scale)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 1 or column_max <= 1:
        return "#f4f4f4"
    strength = math.log2(value) / math.log2(column_max)
    low, high = (222, 235, 247), (123, 165, 214)  # light blue -> mid blue, dark text stays legible
    red, green, blue = (round(a + (b - a) * strength) for a, b in zip(low, high, strict=True))
    return f"rgb({red},{green},{blue})"


def degree_grid(
    labels: Sequence[str],
    columns: Sequence[str],
    rows: Sequence[Sequence[int | str] | None],
    *,
    title: str,
) -> str:
    """A grid of layout fields per scenario: one row per label, one cell per column, shaded by
    the degree's size on a log scale within its column. A None row is drawn as 'no plan'."""
    label_w = _label_width(labels)
    cell_w = min(80.0, (WIDTH - label_w) / max(1, len(columns)))
    top = TOP + 18
    parts = _open(top + ROW * len(labels) + 8, title)
    maxima = [
        max((r[j] for r in rows if r is not None and isinstance(r[j], int)), default=1)
        for j in range(len(columns))
    ]
    for j, column in enumerate(columns):
        x = label_w + j * cell_w + cell_w / 2
        parts.append(
            f'<text x="{x:.1f}" y="{TOP + 8}" text-anchor="middle" font-weight="bold">'
            f"{html_text(column)}</text>"
        )
    for i, (label, row) in enumerate(zip(labels, rows, strict=True)):
        y = top + i * ROW
        parts.append(_row_label(y, label_w, label))
        if row is None:
            parts.append(_no_plan(y, label_w))
            continue
        for j, value in enumerate(row):
            x = label_w + j * cell_w
            parts.append(
                f'<rect x="{x + 1:.1f}" y="{y + 2:.1f}" width="{cell_w - 2:.1f}" height="{ROW - 4}" '
                f'fill="{_shade(value, float(maxima[j]))}"/>'
            )
            parts.append(
                f'<text x="{x + cell_w / 2:.1f}" y="{y + ROW / 2 + 4:.1f}" '
                f'text-anchor="middle">{html_text(str(value))}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


# --- axes, scatter and heatmap ------------------------------------------------------------------

AXIS_COLOR = "#57606a"
GRID_COLOR = "#e1e4e8"
AXIS_SPACE = 40
"""Height under a chart for the value axis: tick labels and the axis label (px)."""


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) covering [low, high].

    >>> nice_ticks(0, 9.3)
    [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    >>> nice_ticks(0.43, 0.61, 4)
    [0.4, 0.45, 0.5, 0.55, 0.6, 0.65]
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0, 1.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = float(math.floor(low / step) * step)
    ticks, value = [], start
    while value < high + step * 0.999:
        ticks.append(round(float(value), 12))
        value += step
    return ticks


def compact(value: float) -> str:
    """A tick label: 3 significant digits with k/M suffixes (``12.5k``, ``1.2M``, ``0.05``).

    >>> compact(12500), compact(0.05), compact(2e6), compact(0.0)
    ('12.5k', '0.05', '2M', '0')
    """
    size = abs(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if size >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def _x_axis(
    x0: float, x1: float, y: float, ticks: Sequence[float], to_x: Callable[[float], float],
    *, top: float, label: str, fmt: Formatter = compact,
) -> list[str]:  # fmt: skip
    """Vertical gridlines from ``top`` to ``y``, the axis line at ``y``, tick labels and the
    axis label under it."""
    parts = [f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" stroke="{AXIS_COLOR}"/>']
    for tick in ticks:
        x = to_x(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{y:.1f}" stroke="{GRID_COLOR}"/>'
        )
        parts.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y + 4:.1f}" '
                     f'stroke="{AXIS_COLOR}"/>')  # fmt: skip
        parts.append(
            f'<text x="{x:.1f}" y="{y + 16:.1f}" text-anchor="middle" fill="{AXIS_COLOR}">'
            f"{html_text('0' if tick == 0 else fmt(tick))}</text>"
        )
    parts.append(
        f'<text x="{(x0 + x1) / 2:.1f}" y="{y + 32:.1f}" text-anchor="middle">'
        f"{html_text(label)}</text>"
    )
    return parts


def _y_axis(
    x: float, y0: float, y1: float, ticks: Sequence[float], to_y: Callable[[float], float],
    *, right: float, label: str, fmt: Formatter = compact,
) -> list[str]:  # fmt: skip
    """Horizontal gridlines from ``x`` to ``right``, the axis line at ``x``, tick labels to its
    left and the axis label turned along it."""
    parts = [f'<line x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}" stroke="{AXIS_COLOR}"/>']
    for tick in ticks:
        y = to_y(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" stroke="{GRID_COLOR}"/>'
        )
        parts.append(f'<line x1="{x - 4:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y:.1f}" '
                     f'stroke="{AXIS_COLOR}"/>')  # fmt: skip
        parts.append(
            f'<text x="{x - 7:.1f}" y="{y + 4:.1f}" text-anchor="end" fill="{AXIS_COLOR}">'
            f"{html_text(fmt(tick))}</text>"
        )
    mid = (y0 + y1) / 2
    parts.append(
        f'<text x="12" y="{mid:.1f}" text-anchor="middle" transform="rotate(-90 12 {mid:.1f})">'
        f"{html_text(label)}</text>"
    )
    return parts


class Point:
    """One scatter point: its label, coordinates and how it is drawn."""

    def __init__(self, label: str, x: float, y: float, *, mark: str = "") -> None:
        self.label, self.x, self.y, self.mark = label, x, y, mark


def pareto_front(points: Sequence[Point]) -> list[int]:
    """Indices of the points no other point beats on both axes (lower x, higher y), by x.

    >>> pareto_front([Point("a", 1, 1), Point("b", 2, 3), Point("c", 3, 2), Point("d", 1, 2)])
    [3, 1]
    """
    front = []
    for i, p in enumerate(points):
        beaten = any(
            (q.x <= p.x and q.y >= p.y) and (q.x < p.x or q.y > p.y)
            for j, q in enumerate(points) if j != i
        )  # fmt: skip
        if not beaten:
            front.append(i)
    return sorted(front, key=lambda i: (points[i].x, -points[i].y))


def scatter_chart(
    points: Sequence[Point],
    *,
    title: str,
    x_label: str,
    y_label: str,
    width: int = 520,
    height: int = 340,
    x_format: Formatter = compact,
    y_format: Formatter = compact,
) -> str:
    """Points on linear axes with ticks and gridlines; the Pareto front (lower x, higher y) is
    joined by a line, and points with a ``mark`` ('winner', 'cheapest') are drawn larger and
    labelled.

    >>> svg = scatter_chart([Point("a", 1, 2, mark="winner")], title="t", x_label="x", y_label="y")
    >>> "<circle" in svg and "winner" in svg
    True
    """
    # 28 px right of the plot: room for the last x tick's label
    left, right, top, bottom = 64.0, width - 28.0, TOP + 8.0, height - 44.0
    xs, ys = [p.x for p in points] or [0.0], [p.y for p in points] or [0.0]
    x_ticks = nice_ticks(min(xs), max(xs), 5)
    y_ticks = nice_ticks(min(ys), max(ys), 5)
    x_lo, x_hi, y_lo, y_hi = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]

    def to_x(v: float) -> float:
        return left + (right - left) * (v - x_lo) / ((x_hi - x_lo) or 1.0)

    def to_y(v: float) -> float:
        return bottom - (bottom - top) * (v - y_lo) / ((y_hi - y_lo) or 1.0)

    parts = _open(height, title, width)
    parts += _y_axis(left, top, bottom, y_ticks, to_y, right=right, label=y_label, fmt=y_format)
    parts += _x_axis(left, right, bottom, x_ticks, to_x, top=top, label=x_label, fmt=x_format)
    front = pareto_front(points)
    if len(front) > 1:
        path = " ".join(f"{to_x(points[i].x):.1f},{to_y(points[i].y):.1f}" for i in front)
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{BAR_COLOR}" stroke-width="1.5" '
            'stroke-dasharray="4 3"/>'
        )
    for i, p in enumerate(points):
        on_front = i in front
        radius, fill = (7, "#d1242f") if p.mark else (4.5, BAR_COLOR if on_front else "#9fb6d4")
        parts.append(
            f'<circle cx="{to_x(p.x):.1f}" cy="{to_y(p.y):.1f}" r="{radius}" fill="{fill}" '
            f'stroke="#ffffff" stroke-width="1"><title>{html_text(p.label)}: '
            f"{html_text(x_format(p.x))}, {html_text(y_format(p.y))}</title></circle>"
        )
    for p in points:
        if p.mark:
            anchor = "end" if to_x(p.x) > (left + right) / 2 else "start"
            dx = -10 if anchor == "end" else 10
            parts.append(
                f'<text x="{to_x(p.x) + dx:.1f}" y="{to_y(p.y) + 4:.1f}" text-anchor="{anchor}" '
                f'font-weight="bold" fill="#d1242f">{html_text(p.mark)}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


def _ramp(fraction: float) -> tuple[str, str]:
    """(fill, text colour) on a light-to-dark blue ramp for ``fraction`` in [0, 1]."""
    low, high = (239, 243, 255), (8, 69, 148)
    red, green, blue = (round(a + (b - a) * fraction) for a, b in zip(low, high, strict=True))
    return f"rgb({red},{green},{blue})", ("#ffffff" if fraction > 0.55 else "#1f2328")


def heatmap(
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    values: Sequence[Sequence[float | None]],
    *,
    title: str,
    row_title: str,
    col_title: str,
    value_format: Formatter,
    best: tuple[int, int] | None = None,
    scale: tuple[float, float] | None = None,
    cell_w: float = 72.0,
) -> str:
    """A table of coloured cells (rows x columns), each with its value; darker is larger on
    the ``scale`` (default: this grid's range), ``best`` outlined. None cells read 'no plan'.

    >>> svg = heatmap(["a"], ["x", "y"], [[1.0, None]], title="t", row_title="r",
    ...               col_title="c", value_format=str, best=(0, 0))
    >>> svg.count("<rect") >= 2 and "no plan" in svg
    True
    """
    cell_h = 26.0
    label_w = max(_label_width(row_labels), 12 + CHAR_PX * len(row_title))
    top = TOP + 34.0
    width = int(label_w + cell_w * len(col_labels) + 12)
    height = top + cell_h * len(row_labels) + 8
    numbers = [v for row in values for v in row if v is not None]
    lo, hi = scale if scale is not None else (min(numbers, default=0.0), max(numbers, default=1.0))
    parts = _open(height, title, max(width, int(TITLE_CHAR_PX * len(title) + 8)))
    parts.append(
        f'<text x="{label_w + cell_w * len(col_labels) / 2:.1f}" y="{TOP + 6:.1f}" '
        f'text-anchor="middle" fill="{AXIS_COLOR}">{html_text(col_title)}</text>'
    )
    parts.append(
        f'<text x="{label_w - 8:.1f}" y="{top - 8:.1f}" text-anchor="end" fill="{AXIS_COLOR}">'
        f"{html_text(row_title)}</text>"
    )
    for j, col in enumerate(col_labels):
        parts.append(
            f'<text x="{label_w + cell_w * (j + 0.5):.1f}" y="{top - 8:.1f}" text-anchor="middle" '
            f'font-weight="bold">{html_text(col)}</text>'
        )
    for i, row_label in enumerate(row_labels):
        y = top + i * cell_h
        parts.append(
            f'<text x="{label_w - 8:.1f}" y="{y + cell_h / 2 + 4:.1f}" text-anchor="end" '
            f'font-weight="bold">{html_text(row_label)}</text>'
        )
        for j, value in enumerate(values[i]):
            x = label_w + j * cell_w
            if value is None:
                parts.append(
                    f'<rect x="{x + 1:.1f}" y="{y + 1:.1f}" width="{cell_w - 2:.1f}" '
                    f'height="{cell_h - 2:.1f}" fill="#f4f4f4"/>'
                )
                parts.append(
                    f'<text x="{x + cell_w / 2:.1f}" y="{y + cell_h / 2 + 4:.1f}" '
                    f'text-anchor="middle" fill="{NO_DATA}">no plan</text>'
                )
                continue
            fraction = (value - lo) / (hi - lo) if hi > lo else 0.0
            fill, ink = _ramp(min(1.0, max(0.0, fraction)))
            outline = ' stroke="#d1242f" stroke-width="3"' if best == (i, j) else ""
            parts.append(
                f'<rect x="{x + 1:.1f}" y="{y + 1:.1f}" width="{cell_w - 2:.1f}" '
                f'height="{cell_h - 2:.1f}" fill="{fill}"{outline}><title>{html_text(row_label)}, '
                f"{html_text(col_labels[j])}: {html_text(value_format(value))}</title></rect>"
            )
            parts.append(
                f'<text x="{x + cell_w / 2:.1f}" y="{y + cell_h / 2 + 4:.1f}" '
                f'text-anchor="middle" fill="{ink}">{html_text(value_format(value))}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


def xy_chart(
    points: Sequence[tuple[float, float, str]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    value_format: Formatter,
    width: int = WIDTH,
    height: int = 420,
) -> str:
    """A line through ``points`` (x, y, hover text), drawn as markers joined in x order, with
    both axes from zero, labelled ticks and light gridlines.

    >>> svg = xy_chart([(1.0, 2.0, "a"), (2.0, 1.0, "b")], title="t", x_label="x",
    ...                y_label="y", value_format=str)
    >>> svg.count("<circle"), "<line" in svg
    (2, True)
    """
    left, right, top, bottom = 70, 20, TOP + 10, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = nice_ticks(0.0, max((p[0] for p in points), default=1.0) or 1.0)
    ys = nice_ticks(0.0, max((p[1] for p in points), default=1.0) or 1.0)
    x_max, y_max = xs[-1] or 1.0, ys[-1] or 1.0

    def px(x: float) -> float:
        return left + plot_w * x / x_max

    def py(y: float) -> float:
        return top + plot_h * (1 - y / y_max)

    parts = _open(height, title, width)
    for tick in xs:
        parts.append(
            f'<line x1="{px(tick):.1f}" y1="{top}" x2="{px(tick):.1f}" y2="{top + plot_h}" '
            'stroke="#e5e5e5"/>'
        )
        parts.append(
            f'<text x="{px(tick):.1f}" y="{top + plot_h + 16}" text-anchor="middle">'
            f"{html_text(value_format(tick))}</text>"
        )
    for tick in ys:
        parts.append(
            f'<line x1="{left}" y1="{py(tick):.1f}" x2="{left + plot_w}" y2="{py(tick):.1f}" '
            'stroke="#e5e5e5"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">'
            f"{html_text(value_format(tick))}</text>"
        )
    parts.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#333"/>'
    )
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>')
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 10}" text-anchor="middle">'
        f"{html_text(x_label)}</text>"
    )
    parts.append(
        f'<text x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{html_text(y_label)}</text>'
    )
    ordered = sorted(points)
    if len(ordered) > 1:
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in ordered)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{BAR_COLOR}"/>')
    for x, y, text in ordered:
        parts.append(
            f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{BAR_COLOR}">'
            f"<title>{html_text(text)}</title></circle>"
        )
    parts.append("</svg>")
    return "\n".join(parts)
