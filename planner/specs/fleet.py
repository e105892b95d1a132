"""Fleets of jobs on one cluster (``layout pack``): the job files, mixed pools, and the answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from planner.specs.base import FrozenSpec
from planner.specs.cluster_state import SubproblemInfo
from planner.specs.hardware import DeviceNoun
from planner.specs.result import SCHEMA_VERSION, Plan, ServePlan
from planner.specs.text import Name, Text

MAX_JOBS = 32
"""Most jobs one pack takes."""
MAX_PARTITIONS = 16
"""Most partitions a pool file may list."""


class JobTarget(FrozenSpec):
    """What a job must reach: one of tokens/s or (training) a step time."""

    tokens_per_s: PositiveFloat | None = None
    """Tokens per second of the whole job: training tokens, or serving output tokens."""
    step_time_s: PositiveFloat | None = None
    """Training only: the step time to meet (s)."""

    @model_validator(mode="after")
    def _exactly_one(self) -> JobTarget:
        if (self.tokens_per_s is None) == (self.step_time_s is None):
            raise ValueError("give exactly one of tokens_per_s and step_time_s")
        return self

    def describe(self) -> str:
        """The target in words."""
        if self.tokens_per_s is not None:
            return f"{self.tokens_per_s:,.0f} tokens/s"
        return f"a {self.step_time_s:g} s step"


class JobFile(FrozenSpec):
    """One job of a pack (``--job FILE``): what to run, and a weight or a target."""

    name: Name | None = None
    """Name to report (default: the file's name without its suffix)."""
    model: Name
    """Catalog model name or alias (``70B``), or a model YAML / config.json path relative to the
    job file."""
    mode: Literal["train", "serve"] = "train"
    """Training or serving."""
    workload: dict[str, Any] = Field(default_factory=dict)
    """The workload's fields (TrainWorkload for train: seq_len, global_batch, precision ...;
    ServeWorkload for serve: context, prompt_len, output_len, tpot_ms ...)."""
    weight: Annotated[float, Field(gt=0, le=1e6)] | None = None
    """Share of the objective: the pack maximises the sum over jobs of weight x (tokens/s /
    the job's best tokens/s on any partition). Default 1 when no target is given."""
    target: JobTarget | None = None
    """A rate or step time the job must reach (instead of a weight)."""
    fix: dict[str, int | str] = Field(default_factory=dict)
    """Layout pins passed to the job's search (``tp: 8``), as ``--fix``."""
    partitions: list[Name] | None = None
    """Only these partitions of a pool (default: any)."""

    @model_validator(mode="after")
    def _weight_or_target(self) -> JobFile:
        if self.weight is not None and self.target is not None:
            raise ValueError("give a weight or a target, not both")
        if self.mode == "serve" and self.target is not None and self.target.step_time_s:
            raise ValueError("target.step_time_s applies to training; a serving job's target "
                             "is tokens_per_s (output tokens/s)")  # fmt: skip
        return self


class PartitionEntry(FrozenSpec):
    """One partition of a mixed pool: a cluster, and optionally its state."""

    name: Name | None = None
    """Name to report (default: the cluster's)."""
    cluster: Name
    """``<system>x<N>`` or a cluster YAML path relative to the pool file."""
    cluster_state: Name | None = None
    """A cluster-state YAML path (relative to the pool file): what is down, taken or slow."""


class PoolFile(FrozenSpec):
    """A pool of partitions of different hardware (``--cluster pool.yaml`` for ``pack``)."""

    name: Name
    """Name to report."""
    partitions: list[PartitionEntry] = Field(min_length=1, max_length=MAX_PARTITIONS)
    """The partitions (a job runs inside one)."""


class DomainShare(FrozenSpec):
    """The accelerators of one scale-up domain a job holds."""

    domain: NonNegativeInt
    """Scale-up domain index in its partition."""
    gpus: PositiveInt
    """Accelerators of the domain the job holds."""
    first_node: NonNegativeInt
    """First node (``node<i>`` of the partition) of the job in this domain."""
    last_node: NonNegativeInt
    """Last node of the job in this domain."""


class PackedJob(FrozenSpec):
    """One job as packed."""

    name: Name
    """Job name."""
    mode: Literal["train", "serve"]
    """Training or serving."""
    model: Name
    """Model catalog name."""
    partition: Name
    """Partition it runs on."""
    num_gpus: PositiveInt
    """Accelerators it uses."""
    weight: float | None
    """Its weight (None for a job with a target)."""
    target: JobTarget | None
    """Its target (None for a weighted job)."""
    tokens_per_s: NonNegativeFloat
    """Tokens/s of the chosen layout (training tokens, or serving output tokens)."""
    best_tokens_per_s: NonNegativeFloat
    """Its best tokens/s over every candidate row (alone on a partition)."""
    share_of_best: NonNegativeFloat
    """tokens_per_s / best_tokens_per_s."""
    plan: Plan | ServePlan
    """The chosen plan (from the existing search at this GPU count)."""
    allocation: list[DomainShare]
    """Where it runs: accelerators per scale-up domain (disjoint from every other job)."""


class PartitionUse(FrozenSpec):
    """How much of one partition the pack uses."""

    name: Name
    """Partition name."""
    cluster_description: Text
    """What its cluster resolved to."""
    gpus_total: PositiveInt
    """Accelerators in the partition."""
    gpus_free: NonNegativeInt
    """Accelerators free before the pack (its state's holes removed)."""
    gpus_used: NonNegativeInt
    """Accelerators the packed jobs use."""
    device_noun: DeviceNoun = "GPU"
    """What the report calls one of its accelerators: "GPU", or "chip" on a TPU partition."""


class PackResult(FrozenSpec):
    """The answer of ``layout pack``."""

    schema_version: str = SCHEMA_VERSION
    """Version of this JSON shape."""
    cluster: Name
    """The cluster or pool as given."""
    objective: Text
    """What was optimised, in words."""
    objective_value: float
    """The weighted sum of shares of best (throughput mode), or the GPUs used (fewest mode)."""
    partitions: list[PartitionUse]
    """Each partition's use."""
    jobs: list[PackedJob]
    """Each job, in the order given."""
    gpus_used: NonNegativeInt
    """Accelerators used by all jobs."""
    rows_considered: NonNegativeInt
    """Candidate (job, partition, GPU count) rows scored by the searches."""
    search_time_s: NonNegativeFloat
    """Wall time of the searches and the solve (s)."""
    subproblems: list[SubproblemInfo]
    """The CP-SAT fleet solve, with its size, status, objective and bound."""
