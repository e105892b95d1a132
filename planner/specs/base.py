"""The base of every spec: frozen, strict, finite, documented."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenSpec(BaseModel):
    """Immutable pydantic model: unknown keys rejected, NaN/inf rejected, field docstrings kept."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        allow_inf_nan=False,
        use_attribute_docstrings=True,
        strict=False,
        validate_default=True,
    )
