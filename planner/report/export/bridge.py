"""Megatron-Bridge (NeMo) recipe overrides for a plan: Hydra-style ``key=value`` on the
``ConfigContainer`` (``scripts/training/run_recipe.py --recipe NAME key=value ...``).

Names checked against NVIDIA-NeMo/Megatron-Bridge tag ``v0.6.0`` (commit 51885cf): the
``ConfigContainer`` sections ``model`` (GPTModelProvider, i.e. Megatron-Core's TransformerConfig
at the pinned submodule cd4afff), ``train``, ``dataset``, ``ddp``, ``optimizer``, ``dist``,
``checkpoint``, and the registered ``mixed_precision`` recipe names; the list is
``tests/data/framework_args/bridge.txt``.
"""

from __future__ import annotations

from planner.report.export.job import (
    EP_OVERLAP_FIELDS,
    ExportJob,
    ExportResult,
    comment_block,
    moe_execution_fields,
    mtp_layers,
    pipeline_split,
    split_note,
    split_recompute_settings,
)
from planner.report.export.megatron import pipeline_layout
from planner.report.quote import shell_word

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
    if job.model.moe is not None:
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
    return [f"mixed_precision={_MIXED_PRECISION[precision]}"]


def bridge_overrides(job: ExportJob) -> list[str]:
    """The overrides, in order (notes go to ``job.notes``)."""
    return _parallel(job) + _batch_and_memory(job) + _precision(job)


def render(job: ExportJob) -> ExportResult:
    """A bash array ``BRIDGE_OVERRIDES=( ... )``, one override per line."""
    overrides = bridge_overrides(job)
    plan = job.train[0]
    header = [
        f"{FRAMEWORK}; names checked against NVIDIA-NeMo/Megatron-Bridge {VERSION}",
        f"plan: {plan.model} on {plan.cluster}: {plan.layout.short()} ({plan.num_gpus} GPUs)",
        "use with the model's recipe, e.g.: torchrun ... scripts/training/run_recipe.py "
        '--recipe <model>_pretrain_config "${BRIDGE_OVERRIDES[@]}"',
        "the recipe sets the architecture; these set the layout, batch and precision",
        *(f"note: {note}" for note in job.notes),
    ]
    lines = [*comment_block(header), "BRIDGE_OVERRIDES=("]
    lines += [f"  {shell_word(item)}" for item in overrides]
    lines.append(")")
    return ExportResult(
        format="bridge",
        framework=FRAMEWORK,
        framework_version=VERSION,
        text="\n".join(lines) + "\n",
        args=overrides,
        notes=list(job.notes),
    )
