"""Ranking a scored table: a sort, not a solver.

Every candidate row already carries its integer objective (search/table.py), so choosing the best
and the runners-up is ``argsort`` plus "first row of each distinct structure": a stable numpy
sort by (objective, row). A CP-SAT model of the same choice (one Boolean per row, exactly one,
minimise) finds the same rows and costs seconds where the sort costs milliseconds (issue 19).
:func:`planner.search.exhaustive.exhaustive_ranking` is the pure-Python twin the tests compare it
with.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np


def rank_rows(costs: Sequence[int], structures: Sequence[Hashable], top: int) -> list[int]:
    """Rows of the ``top`` cheapest candidates with distinct structures, cheapest first (ties:
    the earlier row), by a stable numpy sort of the integer costs.

    >>> rank_rows([5, 3, 4, 1], [(1,), (2,), (2,), (3,)], 2)
    [3, 1]
    >>> rank_rows([2**70, 2**69, 7], ["a", "b", "c"], 3)  # beyond int64: sorted as objects
    [2, 1, 0]
    """
    if not len(costs):
        return []
    try:
        keys = np.asarray(costs, dtype=np.int64)
    except OverflowError:
        keys = np.asarray(costs, dtype=object)
    order = np.argsort(keys, kind="stable")
    chosen: list[int] = []
    seen: set[Hashable] = set()
    for row in order.tolist():
        structure = structures[row]
        if structure in seen:
            continue
        seen.add(structure)
        chosen.append(row)
        if len(chosen) == top:
            break
    return chosen
