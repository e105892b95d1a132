"""The Python API (DESIGN.md section 8): same names and semantics as the CLI, keyword arguments,
pydantic results. ``model`` and ``cluster`` accept a name, a path or a loaded spec; ``layout`` and
``workload`` accept a dict or the pydantic model.

Every function checks its arguments and raises :class:`~planner.errors.SpecError` (bad input) or
:class:`~planner.errors.InfeasibleError` (nothing fits) with a one-line message, never a bare
ValueError, TypeError or pydantic ValidationError. A message is the CLI's for the equivalent flag
with the flag written as the argument and the value as its repr, then the rule:
``argument value: rule`` for a plain argument (``gpus -8: must be a positive whole number``,
``top True: ...``) and ``argument key=value: rule`` for an entry of a dict argument
(``fix tp='two': must be a positive whole number``, ``bounds tp=(8, 2): the low 8 exceeds the
high 2``); a spec given as a dict reports its first pydantic error as ``where: field: rule (got
value)`` (``workload: seq_len: ...``). Checks the CLI shares word for word keep its flag names
(``--gpus 16 exceeds the 8 accelerators of hgx_h100x8``; a layout that breaks a rule). An
argument that would be ignored is an error too (a ``cluster`` other than the plan's in
``export`` and ``placement``, an unknown ``fix`` or ``bounds`` key)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel

from planner.catalog import load_cluster as _load_cluster
from planner.catalog import load_model as _load_model
from planner.catalog.io import load_mapping, validate_spec
from planner.errors import InternalError, PlannerError, SpecError
from planner.limits import in_range, rule
from planner.search import engine, serving_search
from planner.search import migrate as _migrate
from planner.search import whatif as _whatif
from planner.search.arguments import (
    MAX_LAYOUT_NUMBER,
    check_fix,
    check_precisions,
    key_text,
    positive_count,
    shown,
    whole_number,
)
from planner.search.migrate import MigrateOptions
from planner.search.rules import (
    FUSED_GROUPED_MLP,
    expert_grid_rule,
    fused_grouped_mlp_format_rule,
    fused_grouped_mlp_rule,
)
from planner.search.space import PINNABLE
from planner.search.whatif import NoteCallback, ProgressCallback, WhatIfOptions
from planner.specs.cluster import ClusterEdits, ClusterSpec
from planner.specs.cluster_state import ClusterState
from planner.specs.layout import Layout
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.result import Plan, SearchResult, ServeLayout, ServePlan, ServeSearchResult
from planner.specs.scenarios import KnobValue, MigrateResult, RunLength, WhatIfResult
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import MOE_DISPATCHERS, ServeWorkload, TrainWorkload

if TYPE_CHECKING:
    from planner.report.export import ExportResult
    from planner.report.placement_file import PlacementRecord
    from planner.specs.fleet import PackResult

ModelLike = str | Path | ModelSpec
ClusterLike = str | Path | ClusterSpec
WorkloadLike = TrainWorkload | dict[str, object] | None
StateLike = str | Path | ClusterState | dict[str, object] | None


def _cluster_state(cluster_state: object) -> tuple[ClusterState | None, str]:
    """(the ClusterState, how to name it) of a ``cluster_state`` argument (a YAML/JSON path, a
    dict of its fields or a ClusterState); (None, '') when not given."""
    if cluster_state is None:
        return None, ""
    from planner.catalog.cluster_state import load_cluster_state

    state = load_cluster_state(cluster_state)  # type: ignore[arg-type]
    name = str(cluster_state) if isinstance(cluster_state, str | Path) else "Python object"
    if not name.isprintable() or len(name) > 300:  # a file name is written into the plan
        name = ascii(name)[:300]
    return state, name


def load_model(name_or_path: ModelLike) -> ModelSpec:
    """A model from a catalog name, alias (``70B``), YAML file or Hugging Face ``config.json``."""
    if not isinstance(name_or_path, str | Path | ModelSpec):
        raise _kind_error("model", name_or_path, "a catalog name, a file path or a ModelSpec")
    return _load_model(name_or_path)


def load_cluster(
    name_or_path: ClusterLike, *, edits: ClusterEdits | dict[str, object] | None = None
) -> ClusterSpec:
    """A cluster from ``<system>x<N>``, a TPU slice name or a YAML file, with what-if edits."""
    if not isinstance(name_or_path, str | Path | ClusterSpec):
        raise _kind_error(
            "cluster", name_or_path, "a cluster name (<system>x<N>), a file path or a ClusterSpec"
        )
    if isinstance(edits, Mapping):
        edits = validate_spec(ClusterEdits, dict(edits), where="cluster edits")
    elif edits is not None and not isinstance(edits, ClusterEdits):
        raise _kind_error("edits", edits, "a ClusterEdits or a dict of its fields")
    return _load_cluster(name_or_path, edits)


def _kind_error(argument: str, value: object, expected: str) -> SpecError:
    """'<argument> <value>: must be <expected> (got <type>)' for an argument of the wrong type
    (a spec of the wrong kind is shown by its type alone: ``<ServeWorkload>``)."""
    kind = type(value).__name__
    text = f"<{kind}>" if isinstance(value, BaseModel) else shown(value)
    return SpecError(f"{argument} {text}: must be {expected} (got {kind})")


def _workload(workload: WorkloadLike, cluster: ClusterSpec | None = None) -> TrainWorkload:
    """The workload resolved through its framework profile: the one it names, else the
    default on ``cluster``'s accelerators (MaxText on a TPU, Megatron-LM on a GPU)."""
    from planner.catalog.frameworks import resolve_workload

    vendor = None if cluster is None else cluster.accelerator.vendor
    if isinstance(workload, TrainWorkload):
        return _plausible(resolve_workload(workload, vendor), "workload")
    if workload is not None and not isinstance(workload, Mapping):
        raise _kind_error("workload", workload, "a TrainWorkload or a dict of its fields")
    checked = validate_spec(TrainWorkload, dict(workload or {}), where="workload")
    return _plausible(resolve_workload(checked, vendor), "workload")


def _pinned_format(
    workload: TrainWorkload, model: ModelSpec | None = None, cluster: ClusterSpec | None = None
) -> TrainWorkload:
    """``workload`` when its precision, pinned (not searched), runs the settings that need
    certain formats: SpecError naming the setting otherwise (``fused_grouped_mlp`` in bf16;
    a search over formats applies it only where it runs). With ``model`` and ``cluster`` the
    model and accelerator are checked first (the search checks them too,
    planner.search.rules.check_workload), so that an H100 is named before the format."""
    if not workload.fused_grouped_mlp:
        return workload
    if model is not None and cluster is not None:
        why = fused_grouped_mlp_rule(model, cluster.accelerator)
        if why:
            raise SpecError(f"{FUSED_GROUPED_MLP} {why}")
    why = fused_grouped_mlp_format_rule(workload)
    if why:
        raise SpecError(f"{FUSED_GROUPED_MLP} {why}")
    return workload


TRAIN_SETTING_ALIASES = ("moe_dispatcher", "ep_overlap", "moe_cuda_graphs", "grad_reduce",
                         "global_batch_tokens")  # fmt: skip
"""CLI flag names (with ``_``) a training call accepts besides the TrainWorkload fields:
``moe_dispatcher="deepep"``, ``ep_overlap=True``, ``moe_cuda_graphs=True``,
``grad_reduce="bf16"``, ``global_batch_tokens=2**24``."""


SERVE_SETTING_ALIASES: dict[str, str] = {
    "serving_engine": "engine",
    "max_num_tokens": "max_batch_tokens",
}
"""CLI flag names (with ``_``) a serving call accepts besides the ServeWorkload fields, and the
field each sets: ``serving_engine="vllm"``, ``max_num_tokens=16384``."""


