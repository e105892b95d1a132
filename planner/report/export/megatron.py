"""Megatron-LM ``pretrain_gpt.py`` arguments for a plan.

Names checked against NVIDIA/Megatron-LM tag ``core_v0.19.0`` (commit 5be9626):
``megatron/training/arguments.py`` and the config dataclasses it turns into flags
(``TransformerConfig``, ``TrainingConfig``, ...); the list is
``tests/data/framework_args/megatron.txt``. Megatron's default rank order ``tp-cp-ep-dp-pp`` is the
planner's (TP innermost, PP outermost), so the placement file's ranks are Megatron's ranks.
"""

from __future__ import annotations

from itertools import groupby

from planner.report.export.assumed import (
    DP_OVERLAP,
    MODEL_ROPE,
    dp_overlapped,
    express_framework,
    express_native_gather_and_cast,
    note_unexpressed,
)
from planner.report.export.job import (
    EP_OVERLAP_FIELDS,
    ExportJob,
    ExportResult,
    comment_block,
    env_lines,
    moe_execution_fields,
    mtp_layers,
    pipeline_split,
    split_note,
    split_recompute_settings,
    training_header,
)
from planner.report.export.mcore import (
    UNEXPRESSED_WHERE,
    attention_backend,
    cp_comm_args,
    fp8_param_gather,
    fused_grouped_mlp,
    mcore_defaults,
    moe_capacity,
    offload_layers,
    optimizer_instances,
    precision_aware_optimizer,
)
from planner.report.quote import comment_text, shell_word
from planner.specs.model import ModelSpec

FRAMEWORK = "Megatron-LM pretrain_gpt.py"
VERSION = "core_v0.19.0 (5be9626)"

Group = tuple[str, list[str]]

_PRECISION: dict[str, list[str]] = {
    "bf16": ["--bf16"],
    "fp16": ["--fp16"],
    "fp8": ["--bf16", "--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"],
    "mxfp8": ["--bf16", "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"],
    "nvfp4": ["--bf16", "--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"],
}


def pipeline_layout(counts: list[int], mtp: tuple[int, int | None] = (0, None)) -> str:
    """Megatron's ``--pipeline-model-parallel-layout`` string for these layers per chunk
    (``E`` embedding, ``t`` transformer layer, ``m`` MTP layer, ``L`` loss; chunks in layer
    order, ``|`` apart; ``mtp`` = (MTP layers, their chunk)), as
    ``PipelineParallelLayerLayout.parse_str_to_list`` reads it. A run of three or more equal
    chunks before the last is written once as a ``( ... |)*n`` group, which that parser unrolls
    (NVIDIA's DeepSeek-V3 recipes spell their 16 stages ``Et*4|(t*4|)*14tmL``).

    >>> pipeline_layout([7, 8, 7])
    'Et*7|t*8|t*7L'
    >>> pipeline_layout([4, 3, 0], (1, 1))
    'Et*4|t*3m|L'
    >>> pipeline_layout([4] * 16, (1, 15)), pipeline_layout([0] + [1] * 126 + [0])
    ('Et*4|(t*4|)*14t*4mL', 'E|(t*1|)*126L')
    """
    last = len(counts) - 1
    chunks = [
        ("E" if i == 0 else "")
        + (f"t*{n}" if n else "")
        + ("m" * mtp[0] if i == mtp[1] else "")
        + ("L" if i == last else "")
        for i, n in enumerate(counts)
    ]
    parts: list[str] = []
    for chunk, group in groupby(chunks[:last]):  # each followed by a separator
        run = len(list(group))
        parts.append(f"({chunk}|)*{run}" if run >= 3 else f"{chunk}|" * run)
    return "".join(parts) + chunks[last]


