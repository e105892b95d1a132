"""MaxText config overrides for a plan: the mesh (ICI axes inside a slice or node, DCN axes across
them), the batch, the remat policy, the quantization recipe and the model's shape.

Target: AI-Hypercomputer/maxtext ``src/MaxText/configs/base.yml`` at commit 003b416 (the keys are
in ``tests/data/framework_args/maxtext.txt``). The output is YAML to merge over base.yml, and the
same overrides as ``key=value`` arguments of ``python3 -m MaxText.train`` (``args``). MaxText's
mesh is ``data, stage, fsdp, ..., context, ..., tensor, ..., expert`` on every axis product
(``ici_*`` inside one slice or node, ``dcn_*`` across slices or nodes); the global batch is
``per_device_batch_size`` x devices x ``gradient_accumulation_steps``, a fraction per device when
model parallelism leaves fewer sequences than devices.
"""

from __future__ import annotations

import yaml

from planner.errors import SpecError
from planner.report.export.assumed import (
    DP_OVERLAP,
    MODEL_ROPE,
    dp_overlapped,
    express_framework,
    express_native_gather_and_cast,
    grouped_gemm_tiles_priced,
    note_unexpressed,
)
from planner.report.export.job import (
    ExportJob,
    ExportResult,
    comment_block,
    llama_style_decoder,
    mtp_layers,
    training_header,
)
from planner.specs.layout import Recompute

FRAMEWORK = "MaxText config overrides (YAML over configs/base.yml)"
VERSION = "003b416 (src/MaxText/configs/base.yml)"

Value = int | float | str | bool | list[str]

_SAVED_NAMES: dict[str, str] = {
    "q": "query_proj",
    "k": "key_proj",
    "v": "value_proj",
    "context": "context",
    "out": "out_proj",
    "mlp_gate": "mlpwi_0",
    "mlp_up": "mlpwi_1",
    "mlp_down": "mlpwo",
}
"""The planner's saved tensors -> the tensors of MaxText's ``remat_policy: custom`` (base.yml:
each ``remat``, ``device`` or ``offload``)."""

_MINIMAL = frozenset({"q", "k", "v", "out", "mlp_gate", "mlp_up", "mlp_down"})
"""What ``remat_policy: minimal`` keeps: every weight matmul's output
(``checkpoint_dots_with_no_batch_dims``; topologies/frameworks/maxtext.yaml)."""

_QUANTIZATION = {"bf16": "", "int8": "int8", "fp8": "fp8"}
"""Training precision -> base.yml ``quantization``."""

_ACTIVATIONS = {"swiglu": ["silu", "linear"], "geglu": ["gelu", "linear"], "gelu": ["gelu"]}
"""FFN activation -> ``mlp_activations`` (a gated FFN lists its gate's function and 'linear')."""