def _with_settings(
    workload: object,
    settings: dict[str, object],
    kind: type[TrainWorkload | ServeWorkload],
    *,
    layout_argument: str | None = None,
) -> object:
    """``workload`` with the workload settings given as keyword arguments by their CLI names
    (``precision="fp8"``, ``seq_len=4096``, ``tpot_ms=50``, ...): a TrainWorkload or
    ServeWorkload field, or one of TRAIN_SETTING_ALIASES / SERVE_SETTING_ALIASES. A name that is
    neither, or one given both here and in ``workload``, is an error; a layout field
    (``zero=1``, one of planner.search.space.PINNABLE) names ``layout_argument``, the argument
    of the call that takes it (``fix``, ``layout``)."""
    if not settings:
        return workload
    fields = set(kind.model_fields) - {"mode"}
    aliases = TRAIN_SETTING_ALIASES if kind is TrainWorkload else tuple(SERVE_SETTING_ALIASES)
    for key in settings:
        if key in PINNABLE and layout_argument is not None and key not in fields:
            raise SpecError(
                f"unknown argument '{key}': {key} is a layout field, given in "
                f"{layout_argument}={{'{key}': ...}}"
            )
        if key not in fields and key not in aliases:
            raise SpecError(
                f"unknown argument '{key}': a workload setting is one of "
                f"{', '.join(sorted(fields | set(aliases)))}"
            )
    given = dict(settings)
    if kind is TrainWorkload:
        given = _train_aliases(given)
    else:
        for alias, field in SERVE_SETTING_ALIASES.items():
            if alias in given and field in given:
                raise SpecError(f"{alias} and {field} name the same setting: give one")
            if alias in given:
                given[field] = given.pop(alias)
    for key, value in list(given.items()):
        if key.endswith("precision") and isinstance(value, str):
            given[key] = value.lower()
    if isinstance(workload, BaseModel):
        base = workload.model_dump(exclude_unset=True)
    elif workload is None:
        base = {}
    elif isinstance(workload, Mapping):
        base = dict(workload)
    else:
        return workload  # the workload check names its type
    twice = sorted(set(base) & set(given))
    if twice:
        raise SpecError(f"{twice[0]} is given twice (as an argument and in workload): give it once")
    return {**base, **given}


def _train_aliases(given: dict[str, object]) -> dict[str, object]:
    """The CLI-named training settings as TrainWorkload fields."""
    from planner.specs.workload import moe_framework_fields

    out = {k: v for k, v in given.items() if k not in TRAIN_SETTING_ALIASES}
    moe = {k: given[k] for k in ("moe_dispatcher", "ep_overlap", "moe_cuda_graphs") if k in given}
    for key in ("ep_overlap", "moe_cuda_graphs"):
        if key in moe and not isinstance(moe[key], bool):
            raise SpecError(f"{key} {shown(moe[key])}: must be True or False")
    if "moe_dispatcher" in moe and moe["moe_dispatcher"] not in MOE_DISPATCHERS:
        raise SpecError(
            f"moe_dispatcher {shown(moe['moe_dispatcher'])}: must be one of "
            f"{', '.join(MOE_DISPATCHERS)}"
        )
    out.update(moe_framework_fields(**moe))  # type: ignore[arg-type]
    if "grad_reduce" in given:
        out["grad_reduce_dtype"] = given["grad_reduce"]
    if "global_batch_tokens" in given:
        tokens = positive_count("global_batch_tokens", given["global_batch_tokens"])
        seq_len = out.get("seq_len", TrainWorkload().seq_len)
        if not isinstance(seq_len, int) or tokens % seq_len:
            raise SpecError(
                f"global_batch_tokens {tokens}: not a whole number of {seq_len}-token sequences"
            )
        if "global_batch" in out:
            raise SpecError("give global_batch or global_batch_tokens, not both")
        out["global_batch"] = tokens // seq_len
    return out


SpecLike = TypeVar("SpecLike", bound=BaseModel)


def _plausible(spec: SpecLike, where: str) -> SpecLike:
    """``spec`` when each of its numbers that has a plausible range (planner.limits.RANGES: a
    sequence length, a latency target, a load) lies in it; SpecError '<where>: <field>: <value>
    must be <range>' otherwise (``target_tokens_per_s=1e308`` would print a 300-digit GPU
    count)."""
    for name in type(spec).model_fields:
        value = getattr(spec, name)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and not in_range(name, value):
            raise SpecError(f"{where}: {name}: {shown(value)} must be {rule(name)}")
    return spec


def _plausible_count(argument: str, value: object) -> int:
    """A positive whole number (``gpus``, ``workers``) in its plausible range."""
    number = positive_count(argument, value)
    if not in_range(argument, number):
        raise SpecError(f"{argument} {shown(value)}: must be {rule(argument)}")
    return number


MAX_TOP = 50
"""Most plans a search returns (SolverConfig.top's limit; a larger ``top`` returns this many, as
``--top`` does)."""


def _config(config: SolverConfig | dict[str, object] | None, top: object,
            default: SolverConfig | None = None) -> SolverConfig:  # fmt: skip
    """The solver settings: ``config`` (a SolverConfig, a dict of its fields or None for
    ``default``) with ``top`` plans when given (a positive whole number; at most
    MAX_TOP are returned, as on the CLI)."""
    if config is None:
        spec = default or SolverConfig()
    elif isinstance(config, SolverConfig):
        spec = config
    elif isinstance(config, Mapping):
        spec = validate_spec(SolverConfig, dict(config), where="config")
    else:
        raise _kind_error("config", config, "a SolverConfig or a dict of its fields")
    _plausible(spec, "config")
    if top is None:
        return spec
    return spec.model_copy(update={"top": min(positive_count("top", top), MAX_TOP)})


def _plan_cluster(plan: Plan | ServePlan, cluster: ClusterLike | None) -> ClusterSpec | None:
    """``cluster`` loaded, after checking that it is the one ``plan`` was made on (a training
    plan may use the first ``num_gpus`` of it); None when not given (the plan's is used)."""
    if cluster is None:
        return None
    spec = load_cluster(cluster)
    made_on = {spec.describe()}
    if isinstance(plan, Plan) and plan.num_gpus < spec.num_accelerators:
        with suppress(InternalError):  # not a legal size of this cluster: not the plan's
            made_on.add(engine.sub_cluster(spec, plan.num_gpus).describe())
    if plan.cluster_description not in made_on:
        raise SpecError(
            f"cluster '{spec.name}': not the cluster the plan was made on "
            f"('{plan.cluster_description}'); pass that one, or none"
        )
    return spec


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
    cluster_state: StateLike = None,
    **settings: object,
) -> SearchResult:
    """Best training layout and runners-up (raises InfeasibleError / SpecError).

    ``fix`` pins layout fields ({"tp": 8}); ``bounds`` limits them ({"pp": (None, 16)});
    ``precisions`` lets the search pick the format (["bf16", "fp8"]); ``gpus`` caps the
    accelerators used; ``config`` sets the objective (time, cost, energy), a step-time target
    (fewest GPUs that meet it), the solver and its time limit (a SolverConfig or a dict of its
    fields); ``top`` plans (at most MAX_TOP) are returned. ``cluster_state`` (a YAML path, a
    dict or a ClusterState: GPUs and nodes down or taken, slow nodes) searches on what is free
    and places the ranks with CP-SAT (``best.cluster_state`` says what the holes cost).
    Workload settings may also be given by their CLI names (``seq_len=4096,
    precision="fp8"``; ``precision="auto"`` as ``--precision auto``; TRAIN_SETTING_ALIASES).
    """
    config = _config(config, top)
    spec_cluster = load_cluster(cluster)
    if isinstance(settings.get("precision"), str) and str(settings["precision"]).lower() == "auto":
        if precisions is not None:
            raise SpecError("precision 'auto' and precisions are both given: give one")
        settings.pop("precision")
        precisions = [f for f in ("bf16", "fp8", "mxfp8") if spec_cluster.accelerator.supports(f)]
        settings["precision"] = precisions[0]
    formats = check_precisions(precisions)
    spec_model = load_model(model)
    spec_workload = _workload(
        _with_settings(workload, settings, TrainWorkload, layout_argument="fix"),  # type: ignore[arg-type]
        spec_cluster,
    )
    if formats is None:  # a pinned precision; a search over formats applies it where it runs
        _pinned_format(spec_workload, spec_model, spec_cluster)
    state, state_name = _cluster_state(cluster_state)
    if state is not None:
        from planner.search.state import search_on_state

        return search_on_state(
            spec_model,
            spec_cluster,
            spec_workload,
            state,
            fix=fix,
            config=config,
            bounds=bounds,
            precisions=formats,
            gpus=gpus,
            state_name=state_name,
        )
    return engine.search(
        spec_model,
        spec_cluster,
        spec_workload,
        fix=fix,
        config=config,
        bounds=bounds,
        precisions=formats,
        gpus=None if gpus is None else _plausible_count("gpus", gpus),
    )


