"""The split sweep (docs/search.md, "Split layouts the even split ranks low"): the bounds it prunes
on hold under every split (brute force over small partition problems, and the cost model's own
score of every split it keeps), and a search with it returns what splitting every layout by
brute force returns."""

from __future__ import annotations

import json
import random

import pytest

from planner.catalog import load_cluster, load_model
from planner.search import engine
from planner.search.evaluate import fits, score
from planner.search.exhaustive import brute_force_stages
from planner.search.solve.stage_data import (
    StageProblem,
    any_split_time_bound,
    rank_load_lower_bound,
)
from planner.search.solve.stages import dp_sync_step_floor, split_step_lower_bound
from planner.search.space import (
    AnySplitStage,
    StageTimes,
    build_candidates,
    pipeline_steps,
)
from planner.specs.layout import Layout
from planner.specs.pipeline import PipelineSplit
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import TrainWorkload
from tests.test_cli import run_main
from tests.test_stages import MIXED_KINDS, _random_problem

ENOUGH = SolverConfig(split_sweep_budget=10**6)
"""A budget no instance here exhausts: the sweep runs to its end."""


@pytest.mark.parametrize("seed", range(120))
def test_the_any_split_bound_never_exceeds_the_best_split(seed: int) -> None:
    """Whatever the split, the recomputation and the memory, no rank is faster than the bound:
    brute force over every split of small random problems (memory binding in most)."""
    problem = _random_problem(seed)
    best, _ = brute_force_stages(problem)
    free, _ = brute_force_stages(problem.model_copy(update={"capacity": 10**12}))
    assert free is not None
    assert any_split_time_bound(problem) <= free
    if best is not None:
        assert any_split_time_bound(problem) <= best


def test_one_kind_of_layer_gives_the_count_programmes_bound() -> None:
    """With one kind of layer the bisection equals :func:`rank_load_lower_bound`'s exact
    programme over layer counts (memory left out, and chunks that may be empty, which the
    bisection does not know of), MTP modules and per-rank extras included; with chunks of at
    least one layer the programme can only be tighter."""
    rng = random.Random(7)
    for _ in range(400):
        pp, n, t = rng.randint(1, 6), rng.randint(6, 14), rng.randint(1, 9)
        extras = tuple(rng.choice([0, 0, rng.randint(0, 20)]) for _ in range(pp))
        mtp = rng.choice([0, 1])
        problem = StageProblem.model_construct(
            pp=pp, vpp=1, layer_time=(t,) * n, recompute_time=(0,) * n, layer_state=(0,) * n,
            layer_activation=(0,) * n, recompute_saving=(0,) * n, layer_transient=(),
            rank_time=extras, rank_transient=(), rank_state=(0,) * pp, rank_memory=(0,) * pp,
            in_flight=(1,) * pp, in_flight_scale=1, capacity=10**12, num_mtp=mtp,
            mtp_time=rng.randint(0, 25), mtp_state=(0, 0), mtp_transient=(0, 0),
            mtp_activation=0, mtp_memory=0, working=0, recompute="none", fixed_recompute=None,
            steps=1.0, even_layers=(1,) * pp, min_chunk_layers=0,
        )  # fmt: skip
        assert any_split_time_bound(problem) == rank_load_lower_bound(problem)
        held = problem.model_copy(update={"min_chunk_layers": 1})
        assert any_split_time_bound(held) <= (rank_load_lower_bound(held) or 0)


def test_the_worked_bounds() -> None:
    """By hand: layers of 4, 10, 10, 10 and 10 over two ranks, the second adding 3 for the
    output layer and loss. The mean is 23.5; some rank holds two of the 10s (20, or 23 on the
    second), so 24; with five layers of 10, three sit on one rank: 30 (or 23 with the loss)."""
    base = StageProblem.model_construct(
        pp=2, vpp=1, layer_time=(4, 10, 10, 10, 10), rank_time=(0, 3), num_mtp=0, mtp_time=0
    )
    assert any_split_time_bound(base) == 24
    assert any_split_time_bound(base.model_copy(update={"layer_time": (10,) * 5})) == 30


