"""Terminal width: the text reports keep their lines within :data:`COLUMNS` characters."""

from __future__ import annotations

import re
import textwrap

COLUMNS = 100
"""Widest line a text report prints (a terminal's width; the README's promise, checked by the
tests)."""

_LABEL = re.compile(r"^(\s*(?:[\w ./%-]{1,20}:|\d+\.|-) )")
"""A line's label (``cluster : ``, ``  2. ``, ``  - ``): continuation lines are indented past it."""


def wrap_words(line: str, width: int = COLUMNS, indent: int | None = None) -> list[str]:
    """``line`` as lines of at most ``width`` characters, broken between words; the lines after
    the first are indented past the line's label (or by ``indent``). A single word longer than
    the width is left whole.

    >>> wrap_words("cluster : alpha beta gamma delta", width=24)
    ['cluster : alpha beta', '          gamma delta']
    >>> wrap_words("short")
    ['short']
    """
    if len(line) <= width:
        return [line]
    if indent is None:
        match = _LABEL.match(line)
        indent = len(match.group(1)) if match else len(line) - len(line.lstrip()) + 2
    indent = min(indent, width // 2)
    return textwrap.wrap(
        line,
        width=width,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def wrap_all(lines: list[str], width: int = COLUMNS) -> list[str]:
    """Every line of ``lines`` wrapped by :func:`wrap_words`."""
    return [part for line in lines for part in wrap_words(line, width)]
