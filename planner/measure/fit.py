"""Fit the efficiency factors to local measurements with the cost model's own functions.

The planner and the measurement agree by construction: every predicted time below is computed by
the function the cost model uses for that kind of work, so the fitted factors reproduce the
measurements as closely as the model's form allows.

- HBM: the streaming-kernel term of :mod:`planner.cost.stage`, t = bytes / (W eta_hbm), with a
  copy moving 2 x its buffer; eta_hbm in closed form.
- GEMM: :func:`planner.cost.gemm.gemm_time`,
  t = max(2 m k n / (P_fmt eta_fmt), bpv (m k + k n + m n) / (W eta_hbm)) + t_kernel,
  with eta_hbm from the copies; eta_fmt per format and one shared t_kernel. t_kernel enters
  linearly, so it has a closed form for given eta_fmt; each eta_fmt is found by a log-spaced grid
  and a golden-section search, formats in turn until they settle (coordinate descent).
- Attention: :func:`planner.cost.compute.matmul_time` of the causal attention-core FLOPs
  (:func:`planner.cost.compute.attention_core_flops_per_token`) at the bf16 peak, as the cost
  model times flash attention; eta_attention in closed form.
- Collectives: :mod:`planner.cost.comm` (ring all-reduce, all-gather, all-to-all) over a
  :class:`~planner.specs.comm.CommDomain` of the link, t = c S / (W eta) + s alpha; (1 / eta,
  alpha) by linear least squares.

Every fit minimises the sum of squared relative time errors (predicted / measured - 1), so large
and small kernels weigh alike. Fractions are kept within the specs' bounds: (0, 1] for
efficiencies, [0, 100] us for the kernel overhead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

from planner.cost.comm import all_gather_time, all_to_all_time, ring_all_reduce_time
from planner.cost.compute import attention_core_flops_per_token, matmul_time
from planner.cost.gemm import GemmShape, gemm_time
from planner.specs.base import FrozenSpec
from planner.specs.comm import CommDomain
from planner.specs.formats import NumberFormat, bytes_per_value
from planner.specs.hardware import (
    AcceleratorSpec,
    AttentionMeasurement,
    CalibrationRecord,
    CollectiveMeasurement,
    CopyMeasurement,
    EfficiencyFit,
    GemmMeasurement,
    LinkKind,
    MeasurementRecord,
    ResidualSummary,
    SystemSpec,
)
from planner.specs.model import ModelSpec
from planner.units import US

MIN_EFFICIENCY = 1e-6
"""Smallest efficiency the fit returns (a CPU dry run against a GPU's peaks lands near 1e-4)."""
MAX_KERNEL_OVERHEAD_US = 100.0
"""Upper bound of ``kernel_overhead_us`` in :class:`~planner.specs.hardware.AcceleratorEfficiency`."""
GRID_POINTS = 121
"""Log-spaced grid points of the first search over a GEMM efficiency."""
MAX_PASSES = 60
"""Coordinate-descent passes over the GEMM formats at most."""

_COLLECTIVES: dict[str, Callable[[float, CommDomain], float]] = {
    "all_reduce": ring_all_reduce_time,
    "all_gather": all_gather_time,
    "all_to_all": all_to_all_time,
}


class Factors(FrozenSpec):
    """A full set of the factors the kernel model needs (fitted, or the catalog's)."""

    gemm: dict[NumberFormat, float]
    """GEMM efficiency per format."""
    attention: float
    """Attention efficiency (of the bf16 peak)."""
    hbm: float
    """HBM efficiency."""
    kernel_overhead_us: float
    """Fixed per-kernel time (us)."""
    links: dict[LinkKind, tuple[float, float]]
    """(efficiency, per-step latency in us) per link kind."""


# --- the kernel model: the cost model's functions ----------------------------------------------


def gemm_shape(m: GemmMeasurement) -> GemmShape:
    """The cost model's shape of one measured GEMM (one kernel)."""
    return GemmShape(name=f"{m.format}:{m.m}x{m.k}x{m.n}", m=m.m, k=m.k, n=m.n, count=1)


def predict_gemm(
    m: GemmMeasurement,
    acc: AcceleratorSpec,
    *,
    efficiency: float,
    hbm_efficiency: float,
    kernel_overhead_us: float,
) -> float:
    """Seconds the cost model gives the measured GEMM (:func:`planner.cost.gemm.gemm_time`)."""
    return gemm_time(
        gemm_shape(m),
        peak_flop_per_s=acc.peak_flop_per_s(m.format),
        efficiency=efficiency,
        bytes_per_value=bytes_per_value(m.format),
        hbm_bytes_per_s=acc.hbm_bytes_per_s * hbm_efficiency,
        kernel_overhead_s=kernel_overhead_us * US,
        tiling=acc.gemm_tiling,
    )


@lru_cache(maxsize=64)
def _probe_model(heads: int, head_dim: int, seq_len: int) -> ModelSpec:
    return ModelSpec(
        name="sdpa-probe",
        source="layout calibrate --measure attention probe",
        hidden_size=heads * head_dim,
        num_layers=1,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_dim=head_dim,
        ffn_hidden_size=1,
        ffn_activation="gelu",
        vocab_size=1,
        max_context=seq_len,
    )


def attention_flops(m: AttentionMeasurement) -> float:
    """Forward FLOPs of a causal attention call by the cost model's count.

    >>> a = AttentionMeasurement(batch=1, heads=1, seq_len=3, head_dim=2, time_us=1,
    ...                          TFLOP_per_s=1)
    >>> attention_flops(a)  # 3 tokens x 2 x 1 head x (2 + 2) x 2 mean positions
    48.0
    """
    model = _probe_model(m.heads, m.head_dim, m.seq_len)
    per_token = attention_core_flops_per_token(model, m.seq_len, sliding=False)
    return m.batch * m.seq_len * per_token


def predict_attention(m: AttentionMeasurement, acc: AcceleratorSpec, *, efficiency: float) -> float:
    """Seconds the cost model gives the measured attention call (flash attention at bf16)."""
    return matmul_time(
        attention_flops(m),
        peak_flop_per_s=acc.peak_flop_per_s(NumberFormat.BF16),
        efficiency=efficiency,
    )


def predict_copy(c: CopyMeasurement, acc: AcceleratorSpec, *, efficiency: float) -> float:
    """Seconds the cost model gives a copy: read + write of the buffer at W eta_hbm."""
    return 2.0 * c.buffer_bytes / (acc.hbm_bytes_per_s * efficiency)


def link_bytes_per_s(system: SystemSpec, kind: LinkKind) -> float:
    """Per-accelerator line rate of a link kind of ``system`` (bytes/s)."""
    if kind == "scale_up":
        return system.scale_up.bytes_per_s
    return system.scale_out.bytes_per_s_per_accelerator


def predict_collective(
    c: CollectiveMeasurement, bandwidth_bytes_per_s: float, *, efficiency: float, latency_us: float
) -> float:
    """Seconds the cost model gives the measured collective (:mod:`planner.cost.comm`)."""
    domain = CommDomain(
        size=c.ranks,
        bandwidth_bytes_per_s=bandwidth_bytes_per_s,
        latency_s=latency_us * US,
        efficiency=efficiency,
        tier=c.link,
    )
    return _COLLECTIVES[c.op](float(c.message_bytes), domain)


# --- fitting -----------------------------------------------------------------------------------


def _scale_fit(unit: Sequence[float], measured: Sequence[float]) -> float:
    """x > 0 minimising sum ((x u_i - t_i) / t_i)^2: sum(a) / sum(a^2) with a = u / t.

    >>> _scale_fit([1.0, 2.0], [2.0, 4.0])
    2.0
    """
    a = [u / t for u, t in zip(unit, measured, strict=True)]
    return sum(a) / sum(x * x for x in a)


def _efficiency(inverse: float) -> float:
    """An efficiency 1 / x clamped to [MIN_EFFICIENCY, 1]."""
    return min(1.0, max(MIN_EFFICIENCY, 1.0 / inverse)) if inverse > 0 else 1.0


def _offset_fit(base: Sequence[float], measured: Sequence[float], upper: float) -> float:
    """c in [0, upper] minimising sum ((b_i + c - t_i) / t_i)^2.

    >>> _offset_fit([1.0, 2.0], [1.5, 2.5], 10.0)
    0.5
    """
    weights = [1.0 / (t * t) for t in measured]
    c = sum(w * (t - b) for w, t, b in zip(weights, measured, base, strict=True)) / sum(weights)
    return min(upper, max(0.0, c))


def _minimise(f: Callable[[float], float], lo: float, hi: float, points: int) -> float:
    """Minimise f on [lo, hi]: the best of ``points`` grid values, refined by golden section in
    the bracket around it."""
    step = (hi - lo) / (points - 1)
    grid = [lo + i * step for i in range(points)]
    values = [f(x) for x in grid]
    best = min(range(points), key=values.__getitem__)
    a, b = grid[max(0, best - 1)], grid[min(points - 1, best + 1)]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(c), f(d)
    while b - a > 1e-13:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(d)
    x = (a + b) / 2.0
    return x if f(x) <= values[best] else grid[best]


def fit_hbm(copies: Sequence[CopyMeasurement], acc: AcceleratorSpec) -> float:
    """eta_hbm from the copies."""
    unit = [predict_copy(c, acc, efficiency=1.0) for c in copies]
    return _efficiency(_scale_fit(unit, [c.time_us * US for c in copies]))


def _gemm_loss(
    gemms: Sequence[GemmMeasurement],
    acc: AcceleratorSpec,
    effs: dict[NumberFormat, float],
    hbm_efficiency: float,
) -> tuple[float, float]:
    """(sum of squared relative errors, best kernel overhead in us) for the GEMM efficiencies."""
    measured = [g.time_us * US for g in gemms]
    base = [
        predict_gemm(
            g, acc, efficiency=effs[g.format], hbm_efficiency=hbm_efficiency, kernel_overhead_us=0
        )
        for g in gemms
    ]
    overhead = _offset_fit(base, measured, MAX_KERNEL_OVERHEAD_US * US)
    loss = sum(((b + overhead - t) / t) ** 2 for b, t in zip(base, measured, strict=True))
    return loss, overhead / US


def fit_gemm(
    gemms: Sequence[GemmMeasurement], acc: AcceleratorSpec, *, hbm_efficiency: float
) -> tuple[dict[NumberFormat, float], float]:
    """(eta per format, kernel overhead in us) minimising the GEMMs' squared relative errors
    under :func:`planner.cost.gemm.gemm_time`."""
    formats = sorted({g.format for g in gemms}, key=str)
    effs = {f: acc.gemm_efficiency(f) for f in formats}
    lo, hi = math.log(MIN_EFFICIENCY), 0.0
    for pass_ in range(MAX_PASSES):
        previous = dict(effs)
        for fmt in formats:

            def loss(log_eff: float, fmt: NumberFormat = fmt) -> float:
                trial = {**effs, fmt: math.exp(log_eff)}
                return _gemm_loss(gemms, acc, trial, hbm_efficiency)[0]

            if pass_ == 0:
                best = _minimise(loss, lo, hi, GRID_POINTS)
            else:  # refine around the current value
                here = math.log(effs[fmt])
                best = _minimise(loss, max(lo, here - 0.25), min(hi, here + 0.25), 11)
            effs[fmt] = math.exp(best)
        if all(abs(effs[f] / previous[f] - 1.0) < 1e-11 for f in formats):
            break
    return effs, _gemm_loss(gemms, acc, effs, hbm_efficiency)[1]


def fit_attention(attention: Sequence[AttentionMeasurement], acc: AcceleratorSpec) -> float:
    """eta_attention from the causal attention calls."""
    unit = [predict_attention(a, acc, efficiency=1.0) for a in attention]
    return _efficiency(_scale_fit(unit, [a.time_us * US for a in attention]))


def fit_link(
    collectives: Sequence[CollectiveMeasurement], bandwidth_bytes_per_s: float
) -> tuple[float, float]:
    """(eta, per-step latency in us) of one link kind: t_i = u_i / eta + s_i alpha with u_i the
    cost model's time at eta = 1, alpha = 0 and s_i its latency steps, by least squares of the
    relative errors."""
    import numpy as np

    measured = np.array([c.time_us * US for c in collectives])

    def at(eff: float, latency_us: float) -> np.ndarray:
        return np.array(
            [
                predict_collective(c, bandwidth_bytes_per_s, efficiency=eff, latency_us=latency_us)
                for c in collectives
            ]
        )

    unit = at(1.0, 0.0)
    steps = (at(1.0, 1.0) - unit) / US  # latency steps of each call
    rows = np.stack([unit / measured, steps / measured], axis=1)
    (inverse, alpha), *_ = np.linalg.lstsq(rows, np.ones(len(collectives)), rcond=None)
    if alpha < 0 or inverse <= 0:
        alpha, inverse = 0.0, _scale_fit(list(unit), list(measured))
    eff = _efficiency(float(inverse))
    if not math.isclose(eff * inverse, 1.0):  # clamped: refit the latency for that efficiency
        w = 1.0 / measured**2
        alpha = max(0.0, float(np.sum(w * steps * (measured - unit / eff)) / np.sum(w * steps**2)))
    return eff, float(alpha) / US


# --- residuals and the overlay -----------------------------------------------------------------


def kernel_errors(
    meas: MeasurementRecord, acc: AcceleratorSpec, system: SystemSpec | None, factors: Factors
) -> dict[str, list[float]]:
    """Relative errors (predicted / measured - 1) of every measurement under ``factors``."""
    out: dict[str, list[float]] = {"gemm": [], "attention": [], "hbm": [], "collectives": []}
    for g in meas.gemm:
        t = predict_gemm(
            g,
            acc,
            efficiency=factors.gemm.get(g.format, acc.gemm_efficiency(g.format)),
            hbm_efficiency=factors.hbm,
            kernel_overhead_us=factors.kernel_overhead_us,
        )
        out["gemm"].append(t / (g.time_us * US) - 1.0)
    for a in meas.attention:
        t = predict_attention(a, acc, efficiency=factors.attention)
        out["attention"].append(t / (a.time_us * US) - 1.0)
    for c in meas.hbm:
        out["hbm"].append(predict_copy(c, acc, efficiency=factors.hbm) / (c.time_us * US) - 1.0)
    if system is not None:
        for c in meas.collectives:
            eff, latency = factors.links[c.link]
            t = predict_collective(
                c, link_bytes_per_s(system, c.link), efficiency=eff, latency_us=latency
            )
            out["collectives"].append(t / (c.time_us * US) - 1.0)
    return {k: v for k, v in out.items() if v}


def residuals(errors: dict[str, list[float]]) -> dict[str, ResidualSummary]:
    """'all' and per-kind summaries of kernel errors."""
    every = [e for v in errors.values() for e in v]
    return {
        "all": ResidualSummary.of(every),
        **{k: ResidualSummary.of(v) for k, v in errors.items()},
    }


def catalog_factors(acc: AcceleratorSpec, system: SystemSpec | None) -> Factors:
    """The factors the planner uses today for this accelerator and system."""
    links: dict[LinkKind, tuple[float, float]] = {}
    if system is not None:
        links = {
            "scale_up": (system.scale_up.efficiency, system.scale_up.latency_us),
            "scale_out": (system.scale_out.efficiency, system.scale_out.latency_us),
        }
    return Factors(
        gemm=dict(acc.efficiency.gemm),
        attention=acc.efficiency.attention,
        hbm=acc.efficiency.hbm,
        kernel_overhead_us=acc.efficiency.kernel_overhead_us,
        links=links,
    )


def sig(x: float, digits: int = 6) -> float:
    """``x`` to ``digits`` significant digits (keeps tiny dry-run efficiencies non-zero).

    >>> sig(0.000123456789)
    0.000123457
    """
    return float(f"{x:.{digits}g}")


class MeasuredFit(FrozenSpec):
    """A measured overlay and the errors of the catalog factors on the same measurements."""

    record: CalibrationRecord
    """The overlay (with its ``measurements`` block)."""
    before: dict[str, ResidualSummary]
    """Errors of the planner's current factors (catalog priors + family fit) on the same
    measurements, by kind."""


def fit_measurements(
    meas: MeasurementRecord, acc: AcceleratorSpec, system: SystemSpec | None, *, date: str
) -> MeasuredFit:
    """Fit every factor the measurements pin down, and package the overlay."""
    prior = catalog_factors(acc, system)
    hbm = sig(fit_hbm(meas.hbm, acc)) if meas.hbm else None
    gemm: dict[NumberFormat, float] | None = None
    overhead = None
    if meas.gemm:
        effs, overhead_us = fit_gemm(meas.gemm, acc, hbm_efficiency=hbm or prior.hbm)
        gemm = {f: sig(e) for f, e in effs.items()}
        overhead = sig(overhead_us)
    attention = sig(fit_attention(meas.attention, acc)) if meas.attention else None
    link_eff: dict[LinkKind, float] = {}
    latency: dict[LinkKind, float] = {}
    if system is not None:
        for kind in ("scale_up", "scale_out"):
            group = [c for c in meas.collectives if c.link == kind]
            if group:
                eff, lat = fit_link(group, link_bytes_per_s(system, kind))
                link_eff[kind], latency[kind] = sig(eff), sig(lat)
    fit = EfficiencyFit(
        gemm=gemm,
        attention=attention,
        hbm=hbm,
        kernel_overhead_us=overhead,
        link_efficiency=link_eff or None,
    )
    fitted = Factors(
        gemm={**prior.gemm, **(gemm or {})},
        attention=attention or prior.attention,
        hbm=hbm or prior.hbm,
        kernel_overhead_us=prior.kernel_overhead_us if overhead is None else overhead,
        links={**prior.links, **{k: (link_eff[k], latency[k]) for k in link_eff}},
    )
    measurements = MeasurementRecord.model_validate(
        {**meas.model_dump(), "link_latency_us": latency}
    )
    kinds = ", ".join(k for k in ("gemm", "attention", "hbm", "collectives") if getattr(meas, k))
    record = CalibrationRecord(
        family=acc.family,
        fitted_on=[acc.name],
        date=date,
        method=(
            f"layout calibrate --measure{' --dry-run (CPU stand-in)' if meas.dry_run else ''}: "
            f"least squares of relative time errors over the local measurements ({kinds}) with "
            "the cost model's own functions: HBM bytes / (W eta_hbm); planner.cost.gemm.gemm_time "
            "(eta per format, shared kernel overhead); planner.cost.compute.matmul_time of the "
            "causal attention FLOPs at the bf16 peak; planner.cost.comm ring collectives "
            "(eta and per-step latency per link kind)"
        ),
        rows=[],
        efficiency=fit,
        residuals=residuals(kernel_errors(meas, acc, system, fitted)),
        measurements=measurements,
    )
    return MeasuredFit(record=record, before=residuals(kernel_errors(meas, acc, system, prior)))


def overlay_yaml(record: CalibrationRecord) -> str:
    """The overlay file's text: a header saying what it is, then the record."""
    import yaml

    meas = record.measurements
    what = "a CPU dry run (not a real calibration)" if meas and meas.dry_run else "measurements"
    device = f" on {meas.device_name} x{meas.device_count}" if meas else ""
    header = (
        f"# Measured calibration overlay for {', '.join(record.fitted_on)} ({record.family}), "
        f"written by `layout calibrate --measure` on {record.date}\n"
        f"# from {what}{device}. Apply with `--calibration FILE` on search / estimate; "
        "format: docs/calibration.md.\n"
    )
    body = yaml.safe_dump(
        record.model_dump(mode="json", exclude_none=True), sort_keys=False, width=100
    )
    return header + body
