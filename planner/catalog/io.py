"""Safe file loading: every failure becomes one SpecError line naming the file and the rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from planner.errors import SpecError

MAX_FILE_BYTES = 16 * 2**20
"""Largest catalog / config file the planner reads (16 MiB): anything larger is not a spec."""

SpecT = TypeVar("SpecT", bound=BaseModel)


def read_text(path: Path) -> str:
    """Read a small UTF-8 text file, refusing directories, huge files and non-UTF-8 bytes."""
    if not path.exists():
        raise SpecError(f"file '{path}' does not exist")
    if path.is_dir():
        raise SpecError(f"'{path}' is a directory, not a file")
    if not path.is_file():  # a FIFO or device would block or never end
        raise SpecError(f"'{path}' is not a regular file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise SpecError(f"file '{path}' is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"file '{path}' is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise SpecError(f"cannot read '{path}': {exc.strerror}") from None
    if not text.strip():
        raise SpecError(f"file '{path}' is empty")
    return text


def _parse(path: Path) -> object:
    """Parse a YAML (safe loader only) or JSON file; every failure is one SpecError line."""
    text = read_text(path)
    try:
        return json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SpecError(f"cannot parse '{path}': {first}") from None
    except RecursionError:
        raise SpecError(f"cannot parse '{path}': nested too deeply to be a spec") from None


def load_mapping(path: Path) -> dict[str, object]:
    """Parse a YAML or JSON file whose top level must be a mapping."""
    data = _parse(path)
    if not isinstance(data, dict):
        raise SpecError(f"'{path}' must hold a mapping at the top level, got {type(data).__name__}")
    return data


def load_list(path: Path) -> list[object]:
    """Parse a YAML or JSON file whose top level must be a list (of rows)."""
    data = _parse(path)
    if not isinstance(data, list):
        raise SpecError(f"'{path}' must hold a list of rows, got {type(data).__name__}")
    return data


def validate_spec(spec_type: type[SpecT], data: object, *, where: str) -> SpecT:
    """Validate ``data`` as ``spec_type``; a ValidationError becomes one SpecError line."""
    try:
        return spec_type.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{where}: {describe_validation_error(exc)}") from None


def describe_validation_error(exc: ValidationError) -> str:
    """The first pydantic error as 'key.path: message (got value)', plus a count of the rest."""
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    text = f"{loc}: {msg}"
    if "input" in first and first["type"] not in ("missing", "extra_forbidden"):
        shown = repr(first["input"])
        text += f" (got {shown[:60]})"
    if len(errors) > 1:
        text += f" (+{len(errors) - 1} more)"
    return text
