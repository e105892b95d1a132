"""Ring attention's merge work (context parallelism over a p2p ring), against a step-by-step
enumeration of Transformer Engine's load-balanced schedule and hand-computed byte counts."""

from __future__ import annotations

import pytest

from planner.catalog import load_cluster, load_model
from planner.catalog.frameworks import resolve_workload
from planner.cost.compute import (
    ring_attention_extra_launches,
    ring_attention_merge_bytes_per_token,
    ring_attention_steps,
)
from planner.cost.stage import layers_forward
from planner.specs.layout import Layout
from planner.specs.workload import TrainWorkload


def enumerated_query_share(cp: int) -> float:
    """Brute-force twin of ring_attention_steps: walk every rank's steps as
    AttnFuncWithCPAndKVP2P.forward does (rank r holds chunks r and 2 cp - 1 - r; step 0 is the
    diagonal block, steps 1..r attend all queries to the first half of the arriving keys, the
    rest only the second half of the queries) and average the queries each step computes."""
    total = 0.0
    for rank in range(cp):
        for step in range(cp):
            total += 1.0 if step == 0 or step <= rank else 0.5
    return total / cp


@pytest.mark.parametrize("cp", [1, 2, 3, 4, 8, 16])
def test_ring_steps_match_the_enumerated_schedule(cp: int) -> None:
    assert ring_attention_steps(cp) == pytest.approx(enumerated_query_share(cp))


def test_llama3_8b_merge_bytes_by_hand() -> None:
    # 32 heads of 128, 8 KV heads; cp 2: s = 7 / 4.
    # forward 12 s N H_v = 12 x 1.75 x 4096 = 86,016 bytes per token and layer;
    # backward (s - 1)(12 N H_qk + 8 K (H_qk + H_v)) = 0.75 x (49,152 + 16,384) = 49,152.
    model = load_model("llama3.1-8b")
    assert ring_attention_merge_bytes_per_token(model, 2) == (86016.0, 49152.0)
    assert ring_attention_merge_bytes_per_token(model, 1) == (0.0, 0.0)


def test_launches_grow_with_the_ring() -> None:
    assert ring_attention_extra_launches(2) == (5.0, 3.0)
    assert ring_attention_extra_launches(8) == (23.0, 21.0)


def test_the_ring_pays_the_merge_and_the_others_do_not() -> None:
    model = load_model("llama3.1-8b")
    acc = load_cluster("hgx_h100x8").accelerator
    layout = Layout(dp=4, cp=2)
    layers = (range(0, model.num_layers),)

    def attention(cp_comm: str) -> tuple[float, float]:
        part = layers_forward(
            model, acc, TrainWorkload(seq_len=8192, cp_comm=cp_comm), layout, layers
        )
        return part.attention, part.attention_backward

    ring, gathered, ulysses = attention("p2p"), attention("allgather"), attention("a2a")
    assert gathered == ulysses
    tokens = 8192 / 2
    hbm = acc.hbm_bytes_per_s * acc.efficiency.hbm
    kernel_s = acc.efficiency.kernel_overhead_us * 1e-6
    forward_bytes, backward_bytes = ring_attention_merge_bytes_per_token(model, 2)
    launches_forward, launches_backward = ring_attention_extra_launches(2)
    expect_forward = 32 * (tokens * forward_bytes / hbm + launches_forward * kernel_s)
    expect_backward = 32 * (tokens * backward_bytes / hbm + launches_backward * kernel_s)
    assert ring[0] - gathered[0] == pytest.approx(expect_forward, rel=1e-9)
    assert ring[1] - gathered[1] == pytest.approx(expect_backward, rel=1e-9)
    # without context parallelism nothing changes
    flat = Layout(dp=8)
    workloads = (
        TrainWorkload(seq_len=8192, cp_comm="p2p"),
        TrainWorkload(seq_len=8192, cp_comm="a2a"),
    )
    a, b = (layers_forward(model, acc, w, flat, layers) for w in workloads)
    assert a == b


