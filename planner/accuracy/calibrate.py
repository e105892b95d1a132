"""Fit the accelerator efficiency factors against the validation set (``layout calibrate --fit``).

A few physically meaningful factors per accelerator family (large-GEMM efficiency per format,
flash-attention efficiency, HBM streaming efficiency, per-kernel fixed time) are fitted to the
family's published runs by minimising the mean absolute log error of tokens/s/GPU (robust: one
row with a mechanism the model lacks cannot drag every factor), with a weak pull towards the
catalog priors, by coordinate descent over bounded grids (deterministic, no extra dependency).
The per-step cost is the training loop's, not the hardware's: one value for every family, fitted
on their rows pooled (:func:`fit_families`). Each row's layout is resolved once with the priors
(search pins what the source states) and then held fixed, so the fit only moves the efficiency
factors. The result is an overlay, ``topologies/calibration/<family>.yaml``, with the date, the
rows used and the residuals after the fit; the catalog loader lays it over every accelerator of
the family.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from planner.accuracy.rows import (
    Case,
    is_moe,
    row_cluster,
    stated_layout,
    to_model_spec,
    workload_of,
)
from planner.accuracy.run import LAYOUT_FIELDS
from planner.catalog import load_cluster
from planner.catalog.store import load_accelerator_prior, load_calibration
from planner.cost.expert import dispatcher_syncs_host
from planner.errors import InfeasibleError, SpecError
from planner.search import engine
from planner.search.evaluate import score
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.formats import NumberFormat
from planner.specs.hardware import (
    AcceleratorEfficiency,
    CalibrationRecord,
    EfficiencyFit,
    ResidualSummary,
)
from planner.specs.layout import Layout
from planner.specs.model import ModelSpec
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import TrainWorkload

BOUNDS: dict[str, tuple[float, float]] = {
    "gemm": (0.35, 0.85),
    "attention": (0.30, 0.85),
    "hbm": (0.50, 0.95),
    "kernel_overhead_us": (0.0, 40.0),
    "expert_gemm": (0.2, 1.0),
    "overlap_contention": (0.1, 0.6),
    "moe_sync_overhead_us": (0.0, 8000.0),
    "step_overhead_ms": (0.0, 300.0),
}
"""Physically plausible ranges: a GEMM above ~0.85 of dense peak is suspect (issue #4); HBM
streams reach 0.85-0.92 (hardware.md section 12); kernel launch + tail is tens of us at most;
overlapped NCCL kernels take at least ~10% of the SMs (16 channels of 132 on H100); the MoE host
sync exposes at most a layer's eager launches, ~200-300 at ~10-20 us (the accelerator catalogs'
``moe_sync_overhead_us`` source), so up to ~6 ms, rounded up to 8."""
GRID_POINTS = 41
"""Values tried per factor per coordinate-descent pass."""
PASSES = 4
"""Coordinate-descent passes over the factors."""
MIN_ROWS_PER_FORMAT = 3
"""A format's GEMM efficiency is fitted only from at least this many rows; else the prior stays."""
MIN_FIT_ROWS = 6
"""A family is fitted only on at least this many rows: fewer would fit one publication's few
runs (PaLM's two, Frontier's two); a family without a fit takes its catalog priors scaled by
the fitted families' fitted/prior ratios (:mod:`planner.catalog.transfer`), and its band widens
(``topologies/trust.yaml``)."""
PRIOR_WEIGHT = 0.05
"""Weight of the squared relative distance to the catalog prior in the loss."""


class PreparedCase(FrozenSpec):
    """A validation case with its layout resolved and held fixed during the fit."""

    id: str
    """Row id."""
    kind: str
    """dense or moe."""
    model: ModelSpec
    """The row's architecture."""
    cluster: ClusterSpec
    """The row's cluster (priors)."""
    workload: TrainWorkload
    """Sequence length, global batch, precision."""
    layout: Layout
    """Resolved layout."""
    measured: float
    """Measured tokens/s/GPU."""
    fit: bool = True
    """Whether fits may use it (``TrainingRow.fit``)."""


