"""DeepSpeed JSON config for a plan: ZeRO stage, micro-batch, gradient accumulation, batch,
precision, and AutoTP's tensor-parallel size.

Keys checked against deepspeedai/DeepSpeed tag ``v0.19.5`` (commit cf44300):
``deepspeed/runtime/constants.py``, ``runtime/zero/config.py``, ``runtime/precision_config.py``
and ``runtime/tensor_parallel/config.py``; the list is ``tests/data/framework_args/deepspeed.txt``.
JSON has no comments, so the notes travel in :attr:`ExportResult.notes` (stderr on the CLI).
"""

from __future__ import annotations

import json
import math

from planner.cost.params import layer_dense_and_expert_params
from planner.report.export.assumed import (
    DP_OVERLAP,
    dp_overlapped,
    express_framework,
    express_native_gather_and_cast,
    note_unexpressed,
)
from planner.report.export.job import ExportJob, ExportResult
from planner.specs.layout import Recompute

FRAMEWORK = "DeepSpeed config JSON"
VERSION = "v0.19.5 (cf44300)"


def deepspeed_config(job: ExportJob) -> dict[str, object]:
    """The config dict (notes go to ``job.notes``)."""
    layout, workload = job.train[0].layout, job.train[1]
    stage = layout.zero
    if layout.pp > 1 and stage > 1:
        job.note(f"DeepSpeed's pipeline engine supports ZeRO stage 0 or 1 only: ZeRO-{stage} -> 1")
        stage = 1
    zero: dict[str, object] = {"stage": stage}
    if layout.dp * layout.cp > 1:  # overlap_comm defaults to on for ZeRO-3 only
        overlap = dp_overlapped(job)
        zero["overlap_comm"] = overlap
        if layout.pp > 1 and overlap:
            job.note(
                "DeepSpeed's pipeline engine reduces gradients after the last micro-batch "
                "(TrainSchedule's ReduceGrads), whatever overlap_comm says: the prediction "
                "overlaps them (dp_comm_overlap)"
            )
    job.express(DP_OVERLAP)
    if stage == 3:
        zero.update(_stage3(job))
    config: dict[str, object] = {
        "train_batch_size": workload.global_batch,
        "train_micro_batch_size_per_gpu": layout.mbs,
        "gradient_accumulation_steps": job.num_microbatches,
        "zero_optimization": zero,
        "communication_data_type": workload.grad_reduce_dtype,
        "data_types": {"grad_accum_dtype": workload.grad_reduce_dtype},
    }
    job.express("global_batch", "grad_reduce_dtype")
    if str(layout.precision) == "fp16":
        config["fp16"] = {"enabled": True}
    else:
        config["bf16"] = {"enabled": True}
    if str(layout.precision) not in ("bf16", "fp16"):
        job.note(
            f"precision {layout.precision}: DeepSpeed's config has no switch for it (use "
            "Transformer Engine in the model); bf16 is set"
        )
    else:
        job.express("precision")
    if layout.tp > 1:
        config["tensor_parallel"] = {"autotp_size": layout.tp}
        job.note(f"tp={layout.tp} uses DeepSpeed AutoTP training (tensor_parallel.autotp_size)")
    if not workload.fp32_params:  # bf16 parameters, fp32 master copy in the optimizer
        job.express("fp32_params")
    if workload.master_copy:
        job.express("master_copy")
    if not workload.fp8_param_gather:  # ZeRO gathers the bf16 parameters
        job.express("fp8_param_gather")
    if workload.pipeline_schedule == "1f1b" and layout.vpp == 1:  # its TrainSchedule is 1F1B
        job.express("pipeline_schedule")
    express_framework(job, "deepspeed")
    _code_level_notes(job)
    job.express("recompute_modules", "recompute_num_layers")  # in the recompute note
    note_unexpressed(
        job,
        "DeepSpeed's config",
        {
            "seq_len": "the data loader sets it",
            "fp32_params": "DeepSpeed keeps bf16 parameters and an fp32 master copy in the "
            "optimizer",
            "optimizer_state_dtype": "DeepSpeed's Adam keeps fp32 moments",
            "master_copy": "DeepSpeed's bf16 optimizer keeps an fp32 master copy of the parameters",
            **express_native_gather_and_cast(job, "deepspeed"),
        },
    )
    return config


