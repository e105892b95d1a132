"""CP-SAT: which layers go to which pipeline stage, and how many of each stage's layers recompute
in full (DESIGN.md section 7).

Data (:mod:`planner.search.solve.stage_data`, integers): per decoder layer its micro-batch time,
the time full recomputation adds, its state (weights, gradients, optimizer) and activations kept
and saved by recomputing; per rank the micro-batches in flight and what it holds beyond its
layers (embedding; output layer and loss; MTP modules).
Variables: the boundary b_j between chunk j - 1 and chunk j (b_0 = 0, b_C = L for C = pp x vpp
chunks; chunk c runs on rank c mod pp); each chunk's recomputed layers r_c (its first r_c: one N
for every chunk, r_c = min(N, n_c), with Megatron-LM's block method, or free per chunk); which
chunk holds the MTP modules; whether a rank recomputes at all.
Constraints: the prefix sums of every table read at the boundaries (element constraints: a chunk
sums to P[b_{c+1}] - P[b_c]), per-rank memory within the GPU's usable memory, r_c <= n_c, MTP
after the last decoder layer in a rank's last virtual stage.
Objective: the slowest rank's micro-batch time, which sets the step's m micro-batches per rank;
(m + (pp - 1)/vpp) times it (the pipeline with the bubble of equal chunks, Narayanan et al. 2021
section 2.2) is what the objective reports. The cost model prices the bubble at the slowest
chunk (:func:`planner.cost.step.pipeline_bubble_time`), which the objective does not see: every
split is re-scored by the cost model and kept only when no slower than the even split
(:func:`optimise_pipeline`), so a split that balances the ranks by piling layers into one
chunk pays for its longer fill and drain and loses.

The search loads this module for every plan with pp > 1; OR-Tools (which imports pandas) is
imported only when a split is actually solved (:class:`StageSolver`), not when
:func:`optimise_pipeline` settles it otherwise: an even split (or the solver's start) that
meets a lower bound, the min-max recurrence without interleaving, the exact layer-count
split of a model whose layers are all of one kind, or, for an interleaved split of several
kinds of layer that recomputes nothing, a branch and bound that proves its optimum
(:mod:`planner.search.solve.branch`).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import TYPE_CHECKING, NamedTuple

from planner.cost.step import StepCost
from planner.errors import InternalError
from planner.search.evaluate import fits, score
from planner.search.solve.branch import branch_and_bound_partition
from planner.search.solve.stage_data import (
    Assignment,
    ContiguousSplit,
    StageProblem,
    any_split_time_bound,
    build_stage_problem,
    chunk_times,
    contiguous_lower_bound,
    contiguous_partition,
    evaluate_assignment,
    even_assignment,
    least_recompute_assignment,
    level_chunks,
    lower_bound,
    rank_load_applies,
    rank_load_lower_bound,
    rank_load_work,
    rank_working,
    rounding_slack,
    tables_rounding_slack,
    uniform_lower_bound,
    uniform_partition,
)
from planner.specs.cluster import ClusterSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.result import SolvedBy, StageSolveInfo
from planner.specs.solver_config import TIME_QUANTUM_S, SolverConfig
from planner.specs.workload import TrainWorkload

if TYPE_CHECKING:
    from ortools.sat.python import cp_model


HINT_TIME_LIMIT_S = 0.2
"""Limit of the solve that completes the solver's start (:meth:`StageSolver._complete_hint`):
with the decision variables fixed it is propagation, a few milliseconds."""


class StageSolution(NamedTuple):
    """What one solve found."""

    status: str
    """OPTIMAL, FEASIBLE (time limit hit), INFEASIBLE, MODEL_INVALID or UNKNOWN."""
    assignment: Assignment | None
    """The best partition found (None when none)."""
    objective: int
    """Its slowest rank's micro-batch time (TIME_QUANTUM_S units); 0 when none."""
    best_bound: int
    """CP-SAT's proven lower bound on it."""
    num_variables: int
    """Variables of the model."""
    num_constraints: int
    """Constraints of the model."""
    wall_s: float
    """Building and solving (s)."""


def proved_optimal(assignment: Assignment, value: int, start: float) -> StageSolution:
    """A split proved optimal without a CP-SAT model (no variables, no constraints): its value
    is its bound; ``start`` is when the method began (``time.perf_counter()``)."""
    return StageSolution("OPTIMAL", assignment, value, value, 0, 0, time.perf_counter() - start)


