"""Cost-model formulas on hand-computed cases."""

from __future__ import annotations

import pytest

import planner
from planner.catalog import load_cluster, load_model
from planner.catalog.frameworks import resolve_workload
from planner.cost.comm import ring_all_reduce_time
from planner.cost.memory import activation_bytes_per_layer
from planner.cost.pipeline import bubble_fraction, microbatches_in_flight
from planner.search.evaluate import evaluate, score
from planner.specs.comm import CommDomain
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.workload import TrainWorkload
from planner.topology import comm_domains


def gpt3_with_scores_stored() -> ModelSpec:
    return load_model("175B")


def test_korthikanti_gpt3_activation_bytes_per_layer() -> None:
    # Korthikanti et al. 2022 eq. (2) with TP + SP: s b h (34 + 5 a s / h) / t, minus the
    # 5 a s^2 b score term that flash attention does not store: 34 s b h / t (+ tiny LSE).
    model = gpt3_with_scores_stored()
    s, b, h, t = 2048, 1, 12288, 8
    layout = Layout(tp=t, mbs=b)
    got = activation_bytes_per_layer(model, layout, s, layer_index=0)
    lse = 2 * 2 * model.num_attention_heads * s * b / t  # fp32 log-sum-exp per head and token
    assert got == pytest.approx(34 * s * b * h / t + lse, rel=1e-9)


def test_full_recompute_keeps_only_the_layer_input() -> None:
    model = gpt3_with_scores_stored()
    layout = Layout(tp=8, recompute=Recompute.FULL)
    assert activation_bytes_per_layer(model, layout, 2048, layer_index=0) == 2 * 2048 * 12288 / 8


def test_ring_all_reduce_on_one_nvswitch_board() -> None:
    # 2 (n-1)/n S / (W eta) + 2 (n-1) alpha on 8 H100 with NVLink 450 GB/s per direction
    cluster = load_cluster("hgx_h100x8")
    tp = comm_domains(cluster, Layout(tp=8))["tp"]
    link = cluster.system.scale_up
    size = 1e9
    expected = 2 * 7 / 8 * size / (450e9 * link.efficiency) + 14 * link.latency_s
    assert ring_all_reduce_time(size, tp) == pytest.approx(expected)


def test_dp_over_nodes_is_bounded_by_the_nic() -> None:
    cluster = load_cluster("hgx_h100x64")
    dp = comm_domains(cluster, Layout(tp=8, dp=8))["dp"]
    assert dp.tier == "scale_out"
    assert dp.bandwidth_bytes_per_s == pytest.approx(400e9 / 8)


def test_bubble_and_in_flight() -> None:
    assert bubble_fraction(4, 1, 12) == pytest.approx(3 / 12)
    assert bubble_fraction(4, 3, 12) == pytest.approx(3 / 36)
    assert microbatches_in_flight(8, 1, 4, 0) == 4  # fewer micro-batches than stages


def test_one_rank_groups_cost_nothing() -> None:
    one = CommDomain(size=1, bandwidth_bytes_per_s=1.0, latency_s=1.0, efficiency=1.0, tier="local")
    assert ring_all_reduce_time(1e12, one) == 0.0


WORKLOAD = TrainWorkload(seq_len=4096, global_batch=64)


def test_first_stage_holds_more_than_the_last() -> None:
    # 1F1B: stage 0 keeps pp micro-batches in flight, the last stage one (plus logits)
    model, cluster = load_model("70B"), load_cluster("hgx_h100x64")
    cost = score(model, cluster, WORKLOAD, Layout(tp=8, pp=8, dp=1))
    first, last = cost.stage_memory[0], cost.stage_memory[-1]
    assert cost.stages[-1] == 7
    assert first.activations > last.activations
    assert first.total > last.total


def test_70b_tp1_pp1_does_not_fit_on_80gb() -> None:
    # 16 bytes/param of weights + grads + Adam alone is ~1 TB at TP1 PP1 with ZeRO-0
    model, cluster = load_model("70B"), load_cluster("hgx_h100x8")
    plan = evaluate(model, cluster, WORKLOAD, Layout(tp=1, pp=1, dp=8, zero=0))
    assert not plan.fits
    assert plan.memory.weights_gib + plan.memory.grads_gib > plan.memory.capacity_gib


@pytest.mark.parametrize("dim", ["tp", "pp"])
def test_memory_per_gpu_falls_when_a_model_degree_doubles(dim: str) -> None:
    model, cluster = load_model("70B"), load_cluster("hgx_h100x64")
    small = Layout(tp=4, pp=2, dp=8)
    big = small.model_copy(update={dim: 2 * getattr(small, dim), "dp": 4})
    m_small = score(model, cluster, WORKLOAD, small).peak_memory
    m_big = score(model, cluster, WORKLOAD, big).peak_memory
    assert m_big.weights < m_small.weights


def test_slower_nic_never_speeds_a_step_up() -> None:
    model = load_model("70B")
    layout = Layout(tp=8, pp=2, dp=4)
    fast = score(model, load_cluster("hgx_h100x64", edits=None), WORKLOAD, layout)
    from planner.specs.cluster import ClusterEdits

    slow_cluster = load_cluster("hgx_h100x64", edits=ClusterEdits(nic_gbps=100))
    slow = score(model, slow_cluster, WORKLOAD, layout)
    assert slow.step_time_s >= fast.step_time_s
    assert slow.breakdown_s["pp_comm"] > fast.breakdown_s["pp_comm"]


