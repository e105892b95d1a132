"""Text rendering of a calibration fit."""

from __future__ import annotations

from collections.abc import Sequence

from planner.accuracy.calibrate import FamilyFit
from planner.report.quote import terminal_lines
from planner.specs.hardware import ResidualSummary


def _summary(s: ResidualSummary) -> str:
    return (
        f"median |err| {100 * s.median_abs:5.1f}%  max {100 * s.max_abs:5.1f}%  "
        f"bias {100 * s.bias:+5.1f}%  ({s.count} rows)"
    )


def calibration_text(fits: Sequence[FamilyFit]) -> str:
    """Per family: fitted factors, then errors with the priors and after the fit."""
    lines = []
    for fit in fits:
        rec = fit.record
        eff = rec.efficiency
        gemm = ", ".join(f"{k} {v:.3f}" for k, v in (eff.gemm or {}).items())
        lines.append(f"{rec.family} (fitted on {', '.join(rec.fitted_on)}, {len(rec.rows)} rows)")
        lines.append(
            f"  gemm: {gemm}; attention {eff.attention}; hbm {eff.hbm}; "
            f"kernel overhead {eff.kernel_overhead_us} us; expert gemm {eff.expert_gemm}"
        )
        for regime, after in rec.residuals.items():
            before = fit.before.get(regime)
            if before is not None:
                lines.append(f"  {regime:<6} priors : {_summary(before)}")
            lines.append(f"  {regime:<6} fitted : {_summary(after)}")
    return terminal_lines(lines)