CASES = [
    ("gpt-oss-20b", "hgx_h100x8", MIXED_KINDS, {"pp": 2, "vpp": 1}),
    ("llama3.1-8b", "hgx_h100x8", TrainWorkload(seq_len=4096, global_batch=64), {"tp": 2}),
]


@pytest.mark.parametrize(("name", "cluster_name", "workload", "fix"), CASES)
def test_the_bounds_hold_under_the_cost_model(
    name: str, cluster_name: str, workload: TrainWorkload, fix: dict[str, object]
) -> None:
    """For every pipelined layout that fits: the sweep's cheap bound (the one branch and bound
    prunes on) <= its tight bound's ingredients <= the step time the cost model gives the split
    the search keeps for it (or its even split)."""
    model, cluster = load_model(name), load_cluster(cluster_name)
    workload = engine.resolve_workload(workload, cluster.accelerator.vendor)
    times = StageTimes(model, cluster, workload, any_split=True)
    rows = build_candidates(model, cluster, workload, engine.SpaceRequest(fix=fix)).feasible
    piped = [r for r in rows if r.layout.pp > 1]
    assert piped
    for row in piped:
        work = engine.candidate_workload(row, workload)
        plan = engine._split_plan(model, row, workload, ENOUGH, check=False)
        steps, bare = pipeline_steps(workload, row.layout), AnySplitStage(times, row.layout).value
        cheap = steps * bare + dp_sync_step_floor(model, cluster, work, row.layout, bare, steps)
        tight, _ = split_step_lower_bound(model, cluster, work, row.layout, config=ENOUGH)
        assert cheap <= plan.step_time_s, row.layout.short()
        assert tight is None or tight <= plan.step_time_s, row.layout.short()


@pytest.mark.parametrize(("name", "cluster_name", "workload", "fix"), CASES)
def test_the_search_returns_what_splitting_every_layout_returns(
    name: str, cluster_name: str, workload: TrainWorkload, fix: dict[str, object]
) -> None:
    """The brute-force twin: split every layout that fits (exhaustive enumeration), keep each
    structure's best, rank them. The search (branch and bound, the ranked splits, the split
    sweep) returns the same best plan, to the sweep's tolerance, and runners-up of other
    structures that are real plans, each no faster than the brute force's of its rank (the sweep
    proves the best; a runner-up is the best of what was split)."""
    model, cluster = load_model(name), load_cluster(cluster_name)
    resolved = engine.resolve_workload(workload, cluster.accelerator.vendor)
    rows = build_candidates(model, cluster, resolved, engine.SpaceRequest(fix=fix)).feasible
    best: dict[tuple[object, ...], float] = {}
    for row in rows:
        step = engine._split_plan(model, row, resolved, ENOUGH, check=False).step_time_s
        best[row.structure] = min(step, best.get(row.structure, float("inf")))
    brute = sorted(best.values())[: ENOUGH.top]
    result = engine.search(model, cluster, workload, fix=fix, config=ENOUGH)
    found = [p.step_time_s for p in [result.best, *result.alternatives]]
    assert result.solver.status == "OPTIMAL"
    assert "the best plan is the cost model's best" in result.solver.method
    assert found[0] == pytest.approx(brute[0], rel=engine.SWEEP_TOLERANCE)
    assert len(found) == len(brute)
    for ours, theirs in zip(found, brute, strict=True):
        assert ours >= theirs * (1 - engine.SWEEP_TOLERANCE)


