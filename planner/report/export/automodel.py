"""NVIDIA NeMo AutoModel recipe sections for a plan: ``step_scheduler``, ``distributed`` (FSDP2,
its pipeline and MoE sub-configs), ``model`` (the Hugging Face config and the kernel backends),
``loss_fn`` and ``optimizer``.

Target: NVIDIA-NeMo/Automodel commit 36044ad3d (2026-08-22). The keys, and the values of their
closed sets, are in ``tests/data/framework_args/automodel.txt``, each read where the recipe reads
it: ``recipes/_dist_utils.py`` ``parse_distributed_section`` (the ``distributed`` section: the
sizes, ``pipeline``, ``moe``, ``activation_checkpointing``, the rest handed to
``components/distributed/config.py`` ``FSDP2Config``), ``components/distributed/pipelining/
config.py`` ``PipelineConfig``, ``components/models/common/utils.py`` ``BackendConfig`` and
``TEFp8Config``, ``components/training/step_scheduler.py`` (gradient accumulation is
``global_batch_size / (local_batch_size x dp_size)``), ``components/loss/masked_ce.py`` and
Transformer Engine's ``FusedAdam`` (as ``examples/llm_pretrain/llama3_70b_pretrain.yaml`` sets
it). AutoModel's FSDP2 mesh is ``pp, dp_replicate, dp_shard, cp, tp`` (PP outermost, TP
innermost), the planner's rank order; experts are carved from the ``dp x cp x tp`` ranks
(``components/distributed/mesh_utils.py``).
"""

from __future__ import annotations

from planner.cost.expert import dispatcher_syncs_host
from planner.cost.sharding import (
    keeps_master_remainders,
    reduces_once_per_step,
    zero3_reshards,
)
from planner.report.export.assumed import (
    DP_OVERLAP,
    MODEL_ROPE,
    dp_overlapped,
    express_framework,
    express_native_gather_and_cast,
    note_unexpressed,
    setting_words,
)
from planner.report.export.job import (
    ExportJob,
    ExportResult,
    pipeline_split,
    split_recompute_settings,
    yaml_sections_result,
)
from planner.report.export.torchtitan import FSDP2_UNSHARDED_LAYERS
from planner.specs.layout import Recompute

FRAMEWORK = "NeMo AutoModel recipe sections (YAML)"
VERSION = "36044ad3d (2026-08-22)"

Value = int | str | bool | None | list[str] | list[list[str]] | dict[str, object]

_SCHEDULES: dict[tuple[str, bool], str] = {
    ("1f1b", False): "1f1b",
    ("1f1b", True): "interleaved1f1b",
    ("zero_bubble", True): "interleavedzerobubble",
    ("gpipe", False): "gpipe",
    ("gpipe", True): "loopedbfs",
}
"""(the planner's pipeline schedule, virtual stages) -> ``pipeline.pp_schedule``, a name
torch.distributed.pipelining's ``get_schedule_class`` looks up case-insensitively (AutoModel's
configs write ``1f1b`` and ``interleaved1f1b``). A rank with one stage runs a single-stage
schedule (1F1B, GPipe), with several a looped one (Interleaved1F1B, InterleavedZeroBubble, and
LoopedBFS: every micro-batch's forward of the rank's stages, then the backwards, GPipe's order);
AutoModel refuses the other pairings (``calculate_virtual_stages``). There is no single-stage
zero-bubble schedule, and DualPipeV, not DualPipe."""

_TE_FP8_RECIPES = {"fp8": "current", "mxfp8": "mxfp8"}
"""Training precision -> ``model.backend.te_fp8.recipe``: Transformer Engine's per-tensor
current scaling (the Megatron export's ``tensorwise``) and its MXFP8 block scaling."""

_FUSED_ADAM = "transformer_engine.pytorch.optimizers.fused_adam.FusedAdam"
_MIXED_PRECISION = "torch.distributed.fsdp.MixedPrecisionPolicy"
_BACKEND = "nemo_automodel.components.models.common.BackendConfig"
_MASKED_CE = "nemo_automodel.components.loss.masked_ce.MaskedCrossEntropy"
_FROM_CONFIG = "nemo_automodel.NeMoAutoModelForCausalLM.from_config"
_AUTO_CONFIG = "transformers.AutoConfig.from_pretrained"


