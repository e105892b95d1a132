"""``layout whatif``: knob parsing, the cartesian order, infeasibility as data, the knobs' effect
on the re-planned cluster and workload, local processes and Ray giving the same answer."""

from __future__ import annotations

import json

import pytest

import planner
from planner.catalog import load_cluster, load_model
from planner.errors import SpecError
from planner.search.whatif import (
    KNOBS,
    ClusterBase,
    ScenarioRequest,
    parse_vary,
    run_scenario,
    scenario_cluster,
)
from planner.specs.scenarios import WhatIfResult
from planner.specs.workload import TrainWorkload
from tests.test_cli import untimed
from tests.test_migrate import assert_one_line_error, run_main

SMALL = {"seq_len": 4096, "global_batch": 64}
"""A workload small enough that 8B plans in a fraction of a second."""


def _dump(result: WhatIfResult) -> list[object]:
    """The scenarios as JSON without wall-clock times (a CP-SAT split's ``wall_s`` differs from
    run to run)."""
    return [untimed(s.model_dump(mode="json")) for s in result.scenarios]


@pytest.fixture(scope="module")
def grid() -> WhatIfResult:
    return planner.whatif(
        model="8B",
        cluster="hgx_h100x16",
        workload=SMALL,
        vary=["nic_gbps=100,400,800", "rail_optimized=true,false"],
    )


# --- parsing --------------------------------------------------------------------------------


def test_parse_vary_values_and_aliases() -> None:
    assert parse_vary("nic_gbps=200,400.5") == ("nic_gbps", [200, 400.5])
    assert parse_vary("rail-optimized=true,no") == ("rail_optimized", [True, False])
    assert parse_vary("num_gpus=8,16") == ("gpus", [8, 16])
    assert parse_vary("precision=BF16,fp8") == ("precision", ["bf16", "fp8"])
    assert parse_vary("system=hgx_b200") == ("system", ["hgx_b200"])
    assert parse_vary("seq_len=8K,128k") == ("seq_len", [8192, 131072])  # as --seq-len reads K
    assert set(KNOBS) >= {"nic_gbps", "nics_per_gpu", "oversubscription", "rail_optimized",
                          "system", "accelerator", "gpus", "domain_size", "precision", "seq_len",
                          "global_batch"}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("nic=400", "KEY one of"),
        ("nic_gbps", "KEY one of"),
        ("nic_gbps=", "at least one value"),
        ("nic_gbps=fast", "not a number"),
        ("oversubscription=0.5", "from 1 to 1,000"),
        ("gpus=12.5", "whole number"),
        ("rail_optimized=maybe", "true or false"),
        ("precision=fp7", "unknown precision"),
        ("system=hgx_b20", "did you mean"),
    ],
)
def test_parse_vary_errors(text: str, needle: str) -> None:
    with pytest.raises(SpecError, match=needle):
        parse_vary(text)


def test_knob_given_twice_and_conflicting_knobs() -> None:
    with pytest.raises(SpecError, match="twice"):
        planner.whatif(model="8B", cluster="hgx_h100x8", vary=["gpus=8", "gpus=16"])
    with pytest.raises(SpecError, match="vary one"):
        planner.whatif(
            model="8B", cluster="hgx_h100x8", vary=["system=hgx_b200", "accelerator=b200"]
        )


# --- the sweep -------------------------------------------------------------------------------


def test_cartesian_order_last_knob_fastest(grid: WhatIfResult) -> None:
    varies = [s.vary for s in grid.scenarios]
    assert varies == [
        {"nic_gbps": n, "rail_optimized": r} for n in (100, 400, 800) for r in (True, False)
    ]
    assert grid.knobs == {"nic_gbps": [100, 400, 800], "rail_optimized": [True, False]}


