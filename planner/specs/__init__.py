"""Pydantic specs: the typed, frozen, documented vocabulary of the planner (layer L1)."""

from planner.specs.cluster import ClusterSpec
from planner.specs.comm import CommDomain
from planner.specs.formats import NumberFormat
from planner.specs.hardware import AcceleratorSpec, FabricSpec, LinkSpec, SystemSpec, TorusSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec, MoESpec
from planner.specs.result import Plan, Rejection, SearchResult
from planner.specs.workload import ServeWorkload, TrainWorkload

__all__ = [
    "AcceleratorSpec",
    "ClusterSpec",
    "CommDomain",
    "FabricSpec",
    "Layout",
    "LinkSpec",
    "MoESpec",
    "ModelSpec",
    "NumberFormat",
    "Plan",
    "Recompute",
    "Rejection",
    "SearchResult",
    "ServeWorkload",
    "SystemSpec",
    "TorusSpec",
    "TrainWorkload",
]
