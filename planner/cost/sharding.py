"""Data-parallel sharding (ZeRO 0-3, FSDP): what one GPU holds of its stage's weights,
gradients and optimizer state, and how often the gradients and parameters cross the data-
parallel group.

Bytes per parameter follow Megatron-LM's distributed optimizer (``dist_optimizer.md``: bf16
weights + fp32 main gradients, 12 bytes of fp32 master weights and Adam moments sharded by
ZeRO-1) and ZeRO (Rajbhandari et al. 2020, arXiv 1910.02054, section 5: stage 2 adds the
gradients, stage 3 the parameters). ZeRO-3 as FSDP runs it (Zhao et al., "PyTorch FSDP", VLDB
2023, section 3) also holds the gathered copy of the layers it is running: the current one and
the one it prefetches (``unsharded_param_layers``), their unsharded gradients in the backward,
and, when it does not reshard after the forward, the whole stage's gathered parameters.
"""

from __future__ import annotations

from typing import NamedTuple

from planner.cost.memory import (
    GRAD_BYTES,
    SHARDED_MAIN_GRAD_BYTES,
    optimizer_state_bytes_per_param,
    weight_bytes,
)
from planner.specs.formats import EIGHT_BIT_PARAM_FORMATS, NumberFormat, bytes_per_value
from planner.specs.layout import Layout
from planner.specs.workload import TrainWorkload


def zero3_reshards(workload: TrainWorkload, layout: Layout) -> bool:
    """Whether ZeRO-3 frees each layer's gathered parameters after its forward (and gathers them
    again for the backward): ``reshard_after_forward`` always, or by default unless pipeline
    parallelism is on (torchtitan's ``fsdp_reshard_after_forward = "default"``).

    >>> zero3_reshards(TrainWorkload(), Layout(zero=3)), zero3_reshards(TrainWorkload(), Layout(pp=2, zero=3))
    (True, False)
    """
    if workload.reshard_after_forward == "default":
        return layout.pp == 1
    return workload.reshard_after_forward == "always"


def dp_sync_overlapped(workload: TrainWorkload, layout: Layout) -> bool:
    """Whether the data-parallel reduction and gather overlap compute: the workload's
    ``dp_comm_overlap`` unless ZeRO-1 all-reduces its whole gradient buffer after the backward
    (:func:`all_reduces_whole_buffer`), and always at ZeRO-3, whose gathers are prefetched
    (DeepSpeed turns ``overlap_comm`` on for stage 3; PyTorch FSDP prefetches).

    >>> dp_sync_overlapped(TrainWorkload(dp_comm_overlap=False), Layout(zero=1))
    False
    >>> dp_sync_overlapped(TrainWorkload(zero1_grad_sync="all_reduce"), Layout(zero=1))
    False
    >>> dp_sync_overlapped(TrainWorkload(dp_comm_overlap=False), Layout(zero=3))
    True
    """
    if all_reduces_whole_buffer(workload, layout):
        return False
    return workload.dp_comm_overlap or layout.zero >= 3


def reduces_in_buckets(workload: TrainWorkload, layout: Layout) -> bool:
    """Whether the data-parallel reduction runs as one collective per gradient bucket
    (``TrainWorkload.ddp_bucket_params``; Megatron-Core's ``_ParamAndGradBucketGroup``): below
    ZeRO-3, overlapped with the backward (:func:`dp_sync_overlapped`). Without the overlap
    Megatron-LM reduces one buffer (its bucket size is infinite then); ZeRO-3 reduces per
    wrapped module.

    >>> reduces_in_buckets(TrainWorkload(), Layout(dp=8, zero=1))
    True
    >>> reduces_in_buckets(TrainWorkload(dp_comm_overlap=False), Layout(dp=8, zero=1))
    False
    >>> reduces_in_buckets(TrainWorkload(), Layout(dp=8, zero=3))
    False
    """
    return layout.zero < 3 and dp_sync_overlapped(workload, layout)


def all_reduces_whole_buffer(workload: TrainWorkload, layout: Layout) -> bool:
    """Whether the step's gradient reduction is one all-reduce of the whole gradient buffer
    after the last backward although the optimizer state is sharded: ZeRO-1 under
    ``zero1_grad_sync`` ``all_reduce`` (Nanotron's), rather than a reduce-scatter of each rank's
    shard.

    >>> all_reduces_whole_buffer(TrainWorkload(zero1_grad_sync="all_reduce"), Layout(zero=1))
    True
    >>> all_reduces_whole_buffer(TrainWorkload(zero1_grad_sync="all_reduce"), Layout(zero=0))
    False
    """
    return layout.zero == 1 and workload.zero1_grad_sync == "all_reduce"


