"""How far a prediction can be trusted (DESIGN.md section 9): held-out error bands at a stated
level, stored in the calibration overlays, and the judgment factors that widen them when a
request extrapolates (``topologies/trust.yaml``).

A band is the |error| a new run of the same regime stays within with probability ``level``,
estimated from out-of-sample errors (leave one source out: fit the factors without a source's
rows, predict them) by the split-conformal quantile (:func:`band_quantile`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat
from planner.specs.text import Label, Name, Text


def band_quantile(abs_errors: Sequence[float], level: float) -> float:
    """The |error| a new row of the same distribution stays within with probability >= level
    (split-conformal quantile; Vovk et al. 2005, Lei et al. 2018, JASA 113:1094): the k-th
    smallest of the n |errors|, k = ceil((n + 1) level). When k > n (too few rows for the
    level: n < level / (1 - level), 4 rows at 80%) the largest |error| is returned, a floor of
    the band rather than the band (``trust.yaml`` widens few-row regimes).

    >>> band_quantile([0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09], 0.8)
    0.08
    >>> band_quantile([0.05, 0.01], 0.8)
    0.05
    """
    ordered = sorted(abs(e) for e in abs_errors)
    rank = math.ceil((len(ordered) + 1) * level - 1e-9)  # 1e-9: 10 x 0.7 = 7.000000000000001
    return ordered[min(rank, len(ordered)) - 1]


def coverage(errors: Sequence[float], bands: Sequence[float]) -> float:
    """Share of rows whose |error| lies inside their band (both fractions, one band per row).

    >>> coverage([0.05, -0.2, 0.1, -0.01], [0.1, 0.1, 0.1, 0.1])
    0.75
    """
    inside = sum(abs(e) <= b for e, b in zip(errors, bands, strict=True))
    return inside / len(errors)


class BandSummary(FrozenSpec):
    """The held-out errors of one regime of a family and the band they give at the record's
    level, with the envelope of what the rows validate (scale, sequence length, formats)."""

    count: PositiveInt
    """Rows."""
    median_abs: float = Field(ge=0)
    """Median of |held-out error| (fraction, 0.1 = 10%)."""
    max_abs: float = Field(ge=0)
    """Largest |held-out error| (fraction)."""
    bias: float
    """Mean signed held-out error (fraction; > 0 = optimistic)."""
    band_abs: float = Field(ge=0)
    """The band: :func:`band_quantile` of the |errors| at the record's ``level`` (fraction)."""
    max_num_gpus: PositiveInt | None = None
    """Largest validated job of the regime (GPUs); None = not tracked (serving)."""
    max_seq_len: PositiveInt | None = None
    """Longest validated training sequence of the regime (tokens); None = not tracked."""
    min_step_s: PositiveFloat | None = None
    """Shortest measured optimizer step among the regime's rows (global batch x sequence / GPUs
    / measured tokens per second per GPU): in a shorter step the per-step and per-kernel fixed
    costs weigh more than any row checks; None = not tracked."""
    formats: list[NumberFormat] | None = None
    """Training precisions the regime's rows use; None = not tracked."""
    frameworks: list[Name] | None = None
    """Framework profiles the regime's rows ran under; None = not tracked (Megatron only)."""
    accelerators: list[Name] | None = None
    """Catalog accelerators the regime's rows ran on; None = not tracked (the family's
    ``fitted_on`` stands for every regime)."""
    errors: dict[Name, float]
    """Held-out error of each row (predicted / measured - 1), the data of every figure above."""

    @classmethod
    def of(
        cls,
        errors: Mapping[str, float],
        level: float,
        *,
        envelope: Mapping[str, object] | None = None,
    ) -> BandSummary:
        """Summary and band of ``errors`` (row id -> error, non-empty) at ``level``;
        ``envelope`` sets max_num_gpus, max_seq_len, min_step_s, formats, frameworks and
        accelerators.

        >>> BandSummary.of({"a": 0.1, "b": -0.3, "c": 0.2}, 0.5).band_abs
        0.2
        """
        values = list(errors.values())
        return cls.model_validate(
            {
                "count": len(values),
                "median_abs": statistics.median(abs(e) for e in values),
                "max_abs": max(abs(e) for e in values),
                "bias": statistics.fmean(values),
                "band_abs": band_quantile(values, level),
                "errors": dict(errors),
                **(envelope or {}),
            }
        )


