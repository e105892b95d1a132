"""What-if sweeps: re-plan the best layout for each combination of cluster and workload knobs.

One scenario function, :func:`run_scenario`, takes a picklable :class:`ScenarioRequest` and
returns a :class:`~planner.specs.scenarios.Scenario`; the same function runs in this process,
over local cores (``concurrent.futures.ProcessPoolExecutor``) or on a Ray cluster (the optional
``ray`` extra). Results always come back in the cartesian order of the varies.

The work is bounded before anything runs: the scenario count is the product of the list lengths
(refused over ``max_scenarios``), no list may repeat a value, and no more processes start than
there are cores or scenarios. Requests are made lazily and only a few per worker are in flight,
so memory grows with the results kept, not with the requests.
"""

from __future__ import annotations

import datetime
import itertools
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

from pydantic import Field, PositiveInt

from planner.catalog import accelerator_names, build_cluster, load_system, system_names
from planner.catalog.clusters import MAX_ACCELERATORS
from planner.catalog.frameworks import default_framework, resolve_workload
from planner.catalog.io import short_repr, validate_spec
from planner.catalog.store import suggest
from planner.errors import InfeasibleError, SpecError, one_line
from planner.search import engine
from planner.search.migrate import bottleneck, economics
from planner.search.pool import (
    IN_FLIGHT_PER_WORKER,
    ProgressCallback,
    in_order,
    local_processes,
    no_progress,
    run_local,
    warn_note,
)
from planner.search.rules import MAX_GLOBAL_BATCH
from planner.search.space import share_memory_estimates_for_process
from planner.specs.base import FrozenSpec
from planner.specs.cluster import BaseHardware, ClusterEdits, ClusterSpec
from planner.specs.formats import TRAINING_FORMATS
from planner.specs.model import ModelSpec
from planner.specs.scenarios import WHATIF_TOP, KnobValue, RunLength, Scenario, WhatIfResult
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import MOE_DISPATCHERS, TrainWorkload, moe_framework_fields
from planner.units import BINARY_PREFIX

NoteCallback = Callable[[str], None]
"""Called with one line when the sweep runs otherwise than asked (fewer processes than workers)."""

DEFAULT_MAX_SCENARIOS = 256
"""Scenarios a sweep may plan unless ``--max-scenarios`` / ``max_scenarios=`` raises the cap."""
MAX_SCENARIOS_LIMIT = 100_000
"""The highest cap: every scenario's plan is kept in memory for the table and the report (about
30 KiB each, so some 3 GiB at this cap, and ~4 KB of ``--json`` per scenario)."""

EDIT_KNOBS: tuple[str, ...] = tuple(ClusterEdits.model_fields)
"""Knobs that are cluster edits (ClusterEdits fields)."""
CLUSTER_KNOBS: tuple[str, ...] = ("system", "accelerator", "gpus")
"""Knobs that change which cluster is built."""
WORKLOAD_KNOBS: tuple[str, ...] = ("precision", "seq_len", "global_batch")
"""Knobs that change the training step."""
FRAMEWORK_KNOBS: tuple[str, ...] = (
    "ep_overlap", "moe_dispatcher", "moe_cuda_graphs", "fused_grouped_mlp"
)  # fmt: skip
"""Knobs that change how the framework runs MoE layers (the flags of the same names)."""
KNOBS: tuple[str, ...] = EDIT_KNOBS + CLUSTER_KNOBS + WORKLOAD_KNOBS + FRAMEWORK_KNOBS
_BOOL_KNOBS = ("rail_optimized", "ep_overlap", "moe_cuda_graphs", "fused_grouped_mlp")
_ALIASES = {
    "gpu_count": "gpus",
    "num_gpus": "gpus",
    "nic_gbit": "nic_gbps",
    "price": "price_per_gpu_hour",
}
_FLOAT_KNOBS = ("nic_gbps", "nics_per_gpu", "oversubscription", "price_per_gpu_hour")
_FLOAT_KNOBS += ("hbm_gb", "hbm_tbps", "power_cap_w")
_INT_KNOBS = ("domain_size", "gpus", "seq_len", "global_batch")
_TRUE, _FALSE = ("true", "yes", "on", "1", "rail"), ("false", "no", "off", "0", "tor")


