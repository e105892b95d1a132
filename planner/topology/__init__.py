"""Topology: what each parallel group sees of the cluster (layer L2).

The hot path (:func:`comm_domains`, :func:`placement`) is numpy only: ``structure`` (where
ranks sit), ``flows`` (who sends to whom), ``contention`` / ``alltoall`` (busiest edge) and
``hierarchy`` (caching, placement). The networkx graph and its builders live in ``graph``, the
full-graph computation it is tested against in ``oracle``, cluster metrics in ``metrics``.
"""

from planner.topology.hierarchy import (
    comm_domains,
    dimension_strides,
    group_domain,
    placement,
    placement_entry,
    placement_shapes,
    rank_table,
)

__all__ = [
    "comm_domains",
    "dimension_strides",
    "group_domain",
    "placement",
    "placement_entry",
    "placement_shapes",
    "rank_table",
]
