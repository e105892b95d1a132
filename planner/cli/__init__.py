"""The ``layout`` command line (layer L6): parse, call the library, print.

``options`` holds the argument types and shared flag groups, ``parser`` the argument parser,
``commands`` one function per subcommand. Heavy modules (the solver, numpy, pydantic specs) are
imported inside the subcommand functions so that ``layout --help`` stays instant.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable, Sequence

from planner.cli.commands import (
    _cmd_calibrate,
    _cmd_clusters,
    _cmd_estimate,
    _cmd_export,
    _cmd_frameworks,
    _cmd_migrate,
    _cmd_models,
    _cmd_pack,
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
    unknown_flags_message,
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
    """Entry point of the ``layout`` command; returns the exit code.

    Ctrl-C anywhere is one line and exit 130 (planner.interrupt); standard error closed or full
    (``2>&-``, ``2>/dev/full``) loses the message but not the exit code (2 for bad input)."""
    from planner import interrupt  # stdlib only

    previous = interrupt.watch()
    restore_streams = _guard_standard_streams()
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return interrupt.report()
    finally:
        restore_streams()
        interrupt.restore(previous)


def _main(argv: Sequence[str] | None) -> int:
    from planner import interrupt

    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # argparse's own message would name the words but not what was meant
        sub = _subparser(parser, args.command)
        sub.error(unknown_flags_message(sub, extras))
    tokens = list(sys.argv[1:] if argv is None else argv)
    args.argv = tokens  # for reports that name their command
    repeated = repeated_flag(parser, args.command, tokens)
    args.given = given_flags(parser, args.command, tokens)
    if repeated:
        sys.stderr.write(f"layout {args.command}: error: {repeated}\n")
        return EXIT_BAD_INPUT
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "search": _cmd_search,
        "estimate": _cmd_estimate,
        "models": _cmd_models,
        "clusters": _cmd_clusters,
        "frameworks": _cmd_frameworks,
        "show": _cmd_show,
        "validate": _cmd_validate,
        "calibrate": _cmd_calibrate,
        "migrate": _cmd_migrate,
        "whatif": _cmd_whatif,
        "export": _cmd_export,
        "schema": _cmd_schema,
        "pack": _cmd_pack,
    }
    try:
        from planner.errors import PlannerError

        if sys.stdout is None:  # started with standard output closed (`layout ... >&-`)
            raise PlannerError("standard output is closed: the output would be lost")
        from planner.cli.outputs import check_outputs

        check_outputs(args)
        code = handlers[args.command](args)
        sys.stdout.flush()  # a full disk (`> /dev/full`) is an error here, not lost at exit
        return code
    except KeyboardInterrupt:
        return interrupt.report()
    except Exception as exc:
        if interrupt.seen():  # e.g. an import interrupted midway raises ImportError
            return interrupt.report()
        return _failure(args.command, exc)


def _failure(command: str, exc: Exception) -> int:
    """The one line for an exception that ended ``command``, and the exit code."""
    from planner.errors import InfeasibleError, PlannerError, one_line

    if isinstance(exc, InfeasibleError):
        sys.stderr.write(f"layout {command}: {one_line(str(exc))}\n")
        return exc.exit_code
    if isinstance(exc, PlannerError):
        sys.stderr.write(f"layout {command}: error: {one_line(str(exc))}\n")
        return exc.exit_code
    if isinstance(exc, BrokenPipeError):  # `layout models | head`: the reader left; not an error
        _drop_stdout()
        return 0
    if isinstance(exc, OSError):
        if exc.filename is not None:
            where = f"cannot access '{exc.filename}'"
        elif exc.errno in _STDOUT_ERRNOS:
            where = "cannot write to standard output"
            _drop_stdout()
        else:
            where = "internal error: OSError"
        reason = one_line(exc.strerror or str(exc))
        sys.stderr.write(f"layout {command}: error: {where}: {reason}\n")
        return EXIT_BAD_INPUT
    sys.stderr.write(
        f"layout {command}: internal error: {type(exc).__name__}: {one_line(str(exc))[:300]}\n"
    )
    return EXIT_BAD_INPUT


class _SafeStderr:
    """Standard error that cannot fail the command: with it closed or full (``2>&-``,
    ``2>/dev/full``) a message is lost, but the exit code stays the one the input deserves
    (writing to a missing stderr raised AttributeError, a full one OSError, and the command
    ended with exit 1). After a failed write, descriptor 2 is pointed at /dev/null so that the
    flush at exit cannot fail again."""

    def __init__(self, stream: object) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if self._stream is not None:
            try:
                self._stream.write(text)  # type: ignore[attr-defined]
                self._stream.flush()  # type: ignore[attr-defined]
            except (OSError, ValueError, AttributeError):
                self._drop()
        return len(text)

    def flush(self) -> None:
        if self._stream is not None:
            try:
                self._stream.flush()  # type: ignore[attr-defined]
            except (OSError, ValueError, AttributeError):
                self._drop()

    def isatty(self) -> bool:
        try:
            return bool(self._stream is not None and self._stream.isatty())  # type: ignore[attr-defined]
        except (OSError, ValueError, AttributeError):
            return False

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)

    def _drop(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if self._stream.fileno() == 2:  # type: ignore[attr-defined]
                os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        self._stream = None


def _guard_standard_streams() -> Callable[[], None]:
    """Make standard error safe to write (:class:`_SafeStderr`) and give a closed descriptor
    0, 1 or 2 /dev/null, so that no file the command opens takes its number (a message a
    library writes to descriptor 2 would land in it); returns what puts sys.stderr back."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:  # closed: the lowest free descriptor, which os.open returns, is this one
            with contextlib.suppress(OSError):
                os.open(os.devnull, os.O_RDWR)
    previous = sys.stderr
    sys.stderr = _SafeStderr(previous)  # type: ignore[assignment]

    def restore() -> None:
        sys.stderr = previous

    return restore


