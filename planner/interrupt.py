"""Ctrl-C for the ``layout`` command: one line on stderr and exit 130 wherever SIGINT lands.

Python's own handler raises KeyboardInterrupt where the signal lands, and a KeyboardInterrupt
raised inside an import can come out as another exception (an extension module whose
initialisation was interrupted raises ``ImportError: initialization failed``). The CLI's handler
also records that the signal came, so that whatever exception follows is reported as the
interrupt it is. Stdlib only: the console script installs it before importing anything else.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT, as shells report a process the signal ended)."""
MESSAGE = "layout: interrupted"
"""The one line printed."""


RETRY_S = 0.005
"""How soon an interrupt that landed inside an import is raised again (it waits for the import
to finish: a KeyboardInterrupt inside one can leave a half-initialised extension module that
prints its own traceback, or surface as an ImportError)."""


class _State:
    seen = False
    """Whether SIGINT arrived since :func:`watch`."""
    unraisable_hook: object = None
    """The ``sys.unraisablehook`` :func:`watch` replaced (None while it is not watching)."""


FORKING_FILES = ("multiprocessing/popen_fork.py",)
"""Where a process forks its workers. The fork runs the interpreter's at-fork callbacks
(``os.register_at_fork``: logging re-releases its lock in the parent) where Python ignores an
exception, printing it as "Exception ignored in" with a traceback and going on: an interrupt
that lands there is waited out as one inside an import is."""


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    """Record the interrupt and raise KeyboardInterrupt, unless it landed inside an import or a
    fork: then raise it once that is done (a timer signal retries every RETRY_S)."""
    _State.seen = True
    if _must_wait(frame) and _retry_later():
        return
    raise KeyboardInterrupt


FINALIZER = "__del__"
"""A finalizer's name: Python ignores an exception raised in one, printing "Exception ignored
in" with a traceback and going on (the hostile pass saw SIGINT land in a multiprocessing
``Connection.__del__`` as a what-if's worker pool closed, and the run exit 0 with the traceback
printed): an interrupt that lands there is waited out as one inside an import is."""


def _must_wait(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside an import (importlib's frames are on its stack), a fork
    (:data:`FORKING_FILES`) or a finalizer (:data:`FINALIZER`), where a KeyboardInterrupt is
    lost or leaves a half-built module."""
    while frame is not None:
        name = frame.f_code.co_filename.replace("\\", "/")
        if name.startswith("<frozen importlib") or name.endswith(FORKING_FILES):
            return True
        if frame.f_code.co_name == FINALIZER:
            return True
        frame = frame.f_back
    return False


def _retry_later() -> bool:
    """Arrange for :func:`_on_sigint` to run again in RETRY_S (POSIX interval timers); False
    where that cannot be done (the interrupt is then raised at once)."""
    try:
        signal.signal(signal.SIGALRM, _on_sigint)
        signal.setitimer(signal.ITIMER_REAL, RETRY_S)
    except (AttributeError, ValueError, OSError):  # no SIGALRM (Windows), not the main thread
        return False
    return True


def _on_unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook`` while watching: an exception Python cannot raise (one in a
    finalizer, a weakref or garbage-collector callback, an at-fork callback) is printed as
    "Exception ignored in" with a traceback and the run goes on, so a KeyboardInterrupt of ours
    that lands in such a place, wherever :func:`_must_wait` does not recognise it, was lost and
    the command exit 0 after a traceback (the hostile pass, an export interrupted at 0.37 s).
    It is raised again a moment later instead (:data:`RETRY_S`), where it ends the command,
    and nothing is printed; any other exception goes to the hook that was there."""
    ours = unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt)
    if ours and _State.seen and _retry_later():
        return
    previous = _State.unraisable_hook or sys.__unraisablehook__
    previous(unraisable)  # type: ignore[operator]


def watch() -> object:
    """Install the handler (and :func:`_on_unraisable`); returns the handler it replaces (for
    :func:`restore`), or None when none could be installed (a thread other than the main one
    cannot set signal handlers)."""
    _State.seen = False
    try:
        previous = signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:  # not the main thread: the embedding program's handler stays
        return None
    if sys.unraisablehook is not _on_unraisable:
        _State.unraisable_hook = sys.unraisablehook
        sys.unraisablehook = _on_unraisable
    return previous


def restore(previous: object) -> None:
    """Put back the handler :func:`watch` replaced (and stop a retry timer of ours)."""
    if previous is not None:
        signal.signal(signal.SIGINT, previous)  # type: ignore[arg-type]
        if getattr(signal, "SIGALRM", None) and signal.getsignal(signal.SIGALRM) is _on_sigint:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
        if sys.unraisablehook is _on_unraisable:
            sys.unraisablehook = _State.unraisable_hook or sys.__unraisablehook__  # type: ignore[assignment]
            _State.unraisable_hook = None


def quiet_worker() -> None:
    """Initializer of a worker process: Ctrl-C ends it at once and without a traceback (the
    parent, which gets the same signal from the terminal, reports it)."""
    import os

    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(EXIT_INTERRUPTED))


def seen() -> bool:
    """Whether SIGINT arrived since :func:`watch` (the exception it caused may be another)."""
    return _State.seen


def report() -> int:
    """Print the one line (if standard error can take it) and return the exit code."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(MESSAGE + "\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return EXIT_INTERRUPTED
