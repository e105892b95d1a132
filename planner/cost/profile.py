"""Per-layer quantities of a model at a sequence length, computed once and summed per stage.

The search scores thousands of layouts of one model; every per-layer term (FLOPs, parameters,
activation values) depends only on the layer and the sequence length, so it is tabulated here
as prefix sums and each layout's stage totals are O(1) lookups.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import accumulate

from planner.cost.compute import (
    attention_core_flops_per_token,
    is_sliding_layer,
    linear_flops_per_token,
)
from planner.cost.memory import (
    layer_activation_values_per_token,
    layer_gemm_input_values_per_token,
    score_activation_values_per_token,
)
from planner.cost.params import layer_dense_and_expert_params
from planner.specs.base import FrozenSpec
from planner.specs.model import ModelSpec


class LayerTable(FrozenSpec):
    """Prefix sums over layers: index i holds the sum over layers [0, i)."""

    linear_flops: list[float]
    """Forward linear FLOPs per token."""
    attention_flops: list[float]
    """Forward attention-core FLOPs per token."""
    dense_params: list[float]
    """Parameters split over tp (attention, norms, router, dense FFN, shared experts)."""
    expert_params: list[float]
    """Routed-expert parameters (split over ep x etp)."""
    activation_values: list[float]
    """Activation values stored per token (flash attention, no recompute, unsharded)."""
    score_values: list[float]
    """Values per token of the stored score path (used when attention is not fused)."""
    gemm_input_values: list[float]
    """Of the activation values, those that are linear-layer inputs (stored low-precision)."""
    moe_layers: list[float]
    """Count of MoE layers."""

    def total(self, field: str, layers: range) -> float:
        """Sum of ``field`` over the contiguous ``layers``."""
        prefix: list[float] = getattr(self, field)
        return prefix[layers.stop] - prefix[layers.start]

    def sum(self, field: str, ranges: tuple[range, ...]) -> float:
        """Sum of ``field`` over several ranges of layers (a rank's chunks; a range may repeat)."""
        prefix: list[float] = getattr(self, field)
        return sum(prefix[r.stop] - prefix[r.start] for r in ranges)


@lru_cache(maxsize=512)
def layer_kinds(model: ModelSpec, seq_len: int) -> tuple[int, ...]:
    """Per layer, the index of its kind: layers whose every :func:`layer_table` term is equal
    share one (numbered in order of first appearance), so a per-layer quantity that depends
    on the layer only through those terms is computed once per kind.

    >>> from planner.catalog import load_model
    >>> layer_kinds(load_model("8B"), 8192) == (0,) * 32
    True
    """
    table = layer_table(model, seq_len)
    fields = list(type(table).model_fields)
    seen: dict[tuple[float, ...], int] = {}
    return tuple(
        seen.setdefault(tuple(table.total(f, range(i, i + 1)) for f in fields), len(seen))
        for i in range(model.num_layers)
    )


def _prefix(values: list[float]) -> list[float]:
    return [0.0, *accumulate(values)]


@lru_cache(maxsize=512)
def layer_table(model: ModelSpec, seq_len: int) -> LayerTable:
    """Tabulate every per-layer term of ``model`` at ``seq_len``."""
    layers = range(model.num_layers)
    split = [layer_dense_and_expert_params(model, i) for i in layers]
    attention = [
        attention_core_flops_per_token(model, seq_len, sliding=is_sliding_layer(model, i))
        for i in layers
    ]
    return LayerTable(
        linear_flops=_prefix([linear_flops_per_token(model, i) for i in layers]),
        attention_flops=_prefix(attention),
        dense_params=_prefix([float(d) for d, _ in split]),
        expert_params=_prefix([float(e) for _, e in split]),
        activation_values=_prefix(
            [layer_activation_values_per_token(model, i, seq_len) for i in layers]
        ),
        score_values=_prefix([score_activation_values_per_token(model, seq_len) for _ in layers]),
        gemm_input_values=_prefix([layer_gemm_input_values_per_token(model, i) for i in layers]),
        moe_layers=_prefix([1.0 if model.is_moe_layer(i) else 0.0 for i in layers]),
    )
