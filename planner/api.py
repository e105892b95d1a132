"""The Python API (DESIGN.md section 8): same names and semantics as the CLI, keyword arguments,
pydantic results. ``model`` and ``cluster`` accept a name, a path or a loaded spec; ``layout`` and
``workload`` accept a dict or the pydantic model."""

from __future__ import annotations

from pathlib import Path

from planner.catalog import load_cluster as _load_cluster
from planner.catalog import load_model as _load_model
from planner.catalog.io import validate_spec
from planner.search import engine
from planner.specs.cluster import ClusterEdits, ClusterSpec
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout
from planner.specs.model import ModelSpec
from planner.specs.result import Plan, SearchResult
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import TrainWorkload

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
            per_replica = 1
            for dim in ("tp", "pp", "cp"):
                per_replica *= int(fields.get(dim, 1))  # type: ignore[call-overload]
            fields["dp"] = max(1, spec_cluster.num_accelerators // per_replica)
        fields.setdefault("precision", spec_workload.precision)
        layout = validate_spec(Layout, fields, where="layout")
    return engine.estimate(spec_model, spec_cluster, spec_workload, layout)


def not_fitting_reason(
    plan: Plan, model: ModelLike, cluster: ClusterLike, workload: WorkloadLike
) -> str:
    """One line: what does not fit in ``plan`` and by how much ('' when it fits)."""
    return engine.not_fitting_message(
        plan, load_model(model), load_cluster(cluster), _workload(workload)
    )