def estimate(
    *,
    model: ModelLike,
    cluster: ClusterLike,
    layout: Layout | dict[str, object],
    workload: WorkloadLike = None,
    cluster_state: StateLike = None,
    config: SolverConfig | dict[str, object] | None = None,
    pipeline_split: PipelineSplit | str | Mapping[str, object] | None = None,
    **settings: object,
) -> Plan:
    """Score one layout; ``dp`` defaults to filling the cluster, ``precision`` to the
    workload's (a dict or Layout that names another is an error: the workload's is the one
    scored, so a plan's layout passed back needs its precision in the workload too), ``zero``
    and, for an MoE model, ``etp`` to the workload framework's (Megatron-LM: ZeRO-1, ETP = TP;
    the plan's warnings say which ETP it assumed).
    ``cluster_state``: score it on the free accelerators (``dp`` then defaults to filling
    them), placed by CP-SAT. With pp > 1, CP-SAT splits the layers over the stages unless
    ``config`` (a SolverConfig or a dict of its fields) says ``stage_split="even"``, or
    ``pipeline_split`` gives the split the run used: a PipelineSplit, a Megatron-LM layout
    string (``"Et*4|(t*4|)*14tmL"``), or a dict of Megatron-LM's split settings by argument
    name (``{"decoder_first_pipeline_num_layers": 3}``; planner.search.given_split). Workload
    settings may also be given by their CLI names (``seq_len=4096``)."""
    if not isinstance(layout, Layout | Mapping):
        raise _kind_error("layout", layout, "a Layout or a dict of its fields, e.g. {'tp': 8}")
    spec_model, spec_cluster = load_model(model), load_cluster(cluster)
    spec_workload = _workload(
        _with_settings(workload, settings, TrainWorkload, layout_argument="layout"),  # type: ignore[arg-type]
        spec_cluster,
    )
    _pinned_format(spec_workload, spec_model, spec_cluster)
    state, state_name = _cluster_state(cluster_state)
    if state is None:
        layout, notes = _resolve_layout(layout, spec_cluster, spec_workload, model=spec_model)
        split = _given_split(pipeline_split, spec_model, spec_workload, layout)
        plan = engine.estimate(
            spec_model, spec_cluster, spec_workload, layout, config=_config(config, None),
            split=split,
        )  # fmt: skip
        return _with_warnings(plan, notes)
    if pipeline_split is not None:
        raise SpecError(
            "a given pipeline split is scored on the whole cluster; with a cluster state the "
            "layout is placed on the free accelerators under the even split"
        )
    from planner.search.state import estimate_on_state, state_capacity

    capacity = state_capacity(spec_cluster, state, spec_workload.global_batch)
    layout, notes = _resolve_layout(
        layout, spec_cluster, spec_workload, capacity=capacity, model=spec_model
    )
    plan = estimate_on_state(
        spec_model, spec_cluster, spec_workload, layout, state, state_name=state_name
    )
    return _with_warnings(plan, notes)


def _with_warnings(plan: Plan, notes: list[str]) -> Plan:
    """``plan`` with ``notes`` (what the layout left unstated and the estimate assumed) ahead
    of its own warnings."""
    return plan.model_copy(update={"warnings": [*notes, *plan.warnings]}) if notes else plan


def _given_split(
    given: object, model: ModelSpec, workload: TrainWorkload, layout: Layout
) -> PipelineSplit | None:
    """The PipelineSplit ``estimate``'s ``pipeline_split`` names (None: none given)."""
    from planner.search.given_split import split_from_flags

    if given is None or isinstance(given, PipelineSplit):
        return given
    if isinstance(given, str):
        given = {"pipeline_model_parallel_layout": given}
    if not isinstance(given, Mapping):
        raise _kind_error(
            "pipeline_split", given, "a PipelineSplit, a layout string or a dict of settings"
        )
    return split_from_flags(
        dict(given), pp=layout.pp, vpp=layout.vpp, num_layers=model.num_layers,
        mtp_layers=workload.mtp_num_layers,
    )  # fmt: skip


def _set_fields(layout: BaseModel, keys: tuple[str, ...]) -> dict[str, object]:
    """The ``keys`` a layout object was given (not left at their defaults), by value: what
    :func:`_same_precision` checks, as it checks a dict's."""
    return {k: str(getattr(layout, k)) for k in keys if k in layout.model_fields_set}


def _same_precision(fields: dict[str, object], key: str, workload_value: object) -> None:
    """A layout dict's ``key`` (precision, kv_precision) must be the workload's, which is the
    one scored: naming another would be ignored."""
    if key in fields and str(fields[key]).lower() != str(workload_value):
        raise SpecError(
            f"layout {key}={shown(fields[key])}: differs from the workload's {key} "
            f"'{workload_value}'; set it in workload"
        )


def _check_numbers(fields: dict[str, object], where: str) -> None:
    """No whole number of a layout dict exceeds MAX_LAYOUT_NUMBER: a larger one is no layout
    (and the rule messages would quote it digit by digit)."""
    for key, value in fields.items():
        number = whole_number(value)
        if number is not None and number > MAX_LAYOUT_NUMBER:
            raise SpecError(
                f"{where}: {key_text(key)}: must be at most {MAX_LAYOUT_NUMBER:,} "
                f"(got {shown(value)})"
            )


def _per_replica(
    fields: dict[str, object], where: str, dims: tuple[str, ...] = ("tp", "pp", "cp")
) -> int:
    """tp x pp x cp of a layout given as a dict, to default dp (the Layout check that follows
    rejects values that are not positive whole numbers); SpecError when one is not a number."""
    out = 1
    for dim in dims:
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
    """One line: what does not fit in ``plan`` and by how much ('' when it fits); ``model`` and
    ``cluster`` must be the plan's."""
    if not isinstance(plan, Plan):
        raise _kind_error("plan", plan, "a training Plan (from estimate or search)")
    spec_model = load_model(model)
    if spec_model.name != plan.model:  # the words of report.export.make_job
        raise SpecError(f"the plan is for model '{plan.model}', not '{spec_model.name}'")
    spec_cluster = _plan_cluster(plan, cluster) or load_cluster(cluster)  # None: SpecError
    return engine.not_fitting_message(
        plan, spec_model, spec_cluster, _workload(workload, spec_cluster)
    )


