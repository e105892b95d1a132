"""The single float -> int boundary: step times in seconds become integer time quanta."""

from __future__ import annotations

import numpy as np

from planner.specs.solver_config import TIME_QUANTUM_S


def to_quanta(seconds: list[float]) -> list[int]:
    """Round step times to integer multiples of ``TIME_QUANTUM_S`` (1 us).

    >>> to_quanta([0.5, 1.2345678])
    [500000, 1234568]
    """
    return [int(v) for v in np.rint(np.asarray(seconds, dtype=np.float64) / TIME_QUANTUM_S)]


def from_quanta(quanta: float) -> float:
    """Seconds of an integer objective value.

    >>> from_quanta(1500000)
    1.5
    """
    return quanta * TIME_QUANTUM_S
