"""Progress of long work (whatif, calibrate --fit, validate) on stderr, when stderr is a
terminal or ``--progress`` asks for it; quiet otherwise, so pipes and logs get only the answer.

The bar is rich's (imported only when a bar is shown: ``layout --help`` and piped runs never
load it): the label, a bar, done/total, elapsed and remaining time, and the item just finished.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Update = Callable[..., None]
"""``update(done, total=None, item="")``: ``done`` of ``total`` items, the last one named."""


def wanted(flag: bool = False) -> bool:
    """Show progress: asked for (``--progress``) or stderr is a terminal."""
    stream = sys.stderr
    return flag or bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())


def _quiet(done: int, total: int | None = None, item: str = "") -> None:
    """No progress shown."""


@contextmanager
def progress(label: str, total: int | None, *, enabled: bool, unit: str = "") -> Iterator[Update]:
    """A progress bar on stderr for the block (``label ━━━ 3/36 scenarios 0:00:04 eta
    0:00:41 item``), or a no-op when not ``enabled``."""
    if not enabled:
        yield _quiet
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from planner.specs.text import printable

    console = Console(stderr=True, highlight=False)
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(escape(unit)),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[item]}"),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(escape(label), total=total, item="")

        def update(done: int, total_: int | None = None, item: str = "") -> None:
            fields: dict[str, object] = {"completed": done, "item": escape(printable(item)[:40])}
            if total_ is not None:
                fields["total"] = total_
            bar.update(task, **fields)  # type: ignore[arg-type]

        yield update
