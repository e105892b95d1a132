"""Brute-force reference: the same rows, the same integer costs, the minimum by enumeration.

Used by ``--solver exhaustive`` and by the tests that show CP-SAT's optimum equals it.
"""

from __future__ import annotations


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
