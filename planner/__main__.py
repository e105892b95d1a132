"""``python -m planner`` is the ``layout`` command; :func:`run` is its console script."""

from __future__ import annotations

import signal


def run() -> int:
    """The ``layout`` console script: :func:`planner.cli.main` with Ctrl-C handled from the first
    statement on, the imports of the CLI included (one line, exit 130). Once the command is done,
    a late Ctrl-C is ignored: Python's shutdown restores the default handler, which would end the
    process by the signal, without a word, after its output was written."""
    from planner import interrupt  # stdlib only

    interrupt.watch()
    try:
        from planner.cli import main

        return main()
    except KeyboardInterrupt:
        return interrupt.report()
    except Exception:
        if not interrupt.seen():
            raise
        return interrupt.report()  # an import interrupted midway, reported as what it is
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    raise SystemExit(run())
