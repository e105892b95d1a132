"""How well ``layout migrate`` predicts the speed-up of NVIDIA's published H100 -> B200 pairs
(issue 7), run by hand (about half a minute):

    python benchmarks/migrate_pairs.py

Each pair is the same model, GPU count, global batch and sequence on DGX-H100 and DGX-B200
(tests/validation/training.yaml): F1 -> F2, GPT-3 175B FP8 on 512 GPUs; N15 -> N16, gpt-oss-120B
BF16 on 64 GPUs. As in tests/test_migrate.py (``planner.accuracy.pairs.migrate_published``),
the source side runs its published layout (what the source leaves unstated is searched) with the
distributed optimizer (ZeRO-1), and the B200 side is re-planned by the search. Two predictions
per pair:

- ``shipped``: the calibration overlays in topologies/calibration/, fitted on every validation row
  (the pair's own two rows among them): what a user gets today.
- ``held out``: every accelerator family refitted without the pair's source (the row-id prefix,
  as in benchmarks/cross_validate.py), together as ``layout calibrate`` fits them (one per-step
  cost for all), so neither run of the pair informs the factors.
"""

from __future__ import annotations

from planner.accuracy.calibrate import PreparedCase, fit_families, fit_set, prepare
from planner.accuracy.loso import source_of
from planner.accuracy.pairs import PUBLISHED_PAIRS, measured_speedup, migrate_published
from planner.accuracy.rows import expand_cases, load_rows, training_file
from planner.catalog import load_cluster
from planner.specs.cluster import ClusterSpec
from planner.specs.hardware import AcceleratorEfficiency

TOLERANCE = 0.15
"""Issue 7's criterion on the predicted speed-up."""


def with_efficiency(cluster: ClusterSpec, fits: dict[str, AcceleratorEfficiency]) -> ClusterSpec:
    """``cluster`` with its accelerator's factors replaced by its family's entry in ``fits``."""
    acc = cluster.accelerator.model_copy(update={"efficiency": fits[cluster.accelerator.family]})
    return cluster.model_copy(update={"accelerator": acc})


def main() -> None:
    """Print both predictions of every pair against the measured speed-up."""
    rows = {row.id: row for row in load_rows(training_file())}
    cases = fit_set(prepare(expand_cases(list(rows.values()))))
    for source_id, target_id in PUBLISHED_PAIRS:
        source, target = rows[source_id], rows[target_id]
        measured = measured_speedup(source, target)
        shipped = load_cluster(source.cluster), load_cluster(target.cluster)
        train: dict[str, list[PreparedCase]] = {}
        for case in cases:
            if source_of(case.id) != source_of(source_id):
                train.setdefault(case.cluster.accelerator.family, []).append(case)
        fits = fit_families(train)
        held = tuple(with_efficiency(c, fits) for c in shipped)
        for label, (before, after) in (("shipped", shipped), ("held out", held)):
            result = migrate_published(source, from_cluster=before, to_cluster=after)
            new = result.to_plan.layout
            layout = f"TP{new.tp} PP{new.pp} DP{new.dp} EP{new.ep} mbs{new.mbs}"
            error = result.speedup / measured - 1.0
            verdict = "within" if abs(error) <= TOLERANCE else "outside"
            print(
                f"{source_id + '->' + target_id:8s} {source.model.name:12s} {label:8s} predicted "
                f"{result.speedup:.2f}x ({layout})  measured {measured:.2f}x  {error:+.1%} "
                f"({verdict} {TOLERANCE:.0%})"
            )


if __name__ == "__main__":
    main()
