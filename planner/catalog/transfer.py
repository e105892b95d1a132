"""Efficiency factors for an accelerator family that no published run calibrates.

A catalog prior is a kernel ceiling: the fraction of peak a large GEMM, a flash-attention kernel
or a streaming copy reaches in a microbenchmark (each accelerator YAML cites its own). A fitted
factor (``topologies/calibration/<family>.yaml``) is what the cost model needs for whole training
steps to come out right; it is lower, because it also carries what the mechanisms leave out. On
every family fitted so far the fit sits well below the prior, and by a similar ratio (ampere
gemm 0.79, hopper 0.75, blackwell 0.67 of the prior), so a family without rows (TPU, AMD) priced
with its bare priors is predicted too fast by the same margin: the validated families' own rows,
priced with their priors, come out 23-32% fast.

The transfer: a family without a fit takes its priors times the geometric mean, over the fitted
families, of fitted / prior, for the factors that are fractions of a peak (GEMM, attention,
HBM). It is checked the only way it can be: leave one family out (predict each fitted family's
Megatron-LM rows with its priors times the other families' ratio; docs/calibration.md,
``benchmarks/transfer_calibration.py``). Everything else (kernel overhead, overlap contention,
the MoE factors) stays the prior.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from planner.specs.formats import NumberFormat
from planner.specs.hardware import (
    MIN_PLAUSIBLE_FRACTION,
    AcceleratorEfficiency,
    CalibrationRecord,
    EfficiencyFit,
)

TRANSFERRED_FACTORS = ("gemm", "attention", "hbm")
"""The factors carried over: fractions of a peak, whose fit/prior ratio is comparable across
families (the GEMM one is the bf16 ratio, applied to every format of the receiving part)."""


def fit_prior_ratios(prior: AcceleratorEfficiency, fit: EfficiencyFit) -> dict[str, float]:
    """fitted / prior of each transferred factor a fit sets (bf16 for the GEMM).

    >>> from planner.specs.hardware import AcceleratorEfficiency, EfficiencyFit
    >>> prior = AcceleratorEfficiency(gemm={"bf16": 0.8}, attention=0.75, hbm=0.9,
    ...     kernel_overhead_us=4, overlap_contention=0.2, expert_gemm=0.8,
    ...     moe_sync_overhead_us=0, memory_reserve_GB=5)
    >>> fit_prior_ratios(prior, EfficiencyFit(gemm={"bf16": 0.6}, attention=0.6))
    {'gemm': 0.75, 'attention': 0.8}
    """
    ratios: dict[str, float] = {}
    bf16 = NumberFormat.BF16
    if fit.gemm and bf16 in fit.gemm and bf16 in prior.gemm:
        ratios["gemm"] = fit.gemm[bf16] / prior.gemm[bf16]
    for key in ("attention", "hbm"):
        value = getattr(fit, key)
        if value is not None:
            ratios[key] = value / getattr(prior, key)
    return {k: round(v, 6) for k, v in ratios.items()}


def mean_ratios(per_family: Sequence[dict[str, float]]) -> dict[str, float]:
    """Geometric mean of each factor's ratio over the families that set it (one vote each).

    >>> mean_ratios([{"gemm": 0.5}, {"gemm": 0.8, "hbm": 0.8}])
    {'gemm': 0.632456, 'hbm': 0.8}
    """
    out: dict[str, float] = {}
    for key in TRANSFERRED_FACTORS:
        values = [r[key] for r in per_family if key in r]
        if values:
            out[key] = round(math.exp(sum(math.log(v) for v in values) / len(values)), 6)
    return out


def transferred_fit(
    prior: AcceleratorEfficiency,
    ratios: dict[str, float],
    step_overhead_ms: float | None = None,
) -> EfficiencyFit:
    """``prior``'s transferred factors times ``ratios``, kept within [MIN_PLAUSIBLE_FRACTION, 1]
    (the range an overlay may claim; a prior near the floor would otherwise scale below it);
    the rest left unset, except the per-step cost ``step_overhead_ms`` (the fitted families' mean)
    where the catalog leaves it unknown: it is the training loop's, not the silicon's
    (docs/calibration.md, "A fixed cost per step").

    >>> from planner.specs.hardware import AcceleratorEfficiency
    >>> prior = AcceleratorEfficiency(gemm={"bf16": 0.85, "int8": 0.85}, attention=0.55,
    ...     hbm=0.88, kernel_overhead_us=4, overlap_contention=0.2, expert_gemm=0.8,
    ...     moe_sync_overhead_us=0, memory_reserve_GB=1)
    >>> fit = transferred_fit(prior, {"gemm": 0.7, "attention": 0.9, "hbm": 0.8})
    >>> fit.gemm["bf16"], fit.gemm["int8"], fit.attention, fit.hbm, fit.kernel_overhead_us
    (0.595, 0.595, 0.495, 0.704, None)
    """
    gemm = None
    if "gemm" in ratios:
        gemm = {f: _fraction(v * ratios["gemm"]) for f, v in prior.gemm.items()}
    scaled = {
        key: _fraction(getattr(prior, key) * ratios[key])
        for key in ("attention", "hbm")
        if key in ratios
    }
    step = step_overhead_ms if prior.step_overhead_ms is None else None
    return EfficiencyFit(gemm=gemm, step_overhead_ms=step, **scaled)


def _fraction(value: float) -> float:
    """``value`` rounded to 4 digits within [MIN_PLAUSIBLE_FRACTION, 1]."""
    return round(min(1.0, max(MIN_PLAUSIBLE_FRACTION, value)), 4)


def transferred_record(
    family: str,
    prior: AcceleratorEfficiency,
    fits: Sequence[tuple[str, AcceleratorEfficiency, CalibrationRecord]],
) -> CalibrationRecord | None:
    """The overlay of a family without a fit: its ``prior`` times the mean fit/prior ratio of
    ``fits`` ((family, the prior its fit started from, its record)); None without fits."""
    per_family = [fit_prior_ratios(p, r.efficiency) for _, p, r in fits]
    ratios = mean_ratios([r for r in per_family if r])
    if not ratios:
        return None
    steps = [r.efficiency.step_overhead_ms for _, _, r in fits]
    known = [s for s in steps if s is not None]
    step = round(sum(known) / len(known), 2) if known else None
    fit = transferred_fit(prior, ratios, step)
    families = sorted(name for name, _, _ in fits)
    shown = ", ".join(f"{k} x{v:.3f}" for k, v in ratios.items())
    return CalibrationRecord(
        family=family,
        fitted_on=[],
        date=max(r.date for _, _, r in fits),
        method=(
            f"transferred, not fitted: no published runs calibrate {family}, so its catalog priors "
            f"are scaled by the geometric-mean fitted/prior ratio of {', '.join(families)} "
            f"({shown}; planner/catalog/transfer.py, checked leaving one family out in "
            "docs/calibration.md)"
            + (
                f", and takes their mean per-step cost, {fit.step_overhead_ms:g} ms, where its "
                "catalog leaves it unknown"
                if fit.step_overhead_ms is not None
                else ""
            )
        ),
        rows=[],
        efficiency=fit,
        residuals={},
        transferred_from=families,
    )