def _brute_force_target(
    model_name: str,
    cluster_name: str,
    workload: TrainWorkload,
    fix: dict[str, object],
    target: float,
) -> tuple[int, float] | None:
    """The fewest GPUs on which some layout meets ``target`` once split, and the fastest split
    step there, by splitting every layout that fits on every count the search weighs."""
    model, cluster = load_model(model_name), load_cluster(cluster_name)
    resolved = engine.resolve_workload(workload, cluster.accelerator.vendor)
    for n in engine.gpu_counts(cluster, None, fewest=True):
        part = engine.sub_cluster(cluster, n)
        rows = build_candidates(model, part, resolved, engine.SpaceRequest(fix=fix)).feasible
        steps = [engine._split_plan(model, r, resolved, ENOUGH, check=False).step_time_s
                 for r in rows]  # fmt: skip
        meeting = [t for t in steps if t <= target]
        if meeting:
            return n, min(meeting)
    return None


def test_a_target_is_met_by_a_split_the_even_split_misses() -> None:
    """gpt-oss-20b at PP2 with full recomputation on 16 H100s, asked for 3.6 s a step: no layout
    on 8 GPUs meets it evenly split (3.97 s at best), the best one split takes 3.20 s. The
    search returns that plan on 8 GPUs, as splitting every layout on every count does (the
    brute-force twin); the ranking alone, which sees only layouts whose even split meets the
    target, needs 16."""
    fix = {"pp": 2, "vpp": 1, "recompute": "full"}
    model, cluster = load_model("gpt-oss-20b"), load_cluster("hgx_h100x16")
    target = 3.6
    brute = _brute_force_target("gpt-oss-20b", "hgx_h100x16", MIXED_KINDS, fix, target)
    assert brute is not None and brute[0] == 8
    found = engine.search(model, cluster, MIXED_KINDS, fix=fix,
                          config=ENOUGH.model_copy(update={"target_step_time_s": target}))  # fmt: skip
    assert found.solver.status == "OPTIMAL" and found.solver.split_sweep is not None
    assert found.best.num_gpus == brute[0]
    assert found.best.step_time_s == pytest.approx(brute[1], rel=engine.SWEEP_TOLERANCE)
    assert found.best.step_time_s <= target < found.best.pipeline_split.even_step_time_s
    ranked = engine.search(model, cluster, MIXED_KINDS, fix=fix, config=SolverConfig(
        target_step_time_s=target, split_sweep_budget=0))  # fmt: skip
    assert ranked.best.num_gpus == 16


@pytest.mark.parametrize("target", [2.0, 3.3, 4.5, 9.0])
def test_the_target_search_returns_what_splitting_every_layout_returns(target: float) -> None:
    """The brute-force twin under a step-time target, for targets that land on each GPU count:
    the same GPU count, and the same step time to the sweep's tolerance."""
    fix = {"pp": 2, "vpp": 1, "recompute": "full"}
    brute = _brute_force_target("gpt-oss-20b", "hgx_h100x16", MIXED_KINDS, fix, target)
    assert brute is not None
    config = ENOUGH.model_copy(update={"target_step_time_s": target})
    found = engine.search(load_model("gpt-oss-20b"), load_cluster("hgx_h100x16"), MIXED_KINDS,
                          fix=fix, config=config)  # fmt: skip
    assert found.solver.status == "OPTIMAL"
    assert found.best.num_gpus == brute[0]
    assert found.best.step_time_s == pytest.approx(brute[1], rel=engine.SWEEP_TOLERANCE)


def test_a_target_sweep_out_of_budget_names_the_count() -> None:
    """A budget too small to settle the counts below the best plan's: status FEASIBLE, the JSON
    names the count it stopped on, and the terminal line says a split there might meet the
    target."""
    argv = ["search", "--model", "gpt-oss-20b", "--cluster", "hgx_h100x16", "--fix", "pp=2",
            "--fix", "vpp=1", "--fix", "recompute=full", "--global-batch", "64", "--seq-len",
            "4096", "--target-step-time", "3.6", "--split-sweep", "20"]  # fmt: skip
    code, out, err = run_main([*argv, "--json"])
    assert code == 0, err
    result = json.loads(out)
    sweep = result["solver"]["split_sweep"]
    assert result["solver"]["status"] == "FEASIBLE" and not sweep["finished"]
    assert sweep["least_bound_gpus"] == 8 and result["best"]["num_gpus"] == 16
    assert result["solver"]["gpu_counts"] == [8, 16]  # the counts weighed, in the JSON
    assert 0 <= sweep["least_bound_s"] <= 3.6
    code, out, err = run_main(argv)
    assert code == 0, err
    assert "on 8 GPUs a split might still meet the target" in " ".join(out.split())
    code, out, err = run_main(argv[:-2])  # the default budget settles it: 8 GPUs
    assert code == 0, err
    assert "(8 GPUs)" in out
    assert "weighed 8 and 16 GPUs" in out
    assert "none left that could meet the target on fewer GPUs" in " ".join(out.split())


