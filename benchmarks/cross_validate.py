"""Out-of-sample accuracy: leave one source out, fit the efficiency factors on the other rows of
the accelerator family, predict the held-out rows (run by hand, ~3 minutes):

    python benchmarks/cross_validate.py            # print the held-out errors
    python benchmarks/cross_validate.py --write    # and store the bands in the overlays

Source groups are the row-id prefixes (S: SC'21, K: Korthikanti et al., M: Megatron-LM H100
table, N: Megatron-Bridge, F and G: NeMo tables, D: DGX Cloud recipes). The in-sample figures of
``layout validate`` use every row for the fit; these say how the same fit does on runs it did
not see. ``--write`` lays the ``heldout:`` bands (planner/accuracy/loso.py) into
``topologies/calibration/<family>.yaml`` and leaves the fitted factors as they are: it refuses
an overlay whose stored fit differs from a fresh one (run ``layout calibrate --fit --write``
first).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
from collections import defaultdict

from planner.accuracy.calibrate import overlay_yaml, run_calibration
from planner.accuracy.loso import source_of
from planner.accuracy.rows import expand_cases, load_rows, training_file
from planner.catalog import catalog_root
from planner.catalog.store import load_calibration
from planner.specs.hardware import CalibrationRecord


def _line(name: str, errs: list[float]) -> str:
    return (
        f"{name}: {len(errs):2d} rows  median |err| {100 * statistics.median(map(abs, errs)):5.1f}%"
        f"  max {100 * max(map(abs, errs)):5.1f}%  bias {100 * statistics.fmean(errs):+5.1f}%"
    )


def _print(records: list[CalibrationRecord]) -> None:
    """Held-out errors per source group, per family and regime (with its band), and overall."""
    by_source: dict[str, list[float]] = defaultdict(list)
    for record in records:
        assert record.heldout is not None
        for regime, band in record.heldout.bands.items():
            if regime == "serving":
                continue
            for row_id, error in band.errors.items():
                by_source[source_of(row_id)].append(error)
            print(
                f"{_line(f'{record.family} {regime}', list(band.errors.values()))}"
                f"  {100 * record.heldout.level:.0f}% band ±{100 * band.band_abs:.1f}%"
            )
    for source, errs in sorted(by_source.items()):
        print(_line(source, errs))
    print(_line("all", [e for errs in by_source.values() for e in errs]))


def _write(record: CalibrationRecord) -> None:
    """Store ``record``'s held-out bands in the committed overlay, its fit untouched."""
    if not record.efficiency.model_dump(exclude_none=True):
        return  # a family too small to fit has no overlay: the pooled band applies
    stored = load_calibration(record.family)
    if stored is None or stored.efficiency != record.efficiency or stored.rows != record.rows:
        sys.exit(
            f"the {record.family} overlay is not today's fit: run layout calibrate --fit --write"
        )
    target = catalog_root() / "topologies" / "calibration" / f"{record.family}.yaml"
    target.write_text(
        overlay_yaml(stored.model_copy(update={"heldout": record.heldout})), encoding="utf-8"
    )
    print(f"wrote {target}", file=sys.stderr)


def main() -> None:
    """Refit per source (:func:`planner.accuracy.loso.heldout_record`), print, optionally write."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="store the bands in the overlays")
    args = parser.parse_args()
    today = datetime.date.today().isoformat()
    cases = expand_cases(load_rows(training_file()))
    records = [f.record for f in run_calibration(cases, date=today, heldout=True)]
    _print(records)
    if args.write:
        for record in records:
            _write(record)


if __name__ == "__main__":
    main()