def _parallel(job: ExportJob) -> Group:
    layout, model = job.train[0].layout, job.model
    args = [
        "--tensor-model-parallel-size", str(layout.tp),
        "--pipeline-model-parallel-size", str(layout.pp),
    ]  # fmt: skip
    if layout.tp > 1 and job.train[1].sequence_parallel:
        args.append("--sequence-parallel")
    job.express("sequence_parallel")
    if layout.cp > 1:
        args += ["--context-parallel-size", str(layout.cp)]
        args += cp_comm_args(job, "--cp-comm-type", "--hierarchical-context-parallel-sizes")
    if model.moe is not None:
        args += ["--expert-model-parallel-size", str(layout.ep)]
        args += ["--expert-tensor-parallel-size", str(layout.etp)]
        fields = moe_execution_fields(job)
        if job.train[1].ep_comm_overlap:
            fields += EP_OVERLAP_FIELDS
        job.express("moe_dispatch_dedup", "ep_comm_overlap")
        for name, value in fields:
            args.append("--" + name.replace("_", "-"))
            if value != "true":
                args.append(value)
    elif layout.ep > 1:
        job.note(f"ep={layout.ep} ignored: {model.name} has no experts")
    if layout.pp > 1:
        args += _split(job)
    return "parallelism (rank order tp-cp-ep-dp-pp, Megatron's default)", args


def _split(job: ExportJob) -> list[str]:
    kind, counts = pipeline_split(job)
    if kind == "even":
        vpp = job.train[0].layout.vpp
        return ["--num-virtual-stages-per-pipeline-rank", str(vpp)] if vpp > 1 else []
    split_note(job, counts)
    if kind == "first_last":
        return [
            "--decoder-first-pipeline-num-layers", str(counts[0]),
            "--decoder-last-pipeline-num-layers", str(counts[-1]),
        ]  # fmt: skip
    return ["--pipeline-model-parallel-layout", pipeline_layout(counts, mtp_layers(job))]


def _batch(job: ExportJob) -> Group:
    layout, workload = job.train[0].layout, job.train[1]
    args = [
        "--micro-batch-size", str(layout.mbs),
        "--global-batch-size", str(workload.global_batch),
        "--seq-length", str(workload.seq_len),
        "--max-position-embeddings", str(max(job.model.max_context, workload.seq_len)),
    ]  # fmt: skip
    job.express("seq_len", "global_batch")
    return f"batch: {job.num_microbatches} micro-batches per replica per step", args


def _memory(job: ExportJob) -> Group:
    layout, workload = job.train[0].layout, job.train[1]
    args: list[str] = []
    recompute = split_recompute_settings(job)
    job.express("recompute_modules", "recompute_num_layers")
    if recompute.granularity is not None:
        args += ["--recompute-granularity", recompute.granularity]
    if recompute.modules is not None:
        args += ["--recompute-modules", *recompute.modules]
    if recompute.method is not None:
        args += ["--recompute-method", recompute.method]
        args += ["--recompute-num-layers", str(recompute.num_layers)]
    if layout.zero >= 1:
        args.append("--use-distributed-optimizer")
    instances = optimizer_instances(job)
    if instances is not None:
        args += ["--num-distributed-optimizer-instances", str(instances)]
    if workload.ddp_bucket_params is not None:
        args += ["--ddp-bucket-size", str(workload.ddp_bucket_params)]
        job.express("ddp_bucket_params")
    offloaded = offload_layers(job)
    if offloaded is not None:
        args += ["--cpu-offloading-num-layers", str(offloaded)]
    if layout.zero >= 2:
        strategy = "optim_grads" if layout.zero == 2 else "optim_grads_params"
        args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy]
        args += ["--ckpt-format", "fsdp_dtensor"]
        job.note(
            f"ZeRO-{layout.zero} is Megatron-FSDP ({strategy}); it needs the fsdp_dtensor "
            "checkpoint format and CUDA_DEVICE_MAX_CONNECTIONS unset or > 1"
        )
    precision = str(layout.precision)
    if precision not in _PRECISION:
        nearest = "nvfp4" if precision == "mxfp4" else "bf16"
        job.note(
            f"Megatron-LM has no {precision} training recipe: nearest is {nearest} "
            f"({' '.join(_PRECISION[nearest])})"
        )
        precision = nearest
    else:
        job.express("precision")
    args += _PRECISION[precision]
    if fp8_param_gather(job):
        args.append("--fp8-param-gather")
    if workload.grad_reduce_dtype == "bf16":
        args.append("--grad-reduce-in-bf16")
    else:
        args.append("--accumulate-allreduce-grads-in-fp32")
    job.express("grad_reduce_dtype")
    if precision_aware_optimizer(job):  # TE's FusedAdam with bf16 moments
        args += [
            "--use-precision-aware-optimizer",
            "--exp-avg-dtype",
            "bf16",
            "--exp-avg-sq-dtype",
            "bf16",
        ]
    return f"recompute {layout.recompute}, ZeRO-{layout.zero}, {layout.precision}", args


