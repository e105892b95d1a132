"""Topology: graph builders, what each parallel group sees, cluster metrics (issue #3).

The fast path (planner.topology.contention, numpy over the wiring arithmetic) is checked against
the full-graph computation (planner.topology.oracle: every flow of every group routed over the
networkx graph); builders are checked like networkx's generator tests (node counts, degrees,
isomorphism with nx.grid_graph).
"""

from __future__ import annotations

from collections import Counter

import networkx as nx
import numpy as np
import pytest

from planner.api import load_cluster, search
from planner.cost.comm import all_gather_time, p2p_time, ring_all_reduce_time
from planner.specs.cluster import ClusterSpec
from planner.specs.layout import Layout
from planner.topology import comm_domains, group_domain, hierarchy, placement, rank_table
from planner.topology.contention import family_domain, route_bottlenecks, to_comm_domain
from planner.topology.flows import family_flows
from planner.topology.graph import (
    BANDWIDTH,
    DOMAIN,
    KIND,
    SCALE_UP,
    TIER,
    accelerator,
    cluster_graph,
    fabric_graph,
    graphml_lines,
    mesh_domain_graph,
    switched_domain_graph,
    torus_graph,
    without_links,
    without_nodes,
)
from planner.topology.metrics import bisection, diameter, edge_count, node_counts
from planner.topology.oracle import graph_comm_domains, oracle_domain
from planner.topology.structure import Fabric, fabric_of

GB = 1e9


def edited(name: str, **fabric: object) -> ClusterSpec:
    """A catalog cluster with scale-out fields changed (scalable_unit_nodes, planes, ...)."""
    cluster = load_cluster(name)
    return cluster.model_copy(update={"fabric": cluster.fabric.model_copy(update=fabric)})


# --- what one group sees (done-when list of issue #3) -------------------------------------


def test_ring_all_reduce_on_one_nvswitch_board() -> None:
    cluster = load_cluster("hgx_h100x8")
    tp = comm_domains(cluster, Layout(tp=8))["tp"]
    link = cluster.system.scale_up
    size = 1e9
    expected = 2 * 7 / 8 * size / (450e9 * link.efficiency) + 14 * link.latency_s
    assert tp.tier == "scale_up"
    assert ring_all_reduce_time(size, tp) == pytest.approx(expected)


def test_same_group_over_eight_nodes_is_nic_bound() -> None:
    cluster = load_cluster("hgx_h100x64")
    dp = comm_domains(cluster, Layout(tp=8, dp=8))["dp"]
    assert dp.tier == "scale_out"
    assert dp.bandwidth_bytes_per_s == pytest.approx(400e9 / 8)
    assert dp.latency_s == cluster.fabric.latency_s
    assert "NIC" in dp.description


def test_oversubscribed_spine_halves_cross_unit_dp_only() -> None:
    # 4 scalable units of 32 HGX nodes; DP groups 256 ranks apart put every member in another
    # unit, so all 32 flows of a rail leaf climb its 16-NIC-wide up-link at once.
    flat, tapered = load_cluster("hgx_h100x1024"), edited("hgx_h100x1024", oversubscription=2)
    cross = Layout(tp=8, cp=32, dp=4)
    assert comm_domains(flat, cross)["dp"].bandwidth_bytes_per_s == pytest.approx(50e9)
    assert comm_domains(tapered, cross)["dp"].bandwidth_bytes_per_s == pytest.approx(25e9)
    assert "spine" in comm_domains(tapered, cross)["dp"].description
    inside = Layout(tp=8, dp=32, pp=4)  # each DP ring stays in one unit: no spine at all
    assert comm_domains(tapered, inside)["dp"] == comm_domains(flat, inside)["dp"]


def test_tp16_is_nvlink_bound_on_nvl72_and_nic_bound_on_hgx() -> None:
    layout = Layout(tp=16, dp=4)
    rack = comm_domains(load_cluster("gb200_nvl72x72"), layout)["tp"]
    boards = comm_domains(load_cluster("hgx_b200x72"), layout)["tp"]  # 9 HGX B200 boards
    assert rack.tier == "scale_up" and rack.bandwidth_bytes_per_s == pytest.approx(900e9)
    assert boards.tier == "scale_out" and "NIC" in boards.description
    # 8 members per board: 8 NCCL channels, each through its own 50 GB/s NIC
    assert boards.bandwidth_bytes_per_s == pytest.approx(8 * 50e9)
    assert placement(load_cluster("gb200_nvl72x72"), layout)["tp"].within_domain
    assert not placement(load_cluster("hgx_b200x72"), layout)["tp"].within_domain