LayoutLike = Layout | dict[str, object] | str | Path | None
Knobs = dict[str, list[object]] | list[str]


def _as_layout(layout: Layout | dict[str, object] | str | Path, cluster: ClusterSpec,
               workload: TrainWorkload, *, capacity: object = None,
               model: ModelSpec | None = None) -> Layout:  # fmt: skip
    """:func:`_resolve_layout`'s layout alone."""
    return _resolve_layout(layout, cluster, workload, capacity=capacity, model=model)[0]


def _resolve_layout(layout: Layout | dict[str, object] | str | Path, cluster: ClusterSpec,
                    workload: TrainWorkload, *, capacity: object = None,
                    model: ModelSpec | None = None) -> tuple[Layout, list[str]]:  # fmt: skip
    """A Layout from a model, a dict or a YAML/JSON file; ``dp`` defaults to filling the cluster
    (or, with ``capacity(per_replica) -> dp``, the free accelerators of a cluster state),
    ``zero`` to the workload framework's default stage (:func:`planner.catalog.frameworks.
    default_zero`: ZeRO-1 under Megatron-LM, FSDP's full sharding under torchtitan or MaxText)
    and, for an MoE ``model``, ``etp`` to the framework's (:func:`_default_etp`); with the
    sentences that say what the layout left unstated and was assumed."""
    from planner.catalog.frameworks import default_zero, load_framework

    if isinstance(layout, Layout):
        _same_precision(_set_fields(layout, ("precision",)), "precision", workload.precision)
        update: dict[str, object] = {}
        if "zero" not in layout.model_fields_set:
            zero = default_zero(load_framework(workload.framework), layout.pp)
            if zero != layout.zero:
                update["zero"] = zero
        notes: list[str] = []
        if "etp" not in layout.model_fields_set:
            etp, notes = _default_etp(layout.model_dump(exclude={"etp"}), model, workload)
            if etp is not None and etp != layout.etp:
                update["etp"] = etp
        return (layout.model_copy(update=update) if update else layout), notes
    if not isinstance(layout, Mapping | str | Path):
        raise _kind_error("layout", layout, "a Layout, a dict of its fields or a YAML/JSON file")
    given = isinstance(layout, Mapping)
    fields = dict(layout) if given else load_mapping(Path(layout))  # type: ignore[arg-type]
    where = "layout" if given else f"layout {layout}"
    if not given:
        fields = _layout_of_saved_plan(fields, where)
    _check_numbers(fields, where)
    if given:
        _same_precision(fields, "precision", workload.precision)
    if "dp" not in fields:
        per_replica = _per_replica(fields, where)
        fields["dp"] = (
            capacity(per_replica)  # type: ignore[operator]
            if capacity is not None
            else max(1, cluster.num_accelerators // per_replica)
        )
    fields.setdefault("precision", workload.precision)
    if "zero" not in fields:
        pp = fields.get("pp", 1)
        profile = load_framework(workload.framework)
        fields["zero"] = default_zero(profile, pp if isinstance(pp, int) else 1)
    etp, notes = _default_etp(fields, model, workload)
    if etp is not None:
        fields["etp"] = etp
    return validate_spec(Layout, fields, where=where), notes


def _degree(value: object) -> int | None:
    """A layout degree as the Layout check will read it (a positive whole number, an integral
    float included), else None (the check reports it).

    >>> _degree(4), _degree(4.0), _degree(4.5), _degree(True), _degree("4"), _degree(0)
    (4, 4, None, None, None, None)
    """
    number = whole_number(value)
    if number is None and isinstance(value, float) and value.is_integer():
        number = int(value)
    return number if number is not None and number > 0 else None


def _default_etp(
    fields: Mapping[str, object], model: ModelSpec | None, workload: TrainWorkload
) -> tuple[int | None, list[str]]:
    """The expert tensor-parallel size of an MoE layout whose ``fields`` state none, by the
    workload framework's rule (:func:`planner.catalog.frameworks.default_etp`), and the
    sentence the plan says it with; (None, []) where there is nothing to default (a stated
    etp, no experts, tp 1, a degree that is no whole number: the Layout check reports it).
    A sentence only where the framework could run another ETP (Megatron-LM: any; torchtitan
    and MaxText run the one they default to, :func:`planner.search.rules.expert_tp_rule`).
    Where Megatron-LM's ETP = TP breaks ep x etp | dp x cp x tp (it refuses such a layout when
    it starts), ETP 1 is scored, the one that runs, and the plan says why.

    >>> from planner.catalog import load_model
    >>> moe, w = load_model("mixtral-8x22b"), TrainWorkload()
    >>> _default_etp({"tp": 2, "ep": 4, "dp": 4}, moe, w)[0]
    2
    >>> etp, notes = _default_etp({"tp": 2, "ep": 8, "dp": 4}, moe, w)
    >>> etp, notes[0][:66]
    (1, 'ETP not stated: Megatron-LM / Megatron-Core runs ETP = TP (2) unle')
    >>> _default_etp({"tp": 2, "ep": 4, "dp": 4, "etp": 1}, moe, w)
    (None, [])
    """
    from planner.catalog.frameworks import default_etp, load_framework

    if model is None or model.moe is None or "etp" in fields:
        return None, []
    degrees = [_degree(fields.get(k, 1)) for k in ("tp", "ep", "dp", "cp")]
    if None in degrees:
        return None, []
    tp, ep, dp, cp = degrees  # type: ignore[misc]
    if tp == 1:
        return None, []
    profile = load_framework(workload.framework)
    etp = default_etp(profile, tp, ep)
    if profile.expert_tensor_parallel_default != "tp":
        return etp, []  # the one ETP the framework runs at this tp and ep (rules.expert_tp_rule)
    name = profile.description.split(" (")[0]
    if expert_grid_rule(ep=ep, etp=etp, dp=dp, cp=cp, tp=tp):
        return 1, [
            f"ETP not stated: {name} runs ETP = TP ({tp}) unless told, but EP {ep} x ETP {etp} "
            f"= {ep * etp} does not divide DP x CP x TP ({dp * cp * tp}), which it refuses; "
            "scored at ETP 1, experts whole (--etp 1 says so)"
        ]
    return etp, [
        f"ETP not stated: scored at ETP {etp}, {name}'s default at TP {tp}: each expert's "
        "weights split over the TP ranks; --etp 1 keeps experts whole, as NVIDIA's MoE recipes "
        "set it"
    ]


def _layout_of_saved_plan(data: dict[str, object], where: str) -> dict[str, object]:
    """The layout fields of a layout file: the file itself, or the ``layout`` of a saved
    ``estimate --json`` plan or the best plan of a ``search --json`` (a newer major
    ``schema_version`` is refused, as ``export --plan`` refuses it)."""
    from planner.specs.result import SCHEMA_VERSION

    plan = data.get("best") if isinstance(data.get("best"), Mapping) else data
    if not isinstance(plan, Mapping) or not isinstance(plan.get("layout"), Mapping):
        return data
    if plan.get("mode") == "serve":
        raise SpecError(f"{where}: a serving plan; migrate takes a training layout")
    version = str(data.get("schema_version", ""))
    major, supported = version.split(".")[0], SCHEMA_VERSION.split(".")[0]
    if not (major.isascii() and major.isdigit()) or len(major) > 6 or int(major) > int(supported):
        raise SpecError(
            f"{where}: schema_version {shown(version)}; this layout reads {supported}.x: "
            "upgrade layout to read it"
        )
    return dict(plan["layout"])  # type: ignore[arg-type]


def _priced(cluster: ClusterLike, prices: dict[str, float]) -> ClusterSpec:
    """Load ``cluster`` with the price of the ``prices`` key that names it or its system."""
    spec = load_cluster(cluster)
    for key in (str(cluster), spec.name, spec.system.name):
        if key in prices:
            # a cluster file's own edits are merged by load_cluster (spec.edits holds them as text)
            return load_cluster(cluster, edits={"price_per_gpu_hour": prices[key]})
    return spec


def _prices(prices: object) -> dict[str, float]:
    """``prices`` as a dict of cluster or system name -> USD per GPU-hour (the values are
    checked as the cluster edit ``price_per_gpu_hour``)."""
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise _kind_error("prices", prices, "a dict of cluster or system name -> USD per GPU-hour")
    for key, value in prices.items():
        if not isinstance(key, str):
            raise SpecError(
                f"prices {shown(key)}={shown(value)}: the key must be a cluster or system name"
            )
    return dict(prices)


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
    **settings: object,
) -> MigrateResult:
    """Re-plan ``model`` from ``from_cluster`` to ``to_cluster`` (CLI ``layout migrate``).

    ``layout``: the layout in use on the source (dict, Layout or YAML/JSON file; default: search
    the source too). ``prices``: USD per GPU-hour keyed by a cluster or system name.
    ``tokens`` / ``steps``: add time-to-train figures. Workload settings may also be given by
    their CLI names (``seq_len=4096``), as for :func:`search`. Raises InfeasibleError naming
    the side.
    """
    workload = _with_settings(workload, settings, TrainWorkload, layout_argument="fix")  # type: ignore[assignment]
    prices = _prices(prices)
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
    spec_workload = _pinned_format(_workload(workload, source))
    given = _given_without_framework(workload)  # None: a framework is named, for both sides
    there = None if given is None else _pinned_format(_workload(given, target))
    spec_model = load_model(model)
    options = MigrateOptions(
        fix=check_fix(fix),
        from_layout=None
        if layout is None
        else _as_layout(layout, source, spec_workload, model=spec_model),
        run=_run_length(tokens, steps),
        config=_config(config, None, SolverConfig(top=1)),
    )
    return _migrate.migrate(
        spec_model, source, target, spec_workload, options=options, target_workload=there
    )


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
    max_scenarios: int = _whatif.DEFAULT_MAX_SCENARIOS,
    note: NoteCallback | None = None,
    **settings: object,
) -> WhatIfResult:
    """Re-plan for every combination of knob values (CLI ``layout whatif``).

    ``vary``: ``{"nic_gbps": [400, 800], ...}`` or ``["nic_gbps=400,800", ...]``; knobs are
    planner.search.whatif.KNOBS, each value given once. More than ``max_scenarios``
    combinations (at most 100,000) are refused before anything is built. ``workers`` local
    processes (at most the cores available start; ``note(line)`` says so, default a
    UserWarning; where they are not forked, macOS and Windows, the calling script needs an
    ``if __name__ == "__main__":`` guard), or ``engine="ray"`` (the optional ``ray`` extra).
    ``progress(done, total)`` is called after each scenario. Workload settings may also be
    given by their CLI names (``seq_len=4096``), as for :func:`search`.
    """
    workload = _with_settings(workload, settings, TrainWorkload, layout_argument="fix")  # type: ignore[assignment]
    _callable("progress", progress, "progress(done, total)")
    _callable("note", note, "note(line)")
    _whatif.check_max_scenarios(max_scenarios)
    items = _vary_items(vary, max_scenarios)
    _whatif.check_scenario_count({k: len(v) for k, v in items.items()}, max_scenarios)
    knobs: dict[str, list[KnobValue]] = {
        knob: _whatif.parse_values(knob, (_whatif_text(v) for v in texts))
        for knob, texts in items.items()
    }
    pins = check_fix(fix)
    spec_cluster = load_cluster(cluster)
    spec_workload = _workload(workload, spec_cluster)
    given = _given_without_framework(workload)
    _check_vary_overlap(knobs, pins, spec_workload)
    if "precision" not in knobs:  # a swept precision runs it where it can
        _pinned_format(spec_workload)
    options = validate_spec(
        WhatIfOptions,
        {
            "fix": pins,
            "config": _config(config, None, SolverConfig(top=_whatif.WHATIF_TOP)),
            "run": _run_length(tokens, steps),
            "workers": _plausible_count("workers", workers),
            "engine": engine,
            "max_scenarios": max_scenarios,
        },
        where="whatif options",
    )
    return _whatif.whatif(
        load_model(model),
        spec_cluster,
        spec_workload,
        knobs=knobs,
        options=options,
        progress=progress,
        note=note,
        given=given,
    )


