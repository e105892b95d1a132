"""Results of re-planning: a migration between clusters (MigrateResult) and a what-if sweep
(WhatIfResult), with the cost, energy and time-to-train figures attached to each plan.

These are the JSON contract of DESIGN.md section 8 (``migrate --json`` has ``from``, ``to``,
``speedup``, ``changes`` and ``old_layout_on_new``; ``whatif --json`` has ``scenarios``
[{``vary``, ``plan``}]): change them only additively and bump ``SCENARIOS_SCHEMA_VERSION``'s
minor number when adding fields. Serialise with ``model_dump_json(by_alias=True)`` so that the
``from`` key is spelled as the contract spells it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from planner.specs.base import FrozenSpec
from planner.specs.result import Plan
from planner.specs.workload import TrainWorkload

SCENARIOS_SCHEMA_VERSION = "1.2"

KnobValue = bool | int | float | str
"""A what-if knob's value: a number, a flag or a name (system, precision)."""


class TrainingRun(FrozenSpec):
    """How long and how much a whole training run takes at a plan's predicted step time."""

    tokens: NonNegativeFloat
    """Tokens the run processes (steps x tokens per step)."""
    steps: PositiveInt
    """Optimizer steps (ceil of tokens / tokens per step when given as tokens)."""
    wall_clock_days: NonNegativeFloat
    """Wall-clock time at the predicted step time, no failures or restarts (days)."""
    gpu_hours: NonNegativeFloat
    """Accelerator-hours (accelerators x wall-clock hours)."""
    cost_usd: NonNegativeFloat
    """GPU-hours x price per GPU-hour (USD)."""
    energy_MWh: NonNegativeFloat
    """Accelerators at TDP x wall-clock time (MWh; an upper bound for the accelerators alone,
    without host, network or cooling overhead)."""


class Economics(FrozenSpec):
    """Cost and energy of a plan: price per GPU-hour and TDP from the catalog (or overrides)."""

    price_per_gpu_hour_usd: PositiveFloat
    """Price of one accelerator-hour used (USD)."""
    tdp_W: PositiveFloat
    """Thermal design power of one accelerator (W)."""
    usd_per_million_tokens: NonNegativeFloat
    """price x GPUs x step time / tokens per step, per 1e6 tokens (USD)."""
    joules_per_token: NonNegativeFloat
    """TDP x GPUs x step time / tokens per step (J; accelerators at TDP, an upper bound)."""
    run: TrainingRun | None = None
    """Time to train, when a token or step count was given (``--tokens`` / ``--steps``)."""


class Bottleneck(FrozenSpec):
    """The slowest exposed communication term of a plan and the link it runs over."""

    term: str
    """Breakdown key (``tp_comm``, ``cp_comm``, ``ep_comm``, ``pp_comm``, ``dp_comm``)."""
    dimension: str
    """Placement entry whose groups carry it (``tp``, ``cp``, ``ep``, ``pp``, ``dp``; for
    ``dp_comm`` with context or expert parallelism or hybrid sharding the gradient group it is
    priced on, ``dp_cp``, ``edp``, ``dp_shard`` or ``dp_replicate``)."""
    exposed_s: NonNegativeFloat
    """Exposed seconds per step of that term."""
    link: str
    """The placement's bottleneck link of that dimension, in words."""
    within_domain: bool
    """The groups stay inside one scale-up (NVLink/ICI) domain."""


class LayoutChange(FrozenSpec):
    """One layout field that differs between the source and target best plans."""

    model_config = FrozenSpec.model_config | {"populate_by_name": True}

    field: str
    """Layout field (tp, pp, vpp, dp, cp, ep, mbs, recompute, zero), or activation_offload
    (the share of saved activations a search offloaded, in percent)."""
    from_value: str = Field(alias="from")
    """Value on the source cluster (JSON key ``from``)."""
    to_value: str = Field(alias="to")
    """Value on the target cluster (JSON key ``to``)."""
    reason: str
    """One line, derived from the two plans' memory and time breakdowns."""