def test_the_sweep_finds_what_the_even_split_ranks_low() -> None:
    """gpt-oss-20b at PP2 with full recomputation: the five best by the even split, split, are
    not the five best once every layout is split; the sweep lifts better ones into the
    runners-up, and never returns a slower plan at any rank."""
    model, cluster = load_model("gpt-oss-20b"), load_cluster("hgx_h100x8")
    fix = {"pp": 2, "vpp": 1, "recompute": "full"}
    off = engine.search(model, cluster, MIXED_KINDS, fix=fix,
                        config=SolverConfig(split_sweep_budget=0))  # fmt: skip
    on = engine.search(model, cluster, MIXED_KINDS, fix=fix, config=ENOUGH)
    steps_off = [p.step_time_s for p in [off.best, *off.alternatives]]
    steps_on = [p.step_time_s for p in [on.best, *on.alternatives]]
    assert all(a <= b * (1 + 1e-9) for a, b in zip(steps_on, steps_off, strict=True))
    # TP1 PP2 DP2 CP2 EP4 mbs4, ranked below the five by its even split, is third once split:
    # 3.26 s where the ranked splits alone give 3.72 s for the third
    lifted = {p.layout for p in on.alternatives} - {p.layout for p in off.alternatives}
    first = next(i for i, p in enumerate(on.alternatives, start=1) if p.layout in lifted)
    assert first == 2 and steps_on[first] < steps_off[first] * (1 - 0.005)
    assert "split sweep" in on.solver.method and "split sweep" not in off.solver.method


def test_a_spent_budget_says_what_is_not_proven() -> None:
    """With too small a budget the search says so: status FEASIBLE, the least bound left as the
    best bound (below the best plan), and the method says the best plan is not proven."""
    model, cluster = load_model("llama3.1-70b"), load_cluster("hgx_h100x64")
    result = engine.search(
        model, cluster, TrainWorkload(), config=SolverConfig(split_sweep_budget=3)
    )
    assert result.solver.status == "FEASIBLE"
    assert 0 <= result.solver.best_bound < result.best.step_time_s
    assert "not proven" in result.solver.method


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("-1", "must be a whole number >= 0"),
        ("1e3", "must be a whole number >= 0"),
        ("\u00b2", "must be a whole number >= 0"),  # a digit to str.isdigit, not to int()
        ("10000001", "exceeds the 10,000,000-unit limit"),
        ("9" * 5000, "exceeds the 10,000,000-unit limit"),  # past int()'s 4,300-digit limit
    ],
)
def test_a_bad_split_sweep_budget_is_one_line(value: str, words: str) -> None:
    code, out, err = run_main(["search", "--model", "8B", "--cluster", "hgx_h100x8",
                               "--split-sweep", value])  # fmt: skip
    assert code == 2 and not out and words in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2  # argparse's usage line and the error


