"""int8 training as MaxText runs it (AQT, ``quantization: int8``): every GEMM of a linear layer at
the int8 peak by default, the weight-gradient GEMMs in bf16 when the run sets
``quantization_local_shard_count`` 0 (MaxText layers/quantizations.py ``_get_int8_quant_config``:
drhs_bits None then; ``TrainWorkload.bf16_wgrad_formats``), and only where a framework profile has
the recipe (``training_precisions``)."""

from __future__ import annotations

import subprocess

import pytest

import planner
from planner.catalog import load_cluster, load_model
from planner.catalog.frameworks import resolve_workload
from planner.cost.stage import layers_forward
from planner.errors import SpecError
from planner.specs.formats import NumberFormat
from planner.specs.layout import Layout
from tests.test_cli import layout_command

MODEL = load_model("8B")
V6E = load_cluster("tpu_v6ex256")
LAYOUT = {"tp": 1, "pp": 1, "dp": 256, "mbs": 1, "recompute": "full", "zero": 3}


def _step(precision: str, **fields: object) -> float:
    plan = planner.estimate(
        model="8B", cluster="tpu_v6ex256", layout=LAYOUT, precision=precision,
        framework="maxtext", seq_len=8192, global_batch=256, **fields,
    )  # fmt: skip
    return plan.step_time_s


def test_wgrad_gemms_run_at_bf16_speed() -> None:
    """On TPU v6e int8's peak is twice bf16's (1,836 vs 918 TOPS, Google's v6e page) at the same
    efficiency, so the bf16 weight-gradient GEMMs take about twice the int8 forward's GEMM time:
    the backward's extra is one forward's linear time again (kernel overheads aside)."""
    workload = resolve_workload(
        {"framework": "maxtext", "seq_len": 8192, "global_batch": 256, "precision": "int8",
         "bf16_wgrad_formats": ("int8",)}
    )  # fmt: skip
    layout = Layout(**LAYOUT, precision=NumberFormat.INT8)
    part = layers_forward(MODEL, V6E.accelerator, workload, layout, (range(MODEL.num_layers),))
    assert workload.bf16_wgrad_formats == (NumberFormat.INT8,)
    assert part.wgrad_extra == pytest.approx(part.linear, rel=0.05)
    bf16 = layers_forward(
        MODEL, V6E.accelerator, workload, layout.model_copy(update={"precision": "bf16"}),
        (range(MODEL.num_layers),),
    )  # fmt: skip
    assert bf16.wgrad_extra == 0.0
    assert part.linear + part.wgrad_extra == pytest.approx(bf16.linear, rel=0.01)


def test_int8_with_bf16_weight_gradients_sits_between_bf16_and_int8() -> None:
    bf16, int8 = _step("bf16"), _step("int8")
    bf16_wgrad = _step("int8", bf16_wgrad_formats=("int8",))
    assert int8 < bf16_wgrad < bf16


def test_frameworks_without_an_int8_recipe_refuse_it() -> None:
    with pytest.raises(SpecError) as info:
        planner.estimate(
            model="8B", cluster="hgx_h100x8", layout={"tp": 1, "dp": 8}, precision="int8"
        )
    message = str(info.value)
    assert "framework 'megatron' has no int8 training recipe" in message
    assert "--framework maxtext has one" in message


