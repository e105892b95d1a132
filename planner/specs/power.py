"""The power-capping model (``topologies/power_cap.yaml``): how a power limit below the TDP
lowers an accelerator's sustained clock, and so its FLOP/s peaks (what-if edit ``power_cap_w``).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from planner.specs.base import FrozenSpec
from planner.specs.text import Name, Text


class PowerCapModel(FrozenSpec):
    """Clock under a power cap: peak x min(1, (cap / TDP) ** clock_exponent)."""

    clock_exponent: float = Field(gt=0, le=1)
    """Exponent of cap / TDP in the sustained-clock ratio: 1/3 when dynamic power ~ f V^2 and V
    ~ f near the top of the DVFS curve (P ~ f^3); 1 would be a clock proportional to power."""
    min_fraction_of_tdp: float = Field(gt=0, lt=1)
    """Lowest cap the model is used for, as a fraction of the TDP: below it the voltage sits at
    its floor and the clock falls faster than the exponent says."""
    sources: dict[Name, Text]
    """Where each number came from: keys name the field."""

    @model_validator(mode="after")
    def _has_sources(self) -> PowerCapModel:
        for key in ("clock_exponent", "min_fraction_of_tdp"):
            if not self.sources.get(key):
                raise ValueError(f"sources.{key} is missing: every number needs a source")
        return self
