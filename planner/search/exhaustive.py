"""Brute-force references: the minimum by enumeration of the same integer data.

- :func:`exhaustive_ranking`: the scored table ranked by a plain sort (``--solver exhaustive``
  and the twin of the numpy ranking in search/rank.py).
- :func:`brute_force_stages`: the pipeline-stage partition by enumeration (the twin of the
  CP-SAT model in search/solve/stages.py, on small instances).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from planner.search.solve.stage_data import Assignment, StageProblem, evaluate_assignment


def exhaustive_ranking(costs: list[int], structures: list[tuple[int, ...]], top: int) -> list[int]:
    """Rows of the best ``top`` candidates with distinct structures, cheapest first (ties: first
    row), by sorting every row.

    >>> exhaustive_ranking([5, 3, 4, 1], [(1,), (2,), (2,), (3,)], 2)
    [3, 1]
    """
    order = sorted(range(len(costs)), key=lambda i: (costs[i], i))
    chosen: list[int] = []
    seen: set[tuple[int, ...]] = set()
    for i in order:
        if structures[i] in seen:
            continue
        seen.add(structures[i])
        chosen.append(i)
        if len(chosen) == top:
            break
    return chosen


def brute_force_stages(problem: StageProblem) -> tuple[int | None, Assignment | None]:
    """The pipeline-stage partition by enumeration (the CP-SAT model's twin): every split of
    the layers over the chunks, every recompute count the problem allows and every chunk for
    the MTP modules, scored by :func:`planner.search.solve.stage_data.evaluate_assignment`;
    (the smallest objective, its assignment), (None, None) when nothing fits. Small instances
    only: the splits alone number C(L + C - 1, C - 1)."""
    best: tuple[int | None, Assignment | None] = (None, None)
    for assignment in every_assignment(problem):
        value = evaluate_assignment(problem, assignment)
        if value is not None and (best[0] is None or value < best[0]):
            best = (value, assignment)
    return best


def every_assignment(problem: StageProblem) -> Iterator[Assignment]:
    """Every split of the layers over the chunks, every recompute vector and every chunk for the
    MTP modules (:func:`evaluate_assignment` keeps the ones the problem allows)."""
    chunks, n = problem.num_chunks, problem.num_layers
    for cuts in itertools.combinations_with_replacement(range(n + 1), chunks - 1):
        bounds = (0, *cuts, n)
        layers = tuple(bounds[c + 1] - bounds[c] for c in range(chunks))
        for redo in _recompute_choices(problem, layers):
            for mtp in problem.mtp_chunks if problem.num_mtp else [chunks - 1]:
                yield Assignment(chunk_layers=layers, recompute_layers=redo, mtp_chunk=mtp)


def _recompute_choices(problem: StageProblem, layers: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every recompute vector for ``layers``: each chunk's 0..n_c (evaluate_assignment keeps
    the ones the problem's recompute choice allows)."""
    if problem.recompute == "none":
        return [(0,) * len(layers)]
    return list(itertools.product(*(range(count + 1) for count in layers)))