def _given_without_framework(workload: WorkloadLike) -> dict[str, object] | None:
    """The workload fields the user set (a checked workload), or None when they name a
    framework: a what-if scenario on another vendor's accelerators then takes that vendor's
    default profile (``ScenarioRequest.given``)."""
    if isinstance(workload, TrainWorkload):
        given = {k: getattr(workload, k) for k in workload.model_fields_set}
    else:
        given = dict(workload or {})  # a mapping: _workload has checked it
    return None if "framework" in given else given


def _callable(argument: str, value: object, signature: str) -> None:
    if value is not None and not callable(value):
        raise _kind_error(argument, value, f"a function called as {signature}, or None")


def _vary_items(vary: object, max_scenarios: int) -> dict[str, list[object]]:
    """``vary`` (a dict of knob -> values, or a list of ``KEY=V1,V2`` strings) as knob -> value
    list, not parsed yet. A list's length is counted, not its values; a generator (or any other
    iterable) is consumed only up to the scenario cap, so one that never ends is refused."""
    from collections.abc import Iterable, Sequence

    shape = "a dict of knob -> list of values, or a list of 'KEY=V1,V2' strings"
    given: list[tuple[str, Sequence[object]]] = []
    if isinstance(vary, Mapping):
        for key, values in vary.items():
            knob = _whatif.knob_of(key)
            label = f"--vary {knob}={shown(values)}"
            if isinstance(values, str):
                texts: Sequence[object] = [t for t in values.split(",") if t.strip()]
            elif isinstance(values, Sequence) and not isinstance(values, bytes | bytearray):
                texts = values
            elif isinstance(values, Iterable) and not isinstance(
                values, Mapping | bytes | bytearray
            ):
                texts = list(itertools.islice(values, max_scenarios + 1))  # bounded
                if len(texts) > max_scenarios:
                    raise SpecError(
                        f"{label}: more than {max_scenarios:,} values, over the cap of "
                        f"{max_scenarios:,} scenarios: narrow the list or raise max_scenarios "
                        f"(at most {_whatif.MAX_SCENARIOS_LIMIT:,})"
                    )
            else:
                raise SpecError(f"{label}: must be a list of values (or 'V1,V2' text)")
            if not texts:
                raise SpecError(f"--vary {knob}: give at least one value")
            given.append((knob, texts))
    elif isinstance(vary, list | tuple):
        for entry in vary:
            if not isinstance(entry, str):
                raise SpecError(f"vary entry {shown(entry)}: must be a 'KEY=V1,V2' string")
            given.append(_whatif.split_vary(entry))
    else:
        raise _kind_error("vary", vary, shape)
    if not given:
        raise SpecError(f"vary {shown(vary)}: give at least one knob ({shape})")
    items: dict[str, list[object]] = {}
    for knob, texts in given:
        if knob in items:
            raise SpecError(f"--vary {knob} is given twice: list all its values in one --vary")
        items[knob] = texts  # type: ignore[assignment]
    return items


VARY_WORKLOAD_FIELDS: dict[str, tuple[str, ...]] = {
    "seq_len": ("seq_len",),
    "global_batch": ("global_batch",),
    "precision": ("precision",),
    "moe_dispatcher": ("moe_dispatch_dedup",),
    "ep_overlap": ("ep_comm_overlap",),
    "moe_cuda_graphs": ("moe_host_sync",),
}
"""TrainWorkload fields that a what-if knob sets in every scenario."""