class StageSolver:
    """The CP-SAT model of one :class:`StageProblem`, built in the OR-Tools samples' order."""

    def __init__(
        self,
        problem: StageProblem,
        config: SolverConfig,
        *,
        floor: int | None = None,
        stop_at: int | None = None,
    ) -> None:
        """``floor``: the problem's :func:`lower_bound` (the cut) when the caller already has
        it. ``stop_at``: a lower bound found without the solver (:func:`~planner.search.solve.
        stage_data.rank_load_lower_bound`); the search stops at a solution that reaches it,
        which is then optimal, instead of running on to prove what the bound already does."""
        self._start = time.perf_counter()
        self._p = problem
        self._config = config
        self._floor = floor if floor is not None else lower_bound(problem)
        self._stop_at = stop_at
        self._runs = layer_runs(problem)
        # OR-Tools (which imports pandas) only when a split is solved: most plans' splits are
        # settled by the bound in optimise_pipeline, and the import costs ~0.4 s
        from ortools.sat.python import cp_model

        self._model = cp_model.CpModel()
        self._start_at: tuple[Assignment, int] | None = None
        """The solver's start and its value, when it is a solution (:meth:`_add_hint`)."""
        self._add_variables()
        self._add_constraints()
        self._add_objective()
        self._add_hint(least_recompute_assignment(problem))

    # --- variables ------------------------------------------------------------------------
    def _add_variables(self) -> None:
        p, m = self._p, self._model
        n, chunks = p.num_layers, p.num_chunks
        inner = [m.new_int_var(0, n, f"b_{j}") for j in range(1, chunks)]
        self._bound = [m.new_constant(0), *inner, m.new_constant(n)]
        self._count = [m.new_int_var(0, n, f"n_{c}") for c in range(chunks)]
        self._redo = [m.new_int_var(0, n if p.recompute != "none" else 0, f"r_{c}")
                      for c in range(chunks)]  # fmt: skip
        self._blocks: list[cp_model.IntVar] = []  # per rank: recompute its chunks' first N
        if p.recompute == "block":
            fixed = p.fixed_recompute
            shared = m.new_constant(fixed) if fixed is not None else m.new_int_var(0, n, "N")
            self._blocks = [shared] * p.pp
        elif p.recompute == "per_stage":
            self._blocks = [m.new_int_var(0, n, f"N_{r}") for r in range(p.pp)]
        self._any_redo = [m.new_bool_var(f"z_{r}") for r in range(p.pp)]
        self._mtp = {c: m.new_bool_var(f"q_{c}") for c in p.mtp_chunks} if p.num_mtp else {}
        self._slowest = m.new_int_var(0, self._time_ceiling(), "T")

    def _time_ceiling(self) -> int:
        p = self._p
        return (sum(p.layer_time) + sum(p.recompute_time) + max(p.rank_time, default=0)
                + p.mtp_time)  # fmt: skip

    # --- constraints ----------------------------------------------------------------------
    def _add_constraints(self) -> None:
        p, m = self._p, self._model
        for c in range(p.num_chunks):
            m.add(self._count[c] == self._bound[c + 1] - self._bound[c])
            if c < p.num_chunks - 1:
                m.add(self._count[c] >= p.min_chunk_layers)  # the last chunk may be empty
            m.add(self._redo[c] <= self._count[c])
            m.add(self._redo[c] <= p.num_layers * self._any_redo[c % p.pp])
            if self._blocks:
                m.add_min_equality(self._redo[c], [self._blocks[c % p.pp], self._count[c]])
        if self._mtp:
            m.add_exactly_one(list(self._mtp.values()))
            for c, holds in self._mtp.items():
                m.add(self._bound[c + 1] == p.num_layers).only_enforce_if(holds)
        self._add_rank_loads()

    def _fill(self, index: cp_model.LinearExprT, name: str) -> list[cp_model.LinearExprT]:
        """How many layers of each run lie before layer ``index``: run k holds
        min(len_k, max(0, index - start_k)), written linearly (they sum to ``index``, and a run
        has layers before ``index`` only when every earlier run is full), so a table summed over
        the layers before ``index`` is sum_k value_k x count_k, a linear expression."""
        m = self._model
        if isinstance(index, int):
            return [min(n, max(0, index - start)) for start, n in self._runs]
        counts = [m.new_int_var(0, n, f"{name}_run{k}") for k, (_, n) in enumerate(self._runs)]
        m.add(sum(counts) == index)
        for k in range(len(self._runs) - 1):
            full = m.new_bool_var(f"{name}_full{k}")
            m.add(counts[k] >= self._runs[k][1] * full)
            m.add(counts[k + 1] <= self._runs[k + 1][1] * full)
        return counts

    def _sum(self, table: tuple[int, ...], counts: list[cp_model.LinearExprT]
             ) -> cp_model.LinearExprT:  # fmt: skip
        """Sum of ``table`` over the layers ``counts`` (per run) stand for."""
        return sum(table[start] * n for (start, _), n in zip(self._runs, counts, strict=True))

    def _add_rank_loads(self) -> None:
        p, m = self._p, self._model
        times = [p.rank_time[r] for r in range(p.pp)]
        memory = [p.in_flight_scale * (p.rank_state[r] + p.rank_memory[r]
                                       + rank_working(p, r) * self._any_redo[r])
                  for r in range(p.pp)]  # fmt: skip
        rank_transient = p.rank_transient or (0,) * p.pp
        layer_held = tuple(s + t for s, t in zip(
            p.layer_state, p.layer_transient or (0,) * p.num_layers, strict=True))  # fmt: skip
        # the optimizer step's memory: the state and its transient copy, no activations
        step_memory = [p.rank_state[r] + rank_transient[r] for r in range(p.pp)]
        before = [self._fill(b if j not in (0, p.num_chunks) else (0 if j == 0 else p.num_layers),
                             f"b{j}") for j, b in enumerate(self._bound)]  # fmt: skip
        for c in range(p.num_chunks):
            r = c % p.pp
            chunk = [end - start for start, end in zip(before[c], before[c + 1], strict=True)]
            times[r] += self._sum(p.layer_time, chunk)
            memory[r] += p.in_flight_scale * self._sum(p.layer_state, chunk)
            memory[r] += p.in_flight[r] * self._sum(p.layer_activation, chunk)
            step_memory[r] += self._sum(layer_held, chunk)
            if p.recompute == "none":
                continue
            upto = self._fill(self._bound[c] + self._redo[c], f"u{c}")
            for k, count in enumerate(upto):  # the recomputed layers lie within the chunk
                m.add(count >= before[c][k])
                m.add(count <= before[c + 1][k])
            redone = [end - start for start, end in zip(before[c], upto, strict=True)]
            times[r] += self._sum(p.recompute_time, redone)
            memory[r] -= p.in_flight[r] * self._sum(p.recompute_saving, redone)
        for c, holds in self._mtp.items():
            r = c % p.pp
            state = p.mtp_state[0] if r == p.pp - 1 else p.mtp_state[1]
            transient = p.mtp_transient[0] if r == p.pp - 1 else p.mtp_transient[1]
            times[r] += p.mtp_time * holds
            memory[r] += (p.in_flight_scale * (state + p.mtp_memory)
                          + p.in_flight[r] * p.mtp_activation) * holds  # fmt: skip
            step_memory[r] += (state + transient) * holds
        for r in range(p.pp):
            m.add(self._slowest >= times[r])
            m.add(memory[r] <= p.in_flight_scale * p.capacity)
            m.add(step_memory[r] <= p.capacity)

    # --- objective ------------------------------------------------------------------------
    def _add_objective(self) -> None:
        floor = self._floor
        if floor is not None:
            self._model.add(self._slowest >= floor)  # a valid cut: see lower_bound
        self._model.minimize(self._slowest)

    def _add_hint(self, assignment: Assignment) -> None:
        """Start from ``assignment`` (the even split with the least recomputation that fits,
        :func:`least_recompute_assignment`) when it is a solution, every variable hinted
        (:meth:`_complete_hint`): a hint of the boundaries, counts and recomputed layers alone
        left CP-SAT to complete the run counts, the recompute blocks and the slowest rank, which
        it often did not within the time limit, and a time-limited solve then returned splits
        slower than its start (gpt-oss-120b's PP4 VPP3 full recomputation: 464,320 quanta
        against the start's 336,179)."""
        value = evaluate_assignment(self._p, assignment)
        if value is None:
            return
        self._start_at = (assignment, value)
        fixed = self._fixed_values(assignment)
        for index, hinted in self._complete_hint(fixed).items():
            self._model.add_hint(self._model.get_int_var_from_proto_index(index), hinted)

    def _fixed_values(self, assignment: Assignment) -> dict[int, int]:
        """The decision variables' values that stand for ``assignment``, by proto index."""
        values: dict[int, int] = {}
        total = 0
        for c, count in enumerate(assignment.chunk_layers):
            values[self._bound[c].index] = total
            values[self._count[c].index] = count
            values[self._redo[c].index] = assignment.recompute_layers[c]
            total += count
        for c, holds in self._mtp.items():
            values[holds.index] = int(c == assignment.mtp_chunk)
        return values

    def _complete_hint(self, fixed: dict[int, int]) -> dict[int, int]:
        """Every variable's value in the solution whose decision variables are ``fixed``: the
        model with those fixed, solved (the rest follow from them, so the solve is a
        propagation), or ``fixed`` alone when that fails."""
        from ortools.sat.python import cp_model

        from planner.search.solve.cpsat import configured_solver

        pinned = self._model.clone()
        for index, value in fixed.items():
            pinned.add(pinned.get_int_var_from_proto_index(index) == value)
        solver = configured_solver(self._config, HINT_TIME_LIMIT_S)
        solver.parameters.num_workers = 1
        if solver.solve(pinned) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return fixed
        return {
            i: solver.value(pinned.get_int_var_from_proto_index(i))
            for i in range(len(pinned.proto.variables))
        }

    # --- solve ----------------------------------------------------------------------------
    def solve(self) -> StageSolution:
        """Solve under the time limit and map the status to a typed solution."""
        from ortools.sat.python import cp_model

        from planner.search.solve.cpsat import STATUS_NAMES, configured_solver

        solver = configured_solver(
            self._config, min(self._config.time_limit_s, self._config.stage_time_limit_s)
        )
        # Measured on 405B and DeepSeek-V3 partitions (benchmarks/bench_stages.py): presolve
        # expands the run counts into value encodings and costs more than it saves; the
        # stronger LP relaxation (linearization level 2) proves the optimum sooner.
        solver.parameters.cp_model_presolve = False
        solver.parameters.linearization_level = 2
        status = solver.solve(self._model, _stop_at_objective(self._stop_at))
        proto = self._model.proto
        size = (len(proto.variables), len(proto.constraints))
        name = STATUS_NAMES.get(status, "UNKNOWN")
        wall = time.perf_counter() - self._start
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if self._start_at is not None:  # the start is a solution all the same
                start, value = self._start_at
                return StageSolution("FEASIBLE", start, value, 0, *size, wall)
            return StageSolution(name, None, 0, 0, *size, wall)
        p = self._p
        assignment = Assignment(
            chunk_layers=tuple(solver.value(v) for v in self._count),
            recompute_layers=tuple(solver.value(v) for v in self._redo),
            mtp_chunk=next((c for c, q in self._mtp.items() if solver.value(q)),
                           p.num_chunks - 1),
        )  # fmt: skip
        objective = round(solver.objective_value)
        bound = min(objective, max(0, round(solver.best_objective_bound)))
        if self._start_at is not None and self._start_at[1] < objective:
            # a time-limited incumbent slower than the start: keep the start (its value is
            # read off the tables, as tightened() reads the incumbent's)
            assignment, objective = self._start_at
            bound = min(bound, objective)
        return StageSolution(name, assignment, objective, bound, *size, wall)


