"""The placement's gradient-reduction groups, the what-if bottleneck they name, and saved plans
with them or without them (schema 1.18).

Hand check, Llama 3.1 70B at TP 8 CP 8 DP 1 on 64 H100 (eight HGX nodes, one 400 Gb/s NIC per
GPU): the data-parallel group is one rank, so nothing crosses on ``dp``; the dense gradients
reduce over dp x cp = 8 ranks, 8 apart (one per node), a ring across the nodes whose every rank
sends on its own NIC, 400 Gb/s = 50 GB/s. Before the gradient groups, the what-if bottleneck
of this plan's ``dp_comm`` named the one-rank DP group's "link" and called it scale-up.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planner
from planner.catalog import load_cluster
from planner.errors import SpecError
from planner.report.export import load_plan_file
from planner.report.text import plan_lines
from planner.search.migrate import bottleneck
from planner.search.placement import block_size
from planner.specs.layout import Layout
from planner.topology.hierarchy import placement, placement_shapes

LONG = {"seq_len": 65536, "global_batch": 64}
CP8 = {"tp": 8, "pp": 1, "dp": 1, "cp": 8, "zero": 3, "mbs": 1}


def test_gradient_groups_only_where_they_are_not_dp() -> None:
    assert "dp_cp" not in placement_shapes(Layout(tp=8, dp=8))
    assert "edp" not in placement_shapes(Layout(tp=8, dp=8))
    assert placement_shapes(Layout(tp=8, cp=8))["dp_cp"] == (8, 8, "ring")
    # experts folded as Megatron-Core does: edp = dp x cp x tp / (ep x etp), ep x etp apart
    assert placement_shapes(Layout(tp=2, dp=8, ep=4, etp=1))["edp"] == (4, 4, "ring")


def test_dp_cp_crosses_the_nodes_on_one_nic_each() -> None:
    where = placement(load_cluster("hgx_h100x64"), Layout(**CP8))
    grads = where["dp_cp"]
    assert (grads.size, grads.stride) == (8, 8)
    assert not grads.within_domain and grads.tier == "scale_out"
    assert grads.bandwidth_GB_per_s == pytest.approx(50.0)
    assert grads.example_group == [0, 8, 16, 24, 32, 40, 48, 56]
    assert where["dp"].size == 1


def test_gradient_groups_leave_the_placement_block_alone() -> None:
    cluster = load_cluster("hgx_h100x64")
    for layout in (Layout(**CP8), Layout(tp=2, cp=2, dp=2), Layout(tp=2, dp=4, ep=8, etp=1)):
        where = placement(cluster, layout)
        plain = {d: e for d, e in where.items() if d not in ("dp_cp", "edp")}
        assert block_size(where, 8) == block_size(plain, 8)


def test_the_bottleneck_of_dp_comm_is_the_gradient_group() -> None:
    plan = planner.estimate(model="70B", cluster="hgx_h100x64", layout=CP8, workload=LONG)
    assert plan.breakdown_s["dp_comm"] == max(
        v for k, v in plan.breakdown_s.items() if k.endswith("_comm")
    )
    neck = bottleneck(plan)
    assert neck is not None and neck.term == "dp_comm"
    assert neck.dimension == "dp_cp"
    assert not neck.within_domain
    assert neck.link == plan.placement["dp_cp"].link
    assert "NIC" in neck.link


def test_the_text_report_shows_the_gradient_group() -> None:
    plan = planner.estimate(model="70B", cluster="hgx_h100x64", layout=CP8, workload=LONG)
    shown = [line for line in plan_lines(plan) if line.lstrip().startswith("DPxCP")]
    assert len(shown) == 1 and "8 x stride 8" in shown[0] and "across domains" in shown[0]


def _saved(tmp_path: Path, data: dict[str, object], name: str = "plan.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_saved_plans_export_with_or_without_gradient_groups(tmp_path: Path) -> None:
    tp4 = {"tp": 4, "pp": 1, "dp": 1, "cp": 8, "mbs": 1}
    tp1 = {"tp": 1, "pp": 1, "dp": 4, "cp": 8, "mbs": 1, "recompute": "full"}  # Ulysses: 8 KV
    # heads a rank over cp 8
    for cp_comm, layout in (("p2p", tp4), ("allgather", tp4), ("a2a", tp1)):
        plan = planner.estimate(
            model="8B", cluster="hgx_h100x32", layout=layout, workload={**LONG, "cp_comm": cp_comm}
        )
        data = json.loads(plan.model_dump_json())
        # the CP line is the one cp_comm uses: a plan made with allgather or a2a exports
        assert planner.export(load_plan_file(_saved(tmp_path, data)), format="megatron").text
        # a plan saved before schema 1.18 has no gradient groups: still the plan as made
        older = {**data, "schema_version": "1.17"}
        older["placement"] = {k: v for k, v in data["placement"].items() if k != "dp_cp"}
        assert planner.export(load_plan_file(_saved(tmp_path, older)), format="megatron").text
        # an edited gradient group is refused
        edited = json.loads(json.dumps(data))
        edited["placement"]["dp_cp"]["bandwidth_GB_per_s"] = 900.0
        with pytest.raises(SpecError, match="placement is not where"):
            planner.export(load_plan_file(_saved(tmp_path, edited)), format="megatron")


HSDP = {"tp": 1, "pp": 1, "dp": 64, "zero": 3, "mbs": 1}


def test_hybrid_sharding_shows_its_groups_and_is_priced_on_a_cluster_state() -> None:
    """With --zero-shard-group 8 on eight H100 nodes the shard groups stay in a node (NVLink)
    and the replicas cross the nodes (one NIC a rank); a placement on a cluster state prices
    them as the same job on eight whole nodes is priced (it priced full sharding over all 64
    ranks before)."""
    work = {"global_batch": 256, "zero_shard_group": 8}
    plan = planner.estimate(model="8B", cluster="hgx_h100x64", layout=HSDP, workload=work)
    shard, replica = plan.placement["dp_shard"], plan.placement["dp_replicate"]
    assert (shard.size, shard.stride, shard.within_domain) == (8, 1, True)
    assert (replica.size, replica.stride, replica.within_domain) == (8, 8, False)
    assert replica.bandwidth_GB_per_s == pytest.approx(50.0)
    state = Path(__file__).parents[1] / "examples" / "cluster_state.yaml"
    placed = planner.estimate(
        model="8B", cluster="hgx_h100x128", layout=HSDP, workload=work, cluster_state=state
    )
    full = planner.estimate(
        model="8B", cluster="hgx_h100x128", layout=HSDP, workload={"global_batch": 256},
        cluster_state=state,
    )  # fmt: skip
    assert placed.breakdown_s["dp_comm"] == pytest.approx(plan.breakdown_s["dp_comm"], rel=1e-6)
    assert placed.breakdown_s["dp_comm"] != pytest.approx(full.breakdown_s["dp_comm"], rel=1e-3)
    assert "dp_shard" in placed.placement and "dp_replicate" in placed.placement
    neck = bottleneck(plan)
    assert neck is not None and neck.dimension == "dp_replicate"


def test_the_dp_floor_of_hybrid_sharding_holds() -> None:
    """The split sweep's DP floor (:func:`planner.search.solve.stages.dp_sync_step_floor`) prices
    the shard and replica groups the step is priced on: at most the step's own exposed DP time
    and optimizer step, for a hybrid-sharded pipelined layout."""
    from planner.catalog import load_model
    from planner.cost.step import pipeline_steps
    from planner.search import engine
    from planner.search.evaluate import score
    from planner.search.solve.stages import dp_sync_step_floor
    from planner.specs.workload import TrainWorkload

    model, cluster = load_model("70B"), load_cluster("hgx_h100x128")
    layout = Layout(tp=8, pp=2, dp=8)
    for group in (None, 2, 4):
        work = engine.resolve_workload(
            TrainWorkload(seq_len=4096, global_batch=256, zero_shard_group=group),
            cluster.accelerator.vendor,
        )
        cost = score(model, cluster, work, layout)
        slowest = max(t.total for t in cost.stage_times)
        floor = dp_sync_step_floor(
            model, cluster, work, layout, slowest, pipeline_steps(work, layout)
        )
        sync = cost.breakdown_s["dp_comm"] + cost.breakdown_s["optimizer"]
        assert 0 < floor <= sync * (1 + 1e-9), group
