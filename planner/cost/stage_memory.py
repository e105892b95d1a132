"""The memory of one GPU of one pipeline stage: its share of the model state
(:mod:`planner.cost.sharding`) and the activations of the micro-batches it holds in flight."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from planner.cost.gemm import einsum_dispatch, einsum_slots, layer_gemms
from planner.cost.memory import (
    ACTIVATION_BYTES,
    activation_bytes_per_layer,
    activation_bytes_per_token,
    framework_layer_values,
    logits_bytes,
    recomputed_fraction,
    replicated_values_without_sp,
    save_list_values,
    selective_recompute_saved_values,
    stage_layers,
    tp_gather_buffer_bytes,
)
from planner.cost.params import embedding_params, norm_params
from planner.cost.partition import StageContents, stage_contents
from planner.cost.pipeline import combined_1f1b_extra_forward, microbatches_in_flight
from planner.cost.profile import layer_table
from planner.cost.sharding import sharded_state_bytes
from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.workload import TrainWorkload


def peak_bytes(
    weights: float, grads: float, optimizer: float, activations: float, step_transient: float
) -> float:
    """A stage's peak bytes: its state plus the larger of the activations (held through the
    forward and backward) and the optimizer step's transient copy (held only in the step,
    after the activations are freed).

    >>> peak_bytes(10.0, 5.0, 20.0, 30.0, 8.0)
    65.0
    """
    return weights + grads + optimizer + max(activations, step_transient)


class StageMemory(FrozenSpec):
    """Memory of one GPU of one pipeline stage (bytes)."""

    weights: float
    """Weights held (bytes)."""
    grads: float
    """Gradient buffers (bytes)."""
    optimizer: float
    """Optimizer state (bytes)."""
    activations: float
    """Activations of the micro-batches in flight, plus logits on the last stage (bytes)."""
    step_transient: float = 0.0
    """The optimizer step's transient copies (bytes): the fp32 copy of the bf16 gradients, a
    framework's flattened parameter-gather buffers; held only while the step runs, after the
    activations are freed (:class:`planner.cost.sharding.ShardedState`)."""

    @property
    def total(self) -> float:
        """Peak bytes: the state plus the larger of the activations (forward and backward) and
        the optimizer step's transient copy."""
        return peak_bytes(
            self.weights, self.grads, self.optimizer, self.activations, self.step_transient
        )


def stage_params_per_gpu(
    model: ModelSpec,
    layout: Layout,
    stage: int,
    seq_len: int,
    *,
    contents: StageContents | None = None,
) -> tuple[float, float]:
    """(dense, expert) parameters held by one GPU of ``stage`` (holding ``contents``; default:
    the even split without MTP modules).

    Dense weights (attention, norms, router, dense FFN, shared experts, embeddings) are split over
    tp, routed experts over ep (whole experts) x etp. The first stage holds the input embedding
    (and learned positions), the last the final norm and output projection; a tied embedding is
    replicated on the last stage when pp > 1, as Megatron-LM does. An MTP module adds its
    layer (in ``contents.layers``), its 2D x D projection and two norms, and a rank other than
    the last that holds one also holds a copy of the output projection.
    """
    if contents is None:
        last = stage == layout.pp - 1
        layers = (stage_layers(model, layout.pp, stage),)
        contents = StageContents(layers, None, stage == 0, last, 0, last)
    table = layer_table(model, seq_len)
    dense = table.sum("dense_params", contents.layers)
    expert = table.sum("expert_params", contents.layers)
    vocab_table = model.vocab_size * model.hidden_size
    if contents.first:
        dense += embedding_params(model) - (0 if model.tied_embeddings else vocab_table)
    if contents.output_weights and (not model.tied_embeddings or layout.pp > 1):
        dense += vocab_table
    if contents.last:
        dense += norm_params(model)
    d = model.hidden_size
    dense += contents.mtp * (2 * d * d + 2 * norm_params(model))
    return dense / layout.tp, expert / (layout.ep * layout.etp)


def _selective_saved_bytes(
    model: ModelSpec, modules: tuple[str, ...], fmt: NumberFormat, num_moe: float, num_dense: float
) -> float:
    """Stored bytes per token selective recomputation removes from a stage."""
    saved = 0.0
    for count, moe_layer in ((num_moe, True), (num_dense, False)):
        if count:
            values, inputs = selective_recompute_saved_values(model, modules, moe_layer=moe_layer)
            saved += count * activation_bytes_per_token(values, inputs, fmt)
    return saved


