"""Serving engine profiles (``topologies/engines/<name>.yaml``): the host time an engine adds to
each forward iteration (:class:`planner.specs.engine.ServingEngineSpec`)."""

from __future__ import annotations

from functools import lru_cache

from planner.catalog.store import _names, catalog_root, load_profile
from planner.specs.engine import ServingEngineSpec

DEFAULT_ENGINE = "tensorrt-llm"
"""The profile used unless ``--serving-engine`` names another: the engine of every published
serving run in tests/validation/serving.yaml."""


def engine_names() -> list[str]:
    """Catalog serving engine names."""
    return _names(catalog_root() / "topologies" / "engines")


@lru_cache(maxsize=16)
def load_engine(name: str) -> ServingEngineSpec:
    """Load ``topologies/engines/<name>.yaml``."""
    return load_profile("topologies/engines", "serving engine", name, ServingEngineSpec)
