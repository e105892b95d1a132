"""Export a plan to the frameworks that run it (``layout export --format F``).

Formats: ``megatron`` (Megatron-LM ``pretrain_gpt.py`` arguments), ``bridge`` (Megatron-Bridge /
NeMo ``ConfigContainer`` overrides), ``torchtitan`` (TOML job-config sections), ``deepspeed``
(JSON config), ``maxtext`` (YAML overrides of MaxText's base.yml), ``automodel`` (NeMo AutoModel
recipe sections, YAML), ``nanotron`` (Nanotron config sections, YAML), ``accelerate`` (Hugging
Face Accelerate's FSDP launch config, YAML), ``vllm`` (``vllm serve``)
and ``sglang`` (``sglang.launch_server``). Every name emitted exists in the framework version
each module names; the lists live in ``tests/data/framework_args/`` and the tests check every
export against them. What a framework cannot express is said in :attr:`ExportResult.notes` (and
as comments where the format has them), with the nearest expressible setting chosen.

>>> import planner
>>> plan = planner.estimate(model="70B", cluster="hgx_b200x16", layout={"tp": 4, "pp": 2})
>>> result = export(make_job(plan), "megatron")
>>> result.args[:4]
['--tensor-model-parallel-size', '4', '--pipeline-model-parallel-size', '2']
"""

from __future__ import annotations

from collections.abc import Callable

from planner.errors import SpecError
from planner.report.export import (
    accelerate,
    automodel,
    bridge,
    deepspeed,
    maxtext,
    megatron,
    nanotron,
    serving,
    torchtitan,
)
from planner.report.export.job import (
    ExportJob,
    ExportResult,
    check_batch,
    load_plan_file,
    workload_for_plan,
)
from planner.specs.cluster import ClusterSpec
from planner.specs.model import ModelSpec
from planner.specs.result import Plan, ServePlan
from planner.specs.workload import ServeWorkload, TrainWorkload

FORMATS: dict[str, Callable[[ExportJob], ExportResult]] = {
    "megatron": megatron.render,
    "bridge": bridge.render,
    "torchtitan": torchtitan.render,
    "deepspeed": deepspeed.render,
    "maxtext": maxtext.render,
    "automodel": automodel.render,
    "nanotron": nanotron.render,
    "accelerate": accelerate.render,
    "vllm": serving.render_vllm,
    "sglang": serving.render_sglang,
}
"""Format name -> renderer."""

__all__ = [
    "FORMATS",
    "ExportJob",
    "ExportResult",
    "export",
    "load_plan_file",
    "make_job",
    "workload_for_plan",
]


def make_job(
    plan: Plan | ServePlan,
    *,
    model: ModelSpec | None = None,
    cluster: ClusterSpec | None = None,
    workload: TrainWorkload | ServeWorkload | None = None,
) -> ExportJob:
    """An export job; the model and cluster default to the plan's catalog names, a training
    workload to the one the plan records (else the default sequence length with the plan's
    tokens per step), a serving workload to the defaults (context 8,192)."""
    from planner.catalog import load_cluster, load_model

    if workload is None and isinstance(plan, Plan) and plan.workload is not None:
        workload = plan.workload  # what the plan was scored on (schema 1.3)
    if workload is None:
        workload = (
            ServeWorkload()
            if isinstance(plan, ServePlan)
            else workload_for_plan(plan, seq_len=TrainWorkload().seq_len)
        )
    job = ExportJob(
        plan=plan,
        model=model or load_model(plan.model),
        cluster=cluster or load_cluster(plan.cluster),
        workload=workload,
    )
    if job.model.name != plan.model:
        raise SpecError(f"the plan is for model '{plan.model}', not '{job.model.name}'")
    check_batch(job)
    return job


def export(job: ExportJob, fmt: str) -> ExportResult:
    """Render ``job`` in format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt not in FORMATS:
        raise SpecError(f"unknown export format '{fmt}' (one of: {', '.join(FORMATS)})")
    job.notes.clear()
    job.expressed.clear()
    job.env.clear()
    for line in job.origin:
        job.note(line)
    changes = job.cluster.changes()
    if changes:  # the arguments cannot say it: the hardware they were planned for
        job.note(
            f"planned for cluster '{job.cluster.name}' as changed from the catalog "
            f"({'; '.join(changes)}): the numbers hold on hardware that matches"
        )
    return FORMATS[fmt](job)
