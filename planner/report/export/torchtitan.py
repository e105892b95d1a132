"""torchtitan job-config TOML sections ``[parallelism]``, ``[training]`` and
``[activation_checkpoint]`` for a plan.

Target: pytorch/torchtitan tag ``v0.2.2`` (commit 73a0e69), ``torchtitan/config/job_config.py``,
the last release line with TOML job configs (its main branch has moved to Python configs). The
names are in ``tests/data/framework_args/torchtitan.txt``. torchtitan's device mesh is
``pp, dp_replicate, dp_shard, cp, tp`` (PP outermost, TP innermost), the planner's rank order.
"""

from __future__ import annotations

from planner.catalog.frameworks import load_framework
from planner.cost.expert import dispatcher_syncs_host
from planner.cost.sharding import gathers_fp8_params
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
    comment_block,
    mtp_layers,
    pipeline_split,
    split_recompute_settings,
    training_header,
)
from planner.report.quote import toml_string
from planner.specs.layout import Recompute

FRAMEWORK = "torchtitan job config (TOML)"
VERSION = "v0.2.2 (73a0e69)"

TomlValue = int | str | bool | list[str] | list[list[str]]

_RESHARD = {1: "never", 2: "never", 3: "always"}


def _toml(value: TomlValue) -> str:
    """A TOML literal for the few value types the export writes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_string(value)
    return "[" + ", ".join(_toml(item) for item in value) + "]"


def _data_parallel(job: ExportJob) -> dict[str, TomlValue]:
    layout, workload = job.train[0].layout, job.train[1]
    if dp_overlapped(job):  # FSDP2 and DDP overlap their collectives with compute by default
        job.express(DP_OVERLAP)
    if layout.zero == 0:
        return {"data_parallel_replicate_degree": layout.dp, "data_parallel_shard_degree": 1}
    if layout.zero == 1:
        job.note(
            "torchtitan has no ZeRO-1 (optimizer-only sharding): nearest is FSDP with "
            "fsdp_reshard_after_forward = never (ZeRO-2: gradients sharded too)"
        )
    reshard = _RESHARD[layout.zero]
    if layout.zero == 3:  # FSDP2's own policy names: default, always, never
        reshard = workload.reshard_after_forward
        job.express("reshard_after_forward")
        if workload.unsharded_param_layers == FSDP2_UNSHARDED_LAYERS:
            job.express("unsharded_param_layers")
    replicate, shard = _hybrid_shard(job)
    return {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": shard,
        "fsdp_reshard_after_forward": reshard,
    }


FSDP2_UNSHARDED_LAYERS = 2.0
"""FSDP2 prefetches the next layer's all-gather implicitly: the running layer's and the next
one's parameters are unsharded at once (``torch.distributed.fsdp.fully_shard``)."""


def _hybrid_shard(job: ExportJob) -> tuple[int, int]:
    """(replicate, shard) data-parallel degrees: HSDP when the plan shards over groups of
    ``zero_shard_group`` DP x CP ranks (torchtitan's FSDP mesh is dp_shard x cp, so the group
    is cp x the shard degree), else one shard over all."""
    layout, workload = job.train[0].layout, job.train[1]
    group = workload.zero_shard_group
    if group is None:
        return 1, layout.dp
    shard, rest = divmod(group, layout.cp)
    if rest or shard == 0 or layout.dp % shard:
        job.note(
            f"the ZeRO shard group of {group} is not cp={layout.cp} x a divisor of "
            f"dp={layout.dp}: torchtitan shards over all of them"
        )
        return 1, layout.dp
    job.express("zero_shard_group")
    return layout.dp // shard, shard