def test_the_json_says_whether_the_sweep_finished() -> None:
    """``solver.split_sweep`` carries the figures: finished with no bound left, or not."""
    code, out, err = run_main(["search", "--model", "8B", "--cluster", "hgx_h100x16", "--json"])
    assert code == 0, err
    sweep = json.loads(out)["solver"]["split_sweep"]
    assert sweep["finished"] and sweep["least_bound_s"] is None and sweep["budget"] == 3000
    code, out, err = run_main(["search", "--model", "70B", "--cluster", "hgx_h100x64", "--json",
                               "--split-sweep", "3"])  # fmt: skip
    solver = json.loads(out)["solver"]
    assert code == 0 and solver["status"] == "FEASIBLE" and not solver["split_sweep"]["finished"]
    assert solver["best_bound"] == solver["split_sweep"]["least_bound_s"]


@pytest.mark.parametrize(
    ("name", "cluster_name"), [("deepseek-v3", "hgx_h800x256"), ("gpt-oss-120b", "hgx_h100x64")]
)
def test_the_time_tables_alone_give_the_same_bound(name: str, cluster_name: str) -> None:
    """The sweep bounds structures on :func:`stage_time_tables` (no memory tables): the bound is
    the one the full partition tables give, on every pipelined structure of a sample."""
    from planner.search.solve.stage_data import build_stage_problem, stage_time_tables
    from planner.search.space import _bare_layout, enumerate_structures

    model, cluster = load_model(name), load_cluster(cluster_name)
    workload = engine.resolve_workload(
        TrainWorkload(seq_len=4096, global_batch=1024, mtp_num_layers=1 if name == "deepseek-v3"
                      else 0), cluster.accelerator.vendor)  # fmt: skip
    structures = enumerate_structures(
        model, cluster, workload, {}, precisions=[workload.precision], bounds={}
    )
    piped = [f for f in structures if int(f["pp"]) > 1][::7]  # type: ignore[call-overload]
    assert len(piped) > 10
    for fields in piped:
        layout = _bare_layout(fields, 1)
        full = build_stage_problem(model, cluster, workload, layout)
        assert any_split_time_bound(stage_time_tables(model, cluster, workload, layout)) == (
            any_split_time_bound(full)
        )


def _random_chunk_sizes(rng: random.Random, chunks: int, layers: int) -> tuple[int, ...]:
    """``layers`` cut at random into ``chunks`` contiguous chunks of at least one layer."""
    cuts = sorted(rng.sample(range(1, layers), chunks - 1))
    return tuple(b - a for a, b in zip([0, *cuts], [*cuts, layers], strict=True))


HEAVY_DP = [  # MoE layouts with few micro-batches a step: little compute hides the DP sync
    ("qwen3-30b-a3b", "hgx_h100x32", {"pp": 4, "dp": 8, "ep": 2}, 32),
    ("qwen3-30b-a3b", "hgx_h100x32", {"pp": 2, "vpp": 2, "dp": 16, "ep": 4}, 32),
    ("gpt-oss-20b", "hgx_h100x16", {"pp": 4, "dp": 4, "ep": 4, "zero": 0}, 16),
    ("gpt-oss-20b", "hgx_h100x16", {"pp": 2, "vpp": 3, "dp": 8, "ep": 8}, 32),
]


@pytest.mark.parametrize(("name", "cluster_name", "fields", "batch"), HEAVY_DP)
def test_the_tight_bound_holds_under_random_splits(
    name: str, cluster_name: str, fields: dict[str, int], batch: int
) -> None:
    """The tight bound, its DP floor (:func:`~planner.search.solve.stages.dp_sync_step_floor`)
    included, never exceeds the cost model's step time of any split that fits: 60 random
    splits of each layout, each scored by the cost model; and the floor never exceeds the
    split's own exposed DP time and optimizer step (it adds something: positive)."""
    model, cluster = load_model(name), load_cluster(cluster_name)
    workload = engine.resolve_workload(
        TrainWorkload(seq_len=4096, global_batch=batch),
        cluster.accelerator.vendor,
    )
    layout = Layout(**fields)
    tight, _ = split_step_lower_bound(model, cluster, workload, layout, config=ENOUGH)
    assert tight is not None
    steps = pipeline_steps(workload, layout)
    rng = random.Random(fields["pp"] * 31 + fields["dp"])
    checked = 0
    for _ in range(60):
        sizes = _random_chunk_sizes(rng, layout.pp * layout.vpp, model.num_layers)
        cost = score(model, cluster, workload, layout, split=PipelineSplit(chunk_layers=sizes))
        if not fits(cost, cluster, ENOUGH.memory_headroom):
            continue
        checked += 1
        assert tight <= cost.step_time_s, sizes
        slowest = max(t.total for t in cost.stage_times)
        floor = dp_sync_step_floor(model, cluster, workload, layout, slowest, steps)
        sync = cost.breakdown_s["dp_comm"] + cost.breakdown_s["optimizer"]
        assert 0 < floor <= sync * (1 + 1e-9), sizes
    assert checked >= 10


