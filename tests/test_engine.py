"""Serving engine profiles (topologies/engines/): the per-layer and per-request overheads and the
kernels' speed, their fit on each engine's published runs, and the flag that picks one."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from planner.accuracy.serving import (
    engine_profile_of,
    load_serving_rows,
    predict_row,
    serving_file,
    serving_source_of,
)
from planner.accuracy.serving_fit import LAYER_GRID_US, REQUEST_GRID_US, compute_grid, objective
from planner.catalog import load_cluster, load_model
from planner.catalog.engines import engine_names, load_engine
from planner.cost.serving_time import PassLoad, engine_iteration_time, stage_pass_time
from planner.errors import SpecError
from planner.search.serving import serve_setup
from planner.specs.result import ServeLayout
from planner.specs.workload import ServeWorkload
from tests.test_cli import run_main


def test_catalog_engines_load_and_each_is_fitted_on_its_rows() -> None:
    assert engine_names() == ["sglang", "tensorrt-llm", "vllm"]
    rows = load_serving_rows(serving_file())
    for name in engine_names():
        engine = load_engine(name)
        assert engine.has_rows and engine.fit is not None
        assert engine.fitted_on == tuple(r.id for r in rows if engine_profile_of(r) == name)
    # the reference engine keeps the training fit's kernels; the others fit their own speed
    trt = load_engine("tensorrt-llm")
    assert not trt.fits_compute and trt.compute_efficiency == 1.0
    for name in ("vllm", "sglang"):
        assert load_engine(name).fits_compute and load_engine(name).compute_efficiency < 1.0
    with pytest.raises(SpecError, match=r"unknown serving engine 'vlm'.*vllm"):
        load_engine("vlm")


def test_engine_compute_efficiency_scales_the_compute_bound_kernels() -> None:
    """A 0.7 profile runs every GEMM format and attention at 0.7 of the fitted efficiency; a
    prefill pass (compute bound) slows by about 1/0.7, a batch-1 decode pass (weights
    streamed) hardly moves."""
    workload = ServeWorkload(precision="bf16", kv_precision="bf16")
    layout = ServeLayout(tp=1, precision="bf16", kv_precision="bf16")
    model, cluster = load_model("8B"), load_cluster("hgx_h100x1")
    ref = load_engine("tensorrt-llm").model_copy(
        update={"layer_overhead_us": 0.0, "sequence_overhead_us": 0.0}
    )
    slow = ref.model_copy(update={"compute_efficiency": 0.7})
    fast_setup = serve_setup(model, cluster, workload, layout, ref)
    slow_setup = serve_setup(model, cluster, workload, layout, slow)
    acc, scaled = fast_setup.accelerator, slow_setup.accelerator
    assert scaled.efficiency.attention == pytest.approx(0.7 * acc.efficiency.attention)
    for fmt, value in acc.efficiency.gemm.items():
        assert scaled.efficiency.gemm[fmt] == pytest.approx(0.7 * value)
    assert scaled.efficiency.hbm == acc.efficiency.hbm
    prefill = PassLoad(decode_sequences=0, context=1, prefill_tokens=8192, prompt_len=8192)
    decode = PassLoad(decode_sequences=1, context=1024)
    ratio = (
        stage_pass_time(slow_setup, prefill).total_s / stage_pass_time(fast_setup, prefill).total_s
    )
    assert 1.3 < ratio <= 1 / 0.7 + 1e-9
    ratio = (
        stage_pass_time(slow_setup, decode).total_s / stage_pass_time(fast_setup, decode).total_s
    )
    assert ratio < 1.02


def test_engine_time_of_a_70b_pass_by_hand() -> None:
    """Llama 3.1 70B (80 layers) at TP4, one pass of 200 decoding sequences and one 2,048-token
    prompt chunk of 512 tokens: 80 x 65 us + (200 + 512 / 2048) x 5 us = 6.20125 ms."""
    engine = load_engine("tensorrt-llm")
    assert (engine.layer_overhead_us, engine.sequence_overhead_us) == (65.0, 5.0)
    workload = ServeWorkload(precision="fp8", kv_precision="fp8")
    layout = ServeLayout(tp=4, precision="fp8", kv_precision="fp8")
    setup = serve_setup(load_model("70B"), load_cluster("hgx_h100x4"), workload, layout)
    load = PassLoad(decode_sequences=200, context=1000, prefill_tokens=512, prompt_len=2048)
    assert engine_iteration_time(setup, load) * 1e3 == pytest.approx(6.20125)
    assert engine_iteration_time(setup.model_copy(update={"engine": None}), load) == 0.0
    pp2 = serve_setup(
        load_model("70B"), load_cluster("hgx_h100x8"), workload, layout.model_copy(update={"pp": 2})
    )
    assert engine_iteration_time(pp2, load) * 1e3 == pytest.approx(40 * 0.065 + 200.25 * 0.005)


@pytest.mark.parametrize("name", ["tensorrt-llm", "vllm", "sglang"])
def test_stored_engine_fit_is_todays_and_a_grid_minimum(name: str) -> None:
    """The fit record of each engine's YAML is what the code gives today: its in-sample summary
    is recomputed exactly, and no neighbour on the fine grid has a smaller objective (rerun
    `python benchmarks/fit_serving_engine.py --write` after a change to the serving model)."""
    engine = load_engine(name)
    fit = engine.fit
    assert fit is not None
    rows = [r for r in load_serving_rows(serving_file()) if engine_profile_of(r) == engine.name]
    assert tuple(r.id for r in rows) == engine.fitted_on
    assert set(fit.heldout_errors) == set(engine.fitted_on)
    errors = {r.id: predict_row(r).error for r in rows}
    assert all(e is not None for e in errors.values())
    assert statistics.median(abs(e) for e in errors.values()) == pytest.approx(  # type: ignore[arg-type]
        fit.in_sample.median_abs, abs=1e-9
    )
    assert max(abs(e) for e in errors.values()) == pytest.approx(fit.in_sample.max_abs, abs=1e-9)  # type: ignore[arg-type]
    best = objective(errors, list(errors))  # type: ignore[arg-type]
    computes = compute_grid(engine)
    point = (
        LAYER_GRID_US.index(engine.layer_overhead_us),
        REQUEST_GRID_US.index(engine.sequence_overhead_us),
        computes.index(engine.compute_efficiency),
    )
    sizes = (len(LAYER_GRID_US), len(REQUEST_GRID_US), len(computes))
    for axis in range(3):
        for step in (-1, 1):
            near = list(point)
            near[axis] += step
            if not 0 <= near[axis] < sizes[axis]:
                continue
            other = engine.model_copy(
                update={
                    "layer_overhead_us": LAYER_GRID_US[near[0]],
                    "sequence_overhead_us": REQUEST_GRID_US[near[1]],
                    "compute_efficiency": computes[near[2]],
                }
            )
            others = {r.id: predict_row(r, engine=other).error for r in rows}
            assert objective(others, list(others)) >= best - 1e-12, (axis, step)  # type: ignore[arg-type]
    # held out is worse than in sample, and every source was held out once
    assert fit.heldout.median_abs >= fit.in_sample.median_abs
    assert set(fit.heldout_fits) == {serving_source_of(r) for r in rows}
    assert len(fit.heldout_fits) >= 3
    assert all(math.isfinite(e) for e in fit.heldout_errors.values())


def test_serving_engine_flag(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["estimate", "--model", "70B", "--cluster", "hgx_h200x8", "--mode", "serve"]
    base += ["--tp", "8", "--precision", "fp8", "--json"]
    code, out, err = run_main(base)
    assert code == 0, err
    code, vllm_out, err = run_main([*base, "--serving-engine", "vllm"])
    assert code == 0, err

    trt, vllm = json.loads(out), json.loads(vllm_out)
    assert trt["breakdown_s"]["engine"] > 0
    assert (trt["engine"]["profile"], vllm["engine"]["profile"]) == ("tensorrt-llm", "vllm")
    # vLLM's fitted figures (slower kernels, more per layer) make the same layout slower
    assert vllm["decode_step_s"] > trt["decode_step_s"]
    code, _, err = run_main([*base, "--serving-engine", "vlm"])
    assert code == 2 and "unknown serving engine 'vlm'" in err and "\n" not in err.strip()
    code, _, err = run_main(["search", "--model", "8B", "--cluster", "hgx_h100x8",
                             "--serving-engine", "vllm"])  # fmt: skip
    assert code == 2 and "--serving-engine" in err and "--mode serve" in err


def test_export_prices_with_the_exported_engine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`export --format vllm --mode serve` searches with the vllm profile; a saved plan priced
    with another engine exports with a note saying so."""
    base = ["--model", "8B", "--cluster", "hgx_h100x1", "--mode", "serve"]
    code, out, err = run_main(["export", "--format", "vllm", *base])
    assert code == 0, err
    assert "priced with the" not in out + err
    code, out, err = run_main(["estimate", *base, "--json"])
    assert code == 0, err
    assert json.loads(out)["engine"]["profile"] == "tensorrt-llm"
    saved = tmp_path / "plan.json"
    saved.write_text(out, encoding="utf-8")
    code, out, err = run_main(["export", "--format", "sglang", "--plan", str(saved)])
    assert code == 0, err
    assert "priced with the tensorrt-llm engine's overheads, not sglang's" in out


def test_api_takes_the_cli_names_of_the_serving_settings() -> None:
    """`planner.serve_search(serving_engine=..., max_num_tokens=...)` as the CLI spells them."""
    import planner

    plan = planner.serve_search(
        model="8B", cluster="hgx_h100x1", serving_engine="sglang", max_num_tokens=4096
    ).best
    assert plan.engine is not None
    assert (plan.engine.profile, plan.engine.max_num_tokens) == ("sglang", 4096)
    with pytest.raises(SpecError, match="serving_engine and engine name the same setting"):
        planner.serve_search(
            model="8B", cluster="hgx_h100x1", serving_engine="vllm", engine="sglang"
        )
