"""Serving engine profiles (topologies/engines/): the per-layer and per-request overheads, their
fit on the engine's published runs, and the flag that picks one."""

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
from planner.accuracy.serving_fit import LAYER_GRID_US, REQUEST_GRID_US, objective
from planner.catalog import load_cluster, load_model
from planner.catalog.engines import engine_names, load_engine
from planner.cost.serving_time import PassLoad, engine_iteration_time
from planner.errors import SpecError
from planner.search.serving import serve_setup
from planner.specs.result import ServeLayout
from planner.specs.workload import ServeWorkload
from tests.test_cli import run_main


def test_catalog_engines_load_and_only_tensorrt_llm_has_rows() -> None:
    assert engine_names() == ["sglang", "tensorrt-llm", "vllm"]
    trt = load_engine("tensorrt-llm")
    assert trt.has_rows and trt.fit is not None
    for name in ("vllm", "sglang"):
        other = load_engine(name)
        assert not other.has_rows and other.fit is None
        # an engine without rows takes tensorrt-llm's fit, as its YAML says
        assert (other.layer_overhead_us, other.sequence_overhead_us) == (
            trt.layer_overhead_us,
            trt.sequence_overhead_us,
        )
    with pytest.raises(SpecError, match=r"unknown serving engine 'vlm'.*vllm"):
        load_engine("vlm")


def test_engine_time_of_a_70b_pass_by_hand() -> None:
    """Llama 3.1 70B (80 layers) at TP4, one pass of 200 decoding sequences and one 2,048-token
    prompt chunk of 512 tokens: 80 x 50 us + (200 + 512 / 2048) x 6 us = 5.2015 ms."""
    engine = load_engine("tensorrt-llm")
    assert (engine.layer_overhead_us, engine.sequence_overhead_us) == (50.0, 6.0)
    workload = ServeWorkload(precision="fp8", kv_precision="fp8")
    layout = ServeLayout(tp=4, precision="fp8", kv_precision="fp8")
    setup = serve_setup(load_model("70B"), load_cluster("hgx_h100x4"), workload, layout)
    load = PassLoad(decode_sequences=200, context=1000, prefill_tokens=512, prompt_len=2048)
    assert engine_iteration_time(setup, load) * 1e3 == pytest.approx(5.2015)
    assert engine_iteration_time(setup.model_copy(update={"engine": None}), load) == 0.0
    pp2 = serve_setup(
        load_model("70B"), load_cluster("hgx_h100x8"), workload, layout.model_copy(update={"pp": 2})
    )
    assert engine_iteration_time(pp2, load) * 1e3 == pytest.approx(40 * 0.05 + 200.25 * 0.006)


def test_stored_engine_fit_is_todays_and_a_grid_minimum() -> None:
    """The fit record of tensorrt-llm.yaml is what the code gives today: its in-sample summary
    is recomputed exactly, and no neighbour on the grid has a smaller objective (rerun
    `python benchmarks/fit_serving_engine.py --write` after a change to the serving model)."""
    engine = load_engine("tensorrt-llm")
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
    i = LAYER_GRID_US.index(engine.layer_overhead_us)
    j = REQUEST_GRID_US.index(engine.sequence_overhead_us)
    for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        if not (0 <= i + di < len(LAYER_GRID_US) and 0 <= j + dj < len(REQUEST_GRID_US)):
            continue
        near = engine.model_copy(
            update={
                "layer_overhead_us": LAYER_GRID_US[i + di],
                "sequence_overhead_us": REQUEST_GRID_US[j + dj],
            }
        )
        others = {r.id: predict_row(r, engine=near).error for r in rows}
        assert objective(others, list(others)) >= best - 1e-12  # type: ignore[arg-type]
    # held out is worse than in sample, and every source was held out once
    assert fit.heldout.median_abs >= fit.in_sample.median_abs
    assert set(fit.heldout_fits) == {serving_source_of(r) for r in rows}
    assert len(fit.heldout_fits) >= 5
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
    assert vllm["uncertainty_pct"] > trt["uncertainty_pct"]
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