def _overlap(job: ExportJob) -> Group:
    """TP and DP overlap, attention, loss and CUDA graphs: how the step was modelled to run."""
    layout, workload = job.train[0].layout, job.train[1]
    args: list[str] = []
    if job.tp_overlap_runs:
        args.append("--tp-comm-overlap")
        if not workload.sequence_parallel:
            job.note(
                "Megatron-LM's --tp-comm-overlap needs --sequence-parallel; without it the "
                "TP collectives run exposed"
            )
    job.note_tp_overlap_off("--tp-comm-overlap")
    job.express("tp_comm_overlap")
    if layout.dp * layout.cp > 1 and dp_overlapped(job):
        args.append("--overlap-grad-reduce")
        if layout.zero >= 1:
            args.append("--overlap-param-gather")
    job.express(DP_OVERLAP)  # Megatron-LM reduces after the backward without the two flags
    args += ["--attention-backend", attention_backend(workload)]
    job.express("flash_attention", "attention_kernel")
    if workload.cross_entropy != "unfused":
        args += ["--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl"]
        args.append(workload.cross_entropy)
    job.express("cross_entropy")
    if job.model.moe is not None:
        if fused_grouped_mlp(job):  # with NVTE_CUTEDSL_FUSED_GROUPED_MLP=1 (job.env)
            args.append("--use-transformer-engine-op-fuser")
        args += _cuda_graphs(job)
    return "overlap, kernels and graphs the prediction assumes", args


def _cuda_graphs(job: ExportJob) -> list[str]:
    """MoE layers in whole-layer CUDA graphs (``moe_host_sync`` off: Transformer Engine graphs
    of each layer) and experts padded to capacity (:func:`moe_capacity`)."""
    workload = job.train[1]
    job.express("moe_host_sync")
    args = [] if workload.moe_host_sync else ["--cuda-graph-impl", "transformer_engine"]
    capacity = moe_capacity(job)
    if capacity is not None:
        args += ["--moe-expert-capacity-factor", capacity, "--moe-pad-expert-input-to-capacity"]
    return args


def _architecture(job: ExportJob) -> Group:
    model = job.model
    args = [
        "--num-layers", str(model.num_layers),
        "--hidden-size", str(model.hidden_size),
        "--num-attention-heads", str(model.num_attention_heads),
        "--kv-channels", str(model.head_dim),
        "--normalization", "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm",
        "--position-embedding-type", _position_type(model),
        "--attention-dropout", "0.1" if model.dropout else "0.0",
        "--hidden-dropout", "0.1" if model.dropout else "0.0",
    ]  # fmt: skip
    if model.ffn_hidden_size:
        args += ["--ffn-hidden-size", str(model.ffn_hidden_size)]
    if model.mla is None and model.num_kv_heads < model.num_attention_heads:
        args += ["--group-query-attention", "--num-query-groups", str(model.num_kv_heads)]
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if model.qk_norm:
        args.append("--qk-layernorm")
    args += _activation_and_bias(job)
    args += _rope(job)
    args += _mla(model) + _moe(job)
    num_mtp = mtp_layers(job)[0]
    if num_mtp:
        args += ["--mtp-num-layers", str(num_mtp)]
        job.express("mtp_num_layers")
    unexpressed = [
        ("sliding-window attention", model.num_sliding_window_layers > 0),
        ("attention sinks", model.attention_sinks),
        ("a norm after each sub-block (Gemma 2/3)", model.post_norms),
        ("attention and MLP side by side on one norm (a parallel block)", model.parallel_block),
        ("a router bias (on the gate's logits)", model.moe is not None and model.moe.router_bias),
    ]
    for what, present in unexpressed:
        if present:
            job.note(f"{model.name} uses {what}: not set here (model-specific flags)")
    return f"model: {model.name} ({model.source})", args


