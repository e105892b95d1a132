"""CP-SAT model that chooses the layout.

Data (fully prepared by :mod:`planner.search.space` and :mod:`planner.search.table`): one row per
feasible candidate with its integer step time and the value of each layout dimension.
Variables: one Boolean per candidate, one Boolean per value of each dimension.
Constraints: exactly one candidate; each dimension value's Boolean equals the sum of the picks
that have it (so exactly one value per dimension, and pins and exclusions are stated on
dimensions, not rows).
Objective: minimise the integer step time. Runners-up are found by re-solving with the winners'
parallel degrees excluded. Section order follows the OR-Tools samples.

Time limit: when a solve ends without a solution (UNKNOWN at ``time_limit_s``), the cheapest row
that the exclusions allow is taken from a scan of the table and reported FEASIBLE with CP-SAT's
proven bound, so a search always returns a plan and its gap. Objectives too large for CP-SAT's
64-bit arithmetic are ranked by the same scan.
"""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from planner.search.table import from_quanta
from planner.specs.base import FrozenSpec
from planner.specs.solver_config import SolverConfig

MAX_OBJECTIVE_SUM = 2**62
"""Largest sum of objective coefficients handed to CP-SAT (its integer arithmetic is 64-bit)."""
_STATUS = {
    cp_model.OPTIMAL: "OPTIMAL",
    cp_model.FEASIBLE: "FEASIBLE",
    cp_model.INFEASIBLE: "INFEASIBLE",
    cp_model.MODEL_INVALID: "MODEL_INVALID",
    cp_model.UNKNOWN: "UNKNOWN",
}


class SolveOutcome(FrozenSpec):
    """One CP-SAT solve."""

    index: int
    """Chosen candidate row (-1 when none)."""
    status: str
    """OPTIMAL, FEASIBLE, INFEASIBLE or UNKNOWN."""
    objective_s: float
    """Objective value (s)."""
    best_bound_s: float
    """Proven lower bound (s)."""


class LayoutSolver:
    """Builds the CP-SAT model over prepared candidate rows and solves it."""

    def __init__(
        self,
        costs: list[int],
        dimensions: list[dict[str, int]],
        structure_keys: list[str],
        config: SolverConfig,
    ) -> None:
        self._costs = costs
        self._dims = dimensions
        self._structure_keys = structure_keys
        self._config = config
        self._model = cp_model.CpModel()
        self._pick: list[cp_model.IntVar] = []
        self._value_vars: dict[str, dict[int, cp_model.IntVar]] = {}
        self._excluded: set[tuple[int, ...]] = set()
        self._too_large = sum(abs(c) for c in costs) >= MAX_OBJECTIVE_SUM
        self._add_variables()
        self._add_one_candidate()
        self._add_dimension_links()
        self._add_objective()

    def _add_variables(self) -> None:
        self._pick = [self._model.new_bool_var(f"pick_{i}") for i in range(len(self._costs))]
        for name in self._dims[0] if self._dims else {}:
            values = sorted({row[name] for row in self._dims})
            self._value_vars[name] = {v: self._model.new_bool_var(f"{name}_{v}") for v in values}

    def _add_one_candidate(self) -> None:
        self._model.add_exactly_one(self._pick)
        for values in self._value_vars.values():
            self._model.add_exactly_one(list(values.values()))

    def _add_dimension_links(self) -> None:
        """value_var[d][v] == sum of the picks whose dimension d equals v (one linear equality
        per dimension value; with exactly one pick, exactly one value per dimension is true)."""
        members: dict[tuple[str, int], list[cp_model.IntVar]] = {}
        for i, row in enumerate(self._dims):
            for name, value in row.items():
                members.setdefault((name, value), []).append(self._pick[i])
        for (name, value), picks in members.items():
            self._model.add(self._value_vars[name][value] == sum(picks))

    def _add_objective(self) -> None:
        if self._too_large:
            return  # solve() ranks by the scan
        self._model.minimize(sum(c * x for c, x in zip(self._costs, self._pick, strict=True)))

    def exclude_structure(self, row: int) -> None:
        """Forbid every candidate sharing ``row``'s parallel degrees (for the next runner-up)."""
        literals = [self._value_vars[k][self._dims[row][k]] for k in self._structure_keys]
        self._model.add_bool_or([lit.Not() for lit in literals])
        self._excluded.add(self._structure(row))

    def _structure(self, row: int) -> tuple[int, ...]:
        return tuple(self._dims[row][k] for k in self._structure_keys)

    def _scan(self, status: str, best_bound: float | None) -> SolveOutcome:
        """The cheapest row the exclusions allow (ties: first row), without CP-SAT; ``best_bound``
        None = the scan's own minimum (exact)."""
        allowed = [i for i in range(len(self._costs)) if self._structure(i) not in self._excluded]
        if not allowed:
            return SolveOutcome(index=-1, status="INFEASIBLE", objective_s=0.0, best_bound_s=0.0)
        index = min(allowed, key=lambda i: (self._costs[i], i))
        objective = from_quanta(self._costs[index])
        if best_bound is None:
            best_bound = objective
        bound = best_bound if math.isfinite(best_bound) else 0.0
        return SolveOutcome(
            index=index,
            status=status,
            objective_s=objective,
            best_bound_s=min(objective, max(0.0, bound)),
        )

    def solve(self) -> SolveOutcome:
        """Solve under the time limit; map the status to a typed outcome (a time limit hit before
        any solution falls back to the table scan, reported FEASIBLE with CP-SAT's bound)."""
        if self._too_large:
            return self._scan("OPTIMAL", None)  # exact: the scan sees every row
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = self._config.time_limit_s
        solver.parameters.num_workers = self._config.num_workers
        # OR-Tools would install its own SIGINT handler and restore SIG_DFL, not Python's, after
        # the solve: Ctrl-C would then kill the process without a word (issue 17).
        solver.parameters.catch_sigint_signal = False
        solver.parameters.random_seed = self._config.seed
        # The model is an exactly-one choice with a linear objective: presolve's probing costs
        # seconds at thousands of rows and finds nothing the LP bound does not.
        solver.parameters.cp_model_presolve = False
        status = solver.solve(self._model)
        name = _STATUS.get(status, "UNKNOWN")
        if status == cp_model.UNKNOWN:
            return self._scan("FEASIBLE", from_quanta(solver.best_objective_bound))
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return SolveOutcome(index=-1, status=name, objective_s=0.0, best_bound_s=0.0)
        index = next(i for i, x in enumerate(self._pick) if solver.boolean_value(x))
        return SolveOutcome(
            index=index,
            status=name,
            objective_s=from_quanta(solver.objective_value),
            best_bound_s=from_quanta(solver.best_objective_bound),
        )
