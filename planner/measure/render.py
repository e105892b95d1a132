"""Text summary of a measured calibration: what was seen, what was fitted, how well it fits."""

from __future__ import annotations

from planner.catalog import load_accelerator, load_system
from planner.measure.fit import MeasuredFit
from planner.report.quote import terminal_lines
from planner.specs.hardware import ResidualSummary


def _errors(s: ResidualSummary) -> str:
    return (
        f"median |err| {100 * s.median_abs:5.1f}%  max {100 * s.max_abs:5.1f}%  "
        f"bias {100 * s.bias:+6.1f}%  ({s.count})"
    )


def measured_text(fit: MeasuredFit, *, out: str | None = None) -> str:
    """Measured throughput, fitted factors next to the catalog's, and the kernel-model errors."""
    rec = fit.record
    meas = rec.measurements
    assert meas is not None
    acc = load_accelerator(meas.accelerator)
    eff = rec.efficiency
    lines = []
    if meas.dry_run:
        lines.append(
            "DRY RUN on the CPU with tiny shapes: the pipeline works; the factors below are NOT "
            f"a calibration of {acc.name}."
        )
    versions = ", ".join(
        f"{k} {v}"
        for k, v in (
            ("driver", meas.driver_version),
            ("CUDA", meas.cuda_version),
            ("torch", meas.torch_version),
        )
        if v
    )
    lines.append(
        f"measured {meas.device_name} x{meas.device_count} ({versions}) in {meas.duration_s:.0f} s"
        f"; fractions of {acc.name}" + (f" and {meas.system} links" if meas.system else "")
    )
    for fmt, value in (eff.gemm or {}).items():
        best = max((g.TFLOP_per_s for g in meas.gemm if g.format == fmt), default=0.0)
        lines.append(
            f"  gemm {fmt:<5} best {best:9.3f} TFLOP/s of {acc.peak_TFLOP_per_s[fmt]:g}; "
            f"eta {value:.4g} (catalog {acc.gemm_efficiency(fmt):.4g})"
        )
    if eff.kernel_overhead_us is not None:
        lines.append(
            f"  kernel overhead {eff.kernel_overhead_us:.4g} us "
            f"(catalog {acc.efficiency.kernel_overhead_us:.4g} us)"
        )
    if eff.attention is not None:
        best = max(a.TFLOP_per_s for a in meas.attention)
        lines.append(
            f"  attention  best {best:9.3f} TFLOP/s (causal, bf16); eta {eff.attention:.4g} "
            f"(catalog {acc.efficiency.attention:.4g})"
        )
    if eff.hbm is not None:
        best = max(c.GB_per_s for c in meas.hbm)
        lines.append(
            f"  hbm copy   best {best:9.1f} GB/s of {acc.hbm_bandwidth_GB_per_s:g}; "
            f"eta {eff.hbm:.4g} (catalog {acc.efficiency.hbm:.4g})"
        )
    if eff.link_efficiency and meas.system:
        system = load_system(meas.system)
        for op in ("all_reduce", "all_gather", "all_to_all"):
            rows = [c for c in meas.collectives if c.op == op]
            if rows:
                best = max(c.bus_GB_per_s for c in rows)
                lines.append(f"  {op:<10} best busbw {best:8.2f} GB/s x{rows[0].ranks} ranks")
        for kind, value in eff.link_efficiency.items():
            link = system.scale_up if kind == "scale_up" else system.scale_out
            latency = meas.link_latency_us.get(kind, 0.0)
            lines.append(
                f"  {kind} link eta {value:.4g} (catalog {link.efficiency:.4g}), "
                f"latency {latency:.3g} us/step (catalog {link.latency_us:g})"
            )
    for note in meas.skipped:
        lines.append(f"  skipped: {note}")
    lines.append("kernel model vs measurements (predicted / measured - 1):")
    for kind, after in fit.record.residuals.items():
        before = fit.before.get(kind)
        if before is not None:
            lines.append(f"  {kind:<11} catalog : {_errors(before)}")
        lines.append(f"  {kind:<11} fitted  : {_errors(after)}")
    if out and fit.record.dry_run:
        lines.append(f"overlay: {out} (a dry run: --calibration refuses it; measure on a GPU)")
    elif out:
        lines.append(f"overlay: {out} (apply with --calibration {out})")
    return terminal_lines(lines)  # the device name and versions come from the driver
