"""Long sequences no fit sees: NeMo's long-sequence tables (the LS rows of
tests/validation/training_frameworks.yaml, ``fit: false``), and the ``beyond_longest_sequence``
widening of topologies/trust.yaml measured on them (run by hand, a few seconds):

    python benchmarks/long_sequence_band.py

Every LS row is predicted as ``layout validate`` predicts it (its stated degrees pinned, the rest
searched) and printed with its error, the band its plan prints and whether the row lies inside.
For the rows whose sequence is longer than any validated run of their family (the plan's
"beyond the longest validated" warning), the band the plan would print without that widening is
its band divided by the factor; the split-conformal 80% quantile of |error| / that band
(``planner.specs.trust.band_quantile``) is the factor that would make such a band hold 80% of
them: the measured ``beyond_longest_sequence`` widening.
"""

from __future__ import annotations

import statistics

from planner.accuracy.rows import FRAMEWORK_ROWS_FILE, expand_cases, load_rows, training_file
from planner.accuracy.run import predict_case
from planner.catalog.store import load_trust
from planner.errors import InfeasibleError, SpecError
from planner.specs.trust import band_quantile, coverage

LEVEL = 0.8
SEQUENCE_NOTE = "is beyond the longest validated one"
"""The warning planner.search.trust.envelope_steps writes for the sequence widening."""


def main() -> None:
    factor = load_trust().widen.beyond_longest_sequence.factor
    rows = load_rows(training_file().parent / FRAMEWORK_ROWS_FILE)
    cases = [c for c in expand_cases(rows) if not c.row.fit and c.id.startswith("LS")]
    errors: list[float] = []
    bands: list[float] = []
    ratios: list[float] = []
    for case in cases:
        try:
            plan = predict_case(case)
        except (SpecError, InfeasibleError) as exc:
            print(f"{case.id:5s} not evaluated: {' '.join(str(exc).split())}")
            continue
        error = plan.tokens_per_s_per_gpu / case.measured_tokens_per_s_per_gpu - 1.0
        band = (plan.uncertainty_pct or 0.0) / 100.0
        beyond = any(SEQUENCE_NOTE in w for w in plan.warnings)
        errors.append(error)
        bands.append(band)
        if beyond:
            ratios.append(abs(error) / (band / factor))
        seq_k = case.row.workload.seq_len // 1024
        print(
            f"{case.id:5s} {case.row.cluster:14s} {seq_k:5d}K {plan.layout.short():42s} "
            f"predicted {plan.tokens_per_s_per_gpu:8,.0f}  measured "
            f"{case.measured_tokens_per_s_per_gpu:8,.0f}  {error:+6.1%}  band ±{band:.1%}"
            f"{'  beyond' if beyond else ''}{'' if abs(error) <= band else '  OUTSIDE'}"
        )
    absolute = [abs(e) for e in errors]
    inside = round(coverage(errors, bands) * len(errors))
    print(
        f"{len(errors)} rows: median |err| {statistics.median(absolute):.1%}, max "
        f"{max(absolute):.1%}, bias {statistics.fmean(errors):+.1%}; inside the printed band: "
        f"{inside} of {len(errors)} ({inside / len(errors):.0%}; band level {LEVEL:.0%}), median "
        f"band ±{statistics.median(bands):.1%}"
    )
    if ratios:
        print(
            f"beyond the longest validated sequence: {len(ratios)} rows, |error| / band without "
            f"the widening: {', '.join(f'{r:.2f}' for r in sorted(ratios))}; "
            f"{LEVEL:.0%} quantile {band_quantile(ratios, LEVEL):.2f} (the beyond_longest_sequence "
            f"widening; trust.yaml has {factor:g})"
        )


if __name__ == "__main__":
    main()
