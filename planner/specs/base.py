"""The base of every spec: frozen, strict, finite, documented."""

from __future__ import annotations

import types
import typing
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class NotANumber:
    """A boolean or a string given where a number is meant, wrapped so that pydantic's number
    check refuses it at the field's own location (its lax mode would read ``true`` as 1 and
    ``"7"`` as 7). Its ``repr`` is the value's, so messages show what the user wrote."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


class NotABoolean(NotANumber):
    """A value other than true/false given where a boolean is meant (see NotANumber)."""

    __slots__ = ()


_NUMBERS = frozenset({int, float})


@cache
def _number_shape(annotation: Any) -> str | None:
    """'number' for an int/float field (optionally ``| None``), 'dict' / 'list' for a mapping or
    sequence of such numbers, else None. ``Annotated`` constraints are looked through."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _number_shape(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        shapes = {_number_shape(a) for a in args}
        return shapes.pop() if len(shapes) == 1 else None
    if origin is dict:
        args = typing.get_args(annotation)
        return "dict" if len(args) == 2 and _number_shape(args[1]) == "number" else None
    if origin in (list, tuple):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return "list" if args and all(_number_shape(a) == "number" for a in args) else None
    if annotation is bool:
        return "bool"
    return "number" if annotation in _NUMBERS else None


@cache
def _numeric_fields(spec: type[BaseModel]) -> dict[str, str]:
    """Input key (name and alias) -> shape ('number', 'dict', 'list') of a spec's numeric
    fields."""
    found: dict[str, str] = {}
    for name, info in spec.model_fields.items():
        shape = _number_shape(info.annotation)
        if shape is not None:
            found[name] = shape
            if info.alias:
                found[info.alias] = shape
    return found


def _wrap(value: object) -> object:
    return NotANumber(value) if isinstance(value, bool | str) else value


class FrozenSpec(BaseModel):
    """Immutable pydantic model: unknown keys rejected, NaN/inf rejected, and no boolean or
    string accepted where a number is meant (``hidden_size: true``). Field docstrings become the
    JSON Schema's descriptions when the schema is generated (planner.report.schema), not when the
    class is built: pydantic's ``use_attribute_docstrings`` re-reads every model's source at
    import, a fifth of a second on every command."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        allow_inf_nan=False,
        strict=False,
        validate_default=True,
        defer_build=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _no_bool_or_text_for_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        numbers = _numeric_fields(cls)
        out = None
        for key, shape in numbers.items():
            if key not in data:
                continue
            value = data[key]
            if shape == "number":
                new = _wrap(value)
            elif shape == "bool":  # lax mode reads 1, 'on', 'yes' and 0.0 as booleans
                new = value if isinstance(value, bool) else NotABoolean(value)
            elif shape == "dict" and isinstance(value, dict):
                new = {k: _wrap(v) for k, v in value.items()}
                new = value if all(new[k] is value[k] for k in value) else new
            elif shape == "list" and isinstance(value, list | tuple):
                items = [_wrap(v) for v in value]
                new = value if all(a is b for a, b in zip(items, value, strict=True)) else items
            else:
                new = value
            if new is not value:
                out = dict(data) if out is None else out
                out[key] = new
        return data if out is None else out
