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


def configured_solver(config: SolverConfig, time_limit_s: float | None = None) -> Any:
    """A CpSolver with the config's time limit (or ``time_limit_s``), workers and seed. It does
    not catch SIGINT: OR-Tools would install its own handler and restore SIG_DFL afterwards,
    not Python's, and Ctrl-C must stay a clean exit (issue 17)."""
    solver = cp_model.CpSolver()
    limit = config.time_limit_s if time_limit_s is None else time_limit_s
    solver.parameters.max_time_in_seconds = limit
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
