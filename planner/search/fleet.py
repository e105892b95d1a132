"""CP-SAT for fleets (``layout pack``): one layout per job, disjoint placements on one cluster
or a pool of partitions of different hardware.

Rows (prepared by the existing searches, STYLE.md rule 10): for each job, each partition it may
use and each legal GPU count up to what the partition has free (a 1-1.5-2-3-4-6-8 ladder of
whole units, and the largest count), the best plan of :func:`planner.search.engine.search`
(training) or :func:`planner.search.serving_search.serve_search` (serving) at that count. A row
carries its partition, GPUs, block size (consecutive ranks that must share a scale-up domain:
:func:`planner.search.placement.block_size`) and throughput. A row that misses its job's target,
or that gives no more tokens/s than a row of the same job and partition with fewer GPUs, is
dropped.

Variables: one Boolean per row (picked); per row and scale-up domain (or class of identical
domains), the blocks of the row that domain holds.
Constraints: exactly one row per job; a picked row's blocks all placed (sum = GPUs / block);
no domain holds more than its free accelerators (shared domain and rack capacity).
Objective, by what the jobs ask:

* every job has a weight (default 1): maximise sum_j weight_j x share_j, share_j = the row's
  tokens/s over the job's best tokens/s on any row (unitless, so a 8B and a 405B job compare);
* every job has a target: meet them all with the fewest accelerators (ties: the larger sum of
  shares);
* some of each: the weighted sum first, then the fewest accelerators for the targeted jobs.

Identical domains of a partition are one class of count m when every block size of its rows
divides the domain size and the sizes divide one another (1, 2, 4, 8 on 8-GPU boards): blocks
then fit m domains exactly when their total fits m x capacity, so the class needs one integer
per row, not one per domain. Otherwise every domain is its own class.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from planner.catalog.fleet import Job, Partition
from planner.errors import InfeasibleError, InternalError, PlannerError, SpecError
from planner.search import engine, serving_search
from planner.search.arguments import check_fix
from planner.search.placement import block_size
from planner.search.pool import ProgressCallback, local_processes, no_progress, run_local, warn_note
from planner.search.state import largest_legal_count
from planner.specs.cluster import ClusterSpec
from planner.specs.cluster_state import SubproblemInfo
from planner.specs.fleet import DomainShare, PackedJob, PackResult, PartitionUse
from planner.specs.result import Plan, ServePlan
from planner.specs.solver_config import SolverConfig
from planner.topology.state import Availability, apply_state
from planner.topology.structure import fabric_of

SHARE_SCALE = 10_000
"""Integer resolution of a job's share of its best throughput (0.01%)."""
WEIGHT_SCALE = 1_000
"""Integer resolution of a job's weight."""


@dataclass(frozen=True)
class Row:
    """One candidate (job, partition, GPU count) with the plan the search found for it."""

    job: int
    """Job index."""
    partition: int
    """Partition index."""
    gpus: int
    """Accelerators."""
    block: int
    """Consecutive ranks that must share a scale-up domain."""
    tokens_per_s: float
    """Training tokens/s or serving output tokens/s."""
    plan: Plan | ServePlan
    """The search's best plan at this count."""


@dataclass(frozen=True)
class FleetProblem:
    """The prepared integer data of one pack."""

    row_job: list[int]
    """Job of each row."""
    row_partition: list[int]
    """Partition of each row."""
    row_gpus: list[int]
    """Accelerators of each row."""
    row_block: list[int]
    """Block size of each row."""
    row_cost: list[int]
    """Integer cost of picking each row (the objective minimises the sum)."""
    capacity: list[list[int]]
    """Per partition, the free accelerators of each scale-up domain."""
    num_jobs: int
    """Jobs (each gets exactly one row)."""


