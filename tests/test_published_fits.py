"""Published layouts that really ran must fit the memory model (issue 18, "every published
layout in the validation set is accepted as fitting"), for the reason their source gives, with
numbers a reader can check by hand."""

from __future__ import annotations

import pytest

from planner.accuracy.rows import (
    TrainingRow,
    load_rows,
    stated_layout,
    to_model_spec,
    workload_of,
)
from planner.accuracy.run import training_file
from planner.catalog import load_model
from planner.cost.memory import logits_bytes, weight_bytes
from planner.cost.params import total_params
from planner.cost.sharding import sharded_state_bytes
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout
from planner.specs.workload import TrainWorkload

GiB = 2.0**30


def _row(row_id: str) -> TrainingRow:
    return next(r for r in load_rows(training_file()) if r.id == row_id)


def test_fp8_param_gather_keeps_one_byte_per_weight() -> None:
    """Megatron-LM ``--fp8-param-gather`` keeps the compute parameters in fp8 only: 1 byte per
    parameter instead of the bf16 copy plus its fp8 cache (3 bytes)."""
    assert weight_bytes(70e9, NumberFormat.FP8) == 210e9
    assert weight_bytes(70e9, NumberFormat.FP8, low_precision_params=True) == 70e9
    assert weight_bytes(70e9, NumberFormat.BF16, low_precision_params=True) == 140e9


def test_te_cross_entropy_keeps_bf16_logits() -> None:
    """Transformer Engine's fused loss saves its bf16 input: 2 b s V bytes (Llama 3 70B, mbs 2,
    8K tokens: 2 x 2 x 8192 x 128256 = 4.20 GB); Megatron's own loss keeps fp32, twice that."""
    model, layout = load_model("70B"), Layout(dp=64, mbs=2)
    assert logits_bytes(model, layout, 8192, "te") == 2 * 2 * 8192 * 128256
    assert logits_bytes(model, layout, 8192, "native") == 4 * 2 * 8192 * 128256


def test_megatron_fsdp_steps_on_its_gradient_shard() -> None:
    """ZeRO-3 (Megatron-FSDP, FSDP2) has no fp32 copy of the gradient shard beside the optimizer
    state: 12 bytes of master weight and Adam moments per sharded parameter; the distributed
    optimizer (ZeRO-1) with bf16 gradients copies its shard to fp32 in the step (4 more bytes,
    held only then)."""
    workload = TrainWorkload(grad_reduce_dtype="bf16")
    params = (64e9, 0.0)
    zero3 = sharded_state_bytes(params, Layout(dp=64, zero=3), workload, num_layers=80)
    zero1 = sharded_state_bytes(params, Layout(dp=64, zero=1), workload, num_layers=80)
    assert (zero3.optimizer, zero3.step_transient) == (12 * 1e9, 0.0)
    assert (zero1.optimizer, zero1.step_transient) == (12 * 1e9, 4 * 1e9)


def test_the_step_copy_of_the_gradients_never_meets_the_activations() -> None:
    """Megatron-LM's distributed optimizer makes its fp32 copy of the bf16 gradient shard in the
    step and frees it before the next forward (``_copy_model_grads_to_main_grads``,
    ``zero_grad(set_to_none=True)``): the peak is the state plus the larger of the activations
    and that copy, not their sum."""
    from planner.cost.stage_memory import StageMemory

    mem = StageMemory(weights=10.0, grads=5.0, optimizer=20.0, activations=8.0, step_transient=3.0)
    assert mem.total == 43.0
    assert mem.model_copy(update={"activations": 1.0}).total == 38.0


def test_precision_aware_optimizer_halves_the_moments() -> None:
    """bf16 Adam moments (Megatron-LM --use-precision-aware-optimizer --exp-avg-dtype bf16
    --exp-avg-sq-dtype bf16): 4 + 2 + 2 = 8 bytes per sharded parameter on an fp8 layout; on a
    bf16 layout the master copy is the 16-bit remainder beside the parameter (6 bytes) and the
    step reads the gradient buffer with no fp32 copy."""
    params = (64e9, 0.0)
    workload = TrainWorkload(grad_reduce_dtype="bf16", optimizer_state_dtype="bf16")
    fp8 = sharded_state_bytes(
        params, Layout(dp=64, zero=1, precision="fp8"), workload, num_layers=80
    )
    bf16 = sharded_state_bytes(params, Layout(dp=64, zero=1), workload, num_layers=80)
    assert (fp8.optimizer, fp8.step_transient) == (8 * 1e9, 4 * 1e9)
    assert (bf16.optimizer, bf16.step_transient) == (6 * 1e9, 0.0)
    # FSDP2's fp32 parameters are their own master copy: no remainder beside a bf16 half
    fsdp2 = workload.model_copy(update={"fp32_params": True})
    zero3 = sharded_state_bytes(params, Layout(dp=64, zero=3), fsdp2, num_layers=80)
    assert zero3.optimizer == 8 * 1e9


