"""torchtitan job-config TOML sections ``[parallelism]``, ``[training]`` and
``[activation_checkpoint]`` for a plan.

Target: pytorch/torchtitan tag ``v0.2.2`` (commit 73a0e69), ``torchtitan/config/job_config.py``,
the last release line with TOML job configs (its main branch has moved to Python configs). The
names are in ``tests/data/framework_args/torchtitan.txt``. torchtitan's device mesh is
``pp, dp_replicate, dp_shard, cp, tp`` (PP outermost, TP innermost), the planner's rank order.
"""

from __future__ import annotations

from planner.report.export.job import (
    ExportJob,
    ExportResult,
    comment_block,
    mtp_layers,
    pipeline_split,
    split_recompute_settings,
)
from planner.report.quote import toml_string
from planner.specs.layout import Recompute

FRAMEWORK = "torchtitan job config (TOML)"
VERSION = "v0.2.2 (73a0e69)"

TomlValue = int | str | bool | list[list[str]]

_RESHARD = {1: "never", 2: "never", 3: "always"}


def _toml(value: TomlValue) -> str:
    """A TOML literal for the few value types the export writes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_string(value)
    rows = ", ".join("[" + ", ".join(_toml(item) for item in row) + "]" for row in value)
    return f"[{rows}]"


def _data_parallel(job: ExportJob) -> dict[str, TomlValue]:
    layout = job.train[0].layout
    if layout.zero == 0:
        return {"data_parallel_replicate_degree": layout.dp, "data_parallel_shard_degree": 1}
    if layout.zero == 1:
        job.note(
            "torchtitan has no ZeRO-1 (optimizer-only sharding): nearest is FSDP with "
            "fsdp_reshard_after_forward = never (ZeRO-2: gradients sharded too)"
        )
    return {
        "data_parallel_replicate_degree": 1,
        "data_parallel_shard_degree": layout.dp,
        "fsdp_reshard_after_forward": _RESHARD[layout.zero],
    }


def _pipeline(job: ExportJob) -> dict[str, TomlValue]:
    layout = job.train[0].layout
    if layout.pp == 1:
        return {"pipeline_parallel_degree": 1}
    out: dict[str, TomlValue] = {
        "pipeline_parallel_degree": layout.pp,
        "pipeline_parallel_schedule": "Interleaved1F1B" if layout.vpp > 1 else "1F1B",
        "pipeline_parallel_microbatch_size": layout.mbs,
    }
    kind, counts = pipeline_split(job)
    if kind == "even":
        out["pipeline_parallel_first_stage_less_layers"] = 0
        out["pipeline_parallel_last_stage_less_layers"] = 0
        if layout.vpp > 1:
            out["pipeline_parallel_layers_per_stage"] = counts[0]
        return out
    plan = job.train[0]
    cpsat = plan.pipeline_split is not None and plan.pipeline_split.method == "cp-sat"
    how = "the CP-SAT split" if cpsat else "the planner's split"
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


def parallelism(job: ExportJob) -> dict[str, TomlValue]:
    """The ``[parallelism]`` table."""
    layout = job.train[0].layout
    table = _data_parallel(job)
    table["tensor_parallel_degree"] = layout.tp
    table.update(_pipeline(job))
    table["context_parallel_degree"] = layout.cp
    if job.model.moe is not None:
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
    precision = str(layout.precision)
    if precision != "bf16":
        job.note(
            f"precision {precision}: enable it with [model] converters / [quantize] "
            "(not written here); the tables below keep bf16 mixed precision"
        )
    return {
        "local_batch_size": local,
        "global_batch_size": workload.global_batch,
        "seq_len": workload.seq_len,
        "mixed_precision_param": "bfloat16",
    }


def activation_checkpoint(job: ExportJob) -> dict[str, TomlValue]:
    """The ``[activation_checkpoint]`` table."""
    recompute = job.train[0].layout.recompute
    if recompute is Recompute.FULL:
        settings = split_recompute_settings(job)
        if settings.granularity is None:
            return {"mode": "none"}
        most = max((s.num_layers for s in job.train[0].pipeline_stages), default=0)
        if settings.method == "block" and settings.num_layers is not None and settings.num_layers < most:
            job.note(
                f"the plan recomputes the first {settings.num_layers} layers of each chunk; "
                "torchtitan's full AC recomputes every layer (more compute, less memory)"
            )
        return {"mode": "full"}
    if recompute is Recompute.SELECTIVE:
        job.note(
            "selective recompute (attention core) -> torchtitan's op-level selective AC, "
            "the nearest setting"
        )
        return {"mode": "selective", "selective_ac_option": "op"}
    return {"mode": "full" if recompute is Recompute.FULL else "none"}


def render(job: ExportJob) -> ExportResult:
    """The three TOML tables, with a header comment naming the torchtitan release."""
    tables = {
        "parallelism": parallelism(job),
        "training": training(job),
        "activation_checkpoint": activation_checkpoint(job),
    }
    plan = job.train[0]
    header = [
        f"torchtitan job-config sections; names checked against pytorch/torchtitan {VERSION},",
        "the last release line with TOML job configs (main has moved to Python configs)",
        f"plan: {plan.model} on {plan.cluster}: {plan.layout.short()} ({plan.num_gpus} GPUs)",
        "merge into a train config (e.g. models/llama3/train_configs/llama3_70b.toml)",
        *(f"note: {note}" for note in job.notes),
    ]
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