def reduces_once_per_step(workload: TrainWorkload, layout: Layout) -> bool:
    """Whether a step's gradients cross the data-parallel group once, after the last
    micro-batch's backward, rather than after every micro-batch.

    ZeRO-0 and -1 accumulate into a full gradient buffer. ZeRO-2 and a resharding ZeRO-3 keep
    only a shard, so every micro-batch reduce-scatters. A ZeRO-3 that does not reshard under
    pipeline parallelism holds the stage's gathered parameters and unsharded gradients from the
    first forward to the last backward: PyTorch's pipelining turns FSDP's gradient sync and
    resharding off until the last backward (``torch.distributed.pipelining`` stage
    ``backward_maybe_with_nosync``), one all-gather and one reduce-scatter per step (Llama 3,
    arXiv 2407.21783 section 3.3.2).

    >>> reduces_once_per_step(TrainWorkload(), Layout(pp=4, zero=3))
    True
    >>> reduces_once_per_step(TrainWorkload(), Layout(zero=3))
    False
    """
    if layout.zero < 2:
        return True
    return layout.zero >= 3 and layout.pp > 1 and not zero3_reshards(workload, layout)


def param_gathers_per_microbatch(workload: TrainWorkload, layout: Layout) -> float:
    """All-gathers of the stage's parameters per micro-batch when they are gathered per
    micro-batch: forward and backward when ZeRO-3 reshards, the forward only when it keeps them
    (one gather for both passes); 0 below ZeRO-3 or when the step gathers once.

    >>> param_gathers_per_microbatch(TrainWorkload(), Layout(zero=3))
    2.0
    >>> param_gathers_per_microbatch(TrainWorkload(reshard_after_forward="never"), Layout(zero=3))
    1.0
    """
    if layout.zero < 3 or reduces_once_per_step(workload, layout):
        return 0.0
    return 2.0 if zero3_reshards(workload, layout) else 1.0


def shard_ranks(workload: TrainWorkload, layout: Layout) -> int:
    """Data-parallel ranks one shard of the dense state spans: dp x cp, or the hybrid-sharding
    group (``zero_shard_group``) when one is set.

    >>> shard_ranks(TrainWorkload(zero_shard_group=8), Layout(dp=64, zero=3))
    8
    """
    group = workload.zero_shard_group
    return group if group is not None else layout.dp * layout.cp


DDP_BUCKET_BYTES = GRAD_BYTES["bf16"]
"""Bytes per parameter of PyTorch DDP's gradient buckets (``framework_buffers``
``ddp_buckets``): the reducer allocates one flat tensor per bucket in the parameters' dtype
(bf16) over every parameter, kept for the whole run (torch/csrc/distributed/c10d/reducer.cpp
``Reducer::initialize_buckets``: ``bucket.gradients = at::empty({offset}, options)``; the
``bucket_cap_mb`` of 25 only sizes the buckets, not their total)."""
FLAT_GATHER_BYTES = bytes_per_value(NumberFormat.BF16)
"""Bytes per value of the flattened copies of a ZeRO-1 parameter all-gather
(``framework_buffers`` ``flat_param_gather``): the bf16 parameters."""


def ddp_bucket_bytes(params: float, layout: Layout, workload: TrainWorkload) -> float:
    """Bytes of PyTorch DDP's gradient buckets one GPU holds for ``params`` parameters
    (``ddp_buckets`` in ``workload.framework_buffers``): :data:`DDP_BUCKET_BYTES` each, when the
    model runs under DDP. Nanotron at c252843 (src/nanotron/trainer.py:786-788) wraps it when
    dp > 1 unless the ZeRO-1 optimizer owns an fp32 gradient accumulator (``make_ddp = dp > 1
    and not (accumulate_grad_in_fp32 and zero_stage > 0)``), so at ZeRO-0, or with bf16
    gradients, and wraps it with ``DistributedDataParallel(..., bucket_cap_mb=...)``
    (l.847-852); its fp32 hook (src/nanotron/optim/gradient_accumulator.py:317-388) adds each
    bucket to the fp32 accumulator, which the planner counts as the gradients.

    >>> w = TrainWorkload(framework_buffers=("ddp_buckets",))
    >>> ddp_bucket_bytes(1e9, Layout(dp=4, zero=0), w) / 1e9, ddp_bucket_bytes(1e9, Layout(dp=4, zero=1), w)
    (2.0, 0.0)
    >>> ddp_bucket_bytes(1e9, Layout(dp=1, zero=0), w)
    0.0
    """
    if "ddp_buckets" not in workload.framework_buffers or layout.dp * layout.cp == 1:
        return 0.0
    if layout.zero > 0 and workload.grad_reduce_dtype == "fp32":
        return 0.0
    return DDP_BUCKET_BYTES * params