def test_step_breakdown_sums_and_tokens_add_up() -> None:
    model, cluster = load_model("8B"), load_cluster("hgx_h100x8")
    plan = evaluate(model, cluster, WORKLOAD, Layout(tp=2, dp=4))
    assert sum(plan.breakdown_s.values()) == pytest.approx(plan.step_time_s, rel=1e-12)
    assert plan.tokens_per_s_per_gpu * plan.step_time_s * 8 == pytest.approx(64 * 4096)
    assert 0 < plan.mfu < 1


def test_dp_last_bucket_is_exposed_by_hand() -> None:
    """One reduction per step: the gradients of the last bucket (here the 1e8-parameter
    embedding, larger than a 40M bucket) are ready only when the backward ends, so their
    reduce-scatter is exposed in full and the next forward waits for their all-gather; the rest
    hides behind the backward / forward (contention 0). Ring costs with 8 ranks on 100 GB/s,
    no latency: reduce-scatter of B bytes = B x 7/8 / 1e11 s."""
    from planner.cost.stage import MicrobatchTime
    from planner.cost.step import dp_exposed_time, dp_tail_params
    from planner.specs.comm import CommDomain

    dp = CommDomain(
        size=8, bandwidth_bytes_per_s=1e11, latency_s=0.0, efficiency=1.0, tier="scale_out"
    )
    slow = MicrobatchTime(forward_s=1.0, backward_s=2.0, tp_comm_s=0, cp_comm_s=0, ep_comm_s=0)
    layout = Layout(dp=8, zero=1)
    exposed = dp_exposed_time(
        1e9, 0.0, layout, {"dp": dp}, slowest=slow, num_microbatches=4,
        workload=TrainWorkload(grad_reduce_dtype="fp32"), tail_params=1e8,
    )  # fmt: skip
    tail_reduce = 4 * 1e8 * 7 / 8 / 1e11  # fp32 gradients
    tail_gather = 2 * 1e8 * 7 / 8 / 1e11  # bf16 parameters
    assert exposed == pytest.approx(tail_reduce + tail_gather)
    model = load_model("8B")  # vocab 128256 x 4096 = 525M > 40M bucket
    assert dp_tail_params(model, Layout(tp=2, dp=8)) == 128256 * 4096 / 2
    assert dp_tail_params(model, Layout(tp=1, dp=128, cp=1)) == 128256 * 4096


def test_dp_reduction_without_overlap_is_exposed_in_full_by_hand() -> None:
    """Megatron-LM before --overlap-grad-reduce (2023-08) and DeepSpeed's pipeline engine reduce
    after the last backward: the whole fp32 reduce-scatter and bf16 all-gather are exposed,
    whatever the compute. Same ring as above: 1e9 parameters, 8 ranks on 100 GB/s. ZeRO-2
    reduces after every one of its 4 micro-batches; ZeRO-3 keeps its prefetch overlap."""
    from planner.cost.stage import MicrobatchTime
    from planner.cost.step import dp_exposed_time
    from planner.specs.comm import CommDomain

    dp = CommDomain(
        size=8, bandwidth_bytes_per_s=1e11, latency_s=0.0, efficiency=1.0, tier="scale_out"
    )
    slow = MicrobatchTime(forward_s=1.0, backward_s=2.0, tp_comm_s=0, cp_comm_s=0, ep_comm_s=0)
    reduce = 4 * 1e9 * 7 / 8 / 1e11  # fp32 gradients: 35 ms
    gather = 2 * 1e9 * 7 / 8 / 1e11  # bf16 parameters: 17.5 ms
    serial = TrainWorkload(grad_reduce_dtype="fp32", dp_comm_overlap=False)
    overlapped = TrainWorkload(grad_reduce_dtype="fp32")

    def exposed(workload: TrainWorkload, zero: int) -> float:
        return dp_exposed_time(
            1e9, 0.0, Layout(dp=8, zero=zero), {"dp": dp}, slowest=slow, num_microbatches=4,
            workload=workload, tail_params=1e8,
        )  # fmt: skip

    assert exposed(serial, 1) == pytest.approx(reduce + gather)
    assert exposed(serial, 0) == pytest.approx(2 * 4 * 1e9 * 7 / 8 / 1e11)  # fp32 all-reduce
    assert exposed(serial, 2) == pytest.approx(4 * reduce + gather)
    assert exposed(serial, 3) == pytest.approx(exposed(overlapped, 3))
    assert exposed(overlapped, 1) < exposed(serial, 1)


def test_nanotron_zero1_all_reduces_its_whole_gradient_buffer_after_the_backward_by_hand() -> None:
    """Nanotron's ZeRO-1 with fp32 accumulation (``zero1_grad_sync`` all_reduce) all-reduces the
    whole fp32 gradient buffer after the last backward and all-gathers the bf16 parameters after
    the step, neither overlapped whatever ``dp_comm_overlap`` says: 2 x 7/8 x 4 GB + 7/8 x 2 GB
    on a 100 GB/s ring of 8 ranks = 70 + 17.5 ms, against 35 + 17.5 ms for the reduce-scatter
    Megatron-LM's distributed optimizer runs after the backward. ZeRO-0 is not affected."""
    from planner.cost.stage import MicrobatchTime
    from planner.cost.step import dp_exposed_time
    from planner.specs.comm import CommDomain

    dp = CommDomain(
        size=8, bandwidth_bytes_per_s=1e11, latency_s=0.0, efficiency=1.0, tier="scale_out"
    )
    slow = MicrobatchTime(forward_s=1.0, backward_s=2.0, tp_comm_s=0, cp_comm_s=0, ep_comm_s=0)

    def exposed(zero: int, **fields: object) -> float:
        return dp_exposed_time(
            1e9, 0.0, Layout(dp=8, zero=zero), {"dp": dp}, slowest=slow, num_microbatches=4,
            workload=TrainWorkload(grad_reduce_dtype="fp32", **fields), tail_params=1e8,
        )  # fmt: skip

    whole = {"zero1_grad_sync": "all_reduce"}
    assert exposed(1, **whole) == pytest.approx(0.070 + 0.0175)
    assert exposed(1, dp_comm_overlap=False) == pytest.approx(0.035 + 0.0175)
    assert exposed(0, **whole) == pytest.approx(exposed(0))


