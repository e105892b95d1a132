"""Search: candidates, branch and bound, the ranking sort, the CP-SAT sub-problems (solve/), the
exhaustive oracles, the validator (layer L4).

``planner.search`` is also the public API function of DESIGN.md section 8
(``planner.search(model=..., cluster=...)``). Once this package is imported, Python binds the
attribute ``planner.search`` to it, so the package itself is made callable and forwards keyword
calls to :func:`planner.api.search`. That forward is the one sanctioned upward reference: it is
resolved by name at call time, never at import.
"""

import importlib
import sys
import types
from typing import Any

from planner.search.engine import estimate, search

__all__ = ["estimate", "search"]


class _CallableSearchPackage(types.ModuleType):
    """This package, callable as the ``planner.search(...)`` API function."""

    def __call__(self, **kwargs: Any) -> Any:
        return importlib.import_module("planner.api").search(**kwargs)


sys.modules[__name__].__class__ = _CallableSearchPackage