def _stop_at_objective(value: int | None) -> cp_model.CpSolverSolutionCallback | None:
    """A solution callback that stops the search at a solution whose objective is ``value`` or
    less (None when there is no such value)."""
    if value is None:
        return None
    from ortools.sat.python import cp_model

    class StopAt(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            if self.objective_value <= value:
                self.stop_search()

    return StopAt()


def tightened(
    problem: StageProblem, solution: StageSolution, layout: Layout, *, bound: int | None = None
) -> StageSolution:
    """``solution`` with its objective read off its partition (:func:`evaluate_assignment`).

    The objective is a variable bounded below by every rank's time; a solve stopped by the time
    limit (FEASIBLE) may hold an incumbent whose objective variable sits above its slowest rank,
    so the partition's own time is the objective to report. A partition the data rejects, or
    whose time exceeds the solver's objective, means the model and the data disagree: an
    InternalError, never a silently kept split. ``bound``: a lower bound found without the
    solver (:func:`~planner.search.solve.stage_data.rank_load_lower_bound`), reported when it is
    the tighter; one above the partition's time would be a wrong bound, an InternalError too."""
    if solution.assignment is None:
        return solution
    evaluated = evaluate_assignment(problem, solution.assignment)
    if evaluated is None or evaluated > solution.objective:
        raise InternalError(f"CP-SAT's stage partition of {layout.short()} fails its own data")
    if bound is not None and bound > evaluated:
        raise InternalError(f"the stage partition bound of {layout.short()} passes a partition")
    best_bound = max(min(solution.best_bound, evaluated), bound or 0)
    status = "OPTIMAL" if best_bound == evaluated else solution.status
    return solution._replace(objective=evaluated, best_bound=best_bound, status=status)


def _recurrence_solution(
    problem: StageProblem, found: ContiguousSplit | None = None
) -> StageSolution | None:
    """The optimum without a solver, where the min-max recurrence proves it: without
    interleaving, :func:`~planner.search.solve.stage_data.contiguous_partition`'s fastest split
    that fits recomputing nothing (the MTP modules on the last stage) is optimal when the
    layout recomputes nothing, or when its time meets the bound every split obeys. None
    otherwise (or when the data reject it, a recompute count being pinned): CP-SAT solves the
    problem. ``found``: the recurrence's answer when the caller already has it."""
    start = time.perf_counter()
    found = found or contiguous_partition(problem)
    if found is None or found.layers is None or found.time is None:
        return None
    if problem.recompute != "none" and found.time != found.bound:
        return None
    assignment = Assignment(
        chunk_layers=found.layers,
        recompute_layers=(0,) * problem.num_chunks,
        mtp_chunk=problem.num_chunks - 1,
    )
    if evaluate_assignment(problem, assignment) != found.time:
        return None
    return proved_optimal(assignment, found.time, start)


def _start_at_bound(problem: StageProblem, bound: int | None) -> StageSolution | None:
    """The solver's start (:func:`least_recompute_assignment`: the even layer counts with the
    fewest recomputed layers that fit) when it meets ``bound``, a lower bound of the objective:
    then it is optimal and no model is built. None otherwise."""
    start = time.perf_counter()
    if bound is None:
        return None
    assignment = least_recompute_assignment(problem)
    if evaluate_assignment(problem, assignment) != bound:
        return None
    return proved_optimal(assignment, bound, start)


def _uniform_solution(problem: StageProblem) -> StageSolution | None:
    """The optimum by layer counts where every layer is of one kind and no MTP module is
    placed (:func:`~planner.search.solve.stage_data.uniform_partition`); None otherwise."""
    start = time.perf_counter()
    found = uniform_partition(problem)
    if found is None:
        return None
    value, assignment = found
    return proved_optimal(assignment, value, start)


def _branch_solution(
    problem: StageProblem, bound: int | None, baseline: int | None
) -> StageSolution | None:
    """The optimum of an interleaved split that recomputes nothing (its MTP modules, if any,
    where they are fastest), proved by a depth-first walk below the even split's value
    (``baseline``) that stops at ``bound`` (:func:`~planner.search.solve.branch.
    branch_and_bound_partition`); None where it does not apply or gives up, and CP-SAT solves
    the problem. The caller walks only where the rank-load bound exists: where it proves that
    nothing fits, or has too many count vectors to be computed (Gemma's 62 layers of two
    kinds), the walk would have nothing to stop at and would spend its whole budget."""
    start = time.perf_counter()
    upper = None if baseline is None else baseline + 1  # the even split itself may be optimal
    found = branch_and_bound_partition(problem, lower=bound, upper=upper)
    if found is None:
        return None
    value, assignment = found
    return proved_optimal(assignment, value, start)


def layer_runs(problem: StageProblem) -> list[tuple[int, int]]:
    """(first layer, length) of each maximal run of layers with identical rows in every table
    (one run for a uniform dense model; dense-first then MoE for DeepSeek-V3).

    >>> from planner.search.solve.stage_data import StageProblem
    >>> p = StageProblem.model_construct(layer_time=(1, 1, 2, 2, 2), recompute_time=(0,) * 5,
    ...     layer_state=(0,) * 5, layer_activation=(0,) * 5, recompute_saving=(0,) * 5)
    >>> layer_runs(p)
    [(0, 2), (2, 3)]
    """
    transient = problem.layer_transient or (0,) * len(problem.layer_time)
    rows = list(zip(problem.layer_time, problem.recompute_time, problem.layer_state,
                    problem.layer_activation, problem.recompute_saving, transient,
                    strict=True))  # fmt: skip
    runs: list[tuple[int, int]] = []
    for i, row in enumerate(rows):
        if runs and rows[runs[-1][0]] == row:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
    return runs


def seconds_per_step(problem: StageProblem, quanta: int) -> float:
    """The step time an integer objective stands for: (m + (pp - 1)/vpp) x the slowest rank
    (the bubble of equal chunks; the re-scored split prices it at its slowest chunk)."""
    return problem.steps * quanta * TIME_QUANTUM_S


STAGE_OBJECTIVE_UNIT = (
    "s per step: (m + (pp - 1)/vpp) x the slowest pipeline rank's micro-batch time, each rank "
    "the sum of its layers' times (integer model; the bubble of equal chunks)"
)


def split_step_lower_bound(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    config: SolverConfig,
    share_count: bool = True,
) -> tuple[float | None, int]:
    """A lower bound (s) of the step time the cost model gives ``layout`` under any split
    :func:`optimise_pipeline` may keep, or None when no split fits (the even split is then all
    there is); and the size of the rank-load programme it ran (its table cells, :func:`~planner.
    search.solve.stage_data.rank_load_work`: what it cost).
    ``share_count``: whether the rank-load programme keeps the one recompute count N every chunk
    shares under the block method (twice the work; :func:`split_shares_recompute_count` says
    when it can tighten the bound).

    The slowest rank's micro-batch time S is at least the tightest of
    :func:`~planner.search.solve.stage_data.uniform_lower_bound`, :func:`~planner.search.
    solve.stage_data.contiguous_lower_bound` (without interleaving), :func:`~planner.search.
    solve.stage_data.rank_load_lower_bound` (each rank's memory kept, so the recomputation a
    split needs to fit is counted) and :func:`~planner.search.solve.stage_data.
    any_split_time_bound`, less a quantum per table entry for their rounding; the step is at
    least :func:`step_lower_bound` of S.
    """
    problem = build_stage_problem(
        model,
        cluster,
        workload,
        layout,
        recompute=config.stage_recompute,
        headroom=config.memory_headroom,
    )
    fitting = rank_load_lower_bound(problem, share_count=share_count)
    work = rank_load_work(problem, share_count=share_count)
    if fitting is None and rank_load_applies(problem):
        return None, work
    # rank_load keeps memory and so is the tighter where it applies
    bounds = [uniform_lower_bound(problem), fitting if fitting is not None else
              any_split_time_bound(problem)]  # fmt: skip
    if layout.vpp == 1:
        bounds.append(contiguous_lower_bound(problem))
    slack = rounding_slack(problem)
    slowest_s = max(0, max(b for b in bounds if b is not None) - slack) * TIME_QUANTUM_S
    return step_lower_bound(model, cluster, workload, layout, slowest_s), work


def split_shares_recompute_count(
    workload: TrainWorkload, layout: Layout, config: SolverConfig
) -> bool:
    """Whether ``layout``'s split problem shares one free recompute count N over its chunks
    (:func:`~planner.search.solve.stage_data.shares_recompute_count`: full recomputation, the
    block method, no pinned N), so :func:`split_step_lower_bound` with ``share_count`` may be
    tighter than without."""
    return (
        layout.recompute is Recompute.FULL
        and config.stage_recompute == "block"
        and workload.recompute_num_layers is None
    )


def solved_step_lower_bound(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    info: StageSolveInfo,
) -> float:
    """A lower bound (s) of the step time the cost model gives ``layout`` under any split the
    solve ``info`` reports on may keep: its proven bound on the integer objective
    (``info.best_bound``, s per step: (m + (pp - 1)/vpp) x the slowest rank's quanta, as
    :func:`seconds_per_step` writes it) read back as the slowest rank's quanta, less the tables'
    rounding (:func:`~planner.search.solve.stage_data.rounding_slack`), and :func:`step_lower_bound`
    of that, as :func:`split_step_lower_bound` reads its own bounds. A solve the
    time limit stopped (FEASIBLE) proves less than its split: the split sweep counts the layout
    as unresolved while this bound beats the best plan.

    >>> from planner.catalog import load_cluster, load_model
    >>> m, c, w = load_model("8B"), load_cluster("hgx_h100x16"), TrainWorkload(global_batch=64)
    >>> lay = Layout(pp=2, dp=8)
    >>> info = StageSolveInfo(name="pipeline_stages", subject=lay.short(), num_variables=0,
    ...     num_constraints=0, status="FEASIBLE", objective=0.0, best_bound=0.0,
    ...     objective_unit=STAGE_OBJECTIVE_UNIT, wall_s=0.0)
    >>> solved_step_lower_bound(m, c, w, lay, info) == step_lower_bound(m, c, w, lay, 0.0)
    True
    """
    m = workload.global_batch // (layout.dp * layout.mbs)
    integer_steps = m + (layout.pp - 1) / layout.vpp  # StageProblem.steps, under any schedule
    quanta = round(info.best_bound / (integer_steps * TIME_QUANTUM_S))
    slack = tables_rounding_slack(model.num_layers, workload.mtp_num_layers)
    slowest_s = max(0, quanta - slack) * TIME_QUANTUM_S
    return step_lower_bound(model, cluster, workload, layout, slowest_s)


def step_lower_bound(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    slowest_s: float,
) -> float:
    """A lower bound (s) of the step time of ``layout`` under any split whose slowest rank's
    micro-batch time is at least ``slowest_s``: :func:`planner.cost.step.pipeline_steps` of it
    (:func:`planner.cost.step.estimate_step` prices the bubble at the slowest chunk, never below
    the rank's average; none under DualPipe), plus the DP synchronisation no split avoids
    (:func:`dp_sync_step_floor`) and what no split changes (:func:`split_invariant_step_s`).

    >>> from planner.catalog import load_cluster, load_model
    >>> m, c = load_model("8B"), load_cluster("hgx_h100x16")
    >>> w = TrainWorkload(global_batch=64, dp_comm_overlap=False)  # the DP sync: a constant
    >>> lay = Layout(pp=2, dp=8)  # m = 8 micro-batches, 9 micro-batch times a step
    >>> round(step_lower_bound(m, c, w, lay, 0.1) - step_lower_bound(m, c, w, lay, 0.0), 9)
    0.9
    """
    from planner.cost.step import pipeline_steps

    steps = pipeline_steps(workload, layout)
    dp = dp_sync_step_floor(model, cluster, workload, layout, slowest_s, steps)
    return steps * slowest_s + dp + split_invariant_step_s(model, cluster, workload, layout)


def dp_sync_step_floor(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    slowest_s: float,
    steps: float,
) -> float:
    """A lower bound (s) of the exposed data-parallel synchronisation and the optimizer step
    of ``layout`` under any split, given ``slowest_s``, a lower bound of its slowest rank's
    micro-batch time, to add to ``steps`` (m + (pp - 1)/vpp; m under DualPipe) x ``slowest_s``;
    0 where it cannot be proved.

    Some rank holds at least ceil(n_k / pp) of the n_k layers of each kind k (:func:`planner.
    cost.profile.layer_kinds`), and so their parameters at least; the exposed time
    (:func:`planner.cost.step.dp_exposed_time`, at the slowest stage's compute, its last
    bucket the bucket size, the least a rank holds last) and the optimizer step only grow with
    a rank's parameters. The exposed time falls as the slowest stage's compute t grows, by at
    most (1 - contention) per second in each of the reduction and the gather that overlap
    compute, while the pipeline's ``steps`` >= 2 micro-batch times of t grow faster: so
    their sum is least at t = ``slowest_s``, pricing forward and backward at t each (more than
    either takes, which only lowers the exposed time). Where that argument fails (a reduction
    every micro-batch; ZeRO-3's per-round reductions; fewer than two micro-batch times) the
    floor is 0.

    >>> from planner.catalog import load_cluster, load_model
    >>> m, c = load_model("8B"), load_cluster("hgx_h100x16")
    >>> w = TrainWorkload(global_batch=64, dp_comm_overlap=False)  # no overlap: all exposed
    >>> dp_sync_step_floor(m, c, w, Layout(pp=2, dp=8), 0.1, 9.0) > 0
    True
    >>> dp_sync_step_floor(m, c, w, Layout(pp=2, dp=8, zero=2), 0.1, 9.0)  # every micro-batch
    0.0
    """
    from planner.cost.partition import StageContents
    from planner.cost.profile import layer_kinds
    from planner.cost.sharding import dp_sync_overlapped, reduces_once_per_step
    from planner.cost.stage import MicrobatchTime
    from planner.cost.stage_memory import stage_params_per_gpu
    from planner.cost.step import dp_exposed_time, dp_tail_params, optimizer_step_time
    from planner.topology import comm_domains
    from planner.topology.hierarchy import shard_domains

    acc = cluster.accelerator
    contention = acc.efficiency.overlap_contention
    m = workload.global_batch // (layout.dp * layout.mbs)
    rounds = math.ceil(m / layout.pp)
    if not reduces_once_per_step(workload, layout) or (
        layout.zero >= 3 and workload.pp_grad_sync == "round" and rounds > 1
    ):
        return 0.0
    if dp_sync_overlapped(workload, layout) and steps < 2:
        return 0.0
    kinds = layer_kinds(model, workload.seq_len)
    counts = Counter(kinds)
    domains = comm_domains(cluster, layout) | shard_domains(
        cluster, layout, workload.zero_shard_group
    )
    compute = MicrobatchTime.model_construct(
        forward_s=slowest_s, backward_s=slowest_s, tp_comm_s=0.0, cp_comm_s=0.0, ep_comm_s=0.0
    )
    hbm = acc.hbm_bytes_per_s * acc.efficiency.hbm
    floor = 0.0
    for kind, count in counts.items():
        i, held = kinds.index(kind), math.ceil(count / layout.pp)
        contents = StageContents((range(i, i + 1),) * held, (), False, False, 0, False)
        dense, expert = stage_params_per_gpu(model, layout, 1, workload.seq_len, contents=contents)
        exposed = dp_exposed_time(
            dense,
            expert,
            layout,
            domains,
            slowest=compute,
            num_microbatches=m,
            workload=workload,
            contention=contention,
            tail_params=dp_tail_params(model, layout, stage=1, workload=workload),
        )
        optimizer = optimizer_step_time(dense, expert, workload, layout, hbm_bytes_per_s=hbm)
        floor = max(floor, exposed + optimizer)
    return floor


def split_invariant_step_s(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload, layout: Layout
) -> float:
    """The step-time terms no stage split changes: the pipeline sends
    (:func:`planner.cost.step.pipeline_send_time`) and the per-step host sync
    (:func:`planner.cost.step.host_sync_time`), as :func:`planner.cost.step.estimate_step`
    prices them."""
    from planner.cost.step import host_sync_time, pipeline_send_time
    from planner.topology import comm_domains

    sends = pipeline_send_time(model, workload, layout, comm_domains(cluster, layout))
    return sends + host_sync_time(cluster.accelerator.efficiency.step_overhead_ms, workload)


class PipelineOutcome(NamedTuple):
    """The partition to use for one plan, and what the solve found."""

    split: PipelineSplit | None
    """The CP-SAT split, or None to keep the even split."""
    cost: StepCost | None
    """The cost model's answer under ``split`` (None with it)."""
    info: StageSolveInfo
    """The solve, for the plan's JSON."""


def _pipeline_split(
    assignment: Assignment, layout: Layout, workload: TrainWorkload
) -> PipelineSplit:
    """``assignment`` as the plan's split: per-chunk recomputed layers under full recomputation
    only, the MTP chunk only with MTP modules."""
    return PipelineSplit(
        chunk_layers=assignment.chunk_layers,
        recompute_layers=assignment.recompute_layers
        if layout.recompute is Recompute.FULL
        else None,
        mtp_chunk=assignment.mtp_chunk if workload.mtp_num_layers else None,
    )


def optimise_pipeline(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    even: StepCost,
    config: SolverConfig,
) -> PipelineOutcome:
    """Split ``layout``'s layers over its pipeline stages with CP-SAT, re-score the split with
    the cost model and keep it when it fits and is no slower than the even split (``even``,
    the cost model's answer for it); a split that fits where the even one does not is kept.
    The solve's start (the even layer counts with the least recomputation that fits,
    :func:`~planner.search.solve.stage_data.least_recompute_assignment`) is re-scored too and
    replaces the solve's split where the cost model finds it faster: the integer objective
    prices the bubble at equal chunks, the cost model at the slowest (gpt-oss-20b on 8 H100 at
    PP2 VPP2 with full recomputation: 9 of 28 solved splits lost to their start, by up to 3%).
    "Fits" leaves ``config.memory_headroom`` of usable memory free, as the search's screen
    does, so a split cannot move a winner into the margin the search keeps."""
    headroom = config.memory_headroom
    problem = build_stage_problem(
        model, cluster, workload, layout, recompute=config.stage_recompute, headroom=headroom
    )
    baseline = evaluate_assignment(problem, even_assignment(problem))
    found = contiguous_partition(problem)  # once: its bound and, maybe, the optimum itself
    cuts = (uniform_lower_bound(problem), found.bound if found else None)
    cut = max((b for b in cuts if b is not None), default=None)  # the solver's, lower_bound's
    # interleaved only: without it the recurrence answers (and of the fastest splits keeps the
    # leanest, which an even split at the bound would pre-empt)
    rank_load = rank_load_lower_bound(problem) if layout.vpp > 1 else None
    bound = max((b for b in (cut, rank_load) if b is not None), default=None)
    if baseline is not None and baseline == bound:
        info = StageSolveInfo(
            name="pipeline_stages",
            subject=layout.short(),
            num_variables=0,
            num_constraints=0,
            status="OPTIMAL",
            objective=seconds_per_step(problem, baseline),
            best_bound=seconds_per_step(problem, baseline),
            baseline=seconds_per_step(problem, baseline),
            objective_unit=STAGE_OBJECTIVE_UNIT,
            wall_s=0.0,
            solved_by="bound",
        )
        return PipelineOutcome(None, None, info)
    solution = _recurrence_solution(problem, found)
    solved_by: SolvedBy = "recurrence"
    if solution is None:
        solution = _start_at_bound(problem, bound)
        solved_by = "bound"
    if solution is None:
        solution = _uniform_solution(problem)
        solved_by = "layer-counts"
    if solution is None:
        solution = _branch_solution(problem, bound, baseline) if rank_load is not None else None
        solved_by = "branch-and-bound"
    if solution is None:
        solved = StageSolver(problem, config, floor=cut, stop_at=bound).solve()
        solution = tightened(problem, solved, layout, bound=bound)
        solved_by = "cp-sat"
    info = StageSolveInfo(
        name="pipeline_stages",
        subject=layout.short(),
        num_variables=solution.num_variables,
        num_constraints=solution.num_constraints,
        status=solution.status,
        objective=seconds_per_step(problem, solution.objective),
        best_bound=seconds_per_step(problem, solution.best_bound),
        baseline=None if baseline is None else seconds_per_step(problem, baseline),
        objective_unit=STAGE_OBJECTIVE_UNIT,
        wall_s=solution.wall_s,
        solved_by=solved_by,
    )
    if solution.assignment is None:
        return PipelineOutcome(None, None, info)
    split = _pipeline_split(solution.assignment, layout, workload)
    cost = score(model, cluster, workload, layout, split=split)
    even_fits = fits(even, cluster, headroom)
    # the integer objective does not see the bubble's slowest chunk: the cost model decides
    # between the solve's split, its start and the solve's split with its chunks levelled
    others = [least_recompute_assignment(problem)]
    if _worth_levelling(problem, solution.assignment, solution.objective):
        others.append(level_chunks(problem, solution.assignment, solution.objective))
    for other in others:
        if (
            other is None
            or other == solution.assignment
            or evaluate_assignment(problem, other) is None
        ):
            continue
        other_split = _pipeline_split(other, layout, workload)
        other_cost = score(model, cluster, workload, layout, split=other_split)
        step = other_cost.step_time_s
        if (
            fits(other_cost, cluster, headroom)
            and (not fits(cost, cluster, headroom) or step < cost.step_time_s)
            and (not even_fits or step < even.step_time_s)
        ):
            split, cost = other_split, other_cost
    if not fits(cost, cluster, headroom) or (even_fits and cost.step_time_s > even.step_time_s):
        return PipelineOutcome(None, None, info)
    return PipelineOutcome(split, cost, info)


LEVEL_GAIN = 0.002
"""Share of a step an interleaved split's uneven chunks must be able to cost before they are
levelled and the levelled split re-scored by the cost model (:func:`_worth_levelling`): a
threshold of search effort (each re-score costs a cost-model evaluation), not a cost-model
factor."""


def _worth_levelling(problem: StageProblem, assignment: Assignment, slowest: int) -> bool:
    """Whether levelling ``assignment``'s chunks could gain more than :data:`LEVEL_GAIN` of the
    step: the pipeline's fill and drain take (pp - 1) times the slowest chunk, never less than
    the rank's average chunk (slowest / vpp), against (m + (pp - 1) / vpp) x slowest for the
    whole pipeline (``problem.steps``). Without interleaving a chunk is a rank.

    >>> p = StageProblem.model_construct(pp=2, vpp=2, layer_time=(1,) * 8,
    ...     recompute_time=(0,) * 8, rank_time=(0, 0), num_mtp=0, mtp_time=0, steps=8.5)
    >>> _worth_levelling(p, Assignment(chunk_layers=(1, 1, 3, 3), recompute_layers=(0,) * 4,
    ...     mtp_chunk=3), 4)
    True
    >>> _worth_levelling(p, Assignment(chunk_layers=(2, 2, 2, 2), recompute_layers=(0,) * 4,
    ...     mtp_chunk=3), 4)
    False
    """
    if problem.vpp == 1 or slowest <= 0:
        return False
    excess = max(chunk_times(problem, assignment)) - slowest / problem.vpp
    return (problem.pp - 1) * excess > LEVEL_GAIN * problem.steps * slowest
