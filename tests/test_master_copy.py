"""An optimizer with no fp32 master copy (``TrainWorkload.master_copy`` false): what each GPU
holds, by hand, against the two optimizers beside it.

Per parameter a GPU steps, at rest under FSDP (ZeRO-3, every state sharded): fp32 parameters
(torchtitan) hold the fp32 parameter (its own master copy), an fp32 gradient shard and two fp32
moments, 4 + 4 + 8 = 16 bytes; Megatron Core's precision-aware optimizer with bf16 moments holds
the bf16 parameter, its 16-bit master remainder, the gradient in the reduce dtype and two bf16
moments; AutoModel's bf16 model under ``torch.optim.Adam`` holds the bf16 parameter, the bf16
gradient shard FSDP2 casts to the parameter's dtype and two bf16 moments, 2 + 2 + 4 = 8 bytes.
"""

from __future__ import annotations

import pytest

from planner.cost.sharding import sharded_state_bytes
from planner.cost.step import optimizer_step_bytes_per_param
from planner.errors import SpecError
from planner.specs.layout import Layout
from planner.specs.workload import TrainWorkload

PARAMS = (8e9, 0.0)
"""A stage of 8 billion dense parameters."""
LAYOUT = Layout(dp=8, zero=3)
"""FSDP over 8 ranks: 1e9 parameters a GPU at rest."""


def _at_rest(workload: TrainWorkload) -> tuple[float, float, float]:
    state = sharded_state_bytes(PARAMS, LAYOUT, workload, num_layers=32, transient=False)
    return state.weights / 1e9, state.grads / 1e9, state.optimizer / 1e9


def test_no_master_copy_holds_eight_bytes_a_parameter_under_fsdp() -> None:
    plain_bf16 = TrainWorkload(master_copy=False, optimizer_state_dtype="bf16")
    assert _at_rest(plain_bf16) == (2.0, 2.0, 4.0)  # bf16 weight, bf16 gradient, two moments
    fp32_params = TrainWorkload(fp32_params=True)
    assert _at_rest(fp32_params) == (0.0, 4.0, 12.0)  # master = parameter, fp32 moments
    remainder = TrainWorkload(optimizer_state_dtype="bf16")
    assert _at_rest(remainder) == (2.0, 4.0, 6.0)  # + 16-bit remainder, fp32 reduced shard


def test_no_master_copy_below_zero_3_keeps_its_moments_only() -> None:
    ddp = sharded_state_bytes(
        PARAMS,
        Layout(dp=8, zero=1),
        TrainWorkload(master_copy=False, optimizer_state_dtype="bf16"),
        num_layers=32,
    )
    assert ddp.optimizer / 1e9 == 4.0  # 1e9 parameters' two bf16 moments, no master copy
    assert ddp.step_transient == 0.0  # the step reads the gradient where it lies


def test_the_step_streams_no_master_copy() -> None:
    # fp32 moments: read m, v, grad (4 each) and the bf16 weight (2), write m, v and the weight
    assert optimizer_step_bytes_per_param(TrainWorkload(master_copy=False)) == 24.0
    assert optimizer_step_bytes_per_param(TrainWorkload()) == 30.0  # + the fp32 master r/w


def test_fp32_parameters_are_their_own_master_copy() -> None:
    with pytest.raises(ValueError, match="master_copy false needs fp32_params false"):
        TrainWorkload(fp32_params=True, master_copy=False)
    import planner

    with pytest.raises(SpecError, match="master_copy"):
        planner.estimate(
            model="8B",
            cluster="hgx_h100x8",
            workload={"framework": "torchtitan", "master_copy": False},
            layout={"dp": 8, "zero": 3},
        )
