"""A cluster state applied to the cluster's wiring: which accelerators are free and how fast
each node runs, per node and per scale-up domain, as plain arrays (the placement's input), and
the same marked on the networkx graph.

Positions are the cluster's accelerator indices in rank order (``acc<p>`` of the graph): node
``p // per_node``, scale-up domain ``p // per_domain``, scalable unit ``node // unit_nodes``
(:class:`~planner.topology.structure.Fabric`). A node or domain a state names must exist.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from planner.errors import SpecError
from planner.specs.cluster import ClusterSpec
from planner.specs.cluster_state import ClusterState, Unavailable, expand, gpu_index, node_index
from planner.topology.graph import KIND, RANK, fabric_graph
from planner.topology.structure import Fabric, fabric_of

FREE = "free"
"""Accelerator attribute of a state-marked graph: True when neither down nor taken."""
SPEED = "speed"
"""Accelerator attribute of a state-marked graph: its node's speed factor (1 = healthy)."""
STATE_GRAPH_MAX_ACCELERATORS = 32_768
"""Largest cluster whose state-marked graph is built (the placement itself uses arrays)."""


@dataclass(frozen=True)
class Availability:
    """What a cluster state leaves of one cluster, per accelerator and per node."""

    fabric: Fabric
    """The cluster's wiring (positions, nodes, domains, scalable units)."""
    down: np.ndarray
    """Per position: down (bool)."""
    taken: np.ndarray
    """Per position: held by another job (bool)."""
    node_speed: np.ndarray
    """Per node: speed factor (1.0 = healthy)."""

    @property
    def free(self) -> np.ndarray:
        """Per position: neither down nor taken."""
        return ~(self.down | self.taken)

    @property
    def free_per_node(self) -> np.ndarray:
        """Free accelerators of each node."""
        return self.free.reshape(-1, self.fabric.per_node).sum(axis=1)

    @property
    def node_domain(self) -> np.ndarray:
        """Scale-up domain of each node."""
        nodes = np.arange(self.fabric.num_nodes)
        return nodes * self.fabric.per_node // self.fabric.per_domain

    @property
    def node_unit(self) -> np.ndarray:
        """Scalable unit (leaf group of the scale-out fabric) of each node."""
        return np.arange(self.fabric.num_nodes) // self.fabric.unit_nodes

    def speed_of(self, positions: np.ndarray) -> float:
        """Speed of the slowest node among ``positions`` (1.0 for none)."""
        if len(positions) == 0:
            return 1.0
        return float(self.node_speed[np.unique(positions // self.fabric.per_node)].min())

    def slow_nodes_among(self, positions: np.ndarray) -> list[str]:
        """Names of the slow nodes among ``positions``, in node order."""
        nodes = np.unique(positions // self.fabric.per_node)
        return [f"node{k}" for k in nodes if self.node_speed[k] < 1.0]

    def usable_gpus(self, min_speed: float = 0.0, unit: int = 1) -> int:
        """Free accelerators on nodes at least ``min_speed`` fast, counted per scale-up domain
        in whole ``unit``s of fully free nodes' worth (a partly free unit is not counted)."""
        fab = self.fabric
        per_node = fab.per_node
        ok = (self.free_per_node == per_node) & (self.node_speed >= min_speed)
        gpus_per_domain = np.bincount(self.node_domain, weights=ok * per_node)
        return int(sum(int(g) // unit * unit for g in gpus_per_domain))


def _checked(indices: list[int], limit: int, what: str, cluster: ClusterSpec) -> list[int]:
    for index in indices:
        if index >= limit:
            raise SpecError(
                f"cluster state: {what}{index} is beyond the {limit:,} {what}s of "
                f"{cluster.name} ({what}0-{what}{limit - 1})"
            )
    return indices


def _mark(spec: Unavailable, fabric: Fabric, cluster: ClusterSpec) -> np.ndarray:
    """Positions named by one Unavailable block."""
    out = np.zeros(fabric.num_accelerators, dtype=bool)
    for d in _checked(expand(spec.domains), fabric.num_domains, "domain", cluster):
        out[d * fabric.per_domain : (d + 1) * fabric.per_domain] = True
    for k in _checked(expand(spec.nodes), fabric.num_nodes, "node", cluster):
        out[k * fabric.per_node : (k + 1) * fabric.per_node] = True
    for name in spec.gpus:
        node, gpu = gpu_index(name)
        _checked([node], fabric.num_nodes, "node", cluster)
        if gpu >= fabric.per_node:
            raise SpecError(
                f"cluster state: {name}: {cluster.name} has {fabric.per_node} accelerators per "
                f"node (GPUs 0-{fabric.per_node - 1})"
            )
        out[node * fabric.per_node + gpu] = True
    return out[: fabric.num_accelerators]


def apply_state(cluster: ClusterSpec, state: ClusterState) -> Availability:
    """The accelerators ``state`` leaves free on ``cluster``, and each node's speed. SpecError
    when the state names another cluster or a node, GPU or domain the cluster lacks."""
    if state.cluster is not None and state.cluster != cluster.name:
        raise SpecError(f"cluster state is for cluster '{state.cluster}', not '{cluster.name}'")
    fabric = fabric_of(cluster)
    if fabric.num_accelerators % fabric.per_node:
        raise SpecError(
            f"cluster state: {cluster.name} has a partly filled node; a state needs whole nodes"
        )
    down = _mark(state.down, fabric, cluster)
    taken = _mark(state.taken, fabric, cluster) & ~down
    speed = np.ones(fabric.num_nodes)
    for name, factor in state.slow.items():
        k = node_index(name)
        _checked([k], fabric.num_nodes, "node", cluster)
        speed[k] = factor
    return Availability(fabric=fabric, down=down, taken=taken, node_speed=speed)


def state_graph(cluster: ClusterSpec, availability: Availability) -> nx.Graph:
    """The cluster graph with the state applied: down accelerators removed (with their edges),
    every remaining accelerator marked :data:`FREE` (False when another job holds it) and
    :data:`SPEED` (its node's speed factor)."""
    fabric = availability.fabric
    if fabric.num_accelerators > STATE_GRAPH_MAX_ACCELERATORS:
        raise SpecError(
            f"the state graph of {fabric.num_accelerators:,} accelerators is not built (limit "
            f"{STATE_GRAPH_MAX_ACCELERATORS:,}); the placement works on arrays at any size"
        )
    graph = fabric_graph(fabric)
    free = availability.free
    for name, data in list(graph.nodes(data=True)):
        if data.get(KIND) != "accelerator":
            continue
        position = data[RANK]
        if availability.down[position]:
            graph.remove_node(name)
            continue
        data[FREE] = bool(free[position])
        data[SPEED] = float(availability.node_speed[position // fabric.per_node])
    return graph