def test_zero3_pays_one_collective_latency_per_wrapped_module_by_hand() -> None:
    """ZeRO-3 without overlap of the reduction (ZeRO-2-style exposure is not its path, so make
    compute zero): a stage of 32 layers gathers and reduce-scatters in 33 collectives (one per
    layer, one for the embedding and head), each paying the ring latency (n - 1) alpha. 8 ranks,
    alpha 10 us, 100 GB/s; 1e9 parameters, fp32 gradients; 4 micro-batches, resharded (two
    gathers per micro-batch). Bandwidth terms as one collective; latency 33 x 70 us per pass."""
    from planner.cost.stage import MicrobatchTime
    from planner.cost.step import dp_exposed_time
    from planner.specs.comm import CommDomain

    dp = CommDomain(
        size=8, bandwidth_bytes_per_s=1e11, latency_s=1e-5, efficiency=1.0, tier="scale_out"
    )
    idle = MicrobatchTime(forward_s=0.0, backward_s=0.0, tp_comm_s=0, cp_comm_s=0, ep_comm_s=0)

    def exposed(units: int) -> float:
        return dp_exposed_time(
            1e9, 0.0, Layout(dp=8, zero=3), {"dp": dp}, slowest=idle, num_microbatches=4,
            workload=TrainWorkload(grad_reduce_dtype="fp32"), units=units,
        )  # fmt: skip

    alpha = 7 * 1e-5  # one ring all-gather or reduce-scatter over 8 ranks
    reduce_bw = 4 * 1e9 * 7 / 8 / 1e11
    gather_bw = 2 * 1e9 * 7 / 8 / 1e11
    per_microbatch = (reduce_bw + 33 * alpha) + 2 * (gather_bw + 33 * alpha)
    assert exposed(33) == pytest.approx(4 * per_microbatch)
    assert exposed(33) - exposed(1) == pytest.approx(4 * 3 * 32 * alpha)


def test_dp_reduction_pays_one_ring_latency_per_gradient_bucket_by_hand() -> None:
    """Behind the backward a ZeRO-1 reduction runs one reduce-scatter and one all-gather per
    gradient bucket (Megatron-Core), each paying the ring latency (n - 1) alpha. 1e9
    parameters over 8 ranks, alpha 10 us, 100 GB/s; no compute to hide behind: 40M-parameter
    buckets (Megatron-LM before 2024-04-11) make 25 collectives each way, a 1e9 bucket one, so
    the difference is 2 x 24 x 7 x 10 us = 3.36 ms. The default bucket on 8 ranks is
    max(40M, 8M) = 40M; --ddp-bucket-size without overlap changes nothing (one buffer)."""
    from planner.cost.stage import MicrobatchTime
    from planner.cost.step import ddp_bucket_params, dp_exposed_time
    from planner.specs.comm import CommDomain

    dp = CommDomain(
        size=8, bandwidth_bytes_per_s=1e11, latency_s=1e-5, efficiency=1.0, tier="scale_out"
    )
    idle = MicrobatchTime(forward_s=0.0, backward_s=0.0, tp_comm_s=0, cp_comm_s=0, ep_comm_s=0)

    def exposed(**fields: object) -> float:
        return dp_exposed_time(
            1e9, 0.0, Layout(dp=8, zero=1), {"dp": dp}, slowest=idle, num_microbatches=4,
            workload=TrainWorkload(grad_reduce_dtype="fp32", **fields), tail_params=4e7,
        )  # fmt: skip

    one_bucket = 4 * 1e9 * 7 / 8 / 1e11 + 7e-5 + 2 * 1e9 * 7 / 8 / 1e11 + 7e-5
    assert exposed(ddp_bucket_params=10**9) == pytest.approx(one_bucket)
    assert exposed(ddp_bucket_params=40_000_000) - exposed(ddp_bucket_params=10**9) == (
        pytest.approx(2 * 24 * 7e-5)
    )
    assert exposed() == pytest.approx(exposed(ddp_bucket_params=40_000_000))
    assert ddp_bucket_params(Layout(dp=288)) == 288e6  # Megatron-Core's max(40M, 1M x dp)
    serial = {"dp_comm_overlap": False}
    assert exposed(ddp_bucket_params=40_000_000, **serial) == pytest.approx(one_bucket)


