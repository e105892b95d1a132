"""Serving command lines: ``vllm serve`` and ``python -m sglang.launch_server``.

From a serving plan (``planner.serve_search`` / ``serve_estimate``) the replica's TP, PP, EP,
attention DP, KV-cache format and the engine settings the prediction assumed (max batch, token
budget, chunked prefill mixed with decodes, the memory given to weights and KV) map onto the
servers' flags, one command per replica. From a training plan the TP and PP are carried over as
a best effort, and the output says so: a serving search sizes TP and replicas for latency and KV
cache.

Names checked against vllm-project/vllm commit 99d7eb5 (v0.11 line, ``vllm/engine/arg_utils.py``)
and sgl-project/sglang commit 001067f (``python/sglang/srt/server_args.py``); the lists are
``tests/data/framework_args/vllm.txt`` and ``sglang.txt``.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.report.export.job import ExportJob, ExportResult, comment_block
from planner.report.quote import shell_command
from planner.specs.result import ServePlan
from planner.specs.workload import ServeWorkload

VLLM = "vllm serve"
VLLM_VERSION = "99d7eb5 (v0.11 line)"
SGLANG = "python -m sglang.launch_server"
SGLANG_VERSION = "001067f"

_DIST_INIT_PORT = 5000
_VLLM_KV = {"bf16": "auto", "fp16": "auto", "fp8": "fp8"}
_SGLANG_KV = {"bf16": "auto", "fp16": "auto", "fp8": "fp8_e4m3", "mxfp8": "mxfp8", "nvfp4": "nvfp4"}
_SGLANG_QUANT = {"fp8": "fp8", "mxfp8": "mxfp8"}


@dataclass(frozen=True)
class Replica:
    """One serving replica, from a serving plan or (best effort) a training plan."""

    tp: int
    pp: int
    ep: int
    attention_dp: int
    replicas: int
    precision: str
    kv_precision: str
    context: int
    concurrency: int
    max_num_tokens: int = 0
    mixed_prefill: bool = True
    memory_fraction: float = 0.0
    """(weights + workspace + KV cache) / HBM: vLLM ``--gpu-memory-utilization``."""
    static_fraction: float = 0.0
    """(weights + KV cache) / HBM: SGLang ``--mem-fraction-static``."""


def replica(job: ExportJob) -> Replica:
    """The replica to launch; notes the best effort when the plan is a training plan."""
    if isinstance(job.plan, ServePlan):
        plan = job.plan
        layout = plan.layout
        context = job.workload.context if isinstance(job.workload, ServeWorkload) else 8192
        engine, mem = plan.engine, plan.memory
        fractions = (
            (mem.weights_gib + mem.workspace_gib + mem.kv_cache_gib) / mem.hbm_gib,
            (mem.weights_gib + mem.kv_cache_gib) / mem.hbm_gib,
        )
        return Replica(
            layout.tp, layout.pp, layout.ep, layout.attention_dp, layout.replicas,
            str(layout.precision), str(layout.kv_precision),
            engine.max_model_len if engine else context,
            engine.max_num_seqs if engine else plan.concurrency,
            engine.max_num_tokens if engine else 0,
            engine.mixed_prefill if engine else True,
            *(round(f - 0.005, 2) if engine else 0.0 for f in fractions),
        )  # fmt: skip
    plan, workload = job.train
    layout = plan.layout
    per_replica = layout.tp * layout.pp
    job.note(
        f"best effort from a training plan ({layout.short()}): TP and PP are the training "
        "layout's; a serving search (planner.serve_search) sizes them for latency and KV cache"
    )
    if layout.cp > 1:
        job.note(f"cp={layout.cp} is training-only: each replica serves whole sequences")
    ep = layout.ep if job.model.moe is not None else 1
    precision = str(layout.precision)
    return Replica(
        layout.tp, layout.pp, ep, 1, plan.num_gpus // per_replica,
        precision, "bf16", workload.seq_len, 0,
    )  # fmt: skip


def _model_id(job: ExportJob) -> str:
    name = job.hf_model_id
    if name is None:
        job.note(
            f"'{job.model.name}' has no Hugging Face id in its source: replace it with the "
            "checkpoint's id or path"
        )
        name = job.model.name
    # an argument: a leading '-' would read as a flag (a hub id cannot start with one, but a
    # model built without validation can carry anything)
    return f"./{name}" if name.startswith("-") else name


def _engine_note(job: ExportJob, name: str) -> None:
    """Say so when the plan was priced with another engine's overheads than the one exported."""
    plan = job.plan
    if isinstance(plan, ServePlan) and plan.engine is not None and plan.engine.profile != name:
        job.note(
            f"the plan was priced with the {plan.engine.profile} engine's overheads, not "
            f"{name}'s (search with --serving-engine {name})"
        )