def row_costs(rows: list[Row], jobs: list[Job], capacity_gpus: int) -> tuple[list[int], str]:
    """(integer cost per row, the objective in words); see the module doc."""
    best = [
        max((r.tokens_per_s for r in rows if r.job == j), default=1.0) for j in range(len(jobs))
    ]
    share = [round(SHARE_SCALE * r.tokens_per_s / best[r.job]) if best[r.job] else 0 for r in rows]
    targeted = [j.spec.target is not None for j in jobs]
    weight = [round(WEIGHT_SCALE * (j.spec.weight or 1.0)) for j in jobs]
    if not any(targeted):
        return [-weight[r.job] * s for r, s in zip(rows, share, strict=True)], (
            "max sum of weight x share of best tokens/s"
        )
    if all(targeted):
        scale = SHARE_SCALE * len(jobs) + 1
        return [r.gpus * scale - s for r, s in zip(rows, share, strict=True)], (
            "min accelerators meeting every target (ties: max sum of shares of best tokens/s)"
        )
    scale = capacity_gpus + 1
    return [
        r.gpus if targeted[r.job] else -weight[r.job] * s * scale
        for r, s in zip(rows, share, strict=True)
    ], "max sum of weight x share of best tokens/s, then min accelerators of the targeted jobs"


def _chain(sizes: list[int], capacity: int) -> bool:
    """Whether every size divides ``capacity`` and the sizes divide one another.

    >>> _chain([8, 2, 4], 8), _chain([16, 8], 72), _chain([6, 4], 12)
    (True, False, False)
    """
    ordered = sorted(set(sizes))
    return all(capacity % s == 0 for s in ordered) and all(
        b % a == 0 for a, b in itertools.pairwise(ordered)
    )


def domain_classes(problem: FleetProblem, partition: int) -> list[list[int]]:
    """The partition's domains grouped into classes (lists of domain indices): identical
    capacities together when the rows' blocks form a divisibility chain into it, else one
    domain per class."""
    caps = problem.capacity[partition]
    sizes = [
        b for b, p in zip(problem.row_block, problem.row_partition, strict=True) if p == partition
    ]
    by_capacity: dict[int, list[int]] = {}
    for d, c in enumerate(caps):
        if c > 0:
            by_capacity.setdefault(c, []).append(d)
    out: list[list[int]] = []
    for c, domains in sorted(by_capacity.items()):
        if _chain(sizes, c):
            out.append(domains)
        else:
            out.extend([d] for d in domains)
    return out


