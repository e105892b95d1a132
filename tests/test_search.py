"""The search: branch and bound and a numpy sort choose, and the result equals an exhaustive
enumeration and a plain sort of the same model."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.catalog import load_cluster, load_model
from planner.catalog.frameworks import resolve_workload
from planner.errors import InfeasibleError
from planner.search import search
from planner.search.engine import gpu_counts
from planner.search.validate import plan_problems
from planner.specs.model import ModelSpec
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import TrainWorkload

SORTED = SolverConfig(solver="cp-sat", top=3)  # the default path: pruned, numpy sort
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
    # the frameworks' profiles change what the cost model prices per ZeRO stage (torchtitan
    # gathers FP8 parameters under FSDP, which drops torchao's per-call weight casts; Nanotron
    # places its own pipeline layers)
    framework = draw(
        st.sampled_from(["megatron", "megatron", "torchtitan", "fsdp", "deepspeed", "nanotron"])
    )
    fp8 = cluster.startswith(("hgx_h100", "gb200", "hgx_b200")) and draw(st.booleans())
    workload = resolve_workload(
        {
            "seq_len": draw(st.sampled_from([1024, 2048, 4096])),
            "global_batch": draw(st.sampled_from([8, 16, 32, 64])),
            "framework": framework,
            "precision": "fp8" if fp8 else "bf16",
        }
    )
    return model, cluster, workload


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_pruned_sorted_optimum_equals_exhaustive(
    instance: tuple[ModelSpec, str, TrainWorkload],
) -> None:
    model, cluster_name, workload = instance
    cluster = load_cluster(cluster_name)
    try:
        ours = search(model, cluster, workload, config=SORTED)
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


def test_the_memory_refusal_adds_up() -> None:
    """The refusal's figures add up: usable = HBM - the runtime reserve, the search fills usable
    less its headroom, and "over by" is what the layout needs beyond that (mixtral-8x22b, 141B
    parameters, cannot hold its fp32 Adam state on 8 x 192 GB)."""
    with pytest.raises(InfeasibleError) as caught:
        search(load_model("mixtral-8x22b"), load_cluster("mi300xx8"), TrainWorkload(seq_len=4096))
    words = str(caught.value)
    numbers = re.search(
        r"needs ([\d.]+) GiB per GPU .* has ([\d.]+) GiB usable \(([\d.]+) GiB \(192 GB part\) "
        r"minus ([\d.]+) GB runtime reserve\), of which the search fills ([\d.]+) \(it keeps "
        r"(\d+)% free\): over by ([\d.]+) GiB",
        words,
    )
    assert numbers, words
    needs, usable, hbm, reserve_gb, fills, kept, over = map(float, numbers.groups())
    assert usable == pytest.approx(hbm - reserve_gb * 1e9 / 2**30, abs=0.1)
    assert fills == pytest.approx(usable * (1 - kept / 100), abs=0.1)
    assert over == pytest.approx(needs - fills, abs=0.1)


def test_a_layout_refused_only_for_the_headroom_is_pointed_to_estimate() -> None:
    """DGX Cloud's Pax GPT-3 175B layout (row DPX1) ran, and needs 74.8 of the 75.0 GiB usable:
    a search, which keeps 5% free, refuses it and says it would fit all of the usable memory,
    where ``layout estimate`` judges it; a layout over all of it gets no such pointer."""
    from planner.accuracy.rows import (
        load_rows,
        stated_layout,
        to_model_spec,
        training_file,
        workload_of,
    )

    row = next(r for r in load_rows(training_file()) if r.id == "DPX1")
    model, workload = to_model_spec(row), workload_of(row)
    fix = {**stated_layout(row), "vpp": 1}
    with pytest.raises(InfeasibleError) as caught:
        search(model, load_cluster(row.cluster), workload, fix=fix)
    assert "(it fits all of the usable memory: layout estimate scores a layout that ran)" in str(
        caught.value
    )
    with pytest.raises(InfeasibleError) as over:
        search(load_model("mixtral-8x22b"), load_cluster("mi300xx8"), TrainWorkload(seq_len=4096))
    assert "layout estimate" not in str(over.value)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances())
def test_the_dominances_the_enumeration_uses_hold_on_the_cost_model(
    instance: tuple[ModelSpec, str, TrainWorkload],
) -> None:
    """space.ZERO_STAGES skips a recompute rung once a weaker one fitted at the same ZeRO stage,
    skips ZeRO-2 at a recompute no weaker than the one that fitted at ZeRO-1, and stops growing
    the micro-batch once nothing fits. That is exact only if, for the same layout, a stronger
    recompute is never faster (at any ZeRO stage), ZeRO-2 is never faster than ZeRO-1, and
    memory never shrinks as the micro-batch grows: checked on every recompute x ZeRO variant
    and on the doubled micro-batch of the plans a search returns."""
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
            where = (plan.layout.short(), r, z)
            for r2 in RECOMPUTE_ORDER[RECOMPUTE_ORDER.index(r) + 1 :]:
                assert a.step_time_s <= grid[(r2, z)].step_time_s * (1 + 1e-9), (*where, r2)
            if z == 2 and (r, 1) in grid:  # ZeRO-1 may not be the framework's (FSDP)
                assert grid[(r, 1)].step_time_s <= a.step_time_s * (1 + 1e-9), where
        per_replica = workload.global_batch // plan.layout.dp
        if per_replica % (2 * plan.layout.mbs) == 0:
            bigger = plan.layout.model_copy(update={"mbs": 2 * plan.layout.mbs, "vpp": 1})
            smaller = estimate(model, sub, workload, plan.layout.model_copy(update={"vpp": 1}))
            larger = estimate(model, sub, workload, bigger)
            assert larger.memory.peak_gib >= smaller.memory.peak_gib * (1 - 1e-9)


def test_zero_pins_0_and_2_are_searched() -> None:
    """Issue 17: --fix zero=0 / zero=2 on Llama 3.1 8B, 8 H100 found a layout (it fits with room)."""
    for stage in (0, 2):
        result = search(
            load_model("8B"), load_cluster("hgx_h100x8"), TrainWorkload(), fix={"zero": stage}
        )
        assert result.best.fits and result.best.layout.zero == stage
        assert all(a.layout.zero == stage for a in result.alternatives)


def test_why_not_accounts_for_every_term_and_calls_ties() -> None:
    """Issue 19: a why-not sentence names every breakdown term that differs, signed, and they
    sum to the gap; a gap inside the best plan's band is called a tie, one outside is not."""
    from planner.search.explain import TERM_WORDS, signed_seconds, term_differences, why_not

    result = search(load_model("70B"), load_cluster("hgx_h100x64"), TrainWorkload())
    best = result.best
    for alt in result.alternatives:
        terms = term_differences(alt, best)
        gap = alt.step_time_s - best.step_time_s
        assert sum(d for _, d in terms) == pytest.approx(gap, abs=1e-6)
        for key, delta in terms:
            assert f"{TERM_WORDS.get(key, key)} {signed_seconds(delta)}" in alt.why_not
        inside = (
            best.uncertainty_pct is not None
            and 100 * gap / best.step_time_s <= best.uncertainty_pct
        )
        assert alt.why_not.count("a tie") == int(inside)
    far = best.model_copy(update={"uncertainty_pct": 0.01})
    near = result.alternatives[0]
    assert "a tie" not in why_not(near, far) and "a tie" in why_not(near, best)


