"""The Python API (DESIGN.md section 8): same names and semantics as the CLI, keyword arguments,
pydantic results. ``model`` and ``cluster`` accept a name, a path or a loaded spec; ``layout`` and
``workload`` accept a dict or the pydantic model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from planner.catalog import load_cluster as _load_cluster
from planner.catalog import load_model as _load_model
from planner.catalog.io import load_mapping, validate_spec
from planner.errors import SpecError
from planner.search import engine, serving_search
from planner.search import migrate as _migrate
from planner.search import whatif as _whatif
from planner.search.migrate import MigrateOptions
from planner.search.whatif import ProgressCallback, WhatIfOptions
from planner.specs.cluster import ClusterEdits, ClusterSpec
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout
from planner.specs.model import ModelSpec
from planner.specs.result import Plan, SearchResult, ServeLayout, ServePlan, ServeSearchResult
from planner.specs.scenarios import KnobValue, MigrateResult, RunLength, WhatIfResult
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import ServeWorkload, TrainWorkload

if TYPE_CHECKING:
    from planner.report.export import ExportResult
    from planner.report.placement_file import PlacementRecord

ModelLike = str | Path | ModelSpec
ClusterLike = str | Path | ClusterSpec
WorkloadLike = TrainWorkload | dict[str, object] | None


def load_model(name_or_path: ModelLike) -> ModelSpec:
    """A model from a catalog name, alias (``70B``), YAML file or Hugging Face ``config.json``."""
    return _load_model(name_or_path)


def load_cluster(
    name_or_path: ClusterLike, *, edits: ClusterEdits | dict[str, object] | None = None
) -> ClusterSpec:
    """A cluster from ``<system>x<N>``, a TPU slice name or a YAML file, with what-if edits."""
    if isinstance(edits, dict):
        edits = validate_spec(ClusterEdits, edits, where="cluster edits")
    return _load_cluster(name_or_path, edits)


def _workload(workload: WorkloadLike) -> TrainWorkload:
    if isinstance(workload, TrainWorkload):
        return workload
    return validate_spec(TrainWorkload, dict(workload or {}), where="workload")


def search(
    *,
    model: ModelLike,
    cluster: ClusterLike,
    workload: WorkloadLike = None,
    fix: dict[str, object] | None = None,
    top: int | None = None,
    config: SolverConfig | None = None,
    bounds: dict[str, tuple[int | None, int | None]] | None = None,
    precisions: list[str] | None = None,
    gpus: int | None = None,
) -> SearchResult:
    """Best training layout and runners-up (raises InfeasibleError / SpecError).

    ``fix`` pins layout fields ({"tp": 8}); ``bounds`` limits them ({"pp": (None, 16)});
    ``precisions`` lets the search pick the format (["bf16", "fp8"]); ``gpus`` caps the
    accelerators used; ``config`` sets the objective (time, cost, energy), a step-time target
    (fewest GPUs that meet it), the solver and its time limit.
    """
    config = config or SolverConfig()
    if top is not None:
        config = config.model_copy(update={"top": top})
    formats = [NumberFormat(p) for p in precisions] if precisions else None
    return engine.search(
        load_model(model),
        load_cluster(cluster),
        _workload(workload),
        fix=fix,
        config=config,
        bounds=bounds,
        precisions=formats,
        gpus=gpus,
    )


def estimate(
    *,
    model: ModelLike,
    cluster: ClusterLike,
    layout: Layout | dict[str, object],
    workload: WorkloadLike = None,
) -> Plan:
    """Score one layout; ``dp`` defaults to filling the cluster."""
    spec_model, spec_cluster, spec_workload = (
        load_model(model),
        load_cluster(cluster),
        _workload(workload),
    )
    if isinstance(layout, dict):
        fields = dict(layout)
        if "dp" not in fields:
            fields["dp"] = max(1, spec_cluster.num_accelerators // _per_replica(fields, "layout"))
        fields.setdefault("precision", spec_workload.precision)
        layout = validate_spec(Layout, fields, where="layout")
    return engine.estimate(spec_model, spec_cluster, spec_workload, layout)


def _per_replica(fields: dict[str, object], where: str) -> int:
    """tp x pp x cp of a layout given as a dict, to default dp (the Layout check that follows
    rejects values that are not positive whole numbers); SpecError when one is not a number."""
    out = 1
    for dim in ("tp", "pp", "cp"):
        value = fields.get(dim, 1)
        try:
            out *= max(1, int(value))  # type: ignore[call-overload]
        except (TypeError, ValueError, OverflowError):
            raise SpecError(
                f"{where}: {dim}: must be a positive whole number (got {str(value)[:60]!r})"
            ) from None
    return out


def not_fitting_reason(
    plan: Plan, model: ModelLike, cluster: ClusterLike, workload: WorkloadLike
) -> str:
    """One line: what does not fit in ``plan`` and by how much ('' when it fits)."""
    return engine.not_fitting_message(
        plan, load_model(model), load_cluster(cluster), _workload(workload)
    )


LayoutLike = Layout | dict[str, object] | str | Path | None
Knobs = dict[str, list[object]] | list[str]


def _as_layout(layout: Layout | dict[str, object] | str | Path, cluster: ClusterSpec,
               workload: TrainWorkload) -> Layout:  # fmt: skip
    """A Layout from a model, a dict or a YAML/JSON file; ``dp`` defaults to filling the cluster."""
    if isinstance(layout, Layout):
        return layout
    fields = dict(layout) if isinstance(layout, dict) else load_mapping(Path(layout))
    if "dp" not in fields:
        where = "layout" if isinstance(layout, dict) else f"layout {layout}"
        fields["dp"] = max(1, cluster.num_accelerators // _per_replica(fields, where))
    fields.setdefault("precision", workload.precision)
    return validate_spec(
        Layout, fields, where=f"layout {layout}" if not isinstance(layout, dict) else "layout"
    )


def _priced(cluster: ClusterLike, prices: dict[str, float]) -> ClusterSpec:
    """Load ``cluster`` with the price of the ``prices`` key that names it or its system."""
    spec = load_cluster(cluster)
    for key in (str(cluster), spec.name, spec.system.name):
        if key in prices:
            return load_cluster(cluster, edits={**spec.edits, "price_per_gpu_hour": prices[key]})
    return spec


def _run_length(tokens: float | None, steps: int | None) -> RunLength | None:
    if tokens is None and steps is None:
        return None
    return validate_spec(RunLength, {"tokens": tokens, "steps": steps}, where="--tokens/--steps")


def migrate(
    *,
    model: ModelLike,
    from_cluster: ClusterLike,
    to_cluster: ClusterLike,
    workload: WorkloadLike = None,
    layout: LayoutLike = None,
    fix: dict[str, object] | None = None,
    prices: dict[str, float] | None = None,
    tokens: float | None = None,
    steps: int | None = None,
    config: SolverConfig | None = None,
) -> MigrateResult:
    """Re-plan ``model`` from ``from_cluster`` to ``to_cluster`` (CLI ``layout migrate``).

    ``layout``: the layout in use on the source (dict, Layout or YAML/JSON file; default: search
    the source too). ``prices``: USD per GPU-hour keyed by a cluster or system name.
    ``tokens`` / ``steps``: add time-to-train figures. Raises InfeasibleError naming the side.
    """
    prices = dict(prices or {})
    source, target = _priced(from_cluster, prices), _priced(to_cluster, prices)
    known = {str(from_cluster), str(to_cluster), source.name, target.name}
    known |= {source.system.name, target.system.name}
    unknown = sorted(set(prices) - known)
    if unknown:
        raise SpecError(
            f"--price {unknown[0]}: names neither cluster ({source.name}, {target.name}) "
            "nor their systems"
        )
    same = source.describe() == target.describe()
    if same and layout is None and source.price_per_gpu_hour_usd == target.price_per_gpu_hour_usd:
        raise SpecError(
            f"--from and --to are the same cluster ('{source.name}' = '{target.name}'): name "
            "another --to, or pass --layout FILE to compare the layout in use with the best"
        )
    spec_workload = _workload(workload)
    options = MigrateOptions(
        fix=dict(fix or {}),
        from_layout=None if layout is None else _as_layout(layout, source, spec_workload),
        run=_run_length(tokens, steps),
        config=config or SolverConfig(top=1),
    )
    return _migrate.migrate(load_model(model), source, target, spec_workload, options=options)


def whatif(
    *,
    model: ModelLike,
    cluster: ClusterLike,
    vary: Knobs,
    workload: WorkloadLike = None,
    fix: dict[str, object] | None = None,
    workers: int = 1,
    engine: str = "process",
    tokens: float | None = None,
    steps: int | None = None,
    progress: ProgressCallback | None = None,
    config: SolverConfig | None = None,
) -> WhatIfResult:
    """Re-plan for every combination of knob values (CLI ``layout whatif``).

    ``vary``: ``{"nic_gbps": [400, 800], ...}`` or ``["nic_gbps=400,800", ...]``; knobs are
    planner.search.whatif.KNOBS. ``workers`` local processes, or ``engine="ray"`` (the optional
    ``ray`` extra). ``progress(done, total)`` is called after each scenario.
    """
    knobs: dict[str, list[KnobValue]] = {}
    items = (
        [_whatif.parse_vary(v) for v in vary]
        if isinstance(vary, list)
        else [
            _whatif.parse_vary(f"{k}={','.join(_whatif_text(v) for v in values)}")
            for k, values in vary.items()
        ]
    )
    for knob, values in items:
        if knob in knobs:
            raise SpecError(f"--vary {knob} is given twice: list all its values in one --vary")
        knobs[knob] = values
    options = validate_spec(
        WhatIfOptions,
        {
            "fix": dict(fix or {}),
            "config": config or SolverConfig(top=1),
            "run": _run_length(tokens, steps),
            "workers": workers,
            "engine": engine,
        },
        where="whatif options",
    )
    return _whatif.whatif(
        load_model(model),
        load_cluster(cluster),
        _workload(workload),
        knobs=knobs,
        options=options,
        progress=progress,
    )


def _whatif_text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


ServeWorkloadLike = ServeWorkload | dict[str, object] | None


def _serve_workload(workload: ServeWorkloadLike) -> ServeWorkload:
    if isinstance(workload, ServeWorkload):
        return workload
    return validate_spec(ServeWorkload, {**(workload or {}), "mode": "serve"}, where="workload")


def serve_search(
    *,
    model: ModelLike,
    cluster: ClusterLike,
    workload: ServeWorkloadLike = None,
    fix: dict[str, object] | None = None,
    top: int | None = None,
    config: SolverConfig | None = None,
) -> ServeSearchResult:
    """Best serving layout (TP, PP, EP, attention DP, replicas) and runners-up with why-not
    (CLI ``layout search --mode serve``); raises InfeasibleError naming the binding limit."""
    config = config or SolverConfig()
    if top is not None:
        config = config.model_copy(update={"top": top})
    return serving_search.serve_search(
        load_model(model), load_cluster(cluster), _serve_workload(workload), fix=fix, config=config
    )


def serve_estimate(
    *,
    model: ModelLike,
    cluster: ClusterLike,
    layout: ServeLayout | dict[str, object],
    workload: ServeWorkloadLike = None,
) -> ServePlan:
    """Score one serving layout (CLI ``layout estimate --mode serve``); ``replicas`` (alias
    ``dp``) defaults to filling the cluster."""
    spec_model, spec_cluster = load_model(model), load_cluster(cluster)
    spec_workload = _serve_workload(workload)
    if isinstance(layout, dict):
        fields = dict(layout)
        if "dp" in fields:
            fields.setdefault("replicas", fields.pop("dp"))
        per_replica = int(fields.get("tp", 1)) * int(fields.get("pp", 1))  # type: ignore[call-overload]
        fields.setdefault("replicas", max(1, spec_cluster.num_accelerators // per_replica))
        fields.update(precision=spec_workload.precision, kv_precision=spec_workload.kv_precision)
        layout = validate_spec(ServeLayout, fields, where="serving layout")
    return serving_search.serve_estimate(spec_model, spec_cluster, spec_workload, layout)


def export(
    plan: Plan | ServePlan | SearchResult | ServeSearchResult,
    *,
    format: str,
    model: ModelLike | None = None,
    cluster: ClusterLike | None = None,
    workload: TrainWorkload | ServeWorkload | dict[str, object] | None = None,
) -> ExportResult:
    """A plan as a framework's arguments or config (CLI ``layout export``). ``format``: megatron,
    bridge, torchtitan, deepspeed, vllm or sglang. ``model`` and ``cluster`` default to the
    plan's; ``workload`` is the one the plan was made for (default: 8,192-token sequences and
    the plan's tokens per step; for a serving plan, context 8,192). The result has the text,
    the argument list and the notes on what the framework cannot express.

    >>> import planner
    >>> plan = planner.estimate(model="70B", cluster="hgx_b200x16", layout={"tp": 8, "pp": 2})
    >>> planner.export(plan, format="vllm").args[:5]
    ['vllm', 'serve', 'meta-llama/Llama-3.1-70B', '--tensor-parallel-size', '8']
    """
    from planner.report.export import export as _export
    from planner.report.export import make_job

    best = plan.best if isinstance(plan, SearchResult | ServeSearchResult) else plan
    spec_workload: TrainWorkload | ServeWorkload | None = None
    if isinstance(best, ServePlan):
        spec_workload = _serve_workload(workload)  # type: ignore[arg-type]
    elif workload is not None:
        spec_workload = _workload(workload)  # type: ignore[arg-type]
    job = make_job(
        best,
        model=None if model is None else load_model(model),
        cluster=None if cluster is None else load_cluster(cluster),
        workload=spec_workload,
    )
    return _export(job, format)


def placement(
    plan: Plan | SearchResult, *, cluster: ClusterLike | None = None
) -> list[PlacementRecord]:
    """Per global rank of a training plan: node, local GPU and its group in every parallel
    dimension (CLI ``--placement``), after checking that TP and EP groups stay inside one
    scale-up domain where the plan says they do. ``cluster`` defaults to the plan's."""
    from planner.report.placement_file import check_domains, placement_records

    best = plan.best if isinstance(plan, SearchResult) else plan
    spec_cluster = load_cluster(best.cluster if cluster is None else cluster)
    records = placement_records(best, spec_cluster)
    check_domains(best, records)
    return records
