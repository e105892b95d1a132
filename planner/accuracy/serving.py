"""Serving accuracy: planner predictions against published serving runs
(``tests/validation/serving.yaml``), row by row.

Each row states its model, GPUs, layout and formats; the planner scores exactly that layout
(``estimate --mode serve``) in the row's mode:

- ``max_throughput`` (trtllm-bench offline): concurrency = what the KV cache holds;
  compared: output tokens/s of the TP group.
- ``static_batch``: a fixed batch prefilled at once then decoded to the end;
  compared: output tokens/s per GPU.
- ``online`` at a request rate: concurrency from Little's law; compared: mean inter-token
  latency (ITL); TTFT is reported too. At QPS inf the run is saturated and compared like
  max_throughput.

A ``kv: null`` row (dtype not stated) is scored with the KV format of the checkpoint recipe the
row names: NVIDIA ModelOpt's quantised checkpoints (8-bit or 4-bit weights) store an FP8 KV cache
(``examples/llm_ptq/hf_ptq.py --kv_cache_qformat`` defaults to fp8); 16-bit weights keep a
16-bit cache. Error = predicted / measured - 1.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from planner.accuracy.rows import (
    REPO_DATA_DIR,
    WHEEL_DATA_DIR,
    RowModel,
    TrainingRow,
    data_date,
    to_model_spec,
)
from planner.accuracy.run import Summary, summarize
from planner.catalog import load_cluster
from planner.catalog.engines import DEFAULT_ENGINE, engine_names, load_engine
from planner.catalog.io import load_list, validate_spec
from planner.catalog.store import suggest
from planner.cost.serving_cycle import burst_ttft_mean_s, steady_state
from planner.cost.serving_time import ServeSetup, uniform_requests_throughput
from planner.errors import InfeasibleError, SpecError, one_line
from planner.search.serving import memory_cost, serve_setup
from planner.search.serving_point import operating_point
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.engine import ServingEngineSpec
from planner.specs.formats import NumberFormat, bits_per_value
from planner.specs.hardware import AcceleratorEfficiency
from planner.specs.model import ModelSpec
from planner.specs.result import ServeLayout
from planner.specs.workload import ServeWorkload
from planner.units import MS

SERVING_SCHEMA_VERSION = "1.0"
"""Version of the ServingValidationReport JSON shape."""
DEFAULT_KV_FRACTION = 0.95
"""kv_cache_free_gpu_mem_fraction of NVIDIA's published TensorRT-LLM tables (validation
README: 'usually 0.95')."""


class PrecisionRow(RowModel):
    """``precision``; null = not stated."""

    weights: str
    """Weight format."""
    kv: str | None = None
    """KV-cache format."""
    compute: str | None = None
    """GEMM format."""


class ServeLayoutRow(RowModel):
    """``layout``."""

    tp: int = 1
    """Tensor parallel."""
    pp: int = 1
    """Pipeline stages."""
    ep: int = 1
    """Expert parallel."""
    attention_dp: int = 1
    """Attention data-parallel ranks inside tp (rows added by the project)."""
    replicas: int = 1
    """Model replicas."""


class ServeWorkloadRow(RowModel):
    """``workload``."""

    prompt_len: int
    """Input tokens per request."""
    output_len: int
    """Output tokens per request."""
    mode: Literal["max_throughput", "static_batch", "online"]
    """How the run was driven."""
    batch: int | None = None
    """Static batch size."""
    qps: float | None = None
    """Offered request rate (inf = all at once)."""
    num_requests: int | None = None
    """Requests in the run (benchmarks issue them at once)."""
    max_num_tokens: int | None = None
    """The engine's token budget per forward pass when the run states it."""
    kv_cache_fraction: float | None = None
    """kv_cache_free_gpu_mem_fraction when the run states it."""


class ServeMeasuredRow(RowModel):
    """``measured``."""

    output_tokens_per_s: float | None = None
    """Output tokens/s of the TP group."""
    output_tokens_per_s_per_gpu: float | None = None
    """Output tokens/s per GPU."""
    ttft_ms: float | None = None
    """Mean time to first token (ms)."""
    itl_ms: float | None = None
    """Mean inter-token latency (ms)."""


