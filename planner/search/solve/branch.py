"""Depth-first branch and bound for the interleaved pipeline split of a model with more than one
kind of layer, where nothing is recomputed (with or without MTP modules).

Why it exists: with two kinds of layer that alternate (gpt-oss's sliding and full attention),
:func:`~planner.search.solve.stage_data.uniform_partition` does not apply, and CP-SAT reaches
the optimum of an interleaved split (32 chunks for 36 layers) in well under its time limit but
cannot close the gap to its LP bound: it runs to the limit and reports FEASIBLE. Walking the
chunks in layer order, each chunk's size bounded by the best split found so far, proves the
optimum instead (gpt-oss-120b's PP8 VPP4 on 64 H100: under 10,000 nodes, 0.1 s, the value CP-SAT
finds in 1 s without proof).

The walk: chunk c (on rank c mod pp) takes the next n_c layers, sizes nearest the planner's
even split first; a branch is cut when its rank's time reaches the best value found (the
objective is the slowest rank's time), counted with the least time its later chunks add (each
but the last overall holding ``min_chunk_layers`` of the cheapest layers), when its rank's
memory (kept state and activations of the micro-batches in flight, or the optimizer step's)
passes capacity, or when the time of the layers left exceeds the room all ranks have below the
best value. A state (chunk, first layer, every rank's time and memory) that found nothing below
a limit is remembered, so it is not walked again under that limit or a tighter one. When the
walk ends (or a split meets ``lower``, a lower bound of the objective) the best split is
optimal; past :data:`BRANCH_MAX_NODES` it gives up and the caller solves with CP-SAT. Exact:
the brute-force twin in tests/test_stages.py enumerates every split.
"""

from __future__ import annotations

from itertools import accumulate

from planner.search.solve.stage_data import (
    UNREACHABLE,
    Assignment,
    StageProblem,
    evaluate_assignment,
    per_item_table,
)

BRANCH_MAX_NODES = 20_000
"""Most chunk placements the walk tries before it gives up (about 0.15 s of pure Python, what a
walk that proves nothing costs before CP-SAT runs); gpt-oss-120b's PP8 VPP4 split on 64 H100
takes under 10,000."""


class _GaveUpError(Exception):
    """The walk passed :data:`BRANCH_MAX_NODES`."""


def _prefix(values: tuple[int, ...] | list[int]) -> list[int]:
    return [0, *accumulate(values)]


def _with_mtp(
    p: StageProblem, sizes: list[int], times: list[int], kept: list[int], step: list[int]
) -> tuple[int, int]:
    """(the slowest rank's time, the MTP chunk) of a complete split: without MTP modules the
    slowest rank and the last chunk; with them the fastest fitting place for the modules, a
    chunk of the last virtual stage at or after the one that holds the last decoder layer
    (their time, state, logits and activations on its rank; :func:`~planner.search.solve.
    stage_data.rank_loads`). :data:`~planner.search.solve.stage_data.UNREACHABLE` when they fit
    nowhere."""
    chunks = p.num_chunks
    if not p.num_mtp:
        return max(times), chunks - 1
    last = max(c for c in range(chunks) if sizes[c] > 0 or c == 0)
    best = (UNREACHABLE, chunks - 1)
    for d in p.mtp_chunks:
        if d < last:
            continue
        q = d % p.pp
        on_last = q == p.pp - 1
        state = p.mtp_state[0] if on_last else p.mtp_state[1]
        transient = p.mtp_transient[0] if on_last else p.mtp_transient[1]
        held = (
            kept[q] + p.in_flight_scale * (state + p.mtp_memory) + p.in_flight[q] * p.mtp_activation
        )
        if held > p.in_flight_scale * p.capacity or step[q] + state + transient > p.capacity:
            continue
        value = max(max(times), times[q] + p.mtp_time)
        best = min(best, (value, d))
    return best


