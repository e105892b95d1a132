"""Pipeline schedules as the framework profiles offer them: 1F1B (interleaved with vpp > 1),
zero bubble (ZB-H1, Qi et al., ICLR 2024, arXiv 2401.10241, Table 2: the bubble falls from
(p - 1)(F + B + W) to (p - 1)(F + B - W) at 1F1B's activation memory) and DualPipe."""

from __future__ import annotations

import json

import pytest

from planner.catalog import load_cluster, load_model
from planner.catalog.frameworks import load_framework
from planner.cost.pipeline import zero_bubble_share
from planner.errors import InfeasibleError
from planner.search import engine
from planner.specs.framework import FrameworkSpec
from planner.specs.layout import Layout
from planner.specs.result import Plan
from planner.specs.workload import TrainWorkload
from tests.test_cli import assert_one_line_error, run_main

LAYOUT = Layout(tp=8, pp=4, vpp=2, dp=2, mbs=1, zero=3)
"""70B on 64 H100 as torchtitan runs it: FSDP inside four interleaved pipeline stages."""


def _plan(schedule: str) -> Plan:
    workload = TrainWorkload(
        framework="torchtitan", seq_len=8192, global_batch=64, pipeline_schedule=schedule
    )
    return engine.estimate(load_model("70B"), load_cluster("hgx_h100x64"), workload, LAYOUT)


def test_zero_bubble_share_is_table_2_with_the_backward_split_evenly() -> None:
    # (F + B - W) / (F + B + W) with B = W = backward / 2: F / (F + backward)
    assert zero_bubble_share(1.0, 2.0) == pytest.approx(1 / 3)
    assert zero_bubble_share(1.0, 1.0) == pytest.approx(1 / 2)
    assert zero_bubble_share(3.0, 0.0) == 1.0  # no backward to defer: 1F1B's bubble


def test_zero_bubble_changes_the_bubble_and_nothing_else() -> None:
    one, zero = _plan("1f1b"), _plan("zero_bubble")
    a, b = one.breakdown_s, zero.breakdown_s
    assert a["pp_bubble"] > 0
    # without recomputation the backward is about twice the forward: about a third remains
    assert 0.3 < b["pp_bubble"] / a["pp_bubble"] < 0.4
    for term in a:
        if term != "pp_bubble":
            assert b[term] == pytest.approx(a[term]), term
    saved = a["pp_bubble"] - b["pp_bubble"]
    assert one.step_time_s - zero.step_time_s == pytest.approx(saved)
    assert zero.memory.peak_gib == pytest.approx(one.memory.peak_gib)  # ZB-H1: 1F1B's memory
    assert zero.workload.pipeline_schedule == "zero_bubble"


def test_a_profile_offers_its_schedules() -> None:
    assert load_framework("torchtitan").pipeline_schedules == ("1f1b", "zero_bubble")
    assert load_framework("megatron").pipeline_schedules == ("1f1b",)
    assert load_framework("hai-llm").pipeline_schedules == ("dualpipe",)
    megatron = load_framework("megatron").model_dump()
    megatron["workload"] = {**megatron["workload"], "pipeline_schedule": "dualpipe"}
    with pytest.raises(ValueError, match="not among pipeline_schedules"):
        FrameworkSpec.model_validate(megatron)


def test_a_schedule_the_framework_lacks_is_one_line_naming_who_has_it() -> None:
    args = ["estimate", "--model", "70B", "--cluster", "hgx_h100x64", "--tp", "8", "--pp", "4"]
    args += ["--dp", "2", "--mbs", "1", "--pipeline-schedule", "zero-bubble"]
    code, _, err = run_main([*args, "--vpp", "2"])
    line = assert_one_line_error(code, err, 2)
    assert "framework 'megatron' has no zero_bubble pipeline schedule (it has: 1f1b)" in line
    assert "--framework automodel or torchtitan can" in line
    code, _, err = run_main([*args, "--framework", "torchtitan", "--zero", "3", "--vpp", "1"])
    line = assert_one_line_error(code, err, 2)
    assert "two or more virtual stages per rank (vpp >= 2, got 1)" in line


def test_without_pipeline_the_schedule_is_moot() -> None:
    args = ["estimate", "--model", "8B", "--cluster", "hgx_h100x8", "--tp", "1", "--dp", "8"]
    args += ["--mbs", "1", "--recompute", "full"]
    code, out, err = run_main([*args, "--pipeline-schedule", "zero-bubble", "--json"])
    assert code == 0, err
    assert json.loads(out)["workload"]["pipeline_schedule"] == "zero_bubble"


def test_a_zero_bubble_search_keeps_to_interleaved_pipelines() -> None:
    workload = TrainWorkload(
        framework="torchtitan", seq_len=8192, global_batch=64, pipeline_schedule="zero_bubble"
    )
    try:
        result = engine.search(
            load_model("70B"), load_cluster("hgx_h100x64"), workload, fix={"pp": 4}
        )
    except InfeasibleError as exc:  # pragma: no cover - the layout above fits
        pytest.fail(str(exc))
    plans = [result.best, *result.alternatives]
    assert all(p.layout.pp == 4 and p.layout.vpp >= 2 for p in plans)
    assert all(p.breakdown_s["pp_bubble"] > 0 for p in plans)


