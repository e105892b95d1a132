"""Topology: what each parallel group sees of the cluster (layer L2)."""

from planner.topology.hierarchy import comm_domains, dimension_strides, placement

__all__ = ["comm_domains", "dimension_strides", "placement"]