def test_g4_nemotron4_340b_fits_as_nemo_ran_it() -> None:
    """G4 (NeMo 24.07: Nemotron-4 340B, 128 H100, TP8 PP8 VPP12 DP2, fp8, selective recompute,
    Apex distributed_fused_adam with bf16 state). Stage 0 holds 12 layers x 431.8M + the
    256000 x 18432 / 8 embedding = 5.771e9 parameters: weights 3 B each (bf16 + fp8 cache) =
    16.1 GiB, bf16 gradients 10.7 GiB, optimizer 8 B / 2 ranks = 21.5 GiB, and activations;
    it ran without full recomputation, so it must fit the 75 GiB the planner allows (it
    needed 89.2 GiB with fp32 moments and the step's gradient copy counted with the
    activations)."""
    from planner.accuracy.rows import row_cluster
    from planner.search import engine

    row = _row("G4")
    model, workload = to_model_spec(row), workload_of(row)
    assert workload.optimizer_state_dtype == "bf16" and workload.grad_reduce_dtype == "bf16"
    layout = Layout.model_validate({**stated_layout(row), "precision": workload.precision})
    assert layout.recompute == "selective"
    plan = engine.estimate(model, row_cluster(row), workload, layout)
    memory = plan.memory
    assert plan.fits
    params = 5.771e9
    assert memory.weights_gib == pytest.approx(3 * params / GiB, rel=2e-3)
    assert memory.grads_gib == pytest.approx(2 * params / GiB, rel=2e-3)
    assert memory.optimizer_gib == pytest.approx(8 * params / 2 / GiB, rel=2e-3)
    assert memory.optimizer_step_gib == pytest.approx(4 * params / 2 / GiB, rel=2e-3)


def test_ngb1_llama3_70b_fp8_fsdp_on_gb200_fits() -> None:
    """NGB1 (Megatron-Bridge 26.04.01, Llama 3 70B FP8-CS, FSDP 64, mbs 2, 8K, GB200): fp8
    parameters (1 B each: the 70.55e9 / 64 shard and 2 / 80 of them gathered), bf16 logits
    (2 x 2 x 8192 x 128256 B = 3.9 GiB) and Megatron-FSDP's bf16 gradient shard make it fit the
    163.9 GiB the planner allows a GB200 (it needed 174.4 GiB before)."""
    from planner.accuracy.rows import row_cluster
    from planner.search import engine

    row = _row("NGB1")
    model, workload = to_model_spec(row), workload_of(row)
    assert workload.fp8_param_gather and workload.cross_entropy == "te"
    layout = Layout.model_validate({**stated_layout(row), "precision": workload.precision})
    plan = engine.estimate(model, row_cluster(row), workload, layout)
    memory = plan.memory
    assert plan.fits and memory.peak_gib <= memory.capacity_gib
    shard = total_params(model) / 64
    assert memory.optimizer_gib == pytest.approx(12 * shard / GiB, rel=1e-6)
    gathered = 2 * total_params(model) / 80  # two of the 80 layers' share, 1 B each
    assert memory.weights_gib == pytest.approx((shard + gathered) / GiB, rel=1e-3)


def test_llama3_405b_stage_activations_from_the_paper_shapes() -> None:
    """Llama 3.1 405B on TP8 (sequence parallel), 8K tokens, no recompute: one layer stores,
    per token, the two norm inputs and outputs (4 x 16384), Q, K, V (16384 + 2 x 1024), the
    attention output (16384) and its fp32 log-sum-exp (2 x 128), and the SwiGLU's gate, up and
    product (3 x 53248): 260,352 values x 2 B / 8 = 65,088 B per token, 533.2 MB per layer for
    8,192 tokens; PP16's second stage (8 layers) holds 15 micro-batches under 1F1B: 63.97 GB."""
    from planner.cost.step import estimate_memory

    row = _row("LLM1")
    model, workload = to_model_spec(row), workload_of(row)
    layout = Layout(tp=8, pp=16, dp=64, mbs=1, zero=3, recompute="none")
    stages, memory = estimate_memory(model, workload, layout)
    per_layer = 260352 * 2 / 8 * 8192
    assert memory[stages.index(1)].activations == pytest.approx(15 * 8 * per_layer, rel=1e-9)