def test_nanotron_layouts_are_scored_under_its_own_split() -> None:
    """Nanotron places its pipeline layers itself (planner.search.pipeline.framework_split), so
    the search fits and ranks its layouts under that split. It used to score them under the
    even split and stop with an internal error when the framework's first rank did not fit
    (Llama 3.1 8B on 16 H100 at PP 2: 77.3 GiB of 75 usable)."""
    model, cluster = load_model("8B"), load_cluster("hgx_h100x16")
    workload = resolve_workload({"framework": "nanotron"})
    result = search(model, cluster, workload, fix={"pp": 2})
    for plan in [result.best, *result.alternatives]:
        assert plan.pipeline_split is not None and plan.pipeline_split.method == "framework"
        assert plan.fits and plan_problems(plan, model, cluster, workload) == []


def test_an_explicit_split_recomputes_the_mtp_modules_as_the_rule_does() -> None:
    """Under full recomputation Megatron-LM checkpoints an MTP layer whatever the layer count
    (MultiTokenPredictionLayer._checkpointed_forward), as the even split's rule prices it: the
    even split written out explicitly scores the same (it used not to recompute the MTP
    module, so a Nanotron plan with MTP failed its re-scoring)."""
    from planner.search.evaluate import score
    from planner.specs.layout import Layout
    from planner.specs.pipeline import PipelineSplit

    model, cluster = load_model("8B"), load_cluster("hgx_h100x16")
    workload = TrainWorkload(mtp_num_layers=1, global_batch=64)
    layout = Layout(pp=2, dp=8, recompute="full")
    explicit = PipelineSplit(chunk_layers=(16, 16), recompute_layers=(16, 16))
    rule = score(model, cluster, workload, layout)
    written = score(model, cluster, workload, layout, split=explicit)
    assert written.step_time_s == pytest.approx(rule.step_time_s, rel=1e-12)
    assert written.peak_memory.total == pytest.approx(rule.peak_memory.total, rel=1e-12)


def test_torchtitan_float8_searches_score_each_zero_stage_with_its_own_casts() -> None:
    """torchtitan's float8 recipe gathers FP8 parameters under FSDP (ZeRO >= 1), which drops
    torchao's per-call weight casts, so a layout's micro-batch times depend on its ZeRO stage.
    The search reused ZeRO-0's times for ZeRO-3 and stopped with an internal error on the
    canonical torchtitan run (Llama 3.1 8B, float8, 8 H100: 'failed validation: re-scored step
    time ... differs')."""
    model, cluster = load_model("8B"), load_cluster("hgx_h100x8")
    workload = resolve_workload({"framework": "torchtitan", "precision": "fp8"})
    result = search(model, cluster, workload, config=SORTED)
    brute = search(model, cluster, workload, config=EXHAUSTIVE)
    assert result.best.step_time_s == pytest.approx(brute.best.step_time_s, abs=2e-6)
    for plan in [result.best, *result.alternatives]:
        assert plan_problems(plan, model, cluster, workload) == []


def test_an_odd_rack_count_weighs_the_power_of_two_below() -> None:
    """144 GB200s (two NVL72 racks, 16 x 9 GPUs) with a power-of-two batch force nine pipeline
    stages onto every layout of all 144; the time objective also weighs 128 (the ladder's count
    below), which is faster for gpt-oss-20b (1.13 s against 1.84 s at PP9)."""
    cluster = load_cluster("gb200_nvl72x144")
    assert 128 in gpu_counts(cluster, None, fewest=False)
    assert gpu_counts(load_cluster("hgx_h100x96"), None, fewest=False) == [96]
    result = search(load_model("gpt-oss-20b"), cluster, TrainWorkload())
    assert result.best.num_gpus == 128 and result.best.layout.pp == 1