def test_each_scenario_replans_on_its_cluster(grid: WhatIfResult) -> None:
    for scenario in grid.scenarios:
        assert scenario.status == "ok" and scenario.plan is not None
        assert scenario.plan.fits
        assert f"{scenario.vary['nic_gbps']} Gb/s" in scenario.plan.cluster_description
        rail = "rail-optimized" if scenario.vary["rail_optimized"] else "ToR"
        assert rail in scenario.plan.cluster_description
        assert scenario.economics is not None and scenario.economics.usd_per_million_tokens > 0
    # faster NICs never make the best plan slower
    steps = {
        (s.vary["nic_gbps"], s.vary["rail_optimized"]): s.plan.step_time_s for s in grid.scenarios
    }  # type: ignore[union-attr]
    for rail in (True, False):
        assert steps[(100, rail)] >= steps[(400, rail)] >= steps[(800, rail)] * (1 - 1e-9)


def test_bottleneck_is_the_largest_exposed_comm_term(grid: WhatIfResult) -> None:
    for scenario in grid.scenarios:
        plan, neck = scenario.plan, scenario.bottleneck
        assert plan is not None
        comm = {k: v for k, v in plan.breakdown_s.items() if k.endswith("_comm")}
        if neck is None:
            assert max(comm.values(), default=0.0) <= 0.0
            continue
        assert neck.exposed_s == max(comm.values())
        assert neck.link == plan.placement[neck.dimension].link


def test_workers_give_the_same_answer_in_the_same_order(grid: WhatIfResult) -> None:
    parallel = planner.whatif(
        model="8B",
        cluster="hgx_h100x16",
        workload=SMALL,
        vary={"nic_gbps": [100, 400, 800], "rail_optimized": [True, False]},
        workers=2,  # more than the cores would only add a note (tests/test_hostile_whatif.py)
    )
    assert _dump(parallel) == _dump(grid)


def test_progress_is_reported_once_per_scenario() -> None:
    calls: list[tuple[int, int]] = []
    planner.whatif(
        model="8B", cluster="hgx_h100x8", workload=SMALL, vary=["nic_gbps=200,400"],
        progress=lambda done, total: calls.append((done, total)),
    )  # fmt: skip
    assert calls == [(1, 2), (2, 2)]


def test_infeasible_and_invalid_scenarios_are_data() -> None:
    result = planner.whatif(model="70B", cluster="hgx_h100x8", workload=SMALL, vary=["gpus=8,12,64"],
                            fix={"zero": 1})  # fmt: skip
    by_gpus = {s.vary["gpus"]: s for s in result.scenarios}
    assert by_gpus[8].status == "infeasible" and "GiB" in (by_gpus[8].error or "")
    assert by_gpus[12].status == "invalid" and "nearest valid" in (by_gpus[12].error or "")
    assert by_gpus[64].status == "ok" and by_gpus[64].plan is not None
    assert by_gpus[64].plan.num_gpus == 64


def test_workload_knobs_reach_the_plan() -> None:
    result = planner.whatif(
        model="8B", cluster="hgx_b200x8",  # the varied knobs are not also set in the workload
        vary=["precision=bf16,fp8", "seq_len=2048", "global_batch=32"],
    )  # fmt: skip
    bf16, fp8 = result.scenarios
    assert str(bf16.plan.layout.precision) == "bf16" and str(fp8.plan.layout.precision) == "fp8"  # type: ignore[union-attr]
    assert fp8.plan.step_time_s < bf16.plan.step_time_s  # type: ignore[union-attr]
    assert bf16.plan.tokens_per_s * bf16.plan.step_time_s == pytest.approx(2048 * 32)  # type: ignore[union-attr]


def test_system_accelerator_and_domain_knobs_build_the_right_cluster() -> None:
    base = ClusterBase.of(load_cluster("hgx_h100x64", edits=None))
    assert scenario_cluster(base, {"accelerator": "b200"}).system.name == "hgx_b200"
    assert scenario_cluster(base, {"accelerator": "gb200"}).system.name == "gb200_nvl72"
    assert scenario_cluster(base, {"system": "hgx_h200", "gpus": 128}).name == "hgx_h200x128"
    assert scenario_cluster(base, {"domain_size": 16}).accelerators_per_domain == 16
    kept = scenario_cluster(base, {"nic_gbps": 800})
    assert kept.name == "hgx_h100x64" and kept.fabric.nic_Gbps == 800


