"""A plan's pipeline stages: what each model chunk holds, and its rank's memory and time; and the
explicit split a saved plan carries (for re-scoring, validation and the exports)."""

from __future__ import annotations

from planner.cost.memory import stage_layers
from planner.cost.stage import microbatch_time
from planner.cost.stage_memory import stage_memory
from planner.search.rules import workload_domains
from planner.specs.cluster import ClusterSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.result import PipelineStage, Plan
from planner.specs.workload import TrainWorkload
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
    domains = workload_domains(model, cluster, workload, layout)
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


def places_own_layers(workload: TrainWorkload) -> bool:
    """Whether the workload's framework places the layers on pipeline stages itself
    (``FrameworkSpec.pipeline_split`` ``cost`` or ``even``): then no CP-SAT split is proposed
    and no given split runs."""
    from planner.catalog.frameworks import load_framework

    return load_framework(workload.framework).pipeline_split != "any"


def framework_split(
    model: ModelSpec, workload: TrainWorkload, layout: Layout
) -> PipelineSplit | None:
    """The split the framework makes itself (:func:`planner.cost.partition.cost_balanced_split`,
    with the recomputed layers and MTP chunk a plan of it records, so that scoring it and
    re-scoring the plan's stages agree), or None where the user places the layers (the even
    split or CP-SAT's apply) or the framework's rule does not cover the model (an MoE model
    under Nanotron: the even split is scored, never a CP-SAT one). The search scores every
    layout of such a framework under it (:class:`planner.search.space.StageTimes`).

    >>> from planner.catalog import load_model
    >>> w = TrainWorkload(framework="nanotron", mtp_num_layers=1)
    >>> framework_split(load_model("8B"), w, Layout(pp=2, recompute="full"))
    PipelineSplit(chunk_layers=(18, 14), recompute_layers=(18, 14), mtp_chunk=1)
    >>> framework_split(load_model("8B"), TrainWorkload(), Layout(pp=2)) is None  # Megatron-LM
    True
    """
    from planner.catalog.frameworks import load_framework
    from planner.cost.partition import cost_balanced_split

    if layout.pp == 1 or layout.vpp != 1:
        return None
    if load_framework(workload.framework).pipeline_split != "cost":
        return None
    split = cost_balanced_split(model, layout.pp)
    if split is None:
        return None
    full = layout.recompute is Recompute.FULL
    return split.model_copy(
        update={
            "recompute_layers": chunk_recompute(workload, layout, split.chunk_layers)
            if full
            else None,
            "mtp_chunk": layout.pp - 1 if workload.mtp_num_layers else None,
        }
    )
