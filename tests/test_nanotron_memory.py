"""Nanotron's memory as its code allocates it (``TrainWorkload.framework_buffers``; issue 18,
point 3), checked by hand on a tiny model and a round parameter count, and Megatron-LM unchanged.

Tiny model (planner.cost.params._tiny): D 64, 4 heads of 16 (as many KV heads: Nanotron's MHA
path), SwiGLU F 128, V 1000, 2 layers.
"""

from __future__ import annotations

from planner.catalog.frameworks import resolve_workload
from planner.cost.memory import framework_layer_values
from planner.cost.params import _tiny
from planner.cost.sharding import sharded_state_bytes
from planner.cost.stage_memory import stage_memory_profile
from planner.specs.layout import Layout
from planner.specs.workload import FRAMEWORK_BUFFERS, TrainWorkload

NANOTRON = resolve_workload({"framework": "nanotron", "seq_len": 10})
"""The Nanotron profile's workload at a 10-token sequence."""


def _without_buffers(workload: TrainWorkload) -> TrainWorkload:
    return workload.model_copy(update={"framework_buffers": ()})


def test_nanotron_profile_lists_every_buffer_and_megatron_none() -> None:
    assert set(NANOTRON.framework_buffers) == set(FRAMEWORK_BUFFERS)
    assert resolve_workload({"framework": "megatron"}).framework_buffers == ()
    assert TrainWorkload().framework_buffers == ()


def test_layer_values_mha_copy_and_silu_output() -> None:
    tiny = _tiny()
    both = ("mha_qkv_copy", "glu_act")
    # MHA: the second K/V copy 2 x 64, the SiLU output F = 128
    assert framework_layer_values(tiny, both, moe_layer=False) == 2 * 64 + 128
    # GQA (2 KV heads): Nanotron copies q, k, v apart, nothing beyond the set; F stays
    gqa = tiny.model_copy(update={"num_kv_heads": 2})
    assert framework_layer_values(gqa, both, moe_layer=False) == 128
    assert framework_layer_values(tiny, both, moe_layer=True) == 2 * 64  # MoE FFN not read


def test_stage_activations_grow_by_the_extra_values() -> None:
    # TP2, one stage of 2 layers, 10 tokens a sequence: 2 B x 10 x 2 layers x 256 / 2 = 5,120 B
    layout = Layout(tp=2, dp=1, mbs=1, zero=0)
    with_buffers = stage_memory_profile(_tiny(), NANOTRON, layout, 0)
    without = stage_memory_profile(_tiny(), _without_buffers(NANOTRON), layout, 0)
    assert with_buffers.activations_per_sequence - without.activations_per_sequence == 5120.0


def test_fp32_logits_copy_and_tp_gather_buffers_are_held_once() -> None:
    # the loss's kept fp32 input: 4 B x 10 tokens x 1000 / 2 = 20,000 B;
    # two full-sequence bf16 gather buffers: 2 x 2 B x 10 x 64 = 2,560 B; both per sequence
    layout = Layout(tp=2, dp=1, mbs=1, zero=0)
    with_buffers = stage_memory_profile(_tiny(), NANOTRON, layout, 0)
    without = stage_memory_profile(_tiny(), _without_buffers(NANOTRON), layout, 0)
    assert with_buffers.fixed_per_sequence - without.fixed_per_sequence == 20000.0 + 2560.0
    tp1 = Layout(tp=1, dp=1, mbs=1, zero=0)  # no TP: no gather buffers, 4 B x 10 x 1000 more
    diff = (
        stage_memory_profile(_tiny(), NANOTRON, tp1, 0).fixed_per_sequence
        - stage_memory_profile(_tiny(), _without_buffers(NANOTRON), tp1, 0).fixed_per_sequence
    )
    assert diff == 40000.0


def test_ddp_buckets_at_zero0_only() -> None:
    params = (1e9, 0.0)
    zero0 = sharded_state_bytes(params, Layout(dp=4, zero=0), NANOTRON, num_layers=2)
    assert zero0.grads == 4e9 + 2e9  # fp32 accumulator + DDP's bf16 buckets
    one_rank = sharded_state_bytes(params, Layout(dp=1, zero=0), NANOTRON, num_layers=2)
    assert one_rank.grads == 4e9  # no DDP at dp 1
    zero1 = sharded_state_bytes(params, Layout(dp=4, zero=1), NANOTRON, num_layers=2)
    assert zero1.grads == 4e9  # the ZeRO-1 optimizer owns the fp32 gradients: no DDP


def test_zero1_step_holds_the_flattened_gather() -> None:
    # flat input shard 2 B x 0.25e9 + flat outputs 2 B x 1e9 + NCCL's flat output 2 B x 1e9
    params = (1e9, 0.0)
    zero1 = sharded_state_bytes(params, Layout(dp=4, zero=1), NANOTRON, num_layers=2)
    assert zero1.step_transient == 0.5e9 + 2e9 + 2e9
    zero0 = sharded_state_bytes(params, Layout(dp=4, zero=0), NANOTRON, num_layers=2)
    assert zero0.step_transient == 0.0


def test_megatron_memory_unchanged_by_the_field() -> None:
    megatron = resolve_workload({"framework": "megatron", "seq_len": 10})
    for layout in (Layout(tp=2, dp=4, mbs=1, zero=0), Layout(tp=1, dp=4, mbs=2, zero=1)):
        profile = stage_memory_profile(_tiny(), megatron, layout, 0)
        assert profile == stage_memory_profile(_tiny(), _without_buffers(megatron), layout, 0)
        state = sharded_state_bytes((1e9, 0.0), layout, megatron, num_layers=2)
        # Megatron's distributed optimizer: fp32 grads 4 B/p, no DDP copy, no gather transient
        assert state.grads == 4e9
        assert state.step_transient == 0.0