def test_base_edits_are_kept_under_the_knobs() -> None:
    cluster = planner.load_cluster("hgx_h100x16", edits={"rail_optimized": False, "nic_gbps": 200})
    base = ClusterBase.of(cluster)
    edited = scenario_cluster(base, {"oversubscription": 2})
    assert not edited.fabric.rail_optimized and edited.fabric.nic_Gbps == 200
    assert edited.fabric.oversubscription == 2


def test_scenario_function_is_picklable() -> None:
    import pickle

    request = ScenarioRequest(
        model=load_model("8B"), base=ClusterBase.of(load_cluster("hgx_h100x8")),
        workload=TrainWorkload(**SMALL), vary={"nic_gbps": 400},
    )  # fmt: skip
    clone = pickle.loads(pickle.dumps(request))
    assert untimed(run_scenario(clone).model_dump(mode="json")) == untimed(
        run_scenario(request).model_dump(mode="json")
    )


def test_ray_engine_matches_local(grid: WhatIfResult) -> None:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    try:
        remote = planner.whatif(
            model="8B", cluster="hgx_h100x16", workload=SMALL,
            vary=["nic_gbps=100,400,800", "rail_optimized=true,false"], engine="ray",
        )  # fmt: skip
    finally:
        ray.shutdown()
    assert _dump(remote) == _dump(grid)


# --- the CLI ----------------------------------------------------------------------------------


