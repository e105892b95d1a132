"""What the user wants to run: a training job or a serving deployment."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from planner.limits import MAX_BUCKET_PARAMS, MAX_LOAD_FACTOR
from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat
from planner.specs.framework import CpComm, CpImpl, PipelineSchedule
from planner.specs.text import Name

RecomputeModule = Literal[
    "core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp", "shared_experts", "moe"
]
"""Parts of a layer that selective recomputation can recompute (Megatron-LM
``--recompute-modules``)."""
RECOMPUTE_MODULES: tuple[str, ...] = get_args(RecomputeModule)
"""The names of :data:`RecomputeModule`, in order."""
DEFAULT_RECOMPUTE_MODULES: tuple[RecomputeModule, ...] = ("core_attn",)
"""Megatron-LM's ``--recompute-modules`` default: the attention core (Korthikanti et al. 2022)."""

MoeDispatcher = Literal["alltoall", "deepep", "hybridep"]
"""Megatron's dropless MoE dispatchers by name: the NCCL all-to-all, or a deduplicating one
(the flex dispatcher's DeepEP and HybridEP backends)."""
MOE_DISPATCHERS: tuple[str, ...] = get_args(MoeDispatcher)
"""The names of :data:`MoeDispatcher`, in order."""

SavedTensor = Literal["q", "k", "v", "context", "out", "mlp_gate", "mlp_up", "mlp_down"]
"""Outputs of a layer's GEMMs and of its attention core that a save-list recomputation policy
can keep (MaxText's checkpoint names: query_proj, key_proj, value_proj, context, out_proj,
mlpwi_0, mlpwi_1, mlpwo; a gated FFN's gate and up projections are mlp_gate and mlp_up, a plain
FFN's up projection is mlp_up)."""
SAVED_TENSORS: tuple[str, ...] = get_args(SavedTensor)
"""The names of :data:`SavedTensor`, in order."""

FrameworkBuffer = Literal[
    "mha_qkv_copy",
    "glu_act",
    "fp32_logits",
    "tp_gather_buffers",
    "ddp_buckets",
    "flat_param_gather",
]
"""Memory a framework's code allocates beyond the planner's fused Megatron-LM-style set
(``TrainWorkload.framework_buffers``; bytes in :mod:`planner.cost.memory` and
:mod:`planner.cost.sharding`):

- ``mha_qkv_copy``: with as many KV heads as heads, the queries stay a view of a contiguous copy
  of the QKV projection's output while keys and values are copied again for the rotary
  embedding, so each layer keeps 2 x (KV width) more values per token
  (:func:`planner.cost.memory.framework_layer_values`).
- ``glu_act``: an unfused gated FFN keeps its activation's output for the product's backward,
  F more values per token (:func:`planner.cost.memory.framework_layer_values`).
- ``fp32_logits``: the model's fp32 cast of the logits stays alive while the loss writes its
  fp32 softmax, 4 more bytes per logit (:data:`planner.cost.memory.FP32_LOGIT_COPY_BYTES`).
- ``tp_gather_buffers``: two persistent full-sequence buffers for tensor parallelism's
  all-gathers (:func:`planner.cost.memory.tp_gather_buffer_bytes`).
- ``ddp_buckets``: PyTorch DDP's reducer buckets, a bf16 copy of every gradient
  (:func:`planner.cost.sharding.ddp_bucket_bytes`).
- ``flat_param_gather``: the ZeRO-1 step gathers the parameters through flattened copies
  (:func:`planner.cost.sharding.flat_param_gather_bytes`).
"""
FRAMEWORK_BUFFERS: tuple[str, ...] = get_args(FrameworkBuffer)
"""The names of :data:`FrameworkBuffer`, in order."""

MAX_HOST_SYNC_INTERVAL = 100_000
"""Largest ``TrainWorkload.host_sync_interval`` (steps): a bound on input, not a loop seen."""

CrossEntropyImpl = Literal["unfused", "native", "te"]
"""The loss implementation (``TrainWorkload.cross_entropy``)."""


def moe_framework_fields(
    *,
    moe_dispatcher: str | None = None,
    ep_overlap: bool | None = None,
    moe_cuda_graphs: bool | None = None,
) -> dict[str, object]:
    """TrainWorkload fields for the MoE settings as users and recipes name them (None = not
    given): the dispatcher, the EP all-to-all overlap, and whole-layer CUDA graphs over
    capacity-padded experts (which remove the per-layer host sync).

    >>> moe_framework_fields(moe_dispatcher="deepep", moe_cuda_graphs=True)
    {'moe_dispatch_dedup': True, 'moe_host_sync': False}
    """
    out: dict[str, object] = {}
    if moe_dispatcher is not None:
        out["moe_dispatch_dedup"] = moe_dispatcher != "alltoall"
    if ep_overlap is not None:
        out["ep_comm_overlap"] = ep_overlap
    if moe_cuda_graphs is not None:
        out["moe_host_sync"] = not moe_cuda_graphs
    return out