def branch_and_bound_partition(
    problem: StageProblem,
    *,
    lower: int | None,
    upper: int | None,
    max_nodes: int = BRANCH_MAX_NODES,
) -> tuple[int, Assignment] | None:
    """The optimum split (value, assignment) of an interleaved problem that recomputes nothing,
    its MTP modules (if any) in their fastest fitting place, when the walk proves it: every
    split below ``upper`` (a known value, exclusive bound; None = no bound) was walked or cut,
    or one met ``lower``. None when the problem is of another shape, no split fits below
    ``upper``, or the walk gives up.

    >>> from planner.search.solve.stage_data import StageProblem
    >>> p = StageProblem.model_construct(pp=2, vpp=2, layer_time=(4, 10, 4, 10, 4, 10),
    ...     recompute_time=(0,) * 6, layer_state=(1,) * 6, layer_activation=(1,) * 6,
    ...     recompute_saving=(0,) * 6, layer_transient=(), rank_time=(0, 3),
    ...     rank_transient=(), rank_state=(0, 0), rank_memory=(0, 0), in_flight=(4, 2),
    ...     in_flight_scale=4, capacity=100, num_mtp=0, working=0, recompute="none",
    ...     fixed_recompute=None, min_chunk_layers=1, even_layers=(2, 2, 1, 1))
    >>> value, split = branch_and_bound_partition(p, lower=None, upper=None)
    >>> value, split.chunk_layers  # rank 0: 4 + 10 + 4, then 4; rank 1: 10, then 10 + 3 (the loss)
    (23, (3, 1, 1, 1))
    """
    p = problem
    if p.vpp < 2 or p.recompute != "none":
        return None
    n, pp, chunks, scale = p.num_layers, p.pp, p.num_chunks, p.in_flight_scale
    layer_transient = per_item_table(p.layer_transient, n)
    rank_transient = per_item_table(p.rank_transient, pp)
    time_at = _prefix(p.layer_time)
    state_at = _prefix(p.layer_state)
    activation_at = _prefix(p.layer_activation)
    step_at = _prefix([s + t for s, t in zip(p.layer_state, layer_transient, strict=True)])
    times = list(p.rank_time)
    kept = [scale * (p.rank_state[r] + p.rank_memory[r]) for r in range(pp)]
    step = [p.rank_state[r] + rank_transient[r] for r in range(pp)]
    kept_capacity = scale * p.capacity
    cheapest = min(p.layer_time, default=0) * p.min_chunk_layers
    # forced[c]: the least time rank c mod pp still adds after chunk c, its later chunks but
    # the last each holding min_chunk_layers layers of the cheapest kind
    forced = [cheapest * len(range(c + pp, chunks - 1, pp)) for c in range(chunks)]
    sizes = [0] * chunks
    mtp_time = p.mtp_time if p.num_mtp else 0
    best_value = upper if upper is not None else sum(p.layer_time) + max(p.rank_time) + mtp_time + 1
    best_sizes: tuple[int, ...] | None = None
    best_mtp = chunks - 1
    failed: dict[tuple[object, ...], int] = {}  # state -> the tightest limit it failed under
    nodes = 0

    def walk(c: int, start: int) -> bool:
        """Place chunks c.. from layer ``start``; True once a split meets ``lower``."""
        nonlocal nodes, best_value, best_sizes, best_mtp
        nodes += 1
        if nodes > max_nodes:
            raise _GaveUpError
        limit = best_value - 1  # a new split must be faster than the best
        if time_at[n] - time_at[start] + mtp_time > sum(limit - t for t in times):
            return False
        key = (c, start, *times, *kept, *step)
        if p.num_mtp and start == n:  # the MTP modules sit at or after the last layer's chunk
            key += (max((d for d in range(c) if sizes[d]), default=0),)
        if failed.get(key, -1) >= limit:
            return False
        r = c % pp
        if c == chunks - 1:
            options: list[int] = [n - start]
        else:  # every chunk but the last holds min_chunk_layers; the last may be empty
            most = n - start - (chunks - c - 2) * p.min_chunk_layers
            options = sorted(
                range(p.min_chunk_layers, most + 1),
                key=lambda s: (abs(s - p.even_layers[c]), -s),
            )
        for size in options:
            end = start + size
            rank_time = times[r] + time_at[end] - time_at[start]
            if rank_time + forced[c] > best_value - 1:
                continue
            rank_kept = (
                kept[r]
                + scale * (state_at[end] - state_at[start])
                + p.in_flight[r] * (activation_at[end] - activation_at[start])
            )
            rank_step = step[r] + step_at[end] - step_at[start]
            if rank_kept > kept_capacity or rank_step > p.capacity:
                continue
            saved = times[r], kept[r], step[r]
            times[r], kept[r], step[r] = rank_time, rank_kept, rank_step
            sizes[c] = size
            if c == chunks - 1:
                value, mtp_chunk = _with_mtp(p, sizes, times, kept, step)
                if value < best_value:
                    best_value, best_sizes, best_mtp = value, tuple(sizes), mtp_chunk
                met = lower is not None and best_value <= lower
            else:
                met = walk(c + 1, end)
            times[r], kept[r], step[r] = saved
            if met:
                return True
        # nothing from here beats the best as it stands now (it may have improved in the loop)
        failed[key] = max(failed.get(key, -1), best_value - 1)
        return False

    try:
        walk(0, 0)
    except _GaveUpError:
        return None  # (a split that met ``lower`` ends the walk before this)
    if best_sizes is None:
        return None
    assignment = Assignment(
        chunk_layers=best_sizes, recompute_layers=(0,) * chunks, mtp_chunk=best_mtp
    )
    if evaluate_assignment(p, assignment) != best_value:
        return None
    return best_value, assignment
