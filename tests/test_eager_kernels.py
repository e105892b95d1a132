"""Eager PyTorch's extra elementwise traffic (planner/cost/gemm.py eager_extra_bytes_per_token),
checked by hand on the tiny model (d = 64, gated F = 128, 4 + 4 heads of 16, two norms)."""

from __future__ import annotations

from planner.cost.gemm import (
    EAGER_BIAS_BYTES_PER_VALUE,
    EAGER_NORM_BYTES_PER_VALUE,
    NORM_BYTES_PER_HIDDEN,
    eager_extra_bytes_per_token,
)
from planner.cost.params import _tiny

D, F, ROTATED = 64, 128, (4 + 4) * 16


def test_eager_rmsnorm_is_op_by_op_and_layernorm_is_one_kernel() -> None:
    rms = _tiny()
    layer = rms.model_copy(update={"norm": "layernorm"})
    norms = (EAGER_NORM_BYTES_PER_VALUE - NORM_BYTES_PER_HIDDEN) * 2 * D  # 32 x 2 x 64
    assert norms == 4096.0
    difference = eager_extra_bytes_per_token(rms, moe_layer=False) - eager_extra_bytes_per_token(
        layer, moe_layer=False
    )
    assert difference == norms
    # what is left for the LayerNorm model: RoPE (22 - 4) x 128 and SwiGLU (10 - 6) x 128
    assert eager_extra_bytes_per_token(layer, moe_layer=False) == 18 * ROTATED + 4 * F


def test_a_bias_costs_only_its_gradient_reduction() -> None:
    """cuBLASLt adds the bias in the GEMM epilogue; the backward reads the output gradient once
    (2 bytes per value), 1 forward-equivalent byte."""
    assert EAGER_BIAS_BYTES_PER_VALUE == 1.0
    plain = _tiny().model_copy(update={"norm": "layernorm"})
    biased = plain.model_copy(update={"mlp_bias": True})
    extra = eager_extra_bytes_per_token(biased, moe_layer=False) - eager_extra_bytes_per_token(
        plain, moe_layer=False
    )
    assert extra == 1.0 * (2 * F + D)  # gated up (2F wide) and down (D wide) outputs
