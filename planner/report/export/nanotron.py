"""Hugging Face Nanotron config sections for a plan: ``parallelism``, ``tokens``, ``optimizer``
(the ZeRO stage and the gradient accumulator), ``model`` (dtype, DDP buckets and the Llama
shape) and ``logging``.

Target: huggingface/nanotron commit c252843 (2025-03-10), the commit its framework profile
(``topologies/frameworks/nanotron.yaml``) was read at. The keys are in
``tests/data/framework_args/nanotron.txt``, each read where ``src/nanotron/config/config.py``
(``Config``, ``TokensArgs``, ``OptimizerArgs``, ``ModelArgs``, ``LoggingArgs``),
``config/parallelism_config.py`` (``ParallelismArgs``) and ``config/models_config.py``
(``LlamaConfig``) declare them. Nanotron's data-parallel replicas hold whole pipelines of TP
ranks; it places the pipeline blocks itself (``models/base.py`` ``build_model``, by a compute
cost per block), so the output names no split.
"""

from __future__ import annotations

from planner.catalog.frameworks import load_framework
from planner.cost.expert import dispatcher_syncs_host
from planner.cost.memory import GRAD_BYTES
from planner.report.export.assumed import (
    DP_OVERLAP,
    MODEL_ROPE,
    buckets_dp_sync,
    dp_overlapped,
    express_framework,
    express_native_gather_and_cast,
    note_unexpressed,
    setting_words,
)
from planner.report.export.job import (
    ExportJob,
    ExportResult,
    llama_style_decoder,
    pipeline_split,
    yaml_sections_result,
)
from planner.specs.layout import Recompute
from planner.units import BINARY_PREFIX

FRAMEWORK = "Nanotron config sections (YAML)"
VERSION = "c252843 (2025-03-10)"

Value = int | float | str | bool | None | dict[str, object]

_ENGINES = {"1f1b": "1f1b", "gpipe": "afab"}
"""The planner's pipeline schedule -> ``parallelism.pp_engine``: one-forward-one-backward, or
all forwards then all backwards (``afab``, GPipe's order; ``config/utils_config.py``
``cast_str_to_pipeline_engine``)."""

BUCKET_GRAD_BYTES = GRAD_BYTES["bf16"]
"""Bytes of one gradient in a DDP bucket: the bf16 model's own gradients (Nanotron's fp32
accumulator adds each bucket to its fp32 copy in a communication hook); torch DDP's
``bucket_cap_mb`` counts MiB of them."""


def _parallelism(job: ExportJob) -> dict[str, Value]:
    """``parallelism``: the degrees, the pipeline engine and the TP mode."""
    layout, workload = job.train[0].layout, job.train[1]
    out: dict[str, Value] = {"dp": _replicas(job), "pp": layout.pp, "tp": layout.tp}
    if out["dp"] != layout.dp:
        job.note(
            f"cp={layout.cp}: Nanotron at {VERSION} has no context parallelism; its ranks are "
            f"folded into dp ({layout.dp} x {layout.cp} = {out['dp']}: the same GPUs and global "
            "batch, each rank holding whole sequences, more activation memory than the "
            "prediction assumed)"
        )
    elif layout.cp > 1:
        job.note(
            f"cp={layout.cp}: Nanotron at {VERSION} has no context parallelism, and the global "
            f"batch does not split over dp x cp = {layout.dp * layout.cp} replicas: dp is "
            f"{layout.dp}, on {layout.dp * layout.tp * layout.pp} GPUs"
        )
    engine = _ENGINES.get(workload.pipeline_schedule)
    if layout.vpp > 1:
        job.note(
            f"vpp={layout.vpp}: Nanotron has no interleaved pipeline; its 1F1B engine runs one "
            "stage a rank"
        )
    elif engine is not None:
        job.express("pipeline_schedule")
    out["pp_engine"] = engine or "1f1b"
    # REDUCE_SCATTER: all-gather / reduce-scatter around the linears, norms on the sharded
    # sequence (sequence parallelism); ALL_REDUCE: Megatron's plain tensor parallelism
    out["tp_mode"] = "REDUCE_SCATTER" if workload.sequence_parallel else "ALL_REDUCE"
    if layout.tp > 1:
        job.express("sequence_parallel")
        # on in REDUCE_SCATTER mode, as its scaling benchmarks set it (scripts/
        # scaling_benchmarks.py); it starts the column-parallel GEMM on the first all-gathered
        # chunk only, which the profile prices as no overlap (tp_comm_overlap false)
        out["tp_linear_async_communication"] = workload.sequence_parallel
        if job.tp_overlap_runs:
            job.note(
                f"the prediction assumes {setting_words(job, 'tp_comm_overlap')}: Nanotron's "
                "tp_linear_async_communication overlaps only the start of the column-parallel "
                "all-gather"
            )
        job.express("tp_comm_overlap")
    out["recompute_layer"] = _recompute(job)
    if job.model.moe is not None:
        out["expert_parallel_size"] = layout.ep
    return out


