"""Hugging Face Accelerate launch config (YAML) for a plan run by PyTorch FSDP on its own: the
``accelerate launch --config_file`` keys for the processes, the mixed precision, torch.compile
and ``fsdp_config`` (FSDP1's flat parameters or FSDP2's ``fully_shard``), with FSDP2's hybrid
sharding in ``parallelism_config``.

Target: huggingface/accelerate commit 16cb6eb8 (2026-07-24). The keys are in
``tests/data/framework_args/accelerate.txt``, each read where
``src/accelerate/commands/config/config_args.py`` (``ClusterConfig``) declares the top-level ones
and ``src/accelerate/commands/launch.py`` the ``fsdp_*``, ``dynamo_*`` and
``parallelism_config_*`` arguments a config file's sections become (``_validate_launch_command``).
The batch, sequence length, optimizer and attention kernel are the training script's
(``Accelerator``, ``TrainingArguments``, ``from_pretrained``), not the launch config's: the
export says them in notes.
"""

from __future__ import annotations

from planner.cost.sharding import zero3_reshards
from planner.report.export.assumed import (
    DP_OVERLAP,
    MODEL_ROPE,
    dp_overlapped,
    express_framework,
    express_native_gather_and_cast,
    note_unexpressed,
    setting_words,
)
from planner.report.export.job import ExportJob, ExportResult, yaml_sections_result
from planner.report.export.torchtitan import FSDP2_UNSHARDED_LAYERS
from planner.specs.layout import Recompute

FRAMEWORK = "Hugging Face Accelerate launch config (YAML)"
VERSION = "16cb6eb8 (2026-07-24)"

Value = int | float | str | bool | None | dict[str, object]

_MIXED_PRECISIONS = ("bf16", "fp8")
"""The planner's number formats that are ``mixed_precision`` values of their own name (fp8
through the ``fp8_config`` backend)."""

_FP8_BACKEND = {"fused": "te", "tensorwise": "ao"}
"""How the prediction casts FP8 operands -> ``fp8_config.backend`` (``--fp8_backend`` choices):
Transformer Engine's fused casts, or torchao's Float8Linear with its dynamic tensorwise scales
(its default recipe; ``utils/dataclasses.py`` ``AORecipeKwargs``). torchao's rowwise recipe is
not a launch-config key."""


def fsdp_version(job: ExportJob) -> int:
    """2 (``fully_shard``) where the prediction priced FSDP2's per-parameter buffer copies
    (``TrainWorkload.fsdp2_buffer_copies``, the fsdp2 profile's), else 1 (flat parameters)."""
    return 2 if job.train[1].fsdp2_buffer_copies else 1


def _shard_group(job: ExportJob) -> int | None:
    """The data-parallel ranks one shard spans under hybrid sharding, None for one shard over
    all (context parallelism is not Accelerate FSDP's: the group is over dp)."""
    layout, workload = job.train[0].layout, job.train[1]
    group = workload.zero_shard_group
    if group is None or group >= layout.dp or layout.dp % group:
        return None
    return group


def _fsdp1(job: ExportJob) -> dict[str, Value]:
    """``fsdp_config`` for FSDP1: the sharding strategy names the ZeRO stage; HYBRID_SHARD
    shards inside a node (FSDP1 without a device mesh shards over the node's local ranks)."""
    layout, workload = job.train[0].layout, job.train[1]
    reshards = layout.zero >= 3 and zero3_reshards(workload, layout)
    group = _shard_group(job)
    per_node = job.gpus_per_node
    if layout.zero == 0:
        strategy = "NO_SHARD"
    elif group is not None and group == per_node:
        strategy = "HYBRID_SHARD" if reshards else "HYBRID_SHARD_ZERO2"
        job.express("zero_shard_group")
    else:
        strategy = "FULL_SHARD" if reshards else "SHARD_GRAD_OP"
        if group is not None:
            job.note(
                f"the ZeRO shard group of {group} ranks: FSDP1's hybrid sharding shards inside "
                f"a node ({per_node} GPUs); one shard over all dp={layout.dp} is set"
            )
    out: dict[str, Value] = {"fsdp_version": 1, "fsdp_sharding_strategy": strategy}
    # FSDP1 reduce-scatters on its own stream behind the backward whatever the prefetch, and
    # BACKWARD_PRE gathers the next unit's parameters before the current one's gradients: a
    # prediction that kept the data-parallel collectives out of the overlap is said instead
    out["fsdp_backward_prefetch"] = "BACKWARD_PRE"
    if dp_overlapped(job):
        job.express(DP_OVERLAP)
    out["fsdp_forward_prefetch"] = False
    out["fsdp_use_orig_params"] = True
    out["fsdp_sync_module_states"] = True
    return out