def _replica_notes(job: ExportJob, rep: Replica) -> int:
    """Say how many replicas to start; return the nodes one replica spans (1 = one node)."""
    per_replica = rep.tp * rep.pp
    if rep.replicas > 1:
        job.note(
            f"run {rep.replicas} replicas of {per_replica} GPU(s) behind a load balancer "
            "(this command starts one)"
        )
    return max(1, -(-per_replica // job.gpus_per_node))


def _unsupported_precision(job: ExportJob, name: str, what: str, value: str) -> None:
    job.note(f"{what} {value}: {name} has no switch for it here (use a checkpoint quantized so)")


def vllm_argv(job: ExportJob) -> list[str]:
    """``vllm serve MODEL ...`` for one replica, as an argument list."""
    rep = replica(job)
    nodes = _replica_notes(job, rep)
    _engine_note(job, "vllm")
    tp, dp = rep.tp, 1
    if rep.attention_dp > 1:
        tp, dp = rep.tp // rep.attention_dp, rep.attention_dp
        job.note(
            f"attention DP {rep.attention_dp}: vLLM runs it as --data-parallel-size with "
            "expert parallelism; its dense FFN layers are replicated, not split over tp"
        )
    argv = ["vllm", "serve", _model_id(job)]
    argv += ["--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(rep.pp)]
    if dp > 1:
        argv += ["--data-parallel-size", str(dp)]
    argv += ["--max-model-len", str(rep.context), "--dtype", "bfloat16"]
    if rep.ep > 1:
        argv.append("--enable-expert-parallel")
        if rep.ep != tp * dp:
            job.note(
                f"vLLM's expert-parallel size is TP x DP of the replica ({tp * dp}), ep={rep.ep}"
            )
    elif dp > 1:  # without the flag vLLM splits each expert tensor-parallel over TP x DP
        job.note(
            f"ep=1: the experts split tensor-parallel over the replica's TP x DP ({tp * dp}), as "
            "vLLM does without --enable-expert-parallel"
        )
    if rep.precision == "fp8":
        argv += ["--quantization", "fp8"]
    elif rep.precision not in ("bf16", "fp16"):
        _unsupported_precision(job, "vLLM", "weights", rep.precision)
    if rep.kv_precision in _VLLM_KV:
        argv += ["--kv-cache-dtype", _VLLM_KV[rep.kv_precision]]
    else:
        _unsupported_precision(job, "vLLM", "KV cache", rep.kv_precision)
    if rep.concurrency:
        per_engine = -(-rep.concurrency // dp)
        argv += ["--max-num-seqs", str(per_engine)]
        if dp > 1:
            job.note(
                f"--max-num-seqs is per data-parallel engine: {rep.concurrency} sequences over "
                f"{dp} engines"
            )
    if rep.max_num_tokens:
        argv += ["--max-num-batched-tokens", str(rep.max_num_tokens)]
        if rep.mixed_prefill:
            argv.append("--enable-chunked-prefill")
        else:
            job.note("prefill runs in its own passes here; vLLM V1 always mixes chunked prefill")
    if rep.memory_fraction > 0:
        argv += ["--gpu-memory-utilization", f"{rep.memory_fraction:.2f}"]
    if nodes > 1:
        argv += ["--distributed-executor-backend", "ray"]
        job.note(f"one replica spans {nodes} nodes: start a Ray cluster over them first")
    return argv


def sglang_argv(job: ExportJob) -> list[str]:
    """``python -m sglang.launch_server ...`` for one replica (its node 0), as a list."""
    rep = replica(job)
    nodes = _replica_notes(job, rep)
    _engine_note(job, "sglang")
    argv = ["python", "-m", "sglang.launch_server", "--model-path", _model_id(job)]
    argv += ["--tp-size", str(rep.tp), "--pp-size", str(rep.pp)]
    if rep.attention_dp > 1:
        argv += ["--dp-size", str(rep.attention_dp), "--enable-dp-attention"]
    if rep.ep > 1:
        argv += ["--ep-size", str(rep.ep)]
    argv += ["--context-length", str(rep.context), "--dtype", "bfloat16"]
    if rep.precision in _SGLANG_QUANT:
        argv += ["--quantization", _SGLANG_QUANT[rep.precision]]
    elif rep.precision not in ("bf16", "fp16"):
        _unsupported_precision(job, "SGLang", "weights", rep.precision)
    if rep.kv_precision in _SGLANG_KV:
        argv += ["--kv-cache-dtype", _SGLANG_KV[rep.kv_precision]]
    else:
        _unsupported_precision(job, "SGLang", "KV cache", rep.kv_precision)
    if rep.concurrency:
        argv += ["--max-running-requests", str(rep.concurrency)]
    if rep.max_num_tokens:
        argv += ["--chunked-prefill-size", str(rep.max_num_tokens)]
        argv += ["--max-prefill-tokens", str(rep.max_num_tokens)]
        if rep.mixed_prefill:
            argv.append("--enable-mixed-chunk")
    if rep.static_fraction > 0:
        argv += ["--mem-fraction-static", f"{rep.static_fraction:.2f}"]
    if nodes > 1:
        argv += ["--nnodes", str(nodes), "--node-rank", "0"]
        argv += ["--dist-init-addr", f"node0:{_DIST_INIT_PORT}"]
        job.note(f"run on each of the replica's {nodes} nodes with its own --node-rank")
    return argv


def _render(
    job: ExportJob, fmt: str, argv: list[str], framework: tuple[str, str, str]
) -> ExportResult:
    name, repo, version = framework
    header = [
        f"{name} arguments; names checked against {repo} {version}",
        f"plan: {job.plan.model} on {job.plan.cluster}: {job.plan.layout.short()}",
        *(f"note: {note}" for note in job.notes),
    ]
    return ExportResult(
        format=fmt,
        framework=name,
        framework_version=version,
        text="\n".join([*comment_block(header), shell_command(argv)]) + "\n",
        args=argv,
        notes=list(job.notes),
    )


def render_vllm(job: ExportJob) -> ExportResult:
    """A ``vllm serve`` command line with comments."""
    argv = vllm_argv(job)
    return _render(job, "vllm", argv, (VLLM, "vllm-project/vllm", VLLM_VERSION))


def render_sglang(job: ExportJob) -> ExportResult:
    """A ``python -m sglang.launch_server`` command line with comments."""
    argv = sglang_argv(job)
    return _render(job, "sglang", argv, (SGLANG, "sgl-project/sglang", SGLANG_VERSION))