def activation_bytes_per_microbatch(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, contents: StageContents
) -> float:
    """Activation bytes one micro-batch leaves on one GPU of a stage holding ``contents``
    (Korthikanti et al. 2022 section 4, per layer :func:`planner.cost.memory.
    activation_bytes_per_layer`'s terms): the layers that keep their activations store them all
    (minus what selective recomputation drops, or under a save list (``saved_tensors``) only
    their input and the tensors it names), the layers recomputed in full only their input
    (2 s b h / t), and each MTP module also the input of its 2D -> D projection. The layers that
    keep their activations also keep what the framework's unfused code saves beyond that set
    (``framework_buffers``, :func:`planner.cost.memory.framework_layer_values`)."""
    tokens = layout.mbs * workload.seq_len / layout.cp
    table = layer_table(model, workload.seq_len)
    layers, num_layers = contents.layers, contents.num_layers
    full = layout.recompute is Recompute.FULL
    if contents.recomputed is None:  # the layout's rule: a share of every layer
        share = recomputed_fraction(workload, layout, num_layers)
        recomputed = share * num_layers

        def kept(field: str) -> float:
            return (1.0 - share) * table.sum(field, layers)
    else:
        recomputed = contents.num_recomputed if full else 0
        dropped = contents.recomputed if full else ()

        def kept(field: str) -> float:
            return table.sum(field, layers) - table.sum(field, dropped)

    kept_layers = num_layers - recomputed
    per_token = ACTIVATION_BYTES * model.hidden_size * recomputed
    save_list = layout.recompute is Recompute.SELECTIVE and workload.saved_tensors is not None
    if save_list:  # each layer keeps its input and the tensors the save list names
        num_moe = table.sum("moe_layers", layers)
        saved = workload.saved_tensors or ()
        per_token += ACTIVATION_BYTES * (
            num_moe * save_list_values(model, saved, moe_layer=True)
            + (num_layers - num_moe) * save_list_values(model, saved, moe_layer=False)
        )
    elif kept_layers > 0:
        per_token += activation_bytes_per_token(
            kept("activation_values"), kept("gemm_input_values"), layout.precision
        )
        if workload.framework_buffers:  # what the framework's unfused layer keeps beyond them
            kept_moe = kept("moe_layers")
            buffers = workload.framework_buffers
            per_token += ACTIVATION_BYTES * (
                kept_moe * framework_layer_values(model, buffers, moe_layer=True)
                + (kept_layers - kept_moe) * framework_layer_values(model, buffers, moe_layer=False)
            )
        scores_recomputed = (
            layout.recompute is Recompute.SELECTIVE and "core_attn" in workload.recompute_modules
        )
        if not workload.flash_attention and not scores_recomputed:
            per_token += ACTIVATION_BYTES * kept("score_values")
        if layout.recompute is Recompute.SELECTIVE:
            num_moe = table.sum("moe_layers", layers)
            per_token -= _selective_saved_bytes(
                model, workload.recompute_modules, layout.precision, num_moe, num_layers - num_moe
            )
    projection = 2.0 * model.hidden_size
    per_token += contents.mtp * activation_bytes_per_token(projection, projection, layout.precision)
    per_microbatch = tokens * per_token / layout.tp
    if not workload.sequence_parallel and layout.tp > 1:
        # what plain TP keeps whole on every rank: the layer inputs that full recomputation
        # stores, and the norm inputs/outputs and dropout masks of the layers that keep theirs
        whole = ACTIVATION_BYTES * model.hidden_size * recomputed
        whole += kept_layers * ACTIVATION_BYTES * replicated_values_without_sp(model)
        per_microbatch += tokens * whole * (1.0 - 1.0 / layout.tp)
    return per_microbatch


EINSUM_MASK_BYTES_PER_SLOT = 4.0
"""Bytes per (token, expert slot) the einsum dispatch keeps for its backward: the dispatch and
combine masks, each cast to the activations' dtype before its einsum and saved by autograd for
the input gradients (DeepSpeed-MoE ``MOELayer.forward``: ``dispatch_mask.type_as(input)``,
``combine_weights.type_as(input)``, deepspeed/moe/sharded_moe.py); MaxText keeps its dispatch
mask as booleans (3 bytes), counted the same."""