class ClusterBase(FrozenSpec):
    """The base cluster of a sweep, in the terms the catalog builds clusters from."""

    name: str
    """Name as resolved (kept when neither system nor GPU count varies)."""
    system: str
    """Catalog system name."""
    num_accelerators: PositiveInt
    """Accelerators in the base cluster."""
    shape: tuple[int, ...] | None = None
    """TPU slice shape of a one-slice base cluster (None for GPU systems and multi-slice TPU
    clusters, which are rebuilt from their chip count)."""
    edits: ClusterEdits = Field(default_factory=ClusterEdits)
    """What-if edits already applied to the base cluster."""
    hardware: BaseHardware | None = None
    """The base cluster's system and accelerator before its edits (a cluster file's own, with
    any ``--calibration`` overlay): every scenario on the same system is built from them, and
    a catalog system of the same accelerator keeps that accelerator."""

    @classmethod
    def of(cls, cluster: ClusterSpec) -> ClusterBase:
        """The base of a resolved cluster."""
        return cls(
            name=cluster.name,
            system=cluster.system.name,
            num_accelerators=cluster.num_accelerators,
            # a named slice shape (tpu_v5p_8x16x8) is one slice; several slices are rebuilt
            # from the chip count (the shape is one slice's, not the whole cluster's)
            shape=cluster.slice_shape if cluster.num_domains == 1 else None,
            edits=validate_spec(
                ClusterEdits,
                # the cluster records its edits as text ("200.0", "False"): read them back as
                # values, since a spec takes no text for a number
                {k: parse_value(k, v) if k in EDIT_KNOBS else v for k, v in cluster.edits.items()},
                where="cluster edits",
            ),
            hardware=cluster.base
            or BaseHardware(system=cluster.system, accelerator=cluster.accelerator),
        )


class ScenarioRequest(FrozenSpec):
    """Everything one scenario needs (picklable, so it can cross process and Ray boundaries)."""

    model: ModelSpec
    """The model."""
    base: ClusterBase
    """The base cluster."""
    workload: TrainWorkload
    """The base training step."""
    vary: dict[str, KnobValue]
    """This scenario's knob values."""
    fix: dict[str, object] = Field(default_factory=dict)
    """Layout fields pinned in the search."""
    config: SolverConfig = Field(default_factory=SolverConfig)
    """Solver settings."""
    run: RunLength | None = None
    """Token or step count for time-to-train figures."""
    given: dict[str, object] | None = None
    """The workload fields the user set, when they name no framework: a scenario on another
    vendor's accelerators then runs that vendor's default profile under them
    (:func:`planner.catalog.frameworks.default_framework`: MaxText on a TPU); None: the
    workload as it is."""


class WhatIfOptions(FrozenSpec):
    """How a sweep runs."""

    fix: dict[str, object] = Field(default_factory=dict)
    """Layout fields pinned in every search (``--fix``)."""
    config: SolverConfig = Field(default_factory=lambda: SolverConfig(top=WHATIF_TOP))
    """Solver settings of each search (the best plan and its runners-up are kept)."""
    run: RunLength | None = None
    """Token or step count for time-to-train figures."""
    workers: PositiveInt = 1
    """Local processes (1 = run in this process); at most the cores available are started."""
    engine: Literal["process", "ray"] = "process"
    """process: local cores; ray: an existing Ray cluster (``RAY_ADDRESS``) or a local one."""
    max_scenarios: int = Field(default=DEFAULT_MAX_SCENARIOS, ge=1, le=MAX_SCENARIOS_LIMIT)
    """Refuse a sweep of more scenarios than this (``--max-scenarios``)."""