def _pipeline(job: ExportJob) -> dict[str, TomlValue]:
    layout = job.train[0].layout
    if layout.pp == 1:
        return {"pipeline_parallel_degree": 1}
    schedule = job.train[1].pipeline_schedule
    names = {"1f1b": "Interleaved1F1B" if layout.vpp > 1 else "1F1B",
             "zero_bubble": "InterleavedZeroBubble"}  # fmt: skip
    out: dict[str, TomlValue] = {
        "pipeline_parallel_degree": layout.pp,
        "pipeline_parallel_schedule": names.get(schedule, names["1f1b"]),
        "pipeline_parallel_microbatch_size": layout.mbs,
    }
    if schedule in names:
        job.express("pipeline_schedule")
    kind, counts = pipeline_split(job)
    if kind == "even":
        out["pipeline_parallel_first_stage_less_layers"] = 0
        out["pipeline_parallel_last_stage_less_layers"] = 0
        if layout.vpp > 1:
            out["pipeline_parallel_layers_per_stage"] = counts[0]
        return out
    plan = job.train[0]
    optimised = plan.pipeline_split.optimised if plan.pipeline_split is not None else None
    how = optimised or "the planner's split"
    job.note(
        f"{job.model.num_layers} layers over pp x vpp = {len(counts)} chunks: "
        f"module_fqns_per_model_part lists {how} {counts} (pipeline_parallel_split_points is "
        "deprecated in this release and refused by its pipelining)"
    )
    if mtp_layers(job)[0]:
        job.note("torchtitan has no multi-token-prediction module: the MTP layers are not set")
    out["module_fqns_per_model_part"] = _module_names(counts)
    return out


def _module_names(counts: list[int]) -> list[list[str]]:
    """torchtitan module names (Llama-style: tok_embeddings, layers.i, norm, output) per chunk."""
    parts, start = [], 0
    for i, count in enumerate(counts):
        names = [f"layers.{j}" for j in range(start, start + count)]
        if i == 0:
            names.insert(0, "tok_embeddings")
        if i == len(counts) - 1:
            names += ["norm", "output"]
        parts.append(names)
        start += count
    return parts


_ROTATE = {"allgather": "allgather", "p2p": "alltoall"}
"""The planner's CP algorithm -> torchtitan's ``context_parallel_rotate_method``: K/V shards
all-gathered, or shuffled shard by shard round the ring ('alltoall'); it has no head
all-to-all (Ulysses)."""


def parallelism(job: ExportJob) -> dict[str, TomlValue]:
    """The ``[parallelism]`` table."""
    layout = job.train[0].layout
    table = _data_parallel(job)
    table["tensor_parallel_degree"] = layout.tp
    table.update(_pipeline(job))
    table["context_parallel_degree"] = layout.cp
    workload = job.train[1]
    if layout.cp > 1 and workload.cp_impl == "pytorch":  # torchtitan's CP is PyTorch's
        job.express("cp_impl")
    if layout.cp > 1 and workload.cp_comm in _ROTATE:
        table["context_parallel_rotate_method"] = _ROTATE[workload.cp_comm]
        job.express("cp_comm")
    if layout.tp > 1:
        # async TP (torch.compile's collective-matmul fusion) is torchtitan's TP overlap
        table["enable_async_tensor_parallel"] = job.tp_overlap_runs
        job.note_tp_overlap_off("enable_async_tensor_parallel")
        job.express("tp_comm_overlap")
        if workload.sequence_parallel:  # torchtitan's TP plans always shard the norms (SP)
            job.express("sequence_parallel")
    if job.model.moe is not None:
        if workload.moe_capacity_factor is None:  # torchtitan's MoE is dropless
            job.express("moe_capacity_factor")
        if workload.moe_expert_compute == "grouped":  # torchtitan's experts: grouped GEMMs
            job.express("moe_expert_compute")
        table["expert_parallel_comm_backend"] = (
            "deepep" if workload.moe_dispatch_dedup else "standard"
        )
        job.express("moe_dispatch_dedup")
        # its dropless all-to-all reads the split sizes on the host: what the prediction assumed
        # unless it padded the experts to capacity (no sync there; the note says so)
        if dispatcher_syncs_host(workload):
            job.express("moe_host_sync")
        etp = layout.etp
        if etp not in (1, layout.tp):
            job.note(f"torchtitan supports etp = 1 or tp only: etp {etp} -> 1")
            etp = 1
        table["expert_parallel_degree"] = layout.ep
        table["expert_tensor_parallel_degree"] = etp
    return table