def test_fsdp2_buffer_copies_add_their_hbm_passes_to_the_step_by_hand() -> None:
    """FSDP2's copies on the compute stream (TrainWorkload.fsdp2_buffer_copies): an 8B model,
    FSDP over 8 H100, 2 micro-batches of 4,096 tokens, resharded, fp32 reductions. Per micro-batch
    two all-gathers each copied out (read + write bf16: 4 bytes per parameter) and one
    reduce-scatter copy-in (read bf16, write fp32: 2 + 4 = 6; the average is the collective's,
    ReduceOp.AVG, with no division kernel): 2 x (8 + 6) = 28 bytes per parameter per step, at
    the H100's effective HBM bandwidth. The step grows by exactly that and nothing else changes."""
    from planner.cost.sharding import fsdp2_buffer_copy_bytes
    from planner.cost.step import stage_params_per_gpu

    model, cluster = load_model("8B"), load_cluster("hgx_h100x8")
    layout = Layout(dp=8, zero=3, mbs=1)
    without = TrainWorkload(seq_len=4096, global_batch=16, fsdp2_buffer_copies=False)
    with_copies = without.model_copy(update={"fsdp2_buffer_copies": True})
    assert fsdp2_buffer_copy_bytes(with_copies, layout, 2) == 28.0
    base = evaluate(model, cluster, without, layout)
    copied = evaluate(model, cluster, with_copies, layout)
    acc = cluster.accelerator
    params = sum(stage_params_per_gpu(model, layout, 0, 4096))
    added = 28.0 * params / (acc.hbm_bytes_per_s * acc.efficiency.hbm)
    assert copied.step_time_s - base.step_time_s == pytest.approx(added, rel=1e-9)
    assert copied.breakdown_s["dp_comm"] - base.breakdown_s["dp_comm"] == pytest.approx(added)
    assert added == pytest.approx(28 * 8.03e9 / (3.35e12 * acc.efficiency.hbm), rel=0.01)


def test_heaviest_moe_stage_is_checked_after_leading_dense_layers() -> None:
    """DeepSeek-V3 (3 dense layers, then 58 MoE layers) on 32 stages: stage 1 holds only dense
    layers 1-2, stage 2 the first two MoE layers (2 x 256 experts of 3 x 7168 x 2048 = 22.5B
    parameters at EP 1). Memory and time must see stage 2, not only stages 0, 1 and the last."""
    from planner.cost.step import estimate_memory, representative_stages
    from planner.specs.workload import TrainWorkload

    model = load_model("671B")
    assert representative_stages(32, model, 4096) == [0, 1, 2, 31]
    assert representative_stages(32) == [0, 1, 31]  # without the model: uniform layers
    workload = TrainWorkload(seq_len=4096, global_batch=8192)
    stages, memory = estimate_memory(model, workload, Layout(tp=2, pp=32, dp=32, zero=1))
    by_stage = dict(zip(stages, memory, strict=True))
    assert by_stage[2].weights > 10 * by_stage[1].weights
    plan = planner.estimate(
        model="671B", cluster="hgx_h800x2048", layout={"tp": 2, "pp": 32, "dp": 32},
        workload={"seq_len": 4096, "global_batch": 8192, "precision": "fp8"},
    )  # fmt: skip
    assert not plan.fits and plan.memory.binding_stage == 2


def test_attention_is_exponential_bound_only_where_tensor_cores_outrun_the_sfu() -> None:
    """gpt-oss (head_dim 64: 2 x (64 + 64) = 256 FLOPs per score forward, 6 x 64 + 4 x 64 = 640
    backward). B200 runs 512 tensor FLOPs per exp: the forward takes 512 / 256 = 2x its matmul
    time, the backward (640 > 512) none. H100 (256) and B300 (doubled SFU: 256) are not bound,
    nor are head_dim-128 models on B200 (512 FLOPs per score)."""
    from planner.catalog import load_accelerator
    from planner.cost.stage import microbatch_compute

    gpt_oss, llama = load_model("gpt-oss-120b"), load_model("8B")
    b200, h100, b300 = (load_accelerator(n) for n in ("b200", "h100_sxm", "b300"))
    assert b200.bf16_flops_per_exp == 512 and h100.bf16_flops_per_exp == 256
    assert b300.bf16_flops_per_exp == 256
    workload = TrainWorkload(seq_len=4096, global_batch=64)
    layout = Layout(ep=8, dp=8)
    unbound = b200.model_copy(update={"bf16_flops_per_exp": None})
    bound_attention = microbatch_compute(gpt_oss, b200, workload, layout, 0)[2]
    free_attention = microbatch_compute(gpt_oss, unbound, workload, layout, 0)[2]
    assert bound_attention == pytest.approx(2.0 * free_attention)
    for model, acc in ((gpt_oss, h100), (gpt_oss, b300), (llama, b200)):
        free = acc.model_copy(update={"bf16_flops_per_exp": None})
        lay = layout if model.moe else Layout(dp=8)
        assert microbatch_compute(model, acc, workload, lay, 0)[2] == pytest.approx(
            microbatch_compute(model, free, workload, lay, 0)[2]
        )


