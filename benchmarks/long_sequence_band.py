"""Long sequences no fit sees: NeMo's long-sequence tables (the LS rows of
tests/validation/training_frameworks.yaml, ``fit: false``), and the ``beyond_longest_sequence``
widening of topologies/trust.yaml measured on them (run by hand, a few seconds):

    python benchmarks/long_sequence_band.py

Every unfitted row is predicted as ``layout validate`` predicts it (its stated degrees pinned, the
rest searched) and printed with its error, the band its plan prints and whether the row lies
inside. For the rows longer than any validated run of their family, |error| over the band the plan
would print without the widening has a split-conformal 80% quantile: the factor such a band needs
(planner/accuracy/sequence_band.py). tests/test_band.py checks trust.yaml against it.
"""

from __future__ import annotations

from heldout import print_summary

from planner.accuracy.rows import FRAMEWORK_ROWS_FILE, expand_cases, load_rows, training_file
from planner.accuracy.sequence_band import long_sequence_cases, score_rows, widening_ratios
from planner.catalog.store import load_trust
from planner.specs.trust import band_quantile

LEVEL = 0.8


def main() -> None:
    factor = load_trust().widen.beyond_longest_sequence.factor
    rows = load_rows(training_file().parent / FRAMEWORK_ROWS_FILE)
    scored = score_rows(long_sequence_cases(expand_cases(rows)))
    for r in scored:
        seq_k = r.case.row.workload.seq_len // 1024
        print(
            f"{r.case.id:5s} {r.case.row.cluster:14s} {seq_k:5d}K {r.plan.layout.short():42s} "
            f"predicted {r.plan.tokens_per_s_per_gpu:8,.0f}  measured "
            f"{r.case.measured_tokens_per_s_per_gpu:8,.0f}  {r.error:+6.1%}  band ±{r.band:.1%}"
            f"{'  beyond' if r.beyond else ''}{'' if abs(r.error) <= r.band else '  OUTSIDE'}"
        )
    print_summary([r.error for r in scored], [r.band for r in scored],
                  {r.plan.uncertainty_level for r in scored})  # fmt: skip
    ratios = widening_ratios(scored, factor)
    if ratios:
        print(
            f"beyond the longest validated sequence: {len(ratios)} rows, |error| / band without "
            f"the widening: {', '.join(f'{r:.2f}' for r in sorted(ratios))}; "
            f"{LEVEL:.0%} quantile {band_quantile(ratios, LEVEL):.2f} (the beyond_longest_sequence "
            f"widening; trust.yaml has {factor:g})"
        )


if __name__ == "__main__":
    main()