def test_cli_int8_is_one_line_and_exit_2_under_megatron() -> None:
    run = subprocess.run(
        [*layout_command(), "estimate", "--model", "8B", "--cluster",
         "hgx_h100x8", "--precision", "int8"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1 and "int8 training recipe" in run.stderr
    ok = subprocess.run(
        [*layout_command(), "estimate", "--model", "8B", "--cluster",
         "tpu_v6ex256", "--framework", "maxtext", "--precision", "int8", "--global-batch", "256",
         "--dp", "256", "--zero", "3", "--recompute", "full"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "int8" in ok.stdout


def test_aqt_quantizes_the_weights_on_every_call() -> None:
    """MaxText's AQT quantizes the weight operand inside every dot_general (``weight_cast``
    per_call): with full recomputation a micro-batch reads each gathered weight three times (the
    forward, the recomputed forward, the input-gradient dot) and writes its int8 copy, 3 bytes
    per value at the effective HBM bandwidth. For Llama 3 8B on one v6e chip (TP1) a pass covers
    the layers' 6.98e9 weight values: 32 x 218.1M (qkv 4096 x 6144, out 4096 x 4096, gate+up
    4096 x 28672, down 14336 x 4096)."""
    workload = resolve_workload(
        {"framework": "maxtext", "seq_len": 8192, "global_batch": 256, "precision": "int8"}
    )
    assert workload.weight_cast == "per_call"
    layout = Layout(**LAYOUT, precision=NumberFormat.INT8)
    part = layers_forward(MODEL, V6E.accelerator, workload, layout, (range(MODEL.num_layers),))
    weights = 32 * (4096 * 6144 + 4096 * 4096 + 4096 * 28672 + 14336 * 4096)
    hbm = V6E.accelerator.hbm_bandwidth_GB_per_s * 1e9 * V6E.accelerator.efficiency.hbm
    assert part.weight_cast == pytest.approx(3.0 * weights / hbm)
    cached = workload.model_copy(update={"weight_cast": "per_step"})
    assert layers_forward(MODEL, V6E.accelerator, cached, layout, (range(32),)).weight_cast == 0.0
    bf16 = layout.model_copy(update={"precision": NumberFormat.BF16})
    assert layers_forward(MODEL, V6E.accelerator, workload, bf16, (range(32),)).weight_cast == 0.0
    # three passes a step at one micro-batch per GPU: the step grows by exactly that
    step = _step("int8")
    without = _step("int8", weight_cast="per_step")
    assert step - without == pytest.approx(3 * part.weight_cast, rel=1e-6)


def test_xla_gathers_weight_by_weight() -> None:
    """ZeRO-3 under XLA (``fsdp_gather_unit`` weight) holds two of the largest weight tensors
    gathered, in bf16, and their unsharded gradients, not two layers: for GPT-3 175B at TP1 the
    largest is the 12288 x 49152 FFN weight (603.98M values)."""
    from planner.cost.sharding import sharded_state_bytes
    from planner.cost.stage_memory import largest_weight_params

    gpt3 = load_model("gpt3-175b")
    largest = largest_weight_params(gpt3, tp=1)
    assert largest == 12288 * 49152
    layout = Layout(dp=256, zero=3)
    layer = 12 * 12288**2  # one layer's weights (biases aside)
    params = (96 * layer, 0.0)
    per_layer = resolve_workload({"framework": "maxtext", "fsdp_gather_unit": "layer"})
    per_weight = resolve_workload({"framework": "maxtext"})
    assert per_weight.fsdp_gather_unit == "weight"
    by_layer = sharded_state_bytes(params, layout, per_layer, num_layers=96)
    by_weight = sharded_state_bytes(
        params, layout, per_weight, num_layers=96, largest_weight=largest
    )
    assert by_layer.weights == pytest.approx(2 * layer * 2)  # two gathered layers in bf16
    assert by_weight.weights == pytest.approx(2 * largest * 2)  # two gathered weights in bf16
    shard_grads = 4 * params[0] / 256  # fp32 gradient shards (fp32 parameters)
    assert by_weight.grads == pytest.approx(shard_grads + 4 * 2 * largest)  # fp32 grad_reduce
    assert by_layer.optimizer == by_weight.optimizer
    # a stage holding the vocabulary table gathers it in place of one of the two: 50257 x 12288
    vocab = 50257 * 12288
    with_vocab = sharded_state_bytes(
        params, layout, per_weight, num_layers=96, largest_weight=largest, vocab_weight=vocab
    )
    assert with_vocab.weights == pytest.approx((largest + vocab) * 2)


def test_cli_gather_and_cast_flags_reach_the_plan_or_are_said_unused() -> None:
    """``--weight-cast`` and ``--fsdp-gather-unit`` set the workload (the MaxText int8 plan's step
    shrinks when its weights are cast once per step and its memory grows with two gathered
    layers), and a plan that cannot use them says so instead of dropping them silently."""
    import json

    from tests.test_cli import run_main

    base = [
        "estimate", "--model", "gpt3-175b", "--cluster", "tpu_v6ex1024", "--framework",
        "maxtext", "--precision", "int8", "--tp", "1", "--mbs", "2", "--recompute", "full",
        "--zero", "3", "--zero-shard-group", "256", "--seq-len", "2048", "--global-batch", "2048",
        "--json",
    ]  # fmt: skip
    code, out, err = run_main(base)
    assert code == 0, err
    per_call = json.loads(out)
    code, out, err = run_main([*base, "--weight-cast", "per_step"])
    assert code == 0, err
    assert json.loads(out)["step_time_s"] < per_call["step_time_s"]
    code, out, err = run_main([*base, "--fsdp-gather-unit", "layer"])
    assert code == 1 and "does not fit" in err  # two gathered 1.8B-parameter layers
    bf16 = ["estimate", "--model", "8B", "--cluster", "hgx_h100x8", "--tp", "2"]
    code, out, err = run_main([*bf16, "--weight-cast", "per_call"])
    assert code == 0 and "weight-cast per_call applies to 8- and 4-bit recipes" in out