class MigrateResult(FrozenSpec):
    """The answer of ``layout migrate``: the best plan on each cluster and what changed."""

    model_config = FrozenSpec.model_config | {"populate_by_name": True}

    schema_version: str = SCENARIOS_SCHEMA_VERSION
    """Version of this JSON shape (major.minor; minor bumps are additive)."""
    model: str
    """Model catalog name."""
    workload: TrainWorkload
    """The training step both plans run."""
    from_plan: Plan = Field(alias="from")
    """Best plan on the source cluster, or the given ``--layout`` (JSON key ``from``)."""
    to_plan: Plan = Field(alias="to")
    """Best plan on the target cluster (JSON key ``to``)."""
    from_economics: Economics
    """Cost and energy of the source plan."""
    to_economics: Economics
    """Cost and energy of the target plan."""
    speedup: PositiveFloat
    """Target tokens/s over source tokens/s (> 1 means the target is faster)."""
    changes: list[LayoutChange]
    """Each layout field that changed, with its reason."""
    old_layout_on_new: Plan | None = None
    """The source layout scored on the target cluster (dp rescaled to its GPU count); None when
    that layout is not legal there (see ``old_layout_note``)."""
    old_layout_speedup: PositiveFloat | None = None
    """Tokens/s of the ported source layout over the source plan's; None when not legal."""
    old_layout_note: str
    """One line: how the ported layout compares with the re-planned one, or why it is not
    legal (or does not fit) on the target."""


class Scenario(FrozenSpec):
    """One point of a what-if sweep: the knob values and the re-planned best layout."""

    vary: dict[str, KnobValue]
    """Knob -> value of this scenario (knobs in the order given)."""
    status: Literal["ok", "infeasible", "invalid"]
    """ok: a plan; infeasible: nothing fits; invalid: the knob values make no legal cluster."""
    plan: Plan | None = None
    """The best plan (None unless status is ok)."""
    economics: Economics | None = None
    """Cost and energy of the plan."""
    bottleneck: Bottleneck | None = None
    """Slowest exposed communication term; None when the plan exposes no communication."""
    error: str | None = None
    """Why there is no plan (one line), for infeasible and invalid scenarios."""
    alternatives: list[Plan] = Field(default_factory=list)
    """The scenario's runners-up, best first, each with ``why_not`` (the sweep keeps
    ``WHATIF_TOP`` - 1 of them; schema 1.1)."""


class WhatIfResult(FrozenSpec):
    """The answer of ``layout whatif``: scenarios in the cartesian order of the varies."""

    schema_version: str = SCENARIOS_SCHEMA_VERSION
    """Version of this JSON shape (major.minor; minor bumps are additive)."""
    model: str
    """Model catalog name."""
    cluster: str
    """Base cluster name, as given (before the knobs)."""
    cluster_description: str
    """What the base cluster name resolved to."""
    workload: TrainWorkload
    """Base training step (before the knobs)."""
    knobs: dict[str, list[KnobValue]]
    """Each varied knob and its values, in the order given."""
    scenarios: list[Scenario]
    """One per combination: the last knob varies fastest."""
    elapsed_s: NonNegativeFloat
    """Wall time of the sweep (s)."""
    command: str | None = None
    """The command line that made the sweep (``layout whatif ...``, shell-quoted); None from
    the Python API (schema 1.1)."""
    version: str = ""
    """The layout version that made it (schema 1.1; '' in older files)."""
    created: str = ""
    """When the sweep ended, ISO 8601 in UTC (schema 1.1; '' in older files)."""


WHATIF_TOP = 3
"""Plans a what-if search keeps per scenario: the best and two runners-up."""

MAX_RUN_TOKENS = 1e16
"""Most tokens a run may be costed for: ~600x Llama 3's 15.6T (arXiv 2407.21783) and ~100x the
largest published pre-training corpora; beyond it a time-to-train is not a question anyone asks
(``--tokens 1e30`` would print 1.4e20 days)."""
MAX_RUN_STEPS = 10**9
"""Most optimizer steps a run may be costed for (published runs take 1e4-1e6)."""


class RunLength(FrozenSpec):
    """How much training to cost: a token count or a step count (exactly one)."""

    tokens: PositiveFloat | None = Field(default=None, le=MAX_RUN_TOKENS)
    """Tokens to train on (``--tokens 15T``); steps = ceil(tokens / tokens per step)."""
    steps: PositiveInt | None = Field(default=None, le=MAX_RUN_STEPS)
    """Optimizer steps (``--steps``)."""

    def num_steps(self, tokens_per_step: int) -> int:
        """Steps needed at ``tokens_per_step`` tokens per step.

        >>> RunLength(tokens=10).num_steps(4)
        3
        """
        if self.steps is not None:
            return self.steps
        assert self.tokens is not None  # internal: the validator requires one of the two
        return max(1, -(-int(self.tokens) // tokens_per_step))

    @model_validator(mode="after")
    def _exactly_one(self) -> RunLength:
        if (self.tokens is None) == (self.steps is None):
            raise ValueError("give exactly one of tokens and steps")
        return self
