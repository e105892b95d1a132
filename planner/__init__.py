"""layout: parallelism layout search and cluster topology planner.

Public API (imported lazily so that ``layout --help`` stays instant)::

    import planner
    result = planner.search(model="70B", cluster="hgx_b200x16")
    print(result.best.layout, result.best.step_time_s)
    print(planner.export(result, format="megatron").text)   # or bridge, torchtitan, deepspeed, ...
    ranks = planner.placement(result)                        # node, GPU and groups of every rank
    page = planner.render_report(result)                     # the HTML report (or markdown)

``estimate``, ``migrate``, ``whatif``, ``pack`` (a fleet of jobs on one cluster),
``serve_search``, ``serve_estimate``, ``load_model`` and ``load_cluster`` complete it (README
"Python API"; the JSON shapes: ``layout schema``). ``search``, ``estimate`` and ``placement``
take ``cluster_state=`` (what is down, taken or slow): the ranks are then placed by CP-SAT on
what is free.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = [
    "__version__",
    "estimate",
    "export",
    "load_cluster",
    "load_model",
    "migrate",
    "pack",
    "placement",
    "render_report",
    "search",
    "serve_estimate",
    "serve_search",
    "whatif",
]


def __getattr__(name: str) -> object:  # no typing import: the console script starts here
    if name in __all__ and name != "__version__":
        from planner import api

        return getattr(api, name)
    raise AttributeError(f"module 'planner' has no attribute '{name}'")


def __dir__() -> list[str]:
    """The public API as well as the module's own names (``dir(planner)``, tab completion)."""
    return sorted(set(globals()) | set(__all__))