def einsum_mask_bytes_per_microbatch(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, contents: StageContents
) -> float:
    """Bytes of the dispatch and combine masks one micro-batch leaves on one GPU of a stage
    under GShard's einsum dispatch (``moe_expert_compute`` ``einsum``): per MoE layer that keeps
    its activations, each routing group's tokens x E x C slots (:func:`planner.cost.gemm.
    einsum_dispatch_gemms`) at :data:`EINSUM_MASK_BYTES_PER_SLOT`. A group of one sequence
    makes them proportional to the micro-batch; a group of the whole micro-batch (DeepSpeed)
    to its square. Layers recomputed in full, a selective recomputation of the ``moe`` block and
    a save list (which names no mask) keep none."""
    dispatch = einsum_dispatch(workload, layout)
    if model.moe is None or dispatch is None:
        return 0.0
    if layout.recompute is Recompute.SELECTIVE and (
        workload.saved_tensors is not None or "moe" in workload.recompute_modules
    ):
        return 0.0
    table = layer_table(model, workload.seq_len)
    kept = table.sum("moe_layers", contents.layers)
    if layout.recompute is Recompute.FULL:
        if contents.recomputed is None:
            kept *= 1.0 - recomputed_fraction(workload, layout, contents.num_layers)
        else:
            kept -= table.sum("moe_layers", contents.recomputed)
    tokens = layout.mbs * workload.seq_len / layout.cp
    slots = einsum_slots(model, dispatch.group_tokens, dispatch.capacity_factor)
    return kept * EINSUM_MASK_BYTES_PER_SLOT * tokens * slots


def stage_memory(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    stage: int,
    num_microbatches: int,
    *,
    split: PipelineSplit | None = None,
) -> StageMemory:
    """Memory of one GPU of ``stage`` (its layers under ``split``, or the even split): weights,
    grads and optimizer state sharded per the ZeRO stage (:func:`planner.cost.sharding.
    sharded_state_bytes`), the activations of the micro-batches in flight (1F1B / interleaved /
    DualPipe, :func:`activation_bytes_per_microbatch`) less the share offloaded to host memory
    (``activation_offload_fraction``; one layer's worth stays while it is copied) and plus the
    allocator's overhead on them (``activation_memory_overhead``), the working set of a layer
    being recomputed, fp32 logits per output-layer pass on the stage that holds the loss (which
    the working set reuses there: :func:`logits_overlap`), and the buffers the framework's code
    adds (``framework_buffers``)."""
    profile = stage_memory_profile(model, workload, layout, stage, split=split)
    return profile.memory(workload, layout, num_microbatches)


