"""Error hierarchy and the exit-code map shared by the CLI and the Python API.

Exit codes follow ruff's convention: 0 a plan, 1 nothing fits, 2 bad input (or internal error).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_INFEASIBLE = 1
EXIT_BAD_INPUT = 2


class PlannerError(Exception):
    """Base class of every error the planner raises on purpose."""

    exit_code: int = EXIT_BAD_INPUT


class SpecError(PlannerError, ValueError):
    """Bad input: a malformed YAML/JSON file, an unknown name, an impossible layout."""

    exit_code = EXIT_BAD_INPUT


class InfeasibleError(PlannerError):
    """No layout satisfies the limits; the message names the binding limit and by how much."""

    exit_code = EXIT_INFEASIBLE


class InternalError(PlannerError):
    """A broken internal invariant: a bug in the planner, not in the input."""

    exit_code = EXIT_BAD_INPUT


def one_line(message: str) -> str:
    """Collapse a message to one line for stderr.

    >>> one_line("a\\n  b")
    'a b'
    """
    return " ".join(message.split())
