"""The ``layout`` command line (layer L6): parse, call the library, print.

``options`` holds the argument types and shared flag groups, ``parser`` the argument parser,
``commands`` one function per subcommand. Heavy modules (the solver, numpy, pydantic specs) are
imported inside the subcommand functions so that ``layout --help`` stays instant.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from planner.cli.commands import (
    _cmd_calibrate,
    _cmd_clusters,
    _cmd_estimate,
    _cmd_export,
    _cmd_migrate,
    _cmd_models,
    _cmd_schema,
    _cmd_search,
    _cmd_show,
    _cmd_validate,
    _cmd_whatif,
)
from planner.cli.options import (
    EXIT_BAD_INPUT,
    EXPORT_FORMATS,
    SCHEMA_KINDS,
    batch_tokens,
    positive_float,
    positive_int,
    time_limit,
)
from planner.cli.parser import build_parser

__all__ = [
    "EXPORT_FORMATS",
    "SCHEMA_KINDS",
    "batch_tokens",
    "build_parser",
    "main",
    "positive_float",
    "positive_int",
    "time_limit",
]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``layout`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    from planner.errors import InfeasibleError, PlannerError, one_line

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "search": _cmd_search,
        "estimate": _cmd_estimate,
        "models": _cmd_models,
        "clusters": _cmd_clusters,
        "show": _cmd_show,
        "validate": _cmd_validate,
        "calibrate": _cmd_calibrate,
        "migrate": _cmd_migrate,
        "whatif": _cmd_whatif,
        "export": _cmd_export,
        "schema": _cmd_schema,
    }
    try:
        return handlers[args.command](args)
    except InfeasibleError as exc:
        sys.stderr.write(f"layout {args.command}: {one_line(str(exc))}\n")
        return exc.exit_code
    except PlannerError as exc:
        sys.stderr.write(f"layout {args.command}: error: {one_line(str(exc))}\n")
        return exc.exit_code
    except BrokenPipeError:  # e.g. `layout models | head`: the reader left; not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("layout: interrupted\n")
        return 130
    except Exception as exc:
        sys.stderr.write(
            f"layout {args.command}: internal error: {type(exc).__name__}: "
            f"{one_line(str(exc))[:300]}\n"
        )
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
