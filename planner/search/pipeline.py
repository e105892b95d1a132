"""A plan's pipeline stages: what each model chunk holds, and its rank's memory and time; and the
explicit split a saved plan carries (for re-scoring, validation and the exports)."""

from __future__ import annotations

from planner.cost.memory import stage_layers
from planner.cost.stage import microbatch_time
from planner.cost.stage_memory import stage_memory
from planner.specs.cluster import ClusterSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.result import PipelineStage, Plan
from planner.specs.workload import TrainWorkload
from planner.topology import comm_domains
from planner.units import GiB


def chunk_recompute(workload: TrainWorkload, layout: Layout, layers: tuple[int, ...]
                    ) -> tuple[int, ...]:  # fmt: skip
    """Recomputed layers per chunk under the layout's own rule: every layer with full
    recomputation, or the first ``recompute_num_layers`` of each chunk; none otherwise.

    >>> chunk_recompute(TrainWorkload(recompute_num_layers=3), Layout(recompute="full"), (2, 5))
    (2, 3)
    """
    if layout.recompute is not Recompute.FULL:
        return (0,) * len(layers)
    count = workload.recompute_num_layers
    return tuple(n if count is None else min(n, count) for n in layers)


def pipeline_stages(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    split: PipelineSplit | None = None,
) -> list[PipelineStage]:
    """One entry per model chunk (pp x vpp, layer order) under ``split``, or the even split
    (listed per chunk as :func:`planner.cost.memory.stage_layers` splits pp x vpp chunks; the
    cost model scores the even split per rank), with its rank's peak memory and micro-batch
    time from the cost model."""
    chunks = layout.pp * layout.vpp
    if split is None:
        layers = tuple(len(stage_layers(model, chunks, c)) for c in range(chunks))
        redo = chunk_recompute(workload, layout, layers)
        mtp_chunk = chunks - 1
    else:
        layers = split.chunk_layers
        redo = split.recompute_layers or chunk_recompute(workload, layout, layers)
        if layout.recompute is not Recompute.FULL:
            redo = (0,) * chunks
        mtp_chunk = chunks - 1 if split.mtp_chunk is None else split.mtp_chunk
    m = workload.global_batch // (layout.dp * layout.mbs)
    domains = comm_domains(cluster, layout)
    peak, time = [], []
    for rank in range(layout.pp):
        memory = stage_memory(model, workload, layout, rank, m, split=split)
        peak.append(memory.total / GiB)
        rank_time = microbatch_time(
            model, cluster.accelerator, workload, layout, stage=rank, domains=domains, split=split
        )
        time.append(rank_time.total)
    out, first = [], 0
    for c, count in enumerate(layers):
        rank = c % layout.pp
        out.append(
            PipelineStage(
                stage=c,
                rank=rank,
                first_layer=first,
                num_layers=count,
                recompute_layers=redo[c],
                embedding=c == 0,
                loss=c == chunks - 1,
                mtp_layers=workload.mtp_num_layers if c == mtp_chunk else 0,
                peak_gib=peak[rank],
                time_s=time[rank],
            )
        )
        first += count
    return out


def plan_split(plan: Plan) -> PipelineSplit | None:
    """The explicit split a plan was scored with (its ``pipeline_stages`` when CP-SAT or the
    framework chose them), None for the even split."""
    info = plan.pipeline_split
    if info is None or info.method == "even" or not plan.pipeline_stages:
        return None
    stages = plan.pipeline_stages
    mtp = [s.stage for s in stages if s.mtp_layers]
    full = plan.layout.recompute is Recompute.FULL
    return PipelineSplit(
        chunk_layers=tuple(s.num_layers for s in stages),
        recompute_layers=tuple(s.recompute_layers for s in stages) if full else None,
        mtp_chunk=mtp[0] if mtp else None,
    )
