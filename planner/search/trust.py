"""How far a plan can be trusted (DESIGN.md section 9): the ± band at a stated level, and the
warnings that say what the prediction does not know.

The band starts from the out-of-sample errors of the closest validated regime (accelerator
family x dense/MoE, or the family's serving rows): the ``heldout`` bands of the family's
calibration overlay, the split-conformal quantile of |held-out error| at the level
``topologies/trust.yaml`` states (80%). Each extrapolation (a family, regime, accelerator or
precision without rows, a job or sequence beyond the validated ones) multiplies it by that
file's judgment factor and adds a warning naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from planner.catalog.store import fitted_calibrations, load_trust
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.engine import ServingEngineSpec
from planner.specs.formats import NumberFormat
from planner.specs.hardware import AcceleratorSpec, CalibrationRecord
from planner.specs.layout import Layout
from planner.specs.model import ModelSpec
from planner.specs.trust import BandSummary, HeldoutRecord, TrustSpec, band_quantile
from planner.specs.workload import TrainWorkload

Step = tuple[float, str]
"""One widening: (factor, the warning that names it)."""


BEYOND_LONGEST_SEQUENCE = "is beyond the longest validated one"
"""Words of the sequence widening's warning (planner/accuracy/sequence_band.py finds the plans it
widened by them)."""

POOLED_FAMILY_BAND = "the band is the pooled held-out band of the validated families"
"""Words of the ``no_family_rows`` widening's warning, a family no published run calibrates
(planner/accuracy/sequence_band.py finds the plans it widened by them)."""


class TrustBand(FrozenSpec):
    """A plan's band and warnings."""

    uncertainty_pct: float | None
    """Half-width of the band (percent of the prediction); None when nothing is validated."""
    level: float | None
    """Share of runs the band is meant to hold (0.8 = 80%)."""
    warnings: list[str]
    """What the prediction does not know, each widening with its factor."""


@dataclass(frozen=True)
class Basis:
    """The band a plan starts from and the envelope of the rows behind it."""

    band_abs: float
    level: float
    max_num_gpus: int | None = None
    max_seq_len: int | None = None
    formats: tuple[NumberFormat, ...] | None = None
    frameworks: tuple[str, ...] | None = None
    min_step_s: float | None = None

    @classmethod
    def of(cls, band: BandSummary, level: float) -> Basis:
        """The basis of one stored band."""
        formats = None if band.formats is None else tuple(band.formats)
        frameworks = None if band.frameworks is None else tuple(band.frameworks)
        return cls(
            band.band_abs, level, band.max_num_gpus, band.max_seq_len, formats, frameworks,
            band.min_step_s,
        )  # fmt: skip


def pooled_basis(regime: str, level: float) -> Basis | None:
    """The band of every family's held-out ``regime`` errors pooled (quantile at ``level``),
    with the union of their envelopes; None when no overlay has such errors."""
    bands = [
        r.heldout.bands[regime]
        for r in fitted_calibrations()
        if r.heldout is not None and r.heldout.level == level and regime in r.heldout.bands
    ]
    if not bands:
        return None
    errors = [e for b in bands for e in b.errors.values()]
    gpus = [b.max_num_gpus for b in bands if b.max_num_gpus is not None]
    seqs = [b.max_seq_len for b in bands if b.max_seq_len is not None]
    formats = {f for b in bands for f in (b.formats or ())}
    steps = [b.min_step_s for b in bands if b.min_step_s is not None]
    return Basis(
        band_quantile(errors, level),
        level,
        max(gpus) if gpus else None,
        max(seqs) if seqs else None,
        tuple(sorted(formats, key=str)) if formats else None,
        min_step_s=min(steps) if steps else None,
    )


def heldout_of(record: CalibrationRecord | None, family: str) -> HeldoutRecord | None:
    """The held-out bands that apply: the overlay's own, or for a measured overlay (``layout
    calibrate --measure``, no held-out errors of its own) those of the family's published fit."""
    if record is not None and record.heldout is not None:
        return record.heldout
    if record is not None and record.measurements is not None:
        published = [r.heldout for r in fitted_calibrations() if r.family == family]
        return published[0] if published else None
    return None


def _without_bands(
    record: CalibrationRecord | None, regime: str, acc: AcceleratorSpec, spec: TrustSpec
) -> tuple[Basis | None, list[Step]]:
    """No held-out bands: the overlay's in-sample median, else the pooled band of all families."""
    summary = None if record is None else record.residuals.get(regime)
    pooled = pooled_basis(regime, spec.level)
    if summary is not None:  # the envelope of all validated rows, as for a pooled band
        basis = Basis(summary.median_abs, spec.level)
        basis = basis if pooled is None else replace(pooled, band_abs=summary.median_abs)
        note = f"the {acc.family} overlay has no held-out band: its in-sample median |error|"
        return basis, [(spec.widen.in_sample_only.factor, note)]
    what = "serving runs" if regime == "serving" else "runs"
    if record is None:
        note = (
            f"no published {what} calibrate {acc.family} accelerators ({acc.name}): efficiency "
            f"factors are uncalibrated catalog priors; {POOLED_FAMILY_BAND}"
        )
    elif record.transferred_from:
        note = (
            f"no published {what} calibrate {acc.family} accelerators ({acc.name}): efficiency "
            f"factors are its catalog priors scaled by the fit/prior ratios of "
            f"{', '.join(record.transferred_from)}; {POOLED_FAMILY_BAND}"
        )
    else:
        note = f"the {acc.family} overlay has no {regime} band: the band pools the other families"
    return pooled, [(spec.widen.no_family_rows.factor, note)]