def scaling_book_torus_all_reduce(v_bytes: float, w_ici: float, num_axes: int) -> float:
    """JAX scaling book, "sharding": all-gather over axes with wrap-around T = V / (W_ici x
    axes) with W_ici the bidirectional per-link bandwidth; all-reduce = 2 x all-gather."""
    return 2 * v_bytes / (w_ici * num_axes)


def test_4x4x4_torus_all_reduce_matches_the_scaling_book() -> None:
    cluster = load_cluster("tpu_v5p_4x4x4")
    link = cluster.system.scale_up
    dom = comm_domains(cluster, Layout(tp=64))["tp"]
    assert dom.bandwidth_bytes_per_s == pytest.approx(6 * link.bytes_per_s)
    v = 1e10
    bandwidth_term = ring_all_reduce_time(v, dom) - 2 * 63 * dom.latency_s
    w_ici = 2 * link.bytes_per_s * link.efficiency
    assert bandwidth_term == pytest.approx(scaling_book_torus_all_reduce(v, w_ici, 3) * 63 / 64)


def test_torus_axis_without_wraparound_is_twice_slower() -> None:
    v = 1e10
    wrapped = comm_domains(load_cluster("tpu_v5p_4x4x4"), Layout(tp=4, dp=16))["tp"]
    line = comm_domains(load_cluster("tpu_v5p_2x4x4"), Layout(tp=2, dp=4, pp=2))["dp"]
    assert (wrapped.size, line.size) == (4, 4)
    link = load_cluster("tpu_v5p_4x4x4").system.scale_up
    assert wrapped.bandwidth_bytes_per_s == pytest.approx(2 * link.bytes_per_s)  # = W_ici
    assert all_gather_time(v, line) == pytest.approx(2 * all_gather_time(v, wrapped), rel=1e-3)


def test_mi300x_mesh_pairwise_p2p_is_one_link() -> None:
    cluster = load_cluster("mi300xx8")
    link = cluster.system.scale_up
    domains = comm_domains(cluster, Layout(pp=8))
    assert domains["pp"].bandwidth_bytes_per_s == pytest.approx(link.bytes_per_s / 7)
    assert p2p_time(1e9, domains["pp"]) == pytest.approx(
        1e9 / (64e9 * link.efficiency) + link.latency_s
    )
    ring = comm_domains(cluster, Layout(tp=8))["tp"]
    assert ring.bandwidth_bytes_per_s == pytest.approx(link.bytes_per_s)  # all 7 links
    assert comm_domains(cluster, Layout(tp=2, dp=4))["tp"].bandwidth_bytes_per_s == (
        pytest.approx(64e9)
    )


def test_expert_all_to_all_across_nodes_sees_about_one_nic() -> None:
    # "Alltoall cannot aggregate the bandwidth of multiple NICs" (nccl-tests#267): 56 of a
    # rank's 63 peers are off-board, so its NIC carries 56/63 of its traffic.
    ep = comm_domains(load_cluster("hgx_h100x64"), Layout(dp=64, ep=64))["ep"]
    assert ep.tier == "scale_out" and "NIC" in ep.description
    assert ep.bandwidth_bytes_per_s == pytest.approx(50e9 * 63 / 56)
    inside = comm_domains(load_cluster("hgx_h100x64"), Layout(dp=64, ep=8))["ep"]
    assert inside.tier == "scale_up"


def test_torus_all_to_all_closed_form_equals_routing_every_pair() -> None:
    from planner.topology.alltoall import _torus_pairs, torus_box_load
    from planner.topology.flows import group_matrix
    from planner.topology.structure import box_axes

    for name in ("tpu_v5p_4x4x4", "tpu_v5p_4x8x12", "tpu_v5e_8x16", "tpu_v5p_2x4x4"):
        fabric = fabric_of(load_cluster(name))
        n = fabric.num_accelerators
        for size, stride in _shapes(n):
            axes = box_axes(fabric.slice_shape, size, stride)
            if axes is None or n * (size - 1) > 200_000:
                continue
            routed = _torus_pairs(fabric, group_matrix(n, size, stride))[0].load
            assert torus_box_load(fabric, axes, size) == pytest.approx(routed), (name, size)