def training(job: ExportJob) -> dict[str, TomlValue]:
    """The ``[training]`` table. With PP the local batch is split into micro-batches by the
    schedule; without PP each local batch is one micro-batch and torchtitan accumulates."""
    layout, workload = job.train[0].layout, job.train[1]
    local = workload.global_batch // layout.dp if layout.pp > 1 else layout.mbs
    job.express("seq_len", "global_batch")
    table: dict[str, TomlValue] = {
        "local_batch_size": local,
        "global_batch_size": workload.global_batch,
        "seq_len": workload.seq_len,
        "mixed_precision_param": "bfloat16",
    }
    if workload.fp32_params:  # FSDP2 keeps the fp32 parameters and casts them for compute
        job.express("fp32_params")
    if workload.grad_reduce_dtype == "fp32":  # the only reduce dtype its FSDP offers
        table["mixed_precision_reduce"] = "float32"
        job.express("grad_reduce_dtype")
    return table


_CONVERTERS = {"fp8": "float8", "mxfp8": "mx"}
"""Training precision -> torchtitan's quantize converter family (torchtitan/components/
quantization/float8.py, mx.py)."""
_LINEAR_RECIPES = {"fp8": "tensorwise", "mxfp8": "mxfp8_cublas"}
"""The linear-layer recipe per precision: per-tensor current scaling (as the Megatron export's
fp8 recipe), MXFP8 with cuBLAS block-scaled GEMMs."""


def quantization(job: ExportJob) -> dict[str, dict[str, TomlValue]]:
    """``[model] converters`` and the ``[quantize...]`` tables of an 8-bit training precision
    (the linear layers, and the experts' grouped GEMMs of an MoE model); {} for bf16."""
    precision = str(job.train[0].layout.precision)
    if precision == "bf16":
        job.express("precision")
        return {}
    family = _CONVERTERS.get(precision)
    if family is None:
        job.note(
            f"precision {precision}: torchtitan v0.2.2 has no {precision} training converter; "
            "the tables keep bf16 mixed precision"
        )
        return {}
    job.express("precision")
    converters: list[str] = [f"quantize.linear.{family}"]
    layout, workload = job.train[0].layout, job.train[1]
    recipe = _LINEAR_RECIPES[precision]
    if family == "float8" and workload.fp8_casts in ("tensorwise", "rowwise"):
        recipe = workload.fp8_casts  # torchao's recipe the casts were priced as
        job.express("fp8_casts")
    linear: dict[str, TomlValue] = {"recipe_name": recipe}
    if family == "float8" and layout.zero >= 1:
        # rowwise gathers bf16 parameters (torchao's float8 all-gather is tensorwise only)
        linear["enable_fsdp_float8_all_gather"] = gathers_fp8_params(workload, layout)
        job.express("fp8_param_gather")
    elif not workload.fp8_param_gather:  # MX linears gather their bf16 parameters
        job.express("fp8_param_gather")
    tables: dict[str, dict[str, TomlValue]] = {f"quantize.linear.{family}": linear}
    if job.model.moe is not None:
        converters.append(f"quantize.grouped_mm.{family}")
        tables[f"quantize.grouped_mm.{family}"] = {"fqns": ["experts"]}
    return {"model": {"converters": converters}, **tables}


def activation_checkpoint(job: ExportJob) -> dict[str, TomlValue]:
    """The ``[activation_checkpoint]`` table."""
    recompute = job.train[0].layout.recompute
    if recompute is Recompute.FULL:
        job.express("recompute_num_layers")  # full AC wraps every block, or the note says
        settings = split_recompute_settings(job)
        if settings.granularity is None:
            return {"mode": "none"}
        most = max((s.num_layers for s in job.train[0].pipeline_stages), default=0)
        if (
            settings.method == "block"
            and settings.num_layers is not None
            and settings.num_layers < most
        ):
            job.note(
                f"the prediction assumes {setting_words(job, 'recompute_num_layers')}: "
                "torchtitan's full AC recomputes every layer (more compute, less memory)"
            )
        return {"mode": "full"}
    if recompute is Recompute.SELECTIVE:
        saved = job.train[1].saved_tensors
        policy = load_framework("torchtitan").workload.get("saved_tensors")
        if saved is not None and policy is not None and saved == tuple(policy):
            job.express("saved_tensors")  # exactly the op-level policy's save list
        elif saved is None:
            job.express("recompute_modules")
            job.note(
                f"the prediction assumes {setting_words(job, 'recompute_modules')}: "
                "torchtitan's op-level selective AC is the nearest setting"
            )
        return {"mode": "selective", "selective_ac_option": "op"}
    return {"mode": "full" if recompute is Recompute.FULL else "none"}


