"""Number formats: the closed set of precisions the planner reasons about.

Bits per value include the block-scale overhead of micro-scaled formats:
- MXFP8 / MXFP4: one 8-bit E8M0 scale per 32 values -> +0.25 bit per value
  (OCP Microscaling Formats (MX) v1.0 specification, 2023, section 5).
- NVFP4: one 8-bit E4M3 scale per 16 values -> +0.5 bit per value, plus one FP32 per-tensor scale
  (negligible per value) (NVIDIA technical blog "Introducing NVFP4", 2025).
- FP8 (E4M3/E5M2 with per-tensor scaling): 8 bits; the per-tensor FP32 scale is negligible.
"""

from __future__ import annotations

from enum import StrEnum


class NumberFormat(StrEnum):
    """A numeric format for weights, activations, KV cache or GEMM inputs."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    MXFP8 = "mxfp8"
    INT8 = "int8"
    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"


_ELEMENT_BITS: dict[NumberFormat, float] = {
    NumberFormat.BF16: 16.0,
    NumberFormat.FP16: 16.0,
    NumberFormat.FP8: 8.0,
    NumberFormat.MXFP8: 8.0,
    NumberFormat.INT8: 8.0,
    NumberFormat.NVFP4: 4.0,
    NumberFormat.MXFP4: 4.0,
}

# Block size and scale width of the micro-scaled formats (OCP MX v1.0; NVIDIA NVFP4).
_BLOCK_SCALE: dict[NumberFormat, tuple[int, int]] = {
    NumberFormat.MXFP8: (32, 8),
    NumberFormat.MXFP4: (32, 8),
    NumberFormat.NVFP4: (16, 8),
}

TRAINING_FORMATS: tuple[NumberFormat, ...] = (
    NumberFormat.BF16,
    NumberFormat.FP8,
    NumberFormat.MXFP8,
    NumberFormat.NVFP4,
    NumberFormat.MXFP4,
    NumberFormat.INT8,
)
"""Formats a training step's linear GEMMs may run in; which of them a framework has a recipe
for is its profile's ``training_precisions`` (int8: MaxText's AQT)."""


EIGHT_BIT_PARAM_FORMATS: tuple[NumberFormat, ...] = (NumberFormat.FP8, NumberFormat.MXFP8)
"""Formats whose training recipe can keep the parameters in 8 bits and all-gather them so
(Megatron-LM ``--fp8-param-gather``, which Transformer Engine supports for per-tensor and MXFP8
scaling; torchao's FSDP float8 all-gather). Megatron-Bridge's NVFP4 and blockwise recipes set
``fp8_param_gather = False`` (src/megatron/bridge/training/mixed_precision.py), and a 16-bit
layout has nothing to gather in 8 bits."""


def element_bits(fmt: NumberFormat) -> float:
    """Bits of one element, without block scales.

    >>> element_bits(NumberFormat.NVFP4)
    4.0
    """
    return _ELEMENT_BITS[fmt]


def bits_per_value(fmt: NumberFormat) -> float:
    """Storage bits per value, element bits plus the amortised block scale.

    >>> bits_per_value(NumberFormat.MXFP4)
    4.25
    >>> bits_per_value(NumberFormat.NVFP4)
    4.5
    """
    bits = _ELEMENT_BITS[fmt]
    if fmt in _BLOCK_SCALE:
        block, scale_bits = _BLOCK_SCALE[fmt]
        bits += scale_bits / block
    return bits


def bytes_per_value(fmt: NumberFormat) -> float:
    """Storage bytes per value including scale overhead.

    >>> bytes_per_value(NumberFormat.BF16)
    2.0
    """
    return bits_per_value(fmt) / 8.0
