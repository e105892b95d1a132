"""Find and load catalog YAML: models, accelerators, systems (layer L2).

The catalogs live in the repository's ``models/`` and ``topologies/`` folders; a built wheel
carries them as ``planner/_catalog/{models,topologies}``. Both layouts are searched.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from pathlib import Path

from planner.catalog.io import (
    SpecT,
    load_mapping,
    path_exists,
    path_is_dir,
    short_repr,
    validate_spec,
)
from planner.catalog.transfer import transferred_record
from planner.errors import SpecError
from planner.specs.hardware import (
    AcceleratorEfficiency,
    AcceleratorSpec,
    CalibrationRecord,
    SystemSpec,
)
from planner.specs.model import ModelSpec
from planner.specs.text import HUB_ID
from planner.specs.trust import TrustSpec

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=1)
def catalog_root() -> Path:
    """Folder holding ``models/`` and ``topologies/`` (wheel layout first, then the repo)."""
    for root in (_PACKAGE_DIR / "_catalog", _PACKAGE_DIR.parent):
        if (root / "models").is_dir() and (root / "topologies").is_dir():
            return root
    raise SpecError("the model and topology catalogs are missing from this installation")


def _names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml") if not p.stem.startswith("_"))


def model_names() -> list[str]:
    """Catalog model names."""
    return _names(catalog_root() / "models")


def system_names() -> list[str]:
    """Catalog system names (the ``<system>`` of cluster names)."""
    return _names(catalog_root() / "topologies" / "systems")


def accelerator_names() -> list[str]:
    """Catalog accelerator names."""
    return _names(catalog_root() / "topologies" / "accelerators")


@lru_cache(maxsize=1)
def model_aliases(*, as_written: bool = False) -> dict[str, str]:
    """Short names (``70B``) -> catalog model names, from ``models/_aliases.yaml``: lowercased
    for lookup (names match case-insensitively), or ``as_written`` in the file (``8x7B``), for
    listings."""
    path = catalog_root() / "models" / "_aliases.yaml"
    data = load_mapping(path)
    return {(str(k) if as_written else str(k).lower()): str(v) for k, v in data.items()}


def catalog_spelling(name: str, names: list[str]) -> str:
    """``name`` as the catalog spells it: catalog names are lower case, so a name in another
    case that is one of ``names`` lowered stands for it ('Llama3.1-70B' for llama3.1-70b, on
    any file system); any other name is returned as given, to be refused as written.

    >>> catalog_spelling("Megatron", ["megatron"]), catalog_spelling("Megatrn", ["megatron"])
    ('megatron', 'Megatrn')
    """
    lowered = name.lower()
    return lowered if lowered != name and lowered in names else name


def suggest(name: str, choices: list[str], *, preferred: frozenset[str] = frozenset()) -> str:
    """'; did you mean 'x'?' for the closest choice, or '' when nothing is close.

    Whole-string similarity first; then, for reordered names (``70b-llama``), the choice that
    contains every alphanumeric token of the name (``preferred`` choices first, then the closest).

    >>> suggest("70b-llama", ["llama3.1-70b", "llama3.1-8b"])
    "; did you mean 'llama3.1-70b'?"
    """
    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    if close:
        return f"; did you mean '{lowered[close[0]]}'?"
    tokens = [t for t in re.split(r"[^a-z0-9.]+", name.lower()) if t]
    containing = [c for c in lowered if tokens and all(t in c for t in tokens)]
    if containing:
        best = max(
            containing,
            key=lambda c: (
                lowered[c] in preferred,
                difflib.SequenceMatcher(None, name.lower(), c).ratio(),
                c,
            ),
        )
        return f"; did you mean '{lowered[best]}'?"
    return ""


_CATALOG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
"""What a catalog entry's name may be: its file name without ``.yaml``, so no path separator,
no leading dot, no control character, at most 128 characters."""


def catalog_file(folder: str, name: str) -> Path | None:
    """``<catalog>/<folder>/<name>.yaml`` when ``name`` is a catalog name and the file exists,
    else None (a name such as ``../x`` or one too long for the file system is simply unknown).

    >>> catalog_file("models", "llama3.1-8b").name, catalog_file("models", "../README")
    ('llama3.1-8b.yaml', None)
    """
    if not _CATALOG_NAME.fullmatch(name):
        return None
    path = catalog_root() / folder / f"{name}.yaml"
    try:
        return path if path.is_file() else None
    except OSError:
        return None


@lru_cache(maxsize=64)
def load_accelerator(name: str) -> AcceleratorSpec:
    """Load ``topologies/accelerators/<name>.yaml`` with its family's calibration
    (:func:`family_calibration`)."""
    spec = load_accelerator_prior(name)
    return apply_calibration(spec, family_calibration(spec))


def family_calibration(spec: AcceleratorSpec) -> CalibrationRecord | None:
    """The calibration overlay of ``spec``'s family or, for a family no published run
    calibrates, its catalog priors times the fitted families' mean fitted/prior ratio
    (:mod:`planner.catalog.transfer`); None when no family is fitted."""
    record = load_calibration(spec.family)
    if record is not None:
        return record
    return transferred_record(spec.family, spec.efficiency, transfer_sources(spec.family))


@lru_cache(maxsize=64)
def transfer_sources(
    family: str,
) -> tuple[tuple[str, AcceleratorEfficiency, CalibrationRecord], ...]:
    """(family, the prior its fit started from, its overlay) of every fitted family other than
    ``family``. The prior is that of the first accelerator the fit names (``fitted_on`` is
    sorted); for every fit today that is also the part of its first row, whose priors the fit
    starts from and is pulled toward (:func:`planner.accuracy.calibrate.calibrate_family`):
    a100_80gb, h100_sxm, b200."""
    return tuple(
        (r.family, load_accelerator_prior(r.fitted_on[0]).efficiency, r)
        for r in fitted_calibrations()
        if r.family != family and r.fitted_on and r.measurements is None
    )


def load_profile(folder: str, kind: str, name: str, spec: type[SpecT]) -> SpecT:
    """Load the profile ``<catalog>/<folder>/<name>.yaml`` as ``spec`` (a FrozenSpec with a
    ``name`` field that must equal the file name); an unknown name is one SpecError naming
    the ``kind`` and the profiles there are."""
    name = catalog_spelling(name, _names(catalog_root() / folder))
    path = catalog_file(folder, name)
    if path is None:
        known = _names(catalog_root() / folder)
        raise SpecError(
            f"unknown {kind} '{name}'{suggest(name, known)} (known: {', '.join(known)})"
        )
    loaded = validate_spec(spec, load_mapping(path), where=str(path))
    if getattr(loaded, "name", name) != name:
        raise SpecError(f"{path}: name '{loaded.name}' differs from the file name '{name}'")
    return loaded


def load_accelerator_prior(name: str) -> AcceleratorSpec:
    """Load ``topologies/accelerators/<name>.yaml`` as catalogued (no calibration overlay)."""
    path = catalog_file("topologies/accelerators", name)
    if path is None:
        raise SpecError(f"unknown accelerator '{name}'{suggest(name, accelerator_names())}")
    return validate_spec(AcceleratorSpec, load_mapping(path), where=str(path))


def load_calibration(family: str) -> CalibrationRecord | None:
    """The calibration overlay of an accelerator family, if one has been fitted."""
    path = catalog_file("topologies/calibration", family)
    if path is None:
        return None
    return _calibration(path)


def load_calibration_file(path: str | Path) -> CalibrationRecord:
    """A calibration overlay from a file the user names (``--calibration my-h100.yaml``), e.g. a
    measured overlay written by ``layout calibrate --measure`` (docs/calibration.md)."""
    return _calibration(Path(path))


MAX_PLAUSIBLE_ERROR = 10.0
"""Largest prediction error (a fraction: 10 = 1,000%) a calibration overlay may record in its
residuals and held-out bands; the largest in the fitted overlays is 1.74 (serving row V10)."""
MAX_PLAUSIBLE_ROWS = 1_000_000
"""Most validation rows a residual or band may count."""


def _calibration(path: Path) -> CalibrationRecord:
    record = validate_spec(CalibrationRecord, load_mapping(path), where=str(path))
    return check_calibration(record, str(path))


def check_calibration(record: CalibrationRecord, where: str) -> CalibrationRecord:
    """``record`` when its residuals and held-out bands are plausible statistics; SpecError
    naming the first that is not (``where``: the file, or 'record' for one built in Python)."""
    for name, summary in record.residuals.items():
        _plausible_errors(f"{where}: residuals.{name}", summary)
    for name, band in (record.heldout.bands if record.heldout else {}).items():
        label = f"{where}: heldout.bands.{name}"
        _plausible_errors(label, band)
        for row, error in band.errors.items():
            _plausible_error(f"{label}.errors.{row}", error, signed=True)
    return record


def _plausible_errors(where: str, summary: object) -> None:
    """The statistics of a residual or band summary lie in their plausible ranges (a 1e300
    median error would be printed as a 300-digit ± band)."""
    count = getattr(summary, "count", 0)
    if not 0 <= count <= MAX_PLAUSIBLE_ROWS:
        raise SpecError(
            f"{where}.count: {short_repr(count)} is not a plausible number of rows "
            f"(0 to {MAX_PLAUSIBLE_ROWS:,})"
        )
    for key in ("median_abs", "max_abs", "band_abs"):
        if hasattr(summary, key):
            _plausible_error(f"{where}.{key}", getattr(summary, key), signed=False)
    _plausible_error(f"{where}.bias", summary.bias, signed=True)  # type: ignore[attr-defined]


def _plausible_error(where: str, value: float, *, signed: bool) -> None:
    low = -MAX_PLAUSIBLE_ERROR if signed else 0.0
    if not low <= value <= MAX_PLAUSIBLE_ERROR:
        raise SpecError(
            f"{where}: {short_repr(value)} is not a plausible prediction error (a fraction from "
            f"{low:g} to {MAX_PLAUSIBLE_ERROR:g}, i.e. up to {100 * MAX_PLAUSIBLE_ERROR:,.0f}%)"
        )


@lru_cache(maxsize=1)
def fitted_calibrations() -> tuple[CalibrationRecord, ...]:
    """Every family's calibration overlay in ``topologies/calibration/`` (the pooled band of a
    family without runs draws on all of them)."""
    folder = catalog_root() / "topologies" / "calibration"
    return tuple(r for name in _names(folder) if (r := load_calibration(name)) is not None)


def load_topology_spec(file_name: str, spec_type: type[SpecT]) -> SpecT:
    """A one-file catalog entry, ``topologies/<file_name>``, validated as ``spec_type``."""
    path = catalog_root() / "topologies" / file_name
    return validate_spec(spec_type, load_mapping(path), where=str(path))


@lru_cache(maxsize=1)
def load_trust() -> TrustSpec:
    """``topologies/trust.yaml``: the band level and the widening factors (DESIGN.md 9)."""
    return load_topology_spec("trust.yaml", TrustSpec)


def apply_calibration(spec: AcceleratorSpec, record: CalibrationRecord | None) -> AcceleratorSpec:
    """``spec`` with the fitted efficiency factors of ``record`` laid over its priors."""
    if record is None:
        return spec
    fit = record.efficiency
    eff = spec.efficiency.model_dump()
    if fit.gemm is not None:
        eff["gemm"] = {**eff["gemm"], **fit.gemm}
    for key in (
        "attention",
        "hbm",
        "kernel_overhead_us",
        "expert_gemm",
        "overlap_contention",
        "moe_sync_overhead_us",
        "step_overhead_ms",
    ):
        value = getattr(fit, key)
        if value is not None:
            eff[key] = value
    data = {**spec.model_dump(), "efficiency": eff, "calibration": record.model_dump()}
    return validate_spec(AcceleratorSpec, data, where=f"calibration of {spec.family}")


@lru_cache(maxsize=64)
def load_system(name: str) -> SystemSpec:
    """Load ``topologies/systems/<name>.yaml``."""
    path = catalog_file("topologies/systems", name)
    if path is None:
        raise SpecError(f"unknown system '{name}'{suggest(name, system_names())}")
    return validate_spec(SystemSpec, load_mapping(path), where=str(path))


def load_model(name_or_path: str | Path | ModelSpec) -> ModelSpec:
    """A model from a catalog name, an alias (``70B``), a YAML file or a HF ``config.json``."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    text = str(name_or_path)
    if not text.strip():
        raise SpecError("the model name is empty ('layout models' lists them)")
    path = Path(text)
    if path_is_dir(path) and path_exists(path / "config.json"):
        path = path / "config.json"  # a checkpoint folder, as transformers' from_pretrained
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path_exists(path):
        data = load_mapping(path)
        if path.suffix.lower() == ".json" or "model_type" in data:
            from planner.catalog.hf import model_from_hf_config

            return model_from_hf_config(data, name=hf_config_name(data, path))
        return validate_spec(ModelSpec, data, where=str(path))
    name = model_aliases().get(text.lower(), text)
    if "/" in name or "\\" in name:  # no catalog name holds one
        if not looks_like_hub_id(name):
            raise SpecError(f"model file or folder {short_repr(text)} does not exist")
        return _load_catalog_model(hub_id_model(name))
    return _load_catalog_model(catalog_spelling(name, model_names()))


