"""Plausible ranges of the numbers a user gives on the command line or to the Python API.

A value outside its range is refused with the range and its unit in the message, so that no
message or report ever prints a figure of hundreds of digits (``--target-tokens-per-s 1e308``
used to print a 300-digit GPU count). The ranges are wide: they bound what could be meant, not
what is typical. Stdlib only: the CLI's argument types read it while parsing.
"""

from __future__ import annotations

from typing import NamedTuple


class Range(NamedTuple):
    """A closed range ``[low, high]`` in ``unit``; with ``low_open`` the low end is excluded."""

    low: float
    high: float
    unit: str
    low_open: bool = False


MAX_SEQ_LEN = 2**24
"""Longest sequence or context (16,777,216 tokens: beyond every model's context window)."""
MAX_SEQUENCES = 2**24
"""Most sequences in a step or in flight (planner.search.rules.MAX_GLOBAL_BATCH)."""
MAX_ACCELERATORS = 2**20
"""Largest cluster (planner.catalog.clusters.MAX_ACCELERATORS)."""
MAX_WORKERS = 1024
"""Most local processes ``whatif --workers`` may ask for (at most the cores start)."""
MAX_LAYERS = 16_384
"""Most transformer layers (planner.specs.model's limit on num_layers)."""
MAX_LOAD_FACTOR = 8.0
"""Largest MoE load factor (``expert_load_imbalance``, ``moe_capacity_factor``): the busiest
expert rank at 8x its balanced share of tokens."""

MAX_BUCKET_PARAMS = 10**12
"""Largest gradient bucket (``ddp_bucket_params``): a trillion parameters, one bucket for any
model."""

RANGES: dict[str, Range] = {
    "seq_len": Range(1, MAX_SEQ_LEN, "tokens"),
    "global_batch": Range(1, MAX_SEQUENCES, "sequences"),
    "global_batch_tokens": Range(1, MAX_SEQUENCES * MAX_SEQ_LEN, "tokens"),
    "recompute_num_layers": Range(1, MAX_LAYERS, "layers"),
    "context": Range(1, MAX_SEQ_LEN, "tokens"),
    "prompt_len": Range(1, MAX_SEQ_LEN, "tokens"),
    "output_len": Range(1, MAX_SEQ_LEN, "tokens"),
    "max_batch_tokens": Range(1, MAX_SEQUENCES * MAX_SEQ_LEN, "tokens"),
    "concurrency": Range(1, MAX_SEQUENCES, "sequences per replica"),
    "tpot_ms": Range(0, 3_600_000, "ms (an hour)", low_open=True),
    "ttft_ms": Range(0, 3_600_000, "ms (an hour)", low_open=True),
    "target_tokens_per_s": Range(0, 1e12, "tokens/s", low_open=True),
    "qps": Range(0, 1e9, "requests/s", low_open=True),
    "target_step_time_s": Range(0, 86_400, "s (a day)", low_open=True),
    "gpus": Range(1, MAX_ACCELERATORS, "accelerators"),
    "zero_shard_group": Range(1, MAX_ACCELERATORS, "ranks"),
    "ddp_bucket_params": Range(1, MAX_BUCKET_PARAMS, "parameters"),
    "workers": Range(1, MAX_WORKERS, "processes"),
    "expert_load_imbalance": Range(1, MAX_LOAD_FACTOR, "x the balanced share"),
    "moe_capacity_factor": Range(1, MAX_LOAD_FACTOR, "x the balanced share"),
}
"""Plausible range of each number, by the name of its field (the flag without ``--``, with
``_``); planner.api checks the workloads and solver settings it is given against the same."""


def figure(number: float) -> str:
    """A bound as a message writes it: whole numbers with thousands separators.

    >>> figure(2**24), figure(0.5), figure(1e12)
    ('16,777,216', '0.5', '1,000,000,000,000')
    """
    return f"{int(number):,}" if number == int(number) else f"{number:g}"


def rule(name: str) -> str:
    """The range of ``name`` in words.

    >>> rule("seq_len"), rule("tpot_ms")
    ('from 1 to 16,777,216 tokens', '> 0 and at most 3,600,000 ms (an hour)')
    """
    low, high, unit, low_open = RANGES[name]
    span = f"> {figure(low)} and at most" if low_open else f"from {figure(low)} to"
    return f"{span} {figure(high)} {unit}"


def in_range(name: str, value: float) -> bool:
    """Whether ``value`` lies in the plausible range of ``name`` (True for a name without one).

    >>> in_range("seq_len", 8192), in_range("seq_len", 10**300), in_range("tpot_ms", 0.0)
    (True, False, False)
    """
    if name not in RANGES:
        return True
    low, high, _, low_open = RANGES[name]
    return (low < value if low_open else low <= value) and value <= high
