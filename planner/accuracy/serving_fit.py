"""Fit a serving engine's host time on its published runs, and score the fit out of sample.

An engine profile has two figures (:class:`planner.specs.engine.ServingEngineSpec`): the time
per layer per iteration outside the kernels (launch gaps, syncs) and the host time per request
per iteration that the GPU waits for. Nothing else in the serving cost
model is fitted on serving rows: the GPU terms take the accelerator's catalog and training
calibration. The fit is a grid search, within the bounds below, for the pair that minimises the
median |log(predicted / measured)| over the engine's rows (the median, so that one odd row does
not move it); ties go to the smaller figures. Out of sample: leave one source document out
(:func:`planner.accuracy.serving.serving_source_of`), refit on the others, predict the held-out
rows. ``benchmarks/fit_serving_engine.py --write`` writes both into the engine's YAML.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from planner.accuracy.serving import (
    ServingRow,
    engine_profile_of,
    predict_row,
    serving_source_of,
)
from planner.specs.engine import ServingEngineSpec

LAYER_GRID_US: tuple[float, ...] = tuple(10.0 * i for i in range(16))
"""Candidate launch-gap and sync times per layer per iteration (us): 0 to 150, from none (one
CUDA-graph replay) to about ten eager launches of 10-15 us each per layer."""
REQUEST_GRID_US: tuple[float, ...] = tuple(float(i) for i in range(16))
"""Candidate host times per request per iteration (us): 0 to 15."""

MIN_FIT_ROWS = 8
"""An engine is fitted on its rows only with at least this many, from at least
:data:`MIN_FIT_SOURCES` source documents (else its profile keeps the figures it states, and its
rows test them out of sample)."""
MIN_FIT_SOURCES = 2
"""See :data:`MIN_FIT_ROWS` (a leave-one-source-out refit needs another source)."""

Errors = dict[str, float]


def fittable_rows(rows: Sequence[ServingRow]) -> bool:
    """Enough rows and sources to fit an engine (:data:`MIN_FIT_ROWS`)."""
    return len(rows) >= MIN_FIT_ROWS and len({serving_source_of(r) for r in rows}) >= (
        MIN_FIT_SOURCES
    )


def _log_error(error: float) -> float:
    return abs(math.log1p(error))


def objective(errors: Errors, ids: Sequence[str]) -> float:
    """Median |log(predicted / measured)| over ``ids`` (rows without an error are skipped).

    >>> round(objective({"a": 0.1, "b": -0.1, "c": 1.0}, ["a", "b", "c"]), 4)
    0.1054
    """
    values = [_log_error(errors[i]) for i in ids if i in errors]
    return statistics.median(values) if values else math.inf


def grid_errors(
    rows: Sequence[ServingRow], base: ServingEngineSpec
) -> dict[tuple[float, float], Errors]:
    """Per (layer us, request us) candidate: row id -> error of every evaluated row."""
    out: dict[tuple[float, float], Errors] = {}
    for layer in LAYER_GRID_US:
        for request in REQUEST_GRID_US:
            engine = base.model_copy(
                update={"layer_overhead_us": layer, "sequence_overhead_us": request}
            )
            errors = {}
            for row in rows:
                result = predict_row(row, engine=engine)
                if result.error is not None:
                    errors[row.id] = result.error
            out[(layer, request)] = errors
    return out


def best_pair(table: dict[tuple[float, float], Errors], ids: Sequence[str]) -> tuple[float, float]:
    """The candidate with the smallest :func:`objective` on ``ids`` (ties: smaller figures)."""

    def key(p: tuple[float, float]) -> tuple[float, float, float]:
        return (
            round(objective(table[p], ids), 9),
            p[1],
            p[0],
        )

    return min(table, key=key)


class EngineFit:
    """The in-sample fit and the leave-one-source-out errors of one engine's rows."""

    def __init__(self, rows: Sequence[ServingRow], base: ServingEngineSpec) -> None:
        self.rows = [r for r in rows if engine_profile_of(r) == base.name]
        self.table = grid_errors(self.rows, base)
        ids = [r.id for r in self.rows]
        self.pair = best_pair(self.table, ids)
        """(layer us, request us) fitted on every row."""
        self.in_sample: Errors = dict(self.table[self.pair])
        """Row id -> error with the fitted pair."""
        self.heldout: Errors = {}
        """Row id -> error with the pair fitted on the other sources."""
        self.heldout_pairs: dict[str, tuple[float, float]] = {}
        """Source -> the pair fitted without it."""
        for source in sorted({serving_source_of(r) for r in self.rows}):
            train = [r.id for r in self.rows if serving_source_of(r) != source]
            pair = best_pair(self.table, train) if train else (0.0, 0.0)
            self.heldout_pairs[source] = pair
            for r in self.rows:
                if serving_source_of(r) == source and r.id in self.table[pair]:
                    self.heldout[r.id] = self.table[pair][r.id]