HUB_URL = re.compile(r"(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/", re.IGNORECASE)
"""The address prefix of a hub id written as a URL (``https://huggingface.co/<owner>/<name>``)."""


def model_hub_ids() -> dict[str, str]:
    """Hugging Face hub ids (lower case) -> catalog model names, from each catalog model's
    ``hub_id``."""
    found: dict[str, str] = {}
    for name in model_names():
        hub_id = _load_catalog_model(name).hub_id
        if hub_id is not None:
            found[hub_id.lower()] = name
    return found


def looks_like_hub_id(text: str) -> bool:
    """Whether ``text`` reads as a Hugging Face hub id (``owner/name``, or its hub URL) rather
    than a path: one ``/`` between two names, no leading ``.``, ``/`` or ``~``.

    >>> looks_like_hub_id("meta-llama/Llama-3.1-8B"), looks_like_hub_id("./ckpt/llama")
    (True, False)
    """
    stripped = HUB_URL.sub("", text.strip(), count=1).strip("/")
    return HUB_ID.fullmatch(stripped) is not None and (
        HUB_URL.match(text.strip()) is not None or not text.startswith((".", "/", "~"))
    )


def hub_id_model(text: str) -> str:
    """The catalog model whose ``hub_id`` is ``text`` (``meta-llama/Llama-3.1-8B``, case
    ignored, a ``https://huggingface.co/`` prefix or trailing ``/`` allowed); SpecError naming
    the other ways in when none is.

    >>> hub_id_model("meta-llama/Llama-3.1-8B"), hub_id_model("https://huggingface.co/Qwen/Qwen3-30B-A3B/")
    ('llama3.1-8b', 'qwen3-30b-a3b')
    """
    hub_id = HUB_URL.sub("", text.strip(), count=1).strip("/")
    ids = model_hub_ids()
    name = ids.get(hub_id.lower())
    if name is not None:
        return name
    hint = suggest(hub_id, sorted(str(_load_catalog_model(n).hub_id) for n in ids.values()))
    raise SpecError(
        f"unknown model {short_repr(text)}: no catalog model has that Hugging Face hub id{hint} "
        "(pass the checkpoint's config.json, or the folder that holds it)"
    )


