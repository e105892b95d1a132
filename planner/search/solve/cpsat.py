"""One CP-SAT model solved the way every sub-problem of the planner solves it (pipeline stage
splits, placement on a cluster with holes, fleet packing): the configured time limit, workers
and seed, Ctrl-C left to Python, the status by name and the solve's size and time.

OR-Tools is imported by this module only; the callers import it when they solve.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from ortools.sat.python import cp_model

from planner.specs.cluster_state import SubproblemInfo
from planner.specs.solver_config import SolverConfig

STATUS_NAMES: dict[Any, str] = {
    cp_model.OPTIMAL: "OPTIMAL",
    cp_model.FEASIBLE: "FEASIBLE",
    cp_model.INFEASIBLE: "INFEASIBLE",
    cp_model.MODEL_INVALID: "MODEL_INVALID",
    cp_model.UNKNOWN: "UNKNOWN",
}
"""CP-SAT statuses by name."""

DETERMINISTIC_S_PER_LIMIT_S = 0.35
"""CP-SAT deterministic seconds a solve may spend per second of its configured time limit.
Deterministic time is CP-SAT's own count of the work done, the same for a given model,
parameters and seed on every machine, so a solve stopped by it stops at the same point and
returns the same solution whatever the machine and its load; a wall-clock limit does not.
0.35 makes a limit of t s last about t s on the 2-core machine the benchmarks run on: measured
on the DeepSeek-V3 stage split that `benchmarks/bench_search.py`'s MTP case leaves unproven,
0.351 deterministic s at a 1.00 s wall limit and 0.796 at 2.00 s (and 0.4 deterministic s took
1.20 and 1.21 s wall, both stopping at the same split)."""

WALL_CAP_PER_LIMIT_S = 10.0
"""The wall-clock limit, as a multiple of the configured limit: a safety net for a machine
ten times slower than the benchmarks' (there the solve may stop earlier, and differ); the
deterministic limit stops every solve first on any machine within that."""


def configured_solver(config: SolverConfig, time_limit_s: float | None = None) -> Any:
    """A CpSolver with the config's time limit (or ``time_limit_s``), workers and seed. The
    limit is a deterministic one (:data:`DETERMINISTIC_S_PER_LIMIT_S`), so with one worker a
    solve that runs to it returns the same solution on every machine; the wall-clock limit is
    only a safety net (:data:`WALL_CAP_PER_LIMIT_S`). It does not catch SIGINT: OR-Tools would
    install its own handler and restore SIG_DFL afterwards, not Python's, and Ctrl-C must stay
    a clean exit (issue 17).

    >>> solver = configured_solver(SolverConfig(), 2.0)
    >>> round(solver.parameters.max_deterministic_time, 6), solver.parameters.max_time_in_seconds
    (0.7, 20.0)
    """
    solver = cp_model.CpSolver()
    limit = config.time_limit_s if time_limit_s is None else time_limit_s
    solver.parameters.max_deterministic_time = limit * DETERMINISTIC_S_PER_LIMIT_S
    solver.parameters.max_time_in_seconds = limit * WALL_CAP_PER_LIMIT_S
    solver.parameters.num_workers = config.num_workers
    solver.parameters.random_seed = config.seed
    solver.parameters.catch_sigint_signal = False
    return solver


class Solved(NamedTuple):
    """A finished solve."""

    solver: Any
    """The CpSolver, to read the values from."""
    found: bool
    """A solution exists (OPTIMAL or FEASIBLE)."""
    status: str
    """The status by name (:data:`STATUS_NAMES`)."""
    elapsed_s: float
    """Wall time of the solve (s)."""


def solve_model(model: Any, config: SolverConfig) -> Solved:
    """Solve ``model`` with :func:`configured_solver`."""
    solver = configured_solver(config)
    start = time.perf_counter()
    status = solver.solve(model)
    elapsed = time.perf_counter() - start
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return Solved(solver, found, STATUS_NAMES.get(status, "UNKNOWN"), elapsed)


def subproblem_info(name: str, model: Any, solved: Solved, objective_terms: str) -> SubproblemInfo:
    """What the solve of a placement or fleet sub-problem did: its size, status, objective,
    proven bound (0 when nothing was found) and time."""
    solver, found = solved.solver, solved.found
    proto = model.proto
    return SubproblemInfo(
        name=name,  # type: ignore[arg-type]
        variables=len(proto.variables),
        constraints=len(proto.constraints),
        status=solved.status,
        objective=float(round(solver.objective_value)) if found else 0.0,
        best_bound=float(round(solver.best_objective_bound)) if found else 0.0,
        objective_terms=objective_terms,
        solve_time_s=solved.elapsed_s,
    )
