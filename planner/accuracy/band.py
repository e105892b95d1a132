"""What the ± band is and how often it holds (DESIGN.md section 9): per family and regime, the
stored held-out band, and its coverage on the rows it comes from and on the held-out
benchmarks (``topologies/trust.yaml`` ``coverage_checks``). Pure functions of the overlays and
the trust spec; rendered into docs/accuracy.md."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from planner.catalog.store import fitted_calibrations, load_trust
from planner.specs.base import FrozenSpec
from planner.specs.hardware import CalibrationRecord
from planner.specs.trust import (
    BandSummary,
    CoverageCheck,
    TrustSpec,
    WideningFactors,
    band_quantile,
    coverage,
)


class RegimeBand(FrozenSpec):
    """One family x regime band (or the pooled band of a regime, family 'pooled')."""

    family: str
    """Accelerator family, or 'pooled' (all families: the band of a family without rows)."""
    regime: str
    """dense, moe or serving."""
    rows: int
    """Held-out rows."""
    band_pct: float
    """Half-width of the band before any widening (percent)."""
    heldout_median_pct: float
    """Median |held-out error| (percent)."""
    heldout_max_pct: float = 0.0
    """Largest |held-out error| (percent)."""
    heldout_bias_pct: float = 0.0
    """Mean signed held-out error (percent; positive = optimistic)."""
    in_sample_median_pct: float | None
    """Median |in-sample error| of the same regime (percent), for comparison."""
    inside: int
    """Rows whose |held-out error| is within the band (by construction about the level)."""
    inside_without_row: int
    """Rows within the band recomputed without them (:func:`leave_one_out_inside`)."""
    envelope: str
    """What the rows validate (largest job, longest sequence, formats), '' if not tracked."""


class BandReport(FrozenSpec):
    """The band section of docs/accuracy.md."""

    level: float
    """Share of runs each band is meant to hold."""
    regimes: list[RegimeBand]
    """Per family and regime, then the pooled bands."""
    widen: WideningFactors
    """The widening factors (topologies/trust.yaml)."""
    checks: list[CoverageCheck] = Field(default_factory=list)
    """Coverage on the held-out benchmarks."""
    errors: dict[str, float] = Field(default_factory=dict)
    """Held-out (leave-one-source-out) signed error of every fitted training row, by row id."""
    fitted_rows: list[str] = Field(default_factory=list)
    """Ids of the rows some overlay's factors were fitted on (the others were never fitted)."""


def leave_one_out_inside(errors: Sequence[float], level: float) -> int:
    """Rows whose |error| lies within the band of the other rows (the band a new run gets):
    the honest coverage of the band on its own data (split-conformal: >= level on average).

    >>> leave_one_out_inside([0.01, 0.02, 0.03, 0.04, 0.5], 0.5)
    3
    """
    inside = 0
    for i, error in enumerate(errors):
        others = [*errors[:i], *errors[i + 1 :]]
        inside += bool(others) and abs(error) <= band_quantile(others, level)
    return inside


def _envelope(band: BandSummary) -> str:
    parts = []
    if band.max_num_gpus is not None:
        parts.append(f"<= {band.max_num_gpus:,} GPUs")
    if band.max_seq_len is not None:
        parts.append(f"seq <= {band.max_seq_len:,}")
    if band.min_step_s is not None:
        parts.append(f"step >= {band.min_step_s:.2g} s")
    if band.formats:
        parts.append("/".join(str(f) for f in band.formats))
    return ", ".join(parts)


def regime_band(
    family: str, regime: str, band: BandSummary, level: float, in_sample: float | None
) -> RegimeBand:
    """The report row of one stored (or pooled) band."""
    errors = list(band.errors.values())
    return RegimeBand(
        family=family,
        regime=regime,
        rows=band.count,
        band_pct=100 * band.band_abs,
        heldout_median_pct=100 * band.median_abs,
        heldout_max_pct=100 * band.max_abs,
        heldout_bias_pct=100 * band.bias,
        in_sample_median_pct=None if in_sample is None else 100 * in_sample,
        inside=round(coverage(errors, [band.band_abs] * len(errors)) * len(errors)),
        inside_without_row=leave_one_out_inside(errors, level),
        envelope=_envelope(band),
    )


def band_report(records: Sequence[CalibrationRecord], spec: TrustSpec) -> BandReport:
    """Every stored band at the spec's level, and the pooled band of each regime."""
    rows = []
    pooled: dict[str, dict[str, float]] = {}
    for record in records:
        if record.heldout is None or record.heldout.level != spec.level:
            continue
        for regime, band in record.heldout.bands.items():
            summary = record.residuals.get(regime)
            in_sample = None if summary is None else summary.median_abs
            rows.append(regime_band(record.family, regime, band, spec.level, in_sample))
            pooled.setdefault(regime, {}).update(band.errors)
    for regime, errors in pooled.items():
        band = BandSummary.of(errors, spec.level)
        rows.append(regime_band("pooled", regime, band, spec.level, None))
    training = {
        rid: err for regime, errors in pooled.items() if regime != "serving"
        for rid, err in errors.items()
    }  # fmt: skip
    return BandReport(
        level=spec.level,
        regimes=rows,
        widen=spec.widen,
        checks=spec.coverage_checks,
        errors=training,
        fitted_rows=sorted({rid for record in records for rid in record.rows}),
    )


def catalog_band_report() -> BandReport:
    """:func:`band_report` of the bundled overlays and ``topologies/trust.yaml``."""
    return band_report(fitted_calibrations(), load_trust())
