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
