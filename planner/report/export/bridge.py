"""Megatron-Bridge (NeMo) recipe overrides for a plan: Hydra-style ``key=value`` on the
``ConfigContainer`` (``scripts/training/run_recipe.py --recipe NAME key=value ...``).

Names checked against NVIDIA-NeMo/Megatron-Bridge tag ``v0.6.0`` (commit 51885cf): the
``ConfigContainer`` sections ``model`` (GPTModelProvider, i.e. Megatron-Core's TransformerConfig
at the pinned submodule cd4afff), ``train``, ``dataset``, ``ddp``, ``optimizer``, ``dist``,
``checkpoint``, and the registered ``mixed_precision`` recipe names; the list is
``tests/data/framework_args/bridge.txt``.
"""

from __future__ import annotations

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
    CP_COMM_TYPE,
    UNEXPRESSED_WHERE,
    attention_backend,
    cp_hierarchy,
    fp8_param_gather,
    fused_grouped_mlp,
    mcore_defaults,
    moe_capacity,
    offload_layers,
    optimizer_instances,
    precision_aware_optimizer,
)
from planner.report.export.megatron import pipeline_layout, whole_or_float
from planner.report.quote import shell_word
from planner.specs.formats import EIGHT_BIT_PARAM_FORMATS

FRAMEWORK = "Megatron-Bridge run_recipe.py ConfigContainer overrides"
VERSION = "v0.6.0 (51885cf)"

_MIXED_PRECISION = {
    "bf16": "bf16_mixed",
    "fp16": "fp16_mixed",
    "fp8": "bf16_with_fp8_current_scaling_mixed",
    "mxfp8": "bf16_with_mxfp8_mixed",
    "nvfp4": "bf16_with_nvfp4_mixed",
}


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _parallel(job: ExportJob) -> list[str]:
    layout = job.train[0].layout
    out = [
        f"model.tensor_model_parallel_size={layout.tp}",
        f"model.pipeline_model_parallel_size={layout.pp}",
        f"model.context_parallel_size={layout.cp}",
        f"model.sequence_parallel={_bool(layout.tp > 1 and job.train[1].sequence_parallel)}",
    ]
    job.express("sequence_parallel")
    if layout.cp > 1:
        job.express("cp_comm")
        if job.train[1].cp_impl == "te":  # Megatron Core's context parallelism is TE's
            job.express("cp_impl")
        out.append(f"model.cp_comm_type={CP_COMM_TYPE[job.train[1].cp_comm]}")
        if job.train[1].cp_comm == "a2a+p2p":
            sizes = ",".join(str(size) for size in cp_hierarchy(job))
            out.append(f"model.hierarchical_context_parallel_sizes=[{sizes}]")
    if job.model.moe is not None:
        job.express("moe_dispatch_dedup", "ep_comm_overlap")
        out.append(f"model.expert_model_parallel_size={layout.ep}")
        out.append(f"model.expert_tensor_parallel_size={layout.etp}")
        out += [f"model.{name}={value}" for name, value in moe_execution_fields(job)]
        if job.train[1].ep_comm_overlap:
            out += [f"comm_overlap.{name}={value}" for name, value in EP_OVERLAP_FIELDS]
    kind, counts = pipeline_split(job) if layout.pp > 1 else ("even", [])
    vpp = str(layout.vpp) if layout.vpp > 1 and kind == "even" else "null"
    out.append(f"model.virtual_pipeline_model_parallel_size={vpp}")
    if kind == "first_last":
        split_note(job, counts)
        out.append(f"model.num_layers_in_first_pipeline_stage={counts[0]}")
        out.append(f"model.num_layers_in_last_pipeline_stage={counts[-1]}")
    elif kind == "custom":
        split_note(job, counts)
        layout_string = pipeline_layout(counts, mtp_layers(job))
        out.append(f"model.pipeline_model_parallel_layout='{layout_string}'")
    return out