def _replicas(job: ExportJob) -> int:
    """Nanotron's data-parallel replicas: dp, with the context-parallel ranks folded in where
    the global batch splits over them in whole micro-batches (it has no context parallelism)."""
    layout, workload = job.train[0].layout, job.train[1]
    folded = layout.dp * layout.cp
    return folded if workload.global_batch % (folded * layout.mbs) == 0 else layout.dp


def _recompute(job: ExportJob) -> bool:
    """``recompute_layer``: every decoder layer recomputed (full), or none."""
    layout, workload = job.train[0].layout, job.train[1]
    if layout.recompute is Recompute.FULL:
        job.express("recompute_num_layers")
        if workload.recompute_num_layers is not None:
            job.note(
                f"the prediction assumes {setting_words(job, 'recompute_num_layers')}: "
                "Nanotron's recompute_layer recomputes every layer (more compute, less memory)"
            )
        return True
    if layout.recompute is Recompute.SELECTIVE:
        job.note(
            "selective recomputation: Nanotron recomputes whole layers or none; none is set "
            "(more memory than the prediction assumed)"
        )
    return False


def _tokens(job: ExportJob) -> dict[str, Value]:
    """``tokens``: the sequence, the micro-batch and the accumulation per replica (the global
    batch is dp x micro_batch_size x batch_accumulation_per_replica)."""
    job.express("seq_len", "global_batch")
    layout, workload = job.train[0].layout, job.train[1]
    return {
        "sequence_length": workload.seq_len,
        "micro_batch_size": layout.mbs,
        "batch_accumulation_per_replica": workload.global_batch // (_replicas(job) * layout.mbs),
    }


def _optimizer(job: ExportJob) -> dict[str, Value]:
    """``optimizer``: ZeRO-0 or -1 and the fp32 gradient accumulator. With the accumulator and
    ZeRO-1 the trainer builds no DDP and all-reduces the whole fp32 gradient buffer after the
    last backward (the profile's ``zero1_grad_sync: all_reduce``)."""
    layout, workload = job.train[0].layout, job.train[1]
    zero = layout.zero
    if zero > 1:
        job.note(f"ZeRO-{zero}: Nanotron shards the optimizer state at most (ZeRO-1) is set")
        zero = 1
    fp32 = workload.grad_reduce_dtype == "fp32"
    job.express("grad_reduce_dtype")
    if zero == 1 and workload.zero1_grad_sync == "reduce_scatter" and layout.dp > 1:
        job.note(
            f"the prediction assumes {setting_words(job, 'zero1_grad_sync')}: Nanotron's ZeRO-1 "
            "all-reduces the gradients (its fp32 accumulator's whole buffer after the backward, "
            "or torch DDP's buckets with bf16 gradients)"
        )
    if not workload.fp32_params and workload.master_copy:  # the fp32 accumulator's copy
        job.express("fp32_params", "master_copy")
    if workload.optimizer_state_dtype == "fp32":
        job.express("optimizer_state_dtype")
    return {"zero_stage": zero, "accumulate_grad_in_fp32": fp32}


def _llama(job: ExportJob) -> dict[str, Value] | None:
    """``model.model_config`` as Nanotron's LlamaConfig, or None (with a note) for a model its
    Llama cannot run: RMSNorm, full RoPE without scaling (Nanotron's Llama reads rope_theta
    only), SwiGLU, no MoE, MLA, sliding window, biasless heads of hidden / heads."""
    model, workload = job.model, job.train[1]
    plain = (
        llama_style_decoder(model) and model.moe is None and model.ffn_activation == "swiglu"
        and model.head_dim * model.num_attention_heads == model.hidden_size
    )  # fmt: skip
    if not plain:
        job.note(
            f"model '{model.name}' is not a plain Llama decoder: model_config is left to "
            "Nanotron's own config for it (its shape is in the plan)"
        )
        return None
    if model.rope_scaling is None and model.rotary_fraction == 1:
        job.express(MODEL_ROPE)
    return {
        "is_llama_config": True,
        "hidden_act": "silu",
        "hidden_size": model.hidden_size,
        "intermediate_size": model.ffn_hidden_size,
        "num_attention_heads": model.num_attention_heads,
        "num_key_value_heads": model.num_kv_heads,
        "num_hidden_layers": model.num_layers,
        "vocab_size": model.vocab_size,
        "max_position_embeddings": workload.seq_len,
        "rope_theta": float(model.rope_theta),
        "tie_word_embeddings": model.tied_embeddings,
    }


