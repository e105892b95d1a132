"""The cluster as it is right now (``--cluster-state FILE``): what is down, what other jobs hold,
and which nodes run slow; and what the placement made of it (the plan's ``cluster_state``).

Nodes, GPUs and scale-up domains are named as the placement file and hostfile name them:
``node<i>`` is the i-th node (server, NVL72 tray, TPU host) of the cluster, 0-based, in rank
order; ``node<i>:<g>`` is local GPU g of that node; ``domain<i>`` the i-th scale-up domain (HGX
board, NVL72 rack, TPU slice). A range ``node16-node31`` (inclusive) names every node between.
Which of them exist is checked against the cluster when the state is applied
(:func:`planner.topology.state.apply_state`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, NonNegativeFloat, NonNegativeInt, model_validator

from planner.specs.base import FrozenSpec
from planner.specs.text import Name, Text

MAX_INDEX = 2**20
"""Largest node, GPU or domain index a state may name (the planner's largest cluster)."""

_NODE = re.compile(r"^node([0-9]{1,7})(?:-node([0-9]{1,7}))?$")
_GPU = re.compile(r"^node([0-9]{1,7}):([0-9]{1,4})$")
_DOMAIN = re.compile(r"^domain([0-9]{1,7})(?:-domain([0-9]{1,7}))?$")


def _range(text: str, pattern: re.Pattern[str], what: str) -> str:
    match = pattern.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            f"{text!r:.60} is not a {what} name ('{what}<i>' or a range '{what}<a>-{what}<b>')"
        )
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if last < first:
        raise ValueError(f"range {text!r} runs backwards ({last} < {first})")
    if last >= MAX_INDEX:
        raise ValueError(f"{text!r} names an index beyond {MAX_INDEX:,}")
    return text


def _node_range(text: str) -> str:
    return _range(text, _NODE, "node")


def _domain_range(text: str) -> str:
    return _range(text, _DOMAIN, "domain")


def _node(text: str) -> str:
    _node_range(text)
    if "-" in text:
        raise ValueError(f"{text!r}: name one node here, not a range")
    return text


def _gpu(text: str) -> str:
    match = _GPU.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r:.60} is not a GPU name ('node<i>:<gpu>', e.g. 'node17:3')")
    return text


NodeRange = Annotated[str, AfterValidator(_node_range)]
NodeName = Annotated[str, AfterValidator(_node)]
GpuName = Annotated[str, AfterValidator(_gpu)]
DomainRange = Annotated[str, AfterValidator(_domain_range)]
SpeedFactor = Annotated[float, Field(gt=0, le=1)]


def _span(name: str) -> int:
    """How many indices a validated name or range covers."""
    match = _NODE.match(name) or _DOMAIN.match(name)
    assert match is not None
    first = int(match.group(1))
    return int(match.group(2) or first) - first + 1


def expand(names: list[str]) -> list[int]:
    """Indices named by ``node<i>`` / ``domain<i>`` names and ranges, in order.

    >>> expand(["node3", "node5-node7"])
    [3, 5, 6, 7]
    """
    out: list[int] = []
    for text in names:
        match = _NODE.match(text) or _DOMAIN.match(text)
        assert match is not None  # validated by the spec
        first = int(match.group(1))
        out.extend(range(first, int(match.group(2) or first) + 1))
    return out


def gpu_index(name: str) -> tuple[int, int]:
    """(node, local GPU) of ``node<i>:<g>``.

    >>> gpu_index("node17:3")
    (17, 3)
    """
    match = _GPU.match(name)
    assert match is not None
    return int(match.group(1)), int(match.group(2))


def node_index(name: str) -> int:
    """Index of ``node<i>``.

    >>> node_index("node17")
    17
    """
    return expand([name])[0]


class Unavailable(FrozenSpec):
    """GPUs that cannot be used: whole scale-up domains, whole nodes, single GPUs."""

    domains: list[DomainRange] = Field(default_factory=list, max_length=4096)
    """Whole scale-up domains (``domain3``, ``domain0-domain7``)."""
    nodes: list[NodeRange] = Field(default_factory=list, max_length=65_536)
    """Whole nodes (``node17``, ``node100-node119``)."""
    gpus: list[GpuName] = Field(default_factory=list, max_length=65_536)
    """Single GPUs (``node17:3`` = local GPU 3 of node 17)."""

    def is_empty(self) -> bool:
        """Whether nothing is named."""
        return not (self.domains or self.nodes or self.gpus)


