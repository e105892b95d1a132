"""CP-SAT placement on the cluster as it is: which accelerators a job uses, and the rank order.

The cost model scores a layout on the first N accelerators of a regular cluster. A real cluster
has holes (GPUs and nodes down, others' jobs), slow nodes, and scale-up domains whose size the
job's groups do not divide (72-GPU NVL72 racks and TP16). This module chooses where the ranks go.

Data (fully prepared, integers; STYLE.md rule 10), one row per node with a free accelerator:
its scale-up domain, scalable unit (leaf group of the scale-out fabric), free accelerators and
speed level. The job is ``N`` ranks in blocks of ``B`` consecutive ranks that must share one
scale-up domain (``B`` = the span of the TP and EP groups that fit in a domain and of any other
dimension the cost model puts inside one: :func:`block_size`).

Variables: per domain, the blocks it holds (x_d); per node, the accelerators it gives (y_k) and
whether it is used; per scalable unit and domain, whether it is used; the slowest speed level
used. Not one Boolean per GPU per rank: a 16,384-GPU cluster is 2,048 node rows.

Constraints: sum_k in d y_k = B x_d (whole blocks per domain: no group straddles two domains);
sum_d x_d = N / B; y_k <= free_k.

Objective (lexicographic, most significant first, each term an integer count):

1. the slowest node used, as a speed level (0 = healthy): a synchronous step runs at the pace
   of its slowest rank, so a slow node is left out whenever enough healthy accelerators exist;
2. slow nodes used;
3. ragged nodes used (a node giving fewer accelerators than it has, or one with a hole): its
   ranks sit on other local GPUs than their DP and PP peers on full nodes, so their rings leave
   the rails (NIC i of every node on rail leaf i) and climb to the spine;
4. scalable units used (rings that stay under one set of rail leaves never cross the spine);
5. scale-up domains used.

Ranks are then ordered deterministically: domains in index order, inside a domain full nodes
first then ragged ones, inside a node its free GPUs in index order; TP innermost, PP outermost
(Megatron's order). Whole blocks per domain keep every TP and EP group inside one.

When no placement keeps the blocks inside domains (e.g. nine TP16 groups on two 72-GPU racks),
the solve is INFEASIBLE and :func:`fallback_positions` takes the fastest free nodes in order;
the groups that straddle are counted and priced (:mod:`planner.topology.placed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.errors import InfeasibleError, InternalError
from planner.specs.cluster_state import SubproblemInfo
from planner.specs.result import PlacementEntry
from planner.specs.solver_config import SolverConfig
from planner.topology.hierarchy import GRADIENT_GROUPS
from planner.topology.state import Availability

OBJECTIVE_TERMS = (
    "slowest speed level used, slow nodes used, ragged nodes used, scalable units used, "
    "domains used (lexicographic)"
)
"""The placement objective in words (SubproblemInfo.objective_terms)."""
MAX_OBJECTIVE = 2**62
"""Largest objective handed to CP-SAT (64-bit): less significant terms are dropped beyond it."""


INSIDE_DIMENSIONS = ("tp", "ep")
"""Dimensions whose groups belong inside one scale-up domain whenever they fit in one (their
collectives run every layer: TP all-gather / reduce-scatter, EP all-to-all)."""


def block_size(placement: dict[str, PlacementEntry], per_domain: int) -> int:
    """Consecutive ranks that must share one scale-up domain: the least common multiple of the
    spans (size x stride) of the TP and EP groups that fit in a domain of ``per_domain``, and of
    every other dimension the plan puts inside a domain (the gradient groups, made of the DP and
    CP groups, add nothing).

    >>> from planner.specs.result import PlacementEntry
    >>> entry = dict(link="", bandwidth_GB_per_s=1.0, example_group=[0])
    >>> block_size({"tp": PlacementEntry(size=16, stride=1, tier="scale_out",
    ...                                  within_domain=False, **entry),
    ...             "ep": PlacementEntry(size=4, stride=1, tier="scale_up",
    ...                                  within_domain=True, **entry)}, 72)
    16
    """
    spans = [
        e.size * e.stride
        for dim, e in placement.items()
        if e.size > 1
        and dim not in GRADIENT_GROUPS  # the groups of DP and CP, which are already counted
        and (e.within_domain or (dim in INSIDE_DIMENSIONS and e.size * e.stride <= per_domain))
    ]
    return math.lcm(*spans) if spans else 1


def inside_block_size(placement: dict[str, PlacementEntry], per_domain: int) -> int:
    """:func:`block_size` of the TP and EP groups alone (the dimensions whose collectives run
    every layer): the block a placement falls back to keeping whole when the plan's other
    in-domain dimensions (CP, a small DP) cannot all stay inside one domain on the nodes free.

    >>> from planner.specs.result import PlacementEntry
    >>> entry = dict(link="", bandwidth_GB_per_s=1.0, example_group=[0])
    >>> inside = dict(tier="scale_up", within_domain=True, **entry)
    >>> plan = {"tp": PlacementEntry(size=4, stride=1, **inside),
    ...         "cp": PlacementEntry(size=2, stride=4, **inside)}
    >>> block_size(plan, 8), inside_block_size(plan, 8)
    (8, 4)
    """
    return block_size({d: e for d, e in placement.items() if d in INSIDE_DIMENSIONS}, per_domain)


@dataclass(frozen=True)
class PlacementProblem:
    """The prepared integer data of one placement (nodes with at least one free accelerator)."""

    num_ranks: int
    """Ranks to place (N)."""
    block: int
    """Consecutive ranks that must share a domain (B); N is a multiple of it."""
    per_node: int
    """Accelerators per node (g)."""
    nodes: np.ndarray
    """Node index of each row."""
    domain: np.ndarray
    """Scale-up domain of each row."""
    unit: np.ndarray
    """Scalable unit of each row."""
    free: np.ndarray
    """Free accelerators of each row."""
    level: np.ndarray
    """Speed level of each row: 0 = healthy, then one level per distinct slower factor."""

    @property
    def num_levels(self) -> int:
        """Distinct speed levels."""
        return int(self.level.max()) + 1 if len(self.level) else 1


def placement_problem(availability: Availability, num_ranks: int, block: int) -> PlacementProblem:
    """The placement data of ``num_ranks`` ranks in blocks of ``block`` on what is free."""
    if num_ranks % block:
        raise InternalError(f"{num_ranks} ranks are not whole blocks of {block}")
    free = availability.free_per_node
    rows = np.flatnonzero(free > 0)
    speed = availability.node_speed[rows]
    levels = sorted({float(s) for s in speed}, reverse=True)
    if 1.0 not in levels:
        levels.insert(0, 1.0)
    level = np.array([levels.index(float(s)) for s in speed], dtype=np.int64)
    return PlacementProblem(
        num_ranks=num_ranks,
        block=block,
        per_node=availability.fabric.per_node,
        nodes=rows,
        domain=availability.node_domain[rows],
        unit=availability.node_unit[rows],
        free=free[rows],
        level=level,
    )


def objective_weights(problem: PlacementProblem) -> tuple[int, ...]:
    """Weight of each objective term so that the sum orders them lexicographically; a term whose
    weight would pass MAX_OBJECTIVE gets 0 (dropped, least significant first)."""
    sizes = (
        problem.num_levels,
        int((problem.level > 0).sum()) + 1,
        len(problem.nodes) + 1,
        len(np.unique(problem.unit)) + 1,
        len(np.unique(problem.domain)) + 1,
    )
    weights = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        weights[i] = weights[i + 1] * sizes[i + 1]
    while weights[0] * sizes[0] >= MAX_OBJECTIVE:  # drop the least significant term
        last = max(i for i, w in enumerate(weights) if w)
        weights = [w // sizes[last] if i < last else 0 for i, w in enumerate(weights)]
    return tuple(weights)


def objective_terms(problem: PlacementProblem, gpus: np.ndarray) -> tuple[int, ...]:
    """The five objective terms of a placement giving ``gpus[k]`` accelerators of row k."""
    used = gpus > 0
    if not used.any():
        return (0, 0, 0, 0, 0)
    ragged = used & (gpus < problem.per_node)
    return (
        int(problem.level[used].max()),
        int((used & (problem.level > 0)).sum()),
        int(ragged.sum()),
        len(np.unique(problem.unit[used])),
        len(np.unique(problem.domain[used])),
    )


def objective_value(problem: PlacementProblem, gpus: np.ndarray) -> int:
    """The integer objective CP-SAT minimises, for any assignment (the brute-force twin's)."""
    terms = objective_terms(problem, gpus)
    return sum(w * t for w, t in zip(objective_weights(problem), terms, strict=True))


def is_feasible(problem: PlacementProblem, gpus: np.ndarray) -> bool:
    """Whether ``gpus`` places every rank in whole blocks per domain on free accelerators."""
    if (gpus < 0).any() or (gpus > problem.free).any() or gpus.sum() != problem.num_ranks:
        return False
    per_domain = np.bincount(problem.domain, weights=gpus)
    return bool((np.rint(per_domain).astype(np.int64) % problem.block == 0).all())


class PlacementSolver:
    """The CP-SAT model of one :class:`PlacementProblem` (OR-Tools imported here only).

    Nodes are aggregated into classes of interchangeable nodes: same scale-up domain, scalable
    unit, free accelerators and speed level (where a domain is one node, as on HGX boards, the
    domain is left out of the key), so a 2,048-node cluster with a few holes
    is a few hundred integer counts. Inside a class, at most one node gives part of its free
    accelerators (two partial nodes of one class can always be merged without a worse
    objective), and the counts are handed to the lowest-numbered nodes of the class.
    """

    def __init__(self, problem: PlacementProblem, config: SolverConfig) -> None:
        from ortools.sat.python import cp_model

        self._p = problem
        self._config = config
        self._model = cp_model.CpModel()
        self._single = _one_node_domains(problem)
        self._classes = _classes(problem, by_domain=not self._single)
        self._add_variables()
        self._add_constraints()
        self._add_objective()

    def _add_variables(self) -> None:
        p, m = self._p, self._model
        self._count: list[object] = []  # nodes of the class used (any amount)
        self._ragged: list[object] = []  # nodes of the class used but not full
        self._gpus: list[object] = []  # accelerators the class gives
        self._used = [m.new_bool_var(f"used_c{c}") for c in range(len(self._classes))]
        self._parts: list[dict[str, object]] = []
        for c, (_, rows) in enumerate(self._classes):
            free, n = int(p.free[rows[0]]), len(rows)
            if self._single:  # nodes giving j blocks, j = 1 .. free // B
                by_j = {j: m.new_int_var(0, n, f"c{c}_j{j}") for j in range(1, free // p.block + 1)}
                self._parts.append(by_j)
                self._count.append(sum(by_j.values()))
                self._gpus.append(sum(j * p.block * v for j, v in by_j.items()))
                self._ragged.append(sum(v for j, v in by_j.items() if j * p.block < p.per_node))
            else:  # nodes giving all they have, and at most one giving part of it
                whole = m.new_int_var(0, n, f"c{c}_whole")
                part = m.new_bool_var(f"c{c}_part")
                rest = m.new_int_var(0, free - 1, f"c{c}_rest")
                self._parts.append({"whole": whole, "part": part, "rest": rest})
                self._count.append(whole + part)
                self._gpus.append(free * whole + rest)
                self._ragged.append(whole + part if free < p.per_node else part)
        self._units = {int(u): m.new_bool_var(f"unit_{u}") for u in np.unique(p.unit)}
        self._slowest = m.new_int_var(0, p.num_levels - 1, "slowest_level")
        if not self._single:
            self._domains = {int(d): np.flatnonzero(p.domain == d) for d in np.unique(p.domain)}
            self._x = {
                d: m.new_int_var(0, int(p.free[rows].sum()) // p.block, f"blocks_d{d}")
                for d, rows in self._domains.items()
            }
            self._dom_used = {d: m.new_bool_var(f"domain_{d}") for d in self._domains}

    def _add_constraints(self) -> None:
        p, m = self._p, self._model
        for c, (_, rows) in enumerate(self._classes):
            n = len(rows)
            m.add(self._count[c] <= n)
            m.add(self._count[c] <= n * self._used[c])
            m.add(self._units[int(p.unit[rows[0]])] >= self._used[c])
            level = int(p.level[rows[0]])
            if level > 0:
                m.add(self._slowest >= level * self._used[c])
            if not self._single:
                parts = self._parts[c]
                m.add(parts["rest"] >= parts["part"])  # type: ignore[operator]
                m.add(parts["rest"] <= (int(p.free[rows[0]]) - 1) * parts["part"])  # type: ignore[operator]
                m.add(self._dom_used[int(p.domain[rows[0]])] >= self._used[c])
        m.add(sum(self._gpus) == p.num_ranks)  # type: ignore[arg-type]
        self._add_cover_cuts()
        if self._single:
            return
        of_domain: dict[int, list[int]] = {}
        for c, (_, rows) in enumerate(self._classes):
            of_domain.setdefault(int(p.domain[rows[0]]), []).append(c)
        for d, classes in of_domain.items():  # whole blocks per domain
            m.add(sum(self._gpus[c] for c in classes) == p.block * self._x[d])  # type: ignore[misc]

    def _add_cover_cuts(self) -> None:
        """Redundant knapsack covers: the units (and domains) used must hold N accelerators.
        Implied by the model, but stated they give CP-SAT the bound "the k largest units hold
        fewer than N" at once (a 16,384-GPU case proves optimal in 0.1 s instead of 1.5 s)."""
        p, m = self._p, self._model
        unit_free = np.bincount(p.unit, weights=p.free)
        m.add(sum(int(unit_free[u]) * v for u, v in self._units.items()) >= p.num_ranks)
        if not self._single:
            m.add(
                sum(
                    (int(p.free[rows].sum()) // p.block * p.block) * self._dom_used[d]
                    for d, rows in self._domains.items()
                )
                >= p.num_ranks
            )

    def _add_objective(self) -> None:
        p = self._p
        w = objective_weights(p)
        slow = [self._count[c] for c, (_, rows) in enumerate(self._classes) if p.level[rows[0]] > 0]
        domains = sum(self._count) if self._single else sum(self._dom_used.values())
        self._model.minimize(
            w[0] * self._slowest
            + w[1] * sum(slow)  # type: ignore[arg-type]
            + w[2] * sum(self._ragged)  # type: ignore[arg-type]
            + w[3] * sum(self._units.values())
            + w[4] * domains  # type: ignore[operator]
        )

    def add_hint(self, gpus: np.ndarray) -> None:
        """Start the search from a known feasible per-node assignment."""
        p = self._p
        for c, (_, rows) in enumerate(self._classes):
            given = gpus[rows]
            parts = self._parts[c]
            if self._single:
                for j, var in parts.items():
                    self._model.add_hint(var, int((given == j * p.block).sum()))  # type: ignore[arg-type]
                continue
            free = int(p.free[rows[0]])
            partial = given[(given > 0) & (given < free)]
            if len(partial) > 1:  # not the canonical shape: no hint for this class
                continue
            self._model.add_hint(parts["whole"], int((given == free).sum()))  # type: ignore[arg-type]
            self._model.add_hint(parts["part"], len(partial))  # type: ignore[arg-type]
            self._model.add_hint(parts["rest"], int(partial.sum()))  # type: ignore[arg-type]

    def _per_node(self, solver: object) -> np.ndarray:
        """The solution as accelerators per node row (lowest-numbered nodes of a class first)."""
        p = self._p
        gpus = np.zeros(len(p.nodes), dtype=np.int64)
        for c, (_, rows) in enumerate(self._classes):
            parts = self._parts[c]
            values: list[int] = []
            if self._single:
                for j in sorted(parts, reverse=True):  # type: ignore[type-var]
                    values += [int(j) * p.block] * int(solver.value(parts[j]))  # type: ignore[attr-defined]
            else:
                free = int(p.free[rows[0]])
                values = [free] * int(solver.value(parts["whole"]))  # type: ignore[attr-defined]
                if solver.value(parts["part"]):  # type: ignore[attr-defined]
                    values.append(int(solver.value(parts["rest"])))  # type: ignore[attr-defined]
            gpus[rows[: len(values)]] = values
        return gpus

    def solve(self) -> tuple[np.ndarray | None, SubproblemInfo]:
        """(accelerators per node row, or None when infeasible; what the solve did)."""
        from planner.search.solve.cpsat import solve_model, subproblem_info

        solved = solve_model(self._model, self._config)
        solver, found = solved.solver, solved.found
        info = subproblem_info("placement", self._model, solved, OBJECTIVE_TERMS)
        return (self._per_node(solver) if found else None), info


def _one_node_domains(problem: PlacementProblem) -> bool:
    """Whether every scale-up domain is one node (HGX boards): blocks then fit per node."""
    return (
        len(np.unique(problem.domain)) == len(problem.domain) and problem.block <= problem.per_node
    )


def _classes(
    problem: PlacementProblem, *, by_domain: bool
) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """Rows grouped into classes of interchangeable nodes (rows in node order), keyed by
    (domain, unit, free, level), or (unit, free, level) when every domain is one node."""
    columns = [problem.unit, problem.free, problem.level]
    if by_domain:  # a domain may span scalable units: both in the key
        columns.insert(0, problem.domain)
    keys = np.stack(columns, axis=1)
    out: dict[tuple[int, ...], list[int]] = {}
    for i, key in enumerate(map(tuple, keys.tolist())):
        out.setdefault(key, []).append(i)
    return [(k, np.array(v, dtype=np.int64)) for k, v in sorted(out.items())]


def greedy_gpus(problem: PlacementProblem) -> np.ndarray | None:
    """A feasible assignment by first fit (fastest nodes, full nodes, lowest index first), or
    None when first fit finds none: the solver's starting hint."""
    gpus = np.zeros(len(problem.nodes), dtype=np.int64)
    left = problem.num_ranks // problem.block
    order = np.lexsort((problem.nodes, problem.free < problem.per_node, problem.level))
    by_domain: dict[int, list[int]] = {}
    for i in order:
        by_domain.setdefault(int(problem.domain[i]), []).append(int(i))
    for d in sorted(by_domain, key=lambda d: min(problem.level[by_domain[d]])):
        rows = by_domain[d]
        blocks = min(left, int(problem.free[rows].sum()) // problem.block)
        need = blocks * problem.block
        for i in rows:
            take = min(need, int(problem.free[i]))
            gpus[i] = take
            need -= take
        left -= blocks
        if left == 0:
            return gpus
    return None


def ordered_positions(availability: Availability, problem: PlacementProblem,
                      gpus: np.ndarray) -> np.ndarray:  # fmt: skip
    """Rank -> accelerator position for an assignment: domains in index order, full nodes then
    ragged ones inside a domain, each node's free GPUs in index order."""
    fab = availability.fabric
    free = availability.free.reshape(-1, fab.per_node)
    used = np.flatnonzero(gpus > 0)
    order = sorted(
        used, key=lambda i: (problem.domain[i], gpus[i] < problem.per_node, problem.nodes[i])
    )
    out = []
    for i in order:
        node = int(problem.nodes[i])
        local = np.flatnonzero(free[node])[: int(gpus[i])]
        out.append(node * fab.per_node + local)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def fallback_positions(availability: Availability, num_ranks: int) -> np.ndarray:
    """The fastest free accelerators, whole nodes first, then in position order (used when no
    placement keeps every block inside one domain)."""
    fab = availability.fabric
    free = availability.free.reshape(-1, fab.per_node)
    count = free.sum(axis=1)
    nodes = np.lexsort((np.arange(fab.num_nodes), count < fab.per_node, -availability.node_speed))
    chosen: list[int] = []
    for node in nodes:
        if len(chosen) >= num_ranks:
            break
        chosen.extend(node * fab.per_node + np.flatnonzero(free[node]))
    return np.sort(np.array(chosen[:num_ranks], dtype=np.int64))


def default_positions(availability: Availability, num_ranks: int) -> np.ndarray | None:
    """The first ``num_ranks`` free accelerators in position order (a launcher's hostfile of the
    free nodes, without the planner), or None when fewer are free."""
    free = np.flatnonzero(availability.free)
    return free[:num_ranks] if len(free) >= num_ranks else None


@dataclass(frozen=True)
class Placement:
    """Where the ranks of one job go."""

    positions: np.ndarray
    """Rank -> accelerator position of the cluster."""
    whole_blocks: bool
    """Every block (TP / EP group span) sits inside one scale-up domain."""
    info: SubproblemInfo | None
    """The CP-SAT solve (None when none was needed)."""


def solve_placement(
    availability: Availability, num_ranks: int, block: int, config: SolverConfig
) -> Placement:
    """Place ``num_ranks`` ranks in blocks of ``block`` on the free accelerators (CP-SAT).
    InfeasibleError when fewer accelerators are free than the job has ranks."""
    free = int(availability.free.sum())
    if free < num_ranks:
        down, taken = int(availability.down.sum()), int(availability.taken.sum())
        raise InfeasibleError(
            f"the layout needs {num_ranks:,} accelerators; the cluster state leaves {free:,} "
            f"free ({down:,} down, {taken:,} taken): short by {num_ranks - free:,}"
        )
    problem = placement_problem(availability, num_ranks, block)
    solver = PlacementSolver(problem, config)
    hint = greedy_gpus(problem)
    if hint is not None:
        solver.add_hint(hint)
    gpus, info = solver.solve()
    if gpus is None:
        placement = Placement(fallback_positions(availability, num_ranks), False, info)
    else:
        placement = Placement(ordered_positions(availability, problem, gpus), True, info)
    validate_placement(availability, placement, num_ranks, block)
    return placement


def placement_problems(
    availability: Availability, positions: np.ndarray, num_ranks: int, block: int, whole: bool
) -> list[str]:
    """Everything wrong with a rank -> accelerator map (solver-independent, STYLE.md rule 11):
    not one accelerator per rank, an accelerator twice, one that is down or taken, or (when the
    placement claims whole blocks) a block of ``block`` ranks in several domains."""
    problems = []
    if len(positions) != num_ranks:
        problems.append(f"{len(positions)} accelerators for {num_ranks} ranks")
    if len(np.unique(positions)) != len(positions):
        problems.append("an accelerator holds two ranks")
    if len(positions) and not availability.free[positions].all():
        problems.append(f"{int((~availability.free[positions]).sum())} rank(s) on a GPU not free")
    if whole and len(positions) == num_ranks and num_ranks % block == 0:
        domains = availability.fabric.domain(positions).reshape(-1, block)
        split = int((~(domains == domains[:, :1]).all(axis=1)).sum())
        if split:
            problems.append(f"{split} block(s) of {block} ranks span several domains")
    return problems


def validate_placement(
    availability: Availability, placement: Placement, num_ranks: int, block: int
) -> None:
    """Raise InternalError when :func:`placement_problems` finds anything."""
    problems = placement_problems(
        availability, placement.positions, num_ranks, block, placement.whole_blocks
    )
    if problems:
        raise InternalError(f"placement failed validation: {'; '.join(problems)}")