def _check_vary_overlap(
    knobs: Mapping[str, object], fix: Mapping[str, object], workload: TrainWorkload
) -> None:
    """A knob that the workload or a pin sets too is an error: every scenario would replace
    that value without a word. (A cluster's own edits are the base a knob replaces, as a cluster
    file's ``power_cap_w`` is: they are part of the hardware, not a setting of this sweep; the
    CLI refuses an edit flag given with its knob.)"""
    for knob in knobs:
        for name in VARY_WORKLOAD_FIELDS.get(knob, ()):
            if name in workload.model_fields_set:
                raise SpecError(
                    f"--vary {knob} and workload {name}={_field_text(workload, name)} both "
                    f"set {knob}: give the values in vary alone"
                )
        if knob in fix:
            raise SpecError(
                f"--vary {knob} and fix {knob}={shown(fix[knob])} both set {knob}: give the "
                "values in vary alone"
            )


def _field_text(spec: BaseModel, name: str) -> str:
    """A spec field's value for a message (an enum by its value: 'bf16')."""
    value = getattr(spec, name)
    return shown(getattr(value, "value", value))


def _whatif_text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


ServeWorkloadLike = ServeWorkload | dict[str, object] | None


def _serve_workload(workload: ServeWorkloadLike) -> ServeWorkload:
    if isinstance(workload, ServeWorkload):
        return _plausible(workload, "workload")
    if workload is not None and not isinstance(workload, Mapping):
        raise _kind_error("workload", workload, "a ServeWorkload or a dict of its fields")
    spec = validate_spec(ServeWorkload, {"mode": "serve", **(workload or {})}, where="workload")
    return _plausible(spec, "workload")


def serve_search(
    *,
    model: ModelLike,
    cluster: ClusterLike,
    workload: ServeWorkloadLike = None,
    fix: dict[str, object] | None = None,
    top: int | None = None,
    config: SolverConfig | None = None,
    disaggregate: bool = False,
    **settings: object,
) -> ServeSearchResult:
    """Best serving layout (TP, PP, EP, attention DP, replicas) and runners-up with why-not
    (CLI ``layout search --mode serve``); raises InfeasibleError naming the binding limit.
    ``fix`` pins tp, pp, ep, attention_dp or replicas (alias dp); ``top``: at most MAX_TOP;
    ``disaggregate`` also searches prefill/decode pools (``disaggregated``). Workload settings
    may also be given by their CLI names (``precision="fp8", kv_precision="fp8",
    context=8192, tpot_ms=50``: the ServeWorkload fields)."""
    config = _config(config, top)
    if not isinstance(disaggregate, bool):
        raise _kind_error("disaggregate", disaggregate, "True or False")
    spec_workload = _serve_workload(_with_settings(workload, settings, ServeWorkload))  # type: ignore[arg-type]
    return serving_search.serve_search(
        load_model(model),
        load_cluster(cluster),
        spec_workload,
        fix=fix,
        config=config,
        disaggregate=disaggregate,
    )


