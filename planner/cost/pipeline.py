"""Pipeline schedules: bubble and in-flight micro-batches of 1F1B and interleaved 1F1B, GPipe,
zero bubble and DualPipe."""

from __future__ import annotations

from planner.specs.framework import PipelineSchedule
from planner.specs.layout import Layout
from planner.specs.workload import TrainWorkload


def bubble_fraction(pp: int, vpp: int, num_microbatches: int) -> float:
    """Idle fraction of the ideal time: (pp - 1) / (v * m).

    Source: Narayanan et al., SC'21 (arXiv 2104.04473), section 2.2 (1F1B: (p-1)/m) and
    section 2.2.2 (interleaved with v chunks per device: (p-1)/(v m)).

    >>> bubble_fraction(1, 1, 8)
    0.0
    >>> bubble_fraction(8, 1, 64)
    0.109375
    >>> bubble_fraction(8, 2, 64)
    0.0546875
    """
    return (pp - 1) / (vpp * num_microbatches)


def microbatches_in_flight(
    pp: int,
    vpp: int,
    num_microbatches: int,
    stage: int,
    schedule: PipelineSchedule = "1f1b",
    *,
    extra_forward: bool = False,
) -> float:
    """Micro-batches whose activations stage ``stage`` holds at its peak (in whole-stage units).

    1F1B: stage i warms up with pp - i forwards before its first backward, so it holds
    min(m, pp - i). Interleaved: the first stage holds pp * (1 + (pp - 1)/(pp v)) stage-sized
    sets (Megatron-LM ``theoretical_memory_usage.py``, "interleaved schedule memory penalty").
    GPipe (``schedule`` "gpipe"): every forward runs before the first backward, so every stage
    holds all m (Huang et al., NeurIPS 2019, section 2.2; Narayanan et al. SC'21 section 2.2.1).
    ``extra_forward`` (Megatron-LM's combined 1F1B with an interleaved pipeline,
    :func:`combined_1f1b_extra_forward`): one more model chunk, 1/v of a stage, is held, unless
    every micro-batch already is.

    >>> microbatches_in_flight(4, 1, 16, 0)
    4
    >>> microbatches_in_flight(4, 1, 16, 3)
    1
    >>> microbatches_in_flight(4, 2, 16, 0)
    5.5
    >>> microbatches_in_flight(1, 1, 16, 0)
    1
    >>> microbatches_in_flight(4, 2, 16, 3, schedule="gpipe")
    16
    >>> microbatches_in_flight(4, 2, 16, 0, extra_forward=True)  # 5.5 + one chunk of two
    6.0
    """
    if schedule == "gpipe" and pp > 1:
        return num_microbatches
    in_flight: float = min(num_microbatches, pp - stage)
    if vpp > 1 and stage == 0:
        penalty = 1 + (pp - 1) / (pp * vpp)
        in_flight = min(num_microbatches, pp) * penalty
    if extra_forward and vpp > 1 and in_flight < num_microbatches:
        in_flight += 1 / vpp
    return in_flight


def combined_1f1b_extra_forward(workload: TrainWorkload, layout: Layout) -> bool:
    """Whether ``layout`` runs Megatron-LM's combined 1F1B (the EP all-to-all overlap,
    ``ep_comm_overlap``, under the 1F1B schedule with expert parallelism) over an interleaved
    pipeline, whose warmup runs one extra forward chunk so that every 1F1B step pairs
    independent passes (``schedules.get_pp_rank_microbatches``: ``num_warmup_microbatches + 1``
    under ``overlap_moe_expert_parallel_comm``), so every rank holds one more chunk's activations
    at its peak. Without pipelining the first forward runs alone and each later forward is
    interleaved layer by layer with the previous micro-batch's backward, which frees what the
    forward saves (``combined_1f1b_schedule_for_no_pipelining``): no more than one micro-batch is
    held.

    >>> w = TrainWorkload(ep_comm_overlap=True)
    >>> combined_1f1b_extra_forward(w, Layout(pp=4, vpp=2, ep=8))
    True
    >>> no_pipeline, no_experts = Layout(ep=8), Layout(pp=4, vpp=2)
    >>> combined_1f1b_extra_forward(w, no_pipeline), combined_1f1b_extra_forward(w, no_experts)
    (False, False)
    """
    return runs_combined_1f1b(workload, layout.ep) and layout.pp > 1 and layout.vpp > 1


def runs_combined_1f1b(workload: TrainWorkload, ep: int) -> bool:
    """Whether an expert-parallel layout (``ep`` > 1) runs Megatron-LM's combined 1F1B: the EP
    all-to-all overlap (``ep_comm_overlap``) under the 1F1B schedule. Its unpaired passes, its
    extra warmup forward (:func:`combined_1f1b_extra_forward`) and Megatron-LM's asserts on it
    (``planner.search.rules.ep_overlap_rules``) follow from this one test.

    >>> runs_combined_1f1b(TrainWorkload(ep_comm_overlap=True), 8)
    True
    >>> runs_combined_1f1b(TrainWorkload(ep_comm_overlap=True, pipeline_schedule="dualpipe"), 8)
    False
    """
    return workload.ep_comm_overlap and workload.pipeline_schedule == "1f1b" and ep > 1


def bubble_is_a_share(schedule: PipelineSchedule) -> bool:
    """Whether the schedule's bubble is a share of a chunk's passes set by its forward and
    backward (DualPipe: of the forward, :func:`dualpipe_bubble_time`; zero bubble:
    :func:`zero_bubble_share`) rather than pp - 1 whole chunks (1F1B, GPipe), so that a step-time
    lower bound may count it only as nothing.

    >>> [bubble_is_a_share(s) for s in ("1f1b", "gpipe", "zero_bubble", "dualpipe")]
    [False, False, True, True]
    """
    return schedule in ("zero_bubble", "dualpipe")