class FleetSolver:
    """The CP-SAT model of one :class:`FleetProblem` (OR-Tools imported here only)."""

    def __init__(self, problem: FleetProblem, config: SolverConfig) -> None:
        from ortools.sat.python import cp_model

        self._p = problem
        self._config = config
        self._model = cp_model.CpModel()
        self._classes = [domain_classes(problem, q) for q in range(len(problem.capacity))]
        self._add_variables()
        self._add_constraints()
        self._add_objective()

    def _add_variables(self) -> None:
        p, m = self._p, self._model
        self._pick = [m.new_bool_var(f"pick_{r}") for r in range(len(p.row_job))]
        self._blocks: dict[tuple[int, int], object] = {}  # (row, class) -> blocks
        for r, (q, b) in enumerate(zip(p.row_partition, p.row_block, strict=True)):
            for k, domains in enumerate(self._classes[q]):
                cap = p.capacity[q][domains[0]]
                if b <= cap:
                    self._blocks[r, k] = m.new_int_var(0, len(domains) * (cap // b), f"b_{r}_{k}")

    def _add_constraints(self) -> None:
        p, m = self._p, self._model
        for j in range(p.num_jobs):  # one row per job
            m.add_exactly_one([x for r, x in enumerate(self._pick) if p.row_job[r] == j])
        for r, x in enumerate(self._pick):  # a picked row's blocks all placed
            placed = [v for (row, _), v in self._blocks.items() if row == r]
            m.add(sum(placed) == (p.row_gpus[r] // p.row_block[r]) * x)  # type: ignore[arg-type]
        for q, classes in enumerate(self._classes):  # shared domain capacity
            for k, domains in enumerate(classes):
                load = [
                    p.row_block[r] * v
                    for (r, kk), v in self._blocks.items()
                    if kk == k and p.row_partition[r] == q
                ]
                if load:
                    m.add(sum(load) <= len(domains) * p.capacity[q][domains[0]])  # type: ignore[arg-type]

    def _add_objective(self) -> None:
        self._model.minimize(sum(c * x for c, x in zip(self._p.row_cost, self._pick, strict=True)))

    def solve(self) -> tuple[list[int] | None, dict[tuple[int, int], int], SubproblemInfo]:
        """(picked row per job or None, blocks per (row, domain), what the solve did)."""
        from planner.search.solve.cpsat import solve_model, subproblem_info

        solved = solve_model(self._model, self._config)
        solver, found = solved.solver, solved.found
        info = subproblem_info("fleet", self._model, solved, "sum of row costs (see objective)")
        if not found:
            return None, {}, info
        picked = [r for r, x in enumerate(self._pick) if solver.boolean_value(x)]
        per_job = sorted(picked, key=lambda r: self._p.row_job[r])
        return per_job, self._per_domain(solver, set(picked)), info

    def _per_domain(self, solver: object, picked: set[int]) -> dict[tuple[int, int], int]:
        """Blocks per (row, domain): a class's blocks spread first-fit, largest first."""
        p = self._p
        out: dict[tuple[int, int], int] = {}
        for q, classes in enumerate(self._classes):
            for k, domains in enumerate(classes):
                left = {d: p.capacity[q][d] for d in domains}
                rows = sorted(
                    (
                        r
                        for (r, kk) in self._blocks
                        if kk == k and p.row_partition[r] == q and r in picked
                    ),
                    key=lambda r: -p.row_block[r],
                )
                for r in rows:
                    count = int(solver.value(self._blocks[r, k]))  # type: ignore[attr-defined]
                    for _ in range(count):
                        d = next((d for d in domains if left[d] >= p.row_block[r]), None)
                        if d is None:
                            raise InternalError("fleet: a class's blocks do not fit its domains")
                        left[d] -= p.row_block[r]
                        out[r, d] = out.get((r, d), 0) + 1
        return out


def fleet_value(problem: FleetProblem, picks: list[int]) -> int:
    """The objective of one row per job (the brute-force twin's)."""
    return sum(problem.row_cost[r] for r in picks)


def _counts(partition: Partition, capacity: int) -> list[int]:
    """Legal GPU counts of a partition up to ``capacity``: the search's ladder and the top."""
    top = largest_legal_count(partition.cluster, capacity)
    if top is None:
        return []
    return engine.gpu_counts(partition.cluster, top, fewest=True)


def _throughput(plan: Plan | ServePlan) -> float:
    return plan.tokens_per_s if isinstance(plan, Plan) else plan.throughput_tokens_per_s


def _meets(job: Job, plan: Plan | ServePlan) -> bool:
    target = job.spec.target
    if target is None:
        return True
    if target.tokens_per_s is not None:
        return _throughput(plan) >= target.tokens_per_s
    return isinstance(plan, Plan) and plan.step_time_s <= (target.step_time_s or 0.0)


class RowRequest(NamedTuple):
    """One search a pack runs: a job's best plan on the first accelerators of a partition."""

    job: Job
    cluster: ClusterSpec
    """The partition's first N accelerators, N a legal count (:func:`planner.search.engine.
    sub_cluster`)."""
    config: SolverConfig
    """The pack's solver settings, ``top`` 1 (one plan per row)."""


class RowAnswer(NamedTuple):
    """What one :class:`RowRequest` found: a plan, or why there is none (one line)."""

    plan: Plan | ServePlan | None
    refused: str | None = None
    """The request itself is bad input (a SpecError): the job or partition is refused."""
    infeasible: str | None = None
    """Nothing fits, or no layout meets the job's limits, at this count (a PlannerError)."""


def search_row(request: RowRequest) -> RowAnswer:
    """The best plan of one (job, partition, count), or its refusal as data (module-level and
    picklable both ways, so that a pool of processes can run it)."""
    job = request.job
    run = serving_search.serve_search if job.spec.mode == "serve" else engine.search
    try:
        plan = run(  # type: ignore[operator]
            job.model, request.cluster, job.workload, fix=dict(job.spec.fix), config=request.config
        ).best
    except SpecError as exc:  # the job's request itself (or this partition) is refused
        return RowAnswer(None, refused=str(exc))
    except PlannerError as exc:
        return RowAnswer(None, infeasible=str(exc))
    return RowAnswer(plan)


def row_requests(
    job: Job, partitions: list[Partition], capacity: list[int], config: SolverConfig
) -> list[tuple[int, int, RowRequest]]:
    """The searches a job's rows need, in the order its rows are built: (partition index, GPU
    count, request) for each partition the job may use and each legal count up to what the
    partition has free."""
    allowed = job.spec.partitions
    search_config = config.model_copy(update={"top": 1})
    out = []
    for q, part in enumerate(partitions):
        if allowed is not None and part.name not in allowed:
            continue
        for n in _counts(part, capacity[q]):
            out.append((q, n, RowRequest(job, engine.sub_cluster(part.cluster, n), search_config)))
    return out


def job_rows(
    index: int,
    job: Job,
    partitions: list[Partition],
    searched: list[tuple[int, int, RowAnswer]],
) -> tuple[list[Row], list[str]]:
    """A job's candidate rows from its searches (``searched``: (partition index, GPU count,
    answer) in :func:`row_requests`' order): one per partition and legal count with a plan,
    dominated and target-missing rows dropped; and why the others have none."""
    rows: list[Row] = []
    reasons: list[str] = []
    refused: list[str] = []
    best_tokens: dict[int, float] = {}
    for q, n, answer in searched:
        part = partitions[q]
        if answer.refused is not None:
            reasons.append(f"{n} GPUs of {part.name}: {answer.refused}")
            refused.append(answer.refused)
            continue
        if answer.plan is None:
            reasons.append(f"{n} GPUs of {part.name}: {answer.infeasible}")
            continue
        plan = answer.plan
        tokens = _throughput(plan)
        if not _meets(job, plan):
            reasons.append(
                f"{n} GPUs of {part.name}: {tokens:,.0f} tokens/s"
                + (f", {plan.step_time_s:.3g} s per step" if isinstance(plan, Plan) else "")
                + f" misses the target ({job.spec.target.describe()})"  # type: ignore[union-attr]
            )
            continue
        if tokens <= best_tokens.get(q, 0.0):  # more GPUs, no more throughput: dominated
            continue
        best_tokens[q] = tokens
        block = block_size(plan.placement, part.cluster.accelerators_per_domain)
        rows.append(Row(index, q, plan.num_gpus, block, tokens, plan))
    if not rows and reasons and len(refused) == len(reasons):  # bad input everywhere: exit 2
        raise SpecError(f"job '{job.name}': {refused[0]}")
    return rows, reasons


def _capacities(partitions: list[Partition]) -> tuple[list[list[int]], list[Availability | None]]:
    """Per partition, free accelerators of each domain on fully free nodes (whole nodes)."""
    out, avails = [], []
    for part in partitions:
        fab = fabric_of(part.cluster)
        if part.state is None:
            caps = [min(fab.per_domain, fab.num_accelerators - d * fab.per_domain)
                    for d in range(fab.num_domains)]  # fmt: skip
            avails.append(None)
        else:
            avail = apply_state(part.cluster, part.state)
            whole = (avail.free_per_node == fab.per_node) * fab.per_node
            caps = [
                int(v)
                for v in np.bincount(avail.node_domain, weights=whole, minlength=fab.num_domains)
            ]
            avails.append(avail)
        out.append(caps)
    return out, avails


def _binding_limit(
    jobs: list[Job], rows: list[Row], partitions: list[Partition], capacity: list[list[int]]
) -> str:
    """Why no packing exists when every job has rows: the smallest rows per partition against
    the free accelerators, else the domains' fragmentation."""
    smallest = {j: min(r.gpus for r in rows if r.job == j) for j in range(len(jobs))}
    need = sum(smallest.values())
    free = sum(sum(c) for c in capacity)
    parts = ", ".join(f"'{jobs[j].name}' {n}" for j, n in smallest.items())
    if need > free:
        return (
            f"the jobs' smallest layouts need {need:,} accelerators ({parts}) but "
            f"{'the pool' if len(partitions) > 1 else partitions[0].name} has {free:,} free: "
            f"short by {need - free:,}"
        )
    blocks = ", ".join(
        f"'{jobs[j].name}' blocks of {min(r.block for r in rows if r.job == j)}"
        for j in range(len(jobs))
    )
    return (
        f"the jobs' smallest layouts need {need:,} of {free:,} free accelerators ({parts}) but "
        f"their groups do not fit the scale-up domains together ({blocks}; domains of "
        f"{', '.join(str(max(c)) for c in capacity)})"
    )


def pack(
    jobs: list[Job],
    partitions: list[Partition],
    *,
    cluster_name: str,
    config: SolverConfig | None = None,
    workers: int = 1,
    progress: ProgressCallback | None = None,
    note: Callable[[str], None] | None = None,
) -> PackResult:
    """One layout per job and disjoint placements (see the module doc); InfeasibleError naming
    the binding limit when no packing exists. ``workers``: local processes that run the rows'
    searches (at most the cores and the searches; 1 = here), the same answer with any number;
    ``progress(done, total)`` after each search; ``note`` gets one line when fewer processes
    start than ``workers`` asks (default: a UserWarning)."""
    start = time.perf_counter()
    config = config or SolverConfig()
    capacity, _ = _capacities(partitions)
    totals = [sum(c) for c in capacity]
    for job in jobs:  # bad pins are bad input (exit 2), not "no layout"
        try:
            if job.spec.mode == "serve":
                serving_search._serve_pins(dict(job.spec.fix))
            else:
                check_fix(dict(job.spec.fix))
        except SpecError as exc:
            raise SpecError(f"job '{job.name}': {exc}") from None
        unknown = sorted(set(job.spec.partitions or []) - {p.name for p in partitions})
        if unknown:
            raise SpecError(
                f"job '{job.name}': partition '{unknown[0]}' is not in {cluster_name} "
                f"({', '.join(p.name for p in partitions)})"
            )
    requests = [row_requests(job, partitions, totals, config) for job in jobs]
    count = sum(len(r) for r in requests)
    processes, line = local_processes(workers, count)
    if line is not None:
        (note or warn_note)(line)
    answers = iter(
        run_local(
            search_row,
            (request for job_requests in requests for _, _, request in job_requests),
            count,
            processes,
            progress or no_progress,
        )
    )
    rows: list[Row] = []
    for j, job in enumerate(jobs):
        searched = [(q, n, next(answers)) for q, n, _ in requests[j]]
        found, reasons = job_rows(j, job, partitions, searched)
        if not found:
            why = reasons[-1] if reasons else "no partition allowed"
            raise InfeasibleError(
                f"job '{job.name}' ({job.model.name}, {job.spec.mode}) has no layout on "
                f"{cluster_name}: {why}"
            )
        rows.extend(found)
    costs, words = row_costs(rows, jobs, sum(totals))
    problem = FleetProblem(
        row_job=[r.job for r in rows],
        row_partition=[r.partition for r in rows],
        row_gpus=[r.gpus for r in rows],
        row_block=[r.block for r in rows],
        row_cost=costs,
        capacity=capacity,
        num_jobs=len(jobs),
    )
    picks, blocks, info = FleetSolver(problem, config).solve()
    info = info.model_copy(update={"objective_terms": f"{words} (integer row costs, minimised)"})
    if picks is None:
        raise InfeasibleError(
            f"no packing of {len(jobs)} job(s) on {cluster_name}: "
            + _binding_limit(jobs, rows, partitions, capacity)
        )
    packed = _packed_jobs(jobs, rows, picks, blocks, partitions, capacity)
    used = [sum(p.num_gpus for p, r in zip(packed, picks, strict=True) if rows[r].partition == q)
            for q in range(len(partitions))]  # fmt: skip
    if all(j.spec.target is not None for j in jobs):
        value = float(sum(problem.row_gpus[r] for r in picks))
    else:
        pairs = zip(jobs, packed, strict=True)
        value = sum(
            (j.spec.weight or 1.0) * p.share_of_best for j, p in pairs if j.spec.target is None
        )
    return PackResult(
        cluster=cluster_name,
        objective=words,
        objective_value=value,
        partitions=[
            PartitionUse(
                name=part.name,
                cluster_description=part.cluster.describe(),
                gpus_total=part.cluster.num_accelerators,
                gpus_free=totals[q],
                gpus_used=used[q],
                device_noun=part.cluster.accelerator.device_noun,
            )
            for q, part in enumerate(partitions)
        ],
        jobs=packed,
        gpus_used=sum(used),
        rows_considered=len(rows),
        search_time_s=time.perf_counter() - start,
        subproblems=[info],
    )


def _packed_jobs(
    jobs: list[Job],
    rows: list[Row],
    picks: list[int],
    blocks: dict[tuple[int, int], int],
    partitions: list[Partition],
    capacity: list[list[int]],
) -> list[PackedJob]:
    """Each job's row and its accelerators: in each domain, jobs take consecutive free
    accelerators (whole nodes' worth first), largest block first."""
    out = []
    next_free = [[0] * len(c) for c in capacity]
    order = sorted(picks, key=lambda r: (-rows[r].block, r))
    shares: dict[int, list[DomainShare]] = {}
    for r in order:
        row = rows[r]
        fab = fabric_of(partitions[row.partition].cluster)
        node_free = _free_positions(partitions[row.partition], fab)
        for (rr, d), count in sorted(blocks.items()):
            if rr != r:
                continue
            gpus = count * row.block
            start = next_free[row.partition][d]
            positions = node_free[d][start : start + gpus]
            next_free[row.partition][d] += gpus
            nodes = positions // fab.per_node
            shares.setdefault(r, []).append(
                DomainShare(
                    domain=d, gpus=gpus, first_node=int(nodes.min()), last_node=int(nodes.max())
                )
            )
    best = {j: max(x.tokens_per_s for x in rows if x.job == j) for j in range(len(jobs))}
    for j, r in enumerate(picks):
        row, job = rows[r], jobs[j]
        if row.job != j:
            raise InternalError("fleet: picks are not one per job in order")
        out.append(
            PackedJob(
                name=job.name,
                mode=job.spec.mode,
                model=job.model.name,
                partition=partitions[row.partition].name,
                num_gpus=row.gpus,
                weight=None if job.spec.target is not None else (job.spec.weight or 1.0),
                target=job.spec.target,
                tokens_per_s=row.tokens_per_s,
                best_tokens_per_s=best[j],
                share_of_best=row.tokens_per_s / best[j] if best[j] else 0.0,
                plan=row.plan,
                allocation=shares.get(r, []),
            )
        )
    return out


def _free_positions(partition: Partition, fab: object) -> list[np.ndarray]:
    """Per domain, the positions of its accelerators on fully free nodes, in order."""
    per_domain, per_node = fab.per_domain, fab.per_node  # type: ignore[attr-defined]
    n = fab.num_accelerators  # type: ignore[attr-defined]
    free = np.ones(n, dtype=bool)
    if partition.state is not None:
        avail = apply_state(partition.cluster, partition.state)
        whole = avail.free_per_node == per_node
        free = np.repeat(whole, per_node)[:n]
    positions = np.flatnonzero(free)
    return [positions[(positions // per_domain) == d] for d in range(-(-n // per_domain))]