def hf_config_name(data: dict[str, object], path: Path) -> str:
    """The name of a model read from a Hugging Face config: its ``_name_or_path`` (the hub id
    or folder it was saved from), else the file's stem, or for a file named ``config.json``
    (a checkpoint folder) the folder's name.

    >>> hf_config_name({"_name_or_path": "meta-llama/Llama-3.1-405B"}, Path("x/config.json"))
    'meta-llama/Llama-3.1-405B'
    >>> hf_config_name({}, Path("models/llama-3.1-405b.json"))
    'llama-3.1-405b'
    >>> hf_config_name({}, Path("ckpt/Llama-3.1-8B/config.json"))
    'Llama-3.1-8B'
    """
    given = data.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        return given.strip()
    if path.name.lower() == "config.json":
        # a bare config.json (run inside the checkpoint folder) names the folder it is in
        folder = path.parent.name or path.absolute().parent.name
        if folder:
            return folder
    return path.stem


@lru_cache(maxsize=64)
def _load_catalog_model(name: str) -> ModelSpec:
    path = catalog_file("models", name)
    if path is None:
        choices = model_names() + sorted(model_aliases())
        hint = suggest(name, choices, preferred=frozenset(model_aliases().values()))
        raise SpecError(f"unknown model '{name}'{hint}")
    return validate_spec(ModelSpec, load_mapping(path), where=str(path))
