"""CommDomain: what one parallel group sees of the network, as plain numbers.

Produced by :mod:`planner.topology`, consumed by :mod:`planner.cost`, so the cost model never
touches the cluster graph.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from planner.specs.base import FrozenSpec

Tier = Literal["local", "scale_up", "scale_out"]


class CommDomain(FrozenSpec):
    """The link a communicator group is bottlenecked on, per rank."""

    size: PositiveInt
    """Ranks in the group n (1 = no communication)."""
    bandwidth_bytes_per_s: PositiveFloat
    """Bottleneck bandwidth per rank per direction W (bytes/s), before efficiency."""
    latency_s: NonNegativeFloat
    """Per-step latency alpha (s)."""
    efficiency: float = Field(gt=0, le=1)
    """Fraction of W a collective's bus bandwidth reaches (0-1]."""
    tier: Tier
    """Highest tier the group crosses: local (n = 1), scale_up (NVLink/ICI), scale_out (NIC)."""
    num_domains: int = Field(default=1, ge=1)
    """Scale-up domains (NVLink domains, racks, slices) one group spans (1 = stays inside one)."""
    description: str = ""
    """Human-readable: which link, e.g. 'NVLink 450 GB/s' or 'NIC 50 GB/s, 2:1 spine'."""

    @property
    def effective_bytes_per_s(self) -> float:
        """Achievable bus bandwidth per rank (bytes/s): W x eta."""
        return self.bandwidth_bytes_per_s * self.efficiency


CP_FAMILY = {"allgather": "cp_collective", "a2a": "cp_all_to_all"}
"""The communication domain a context-parallel variant (``TrainWorkload.cp_comm``) runs on, where
it is not the ring of ``cp`` itself: the keys :func:`planner.topology.hierarchy.
cp_level_families` adds for the same groups, an NCCL ring collective and an all-to-all."""


def traffic_domain(domains: dict[str, CommDomain], dim: str, cp_comm: str) -> CommDomain:
    """The domain dimension ``dim``'s traffic runs on (``domains``: by dimension and family, as
    :func:`planner.topology.hierarchy.comm_domains` gives them): the CP groups' all-gather or
    all-to-all family under those variants (:data:`CP_FAMILY`), else the dimension's own. The
    cost model prices CP on it and the plan's placement shows it.

    >>> ring = CommDomain(size=8, bandwidth_bytes_per_s=50e9, latency_s=0, efficiency=1,
    ...     tier="scale_out")
    >>> d = {"cp": ring, "cp_collective": ring.model_copy(update={"bandwidth_bytes_per_s": 2e11})}
    >>> [traffic_domain(d, "cp", v).bandwidth_bytes_per_s for v in ("p2p", "allgather", "a2a")]
    [50000000000.0, 200000000000.0, 50000000000.0]
    """
    family = CP_FAMILY.get(cp_comm, dim) if dim == "cp" else dim
    return domains.get(family, domains[dim])  # no variant families without CP
