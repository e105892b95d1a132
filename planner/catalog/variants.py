"""Hardware variants without editing the catalog (layer L2): the accelerator what-if edits
(``--hbm-gb``, ``--hbm-tbps``, ``--power-cap-w``) and the system or accelerator a cluster file
gives itself (a YAML path beside it, or a mapping inline).

Edits always start from the unedited hardware (:class:`~planner.specs.cluster.BaseHardware`),
so applying them again, as a what-if sweep does per scenario, gives the same cluster.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from planner.catalog.io import load_mapping, validate_spec
from planner.catalog.store import (
    apply_calibration,
    catalog_file,
    family_calibration,
    load_accelerator,
    load_system,
    load_topology_spec,
)
from planner.errors import SpecError, printable
from planner.specs.cluster import ACCELERATOR_EDITS, BaseHardware, ClusterEdits, ClusterFile
from planner.specs.hardware import AcceleratorSpec, SystemSpec
from planner.specs.power import PowerCapModel
from planner.units import GB, TB

FILE_SUFFIXES = (".yaml", ".yml", ".json")
"""A cluster file's ``system`` or ``accelerator`` text ending in one of these is a file path;
otherwise it is a catalog name."""
MAX_SHOWN_PATH_CHARS = 300
"""Longest path written into a cluster description."""


@lru_cache(maxsize=1)
def load_power_cap_model() -> PowerCapModel:
    """The power-capping model, ``topologies/power_cap.yaml``."""
    return load_topology_spec("power_cap.yaml", PowerCapModel)


def power_cap_clock_scale(cap_w: float, tdp_w: float, exponent: float) -> float:
    """Sustained-clock ratio under a power cap: s = min(1, (cap / TDP) ** exponent).

    Dynamic power P = a C V^2 f, and V ~ f near the top of the DVFS curve, so P ~ f^3 and a cap
    holds the clock at (cap / TDP)^(1/3) of its maximum at most (static power and the voltage
    floor only lower it further). The exponent and its sources are data:
    ``topologies/power_cap.yaml``. Never above 1: a cap at the TDP changes nothing.

    >>> power_cap_clock_scale(700.0, 700.0, 1 / 3)
    1.0
    >>> round(power_cap_clock_scale(350.0, 700.0, 1 / 3), 4)
    0.7937
    """
    return min(1.0, (cap_w / tdp_w) ** exponent)


def scaled_memory_mib(total_mib: int, *, rated_gb: float, new_gb: float) -> int:
    """Memory the driver exposes on a part resized from ``rated_gb`` to ``new_gb``: the same
    fraction of the HBM stacks. nvidia-smi ``memory.total`` reads 81,559 MiB on the 80 GB H100
    and 97,871 MiB on the 96 GB GH200 and H20 (public logs): 99.56% of 80 and 96 GiB both.

    >>> scaled_memory_mib(81559, rated_gb=80.0, new_gb=96.0)
    97871
    """
    return max(1, round(total_mib * new_gb / rated_gb))


def edit_accelerator(acc: AcceleratorSpec, edits: ClusterEdits) -> AcceleratorSpec:
    """``acc`` with the accelerator edits of ``edits`` (itself when none is set): HBM capacity
    (and the driver-exposed memory, by the same ratio) and bandwidth replaced; under a power cap
    the FLOP/s peaks scaled by :func:`power_cap_clock_scale` (HBM unchanged) and the TDP set to
    the cap. Each changed number's ``sources`` entry says so. SpecError when the cap is outside
    the model's range or the capacity leaves nothing after the runtime reserve."""
    if all(getattr(edits, k) is None for k in ACCELERATOR_EDITS):
        return acc
    data: dict[str, Any] = acc.model_dump()
    sources = dict(acc.sources)
    if edits.hbm_gb is not None:
        data["hbm_GB"] = edits.hbm_gb
        if acc.hbm_total_MiB is not None:
            total = scaled_memory_mib(acc.hbm_total_MiB, rated_gb=acc.hbm_GB, new_gb=edits.hbm_gb)
            data["hbm_total_MiB"] = total
        sources["hbm_GB"] = f"what-if edit hbm_gb {edits.hbm_gb:g} (rated {acc.hbm_GB:g} GB)"
    if edits.hbm_tbps is not None:
        data["hbm_bandwidth_GB_per_s"] = edits.hbm_tbps * TB / GB
        sources["hbm_bandwidth_GB_per_s"] = (
            f"what-if edit hbm_tbps {edits.hbm_tbps:g} "
            f"(rated {acc.hbm_bandwidth_GB_per_s / 1000:g} TB/s)"
        )
    if edits.power_cap_w is not None:
        capped = _power_capped(acc, edits.power_cap_w)
        sources.update(capped.pop("sources"))
        data.update(capped)
    edited = validate_spec(AcceleratorSpec, {**data, "sources": sources}, where="cluster edits")
    if edits.hbm_gb is not None and edited.usable_memory_bytes <= 0:
        raise SpecError(
            f"hbm_gb {edits.hbm_gb:g} leaves no memory for tensors on {acc.name} after its "
            f"{acc.efficiency.memory_reserve_GB:g} GB runtime reserve (--hbm-gb must exceed it)"
        )
    return edited


