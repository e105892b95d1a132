"""How the routed experts run (issue 18, item 4: MoE as the framework runs it): MaxText's
megablox grouped GEMM, whose row tiles straddle the experts, GShard's einsum dispatch into
capacity slots, and the busiest rank's load applied to the routed experts alone. Every number
here is a tile or FLOP count a reader can redo by hand."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from planner.catalog import load_cluster, load_model
from planner.catalog.frameworks import resolve_workload
from planner.cost.gemm import einsum_dispatch_gemms, grouped_tile_rows
from planner.cost.stage import _layer_linear_time, _rates, microbatch_time
from planner.specs.layout import Layout
from planner.specs.workload import TrainWorkload
from planner.topology import comm_domains

MEGABLOX = (512, 1024, 1024)
"""MaxText's default megablox tiles (configs/base.yml: wi/wo_tile_fwd_batch_seq 512,
_embed_dim 1024, _mlp_dim 1024)."""

EXPERT_GEMMS = frozenset({"expert_up", "expert_down"})


def _expert_forward(workload: TrainWorkload, layout: Layout, cluster: str) -> float:
    """Forward seconds of one Mixtral 8x7B MoE layer's routed-expert GEMMs, one micro-batch."""
    model, acc = load_model("mixtral-8x7b"), load_cluster(cluster).accelerator
    tokens = layout.mbs * workload.seq_len / layout.cp
    rates = _rates(acc, layout.precision, workload, layout)
    degrees = (layout.tp, layout.ep, layout.etp)
    return _layer_linear_time(model, tokens, True, degrees, rates, EXPERT_GEMMS).forward


def test_megablox_revisits_a_row_tile_for_every_expert_after_the_first() -> None:
    """Mixtral 8x7B, two 4,096-token sequences per TPU v5p chip, no expert parallelism: 16,384
    routed copies (top-2) over 8 local experts fill 32 row tiles of 512, and each of the 7
    experts after the first starts inside a tile that it computes again: 39 tiles of work for
    32. The model (4,096) and expert FFN (14,336; 28,672 up with the gate) dimensions are whole
    1,024-tiles, so the rows are the whole cost: the expert GEMMs take 39/32 as long (less the
    per-kernel fixed cost, which does not grow)."""
    assert grouped_tile_rows(16384, 8, 512) == 39 * 512
    layout = Layout(tp=1, dp=128, ep=1, mbs=2, zero=3)
    plain = TrainWorkload(seq_len=4096, global_batch=256, framework="maxtext")
    tiled = plain.model_copy(update={"grouped_gemm_tiles": MEGABLOX})
    ratio = _expert_forward(tiled, layout, "tpu_v5px128") / _expert_forward(
        plain, layout, "tpu_v5px128"
    )
    assert ratio == pytest.approx(39 / 32, rel=0.01)
    # one expert per chip (EP 8): one group, no revisits, the same time as without tiles
    ep8 = layout.model_copy(update={"ep": 8})
    assert _expert_forward(tiled, ep8, "tpu_v5px128") == pytest.approx(
        _expert_forward(plain, ep8, "tpu_v5px128")
    )


def test_a_gpu_prices_grouped_gemms_with_its_own_tile_model() -> None:
    """The framework's kernel tiles apply where the accelerator has no tile model of its own; a
    GPU's grouped GEMM is priced by its SM tiles (each expert's rows padded to them), so the
    MaxText tiles change nothing on an H100."""
    layout = Layout(tp=1, dp=16, ep=1, mbs=2)
    plain = TrainWorkload(seq_len=4096, global_batch=64)
    tiled = plain.model_copy(update={"grouped_gemm_tiles": MEGABLOX})
    assert _expert_forward(tiled, layout, "hgx_h100x16") == _expert_forward(
        plain, layout, "hgx_h100x16"
    )


def test_gshard_dispatch_einsums_cost_two_group_topk_capacity_hidden_flops_per_token() -> None:
    """MaxText's dense_matmul with capacity_factor 1.25, Mixtral 8x7B at 4,096 tokens per
    sequence: each expert gets C = ceil(4096 x 2 / 8) x 1.25 = 1,280 slots; the dispatch einsum
    BSM,BSEC -> EBCM is a (8 x 1280) x 4096 x 4096 GEMM per sequence, 2 x 8 x 1280 x 4096 =
    83.9 MFLOP per token, and the combine einsum the same."""
    model = load_model("mixtral-8x7b")
    gemms = einsum_dispatch_gemms(
        model, 8192, group_tokens=4096, local_group_tokens=4096, capacity_factor=1.25, tp=1
    )
    per_token = [g.flops / 8192 for g in gemms]
    assert [g.name for g in gemms] == ["moe_dispatch", "moe_combine"]
    assert per_token == pytest.approx([2 * 8 * 1280 * 4096] * 2)
    assert per_token[0] == pytest.approx(2 * 4096 * 2 * 1.25 * 4096)  # 2 S k c D


