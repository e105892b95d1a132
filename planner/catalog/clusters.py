"""Cluster names: ``<system>x<N>``, TPU slices (``tpu_v5p_8x8x16``) and Google Cloud accelerator
types (``v5p-256``), and cluster YAML files (DESIGN.md section 8).

Rule: N accelerators are spread evenly over the fewest scale-up domains that hold them, and each
domain's share must be whole units of the system (an 8-GPU board for HGX, a 4-GPU tray for
NVL72). Below one unit, N must divide it. TPU names pick the most cubic legal slice; beyond the
largest slice the job spans several equal slices over the data-center network.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path

from planner.catalog.io import load_mapping, path_exists, validate_spec
from planner.catalog.store import (
    apply_calibration,
    check_calibration,
    load_calibration_file,
    load_system,
    suggest,
    system_names,
)
from planner.catalog.variants import catalog_hardware, edit_accelerator, file_hardware
from planner.errors import SpecError
from planner.specs.cluster import BaseHardware, ClusterEdits, ClusterFile, ClusterSpec
from planner.specs.hardware import CalibrationRecord, FabricSpec, SystemSpec

_SHAPE_RE = re.compile(r"^(?P<system>.+)_(?P<shape>[0-9]{1,9}(?:x[0-9]{1,9}){1,2})$")
_ACCELERATOR_TYPE_RE = re.compile(r"^(?P<prefix>[a-z][a-z0-9]*)-(?P<count>[0-9]+)$")
MAX_ACCELERATORS = 1_048_576
"""Largest cluster the planner accepts (2**20 accelerators)."""


def domain_split(system: SystemSpec, n: int) -> tuple[int, int] | None:
    """(num_domains, per_domain) for N accelerators, or None when N breaks the rule.

    The rule: the fewest domains that hold the same whole number of units each; when that is
    more than ceil(N / domain), at least half of each domain in use. N may so leave the same units
    free in every domain, as NVL72 jobs run 64 of a rack's 72 GPUs (16 of 18 trays): MLPerf
    Training v5.1's 2,560-GPU GB200 run is 40 racks x 64 (mlcommons/training_results_v5.1,
    NVIDIA systems/tyche_hsg). A job spread thinner than half of each domain is a different
    machine; give it as a cluster file with its own domain size.

    >>> from planner.catalog.clusters import _fake_system
    >>> domain_split(_fake_system(72, 4), 128)
    (2, 64)
    >>> domain_split(_fake_system(72, 4), 2560)
    (40, 64)
    >>> domain_split(_fake_system(8, 8), 12) is None
    True
    """
    if n < system.unit_size:
        return (1, n) if system.unit_size % n == 0 else None
    fewest = -(-n // system.domain_size)
    num_domains = fewest
    while num_domains == fewest or 2 * n >= num_domains * system.domain_size:
        per_domain, rest = divmod(n, num_domains)
        if not rest and per_domain % system.unit_size == 0:
            return num_domains, per_domain
        num_domains += 1
    return None


def _nearest_valid(system: SystemSpec, n: int) -> list[int]:
    below = next((m for m in range(n - 1, 0, -1) if domain_split(system, m)), None)
    above = next((m for m in range(n + 1, 4 * n + 64) if domain_split(system, m)), None)
    return [m for m in (below, above) if m is not None]


def legal_slice_shapes(system: SystemSpec, chips: int) -> list[tuple[int, ...]]:
    """Torus shapes (sorted axes) of ``chips`` chips that the system's rules allow.

    3-D TPUs: each axis 1, 2 or a multiple of 4 (full cubes); 2-D TPUs: powers of two. Axes are
    at most ``torus.max_axis``. Source: Google Cloud TPU v4/v5p/v5e docs, slice topologies.
    """
    torus = system.torus
    if torus is None:
        return []
    if torus.num_dims == 3:
        axis_values = [a for a in range(1, torus.max_axis + 1) if a in (1, 2) or a % 4 == 0]
    else:
        axis_values = [
            2**i for i in range(0, torus.max_axis.bit_length()) if 2**i <= torus.max_axis
        ]
    shapes = {
        tuple(sorted(combo))
        for combo in itertools.product(axis_values, repeat=torus.num_dims)
        if _product(combo) == chips
    }
    return sorted(shapes)


def most_cubic(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape with the smallest largest-to-smallest axis ratio (ties: fewest long axes).

    >>> most_cubic([(1, 8, 8), (4, 4, 4), (2, 4, 8)])
    (4, 4, 4)
    """
    return min(shapes, key=lambda s: (max(s) / min(s), max(s), s))