class ServingRow(RowModel):
    """One published serving run."""

    id: str
    """Row id (``V1``)."""
    source: str
    """Where the numbers come from."""
    model: dict[str, object]
    """``{name, arch}`` as in the training rows."""
    cluster: str
    """Planner cluster name."""
    precision: PrecisionRow
    """Formats."""
    layout: ServeLayoutRow
    """Layout."""
    workload: ServeWorkloadRow
    """Workload."""
    measured: ServeMeasuredRow
    """Results."""
    origin: Literal["shared", "project"] = "shared"
    """``project`` for the rows this project added (not from ../shared/validation)."""
    engine: str | None = None
    """The engine and version that ran it, as the source names it."""


def engine_profile_of(row: ServingRow) -> str:
    """The engine profile of a row: the first catalog engine whose name its ``engine`` text
    holds, else the default engine (:data:`planner.catalog.engines.DEFAULT_ENGINE`).

    >>> engine_profile_of(ServingRow.model_construct(engine="TensorRT-LLM 0.17 (TensorRT engine)"))
    'tensorrt-llm'
    """
    text = (row.engine or "").lower()
    return next((name for name in engine_names() if name in text), DEFAULT_ENGINE)


def serving_source_of(row: ServingRow) -> str:
    """The source document of a row (its ``source`` up to the table or section it cites), the
    unit a leave-one-source-out fit holds out: rows of one document share an engine version,
    a harness and a way of measuring.

    >>> serving_source_of(ServingRow.model_construct(source="docs/perf.md, v0.20 revision, table 'A'"))
    'docs/perf.md, v0.20 revision'
    """
    return re.split(r",\s+(?:table|section)\b", row.source, maxsplit=1)[0].strip()


class ServingRowResult(FrozenSpec):
    """One serving row, predicted and measured."""

    id: str
    """Row id."""
    engine: str = "tensorrt-llm"
    """The engine profile that priced it (``topologies/engines/``)."""
    model: str
    """Model name as the source labels it."""
    cluster: str
    """Planner cluster name."""
    accelerator: str
    """Accelerator catalog name."""
    precision: str
    """Weights / KV formats used for the prediction (``fp8/kv-fp8``)."""
    layout: str
    """Layout scored."""
    mode: str
    """max_throughput, static_batch or online."""
    metric: str
    """What is compared: output_tokens_per_s, output_tokens_per_s_per_gpu or itl_ms."""
    moe: bool = False
    """The model has routed experts."""
    origin: str = "shared"
    """``shared`` (copied from ../shared/validation) or ``project`` (added by the project)."""
    status: Literal["ok", "not_evaluated"]
    """``ok`` or ``not_evaluated`` (see reason)."""
    reason: str | None = None
    """Why the planner could not evaluate the row."""
    predicted: float | None = None
    """Planner's value of ``metric``."""
    measured: float
    """Published value of ``metric``."""
    error: float | None = None
    """predicted / measured - 1."""
    concurrency: int | None = None
    """Sequences per replica the prediction ran at."""
    predicted_ttft_ms: float | None = None
    """Planner's TTFT (online rows; no queueing)."""
    measured_ttft_ms: float | None = None
    """Published mean TTFT."""
    ttft_error: float | None = None
    """TTFT predicted / measured - 1."""
    heldout_error: float | None = None
    """The error with the engine's overheads fitted without this row's source (the engine
    profile's fit record); None for a row no engine fit holds out."""


class ServingValidationReport(FrozenSpec):
    """The serving part of ``layout validate``."""

    schema_version: str = SERVING_SCHEMA_VERSION
    """Version of this JSON shape."""
    data: str
    """Validation file scored."""
    data_date: str
    """Newest date the file's sources cite."""
    rows: list[ServingRowResult]
    """Per row, file order."""
    overall: Summary
    """Statistics of the compared metric over every evaluated row."""
    families: list[Summary]
    """Per accelerator."""
    regimes: list[Summary] = Field(default_factory=list)
    """Dense and MoE rows, the shared and the project-added rows, and the online rows under a
    finite request rate (ITL with queueing)."""
    ttft: Summary
    """Statistics of TTFT over the rows that publish it (queueing included; overloaded finite
    runs not predicted)."""
    heldout: list[Summary] = Field(default_factory=list)
    """Out of sample, first: the same groups (all, dense, moe, under load, per engine) over the
    held-out errors, each row predicted with the engine's overheads fitted without its source; empty
    for a file no engine fit covers."""
    total_time_s: float = Field(default=0.0)
    """Wall time (s)."""


