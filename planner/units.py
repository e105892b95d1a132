"""Unit constants and human-readable formatting: the only place units are converted.

Inside the planner every quantity is SI: seconds, bytes, FLOP, bytes/s, FLOP/s, watts.
YAML keys carry their unit in the name (``hbm_GB``, ``peak_TFLOP_per_s``); the specs expose SI
properties computed with these constants. Marketing figures are SI (GB = 1e9 B, TB/s = 1e12 B/s);
allocated memory is reported in GiB (2**30 B) and says so.
"""

from __future__ import annotations

from itertools import groupby

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2.0**10
MiB = 2.0**20
GiB = 2.0**30
TFLOP = 1e12
PFLOP = 1e15
GBIT = 1e9 / 8  # bytes in one gigabit
US = 1e-6
MS = 1e-3
HOUR_S = 3600.0
DAY_S = 86_400.0
MWH_J = 3.6e9  # joules in one megawatt-hour
BITS_PER_BYTE = 8
BINARY_PREFIX = {"K": 2**10, "M": 2**20, "G": 2**30}
"""Multipliers of a K, M or G suffix on a token count, binary as ML papers quote them ("16M
tokens" = 16,777,216; an "8K" context = 8,192): the CLI's token flags and ``--vary seq_len``."""


def format_bytes(num_bytes: float) -> str:
    """Format a byte count in GiB (allocated memory convention).

    >>> format_bytes(2**31)
    '2.0 GiB'
    """
    return f"{num_bytes / GiB:.1f} GiB"


def format_seconds(seconds: float) -> str:
    """Format a duration with a unit that keeps 3 significant digits.

    >>> format_seconds(0.0123)
    '12.3 ms'
    >>> format_seconds(2.5)
    '2.50 s'
    """
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def run_length(counts: list[int], *, min_run: int = 3) -> str:
    """``counts`` comma-separated, a run of ``min_run`` or more equal values written once with its
    length in parentheses (a 128-stage split reads as three items, not 128).

    >>> run_length([0] + [1] * 126 + [0]), run_length([3, 4, 4, 5])
    ('0,1 (x126),0', '3,4,4,5')
    """
    items: list[str] = []
    for value, group in groupby(counts):
        run = len(list(group))
        items.extend([f"{value} (x{run})"] if run >= min_run else [str(value)] * run)
    return ",".join(items)
