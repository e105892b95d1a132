"""Leave one family out: how well does the calibration transfer (planner/catalog/transfer.py)
predict a family it was not fitted on? (run by hand, ~1 minute)

For each fitted family (topologies/calibration/*.yaml) its Megatron-LM rows are predicted three
ways, each with the layouts the fit resolved: with the family's bare catalog priors (what a
family without rows got before the transfer), with its priors times the mean fitted/prior ratio
of the *other* fitted families (the transfer, the family left out), and with its own fit
(in-sample, for scale). The pooled 80% quantile of the transferred |errors| against the pooled
leave-one-source-out band is one measure of the ``no_family_rows`` widening of
topologies/trust.yaml: the transfer of sourced kernel priors, on one framework.

The other is measured where the widening applies: the rows of the families no published run
calibrates (TPU and AMD), which no fit sees, each predicted as ``layout validate`` predicts it;
the 80% quantile of |error| over the band its plan prints without the widening
(planner/accuracy/sequence_band.py ``family_rows_ratios``). Those rows ran other frameworks than
the fitted one, whose own widening (``framework_without_rows``) stays in that band, so the
framework's share of their error is not counted twice. The factor is the larger of the two,
rounded up to 0.1 (tests/test_band.py checks it against the second).

    python benchmarks/transfer_calibration.py
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

from planner.accuracy.calibrate import PreparedCase, fit_set, predict, prepare
from planner.accuracy.rows import expand_cases, load_rows, training_file
from planner.accuracy.sequence_band import family_rows_ratios
from planner.catalog.store import (
    apply_calibration,
    fitted_calibrations,
    load_accelerator_prior,
    load_trust,
    transfer_sources,
)
from planner.catalog.transfer import fit_prior_ratios, mean_ratios, transferred_record
from planner.search.trust import pooled_basis
from planner.specs.hardware import AcceleratorEfficiency, CalibrationRecord
from planner.specs.trust import band_quantile

LEVEL = 0.8

Sources = tuple[tuple[str, AcceleratorEfficiency, CalibrationRecord], ...]
"""What planner.catalog.store.transfer_sources returns: (family, prior, overlay) per fit."""


def _errors(
    cases: list[PreparedCase], eff_of: Callable[[PreparedCase], AcceleratorEfficiency]
) -> list[float]:
    return [predict(c, eff_of(c)) / c.measured - 1.0 for c in cases]


def _line(label: str, errors: list[float]) -> str:
    absolute = [abs(e) for e in errors]
    return (
        f"  {label:<12} median |err| {statistics.median(absolute):6.1%}  "
        f"max {max(absolute):6.1%}  bias {statistics.fmean(errors):+6.1%}  "
        f"{LEVEL:.0%} quantile {band_quantile(absolute, LEVEL):6.1%}"
    )


def main() -> None:
    records = {r.family: r for r in fitted_calibrations() if r.fitted_on and r.efficiency.gemm}
    priors = {f: load_accelerator_prior(r.fitted_on[0]).efficiency for f, r in records.items()}
    ratios = {f: fit_prior_ratios(priors[f], r.efficiency) for f, r in records.items()}
    cases = fit_set(prepare(expand_cases(load_rows(training_file()))))
    by_family: dict[str, list[PreparedCase]] = {}
    for case in cases:
        by_family.setdefault(case.cluster.accelerator.family, []).append(case)
    pooled: dict[str, list[float]] = {"priors": [], "transferred": [], "own fit": []}
    for family in sorted(records):
        rows = by_family.get(family, [])
        if not rows:
            continue
        others = transfer_sources(family)  # every fitted family but this one
        record: CalibrationRecord = records[family]

        def transfer(
            case: PreparedCase, family: str = family, others: Sources = others
        ) -> AcceleratorEfficiency:
            prior = case.cluster.accelerator  # the catalog priors (prepare() resolves them)
            moved = transferred_record(family, prior.efficiency, others)
            return apply_calibration(prior, moved).efficiency

        def own(case: PreparedCase, record: CalibrationRecord = record) -> AcceleratorEfficiency:
            return apply_calibration(case.cluster.accelerator, record).efficiency

        mean = mean_ratios([ratios[f] for f, _, _ in others])
        shown = ", ".join(f"{k} x{v:.3f}" for k, v in mean.items())
        print(f"{family}: {len(rows)} Megatron-LM rows; own fit/prior "
              f"{', '.join(f'{k} x{v:.3f}' for k, v in ratios[family].items())}; "
              f"transferred from the others: {shown}")  # fmt: skip
        for label, eff_of in (
            ("priors", lambda c: c.cluster.accelerator.efficiency),
            ("transferred", transfer),
            ("own fit", own),
        ):
            errors = _errors(rows, eff_of)
            pooled[label] += errors
            print(_line(label, errors))
    print(f"pooled over {len(pooled['priors'])} rows:")
    for label, errors in pooled.items():
        print(_line(label, errors))
    transferred_q = band_quantile([abs(e) for e in pooled["transferred"]], LEVEL)
    basis = pooled_basis("dense", LEVEL)
    if basis is None:
        return
    left_out = transferred_q / basis.band_abs
    print(
        f"transferred {LEVEL:.0%} quantile {transferred_q:.1%} / pooled held-out dense band "
        f"{basis.band_abs:.1%} = {left_out:.2f} (one family left out)"
    )
    factor = load_trust().widen.no_family_rows.factor
    ratios = family_rows_ratios(expand_cases(load_rows(training_file())), factor)
    on_rows = band_quantile(ratios, LEVEL)
    print(
        f"rows of families without a fit: {len(ratios)}, |error| / band without the widening: "
        f"{', '.join(f'{r:.2f}' for r in sorted(ratios))}; {LEVEL:.0%} quantile {on_rows:.2f}"
    )
    print(
        f"no_family_rows widening: the larger, rounded up to 0.1: "
        f"{math.ceil(max(left_out, on_rows) * 10 - 1e-9) / 10:g} (trust.yaml has {factor:g})"
    )


if __name__ == "__main__":
    main()