def _stage3(job: ExportJob) -> dict[str, object]:
    """ZeRO-3 keys: hybrid sharding as MiCS (``mics_shard_size``: parameters, gradients and
    optimizer state sharded within groups of that many ranks, replicated across them; Zhang et
    al., "MiCS", VLDB 2023) and the gathered parameters alive at once
    (``stage3_max_live_parameters``, in parameters: ``unsharded_param_layers`` of the largest
    layer's shard on one rank, dense weights over tp and experts over ep x etp)."""
    layout, workload = job.train[0].layout, job.train[1]
    out: dict[str, object] = {}
    group = workload.zero_shard_group
    if group is not None and (layout.dp * layout.cp) % group == 0:
        out["mics_shard_size"] = group
        job.express("zero_shard_group")
    largest = max(
        dense / layout.tp + expert / (layout.ep * layout.etp)
        for dense, expert in (
            layer_dense_and_expert_params(job.model, i) for i in range(job.model.num_layers)
        )
    )
    live = math.ceil(workload.unsharded_param_layers * largest)
    out["stage3_max_live_parameters"] = live
    job.express("unsharded_param_layers")
    return out


def _code_level_notes(job: ExportJob) -> None:
    layout = job.train[0].layout
    if layout.pp > 1:
        job.note(
            f"pp={layout.pp} is set in code: deepspeed.pipe.PipelineModule(num_stages="
            f"{layout.pp}); train_batch_size counts the dp={layout.dp} replicas only"
        )
    if layout.vpp > 1:
        job.note(f"vpp={layout.vpp}: DeepSpeed's pipeline has no interleaved schedule")
    _split_notes(job)
    if layout.cp > 1:
        job.note(f"cp={layout.cp}: use DeepSpeed-Ulysses sequence parallelism in the model code")
    if layout.ep > 1:
        job.note(f"ep={layout.ep}: set ep_size in deepspeed.moe.layer.MoE in the model code")
    workload = job.train[1]
    if job.model.moe is not None and workload.moe_expert_compute == "einsum":
        # deepspeed.moe's MOELayer: GShard's einsums over the rank's flattened micro-batch
        job.express("moe_expert_compute")
        if workload.moe_routing_group == "microbatch":
            job.express("moe_routing_group")
    if layout.recompute is not Recompute.NONE:
        workload = job.train[1]
        stages = job.train[0].pipeline_stages
        partial = any(s.recompute_layers != s.num_layers for s in stages)
        what = (
            f"of {', '.join(workload.recompute_modules)}"
            if layout.recompute is Recompute.SELECTIVE
            else "of the layers the note on the stages lists"
            if partial
            else "of every layer"
            if workload.recompute_num_layers is None
            else f"of the first {workload.recompute_num_layers} layers of each pipeline chunk"
        )
        job.note(
            f"recompute {layout.recompute} ({what}): wrap them with "
            "deepspeed.checkpointing.checkpoint in the model code"
        )


def _split_notes(job: ExportJob) -> None:
    """The plan's layers per pipeline stage and recomputed layers per stage where they are not
    what DeepSpeed does from its config: its PipelineModule places the layers by its own rule
    (``partition_method`` "parameters", "uniform" or "type:<regex>", no list of boundaries) and
    checkpoints every layer (``activation_checkpoint_interval``), so a solved split and a partial
    recomputation are set in code, and the note says what the plan loses without them."""
    plan = job.train[0]
    info, stages = plan.pipeline_split, plan.pipeline_stages
    if plan.layout.pp == 1 or info is None or info.method == "even" or not stages:
        return
    counts = [s.num_layers for s in stages]
    job.note(
        f"the plan places {counts} decoder layers on the {plan.layout.pp} pipeline stages "
        f"({info.optimised or f'the {info.method} split'}): PipelineModule takes no list of "
        "boundaries (partition_method 'parameters', 'uniform' or 'type:<regex>'), so place them "
        "in code (override PipelineModule._partition_layers); the planner's even split predicts "
        f"{info.even_step_time_s:.4g} s per step against the plan's {plan.step_time_s:.4g} s"
    )
    redo = [s.recompute_layers for s in stages]
    if plan.layout.recompute is Recompute.FULL and redo != counts:
        job.note(
            f"recompute the first {redo} layers of each pipeline stage (of {counts}): "
            "activation_checkpoint_interval checkpoints every layer, so wrap only those in "
            "deepspeed.checkpointing.checkpoint"
        )


def render(job: ExportJob) -> ExportResult:
    """The config as indented JSON; notes only in the result (JSON has no comments)."""
    config = deepspeed_config(job)
    return ExportResult(
        format="deepspeed",
        framework=FRAMEWORK,
        framework_version=VERSION,
        text=json.dumps(config, indent=2) + "\n",
        args=[],
        notes=list(job.notes),
    )