def test_the_einsum_path_adds_two_einsums_forward_and_three_backward() -> None:
    """The dispatch mask is a boolean cast of the combine weights, so its einsum has one
    gradient (the tokens'), the combine einsum two (the expert outputs' and the gate
    weights'): forward 2 and backward 3 GEMMs of equal FLOPs, on a TPU with no tile model."""
    model, acc = load_model("mixtral-8x7b"), load_cluster("tpu_v5px128").accelerator
    layout = Layout(tp=1, dp=128, ep=1, mbs=2, zero=3)
    grouped = TrainWorkload(
        seq_len=4096, global_batch=256, framework="maxtext", moe_capacity_factor=1.25
    )
    einsum = grouped.model_copy(update={"moe_expert_compute": "einsum"})
    degrees, tokens = (1, 1, 1), 8192.0

    def times(workload: TrainWorkload) -> tuple[float, float]:
        rates = _rates(acc, layout.precision, workload, layout)
        t = _layer_linear_time(model, tokens, True, degrees, rates)
        return t.forward, t.dgrad + t.wgrad

    # the grouped kernel's tile revisits are not part of the einsum path: compare without them
    grouped = grouped.model_copy(update={"grouped_gemm_tiles": None})
    (f0, b0), (f1, b1) = times(grouped), times(einsum)
    added_forward, added_backward = f1 - f0, b1 - b0
    assert added_forward > 0
    assert added_backward / added_forward == pytest.approx(1.5, rel=0.02)


def test_the_einsum_path_needs_a_capacity() -> None:
    with pytest.raises(ValidationError, match="needs moe_capacity_factor"):
        TrainWorkload(moe_expert_compute="einsum")


def test_the_busiest_ranks_load_slows_its_routed_experts_not_its_attention() -> None:
    """Routing imbalance 1.3 on a TPU (no tile model): the micro-batch's forward grows by 0.3 x
    its routed-expert GEMMs and nothing else (attention, the router and the norms run on the
    rank's own tokens, whatever the routing)."""
    model, cluster = load_model("mixtral-8x7b"), load_cluster("tpu_v5px128")
    layout = Layout(tp=1, dp=128, ep=8, mbs=2, zero=3)
    domains, acc = comm_domains(cluster, layout), cluster.accelerator
    balanced = TrainWorkload(seq_len=4096, global_batch=256, framework="maxtext")
    skewed = balanced.model_copy(update={"expert_load_imbalance": 1.3})
    before = microbatch_time(model, acc, balanced, layout, stage=0, domains=domains)
    after = microbatch_time(model, acc, skewed, layout, stage=0, domains=domains)
    experts = model.num_layers * _expert_forward(balanced, layout, "tpu_v5px128")
    assert after.forward_s - before.forward_s == pytest.approx(0.3 * experts, rel=0.02)
    assert not math.isclose(after.forward_s, 1.3 * before.forward_s, rel_tol=0.01)


def test_deepspeed_shares_the_slots_over_the_whole_micro_batch() -> None:
    """DeepSpeed-MoE gates the rank's flattened micro-batch (two 4,096-token sequences: 8,192
    tokens), so at capacity 1 each of Mixtral's 8 experts gets ceil(8192 x 2 / 8) = 2,048 slots
    and the dispatch einsum costs 2 x 8 x 2048 x 4096 FLOPs per token, twice MaxText's per
    sequence (1,024 slots a sequence)."""
    model, acc = load_model("mixtral-8x7b"), load_cluster("hgx_h100x64").accelerator
    layout = Layout(tp=1, dp=64, ep=8, mbs=2)
    per_sequence = TrainWorkload(seq_len=4096, moe_capacity_factor=1.0, moe_expert_compute="einsum")
    per_batch = per_sequence.model_copy(update={"moe_routing_group": "microbatch"})
    flops = []
    for workload in (per_sequence, per_batch):
        dispatch = _rates(acc, layout.precision, workload, layout).dispatch
        assert dispatch is not None
        capacity, group, local = dispatch
        gemms = einsum_dispatch_gemms(
            model, 8192, group_tokens=group, local_group_tokens=local,
            capacity_factor=capacity, tp=1,
        )  # fmt: skip
        flops.append(gemms[0].flops / 8192)
    assert flops == pytest.approx([2 * 8 * 1024 * 4096, 2 * 8 * 2048 * 4096])


def _activations(workload: TrainWorkload, layout: Layout) -> float:
    from planner.cost.stage_memory import stage_memory

    model = load_model("mixtral-8x7b")
    return stage_memory(model, workload, layout, 0, 8).activations


