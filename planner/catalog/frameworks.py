"""Framework profiles (``topologies/frameworks/<name>.yaml``) and the workload they resolve.

A profile's ``workload`` block holds the TrainWorkload fields its framework runs differently
from the defaults; :func:`resolve_workload` lays them under what the user set, so the cost model
reads plain workload fields and never a framework's name (DESIGN.md section 7b).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from planner.catalog.io import load_mapping, validate_spec
from planner.catalog.store import _names, catalog_file, catalog_root, catalog_spelling, load_profile
from planner.catalog.vendors import default_profile, refusal
from planner.errors import SpecError
from planner.specs.framework import FrameworkSpec
from planner.specs.workload import TrainWorkload

DEFAULT_FRAMEWORK = "megatron"
"""The profile used unless ``--framework`` names another (DESIGN.md section 7b)."""


def framework_names() -> list[str]:
    """Catalog framework profile names."""
    return _names(catalog_root() / "topologies" / "frameworks")


@lru_cache(maxsize=1)
def framework_aliases() -> dict[str, str]:
    """Other names of the profiles (``nemo``, ``megatron-bridge``) -> profile names, from
    ``topologies/frameworks/_aliases.yaml``; each target must be a profile."""
    path = catalog_root() / "topologies" / "frameworks" / "_aliases.yaml"
    aliases = {str(k).lower(): str(v) for k, v in load_mapping(path).items()}
    known = framework_names()
    for alias, target in aliases.items():
        if target not in known:
            raise SpecError(f"{path}: alias {alias!r} names no profile {target!r}")
    return aliases


def framework_profile_name(name: str) -> str:
    """The profile ``name`` stands for: itself, or the profile it is another name of; names
    match whatever their case, as the catalog's are lower case.

    >>> framework_profile_name("NeMo"), framework_profile_name("torchtitan")
    ('megatron', 'torchtitan')
    >>> framework_profile_name("Megatron"), framework_profile_name("MaxText")
    ('megatron', 'maxtext')
    """
    name = catalog_spelling(name, framework_names())
    return framework_aliases().get(name.lower(), name)


FRAMEWORK_DIR = "topologies/frameworks"
"""Where the framework profiles live, under the catalog root."""

MERGED_BLOCKS = ("workload", "sources")
"""Blocks of a profile that ``extends`` another which merge key by key (the profile's own keys
win); every other field the profile states replaces the base's."""


def framework_mapping(name: str, chain: tuple[str, ...] = ()) -> dict[str, object]:
    """The fields of profile ``name`` as its YAML states them, laid over those of the profile it
    ``extends`` (if any, itself resolved the same way): a profile that differs from another in a
    few settings names it and states only those (``fsdp2.yaml`` extends ``fsdp``). Raises
    SpecError for an unknown base, a base that is not a name, or a loop.

    >>> framework_mapping("fsdp2")["workload"]["attention_kernel"]  # fsdp's, not restated
    'flash2'
    """
    path = catalog_file(FRAMEWORK_DIR, name)
    if path is None:  # the unknown-profile message, with suggestions
        load_profile(FRAMEWORK_DIR, "framework", name, FrameworkSpec)
        raise AssertionError("unreachable: load_profile raises for an unknown profile")
    own = dict(load_mapping(path))
    base = own.pop("extends", None)
    if base is None:
        return own
    if not isinstance(base, str) or not base:
        raise SpecError(f"{path}: extends: expected the name of a framework profile, got {base!r}")
    if base == name or base in chain:
        loop = " -> ".join((*chain, name, base))
        raise SpecError(f"{path}: extends '{base}' loops back ({loop})")
    if catalog_file(FRAMEWORK_DIR, base) is None:
        raise SpecError(f"{path}: extends '{base}', which is no framework profile")
    inherited = framework_mapping(base, (*chain, name))
    merged = {**inherited, **{k: v for k, v in own.items() if k not in MERGED_BLOCKS}}
    for block in MERGED_BLOCKS:
        mine = own.get(block, {})
        if not isinstance(mine, dict):
            raise SpecError(f"{path}: {block}: expected a mapping, got {type(mine).__name__}")
        merged[block] = {**inherited.get(block, {}), **mine}  # type: ignore[dict-item]
    return merged


@lru_cache(maxsize=16)
def load_framework(name: str) -> FrameworkSpec:
    """Load ``topologies/frameworks/<name>.yaml`` (over the profile it ``extends``,
    :func:`framework_mapping`); its workload defaults must be valid TrainWorkload fields."""
    path = catalog_file(FRAMEWORK_DIR, name)
    if path is None or "extends" not in load_mapping(path):
        spec = load_profile(FRAMEWORK_DIR, "framework", name, FrameworkSpec)
    else:
        spec = validate_spec(FrameworkSpec, framework_mapping(name), where=str(path))
        if spec.name != name:
            raise SpecError(f"{path}: name '{spec.name}' differs from the file name '{name}'")
    where = f"{FRAMEWORK_DIR}/{name}.yaml: workload"
    validate_spec(TrainWorkload, dict(spec.workload), where=where)
    return spec


