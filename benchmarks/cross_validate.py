"""Out-of-sample accuracy: leave one source out, fit the efficiency factors on the other rows of
the accelerator family, predict the held-out rows (run by hand, ~3 minutes):

    python benchmarks/cross_validate.py

Source groups are the row-id prefixes (S: SC'21, K: Korthikanti et al., M: Megatron-LM H100
table, N: Megatron-Bridge, F and G: NeMo tables, D: DGX Cloud recipes). The in-sample figures of
``layout validate`` use every row for the fit; these say how the same fit does on runs it did
not see.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from planner.accuracy.calibrate import fit_efficiency, predict, prepare
from planner.accuracy.rows import expand_cases, load_rows, training_file


def main() -> None:
    """Print the held-out error per source group and overall."""
    cases = prepare(expand_cases(load_rows(training_file())))
    groups = sorted({c.id[0] for c in cases})
    errors: dict[str, list[float]] = defaultdict(list)
    for group in groups:
        held = [c for c in cases if c.id[0] == group]
        for family in sorted({c.cluster.accelerator.family for c in held}):
            train = [
                c for c in cases if c.id[0] != group and c.cluster.accelerator.family == family
            ]
            test = [c for c in held if c.cluster.accelerator.family == family]
            if len(train) < 3:
                print(f"{group} {family}: only {len(train)} other rows, skipped")
                continue
            eff = fit_efficiency(train, train[0].cluster.accelerator.efficiency)
            for case in test:
                errors[group].append(predict(case, eff) / case.measured - 1.0)
    everything = [e for group in errors.values() for e in group]
    for group, errs in sorted(errors.items()):
        print(
            f"{group}: {len(errs):2d} rows  median |err| {100 * statistics.median(map(abs, errs)):5.1f}%"
            f"  max {100 * max(map(abs, errs)):5.1f}%  bias {100 * statistics.fmean(errs):+5.1f}%"
        )
    print(
        f"all: {len(everything)} rows  median |err| "
        f"{100 * statistics.median(map(abs, everything)):.1f}%  max "
        f"{100 * max(map(abs, everything)):.1f}%  bias {100 * statistics.fmean(everything):+.1f}%"
    )


if __name__ == "__main__":
    main()