def prepare(cases: Sequence[Case]) -> list[PreparedCase]:
    """Resolve each case's layout with the catalog priors; skip cases the planner cannot run."""
    out = []
    for case in cases:
        row = case.row
        try:
            model, cluster = to_model_spec(row), row_cluster(row)
            prior = load_accelerator_prior(cluster.accelerator.name)
            cluster = cluster.model_copy(update={"accelerator": prior})
            workload = workload_of(row)
            stated = stated_layout(row)
            if all(k in stated for k in LAYOUT_FIELDS):
                layout = Layout.model_validate({**stated, "precision": workload.precision})
            else:
                config = SolverConfig(
                    solver="exhaustive", top=1, stage_split="even", memory_headroom=0.0
                )
                layout = engine.search(
                    model, cluster, workload, fix=stated, config=config
                ).best.layout
        except (SpecError, InfeasibleError):
            continue
        out.append(
            PreparedCase(
                id=case.id,
                kind="moe" if is_moe(row) else "dense",
                model=model,
                cluster=cluster,
                workload=workload,
                layout=layout,
                measured=case.measured_tokens_per_s_per_gpu,
                fit=row.fit,
            )
        )
    return out


def predict(case: PreparedCase, efficiency: AcceleratorEfficiency) -> float:
    """Tokens/s/GPU of ``case`` with ``efficiency`` in place of the accelerator's factors."""
    acc = case.cluster.accelerator.model_copy(update={"efficiency": efficiency})
    cluster = case.cluster.model_copy(update={"accelerator": acc})
    cost = score(case.model, cluster, case.workload, case.layout)
    return case.workload.tokens_per_step / cost.step_time_s / case.layout.num_gpus


def _loss(
    cases: Sequence[PreparedCase], eff: AcceleratorEfficiency, prior: AcceleratorEfficiency
) -> float:
    errors = [abs(math.log(predict(c, eff) / c.measured)) for c in cases]
    pull = sum(((a - b) / b) ** 2 for a, b in zip(_vector(eff), _vector(prior), strict=True) if b)
    return statistics.fmean(errors) + PRIOR_WEIGHT * pull


def _vector(eff: AcceleratorEfficiency) -> list[float]:
    return [
        *eff.gemm.values(),
        eff.attention,
        eff.hbm,
        eff.kernel_overhead_us + 1.0,
        eff.expert_gemm,
        eff.moe_sync_overhead_us + 1.0,
    ]


def _with(eff: AcceleratorEfficiency, name: str, value: float) -> AcceleratorEfficiency:
    if name.startswith("gemm."):
        gemm = {**eff.gemm, NumberFormat(name.split(".", 1)[1]): value}
        return eff.model_copy(update={"gemm": gemm})
    return eff.model_copy(update={name: value})


def fit_set(cases: Sequence[PreparedCase]) -> list[PreparedCase]:
    """The cases whose framework profile calibrates (``FrameworkSpec.calibrates``: Megatron-LM,
    whose published runs state their recipes) and whose row does not opt out (``fit: false``);
    the other rows are left out of every fit and stay out-of-sample tests."""
    from planner.catalog.frameworks import load_framework

    return [c for c in cases if c.fit and load_framework(c.workload.framework).calibrates]


def fittable(cases: Sequence[PreparedCase]) -> bool:
    """Whether ``cases`` are enough to fit a family's factors (:data:`MIN_FIT_ROWS` rows).

    >>> fittable([])
    False
    """
    return len(cases) >= MIN_FIT_ROWS


def fitted_names(cases: Sequence[PreparedCase]) -> list[str]:
    """The factors the cases exercise enough to fit (GEMM formats with enough rows, the expert
    factors with enough MoE rows)."""
    counts = Counter(c.layout.precision for c in cases)
    formats = sorted((f for f, n in counts.items() if n >= MIN_ROWS_PER_FORMAT), key=str)
    names = [f"gemm.{f}" for f in formats]
    names += ["attention", "hbm", "kernel_overhead_us", "overlap_contention", "step_overhead_ms"]
    if sum(c.kind == "moe" for c in cases) >= MIN_ROWS_PER_FORMAT:
        names.append("expert_gemm")
    synced = sum(c.kind == "moe" and dispatcher_syncs_host(c.workload) for c in cases)
    if synced >= MIN_ROWS_PER_FORMAT:
        names.append("moe_sync_overhead_us")
    return names