def test_unfused_rope_expert_bias_and_clamp_cost_by_hand() -> None:
    """gpt-oss's YaRN factor sends RoPE down Megatron's unfused path, its expert biases go
    through the per-expert loop and its clamped SwiGLU clamps both halves before the fused
    activation: per token and MoE layer 92,160 + 138,240 + 184,320 = 414,720 bytes forward and
    82,944 + 138,240 + 345,600 = 566,784 backward beyond the fused kernels (see
    unfused_kernel_bytes_per_token; the clamps move 16 and 30 bytes per routed value, 4 x 2,880
    of them). One micro-batch of 4,096 tokens over 36 layers on one B200 at EP 8 (16 local
    experts): that traffic at the accelerator's HBM rate, plus (2 x 13 RoPE + 16 x 6 + 1 bias
    + 3 + 7 clamp) launches per layer at the fixed kernel cost. Models without YaRN, expert
    biases or a clamped activation pay nothing."""
    from planner.catalog import load_accelerator
    from planner.cost.gemm import unfused_kernel_bytes_per_token, unfused_kernel_launches
    from planner.cost.stage import microbatch_compute

    gpt_oss = load_model("gpt-oss-120b")
    assert unfused_kernel_bytes_per_token(gpt_oss, moe_layer=True) == (414720, 566784)
    assert unfused_kernel_launches(gpt_oss, moe_layer=True, local_experts=16) == 26 + 97 + 10
    for name in ("8B", "qwen3-30b-a3b", "671B"):
        model = load_model(name)
        assert unfused_kernel_bytes_per_token(model, moe_layer=model.moe is not None) == (0, 0)
    b200 = load_accelerator("b200")
    workload = TrainWorkload(seq_len=4096, global_batch=64)
    layout = Layout(ep=8, dp=8)
    plain = gpt_oss.model_copy(
        update={"rope_attention_factor": 1.0, "mlp_bias": False, "ffn_activation": "swiglu"}
    )
    forward, backward, *_ = microbatch_compute(gpt_oss, b200, workload, layout, 0)
    forward0, backward0, *_ = microbatch_compute(plain, b200, workload, layout, 0)
    hbm = b200.hbm_bytes_per_s * b200.efficiency.hbm
    launches = 36 * (26 + 97 + 10) * b200.efficiency.kernel_overhead_us * 1e-6 / 2
    assert forward - forward0 == pytest.approx(36 * 4096 * 414720 / hbm + launches)
    assert backward - backward0 == pytest.approx(36 * 4096 * 566784 / hbm + launches)


def test_fused_grouped_mlp_drops_the_expert_passes() -> None:
    """Transformer Engine's fused grouped MLP (TrainWorkload.fused_grouped_mlp) runs the expert
    biases, the clamped GLU and the cast of the second projection's input in the GEMM
    epilogues. gpt-oss-120b in MXFP8 on one B200, 4,096 tokens, 36 MoE layers at EP 8: the
    forward loses, per token and layer, the activation's 6 x 4 x 2,880 = 69,120 bytes, the cast
    of the 4 x 2,880 routed FC2 inputs (CAST_BYTES_PER_VALUE each), and the unfused biases and
    clamps (414,720 - 92,160 = 322,560 bytes, 16 x 6 + 1 + 3 launches forward and backward);
    the backward loses twice the activation and cast bytes and 566,784 - 82,944 = 483,840
    bytes. The YaRN RoPE stays unfused. On H100 (compute capability 9.0), in FP8, or for a
    dense model, the setting changes nothing (runs_fused_grouped_mlp)."""
    from planner.catalog import load_accelerator
    from planner.cost.stage import CAST_BYTES_PER_VALUE, microbatch_compute

    gpt_oss = load_model("gpt-oss-120b")
    b200 = load_accelerator("b200")
    plain = TrainWorkload(seq_len=4096, global_batch=64)
    fused = plain.model_copy(update={"fused_grouped_mlp": True})
    layout = Layout(ep=8, dp=8, precision="mxfp8")
    forward0, backward0, *_ = microbatch_compute(gpt_oss, b200, plain, layout, 0)
    forward1, backward1, *_ = microbatch_compute(gpt_oss, b200, fused, layout, 0)
    hbm = b200.hbm_bytes_per_s * b200.efficiency.hbm
    launch = b200.efficiency.kernel_overhead_us * 1e-6
    streamed = 6 * 4 * 2880 + CAST_BYTES_PER_VALUE * 4 * 2880
    launches = 36 * (16 * 6 + 1 + 3 + 7) * launch / 2
    assert forward0 - forward1 == pytest.approx(36 * 4096 * (streamed + 322560) / hbm + launches)
    assert backward0 - backward1 == pytest.approx(
        36 * 4096 * (2 * streamed + 483840) / hbm + launches
    )
    for acc, fmt, model in (
        (load_accelerator("h100_sxm"), "fp8", gpt_oss),
        (b200, "fp8", gpt_oss),
        (b200, "mxfp8", load_model("8B")),
    ):
        lay = layout.model_copy(update={"precision": fmt})
        if model.moe is None:
            lay = Layout(dp=8, precision=fmt)
        assert microbatch_compute(model, acc, plain, lay, 0) == microbatch_compute(
            model, acc, fused, lay, 0
        )


def test_recomputed_clamped_activation_repeats_its_clamps() -> None:
    """Selective recompute of ``moe_act`` re-runs the whole activation, clamps included: for
    gpt-oss 16 more bytes per routed value (4 x 2,880 per token) than the plain SwiGLU's
    recompute, per MoE layer, at the HBM rate."""
    from planner.catalog import load_accelerator
    from planner.cost.stage import microbatch_compute

    gpt_oss = load_model("gpt-oss-120b")
    plain = gpt_oss.model_copy(update={"ffn_activation": "swiglu"})
    b200 = load_accelerator("b200")
    layout = Layout(ep=8, dp=8, recompute="selective")
    hbm = b200.hbm_bytes_per_s * b200.efficiency.hbm
    extra = {}
    for modules in (("core_attn",), ("moe_act",)):
        workload = TrainWorkload(seq_len=4096, global_batch=64, recompute_modules=modules)
        clamped = microbatch_compute(gpt_oss, b200, workload, layout, 0)[1]
        extra[modules] = clamped - microbatch_compute(plain, b200, workload, layout, 0)[1]
    assert extra[("moe_act",)] - extra[("core_attn",)] == pytest.approx(
        36 * 4096 * 16 * 4 * 2880 / hbm
    )