def test_pytorch_ring_bytes_by_hand() -> None:
    # PyTorch's eager merge, Llama 3 8B at cp 2 (s = 1.75): forward (40 s - 28 + 4 (cp - 1)) per
    # output value = 46 x 4,096; backward 36 per query value (6 x 0.75 + 10 x 1.75 + 4 + 10) x
    # 4,096 + 49 per key and value (2 x 0.75 + 10 x 1.75 + 8 x 2 + 4 + 10) x 2,048.
    model = load_model("llama3.1-8b")
    assert ring_attention_merge_bytes_per_token(model, 2, "pytorch") == (188416.0, 247808.0)
    assert ring_attention_extra_launches(2, "pytorch") == (9.0, 10.0)


def test_pytorch_context_parallel_merges_under_every_form() -> None:
    """torchtitan's CP (PyTorch's context_parallel) runs ring steps whatever its rotate method;
    Transformer Engine's all-gather form attends once per chunk."""
    model = load_model("llama3.1-8b")
    acc = load_cluster("hgx_h100x8").accelerator
    layout = Layout(dp=2, cp=4)
    layers = (range(0, model.num_layers),)

    def attention(**fields: str) -> float:
        workload = TrainWorkload(seq_len=32768, **fields)
        return layers_forward(model, acc, workload, layout, layers).attention

    te_gather = attention(cp_comm="allgather")
    assert attention(cp_comm="a2a") == te_gather
    assert attention(cp_comm="allgather", cp_impl="pytorch") > attention(cp_comm="p2p") > te_gather
    assert attention(cp_comm="allgather", cp_impl="pytorch") == attention(
        cp_comm="p2p", cp_impl="pytorch"
    )


def test_torchtitan_runs_pytorch_cp_and_meta_gathers() -> None:
    from planner.accuracy.rows import expand_cases, load_rows, training_file, workload_of

    assert resolve_workload({"framework": "torchtitan"}).cp_impl == "pytorch"
    assert resolve_workload({"framework": "megatron"}).cp_impl == "te"
    rows = load_rows(training_file().with_name("training_frameworks.yaml"))
    llm3 = next(c for c in expand_cases(rows) if c.id == "LLM3")
    assert workload_of(llm3.row).cp_impl == "te"  # Llama 3's all-gather CP: one call per chunk


def test_hierarchical_cp_is_an_all_to_all_inside_and_a_ring_across() -> None:
    """a2a+p2p on 8 CP ranks of TP 2 over 8-GPU domains: a 4-way all-to-all on NVLink, then a
    2-step ring across domains; closed form from the same collective functions."""
    from planner.cost.comm import all_to_all_time, overlapped_exposed_time, p2p_time
    from planner.cost.memory import ACTIVATION_BYTES
    from planner.cost.stage import cp_comm_per_microbatch, cp_kv_values_per_token
    from planner.topology import comm_domains

    model = load_model("llama3.1-8b")
    layout = Layout(tp=2, cp=8, dp=4)
    domains = comm_domains(load_cluster("hgx_h100x64"), layout)
    inner, ring = domains["cp_a2a"], domains["cp_ring"]
    assert (inner.size, inner.tier, ring.size, ring.tier) == (4, "scale_up", 2, "scale_out")
    workload = TrainWorkload(seq_len=65536, cp_comm="a2a+p2p")
    attention = (0.8, 2.0)  # seconds of the layers' attention, forward and backward
    got = cp_comm_per_microbatch(
        model, workload, layout, 32, cp=domains["cp"], attention_s=attention,
        contention=0.1, hierarchy=(inner, ring),
    )  # fmt: skip
    tokens = 65536 / 8
    chunk = ACTIVATION_BYTES * tokens * cp_kv_values_per_token(model) / 2
    local = ACTIVATION_BYTES * tokens * 32 * 128 / 2
    a2a = 32 * 2 * (2 * all_to_all_time(local, inner) + all_to_all_time(chunk, inner))
    send = p2p_time(chunk, ring)
    step = overlapped_exposed_time(send, 0.8 / 32 / 2, 0.1)
    step += overlapped_exposed_time(2 * send, 2.0 / 32 / 2, 0.1)
    assert got == pytest.approx(a2a + 32 * step, rel=1e-12)