def _model(job: ExportJob) -> dict[str, Value]:
    """``model``: the dtype, the DDP bucket size where the prediction reduced in buckets, and
    the Llama shape."""
    out: dict[str, Value] = {"dtype": "bfloat16"}
    workload = job.train[1]
    if workload.ddp_bucket_params is not None and buckets_dp_sync(job):
        out["ddp_bucket_cap_mb"] = max(
            1, round(workload.ddp_bucket_params * BUCKET_GRAD_BYTES / BINARY_PREFIX["M"])
        )
        job.express("ddp_bucket_params")
    config = _llama(job)
    if config is not None:
        out["model_config"] = config
    return out


def _pipeline_split(job: ExportJob) -> None:
    """Nanotron places the blocks itself: say so where the prediction assumed another split."""
    plan = job.train[0]
    if plan.layout.pp == 1:
        return
    if plan.pipeline_split is not None and plan.pipeline_split.method == "framework":
        return
    counts = pipeline_split(job)[1]
    job.note(
        f"{job.model.num_layers} layers over pp = {plan.layout.pp} stages: the prediction "
        f"assumed {counts}; Nanotron places the blocks by its own compute cost per block"
    )


def sections(job: ExportJob) -> dict[str, dict[str, Value]]:
    """Every section, in the order of Nanotron's example configs (notes go to ``job.notes``)."""
    layout, workload = job.train[0].layout, job.train[1]
    out: dict[str, dict[str, Value]] = {
        "parallelism": _parallelism(job),
        "tokens": _tokens(job),
        "optimizer": _optimizer(job),
        "model": _model(job),
    }
    if workload.host_sync_interval is not None:  # the loop reads the loss on logging steps
        out["logging"] = {"iteration_step_info_interval": workload.host_sync_interval}
        job.express("host_sync_interval")
    _pipeline_split(job)
    if str(layout.precision) != "bf16":
        job.note(
            f"the prediction assumes {setting_words(job, 'precision')}: Nanotron at {VERSION} "
            "trains in bf16 here; bf16 is set"
        )
    job.express("precision")  # set (bf16) or said
    if not workload.fp8_param_gather:  # DDP and ZeRO-1 gather the bf16 parameters
        job.express("fp8_param_gather")
    # what Nanotron does with no setting: flash-attn 2's kernels, Triton RMSNorm and fused
    # rotary, the cross entropy on fp32 logits, a host sync per pipeline receive, its buffers
    native = load_framework("nanotron").workload
    for key in (
        "attention_kernel", "cross_entropy", "pp_host_sync", "framework_buffers",
        "zero1_grad_sync",
    ):  # fmt: skip
        value = getattr(workload, key)
        mine = native.get(key)
        if mine is not None and (tuple(mine) if isinstance(mine, list) else mine) == value:
            job.express(key)
    if dispatcher_syncs_host(workload):  # its dropless dispatch reads the counts on the host
        job.express("moe_host_sync")
    if workload.flash_attention:
        job.express("flash_attention")
    if workload.fused_elementwise:
        job.express("fused_elementwise")
    # ZeRO-0: torch DDP overlaps its bucketed all-reduce with the backward; ZeRO-1 with the
    # accumulator reduces after it
    if dp_overlapped(job) == (layout.zero == 0 or workload.grad_reduce_dtype != "fp32"):
        job.express(DP_OVERLAP)
    express_framework(job, "nanotron")
    note_unexpressed(
        job,
        "Nanotron",
        {
            MODEL_ROPE: "Nanotron's Llama reads rope_theta only (no scaling, full rotary)",
            "cp_comm": "Nanotron has no context parallelism",
            "cp_impl": "Nanotron has no context parallelism",
            "pipeline_schedule": "Nanotron's engines are 1f1b and afab, one stage a rank",
            "optimizer_state_dtype": "Nanotron's AdamW keeps fp32 moments",
            "host_sync_interval": "Nanotron's loop reads the loss on every logging step",
            **express_native_gather_and_cast(job, "nanotron"),
        },
    )
    return out


def render(job: ExportJob) -> ExportResult:
    """The YAML sections, with a header comment naming the Nanotron commit."""
    body = sections(job)
    return yaml_sections_result(
        job,
        body,
        format="nanotron",
        framework=(FRAMEWORK, VERSION),
        checked=f"Nanotron config sections; keys checked against huggingface/nanotron {VERSION}",
        usage=[
            "merge into your config YAML (e.g. examples/config_tiny_llama.yaml), keeping its",
            "general, checkpoints, tokenizer, data_stages, learning-rate and train_steps settings",
        ],
    )