def test_step_overhead_is_one_fixed_term_per_step() -> None:
    """The fitted per-step host overhead is added once per optimizer step, whatever the layout:
    50 ms more on the accelerator adds exactly 0.05 s to the step, in its own breakdown term. A
    family without a fit (TPU: XLA compiles the whole step) keeps the catalog's 0."""
    model, cluster = load_model("8B"), load_cluster("hgx_h100x8")
    acc = cluster.accelerator
    for value in (0.0, 50.0):
        eff = acc.efficiency.model_copy(update={"step_overhead_ms": value})
        edited = cluster.model_copy(
            update={"accelerator": acc.model_copy(update={"efficiency": eff})}
        )
        cost = score(model, edited, WORKLOAD, Layout(tp=2, dp=4))
        assert cost.breakdown_s["step_sync"] == pytest.approx(value / 1e3)
        assert cost.step_time_s == pytest.approx(sum(cost.breakdown_s.values()))
    base = score(model, cluster, WORKLOAD, Layout(tp=2, dp=4))
    assert base.breakdown_s["step_sync"] == pytest.approx(acc.efficiency.step_overhead_ms / 1e3)
    tpu = load_cluster("tpu_v5px64")
    assert tpu.accelerator.efficiency.step_overhead_ms == 0.0


def test_the_per_step_host_sync_is_the_loops() -> None:
    """The fitted per-step cost is paid where the training loop stops the host: Megatron-LM
    every step (the gradient norm read on the host), torchtitan once per ``metrics.log_freq``
    = 10 steps, MaxText never (JAX dispatches the next step ahead). The same layout and
    accelerator, three loops: the step_sync term by hand."""
    model, cluster = load_model("8B"), load_cluster("hgx_h100x8")
    fitted_s = cluster.accelerator.efficiency.step_overhead_ms / 1e3
    layout = Layout(dp=8, zero=3, recompute=Recompute.FULL)
    for framework, share in (("megatron", 1.0), ("torchtitan", 0.1), ("maxtext", 0.0)):
        workload = resolve_workload({"framework": framework, "global_batch": 64})
        cost = score(model, cluster, workload, layout)
        assert cost.breakdown_s["step_sync"] == pytest.approx(share * fitted_s, rel=1e-12)


def test_nanotron_places_its_own_pipeline_layers_by_hand() -> None:
    """Nanotron balances a cost per block (layer 4 h^2 + 3 F h with heads x head_dim = h, head
    V h) and closes a rank after the block that passes its share. Nanotron's 8.86B benchmark
    shape (L 32, h 4096, F 14336, V 131072) on PP 4: layer 243,269,632, head 536,870,912,
    thresholds 8.55 / 17.10 / 25.66 layers' worth -> 9, 9, 8 and 6 layers + head. A plan under
    the Nanotron profile is scored with that split and says so; no CP-SAT split is searched."""
    from planner.cost.partition import cost_balanced_split

    shape = {"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
             "num_kv_heads": 32, "head_dim": 128, "ffn_hidden_size": 14336,
             "vocab_size": 131072}  # fmt: skip
    model = load_model("8B").model_copy(update=shape)
    assert cost_balanced_split(model, 4).chunk_layers == (9, 9, 8, 6)
    assert cost_balanced_split(model, 1) is None
    assert cost_balanced_split(load_model("mixtral-8x7b"), 4) is None  # not Nanotron's blocks
    workload = {"seq_len": 4096, "global_batch": 64, "framework": "nanotron"}
    plan = planner.estimate(model="8B", cluster="hgx_h100x8",
                            layout={"tp": 1, "pp": 2, "dp": 4, "mbs": 1}, workload=workload)  # fmt: skip
    assert plan.pipeline_split is not None and plan.pipeline_split.method == "framework"
    assert [s.num_layers for s in plan.pipeline_stages] == [18, 14]
    assert plan.step_time_s < plan.pipeline_split.even_step_time_s  # the head's rank is lighter
    found = planner.search(model="8B", cluster="hgx_h100x8", workload=workload, fix={"pp": 2})
    assert found.solver.subproblems == [] and "framework splits them" in found.solver.method
    assert found.best.pipeline_split is not None
    assert found.best.pipeline_split.method == "framework"
    moe = planner.search(model="mixtral-8x7b", cluster="hgx_h100x32", workload=workload,
                         fix={"pp": 2})  # fmt: skip
    assert moe.best.pipeline_split is not None and moe.best.pipeline_split.method == "even"
    assert moe.solver.subproblems == []  # the rule does not cover it: even, never CP-SAT


