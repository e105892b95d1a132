"""Search: candidates, the CP-SAT model, the exhaustive oracle, the validator (layer L4)."""

from planner.search.engine import estimate, search

__all__ = ["estimate", "search"]