def render(job: ExportJob) -> ExportResult:
    """The three TOML tables, with a header comment naming the torchtitan release."""
    tables: dict[str, dict[str, TomlValue]] = {
        "parallelism": parallelism(job),
        "training": training(job),
        "activation_checkpoint": activation_checkpoint(job),
    }
    workload = job.train[1]
    async_tp = bool(tables["parallelism"].get("enable_async_tensor_parallel"))
    compiled = workload.fused_elementwise or async_tp  # async TP runs only under torch.compile
    tables["compile"] = {"enable": compiled}
    if workload.host_sync_interval is not None:  # the loop reads the loss on logging steps
        tables["metrics"] = {"log_freq": workload.host_sync_interval}
        job.express("host_sync_interval")
    if compiled == workload.fused_elementwise:  # compile fuses the elementwise ops
        job.express("fused_elementwise")
    tables.update(quantization(job))
    if workload.cross_entropy == "unfused":  # its loss: cross_entropy on the upcast logits
        job.express("cross_entropy")
    if workload.flash_attention:  # its attention is SDPA (flash / cuDNN kernels)
        job.express("flash_attention")
        if workload.attention_kernel == "flash2":  # SDPA's flash backend is FlashAttention-2
            job.express("attention_kernel")
    express_framework(job, "torchtitan")
    note_unexpressed(
        job,
        "torchtitan",
        {
            MODEL_ROPE: "the model flavor sets it (torchtitan/models/<model>/__init__.py), "
            "not the job config",
            "sequence_parallel": "torchtitan's TP plans always shard the norms (sequence parallel)",
            "fused_elementwise": "torch.compile is on for async TP, which fuses them",
            "attention_kernel": "torchtitan's attention is SDPA, whose flash backend is "
            "FlashAttention-2",
            "fp32_params": "torchtitan's FSDP2 keeps fp32 parameters and casts them for compute",
            "master_copy": "torchtitan's FSDP2 keeps fp32 parameters, their own master copy",
            "optimizer_state_dtype": "torchtitan's AdamW keeps its moments in the parameters' "
            "dtype",
            "pipeline_schedule": "torch.distributed.pipelining has DualPipeV (one copy of each "
            "stage's parameters), not DualPipe",
            "cp_comm": "torchtitan's context parallel all-gathers or rotates K/V; it has no "
            "head all-to-all",
            "unsharded_param_layers": "FSDP2 prefetches one layer ahead",
            "host_sync_interval": "torchtitan's loop reads the loss on every logging step",
            **express_native_gather_and_cast(job, "torchtitan"),
        },
    )
    header = training_header(
        job,
        [
            f"torchtitan job-config sections; names checked against pytorch/torchtitan {VERSION},",
            "the last release line with TOML job configs (main has moved to Python configs)",
        ],
        [
            "merge into your model's train config (torchtitan ships Llama 3's as",
            "models/llama3/train_configs/llama3_8b.toml, llama3_70b.toml, llama3_405b.toml)",
        ],
    )
    lines = comment_block(header)
    for name, table in tables.items():
        lines += ["", f"[{name}]"]
        lines += [f"{key} = {_toml(value)}" for key, value in table.items()]
    return ExportResult(
        format="torchtitan",
        framework=FRAMEWORK,
        framework_version=VERSION,
        text="\n".join(lines) + "\n",
        args=[],
        notes=list(job.notes),
    )
