"""Fit a serving engine's figures on its published runs, and score the fit out of sample.

An engine profile (:class:`planner.specs.engine.ServingEngineSpec`) has three figures: the time
per layer per iteration outside the kernels (launch gaps, syncs), the host time per request per
iteration that the GPU waits for, and, for an engine whose profile says ``fits_compute``, the
speed of its compute-bound kernels relative to the training-fitted GEMM and attention
efficiencies. Nothing else in the serving cost model is fitted on serving rows: the GPU terms
take the accelerator's catalog and training calibration.

The fit minimises the median |log(predicted / measured)| over the engine's rows (the median, so
that one odd row does not move it): the coarse grid (every :data:`COARSE_STRIDE`-th point of the
fine grids below), then coordinate descent on the fine grids from the coarse optimum (a step to
the best strictly better neighbour until none is). Ties go to the smaller overheads and the
higher compute efficiency. Out of sample: leave one source document out
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

LAYER_GRID_US: tuple[float, ...] = tuple(5.0 * i for i in range(51))
"""Candidate launch-gap and sync times per layer per iteration (us): 0 to 250, from none (one
CUDA-graph replay) to about fifteen eager launches of 10-15 us each per layer."""
REQUEST_GRID_US: tuple[float, ...] = tuple(0.5 * i for i in range(41))
"""Candidate host times per request per iteration (us): 0 to 20."""
COMPUTE_GRID: tuple[float, ...] = tuple(round(0.3 + 0.05 * i, 2) for i in range(15))
"""Candidate compute efficiencies relative to the training fit: 0.30 to 1.00 (only for an
engine whose profile ``fits_compute``; else 1)."""
COARSE_STRIDE: tuple[int, int, int] = (5, 4, 2)
"""The coarse grid takes every 5th layer figure (25 us), every 4th request figure (2 us) and
every 2nd compute figure (0.1)."""

MIN_FIT_ROWS = 8
"""An engine is fitted on its rows only with at least this many, from at least
:data:`MIN_FIT_SOURCES` source documents (else its profile keeps the figures it states, and its
rows test them out of sample)."""
MIN_FIT_SOURCES = 2
"""See :data:`MIN_FIT_ROWS` (a leave-one-source-out refit needs another source)."""

Errors = dict[str, float]
Point = tuple[int, int, int]
"""Indices into (LAYER_GRID_US, REQUEST_GRID_US, the engine's compute grid)."""


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


def compute_grid(base: ServingEngineSpec) -> tuple[float, ...]:
    """The compute efficiencies the fit tries for ``base``: :data:`COMPUTE_GRID` when its
    profile ``fits_compute``, else its stated figure alone."""
    return COMPUTE_GRID if base.fits_compute else (base.compute_efficiency,)


class EngineFit:
    """The in-sample fit and the leave-one-source-out errors of one engine's rows."""

    def __init__(self, rows: Sequence[ServingRow], base: ServingEngineSpec) -> None:
        self.base = base
        self.rows = [r for r in rows if engine_profile_of(r) == base.name]
        self.computes = compute_grid(base)
        self.table: dict[Point, Errors] = {}
        """Errors of every point evaluated so far."""
        ids = [r.id for r in self.rows]
        point = self.best_point(ids)
        self.figures = self.figures_of(point)
        """(layer us, request us, compute efficiency) fitted on every row."""
        self.in_sample: Errors = dict(self.table[point])
        """Row id -> error with the fitted figures."""
        self.heldout: Errors = {}
        """Row id -> error with the figures fitted on the other sources."""
        self.heldout_figures: dict[str, tuple[float, float, float]] = {}
        """Source -> the figures fitted without it."""
        for source in sorted({serving_source_of(r) for r in self.rows}):
            train = [r.id for r in self.rows if serving_source_of(r) != source]
            held = self.best_point(train)
            self.heldout_figures[source] = self.figures_of(held)
            for r in self.rows:
                if serving_source_of(r) == source and r.id in self.table[held]:
                    self.heldout[r.id] = self.table[held][r.id]

    def figures_of(self, point: Point) -> tuple[float, float, float]:
        """The (layer us, request us, compute efficiency) of a grid point."""
        i, j, k = point
        return LAYER_GRID_US[i], REQUEST_GRID_US[j], self.computes[k]

    def engine_at(self, point: Point) -> ServingEngineSpec:
        """The base profile with the figures of ``point``."""
        layer, request, compute = self.figures_of(point)
        return self.base.model_copy(
            update={
                "layer_overhead_us": layer,
                "sequence_overhead_us": request,
                "compute_efficiency": compute,
            }
        )

    def errors_at(self, point: Point) -> Errors:
        """Row id -> error of every evaluated row at ``point`` (cached)."""
        if point not in self.table:
            engine = self.engine_at(point)
            errors = {}
            for row in self.rows:
                result = predict_row(row, engine=engine)
                if result.error is not None:
                    errors[row.id] = result.error
            self.table[point] = errors
        return self.table[point]

    def _key(self, point: Point, ids: Sequence[str]) -> tuple[float, int, int, int]:
        return (round(objective(self.errors_at(point), ids), 9), point[1], point[0], -point[2])

    def best_point(self, ids: Sequence[str]) -> Point:
        """The fit on ``ids``: the coarse grid's best point, then coordinate descent."""
        si, sj, sk = COARSE_STRIDE
        coarse = [
            (i, j, k)
            for i in range(0, len(LAYER_GRID_US), si)
            for j in range(0, len(REQUEST_GRID_US), sj)
            for k in range(len(self.computes) - 1, -1, -sk)
        ]
        point = min(coarse, key=lambda p: self._key(p, ids))
        sizes = (len(LAYER_GRID_US), len(REQUEST_GRID_US), len(self.computes))
        while True:
            near = [
                tuple(c + (d if axis == a else 0) for a, c in enumerate(point))
                for axis in range(3)
                for d in (-1, 1)
            ]
            inside = [p for p in near if all(0 <= c < n for c, n in zip(p, sizes, strict=True))]
            step = min(inside, key=lambda p: self._key(p, ids))  # type: ignore[arg-type]
            if self._key(step, ids)[0] >= self._key(point, ids)[0]:  # type: ignore[arg-type]
                return point
            point = step  # type: ignore[assignment]