def test_oversubscription_reaches_the_405b_plan() -> None:
    flat = load_cluster("hgx_h100x4096")
    tapered = load_cluster("hgx_h100x4096", edits={"oversubscription": 4})
    # DP groups far enough apart to sit in different units feel the 4:1 spine ...
    cross = group_domain(flat, 16, 256), group_domain(tapered, 16, 256)
    assert cross[1].bandwidth_bytes_per_s == pytest.approx(cross[0].bandwidth_bytes_per_s / 4)
    # ... a DP ring over 64 consecutive nodes crosses it only twice, pipeline sends every time
    layout = Layout(tp=8, pp=8, dp=64)
    before, after = comm_domains(flat, layout), comm_domains(tapered, layout)
    assert after["dp"].bandwidth_bytes_per_s == before["dp"].bandwidth_bytes_per_s
    assert after["pp"].bandwidth_bytes_per_s == pytest.approx(
        before["pp"].bandwidth_bytes_per_s / 4
    )
    plans = [search(model="405B", cluster=c, workload={}).best for c in (flat, tapered)]
    assert plans[0].breakdown_s != plans[1].breakdown_s
    assert set(plans[1].placement) >= {"tp", "cp", "dp", "pp", "ep"}


# --- the cached fast path equals the full-graph computation -------------------------------

SMALL_CLUSTERS = [
    edited("hgx_h100x64", scalable_unit_nodes=2, oversubscription=2),
    edited("hgx_h100x64", scalable_unit_nodes=2, oversubscription=3, rail_optimized=False),
    edited("hgx_h100x32", planes=2, scalable_unit_nodes=2, oversubscription=2),
    edited("gb200_nvl72x144", scalable_unit_nodes=9, oversubscription=2),
    edited("mi300xx32", scalable_unit_nodes=2, oversubscription=2),
    edited("tpu_v5ex64", scalable_unit_nodes=2),
    load_cluster("tpu_v5p_4x4x4"),
    load_cluster("tpu_v5p_2x2x4"),
    edited("hgx_h100x64", nics_per_accelerator=0.5, scalable_unit_nodes=3, rail_optimized=False),
    edited("gh200_quadx32", scalable_unit_nodes=2, oversubscription=2),  # a mesh domain of 4
]