def test_cli_json_contract_and_progress() -> None:
    code, out, err = run_main(
        ["whatif", "--model", "8B", "--cluster", "hgx_h100x8", "--seq-len", "4096",
         "--global-batch", "64", "--vary", "nic_gbps=200,400", "--json", "--progress",
         "--tokens", "1T"]
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert [s["vary"] for s in data["scenarios"]] == [{"nic_gbps": 200}, {"nic_gbps": 400}]
    for scenario in data["scenarios"]:
        assert {"vary", "plan", "economics", "bottleneck"} <= set(scenario)
        assert scenario["economics"]["run"]["steps"] > 0
    assert "2/2 scenarios" in err


def test_cli_text_names_the_fastest() -> None:
    code, out, err = run_main(
        ["whatif", "--model", "8B", "--cluster", "hgx_h100x8", "--seq-len", "4096",
         "--global-batch", "64", "--vary", "precision=bf16,fp8"]
    )  # fmt: skip
    assert code == 0, err
    assert "the fastest is precision=fp8" in out
    assert err == ""  # no progress bar when stderr is not a terminal


@pytest.mark.parametrize(
    "extra",
    [
        ["--vary", "nic=1"],
        ["--vary", "gpus=8", "--report", "out.pdf"],
        ["--vary", "gpus=8", "--workers", "0"],
    ],
)
def test_cli_bad_input_is_one_line_exit_2(extra: list[str]) -> None:
    code, _, err = run_main(["whatif", "--model", "8B", "--cluster", "hgx_h100x8", *extra])
    assert_one_line_error(code, err, 2)


def test_cli_nothing_feasible_is_exit_1() -> None:
    code, out, _ = run_main(
        [
            "whatif",
            "--model",
            "405B",
            "--cluster",
            "hgx_h100x8",
            "--vary",
            "nic_gbps=400",
            "--fix",
            "zero=1",
        ]
    )
    assert code == 1
    assert "no feasible plan" in out or "infeasible" in out


def test_framework_knobs_change_the_moe_prediction() -> None:
    from planner.search.whatif import framework_updates

    assert parse_vary("moe_dispatcher=deepep,AllToAll") == (
        "moe_dispatcher",
        ["deepep", "alltoall"],
    )
    assert parse_vary("ep-overlap=true,off") == ("ep_overlap", [True, False])
    with pytest.raises(SpecError, match="moe_dispatcher"):
        parse_vary("moe_dispatcher=nccl")
    assert framework_updates({"ep_overlap": True, "moe_dispatcher": "alltoall"}) == {
        "ep_comm_overlap": True,
        "moe_dispatch_dedup": False,
    }
    code, out, err = run_main(
        ["whatif", "--model", "mixtral-8x7b", "--cluster", "hgx_h100x16", "--seq-len", "4096",
         "--global-batch", "256", "--vary", "moe_cuda_graphs=false,true", "--fix", "ep=8",
         "--json"]
    )  # fmt: skip
    assert code == 0, err
    plans = [s["plan"] for s in json.loads(out)["scenarios"]]
    assert plans[0]["breakdown_s"]["moe_sync"] > 0 and plans[1]["breakdown_s"]["moe_sync"] == 0
    assert plans[1]["step_time_s"] < plans[0]["step_time_s"]
    # the fused grouped MLP as a knob: faster where it runs (GB300, MXFP8), invalid on H100
    assert parse_vary("fused_grouped_mlp=off,on") == ("fused_grouped_mlp", [False, True])
    code, out, err = run_main(
        ["whatif", "--model", "gpt-oss-20b", "--cluster", "gb300_nvl72x8", "--precision", "mxfp8",
         "--seq-len", "8192", "--global-batch", "24", "--vary", "fused_grouped_mlp=false,true",
         "--vary", "accelerator=gb300,h100_sxm", "--json"]
    )  # fmt: skip
    assert code == 0, err
    by = {(s["vary"]["fused_grouped_mlp"], s["vary"]["accelerator"]): s
          for s in json.loads(out)["scenarios"]}  # fmt: skip
    fused, plain = by[(True, "gb300")]["plan"], by[(False, "gb300")]["plan"]
    assert fused["step_time_s"] < plain["step_time_s"]
    assert fused["workload"]["fused_grouped_mlp"] and not plain["workload"]["fused_grouped_mlp"]
    assert by[(True, "h100_sxm")]["status"] == "invalid"
    assert "compute capability" in by[(True, "h100_sxm")]["error"]


def test_a_scenario_on_a_tpu_runs_maxtext_unless_a_framework_is_named() -> None:
    """Without a framework named, each scenario runs its accelerator's default profile, as a
    search there would (H100 or TPU v5p: Megatron-LM on the one, MaxText on the other); a
    framework named for GPUs makes the TPU scenario invalid, saying which profile runs there."""
    vary = {"system": ["hgx_h100", "tpu_v5p"]}
    free = planner.whatif(model="8B", cluster="hgx_h100x16", vary=vary, workload=SMALL)
    frameworks = [s.plan.workload.framework for s in free.scenarios if s.plan and s.plan.workload]
    assert frameworks == ["megatron", "maxtext"]
    named = planner.whatif(
        model="8B", cluster="hgx_h100x16", vary=vary, workload={**SMALL, "framework": "megatron"}
    )
    gpu, tpu = named.scenarios
    assert gpu.status == "ok" and tpu.status == "invalid"
    assert tpu.error is not None and "--framework maxtext runs there" in tpu.error


def test_a_multi_slice_tpu_cluster_is_rebuilt_per_scenario() -> None:
    """Two 256-chip v5e slices: each scenario rebuilds them from the chip count (the base's
    slice shape is one slice's; given for the whole 512 chips it crashed every scenario)."""
    base = ClusterBase.of(load_cluster("tpu_v5ex512"))
    for vary in ({"nic_gbps": 50.0}, {"seq_len": 4096}):
        cluster = scenario_cluster(base, vary)  # type: ignore[arg-type]
        assert (cluster.num_domains, cluster.accelerators_per_domain) == (2, 256)


def test_domain_size_is_refused_on_a_torus() -> None:
    """A TPU torus's scale-up domains are its slices: --domain-size is refused in one line,
    not applied to nothing."""
    with pytest.raises(SpecError, match="TPU torus whose scale-up domains are its slices"):
        planner.load_cluster("tpu_v5px256", edits={"domain_size": 16})
