"""Fit the serving engine profiles on their published runs (1-3 minutes per engine):

    python benchmarks/fit_serving_engine.py                 # print the fit and held-out errors
    python benchmarks/fit_serving_engine.py --write         # and store them in the YAML

For each engine with enough rows in tests/validation/serving.yaml
(:mod:`planner.accuracy.serving_fit`): the per-layer and per-request overheads (and the compute
efficiency where the profile fits it) minimising the median |log error| over its rows, then leave
one source document out. ``--write`` rewrites the figures, ``fitted_on`` and
the ``fit`` record of ``topologies/engines/<engine>.yaml``, keeping its name, description and
sources; run ``python benchmarks/cross_validate.py --write`` after it, so that the serving bands
take the new held-out errors.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys

import yaml

from planner.accuracy.serving import (
    engine_profile_of,
    load_serving_rows,
    serving_file,
    serving_source_of,
)
from planner.accuracy.serving_fit import (
    COARSE_STRIDE,
    COMPUTE_GRID,
    LAYER_GRID_US,
    MIN_FIT_ROWS,
    MIN_FIT_SOURCES,
    REQUEST_GRID_US,
    EngineFit,
    fittable_rows,
)
from planner.catalog import catalog_root
from planner.catalog.engines import load_engine
from planner.specs.engine import EngineFitRecord
from planner.specs.hardware import ResidualSummary

METHOD = (
    "minimise the median |log(predicted / measured)| over the engine's rows of "
    "tests/validation/serving.yaml: layer_overhead_us in {layer}, sequence_overhead_us in "
    "{request}, compute_efficiency {compute}; the coarse grid (every {stride} point) then "
    "coordinate descent on the fine grid (ties: smaller overheads, higher compute efficiency); "
    "held out: leave one source document out (planner/accuracy/serving.py serving_source_of), "
    "refit on the others, predict its rows. The GPU terms are the accelerator catalog's and "
    "training calibration's; nothing else is fitted on serving rows"
)


def _pct(s: ResidualSummary) -> str:
    return (
        f"{s.count} rows, median |err| {100 * s.median_abs:.1f}%, max {100 * s.max_abs:.1f}%, "
        f"bias {100 * s.bias:+.1f}%"
    )


def _header(name: str, date: str) -> str:
    return (
        f"# Serving engine profile (schema: planner.specs.engine.ServingEngineSpec) for {name}.\n"
        f"# Figures and `fit` written by `python benchmarks/fit_serving_engine.py --write` on "
        f"{date}:\n# regenerate rather than edit them; name, description and sources are kept.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="store the fit in the engine YAML")
    args = parser.parse_args()
    date = datetime.date.today().isoformat()
    rows = load_serving_rows(serving_file())
    for name in sorted({engine_profile_of(r) for r in rows}):
        spec = load_engine(name)
        own = [r for r in rows if engine_profile_of(r) == name]
        if not fittable_rows(own):
            sources = len({serving_source_of(r) for r in own})
            print(
                f"{name}: not fitted ({len(own)} rows from {sources} source(s), fewer than "
                f"{MIN_FIT_ROWS} rows / {MIN_FIT_SOURCES} sources): its rows are scored with "
                "the figures its profile states, out of sample"
            )
            continue
        fit = EngineFit(rows, spec)
        layer, request, compute = fit.figures
        computes = (
            f"in {COMPUTE_GRID[0]:g}-{COMPUTE_GRID[-1]:g} step {COMPUTE_GRID[1] - COMPUTE_GRID[0]:.2g}"
            if spec.fits_compute
            else f"kept at {spec.compute_efficiency:g} (the profile does not fit it)"
        )
        record = EngineFitRecord(
            date=date,
            method=METHOD.format(
                layer=f"0-{LAYER_GRID_US[-1]:g} us step {LAYER_GRID_US[1]:g}",
                request=f"0-{REQUEST_GRID_US[-1]:g} us step {REQUEST_GRID_US[1]:g}",
                compute=computes,
                stride="/".join(str(s) for s in COARSE_STRIDE),
            ),
            in_sample=ResidualSummary.of(list(fit.in_sample.values())),
            heldout=ResidualSummary.of(list(fit.heldout.values())),
            heldout_errors={k: round(v, 4) for k, v in fit.heldout.items()},
            heldout_fits=fit.heldout_figures,
        )
        print(
            f"{name}: layer_overhead_us {layer:g}, sequence_overhead_us {request:g}, "
            f"compute_efficiency {compute:g} ({len(fit.table)} points evaluated)"
        )
        print(f"  held out (leave one source out): {_pct(record.heldout)}")
        print(f"  in sample:                       {_pct(record.in_sample)}")
        for source, figures in fit.heldout_figures.items():
            held = [
                abs(fit.heldout[r.id])
                for r in fit.rows
                if r.id in fit.heldout and serving_source_of(r) == source
            ]
            med = 100 * statistics.median(held) if held else float("nan")
            shown = " / ".join(f"{f:g}" for f in figures)
            print(f"  without {source[:70]}: {shown}, its rows {med:.1f}%")
        if args.write:
            updated = spec.model_copy(
                update={
                    "layer_overhead_us": layer,
                    "sequence_overhead_us": request,
                    "compute_efficiency": compute,
                    "fitted_on": tuple(r.id for r in fit.rows),
                    "fit": record,
                }
            )
            data = updated.model_dump(mode="json", exclude_none=True)
            target = catalog_root() / "topologies" / "engines" / f"{name}.yaml"
            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
            target.write_text(_header(name, date) + text, encoding="utf-8")
            print(f"wrote {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