def serving_file() -> Path:
    """The bundled serving validation file (wheel layout first, then the source checkout)."""
    for folder in (WHEEL_DATA_DIR, REPO_DATA_DIR):
        if (folder / "serving.yaml").is_file():
            return folder / "serving.yaml"
    raise SpecError("the serving validation set (tests/validation/serving.yaml) is not installed")


def load_serving_rows(path: Path) -> list[ServingRow]:
    """Rows of a serving validation file, in file order."""
    data = load_list(path)
    return [validate_spec(ServingRow, r, where=f"{path.name} row {i}") for i, r in enumerate(data)]


def kv_format_of(row: ServingRow) -> NumberFormat:
    """The KV format to score: as stated, else FP8 for quantised checkpoints (see module doc)."""
    if row.precision.kv is not None:
        return NumberFormat(row.precision.kv.lower())
    weights = NumberFormat(row.precision.weights.lower())
    return NumberFormat.FP8 if bits_per_value(weights) <= 8 else weights


def serve_workload_of(row: ServingRow) -> ServeWorkload:
    """The planner workload of a row (context = prompt + output, the engines' max_seq_len)."""
    w = row.workload
    qps = None if w.qps is None or math.isinf(w.qps) else w.qps
    compute = row.precision.compute
    optional: dict[str, object] = {}
    if w.max_num_tokens is not None:
        optional["max_batch_tokens"] = w.max_num_tokens
    return ServeWorkload(
        context=w.prompt_len + w.output_len,
        prompt_len=w.prompt_len,
        output_len=w.output_len,
        precision=NumberFormat(row.precision.weights.lower()),
        kv_precision=kv_format_of(row),
        compute_precision=NumberFormat(compute.lower()) if compute else None,
        concurrency=w.batch,
        kv_cache_fraction=w.kv_cache_fraction or DEFAULT_KV_FRACTION,
        request_rate=qps,
        engine=engine_profile_of(row),
        **optional,
    )


def _model_of(row: ServingRow) -> ModelSpec:
    """The row's ModelSpec, through the training rows' converter (same arch schema)."""
    seq = row.workload.prompt_len + row.workload.output_len
    training = validate_spec(
        TrainingRow,
        {
            "id": row.id,
            "source": row.source,
            "model": row.model,
            "hardware": {"accelerator": "serving", "count": 1},
            "cluster": row.cluster,
            "precision": "bf16",
            "layout": {},
            "workload": {"seq_len": seq, "global_batch": 1},
            "measured": {},
        },
        where=f"row {row.id}",
    )
    return to_model_spec(training)


def _metric(row: ServingRow) -> tuple[str, float]:
    m, w = row.measured, row.workload
    if w.mode == "online" and w.qps is not None and not math.isinf(w.qps) and m.itl_ms:
        return "itl_ms", m.itl_ms
    if m.output_tokens_per_s is not None:
        return "output_tokens_per_s", m.output_tokens_per_s
    if m.output_tokens_per_s_per_gpu is not None:
        return "output_tokens_per_s_per_gpu", m.output_tokens_per_s_per_gpu
    raise SpecError(f"row {row.id}: no comparable measurement")