def _shapes(n: int) -> list[tuple[int, int]]:
    sizes = [d for d in range(2, n + 1) if n % d == 0]
    return [(size, s) for size in sizes for s in range(1, n // size + 1) if n % (size * s) == 0]


@pytest.mark.parametrize("cluster", SMALL_CLUSTERS, ids=lambda c: c.name + str(c.fabric.planes))
@pytest.mark.parametrize("pattern", ["ring", "p2p", "shift", "all_to_all"])
def test_fast_path_equals_full_graph(cluster: ClusterSpec, pattern: str) -> None:
    fabric, n = fabric_of(cluster), cluster.num_accelerators
    graph = fabric_graph(fabric)
    for size, stride in _shapes(n)[::2]:
        if pattern == "all_to_all" and size > 16:
            continue
        fast = family_domain(fabric, size, stride, pattern, n)
        full = oracle_domain(graph, fabric, size, stride, pattern, n)
        assert fast.bandwidth_bytes_per_s == pytest.approx(full.bandwidth_bytes_per_s), (
            size,
            stride,
        )
        assert (fast.tier, fast.latency_s, fast.efficiency) == (
            full.tier,
            full.latency_s,
            full.efficiency,
        )


def test_ring_attention_sends_have_one_nic_where_a_ring_collective_has_four() -> None:
    """Context parallelism 8 at TP 2 over two H100 nodes (ranks 0, 2, ..., 14): its NCCL ring
    collective (all-gather) runs 4 channels, member j of one node to member j of the next, so a
    NIC carries 1/4 of a rank's traffic (4 x 50 GB/s); ring attention's step sends each rank's
    K/V to its neighbour alone, and the two sends that leave a node have one 400 Gb/s NIC each:
    50 GB/s (docs/calibration.md, "Ring attention's sends have one NIC"). DeepSpeed-Ulysses'
    all-to-all has its own family too."""
    domains = comm_domains(load_cluster("hgx_h100x16"), Layout(tp=2, cp=8))
    assert domains["cp_collective"].bandwidth_bytes_per_s == pytest.approx(200e9)
    assert domains["cp"].bandwidth_bytes_per_s == pytest.approx(50e9)
    # Ulysses' all-to-all (cp_comm a2a): 4 of a rank's 7 peers are on the other node, so 4/7 of
    # its traffic leaves on its NIC: 50 GB/s / (4/7) = 87.5 GB/s
    assert domains["cp_all_to_all"].bandwidth_bytes_per_s == pytest.approx(50e9 * 7 / 4)
    inside = comm_domains(load_cluster("hgx_h100x8"), Layout(tp=2, cp=4))
    assert inside["cp"].bandwidth_bytes_per_s == inside["cp_collective"].bandwidth_bytes_per_s


def test_one_period_equals_the_whole_cluster() -> None:
    fabric = fabric_of(edited("hgx_h100x1024", oversubscription=2))
    for size, stride, pattern in [
        (4, 256, "ring"),
        (8, 8, "ring"),
        (16, 64, "p2p"),
        (4, 2, "all_to_all"),
        (16, 1, "ring"),
    ]:
        whole = route_bottlenecks(fabric, family_flows(fabric, size, stride, pattern, 1024))
        expected = to_comm_domain(fabric, size, whole)
        assert family_domain(fabric, size, stride, pattern, 1024) == expected


def test_comm_domains_is_a_cached_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, layout = load_cluster("hgx_h100x4096"), Layout(tp=8, pp=4, dp=128, ep=8)
    first = comm_domains(cluster, layout)
    calls = []
    monkeypatch.setattr(hierarchy, "family_domain", lambda *a: calls.append(a))
    assert comm_domains(cluster, layout) == first
    assert comm_domains(cluster, Layout(tp=8, pp=4, dp=128, ep=8, mbs=2)) == first
    assert calls == []


def test_graph_comm_domains_match_comm_domains() -> None:
    cluster, layout = edited("gb200_nvl72x144", scalable_unit_nodes=9), Layout(tp=8, dp=18)
    full = graph_comm_domains(cluster_graph(cluster), cluster, layout)
    fast = comm_domains(cluster, layout)
    assert set(full) <= set(fast)
    for dim, dom in full.items():
        assert dom.bandwidth_bytes_per_s == pytest.approx(fast[dim].bandwidth_bytes_per_s)
        assert (dom.tier, dom.latency_s) == (fast[dim].tier, fast[dim].latency_s)


# --- what-if edits -------------------------------------------------------------------------


def test_what_if_edits_change_the_costs() -> None:
    layout = Layout(tp=8, dp=8)
    base = comm_domains(load_cluster("hgx_h100x64"), layout)["dp"].bandwidth_bytes_per_s
    faster = load_cluster("hgx_h100x64", edits={"nic_gbps": 800})
    assert comm_domains(faster, layout)["dp"].bandwidth_bytes_per_s == pytest.approx(2 * base)
    two_nics = load_cluster("hgx_h100x64", edits={"nics_per_gpu": 2})
    assert comm_domains(two_nics, layout)["dp"].bandwidth_bytes_per_s == pytest.approx(2 * base)
    nvl16 = load_cluster("hgx_h100x64", edits={"domain_size": 16})
    assert comm_domains(nvl16, Layout(tp=16, dp=4))["tp"].tier == "scale_up"
    planes = edited("hgx_h100x64", planes=2)
    assert comm_domains(planes, layout)["dp"].bandwidth_bytes_per_s == pytest.approx(base)


def test_failed_link_and_failed_leaf_reroute_over_the_other_plane() -> None:
    cluster = edited("hgx_h100x32", planes=2)
    layout = Layout(tp=8, dp=4)
    graph = cluster_graph(cluster)
    healthy = graph_comm_domains(graph, cluster, layout)["dp"].bandwidth_bytes_per_s
    broken = without_links(graph, [("nic0", "leaf0.0.0")])
    assert graph_comm_domains(broken, cluster, layout)["dp"].bandwidth_bytes_per_s == (
        pytest.approx(healthy / 2)
    )
    no_leaf = without_nodes(graph, ["leaf0.3.1"])
    assert graph_comm_domains(no_leaf, cluster, layout)["dp"].bandwidth_bytes_per_s == (
        pytest.approx(healthy / 2)
    )
    assert broken.number_of_edges() == graph.number_of_edges() - 1


# --- builders: graph invariants like networkx's generator tests ----------------------------


def test_nvswitch_board_and_nvl72_rack_are_stars() -> None:
    board = switched_domain_graph(fabric_of(load_cluster("hgx_h100x8")))
    assert nx.degree_histogram(board)[1] == 8 and nx.degree_histogram(board)[8] == 1
    rack = switched_domain_graph(fabric_of(load_cluster("gb200_nvl72x72")))
    assert rack.number_of_nodes() == 73 and nx.degree_histogram(rack)[72] == 1
    assert {bw for *_, bw in rack.edges(data=BANDWIDTH)} == {900e9}


def test_mi300x_board_is_a_complete_graph_of_single_links() -> None:
    mesh = mesh_domain_graph(fabric_of(load_cluster("mi300xx8")))
    assert nx.is_isomorphic(mesh, nx.complete_graph(8))
    assert {bw for *_, bw in mesh.edges(data=BANDWIDTH)} == {64e9}


@pytest.mark.parametrize(
    ("name", "dims", "periodic"),
    [
        ("tpu_v5p_4x4x4", [4, 4, 4], True),
        ("tpu_v5p_2x4x4", [2, 4, 4], False),
        ("tpu_v5e_8x16", [8, 16], [False, True]),
        ("tpu_v6e_16x16", [16, 16], True),
    ],
)
def test_torus_is_a_grid_with_wraparound_where_the_slice_has_it(
    name: str, dims: list[int], periodic: bool | list[bool]
) -> None:
    graph = torus_graph(fabric_of(load_cluster(name)))
    assert nx.is_isomorphic(graph, nx.grid_graph(dim=dims, periodic=periodic))


@pytest.mark.parametrize("shape", ["8x16x48", "4x8x64", "8x16x32", "8x12x16"])
def test_published_v5p_slice_shapes_are_legal(shape: str) -> None:
    """Google ran MLPerf Training gpt3 on v5p slices beyond the doc's 16x16x24 (the OCS joins
    cubes into longer axes): 8x16x48 and 8x16x32 (v4.0/v4.1), 4x8x64 (v4.1), 8x12x16 (v4.0),
    each system JSON's accelerator_interconnect_topology. A shape that ran must be accepted."""
    cluster = load_cluster(f"tpu_v5p_{shape}")
    dims = [int(a) for a in shape.split("x")]
    assert cluster.num_accelerators == dims[0] * dims[1] * dims[2]
    assert cluster.slice_shape == tuple(dims)


def test_rail_optimized_fat_tree_counts() -> None:
    graph = cluster_graph(load_cluster("hgx_h100x512"))  # 2 units of 32 servers
    kinds = Counter(k for _, k in graph.nodes(data=KIND))
    assert kinds == {"accelerator": 512, "switch": 64, "nic": 512, "leaf": 16, "spine": 1}
    degrees = Counter(graph.degree(n) for n, k in graph.nodes(data=KIND) if k == "leaf")
    assert degrees == {33: 16}  # 32 NICs of its rail and unit, one spine up-link
    assert graph.degree("spine0") == 16


def test_top_of_rack_variant_counts() -> None:
    graph = cluster_graph(edited("hgx_h100x64", rail_optimized=False, scalable_unit_nodes=4))
    kinds = Counter(k for _, k in graph.nodes(data=KIND))
    assert kinds == {"accelerator": 64, "switch": 8, "nic": 64, "tor": 8, "pod": 2, "spine": 1}
    assert graph.degree("tor0.0") == 9 and graph.degree("pod0.0") == 5


def test_tpu_multislice_joins_slices_over_the_dcn() -> None:
    cluster = load_cluster("tpu_v5ex512")  # two 16x16 slices
    graph = cluster_graph(cluster)
    up = [(u, v) for u, v, t in graph.edges(data=TIER) if t == SCALE_UP]
    assert len(up) == 2 * 512 and nx.number_connected_components(nx.Graph(up)) == 2
    assert nx.is_connected(graph)
    assert comm_domains(cluster, Layout(tp=256, dp=2))["dp"].tier == "scale_out"


# --- metrics: symmetric formulas equal the graph ------------------------------------------

METRIC_CLUSTERS = [
    load_cluster("hgx_h100x64"),
    edited("hgx_h100x512", oversubscription=2),
    edited("hgx_h100x64", scalable_unit_nodes=2, oversubscription=3, rail_optimized=False),
    edited("hgx_h100x32", planes=2, scalable_unit_nodes=2, oversubscription=2),
    edited("gb200_nvl72x216", scalable_unit_nodes=9),
    load_cluster("mi300xx24"),
    load_cluster("tpu_v5p_4x4x4"),
    load_cluster("tpu_v5e_16x16"),
    load_cluster("hgx_b200x72"),
    load_cluster("hgx_b200x4"),
    load_cluster("gh200_quadx16"),
]


def _max_flow_bisection(graph: nx.Graph, n: int) -> float:
    flow = nx.DiGraph()
    for u, v, bw in graph.edges(data=BANDWIDTH):
        flow.add_edge(u, v, capacity=bw)
        flow.add_edge(v, u, capacity=bw)
    for r in range(n):
        flow.add_edge("S", accelerator(r)) if r < n / 2 else flow.add_edge(accelerator(r), "T")
    return nx.maximum_flow_value(flow, "S", "T")


@pytest.mark.parametrize("cluster", METRIC_CLUSTERS, ids=lambda c: c.name)
def test_metrics_match_the_graph(cluster: ClusterSpec) -> None:
    fabric = fabric_of(cluster)
    graph = fabric_graph(fabric)
    assert dict(Counter(k for _, k in graph.nodes(data=KIND))) == node_counts(fabric)
    assert graph.number_of_edges() == edge_count(fabric)
    n = cluster.num_accelerators
    assert bisection(fabric)["total"] == pytest.approx(_max_flow_bisection(graph, n))
    up = nx.Graph([(u, v) for u, v, t in graph.edges(data=TIER) if t == SCALE_UP])
    out = nx.Graph([(u, v) for u, v, t in graph.edges(data=TIER) if t != SCALE_UP])
    hops = {"scale_up": 0, "scale_out": 0}
    for r in range(0, n, max(1, n // 8)):
        a = accelerator(r)
        near = nx.single_source_shortest_path_length(up, a) if a in up else {}
        far = nx.single_source_shortest_path_length(out, a)
        for b in graph.nodes:
            if graph.nodes[b][KIND] != "accelerator" or b == a:
                continue
            same = graph.nodes[a][DOMAIN] == graph.nodes[b][DOMAIN]
            tier = "scale_up" if same else "scale_out"
            hops[tier] = max(hops[tier], (near if same else far)[b])
    expected = diameter(fabric)
    assert (hops["scale_up"], hops["scale_out"]) == (expected["scale_up"], expected["scale_out"])


def test_bisection_of_a_rail_optimized_fabric_by_hand() -> None:
    # 2 units x 32 servers x 8 GPUs; the halves are the units; each half's 256 NICs of
    # 50 GB/s climb 8 rail leaves whose up-links are 32 x 50 GB/s / 2 = 800 GB/s each.
    fabric = fabric_of(edited("hgx_h100x512", oversubscription=2))
    assert bisection(fabric)["total"] == pytest.approx(8 * 800e9)
    # one unit, 8 servers: each rail leaf joins 4 servers of each half directly
    assert bisection(fabric_of(load_cluster("hgx_h100x64")))["total"] == pytest.approx(32 * 50e9)
    # v5e 16x16: 16 lines x 2 wrap-around links x 50 GB/s across the cut (Google: 1.6 TB/s)
    assert bisection(fabric_of(load_cluster("tpu_v5e_16x16")))["scale_up"] == pytest.approx(1.6e12)


def test_show_scale_numbers_for_a_huge_cluster_without_a_graph() -> None:
    from planner.topology.metrics import topology_summary

    summary = topology_summary(load_cluster("hgx_h100x131072"))
    assert summary["nodes"]["accelerator"] == 131072
    assert summary["bisection_GB_per_s"] == pytest.approx(131072 / 2 * 50)
    assert summary["diameter_hops"]["total"] == 6


def test_graphml_round_trips_and_refuses_huge_clusters() -> None:
    from planner.errors import SpecError

    text = "\n".join(graphml_lines(load_cluster("hgx_h100x16")))
    graph = nx.parse_graphml(text)
    assert graph.number_of_nodes() == cluster_graph(load_cluster("hgx_h100x16")).number_of_nodes()
    with pytest.raises(SpecError, match="graphml"):
        graphml_lines(load_cluster("hgx_h100x131072"))


# --- placement map --------------------------------------------------------------------------


def test_rank_table_and_placement() -> None:
    cluster, layout = load_cluster("hgx_h100x64"), Layout(tp=4, pp=2, dp=8)
    rows = rank_table(cluster, layout)
    assert len(rows) == 64
    assert rows[13] == {
        "rank": 13,
        "node": 1,
        "local": 5,
        "domain": 1,
        "tp_group": 3,
        "tp_index": 1,
        "cp_group": 13,
        "cp_index": 0,
        "dp_group": 1,
        "dp_index": 3,
        "pp_group": 13,
        "pp_index": 0,
        "ep_group": 13,
        "ep_index": 0,
    }
    where = placement(cluster, layout)
    assert where["tp"].within_domain and where["tp"].example_group == [0, 1, 2, 3]
    assert not where["dp"].within_domain and where["dp"].example_group[:3] == [0, 4, 8]
    members = {r["rank"] for r in rows if r["dp_group"] == 1}
    assert members == {1 + 4 * k for k in range(8)}


def _torus_loads_hop_by_hop(
    fabric: Fabric, src: np.ndarray, dst: np.ndarray, w: np.ndarray
) -> np.ndarray:
    """The brute-force twin of contention.torus_link_loads: walk every route one hop at a time
    in dimension order (a wrap-around tie split in half) and add its weight to each link."""
    shape, dims = fabric.slice_shape, len(fabric.slice_shape)
    loads = np.zeros(fabric.num_accelerators * 2 * dims)
    place = np.cumprod((1, *shape[:-1]))
    for s, d, weight in zip(src.tolist(), dst.tolist(), w.tolist(), strict=True):
        base = s - s % fabric.per_domain
        cur = fabric.coords(np.array([s]))[0].copy()
        goal = fabric.coords(np.array([d]))[0]
        for axis, extent in enumerate(shape):
            delta = int(goal[axis] - cur[axis])
            if fabric.wrap[axis]:
                up = delta % extent
                ways = [(1, up, 1.0)] if 2 * up < extent else [(-1, extent - up, 1.0)]
                if 2 * up == extent:
                    ways = [(1, up, 0.5), (-1, up, 0.5)]
            else:
                ways = [(1 if delta > 0 else -1, abs(delta), 1.0)]
            for direction, hops, share in ways:
                pos = cur.copy()
                for _ in range(hops):
                    rank = base + int(pos @ place)
                    loads[(rank * dims + axis) * 2 + int(direction > 0)] += weight * share
                    pos[axis] = (pos[axis] + direction) % extent
            cur[axis] = goal[axis]
    return loads


@pytest.mark.parametrize("cluster", ["tpu_v5p_4x4x8", "tpu_v4x128", "tpu_v5ex64", "tpu_v5p_2x4x4"])
def test_torus_link_loads_match_routing_hop_by_hop(cluster: str) -> None:
    """The difference-array sum of contention.torus_link_loads equals routing every flow hop by
    hop, for random flows (ties, wrap-around and open axes included) on 3-D and 2-D slices."""
    from planner.topology.contention import torus_link_loads

    fabric = fabric_of(load_cluster(cluster))
    rng = np.random.default_rng(7)
    n = fabric.num_accelerators
    src = rng.integers(0, n, 400)
    dst = src - src % fabric.per_domain + rng.integers(0, fabric.per_domain, 400)
    dst = np.minimum(dst, n - 1)
    w = rng.random(400)
    fast = torus_link_loads(fabric, src, dst, w)
    assert fast == pytest.approx(_torus_loads_hop_by_hop(fabric, src, dst, w), abs=1e-9)


def test_a_four_gpu_nvlink_mesh_gives_a_pair_one_link_and_a_ring_all_three() -> None:
    """A 4-way GH200 node (gh200_quad: each pair of GPUs wired by 6 NVLink 4 links, 150 GB/s per
    direction; one 25 GB/s Slingshot NIC per GPU): TP 2 rides its pair's one link, 150 GB/s; TP 4
    is a ring collective over the whole mesh, NCCL driving every link of it, 3 x 150 = 450 GB/s;
    TP 8 leaves the node, where its ring's 4 channels share the node's 4 NICs: 25 / (1/4) = 100
    GB/s a rank."""
    cluster = load_cluster("gh200_quadx16")
    for tp, expected, tier in ((2, 150e9, "scale_up"), (4, 450e9, "scale_up"),
                               (8, 100e9, "scale_out")):  # fmt: skip
        domain = comm_domains(cluster, Layout(tp=tp, dp=16 // tp))["tp"]
        assert (domain.bandwidth_bytes_per_s, domain.tier) == (pytest.approx(expected), tier)
