"""A parallel layout: how one training step is split over accelerators."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, PositiveInt

from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat


class Recompute(StrEnum):
    """Activation recomputation policy (Korthikanti et al. 2022, arXiv 2205.05198)."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


DEGREE_FIELDS = ("tp", "pp", "vpp", "dp", "cp", "ep", "etp")
"""The parallel-degree fields, which reports name in capitals (``TP 8``, as :meth:`Layout.short`)."""


def field_label(field: str) -> str:
    """How reports name a layout field: ``TP`` for a parallel degree, else the field itself.

    >>> field_label("etp"), field_label("mbs")
    ('ETP', 'mbs')
    """
    return field.upper() if field in DEGREE_FIELDS else field


class Layout(FrozenSpec):
    """Parallel degrees and per-GPU settings. GPUs used = tp x pp x cp x dp; EP lives inside
    dp x cp (Megatron's expert-data-parallel = dp x cp x tp / (ep x etp))."""

    tp: PositiveInt = 1
    """Tensor-parallel degree (1 = off). Sequence parallelism is on whenever tp > 1."""
    pp: PositiveInt = 1
    """Pipeline-parallel stages (1 = off)."""
    vpp: PositiveInt = 1
    """Virtual pipeline stages per PP rank (interleaved 1F1B; 1 = plain 1F1B)."""
    dp: PositiveInt = 1
    """Data-parallel replicas."""
    cp: PositiveInt = 1
    """Context-parallel degree (sequence split across GPUs; 1 = off)."""
    ep: PositiveInt = 1
    """Expert-parallel degree for MoE layers (1 = off)."""
    etp: PositiveInt = 1
    """Expert tensor-parallel degree (1 = experts not tensor-split)."""
    mbs: PositiveInt = 1
    """Micro-batch size (sequences per micro-batch per data-parallel replica)."""
    recompute: Recompute = Recompute.NONE
    """Activation recomputation: none, selective (attention core), or full (whole layer)."""
    zero: int = Field(default=1, ge=0, le=3)
    """ZeRO stage: 0 none, 1 optimizer state sharded over DP (Megatron distributed optimizer),
    2 + gradients, 3 + parameters (FSDP)."""
    precision: NumberFormat = NumberFormat.BF16
    """Format of the linear layers' GEMM inputs."""

    @property
    def num_gpus(self) -> int:
        """Accelerators the layout occupies (tp x pp x cp x dp)."""
        return self.tp * self.pp * self.cp * self.dp

    def short(self) -> str:
        """Compact one-line form, e.g. ``TP4 PP2 DP2 mbs1 selective zero1 bf16``."""
        parts = [f"TP{self.tp}", f"PP{self.pp}"]
        if self.vpp > 1:
            parts.append(f"VPP{self.vpp}")
        parts.append(f"DP{self.dp}")
        if self.cp > 1:
            parts.append(f"CP{self.cp}")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.etp > 1:
            parts.append(f"ETP{self.etp}")
        parts += [f"mbs{self.mbs}", str(self.recompute), f"zero{self.zero}", str(self.precision)]
        return " ".join(parts)
