"""Predicted against published peak memory per GPU (run by hand, a few seconds):

    python benchmarks/memory_check.py

Every validation row whose source printed its peak device memory (``measured.peak_memory_gb``):
Nanotron's benchmark figure (tests/validation/training_frameworks.yaml, NT rows) and the
``max_memory_usage`` of NVIDIA's and Cisco's MLPerf logs (tests/validation/heldout/mlperf.yaml).
Each is predicted as ``layout validate`` predicts it (its stated layout pinned, its recipe's
settings applied) and the plan's peak (the most loaded pipeline stage: weights, gradients,
optimizer state, activations, the optimizer step's transient copies; GiB) is compared with the
printed figure. Nanotron's figure is ``torch.cuda.max_memory_reserved() / 2**30`` of world rank 0
(the first pipeline stage) over the first three steps (nanotron src/nanotron/helpers.py
create_table_log, "Mem Res (GB)", at c252843), so GiB of reserved memory: the allocator's slack
over what the planner counts. The MLPerf logs' ``max_memory_usage`` does not say its counter or
unit, so the ratio is given both ways. Nothing is fitted on these figures.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from planner.accuracy.rows import expand_cases, load_rows
from planner.accuracy.run import predict_case
from planner.errors import InfeasibleError, SpecError, run_script
from planner.units import GB, GiB

VALIDATION = Path(__file__).resolve().parents[1] / "tests" / "validation"
FILES = (VALIDATION / "training_frameworks.yaml", VALIDATION / "heldout" / "mlperf.yaml")
"""The row files with printed peak memory."""


def main() -> None:
    """One line a row (predicted GiB, printed figure, ratio as GiB and as GB), then the median
    ratio per framework."""
    ratios: dict[str, list[float]] = {}
    for path in FILES:
        for case in expand_cases(load_rows(path)):
            printed = case.row.measured.peak_memory_gb
            if printed is None or "/" in case.id:
                continue
            try:
                plan = predict_case(case)
            except (SpecError, InfeasibleError) as exc:
                print(f"{case.id:6s} not evaluated: {' '.join(str(exc).split())}")
                continue
            peak = plan.memory.peak_gib
            as_gib, as_gb = peak / printed, peak * GiB / (printed * GB)
            ratios.setdefault(case.row.framework, []).append(as_gib)
            print(
                f"{case.id:6s} {case.row.cluster:16s} {plan.layout.short():44s} predicted "
                f"{peak:6.1f} GiB  printed {printed:7.2f}  ratio {as_gib:4.2f} (as GiB) "
                f"{as_gb:4.2f} (as GB)"
            )
    for framework, values in sorted(ratios.items()):
        print(
            f"-- {framework}: {len(values)} rows, predicted / printed (as GiB) median "
            f"{statistics.median(values):.2f}, range {min(values):.2f}-{max(values):.2f}"
        )


if __name__ == "__main__":
    run_script(main)
