"""A serving engine as data: the time it adds to every forward iteration beyond the kernels.

Each kernel of a decode iteration is priced by its own roofline plus a fixed per-kernel cost
(:mod:`planner.cost.serving_time`). An engine adds two costs the kernels do not carry:

- per layer, the launch gaps and synchronisations between its kernels (host launches of an
  engine without CUDA graphs, plugin and stream syncs, the all-reduce barriers' skew):
  ``shared/reference/serving-formulas.md`` 6c, "t_fixed: at small batch, a per-layer launch and
  sync overhead dominates" (DeepSeek-R1 on 8 B200 at batch 1: 9 ms per step, far above its
  bandwidth bound);
- per request in the batch, the host work the GPU waits for each iteration: the scheduler's
  bookkeeping and KV-block allocation, sampling, the request's state update and its streamed
  output (Yu et al., "Orca", OSDI'22, section 4: iteration-level scheduling runs per request
  between iterations).

A third figure scales the engine's compute-bound kernels (prefill GEMMs, attention) against the
kernels the training calibration stands for (an engine with Triton or FlashInfer kernels where
another has vendor-tuned CUTLASS ones). A profile is one YAML file in ``topologies/engines/``
with a source for each number; its figures are fitted on the serving validation rows of that
engine
(``benchmarks/fit_serving_engine.py``) or, for an engine without rows, taken from one that has
them and marked so.
"""

from __future__ import annotations

from pydantic import Field

from planner.specs.base import FrozenSpec
from planner.specs.hardware import ResidualSummary
from planner.specs.text import Name, Text


class EngineFitRecord(FrozenSpec):
    """How an engine profile's figures were fitted, and how they do out of sample."""

    date: str
    """Day of the fit (ISO)."""
    method: Text
    """Objective, grid and hold-out scheme."""
    in_sample: ResidualSummary
    """Errors of the fitted rows with the figures fitted on all of them."""
    heldout: ResidualSummary
    """Errors of the same rows, each predicted with figures fitted without its source."""
    heldout_errors: dict[str, float]
    """Row id -> held-out error (predicted / measured - 1): the serving band's residuals."""
    heldout_fits: dict[str, tuple[float, ...]] = Field(default_factory=dict)
    """Source document -> (layer us, request us, compute efficiency) fitted without it."""


class ServingEngineSpec(FrozenSpec):
    """A serving engine profile (``topologies/engines/<name>.yaml``)."""

    name: Name
    """Profile name, as ``--serving-engine`` spells it (``tensorrt-llm``, ``vllm``...)."""
    description: Text
    """What the profile stands for (engine, versions, scheduler mode)."""
    layer_overhead_us: float = Field(ge=0, le=1_000)
    """Launch gaps and syncs per transformer layer per iteration, whatever the batch (us)."""
    sequence_overhead_us: float = Field(ge=0, le=100)
    """Host time per request in the iteration (scheduling, sampling, state update, output)
    that the GPU waits for (us)."""
    compute_efficiency: float = Field(default=1.0, ge=0.2, le=1.0)
    """Speed of the engine's compute-bound kernels (prefill and large-batch GEMMs, attention)
    relative to the accelerator's training-fitted GEMM and attention efficiencies (1 = the same
    kernels' speed)."""
    fits_compute: bool = False
    """The fit adjusts ``compute_efficiency``; False keeps the stated figure (the reference
    engine, whose kernels the training fit stands for)."""
    fitted_on: tuple[str, ...] = ()
    """Serving validation rows the figures were fitted on; empty = taken from another
    profile (an engine without rows: its plans carry a wider band)."""
    fit: EngineFitRecord | None = None
    """The fit's record (None for an engine without rows)."""
    vendors: tuple[Name, ...] = ()
    """Accelerator vendors it runs on (:attr:`planner.specs.hardware.AcceleratorSpec.vendor`,
    matched case-insensitively); empty = any. A vendor no profile lists is not restricted."""
    default_on: tuple[Name, ...] = ()
    """Vendors on which it is the engine used when none is named (``--serving-engine``
    absent): TensorRT-LLM on NVIDIA GPUs, vLLM on AMD GPUs and TPUs."""
    sources: dict[str, Text]
    """Where each figure comes from."""

    @property
    def has_rows(self) -> bool:
        """Its figures were fitted on its own published runs."""
        return bool(self.fitted_on)

    def iteration_s(self, layers: int, requests: float) -> float:
        """The engine's time in one iteration of ``layers`` layers carrying ``requests``
        requests (s): layers x layer_overhead + requests x sequence_overhead.

        >>> e = ServingEngineSpec(name="x", description="x", layer_overhead_us=50,
        ...                       sequence_overhead_us=5, sources={"all": "x"})
        >>> round(e.iteration_s(80, 100) * 1e3, 3)  # 80 x 50 us + 100 x 5 us
        4.5
        """
        return (
            layers * self.layer_overhead_us + max(requests, 0.0) * self.sequence_overhead_us
        ) * 1e-6
