"""layout: parallelism layout search and cluster topology planner.

Public API (imported lazily so that ``layout --help`` stays instant)::

    import planner
    result = planner.search(model="70B", cluster="hgx_b200x16")
    print(result.best.layout, result.best.step_time_s)
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "estimate", "load_cluster", "load_model", "search"]


def __getattr__(name: str) -> Any:
    if name in ("estimate", "load_cluster", "load_model", "search"):
        from planner import api

        return getattr(api, name)
    raise AttributeError(f"module 'planner' has no attribute '{name}'")