class StageMemoryProfile(NamedTuple):
    """What a stage's memory is made of, before the ZeRO stage, the micro-batch size and the
    micro-batches in flight are applied (:meth:`memory`): the search climbs ZeRO stages and
    micro-batches on one profile."""

    stage: int
    """Pipeline stage."""
    dense_params: float
    """Dense parameters per GPU (:func:`stage_params_per_gpu`)."""
    expert_params: float
    """Routed-expert parameters per GPU."""
    activations_per_sequence: float
    """Activations of one micro-batch in flight, per sequence of the micro-batch (bytes)."""
    fixed_per_sequence: float
    """Held once, per sequence: the recomputed layer's working set, the fp32 logits and a
    framework's tensor-parallel gather buffers (:func:`planner.cost.memory.
    tp_gather_buffer_bytes`)."""
    num_layers: int = 1
    """Transformer layers the stage holds (ZeRO-3 gathers a few of them at a time)."""
    largest_weight: float = 0.0
    """Parameters per GPU of the stage's largest layer weight tensor (a framework that gathers
    weight by weight holds a few of them, ``TrainWorkload.fsdp_gather_unit``)."""
    vocab_weight: float = 0.0
    """Parameters per GPU of the vocabulary table when the stage holds it (the input embedding
    or the output projection): gathered in place of one of those weights when larger."""
    activations_per_sequence_squared: float = 0.0
    """Activations of one micro-batch in flight that grow with the square of its sequences, per
    sequence squared (bytes): the einsum dispatch's masks when the whole micro-batch is one
    routing group (:func:`einsum_mask_bytes_per_microbatch`)."""

    def memory(self, workload: TrainWorkload, layout: Layout, num_microbatches: int) -> StageMemory:
        """Weights, gradients, optimizer state, activations and the optimizer step's transient
        bytes at ``layout``'s ZeRO stage, micro-batch and interleaving (every activation term is
        proportional to the tokens of a micro-batch)."""
        weights, grads, optimizer, activations, transient = self._amounts(
            workload, layout, num_microbatches
        )
        return StageMemory.model_construct(
            weights=weights,
            grads=grads,
            optimizer=optimizer,
            activations=activations,
            step_transient=transient,
        )

    def peak(self, workload: TrainWorkload, layout: Layout, num_microbatches: int) -> float:
        """``memory(...).total`` without building the StageMemory (the search screens many
        layouts that do not fit)."""
        weights, grads, optimizer, activations, transient = self._amounts(
            workload, layout, num_microbatches
        )
        return peak_bytes(weights, grads, optimizer, activations, transient)

    def _amounts(
        self, workload: TrainWorkload, layout: Layout, num_microbatches: int
    ) -> tuple[float, float, float, float, float]:
        """(weights, gradients, optimizer state, activations, the optimizer step's transient)
        bytes of :meth:`memory`."""
        state = sharded_state_bytes(
            (self.dense_params, self.expert_params),
            layout,
            workload,
            num_layers=self.num_layers,
            largest_weight=self.largest_weight,
            vocab_weight=self.vocab_weight,
        )
        in_flight = microbatches_in_flight(
            layout.pp,
            layout.vpp,
            num_microbatches,
            self.stage,
            workload.pipeline_schedule,
            extra_forward=combined_1f1b_extra_forward(workload, layout),
        )
        copies = 1.0
        if workload.pipeline_schedule == "dualpipe" and layout.pp > 1:
            # two copies of the stage's parameters, pp + 1 micro-batches in flight (DualPipe)
            in_flight, copies = min(num_microbatches, layout.pp + 1), 2.0
        offloaded = workload.activation_offload_fraction
        per_sequence = (
            self.activations_per_sequence + self.activations_per_sequence_squared * layout.mbs
        )
        stored = per_sequence * in_flight * (1.0 - offloaded)
        stored += offloaded * per_sequence / max(self.num_layers, 1)
        stored *= 1.0 + workload.activation_memory_overhead
        return (
            copies * state.weights,
            copies * state.grads,
            state.optimizer,
            layout.mbs * (stored + self.fixed_per_sequence),
            state.step_transient,
        )


def stage_memory_profile(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    stage: int,
    *,
    split: PipelineSplit | None = None,
) -> StageMemoryProfile:
    """The :class:`StageMemoryProfile` of ``stage``: it depends on the parallel degrees, the
    precision, the recomputation and (through ``recompute_num_layers``) vpp, not on the ZeRO
    stage nor the micro-batch size."""
    contents = stage_contents(model, workload, layout, stage, split)
    dense, expert = stage_params_per_gpu(model, layout, stage, workload.seq_len, contents=contents)
    activations = activation_bytes_per_microbatch(model, workload, layout, contents)
    chunk_inputs = 0.0
    if gpipe_keeps_chunk_inputs(workload, layout, contents):
        # one input per chunk and micro-batch; the chunk being recomputed holds its layers'
        layer_input = activations / contents.num_layers
        chunk_inputs = layer_input * contents.num_layers / layout.vpp
        activations = layer_input * layout.vpp
    masks = einsum_mask_bytes_per_microbatch(model, workload, layout, contents)
    squared = 0.0
    if workload.moe_routing_group == "microbatch":
        squared = masks / layout.mbs**2
    else:
        activations += masks
    buffers = workload.framework_buffers
    head_logits = logits_bytes(
        model,
        layout,
        workload.seq_len,
        workload.cross_entropy,
        fp32_copy="fp32_logits" in buffers,
    )
    fixed = contents.num_heads * head_logits + chunk_inputs
    fixed += tp_gather_buffer_bytes(model, layout, workload.seq_len, buffers)
    holds_vocab = contents.first or contents.output_weights
    vocab_weight = model.vocab_size * model.hidden_size / layout.tp if holds_vocab else 0.0
    recomputes = contents.recomputed is None or contents.num_recomputed > 0
    save_list = layout.recompute is Recompute.SELECTIVE and workload.saved_tensors is not None
    if (layout.recompute is Recompute.FULL and recomputes) or save_list:
        working = recompute_working_bytes(model, workload, layout)
        fixed += working - logits_overlap(working, head_logits if contents.last else 0.0)
    return StageMemoryProfile(
        stage,
        dense,
        expert,
        activations / layout.mbs,
        fixed / layout.mbs,
        max(contents.num_layers, 1),
        largest_weight_params(model, layout.tp, layout.ep, layout.etp),
        vocab_weight,
        squared,
    )