def test_interleaved_bubble_waits_on_the_slowest_chunk() -> None:
    """The interleaved pipeline's fill and drain cost pp - 1 chunk times, priced at the slowest
    chunk. Llama 3 8B (32 layers) at PP2 VPP2 split evenly holds 8 layers a chunk; its slowest
    chunk is the last, which adds the output layer and loss, and the bubble is 1 x that
    chunk's micro-batch time, not (pp - 1)/v = 1/2 of a rank's. A split of (4, 12, 12, 4)
    layers keeps 16 layers a rank, but its bubble waits on a 12-layer chunk, 1.5 x an even
    middle chunk's time."""
    from planner.cost.partition import chunk_contents
    from planner.cost.stage import microbatch_time
    from planner.specs.pipeline import PipelineSplit

    model, cluster = load_model("llama3.1-8b"), load_cluster("hgx_h100x16")
    workload = TrainWorkload(global_batch=64, seq_len=4096)
    layout = Layout(pp=2, vpp=2, dp=8, mbs=1)
    acc, domains = cluster.accelerator, comm_domains(cluster, layout)
    one = layout.model_copy(update={"vpp": 1})

    def chunk_time(chunk: int, split: PipelineSplit | None = None) -> float:
        contents = chunk_contents(model, workload, layout, chunk, split)
        return microbatch_time(model, acc, workload, one, stage=chunk % 2, domains=domains,
                               contents=contents).total  # fmt: skip

    even = score(model, cluster, workload, layout)
    times = [chunk_time(c) for c in range(4)]
    assert max(times) == times[3] and even.breakdown_s["pp_bubble"] == pytest.approx(times[3])
    rank = max(t.total for t in even.stage_times or [])
    assert even.breakdown_s["pp_bubble"] > rank / 2
    split = PipelineSplit(chunk_layers=(4, 12, 12, 4))
    skewed = score(model, cluster, workload, layout, split=split)
    assert skewed.breakdown_s["pp_bubble"] == pytest.approx(chunk_time(1, split))
    assert chunk_time(1, split) == pytest.approx(1.5 * times[1], rel=0.02)
    assert skewed.step_time_s > even.step_time_s


def test_combined_1f1b_hides_the_dispatcher_sync_behind_the_expert_backward() -> None:
    """Qwen3-235B as NVIDIA's H100 recipe runs it (TP2 PP8 EP32, all-to-all dispatcher, which
    waits on the host for the token counts once per MoE layer): without EP overlap every MoE
    layer pays the fitted sync; under Megatron-LM's combined 1F1B the other micro-batch's
    expert input-gradient GEMMs are queued ahead of the wait, so each layer pays only what the
    sync outlasts them by."""
    from planner.cost.expert import moe_sync_time
    from planner.cost.stage import expert_dgrad_time, microbatch_time

    model, cluster = load_model("qwen3-235b-a22b"), load_cluster("hgx_h100x256")
    layout = Layout(tp=2, pp=8, vpp=4, dp=16, ep=32, etp=1, mbs=1, precision="fp8")
    domains, acc = comm_domains(cluster, layout), cluster.accelerator
    plain = TrainWorkload(seq_len=4096, global_batch=8192)
    overlapped = plain.model_copy(update={"ep_comm_overlap": True})
    before = microbatch_time(model, acc, plain, layout, stage=3, domains=domains)
    after = microbatch_time(model, acc, overlapped, layout, stage=3, domains=domains)
    num_moe = 12  # a middle rank's layers (94 over 8 ranks: the remainder on the middle), all MoE
    sync = moe_sync_time(acc, plain, num_moe)
    assert before.moe_sync_s == pytest.approx(sync) and sync > 0
    hidden = expert_dgrad_time(model, acc, overlapped, layout)
    assert 0 < hidden < sync / num_moe
    assert after.moe_sync_s == pytest.approx(num_moe * (sync / num_moe - hidden))


def test_combined_1f1b_leaves_the_first_forward_and_last_backward_unpaired() -> None:
    """GPT-OSS 120B as NVIDIA's GB200 recipe runs it (PP1 EP64, 4 x 4,096 tokens a micro-batch,
    1,280 sequences: m = 5) under Megatron-LM's combined 1F1B: four forwards run beside four
    backwards, the first forward and the last backward alone
    (``combined_1f1b_schedule_for_no_pipelining``), so the step pays five overlapped
    micro-batches plus one micro-batch's unhidden all-to-all and syncs over the overlapped ones.
    One micro-batch a step has nothing to pair with: it pays what no overlap pays."""
    model, cluster = load_model("gpt-oss-120b"), load_cluster("gb200_nvl72x64")
    layout = Layout(tp=1, pp=1, dp=64, ep=64, mbs=4, precision="bf16")
    for batch, m in ((1280, 5), (256, 1)):
        plain = TrainWorkload(seq_len=4096, global_batch=batch)
        overlapped = plain.model_copy(update={"ep_comm_overlap": True})
        alone, paired = (
            score(model, cluster, plain, layout),
            score(model, cluster, overlapped, layout),
        )
        a, p = alone.stage_times[0], paired.stage_times[0]
        assert a.ep_comm_s > p.ep_comm_s > 0 and a.moe_sync_s > p.moe_sync_s > 0
        assert p.ep_comm_unpaired_s == pytest.approx(a.ep_comm_s - p.ep_comm_s)
        for term, field in (("ep_comm", "ep_comm_s"), ("moe_sync", "moe_sync_s")):
            hidden, unhidden = getattr(p, field), getattr(a, field)
            assert paired.breakdown_s[term] == pytest.approx((m - 1) * hidden + unhidden)
            assert alone.breakdown_s[term] == pytest.approx(m * unhidden)