def _batch_and_memory(job: ExportJob) -> list[str]:
    layout, workload = job.train[0].layout, job.train[1]
    out = [
        f"train.micro_batch_size={layout.mbs}",
        f"train.global_batch_size={workload.global_batch}",
        f"dataset.seq_length={workload.seq_len}",
        f"model.seq_length={workload.seq_len}",
    ]
    job.express("seq_len", "global_batch", "recompute_modules", "recompute_num_layers")
    recompute = split_recompute_settings(job)
    out.append(f"model.recompute_granularity={recompute.granularity or 'null'}")
    if recompute.modules is not None:
        out.append(f"model.recompute_modules=[{','.join(recompute.modules)}]")
    if recompute.method is not None:
        out += [
            f"model.recompute_method={recompute.method}",
            f"model.recompute_num_layers={recompute.num_layers}",
        ]
    distributed = _bool(layout.zero >= 1)
    out += [
        f"ddp.use_distributed_optimizer={distributed}",
        f"optimizer.use_distributed_optimizer={distributed}",
    ]
    if layout.zero >= 2:
        strategy = "optim_grads" if layout.zero == 2 else "optim_grads_params"
        out += [
            "ddp.use_megatron_fsdp=true",
            "dist.use_megatron_fsdp=true",
            f"ddp.data_parallel_sharding_strategy={strategy}",
            "checkpoint.ckpt_format=fsdp_dtensor",
        ]
        job.note(f"ZeRO-{layout.zero} is Megatron-FSDP ({strategy})")
    instances = optimizer_instances(job)
    if instances is not None:
        out.append(f"ddp.num_distributed_optimizer_instances={instances}")
    if workload.ddp_bucket_params is not None:
        out.append(f"ddp.bucket_size={workload.ddp_bucket_params}")
        job.express("ddp_bucket_params")
    offloaded = offload_layers(job)
    if offloaded is not None:
        out += [
            "model.cpu_offloading=true",
            f"model.cpu_offloading_num_layers={offloaded}",
            "model.cpu_offloading_activations=true",
            "model.cpu_offloading_weights=false",
        ]
    out.append(f"ddp.grad_reduce_in_fp32={_bool(workload.grad_reduce_dtype == 'fp32')}")
    job.express("grad_reduce_dtype")
    if precision_aware_optimizer(job):
        # the overrides turn "torch.bfloat16" back into the field's torch.dtype
        # (omegaconf_utils, str_to_dtype)
        out += [
            "optimizer.use_precision_aware_optimizer=true",
            "optimizer.exp_avg_dtype=torch.bfloat16",
            "optimizer.exp_avg_sq_dtype=torch.bfloat16",
        ]
    return out


def _overlap(job: ExportJob) -> list[str]:
    """TP and DP overlap, attention, loss and MoE CUDA graphs, as the prediction assumes them
    (Megatron-Bridge applies ``comm_overlap`` over the model's TP overlap, so it is set there)."""
    layout, workload = job.train[0].layout, job.train[1]
    out: list[str] = []
    if layout.tp > 1:
        out.append(f"comm_overlap.tp_comm_overlap={_bool(job.tp_overlap_runs)}")
        job.note_tp_overlap_off("comm_overlap.tp_comm_overlap")
    job.express("tp_comm_overlap")
    if layout.dp * layout.cp > 1:
        overlap = _bool(dp_overlapped(job))
        out.append(f"ddp.overlap_grad_reduce={overlap}")
        if layout.zero >= 1:
            out.append(f"ddp.overlap_param_gather={overlap}")
    job.express(DP_OVERLAP)
    out.append(f"model.attention_backend={attention_backend(workload)}")
    job.express("attention_kernel")
    fused = workload.cross_entropy != "unfused"
    out.append(f"model.cross_entropy_loss_fusion={_bool(fused)}")
    if fused:
        out.append(f"model.cross_entropy_fusion_impl={workload.cross_entropy}")
    job.express("flash_attention", "cross_entropy")
    if job.model.moe is not None:
        if fused_grouped_mlp(job):  # with NVTE_CUTEDSL_FUSED_GROUPED_MLP=1 (job.env)
            out.append("model.use_transformer_engine_op_fuser=true")
        job.express("moe_host_sync")
        if not workload.moe_host_sync:
            out.append("model.cuda_graph_impl=transformer_engine")
        capacity = moe_capacity(job)
        if capacity is not None:
            out.append(f"model.moe_expert_capacity_factor={capacity}")
            out.append("model.moe_pad_expert_input_to_capacity=true")
    return out


