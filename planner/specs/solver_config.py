"""Solver settings and the search request's pins."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from planner.specs.base import FrozenSpec

TIME_QUANTUM_S = 1e-6
"""Resolution of the integer step-time objective given to CP-SAT (1 microsecond)."""


DEFAULT_MEMORY_HEADROOM = 0.05
"""Share of usable memory a search leaves free unless told otherwise
(``SolverConfig.memory_headroom``, ``layout search --memory-headroom``)."""

MAX_MEMORY_HEADROOM = 0.5
"""Largest memory headroom a search accepts."""


class SolverConfig(FrozenSpec):
    """How the search runs."""

    solver: Literal["cp-sat", "exhaustive"] = "cp-sat"
    """cp-sat (default: the scored layouts that branch and bound keeps are ranked by a numpy
    sort, and CP-SAT splits each returned plan's pipeline) or exhaustive (every layout scored,
    ranked by a plain sort: the reference for tests and small instances)."""
    time_limit_s: float = Field(default=10.0, gt=0, le=3600)
    """Time limit of each CP-SAT solve (s); on expiry the best solution found is used and its
    gap reported. It is counted in CP-SAT's deterministic work, about 1 s of wall time per
    second on the benchmarks' machine, so a solve stops at the same point on every machine
    (:func:`planner.search.solve.cpsat.configured_solver`; ten times the limit of wall time
    is a safety net)."""
    stage_time_limit_s: float = Field(default=1.0, gt=0, le=3600)
    """Time limit of each pipeline-split CP-SAT solve (s, counted as ``time_limit_s`` is; at
    most ``time_limit_s``): a search splits several layouts and must answer in about a second.
    Most solves prove their optimum in under 0.1 s; one that does not keeps its best split, and
    the JSON reports the status (FEASIBLE) and the bound."""
    stage_split: Literal["cp-sat", "even"] = "cp-sat"
    """How a plan's layers are split over its pipeline stages: the CP-SAT partition (layers
    and recomputed layers per stage; kept only when the cost model scores it no slower than the
    even split) or the even split the ranking scores every layout with."""
    stage_recompute: Literal["block", "per_stage"] = "block"
    """With full recomputation, what the stage partition may choose: ``block``, one count N
    for every model chunk (its first N layers; Megatron-LM's ``--recompute-method block
    --recompute-num-layers N``, which every export can spell), or ``per_stage``, a count per
    pipeline rank (Megatron-LM cannot spell it; the exports say so)."""
    num_workers: PositiveInt = 1
    """CP-SAT search workers (1 = deterministic)."""
    seed: int = 0
    """CP-SAT random seed."""
    split_candidates: int = Field(default=5, ge=1, le=50)
    """With the CP-SAT stage split: how many of the best layouts by the even split's ranking
    are split and ranked again (at least ``top``), so the best plan does not depend on how many
    runners-up are asked for; a layout ranked below them is split by the split sweep when its
    bound under any split beats the plans (``split_sweep_budget``)."""
    split_sweep_budget: int = Field(default=3000, ge=0, le=10**7)
    """With the CP-SAT stage split: work the split sweep may do to find and split the layouts
    ranked below ``split_candidates`` whose step-time bound under any split still beats the best
    plan, in units of about a millisecond of a laptop core (planner.search.space.SweepBudget:
    2 per layout bounded, more for a tight bound, 30 per split, 200 more for a CP-SAT one).
    Counted in work, not seconds, so a search gives the same answer on any machine; 0 turns the
    sweep off. When it runs out with such layouts left, the search reports status FEASIBLE and
    the least of their bounds as the best bound: how far below the best plan the cost model's
    optimum might lie. With ``target_step_time_s`` it also splits layouts on fewer GPUs whose
    even split misses the target, one GPU count at a time (docs/search.md, "With a step-time
    target")."""
    top: int = Field(default=5, ge=1, le=50)
    """Plans to return: the best and top - 1 runners-up with distinct parallel degrees."""
    objective: Literal["time", "cost", "energy"] = "time"
    """Minimise step time (default), dollars per token, or joules per token. On one cluster
    cost and energy both rank by GPU-seconds per token (price and TDP are per GPU); they differ
    in the figures reported."""
    memory_headroom: float = Field(default=DEFAULT_MEMORY_HEADROOM, ge=0.0, le=MAX_MEMORY_HEADROOM)
    """Share of the usable memory the search leaves free: a layout is searched only if its
    predicted peak stays below (1 - headroom) x usable, for allocator fragmentation and run-to-
    run variation the model does not see (PyTorch's caching allocator reserves 5-10% beyond what
    is allocated in long runs; expandable segments narrow it). ``estimate`` still judges a
    given layout against the full usable memory, so a published layout that fit is accepted."""
    offload_as_needed: bool = False
    """Let the search offload saved activations to host memory where the framework can
    (``FrameworkSpec.activation_offload``), the accelerator has a host link, and a layout fits
    only so: the smallest share the framework can express (offload time only grows with the
    share). Off by default: host memory capacity is not modelled, and an offloaded plan can
    need more host DRAM than a node has (the plan's warning gives the figure). A workload that
    states ``activation_offload_fraction`` keeps that share for every candidate either way
    (``--activation-offload auto`` turns this on)."""
    target_step_time_s: float | None = Field(default=None, gt=0)
    """Find the fewest GPUs whose best layout meets this step time (s); None = off. It ranks by
    GPU count, so it takes the time objective only (a cost or energy objective would be
    ignored: refused)."""

    @model_validator(mode="after")
    def _target_ranks_by_gpus(self) -> SolverConfig:
        if self.target_step_time_s is not None and self.objective != "time":
            raise ValueError(
                f"a step-time target ranks by the fewest GPUs that meet it; the "
                f"'{self.objective}' objective would be ignored: give one of them"
            )
        return self