def dualpipe_bubble_time(pp: int, forward_s: float, backward_s: float) -> float:
    """DualPipe's bubble: (pp/2 - 1)(F&B + B - 3W) (DeepSeek-V3, arXiv 2412.19437, Table 2),
    with the backward split evenly into input and weight gradients (B = W = backward / 2) and an
    overlapped forward-and-backward chunk taking F + backward: (pp/2 - 1) F.

    >>> dualpipe_bubble_time(16, 1.0, 2.0)
    7.0
    >>> dualpipe_bubble_time(2, 1.0, 2.0)
    0.0
    """
    b = w = backward_s / 2.0
    return max(0.0, pp / 2.0 - 1.0) * max(0.0, (forward_s + backward_s) + b - 3.0 * w)


def zero_bubble_share(forward_s: float, backward_s: float) -> float:
    """The share of 1F1B's bubble ZB-H1 leaves: (F + B - W) / (F + B + W), with the backward
    split evenly into its input-gradient (B) and weight-gradient (W) passes (B = W = backward / 2,
    as :func:`dualpipe_bubble_time`), i.e. F / (F + backward). ZB-H1 defers each weight gradient
    until its input gradient has been sent on, so the drain's idle slots run weight gradients and
    the bubble falls from (p - 1)(F + B + W) to (p - 1)(F + B - W) at 1F1B's peak activation
    memory (Qi, Wan, Huang and Lin, "Zero Bubble Pipeline Parallelism", ICLR 2024, arXiv
    2401.10241, section 2.1 and Table 2; about a third of 1F1B's at F : B : W = 1 : 1 : 1).
    Applied per chunk for the interleaved form torch.distributed.pipelining runs
    (ScheduleInterleavedZeroBubble, "the ZB1P schedule").

    >>> zero_bubble_share(1.0, 2.0)
    0.3333333333333333
    >>> zero_bubble_share(0.0, 0.0)
    0.0
    """
    total = forward_s + backward_s  # F + B + W with B + W = backward; F + B - W = F
    return forward_s / total if total > 0.0 else 0.0


def combined_1f1b_unpaired_microbatches(pp: int, vpp: int, num_microbatches: int) -> float:
    """Micro-batches' worth of forward and backward passes the first pipeline rank runs with no
    other micro-batch beside it under Megatron-LM's combined 1F1B
    (``--overlap-moe-expert-parallel-comm``), whose all-to-all and dispatcher syncs therefore
    hide behind nothing.

    The combined schedule pairs the forward of one micro-batch with the backward of another
    (``megatron/core/pipeline_parallel/combined_1f1b.py``); what is not paired runs alone.
    Without pipelining, the first micro-batch's forward and the last one's backward
    (``combined_1f1b_schedule_for_no_pipelining``: "executed alone, no a2a overlapping"): one
    micro-batch. With the interleaved schedule, rank 0's warmup forwards and as many cooldown
    backwards: 2 (pp - 1) + (v - 1) pp model chunks, plus the one extra forward the combined
    schedule adds so that every 1F1B step pairs independent passes
    (``schedules.get_pp_rank_microbatches``, with ``microbatch_group_size_per_vp_stage`` at its
    default, pp), a chunk being 1/v of a micro-batch; without interleaving (which Megatron-LM
    refuses with this overlap), 1F1B's pp - 1 warmup forwards plus that one. Never more than
    the step's m micro-batches. Rank 0 runs from the step's first forward to its last backward,
    so the time its unpaired passes add lies on the step's critical path.

    >>> combined_1f1b_unpaired_microbatches(1, 1, 5)  # the first forward, the last backward
    1.0
    >>> combined_1f1b_unpaired_microbatches(8, 4, 128)  # (14 + 24 + 1) chunks / 4
    9.75
    >>> combined_1f1b_unpaired_microbatches(4, 1, 16), combined_1f1b_unpaired_microbatches(8, 4, 2)
    (4.0, 2.0)
    """
    if pp == 1:
        chunks = 1
    elif vpp == 1:
        chunks = pp
    else:
        chunks = 2 * (pp - 1) + (vpp - 1) * pp + 1
    return min(chunks, num_microbatches * vpp) / vpp


def dualpipe_unpaired_microbatches(pp: int, num_microbatches: int) -> float:
    """Micro-batches' worth of forward and backward passes a first (or last) DualPipe rank runs
    with no pass of the other direction beside it, so that their all-to-all hides behind
    nothing. DualPipe's schedule for a rank at distance h from the nearer end, with H = pp / 2
    (deepseek-ai/DualPipe ``dualpipe/dualpipe.py`` at bb214e8, ``DualPipe.step``): forwards
    alone in its steps 1-3 (2 (H - h - 1), then 2 (h + 1), then H - h - 1 beside the zero-bubble
    backward halves), backwards alone in its steps 3, 5, 6 and 7 (H - h - 1, H - h - 1,
    2 (h + 1), H - h - 1): 3H - h - 1 of each; the rest run as overlapped forward-backward
    pairs. The end ranks (h = 0), whose timelines span the step, have the most: 3 pp / 2 - 1.
    Never more than the step's m.

    >>> dualpipe_unpaired_microbatches(16, 120)  # DeepSeek-V3's PP 16
    23
    >>> dualpipe_unpaired_microbatches(2, 8), dualpipe_unpaired_microbatches(16, 20)
    (2, 20)
    """
    return min(3 * pp // 2 - 1, num_microbatches)