def flat_param_gather_bytes(
    params: float, shard: float, layout: Layout, workload: TrainWorkload
) -> float:
    """Bytes of the flattened copies the ZeRO-1 optimizer step makes to all-gather the updated
    parameters (``flat_param_gather`` in ``workload.framework_buffers``, ZeRO-1 or -2 over more
    than one rank): :data:`FLAT_GATHER_BYTES` x (``shard`` + 2 ``params``). Nanotron at c252843,
    ``ZeroDistributedOptimizer`` (src/nanotron/optim/zero.py) gathers through
    ``all_gather_coalesced`` (src/nanotron/distributed.py:153-222), which flattens the rank's
    slices into one input (the shard) and each rank's slices into one output per rank (all the
    stage's parameters), then calls ``dist.all_gather`` on that list, whose NCCL backend
    gathers into one more flat tensor of all of them before copying out
    (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp ``ProcessGroupNCCL::allgather``:
    ``outputFlattened = flatten_for_scatter_gather(outputTensors, inputTensors, size_)``).
    The step runs after the backward has freed the activations: a step transient.

    >>> w = TrainWorkload(framework_buffers=("flat_param_gather",))
    >>> flat_param_gather_bytes(1e9, 0.25e9, Layout(dp=4, zero=1), w) / 1e9  # 2 x (0.25 + 2)
    4.5
    >>> flat_param_gather_bytes(1e9, 1e9, Layout(dp=4, zero=0), w)
    0.0
    """
    if "flat_param_gather" not in workload.framework_buffers:
        return 0.0
    if layout.zero not in (1, 2) or shard_ranks(workload, layout) == 1:
        return 0.0
    return FLAT_GATHER_BYTES * (shard + 2.0 * params)


class ShardedState(NamedTuple):
    """Bytes one GPU holds of its stage's model state."""

    weights: float
    """Weights: the bf16 (+ low-precision cache) copy, sharded or gathered."""
    grads: float
    """Gradient buffers (and PyTorch DDP's bucket copy of them, :func:`ddp_bucket_bytes`)."""
    optimizer: float
    """fp32 master weights and Adam moments."""
    step_transient: float = 0.0
    """The fp32 copy of the gradients the optimizer step makes when they reduce in bf16 (the
    shard under the distributed optimizer): allocated in the step, after the backward has freed
    the activations, and freed by the next step's ``zero_grad(set_to_none=True)`` before its
    forward (Megatron-LM ``DistributedOptimizer._copy_model_grads_to_main_grads``:
    ``shard_main_param.grad = shard_model_grad.float()``; ``training.train_step`` calls
    ``optimizer.zero_grad()`` before ``forward_backward_func``), and the flattened copies of a
    framework's ZeRO-1 parameter gather (:func:`flat_param_gather_bytes`). It never coexists
    with the activations: a stage's peak is the state plus the larger of the two."""


GRADIENT_COMPUTE_BYTES = GRAD_BYTES["bf16"]
"""Bytes per gradient value as the backward writes it: bf16, FSDP2's ``param_dtype``."""