LOOP_FACTOR = "step_overhead_ms"
"""The training loop's per-step cost: one value for every family (:func:`fit_families`)."""


class _Start(FrozenSpec):
    """Where one family's coordinate descent starts, and what it moves."""

    eff: AcceleratorEfficiency
    """Starting factors (the prior, each fitted format at its prior or the bf16 prior)."""
    prior: AcceleratorEfficiency
    """What the loss pulls towards (a bf16 GEMM prior of 0.7 where the catalog has none)."""
    ceiling: AcceleratorEfficiency
    """The catalog's own factors, the measured kernels that cap the fit (:func:`factor_bounds`;
    the 0.7 stand-in above is no measurement and caps nothing)."""
    fitted: frozenset[NumberFormat]
    """GEMM formats with enough rows to fit."""
    names: tuple[str, ...]
    """Factors the descent moves."""


def _start(cases: Sequence[PreparedCase], prior: AcceleratorEfficiency) -> _Start:
    names = fitted_names(cases)
    ceiling = prior
    formats = [NumberFormat(n.split(".", 1)[1]) for n in names if n.startswith("gemm.")]
    if NumberFormat.BF16 not in prior.gemm:
        prior = prior.model_copy(update={"gemm": {**prior.gemm, NumberFormat.BF16: 0.7}})
    eff = prior.model_copy(
        update={
            "gemm": {
                **prior.gemm,
                **{f: prior.gemm.get(f, prior.gemm[NumberFormat.BF16]) for f in formats},
            }
        }
    )
    return _Start(
        eff=eff, prior=prior, ceiling=ceiling, fitted=frozenset(formats), names=tuple(names)
    )


def _consistent(e: AcceleratorEfficiency, start: _Start) -> AcceleratorEfficiency:
    return e.model_copy(update={"gemm": _all_formats(e, start.prior, start.fitted, digits=12)})


CEILING_FACTORS: tuple[str, ...] = ("gemm", "attention", "hbm")
"""Factors whose catalog prior is the measured best kernel on the part (the matmul FLOP/s of
MAMF, the attention kernel's forward and backward, the HBM stream's bandwidth; each source in
the accelerator YAML): a fit may lower them, never raise them above it. Above it the fit would
credit a kernel with more than it was measured to do, to absorb something else the rows share
(docs/calibration.md, "Attention at its measured speed")."""


def factor_bounds(name: str, prior: AcceleratorEfficiency) -> tuple[float, float]:
    """The grid range of ``name`` (a factor, ``gemm.<format>`` for a GEMM format):
    :data:`BOUNDS`, its top lowered to the catalog's figure for :data:`CEILING_FACTORS` (never
    below the range's floor; a format the catalog has no figure for keeps the range).

    >>> prior = AcceleratorEfficiency.model_construct(
    ...     gemm={NumberFormat.BF16: 0.8}, attention=0.56, hbm=0.9)
    >>> factor_bounds("attention", prior), factor_bounds("gemm.bf16", prior)
    ((0.3, 0.56), (0.35, 0.8))
    >>> factor_bounds("kernel_overhead_us", prior), factor_bounds("gemm.fp8", prior)
    ((0.0, 40.0), (0.35, 0.85))
    """
    base = name.split(".")[0]
    low, high = BOUNDS[base]
    if base in CEILING_FACTORS:
        if name.startswith("gemm."):
            value = prior.gemm.get(NumberFormat(name.split(".", 1)[1]))
        else:
            value = getattr(prior, base)
        if value is not None:
            high = max(low, min(high, value))
    return low, high