KNOB_UNITS: dict[str, str] = {
    "nic_gbps": "Gb/s per NIC", "nics_per_gpu": "NICs per accelerator",
    "oversubscription": "spine taper, 1 = non-blocking", "domain_size": "accelerators",
    "price_per_gpu_hour": "USD per accelerator-hour", "hbm_gb": "GB", "hbm_tbps": "TB/s",
    "power_cap_w": "W", "gpus": "accelerators", "seq_len": "tokens", "global_batch": "sequences",
}  # fmt: skip
"""The unit of each numeric knob, for the range in its messages."""
MAX_SEQ_LEN = 2**24
"""Longest sequence a what-if may ask for (16,777,216 tokens: beyond every model's context)."""
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A number as the CLI reads one: ASCII digits only (float() would also take '٣٠' and '1_0')."""


def knob_range(knob: str) -> tuple[float, float, bool]:
    """(low, high, low is exclusive) of a numeric knob: a cluster edit's bounds (ClusterEdits),
    the largest cluster for gpus, the largest global batch, MAX_SEQ_LEN for seq_len.

    >>> knob_range("nic_gbps"), knob_range("gpus")
    ((1.0, 100000.0, False), (1, 1048576, False))
    """
    if knob == "gpus":
        return 1, MAX_ACCELERATORS, False
    if knob == "seq_len":
        return 1, MAX_SEQ_LEN, False
    if knob == "global_batch":
        return 1, MAX_GLOBAL_BATCH, False
    low, high, exclusive = 0.0, math.inf, True
    for bound in ClusterEdits.model_fields[knob].metadata:
        if hasattr(bound, "ge"):
            low, exclusive = bound.ge, False
        elif hasattr(bound, "gt"):
            low, exclusive = bound.gt, True
        elif hasattr(bound, "le"):
            high = bound.le
    if knob == "domain_size":
        low, exclusive = 1, False
    return low, high, exclusive


_BINARY_K = re.compile(r"\s*([0-9]{1,300})\s*([KMG])\s*", flags=re.IGNORECASE)
"""A token length with a binary suffix, ``8K`` = 8,192 (the CLI's ``--seq-len`` reads it so)."""


def _number(knob: str, text: str) -> KnobValue:
    """A numeric knob's value from its text, in the knob's range (stated in the message);
    ``seq_len`` also as ``8K`` / ``128K`` (binary, as the CLI's ``--seq-len``).

    >>> _number("seq_len", "8K"), _number("seq_len", "32768")
    (8192, 32768)
    """
    label = f"--vary {knob}: {short_repr(text)}"
    binary = _BINARY_K.fullmatch(text) if knob == "seq_len" else None
    if binary is not None:
        text = str(int(binary.group(1)) * BINARY_PREFIX[binary.group(2).upper()])
    if not _NUMBER_TEXT.fullmatch(text):
        word = text.strip().lower().lstrip("+-")
        if word in ("inf", "infinity", "nan"):
            raise SpecError(f"{label} must be a finite number")
        raise SpecError(f"{label} is not a number (digits 0-9, e.g. 400 or 1.5e3)")
    value = float(text)  # digits past the float range read as inf: out of range below
    low, high, exclusive = knob_range(knob)
    whole = knob in _INT_KNOBS
    if whole and math.isfinite(value) and (value != int(value) or value < 1):
        raise SpecError(f"{label} must be a positive whole number")
    if not low <= value <= high or (exclusive and value == low):
        span = f"> {_figure(low)} and at most" if exclusive else f"from {_figure(low)} to"
        raise SpecError(f"{label} must be {span} {_figure(high)} ({KNOB_UNITS[knob]})")
    return int(value) if whole or value == int(value) else value


def _figure(number: float) -> str:
    """A bound for a message: 1,048,576 or 0.01.

    >>> _figure(2**20), _figure(0.01), _figure(1e5)
    ('1,048,576', '0.01', '100,000')
    """
    return f"{int(number):,}" if number == int(number) else f"{number:g}"


def _name(knob: str, text: str, choices: list[str]) -> str:
    if text not in choices:
        raise SpecError(f"--vary {knob}: unknown {knob} {short_repr(text)}{suggest(text, choices)}")
    return text


def parse_value(knob: str, text: object) -> KnobValue:
    """One knob value from text (or a Python value from the API), validated."""
    if isinstance(text, bool | int | float) and knob not in _BOOL_KNOBS:
        text = str(text)
    if knob in _BOOL_KNOBS:
        word = str(text).strip().lower()
        if word not in _TRUE + _FALSE:
            raise SpecError(f"--vary {knob}: {short_repr(text)} must be true or false")
        return word in _TRUE
    if knob == "moe_dispatcher":
        return _name(knob, str(text).strip().lower(), list(MOE_DISPATCHERS))
    raw = str(text).strip()
    if knob in _FLOAT_KNOBS or knob in _INT_KNOBS:
        return _number(knob, raw)
    if knob == "system":
        return _name(knob, raw, system_names())
    if knob == "accelerator":
        return _name(knob, raw, accelerator_names())
    return _name(knob, raw.lower(), [str(f) for f in TRAINING_FORMATS])


def knob_of(key: object, text: str | None = None) -> str:
    """The knob that a ``--vary`` key names (aliases resolved); SpecError naming the knobs.

    >>> knob_of("num-gpus")
    'gpus'
    """
    knob = str(key).strip().lower().replace("-", "_")
    knob = _ALIASES.get(knob, knob)
    if knob not in KNOBS:
        raise SpecError(
            f"--vary {short_repr(text if text is not None else str(key))} must be KEY=V1,V2,... "
            "with KEY one "
            f"of {', '.join(KNOBS)}{suggest(knob, list(KNOBS))}"
        )
    return knob


def split_vary(text: str) -> tuple[str, list[str]]:
    """``KEY=V1,V2,...`` -> (knob, value texts), not parsed yet: cheap enough to count the
    scenarios before any value is validated.

    >>> split_vary("nic_gbit=200, 400")
    ('nic_gbps', ['200', ' 400'])
    """
    key, sep, values = text.partition("=")
    if not sep:
        raise SpecError(
            f"--vary {short_repr(text)} must be KEY=V1,V2,... with KEY one of {', '.join(KNOBS)}"
        )
    knob = knob_of(key, text)
    items = [v for v in values.split(",") if v.strip()]
    if not items:
        raise SpecError(f"--vary {knob}: give at least one value")
    return knob, items


def _shown(value: KnobValue) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def parse_values(knob: str, items: Iterable[object]) -> list[KnobValue]:
    """Each value of one knob parsed; SpecError on a bad value or one given twice (compared
    parsed, so ``400`` and ``400.0`` are the same value).

    >>> parse_values("nic_gbps", ["200", "400.5"])
    [200, 400.5]
    """
    seen: set[KnobValue] = set()
    values: list[KnobValue] = []
    for item in items:
        value = parse_value(knob, item)
        if value in seen:
            raise SpecError(
                f"--vary {knob}: {short_repr(str(item).strip())} repeats {knob}={_shown(value)}: "
                "give each value once"
            )
        seen.add(value)
        values.append(value)
    return values


def parse_vary(text: str) -> tuple[str, list[KnobValue]]:
    """``KEY=V1,V2,...`` -> (knob, values); SpecError naming the knobs on a bad key.

    >>> parse_vary("nic_gbps=200,400")
    ('nic_gbps', [200, 400])
    """
    knob, items = split_vary(text)
    return knob, parse_values(knob, items)


def check_max_scenarios(max_scenarios: object) -> int:
    """``max_scenarios`` as given, or SpecError when it is not a whole number in range."""
    if (
        isinstance(max_scenarios, bool)
        or not isinstance(max_scenarios, int)
        or not 1 <= max_scenarios <= MAX_SCENARIOS_LIMIT
    ):
        raise SpecError(
            f"--max-scenarios {max_scenarios}: must be a whole number from 1 to "
            f"{MAX_SCENARIOS_LIMIT:,}"
        )
    return max_scenarios


def check_scenario_count(sizes: dict[str, int], max_scenarios: int) -> int:
    """The number of scenarios (the product of the list lengths, computed without building
    anything); SpecError naming it, the cap and the flag that raises it when over the cap.

    >>> check_scenario_count({"nic_gbps": 3, "oversubscription": 2}, 256)
    6
    """
    check_max_scenarios(max_scenarios)
    count = math.prod(sizes.values())
    if count > max_scenarios:
        product = " x ".join(f"{n:,} {knob}" for knob, n in sizes.items())
        raise SpecError(
            f"--vary gives {count:,} scenarios ({product}), over the cap of {max_scenarios:,}: "
            f"narrow the --vary lists or raise --max-scenarios (at most {MAX_SCENARIOS_LIMIT:,})"
        )
    return count


def check_knobs(knobs: dict[str, list[KnobValue]]) -> None:
    """SpecError when the knobs conflict or a list repeats a value."""
    if "system" in knobs and "accelerator" in knobs:
        raise SpecError("--vary system and --vary accelerator both pick the system: vary one")
    if not knobs:
        raise SpecError("give at least one --vary KEY=V1,V2,...")
    for knob, values in knobs.items():
        if not values:
            raise SpecError(f"--vary {knob}: give at least one value")
        seen: set[KnobValue] = set()
        for value in values:
            if value in seen:
                raise SpecError(
                    f"--vary {knob}: repeats {knob}={_shown(value)}: give each value once"
                )
            seen.add(value)


def system_for_accelerator(accelerator: str, base_system: str) -> str:
    """The catalog system built from ``accelerator``, preferring the base system's kind and
    vendor prefix (``b200`` from ``hgx_h100`` -> ``hgx_b200``)."""
    base = load_system(base_system)
    prefix = base_system.split("_")[0]
    candidates = [s for s in system_names() if load_system(s).accelerator == accelerator]
    if not candidates:
        raise SpecError(f"no catalog system is built from accelerator '{accelerator}'")
    return min(
        candidates,
        key=lambda s: (load_system(s).kind != base.kind, not s.startswith(prefix + "_"), s),
    )


def scenario_cluster(base: ClusterBase, vary: dict[str, KnobValue]) -> ClusterSpec:
    """The base cluster with this scenario's knobs applied (SpecError when not legal)."""
    updates = {k: v for k, v in vary.items() if k in EDIT_KNOBS}
    edits = validate_spec(
        ClusterEdits, {**base.edits.model_dump(exclude_none=True), **updates}, where="--vary"
    )
    system = str(vary.get("system", base.system))
    if "accelerator" in vary:
        system = system_for_accelerator(str(vary["accelerator"]), base.system)
    num = int(vary.get("gpus", base.num_accelerators))
    hardware = _scenario_hardware(base, system)
    if system == base.system and num == base.num_accelerators:
        return build_cluster(hardware, num, name=base.name, edits=edits, shape=base.shape)
    return build_cluster(hardware, num, name=f"{system}x{num}", edits=edits)


def _scenario_hardware(base: ClusterBase, system: str) -> str | BaseHardware:
    """What a scenario on ``system`` is built from: the base's own hardware on the base's
    system; a catalog system of the base's (catalog) accelerator with that accelerator, so a
    calibration overlay is kept; else the catalog system by name."""
    hardware = base.hardware
    if hardware is None:
        return system
    if system == base.system:
        return hardware
    catalog = load_system(system)
    if not hardware.accelerator_origin and catalog.accelerator == hardware.accelerator.name:
        return BaseHardware(system=catalog, accelerator=hardware.accelerator)
    return system


def framework_updates(vary: dict[str, KnobValue]) -> dict[str, object]:
    """TrainWorkload fields set by the framework knobs of a scenario.

    >>> framework_updates({"moe_dispatcher": "deepep", "moe_cuda_graphs": True})
    {'moe_dispatch_dedup': True, 'moe_host_sync': False}
    >>> framework_updates({"fused_grouped_mlp": True})
    {'fused_grouped_mlp': True}
    """
    fields = moe_framework_fields(
        moe_dispatcher=vary.get("moe_dispatcher"),  # type: ignore[arg-type]
        ep_overlap=vary.get("ep_overlap"),  # type: ignore[arg-type]
        moe_cuda_graphs=vary.get("moe_cuda_graphs"),  # type: ignore[arg-type]
    )
    if "fused_grouped_mlp" in vary:
        fields["fused_grouped_mlp"] = vary["fused_grouped_mlp"]
    return fields


def run_scenario(request: ScenarioRequest) -> Scenario:
    """Re-plan one scenario. Infeasibility and illegal knob values are data, not exceptions."""
    vary = request.vary
    try:
        cluster = scenario_cluster(request.base, vary)
        updates = {k: v for k, v in vary.items() if k in WORKLOAD_KNOBS}
        updates.update(framework_updates(vary))
        base = request.workload
        vendor = cluster.accelerator.vendor
        if request.given is not None and default_framework(vendor) != base.framework:
            base = resolve_workload(request.given, vendor)  # no framework named: the part's
        workload = validate_spec(TrainWorkload, {**base.model_dump(), **updates}, where="--vary")
        result = engine.search(
            request.model, cluster, workload, fix=dict(request.fix), config=request.config
        )
    except InfeasibleError as exc:
        return Scenario(vary=vary, status="infeasible", error=one_line(str(exc)))
    except SpecError as exc:
        return Scenario(vary=vary, status="invalid", error=one_line(str(exc)))
    plan = result.best
    return Scenario(
        vary=vary,
        status="ok",
        plan=plan,
        economics=economics(plan, cluster, request.run),
        bottleneck=bottleneck(plan),
        alternatives=result.alternatives,
    )


def _run_local(
    requests: Iterator[ScenarioRequest],
    count: int,
    processes: int,
    progress: ProgressCallback,
) -> list[Scenario]:
    """Run ``count`` scenario requests here (``processes`` <= 1) or over a pool
    (:func:`planner.search.pool.run_local`); scenarios in request order."""
    return run_local(run_scenario, requests, count, processes, progress)


def _scenario_in_worker(request: ScenarioRequest) -> Scenario:
    """run_scenario in a Ray worker (one CPU per task), sharing memory estimates across its
    tasks and solving its pipeline splits one at a time."""
    share_memory_estimates_for_process()
    engine.cap_split_threads(1)
    return run_scenario(request)


def _run_ray(
    requests: Iterator[ScenarioRequest], count: int, progress: ProgressCallback
) -> list[Scenario]:
    """Run ``count`` requests as Ray tasks, at most IN_FLIGHT_PER_WORKER per cluster CPU
    submitted ahead; results in request order."""
    try:
        import ray
    except ImportError:
        raise SpecError(
            "--engine ray needs the optional extra: pip install 'layout[ray]'"
        ) from None
    if not ray.is_initialized():
        ray.init()  # joins the cluster named by RAY_ADDRESS, else starts a local one
    remote = ray.remote(_scenario_in_worker)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    results: list[Scenario | None] = [None] * count
    source = enumerate(requests)
    pending: dict[object, int] = {}

    def submit(n: int) -> None:
        for i, request in itertools.islice(source, n):
            pending[remote.remote(request)] = i

    submit(cpus * IN_FLIGHT_PER_WORKER)
    done = 0
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            results[pending.pop(ref)] = ray.get(ref)
            done += 1
            progress(done, count)
        submit(len(ready))
    return in_order(results)


def whatif(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    *,
    knobs: dict[str, list[KnobValue]],
    options: WhatIfOptions | None = None,
    progress: ProgressCallback | None = None,
    note: NoteCallback | None = None,
    given: dict[str, object] | None = None,
) -> WhatIfResult:
    """Re-plan ``model`` for every combination of ``knobs`` (the last knob varies fastest);
    ``given``: the workload fields the user set when they named no framework
    (:attr:`ScenarioRequest.given`).

    SpecError, before anything runs, when the knobs conflict, a list repeats a value or the
    combinations outnumber ``options.max_scenarios``. ``note`` gets one line when fewer
    processes start than ``options.workers`` asks (default: a UserWarning)."""
    options = options or WhatIfOptions()
    check_knobs(knobs)
    names = list(knobs)
    count = check_scenario_count({n: len(knobs[n]) for n in names}, options.max_scenarios)
    processes, line = local_processes(options.workers, count, options.engine)
    if line is not None:
        (note or warn_note)(line)
    start = time.perf_counter()
    base = ClusterBase.of(cluster)
    requests = (
        ScenarioRequest(
            model=model,
            base=base,
            workload=workload,
            vary=dict(zip(names, combo, strict=True)),
            fix=options.fix,
            config=options.config,
            run=options.run,
            given=given,
        )
        for combo in itertools.product(*(knobs[n] for n in names))
    )
    report = progress or no_progress
    if options.engine == "ray":
        scenarios = _run_ray(requests, count, report)
    else:
        scenarios = _run_local(requests, count, processes, report)
    from planner import __version__

    return WhatIfResult(
        model=model.name,
        cluster=cluster.name,
        cluster_description=cluster.describe(),
        workload=workload,
        knobs=knobs,
        scenarios=scenarios,
        elapsed_s=time.perf_counter() - start,
        version=__version__,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