def family_envelope(basis: Basis, heldout: HeldoutRecord, regime: str) -> Basis:
    """``basis`` with the formats, the longest sequence and the shortest step of all the
    family's training rows: they exercise the family's kernels (GEMM per format, attention) and
    its per-step costs, whatever the regime; the largest job stays the regime's own (its
    collectives are the regime's)."""
    if regime == "serving":
        return basis
    bands = [b for k, b in heldout.bands.items() if k != "serving"]
    seqs = [b.max_seq_len for b in bands if b.max_seq_len is not None]
    short = [b.min_step_s for b in bands if b.min_step_s is not None]
    formats = {f for b in bands for f in (b.formats or ())}
    frameworks = {f for b in bands for f in (b.frameworks or ())}
    return replace(
        basis,
        max_seq_len=max(seqs) if seqs else basis.max_seq_len,
        min_step_s=min(short) if short else basis.min_step_s,
        formats=tuple(sorted(formats, key=str)) if formats else basis.formats,
        frameworks=tuple(sorted(frameworks)) if frameworks else basis.frameworks,
    )


def family_basis(
    acc: AcceleratorSpec, regime: str, spec: TrustSpec
) -> tuple[Basis | None, list[Step]]:
    """The band of ``regime`` on ``acc``'s family and the widenings of its gaps (no rows of the
    regime, few rows, an accelerator without rows of its own or without rows of the regime)."""
    record = acc.calibration
    heldout = heldout_of(record, acc.family)
    band = None if heldout is None else heldout.bands.get(regime)
    steps: list[Step] = []
    own_band = band is not None
    if heldout is not None and band is None and regime != "serving":
        other = next((k for k in ("dense", "moe") if k in heldout.bands), None)
        if other is not None:
            band = heldout.bands[other]
            note = (
                f"no validated {regime} runs on {acc.family}: the band is that of its {other} runs"
            )
            steps.append((spec.widen.no_regime_rows.factor, note))
    if heldout is None or band is None:
        return _without_bands(record, regime, acc, spec)
    if record is not None and record.measurements is not None:
        steps.append((1.0, f"the band is the {acc.family} published-run fit's; the measured "
                      "factors were not cross-validated"))  # fmt: skip
    if band.count < spec.min_regime_rows:
        note = (
            f"only {band.count} validated {regime} runs on {acc.family}; the band is a rough guide"
        )
        steps.append((spec.widen.few_regime_rows.factor, note))
    fitted_on = [] if record is None else record.fitted_on
    if regime != "serving" and acc.name not in fitted_on:
        note = f"{acc.name} has no validated runs; the {acc.family} factors are fitted on " + (
            ", ".join(fitted_on)
        )
        steps.append((spec.widen.accelerator_without_rows.factor, note))
    elif own_band and band.accelerators and acc.name not in band.accelerators:
        # its family's factors saw this part, but not this regime on it (MoE on GB200 when the
        # MoE rows ran on B200): the regime's own terms (expert GEMMs, all-to-all over its
        # domain, the MoE host sync) were never checked on it
        note = (
            f"no validated {regime} runs on {acc.name}: the {acc.family} {regime} band comes "
            f"from runs on {', '.join(band.accelerators)}"
        )
        steps.append((spec.widen.accelerator_without_rows.factor, note))
    return family_envelope(Basis.of(band, heldout.level), heldout, regime), steps