def predict_row(
    row: ServingRow,
    efficiency: AcceleratorEfficiency | None = None,
    engine: ServingEngineSpec | None = None,
) -> ServingRowResult:
    """Score one row; a SpecError or InfeasibleError becomes a not-evaluated row.
    ``efficiency`` replaces the accelerator's factors (the calibration scores a fit with it);
    ``engine`` replaces the row's engine profile (the engine fit scores its candidates)."""
    metric, measured = _metric(row)
    workload = serve_workload_of(row)
    lay = row.layout
    layout = ServeLayout(
        tp=lay.tp,
        pp=lay.pp,
        ep=lay.ep,
        attention_dp=lay.attention_dp,
        replicas=lay.replicas,
        precision=workload.precision,
        kv_precision=workload.kv_precision,
    )
    base = {
        "id": row.id,
        "model": str(row.model.get("name", "?")),
        "cluster": row.cluster,
        "accelerator": "?",
        "precision": f"{layout.precision}/kv-{layout.kv_precision}",
        "layout": layout.short(),
        "mode": row.workload.mode,
        "metric": metric,
        "moe": "moe" in row.model.get("arch", {}),  # type: ignore[operator]
        "origin": row.origin,
        "engine": engine_profile_of(row),
        "measured": measured,
        "measured_ttft_ms": row.measured.ttft_ms,
    }
    try:
        cluster = load_cluster(row.cluster)
        if efficiency is not None:
            acc = cluster.accelerator.model_copy(update={"efficiency": efficiency})
            cluster = cluster.model_copy(update={"accelerator": acc})
        base["accelerator"] = cluster.accelerator.name
        predicted, concurrency, ttft_ms = _predict(row, workload, layout, cluster, engine)
    except (SpecError, InfeasibleError) as exc:
        return ServingRowResult(**base, status="not_evaluated", reason=one_line(str(exc)))
    ttft_error = None
    if ttft_ms is not None and row.measured.ttft_ms:
        ttft_error = ttft_ms / row.measured.ttft_ms - 1.0
    return ServingRowResult(
        **base,
        status="ok",
        predicted=predicted,
        error=predicted / measured - 1.0,
        concurrency=concurrency,
        predicted_ttft_ms=ttft_ms,
        ttft_error=ttft_error,
    )


def _predict(
    row: ServingRow,
    workload: ServeWorkload,
    layout: ServeLayout,
    cluster: ClusterSpec,
    engine: ServingEngineSpec | None = None,
) -> tuple[float, int, float | None]:
    """(predicted metric, concurrency, TTFT in ms or None) of one row."""
    model = _model_of(row)
    mem = memory_cost(model, cluster, workload, layout)
    setup = serve_setup(model, cluster, workload, layout, engine)
    point = operating_point(
        setup,
        workload,
        max_sequences=mem.sequences,
        sequences_at_mean=mem.sequences_at_mean,
        replicas=layout.replicas,
    )
    if isinstance(point, tuple) and point[0] == "request_rate" and row.workload.num_requests:
        return _overloaded(row, workload, setup, mem.sequences)
    if isinstance(point, tuple):
        raise InfeasibleError(point[1])
    tpot = point.state.tpot_s
    w = row.workload
    metric, _ = _metric(row)
    burst = w.mode == "online" and w.qps is not None and math.isinf(w.qps) and w.num_requests
    one_pass = workload.max_batch_tokens * layout.attention_dp * layout.pp
    staggered = point.concurrency * workload.prompt_len > one_pass
    if w.mode == "static_batch" or (w.mode == "max_throughput" and w.num_requests) or burst:
        requests = w.num_requests if w.mode != "static_batch" else point.concurrency
        if w.mode == "static_batch" or not staggered:
            rate = uniform_requests_throughput(setup, workload, point.concurrency, requests or 1)
        else:
            rate = point.concurrency / tpot
        per = layout.num_gpus if metric == "output_tokens_per_s_per_gpu" else 1
        ttft_ms = None
        if burst and row.measured.ttft_ms:
            ttft_ms = burst_ttft_mean_s(setup, workload, point.concurrency, requests or 1) / MS
        return rate * layout.replicas / per, point.concurrency, ttft_ms
    ttft_ms = point.times.ttft_mean_s / MS if row.measured.ttft_ms else None
    group = point.concurrency / tpot * layout.replicas
    if metric == "itl_ms":
        return tpot / MS, point.concurrency, ttft_ms
    if metric == "output_tokens_per_s_per_gpu":
        return group / layout.num_gpus, point.concurrency, ttft_ms
    return group, point.concurrency, ttft_ms


def _overloaded(
    row: ServingRow, workload: ServeWorkload, setup: ServeSetup, slots: int
) -> tuple[float, int, float | None]:
    """A finite run offered more requests/s than the replica completes in steady state: it runs
    saturated at n = min(slots, N) sequences (compared like the QPS-inf rows). Its TTFT is a
    transient (the queue builds while the N requests arrive) that the steady-state queueing
    model does not describe: not predicted."""
    requests = row.workload.num_requests or 1
    busy = min(slots, requests)
    state = steady_state(setup, workload, busy)
    ttft_ms = None
    metric, _ = _metric(row)
    if metric == "itl_ms":
        return state.tpot_s / MS, busy, ttft_ms
    return busy / state.tpot_s, busy, ttft_ms