def test_llama3_fsdp_shards_its_gradients_under_pp() -> None:
    """Llama 3's FSDP 'shards optimizer states and gradients' (arXiv 2407.21783 section 3.3.2):
    with gradients reduce-scattered per run of contiguous micro-batches (pp_grad_sync round),
    a stage of 3.19e9 parameters per GPU holds an fp32 shard (/64) and two of its 7 chunks
    unsharded, 3.6 GB, where torchtitan's pipelining holds all of them in fp32 (12.7 GB)."""
    params = (3.19e9, 0.0)
    layout = Layout(tp=8, pp=16, vpp=7, dp=64, zero=3)
    step = TrainWorkload(framework="torchtitan", reshard_after_forward="never")
    rounds = step.model_copy(update={"pp_grad_sync": "round"})
    held = sharded_state_bytes(params, layout, step, num_layers=8).grads
    sharded = sharded_state_bytes(params, layout, rounds, num_layers=8).grads
    assert held == pytest.approx(4 * 3.19e9)
    assert sharded == pytest.approx(4 * 3.19e9 / 64 + 4 * 3.19e9 * 2 / 7)


@pytest.mark.parametrize(("row_id", "measured"), [("LLM1", 163.0), ("LLM2", 151.6)])
def test_llama3_405b_rows_fit_and_predict(row_id: str, measured: float) -> None:
    """LLM1 / LLM2 (Table 4: TP8 PP16 DP64 / DP128, 8K, no activation checkpointing) fit and
    land within 10% of the measured tokens/s/GPU."""
    from planner.accuracy.rows import expand_cases
    from planner.accuracy.run import evaluate_case

    case = next(c for c in expand_cases(load_rows(training_file())) if c.id == row_id)
    result = evaluate_case(case)
    assert result.status == "ok" and result.fits
    assert result.predicted_tokens_per_s_per_gpu == pytest.approx(measured, rel=0.10)


def test_tpu_hbm_is_what_xla_lets_a_program_use() -> None:
    """XLA:TPU's compile-time check reports 'Used X of 15.75G hbm' on v5e, 'of 31.25G' on v6e
    and 'of 95.74G' on v5p (GiB): the physical 16 / 32 / 96 GiB less its reserve."""
    from planner.catalog import load_accelerator

    for name, usable_gib in (("tpu_v5e", 15.75), ("tpu_v6e", 31.25), ("tpu_v5p", 95.74)):
        assert load_accelerator(name).usable_memory_bytes / GiB == pytest.approx(
            usable_gib, abs=0.01
        ), name


@pytest.mark.parametrize(
    ("name", "reported_bytes"),
    [
        ("b200", 183359 * 2**20),  # nvidia-smi memory.total 'NVIDIA B200, 183359 MiB'
        ("b300", 275040 * 2**20),  # 'NVIDIA B300 SXM6 AC, 275040 MiB'
        ("gb200", 189471 * 2**20),  # 'NVIDIA GB200, 189471 MiB'
        ("gb300", 284208 * 2**20),  # 'NVIDIA GB300, 284208 MiB'
        ("mi300x", 205822885888),  # rocm-smi 'VRAM Total Memory (B): 205822885888'
        ("mi355x", 309220868096),  # rocm-smi 'VRAM Total Memory (B): 309220868096'
        ("mi350x", 309220868096),  # torch totalGlobalMem of an MI350X
    ],
)
def test_gpu_memory_is_what_the_driver_reports(name: str, reported_bytes: int) -> None:
    """Allocation limits start from the memory the driver exposes, not the marketing figure
    read as SI gigabytes: '192 GB' on an MI300X is 191.7 GiB, not 178.8; '279 GB' on a GB300
    is 277.5 GiB, not 259.8 (the catalog's hbm_total_MiB and its sources)."""
    from planner.catalog import load_accelerator

    assert load_accelerator(name).total_memory_bytes == reported_bytes, name