BLOCK_RECOMPUTE = [  # full recomputation by the block method: one count N for every chunk
    ("gpt-oss-20b", "hgx_h100x16", {"pp": 2, "vpp": 3, "dp": 8, "ep": 8}, 32),
    ("qwen3-30b-a3b", "hgx_h100x32", {"pp": 4, "dp": 8, "ep": 2}, 32),
]


@pytest.mark.parametrize(("name", "cluster_name", "fields", "batch"), BLOCK_RECOMPUTE)
def test_the_shared_count_bound_holds_under_random_block_splits(
    name: str, cluster_name: str, fields: dict[str, int], batch: int
) -> None:
    """The tight bound that keeps the block method's one recompute count
    (:func:`~planner.search.solve.stage_data.rank_load_lower_bound` with ``share_count``) never
    exceeds the cost model's step time of a split that fits: random chunk sizes, each with a
    random N (min(N, n_c) of each chunk recomputed), scored by the cost model; and it is at
    least the bound that leaves each rank's recomputation free."""
    model, cluster = load_model(name), load_cluster(cluster_name)
    workload = engine.resolve_workload(
        TrainWorkload(seq_len=4096, global_batch=batch),
        cluster.accelerator.vendor,
    )
    layout = Layout(**fields, recompute="full")
    shared, _ = split_step_lower_bound(model, cluster, workload, layout, config=ENOUGH)
    free, _ = split_step_lower_bound(model, cluster, workload, layout, config=ENOUGH,
                                     share_count=False)  # fmt: skip
    assert shared is not None and free is not None and free <= shared
    rng = random.Random(fields["pp"] * 17 + fields["dp"])
    checked = 0
    for _ in range(80):
        sizes = _random_chunk_sizes(rng, layout.pp * layout.vpp, model.num_layers)
        count = rng.randint(0, max(sizes))
        split = PipelineSplit(chunk_layers=sizes, recompute_layers=tuple(min(count, s)
                                                                         for s in sizes))  # fmt: skip
        cost = score(model, cluster, workload, layout, split=split)
        if not fits(cost, cluster, ENOUGH.memory_headroom):
            continue
        checked += 1
        assert shared <= cost.step_time_s, (sizes, count)
    assert checked >= 10


def test_a_split_the_time_limit_stopped_is_not_proven() -> None:
    """gpt-oss-20b at PP2 VPP2 with full recomputation (two kinds of layer, interleaved: CP-SAT
    splits it) with a 1 ms limit per split: every CP-SAT split stops at its start, and the sweep
    says the best plan is not proven (status FEASIBLE, the unproven splits counted, their least
    bound below the best plan), rather than calling a stopped split settled."""
    model, cluster = load_model("gpt-oss-20b"), load_cluster("hgx_h100x8")
    config = SolverConfig(split_sweep_budget=10**6, stage_time_limit_s=0.001)
    fix = {"pp": 2, "vpp": 2, "recompute": "full"}
    result = engine.search(model, cluster, MIXED_KINDS, fix=fix, config=config)
    sweep = result.solver.split_sweep
    assert sweep is not None and sweep.unproven > 0 and not sweep.finished
    solves = result.solver.subproblems
    assert any(s.solved_by == "cp-sat" and s.status == "FEASIBLE" for s in solves)
    assert result.solver.status == "FEASIBLE"
    assert 0 < result.solver.best_bound < result.best.step_time_s
    assert "CP-SAT's time limit" in result.solver.method
    assert "the best plan is not proven" in result.solver.method