def envelope_steps(
    basis: Basis,
    workload: TrainWorkload,
    layout: Layout,
    spec: TrustSpec,
    step_s: float | None = None,
    noun: str = "GPU",
) -> list[Step]:
    """Widenings for a plan beyond what the basis's rows validate: more GPUs, longer
    sequences, a shorter step than any of them (``step_s``, the plan's predicted step: strong
    scaling), a precision none of them used; ``noun`` names one accelerator in the warnings
    (``AcceleratorSpec.device_noun``)."""
    steps: list[Step] = []
    if basis.max_num_gpus is not None and layout.num_gpus > basis.max_num_gpus:
        note = (
            f"{layout.num_gpus} {noun}s is beyond the largest validated job ({basis.max_num_gpus})"
        )
        steps.append((spec.widen.beyond_largest_job.factor, note))
    if basis.max_seq_len is not None and workload.seq_len > basis.max_seq_len:
        note = f"sequence length {workload.seq_len} {BEYOND_LONGEST_SEQUENCE} ({basis.max_seq_len})"
        steps.append((spec.widen.beyond_longest_sequence.factor, note))
    if basis.min_step_s is not None and step_s is not None and step_s < basis.min_step_s:
        note = (
            f"a {step_s * 1e3:,.0f} ms step is shorter than any validated run's "
            f"({basis.min_step_s * 1e3:,.0f} ms): per-step fixed costs weigh more than any row checks"
        )
        steps.append((spec.widen.shorter_than_shortest_step.factor, note))
    if basis.formats is not None and layout.precision not in basis.formats:
        steps.append((spec.widen.precision_without_rows.factor,
                      f"{layout.precision} training has no validated runs"))  # fmt: skip
    known = basis.frameworks if basis.frameworks is not None else ("megatron",)
    if workload.framework not in known:
        note = (
            f"the factors are fitted on {', '.join(known)} runs; framework "
            f"'{workload.framework}' is predicted through its profile"
        )
        steps.append((spec.widen.framework_without_rows.factor, note))
    return steps


def architecture_features(model: ModelSpec) -> frozenset[str]:
    """The mechanisms of ``model`` the cost model prices on their own, by name: what a validated
    run must have exercised for the band to speak for them (``validated_architecture`` in
    ``topologies/trust.yaml``).

    >>> from planner.catalog import load_model
    >>> sorted(architecture_features(load_model("gemma-3-27b")))
    ['post_norms', 'qk_norm', 'sliding_window']
    """
    moe, chunked = model.moe, model.local_attention == "chunked"
    named = {
        "mla": model.mla is not None,
        "moe": moe is not None,
        "shared_experts": moe is not None and moe.num_shared_experts > 0,
        "leading_dense_layers": moe is not None and moe.first_dense_layers > 0,
        "interleaved_moe": moe is not None and moe.layer_step > 1,
        "sliding_window": model.num_sliding_window_layers > 0 and not chunked,
        "chunked_attention": model.num_sliding_window_layers > 0 and chunked,
        "post_norms": model.post_norms,
        "parallel_block": model.parallel_block,
        "qk_norm": model.qk_norm,
        "attention_sinks": model.attention_sinks,
        "alibi": model.position_embedding == "alibi",
        "learned_positions": model.position_embedding == "learned",
        "dropout": model.dropout,
    }
    return frozenset(name for name, present in named.items() if present)


def architecture_step(model: ModelSpec, spec: TrustSpec) -> list[Step]:
    """The ``architecture_without_rows`` widening when ``model`` has a mechanism (
    :func:`architecture_features`) no validated run exercises; none otherwise."""
    new = sorted(architecture_features(model) - set(spec.validated_architecture))
    if not new:
        return []
    note = f"no validated run has {', '.join(new).replace('_', ' ')}: priced, never checked"
    return [(spec.widen.architecture_without_rows.factor, note)]


def widened(basis: Basis | None, steps: Sequence[Step]) -> TrustBand:
    """The basis's band times every step's factor, each step's warning with its factor."""
    warnings = [note if factor == 1.0 else f"{note} (band x{factor:g})" for factor, note in steps]
    if basis is None:
        return TrustBand(uncertainty_pct=None, level=None, warnings=warnings)
    pct = 100.0 * basis.band_abs
    for factor, _ in steps:
        pct *= factor
    return TrustBand(uncertainty_pct=pct, level=basis.level, warnings=warnings)


def train_band(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    step_s: float | None = None,
) -> TrustBand:
    """The band of a training plan (module docstring); ``step_s`` is its predicted step."""
    spec = load_trust()
    regime = "moe" if model.moe is not None else "dense"
    basis, steps = family_basis(cluster.accelerator, regime, spec)
    if basis is not None:
        steps += envelope_steps(
            basis, workload, layout, spec, step_s, noun=cluster.accelerator.device_noun
        )
    steps += architecture_step(model, spec)
    return widened(basis, steps)


def serve_band(acc: AcceleratorSpec, engine: ServingEngineSpec | None = None) -> TrustBand:
    """The band of a serving plan: the family's serving band (the engine fit's leave-one-
    source-out errors on the family's serving rows), widened because the serving model's terms
    were built against those rows, and again when the engine has no rows of its own."""
    spec = load_trust()
    basis, steps = family_basis(acc, "serving", spec)
    note = (
        "the serving band is the spread of the serving rows' errors with the engine's figures "
        "fitted without each row's source; the serving model's terms were built against them"
    )
    steps.append((spec.widen.serving_not_held_out.factor, note))
    if engine is not None and not engine.has_rows:
        steps.append(
            (
                spec.widen.engine_without_rows.factor,
                f"no published run of the {engine.name} engine is validated: its overheads are "
                "another engine's fit",
            )
        )
    return widened(basis, steps)
