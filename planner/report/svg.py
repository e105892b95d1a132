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
}
"""Colour per time-breakdown term (seaborn 'deep' palette); unknown terms get grey."""

Formatter = Callable[[float], str]


def _label_width(labels: Sequence[str]) -> float:
    return min(300.0, 16 + CHAR_PX * max((len(label) for label in labels), default=4))


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
) -> str:
    """Horizontal bars, one per label; a None value is drawn as 'no plan'.

    >>> "<rect" in bar_chart(["a"], [1.0], title="t", value_format=str)
    True
    """
    label_w = _label_width(labels)
    bar_w = width - label_w - 70
    peak = max((v for v in values if v is not None), default=0.0) or 1.0
    parts = _open(TOP + ROW * len(labels) + 8, title, width)
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


def _legend(items: Sequence[tuple[str, str]], y: float, x0: float) -> list[str]:
    parts, x = [], x0
    for name, color in items:
        parts.append(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{x + 16:.1f}" y="{y:.1f}">{html_text(name)}</text>')
        x += 28 + CHAR_PX * len(name)
    return parts


def stacked_bar_chart(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None], str]],
    *,
    title: str,
    value_format: Formatter,
) -> str:
    """Horizontal stacked bars: ``series`` is (name, one value per label, colour); the legend
    sits under the title. Rows whose values are all None are drawn as 'no plan'."""
    label_w = _label_width(labels)
    bar_w = WIDTH - label_w - 90
    totals = [sum(s[1][i] or 0.0 for s in series) for i in range(len(labels))]
    peak = max(totals, default=0.0) or 1.0
    top = TOP + 18
    parts = _open(top + ROW * len(labels) + 8, title)
    parts += _legend([(name, color) for name, _, color in series], TOP + 4, label_w)
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


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 x 10^k apart) covering [low, high].

    >>> nice_ticks(0, 97)
    [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    >>> nice_ticks(3, 3)
    [3.0]
    """
    if high <= low:
        return [float(low)]
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks, value = [], first
    while value < high + step * 0.999:
        ticks.append(float(round(value, 10)))
        value += step
    return ticks


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