def _product(values: tuple[int, ...]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _apply_edits(system: SystemSpec, edits: ClusterEdits) -> tuple[SystemSpec, FabricSpec]:
    fabric_update: dict[str, object] = {}
    if edits.nic_gbps is not None:
        fabric_update["nic_Gbps"] = edits.nic_gbps
    if edits.nics_per_gpu is not None:
        fabric_update["nics_per_accelerator"] = edits.nics_per_gpu
    if edits.oversubscription is not None:
        fabric_update["oversubscription"] = edits.oversubscription
    if edits.rail_optimized is not None:
        fabric_update["rail_optimized"] = edits.rail_optimized
    fabric = validate_spec(
        FabricSpec, {**system.scale_out.model_dump(), **fabric_update}, where="cluster edit"
    )
    if edits.domain_size is not None and system.torus is not None:
        raise SpecError(
            f"--domain-size {edits.domain_size}: {system.name} is a TPU torus whose scale-up "
            "domains are its slices; give the slice shape or chip count in --cluster instead"
        )
    if edits.domain_size is not None:
        data = {**system.model_dump(), "domain_size": edits.domain_size}
        if edits.domain_size % system.unit_size:
            data["unit_size"] = edits.domain_size if edits.domain_size < system.unit_size else 1
        system = validate_spec(SystemSpec, data, where="--domain-size")
    return system, fabric


def build_cluster(
    system_name: str | BaseHardware,
    n: int,
    *,
    name: str,
    edits: ClusterEdits | None = None,
    shape: tuple[int, ...] | None = None,
) -> ClusterSpec:
    """Resolve a system (a catalog name, or the unedited hardware a cluster file gives) and an
    accelerator count into a ClusterSpec with ``edits`` applied (or raise SpecError)."""
    edits = edits or ClusterEdits()
    if not 0 < n <= MAX_ACCELERATORS:
        raise SpecError(
            f"accelerator count {n if n < 10**12 else f'{n:.3g}'} in '{_shorten(name)}' must be "
            f"between 1 and {MAX_ACCELERATORS:,}"
        )
    base = system_name if isinstance(system_name, BaseHardware) else catalog_hardware(system_name)
    system, fabric = _apply_edits(base.system, edits)
    accelerator = edit_accelerator(base.accelerator, edits)
    price = edits.price_per_gpu_hour or system.price_per_gpu_hour_usd
    common = {
        "name": name,
        "system": system,
        "accelerator": accelerator,
        "fabric": fabric,
        "num_accelerators": n,
        "price_per_gpu_hour_usd": price,
        "edits": edits.as_dict(),
        "base": base,
    }
    if system.torus is not None:
        return _tpu_cluster(system, n, shape=shape, common=common)
    split = domain_split(system, n)
    if split is None:
        nearest = " and ".join(str(m) for m in _nearest_valid(system, n))
        raise SpecError(
            f"'{name}': {n} accelerators cannot be spread over whole {system.unit_size}-GPU units "
            f"of {system.name} (domains of {system.domain_size}); nearest valid: {nearest}"
        )
    num_domains, per_domain = split
    return ClusterSpec(num_domains=num_domains, accelerators_per_domain=per_domain, **common)


def _tpu_cluster(
    system: SystemSpec, n: int, *, shape: tuple[int, ...] | None, common: dict[str, object]
) -> ClusterSpec:
    torus = system.torus
    assert torus is not None
    if shape is not None:
        if tuple(sorted(shape)) not in legal_slice_shapes(system, _product(shape)):
            raise SpecError(
                f"slice shape {'x'.join(map(str, shape))} is not legal on {system.name}"
            )
        return ClusterSpec(num_domains=1, accelerators_per_domain=n, slice_shape=shape, **common)
    num_slices = -(-n // torus.max_slice_chips)
    per_slice, rest = divmod(n, num_slices)
    shapes = [] if rest else legal_slice_shapes(system, per_slice)
    if not shapes:
        raise SpecError(
            f"'{common['name']}': {n} chips do not form {num_slices} equal legal "
            f"{torus.num_dims}-D slice(s) of {system.name}"
        )
    return ClusterSpec(
        num_domains=num_slices,
        accelerators_per_domain=per_slice,
        slice_shape=most_cubic(shapes),
        **common,
    )


def _is_count(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts '²' and other digits ``int`` refuses.

    >>> _is_count("16"), _is_count("²"), _is_count("")
    (True, False, False)
    """
    return text.isascii() and text.isdigit()


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def accelerator_type_prefixes() -> dict[str, tuple[str, int]]:
    """Google Cloud accelerator-type prefixes (``v5p`` of ``v5p-256``) -> (catalog system, the
    devices N counts per chip), from the systems' ``torus.accelerator_types``."""
    out: dict[str, tuple[str, int]] = {}
    for name in system_names():
        torus = load_system(name).torus
        for prefix, per_chip in (torus.accelerator_types if torus else {}).items():
            if prefix in out:  # two system files claiming one name: say which, once
                raise SpecError(
                    f"accelerator type '{prefix}' is named by both {out[prefix][0]} and {name} "
                    "(topologies/systems/*.yaml torus.accelerator_types)"
                )
            out[prefix] = (name, per_chip)
    return out


def _accelerator_type(name: str) -> tuple[str, int] | None:
    """(system, chips) of a Google Cloud accelerator type (``v5p-256``: 128 TPU v5p chips;
    ``v6e-256``: 256 v6e chips), None when ``name`` is not one. Its slice shape is the most
    cubic legal one, which is Google's default topology for every type MaxText's and xpk's
    tables list within the catalog's largest slice (v5p-256 4x4x8, v5p-1920 4x12x20, v6e-256
    16x16; tests/test_clusters.py)."""
    match = _ACCELERATOR_TYPE_RE.match(name)
    if match is None:
        return None
    found = accelerator_type_prefixes().get(match.group("prefix"))
    if found is None:
        return None
    system, per_chip = found
    digits = match.group("count")
    if len(digits) > len(str(MAX_ACCELERATORS * per_chip)):  # int() of 4,300+ digits would fail
        raise SpecError(
            f"accelerator count in '{_shorten(name)}' ({len(digits):,} digits) must be between 1 "
            f"and {MAX_ACCELERATORS:,} chips"
        )
    count = int(digits)
    if count % per_chip:
        raise SpecError(
            f"cluster '{name}': {match.group('prefix')}-N counts TensorCores, {per_chip} per "
            f"chip, so N must be a multiple of {per_chip}"
        )
    return system, count // per_chip


def parse_cluster_name(name: str) -> tuple[str, int, tuple[int, ...] | None]:
    """Split ``hgx_b200x16`` into (system, N, None), ``tpu_v5p_8x8x16`` into (system, N, shape)
    and a Google Cloud accelerator type, ``v5p-256``, into (system, chips, None)."""
    systems = system_names()
    cloud = _accelerator_type(name)
    if cloud is not None:
        return cloud[0], cloud[1], None
    match = _SHAPE_RE.match(name)
    if match and match.group("system") in systems:
        shape = tuple(int(a) for a in match.group("shape").split("x"))
        system = match.group("system")
        if load_system(system).kind != "torus":  # a slice shape names a torus, not a GPU box
            count = _product(shape)
            spelling = f"{system}x{count}" if 0 < count <= MAX_ACCELERATORS else f"{system}x<N>"
            raise SpecError(
                f"cluster '{_shorten(name)}': a _AxB shape names a TPU torus slice, and "
                f"{system} is not a torus; write '{spelling}' (<system>x<N>)"
            )
        return system, _product(shape), shape
    for system in sorted(systems, key=len, reverse=True):
        rest = name[len(system) + 1 :]
        if name.startswith(system + "x") and _is_count(rest):
            if len(rest) > len(str(MAX_ACCELERATORS)):  # int() of 4,300+ digits would fail
                raise SpecError(
                    f"accelerator count in '{_shorten(name)}' ({len(rest):,} digits) must be "
                    f"between 1 and {MAX_ACCELERATORS:,}"
                )
            return system, int(rest), None
    if name in systems:
        size = load_system(name).domain_size  # one full scale-up domain
        raise SpecError(
            f"cluster '{name}' names a system but not its size: add x<N>, e.g. '{name}x{size}'"
        )
    count = name.rpartition("x")[2]
    candidates = [f"{s}x{count}" for s in systems] if _is_count(count) else list(systems)
    size = name.rpartition("-")[2]
    if _is_count(size):
        candidates += [f"{prefix}-{size}" for prefix in accelerator_type_prefixes()]
    hint = suggest(name, candidates)
    raise SpecError(
        f"unknown cluster '{_shorten(name)}'{hint} (form: <system>x<N>, e.g. hgx_b200x16, or a "
        f"TPU accelerator type, e.g. v5p-256; "
        f"'layout clusters' lists systems)"
    )


def _refuse_other_catalog_file(data: Mapping[str, object], path: Path) -> None:
    """A one-line SpecError when ``--cluster`` was given a system or accelerator file (the shape
    of ``topologies/systems/*.yaml`` or ``topologies/accelerators/*.yaml``) rather than a cluster
    file: the error says what a cluster file holds and names ``path`` as its system or
    accelerator, where the schema error would only list the cluster fields it lacks."""
    if "system" in data or "num_accelerators" in data:
        return
    kind = (
        "system" if "accelerators_per_node" in data or "scale_up" in data
        else "accelerator" if "peak_TFLOP_per_s" in data or "hbm_GB" in data
        else None
    )  # fmt: skip
    if kind is None:
        return
    name = _shorten(path.name)
    example = (
        f"system: {name}, num_accelerators: 64"
        if kind == "system"
        else f"system: hgx_h100, accelerator: {name}, num_accelerators: 64"
    )
    raise SpecError(
        f"'{name}' is {'a' if kind == 'system' else 'an'} {kind} file, not a cluster file: a "
        f"cluster file names its {kind} (a path relative to the cluster file) and a size, e.g. "
        f"{{name: my_cluster, {example}}}"
    )


def load_cluster(
    name_or_path: str | Path | ClusterSpec, edits: ClusterEdits | None = None
) -> ClusterSpec:
    """A cluster from a name (``hgx_b200x16``, ``tpu_v4x64``, ``tpu_v5p_8x8x16``) or a YAML file
    (which may name its own system and accelerator files, beside it: ``file_hardware``)."""
    if isinstance(name_or_path, ClusterSpec):
        return name_or_path
    text = str(name_or_path)
    if not text.strip():
        raise SpecError("the cluster name is empty (form: <system>x<N>, e.g. hgx_b200x16)")
    path = Path(text)
    if path.suffix.lower() in (".yaml", ".yml") or path_exists(path):
        data = load_mapping(path)
        _refuse_other_catalog_file(data, path)
        spec = validate_spec(ClusterFile, data, where=str(path))
        merged = spec.edits.model_copy(
            update={
                k: v for k, v in (edits or ClusterEdits()).model_dump().items() if v is not None
            }
        )
        hardware = file_hardware(spec, path=path)
        return build_cluster(hardware, spec.num_accelerators, name=spec.name, edits=merged)
    try:
        system, n, shape = parse_cluster_name(text)
    except SpecError as error:
        if text.lower() == text:
            raise
        try:  # catalog system names are lower case: 'HGX_H100x64' names hgx_h100x64
            system, n, shape = parse_cluster_name(text.lower())
        except SpecError:
            raise error from None
        text = text.lower()
    if n == 0:
        raise SpecError(f"cluster '{text}' has 0 accelerators; N must be at least 1")
    return build_cluster(system, n, name=text, edits=edits, shape=shape)


def _overlay_name(overlay: CalibrationRecord | str | Path) -> str:
    return "record" if isinstance(overlay, CalibrationRecord) else f"'{overlay}'"


def apply_cluster_calibration(
    cluster: ClusterSpec, overlay: CalibrationRecord | str | Path
) -> ClusterSpec:
    """``cluster`` with a calibration overlay (a record or its file, ``--calibration FILE``) laid
    over its accelerator's factors, and the overlay's fitted link efficiencies, if any, over the
    system's scale-up link and the scale-out fabric.

    The overlay must be for the accelerator's family. When the accelerator already carries its
    family's fit to published runs, that fit's end-to-end residuals ('all', 'dense', 'moe': the
    planner's error band) are kept beside the overlay's own kernel residuals.
    """
    if isinstance(overlay, CalibrationRecord):
        record = check_calibration(overlay, "calibration record")
    else:
        record = load_calibration_file(overlay)
    if record.dry_run:
        raise SpecError(
            f"calibration overlay {_overlay_name(overlay)} is a 'calibrate --measure --dry-run' "
            "(CPU, tiny shapes; its factors are not a GPU's): measure on the GPU to calibrate"
        )
    acc = cluster.accelerator
    if record.family != acc.family:
        raise SpecError(
            f"calibration overlay is for the {record.family} family (fitted on "
            f"{', '.join(record.fitted_on)}); cluster '{cluster.name}' has {acc.name} ({acc.family})"
        )
    if acc.calibration is not None and record.measurements is not None:
        residuals = {**record.residuals, **acc.calibration.residuals}
        record = validate_spec(
            CalibrationRecord,
            {**record.model_dump(), "residuals": residuals},
            where="calibration overlay",
        )
    links = record.efficiency.link_efficiency or {}
    system, fabric = cluster.system, cluster.fabric
    if "scale_up" in links:
        up = {**system.scale_up.model_dump(), "efficiency": links["scale_up"]}
        system = validate_spec(
            SystemSpec, {**system.model_dump(), "scale_up": up}, where="calibration overlay"
        )
    if "scale_out" in links:
        fabric = validate_spec(
            FabricSpec,
            {**fabric.model_dump(), "efficiency": links["scale_out"]},
            where="calibration overlay",
        )
    data = {
        **cluster.model_dump(),
        "accelerator": apply_calibration(acc, record),
        "system": system,
        "fabric": fabric,
    }
    if cluster.base is not None:  # what a what-if sweep rebuilds from: calibrated alike
        data["base"] = {
            **cluster.base.model_dump(),
            "accelerator": apply_calibration(cluster.base.accelerator, record),
            "system": _with_link_efficiency(cluster.base.system, links),
        }
    return validate_spec(ClusterSpec, data, where="calibration overlay")


def _with_link_efficiency(system: SystemSpec, links: dict[str, float]) -> SystemSpec:
    """``system`` with fitted efficiencies on its scale-up link and default scale-out fabric."""
    data = system.model_dump()
    for kind in ("scale_up", "scale_out"):
        if kind in links:
            data[kind] = {**data[kind], "efficiency": links[kind]}
    return validate_spec(SystemSpec, data, where="calibration overlay")


def _fake_system(domain_size: int, unit_size: int) -> SystemSpec:
    """A minimal system for doctests."""
    link = {"bandwidth_GB_per_s": 450, "latency_us": 3, "efficiency": 0.8}
    fabric = {
        "nic_Gbps": 400,
        "nics_per_accelerator": 1,
        "latency_us": 10,
        "efficiency": 0.9,
        "source": "doctest",
    }
    return SystemSpec(
        name="fake",
        accelerator="h100_sxm",
        kind="nvswitch",
        domain_size=domain_size,
        unit_size=unit_size,
        accelerators_per_node=unit_size,
        scale_up=link,
        scale_out=fabric,
        price_per_gpu_hour_usd=1.0,
        sources={
            k: "doctest" for k in ("domain_size", "scale_up", "scale_out", "price_per_gpu_hour_usd")
        },
    )