def _profiles() -> dict[str, FrameworkSpec]:
    """Every catalog framework profile, by name."""
    return {name: load_framework(name) for name in framework_names()}


def default_framework(vendor: str | None = None) -> str:
    """The profile used when no framework is named: the one whose ``default_on`` lists the
    accelerator's ``vendor`` (MaxText on Google's TPUs), else :data:`DEFAULT_FRAMEWORK`.

    >>> default_framework("Google"), default_framework("NVIDIA"), default_framework()
    ('maxtext', 'megatron', 'megatron')
    """
    return default_profile(_profiles(), vendor, DEFAULT_FRAMEWORK)


def default_zero(profile: FrameworkSpec, pp: int = 1) -> int:
    """The ZeRO stage a layout that states none takes under ``profile``: ZeRO-1 where the
    framework has it (Megatron-LM's distributed optimizer, DeepSpeed's stage 1), else its
    deepest (FSDP's FULL_SHARD in torchtitan, MaxText and PyTorch FSDP), within what it allows
    with pipeline parallelism (``pp`` > 1).

    >>> default_zero(load_framework("megatron")), default_zero(load_framework("torchtitan"))
    (1, 3)
    >>> default_zero(load_framework("fsdp")), default_zero(load_framework("deepspeed"), pp=4)
    (3, 1)
    """
    stages = [z for z in profile.zero_stages if pp == 1 or z <= profile.max_zero_with_pp] or list(
        profile.zero_stages
    )
    return 1 if 1 in stages else max(stages)


def default_etp(profile: FrameworkSpec, tp: int, ep: int) -> int:
    """The expert tensor-parallel size an MoE layout of ``tp`` and ``ep`` that states none takes
    under ``profile`` (FrameworkSpec.expert_tensor_parallel_default), before the layout's rules
    are checked (:func:`planner.api.estimate` scores ETP 1 where this one breaks them).

    >>> megatron, torchtitan = load_framework("megatron"), load_framework("torchtitan")
    >>> default_etp(megatron, tp=2, ep=8), default_etp(megatron, tp=1, ep=8)
    (2, 1)
    >>> default_etp(torchtitan, tp=4, ep=1), default_etp(torchtitan, tp=4, ep=8)
    (4, 1)
    >>> default_etp(load_framework("deepspeed"), tp=4, ep=1), default_etp(load_framework("maxtext"), 4, 8)
    (1, 4)
    """
    rule = profile.expert_tensor_parallel_default
    if rule in ("tp", "tp_only") or (rule == "tp_without_ep" and ep == 1):
        return tp
    return 1


def vendor_rule(profile: FrameworkSpec, vendor: str, part: str = "accelerators") -> str:
    """Why ``profile`` cannot run on ``vendor``'s ``part`` ('' if it can, or when no profile
    lists the vendor), naming the profiles that do (:func:`planner.catalog.vendors.refusal`).

    >>> vendor_rule(load_framework("torchtitan"), "Google", "tpu_v5p")
    "runs on NVIDIA and AMD accelerators, not on Google's tpu_v5p; --framework maxtext runs there"
    >>> megatron = load_framework("megatron")
    >>> vendor_rule(megatron, "AMD"), vendor_rule(megatron, "Acme")
    ('', '')
    """
    return refusal(profile, vendor, part, _profiles(), "--framework")


def resolve_workload(
    workload: TrainWorkload | Mapping[str, object] | None, vendor: str | None = None
) -> TrainWorkload:
    """The workload with its framework profile's defaults under the fields the user set.

    A TrainWorkload's explicitly set fields (``model_fields_set``) win, so resolving twice
    gives the same workload; a field the user did not set takes the profile's value, else the
    TrainWorkload default. Without a framework named, the profile is the default on the
    accelerator's ``vendor`` (:func:`default_framework`), and the resolved workload names it.

    >>> resolve_workload({"framework": "torchtitan"}).tp_comm_overlap
    False
    >>> resolve_workload({"framework": "torchtitan", "tp_comm_overlap": True}).tp_comm_overlap
    True
    >>> resolve_workload({}, vendor="Google").framework
    'maxtext'
    """
    if isinstance(workload, TrainWorkload):
        given = {k: getattr(workload, k) for k in workload.model_fields_set}
    else:
        given = dict(workload or {})
    name = given["framework"] if "framework" in given else default_framework(vendor)
    if not isinstance(name, str):
        raise SpecError(f"workload framework {name!r}: expected a profile name")
    name = framework_profile_name(name)
    profile = load_framework(name)
    fields = {**profile.workload, **given, "framework": name}
    if (
        isinstance(workload, TrainWorkload)
        and fields.keys() == workload.model_fields_set
        and workload.framework == name
    ):
        return workload
    return validate_spec(TrainWorkload, fields, where="workload")