def _batch(job: ExportJob) -> dict[str, Value]:
    """``step_scheduler``: with PP the local batch is one pipeline step's samples, split into
    micro-batches by the schedule (one schedule run per step, as the prediction's bubble
    assumes); without it each local batch is one micro-batch and the recipe accumulates."""
    layout, workload = job.train[0].layout, job.train[1]
    local = workload.global_batch // layout.dp if layout.pp > 1 else layout.mbs
    job.express("global_batch")
    if layout.pp > 1 and local // layout.mbs < layout.pp:
        job.note(
            f"{local // layout.mbs} micro-batches per step under pp={layout.pp}: AutoModel "
            "asserts local_batch_size // pp_microbatch_size >= pp_size"
        )
    return {"global_batch_size": workload.global_batch, "local_batch_size": local}


def _sharding(job: ExportJob) -> dict[str, Value]:
    """The FSDP2 keys: the data-parallel degrees (HSDP where the plan shards over groups), the
    parameter resharding and when the gradients are reduced."""
    layout, workload = job.train[0].layout, job.train[1]
    out: dict[str, Value] = {"dp_size": layout.dp}
    if dp_overlapped(job):  # FSDP2 prefetches its gathers and overlaps its reduce-scatters
        job.express(DP_OVERLAP)
    if layout.zero < 2:
        job.note(
            f"AutoModel's FSDP2 always shards gradients and optimizer state: ZeRO-{layout.zero} "
            "is set as its nearest, ZeRO-2 (reshard_after_forward false)"
        )
    group = workload.zero_shard_group
    if group is not None and layout.zero >= 1:
        shard, rest = divmod(group, layout.cp)
        if rest or shard < 2 or layout.dp % shard:
            job.note(
                f"the ZeRO shard group of {group} is not cp={layout.cp} x a divisor (above 1) "
                f"of dp={layout.dp}: AutoModel shards over all of them"
            )
        else:
            out["dp_replicate_size"] = layout.dp // shard
            job.express("zero_shard_group")
    if layout.zero < 3:
        out["reshard_after_forward"] = False
    elif workload.reshard_after_forward != "default":
        out["reshard_after_forward"] = workload.reshard_after_forward == "always"
        job.express("reshard_after_forward")
    else:  # AutoModel's own heuristic (None): no resharding under PP, else all but the last
        job.express("reshard_after_forward")
    if workload.unsharded_param_layers == FSDP2_UNSHARDED_LAYERS and layout.zero == 3:
        job.express("unsharded_param_layers")  # FSDP2 prefetches the next unit's gather
    # the gradients cross the data-parallel group once per step, after the last micro-batch,
    # or after every micro-batch (AutoPipeline's reduce_grad_per_microbatch = not this)
    once = reduces_once_per_step(workload, layout)
    out["defer_fsdp_grad_sync"] = once
    if once and workload.pp_grad_sync == "step":
        job.express("pp_grad_sync")
    return out


def _pipeline(job: ExportJob) -> dict[str, Value]:
    """``distributed.pipeline``: the schedule, the micro-batch and the layers of each chunk
    (``layers_per_stage``, rounded to a multiple of pp if need be, where AutoModel deals the
    plan's split itself: :func:`own_split`; else every chunk's module names)."""
    layout, workload = job.train[0].layout, job.train[1]
    looped = layout.vpp > 1
    name = _SCHEDULES.get((workload.pipeline_schedule, looped))
    if name is not None:
        job.express("pipeline_schedule")
    else:  # said as the nearest: 1F1B, interleaved with virtual stages
        name = _SCHEDULES[("1f1b", looped)]
    out: dict[str, Value] = {
        "pp_schedule": name,
        "pp_microbatch_size": layout.mbs,
        "pp_seq_len": workload.seq_len,
        "scale_grads_in_schedule": False,
    }
    counts = pipeline_split(job)[1]
    own = own_split(job.model.num_layers, layout.pp, counts)
    if own is not None:
        out["layers_per_stage"], rounding = own
        if rounding is not None:
            out["round_virtual_stages_to_pp_multiple"] = rounding
    else:
        plan = job.train[0]
        optimised = plan.pipeline_split.optimised if plan.pipeline_split is not None else None
        job.note(
            f"{job.model.num_layers} layers over pp x vpp = {len(counts)} chunks: "
            f"module_fqns_per_model_part lists {optimised or 'the planner split'} {counts} in "
            "Hugging Face names (model.embed_tokens, model.layers.i, model.norm, lm_head); a "
            "model whose AutoModel class names its modules otherwise needs its own"
        )
        out["module_fqns_per_model_part"] = _module_names(job, counts)
    return out


