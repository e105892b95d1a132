"""The GEMM tile and wave model (planner.cost.gemm.wave_efficiency): hand-countable tiles."""

from __future__ import annotations

import math

import pytest

from planner.catalog import load_accelerator, load_model
from planner.cost.gemm import (
    GemmRoofline,
    GemmShape,
    gemm_backward_times,
    gemm_time,
    layer_gemms,
    wave_efficiency,
)
from planner.specs.hardware import GemmTiling

H100 = GemmTiling(132, 128, 256)
B200 = GemmTiling(74, 256, 128)  # tiles go to SM pairs (2-SM MMA)


def test_full_waves_lose_only_the_last_one() -> None:
    # 4096 x 8192 in 128 x 256 tiles: 32 x 32 = 1024 tiles; 1024 / 132 -> 8 waves
    assert wave_efficiency(4096, 8192, H100) == pytest.approx(1024 / (8 * 132))


def test_tp8_shard_of_a_70b_qkv_projection_on_b200() -> None:
    # Llama 3 70B QKV at TP8: n = (64 + 2 x 8) x 128 / 8 = 1280; 4,096 tokens:
    # 16 x 10 = 160 tiles of 256 x 128 on 74 SM pairs -> 3 waves, 160 / 222 busy
    assert wave_efficiency(4096, 1280, B200) == pytest.approx(160 / 222)
    # the unsharded projection: 16 x 80 = 1280 tiles -> 18 waves of 74
    assert wave_efficiency(4096, 10240, B200) == pytest.approx(1280 / (18 * 74))


def test_the_better_orientation_is_taken() -> None:
    # 256 x 128: one tile either as 256 rows, or two as 128-row tiles of 256 columns padded
    tiling = GemmTiling(1000, 128, 256)
    assert wave_efficiency(256, 128, tiling) == pytest.approx(1.0)


def test_edge_tiles_are_padded() -> None:
    # 100 rows of a 128-row tile: 100 / 128 of the work is useful (one wave: 132 x 8 = 1056)
    assert wave_efficiency(100, 256 * 1056, H100) == pytest.approx(100 / 128)


def test_too_few_tiles_split_k_to_fill_one_wave() -> None:
    assert wave_efficiency(128, 256, H100) == pytest.approx(1.0)  # 1 tile x 132 splits
    # 5 tiles: 26 splits each = 130 of 132 units
    assert wave_efficiency(128, 5 * 256, H100) == pytest.approx(130 / 132)


def test_grouped_gemms_share_the_waves() -> None:
    one = wave_efficiency(1024, 2048, H100)  # 8 x 8 = 64 tiles: split 2 -> 128 of 132
    assert one == pytest.approx(128 / 132)
    # 8 experts of 64 tiles: 512 tiles -> 4 waves (528 slots)
    assert wave_efficiency(1024, 2048, H100, groups=8) == pytest.approx(512 / 528)


def test_backward_without_a_tile_model_is_twice_the_forward() -> None:
    g = GemmShape(name="up", m=4096, k=8192, n=7168, count=2)
    kw = dict(
        peak_flop_per_s=1e15,
        efficiency=0.7,
        bytes_per_value=2,
        hbm_bytes_per_s=3e12,
        kernel_overhead_s=4e-6,
    )
    roof = GemmRoofline(**kw)
    assert sum(gemm_backward_times(g, roof)) == pytest.approx(2 * gemm_time(g, **kw))


def test_backward_shapes_have_their_own_waves() -> None:
    # QKV at TP8 on B200: dX is 4096 x 8192 (16 x 64 = 1024 tiles -> 14 waves of 74),
    # dW is 8192 x 1280 (32 x 10 = 320 tiles -> 5 waves)
    g = GemmShape(name="qkv", m=4096, k=8192, n=1280, count=1)
    kw = dict(peak_flop_per_s=1e15, efficiency=1.0, bytes_per_value=2, hbm_bytes_per_s=1e14,
              kernel_overhead_s=0.0)  # fmt: skip
    flops_s = 2 * 4096 * 8192 * 1280 / 1e15
    dgrad, wgrad = gemm_backward_times(g, GemmRoofline(**kw, tiling=B200))
    assert dgrad == pytest.approx(flops_s / (1024 / (14 * 74)))
    assert wgrad == pytest.approx(flops_s / (320 / (5 * 74)))
    assert gemm_time(g, tiling=B200, **kw) == pytest.approx(flops_s / (160 / 222))


def test_catalog_tilings() -> None:
    assert load_accelerator("h100_sxm").gemm_tiling == GemmTiling(132, 128, 256)
    assert load_accelerator("b200").gemm_tiling == GemmTiling(74, 256, 128)
    assert load_accelerator("mi300x").gemm_tiling == GemmTiling(304, 256, 256)
    assert load_accelerator("tpu_v5p").gemm_tiling is None  # no wave model on a TPU


def test_a_tp8_shard_runs_further_from_peak_than_the_whole_layer_on_b200() -> None:
    model = load_model("llama3.1-70b")

    def busy(tp: int) -> float:
        gemms = layer_gemms(model, 4096, moe_layer=False, tp=tp, ep=1, etp=1)
        flops = sum(g.flops for g in gemms)
        slots = sum(g.flops / wave_efficiency(g.m, g.n, B200) for g in gemms)
        return flops / slots

    # TP8 (4,096 tokens): qkv 160 tiles 160/222 busy, out and down 1024 tiles 1024/1036, up
    # (2 x 28672 / 8 = 7168 columns) 896 tiles 896/962; weighted by FLOPs (k n: 8192 x 1280,
    # 1024 x 8192, 8192 x 7168, 3584 x 8192) the GEMMs keep 92.4% of the slots busy
    assert busy(8) == pytest.approx(0.9237, abs=1e-4)
    assert busy(1) > 0.98
    assert not math.isclose(busy(1), busy(8), rel_tol=0.05)
