"""Serving engine profiles (``topologies/engines/<name>.yaml``): the host time an engine adds to
each forward iteration (:class:`planner.specs.engine.ServingEngineSpec`)."""

from __future__ import annotations

from functools import lru_cache

from planner.catalog.store import _names, catalog_root, load_profile
from planner.catalog.vendors import default_profile, refusal
from planner.specs.engine import ServingEngineSpec
from planner.specs.workload import ServeWorkload

DEFAULT_ENGINE = "tensorrt-llm"
"""The profile used unless ``--serving-engine`` names another, on an accelerator no profile's
``default_on`` lists: the engine of most published serving runs in
tests/validation/serving.yaml."""


def engine_names() -> list[str]:
    """Catalog serving engine names."""
    return _names(catalog_root() / "topologies" / "engines")


@lru_cache(maxsize=16)
def load_engine(name: str) -> ServingEngineSpec:
    """Load ``topologies/engines/<name>.yaml``."""
    return load_profile("topologies/engines", "serving engine", name, ServingEngineSpec)


def _profiles() -> dict[str, ServingEngineSpec]:
    """Every catalog serving engine profile, by name."""
    return {name: load_engine(name) for name in engine_names()}


def default_engine(vendor: str | None = None) -> str:
    """The engine used when none is named: the one whose ``default_on`` lists the accelerator's
    ``vendor`` (vLLM on AMD GPUs and TPUs, where TensorRT-LLM does not run), else
    :data:`DEFAULT_ENGINE`.

    >>> default_engine("Google"), default_engine("AMD"), default_engine("NVIDIA"), default_engine()
    ('vllm', 'vllm', 'tensorrt-llm', 'tensorrt-llm')
    """
    return default_profile(_profiles(), vendor, DEFAULT_ENGINE)


def with_default_engine(workload: ServeWorkload, vendor: str) -> ServeWorkload:
    """``workload`` with the engine it names (in the catalog's lower-case spelling: 'vLLM' is
    vllm), else the default on ``vendor``'s accelerators."""
    if "engine" in workload.model_fields_set:
        named = load_engine(workload.engine).name
        return (
            workload if named == workload.engine else workload.model_copy(update={"engine": named})
        )
    name = default_engine(vendor)
    return workload if name == workload.engine else workload.model_copy(update={"engine": name})


def engine_vendor_rule(spec: ServingEngineSpec, vendor: str, part: str = "accelerators") -> str:
    """Why engine ``spec`` cannot run on ``vendor``'s ``part`` ('' if it can, or when no engine
    profile lists the vendor), naming the engines that do
    (:func:`planner.catalog.vendors.refusal`).

    >>> engine_vendor_rule(load_engine("tensorrt-llm"), "AMD", "mi300x")
    "runs on NVIDIA accelerators, not on AMD's mi300x; --serving-engine sglang or vllm runs there"
    """
    return refusal(spec, vendor, part, _profiles(), "--serving-engine")
