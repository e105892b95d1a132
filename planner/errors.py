"""Error hierarchy and the exit-code map shared by the CLI and the Python API.

Exit codes follow ruff's convention: 0 a plan, 1 nothing fits, 2 bad input (or internal error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

EXIT_OK = 0
EXIT_INFEASIBLE = 1
EXIT_BAD_INPUT = 2


class PlannerError(Exception):
    """Base class of every error the planner raises on purpose. Its message is made one
    printable line (:func:`one_line`), so an API caller that prints it prints no control
    character or line break that came from a user's value."""

    exit_code: int = EXIT_BAD_INPUT

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(one_line(str(message)), *args)


class SpecError(PlannerError, ValueError):
    """Bad input: a malformed YAML/JSON file, an unknown name, an impossible layout."""

    exit_code = EXIT_BAD_INPUT


class InfeasibleError(PlannerError):
    """No layout satisfies the limits; the message names the binding limit and by how much."""

    exit_code = EXIT_INFEASIBLE


class InternalError(PlannerError):
    """A broken internal invariant: a bug in the planner, not in the input."""

    exit_code = EXIT_BAD_INPUT


MAX_MESSAGE_CHARS = 2_000
"""Longest error line printed; the rest is elided (a message never carries an unbounded value)."""


def escape_char(char: str) -> str:
    """A non-printable character as a visible escape (Python's, as :func:`repr` writes it).

    >>> escape_char("\\n"), escape_char("\\x1b"), escape_char("\\u202e")
    ('\\\\n', '\\\\x1b', '\\\\u202e')
    """
    return char.encode("unicode_escape").decode("ascii")


def printable(text: str) -> str:
    """``text`` with every non-printable character (control, separator, format such as a bidi
    override, unassigned; :meth:`str.isprintable`) replaced by its escape: the result is one
    line that cannot drive a terminal (ESC starts the ANSI/OSC sequences a terminal obeys).

    >>> printable("a\\nb\\x1b[31m")
    'a\\\\nb\\\\x1b[31m'
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else escape_char(c) for c in text)


def one_line(message: str) -> str:
    """Collapse a message to one line for stderr: whitespace runs (newlines included) become one
    space, other non-printable characters visible escapes (:func:`printable`), and the line is
    cut at :data:`MAX_MESSAGE_CHARS`.

    >>> one_line("a\\n  b")
    'a b'
    >>> one_line("model '\\x1b]0;owned\\x07'")
    "model '\\\\x1b]0;owned\\\\x07'"
    """
    text = printable(" ".join(message.split()))
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 3] + "..."
    return text


def run_script(main: Callable[[], int | None]) -> NoReturn:
    """Run a script's ``main`` (the examples' entry point) and exit as the CLI would: its
    return code; for bad input or nothing that fits (SpecError, InfeasibleError) one line,
    ``<script>: error: <message>``, on standard error and exit code 2; for a reader that left
    (``... | head``: BrokenPipeError) exit 0, standard output pointed at /dev/null so that the
    interpreter's final flush raises nothing."""
    import os
    import sys
    from pathlib import Path

    try:
        code = main()
    except (SpecError, InfeasibleError) as exc:
        print(f"{Path(sys.argv[0]).name}: error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(EXIT_OK) from None
    raise SystemExit(code)