_STDOUT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EIO, errno.EBADF, errno.EDQUOT, errno.EFBIG, errno.EPIPE}
)
"""What writing to a full disk, a closed descriptor or a vanished terminal raises."""


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of subcommand ``command``."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def given_flags(parser: argparse.ArgumentParser, command: str, argv: list[str]) -> dict[str, str]:
    """The flags given on the command line (argparse cannot tell a flag given at its default
    value from one left out): each destination -> the flag as the parser spells it, e.g.
    ``{"seq_len": "--seq-len"}`` (flags are taken only as spelled in full: options.
    _OneLineParser)."""
    return {dest: names[0] for dest, names in _flag_uses(parser, command, argv).items()}


def _flag_uses(
    parser: argparse.ArgumentParser, command: str, argv: list[str]
) -> dict[str, list[str]]:
    """Each destination given on the command line -> the option strings it was given as, in
    order (a repeatable flag appears once per use)."""
    sub = _subparser(parser, command)
    options: dict[str, argparse.Action] = {}
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        for name in action.option_strings:
            options[name] = action
    uses: dict[str, list[str]] = {}
    takes_value = False
    for token in argv:
        if token == "--":
            break
        if takes_value:  # the value of the flag before (it may start with '--' only after '=')
            takes_value = False
            continue
        name = token.split("=", 1)[0]
        if not name.startswith("--"):
            continue
        action = options.get(name)
        if action is None:
            continue
        uses.setdefault(action.dest, []).append(name)
        takes_value = "=" not in token and action.nargs != 0
    return uses


def repeated_flag(parser: argparse.ArgumentParser, command: str, argv: list[str]) -> str:
    """'--x is given twice' when a flag that takes one value (or a switch, or one of a pair
    such as --rail-optimized / --no-rail-optimized) appears twice: argparse keeps the last one
    silently. Repeatable flags (--fix, --vary, --report, ...) are not counted. '' if none."""
    sub = _subparser(parser, command)
    repeatable = {a.dest for a in sub._actions if isinstance(a, argparse._AppendAction)}
    for dest, names in _flag_uses(parser, command, argv).items():
        if dest in repeatable or len(names) < 2:
            continue
        if names[0] == names[1]:
            return f"{names[0]} is given twice: give it once"
        return f"{names[0]} and {names[1]} are both given: give one"
    return ""


def _drop_stdout() -> None:
    """Point stdout at /dev/null so that the flush at exit cannot fail a second time."""
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until exit


if __name__ == "__main__":
    raise SystemExit(main())