def _fsdp2(job: ExportJob) -> dict[str, Value]:
    """``fsdp_config`` for FSDP2: resharding after the forward is ZeRO-3, keeping the gathered
    parameters until the backward ZeRO-2; FSDP2 always prefetches its gathers."""
    layout, workload = job.train[0].layout, job.train[1]
    if dp_overlapped(job):
        job.express(DP_OVERLAP)
    return {
        "fsdp_version": 2,
        "fsdp_reshard_after_forward": layout.zero >= 3 and zero3_reshards(workload, layout),
    }


def _parallelism(job: ExportJob) -> dict[str, Value] | None:
    """``parallelism_config``: FSDP2's hybrid sharding (replicas of a shard group), or None."""
    group = _shard_group(job)
    if group is None:
        return None
    job.express("zero_shard_group")
    return {
        "parallelism_config_dp_replicate_size": job.train[0].layout.dp // group,
        "parallelism_config_dp_shard_size": group,
    }


def _fsdp_config(job: ExportJob, version: int) -> dict[str, Value]:
    """``fsdp_config``: the version's sharding keys, every decoder layer wrapped on its own
    (``TRANSFORMER_BASED_WRAP``; the classes default to the model's ``_no_split_modules``), the
    recomputation, and the loading and checkpoint keys of Accelerate's FSDP template."""
    layout, workload = job.train[0].layout, job.train[1]
    out = _fsdp1(job) if version == 1 else _fsdp2(job)
    if layout.zero == 1:
        job.note(
            "ZeRO-1: FSDP has no optimizer-only sharding; the gradients are sharded too "
            "(ZeRO-2: SHARD_GRAD_OP, or FSDP2 without resharding), less memory than the "
            "prediction assumed"
        )
    if layout.zero >= 2:
        job.express("reshard_after_forward")
    out["fsdp_auto_wrap_policy"] = "TRANSFORMER_BASED_WRAP"
    out["fsdp_activation_checkpointing"] = _recompute(job)
    out["fsdp_offload_params"] = False
    out["fsdp_cpu_ram_efficient_loading"] = True
    out["fsdp_state_dict_type"] = "SHARDED_STATE_DICT"
    if workload.unsharded_param_layers == FSDP2_UNSHARDED_LAYERS and layout.zero >= 3:
        # the running unit and the prefetched one, in FSDP1 (BACKWARD_PRE, limit_all_gathers)
        # as in FSDP2
        job.express("unsharded_param_layers")
    return out


def _recompute(job: ExportJob) -> bool:
    """``fsdp_activation_checkpointing``: every wrapped layer recomputed (full), or none."""
    layout, workload = job.train[0].layout, job.train[1]
    if layout.recompute is Recompute.FULL:
        if workload.recompute_num_layers is None:
            job.express("recompute_num_layers")
        return True
    if layout.recompute is Recompute.SELECTIVE:
        job.note(
            "selective recomputation: Accelerate's FSDP checkpoints whole layers or none; none "
            "is set (more memory than the prediction assumed)"
        )
    return False


def _degrees(job: ExportJob) -> None:
    """Say the degrees an FSDP-only launch cannot run."""
    layout = job.train[0].layout
    for name, value in (("tp", layout.tp), ("pp", layout.pp), ("cp", layout.cp),
                        ("ep", layout.ep)):  # fmt: skip
        if value > 1:
            job.note(
                f"{name}={value}: Accelerate's FSDP launch here runs data parallelism only; "
                f"the plan needs {layout.num_gpus} GPUs in dp={layout.dp} x {name}={value} "
                "(plan it with --framework fsdp or fsdp2 for a layout this launch runs)"
            )


def _script(job: ExportJob) -> dict[str, str]:
    """Where the settings the launch config has no key for live: the training script's batch,
    loop, optimizer, model dtype and attention (``note_unexpressed`` tails)."""
    layout, workload = job.train[0].layout, job.train[1]
    steps = workload.global_batch // (layout.dp * layout.cp * layout.mbs)
    batch = (
        f"the training script's: per_device_train_batch_size {layout.mbs} x "
        f"gradient_accumulation_steps {steps} x {layout.dp * layout.cp} processes "
        "(TrainingArguments, or Accelerator(gradient_accumulation_steps=...))"
    )
    if workload.grad_reduce_dtype == "bf16":  # what bf16 mixed precision reduces in
        job.express("grad_reduce_dtype")
    params = (
        "the model loaded in fp32 (torch_dtype=torch.float32): FSDP's mixed precision shards "
        "the fp32 parameters and gathers bf16 copies"
        if workload.fp32_params
        else "Accelerate's FSDP shards the parameters in the dtype the script loads them in"
    )
    return {
        "seq_len": "the training script's sequence length (its data collator)",
        "global_batch": batch,
        "grad_reduce_dtype": "Accelerate's bf16 mixed precision reduces in bf16 unless the "
        "script passes FullyShardedDataParallelPlugin(mixed_precision_policy={'param_dtype': "
        "torch.bfloat16, 'reduce_dtype': torch.float32})",
        "fp32_params": params,
        "master_copy": params,
        "attention_kernel": "the model's attn_implementation (from_pretrained: "
        "'flash_attention_2' or 'sdpa'), set in the script",
        "flash_attention": "the model's attn_implementation, set in the script",
        "cross_entropy": "the model's loss, in the script",
        "host_sync_interval": "the script's loop (how often it reads the loss)",
        "optimizer_state_dtype": "the script's optimizer",
        "fp8_param_gather": "torchao's float8 all-gather, fp8_config "
        "enable_fsdp_float8_all_gather with fsdp_version 2; FSDP1 and Transformer Engine's "
        "backend gather bf16",
        MODEL_ROPE: "the model's own config (config.json rope_theta / rope_scaling), which the "
        "script loads",
    }


