"""The pipeline-stage partition's prepared data: the cost model tabulated per layer, in integers.

For one layout, every decoder layer's micro-batch time (forward + backward + its exposed TP,
CP and EP communication) and memory (weights, gradients and optimizer state; activations per
micro-batch kept and when recomputed in full) come from the cost model (:mod:`planner.cost.stage`
on a stage holding just that layer), as do the embedding's, the output layer and loss's and
each MTP module's. Layers of one kind (dense-first, MoE, sliding-window, ...) give identical
rows, so the cost model runs once per kind. Times become integer microseconds
(``TIME_QUANTUM_S``) and memory integer 64 KiB units rounded up (a partition that fits here fits
the cost model); the per-rank count of micro-batches in flight (1F1B, interleaved) multiplies the
activations, scaled by pp x vpp so it is an integer.

The integer model is separable: a rank's time is the sum of its layers' times, which is exact
for layers of one kind and close for mixed ones (the cost model overlaps communication with the
rank's whole compute). The chosen split is therefore re-scored by the cost model itself before
it is used (:func:`planner.search.solve.stages.optimise_pipeline`).

:func:`evaluate_assignment` scores any assignment on this data without a solver; it is the
even split's baseline, the brute-force twin's inner loop and the check of every CP-SAT answer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from typing import Literal, NamedTuple

import numpy as np

from planner.cost.memory import logits_bytes, stage_layers, tp_gather_buffer_bytes
from planner.cost.partition import StageContents
from planner.cost.pipeline import combined_1f1b_extra_forward, microbatches_in_flight
from planner.cost.profile import layer_kinds
from planner.cost.stage import microbatch_time
from planner.cost.stage_memory import (
    activation_bytes_per_microbatch,
    einsum_mask_bytes_per_microbatch,
    logits_overlap,
    recompute_working_bytes,
    stage_params_per_gpu,
    state_bytes,
)
from planner.search.rules import workload_domains
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.solver_config import TIME_QUANTUM_S
from planner.specs.workload import TrainWorkload

MEMORY_QUANTUM_BYTES = 2**16
"""Resolution of the integer memory tables (64 KiB), rounded up per entry."""

RecomputeChoice = Literal["none", "block", "per_stage"]


class StageProblem(FrozenSpec):
    """Integer data of one pipeline partition problem (times in TIME_QUANTUM_S, memory in
    MEMORY_QUANTUM_BYTES). Chunk c (of pp x vpp, layer order) runs on rank c mod pp."""

    pp: int
    """Pipeline ranks."""
    vpp: int
    """Model chunks per rank."""
    layer_time: tuple[int, ...]
    """Per decoder layer: micro-batch time on the critical path, kept activations."""
    recompute_time: tuple[int, ...]
    """Per layer: the time full recomputation adds."""
    layer_state: tuple[int, ...]
    """Per layer: weights + gradients + optimizer state on one GPU."""
    layer_activation: tuple[int, ...]
    """Per layer: activations one micro-batch stores (kept)."""
    recompute_saving: tuple[int, ...]
    """Per layer: the activations full recomputation does not store."""
    in_flight: tuple[int, ...]
    """Per rank: micro-batches in flight x ``in_flight_scale`` (an integer)."""
    in_flight_scale: int
    """pp x vpp, the denominator of ``in_flight``."""
    rank_time: tuple[int, ...]
    """Per rank: time beyond its layers (the output layer and loss on the last)."""
    rank_state: tuple[int, ...]
    """Per rank: state beyond its layers (embedding on the first, output layer on the last)."""
    rank_memory: tuple[int, ...]
    """Per rank: memory not multiplied by the micro-batches in flight (the logits on the last
    rank, a framework's tensor-parallel gather buffers on every rank, and under a save list
    the working set of the layer being recomputed, less what it shares with the logits)."""
    num_mtp: int
    """MTP modules (0 = none)."""
    mtp_time: int
    """Time of the MTP modules on the rank that holds them."""
    mtp_state: tuple[int, int]
    """Their state on the last rank, and on another rank (which adds an output-layer copy)."""
    layer_transient: tuple[int, ...] = ()
    """Per layer: the optimizer step's transient copy of its gradients (``StageMemory.
    step_transient``), held with the state but never with the activations; empty = none."""
    rank_transient: tuple[int, ...] = ()
    """Per rank: the same for the state beyond its layers (embedding, output layer)."""
    mtp_transient: tuple[int, int] = (0, 0)
    """The same for the MTP modules, on the last rank and on another."""
    mtp_activation: int
    """Their activations per micro-batch."""
    mtp_memory: int
    """Their logits."""
    working: int
    """Working set of a layer being recomputed, on a rank that recomputes any."""
    working_last: int | None = None
    """The same on the last rank, less what it shares with the logits there (:func:`planner.
    cost.stage_memory.logits_overlap`); None = ``working``."""
    recompute: RecomputeChoice
    """none (the layout does not recompute in full), block (one count N: the first N layers of
    every chunk recompute, Megatron-LM's ``--recompute-method block --recompute-num-layers N``)
    or per_stage (a count N_s per pipeline rank: the first N_s layers of each of its chunks)."""
    fixed_recompute: int | None
    """N when the workload pins it (``recompute_num_layers``)."""
    capacity: int
    """Usable memory of one GPU, rounded down."""
    steps: float
    """Micro-batch times per step on the slowest rank: m + (pp - 1) / vpp."""
    min_chunk_layers: int = 1
    """Decoder layers every chunk but the last holds at least (the interleaved schedule's bubble,
    (pp - 1) / vpp, assumes every chunk works; the last may hold just the output layer and loss,
    as in Megatron-LM's layout examples)."""
    even_layers: tuple[int, ...]
    """The planner's default layers per chunk (:func:`planner.cost.memory.stage_layers` over
    pp x vpp chunks: as even as possible, the remainder on the middle chunks)."""

    @property
    def num_layers(self) -> int:
        """Decoder layers."""
        return len(self.layer_time)

    @property
    def num_chunks(self) -> int:
        """Model chunks (pp x vpp)."""
        return self.pp * self.vpp

    @property
    def mtp_chunks(self) -> range:
        """Chunks that may hold the MTP modules: the last virtual stage of any rank (Megatron-LM
        ``PipelineParallelLayerLayout.validate_layer_layout``)."""
        return range((self.vpp - 1) * self.pp, self.num_chunks)


def build_stage_problem(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    recompute: RecomputeChoice = "block",
    headroom: float = 0.0,
) -> StageProblem:
    """Tabulate ``layout``'s partition problem from the cost model (``recompute``: how the
    recomputed layers may vary when the layout recomputes in full; ``headroom``: the share of
    usable memory the search keeps free, which no stage may use)."""
    acc = cluster.accelerator
    domains = workload_domains(model, cluster, workload, layout)
    full = layout.recompute is Recompute.FULL
    m = workload.global_batch // (layout.dp * layout.mbs)
    schedule = workload.pipeline_schedule
    extra_forward = combined_1f1b_extra_forward(workload, layout)
    n = model.num_layers

    def time_of(contents: StageContents) -> float:
        return microbatch_time(
            model, acc, workload, layout, stage=0, domains=domains, contents=contents
        ).total

    def held_of(contents: StageContents) -> tuple[float, float]:
        """(state, the optimizer step's transient) bytes of ``contents``."""
        params = stage_params_per_gpu(model, layout, 0, workload.seq_len, contents=contents)
        return state_bytes(workload, layout, *params)

    rows = _layer_rows(model, workload, layout, time_of, held_of)
    empty: tuple[range, ...] = ()
    head = StageContents(empty, (), False, True, 0, True)
    embedding = StageContents(empty, (), True, False, 0, False)
    scale = layout.pp * layout.vpp
    mtp = workload.mtp_num_layers
    mtp_layers = (range(n - 1, n),) * mtp
    on_last = StageContents(mtp_layers, (), False, False, mtp, False)
    elsewhere = on_last._replace(output_weights=True)
    buffers = workload.framework_buffers
    logits = logits_bytes(
        model, layout, workload.seq_len, workload.cross_entropy,
        fp32_copy="fp32_logits" in buffers,
    )  # fmt: skip
    gather = tp_gather_buffer_bytes(model, layout, workload.seq_len, buffers)  # on every rank
    save_list = layout.recompute is Recompute.SELECTIVE and workload.saved_tensors is not None
    working = recompute_working_bytes(model, workload, layout) if full or save_list else 0.0
    working_last = working - logits_overlap(working, logits)  # the last rank holds the logits
    last = layout.pp - 1
    # a save list recomputes part of every layer: each rank holds one layer's working set, as
    # stage_memory counts it (full recomputation holds it only on a rank that recomputes any)
    listed = [
        (working_last if p == last else working) if save_list else 0.0 for p in range(layout.pp)
    ]
    first, final = held_of(embedding), held_of(head)
    rank_held = [
        tuple(_bytes(a * (p == 0) + b * (p == last)) for a, b in zip(first, final, strict=True))
        for p in range(layout.pp)
    ]  # the embedding on the first rank, the output layer on the last (both with pp = 1)
    mtp_held = [(0, 0), (0, 0)]
    if mtp:
        mtp_held = [tuple(_bytes(v) for v in held_of(c)) for c in (on_last, elsewhere)]
    by_kind = {  # each kind's integer row, converted once (rows repeats one tuple per kind)
        id(r): (_time(r[0]), _time(r[1]) if full else 0, _bytes(r[2][0]), _bytes(r[3]),
                _bytes(r[4], down=True) if full else 0, _bytes(r[2][1]))
        for r in {id(r): r for r in rows}.values()
    }  # fmt: skip
    table = [by_kind[id(r)] for r in rows]
    # built without validation: every field is computed here, in the types it declares
    return StageProblem.model_construct(
        pp=layout.pp,
        vpp=layout.vpp,
        layer_time=tuple(r[0] for r in table),
        recompute_time=tuple(r[1] for r in table),
        layer_state=tuple(r[2] for r in table),
        layer_activation=tuple(r[3] for r in table),
        recompute_saving=tuple(r[4] for r in table),
        in_flight=tuple(
            round(
                scale
                * microbatches_in_flight(
                    layout.pp, layout.vpp, m, p, schedule, extra_forward=extra_forward
                )
            )
            for p in range(layout.pp)
        ),
        in_flight_scale=scale,
        rank_time=tuple(_time(time_of(head)) if p == last else 0 for p in range(layout.pp)),
        rank_state=tuple(rank_held[p][0] for p in range(layout.pp)),
        rank_memory=tuple(
            _bytes(gather + (logits if p == last else 0) + listed[p]) for p in range(layout.pp)
        ),
        num_mtp=mtp,
        mtp_time=_time(time_of(on_last)) if mtp else 0,
        mtp_state=(mtp_held[0][0], mtp_held[1][0]),
        layer_transient=tuple(r[5] for r in table),
        rank_transient=tuple(rank_held[p][1] for p in range(layout.pp)),
        mtp_transient=(mtp_held[0][1], mtp_held[1][1]),
        mtp_activation=_bytes(activation_bytes_per_microbatch(model, workload, layout, on_last))
        if mtp
        else 0,
        mtp_memory=_bytes(mtp * logits),
        working=_bytes(working) if full else 0,
        working_last=_bytes(working_last) if full else 0,
        recompute=recompute if full else "none",
        fixed_recompute=workload.recompute_num_layers if full else None,
        capacity=int(acc.usable_memory_bytes * (1.0 - headroom) // MEMORY_QUANTUM_BYTES),
        steps=m + (layout.pp - 1) / layout.vpp,
        even_layers=tuple(len(stage_layers(model, scale, c)) for c in range(scale)),
    )


def stage_time_tables(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload, layout: Layout
) -> StageProblem:
    """The time tables of :func:`build_stage_problem` alone (``layer_time``, ``rank_time``,
    ``mtp_time``; the rest left empty): what :func:`any_split_time_bound` reads, at a third of
    the cost (no memory tables, no recomputed-layer times), for every structure the split sweep
    bounds."""
    acc = cluster.accelerator
    domains = workload_domains(model, cluster, workload, layout)

    def time_of(contents: StageContents) -> int:
        return _time(
            microbatch_time(
                model, acc, workload, layout, stage=0, domains=domains, contents=contents
            ).total
        )

    by_kind: dict[int, int] = {}
    layer_time = []
    for i, kind in enumerate(layer_kinds(model, workload.seq_len)):
        if kind not in by_kind:
            by_kind[kind] = time_of(StageContents((range(i, i + 1),), (), False, False, 0, False))
        layer_time.append(by_kind[kind])
    n, mtp, last = model.num_layers, workload.mtp_num_layers, layout.pp - 1
    head = time_of(StageContents((), (), False, True, 0, True))
    on_last = StageContents((range(n - 1, n),) * mtp, (), False, False, mtp, False)
    return StageProblem.model_construct(
        pp=layout.pp,
        vpp=layout.vpp,
        layer_time=tuple(layer_time),
        rank_time=tuple(head if p == last else 0 for p in range(layout.pp)),
        num_mtp=mtp,
        mtp_time=time_of(on_last) if mtp else 0,
    )


def _layer_rows(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    time_of: Callable[[StageContents], float],
    held_of: Callable[[StageContents], tuple[float, float]],
) -> list[tuple[float, float, tuple[float, float], float, float]]:
    """Per layer (time kept, time added by recomputing, (state, the optimizer step's
    transient), activations kept, activations saved by recomputing), computed once per kind of
    layer (identical per-layer table rows)."""
    by_kind: dict[int, tuple[float, float, tuple[float, float], float, float]] = {}
    rows = []
    for i, kind in enumerate(layer_kinds(model, workload.seq_len)):
        one = (range(i, i + 1),)
        if kind not in by_kind:
            kept = StageContents(one, (), False, False, 0, False)
            redone = kept._replace(recomputed=one)
            kept_time = time_of(kept)
            kept_bytes = _activation_bytes(model, workload, layout, kept)
            by_kind[kind] = (
                kept_time,
                time_of(redone) - kept_time,
                held_of(kept),
                kept_bytes,
                kept_bytes - _activation_bytes(model, workload, layout, redone),
            )
        rows.append(by_kind[kind])
    return rows


def _activation_bytes(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, contents: StageContents
) -> float:
    """What one micro-batch of ``layout`` leaves stored for ``contents``: the activations and
    the einsum dispatch's masks (:func:`planner.cost.stage_memory.
    einsum_mask_bytes_per_microbatch`), at the layout's micro-batch."""
    return activation_bytes_per_microbatch(
        model, workload, layout, contents
    ) + einsum_mask_bytes_per_microbatch(model, workload, layout, contents)


def _time(seconds: float) -> int:
    return max(0, round(seconds / TIME_QUANTUM_S))


def _bytes(value: float, *, down: bool = False) -> int:
    units = value / MEMORY_QUANTUM_BYTES
    return max(0, math.floor(units) if down else math.ceil(units))


class Assignment(FrozenSpec):
    """A partition: layers per chunk, recomputed layers per chunk, the chunk holding MTP."""

    chunk_layers: tuple[int, ...]
    """Decoder layers per chunk, in layer order."""
    recompute_layers: tuple[int, ...]
    """How many of each chunk's first layers recompute in full."""
    mtp_chunk: int
    """Chunk holding the MTP modules (the last when there are none)."""


def rank_working(problem: StageProblem, rank: int) -> int:
    """The recompute working set ``rank`` holds when it recomputes any layer: ``working``, or
    ``working_last`` on the last rank (less what it shares with the logits there)."""
    p = problem
    if rank == p.pp - 1 and p.working_last is not None:
        return p.working_last
    return p.working


def rank_loads(problem: StageProblem, assignment: Assignment) -> list[tuple[int, int]]:
    """(time, memory x in_flight_scale) of each rank under ``assignment``."""
    p = problem
    loads = [[p.rank_time[r], p.in_flight_scale * (p.rank_state[r] + p.rank_memory[r])]
             for r in range(p.pp)]  # fmt: skip
    recomputing = [False] * p.pp
    start = 0
    for c, (count, redo) in enumerate(zip(assignment.chunk_layers, assignment.recompute_layers,
                                          strict=True)):  # fmt: skip
        r = c % p.pp
        layers = range(start, start + count)
        loads[r][0] += sum(p.layer_time[i] for i in layers)
        loads[r][0] += sum(p.recompute_time[i] for i in layers[:redo])
        loads[r][1] += p.in_flight_scale * sum(p.layer_state[i] for i in layers)
        activations = sum(p.layer_activation[i] for i in layers)
        activations -= sum(p.recompute_saving[i] for i in layers[:redo])
        loads[r][1] += p.in_flight[r] * activations
        recomputing[r] = recomputing[r] or redo > 0
        start += count
    if p.num_mtp:
        r = assignment.mtp_chunk % p.pp
        loads[r][0] += p.mtp_time
        state = p.mtp_state[0] if r == p.pp - 1 else p.mtp_state[1]
        loads[r][1] += p.in_flight_scale * (state + p.mtp_memory)
        loads[r][1] += p.in_flight[r] * p.mtp_activation
    for r in range(p.pp):
        loads[r][1] += p.in_flight_scale * rank_working(p, r) * recomputing[r]
    return [(t, mem) for t, mem in loads]


def chunk_times(problem: StageProblem, assignment: Assignment) -> list[int]:
    """Each chunk's micro-batch time under ``assignment``: its layers, the recomputation of its
    first ``recompute_layers``, the output layer and loss on the last chunk (the last rank's
    ``rank_time``) and the MTP modules on theirs. The pipeline's fill and drain wait on the
    slowest (:func:`planner.cost.step.pipeline_bubble_time`).

    >>> p = StageProblem.model_construct(pp=2, vpp=2, layer_time=(1, 2, 3, 4, 5, 6),
    ...     recompute_time=(0,) * 6, rank_time=(0, 7), num_mtp=0, mtp_time=0)
    >>> chunk_times(p, Assignment(chunk_layers=(1, 2, 2, 1), recompute_layers=(0,) * 4,
    ...     mtp_chunk=3))
    [1, 5, 9, 13]
    """
    p, out, start = problem, [], 0
    for c, (count, redo) in enumerate(
        zip(assignment.chunk_layers, assignment.recompute_layers, strict=True)
    ):
        layers = range(start, start + count)
        time_ = sum(p.layer_time[i] for i in layers)
        time_ += sum(p.recompute_time[i] for i in layers[:redo])
        if c == len(assignment.chunk_layers) - 1:
            time_ += p.rank_time[p.pp - 1]
        if p.num_mtp and c == assignment.mtp_chunk:
            time_ += p.mtp_time
        out.append(time_)
        start += count
    return out


def level_chunks(problem: StageProblem, assignment: Assignment, slowest: int) -> Assignment:
    """``assignment`` with its chunks levelled within each rank: first each rank's layer count
    spread as evenly as its chunks allow (kept when it holds every rule with no rank slower than
    ``slowest``); then, while the slowest chunk can pass a layer to another chunk of its rank
    (one layer fewer there, one more here; the chunks between keep their counts, their layers
    shifted by one) under the same conditions, the move that leaves the chunk times least
    uneven is made (the slowest chunk first, then the sum of their squares). The integer
    objective sees the ranks, and among splits equal there it may pile a rank's layers into one
    chunk, which the pipeline's fill and drain then wait on
    (:func:`planner.cost.step.pipeline_bubble_time`). Recomputation keeps its rule (the block
    method's count N, min(N, layers) per chunk).

    >>> p = StageProblem.model_construct(pp=2, vpp=2, num_chunks=4, layer_time=(1,) * 8,
    ...     recompute_time=(0,) * 8, rank_time=(0, 0), num_mtp=0, mtp_time=0, min_chunk_layers=1,
    ...     recompute="none", in_flight_scale=1, in_flight=(1, 1), capacity=99,
    ...     rank_state=(0, 0), rank_memory=(0, 0), working=0, layer_state=(0,) * 8,
    ...     layer_activation=(0,) * 8, recompute_saving=(0,) * 8, layer_transient=(),
    ...     rank_transient=(), fixed_recompute=None)
    >>> level_chunks(p, Assignment(chunk_layers=(1, 1, 3, 3), recompute_layers=(0,) * 4,
    ...     mtp_chunk=3), 4).chunk_layers
    (2, 2, 2, 2)
    """
    p = problem

    def redo_for(layers: list[int]) -> tuple[int, ...]:
        if p.recompute == "none" or not any(assignment.recompute_layers):
            return (0,) * len(layers)
        if p.recompute == "per_stage":
            blocks = [max(assignment.recompute_layers[r :: p.pp]) for r in range(p.pp)]
            return tuple(min(blocks[c % p.pp], n) for c, n in enumerate(layers))
        block = max(assignment.recompute_layers)
        return tuple(min(block, n) for n in layers)

    def unevenness(a: Assignment) -> tuple[int, int]:
        times = chunk_times(p, a)
        return max(times), sum(t * t for t in times)

    best, score = assignment, unevenness(assignment)
    # first each rank's layers spread as evenly as its chunks allow (the MTP modules' chunk is
    # the last that may hold layers), when that keeps to the rules and ``slowest``; then moves
    last = best.mtp_chunk if p.num_mtp else p.num_chunks - 1
    spread = [0] * p.num_chunks
    for r in range(p.pp):
        chunks = [c for c in range(r, last + 1, p.pp)]
        total = sum(best.chunk_layers[r :: p.pp])
        base, extra = divmod(total, len(chunks)) if chunks else (0, 0)
        for k, c in enumerate(chunks):
            spread[c] = base + int(k < extra)
    even = Assignment(
        chunk_layers=tuple(spread), recompute_layers=redo_for(spread), mtp_chunk=best.mtp_chunk
    )
    value = evaluate_assignment(p, even)
    if value is not None and value <= slowest and unevenness(even) < score:
        best, score = even, unevenness(even)
    for _ in range(4 * p.num_layers):  # each move lowers the score: a safe ceiling
        times = chunk_times(p, best)
        donor = max(range(p.num_chunks), key=times.__getitem__)
        found = None
        for taker in range(donor % p.pp, p.num_chunks, p.pp):
            if taker == donor or best.chunk_layers[donor] == 0:
                continue
            layers = list(best.chunk_layers)
            layers[donor] -= 1
            layers[taker] += 1
            moved = Assignment(
                chunk_layers=tuple(layers), recompute_layers=redo_for(layers),
                mtp_chunk=best.mtp_chunk,
            )  # fmt: skip
            value = evaluate_assignment(p, moved)
            if value is None or value > slowest:
                continue
            moved_score = unevenness(moved)
            if moved_score < score and (found is None or moved_score < found[1]):
                found = (moved, moved_score)
        if found is None:
            break
        best, score = found
    return best


def per_item_table(values: tuple[int, ...], size: int) -> tuple[int, ...]:
    """``values``, or ``size`` zeros where the table is empty (an optional per-layer or per-rank
    table of a :class:`StageProblem`)."""
    return values or (0,) * size


def rank_step_memory(problem: StageProblem, assignment: Assignment) -> list[int]:
    """Each rank's state plus the optimizer step's transient copy under ``assignment``: the
    memory of the step, after the backward has freed the activations (the second bound a rank
    must keep within capacity)."""
    p = problem
    layer = [s + t for s, t in zip(p.layer_state, per_item_table(p.layer_transient, p.num_layers),
                                   strict=True)]  # fmt: skip
    out = [s + t for s, t in zip(p.rank_state, per_item_table(p.rank_transient, p.pp), strict=True)]
    start = 0
    for c, count in enumerate(assignment.chunk_layers):
        out[c % p.pp] += sum(layer[start : start + count])
        start += count
    if p.num_mtp:
        r = assignment.mtp_chunk % p.pp
        last = r == p.pp - 1
        out[r] += (p.mtp_state[0] if last else p.mtp_state[1]) + (
            p.mtp_transient[0] if last else p.mtp_transient[1]
        )
    return out


def evaluate_assignment(problem: StageProblem, assignment: Assignment) -> int | None:
    """The integer objective (the slowest rank's micro-batch time) of ``assignment``, or None
    when it breaks a rule: layers not summing to the model's, a recompute count beyond a chunk,
    one that the recompute choice does not allow, MTP before a decoder layer or outside the last
    virtual stage, or a rank over memory (with its activations, or in the optimizer step)."""
    p = problem
    layers, redo = assignment.chunk_layers, assignment.recompute_layers
    if len(layers) != p.num_chunks or len(redo) != p.num_chunks or min(layers, default=0) < 0:
        return None
    if sum(layers) != p.num_layers or any(
        r < 0 or r > n for r, n in zip(redo, layers, strict=True)
    ):
        return None
    if min(layers[:-1], default=1) < p.min_chunk_layers:
        return None
    if not _recompute_allowed(p, layers, redo):
        return None
    if p.num_mtp and (
        assignment.mtp_chunk not in p.mtp_chunks
        or sum(layers[: assignment.mtp_chunk + 1]) != p.num_layers
    ):
        return None
    loads = rank_loads(p, assignment)
    if any(mem > p.in_flight_scale * p.capacity for _, mem in loads):
        return None
    if any(mem > p.capacity for mem in rank_step_memory(p, assignment)):
        return None
    return max(t for t, _ in loads)


def _recompute_allowed(p: StageProblem, layers: tuple[int, ...], redo: tuple[int, ...]) -> bool:
    """Whether ``redo`` is min(N, n_c) for one N (block; the pinned N when given) or for one N
    per rank (per_stage), or nothing (none)."""
    if p.recompute == "none":
        return not any(redo)
    groups = [range(p.num_chunks)]
    if p.recompute == "per_stage":
        groups = [range(r, p.num_chunks, p.pp) for r in range(p.pp)]
    counts = [p.fixed_recompute] if p.fixed_recompute is not None else range(max(layers) + 1)
    return all(
        any(all(redo[c] == min(layers[c], k) for c in group) for k in counts) for group in groups
    )


def even_assignment(problem: StageProblem) -> Assignment:
    """The planner's default split of the layers over the chunks (``even_layers``), with the
    layout's own recomputation (every layer, or the first N of each chunk) and MTP on the last
    chunk."""
    chunks = problem.num_chunks
    layers = problem.even_layers
    if problem.recompute == "none":
        redo = (0,) * chunks
    elif problem.fixed_recompute is not None:
        redo = tuple(min(problem.fixed_recompute, n) for n in layers)
    else:
        redo = layers
    return Assignment(chunk_layers=layers, recompute_layers=redo, mtp_chunk=chunks - 1)


def least_recompute_assignment(problem: StageProblem) -> Assignment:
    """The even split with the least recomputation that fits (a start for the solver): when
    the problem may choose how many of each chunk's first layers recompute (``block``: one N
    for every chunk; ``per_stage``: one N per rank, and no pinned N), each group of chunks
    takes the smallest N that keeps the partition within memory, the others left at the even
    split's. A rank's memory depends on its own chunks only and its time only grows with N,
    so per rank the smallest feasible N is the fastest: under ``per_stage`` this is the best
    partition among those with the even layer counts. Otherwise, or when the even split does
    not fit, the even split itself (:func:`even_assignment`); tests/test_stages.py checks it
    against every per-rank choice."""
    base = even_assignment(problem)
    if problem.recompute == "none" or problem.fixed_recompute is not None:
        return base
    if evaluate_assignment(problem, base) is None:
        return base
    layers = base.chunk_layers
    chunks = range(problem.num_chunks)
    groups = [chunks] if problem.recompute == "block" else [
        range(r, problem.num_chunks, problem.pp) for r in range(problem.pp)
    ]  # fmt: skip
    redo = list(base.recompute_layers)
    for group in groups:
        for k in range(max(layers) + 1):  # the smallest N that fits; the even split's fits
            trial = list(redo)
            for c in group:
                trial[c] = min(layers[c], k)
            candidate = base.model_copy(update={"recompute_layers": tuple(trial)})
            if evaluate_assignment(problem, candidate) is not None:
                redo = trial
                break
    return base.model_copy(update={"recompute_layers": tuple(redo)})


UNREACHABLE = 2**62
"""Cost of a split the min-max recurrence may not take (above any integer table sum)."""


def _min_max_split(
    rank_costs: list[np.ndarray], nearest: np.ndarray
) -> tuple[int, tuple[int, ...]] | None:
    """The min-max linear partition of layers 0..L-1 into len(rank_costs) contiguous stages in
    order: ``rank_costs[k][j, i]`` is rank k's cost when it holds layers j..i-1 (``UNREACHABLE``
    where it may not). Returns the least largest cost and a split that attains it, walking back
    from the last rank and keeping, of equally good cuts, the one nearest ``nearest[k]`` (the
    first layer rank k would hold); None when no split exists."""
    best = np.full(rank_costs[0].shape[1], UNREACHABLE, dtype=np.int64)
    best[0] = 0  # no layers on no ranks
    tables = []
    for cost in rank_costs:
        table = np.maximum(best[:, None], cost)
        tables.append(table)
        best = table.min(axis=0)
    value = int(best[-1])
    if value >= UNREACHABLE:
        return None
    layers: list[int] = []
    end = len(best) - 1
    for rank in reversed(range(len(tables))):
        starts = np.flatnonzero(tables[rank][:, end] <= value)
        start = int(starts[np.argmin(np.abs(starts - nearest[rank]))])
        layers.append(end - start)
        end = start
    return value, tuple(reversed(layers))


class ContiguousSplit(NamedTuple):
    """What the min-max recurrence says of a problem without interleaving."""

    bound: int
    """The least slowest-rank time of any split, memory and recomputation aside: a lower bound
    of the objective."""
    layers: tuple[int, ...] | None
    """Layers per stage of the fastest split that fits memory recomputing nothing (of those as
    fast, the one that needs the least memory); None when no such split fits."""
    time: int | None
    """Its slowest rank's time (None with it)."""


def contiguous_partition(problem: StageProblem) -> ContiguousSplit | None:
    """Without interleaving (None when vpp > 1 or no split exists): the min-max linear partition
    of the layers into pp contiguous stages, twice. Each rank's time is its ``rank_time`` plus
    its layers' times, the last rank's plus the MTP modules (they follow the last decoder
    layer, and with every stage but the last holding at least ``min_chunk_layers`` >= 1 layers
    that is the last stage). First over every split: the least slowest-rank time, a lower
    bound of the objective since recomputation and memory only add time or remove choices.
    Then over the splits whose every rank fits memory with nothing recomputed (a rank's memory
    depends on its own layers only, so fitting is a per-rank mask): the fastest, and of those
    as fast the one needing the least memory (:func:`rank_loads`' memory and
    :func:`rank_step_memory`, each against its capacity, written here over every span of
    layers at once; the split found is re-scored by :func:`evaluate_assignment` before it is
    used, so the two cannot drift apart silently). When the layout recomputes nothing,
    that split is the optimum; otherwise it is when its time meets the bound. The recurrence is
    the classic one (Bokhari 1988; the "linear partition" dynamic programme of Skiena, *The
    Algorithm Design Manual*, section 10.7), with a per-rank constant added:

        best[k][i] = min over j <= i - least of max(best[k-1][j], rank_time[k-1] + P[i] - P[j])

    over the prefix sums P of ``layer_time``, in integers (O(pp L^2), numpy per rank); equally
    good cuts keep the one nearest the even split (``even_layers``).

    >>> p = StageProblem.model_construct(pp=3, vpp=1, layer_time=(5, 5, 5, 9, 9, 9, 9),
    ...     rank_time=(0, 0, 4), min_chunk_layers=1, num_mtp=0, mtp_time=0,
    ...     layer_state=(1,) * 7, layer_activation=(1,) * 7, in_flight=(3, 2, 1),
    ...     in_flight_scale=3, rank_state=(0, 0, 0), rank_memory=(0, 0, 0), capacity=100,
    ...     even_layers=(2, 3, 2))
    >>> contiguous_partition(p)  # 5+5+5 | 9+9 | 9+9+4, the best of any cut
    ContiguousSplit(bound=22, layers=(3, 2, 2), time=22)
    >>> contiguous_partition(p.model_copy(update={"capacity": 5}))  # rank 0 fits 2 layers
    ContiguousSplit(bound=22, layers=(2, 3, 2), time=23)
    """
    p = problem
    times = _rank_time_spans(p)
    if times is None:
        return None
    nearest = np.cumsum((0, *p.even_layers[:-1]))
    unconstrained = _min_max_split(times, nearest)
    if unconstrained is None:
        return None
    n, last, mtp = p.num_layers, p.pp - 1, bool(p.num_mtp)
    scale = p.in_flight_scale
    state, activation = _spans(p.layer_state), _spans(p.layer_activation)
    held = _spans(tuple(s + t for s, t in zip(
        p.layer_state, per_item_table(p.layer_transient, n), strict=True)))  # fmt: skip
    rank_transient = per_item_table(p.rank_transient, p.pp)
    memories = []
    for r in range(p.pp):
        load = scale * (p.rank_state[r] + p.rank_memory[r] + state) + p.in_flight[r] * activation
        step = p.rank_state[r] + rank_transient[r] + held
        if mtp and r == last:
            load = (
                load + scale * (p.mtp_state[0] + p.mtp_memory) + p.in_flight[r] * p.mtp_activation
            )
            step = step + p.mtp_state[0] + p.mtp_transient[0]
        memories.append(np.maximum(load, scale * step))
    fitting = [np.where(m <= scale * p.capacity, t, UNREACHABLE)
               for t, m in zip(times, memories, strict=True)]  # fmt: skip
    fastest = _min_max_split(fitting, nearest)
    if fastest is None:
        return ContiguousSplit(unconstrained[0], None, None)
    leanest = _min_max_split(
        [np.where(t <= fastest[0], m, UNREACHABLE)
         for t, m in zip(fitting, memories, strict=True)],
        nearest,
    )  # fmt: skip
    layers = leanest[1] if leanest is not None else fastest[1]
    return ContiguousSplit(unconstrained[0], layers, fastest[0])


def contiguous_lower_bound(problem: StageProblem) -> int | None:
    """:func:`contiguous_partition`'s ``bound`` (None where it does not apply), from its first
    pass alone: a lower bound of the objective without interleaving."""
    times = _rank_time_spans(problem)
    found = None if times is None else _min_max_split(times, np.zeros(problem.pp, dtype=np.int64))
    return None if found is None else found[0]


def _spans(values: tuple[int, ...]) -> np.ndarray:
    """``out[j, i]``: the sum of ``values[j:i]`` (negative below the diagonal, never taken)."""
    prefix = np.concatenate(([0], np.cumsum(np.asarray(values, dtype=np.int64))))
    return prefix[None, :] - prefix[:, None]


def _rank_time_spans(p: StageProblem) -> list[np.ndarray] | None:
    """Per rank, its time when it holds layers j..i-1 (``UNREACHABLE`` where it may not: fewer
    than ``min_chunk_layers`` on any rank but the last): its ``rank_time``, the layers' times,
    and on the last rank the MTP modules. None with interleaving (or ``min_chunk_layers`` < 1,
    where the MTP modules need not sit on the last stage)."""
    if p.vpp != 1 or p.min_chunk_layers < 1:
        return None
    n, last = p.num_layers, p.pp - 1
    gap = np.arange(n + 1)[None, :] - np.arange(n + 1)[:, None]  # layers j..i-1: i - j
    span = _spans(p.layer_time)
    mtp = p.mtp_time if p.num_mtp else 0
    return [
        np.where(gap >= (p.min_chunk_layers if r < last else 0),
                 p.rank_time[r] + (mtp if r == last else 0) + span, UNREACHABLE)
        for r in range(p.pp)
    ]  # fmt: skip


UNIFORM_MAX_CELLS = 2**23
"""Largest table :func:`uniform_partition` fills per rank (the recompute counts it tries, one
under ``per_stage``, x layer counts^2, int64: 64 MiB, about three times that at its peak with
the temporaries); beyond it (a model of some 200 layers or more) it returns None and the solver
runs. Real models of up to 126 layers stay under 50 MiB."""


def _recompute_span(
    mins: np.ndarray, layers: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(least, most) of sum_c min(N, n_c) over chunk sizes n_c >= ``mins[c]`` that sum to
    ``layers`` (k), for every recompute count N in ``count`` (rows) and k (columns): the
    chunks at their minimum give sum_c min(N, m_c); the k - sum m_c further layers add least
    piled on the largest chunk (min(N - min(N, max m), extra) more) and most spread over chunks
    still below N (min(extra, sum_c (N - min(N, m_c))) more). Moving one layer between chunks
    changes the sum by at most one, so every count in between is reached too."""
    extra = layers - mins.sum()
    base = np.minimum(count, mins[None, :]).sum(axis=1)[:, None]
    room = (count - np.minimum(count, mins[None, :])).sum(axis=1)[:, None]
    least = base + np.minimum(count - np.minimum(count, mins.max()), extra)
    most = base + np.minimum(extra, room)
    return least, most


def _chunk_sizes(mins: list[int], layers: int, redo: int, count: int) -> list[int]:
    """Chunk sizes of at least ``mins`` summing to ``layers`` whose first ``count`` layers
    recompute ``redo`` layers in all (``redo`` within :func:`_recompute_span`): the largest
    chunk raised to ``count`` first, the other chunks filled towards ``count`` until ``redo``
    is reached, and the layers left over piled on the largest chunk, past ``count``."""
    sizes = list(mins)
    extra = layers - sum(mins)
    need = redo - sum(min(count, m) for m in mins)
    sink = max(range(len(mins)), key=lambda c: mins[c])
    for c in [sink, *(c for c in range(len(mins)) if c != sink)]:
        add = min(count - min(count, sizes[c]), extra, need)
        sizes[c] += add
        extra -= add
        need -= add
    sizes[sink] += extra
    return sizes


def uniform_partition(problem: StageProblem) -> tuple[int, Assignment] | None:
    """The optimum partition, without a solver, of a problem whose layers are all of one kind
    (identical rows in every table) and that has no MTP modules; None otherwise, or when it
    would fill more than :data:`UNIFORM_MAX_CELLS`.

    With one kind of layer it does not matter which layers a chunk holds, only how many: rank r
    holding k layers of which rho recompute takes rank_time + k t + rho t_recompute and needs
    (scaled by in-flight micro-batches) its state, k layers' state and activations less rho
    layers' savings, the recompute working set when rho > 0, and k layers' state and transient
    in the optimizer step. Time grows with rho and memory falls, so the best rho is the least one
    the rank can reach that fits. Under ``block`` one count N is shared and each chunk
    recomputes min(N, n_c) of its n_c layers: the rho a rank reaches with its chunks (each but
    the last overall at least ``min_chunk_layers``) is an interval (:func:`_recompute_span`).
    For each N a min-max dynamic programme over the ranks shares out the layers,

        best_r[k] = min over j <= k of max(best_{r-1}[k - j], fastest_r(N)[j]),

    and the least N of the best value wins; under ``per_stage`` each rank takes its own N, and
    with nothing recomputed N = 0. The chunk sizes that reach each rank's (k, rho) are then
    built (:func:`_chunk_sizes`), and :func:`evaluate_assignment` must score the result at the
    programme's value. Exact: the brute-force twin in tests/test_stages.py enumerates every
    split and recompute choice. It settles, among others, the interleaved splits with full
    recomputation of a uniform MoE model (Qwen3-235B's PP4 VPP12 block split: 1.6% faster in the
    integer model than the split CP-SAT reaches in its 1 s limit, which varies from run to run,
    in tens of milliseconds).

    >>> p = StageProblem.model_construct(pp=2, vpp=2, layer_time=(10,) * 6,
    ...     recompute_time=(4,) * 6, layer_state=(1,) * 6, layer_activation=(3,) * 6,
    ...     recompute_saving=(2,) * 6, layer_transient=(), rank_time=(0, 5), rank_transient=(),
    ...     rank_state=(0, 0), rank_memory=(0, 0), in_flight=(4, 2), in_flight_scale=2,
    ...     capacity=10, num_mtp=0, working=0, recompute="block", fixed_recompute=None,
    ...     min_chunk_layers=1)
    >>> value, split = uniform_partition(p)  # rank 0 (2 micro-batches in flight) fits 3 layers
    >>> value, split.chunk_layers, split.recompute_layers  # only recomputing all 3: N = 2
    (43, (2, 3, 1, 0), (2, 2, 1, 0))
    >>> uniform_partition(p.model_copy(update={"recompute": "per_stage"}))[0]  # rank 1: N = 1
    42
    """
    p = problem
    n = p.num_layers
    rows = set(zip(p.layer_time, p.recompute_time, p.layer_state, p.layer_activation,
                   p.recompute_saving, per_item_table(p.layer_transient, n), strict=True))  # fmt: skip
    if len(rows) != 1 or p.num_mtp:
        return None
    time_, redo_time, state, activation, saving, transient = next(iter(rows))
    pp, chunks, scale = p.pp, p.num_chunks, p.in_flight_scale
    mins = [_chunk_minimums(p, r).tolist() for r in range(pp)]
    if p.recompute == "none":
        counts = np.array([0])
    elif p.fixed_recompute is not None:
        counts = np.array([p.fixed_recompute])
    else:  # no chunk holds more than this (the others at their least, the last one empty),
        # so a larger N recomputes the same
        counts = np.arange(max(0, n - max(0, chunks - 2) * p.min_chunk_layers) + 1)
    rows = 1 if p.recompute == "per_stage" and p.fixed_recompute is None else len(counts)
    if rows * (n + 1) ** 2 > UNIFORM_MAX_CELLS:
        return None
    layers = np.arange(n + 1)[None, :]
    rank_transient = per_item_table(p.rank_transient, pp)
    fastest, redone = [], []  # per rank: [N, k] least time and its recompute count
    for r in range(pp):
        least, most = _recompute_span(np.array(mins[r]), layers, counts[:, None])
        kept = scale * (p.rank_state[r] + p.rank_memory[r] + layers * state)
        kept = kept + p.in_flight[r] * layers * activation
        # memory past capacity at rho > 0
        over = kept + scale * rank_working(p, r) - scale * p.capacity
        per = p.in_flight[r] * saving
        enough = -(-over // per) if per > 0 else np.where(over <= 0, 0, UNREACHABLE)
        redo = np.where(over <= 0, np.maximum(least, 1), np.maximum(np.maximum(least, 1), enough))
        redo = np.where((least == 0) & (kept <= scale * p.capacity), 0, redo)
        step = p.rank_state[r] + rank_transient[r] + layers * (state + transient)
        ok = (layers >= sum(mins[r])) & (step <= p.capacity) & (redo <= most)
        redo = np.where(ok, redo, 0)
        total = p.rank_time[r] + layers * time_ + redo * redo_time
        fastest.append(np.where(ok, total, UNREACHABLE))
        redone.append(redo)
    per_stage = p.recompute == "per_stage" and p.fixed_recompute is None
    choice = [t.argmin(axis=0) for t in fastest] if per_stage else None
    times = [t.min(axis=0)[None, :] for t in fastest] if per_stage else fastest
    ks = np.arange(n + 1)
    gap = ks[:, None] - ks[None, :]  # [k, j]: layers left for the ranks before
    inside = gap >= 0
    gap = np.maximum(gap, 0)
    best = np.full((times[0].shape[0], n + 1), UNREACHABLE, dtype=np.int64)
    best[:, 0] = 0
    befores = []
    for rank_times in times:
        befores.append(best)
        reached = np.where(inside[None], best[:, gap], UNREACHABLE)
        best = np.maximum(reached, rank_times[:, None, :]).min(axis=2)
    row = int(best[:, -1].argmin())
    value = int(best[row, -1])
    if value >= UNREACHABLE:
        return None
    held = [0] * pp
    left = n
    for r in reversed(range(pp)):
        j = np.arange(left + 1)
        fits = np.maximum(befores[r][row, left - j], times[r][row, j]) <= value
        held[r] = int(np.flatnonzero(fits)[0])
        left -= held[r]
    chunk_layers, redo_layers = [0] * chunks, [0] * chunks
    for r in range(pp):
        index = int(choice[r][held[r]]) if choice is not None else row
        count = int(counts[index])
        sizes = _chunk_sizes(mins[r], held[r], int(redone[r][index, held[r]]), count)
        for i, c in enumerate(range(r, chunks, pp)):
            chunk_layers[c], redo_layers[c] = sizes[i], min(count, sizes[i])
    assignment = Assignment(
        chunk_layers=tuple(chunk_layers),
        recompute_layers=tuple(redo_layers),
        mtp_chunk=chunks - 1,
    )
    if evaluate_assignment(p, assignment) != value:
        return None
    return value, assignment


RANK_LOAD_MAX_COUNTS = 512
"""Most per-rank layer-count vectors (the product over the kinds of layer of their count + 1)
:func:`rank_load_lower_bound` enumerates; beyond it (two kinds of some 23 layers each, as
Gemma's alternating attention, or more kinds) it returns None and the solver runs without that
bound. Its tables are count vectors x count vectors, so
512 keeps each within 2 MiB."""


def _row_kinds(p: StageProblem) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
    """The kinds of layer of ``p``'s tables (identical rows of every per-layer table) and, per
    kind, its count + 1: the shape of :func:`rank_load_lower_bound`'s count vectors."""
    rows = list(zip(p.layer_time, p.recompute_time, p.layer_state, p.layer_activation,
                    p.recompute_saving, per_item_table(p.layer_transient, p.num_layers),
                    strict=True))  # fmt: skip
    kinds = sorted(set(rows))
    return kinds, tuple(rows.count(kind) + 1 for kind in kinds)


def rank_load_work(problem: StageProblem, *, share_count: bool = True) -> int:
    """The size of :func:`rank_load_lower_bound`'s programme: the cells of its tables, count
    vectors x count vectors per rank (each rank's fastest recompute choice per count vector, and
    its step of the min-max recurrence), x ranks x the programmes it runs (two under ``block``
    with N free and ``share_count``, :func:`_recompute_regimes`); 0 when it does not apply.
    The budget charges 1.8e-5 ms a cell, as measured before the count-vector tables were
    shared per shape (0.6-0.9e-5 ms since; :data:`planner.search.space.RANK_LOAD_WORK_PER_UNIT`)."""
    vectors = math.prod(_row_kinds(problem)[1])
    if vectors > RANK_LOAD_MAX_COUNTS:
        return 0
    programmes = 2 if share_count and shares_recompute_count(problem) else 1
    return vectors * vectors * problem.pp * programmes


def rank_load_applies(problem: StageProblem) -> bool:
    """Whether :func:`rank_load_lower_bound` enumerates ``problem``'s count vectors (at most
    :data:`RANK_LOAD_MAX_COUNTS`): then its None means that no assignment fits."""
    return rank_load_work(problem) > 0


def shares_recompute_count(p: StageProblem) -> bool:
    """Whether ``p`` shares one recompute count N over every chunk and leaves it free (``block``
    without a pinned N): then :func:`rank_load_lower_bound` with ``share_count`` runs its
    programme twice, N = 0 and N >= 1 (:func:`_recompute_regimes`)."""
    return p.recompute == "block" and p.fixed_recompute is None


def _chunk_minimums(p: StageProblem, rank: int) -> np.ndarray:
    """Least decoder layers of each of ``rank``'s chunks: ``min_chunk_layers``, and 0 for the
    last chunk overall (it may hold just the output layer and loss)."""
    chunks = p.num_chunks
    return np.array([p.min_chunk_layers if c < chunks - 1 else 0
                     for c in range(rank, chunks, p.pp)])  # fmt: skip


def _recompute_regimes(
    p: StageProblem,
    held: np.ndarray,
    redone: np.ndarray,
    *,
    share_count: bool = True,
    pairs: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[list[np.ndarray]]:
    """What the recompute choice allows a rank that holds ``held`` layers (per count vector) to
    recompute, ``redone`` of them (per recompute choice), as masks [count vector, choice] per
    rank, one list of masks per regime the relaxation runs :func:`rank_load_lower_bound`'s
    programme on. A rank holds at least its chunks' minimums (:func:`_chunk_minimums`); under
    one count N a rank whose chunks hold those ``held`` layers recomputes between the least and
    the most of sum_c min(N, n_c) (:func:`_recompute_span`), so:

    - ``none``: nothing (one choice, recomputing nothing);
    - a pinned N (``fixed_recompute``): that span, on every rank;
    - ``block`` with N free: two regimes, N = 0 (nothing on any rank) and N >= 1 (every rank at
      least the span's least at N = 1, which only grows with N: each chunk recomputes at least
      one of its layers, what Megatron-LM's block method does with any N >= 1); without
      ``share_count``, the one regime of ``per_stage`` below (half the work, a looser bound);
    - ``per_stage`` with N free: per rank, nothing or at least the span's least at N = 1.

    >>> p = StageProblem.model_construct(pp=2, vpp=2, recompute="block", fixed_recompute=None,
    ...     min_chunk_layers=1)
    >>> held, redone = np.array([1, 2, 3, 4]), np.array([0, 1, 2, 3])
    >>> [m.astype(int).tolist() for m in _recompute_regimes(p, held, redone)[1]][0]
    [[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1]]

    ``pairs`` (count vector indices, choice indices): the masks at those pairs alone, one flat
    mask per rank (the cells :func:`rank_load_lower_bound` reads), the same values.

    >>> pairs = (np.array([1, 2, 3]), np.array([0, 2, 1]))
    >>> [m.astype(int).tolist() for m in _recompute_regimes(p, held, redone, pairs=pairs)[1]][0]
    [0, 1, 0]
    """
    if pairs is None:
        shape = (len(held), len(redone))

        def by_count(values: np.ndarray) -> np.ndarray:
            return values[:, None]

        def by_choice(values: np.ndarray) -> np.ndarray:
            return values[None, :]
    else:
        shape = pairs[0].shape

        def by_count(values: np.ndarray) -> np.ndarray:
            return values[pairs[0]]

        def by_choice(values: np.ndarray) -> np.ndarray:
            return values[pairs[1]]

    ranks = range(p.pp)
    enough = [by_count(held >= _chunk_minimums(p, r).sum()) for r in ranks]
    if p.recompute == "none":
        return [[np.broadcast_to(e, shape) for e in enough]]

    def least_most(r: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        least, most = _recompute_span(_chunk_minimums(p, r), held, np.array([[count]]))
        return by_count(least[0]), by_count(most[0])

    nothing = by_choice(redone == 0)
    redone_by_choice = by_choice(redone)
    if p.fixed_recompute is not None:
        spans = [least_most(r, p.fixed_recompute) for r in ranks]
        return [[e & (redone_by_choice >= lo) & (redone_by_choice <= hi)
                 for e, (lo, hi) in zip(enough, spans, strict=True)]]  # fmt: skip
    some = [e & (redone_by_choice >= least_most(r, 1)[0]) for r, e in zip(ranks, enough,
                                                                         strict=True)]  # fmt: skip
    if p.recompute == "block" and share_count:
        return [[e & nothing for e in enough], some]
    return [[(e & nothing) | s for e, s in zip(enough, some, strict=True)]]


@lru_cache(maxsize=32)
def _count_grid(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(counts, inside, before) of :func:`rank_load_lower_bound`'s count vectors, which depend on
    the kinds' counts alone and so are built once per shape (read-only, shared by every call):
    ``counts`` every vector (one row each, np.ndindex order, so a row's index is its flat
    index), ``inside[s, c]`` whether vector c fits inside vector s (c <= s in every kind), and
    ``before[s, c]`` the flat index of s - c where it does (0 where it does not, masked by
    ``inside``).

    >>> counts, inside, before = _count_grid((2, 2))
    >>> counts.tolist(), inside[3].tolist(), before[3].tolist()  # s = (1, 1)
    ([[0, 0], [0, 1], [1, 0], [1, 1]], [True, True, True, True], [3, 2, 1, 0])
    """
    counts = np.array(list(np.ndindex(*shape)), dtype=np.int64).reshape(-1, len(shape))
    diff = counts[:, None, :] - counts[None, :, :]
    inside = np.all(diff >= 0, axis=2)
    before = np.where(inside, np.ravel_multi_index(tuple(np.maximum(diff, 0).T), shape).T, 0)
    for table in (counts, inside, before):
        table.setflags(write=False)
    return counts, inside, before


@lru_cache(maxsize=32)
def _count_pairs(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pairs (s, c) of count vectors with c inside s (``inside`` of :func:`_count_grid`),
    in row-major order: their s, their c, ``before[s, c]``, and the index of each s's first
    pair (every s holds c = 0, so none is empty). :func:`rank_load_lower_bound` takes its
    minimums over these alone, a third of the grid for DeepSeek-V3's 4 x 59 count vectors,
    rather than over the whole grid with the rest masked: the same minimums, exactly.

    >>> s, c, before, starts = _count_pairs((2, 2))
    >>> s.tolist(), c.tolist(), before.tolist(), starts.tolist()
    ([0, 1, 1, 2, 2, 3, 3, 3, 3], [0, 0, 1, 0, 2, 0, 1, 2, 3], [0, 1, 0, 2, 0, 3, 2, 1, 0], [0, 1, 3, 5])
    """
    _, inside, before = _count_grid(shape)
    s, c = np.nonzero(inside)
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    pairs = (s, c, before[s, c], starts)
    for table in pairs:
        table.setflags(write=False)
    return pairs


def rank_load_lower_bound(problem: StageProblem, *, share_count: bool = True) -> int | None:
    """A lower bound of the objective that keeps each rank's time and memory exactly and drops
    what ties the ranks to the layer order: which layers a chunk holds (contiguity), the order of
    the chunks, how the layers of a rank are shared out over its chunks beyond what that allows
    it to recompute (:func:`_recompute_regimes`: at least the chunks' minimums, and under one
    count N between the least and the most that N recomputes of them), and where after the last
    layer the MTP modules sit (any rank that holds a last virtual stage). What is left is a
    min-max assignment of counts: each kind of layer (identical rows in every table) has a
    count to share out over the ranks, and rank r holding c_k layers of kind k and recomputing
    rho_k <= c_k of them takes

        rank_time[r] + sum_k c_k (layer_time_k + ...) + sum_k rho_k recompute_time_k

    and must fit the memory of :func:`rank_loads` and :func:`rank_step_memory` (the MTP modules
    on one rank that may hold them, with their time, state and activations). Every real
    partition is one of these assignments with the same rank times, so the best of them is at
    most the optimum. For each rank the fastest fitting recompute choice of every count vector
    is a table lookup; the assignment is then a min-max dynamic programme over the ranks:

        best_r[s] = min over c <= s of max(best_{r-1}[s - c], fastest_r[c])

    on count vectors s (plus whether the MTP modules are placed), exact over that relaxation,
    run once per regime (the least of them). It is what proves an interleaved split optimal
    without a solve (DeepSeek-V3's PP16 VPP3, whose 3 dense and 58 MoE layers cannot share out
    more evenly than the even split does), and it stops a solve at a solution that reaches it.
    Under the block method with N free, a bound that let each rank choose how many of its layers
    recompute fell 12% below the best split of DeepSeek-V3's PP16 VPP3 at TP2 EP4 (benchmarks/
    bench_search.py's FP8 search: 99.9 against 114.2 ms), so the split sweep ran CP-SAT to its
    time limit on a layout that could not win, and CP-SAT found that split but could not prove
    it; sharing N, the bound is 114.2 ms, which the even counts with one recomputed layer per
    chunk reach, so that split is optimal with no solve (``share_count``: False keeps one
    programme, each rank recomputing nothing or at least one layer per chunk, at half the
    work). None when no assignment fits, or when the count vectors number more
    than :data:`RANK_LOAD_MAX_COUNTS`.

    >>> p = StageProblem.model_construct(pp=2, vpp=2, layer_time=(4, 10, 10, 10, 10),
    ...     recompute_time=(0,) * 5, layer_state=(1,) * 5, layer_activation=(1,) * 5,
    ...     recompute_saving=(0,) * 5, layer_transient=(), rank_time=(0, 3),
    ...     rank_transient=(), rank_state=(0, 0), rank_memory=(0, 0), in_flight=(4, 2),
    ...     in_flight_scale=4, capacity=100, num_mtp=0, working=0, recompute="none",
    ...     min_chunk_layers=1)
    >>> rank_load_lower_bound(p)  # 4 + 10 + 10 on one rank, 10 + 10 + 3 on the other
    24
    >>> rank_load_lower_bound(p.model_copy(update={"capacity": 3}))  # 3 layers do not fit
    """
    p = problem
    pp, scale = p.pp, p.in_flight_scale
    kinds, shape = _row_kinds(p)
    if math.prod(shape) > RANK_LOAD_MAX_COUNTS:
        return None
    counts, _, _ = _count_grid(shape)
    in_s, in_c, before, starts = _count_pairs(shape)  # the (s, c) pairs with c inside s
    table = np.array(kinds, dtype=np.int64).reshape(len(kinds), 6)
    time_, _, state, activation, _, transient = (counts @ table[:, i] for i in range(6))
    redo = counts if p.recompute != "none" else np.zeros((1, len(kinds)), dtype=np.int64)
    redo_time, saving = redo @ table[:, 1], redo @ table[:, 4]
    recomputing = redo.sum(axis=1) > 0
    # count vector x recompute choice: a choice recomputes at most what the count vector holds
    # (the pairs of _count_pairs); without recomputation the one choice recomputes nothing
    if p.recompute != "none":
        rows, choices = in_s, in_c
    else:
        rows, choices = np.arange(len(counts)), np.zeros(len(counts), dtype=np.int64)
    # each pair's terms that no rank changes, so that a rank's test is one sum and two compares
    pair_state = scale * state[rows]
    pair_working = scale * recomputing[choices].astype(np.int64)
    pair_activation = activation[rows] - saving[choices]
    pair_step = (state + transient)[rows]
    pair_time = time_[rows] + redo_time[choices]
    rank_transient = per_item_table(p.rank_transient, pp)
    mtp_ranks = {c % pp for c in p.mtp_chunks} if p.num_mtp else set()

    def fastest(r: int, mtp: bool, admitted: np.ndarray) -> np.ndarray:
        """Rank r's least time per count vector over its fitting recompute choices: those whose
        scale x (state + recompute working set) + in-flight x activations fit scale x capacity
        and whose step memory fits capacity (integers moved across each inequality: exact)."""
        last = r == pp - 1
        extra_time = extra_state = extra_activation = extra_step = 0
        if mtp:
            extra_time, extra_activation = p.mtp_time, p.mtp_activation
            extra_state = (p.mtp_state[0] if last else p.mtp_state[1]) + p.mtp_memory
            extra_step = (p.mtp_state[0] + p.mtp_transient[0] if last
                          else p.mtp_state[1] + p.mtp_transient[1])  # fmt: skip
        load = pair_state + p.in_flight[r] * pair_activation
        working = rank_working(p, r)
        if working:
            load = load + working * pair_working
        room = (scale * (p.capacity - p.rank_state[r] - p.rank_memory[r] - extra_state)
                - p.in_flight[r] * extra_activation)  # fmt: skip
        step_room = p.capacity - p.rank_state[r] - rank_transient[r] - extra_step
        fits = admitted & (load <= room) & (pair_step <= step_room)
        least = np.where(fits, pair_time, UNREACHABLE)
        if p.recompute != "none":  # several choices per count vector: the fastest that fits
            least = np.minimum.reduceat(least, starts)
        return np.where(least < UNREACHABLE, least + (p.rank_time[r] + extra_time), UNREACHABLE)

    def step_up(best: np.ndarray, rank: np.ndarray) -> np.ndarray:
        return np.minimum.reduceat(np.maximum(best[before], rank[in_c]), starts)

    value = UNREACHABLE
    regimes = _recompute_regimes(p, counts.sum(axis=1), redo.sum(axis=1), share_count=share_count,
                                 pairs=(rows, choices))  # fmt: skip
    for masks in regimes:
        unplaced = np.full(len(counts), UNREACHABLE, dtype=np.int64)
        unplaced[0] = 0  # nothing held by no ranks
        placed = np.full(len(counts), UNREACHABLE, dtype=np.int64)
        for r in range(pp):
            plain = fastest(r, False, masks[r])
            new_placed = step_up(placed, plain)
            if r in mtp_ranks:
                new_placed = np.minimum(new_placed, step_up(unplaced, fastest(r, True, masks[r])))
            unplaced, placed = step_up(unplaced, plain), new_placed
        value = min(value, int((placed if p.num_mtp else unplaced)[-1]))
    return None if value >= UNREACHABLE else value


def any_split_time_bound(problem: StageProblem) -> int:
    """A lower bound of the slowest rank's micro-batch time under every split of every layout
    that shares ``problem``'s degrees and micro-batch, whatever its vpp, recomputation or memory
    (``problem``: the layout without recomputation), cheap enough to take on every pipelined
    structure a search bounds. Which layers a rank holds is left free (each rank r holding
    whole layers on top of its ``rank_time[r]``; the MTP modules on any rank, as any rank may
    hold a last virtual stage); recomputation only adds time and memory only removes choices.
    With one kind of layer, the least time at which the ranks hold them all
    (:func:`_alike_layers_time_bound`); with several, the largest of the mean rank time and,
    for each kind, the least time at which the ranks hold every layer at least that slow
    (:func:`_counting_time_bound`). The search's split sweep prunes a pipelined layout on it
    (docs/search.md, "Split layouts the even split ranks low").

    >>> p = StageProblem.model_construct(pp=2, vpp=1, layer_time=(4, 10, 10, 10, 10),
    ...     rank_time=(0, 3), num_mtp=0, mtp_time=0)
    >>> any_split_time_bound(p)  # the mean, 23.5; each rank holds two of the 10s: 20 + 3
    24
    >>> any_split_time_bound(p.model_copy(update={"layer_time": (10,) * 5}))  # 30, 20 + 3
    30
    """
    if len(set(problem.layer_time)) == 1:
        return _alike_layers_time_bound(problem)
    return _counting_time_bound(problem)


def _counting_time_bound(problem: StageProblem) -> int:
    """The largest of the mean rank time (rounded up), the largest ``rank_time``, the least
    ``rank_time`` + the MTP modules, and for each layer time t the least T at which the ranks
    can hold every layer taking t or more, rank r at most floor((T - rank_time[r]) / t) of
    them: each holds under every assignment of layers to ranks, so under every split."""
    p = problem
    mtp = p.mtp_time if p.num_mtp else 0
    best = max(
        -(-(sum(p.layer_time) + sum(p.rank_time) + mtp) // p.pp),
        max(p.rank_time),  # every rank's own extras
        min(e + mtp for e in p.rank_time),  # the MTP modules' rank
    )
    extras = sorted(Counter(p.rank_time).items())  # (extra, ranks): most ranks share 0
    for t in sorted(set(p.layer_time)):
        if t == 0:
            continue
        count = sum(1 for x in p.layer_time if x >= t)

        def holds(limit: int, t: int = t, count: int = count) -> bool:
            return sum(n * max(0, (limit - e) // t) for e, n in extras) >= count

        best = max(best, _least_holding(best, max(p.rank_time) + count * t, holds))
    return best


def _least_holding(low: int, high: int, holds: Callable[[int], bool]) -> int:
    """The least integer T in [low, high] at which ``holds`` (monotone: false, then true) is
    true, by bisection; ``high`` when none below it is.

    >>> _least_holding(0, 100, lambda t: t * t >= 50)
    8
    """
    while low < high:
        mid = (low + high) // 2
        if holds(mid):
            high = mid
        else:
            low = mid + 1
    return low


def _alike_layers_time_bound(problem: StageProblem) -> int:
    """:func:`any_split_time_bound` when every layer takes the same time t (a dense model): the
    least T at which the ranks can hold every layer, rank r at most floor((T - rank_time[r]) /
    t) of them, one rank also the MTP modules (the one that loses the fewest layers for it),
    found by bisection (what :func:`rank_load_lower_bound`'s programme computes with one kind
    of layer, in O(pp log) instead of O(pp L^2)).

    >>> p = StageProblem.model_construct(pp=3, vpp=1, layer_time=(10,) * 8, rank_time=(0, 0, 7),
    ...     num_mtp=1, mtp_time=12)
    >>> _alike_layers_time_bound(p)  # 2 layers + the MTP modules, 3, 3 + the loss
    37
    >>> _alike_layers_time_bound(p.model_copy(update={"num_mtp": 0}))  # 3, 3, 2 + the loss
    30
    """
    p = problem
    n, t, extras = p.num_layers, p.layer_time[0], p.rank_time
    mtp = p.mtp_time if p.num_mtp else 0

    if t == 0:  # the layers take no time: the slowest extra, with the MTP modules somewhere
        return max(max(extras), min(e + mtp for e in extras))

    def holds(limit: int) -> bool:
        room = [(limit - e) // t if limit >= e else -1 for e in extras]
        if min(room) < 0:
            return False
        total = sum(room)
        if not mtp:
            return total >= n
        with_mtp = [
            (limit - e - mtp) // t if limit >= e + mtp else None for e in extras
        ]  # rank r's room when it also holds the MTP modules
        return any(
            w is not None and total - r + w >= n for r, w in zip(room, with_mtp, strict=True)
        )

    low = -(-(n * t + sum(extras) + mtp) // p.pp)
    return _least_holding(low, max(extras) + n * t + mtp, holds)


def rounding_slack(problem: StageProblem) -> int:
    """Quanta a bound on ``problem``'s tables is lowered by before it bounds the cost model:
    :func:`_time` rounds each table entry to the nearest quantum, so a rank's sum of entries may
    exceed the cost model's time by half a quantum per entry; one per layer and MTP module, and
    two for the rank's own extras, cover it (:func:`tables_rounding_slack`)."""
    return tables_rounding_slack(problem.num_layers, problem.num_mtp)


def tables_rounding_slack(num_layers: int, num_mtp: int) -> int:
    """:func:`rounding_slack` of the tables of ``num_layers`` decoder layers and ``num_mtp``
    MTP modules.

    >>> tables_rounding_slack(61, 1)
    64
    """
    return num_layers + num_mtp + 2


def lower_bound(problem: StageProblem) -> int | None:
    """The tighter of :func:`uniform_lower_bound` and :func:`contiguous_lower_bound` (None when
    neither applies): a valid cut for the solver, and when the even split reaches it, proof
    that the even split is optimal. (:func:`rank_load_lower_bound` is not a cut: on Qwen3-235B's
    PP4 VPP12 it steered the time-limited solver away from the split it finds without it.)"""
    bounds = [b for b in (uniform_lower_bound(problem), contiguous_lower_bound(problem))
              if b is not None]  # fmt: skip
    return max(bounds) if bounds else None


def uniform_lower_bound(problem: StageProblem) -> int | None:
    """A lower bound on the objective when every layer is alike (None otherwise): the last rank
    holds x layers and the output layer and loss, the other pp - 1 ranks the rest, so one of
    them at least ceil((L - x)/(pp - 1)); the bound is the best x. Recomputation, MTP modules
    and memory only add time or remove choices, so it holds with them; when the even split
    reaches it, the even split is optimal and no solve is needed, and the solver gets it as a
    cut (the LP relaxation alone spreads layers fractionally).

    >>> p = StageProblem.model_construct(pp=4, vpp=1, layer_time=(10,) * 16, recompute="none",
    ...     num_mtp=0, rank_time=(0, 0, 0, 5), layer_state=(0,) * 16, min_chunk_layers=1,
    ...     layer_activation=(0,) * 16, recompute_time=(0,) * 16, recompute_saving=(0,) * 16)
    >>> uniform_lower_bound(p)  # 4 layers + loss on the last rank, or 3 and 13 over 3 ranks
    45
    """
    p = problem
    rows = set(zip(p.layer_time, p.layer_state, p.layer_activation, strict=True))
    if len(rows) != 1 or p.pp < 2 or any(p.rank_time[:-1]):
        return None
    t, n, last = p.layer_time[0], p.num_layers, p.rank_time[-1]
    least = p.vpp * p.min_chunk_layers  # layers each of the first pp - 1 ranks holds at least
    best = None
    for x in range(max(0, (p.vpp - 1) * p.min_chunk_layers), n - (p.pp - 1) * least + 1):
        value = max(x * t + last, t * -(-(n - x) // (p.pp - 1)))
        best = value if best is None else min(best, value)
    return best