def own_split(num_layers: int, pp: int, counts: list[int]) -> tuple[int, str | None] | None:
    """(``layers_per_stage``, ``round_virtual_stages_to_pp_multiple``) that make AutoModel
    deal ``counts`` itself, or None: it makes ceil(L / layers_per_stage) virtual stages, rounded
    up or down to a multiple of pp when asked (``calculate_virtual_stages``), and gives each
    L // stages layers, one more to each of the first L % stages
    (``generate_hf_model_fqn_per_model_part``, ``pipelining/functional.py``). An exact count is
    preferred to a rounded one.

    >>> own_split(80, 4, [10] * 8), own_split(61, 4, [2] * 29 + [1] * 3)
    ((10, None), (2, 'up'))
    >>> own_split(80, 2, [41, 39]) is None
    True
    """
    stages = len(counts)
    base, extra = divmod(num_layers, stages)
    if counts != [base + 1] * extra + [base] * (stages - extra):
        return None
    made = {k: -(-num_layers // k) for k in range(1, num_layers + 1)}
    exact = [k for k, n in made.items() if n == stages]
    if exact:
        return exact[0], None
    for k, n in made.items():
        if n + (-n % pp) == stages:
            return k, "up"
        if n - n % pp == stages:
            return k, "down"
    return None


def _module_names(job: ExportJob, counts: list[int]) -> list[list[str]]:
    """Module names per chunk as AutoModel's own split writes them
    (``pipelining/functional.py`` ``generate_hf_model_fqn_per_model_part``): the embedding on
    the first chunk, the final norm and the head on the last, the rotary table on every one."""
    parts, start = [], 0
    rotary = job.model.position_embedding == "rope"
    for i, count in enumerate(counts):
        names = [f"model.layers.{j}" for j in range(start, start + count)]
        if i == 0:
            names.insert(0, "model.embed_tokens")
        if i == len(counts) - 1:
            names += ["model.norm", "lm_head"]
        if rotary:
            names.append("model.rotary_emb")
        parts.append(names)
        start += count
    return parts


def _moe(job: ExportJob) -> dict[str, Value]:
    """``distributed.moe`` (only with ``ep_size`` > 1, as AutoModel reads it): the experts'
    FSDP resharding follows the dense layers'."""
    layout, workload = job.train[0].layout, job.train[1]
    if job.model.moe is None or layout.ep == 1:
        return {}
    if layout.etp != 1:
        job.note(
            f"AutoModel shards each expert over the expert-parallel ranks only (no expert "
            f"tensor parallelism): etp {layout.etp} -> 1"
        )
    return {"reshard_after_forward": layout.zero == 3 and zero3_reshards(workload, layout)}


def _checkpointing(job: ExportJob) -> bool | str:
    """``activation_checkpointing``: true wraps every decoder block (full recomputation);
    ``selective`` is AutoModel's TorchTitan-style op-level policy."""
    layout, workload = job.train[0].layout, job.train[1]
    if layout.recompute is Recompute.FULL:
        job.express("recompute_num_layers")
        settings = split_recompute_settings(job)
        if settings.granularity is None:
            return False
        most = max((s.num_layers for s in job.train[0].pipeline_stages), default=0)
        partial = settings.num_layers is not None and settings.num_layers < most
        if settings.method == "block" and partial:
            job.note(
                f"the prediction assumes {setting_words(job, 'recompute_num_layers')}: "
                "AutoModel's activation checkpointing wraps every block (more compute, "
                "less memory)"
            )
        return True
    if layout.recompute is Recompute.SELECTIVE:
        from planner.catalog.frameworks import load_framework

        saved = workload.saved_tensors
        policy = load_framework("automodel").workload.get("saved_tensors")
        if saved is not None and policy is not None and saved == tuple(policy):
            job.express("saved_tensors")
        elif saved is None:
            job.express("recompute_modules")
            job.note(
                f"the prediction assumes {setting_words(job, 'recompute_modules')}: "
                "AutoModel's op-level selective checkpointing is the nearest setting"
            )
        return "selective"
    return False


def distributed(job: ExportJob) -> dict[str, Value]:
    """The ``distributed`` section."""
    layout, workload = job.train[0].layout, job.train[1]
    out: dict[str, Value] = {"strategy": "fsdp2"}
    out.update(_sharding(job))
    out.update({"tp_size": layout.tp, "cp_size": layout.cp, "pp_size": layout.pp})
    if job.model.moe is not None:
        out["ep_size"] = layout.ep
    if layout.tp > 1 and job.model.moe is not None:
        out.update(_moe_tensor_parallel(job))
    elif layout.tp > 1:
        out["sequence_parallel"] = workload.sequence_parallel
        job.express("sequence_parallel")
        # async TP (inductor's micro-pipelined collective matmuls) is AutoModel's TP overlap
        out["enable_async_tensor_parallel"] = job.tp_overlap_runs
        job.note_tp_overlap_off("enable_async_tensor_parallel")
        job.express("tp_comm_overlap")
        if job.tp_overlap_runs and not workload.sequence_parallel:
            job.note(
                "AutoModel's async TP needs sequence parallelism and turns it on: the "
                "prediction assumed it off"
            )
    out["activation_checkpointing"] = _checkpointing(job)
    async_tp = bool(out.get("enable_async_tensor_parallel"))
    out["enable_compile"] = workload.fused_elementwise or async_tp
    if workload.fused_elementwise or not async_tp:  # per-layer torch.compile fuses them
        job.express("fused_elementwise")
    reduce = "float32" if workload.grad_reduce_dtype == "fp32" else "bfloat16"
    out["mp_policy"] = {
        "_target_": _MIXED_PRECISION,
        "param_dtype": "bfloat16",
        "reduce_dtype": reduce,
        "output_dtype": "bfloat16",
    }
    job.express("grad_reduce_dtype")
    if layout.pp > 1:
        out["pipeline"] = _pipeline(job)
    moe = _moe(job)
    if moe:
        out["moe"] = moe
    return out


def _moe_tensor_parallel(job: ExportJob) -> dict[str, Value]:
    """TP on a custom MoE model: AutoModel keeps attention and the router replicated, raises on
    sequence parallelism and async TP, and starts only from a pretrained checkpoint
    (``components/moe/parallelizer.py``); both are set off, and said where assumed on."""
    workload = job.train[1]
    assumed = [
        setting_words(job, key)
        for key, on in (
            ("sequence_parallel", workload.sequence_parallel),
            ("tp_comm_overlap", job.tp_overlap_runs),
        )
        if on
    ]
    job.note(
        "AutoModel runs tensor parallelism on an MoE model without sequence parallelism or "
        "async TP, and only from a complete pretrained checkpoint (its profile plans MoE models "
        "at tp 1)" + (f"; the prediction assumes {' and '.join(assumed)}" if assumed else "")
    )
    job.express("sequence_parallel", "tp_comm_overlap")
    return {"sequence_parallel": False, "enable_async_tensor_parallel": False}


def _attention(job: ExportJob) -> str:
    """``model.backend.attn``: Transformer Engine's fused attention (cuDNN), SDPA (PyTorch's
    flash kernels, FlashAttention-2; its context parallelism is PyTorch's) or eager.

    AutoModel's dense models (its Llama, Qwen) attend through Hugging Face's attention
    interface (``attn_implementation``, :func:`_dense_attention`) and run Transformer Engine's
    only for packed (THD) batches, so their context parallelism is always PyTorch's; its MoE
    models run the backend's (``components/models/llama/model.py``, ``deepseek_v3``)."""
    layout, workload = job.train[0].layout, job.train[1]
    if not workload.flash_attention:
        job.express("flash_attention")
        if layout.cp > 1:
            job.note(
                f"cp={layout.cp} with unfused attention: AutoModel's context parallelism runs "
                "through Transformer Engine's or SDPA's attention, not eager"
            )
        return "eager"
    job.express("flash_attention")
    dense = job.model.moe is None
    pytorch_cp = layout.cp > 1 and (workload.cp_impl == "pytorch" or dense)
    if layout.cp > 1:
        if (workload.cp_impl == "pytorch") == pytorch_cp:
            job.express("cp_impl")
        # TE's context parallelism exchanges K/V round the ring (all-gather for sliding
        # windows); PyTorch's, as AutoModel sets it, all-gathers them
        native = "allgather" if pytorch_cp else "p2p"
        if workload.cp_comm == native:
            job.express("cp_comm")
    if not dense and workload.attention_kernel == "flash2":
        job.express("attention_kernel")
    if workload.attention_kernel == "vendor" and not pytorch_cp:
        if not dense:
            job.express("attention_kernel")
        return "te"
    return "sdpa"


def _dense_attention(job: ExportJob) -> str:
    """``model.attn_implementation`` of a dense model: ``te`` (AutoModel's extension: SDPA at
    init, Transformer Engine's DotProductAttention injected after, ``_transformers/
    auto_model.py``) for the vendor kernel without context parallelism; ``sdpa`` (its flash
    backend, FlashAttention-2) for FlashAttention-2 and under context parallelism, which
    AutoModel runs through SDPA; ``eager`` for unfused attention."""
    layout, workload = job.train[0].layout, job.train[1]
    if not workload.flash_attention:
        return "eager"
    if workload.attention_kernel == "vendor" and layout.cp == 1:
        job.express("attention_kernel")
        return "te"
    if workload.attention_kernel == "flash2":
        job.express("attention_kernel")
    return "sdpa"


def model(job: ExportJob) -> dict[str, Value]:
    """The ``model`` section: the Hugging Face config it is built from (when the catalog names
    one: it carries the shape and RoPE), the parameters' dtype and the kernel backends."""
    layout, workload = job.train[0].layout, job.train[1]
    out: dict[str, Value] = {"_target_": _FROM_CONFIG}
    hub = job.hf_model_id
    if hub is not None:
        out["config"] = {"_target_": _AUTO_CONFIG, "pretrained_model_name_or_path": hub}
        job.express(MODEL_ROPE)
    else:
        job.note(
            f"model '{job.model.name}' names no Hugging Face repository: set model.config to "
            "its config (AutoConfig.from_pretrained of a path or repository)"
        )
    out["torch_dtype"] = "float32" if workload.fp32_params else "bfloat16"
    job.express("fp32_params")
    if job.model.moe is None:
        out["attn_implementation"] = _dense_attention(job)
    backend: dict[str, object] = {"_target_": _BACKEND, "attn": _attention(job), "linear": "te"}
    backend["rms_norm"] = "te" if workload.fused_elementwise else "torch_fp32"
    precision = str(layout.precision)
    recipe = _TE_FP8_RECIPES.get(precision)
    if job.model.moe is not None:
        eight_bit = recipe is not None
        backend["experts"] = "te" if eight_bit and workload.moe_dispatch_dedup else "torch_mm"
        if eight_bit and not workload.moe_dispatch_dedup:
            job.note(
                f"the experts' GEMMs run in bf16: AutoModel's {precision} grouped experts "
                "(Transformer Engine's) need the DeepEP dispatcher"
            )
        backend["dispatcher"] = "deepep" if workload.moe_dispatch_dedup else "torch"
        job.express("moe_dispatch_dedup")
        if workload.moe_capacity_factor is None:  # AutoModel's MoE is dropless
            job.express("moe_capacity_factor")
        if workload.moe_expert_compute == "grouped":
            job.express("moe_expert_compute")
        if dispatcher_syncs_host(workload):  # the dispatcher reads the routed count (.item())
            job.express("moe_host_sync")
    if precision == "bf16":
        job.express("precision")
    elif recipe is not None:
        backend["te_fp8"] = {"recipe": recipe}
        job.express("precision")
    else:
        job.note(
            f"precision {precision}: AutoModel at {VERSION} has no {precision} training "
            "recipe (te_fp8 takes current, block or mxfp8): bf16 is set"
        )
    if not workload.fp8_param_gather:  # FSDP2 gathers the bf16 parameters
        job.express("fp8_param_gather")
    out["backend"] = backend
    return out


def loss(job: ExportJob) -> dict[str, Value]:
    """``loss_fn``: the masked cross entropy, on fp32-upcast logits (the planner's unfused) or
    on the bf16 logits (its nearest to a fused kernel)."""
    kind = job.train[1].cross_entropy
    if kind != "native":
        job.express("cross_entropy")
    return {"_target_": _MASKED_CE, "fp32_upcast": kind == "unfused"}


def optimizer(job: ExportJob) -> dict[str, Value]:
    """``optimizer``: Transformer Engine's FusedAdam with the master copy and the moments'
    dtype the prediction assumed (fp32 parameters are their own master copy; with bf16 moments
    on a bf16 layout the master is the 16-bit remainder beside each parameter, as the
    prediction prices it: :func:`planner.cost.sharding.keeps_master_remainders`)."""
    plan, workload = job.train
    moments = "torch.bfloat16" if workload.optimizer_state_dtype == "bf16" else "torch.float32"
    job.express("optimizer_state_dtype", "master_copy")
    return {
        "_target_": _FUSED_ADAM,
        "adam_w_mode": True,
        "master_weights": workload.master_copy and not workload.fp32_params,
        "store_param_remainders": keeps_master_remainders(workload, plan.layout),
        "exp_avg_dtype": moments,
        "exp_avg_sq_dtype": moments,
    }


def sections(job: ExportJob) -> dict[str, dict[str, Value]]:
    """Every section, in the order of AutoModel's recipes (notes go to ``job.notes``)."""
    workload = job.train[1]
    out: dict[str, dict[str, Value]] = {
        "step_scheduler": _batch(job),
        "distributed": distributed(job),
        "model": model(job),
        "loss_fn": loss(job),
        "optimizer": optimizer(job),
    }
    if workload.host_sync_interval == 1:  # its loop reads the loss every step
        job.express("host_sync_interval")
    express_framework(job, "automodel")
    note_unexpressed(
        job,
        "AutoModel",
        {
            "seq_len": "the sequence length is the dataset's (seq_length of MegatronPretraining, "
            "seq_len of the mock dataset)",
            MODEL_ROPE: "the model's Hugging Face config sets it (model.config)",
            "host_sync_interval": "AutoModel's loop reads the loss on the host every step",
            "pp_grad_sync": "AutoModel reduces the gradients after every micro-batch "
            "(defer_fsdp_grad_sync false) or once per step",
            "unsharded_param_layers": "FSDP2 prefetches one unit ahead",
            "mtp_num_layers": "AutoModel's pipeline split places no multi-token-prediction module",
            "pipeline_schedule": "the nearest torch.distributed.pipelining runs here is 1F1B "
            "(it has DualPipeV, one copy of each stage's parameters, not DualPipe, and no "
            "zero-bubble schedule with one stage a rank)",
            "cp_comm": "AutoModel's context parallelism exchanges K/V round the ring (Transformer "
            "Engine's) or all-gathers them (PyTorch's); it has no head all-to-all",
            "cross_entropy": "AutoModel's MaskedCrossEntropy on the bf16 logits is the nearest",
            "attention_kernel": "AutoModel runs context parallelism through SDPA "
            "(attn_implementation sdpa; its te injection intercepts SDPA itself)",
            "cp_impl": "AutoModel's dense models run PyTorch's context parallelism around SDPA",
            "ddp_bucket_params": "FSDP2 reduces each fully_shard unit's gradients as one "
            "collective",
            "fused_elementwise": "async TP needs torch.compile, which fuses them",
            "expert_load_imbalance": "AutoModel's benchmark configs balance the routing with "
            "model.backend.fake_balanced_gate (a benchmark setting: the gate then learns nothing)",
            **express_native_gather_and_cast(job, "automodel"),
        },
    )
    return out


def render(job: ExportJob) -> ExportResult:
    """The YAML sections, with a header comment naming the AutoModel commit."""
    body = sections(job)
    return yaml_sections_result(
        job,
        body,
        format="automodel",
        framework=(FRAMEWORK, VERSION),
        checked=f"NeMo AutoModel recipe sections; keys checked against NVIDIA-NeMo/Automodel {VERSION}",
        usage=[
            "merge into your recipe YAML (e.g. examples/llm_pretrain/llama3_70b_pretrain.yaml),",
            "keeping its dataset, dataloader and learning-rate settings",
        ],
    )