class TrainWorkload(FrozenSpec):
    """A pre-training (or fine-tuning) step.

    The defaults are Megatron-LM's as NVIDIA's performance recipes run it; a framework profile
    (``framework``, ``topologies/frameworks/<name>.yaml``) sets the fields its framework runs
    differently, unless the user sets them (:func:`planner.catalog.frameworks.resolve_workload`).
    """

    mode: Literal["train"] = "train"
    """Training."""
    framework: Name = "megatron"
    """The training framework profile the step runs in (``--framework``)."""
    seq_len: PositiveInt = 8192
    """Tokens per sequence T."""
    global_batch: PositiveInt = 512
    """Sequences per optimizer step (global batch size)."""
    precision: NumberFormat = NumberFormat.BF16
    """Format of the GEMM inputs of the transformer's linear layers (attention runs in bf16;
    master weights and optimizer state stay fp32)."""

    bf16_wgrad_formats: tuple[NumberFormat, ...] = ()
    """Low-precision formats whose weight-gradient GEMMs run in bf16 while the forward and
    input-gradient GEMMs run in the format: MaxText's int8 with ``quantization_local_shard_count``
    0 (AQT ``config_v3`` drhs_bits None; its default, the number of slices, quantizes all three)."""

    grad_reduce_dtype: Literal["fp32", "bf16"] = "fp32"
    """Gradient buffer and reduction dtype. fp32 is Megatron-LM's default for bf16 training
    (6 + 12/d bytes per parameter with the distributed optimizer); NVIDIA's performance recipes
    reduce in bf16 (``grad_reduce_in_fp32 = False``: 4 + 16/d, fp32 main grads kept as shards;
    the optimizer step allocates that fp32 shard after the activations are freed, so it never
    adds to them: :class:`planner.cost.sharding.ShardedState` ``step_transient``)."""
    optimizer_state_dtype: Literal["fp32", "bf16"] = "fp32"
    """Dtype of Adam's two moments (Megatron-LM ``--use-precision-aware-optimizer --exp-avg-dtype
    bf16 --exp-avg-sq-dtype bf16``, Transformer Engine's FusedAdam, which needs the distributed
    optimizer). bf16: 8 instead of 12 bytes of optimizer state per parameter the optimizer
    steps; 6 on a bf16 layout, where the master copy is kept as the 16 bits the bf16 parameter
    lacks (``store_param_remainders``) and the step reads the gradient buffer without an fp32
    copy (:func:`planner.cost.sharding.sharded_state_bytes`). NeMo's Apex
    ``distributed_fused_adam`` with ``dtype: bf16`` (NeMo-Framework-Launcher 24.07's Nemotron-4
    340B configuration) keeps 6 as well."""
    sequence_parallel: bool = True
    """With tp > 1, the norms, dropouts and residual adds run on T / tp tokens per GPU and their
    activations are sharded (Megatron --sequence-parallel, Korthikanti et al. 2022 section 4.2.2);
    False replicates them on every TP rank (sbh(10 + 24/t) instead of 34 sbh / t bytes)."""
    dp_comm_overlap: bool = True
    """With ZeRO 0-2, the data-parallel gradient reduction overlaps the backward in buckets and
    the ZeRO parameter gather the next forward (Megatron-LM ``--overlap-grad-reduce`` /
    ``--overlap-param-gather``, added 2023-08-16 in commit 2d5220a424; on in NVIDIA's recipes).
    False: they run after the backward, exposed, as Megatron-LM did before (``train_step`` calls
    ``allreduce_gradients()`` / ``optimizer.reduce_model_grads()`` after
    ``forward_backward_func``: commits 5c8238c3 of 2021 and 285068c8 of 2023-01), as DeepSpeed's
    pipeline engine does (``TrainSchedule`` issues ``ReduceGrads`` after the last backward) and as
    DeepSpeed's ZeRO-1/2 do by default (``zero_optimization.overlap_comm`` false below stage 3).
    ZeRO-3 overlaps either way (its gathers are prefetched; DeepSpeed turns ``overlap_comm`` on
    for stage 3)."""
    ddp_bucket_params: int | None = Field(default=None, ge=1, le=MAX_BUCKET_PARAMS)
    """Parameters per gradient bucket when the data-parallel reduction overlaps the backward
    (Megatron-LM ``--ddp-bucket-size``, Megatron-Bridge ``ddp.bucket_size``): each bucket is a
    reduce-scatter (and a parameter all-gather) of its own and pays the collective's latency,
    (n - 1) alpha (:func:`planner.cost.step.dp_exposed_time`). None: Megatron-Core's rule since
    2024-04-11, max(40M, 1M x dp x cp) (commit 0fda386c04, "Tune DDP bucket size to improve
    speed at large DP counts"; ``resolve_ddp_bucket_size`` in megatron/training/training.py);
    before it a bucket held 40M parameters whatever the data-parallel size."""
    zero1_grad_sync: Literal["reduce_scatter", "all_reduce"] = "reduce_scatter"
    """How ZeRO-1 crosses the data-parallel group with the gradients. ``reduce_scatter``: each
    rank receives only the reduced shard its optimizer steps, bucket by bucket, behind the
    backward under ``dp_comm_overlap`` (Megatron-LM's distributed optimizer, DeepSpeed ZeRO-1).
    ``all_reduce``: one all-reduce of the whole gradient buffer after the last backward, then the
    rank steps its shard and all-gathers the parameters, both on the critical path (Nanotron's
    ZeRO-1 with fp32 gradient accumulation: its trainer builds no DDP wrapper then
    (``make_ddp`` in ``_init_model``) and, after the backward, calls
    ``sync_gradients_across_dp(..., reduce_scatter=False)``, a ``dist.all_reduce`` of the
    contiguous fp32 gradient buffer, src/nanotron/trainer.py and
    optim/gradient_accumulator.py at c252843; the all-gather runs in
    ``ZeroDistributedOptimizer.step``)."""
    tp_comm_overlap: bool = True
    """Tensor-parallel collectives are pipelined with their GEMMs (Megatron-LM --tp-comm-overlap,
    on in NVIDIA's H100/B200 recipes); False leaves them on the critical path."""
    flash_attention: bool = True
    """Fused (flash) attention: scores are neither stored nor written to HBM. False models the
    unfused path of 2021-22 Megatron (batched score GEMMs over the full square, softmax and
    dropout through HBM, scores stored: Korthikanti et al.'s 5 a s^2 b term)."""
    moe_dispatch_dedup: bool = False
    """MoE only: a token travels once to each rank that holds any of its experts, and copies
    bound for one remote scale-up domain cross the NIC once and fan out over NVLink (DeepEP,
    HybridEP: Megatron's flex dispatcher); False = plain NCCL all-to-all, one copy per token and
    expert (:func:`planner.cost.expert.ep_comm_per_microbatch`)."""
    ep_comm_overlap: bool = False
    """MoE only: the expert-parallel all-to-all of one micro-batch runs while another
    micro-batch computes (Megatron-LM ``--overlap-moe-expert-parallel-comm`` with
    ``--delay-wgrad-compute``; the forward of one and the backward of another are interleaved,
    as in DeepSeek-V3's DualPipe, arXiv 2412.19437 section 3.2.1); False = exposed."""
    cross_entropy: CrossEntropyImpl = "te"
    """Loss implementation, which sets its HBM traffic over the [tokens, V / tp] logits:
    Megatron-LM's plain vocab-parallel cross entropy (``unfused``, fp32 copies and in-place
    passes), ``--cross-entropy-loss-fusion`` with ``--cross-entropy-fusion-impl native`` (jit-
    fused groups of the same passes) or ``te`` (one kernel on the bf16 logits; Megatron-Bridge's
    recipes)."""
    recompute_num_layers: PositiveInt | None = None
    """With full recomputation, how many layers of each pipeline chunk are recomputed (Megatron
    ``--recompute-method block --recompute-num-layers N``: the first N of each virtual stage;
    the others keep their activations). None = every layer (``uniform``, 1)."""
    moe_host_sync: bool = True
    """MoE only: the dropless token dispatcher synchronises with the host once per MoE layer
    per micro-batch (Megatron's all-to-all and flex dispatchers read the per-expert token counts
    on the CPU, and ``TEGroupedMLP`` turns them into a Python list for its GEMM splits); False
    only when the whole MoE layer runs in a CUDA graph on capacity-padded shapes (full-layer or
    full-iteration graphs). Experts padded to capacity on the all-to-all dispatcher
    (``moe_capacity_factor``) do not sync either, graphs or not
    (:func:`planner.cost.expert.dispatcher_syncs_host`). Capturing just the router and
    preprocessing (``cuda_graph_scope`` moe_router, moe_preprocess) moves the device-to-host
    copy but keeps the sync before the all-to-all (Megatron-LM
    ``MoEAlltoAllTokenDispatcher.preprocess``). Costs the accelerator's
    ``moe_sync_overhead_us``."""
    host_sync_interval: int | None = Field(default=1, ge=1, le=MAX_HOST_SYNC_INTERVAL)
    """Steps between the training loop's host synchronisations, each of which costs the
    accelerator's fitted ``step_overhead_ms`` (the host waits for the device, then the device
    idles while the host launches the next kernels): 1 = every step (Megatron-LM reads the
    gradient norm on the host each step, ``megatron/core/optimizer/clip_grads.py``
    ``total_norm.item()``); 10 = torchtitan's ``metrics.log_freq`` default (the loss is read only
    on logging steps, ``torchtitan/train.py``); None = never (XLA runs the step as one program
    and JAX dispatches the next before the last ends)."""
    recompute_modules: tuple[RecomputeModule, ...] = DEFAULT_RECOMPUTE_MODULES
    """What a layout with selective recomputation recomputes in the backward pass (Megatron-LM
    ``--recompute-modules``; its default is the attention core, Korthikanti et al. 2022)."""
    saved_tensors: tuple[SavedTensor, ...] | None = None
    """With selective recomputation, a save list instead of ``recompute_modules``: each layer
    keeps its input and these outputs, and everything else inside it is recomputed in the
    backward pass (JAX ``checkpoint_policies.save_only_these_names``, MaxText ``remat_policy``;
    torchtitan's per-op policy keeps the attention output and every other matmul output). An
    empty list recomputes the whole layer. None = Megatron-LM's ``recompute_modules``."""
    framework_buffers: tuple[FrameworkBuffer, ...] = ()
    """Memory the framework's code allocates beyond the fused Megatron-LM-style set the planner
    prices by default (:data:`FrameworkBuffer`: extra saved activations, an fp32 logits copy,
    tensor- and data-parallel buffers). Empty = none (Megatron-LM: fused SwiGLU and loss, its
    gradient buffer and distributed optimizer gather in place)."""
    expert_load_imbalance: float = Field(default=1.0, ge=1.0, le=MAX_LOAD_FACTOR)
    """MoE only: tokens on the busiest expert rank over the mean (1 = perfectly balanced, as
    NVIDIA's MoE benchmarks force; real routing is typically 1.1-1.5)."""
    moe_capacity_factor: float | None = Field(default=None, ge=1.0, le=MAX_LOAD_FACTOR)
    """MoE only: expert capacity as a multiple of the balanced share (GShard, arXiv 2006.16668
    section 2.2): each expert's GEMMs run on capacity x balanced tokens, padded, and overflow is
    dropped (static shapes, as XLA needs; Megatron-LM ``--moe-expert-capacity-factor`` with
    ``--moe-pad-expert-input-to-capacity``, whose all-to-all then needs no host sync); None =
    dropless (each expert sees its real tokens)."""
    moe_expert_compute: Literal["grouped", "einsum"] = "grouped"
    """MoE only: how the routed experts run. ``grouped``: the tokens are permuted by expert and
    a grouped GEMM runs each projection over the rows each expert got (Megatron-LM's
    ``TEGroupedMLP``, torchtitan's grouped GEMM, MaxText ``sparse_matmul: true``); ``einsum``:
    GShard's one-hot dispatch and combine einsums into every expert's capacity slots (MaxText
    ``sparse_matmul: false`` with ``capacity_factor`` > 0, MaxText/layers/moe.py
    ``dense_matmul``; Praxis), which cost about 2 x group x top_k x capacity x D FLOPs per
    token each on top of the experts (:func:`planner.cost.gemm.einsum_dispatch_gemms`). Needs
    ``moe_capacity_factor``: the slots are sized by it."""
    moe_routing_group: Literal["sequence", "microbatch"] = "sequence"
    """MoE with ``moe_expert_compute`` ``einsum``: the tokens whose copies share the experts'
    capacity slots, and so the dispatch einsum's reduction: one sequence (MaxText
    ``generate_masks``: capacity per batch row) or every token of the rank's micro-batch
    (DeepSpeed-MoE's ``MOELayer`` flattens its input to (tokens, D) before gating,
    deepspeed/moe/sharded_moe.py)."""
    grouped_gemm_tiles: tuple[PositiveInt, PositiveInt, PositiveInt] | None = None
    """MoE only: the (token rows, model dimension, expert FFN dimension) tile of a grouped GEMM
    kernel whose row tiles run across expert boundaries, each expert that starts inside a tile
    computing that tile once more (MaxText's megablox ``gmm``, tiled by ``wi_tile_fwd_batch_seq``
    / ``_embed_dim`` / ``_mlp_dim`` and the ``wo_`` ones; :func:`planner.cost.gemm.
    grouped_tile_rows`). Priced on accelerators without a GPU tile model (on a GPU the tile
    model of ``AcceleratorSpec.gemm_tiling`` pads each expert's rows); None = none."""
    cp_comm: CpComm = "p2p"
    """Context-parallel algorithm (Megatron-LM ``--cp-comm-type``): ``p2p`` K/V ring, ``a2a``
    (Ulysses: heads all-to-all), ``a2a+p2p`` (all-to-all inside a scale-up domain, ring across),
    ``allgather`` (K/V all-gathered before attention)."""
    cp_impl: CpImpl = "te"
    """Whose context-parallel attention runs (what it adds on the GPU besides the exchange):
    ``te`` (Transformer Engine: Megatron-LM, NeMo, MaxText's ring on GPU) runs the ``p2p`` and
    ``a2a+p2p`` forms as ring steps whose partial outputs fused fp32 kernels merge, and attends
    once per local chunk under ``allgather`` and ``a2a`` (as Meta's all-gather CP and MaxText's
    do); ``pytorch`` (PyTorch's ``context_parallel``, torchtitan) runs the load-balanced ring
    steps under every form, its rotate methods changing only how K and V move, and merges them
    with eager fp32 ops (:func:`planner.cost.compute.ring_attention_merge_bytes_per_token`)."""
    reshard_after_forward: Literal["default", "always", "never"] = "default"
    """ZeRO-3 only: whether parameters are freed after each layer's forward and gathered again
    for its backward (PyTorch FSDP2 ``reshard_after_forward``). ``never`` keeps a stage's
    gathered parameters from forward to backward: one gather per micro-batch, their bf16 copy
    held (Llama 3's layout, arXiv 2407.21783 section 3.3.2); ``default`` reshards unless
    pipeline parallelism is on (torchtitan's ``fsdp_reshard_after_forward = "default"``: "for
    PP, do not reshard after forward to avoid per-microbatch all-gathers")."""
    pp_grad_sync: Literal["step", "round"] = "step"
    """ZeRO-3 that keeps its parameters under pipeline parallelism: when a virtual stage's
    gradients are reduce-scattered. ``step``: once, after the step's last backward; each
    stage's unsharded gradients accumulate until then (``torch.distributed.pipelining`` turns
    FSDP's gradient sync off until the last backward; torchtitan). ``round``: after each run of
    pp contiguous backwards the interleaved schedule gives one virtual stage, into a sharded
    accumulator, so only the chunk in its run and the one reducing hold unsharded gradients
    (Llama 3, arXiv 2407.21783 section 3.3.2: FSDP 'shards optimizer states and gradients',
    FP32 accumulation over micro-batches, N contiguous micro-batches per stage)."""
    pipeline_schedule: PipelineSchedule = "1f1b"
    """Pipeline schedule: 1F1B (interleaved when vpp > 1); zero bubble (ZB-H1, Qi et al. ICLR
    2024, arXiv 2401.10241: each backward split into its input-gradient and weight-gradient
    passes, the weight gradients deferred to fill the drain, activations in flight as 1F1B;
    torch.distributed.pipelining's ScheduleInterleavedZeroBubble, torchtitan's
    ``InterleavedZeroBubble``); GPipe (Huang et al. NeurIPS 2019: every micro-batch's forward,
    then the backwards, so each stage holds every micro-batch's activations, with 1F1B's bubble;
    MaxText's circular pipeline, a scan over the iterations that JAX differentiates); or
    DualPipe (DeepSeek-V3, arXiv 2412.19437 section 3.2.1:
    micro-batches fed from both ends, forward and backward chunks overlapped; each rank holds
    two copies of its stage's parameters and pp + 1 micro-batches of activations). The
    framework profile says which it runs (``FrameworkSpec.pipeline_schedules``)."""
    zero_shard_group: PositiveInt | None = None
    """Hybrid sharding (HSDP, ZeRO++'s hpZ, PaLM's per-pod sharding): the data-parallel ranks one
    ZeRO shard spans, consecutive in rank order (inside a node or pod); the dp x cp / group
    shards replicate it and all-reduce their gradient shards. None = one shard over all
    dp x cp ranks."""
    fp32_params: bool = False
    """The parameters themselves are fp32 and serve as the optimizer's master copy, cast to bf16
    for compute (PyTorch FSDP mixed precision, MaxText ``weight_dtype: float32``): a ZeRO-3 shard
    holds no bf16 copy beside them. False = Megatron-LM's bf16 parameters with a separate fp32
    master copy in the optimizer state (unless ``master_copy`` is False)."""
    master_copy: bool = True
    """bf16 parameters (``fp32_params`` False) have an fp32 master copy in the optimizer state
    (Megatron-LM's, DeepSpeed's). False: the optimizer steps the bf16 parameters in place and
    holds only its moments, and a ZeRO-3 gradient shard is bf16 (FSDP2 casts the reduced shard
    to the parameter's dtype): a model built in bf16 under ``torch.optim.Adam``, whose moments
    take the parameters' dtype (``optimizer_state_dtype`` bf16), or Transformer Engine's
    ``FusedAdam`` with its default ``master_weights=False`` (NeMo AutoModel; MaxText with
    ``weight_dtype: bfloat16``)."""
    unsharded_param_layers: float = Field(default=2.0, ge=1.0, le=8.0)
    """ZeRO-3 only: layers whose gathered (bf16) parameters, and in backward their unsharded
    gradients, are alive at once: the running layer and the one prefetched (FSDP2's implicit
    prefetch of the next layer; Megatron-FSDP's double buffer). Weight tensors instead of layers
    when the framework gathers weight by weight (``fsdp_gather_unit``)."""
    fsdp_gather_unit: Literal["layer", "weight"] = "layer"
    """ZeRO-3 only: what one all-gather brings in, so what ``unsharded_param_layers`` counts. A
    layer: FSDP and DeepSpeed gather a wrapped module's parameters together. A weight: XLA's
    SPMD partitioner turns each sharded weight's use into its own all-gather before its einsum
    (and each weight gradient into its own reduce-scatter), so the gathered working set is a
    few of the largest weight tensors (MaxText, AXLearn, Pax), not whole layers; and XLA's
    latency-hiding scheduler starts the next weight's all-gather early only while memory allows
    (:func:`planner.cost.step.prefetch_yields_to_memory`), where FSDP prefetches by rule."""
    fsdp2_buffer_copies: bool = False
    """ZeRO-2 and -3: the HBM copies PyTorch FSDP2 (``fully_shard``) makes around its collectives
    on the compute stream's path (:func:`planner.cost.sharding.fsdp2_buffer_copy_bytes`). After
    each all-gather the compute stream splits the gathered buffer into the unsharded parameters
    (``FSDPParamGroup.wait_for_unshard`` -> ``foreach_all_gather_copy_out``,
    ``torch.split_with_sizes_copy`` after waiting on the all-gather); before each reduce-scatter
    the gradients are concatenated into one buffer in the reduce dtype on the compute stream
    (``foreach_reduce_scatter_copy_in``; torch/distributed/fsdp/_fully_shard, PyTorch 2.4-2.13),
    which an fp32 or bf16 reduction then averages inside the collective (``ReduceOp.AVG``, no
    division kernel). False: parameters
    are views of the gathered buffer (FSDP1's flat parameter, Megatron-FSDP's and DeepSpeed's
    buffers, XLA)."""
    weight_cast: Literal["per_step", "per_call"] = "per_step"
    """Low-precision formats: when a GEMM's weight operand is quantized. per_step: once per
    optimizer step and cached across micro-batches (Transformer Engine's ``is_first_microbatch``
    weight cache), priced as nothing here. per_call: every GEMM call quantizes its weight again,
    in the forward, the recomputed forward and the input-gradient GEMM (AQT ``config_v3`` in
    MaxText: fwd and dlhs quantize the weight on each call, per-channel ranges computed on the
    fly), each pass reading the bf16 weight and writing the quantized copy
    (:func:`planner.cost.stage.weight_cast_time`)."""
    activation_offload_fraction: float = Field(default=0.0, ge=0.0, le=1.0)
    """Share of the saved activations that go to host memory over the host link in the forward
    and come back for the backward (Megatron-LM ``--cpu-offloading-num-layers`` N of L layers;
    MaxText ``remat_policy`` ``*_offloaded``): they leave device memory, and the copies cost
    host-link time where they outlast the compute they overlap. 0 = none."""
    fused_elementwise: bool = True
    """Norms, RoPE, activations and bias adds run as fused kernels (Transformer Engine, Apex,
    ``torch.compile``, XLA); False = eager PyTorch op by op, each op a pass through HBM
    (:func:`planner.cost.gemm.eager_extra_bytes_per_token`)."""
    attention_kernel: Literal["vendor", "flash2"] = "vendor"
    """Fused attention kernel: the vendor's best (cuDNN / Transformer Engine, FlashAttention-3
    on Hopper, Pallas splash on TPU) or FlashAttention-2 (PyTorch SDPA's flash backend, the
    flash-attn 2 package), slower on Hopper (``AcceleratorSpec.flash2_attention_relative``)."""
    activation_memory_overhead: float = Field(default=0.0, ge=0.0, le=1.0)
    """Allocator overhead on activations: the caching allocator's fragmentation and the
    transient buffers of the backward, as a fraction of the stored activations (0 = none beyond
    the accelerator's fixed runtime reserve)."""
    fp8_param_gather: bool = False
    """ZeRO-1 and above with an 8-bit recipe: parameters are all-gathered in fp8 (torchao
    ``enable_fsdp_float8_all_gather``; Megatron-LM ``--fp8-param-gather``), halving the gather."""
    fp8_casts: Literal["fused", "tensorwise", "rowwise"] = "fused"
    """How an FP8 (per-tensor scaled) GEMM's operands are quantized; the block-scaled formats
    (MXFP8, NVFP4) and int8 keep ``fused``'s pricing. ``fused`` (Transformer Engine): each
    GEMM input once in the forward (read bf16, write 8 bits) and its backward counterparts in
    fused cast-transpose kernels, priced with the other memory-bound work. ``tensorwise`` (torchao
    float8 with dynamic tensorwise scaling, torchtitan's default recipe and OLMo-core's): every
    cast first reads its tensor for the scale (``tensor_to_amax``) and then casts it, the input
    in the forward and the output gradient in the backward (torchao/float8/float8_linear.py),
    and the backward's scaled GEMMs copy the operands ``torch._scaled_mm`` wants in the other
    layout: the weight for the input gradient, the output gradient and the input for the
    weight gradient (``preprocess_addmm`` in torchao/float8/float8_ops.py); a weight FSDP does
    not gather in fp8 (``fp8_param_gather``) is cast on every call. ``rowwise``
    (torchtitan's ``recipe_name = "rowwise"``): the same, and the weights are cast on every call,
    forward and input gradient, since FSDP's float8 all-gather supports tensorwise scaling only
    (their parameters gather in bf16) (:func:`planner.cost.stage.dynamic_cast_time`)."""
    fused_grouped_mlp: bool = False
    """MoE only: the routed experts run as Transformer Engine's fused grouped MLP (its op fuser,
    Megatron-LM ``--use-transformer-engine-op-fuser``, with ``NVTE_CUTEDSL_FUSED_GROUPED_MLP=1``):
    two grouped GEMMs whose epilogues apply the first projection's bias, the (clamped) GLU, the
    router-probability scale and the quantization of the second projection's input, and the
    second projection's bias; the backward's grouped GEMM computes the GLU, probability and
    bias gradients the same way. It runs only on compute capability 10.x GPUs in MXFP8 or NVFP4
    (:func:`planner.cost.stage.runs_fused_grouped_mlp`); elsewhere the experts run unfused as
    without it. False = Megatron-LM's ``TEGroupedMLP`` (separate activation, bias and cast
    kernels)."""
    pp_host_sync: bool = False
    """Each pipeline receive reads the incoming tensor's metadata on the host before it posts
    the receive (Nanotron's ``P2P._recv_meta``: a blocking ``dist.recv`` of a device buffer
    whose values size the next one), so every micro-batch's activation and gradient receive
    stalls the stream as a host synchronisation does (:func:`planner.cost.stage.pp_sync_time`).
    False = the receive is posted with a known shape (Megatron-LM, torchtitan)."""
    mtp_num_layers: int = Field(default=0, ge=0, le=16)
    """Multi-token-prediction modules trained with the model (DeepSeek-V3: 1; Megatron-LM
    ``--mtp-num-layers``, arXiv 2412.19437 section 2.2): each is one more transformer layer like
    the model's last, a 2D -> D projection, and one more pass of the shared output layer and
    loss, on the pipeline stage that holds it (the last by default). 0 = none."""

    @field_validator("recompute_modules")
    @classmethod
    def _modules_once(cls, modules: tuple[str, ...]) -> tuple[str, ...]:
        if not modules:
            raise ValueError("selective recomputation needs at least one module")
        if len(set(modules)) != len(modules):
            raise ValueError(f"recompute module listed twice in {list(modules)}")
        return modules

    @field_validator("saved_tensors")
    @classmethod
    def _saved_once(cls, saved: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if saved is not None and len(set(saved)) != len(saved):
            raise ValueError(f"saved tensor listed twice in {list(saved)}")
        return saved

    @field_validator("framework_buffers")
    @classmethod
    def _buffers_once(cls, buffers: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(buffers)) != len(buffers):
            raise ValueError(f"framework buffer listed twice in {list(buffers)}")
        return buffers

    @model_validator(mode="after")
    def _master_copy_of_bf16_parameters(self) -> TrainWorkload:
        if not self.master_copy and self.fp32_params:
            raise ValueError(
                "master_copy false needs fp32_params false: fp32 parameters are the optimizer's "
                "master copy"
            )
        return self

    @model_validator(mode="after")
    def _einsum_needs_capacity(self) -> TrainWorkload:
        if self.moe_expert_compute == "einsum" and self.moe_capacity_factor is None:
            raise ValueError(
                "moe_expert_compute 'einsum' needs moe_capacity_factor: GShard's dispatch "
                "einsums fill capacity slots (without a capacity MaxText's dense path runs every "
                "expert on every token, which the planner does not price)"
            )
        return self

    @property
    def tokens_per_step(self) -> int:
        """Tokens per optimizer step (global_batch x seq_len)."""
        return self.global_batch * self.seq_len


class ServeWorkload(FrozenSpec):
    """A serving deployment: request shape, formats, latency targets and the search objective
    (cost model: :mod:`planner.cost.serving`)."""

    mode: Literal["serve"] = "serve"
    """Serving."""
    context: PositiveInt = 2048
    """Context length each sequence must hold (tokens); not given, the request's own:
    ``prompt_len + output_len`` (a paged KV cache holds what the requests use, not a maximum)."""
    prompt_len: PositiveInt = 1024
    """Prompt tokens per request."""
    output_len: PositiveInt = 1024
    """Generated tokens per request."""
    precision: NumberFormat | None = None
    """Weight format; None = the checkpoint's (the model's ``quantization``, e.g. FP8 for
    DeepSeek-V3, MXFP4 for gpt-oss), else bf16."""
    kv_precision: NumberFormat | None = None
    """KV-cache format; None = the checkpoint's KV format when it states one, else FP8 with
    8-bit or narrower weights (TensorRT-LLM ModelOpt checkpoints store an FP8 cache), else the
    16-bit weight format."""
    compute_precision: NumberFormat | None = None
    """Format of the GEMM inputs (activations); None = the weight format when the tensor cores
    run it, else bf16 (weight-only quantisation, e.g. FP8 weights on A100)."""
    concurrency: PositiveInt | None = None
    """Fixed batch: sequences decoded together per replica; None = the largest that fits the KV
    cache and the latency targets (or what the request rate brings). A batch beyond what the
    cache holds at full context runs at the requests' mean context, with a warning."""
    tpot_ms: PositiveFloat | None = None
    """Target mean time per output token (decode iterations with the prefill interleaved, ms);
    None = no target."""
    ttft_ms: PositiveFloat | None = None
    """Target time to first token (ms) at ``slo_percentile`` with queueing when a request rate
    is given, else of a prompt joining the running batch; None = no target."""
    e2e_ms: PositiveFloat | None = None
    """Target end-to-end latency of a request (ms), at ``slo_percentile`` like ``ttft_ms``;
    None = no target."""
    slo_percentile: Literal[50, 90] = 90
    """Percentile of the request latencies the TTFT and end-to-end targets apply to."""
    objective: Literal["throughput", "latency"] = "throughput"
    """What the search optimises: output tokens/s per GPU (throughput) or the time per output
    token at the requested concurrency (latency). ``target_tokens_per_s`` and
    ``request_rate`` override both (fewest GPUs)."""
    target_tokens_per_s: PositiveFloat | None = None
    """Aggregate output tokens/s the deployment must sustain: the search then picks the fewest
    GPUs (replicas of the best layout) that reach it; None = use the whole cluster."""
    kv_cache_fraction: float = Field(default=0.9, gt=0, le=1)
    """Fraction of the memory left after weights, activation workspace and the runtime reserve
    that the KV cache may take (TensorRT-LLM ``kv_cache_free_gpu_mem_fraction``, default 0.9;
    NVIDIA's published tables use 0.95)."""
    max_batch_tokens: PositiveInt = 8192
    """The engine's token budget: tokens one forward pass may carry (decodes + a prefill
    chunk); sizes the activation workspace and the prefill chunks (TensorRT-LLM
    ``max_num_tokens``, vLLM ``max_num_batched_tokens``, SGLang ``chunked_prefill_size``;
    CLI ``--max-num-tokens``, default 8192)."""
    mixed_prefill: bool = True
    """Prefill chunks ride the decode passes (vLLM V1 chunked prefill, TensorRT-LLM in-flight
    batching, SGLang ``--enable-mixed-chunk``); False = prefill-only passes that pause decoding
    (SGLang's default)."""
    request_rate: PositiveFloat | None = None
    """Offered load: Poisson arrivals, requests/s to the whole deployment (spread evenly over
    its replicas); latencies then include queueing and the search picks the fewest GPUs that
    sustain the rate within the targets. None = saturated (the batch is as large as the limits
    allow)."""
    routing_skew: float = Field(default=0.0, ge=0.0, le=4.0)
    """MoE only: Zipf exponent s of the experts' shares of the router's choices,
    p_i ~ (i + 1)^-s (0 = uniform routing; 1 = the most popular expert takes twice the second's
    share). Skew lowers the experts a step touches and loads the busiest EP rank."""
    engine: Name = "tensorrt-llm"
    """Serving engine profile (``topologies/engines/<name>.yaml``): the host time it adds to
    each forward iteration (CLI ``--serving-engine``)."""

    @model_validator(mode="before")
    @classmethod
    def _context_of_the_request(cls, data: object) -> object:
        """``context`` not given: the request's prompt and output (their defaults when absent),
        so naming the default lengths changes nothing."""
        if isinstance(data, dict) and data.get("context") is None:
            fields = cls.model_fields
            prompt = data.get("prompt_len", fields["prompt_len"].default)
            output = data.get("output_len", fields["output_len"].default)
            if isinstance(prompt, int) and isinstance(output, int):
                data = {**data, "context": prompt + output}
        return data

    @model_validator(mode="after")
    def _request_fits_context(self) -> ServeWorkload:
        if self.prompt_len + self.output_len > self.context:
            raise ValueError(
                f"prompt_len + output_len ({self.prompt_len} + {self.output_len}) exceeds "
                f"context ({self.context})"
            )
        return self
