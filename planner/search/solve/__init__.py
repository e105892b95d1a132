"""CP-SAT sub-problems: the choices that are combinatorial and coupled (DESIGN.md section 7).

Each sub-problem follows the cpsat-primer's shape: the cost model's floats are turned once into
small integer tables (``*_data`` modules, no OR-Tools), a solver class builds the model in
labelled sections (``_add_variables``, ``_add_constraints``, ``_add_objective``) and ``solve()``
maps the status to a typed result; a solver-independent evaluation of any assignment, and a
brute-force twin in :mod:`planner.search.exhaustive`, check it. OR-Tools is imported only by the
solver modules, which the search imports when it has something to solve.

- :mod:`~planner.search.solve.stages`: which layers go to which pipeline stage and how many of
  each stage's layers recompute in full.
"""