def _descend(
    cases: Sequence[PreparedCase],
    eff: AcceleratorEfficiency,
    start: _Start,
    names: Sequence[str],
    passes: int,
) -> AcceleratorEfficiency:
    """``passes`` coordinate-descent passes over ``names`` from ``eff``, each factor tried at
    :data:`GRID_POINTS` points of its :func:`factor_bounds`."""
    best = _loss(cases, _consistent(eff, start), start.prior)
    for _ in range(passes):
        for name in names:
            low, high = factor_bounds(name, start.ceiling)
            for i in range(GRID_POINTS):
                trial = _with(eff, name, low + (high - low) * i / (GRID_POINTS - 1))
                value = _loss(cases, _consistent(trial, start), start.prior)
                if value < best - 1e-12:
                    best, eff = value, trial
    return _consistent(eff, start)


def fit_families(
    grouped: Mapping[str, Sequence[PreparedCase]],
) -> dict[str, AcceleratorEfficiency]:
    """Each fittable family's factors (:func:`fittable`), with one per-step cost for all.

    The per-step cost is the training loop's (the host's sync at each step: docs/calibration.md,
    "The per-step cost is the loop's"), not the accelerator's, and every fitted row runs the same
    loop (Megatron-LM). Fitted per family it was a free parameter the prior pull could push the
    others' misfit into (a family whose factors sat far below their priors raised it and let
    them rise). Coordinate descent over bounded grids (:func:`_descend`): each pass moves each
    family's own factors on its own loss with the loop cost fixed, then the loop cost on the loss
    pooled over every family's rows (the mean absolute log error; the pulls do not depend on
    it). Formats with too few rows follow the fitted ones (:func:`_all_formats`) during the fit
    as in the overlay, so a row in such a format is scored with the efficiency it will be
    predicted with."""
    starts = {f: _start(c, c[0].cluster.accelerator.efficiency) for f, c in grouped.items()}
    starts = {f: s for f, s in starts.items() if fittable(grouped[f])}
    if not starts:
        return {}
    effs = {f: s.eff for f, s in starts.items()}
    low, high = BOUNDS[LOOP_FACTOR]
    loop_ms = low

    def pooled(value: float) -> float:
        errors = []
        for family, start in starts.items():
            eff = _consistent(_with(effs[family], LOOP_FACTOR, value), start)
            errors += [abs(math.log(predict(c, eff) / c.measured)) for c in grouped[family]]
        return statistics.fmean(errors)

    for _ in range(PASSES):
        for family, start in starts.items():
            own = [n for n in start.names if n != LOOP_FACTOR]
            effs[family] = _descend(
                grouped[family], _with(effs[family], LOOP_FACTOR, loop_ms), start, own, 1
            )
        best = pooled(loop_ms)
        for i in range(GRID_POINTS):
            value = low + (high - low) * i / (GRID_POINTS - 1)
            trial = pooled(value)
            if trial < best - 1e-12:
                best, loop_ms = trial, value
    return {f: _consistent(_with(e, LOOP_FACTOR, loop_ms), starts[f]) for f, e in effs.items()}


def source_of(row_id: str) -> str:
    """The source group of a row id (:func:`planner.accuracy.loso.source_of`)."""
    from planner.accuracy.loso import source_of as group  # loso.py imports this module

    return group(row_id)


def residuals(
    cases: Sequence[PreparedCase], eff: AcceleratorEfficiency
) -> dict[str, ResidualSummary]:
    """Error summaries after the fit: all rows, and per regime."""
    errors = {c.id: (c.kind, predict(c, eff) / c.measured - 1.0) for c in cases}
    out = {"all": ResidualSummary.of([e for _, e in errors.values()])}
    for kind in ("dense", "moe"):
        subset = [e for k, e in errors.values() if k == kind]
        if subset:
            out[kind] = ResidualSummary.of(subset)
    return out