@pytest.mark.parametrize("row_id", ["AXL1", "AXL2", "AXL3", "AXL4", "AXL5", "AXL6"])
def test_axlearn_tpu_layouts_fit(row_id: str) -> None:
    """AXLearn's published TPU runs (fuji.py comments; AXL4 'HBM usage: 14GB/chip' on v5e) are
    accepted as fitting with their stated mesh and remat policy."""
    from planner.accuracy.rows import expand_cases
    from planner.accuracy.run import evaluate_case

    case = next(c for c in expand_cases(load_rows(training_file())) if c.id == row_id)
    result = evaluate_case(case)
    assert result.status == "ok" and result.fits, result.reason


def test_fp8_param_gather_halves_the_gather_only_in_an_eight_bit_format() -> None:
    """``fp8_param_gather`` all-gathers 1 byte per parameter instead of 2 in fp8 and mxfp8 (the
    formats with such a recipe); a bf16 or nvfp4 layout gathers its bf16 parameters and keeps
    2 bytes per weight, whatever the setting says (the exports say so)."""
    from planner.catalog import load_cluster
    from planner.cost.comm import all_gather_time, reduce_scatter_time
    from planner.cost.sharding import gathers_fp8_params
    from planner.cost.stage import MicrobatchTime
    from planner.cost.step import dp_exposed_time
    from planner.topology.hierarchy import comm_domains

    on, off = TrainWorkload(fp8_param_gather=True), TrainWorkload()
    assert gathers_fp8_params(on, Layout(dp=8, zero=1, precision="fp8"))
    assert gathers_fp8_params(on, Layout(dp=8, zero=1, precision="mxfp8"))
    assert not gathers_fp8_params(on, Layout(dp=8, zero=0, precision="fp8"))
    assert not gathers_fp8_params(on, Layout(dp=8, zero=1, precision="nvfp4"))
    assert not gathers_fp8_params(on, Layout(dp=8, zero=1))
    # without overlap the reduce-scatter and the gather are both exposed: the gather halves
    layout = Layout(dp=64, zero=1, precision="fp8")
    domains = comm_domains(load_cluster("hgx_h100x64"), layout)
    idle = MicrobatchTime(
        forward_s=0.0, backward_s=0.0, tp_comm_s=0.0, cp_comm_s=0.0, ep_comm_s=0.0
    )

    def exposed(workload: TrainWorkload, lay: Layout) -> float:
        fields = {"dp_comm_overlap": False, "grad_reduce_dtype": "bf16"}
        return dp_exposed_time(
            8e9, 0.0, lay, domains, slowest=idle, num_microbatches=1,
            workload=workload.model_copy(update=fields),
        )  # fmt: skip

    dp = domains["dp"]
    reduce = reduce_scatter_time(2 * 8e9, dp)
    assert exposed(off, layout) == pytest.approx(reduce + all_gather_time(2 * 8e9, dp))
    assert exposed(on, layout) == pytest.approx(reduce + all_gather_time(8e9, dp))
    bf16 = layout.model_copy(update={"precision": NumberFormat.BF16})
    assert exposed(on, bf16) == pytest.approx(exposed(off, bf16))


def test_pax_gpt3_fits_because_the_logits_and_the_recomputed_layer_never_meet() -> None:
    """DGX Cloud's Pax GPT-3 175B FP8 on 128 H100 (DPX1: FSDP 128, two sequences of 2,048
    tokens, the q, k, v and output projections saved) ran. The logits (bf16, Transformer
    Engine's loss: 2 x 2048 x 50257 x 2 B = 0.38 GiB) are freed before the backward re-runs the
    last layer (its working set 1.50 GiB), so the stage counts the larger: 74.8 GiB of the 75.0
    usable, where the sum would be 75.2 and refuse it. It fits inside the 5% a search keeps
    free, and says so."""
    from planner.accuracy.rows import expand_cases
    from planner.accuracy.run import predict_case
    from planner.cost.stage_memory import recompute_working_bytes

    row = _row("DPX1")
    model, workload = to_model_spec(row), workload_of(row)
    layout = Layout.model_validate({**stated_layout(row), "precision": workload.precision})
    logits = logits_bytes(model, layout, 2048, workload.cross_entropy)
    assert logits == 2 * 2048 * 50257 * 2
    working = recompute_working_bytes(model, workload, layout)
    assert working / GiB == pytest.approx(1.50, abs=0.01)
    case = next(c for c in expand_cases([row]) if c.id == "DPX1")
    plan = predict_case(case)
    assert plan.fits
    assert plan.memory.peak_gib == pytest.approx(74.8, abs=0.05)
    assert plan.memory.peak_gib + logits / GiB > plan.memory.capacity_gib  # summed: refused
    assert any(w.startswith("memory at 99.7% of usable") for w in plan.warnings)
