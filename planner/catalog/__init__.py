"""Catalog: find and load YAML into specs; model aliases; cluster names; HF import (layer L2)."""

from planner.catalog.clusters import (
    apply_cluster_calibration,
    build_cluster,
    load_cluster,
    parse_cluster_name,
)
from planner.catalog.store import (
    accelerator_names,
    catalog_root,
    load_accelerator,
    load_calibration_file,
    load_model,
    load_system,
    model_aliases,
    model_names,
    system_names,
)

__all__ = [
    "accelerator_names",
    "apply_cluster_calibration",
    "build_cluster",
    "catalog_root",
    "load_accelerator",
    "load_calibration_file",
    "load_cluster",
    "load_model",
    "load_system",
    "model_aliases",
    "model_names",
    "parse_cluster_name",
    "system_names",
]
