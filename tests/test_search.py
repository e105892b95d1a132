"""The search: CP-SAT chooses, and its optimum equals an exhaustive enumeration of the same model."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.catalog import load_cluster, load_model
from planner.errors import InfeasibleError
from planner.search import search
from planner.search.validate import plan_problems
from planner.specs.model import ModelSpec
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import TrainWorkload

CP_SAT = SolverConfig(solver="cp-sat", top=3)
EXHAUSTIVE = SolverConfig(solver="exhaustive", top=3)


@st.composite
def small_instances(draw: st.DrawFn) -> tuple[ModelSpec, str, TrainWorkload]:
    """A random but valid small dense model, cluster and workload."""
    kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([64, 128]))
    model = ModelSpec(
        name="random",
        source="hypothesis",
        hidden_size=heads * head_dim,
        num_layers=draw(st.integers(2, 24)),
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        ffn_hidden_size=draw(st.sampled_from([1024, 2048, 4096, 11008])),
        ffn_activation=draw(st.sampled_from(["swiglu", "gelu"])),
        vocab_size=draw(st.sampled_from([32000, 50257])),
        max_context=8192,
    )
    cluster = draw(
        st.sampled_from(
            ["hgx_h100x4", "hgx_h100x8", "hgx_h100x16", "hgx_a100x8", "gb200_nvl72x8", "hgx_b200x2"]
        )
    )
    workload = TrainWorkload(
        seq_len=draw(st.sampled_from([1024, 2048, 4096])),
        global_batch=draw(st.sampled_from([8, 16, 32, 64])),
    )
    return model, cluster, workload


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_cpsat_optimum_equals_exhaustive(instance: tuple[ModelSpec, str, TrainWorkload]) -> None:
    model, cluster_name, workload = instance
    cluster = load_cluster(cluster_name)
    try:
        ours = search(model, cluster, workload, config=CP_SAT)
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            search(model, cluster, workload, config=EXHAUSTIVE)
        return
    brute = search(model, cluster, workload, config=EXHAUSTIVE)
    assert ours.solver.status == "OPTIMAL"
    assert ours.solver.objective == pytest.approx(brute.solver.objective, abs=1e-6)
    assert ours.best.step_time_s == pytest.approx(brute.best.step_time_s, abs=2e-6)
    ours_ranked = [ours.best.step_time_s] + [a.step_time_s for a in ours.alternatives]
    brute_ranked = [brute.best.step_time_s] + [a.step_time_s for a in brute.alternatives]
    assert ours_ranked == pytest.approx(brute_ranked, abs=2e-6)
    for plan in [ours.best, *ours.alternatives]:
        assert plan_problems(plan, model, cluster, workload) == []


def test_70b_on_b200x16_search_is_feasible_and_explained() -> None:
    result = search(load_model("70B"), load_cluster("hgx_b200x16"), TrainWorkload())
    assert result.best.fits
    assert result.alternatives and all(a.why_not for a in result.alternatives)
    assert all(a.step_time_s >= result.best.step_time_s for a in result.alternatives)
    assert result.num_feasible <= result.num_candidates
    assert sum(result.rejections.values()) + result.num_feasible == result.num_candidates


def test_more_memory_allows_less_model_parallelism() -> None:
    # DESIGN.md section 4, migration: the B200's memory lets the same job use fewer model-
    # parallel ranks (tp x pp) than the H100 needs; the search discovers it, nobody tells it.
    workload = TrainWorkload(seq_len=8192, global_batch=128)
    model = load_model("70B")
    h100 = search(model, load_cluster("hgx_h100x64"), workload).best.layout
    b200 = search(model, load_cluster("hgx_b200x64"), workload).best.layout
    assert b200.tp * b200.pp <= h100.tp * h100.pp


def test_pins_are_honoured() -> None:
    result = search(
        load_model("8B"),
        load_cluster("hgx_h100x8"),
        TrainWorkload(global_batch=64),
        fix={"tp": 2, "recompute": "full"},
    )
    for plan in [result.best, *result.alternatives]:
        assert plan.layout.tp == 2
        assert str(plan.layout.recompute) == "full"


def test_nothing_fits_names_the_binding_limit() -> None:
    with pytest.raises(InfeasibleError, match=r"over by .* GiB"):
        search(
            load_model("70B"), load_cluster("hgx_h100x8"), TrainWorkload(), fix={"tp": 1, "pp": 1}
        )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_the_memory_ladder_dominance_holds_on_the_cost_model(
    instance: tuple[ModelSpec, str, TrainWorkload],
) -> None:
    """space.MEMORY_LADDER skips a rung once one with a no-stronger recompute fitted at a lower
    or equal ZeRO stage, and tries ZeRO-0 only when pinned. That is exact only if, for the same
    layout, a higher ZeRO stage (>= 1) or a stronger recompute is never faster (a skipped rung
    could not win once the weaker one fits), and ZeRO-1 is never slower nor larger than ZeRO-0
    (it fits wherever ZeRO-0 does): checked on every recompute x ZeRO variant of the plans a
    search returns."""
    from planner.search.engine import estimate
    from planner.search.rules import framework_rules
    from planner.search.space import RECOMPUTE_ORDER

    model, cluster_name, workload = instance
    cluster = load_cluster(cluster_name)
    try:
        result = search(model, cluster, workload, config=EXHAUSTIVE)
    except InfeasibleError:
        return
    for plan in [result.best, *result.alternatives]:
        sub = load_cluster(f"{cluster_name.rpartition('x')[0]}x{plan.num_gpus}")
        legal = [
            z
            for z in (0, 1, 2, 3)
            if not framework_rules(workload, plan.layout.model_copy(update={"zero": z}))
        ]
        grid = {
            (r, z): estimate(
                model, sub, workload, plan.layout.model_copy(update={"zero": z, "recompute": r})
            )
            for r in RECOMPUTE_ORDER
            for z in legal
        }
        for (r, z), a in grid.items():
            if z == 0:  # ZeRO-1 dominates ZeRO-0: never slower, never larger
                one = grid[(r, 1)]  # ZeRO-1 composes with everything ZeRO-0 does (megatron)
                assert one.step_time_s <= a.step_time_s * (1 + 1e-9), (plan.layout.short(), r)
                assert one.memory.peak_gib <= a.memory.peak_gib * (1 + 1e-9)
                continue
            for (r2, z2), b in grid.items():
                weaker = RECOMPUTE_ORDER.index(r) <= RECOMPUTE_ORDER.index(r2) and z <= z2
                if weaker and (r, z) != (r2, z2) and z2 != 0:
                    where = (plan.layout.short(), r, z, r2, z2)
                    assert a.step_time_s <= b.step_time_s * (1 + 1e-9), where


def test_zero_pins_0_and_2_are_searched() -> None:
    """Issue 17: --fix zero=0 / zero=2 on Llama 3.1 8B, 8 H100 found a layout (it fits with room)."""
    for stage in (0, 2):
        result = search(
            load_model("8B"), load_cluster("hgx_h100x8"), TrainWorkload(), fix={"zero": stage}
        )
        assert result.best.fits and result.best.layout.zero == stage
        assert all(a.layout.zero == stage for a in result.alternatives)