def test_a_targets_counts_add_up() -> None:
    """Under a step-time target the layouts its bound rules out are counted in the total as in
    the rejections: the feasible and the rejected add up to the layouts (they did not: '379
    layouts, 13 feasible, rejected: 260 target, ...' summed to 638)."""
    from planner import api

    result = api.search(model="8B", cluster="hgx_h100x64", config={"target_step_time_s": 10.0})
    assert result.num_feasible + sum(result.rejections.values()) == result.num_candidates


def test_one_search_estimates_each_layouts_memory_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The split sweep's second pass re-visits the pipelined layouts the first pass scored: their
    memory (which no split, GPU count or ZeRO stage changes) is estimated once per search, so no
    layout's memory profiles are computed twice, and the plans are those of a search that
    computes every estimate afresh."""
    from planner.search import space

    model, cluster = load_model("gpt-oss-20b"), load_cluster("hgx_h100x8")
    fix = {"pp": 2, "vpp": 1, "recompute": "full"}
    seen: list[tuple[object, ...]] = []
    computed = space.memory_profiles

    def counted(model, workload, layout, **kwargs):  # type: ignore[no-untyped-def]
        seen.append((layout.tp, layout.cp, layout.pp, layout.dp, layout.ep, layout.etp,
                     layout.vpp, layout.recompute, layout.precision))  # fmt: skip
        return computed(model, workload, layout, **kwargs)

    monkeypatch.setattr(space, "memory_profiles", counted)
    result = engine.search(model, cluster, MIXED_KINDS, fix=fix, config=ENOUGH)
    assert result.solver.split_sweep is not None and result.solver.split_sweep.bounded > 0
    assert seen and len(seen) == len(set(seen))
    monkeypatch.setattr(engine, "memory_estimates", lambda *a, **k: None)  # none shared
    seen.clear()
    fresh = engine.search(model, cluster, MIXED_KINDS, fix=fix, config=ENOUGH)
    assert len(seen) > len(set(seen))  # without the table the second pass repeats them
    assert [p.layout for p in [fresh.best, *fresh.alternatives]] == [
        p.layout for p in [result.best, *result.alternatives]
    ]


def test_bounding_the_rows_leaves_half_the_budget_for_splitting() -> None:
    """The split sweep's first pass (every pipelined structure bounded under any split) may spend
    only engine.SWEEP_ROWS_SHARE of the budget: it stops there, says so (a least bound for the
    structures it did not reach), and the rest is left to tighten bounds and split."""
    model, cluster = load_model("gpt-oss-20b"), load_cluster("hgx_h100x8")
    resolved = engine.resolve_workload(MIXED_KINDS, cluster.accelerator.vendor)
    first = engine.search(model, cluster, MIXED_KINDS, config=SolverConfig(split_sweep_budget=0))
    plans = [first.best, *first.alternatives]
    budget = engine.SweepBudget(20.0)
    _, stopped = engine._sweep_rows(model, cluster, resolved, engine.SpaceRequest(), plans,
                                    ENOUGH, [8], known=[], budget=budget)  # fmt: skip
    assert stopped is not None  # the share ran out before every structure was bounded
    assert 20.0 * (1 - engine.SWEEP_ROWS_SHARE) - 1.0 <= budget.left < 20.0
    roomy = engine.SweepBudget(1e6)
    _, stopped = engine._sweep_rows(model, cluster, resolved, engine.SpaceRequest(), plans,
                                    ENOUGH, [8], known=[], budget=roomy)  # fmt: skip
    assert stopped is None and 1e6 - roomy.left < 1e6 * engine.SWEEP_ROWS_SHARE