class HeldoutRecord(FrozenSpec):
    """Out-of-sample error bands of a family (``heldout:`` of a calibration overlay), written by
    ``python benchmarks/cross_validate.py --write``."""

    level: float = Field(gt=0, lt=1)
    """Share of new runs each band is meant to hold (0.8 = an 80% band; trust.yaml ``level``)."""
    method: Text
    """How the errors were obtained."""
    date: Label
    """When (ISO date)."""
    bands: dict[Name, BandSummary]
    """Per regime: 'dense' and 'moe' (leave-one-source-out training errors), 'serving' (the
    serving rows scored with the fitted factors and the engine figures fitted without each
    row's source: the held-out errors of ``topologies/engines/<engine>.yaml``)."""

    @model_validator(mode="after")
    def _bands_match_errors(self) -> HeldoutRecord:
        """Each stored band is what its errors give at the level (the YAML is regenerated, but a
        hand edit of one number must not go unnoticed)."""
        for name, band in self.bands.items():
            expected = band_quantile(list(band.errors.values()), self.level)
            if band.count != len(band.errors) or abs(band.band_abs - expected) > 1e-9:
                raise ValueError(
                    f"heldout.bands.{name}: band_abs {band.band_abs} and count {band.count} "
                    f"must be those of its {len(band.errors)} errors at level {self.level} "
                    f"({expected})"
                )
        return self


class Widening(FrozenSpec):
    """One judgment factor that widens the band of an extrapolating request."""

    factor: float = Field(ge=1, le=10)
    """Multiplier on the band (1 = no widening)."""
    source: Text
    """The evidence or reasoning behind the value."""


class WideningFactors(FrozenSpec):
    """Every extrapolation the planner widens the band for (factors multiply)."""

    no_family_rows: Widening
    """The accelerator family has no validated runs: the pooled held-out band of all families
    (catalog priors instead of fitted factors)."""
    no_regime_rows: Widening
    """The family has no validated runs of this regime (MoE on a dense-only family): the band of
    its other regime."""
    few_regime_rows: Widening
    """The regime has fewer than ``min_regime_rows`` validated runs."""
    accelerator_without_rows: Widening
    """The accelerator itself has no rows; its family's do (H200, B300, GB200 on B200 rows)."""
    precision_without_rows: Widening
    """A training precision no row of the regime uses."""
    framework_without_rows: Widening
    """The training precision has no validated runs on the family (FP4 training)."""
    beyond_largest_job: Widening
    """More GPUs than the regime's largest validated job."""
    beyond_longest_sequence: Widening
    """Longer sequences than the family's longest validated one (any regime)."""
    shorter_than_shortest_step: Widening
    """A predicted step shorter than any validated run's of the regime (strong scaling)."""
    in_sample_only: Widening
    """An overlay with in-sample residuals but no held-out band (hand-written or older overlay)."""
    serving_not_held_out: Widening
    """Serving: the band comes from the rows the serving model was built against."""
    engine_without_rows: Widening
    """Serving with an engine profile that has no validated runs (its figures are another
    engine's fit)."""
    architecture_without_rows: Widening
    """A training plan whose model has a mechanism no validated training run exercises
    (Gemma's post-norms, Llama 4's chunked attention and interleaved MoE layers:
    :func:`planner.search.trust.architecture_features`)."""


class TrustSpec(FrozenSpec):
    """``topologies/trust.yaml``: the stated level of every band and the widening factors."""

    level: float = Field(gt=0, lt=1)
    """Share of held-out runs a band is meant to hold."""
    level_source: Text
    """Why this level."""
    min_regime_rows: PositiveInt
    """Fewer validated rows than this in a regime widens its band (``few_regime_rows``)."""
    validated_architecture: list[Name]
    """The architecture features (:func:`planner.search.trust.architecture_features`) some
    validated training run exercises; a test recomputes it from the rows."""
    widen: WideningFactors
    """The judgment factors."""
    coverage_checks: list[CoverageCheck] = Field(default_factory=list)
    """Measured coverage of the printed bands on published runs no fit saw."""


class CoverageCheck(FrozenSpec):
    """How many of a held-out benchmark's rows fell inside the band the planner printed."""

    name: Name
    """The benchmark (``benchmarks/<name>.py``)."""
    command: Text
    """The command that measures it."""
    rows: PositiveInt
    """Rows evaluated."""
    inside: int = Field(ge=0)
    """Rows whose |error| is within the printed band."""
    median_band_pct: float = Field(ge=0)
    """Median printed band of the rows (percent)."""
    median_abs_error_pct: float = Field(ge=0)
    """Median |error| of the rows (percent)."""
    date: Label
    """When it was measured (ISO date)."""


TrustSpec.model_rebuild()