def serve_estimate(
    *,
    model: ModelLike,
    cluster: ClusterLike,
    layout: ServeLayout | dict[str, object],
    workload: ServeWorkloadLike = None,
    **settings: object,
) -> ServePlan:
    """Score one serving layout (CLI ``layout estimate --mode serve``); ``replicas`` (alias
    ``dp``) defaults to filling the cluster; ``precision`` and ``kv_precision`` are the
    workload's (a dict that names others is an error)."""
    if not isinstance(layout, ServeLayout | Mapping):
        raise _kind_error("layout", layout, "a ServeLayout or a dict of its fields, e.g. {'tp': 8}")
    spec_model, spec_cluster = load_model(model), load_cluster(cluster)
    spec_workload = serving_search.resolve_formats(
        spec_model,
        _serve_workload(_with_settings(workload, settings, ServeWorkload)),  # type: ignore[arg-type]
    )
    if isinstance(layout, Mapping):
        fields = dict(layout)
        if "dp" in fields:
            if "replicas" in fields:
                raise SpecError(
                    f"layout dp={shown(fields['dp'])}: dp is an alias of replicas "
                    f"(given as {shown(fields['replicas'])}); give one of them"
                )
            fields["replicas"] = fields.pop("dp")
        _check_numbers(fields, "serving layout")
        per_replica = _per_replica(fields, "serving layout", ("tp", "pp"))
        fields.setdefault("replicas", max(1, spec_cluster.num_accelerators // per_replica))
        for key in ("precision", "kv_precision"):
            _same_precision(fields, key, getattr(spec_workload, key))
        fields.update(precision=spec_workload.precision, kv_precision=spec_workload.kv_precision)
        layout = validate_spec(ServeLayout, fields, where="serving layout")
    else:
        named = _set_fields(layout, ("precision", "kv_precision"))
        for key in ("precision", "kv_precision"):
            _same_precision(named, key, getattr(spec_workload, key))
    return serving_search.serve_estimate(spec_model, spec_cluster, spec_workload, layout)


SAVED_PLAN_REL_TOL = 1e-3
"""How closely a plan's recorded figures must match its layout re-scored by this version (a saved
plan's JSON keeps 6+ significant digits; a cost-model change moves step time, not memory)."""
PLAN_EDITED = "the plan was changed after it was made: make it again with search or estimate"
"""What a plan edited in Python is told."""
PLAN_EDITED_CLI = "the file was edited; re-run 'layout search --json'"
"""What a hand-edited saved plan is told."""


def check_plan(
    plan: Plan | ServePlan,
    *,
    model: ModelLike,
    cluster: ClusterLike,
    workload: TrainWorkload | ServeWorkload | dict[str, object] | None = None,
    warn: NoteCallback | None = None,
    cli: bool = False,
) -> Plan | ServePlan:
    """``plan`` re-validated against the model and cluster it names before it is exported or
    placed: its fields have their types (a plan built with ``model_copy(update=...)`` is not
    validated by pydantic), its layout uses the GPUs it says, within the cluster, and fits; its
    recorded fit, memory and placement are what re-scoring gives (a hand-edited ``fits``,
    ``peak_gib`` or ``num_gpus`` is an error; ``cli``: the messages name the CLI's flags). Without a
    ``workload`` (placement) only what does not depend on it is compared; with one, a step
    time that differs only ``warn``s (default: a UserWarning): the plan may have been made for
    another sequence length or framework settings, which it does not record."""
    if not isinstance(plan, Plan | ServePlan):
        raise _kind_error("plan", plan, "a Plan or ServePlan")
    _callable("warn", warn, "warn(line)")
    say = warn or _warn
    edited = PLAN_EDITED_CLI if cli else PLAN_EDITED
    plan = _typed_plan(plan)
    model, cluster = load_model(model), load_cluster(cluster)
    if isinstance(workload, Mapping) or (workload is not None and not isinstance(
        workload, TrainWorkload | ServeWorkload
    )):  # fmt: skip
        train = isinstance(plan, Plan)
        workload = _workload(workload, cluster) if train else _serve_workload(workload)  # type: ignore[arg-type]
    if isinstance(plan, Plan) and isinstance(workload, ServeWorkload):
        raise SpecError(
            "workload <ServeWorkload>: a training plan is re-scored with a TrainWorkload"
        )
    layout = plan.layout
    if plan.num_gpus != layout.num_gpus:
        raise SpecError(
            f"the plan says num_gpus {plan.num_gpus}, but its layout {_layout_text(plan)} uses "
            f"{layout.num_gpus}: {edited}"
        )
    if layout.num_gpus > cluster.num_accelerators:
        raise SpecError(
            f"the plan's layout {_layout_text(plan)} uses {layout.num_gpus} GPUs; cluster "
            f"'{cluster.name}' has {cluster.num_accelerators}"
        )
    try:
        used = engine.sub_cluster(cluster, layout.num_gpus)  # a --gpus plan uses the first N
    except InternalError:
        raise SpecError(
            f"the plan's layout {_layout_text(plan)} uses {layout.num_gpus} GPUs, not a size "
            f"cluster '{cluster.name}' can be cut to: {edited}"
        ) from None
    if used.describe() != plan.cluster_description:
        how = "--cluster and cluster-edit flags" if cli else "cluster and cluster edits"
        say(f"the plan was made on '{plan.cluster_description}'; pass the same {how}")
    if isinstance(plan, Plan):
        _check_training_plan(plan, model, used, workload, say, cli)  # type: ignore[arg-type]
    else:
        _check_serving_plan(plan, model, used, PLAN_EDITED_CLI if cli else PLAN_EDITED)  # type: ignore[arg-type]
    return plan


def _warn(line: str) -> None:
    import warnings

    warnings.warn(line, stacklevel=4)


def _layout_text(plan: Plan | ServePlan) -> str:
    layout = plan.layout
    return layout.short() if isinstance(layout, Layout) else f"TP{layout.tp} PP{layout.pp}"


def _typed_plan(plan: Plan | ServePlan) -> Plan | ServePlan:
    """``plan`` validated again from its fields: ``model_copy(update=...)`` skips validation,
    so ``fits="yes"`` or a layout given as text would otherwise reach the export."""
    from pydantic_core import PydanticSerializationError

    try:
        data = plan.model_dump(warnings=False)
    except (PydanticSerializationError, TypeError, ValueError):
        raise SpecError(
            f"plan <{type(plan).__name__}>: a field holds a value of the wrong type"
        ) from None
    return validate_spec(type(plan), data, where="plan")


def _close(recorded: float, rescored: float) -> bool:
    import math

    return math.isclose(recorded, rescored, rel_tol=SAVED_PLAN_REL_TOL, abs_tol=1e-6)


def _check_training_plan(
    plan: Plan, model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload | None,
    say: NoteCallback, cli: bool,
) -> None:  # fmt: skip
    import math

    edited = PLAN_EDITED_CLI if cli else PLAN_EDITED
    from planner.topology.hierarchy import GRADIENT_GROUPS
    from planner.topology.hierarchy import placement as placement_of

    layout, memory = plan.layout, plan.memory
    parts = (
        memory.weights_gib
        + memory.grads_gib
        + memory.optimizer_gib
        + max(memory.activations_gib, memory.optimizer_step_gib)
    )
    if not _close(memory.peak_gib, parts) or plan.fits != (memory.peak_gib <= memory.capacity_gib):
        raise SpecError(
            f"the plan records peak {memory.peak_gib:.4g} GiB and fits="
            f"{str(plan.fits).lower()}, but its parts sum to {parts:.4g} GiB of "
            f"{memory.capacity_gib:.4g}: {edited}"
        )
    if not plan.fits:
        raise SpecError(
            f"the plan's layout {layout.short()} does not fit (peak {memory.peak_gib:.4g} GiB of "
            f"{memory.capacity_gib:.4g}): there is nothing to export"
        )
    usable = cluster.accelerator.usable_memory_bytes / 2**30
    if not _close(memory.capacity_gib, usable):
        raise SpecError(
            f"the plan records {memory.capacity_gib:.4g} GiB usable per GPU; cluster "
            f"'{cluster.name}' has {usable:.4g}: {edited}"
        )
    recorded = workload or plan.workload
    where = placement_of(
        cluster,
        layout,
        recorded.cp_comm if recorded else "p2p",
        recorded.zero_shard_group if recorded else None,
    )
    # a plan saved before schema 1.18 has no gradient groups; where it has them they must match
    where = {d: e for d, e in where.items() if d not in GRADIENT_GROUPS or d in plan.placement}
    if where != plan.placement:
        raise SpecError(
            f"the plan's placement is not where its layout {layout.short()} lands on cluster "
            f"'{cluster.name}': {edited}"
        )
    if workload is None and plan.workload is not None:
        workload = plan.workload  # the plan records what it was scored on (schema 1.3)
    probe = workload or _probe_workload(plan)
    if probe is None:
        return
    split = plan.pipeline_split
    # re-score as it was scored: the even split, the CP-SAT split the search made, or the split
    # the user gave (its layers per chunk, as the plan records them)
    config = None if split is None or split.method == "even" else SolverConfig(top=1)
    given = engine.given_split_of(plan)
    try:
        again = engine.estimate(model, cluster, probe, layout, config=config, split=given)
    except SpecError as exc:
        if workload is None:  # the guessed workload may not be the plan's: nothing to compare
            return
        raise SpecError(f"the plan's layout {layout.short()}: {exc}") from None
    if not _close(memory.weights_gib, again.memory.weights_gib):  # whatever the workload
        raise SpecError(
            f"the plan records weights of {memory.weights_gib:.4g} GiB per GPU; its layout "
            f"re-scored for model '{model.name}' gives {again.memory.weights_gib:.4g}: {edited}"
        )
    if workload is None:
        return
    if not again.fits:
        reason = engine.not_fitting_message(again, model, cluster, workload)
        raise SpecError(f"the plan's layout {layout.short()} does not fit: {reason}")
    if not math.isclose(again.step_time_s, plan.step_time_s, rel_tol=1e-6):
        seq_len = "--seq-len" if cli else "seq_len"
        say(
            f"re-scoring the plan with {seq_len} {workload.seq_len} gives "
            f"{again.step_time_s:.4g} s per step, not {plan.step_time_s:.4g} s: pass the "
            f"{seq_len} the plan was made with (or it predates this version's cost model)"
        )
        return
    recorded, rescored = memory.peak_gib, again.memory.peak_gib
    if not _close(recorded, rescored):
        raise SpecError(
            f"the plan records a peak of {recorded:.4g} GiB; its layout re-scored gives the same "
            f"step time but {rescored:.4g} GiB: {edited}"
        )
    for name in ("tokens_per_s", "mfu", "model_tflops_per_gpu"):
        if not _close(getattr(plan, name), getattr(again, name)):
            raise SpecError(
                f"the plan records {name} {getattr(plan, name):.4g}; its layout re-scored gives "
                f"the same step time but {getattr(again, name):.4g}: {edited}"
            )


def _probe_workload(plan: Plan) -> TrainWorkload | None:
    """A workload to re-score ``plan`` by when none is given (its tokens per step as 8,192-token
    sequences), None when that is not a whole number of sequences."""
    from planner.report.export import workload_for_plan

    try:
        return workload_for_plan(plan, seq_len=TrainWorkload().seq_len)
    except SpecError:
        return None


def _check_serving_plan(
    plan: ServePlan, model: ModelSpec, cluster: ClusterSpec, edited: str
) -> None:
    from planner.search.serving import serve_placement

    layout, memory = plan.layout, plan.memory
    if serve_placement(cluster, layout) != plan.placement:
        raise SpecError(
            f"the plan's placement is not where its layout {_layout_text(plan)} lands on cluster "
            f"'{cluster.name}': {edited}"
        )
    # Re-scored for one short sequence in the plan's own formats: the weights and the memory
    # compared below do not depend on the load, which the plan does not record.
    probe = ServeWorkload(
        precision=layout.precision,
        kv_precision=layout.kv_precision,
        compute_precision=plan.compute_precision,
        context=2,
        prompt_len=1,
        output_len=1,
    )
    try:
        again = serving_search.serve_estimate(model, cluster, probe, layout)
    except PlannerError as exc:  # a broken rule, or weights that do not fit (InfeasibleError)
        raise SpecError(f"the serving plan's layout {_layout_text(plan)}: {exc}") from None
    if not plan.fits:
        raise SpecError(
            f"the plan records fits=false, but its layout {_layout_text(plan)} re-scored fits: "
            f"{edited}"
        )
    for name in ("weights_gib", "capacity_gib", "hbm_gib"):
        if not _close(getattr(memory, name), getattr(again.memory, name)):
            raise SpecError(
                f"the plan records {name} {getattr(memory, name):.4g}; its layout re-scored on "
                f"cluster '{cluster.name}' gives {getattr(again.memory, name):.4g}: {edited}"
            )


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
    from planner.report.export import FORMATS, make_job
    from planner.report.export import export as _export

    if not isinstance(format, str) or format not in FORMATS:
        raise SpecError(
            f"format {shown(format)}: unknown export format (one of: {', '.join(FORMATS)})"
        )
    if not isinstance(plan, Plan | ServePlan | SearchResult | ServeSearchResult):
        raise _kind_error("plan", plan, "a Plan, ServePlan, SearchResult or ServeSearchResult")
    best = _typed_plan(plan.best if isinstance(plan, SearchResult | ServeSearchResult) else plan)
    spec_workload: TrainWorkload | ServeWorkload | None = None
    if isinstance(best, ServePlan):
        spec_workload = _serve_workload(workload)  # type: ignore[arg-type]
    elif workload is not None:
        spec_workload = _workload(workload)  # type: ignore[arg-type]
    job = make_job(
        best,
        model=None if model is None else load_model(model),
        cluster=_plan_cluster(best, cluster),
        workload=spec_workload,
    )
    check_plan(job.plan, model=job.model, cluster=job.cluster, workload=job.workload)
    return _export(job, format)


REPORT_FORMATS: tuple[str, ...] = ("html", "markdown")
"""What :func:`render_report` writes: one self-contained HTML page (inline SVG charts), or Markdown."""


def render_report(
    result: SearchResult | ServeSearchResult | WhatIfResult | MigrateResult | Plan,
    *,
    format: str = "html",
) -> str:
    """The report of a training search, a serving search, a what-if sweep, a migration or one
    scored training layout (``estimate``), as ``--report`` writes it: ``format`` html (one
    self-contained page, its charts inline SVG, nothing fetched) or markdown.

    >>> import planner
    >>> result = planner.search(model="8B", cluster="hgx_h100x8", seq_len=4096)
    >>> planner.render_report(result, format="markdown").splitlines()[0]
    '# Training llama3.1-8b on hgx_h100x8'
    """
    if not isinstance(format, str) or format not in REPORT_FORMATS:
        raise SpecError(
            f"format {shown(format)}: unknown report format (one of: {', '.join(REPORT_FORMATS)})"
        )
    html = format == "html"
    if isinstance(result, SearchResult):
        from planner.report.search_report import search_html, search_markdown

        return search_html(result) if html else search_markdown(result)
    if isinstance(result, ServeSearchResult):
        from planner.report.serving_report import serving_html, serving_markdown

        return serving_html(result) if html else serving_markdown(result)
    if isinstance(result, WhatIfResult):
        from planner.report.html import whatif_html
        from planner.report.markdown import whatif_markdown

        return whatif_html(result) if html else whatif_markdown(result)
    if isinstance(result, MigrateResult):
        from planner.report.migrate_report import migrate_html, migrate_markdown

        return migrate_html(result) if html else migrate_markdown(result)
    if isinstance(result, Plan):
        from planner.report.search_report import plan_html, plan_markdown

        return plan_html(result) if html else plan_markdown(result)
    raise _kind_error(
        "result",
        result,
        "a SearchResult, ServeSearchResult, WhatIfResult, MigrateResult or training Plan",
    )


def placement(
    plan: Plan | SearchResult,
    *,
    cluster: ClusterLike | None = None,
    cluster_state: StateLike = None,
) -> list[PlacementRecord]:
    """Per global rank of a training plan: node, local GPU and its group in every parallel
    dimension (CLI ``--placement``), after checking that TP and EP groups stay inside one
    scale-up domain where the plan says they do. ``cluster`` defaults to the plan's (another is
    an error); ``cluster_state`` places the ranks on the free accelerators (CP-SAT), as the
    plan's search or estimate with that state did."""
    from planner.report.placement_file import check_domains, placement_records

    if isinstance(plan, ServePlan | ServeSearchResult):
        raise SpecError(
            f"plan <{type(plan).__name__}>: placement needs a training plan (Plan, SearchResult)"
        )
    if not isinstance(plan, Plan | SearchResult):
        raise _kind_error("plan", plan, "a training Plan or SearchResult")
    best = _typed_plan(plan.best if isinstance(plan, SearchResult) else plan)
    spec_cluster = _plan_cluster(best, cluster) or load_cluster(best.cluster)
    check_plan(best, model=load_model(best.model), cluster=spec_cluster)
    state, _ = _cluster_state(cluster_state)
    records = placement_records(best, spec_cluster, state=state)
    check_domains(best, records)
    return records


def pack(
    *,
    cluster: ClusterLike,
    jobs: list[str | Path],
    cluster_state: StateLike = None,
    config: SolverConfig | dict[str, object] | None = None,
    workers: int = 1,
    progress: ProgressCallback | None = None,
    note: NoteCallback | None = None,
) -> PackResult:
    """One layout per job and disjoint placements on one cluster or a pool of partitions (CLI
    ``layout pack``), chosen by CP-SAT among each job's best plans at the legal GPU counts.

    ``cluster``: a cluster name or file, or a pool YAML (``name`` and ``partitions``: each a
    ``cluster`` and optionally its ``cluster_state``). ``jobs``: job files (YAML: ``model``,
    ``mode`` train/serve, ``workload``, and a ``weight`` or a ``target`` with ``tokens_per_s``
    or, for training, ``step_time_s``). ``cluster_state``: what is down or taken on a single
    cluster. Weighted jobs share the cluster to maximise the weighted sum of their shares of
    their best throughput; targeted jobs meet their targets with the fewest accelerators.
    ``workers``: local processes that run the searches of the jobs' rows (at most the cores
    available and the searches start, ``note(line)`` says so, default a UserWarning; the answer
    is the same with any number; where the processes are not forked, macOS and Windows, the
    calling script needs an ``if __name__ == "__main__":`` guard); ``progress(done, total)`` is
    called after each search. Raises SpecError for a bad file, InfeasibleError (naming the
    binding limit) when no packing exists.
    """
    from planner.catalog.fleet import load_jobs, load_pool
    from planner.search.fleet import pack as _pack

    if isinstance(jobs, str | Path) or not isinstance(jobs, list | tuple):
        raise _kind_error("jobs", jobs, "a list of job file paths")
    for job in jobs:
        if not isinstance(job, str | Path):
            raise _kind_error("jobs", job, "a list of job file paths")
    if not isinstance(cluster, str | Path | ClusterSpec):
        raise _kind_error(
            "cluster", cluster, "a cluster name, a cluster or pool file, or a ClusterSpec"
        )
    _callable("progress", progress, "progress(done, total)")
    _callable("note", note, "note(line)")
    processes = _plausible_count("workers", workers)
    state, _ = _cluster_state(cluster_state)
    name, partitions = load_pool(cluster, state=state)
    return _pack(
        load_jobs(list(jobs)),
        partitions,
        cluster_name=name,
        config=_config(config, None),
        workers=processes,
        progress=progress,
        note=note,
    )