def test_ulysses_across_nodes_pays_its_all_to_all_on_the_nic() -> None:
    """DeepSpeed-Ulysses (cp_comm a2a) on CP 8 of TP 2 over two H100 nodes (Llama 2 7B, whose 32
    KV heads split 16 a TP rank, 2 a CP rank; a GQA model's 8 could not): each all-to-all
    leaves 4/7 of a rank's bytes on its 50 GB/s NIC (87.5 GB/s per rank, tests/test_topology.py),
    not the 200 GB/s of the ring collective over the same groups; q, k, v and the output
    exchanged forward and backward, exposed, from the same collective functions."""
    from planner.cost.comm import all_to_all_time
    from planner.cost.memory import ACTIVATION_BYTES
    from planner.cost.stage import cp_kv_values_per_token, microbatch_time
    from planner.topology import comm_domains

    model, cluster = load_model("llama2-7b"), load_cluster("hgx_h100x16")  # 32 KV heads
    layout = Layout(tp=2, cp=8)
    domains = comm_domains(cluster, layout)
    group = domains["cp_all_to_all"]
    assert group.bandwidth_bytes_per_s == pytest.approx(87.5e9)
    workload = TrainWorkload(seq_len=4096, global_batch=1, cp_comm="a2a")
    got = microbatch_time(
        model, cluster.accelerator, workload, layout, stage=0, domains=domains
    ).cp_comm_s
    tokens = 4096 / 8
    chunk = ACTIVATION_BYTES * tokens * cp_kv_values_per_token(model) / 2
    local = ACTIVATION_BYTES * tokens * 32 * 128 / 2
    per_pass = 2 * all_to_all_time(local, group) + all_to_all_time(chunk, group)
    assert got == pytest.approx(32 * 2 * per_pass, rel=1e-12)


def test_hierarchical_cp_merges_over_its_ring_only() -> None:
    from planner.cost.stage import _rates, ring_attention_merge_time

    model = load_model("llama3.1-8b")
    acc = load_cluster("hgx_h100x8").accelerator
    rates = _rates(acc, Layout().precision)
    layout = Layout(cp=8)
    kwargs = {"tokens": 4096.0, "num_layers": 32, "rates": rates}
    two = ring_attention_merge_time(model, Layout(cp=2), **kwargs)
    assert ring_attention_merge_time(model, layout, ring=2, **kwargs) == two
    assert ring_attention_merge_time(model, layout, **kwargs)[0] > two[0]
    assert ring_attention_merge_time(model, layout, ring=1, **kwargs) == (0.0, 0.0)


def test_the_plan_shows_the_cp_link_its_variant_uses() -> None:
    """The CP line of a plan's placement is the family its ``cp_comm`` is priced on: ring
    attention's neighbour sends (one NIC where the ring leaves a node), the all-gather's NCCL
    ring (a node's rails), Ulysses' all-to-all. CP 8 at TP 4 over four H100 nodes, two CP ranks
    a node: 50, 100 and 50 / (6/7) = 58.3 GB/s (Llama 2 7B: its 32 KV heads split over TP 4 x CP 8,
    which Ulysses needs)."""
    from planner.api import estimate

    layout = {"tp": 4, "cp": 8, "pp": 1, "dp": 1, "zero": 1}
    links = {}
    for cp_comm in ("p2p", "allgather", "a2a"):
        plan = estimate(model="llama2-7b", cluster="hgx_h100x32", layout=layout,
                        workload={"seq_len": 4096, "global_batch": 32, "cp_comm": cp_comm})  # fmt: skip
        links[cp_comm] = plan.placement["cp"].bandwidth_GB_per_s
    assert links == pytest.approx({"p2p": 50.0, "allgather": 100.0, "a2a": 50 * 7 / 6})


