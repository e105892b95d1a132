"""Published migration pairs: the same model, GPU count, global batch and sequence measured on
two clusters (tests/validation/training.yaml), and ``layout migrate``'s prediction of their
speed-up, shared by tests/test_migrate.py and benchmarks/migrate_pairs.py."""

from __future__ import annotations

from planner.accuracy.rows import TrainingRow, stated_layout, workload_of
from planner.errors import SpecError
from planner.specs.cluster import ClusterSpec
from planner.specs.scenarios import MigrateResult

PUBLISHED_PAIRS: tuple[tuple[str, str], ...] = (("F1", "F2"), ("N15", "N16"))
"""(H100 row, B200 row) of NVIDIA's published pairs (issue 7): GPT-3 175B FP8 on 512 GPUs,
gpt-oss-120B BF16 on 64 GPUs."""
NEMO_OPTIMIZER: dict[str, object] = {"zero": 1}
"""Megatron's distributed optimizer, which NeMo's benchmark recipes use; pinned on both sides
to compare like with like."""


def measured_speedup(source: TrainingRow, target: TrainingRow) -> float:
    """Measured tokens/s/GPU of ``target`` over ``source``."""
    before, after = source.measured.tokens_per_s_per_gpu, target.measured.tokens_per_s_per_gpu
    if not before or not after:
        missing = source.id if not before else target.id
        raise SpecError(f"row {missing} states no tokens/s/GPU, so its pair has no speed-up")
    return after / before


def migrate_published(
    source: TrainingRow,
    *,
    from_cluster: ClusterSpec | str | None = None,
    to_cluster: ClusterSpec | str,
) -> MigrateResult:
    """``layout migrate`` as a user brings it: the layout ``source`` ran (what the source leaves
    unstated is searched), re-planned on ``to_cluster``. ``from_cluster`` defaults to the
    source's own; pass specs to score with other efficiency factors."""
    import planner

    workload = workload_of(source)
    origin = from_cluster or source.cluster
    in_use = planner.search(
        model=source.model.name,
        cluster=origin,
        workload=workload,
        fix={**stated_layout(source), **NEMO_OPTIMIZER},
        top=1,
    ).best.layout
    return planner.migrate(
        model=source.model.name,
        from_cluster=origin,
        to_cluster=to_cluster,
        workload=workload,
        layout=in_use,
        fix=NEMO_OPTIMIZER,
    )