LLAMA3_DEFAULTS = {"original_context": 8192, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
"""What Megatron-LM's ``--use-rope-scaling`` fixes (core/models/common/embeddings/
rotary_pos_embedding.py ``_apply_scaling``): only the factor is a flag."""
MLA_YARN_DEFAULTS = {"original_context": 4096, "beta_fast": 32.0, "beta_slow": 1.0}
"""MLATransformerConfig's YaRN fields that have no flag (transformer_config.py)."""


def _rope(job: ExportJob) -> list[str]:
    """Megatron-LM's rotary flags: base, rotated share, and the context scaling."""
    model = job.model
    if model.position_embedding != "rope":
        return []
    args = ["--rotary-base", whole_or_float(model.rope_theta)]
    if model.rotary_fraction < 1:
        args += ["--rotary-percent", f"{model.rotary_fraction:g}"]
    scaling = model.rope_scaling
    if scaling is not None and scaling.kind == "longrope":
        return args  # no LongRoPE in Megatron-LM: the rotary setting is said, not expressed
    job.express(MODEL_ROPE)
    if scaling is None:
        return args
    if scaling.kind == "llama3":
        _fixed_note(job, scaling, LLAMA3_DEFAULTS, "--use-rope-scaling")
        return [*args, "--use-rope-scaling", "--rope-scaling-factor", f"{scaling.factor:g}"]
    if scaling.kind == "linear":
        factor = scaling.factor
        if factor != int(factor):
            job.note(f"linear RoPE scaling x{factor:g}: Megatron-LM takes a whole factor")
        return [*args, "--rotary-seq-len-interpolation-factor", str(max(1, round(factor)))]
    args += ["--rotary-scaling-factor", f"{scaling.factor:g}"]
    if scaling.mscale is not None:
        args += ["--mscale", f"{scaling.mscale:g}"]
    if scaling.mscale_all_dim is not None:
        args += ["--mscale-all-dim", f"{scaling.mscale_all_dim:g}"]
    if model.mla is not None:  # MLA runs YaRN itself: --rope-type, and defaults for the rest
        _fixed_note(job, scaling, MLA_YARN_DEFAULTS, "MLA's YaRN")
        return ["--rope-type", "yarn", *args]
    if scaling.original_context is not None:
        args += ["--yarn-original-max-position-embeddings", str(scaling.original_context)]
    if scaling.beta_fast is not None:
        args += ["--yarn-beta-fast", f"{scaling.beta_fast:g}"]
    if scaling.beta_slow is not None:
        args += ["--yarn-beta-slow", f"{scaling.beta_slow:g}"]
    if scaling.truncate is False:
        args.append("--no-yarn-correction-range-round-to-int")
    return args


def _position_type(model: ModelSpec) -> str:
    """``--position-embedding-type``: YaRN is its own type outside MLA (MLA takes
    ``--rope-type``)."""
    if model.position_embedding != "rope":
        return "learned_absolute"
    yarn = model.rope_scaling is not None and model.rope_scaling.kind == "yarn"
    return "yarn" if yarn and model.mla is None else "rope"


def whole_or_float(value: float) -> str:
    """A float as an integer field takes it when whole (``500000``, not ``500000.0`` or
    ``5e+05``), else in full.

    >>> whole_or_float(1e6), whole_or_float(0.5)
    ('1000000', '0.5')
    """
    return str(int(value)) if value == int(value) else repr(value)


def _fixed_note(job: ExportJob, scaling: object, fixed: dict[str, float], what: str) -> None:
    """Note the scaling fields ``what`` fixes at other values than the model's."""
    for name, value in fixed.items():
        given = getattr(scaling, name)
        if given is not None and given != value:
            job.note(f"RoPE scaling {name} {given:g}: {what} fixes it at {value:g}")


def _activation_and_bias(job: ExportJob) -> list[str]:
    model = job.model
    args: list[str] = []
    if model.ffn_activation in ("swiglu", "swiglu_oai"):
        args.append("--swiglu")
    elif model.ffn_activation == "relu2":
        args.append("--squared-relu")
    elif model.ffn_activation != "gelu":
        job.note(f"FFN activation {model.ffn_activation}: no pretrain_gpt.py flag")
    if not (model.attention_bias or model.attention_output_bias or model.mlp_bias):
        args.append("--disable-bias-linear")
    elif model.attention_bias and not (model.attention_output_bias or model.mlp_bias):
        args += ["--disable-bias-linear", "--add-qkv-bias"]
    return args


def _mla(model: ModelSpec) -> list[str]:
    if model.mla is None:
        return []
    mla = model.mla
    args = ["--multi-latent-attention", "--kv-lora-rank", str(mla.kv_lora_rank)]
    if mla.q_lora_rank:
        args += ["--q-lora-rank", str(mla.q_lora_rank)]
    args += ["--qk-head-dim", str(mla.qk_nope_head_dim)]
    args += ["--qk-pos-emb-head-dim", str(mla.qk_rope_head_dim)]
    return [*args, "--v-head-dim", str(mla.v_head_dim)]


def _moe(job: ExportJob) -> list[str]:
    model = job.model
    if model.moe is None:
        return []
    moe = model.moe
    args = [
        "--num-experts", str(moe.num_experts),
        "--moe-router-topk", str(moe.top_k),
        "--moe-ffn-hidden-size", str(moe.expert_ffn_hidden_size),
    ]  # fmt: skip
    args += _router_scoring(job)
    if moe.limits_groups:  # group-limited routing: the token's experts from a few groups
        args += ["--moe-router-num-groups", str(moe.router_num_groups)]
        args += ["--moe-router-group-topk", str(moe.router_group_topk)]
    if moe.num_shared_experts:
        width = moe.shared_expert_width
        args += ["--moe-shared-expert-intermediate-size", str(moe.num_shared_experts * width)]
    if moe.layer_step > 1:  # Megatron-LM's pattern: 1 = MoE, one entry per layer
        pattern = [int(model.is_moe_layer(i)) for i in range(model.num_layers)]
        args += ["--moe-layer-freq", "[" + ",".join(map(str, pattern)) + "]"]
    elif moe.first_dense_layers:
        dense, sparse = moe.first_dense_layers, model.num_layers - moe.first_dense_layers
        args += ["--moe-layer-freq", f"([0]*{dense}+[1]*{sparse})"]
    return args


EXPERT_BIAS_SCORES = frozenset({"sigmoid"})
"""The spec's score functions with which Megatron-LM takes ``--moe-router-enable-expert-bias``:
TransformerConfig refuses it with any but sigmoid and sqrtsoftplus (transformer_config.py
``__post_init__``, line 2284 at core_v0.19.0)."""


def _router_scoring(job: ExportJob) -> list[str]:
    """The router's score function, aux-loss-free expert bias and top-k scaling
    (TransformerConfig ``moe_router_score_function``, ``moe_router_enable_expert_bias``,
    ``moe_router_topk_scaling_factor``, ``moe_router_pre_softmax``;
    ``topk_routing_with_score_function`` in core/transformer/moe/moe_utils.py adds the bias to
    the sigmoid scores only to choose the experts, takes the softmax of the top-k logits (so the
    weights sum to one) unless pre-softmax, which takes the top-k of the softmax over every
    expert as it is, divides top-k sigmoid scores by their sum, and multiplies the chosen weights
    by the factor). What Megatron-LM cannot build is noted, not dropped silently."""
    model = job.model
    moe = model.moe
    if moe is None:
        return []
    args: list[str] = []
    if moe.router_score != "softmax":
        args += ["--moe-router-score-function", moe.router_score]
    if moe.router_expert_bias and moe.router_score in EXPERT_BIAS_SCORES:
        args.append("--moe-router-enable-expert-bias")
        job.note(
            f"{model.name}'s aux-loss-free expert bias updates at --moe-router-bias-update-rate's "
            "default 1e-3 (DeepSeek-V3's gamma, arXiv 2412.19437 section 4.2): the model spec "
            "does not record a rate"
        )
    elif moe.router_expert_bias:
        job.note(
            f"{model.name} adds an aux-loss-free expert bias to {moe.router_score} scores: "
            "Megatron-LM takes --moe-router-enable-expert-bias only with sigmoid scores; "
            "not set here"
        )
    if not moe.router_topk_norm and moe.top_k > 1:
        if moe.router_score == "softmax":  # softmax over every expert, top-k kept as it is
            args.append("--moe-router-pre-softmax")
        else:
            job.note(
                f"{model.name} weighs its top-{moe.top_k} {moe.router_score} scores as they are: "
                "Megatron-LM divides them by their sum (moe_utils.py "
                "topk_routing_with_score_function); not expressible here"
            )
    scale = moe.router_topk_scale
    if scale != 1:
        args += ["--moe-router-topk-scaling-factor", whole_or_float(scale)]
    return args


def _smoke_run(job: ExportJob) -> Group:
    args = [
        "--mock-data",
        "--tokenizer-type", "NullTokenizer",
        "--vocab-size", str(job.model.vocab_size),
        "--train-iters", "100",
        "--lr", "1.0e-4",
    ]  # fmt: skip
    return "data: synthetic tokens; use --data-path and a real tokenizer for training", args


def megatron_groups(job: ExportJob) -> list[Group]:
    """The arguments in commented groups: parallelism, batch, memory, model, data."""
    groups = [
        _parallel(job), _batch(job), _memory(job), _overlap(job), _architecture(job),
        _smoke_run(job),
    ]  # fmt: skip
    mcore_defaults(job)
    express_framework(job, "megatron")
    note_unexpressed(
        job,
        "Megatron-LM",
        {"expert_load_imbalance": "routing decides it (--moe-router-force-load-balancing "
         "forces balance, for benchmarks only)",
         "optimizer_state_dtype": "--use-precision-aware-optimizer with --exp-avg-dtype bf16 "
         "needs the distributed optimizer (--use-distributed-optimizer, ZeRO-1 or 2)",
         **UNEXPRESSED_WHERE, **express_native_gather_and_cast(job, "megatron")},
    )  # fmt: skip
    return [(title, args) for title, args in groups if args]


def megatron_args(job: ExportJob) -> list[str]:
    """The ``pretrain_gpt.py`` argument list, in order (notes go to ``job.notes``)."""
    return [arg for _, args in megatron_groups(job) for arg in args]


def render(job: ExportJob) -> ExportResult:
    """A bash array ``MEGATRON_ARGS=( ... )`` with a comment per group and the notes, after
    ``export NAME=VALUE`` lines for the environment variables the run needs (``job.env``)."""
    groups = megatron_groups(job)
    header = training_header(
        job,
        [f"{FRAMEWORK} arguments; names checked against NVIDIA/Megatron-LM {VERSION}"],
        ['run: torchrun --nnodes ... --nproc-per-node ... pretrain_gpt.py "${MEGATRON_ARGS[@]}"'],
        count=f"{job.train[0].num_gpus} GPUs = {job.num_nodes} node(s) x {job.gpus_per_node}",
    )
    lines = [*comment_block(header), *env_lines(job), "MEGATRON_ARGS=("]
    for title, args in groups:
        lines.append(f"  # {comment_text(title)}")
        lines += [f"  {line}" for line in _pairs(args)]
    lines.append(")")
    return ExportResult(
        format="megatron",
        framework=FRAMEWORK,
        framework_version=VERSION,
        text="\n".join(lines) + "\n",
        args=[arg for _, args in groups for arg in args],
        notes=list(job.notes),
        env=dict(job.env),
    )


def _pairs(args: list[str]) -> list[str]:
    """One flag per line, with its value when it has one."""
    lines: list[str] = []
    for arg in args:
        if arg.startswith("--") or not lines:
            lines.append(shell_word(arg))
        else:
            lines[-1] += " " + shell_word(arg)
    return lines
