"""Checks of the search arguments that the CLI flags and the Python API share: pins (``--fix`` /
``fix``), bounds (``--min`` ``--max`` / ``bounds``), precisions and counts (``--gpus``, ``--top``).

Each check takes a value that is already a Python object (the CLI parses its text first) and
raises one SpecError line that starts with ``label``, the flag or argument and the value it came
from (``--fix tp=0`` on the CLI, ``fix tp=0`` in the API), followed by the rule.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping

from planner.catalog.io import MAX_SHOWN_CHARS, short_repr
from planner.catalog.store import suggest
from planner.errors import SpecError
from planner.search.rules import MAX_GLOBAL_BATCH
from planner.search.space import PINNABLE, Bounds
from planner.specs.formats import TRAINING_FORMATS, NumberFormat

BOUNDABLE: tuple[str, ...] = ("tp", "pp", "vpp", "dp", "cp", "ep", "etp", "mbs", "zero")
"""Layout fields a user may bound (--min / --max, ``bounds``)."""
RECOMPUTE_CHOICES: tuple[str, ...] = ("none", "selective", "full")
"""Values of a pinned ``recompute``."""
ZERO_STAGES: tuple[int, ...] = (0, 1, 2, 3)
"""Values of a pinned or bounded ``zero``."""
MAX_LAYOUT_NUMBER = MAX_GLOBAL_BATCH
"""Largest pinned or bounded layout number: no degree exceeds the accelerators of the largest
cluster and no micro-batch the largest global batch (2^24 sequences)."""

shown = short_repr
"""A bounded repr of a user's value for an error message (planner.catalog.io.short_repr)."""


def key_text(key: object) -> str:
    """A dict key as an error message names it: bare when it is a short name, else its repr."""
    if isinstance(key, str) and key.isidentifier() and len(key) <= MAX_SHOWN_CHARS:
        return key
    return shown(key)


def whole_number(value: object) -> int | None:
    """``value`` as an int when it is an integer (an int or anything with ``__index__``, never a
    bool, a float or a numeric string), else None.

    >>> whole_number(8), whole_number(True), whole_number(8.0), whole_number("8")
    (8, None, None, None)
    """
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[call-overload]
    except TypeError:
        return None


def positive_count(label: str, value: object) -> int:
    """A count >= 1 (``gpus``, ``top``); SpecError '<label> <value>: must be a positive whole
    number' otherwise."""
    number = whole_number(value)
    if number is None or number < 1:
        raise SpecError(f"{label} {shown(value)}: must be a positive whole number")
    return number


def layout_number(
    label: str, key: str, value: object, what: str = "a positive whole number"
) -> int:
    """A layout degree or micro-batch (a whole number from 1 to MAX_LAYOUT_NUMBER) or, for
    ``zero``, a ZeRO stage (0-3); SpecError '<label>: must be <what>' (or '... must be 0, 1, 2
    or 3', '... must be <what> of at most 16,777,216') otherwise."""
    number = whole_number(value)
    if key == "zero":
        if number not in ZERO_STAGES:
            raise SpecError(f"{label}: must be 0, 1, 2 or 3")
        return number  # type: ignore[return-value]
    if number is None or number < 1:
        raise SpecError(f"{label}: must be {what}")
    if number > MAX_LAYOUT_NUMBER:
        raise SpecError(f"{label}: must be {what} of at most {MAX_LAYOUT_NUMBER:,}")
    return number


def training_precision(value: object, label: str = "") -> str:
    """The training precision ``value`` names (case-insensitive), lower-cased; SpecError
    "unknown training precision 'x' (one of: ...)" otherwise, after '<label>: ' when given."""
    names = [str(f) for f in TRAINING_FORMATS]
    if isinstance(value, str) and value.lower() in names:
        return value.lower()
    hint = suggest(value, names) if isinstance(value, str) else ""
    head = (
        f"{label}: unknown training precision"
        if label
        else f"unknown training precision {shown(value)}"
    )
    raise SpecError(f"{head}{hint} (one of: {', '.join(names)})")


def pin_value(label: str, key: str, value: object) -> object:
    """The value of the pin ``key=value`` (a degree, a ZeRO stage, a recompute or a precision)."""
    if key == "recompute":
        if not isinstance(value, str) or value not in RECOMPUTE_CHOICES:
            raise SpecError(f"{label}: must be none, selective or full")
        return value
    if key == "precision":
        return training_precision(value, label)
    return layout_number(label, key, value)


def check_fix(
    fix: object, *, pinnable: tuple[str, ...] = PINNABLE, mode: str = ""
) -> dict[str, object]:
    """The pins of ``fix`` (a dict of layout field -> value), each checked; ``mode`` says where
    a field cannot be pinned (' in serve mode')."""
    if fix is None:
        return {}
    if not isinstance(fix, Mapping):
        raise SpecError(
            f"fix {shown(fix)}: must be a dict of layout field -> value, e.g. {{'tp': 8}}"
        )
    out: dict[str, object] = {}
    for key, value in fix.items():
        label = f"fix {key_text(key)}={shown(value)}"
        if key not in pinnable:
            raise SpecError(
                f"{label}: cannot pin {shown(key)}{mode}; pinnable: {', '.join(pinnable)}"
            )
        out[key] = pin_value(label, key, value)
    return out


def check_bounds(bounds: object) -> Bounds:
    """The bounds of ``bounds`` (a dict of layout field -> (low, high), None for no limit),
    each checked: known fields, whole numbers in range, low <= high."""
    if bounds is None:
        return {}
    if not isinstance(bounds, Mapping):
        raise SpecError(
            f"bounds {shown(bounds)}: must be a dict of layout field -> (low, high), "
            "e.g. {'pp': (None, 16)}"
        )
    out: Bounds = {}
    for key, pair in bounds.items():
        label = f"bounds {key_text(key)}={shown(pair)}"
        if key not in BOUNDABLE:
            raise SpecError(f"{label}: cannot bound {shown(key)}; one of {', '.join(BOUNDABLE)}")
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise SpecError(f"{label}: must be a (low, high) pair, None for no limit")
        low, high = (
            None if side is None else layout_number(label, key, side, "positive whole numbers")
            for side in pair
        )
        if low is not None and high is not None and low > high:
            raise SpecError(f"{label}: the low {low} exceeds the high {high}")
        out[key] = (low, high)
    return out


def check_precisions(precisions: object) -> list[NumberFormat] | None:
    """The training formats of ``precisions`` (a list of names), None when none is given."""
    if precisions is None:
        return None
    if isinstance(precisions, str | bytes) or not isinstance(precisions, list | tuple):
        raise SpecError(
            f"precisions {shown(precisions)}: must be a list of training precisions, "
            "e.g. ['bf16', 'fp8']"
        )
    formats = [NumberFormat(training_precision(p, f"precisions {shown(p)}")) for p in precisions]
    return list(dict.fromkeys(formats)) or None