def gpipe_keeps_chunk_inputs(
    workload: TrainWorkload, layout: Layout, contents: StageContents
) -> bool:
    """Whether a stage keeps one input per model chunk and micro-batch rather than one per
    layer: GPipe with full recomputation stores only the activations at the partition
    boundaries and recomputes a partition's forward in its backward (Huang et al., "GPipe",
    NeurIPS 2019, section 2.2, re-materialization). MaxText's pipeline does so per loop
    iteration (one chunk of one micro-batch): ``nn.remat`` of the iteration with the layers'
    remat policy plus ``save_only_these_names('iteration_input')``, its layers rematted again
    inside, so while a chunk is recomputed it holds its layers' inputs and one layer's working
    set (MaxText/layers/pipeline.py, AI-Hypercomputer/maxtext at 75b3a5e3). Only under the
    layout's own rule (every layer recomputed, the even split): a split that recomputes some
    layers is Megatron-LM's, which GPipe is not."""
    return (
        workload.pipeline_schedule == "gpipe"
        and layout.pp > 1
        and layout.recompute is Recompute.FULL
        and workload.recompute_num_layers is None
        and contents.recomputed is None
        and contents.num_layers > 0
    )


@lru_cache(maxsize=1024)
def largest_weight_params(model: ModelSpec, tp: int, ep: int = 1, etp: int = 1) -> float:
    """Parameters per GPU of the model's largest layer weight tensor: a GEMM's k x n, with a
    layer's routed experts stacked into one tensor per projection as XLA frameworks hold them
    (:func:`planner.cost.gemm.layer_gemms`, split over tp, ep and etp).

    >>> from planner.catalog import load_model
    >>> largest_weight_params(load_model("gpt3-175b"), tp=8) / 1e6  # 12288 x 49152 / 8
    75.497472
    """
    sizes = [
        g.k * g.n * g.count
        for moe_layer in {False, model.moe is not None}
        for g in layer_gemms(model, 1.0, moe_layer=moe_layer, tp=tp, ep=ep, etp=etp)
    ]
    return max(sizes)


def state_bytes(
    workload: TrainWorkload, layout: Layout, dense: float, expert: float
) -> tuple[float, float]:
    """(weights + gradients + optimizer state, the optimizer step's transient copy) bytes one
    GPU holds at rest for ``dense`` and ``expert`` parameters per GPU
    (:func:`stage_params_per_gpu`), sharded per the ZeRO stage
    (:func:`planner.cost.sharding.sharded_state_bytes` without the gathered copy of the running
    layers): additive over layers, for the stage partition's per-layer tables and its two memory
    bounds (with the activations, and in the optimizer step)."""
    state = sharded_state_bytes((dense, expert), layout, workload, num_layers=1, transient=False)
    return state.weights + state.grads + state.optimizer, state.step_transient


def logits_overlap(working: float, logits: float) -> float:
    """Bytes the recomputed layer's working set and the output layer's logits share: the
    logits (and the loss's fp32 copies) live from the loss's forward through its backward, and
    are freed before the backward reaches the last transformer layer and recomputes it, so the
    two are never held together and the stage's peak holds the larger, not both (the backward
    runs the loss, then the output layer, then the layers in reverse order: Megatron-LM's
    1F1B runs one micro-batch's forward and then its backward on the last stage; an XLA step
    differentiates the loss before the scanned layers). Only the main head's logits count; an
    MTP head's are kept in full (conservative).

    >>> logits_overlap(3.0, 5.0), logits_overlap(5.0, 3.0), logits_overlap(5.0, 0.0)
    (3.0, 3.0, 0.0)
    """
    return min(working, logits)


def recompute_working_bytes(model: ModelSpec, workload: TrainWorkload, layout: Layout) -> float:
    """Activations of the one layer being recomputed in the backward pass (full recomputation
    or a save list), held on top of the micro-batches in flight."""
    working = layout.model_copy(update={"recompute": Recompute.NONE})
    return activation_bytes_per_layer(
        model, working, workload.seq_len, layer_index=model.num_layers - 1
    )