def test_a_plan_on_a_cluster_state_shows_the_same_cp_links() -> None:
    """The same three links where the plan is placed on a cluster with a node down (the placed
    domains, planner.search.state.price_placement), and no CP link without CP."""
    from planner.api import estimate
    from planner.catalog.cluster_state import load_cluster_state

    state = load_cluster_state({"down": {"nodes": ["node2"]}})
    links = {}
    for cp_comm, cp in (("p2p", 8), ("allgather", 8), ("a2a", 8), ("allgather", 1)):
        layout = {"tp": 4, "cp": cp, "pp": 1, "dp": 8 // cp, "zero": 1}
        plan = estimate(model="llama2-7b", cluster="hgx_h100x64", layout=layout, cluster_state=state,
                        workload={"seq_len": 4096, "global_batch": 8, "cp_comm": cp_comm})  # fmt: skip
        links[(cp_comm, cp)] = plan.placement["cp"].bandwidth_GB_per_s
    assert links == pytest.approx(
        {("p2p", 8): 50.0, ("allgather", 8): 100.0, ("a2a", 8): 50 * 7 / 6, ("allgather", 1): 0.0}
    )


def test_ulysses_needs_the_kv_heads_of_a_tp_rank_to_split_over_cp() -> None:
    """Llama 3 70B has 8 KV heads: at TP 2 a rank holds 4, so all-to-all CP 8 cannot split them
    (Transformer Engine asserts it of the keys as of the queries); CP 4 can, and ring attention
    does not split heads at all."""
    from planner.api import estimate
    from planner.errors import SpecError

    def plan(cp: int, cp_comm: str):  # type: ignore[no-untyped-def]
        return estimate(model="70B", cluster="hgx_h100x16", layout={"tp": 2, "cp": cp, "dp": 8 // cp},
                        workload={"seq_len": 65536, "global_batch": 8, "cp_comm": cp_comm})  # fmt: skip

    with pytest.raises(SpecError, match=r"a rank holds 4 KV heads \(num_kv_heads 8 over tp 2\)"):
        plan(8, "a2a")
    assert plan(4, "a2a").layout.cp == 4
    assert plan(8, "p2p").layout.cp == 8


def test_hierarchical_cp_sizes_its_all_to_all_by_the_heads() -> None:
    """a2a+p2p puts the all-to-all over the CP ranks of one scale-up domain, as many as the
    heads let it split: on an NVL72 rack at TP 1 the domain holds all 16 of CP 16, but Llama 3
    8B's 8 KV heads split 8 ways, so it runs as 8 x 2 (until 2026-12-07 it took all 16 and
    refused the layout, which Megatron-LM runs with --hierarchical-context-parallel-sizes 8 2);
    on 8-GPU H100 nodes it is 8 x 2 too. At TP 8 a rank holds one KV head, which no all-to-all
    splits: refused there, naming the ring it would be."""
    from planner.api import estimate, export
    from planner.errors import SpecError
    from planner.topology import comm_domains

    workload = {"seq_len": 65536, "global_batch": 8, "cp_comm": "a2a+p2p"}

    def plan(cluster: str, tp: int, cp: int):  # type: ignore[no-untyped-def]
        return estimate(model="8B", cluster=cluster, layout={"tp": tp, "cp": cp, "dp": 1},
                        workload=workload)  # fmt: skip

    for cluster in ("gb200_nvl72x16", "hgx_h100x16"):
        found = plan(cluster, 1, 16)
        domains = comm_domains(load_cluster(cluster), found.layout, 8)
        assert (domains["cp_a2a"].size, domains["cp_ring"].size) == (8, 2)
        args = export(found, format="megatron", workload=workload).text  # the sizes priced
        assert "--hierarchical-context-parallel-sizes 8 2" in args
    with pytest.raises(SpecError, match=r"up to 2 here\), but a TP rank's heads split none"):
        plan("gb200_nvl72x16", 8, 2)