def test_dualpipe_end_ranks_run_their_warmup_and_drain_unpaired() -> None:
    """DeepSeek-V3 as its report runs it (HAI-LLM: DualPipe over PP 16, EP 64, 15,360 sequences
    on 128 replicas: m = 120): the end ranks run 3 x 16 / 2 - 1 = 23 forwards and as many
    backwards with no pass of the other direction beside them (DualPipe.step's steps 1-3 and
    3, 5-7), so 23 micro-batches pay their all-to-all unhidden and the other 97 the overlapped
    share."""
    model, cluster = load_model("deepseek-v3"), load_cluster("hgx_h800x2048")
    workload = resolve_workload({"framework": "hai-llm"}).model_copy(
        update={"seq_len": 4096, "global_batch": 15360}
    )
    layout = Layout(tp=1, pp=16, dp=128, ep=64, mbs=1, recompute="selective", precision="fp8")
    cost = score(model, cluster, workload, layout)
    t = max(cost.stage_times, key=lambda s: s.total)
    assert cost.num_microbatches == 120 and t.ep_comm_unpaired_s > 0
    assert cost.breakdown_s["ep_comm"] == pytest.approx(
        120 * t.ep_comm_s + 23 * t.ep_comm_unpaired_s
    )


def test_combined_1f1b_holds_one_more_chunk_over_an_interleaved_pipeline() -> None:
    """Megatron-LM's combined 1F1B runs one extra warmup forward over an interleaved pipeline
    (get_pp_rank_microbatches: num_warmup_microbatches + 1), so each rank holds one more model
    chunk's activations: Mixtral 8x7B at PP4 VPP2 (4 layers a chunk), the middle ranks 1 and 2
    hold 3 and 2 micro-batches of their stage (1F1B), one micro-batch being the difference; the
    overlap adds half of it (one chunk of two). Without pipelining nothing more is held."""
    from planner.cost.stage_memory import stage_memory

    model = load_model("mixtral-8x7b")
    plain = TrainWorkload(seq_len=4096, global_batch=256)
    overlapped = plain.model_copy(update={"ep_comm_overlap": True})
    layout = Layout(tp=1, pp=4, vpp=2, dp=4, ep=4, mbs=1)
    m = 64
    act = [stage_memory(model, plain, layout, s, m).activations for s in (1, 2)]
    one_microbatch = act[0] - act[1]
    assert one_microbatch > 0
    extra = stage_memory(model, overlapped, layout, 2, m).activations - act[1]
    assert extra == pytest.approx(one_microbatch / 2)
    flat = Layout(tp=1, pp=1, dp=16, ep=4, mbs=1)
    assert stage_memory(model, overlapped, flat, 0, 16).activations == pytest.approx(
        stage_memory(model, plain, flat, 0, 16).activations
    )


def test_torchao_float8_casts_add_the_bytes_counted_by_hand() -> None:
    """torchao's tensorwise float8 (``fp8_casts`` tensorwise) against Transformer Engine's fused
    casts, Llama 3.1 8B, one 8,192-token sequence, no TP. Per layer the GEMMs read
    sum(k) = 3 x 4096 + 14336 = 26,624 input values and write sum(n) = 6,144 + 4,096 + 28,672 +
    4,096 = 43,008 output values per token, from 4096 x (6144 + 4096 + 28672) + 14336 x 4096 =
    218,103,808 weights. Fused: 3 B a forward input value, 6 B backward. Tensorwise with the
    weights gathered in fp8: 5 B forward
    (scale pass + cast); backward 2 B an input value (layout copy), 7 B an output-gradient
    value (scale pass + cast + transposed copy) and 2 B a weight (layout copy). Difference
    per layer: -2 x 26,624 x 8,192 + 7 x 43,008 x 8,192 + 2 x 218,103,808 bytes."""
    from planner.cost.stage import layers_forward

    model = load_model("llama3.1-8b")
    acc = load_cluster("hgx_h100x8").accelerator
    layout = Layout(tp=1, dp=8, mbs=1, precision="fp8")
    layers = (range(0, model.num_layers),)
    parts = [
        layers_forward(
            model,
            acc,
            TrainWorkload(seq_len=8192, precision="fp8", fp8_casts=casts, fp8_param_gather=gather),
            layout,
            layers,
        )
        for casts, gather in (
            ("fused", True),
            ("tensorwise", True),  # FSDP's float8 all-gather: the weights arrive cast
            ("rowwise", True),  # gathers bf16 whatever the setting
            ("tensorwise", False),  # bf16 gathers: cast on every call, as rowwise
        )
    ]
    # the backward doubles the memory-bound forward work; unfused kernels carry their own
    totals = [3 * p.memory_bound + p.unfused_forward + p.unfused_backward for p in parts]
    hbm = acc.hbm_bytes_per_s * acc.efficiency.hbm
    per_layer = -2 * 26_624 * 8192 + 7 * 43_008 * 8192 + 2 * 218_103_808
    assert totals[1] - totals[0] == pytest.approx(model.num_layers * per_layer / hbm, rel=1e-9)
    # rowwise (or any weight not gathered in fp8): each weight cast (scale pass + cast, 5 B) in
    # the forward and for the input gradient
    rowwise = model.num_layers * 2 * 5 * 218_103_808 / hbm
    assert totals[2] - totals[1] == pytest.approx(rowwise, rel=1e-9)
    assert totals[3] == pytest.approx(totals[2], rel=1e-12)
    bf16 = [
        layers_forward(
            model, acc, TrainWorkload(seq_len=8192, fp8_casts=casts), Layout(tp=1, dp=8), layers
        )
        for casts in ("fused", "tensorwise", "rowwise")
    ]
    assert bf16[0] == bf16[1] == bf16[2]  # bf16 GEMMs cast nothing
