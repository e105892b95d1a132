"""Serving engine profiles (``topologies/engines/<name>.yaml``): the host time an engine adds to
each forward iteration (:class:`planner.specs.engine.ServingEngineSpec`)."""

from __future__ import annotations

from functools import lru_cache

from planner.catalog.io import load_mapping, validate_spec
from planner.catalog.store import _names, catalog_file, catalog_root, suggest
from planner.errors import SpecError
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
    path = catalog_file("topologies/engines", name)
    if path is None:
        raise SpecError(
            f"unknown serving engine '{name}'{suggest(name, engine_names())} "
            f"(known: {', '.join(engine_names())})"
        )
    spec = validate_spec(ServingEngineSpec, load_mapping(path), where=str(path))
    if spec.name != name:
        raise SpecError(f"{path}: name '{spec.name}' differs from the file name '{name}'")
    return spec
