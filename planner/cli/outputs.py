"""Files the CLI writes: checked before the work starts, never an input, never left half-written.

Every output flag (``--placement``, ``--report``, ``--out``, ``--markdown``, ``--graphml``,
``--pareto``) is
checked up front by :func:`check_outputs`: its folder must exist, it must not be a folder, and
it must not be one of the files the command reads (the model, cluster, calibration, plan or
layout file), which would otherwise be replaced with exit 0. :func:`write_text_atomic` writes
next to the target and renames, so an interrupt or a full disk leaves the old file (or none),
never a partial one.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

INPUT_FLAGS: dict[str, str] = {
    "model": "--model",
    "cluster": "--cluster",
    "calibration": "--calibration",
    "plan": "--plan",
    "layout": "--layout",
    "cluster_state": "--cluster-state",
    "source": "--from",
    "target": "--to",
}
"""Argument -> flag of every option that may name a file the command reads."""


def output_targets(args: argparse.Namespace) -> Iterator[tuple[str, Path]]:
    """(flag, path) of every file the parsed command will write."""
    placement = getattr(args, "placement", None)
    if placement is not None:
        path = Path(placement)
        yield "--placement", path
        yield "--placement", path.with_name(path.name + ".hostfile")  # placement_file.hostfile_path
    for report in getattr(args, "report", None) or []:
        yield "--report", Path(report)
    if getattr(args, "out", None) is not None:
        yield "--out", Path(args.out)
    markdown = getattr(args, "markdown", None)
    if markdown is not None:
        path = Path(markdown)
        yield "--markdown", path
        yield "--markdown", path.with_name(f"{path.stem}-serving.md")
    if getattr(args, "graphml", None) is not None:
        yield "--graphml", Path(args.graphml)
    if getattr(args, "pareto", None) is not None:
        yield "--pareto", Path(args.pareto)


def input_files(args: argparse.Namespace) -> Iterator[tuple[str, Path]]:
    """(flag, path) of every existing file among the command's inputs, with the system and
    accelerator files a cluster file names (``accelerator: ./h100_96gb.yaml``)."""
    for dest, flag in INPUT_FLAGS.items():
        value = getattr(args, dest, None)
        if isinstance(value, str | Path) and str(value).strip():
            path = Path(value)
            with contextlib.suppress(OSError, ValueError):
                if path.is_file():
                    yield flag, path
                    if dest in ("cluster", "source", "target"):
                        yield from _named_by(flag, path)


def _named_by(flag: str, cluster_path: Path) -> Iterator[tuple[str, Path]]:
    from planner.catalog.variants import named_files

    if cluster_path.suffix.lower() not in (".yaml", ".yml", ".json"):
        return
    for key, path in named_files(cluster_path):
        with contextlib.suppress(OSError, ValueError):
            if path.is_file():
                yield f"{flag} file's {key}", path


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, an output that is an input, a folder, or in a missing folder."""
    from planner.errors import SpecError

    for dest in ("placement", "out", "markdown", "graphml", "report", "pareto"):
        values = getattr(args, dest, None)
        for raw in values if isinstance(values, list) else [values]:
            if isinstance(raw, str) and (not raw.strip() or raw.endswith(("/", os.sep))):
                raise SpecError(f"cannot write --{dest} {raw!r}: it is not a file name")
    inputs = list(input_files(args))
    seen: dict[str, str] = {}
    for flag, target in output_targets(args):
        check_writable(flag, target)
        key = os.path.realpath(target)
        if key in seen:
            raise SpecError(
                f"{flag} '{target}' is given twice (also as {seen[key]}): name two files"
            )
        seen[key] = flag
        if target.exists() and not os.access(target, os.W_OK):
            raise SpecError(f"{flag} '{target}' is not writable")
        for in_flag, source in inputs:
            if _same_file(target, source):
                raise SpecError(
                    f"{flag} '{target}' is the {in_flag} file: it would be overwritten; "
                    "write the output somewhere else"
                )


def wrote(command: str, target: object) -> None:
    """The 'wrote FILE' line on stderr, with the file name made one printable line."""
    import sys

    from planner.errors import printable

    sys.stderr.write(f"layout {command}: wrote {printable(str(target))}\n")


def check_writable(flag: str, target: Path) -> None:
    """One line when ``target`` cannot be written: a folder, a missing or read-only folder, a
    name too long."""
    from planner.errors import SpecError

    folder = target.parent if str(target.parent) else Path(".")
    try:
        problem = _unwritable(target, folder)
    except (OSError, ValueError) as exc:
        problem = getattr(exc, "strerror", None) or str(exc)
    if problem:
        raise SpecError(f"cannot write {flag} '{target}': {problem}")


def _unwritable(target: Path, folder: Path) -> str | None:
    if target.is_dir():
        return "is a directory, not a file"
    if target.exists() and not target.resolve().is_file():  # a device, a FIFO, a socket
        return "exists and is not a regular file; name a new or regular file"
    if _in_catalog(target):
        return (
            "is inside the planner's catalog (models, topologies, validation rows); write elsewhere"
        )
    if not folder.is_dir():
        return f"the folder '{folder}' does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder '{folder}' is not writable"
    if len(target.name.encode("utf-8", "surrogateescape")) > _name_max(folder):
        return "the file name is too long for its folder"
    return None


def _in_catalog(target: Path) -> bool:
    """Whether ``target`` lies in a catalog folder the planner reads by name (a model or system
    loaded as ``8B`` or ``hgx_h100x8`` is an input too, though no flag names its file)."""
    from planner.catalog import catalog_root

    root = catalog_root()
    where = Path(os.path.realpath(target))
    for folder in ("models", "topologies", "tests/validation", "validation"):
        base = Path(os.path.realpath(root / folder))
        if base.is_dir() and (where == base or base in where.parents):
            return True
    return False


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def _mode_for(path: Path) -> int:
    """The permission bits a plain ``open(path, "w")`` would give: the existing file's, else
    0666 less the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text_atomic(target: str | Path, text: str) -> None:
    """Write ``text`` to ``target`` through a temporary file in the same folder and a rename:
    an interrupt (Ctrl-C), a full disk or any error leaves no partial file behind."""
    from planner.errors import SpecError

    path = Path(os.path.realpath(target))  # through a symlink to its target, as open() writes
    folder = path.parent
    tmp_name = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".tmp", dir=folder)
        os.chmod(tmp_name, _mode_for(path))  # mkstemp's 0600 would leak into the output
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp_name, path)
        tmp_name = None
    except OSError as exc:
        raise SpecError(f"cannot write '{path}': {exc.strerror or exc}") from None
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