def _dynamo(job: ExportJob) -> dict[str, Value] | None:
    """``dynamo_config``: torch.compile (Inductor fuses the elementwise ops) where the
    prediction fused them, else None (eager)."""
    job.express("fused_elementwise")
    if not job.train[1].fused_elementwise:
        return None
    return {"dynamo_backend": "INDUCTOR"}


def _mixed_precision(job: ExportJob) -> tuple[str, dict[str, Value] | None]:
    """``mixed_precision`` and, for fp8, ``fp8_config``; bf16 (with a note) for a format
    Accelerate's FSDP launch does not train in."""
    layout, workload = job.train[0].layout, job.train[1]
    precision = str(layout.precision)
    if precision not in _MIXED_PRECISIONS:
        job.note(
            f"the prediction assumes {setting_words(job, 'precision')}: Accelerate's mixed "
            "precision offers bf16 and fp8 (Transformer Engine, torchao, MS-AMP); bf16 is set"
        )
        return "bf16", None
    job.express("precision")
    if precision != "fp8":
        return "bf16", None
    backend = _FP8_BACKEND.get(workload.fp8_casts)
    if backend is None:  # rowwise: torchao's backend, its default (tensorwise) recipe
        backend = "ao"
    else:
        job.express("fp8_casts")
    config: dict[str, Value] = {"backend": backend}
    if backend == "ao" and fsdp_version(job) == 2:  # FSDP2's float8 weight all-gather
        config["enable_fsdp_float8_all_gather"] = workload.fp8_param_gather
        job.express("fp8_param_gather")
    return "fp8", config


def sections(job: ExportJob) -> dict[str, Value]:
    """The launch config's keys, in the order ``accelerate config`` writes them (notes go to
    ``job.notes``)."""
    layout = job.train[0].layout
    version = fsdp_version(job)
    distributed = "MULTI_GPU" if layout.zero == 0 and version == 2 else "FSDP"
    mixed, fp8 = _mixed_precision(job)
    out: dict[str, Value] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": distributed,
        "mixed_precision": mixed,
        "num_machines": job.num_nodes,
        "num_processes": layout.num_gpus,
        "machine_rank": 0,
        "main_training_function": "main",
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    if fp8 is not None:
        out["fp8_config"] = fp8
    dynamo = _dynamo(job)
    if dynamo is not None:
        out["dynamo_config"] = dynamo
    if distributed == "FSDP":
        out["fsdp_config"] = _fsdp_config(job, version)
        job.express("fsdp2_buffer_copies")  # the version is the one with (2) or without them
        if version == 2:
            hybrid = _parallelism(job)
            if hybrid is not None:
                out["parallelism_config"] = hybrid
    else:  # DDP: torch's buckets behind the backward
        if dp_overlapped(job):
            job.express(DP_OVERLAP)
        if layout.recompute is not Recompute.NONE:
            job.note(
                f"{layout.recompute.value} recomputation: the script checkpoints the layers "
                "(model.gradient_checkpointing_enable()); DDP's launch config has no key for it"
            )
    _degrees(job)
    express_framework(job, "accelerate")
    where = _script(job)
    note_unexpressed(
        job, "Accelerate", {**where, **express_native_gather_and_cast(job, "accelerate")}
    )
    return out


def render(job: ExportJob) -> ExportResult:
    """The YAML launch config, with a header comment naming the Accelerate commit."""
    return yaml_sections_result(
        job,
        sections(job),
        format="accelerate",
        framework=(FRAMEWORK, VERSION),
        checked=f"Accelerate launch config; keys checked against huggingface/accelerate {VERSION}",
        usage=[
            "save as fsdp.yaml and run: accelerate launch --config_file fsdp.yaml train.py; on",
            "each node set machine_rank and main_process_ip / main_process_port",
        ],
    )