def _rope(job: ExportJob) -> list[str]:
    """The rotary embedding on the model provider (GPTModelProvider; MLATransformerConfig's
    own YaRN fields for MLA models)."""
    model = job.model
    if model.position_embedding != "rope":
        return []
    out = [f"model.rotary_base={whole_or_float(model.rope_theta)}"]
    if model.rotary_fraction < 1:
        out.append(f"model.rotary_percent={model.rotary_fraction:g}")
    scaling = model.rope_scaling
    if scaling is not None and scaling.kind == "longrope":
        return out  # no LongRoPE on the provider: the rotary setting is said, not expressed
    job.express(MODEL_ROPE)
    if scaling is None:
        return out
    if scaling.kind == "llama3":
        return [*out, "model.rope_scaling=true", f"model.rope_scaling_factor={scaling.factor:g}"]
    if scaling.kind == "linear":
        return [*out, f"model.seq_len_interpolation_factor={scaling.factor:g}"]
    fields = {
        "rotary_scaling_factor": scaling.factor,
        "original_max_position_embeddings": scaling.original_context,
        "beta_fast": scaling.beta_fast,
        "beta_slow": scaling.beta_slow,
        "mscale": scaling.mscale,
        "mscale_all_dim": scaling.mscale_all_dim,
    }
    if model.mla is not None:  # MLATransformerConfig's unprefixed YaRN fields
        return out + [f"model.{k}={v:g}" for k, v in fields.items() if v is not None]
    out.append("model.position_embedding_type=yarn")
    out += [f"model.yarn_{k}={v:g}" for k, v in fields.items() if v is not None]
    if scaling.truncate is not None:
        out.append(f"model.yarn_correction_range_round_to_int={_bool(scaling.truncate)}")
    return out


def _precision(job: ExportJob) -> list[str]:
    precision = str(job.train[0].layout.precision)
    if precision not in _MIXED_PRECISION:
        nearest = "nvfp4" if precision == "mxfp4" else "bf16"
        job.note(
            f"Megatron-Bridge has no {precision} mixed-precision recipe: nearest is "
            f"{_MIXED_PRECISION[nearest]}"
        )
        precision = nearest
    else:
        job.express("precision")
    out = [f"mixed_precision={_MIXED_PRECISION[precision]}"]
    if precision in EIGHT_BIT_PARAM_FORMATS:  # the recipe turns fp8_param_gather on: say ours
        out.append(f"mixed_precision.fp8_param_gather={_bool(fp8_param_gather(job))}")
    return out


def _mtp(job: ExportJob) -> list[str]:
    """Multi-token-prediction modules (TransformerConfig.mtp_num_layers)."""
    count = mtp_layers(job)[0]
    if not count:
        return []
    job.express("mtp_num_layers")
    return [f"model.mtp_num_layers={count}"]


def bridge_overrides(job: ExportJob) -> list[str]:
    """The overrides, in order (notes go to ``job.notes``)."""
    out = _parallel(job) + _batch_and_memory(job) + _precision(job) + _overlap(job) + _rope(job)
    out += _mtp(job)
    mcore_defaults(job)
    express_framework(job, "megatron")
    note_unexpressed(
        job,
        "Megatron-Bridge",
        {"expert_load_imbalance": "routing decides it (model.moe_router_force_load_balancing "
         "forces balance, for benchmarks only)",
         "optimizer_state_dtype": "optimizer.use_precision_aware_optimizer with bf16 "
         "exp_avg_dtype needs the distributed optimizer (ZeRO-1 or 2)",
         **UNEXPRESSED_WHERE, **express_native_gather_and_cast(job, "megatron")},
    )  # fmt: skip
    return out


def render(job: ExportJob) -> ExportResult:
    """A bash array ``BRIDGE_OVERRIDES=( ... )``, one override per line, after ``export
    NAME=VALUE`` lines for the environment variables the run needs (``job.env``; a NeMo-Run
    executor's ``env_vars``)."""
    overrides = bridge_overrides(job)
    header = training_header(
        job,
        [f"{FRAMEWORK}; names checked against NVIDIA-NeMo/Megatron-Bridge {VERSION}"],
        [
            "use with the model's recipe, e.g.: torchrun ... scripts/training/run_recipe.py "
            '--recipe <model>_pretrain_config "${BRIDGE_OVERRIDES[@]}"',
            "the recipe sets the architecture; these set the layout, batch, precision, overlaps "
            "and RoPE the prediction assumes",
        ],
    )
    lines = [*comment_block(header), *env_lines(job), "BRIDGE_OVERRIDES=("]
    lines += [f"  {shell_word(item)}" for item in overrides]
    lines.append(")")
    return ExportResult(
        format="bridge",
        framework=FRAMEWORK,
        framework_version=VERSION,
        text="\n".join(lines) + "\n",
        args=overrides,
        notes=list(job.notes),
        env=dict(job.env),
    )