def test_the_einsum_masks_are_kept_for_the_backward() -> None:
    """DeepSpeed-MoE keeps a bf16 copy of the dispatch and the combine mask of every MoE layer,
    tokens x E x C values each: Mixtral 8x7B, one 4,096-token sequence per micro-batch, capacity
    1: 4 bytes x 4,096 x (8 x 1,024) = 134 MB a layer, 32 layers, one micro-batch in flight
    without pipelining. Two sequences make the group twice as long and the slots twice as many:
    four times the bytes."""
    einsum = resolve_workload({"seq_len": 4096, "global_batch": 64, "framework": "deepspeed"})
    grouped = einsum.model_copy(update={"moe_expert_compute": "grouped"})
    assert einsum.moe_capacity_factor == 1.0 and einsum.moe_routing_group == "microbatch"
    one = Layout(tp=1, dp=8, ep=8, mbs=1)
    masks = _activations(einsum, one) - _activations(grouped, one)
    assert masks == pytest.approx(32 * 4 * 4096 * 8 * 1024)
    two = one.model_copy(update={"mbs": 2})
    assert _activations(einsum, two) - _activations(grouped, two) == pytest.approx(4 * masks)


def test_a_profile_taken_at_one_micro_batch_scales_the_masks_by_its_square() -> None:
    """The search takes a layout's memory profile once and reuses it for every micro-batch
    size: the masks of a micro-batch-wide routing group grow with its square there too."""
    from planner.cost.stage_memory import stage_memory_profile

    model = load_model("mixtral-8x7b")
    workload = resolve_workload({"seq_len": 4096, "global_batch": 64, "framework": "deepspeed"})
    one, four = Layout(tp=1, dp=8, ep=8, mbs=1), Layout(tp=1, dp=8, ep=8, mbs=4)
    reused = stage_memory_profile(model, workload, one, 0).memory(workload, four, 2)
    direct = stage_memory_profile(model, workload, four, 0).memory(workload, four, 2)
    assert reused.activations == pytest.approx(direct.activations, rel=1e-6)


def test_a_save_list_recomputes_the_masks() -> None:
    """MaxText's save lists name matmul outputs, never the masks: a save list keeps none, and
    without one MaxText's per-sequence group keeps them in proportion to the micro-batch."""
    base = resolve_workload(
        {"seq_len": 4096, "global_batch": 256, "framework": "maxtext", "moe_capacity_factor": 1.25}
    )
    einsum = base.model_copy(update={"moe_expert_compute": "einsum"})
    selective = Layout(tp=1, dp=128, ep=1, mbs=2, zero=3, recompute="selective")
    assert _activations(einsum, selective) == pytest.approx(_activations(base, selective))
    plain = selective.model_copy(update={"recompute": "none"})
    masks = _activations(einsum, plain) - _activations(base, plain)
    assert masks == pytest.approx(32 * 4 * 8192 * 8 * 1280)  # C = 1,024 x 1.25 per sequence


@pytest.mark.parametrize(("cluster", "megablox"), [("tpu_v5px128", True), ("hgx_h100x16", False)])
def test_the_maxtext_export_sets_the_megablox_tiles_only_where_they_were_priced(
    cluster: str, megablox: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a TPU the prediction priced megablox's tiles, and the export pins them; on a GPU its
    own tile model priced the grouped GEMMs, and the export leaves MaxText's GPU defaults."""
    from planner.cli import main

    argv = ["export", "--format", "maxtext", "--model", "mixtral-8x7b", "--cluster", cluster]
    code = main([*argv, "--framework", "maxtext", "--seq-len", "4096", "--global-batch", "128"])
    out = capsys.readouterr().out
    assert code == 0 and "sparse_matmul: true" in out
    assert ("megablox: true" in out) is megablox
    assert ("wi_tile_fwd_batch_seq: 512" in out) is megablox


def test_the_moe_blocks_tp_collectives_follow_expert_tp() -> None:
    """Mixtral 8x7B at TP 2 on one HGX H100 (no TP overlap, so every collective is exposed): at
    expert TP 1 an MoE layer's FFN sub-block has no TP collective (the routed tokens stay
    sequence-parallel), so its TP time is the attention's pair alone, half a dense layer's; at
    expert TP 2 the routed copies are all-gathered and reduce-scattered over the expert-TP
    group, top-2 times the activation: about three times a single pair (the larger pair pays its
    step latencies once, not twice)."""
    model, cluster = load_model("mixtral-8x7b"), load_cluster("hgx_h100x8")
    work = TrainWorkload(seq_len=4096, global_batch=64, tp_comm_overlap=False)

    def tp_time(etp: int) -> float:
        layout = Layout(tp=2, dp=4, ep=4 if etp == 2 else 8, etp=etp)
        domains = comm_domains(cluster, layout)
        return microbatch_time(model, cluster.accelerator, work, layout, stage=0,
                               domains=domains).tp_comm_s  # fmt: skip

    one, two = tp_time(1), tp_time(2)
    dense = model.model_copy(update={"moe": None})
    layout = Layout(tp=2, dp=4)
    dense_s = microbatch_time(dense, cluster.accelerator, work, layout, stage=0,
                              domains=comm_domains(cluster, layout)).tp_comm_s  # fmt: skip
    assert one == pytest.approx(dense_s / 2)
    assert two == pytest.approx(3 * one, rel=0.02) and two < 3 * one