def _all_formats(
    eff: AcceleratorEfficiency,
    prior: AcceleratorEfficiency,
    fitted: AbstractSet[NumberFormat],
    digits: int = 4,
) -> dict[NumberFormat, float]:
    """Fitted GEMM efficiencies, and for the formats without enough rows their prior scaled by
    the median fitted/prior ratio of the fitted ones (the software stack that lowers one format's
    efficiency lowers the others; leaving them at the prior would make an unvalidated format look
    better than a validated one)."""
    ratios = sorted(eff.gemm[f] / prior.gemm[f] for f in fitted if prior.gemm.get(f))
    scale = ratios[len(ratios) // 2] if ratios else 1.0
    out = {}
    for fmt, value in prior.gemm.items():
        out[fmt] = round(eff.gemm[fmt] if fmt in fitted else value * scale, digits)
    return out


def calibrate_family(
    cases: Sequence[PreparedCase],
    *,
    date: str,
    fitted: AcceleratorEfficiency | None = None,
    heldout_errors: Mapping[str, float] | None = None,
) -> CalibrationRecord:
    """Package one family's factors as an overlay record: ``fitted``, its entry of
    :func:`fit_families` (None for a family too small to fit, which keeps its priors); with
    ``heldout_errors`` (row id -> out-of-sample error, :func:`planner.accuracy.loso.loso_errors`)
    also its out-of-sample bands."""
    accelerator = cases[0].cluster.accelerator
    prior = accelerator.efficiency
    method = (
        f"mean absolute log error of tokens/s/GPU over the Megatron-LM rows of tests/validation "
        f"(the profiles that calibrate), "
        f"prior pull {PRIOR_WEIGHT}, coordinate descent ({PASSES} passes x {GRID_POINTS} "
        f"points) within {BOUNDS}, {', '.join(CEILING_FACTORS)} at most their catalog priors, "
        f"the per-step cost one value for every fitted family; "
        f"layouts resolved once with the catalog priors"
    )
    if fitted is not None:
        eff = fitted
        names = fitted_names(cases)
        formats = {NumberFormat(n.split(".", 1)[1]) for n in names if n.startswith("gemm.")}
        fit = EfficiencyFit(
            gemm=_all_formats(eff, prior, formats),
            attention=round(eff.attention, 4),
            hbm=round(eff.hbm, 4),
            kernel_overhead_us=round(eff.kernel_overhead_us, 3),
            expert_gemm=round(eff.expert_gemm, 4) if any(c.kind == "moe" for c in cases) else None,
            overlap_contention=round(eff.overlap_contention, 4),
            moe_sync_overhead_us=(
                round(eff.moe_sync_overhead_us, 1) if "moe_sync_overhead_us" in names else None
            ),
            step_overhead_ms=round(eff.step_overhead_ms or 0.0, 2),
        )
    else:
        eff, fit = prior, EfficiencyFit()
        method = (
            f"not fitted: {len(cases)} rows from {len({source_of(c.id) for c in cases})} "
            f"source(s), fewer than {MIN_FIT_ROWS}; no overlay is written (the catalog priors "
            "scaled by the fitted families' ratios apply), and the errors below are the bare "
            "priors'"
        )
    serving = serving_errors(accelerator.family, eff)
    serving_summary = {"serving": ResidualSummary.of(list(serving.values()))} if serving else {}
    record = CalibrationRecord(
        family=accelerator.family,
        fitted_on=sorted({c.cluster.accelerator.name for c in cases}),
        date=date,
        rows=[c.id for c in cases],
        method=method,
        efficiency=fit,
        residuals={**residuals(cases, eff), **serving_summary},
    )
    if heldout_errors is None:
        return record
    from planner.accuracy.loso import heldout_record  # loso.py refits with this module

    heldout_serving = serving_heldout_errors(accelerator.family, eff)
    held = heldout_record(cases, heldout_errors, heldout_serving, date=date)
    return record.model_copy(update={"heldout": held})


def serving_heldout_errors(family: str, eff: AcceleratorEfficiency) -> dict[str, float]:
    """Row id -> out-of-sample error of the serving rows on ``family`` predicted with ``eff``:
    for a row its engine was fitted on, the error with the engine figures fitted without its
    source (the engine's fit record, ``benchmarks/fit_serving_engine.py``); for any other row
    its plain error (nothing was fitted on it)."""
    from planner.accuracy.serving import heldout_error_of, load_serving_rows, serving_file

    try:
        rows = {r.id: r for r in load_serving_rows(serving_file())}
    except SpecError:
        return {}
    errors = {}
    for row_id, error in serving_errors(family, eff).items():
        held = heldout_error_of(rows[row_id], error)
        if held is not None:
            errors[row_id] = held
    return errors


def serving_errors(family: str, eff: AcceleratorEfficiency) -> dict[str, float]:
    """Row id -> error of the bundled serving rows on ``family`` predicted with ``eff``."""
    from planner.accuracy.serving import load_serving_rows, predict_row, serving_file

    try:
        rows = load_serving_rows(serving_file())
    except SpecError:
        return {}
    errors = {}
    for row in rows:
        try:
            if load_cluster(row.cluster).accelerator.family != family:
                continue
        except SpecError:
            continue
        result = predict_row(row, eff)
        if result.status == "ok" and result.error is not None:
            errors[row.id] = result.error
    return errors


class FamilyFit(FrozenSpec):
    """One family's calibration: the overlay, and the errors with the catalog priors."""

    record: CalibrationRecord
    """The fitted overlay."""
    before: dict[str, ResidualSummary]
    """Errors of the same rows with the catalog priors."""


def run_calibration(
    cases: Sequence[Case],
    *,
    date: str,
    families: Sequence[str] = (),
    heldout: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[FamilyFit]:
    """Fit every family that has validation rows (or only ``families``). With ``heldout`` each
    record gets fresh out-of-sample bands (minutes); without, it keeps the stored overlay's
    bands when its rows and fitted factors are unchanged (the refits they come from would
    then be the same), and has none otherwise. ``progress(done, total, family)`` is called as
    each family starts and when the last one ends."""
    grouped: dict[str, list[PreparedCase]] = {}
    for case in fit_set(prepare(cases)):
        grouped.setdefault(case.cluster.accelerator.family, []).append(case)
    unknown = set(families) - set(grouped)
    if unknown:
        raise SpecError(
            f"no validation rows for family '{sorted(unknown)[0]}'; families with rows: "
            f"{', '.join(sorted(grouped))}"
        )
    out = []
    chosen = sorted(families or grouped)
    if progress is not None:
        progress(0, len(chosen), "all families (one per-step cost)")
    fits = fit_families(grouped)
    errors: dict[str, float] | None = None
    if heldout:
        from planner.accuracy.loso import loso_errors  # loso.py refits with this module

        errors = loso_errors(grouped)
    for done, family in enumerate(chosen):
        if progress is not None:
            progress(done, len(chosen), family)
        rows = grouped[family]
        before = residuals(rows, rows[0].cluster.accelerator.efficiency)
        record = calibrate_family(rows, date=date, fitted=fits.get(family), heldout_errors=errors)
        if not heldout:
            record = _keep_heldout(record)
        out.append(FamilyFit(record=record, before=before))
    if progress is not None:
        progress(len(chosen), len(chosen), "done")
    return out


def _keep_heldout(record: CalibrationRecord) -> CalibrationRecord:
    """``record`` with the stored overlay's held-out bands if it fits the same rows to the same
    factors."""
    stored = load_calibration(record.family)
    same = (
        stored is not None
        and stored.rows == record.rows
        and stored.efficiency == record.efficiency
        and stored.heldout is not None
    )
    return record.model_copy(update={"heldout": stored.heldout}) if same else record


def overlay_yaml(record: CalibrationRecord) -> str:
    """The overlay file's text: a header saying what it is, then the record."""
    import yaml

    header = (
        f"# Calibration overlay for the {record.family} family, written by "
        f"`layout calibrate --fit --write` on {record.date}.\n"
        "# Efficiency factors fitted against tests/validation/training.yaml; the catalog "
        "loader lays them over the priors\n# of every accelerator whose `family` is "
        f"{record.family}. Regenerate rather than edit by hand.\n"
    )
    body = yaml.safe_dump(record.model_dump(mode="json"), sort_keys=False, width=100)
    return header + body
