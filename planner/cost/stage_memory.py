"""The memory of one GPU of one pipeline stage: its share of the model state
(:mod:`planner.cost.sharding`) and the activations of the micro-batches it holds in flight."""

from __future__ import annotations

from planner.cost.memory import (
    ACTIVATION_BYTES,
    activation_bytes_per_layer,
    activation_bytes_per_token,
    logits_bytes,
    recomputed_fraction,
    replicated_values_without_sp,
    save_list_values,
    selective_recompute_saved_values,
    stage_layers,
)
from planner.cost.params import embedding_params, norm_params
from planner.cost.pipeline import microbatches_in_flight
from planner.cost.profile import layer_table
from planner.cost.sharding import sharded_state_bytes
from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.workload import TrainWorkload


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

    @property
    def total(self) -> float:
        """Sum of the terms (bytes)."""
        return self.weights + self.grads + self.optimizer + self.activations


def stage_params_per_gpu(
    model: ModelSpec, layout: Layout, stage: int, seq_len: int
) -> tuple[float, float]:
    """(dense, expert) parameters held by one GPU of ``stage``.

    Dense weights (attention, norms, router, dense FFN, shared experts, embeddings) are split over
    tp, routed experts over ep (whole experts) x etp. The first stage holds the input embedding
    (and learned positions), the last the final norm and output projection; a tied embedding is
    replicated on the last stage when pp > 1, as Megatron-LM does.
    """
    layers = stage_layers(model, layout.pp, stage)
    table = layer_table(model, seq_len)
    dense = table.total("dense_params", layers)
    expert = table.total("expert_params", layers)
    vocab_table = model.vocab_size * model.hidden_size
    if stage == 0:
        dense += embedding_params(model) - (0 if model.tied_embeddings else vocab_table)
    if stage == layout.pp - 1:
        if not model.tied_embeddings or layout.pp > 1:
            dense += vocab_table
        dense += norm_params(model)
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


def stored_activation_bytes(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, stage: int
) -> float:
    """Bytes of activations one GPU of ``stage`` keeps for one micro-batch until its backward
    (Korthikanti et al. 2022 generalised: :mod:`planner.cost.memory`): every layer's stored
    values, or under full recomputation the recomputed layers' inputs, under selective
    recomputation without the modules it recomputes (Megatron-LM ``recompute_modules``) or only
    the layer input and the tensors a save list keeps (``saved_tensors``); split over tp (and
    cp), except what plain TP without sequence parallelism keeps whole on every rank."""
    layers = stage_layers(model, layout.pp, stage)
    tokens = layout.mbs * workload.seq_len / layout.cp
    table = layer_table(model, workload.seq_len)
    recomputed = recomputed_fraction(workload, layout, len(layers))
    kept = 1.0 - recomputed  # share of layers that keep their activations
    per_token = ACTIVATION_BYTES * model.hidden_size * len(layers) * recomputed
    selective = layout.recompute is Recompute.SELECTIVE
    num_moe = table.total("moe_layers", layers)
    if selective and workload.saved_tensors is not None:
        saved = workload.saved_tensors
        per_token += ACTIVATION_BYTES * (
            num_moe * save_list_values(model, saved, moe_layer=True)
            + (len(layers) - num_moe) * save_list_values(model, saved, moe_layer=False)
        )
    elif kept > 0.0:
        per_token += kept * activation_bytes_per_token(
            table.total("activation_values", layers),
            table.total("gemm_input_values", layers),
            layout.precision,
        )
        scores_recomputed = selective and "core_attn" in workload.recompute_modules
        if not workload.flash_attention and not scores_recomputed:
            per_token += kept * ACTIVATION_BYTES * table.total("score_values", layers)
        if selective:
            per_token -= _selective_saved_bytes(
                model, workload.recompute_modules, layout.precision, num_moe, len(layers) - num_moe
            )
    per_microbatch = tokens * per_token / layout.tp
    if not workload.sequence_parallel and layout.tp > 1:
        # what plain TP keeps whole on every rank: the layer inputs that full recomputation
        # stores, and the norm inputs/outputs and dropout masks of the layers that keep theirs
        whole = ACTIVATION_BYTES * model.hidden_size * recomputed
        whole += kept * ACTIVATION_BYTES * replicated_values_without_sp(model)
        per_microbatch += tokens * whole * len(layers) * (1.0 - 1.0 / layout.tp)
    return per_microbatch


def stage_memory(
    model: ModelSpec, workload: TrainWorkload, layout: Layout, stage: int, num_microbatches: int
) -> StageMemory:
    """Memory of one GPU of ``stage``: weights, grads and optimizer state sharded per the ZeRO
    stage (:func:`planner.cost.sharding.sharded_state_bytes`), the activations of the micro-
    batches in flight (1F1B / interleaved: :func:`stored_activation_bytes` each), less the share
    offloaded to host memory (``activation_offload_fraction``; one layer's worth stays while it
    is copied), plus the allocator's overhead on them (``activation_memory_overhead``), the
    working set of the layer being recomputed, and fp32 logits on the last stage."""
    layers = stage_layers(model, layout.pp, stage)
    params = stage_params_per_gpu(model, layout, stage, workload.seq_len)
    state = sharded_state_bytes(params, layout, workload, num_layers=len(layers))
    per_microbatch = stored_activation_bytes(model, workload, layout, stage)
    offloaded = workload.activation_offload_fraction
    in_flight = microbatches_in_flight(layout.pp, layout.vpp, num_microbatches, stage)
    copies = 1.0
    if workload.pipeline_schedule == "dualpipe" and layout.pp > 1:
        # two copies of the stage's parameters, pp + 1 micro-batches in flight (DualPipe)
        in_flight, copies = min(num_microbatches, layout.pp + 1), 2.0
    activations = per_microbatch * in_flight * (1.0 - offloaded)
    activations += offloaded * per_microbatch / max(len(layers), 1)
    activations *= 1.0 + workload.activation_memory_overhead
    if layout.recompute is Recompute.FULL or (
        layout.recompute is Recompute.SELECTIVE and workload.saved_tensors is not None
    ):
        working = layout.model_copy(update={"recompute": Recompute.NONE})
        activations += activation_bytes_per_layer(
            model, working, workload.seq_len, layer_index=model.num_layers - 1
        )
    if stage == layout.pp - 1:
        activations += logits_bytes(model, layout, workload.seq_len)
    return StageMemory(
        weights=copies * state.weights,
        grads=copies * state.grads,
        optimizer=state.optimizer,
        activations=activations,
    )