def _mesh(job: ExportJob) -> dict[str, Value]:
    """``ici_*`` / ``dcn_*`` axes: tensor, pipeline, context and expert inside a slice, the
    data-parallel ranks split into a sharded (fsdp) and a replicated (data) axis, the slices
    (TPU slices, GPU nodes) across the data axis where it divides, else the fsdp axis."""
    layout, workload = job.train[0].layout, job.train[1]
    cluster = job.cluster
    slices = cluster.num_domains
    if layout.dp % layout.ep:
        raise SpecError(
            f"MaxText cannot run {layout.short()}: its expert mesh axis is carved from the "
            f"data-parallel ranks (it shards the batch), so ep ({layout.ep}) must divide dp "
            f"({layout.dp}); plan with --framework maxtext for a layout it runs"
        )
    ranks = layout.dp // layout.ep  # the expert axis shards the batch too (MaxText mesh)
    shard = 1
    if layout.zero >= 3:
        group = workload.zero_shard_group
        shard = ranks if group is None else max(1, group // layout.ep)
    replicas = max(1, ranks // shard)
    mesh: dict[str, Value] = {}
    if slices > 1 and replicas % slices == 0:
        dcn = {"data": slices, "fsdp": 1}
        replicas //= slices
    elif slices > 1 and shard % slices == 0:
        dcn = {"data": 1, "fsdp": slices}
        shard //= slices
    else:
        dcn = {"data": 1, "fsdp": 1}
        if slices > 1:
            job.note(
                f"the {slices} slices/nodes divide neither the {replicas} replicas nor the "
                f"{shard}-way shard: every axis is given as ICI; set the dcn_* axes by hand"
            )
    mesh["dcn_data_parallelism"] = dcn["data"]
    mesh["dcn_fsdp_parallelism"] = dcn["fsdp"]
    mesh["ici_data_parallelism"] = replicas
    mesh["ici_fsdp_parallelism"] = shard
    mesh["ici_tensor_parallelism"] = layout.tp
    mesh["ici_pipeline_parallelism"] = layout.pp
    mesh["ici_context_parallelism"] = layout.cp
    mesh["ici_expert_parallelism"] = layout.ep
    if layout.etp > 1 and layout.etp != layout.tp:
        job.note(
            f"etp={layout.etp}: MaxText shards the experts' FFN over the tensor axis "
            f"(tp={layout.tp}); it has no expert-tensor axis of its own"
        )
    if layout.zero in (1, 2):
        mesh["shard_optimizer_over_data"] = True
        job.note(
            f"ZeRO-{layout.zero}: MaxText shards the optimizer over the data axis "
            "(shard_optimizer_over_data); gradients stay replicated"
        )
    if dp_overlapped(job):  # XLA overlaps the data-parallel collectives with compute
        job.express(DP_OVERLAP)
    if layout.zero >= 3:
        job.express("zero_shard_group")
    return mesh


def _batch(job: ExportJob) -> dict[str, Value]:
    """``per_device_batch_size`` (sequences per device per micro-batch), the accumulation or
    pipeline micro-batches, and the sequence length."""
    layout, workload = job.train[0].layout, job.train[1]
    per_device = layout.mbs / (layout.tp * layout.pp * layout.cp)
    out: dict[str, Value] = {
        "per_device_batch_size": int(per_device) if per_device.is_integer() else per_device,
        "max_target_length": workload.seq_len,
    }
    if layout.pp > 1:
        out["per_device_batch_size"] = (
            layout.mbs * job.num_microbatches / (layout.tp * layout.pp * layout.cp)
        )
        out["num_pipeline_microbatches"] = job.num_microbatches
        out["num_pipeline_repeats"] = layout.vpp
        # base.yml: the decoder layers = stages x num_layers_per_pipeline_stage x repeats
        chunks = layout.pp * layout.vpp
        layers = job.model.num_layers
        if layers % chunks == 0:
            out["num_layers_per_pipeline_stage"] = layers // chunks
        else:
            job.note(
                f"{layers} layers over pp x vpp = {chunks} chunks: MaxText runs equal chunks "
                "(stages x num_layers_per_pipeline_stage x num_pipeline_repeats = the layers), "
                "so this layout does not run there as scored"
            )
        out["gradient_accumulation_steps"] = 1
        if workload.pipeline_schedule == "gpipe":  # MaxText's pipeline runs no other
            job.express("pipeline_schedule")
    else:
        out["gradient_accumulation_steps"] = job.num_microbatches
    if layout.cp > 1:
        out["context_parallel_load_balance"] = True
        if workload.cp_comm in ("allgather", "p2p"):
            out["context_parallel_strategy"] = (
                "all_gather" if workload.cp_comm == "allgather" else "ring"
            )
            job.express("cp_comm")
        if workload.cp_impl == "te":  # all-gather: one attention call; ring: TE's fused merge
            job.express("cp_impl")
    job.express("seq_len", "global_batch")
    return out


def _remat(job: ExportJob) -> dict[str, Value]:
    """``remat_policy``: full -> 'full'; selective -> 'minimal' when it keeps every weight
    matmul's output, else 'custom' naming each saved tensor; none -> 'minimal_with_context',
    the policy that keeps the most (base.yml has no policy that saves everything)."""
    layout, workload = job.train[0].layout, job.train[1]
    offload = workload.activation_offload_fraction
    if layout.recompute is Recompute.FULL:
        if workload.recompute_num_layers is None:  # MaxText's 'full' recomputes every layer
            job.express("recompute_num_layers")
        return {"remat_policy": "full"}
    if layout.recompute is Recompute.NONE:
        job.note(
            "recompute none: MaxText has no policy that saves every activation; "
            "minimal_with_context (weight-matmul outputs and the attention context) is the "
            "nearest"
        )
        return {"remat_policy": "minimal_with_context"}
    if workload.saved_tensors is None:  # Megatron's recompute modules: no MaxText policy
        return {"remat_policy": "minimal"}
    saved = frozenset(workload.saved_tensors)
    job.express("saved_tensors")
    if saved == _MINIMAL and offload == 0:
        return {"remat_policy": "minimal"}
    where = "offload" if offload > 0 else "device"
    if 0 < offload < 1:
        job.note(
            f"{offload:.0%} of the saved activations offloaded: MaxText offloads whole tensors; "
            "the saved ones are all offloaded here"
        )
    job.express("activation_offload_fraction")
    policy: dict[str, Value] = {"remat_policy": "custom"}
    for name, key in _SAVED_NAMES.items():
        policy[key] = where if name in saved else "remat"
    return policy


def _precision(job: ExportJob) -> dict[str, Value]:
    layout, workload = job.train[0].layout, job.train[1]
    out: dict[str, Value] = {
        "dtype": "bfloat16",
        "weight_dtype": "float32" if workload.fp32_params else "bfloat16",
        "grad_dtype": "float32" if workload.grad_reduce_dtype == "fp32" else "bfloat16",
    }
    job.express("fp32_params", "grad_reduce_dtype")
    if workload.fp32_params or not workload.master_copy:  # optax steps the weights themselves
        job.express("master_copy")
    precision = str(layout.precision)
    if precision in _QUANTIZATION:
        if _QUANTIZATION[precision]:  # bf16 is base.yml's default, quantization ''
            out["quantization"] = _QUANTIZATION[precision]
        job.express("precision")
        if precision == "int8":
            # drhs_bits is None only when the local shard count is 0 (layers/quantizations.py)
            out["quantization_local_shard_count"] = (
                0 if layout.precision in workload.bf16_wgrad_formats else -1
            )
            job.express("bf16_wgrad_formats")
    else:
        job.note(f"precision {precision}: MaxText has no {precision} training recipe; bf16 is set")
    if not workload.fp8_param_gather:  # XLA gathers the parameters in their compute dtype
        job.express("fp8_param_gather")
    return out


def _model(job: ExportJob) -> dict[str, Value]:
    """The shape as base.yml's ``base_*`` keys (``model_name`` left 'default'); what the
    llama2 decoder block cannot express is said in a note."""
    model = job.model
    out: dict[str, Value] = {
        "base_emb_dim": model.hidden_size,
        "base_num_query_heads": model.num_attention_heads,
        "base_num_kv_heads": model.num_kv_heads,
        "base_num_decoder_layers": model.num_layers,
        "head_dim": model.head_dim,
        "vocab_size": model.vocab_size,
        "logits_via_embedding": model.tied_embeddings,
    }
    if model.ffn_hidden_size:
        out["base_mlp_dim"] = model.ffn_hidden_size
    activations = _ACTIVATIONS.get(model.ffn_activation)
    if activations is not None:
        out["mlp_activations"] = activations
    else:
        job.note(f"FFN activation {model.ffn_activation}: no MaxText mlp_activations for it")
    if model.position_embedding == "rope":
        out["rope_max_timescale"] = int(model.rope_theta)
        scaling = model.rope_scaling
        plain = model.rotary_fraction == 1 and model.mla is None
        if scaling is not None and scaling.kind == "llama3":
            out["rope_type"] = "llama3.1"
        elif scaling is not None and scaling.kind == "yarn":
            out["rope_type"] = "yarn"
            out["rope_factor"] = scaling.factor
            if scaling.original_context is not None:
                out["original_max_position_embeddings"] = scaling.original_context
        elif scaling is not None:
            plain = False
        if plain:
            job.express(MODEL_ROPE)
    moe = model.moe
    workload = job.train[1]
    if moe is not None:
        out["capacity_factor"] = workload.moe_capacity_factor or -1.0  # -1: dropless
        job.express("moe_capacity_factor")
        # sparse_matmul: permute + grouped GEMM (dropless); false: GShard's dispatch einsums
        out["sparse_matmul"] = workload.moe_expert_compute == "grouped"
        job.express("moe_expert_compute")
        if workload.moe_routing_group == "sequence":  # MaxText sizes capacity per batch row
            job.express("moe_routing_group")
        tiles = workload.grouped_gemm_tiles
        if grouped_gemm_tiles_priced(job) and tiles is not None:
            out["megablox"] = True  # the Pallas (TPU) grouped GEMM whose row tiles span experts
            for gemm in ("wi", "wo"):  # the forward tiles megablox reads (base.yml)
                for dim, size in zip(("batch_seq", "embed_dim", "mlp_dim"), tiles, strict=True):
                    out[f"{gemm}_tile_fwd_{dim}"] = size
            job.express("grouped_gemm_tiles")
        if not workload.moe_host_sync:  # static shapes: the dispatch never waits on the host
            job.express("moe_host_sync")
        out["num_experts"] = moe.num_experts
        out["num_experts_per_tok"] = moe.top_k
        out["base_moe_mlp_dim"] = moe.expert_ffn_hidden_size
        out["first_num_dense_layers"] = moe.first_dense_layers
        if moe.layer_step > 1:  # MaxText's Llama 4 decoder interleaves dense and MoE layers
            out["interleave_moe_layer_step"] = moe.layer_step
        out["shared_experts"] = moe.num_shared_experts
    plain = llama_style_decoder(model)  # what the llama2 / mixtral decoder blocks run
    mtp = mtp_layers(job)[0]
    if mtp:
        out["mtp_num_layers"] = mtp
        job.express("mtp_num_layers")
    out["decoder_block"] = "mixtral" if moe is not None and plain else "llama2"
    if not plain or (moe is not None and moe.num_shared_experts):
        job.note(
            f"model '{model.name}' is not a llama2/mixtral-style decoder (norm {model.norm}, "
            f"{model.position_embedding} positions"
            + (", MLA" if model.mla is not None else "")
            + "): use MaxText's own configs/models file for it; the base_* keys give the shape"
        )
    return out


def overrides(job: ExportJob) -> dict[str, Value]:
    """Every override, in base.yml's order of sections (notes go to ``job.notes``)."""
    workload = job.train[1]
    out: dict[str, Value] = {"model_name": "default"}
    out.update(_model(job))
    out.update(_precision(job))
    out.update(_mesh(job))
    out.update(_batch(job))
    out.update(_remat(job))
    tpu = job.cluster.system.torus is not None
    if workload.flash_attention:
        out["attention"] = "flash" if tpu else "cudnn_flash_te"
        job.express("flash_attention")
        if workload.attention_kernel == "vendor":  # splash attention on TPU, cuDNN on GPU
            job.express("attention_kernel")
    else:
        out["attention"] = "dot_product"
        job.express("flash_attention")
    out["scan_layers"] = layout_scans(job)
    if job.note_tp_overlap_off("the TP overlap (LIBTPU_INIT_ARGS)"):
        job.express("tp_comm_overlap")
    if job.tp_overlap_runs:
        job.note(
            "TP collectives overlapped: on TPU set LIBTPU_INIT_ARGS="
            "'--xla_tpu_enable_async_collective_fusion=true "
            "--xla_tpu_overlap_compute_collective_tc=true "
            "--xla_tpu_decompose_all_gather_einsum=true' (Google's MLPerf GPT-3 runs)"
        )
        job.express("tp_comm_overlap")
    if job.train[1].host_sync_interval is None:  # JAX dispatches the next step ahead
        job.express("host_sync_interval")
    express_framework(job, "maxtext")
    note_unexpressed(
        job,
        "MaxText",
        {
            "sequence_parallel": "GSPMD shards the norms' activations with the tensor axis",
            "optimizer_state_dtype": "MaxText's mu_dtype sets the first moment only",
            "master_copy": "optax steps the weights in weight_dtype, bf16 here: MaxText keeps no "
            "separate fp32 master copy",
            "fused_elementwise": "XLA fuses the elementwise ops",
            "cross_entropy": "the loss is one XLA computation",
            "unsharded_param_layers": "XLA schedules the FSDP gathers",
            "reshard_after_forward": "XLA re-gathers the FSDP weights in a rematted backward",
            MODEL_ROPE: "rope_max_timescale and rope_type give the base and the scaling; MaxText's "
            "model config sets the rest (a partial or MLA rotary part)",
            **express_native_gather_and_cast(job, "maxtext"),
        },
    )
    return out


def layout_scans(job: ExportJob) -> bool:
    """``scan_layers``: on (base.yml's default) except under pipeline parallelism, where MaxText
    recommends scanning the pipeline iterations instead (base.yml's comment on scan_layers)."""
    return job.train[0].layout.pp == 1


def render(job: ExportJob) -> ExportResult:
    """The YAML overrides with a header comment, and the same as ``key=value`` arguments."""
    values = overrides(job)
    header = training_header(
        job,
        [f"MaxText overrides; keys checked against AI-Hypercomputer/maxtext {VERSION}"],
        ["merge over configs/base.yml, or pass as key=value to python3 -m MaxText.train"],
        count=f"{job.train[0].num_gpus} devices",
    )
    body = yaml.safe_dump(values, sort_keys=False, default_flow_style=None, width=100)
    args = [f"{key}={_arg(value)}" for key, value in values.items()]
    return ExportResult(
        format="maxtext",
        framework=FRAMEWORK,
        framework_version=VERSION,
        text="\n".join(comment_block(header)) + "\n" + body,
        args=args,
        notes=list(job.notes),
    )


def _arg(value: Value) -> str:
    """One override value as MaxText's command line reads it (pyconfig parses YAML scalars)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(f"'{v}'" for v in value) + "]"
    return str(value)