def fsdp2_buffer_copy_bytes(
    workload: TrainWorkload, layout: Layout, num_microbatches: int
) -> float:
    """HBM bytes per gathered parameter (a stage's parameters on this GPU before data-parallel
    sharding) that FSDP2's buffer copies move on the compute stream's path in one step
    (``TrainWorkload.fsdp2_buffer_copies``): each all-gather's copy-out reads and writes the
    gathered values (2 p, p = 1 byte for FP8 gathers, else 2); each reduce-scatter's copy-in
    reads the bf16 gradient and writes it in the reduce dtype (2 + r: 6 bytes for fp32
    reductions, ``foreach_reduce_scatter_copy_in``). For fp32 and bf16 reductions FSDP2 divides
    inside the collective (``ReduceOp.AVG``; ``_get_gradient_divide_factors`` returns no pre- or
    post-divide factor, "use NCCL's built-in division to avoid separate div kernels",
    torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py in PyTorch 2.13; so since
    pytorch/pytorch#120919 (fp32) and #123362 (bf16), both early 2024), so the buffer is not
    read again. Gathers and reductions happen per
    micro-batch unless the step reduces once (:func:`reduces_once_per_step`: one of each).
    ZeRO-2 reduce-scatters every micro-batch too and is priced without parameter gathers
    (:func:`param_gathers_per_microbatch`), so it pays the copy-in alone. 0 when the framework
    makes no such copies or below ZeRO-2.

    >>> w = TrainWorkload(fsdp2_buffer_copies=True)
    >>> fsdp2_buffer_copy_bytes(w, Layout(dp=8, zero=3), 4)  # 4 x (2 gathers x 4 + 6)
    56.0
    >>> fsdp2_buffer_copy_bytes(w, Layout(dp=8, zero=2), 4)  # 4 x 6
    24.0
    >>> fsdp2_buffer_copy_bytes(TrainWorkload(), Layout(dp=8, zero=3), 4)
    0.0
    """
    if not workload.fsdp2_buffer_copies or layout.zero < 2:
        return 0.0
    param_bytes = gathered_param_bytes(workload, layout)
    reduce_bytes = GRAD_BYTES[workload.grad_reduce_dtype]
    copy_in = GRADIENT_COMPUTE_BYTES + reduce_bytes
    if reduces_once_per_step(workload, layout):
        return (2.0 * param_bytes if layout.zero >= 3 else 0.0) + copy_in
    gathers = param_gathers_per_microbatch(workload, layout)
    return num_microbatches * (gathers * 2.0 * param_bytes + copy_in)


def gathered_param_bytes(workload: TrainWorkload, layout: Layout) -> float:
    """Bytes per parameter value a ZeRO all-gather moves: 1 when the parameters are kept and
    gathered in FP8 (:func:`gathers_fp8_params`), else 2 (bf16).

    >>> gathered_param_bytes(TrainWorkload(), Layout(zero=3))
    2.0
    """
    return 1.0 if gathers_fp8_params(workload, layout) else 2.0


def gathers_fp8_params(workload: TrainWorkload, layout: Layout) -> bool:
    """Whether the layout keeps its parameters in FP8 and all-gathers them so
    (``workload.fp8_param_gather``): only with ZeRO >= 1 (the gather it halves) and an 8-bit
    format that has such a recipe (:data:`planner.specs.formats.EIGHT_BIT_PARAM_FORMATS`); with
    any other format the setting has no effect, as the exports say; nor under torchao's rowwise
    float8 (``fp8_casts`` rowwise), whose FSDP all-gather is bf16 (torchao's float8 all-gather
    supports tensorwise scaling only).

    >>> gathers_fp8_params(TrainWorkload(fp8_param_gather=True), Layout(zero=1, precision="fp8"))
    True
    >>> gathers_fp8_params(TrainWorkload(fp8_param_gather=True), Layout(zero=1))  # bf16
    False
    """
    return (
        workload.fp8_param_gather
        and layout.zero >= 1
        and layout.precision in EIGHT_BIT_PARAM_FORMATS
        and workload.fp8_casts != "rowwise"
    )


def keeps_master_remainders(workload: TrainWorkload, layout: Layout) -> bool:
    """Whether the optimizer's master copy is the 16-bit remainder beside each bf16 parameter
    rather than a full fp32 copy: bf16 moments on a bf16 layout take Megatron Core's
    precision-aware path (OptimizerConfig.use_precision_aware_optimizer_no_fp8_or_ds_fp8; an fp8
    recipe other than delayed scaling, as the fp8 export runs, keeps the usual one; Transformer
    Engine's FusedAdam ``store_param_remainders``), and the step reads the gradient buffer's shard
    with no fp32 copy (DistributedOptimizer._copy_model_grads_to_main_grads: decoupled_grad). An
    fp32 parameter (``fp32_params``) is its own master copy, and without ``master_copy`` there is
    none.

    >>> keeps_master_remainders(TrainWorkload(optimizer_state_dtype="bf16"), Layout())
    True
    >>> keeps_master_remainders(TrainWorkload(optimizer_state_dtype="bf16"), Layout(precision="fp8"))
    False
    """
    return (
        workload.optimizer_state_dtype == "bf16"
        and layout.precision is NumberFormat.BF16
        and not workload.fp32_params
        and workload.master_copy
    )


