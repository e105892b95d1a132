"""The search offloading activations where a layout fits only so (``--activation-offload
auto``, SolverConfig.offload_as_needed): the smallest share the framework can express, only
where it can express it, a stated share kept, and nothing changed when it is off."""

from __future__ import annotations

import json

import pytest

import planner
from planner.catalog import load_cluster, load_model
from planner.catalog.frameworks import resolve_workload
from planner.cost.step import memory_profiles
from planner.search.space import SpaceRequest, build_candidates, offload_share_to_fit
from planner.specs.layout import Layout, Recompute
from tests.test_cli import assert_one_line_error, run_main

GIB = 2.0**30


def test_the_smallest_share_of_layers_is_the_bisection_s() -> None:
    """Brute-force twin of the bisection: for Megatron's whole-layer offload (k of L layers,
    0 < k < L), the share returned is the smallest k / L whose peak fits, over every k, for
    capacities at and between the peaks of successive shares, and None below the last."""
    model = load_model("70B")
    workload = resolve_workload({"global_batch": 64})
    layout = Layout(dp=8, zero=3, mbs=1)
    profiles = memory_profiles(model, workload, layout)
    layers = max(p.num_layers for p in profiles)

    def peak(share: float) -> float:
        w = workload.model_copy(update={"activation_offload_fraction": share})
        return max(p.memory(w, layout, 8).total for p in profiles)

    assert peak(0.0) > peak((layers - 1) / layers)  # offloading frees memory here
    capacities = [peak(k / layers) for k in (1, 2, 7, 40, 79)]
    capacities += [(peak(k / layers) + peak((k + 1) / layers)) / 2 for k in (3, 50)]
    capacities += [peak((layers - 1) / layers) * 0.999]  # not even 79 of 80 layers fit
    for capacity in capacities:
        brute = next((k / layers for k in range(1, layers) if peak(k / layers) <= capacity), None)
        assert offload_share_to_fit(profiles, workload, layout, 8, capacity, "layers") == brute
    assert brute is None


def test_megatron_offloads_whole_layers_only_where_it_can() -> None:
    """Megatron-LM refuses layer offloading with pipeline parallelism or recomputation: no
    candidate the search offloads has either, and each share is k / 80 with 0 < k < 80."""
    model, cluster = load_model("70B"), load_cluster("gb200_nvl72x64")
    workload = resolve_workload({"precision": "fp8", "grad_reduce_dtype": "bf16"})
    request = SpaceRequest(precisions=[workload.precision], offload_as_needed=True)
    feasible = build_candidates(model, cluster, workload, request).feasible
    offloaded = [c for c in feasible if c.offload > 0]
    assert offloaded
    for c in offloaded:
        assert c.layout.pp == 1 and c.layout.recompute is Recompute.NONE
        k = c.offload * 80
        assert k == pytest.approx(round(k)) and 0 < round(k) < 80
    off = build_candidates(model, cluster, workload, request.model_copy(
        update={"offload_as_needed": False})).feasible  # fmt: skip
    assert all(c.offload == 0 for c in off)
    assert len(off) < len(feasible)  # offloading only adds candidates


def test_auto_offload_finds_maxtexts_offloaded_layout() -> None:
    """Llama 3.1 70B under MaxText on a v6e-256 slice: two 8K sequences per chip need their
    layer inputs offloaded (every saved tensor, as MaxText's offload policy does). A search
    that may offload (``--activation-offload auto``) ranks that layout first, faster than the
    best of the default search, which offloads nothing; the plan's workload carries the share,
    the text says it, and a warning gives the host memory it holds (2 x 80 layer inputs of 8192
    x 8192 bf16 values less the one kept on the chip: 19.8 GiB per chip)."""
    flags = ["search", "--model", "70B", "--cluster", "tpu_v6ex256", "--framework", "maxtext"]
    code, out, err = run_main([*flags, "--json"])
    assert code == 0, err
    plain = json.loads(out)["best"]
    assert plain["workload"]["activation_offload_fraction"] == 0.0
    code, out, err = run_main([*flags, "--activation-offload", "auto", "--json"])
    assert code == 0, err
    best = json.loads(out)["best"]
    assert best["workload"]["activation_offload_fraction"] == 1.0
    assert best["layout"]["mbs"] == 2 and best["fits"]
    assert best["breakdown_s"]["offload"] > 0
    assert best["step_time_s"] < plain["step_time_s"]
    held = 2 * 79 * 8192 * 8192 * 2 / 2**30  # mbs 2, 80 layer inputs less one
    assert any(f"{held:.1f} GiB per GPU" in w for w in best["warnings"])
    code, out, err = run_main([*flags, "--activation-offload", "auto"])
    assert "mbs2 full zero3 bf16 offload 100%" in out


def test_a_stated_share_is_kept_and_only_search_takes_auto() -> None:
    """A workload that states a share (0 included) keeps it for every candidate even when the
    search may offload; estimate, migrate and whatif score given settings, so auto there is
    one line, exit 2."""
    result = planner.search(
        model="70B", cluster="tpu_v6ex256", workload={"framework": "maxtext",
        "activation_offload_fraction": 0.0}, config={"offload_as_needed": True},
    )  # fmt: skip
    assert all(
        p.workload is not None and p.workload.activation_offload_fraction == 0.0
        for p in [result.best, *result.alternatives]
    )
    for command in (
        ["estimate", "--model", "8B", "--cluster", "hgx_h100x8"],
        ["migrate", "--model", "70B", "--from", "hgx_h100x64", "--to", "hgx_b200x64"],
    ):
        code, _out, err = run_main([*command, "--activation-offload", "auto"])
        assert "give" in assert_one_line_error(code, err, 2)


def test_the_export_carries_the_share_the_search_chose() -> None:
    """``export --activation-offload auto`` exports the plan the search chose, offload
    included: Megatron-LM's --cpu-offloading-num-layers from its k of L layers."""
    plan = planner.search(
        model="70B", cluster="gb200_nvl72x64", workload={"precision": "fp8",
        "grad_reduce_dtype": "bf16"}, config={"offload_as_needed": True},
    ).best  # fmt: skip
    assert plan.workload is not None
    layers = round(plan.workload.activation_offload_fraction * 80)
    code, out, err = run_main(["export", "--format", "megatron", "--model", "70B", "--cluster",
                               "gb200_nvl72x64", "--precision", "fp8", "--grad-reduce", "bf16",
                               "--activation-offload", "auto"])  # fmt: skip
    assert code == 0, err
    if layers:
        assert f"--cpu-offloading-num-layers {layers}" in out
    else:
        assert "--cpu-offloading-num-layers" not in out