def heldout_error_of(row: ServingRow, error: float | None) -> float | None:
    """The out-of-sample error of a row whose in-sample error is ``error``: the one its engine's
    fit record stores when the engine was fitted on it (predicted with figures fitted without
    its source), else ``error`` itself (no figure was fitted on the row: an engine without a
    fit, or a row added after the fit)."""
    if error is None:
        return None
    fit = load_engine(engine_profile_of(row)).fit
    if fit is not None and row.id in fit.heldout_errors:
        return fit.heldout_errors[row.id]
    return error


def _with_heldout(row: ServingRow, result: ServingRowResult) -> ServingRowResult:
    """``result`` with its held-out error (:func:`heldout_error_of`)."""
    if result.status != "ok":
        return result
    return result.model_copy(update={"heldout_error": heldout_error_of(row, result.error)})


def run_serving_validation(
    path: Path | None = None, *, ids: list[str] | None = None
) -> ServingValidationReport:
    """Score every row (or those named by ``ids``) of a serving validation file."""
    start = time.perf_counter()
    path = path or serving_file()
    rows = load_serving_rows(path)
    if ids:
        known = [r.id for r in rows]
        for wanted in ids:
            if wanted not in known:
                raise SpecError(
                    f"unknown serving validation row '{wanted}'{suggest(wanted, known)}"
                )
        rows = [r for r in rows if r.id in ids]
    results = [predict_row(r) for r in rows]
    if path.resolve() == serving_file().resolve():
        results = [_with_heldout(row, r) for row, r in zip(rows, results, strict=True)]
    groups: dict[str, list[ServingRowResult]] = {}
    for r in results:
        groups.setdefault(r.accelerator, []).append(r)
    ttft_rows = [
        r.model_copy(
            update={
                "error": r.ttft_error,
                "status": "ok" if r.ttft_error is not None else "not_evaluated",
            }
        )
        for r in results
        if r.measured_ttft_ms
    ]
    online = [r for r in results if r.mode == "online" and r.metric == "itl_ms"]
    regimes = [
        summarize("dense", [r for r in results if not r.moe]),  # type: ignore[arg-type]
        summarize("moe", [r for r in results if r.moe]),  # type: ignore[arg-type]
        summarize("shared rows", [r for r in results if r.origin == "shared"]),  # type: ignore[arg-type]
        summarize("project rows", [r for r in results if r.origin == "project"]),  # type: ignore[arg-type]
        summarize("under load", online),  # type: ignore[arg-type]
        *(
            summarize(name, [r for r in results if r.engine == name])  # type: ignore[arg-type]
            for name in sorted({r.engine for r in results})
        ),
    ]
    held = [
        r.model_copy(update={"error": r.heldout_error})
        for r in results
        if r.heldout_error is not None
    ]
    heldout = [
        summarize("all", held),  # type: ignore[arg-type]
        summarize("dense", [r for r in held if not r.moe]),  # type: ignore[arg-type]
        summarize("moe", [r for r in held if r.moe]),  # type: ignore[arg-type]
        summarize("under load", [r for r in held if r.mode == "online" and r.metric == "itl_ms"]),  # type: ignore[arg-type]
        *(
            summarize(name, [r for r in held if r.engine == name])  # type: ignore[arg-type]
            for name in sorted({r.engine for r in held})
        ),
    ]
    return ServingValidationReport(
        heldout=[h for h in heldout if h.rows] if held else [],
        data="tests/validation/serving.yaml"
        if path.resolve() == serving_file().resolve()
        else str(path),
        data_date=data_date(path),
        rows=results,
        overall=summarize("all", results),  # type: ignore[arg-type]
        families=[summarize(acc, groups[acc]) for acc in sorted(groups)],  # type: ignore[arg-type]
        regimes=[r for r in regimes if r.rows],
        ttft=summarize("ttft", ttft_rows),  # type: ignore[arg-type]
        total_time_s=time.perf_counter() - start,
    )