def sharded_state_bytes(
    params: tuple[float, float],
    layout: Layout,
    workload: TrainWorkload,
    *,
    num_layers: int,
    transient: bool = True,
    largest_weight: float = 0.0,
    vocab_weight: float = 0.0,
) -> ShardedState:
    """What one GPU holds of ``params`` = (dense, expert) parameters of its stage (already split
    over tp and ep x etp): dense state shards over dp x cp, expert state over the expert-data-
    parallel ranks, per the ZeRO stage. ZeRO-3 adds the gathered bf16 copy of
    ``unsharded_param_layers`` of the stage's ``num_layers`` layers (all of them from forward to
    backward when it does not reshard) and, in the backward, their unsharded gradients, and keeps
    no bf16 shard when the fp32 master copy is the parameter itself (``fp32_params``); without
    resharding under pipeline parallelism
    (:func:`reduces_once_per_step`) it holds the stage's whole gathered copy and unsharded
    gradients instead. ``transient`` False leaves the gathered copy and the unsharded gradients
    of the running layers out (the state at rest, additive over layers). When the framework
    gathers weight by weight (``fsdp_gather_unit`` "weight"), ``unsharded_param_layers`` counts
    weight tensors of ``largest_weight`` parameters (the stage's largest layer weight, per GPU)
    instead, one of them the stage's vocabulary table (``vocab_weight``) when that is larger.

    >>> state = sharded_state_bytes((8e9, 0.0), Layout(dp=8, zero=1), TrainWorkload(), num_layers=32)
    >>> state.weights / 1e9, state.grads / 1e9, state.optimizer / 1e9
    (16.0, 32.0, 12.0)
    """
    dense, expert = params
    dp = shard_ranks(workload, layout)
    edp = max(1, layout.dp * layout.cp * layout.tp // (layout.ep * layout.etp))
    total = dense + expert
    shard = dense / dp + expert / edp
    grad = GRAD_BYTES[workload.grad_reduce_dtype]
    fp8_params = gathers_fp8_params(workload, layout)
    main_grad = SHARDED_MAIN_GRAD_BYTES[workload.grad_reduce_dtype]
    remainders = keeps_master_remainders(workload, layout)
    if remainders or not workload.master_copy:  # the step reads the gradient where it lies
        main_grad = 0.0
    if layout.zero >= 3:
        # FSDP steps the optimizer on the gradient shard its reduce-scatter wrote, with no fp32
        # copy (Megatron-FSDP: DistributedOptimizer._copy_model_grads_to_main_grads returns early;
        # FSDP2 casts the reduced shard to the sharded parameter's dtype, fp32 with fp32_params)
        main_grad = 0.0
    held = shard if layout.zero >= 1 else total
    optimizer = (
        optimizer_state_bytes_per_param(
            workload.optimizer_state_dtype, remainders=remainders, master=workload.master_copy
        )
        * held
    )
    step_copy = main_grad * held
    if layout.zero < 3:
        grads = grad * (shard if layout.zero >= 2 else total)
        grads += ddp_bucket_bytes(total, layout, workload)
        step_copy += flat_param_gather_bytes(total, shard, layout, workload)
        weights = weight_bytes(total, layout.precision, low_precision_params=fp8_params)
        return ShardedState(
            weights=weights, grads=grads, optimizer=optimizer, step_transient=step_copy
        )
    shard_grad = GRAD_BYTES["fp32"] if workload.fp32_params else grad
    if not workload.master_copy:  # FSDP2 casts the reduced shard to the bf16 parameter's dtype
        shard_grad = GRAD_BYTES["bf16"]
    if reduces_once_per_step(workload, layout):
        weights = weight_bytes(total, layout.precision, low_precision_params=fp8_params)
        grads = grad * total
        if workload.pp_grad_sync == "round":  # a sharded accumulator, two chunks unsharded
            chunks = min(1.0, 2.0 / layout.vpp) * total if transient else 0.0
            grads = shard_grad * shard + grad * chunks
        return ShardedState(
            weights=weights, grads=grads, optimizer=optimizer, step_transient=step_copy
        )
    running = min(1.0, workload.unsharded_param_layers / max(num_layers, 1)) * total
    if workload.fsdp_gather_unit == "weight" and largest_weight > 0:
        units = workload.unsharded_param_layers * largest_weight
        running = min(total, units + max(0.0, vocab_weight - largest_weight))
    gathered = running if zero3_reshards(workload, layout) else total
    if not transient:  # the state at rest, additive over layers (the stage partition's tables)
        running = gathered = 0.0
    at_rest = 0.0
    if not workload.fp32_params:
        at_rest = weight_bytes(shard, layout.precision, low_precision_params=fp8_params)
    return ShardedState(
        weights=at_rest + weight_bytes(gathered, layout.precision, low_precision_params=fp8_params),
        grads=shard_grad * shard + grad * running,
        optimizer=optimizer,
    )