class ClusterState(FrozenSpec):
    """What is not free on a cluster, and which nodes run slow (``--cluster-state FILE``)."""

    cluster: Name | None = None
    """The cluster this state describes (``gb200_nvl72x576`` or a cluster file's ``name``);
    checked against ``--cluster`` when given. None = not checked."""
    down: Unavailable = Field(default_factory=Unavailable)
    """Out of service (failed GPU, node drained for repair, rack powered off)."""
    taken: Unavailable = Field(default_factory=Unavailable)
    """Held by other jobs."""
    slow: dict[NodeName, SpeedFactor] = Field(default_factory=dict, max_length=65_536)
    """Nodes that run slow: node -> speed factor in (0, 1], the share of its rated FLOP/s it
    reaches (``node17: 0.85`` = 15% slow: throttled clocks). A synchronous step waits for the
    slowest participating node, so one slow node slows every rank."""

    @model_validator(mode="after")
    def _each_named_once(self) -> ClusterState:
        names = [*self.down.domains, *self.down.nodes, *self.taken.domains, *self.taken.nodes]
        total = sum(_span(name) for name in names)
        if total > MAX_INDEX:
            raise ValueError(
                f"the ranges name {total:,} nodes and domains; at most {MAX_INDEX:,} exist"
            )
        seen: dict[tuple[str, int], str] = {}
        for where, spec in (("down", self.down), ("taken", self.taken)):
            for kind, names in (("domain", spec.domains), ("node", spec.nodes)):
                for index in expand(names):
                    key = (kind, index)
                    if key in seen:
                        raise ValueError(
                            f"{kind}{index} is named twice ({seen[key]} and {where}.{kind}s)"
                        )
                    seen[key] = f"{where}.{kind}s"
            for name in spec.gpus:
                node, gpu = gpu_index(name)
                key = ("gpu", node * 100_000 + gpu)
                if key in seen:
                    raise ValueError(f"{name} is named twice ({seen[key]} and {where}.gpus)")
                seen[key] = f"{where}.gpus"
        for name in self.slow:
            key = ("node", node_index(name))
            if key in seen:
                raise ValueError(f"{name} is slow and also listed in {seen[key]}: name it once")
        return self

    def is_empty(self) -> bool:
        """Whether the state changes nothing (every GPU free and at full speed)."""
        return self.down.is_empty() and self.taken.is_empty() and not self.slow


class SubproblemInfo(FrozenSpec):
    """One CP-SAT sub-problem the planner solved: what, how large, how it ended."""

    name: Literal["placement", "fleet"]
    """placement (which accelerators and which rank order, ``--cluster-state``) or fleet
    (``layout pack``: one layout per job, disjoint placements)."""
    variables: NonNegativeInt
    """Variables of the CP-SAT model."""
    constraints: NonNegativeInt
    """Constraints of the CP-SAT model."""
    status: str
    """OPTIMAL, FEASIBLE (time limit hit), INFEASIBLE, MODEL_INVALID or UNKNOWN."""
    objective: float
    """Objective value (integer units named by ``objective_terms``); 0 when none found."""
    best_bound: float
    """Proven bound on the objective; equals ``objective`` when optimal."""
    objective_terms: Text
    """What the integer objective counts, most significant first."""
    solve_time_s: NonNegativeFloat
    """Wall time of the solve (s)."""


class DefaultOrder(FrozenSpec):
    """The job laid out the way a launcher would without the planner: the first free GPUs in
    node order, ranks in Megatron's order."""

    step_time_s: NonNegativeFloat
    """Predicted step time of that placement (s)."""
    speed_factor: float = Field(gt=0, le=1)
    """Speed of its slowest node (1 = none slow)."""
    slow_nodes_used: list[Name]
    """Slow nodes it uses."""
    groups_split: dict[str, NonNegativeInt]
    """Per parallel dimension, groups that span several scale-up domains."""


class StateReport(FrozenSpec):
    """What the cluster state left and what the chosen placement does with it."""

    state: Text
    """The state file as given (or 'Python object')."""
    gpus_total: NonNegativeInt
    """Accelerators in the cluster."""
    gpus_down: NonNegativeInt
    """Accelerators down."""
    gpus_taken: NonNegativeInt
    """Accelerators held by other jobs."""
    gpus_free: NonNegativeInt
    """Accelerators free (neither down nor taken), slow ones included."""
    slow_nodes: dict[Name, float]
    """Slow nodes and their speed factors, as given."""
    gpus_used: NonNegativeInt
    """Accelerators the job uses."""
    nodes_used: NonNegativeInt
    """Nodes the job uses."""
    domains_used: NonNegativeInt
    """Scale-up domains the job uses."""
    slow_nodes_used: list[Name]
    """Slow nodes the placement could not leave out."""
    speed_factor: float = Field(gt=0, le=1)
    """Speed of the slowest node the job uses: it sets the pace of every synchronous step."""
    groups_split: dict[str, NonNegativeInt]
    """Per parallel dimension, groups that span several scale-up domains (0 for TP and EP
    whenever a placement keeping them inside exists)."""
    step_time_s_healthy: NonNegativeFloat
    """Step time of the same request on the cluster with nothing down, taken or slow (s)."""
    step_time_s: NonNegativeFloat
    """Step time on the cluster as it is, with this placement (the plan's step_time_s)."""
    holes_cost_pct: float
    """What the state costs: 100 x (step_time_s / step_time_s_healthy - 1)."""
    default_order: DefaultOrder | None
    """The same layout on the first free GPUs in Megatron order, for comparison (None when the
    free GPUs do not hold it)."""
    placement_solve: SubproblemInfo | None
    """The CP-SAT placement solve (None when the placement needed no solve)."""