def test_gpipe_holds_every_micro_batch() -> None:
    """GPipe runs every forward before the backwards: each stage holds all m micro-batches'
    activations, where 1F1B's first stage holds pp (Huang et al. 2019; SC'21 section 2.2.1)."""
    from planner.cost.stage_memory import stage_memory_profile

    model, m = load_model("70B"), 16
    layout = Layout(tp=8, pp=4, dp=2, mbs=1, zero=1, recompute="none")
    work = {s: TrainWorkload(seq_len=8192, global_batch=32, pipeline_schedule=s)
            for s in ("1f1b", "gpipe")}  # fmt: skip
    held = {s: stage_memory_profile(model, w, layout, 0).memory(w, layout, m)
            for s, w in work.items()}  # fmt: skip
    per = stage_memory_profile(model, work["1f1b"], layout, 0).activations_per_sequence
    assert held["gpipe"].activations - held["1f1b"].activations == pytest.approx(
        (m - layout.pp) * per
    )


def test_gpipe_with_full_recomputation_keeps_one_input_per_chunk() -> None:
    """GPipe's re-materialization keeps only the partition boundaries (Huang et al. 2019,
    section 2.2); MaxText's per-iteration remat, one chunk of one micro-batch, recomputes the
    chunk with its layers rematted again inside: one input per chunk and micro-batch, and the
    chunk's layer inputs while it is recomputed."""
    from planner.cost.stage_memory import stage_memory_profile

    model = load_model("70B")
    layout = Layout(tp=8, pp=4, vpp=2, dp=2, mbs=1, zero=1, recompute="full")
    one, gp = (
        stage_memory_profile(
            model, TrainWorkload(seq_len=8192, global_batch=32, pipeline_schedule=s), layout, 1
        )
        for s in ("1f1b", "gpipe")
    )
    layers = 80 // 4  # the stage's layers, 10 per chunk
    layer_input = one.activations_per_sequence / layers
    assert gp.activations_per_sequence == pytest.approx(layout.vpp * layer_input)
    assert gp.fixed_per_sequence == pytest.approx(
        one.fixed_per_sequence + layer_input * layers / layout.vpp
    )


def test_maxtext_runs_equal_chunks_without_a_split_search() -> None:
    profile = load_framework("maxtext")
    assert profile.pipeline_split == "even" and profile.pipeline_equal_stages
    args = ["estimate", "--model", "70B", "--cluster", "tpu_v5px128", "--tp", "4", "--pp", "8"]
    args += ["--dp", "4", "--mbs", "1", "--zero", "3", "--recompute", "full"]
    code, _, err = run_main([*args, "--vpp", "3"])
    line = assert_one_line_error(code, err, 2)
    assert "runs the same layers on every pipeline chunk: pp x vpp (24) must divide the 80" in line
    code, out, err = run_main([*args, "--vpp", "2", "--json"])
    assert code == 0, err
    plan = json.loads(out)
    assert plan["workload"]["pipeline_schedule"] == "gpipe"
    assert plan["pipeline_split"]["method"] == "even"


def test_maxtext_runs_only_its_own_pipeline() -> None:
    assert load_framework("maxtext").pipeline_schedules == ("gpipe",)
    args = ["estimate", "--model", "70B", "--cluster", "tpu_v5px128", "--tp", "4", "--pp", "4"]
    args += ["--dp", "8", "--mbs", "1", "--zero", "3", "--pipeline-schedule", "1f1b"]
    code, _, err = run_main(args)
    line = assert_one_line_error(code, err, 2)
    assert "framework 'maxtext' has no 1f1b pipeline schedule (it has: gpipe)" in line


def test_the_maxtext_export_states_the_layers_per_stage() -> None:
    """base.yml: the decoder layers = stages x num_layers_per_pipeline_stage x repeats (its
    default of one layer per stage would not match a chunk of 5)."""
    args = ["export", "--format", "maxtext", "--model", "70B", "--cluster", "tpu_v5px128"]
    for pin in ("tp=4", "pp=8", "vpp=2", "mbs=1", "recompute=full"):
        args += ["--fix", pin]
    code, out, err = run_main(args)
    assert code == 0, err
    assert "num_pipeline_repeats: 2" in out and "num_layers_per_pipeline_stage: 5" in out
    args = ["export", "--format", "maxtext", "--model", "70B", "--cluster", "hgx_h100x48"]
    code, out, err = run_main([*args, "--fix", "tp=8", "--fix", "pp=3"])
    assert code == 0, err
    assert "num_layers_per_pipeline_stage:" not in out
    assert "80 layers over pp x vpp = 3 chunks: MaxText runs equal chunks" in err
