"""DESIGN.md section 4 worked examples that concern catalogs and arithmetic."""

from __future__ import annotations

import pytest

from planner.catalog import load_accelerator, load_model
from planner.cost.compute import matmul_flops_and_bytes
from planner.cost.memory import fewest_accelerators_for_weights, model_weight_bytes
from planner.cost.params import total_params
from planner.specs.formats import NumberFormat

BF16, FP8, NVFP4 = NumberFormat.BF16, NumberFormat.FP8, NumberFormat.NVFP4


@pytest.mark.parametrize(("fmt", "expected_GB"), [(BF16, 140.0), (FP8, 70.0), (NVFP4, 35.0)])
def test_70b_weight_bytes(fmt: NumberFormat, expected_GB: float) -> None:
    # 70.55e9 parameters x 16 / 8 / 4 bits: within 1% of the rounded 140 / 70 / 35 GB
    params = total_params(load_model("70B"))
    assert model_weight_bytes(params, fmt, with_scales=False) / 1e9 == pytest.approx(
        expected_GB, rel=0.01
    )


def test_nvfp4_scales_add_half_a_bit() -> None:
    # NVFP4: E4M3 scale per 16 values -> 4.5 bits per value
    assert model_weight_bytes(16e9, NVFP4) == pytest.approx(16e9 * 4.5 / 8)


@pytest.mark.parametrize(
    ("accelerator", "fmt", "fewest"),
    [("h100_sxm", BF16, 2), ("h100_sxm", FP8, 1), ("h200_sxm", FP8, 1), ("b200", NVFP4, 1)],
)
def test_fewest_gpus_to_hold_70b(accelerator: str, fmt: NumberFormat, fewest: int) -> None:
    acc = load_accelerator(accelerator)
    weights = model_weight_bytes(total_params(load_model("70B")), fmt)
    assert fewest_accelerators_for_weights(weights, acc.usable_memory_bytes) == fewest


def test_fp8_70b_on_h200_leaves_about_70_gb() -> None:
    acc = load_accelerator("h200_sxm")
    weights = model_weight_bytes(total_params(load_model("70B")), FP8)
    assert (acc.hbm_bytes - weights) / 1e9 == pytest.approx(70.0, abs=1.5)


@pytest.mark.parametrize(("batch", "memory_bound"), [(1, True), (64, True), (4096, False)])
def test_matmul_8192_roofline_on_h100(batch: int, memory_bound: bool) -> None:
    # (B x 8192) . (8192 x 8192) in BF16: intensity vs the H100 ridge (~295 FLOP/byte)
    flops, num_bytes = matmul_flops_and_bytes(batch, 8192, 8192, 2)
    assert flops == 2 * batch * 8192**2
    assert num_bytes == 2 * (batch * 8192 + 8192**2 + batch * 8192)
    ridge = load_accelerator("h100_sxm").ridge_flop_per_byte(BF16)
    assert (flops / num_bytes < ridge) is memory_bound
