"""Held-out check on DGX Cloud's benchmark tables (run by hand, a few seconds):

    python benchmarks/heldout_dgx_cloud.py

NVIDIA/dgxc-benchmarking publishes expected step times of NeMo, MaxText and Pax recipes. The
validation rows read from it that no fit sees are predicted here as ``layout validate``
predicts them (their stated degrees pinned, their recipe's settings applied, the rest
searched), one line a row with the band its plan prints, then the summary and the band's
coverage:

- DGX1-6 (tag v25.04, NeMo 25.02 on H100: Nemotron-4 15B/340B, GPT-3 175B) and DGC1-16 (tag
  v25.05.05, NeMo 25.04 on GB200 and H100: Llama 3.1 405B, Nemotron-4 340B in weak and strong
  scaling, DeepSeek-V3 with its MTP layer, Grok-1, Llama 4 Maverick), Megatron-LM rows with
  ``fit: false``;
- DMX1-3 (MaxText Llama 3 70B) and DPX1-3 (Pax GPT-3 175B) on H100, whose frameworks are never
  fitted.

The D rows of the same repository (tag v25.04, Llama 3.1) are fitted and so are not here.
"""

from __future__ import annotations

from heldout import print_summary, scored

from planner.accuracy.rows import expand_cases, load_rows, row_profile, training_file
from planner.accuracy.run import predict_case
from planner.catalog.frameworks import load_framework
from planner.errors import InfeasibleError, SpecError, run_script

SOURCE = "NVIDIA/dgxc-benchmarking"
"""The repository whose rows this checks."""


def main() -> None:
    """Predict every never-fitted DGX Cloud row and print it, then the summary."""
    errors: list[float] = []
    bands: list[float] = []
    levels: set[float | None] = set()
    for case in expand_cases(load_rows(training_file())):
        row = case.row
        fitted = row.fit and load_framework(row_profile(row)).calibrates
        if SOURCE not in row.source or fitted:
            continue
        try:
            plan = predict_case(case)
        except (SpecError, InfeasibleError) as exc:
            print(f"{case.id:9s} {row.cluster:16s} not evaluated: {' '.join(str(exc).split())}")
            continue
        error, band, words = scored(plan, case.measured_tokens_per_s_per_gpu)
        errors.append(error)
        bands.append(band)
        levels.add(plan.uncertainty_level)
        print(f"{case.id:9s} {row.cluster:16s} {plan.layout.short():48s} {words}")
    print_summary(errors, bands, levels)


if __name__ == "__main__":
    run_script(main)