def _power_capped(acc: AcceleratorSpec, cap_w: float) -> dict[str, Any]:
    """The peaks, TDP and their sources of ``acc`` under a ``cap_w`` power limit."""
    model = load_power_cap_model()
    floor_w = model.min_fraction_of_tdp * acc.tdp_W
    if cap_w > acc.tdp_W:
        raise SpecError(
            f"power_cap_w {cap_w:g} W exceeds the {acc.tdp_W:g} W TDP of {acc.name}: a power "
            "cap (--power-cap-w) is at most the TDP"
        )
    if cap_w < floor_w:
        raise SpecError(
            f"power_cap_w {cap_w:g} W is below {model.min_fraction_of_tdp:.0%} of the "
            f"{acc.tdp_W:g} W TDP of {acc.name} ({floor_w:g} W), where the power-cap model "
            "(topologies/power_cap.yaml) no longer holds"
        )
    scale = power_cap_clock_scale(cap_w, acc.tdp_W, model.clock_exponent)
    return {
        "peak_TFLOP_per_s": {str(f): v * scale for f, v in acc.peak_TFLOP_per_s.items()},
        "tdp_W": cap_w,
        "sources": {
            "peak_TFLOP_per_s": (
                f"rated peaks x{scale:.4f} = ({cap_w:g} W / {acc.tdp_W:g} W)^"
                f"{model.clock_exponent:.4g}: what-if power cap (topologies/power_cap.yaml)"
            ),
            "tdp_W": f"what-if power cap {cap_w:g} W (rated TDP {acc.tdp_W:g} W)",
        },
    }


def catalog_hardware(system_name: str) -> BaseHardware:
    """A catalog system and its catalog accelerator (with its family's calibration)."""
    system = load_system(system_name)
    return BaseHardware(system=system, accelerator=load_accelerator(system.accelerator))


def file_hardware(spec: ClusterFile, *, path: Path) -> BaseHardware:
    """The system and accelerator a cluster file names: catalog names, or files whose relative
    paths are resolved against the cluster file's folder (not the working directory), or an
    accelerator mapping inline. A file accelerator gets its family's calibration overlay as a
    catalog one does; its origin (and a name it shares with a catalog accelerator) is kept for
    the cluster's description."""
    system, system_origin = _system(spec.system, cluster_path=path)
    accelerator, accelerator_origin = _accelerator(spec.accelerator, system, cluster_path=path)
    return BaseHardware(
        system=system,
        accelerator=accelerator,
        system_origin=system_origin,
        accelerator_origin=accelerator_origin,
    )


def named_files(cluster_path: Path) -> list[tuple[str, Path]]:
    """(key, path) of the system and accelerator files a cluster file names (resolved as
    :func:`file_hardware` resolves them); [] when it names none or cannot be read (its load
    reports that). The CLI keeps its outputs off these inputs too."""
    try:
        data = load_mapping(cluster_path)
    except SpecError:
        return []
    out = []
    for key in ("system", "accelerator"):
        text = data.get(key)
        if isinstance(text, str) and _is_file(text):
            out.append((key, _beside(cluster_path, text)))
    return out


def _is_file(text: str) -> bool:
    return Path(text).suffix.lower() in FILE_SUFFIXES


def _beside(cluster_path: Path, text: str) -> Path:
    target = Path(text)
    return target if target.is_absolute() else cluster_path.parent / target


def _shown(path: Path) -> str:
    text = printable(str(path))
    if len(text) > MAX_SHOWN_PATH_CHARS:
        text = "..." + text[-(MAX_SHOWN_PATH_CHARS - 3) :]
    return f"'{text}'"


def _read(cluster_path: Path, key: str, text: str) -> tuple[Path, dict[str, object]]:
    """The mapping in the file that ``key: text`` of the cluster file names."""
    target = _beside(cluster_path, text)
    try:
        return target, load_mapping(target)
    except SpecError as exc:
        raise SpecError(f"{cluster_path}: {key}: {exc}") from None


def _system(text: str, *, cluster_path: Path) -> tuple[SystemSpec, str]:
    if not _is_file(text):
        return load_system(text), ""
    target, data = _read(cluster_path, "system", text)
    system = validate_spec(SystemSpec, data, where=str(target))
    return system, _origin(f"from {_shown(target)}", "systems", system.name)


def _accelerator(
    value: str | dict[str, Any] | None, system: SystemSpec, *, cluster_path: Path
) -> tuple[AcceleratorSpec, str]:
    if value is None:
        if _is_file(system.accelerator):  # a system file names a catalog accelerator only
            raise SpecError(
                f"system '{system.name}': accelerator '{system.accelerator}' is a file; a "
                f"system names a catalog accelerator, and an accelerator file is named in the "
                f"cluster file (accelerator: {system.accelerator}, beside it)"
            )
        return load_accelerator(system.accelerator), ""
    if isinstance(value, str) and not _is_file(value):
        try:
            named = load_accelerator(value)
        except SpecError as exc:
            raise SpecError(f"{cluster_path}: accelerator: {exc}") from None
        return named, f"from the catalog, named in {_shown(cluster_path)}"
    if isinstance(value, str):
        target, data = _read(cluster_path, "accelerator", value)
        where, origin = str(target), f"from {_shown(target)}"
    else:
        data, where = value, f"{cluster_path}: accelerator"
        origin = f"inline in {_shown(cluster_path)}"
    spec = validate_spec(AcceleratorSpec, data, where=where)
    calibrated = apply_calibration(spec, family_calibration(spec))
    return calibrated, _origin(origin, "accelerators", spec.name)


def _origin(origin: str, folder: str, name: str) -> str:
    """``origin``, saying so when the file's name is also a catalog entry's (it does not
    replace the catalog's: only this cluster uses it)."""
    if catalog_file(f"topologies/{folder}", name) is not None:
        return f"{origin}, not the catalog's {name}"
    return origin


def slowed_accelerator(acc: AcceleratorSpec, speed: float) -> AcceleratorSpec:
    """``acc`` as a slow node runs it: every FLOP/s peak times ``speed`` (a cluster state's
    speed factor, in (0, 1]: throttled clocks), HBM and links unchanged; the peaks' ``sources``
    entry says so. ``acc`` itself when ``speed`` is 1.

    A synchronous step waits for its slowest rank, so the slowest node a job uses sets the
    compute of every rank (the placement passes that node's factor).
    """
    if not 0 < speed <= 1:
        raise SpecError(f"speed factor {speed!r} must be in (0, 1]")
    if speed == 1:
        return acc
    data: dict[str, Any] = acc.model_dump()
    data["peak_TFLOP_per_s"] = {str(f): v * speed for f, v in acc.peak_TFLOP_per_s.items()}
    sources = dict(acc.sources)
    sources["peak_TFLOP_per_s"] = (
        f"rated peaks x{speed:g}: the slowest node of the placement (--cluster-state)"
    )
    return validate_spec(AcceleratorSpec, {**data, "sources": sources}, where="cluster state")
