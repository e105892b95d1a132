"""The pipeline-stage partition (issue 19, item 2): CP-SAT's optimum equals a brute-force
enumeration of the same integer data on small instances; the cost model scores an explicit split
with the same formulas as the even one; DeepSeek-V3 and Llama 3.1 405B gain over the even split."""

from __future__ import annotations

import random

import pytest

from planner.catalog import load_cluster, load_model
from planner.cost.memory import stage_layers
from planner.search import engine
from planner.search.evaluate import score
from planner.search.exhaustive import brute_force_stages, every_assignment
from planner.search.pipeline import plan_split
from planner.search.solve.branch import branch_and_bound_partition
from planner.search.solve.stage_data import (
    Assignment,
    StageProblem,
    build_stage_problem,
    chunk_times,
    contiguous_lower_bound,
    contiguous_partition,
    evaluate_assignment,
    even_assignment,
    least_recompute_assignment,
    level_chunks,
    lower_bound,
    rank_load_lower_bound,
    rank_step_memory,
    uniform_partition,
)
from planner.search.solve.stages import StageSolver, optimise_pipeline
from planner.search.validate import plan_problems
from planner.specs.layout import Layout
from planner.specs.model import ModelSpec, MoESpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import TrainWorkload

CONFIG = SolverConfig()


def _random_problem(seed: int) -> StageProblem:
    """A small partition problem with random tables: 3-7 layers in 1-2 runs of kinds, 2-3 ranks,
    vpp 1-2, optional MTP, recompute none / block / per-stage, and a memory capacity between
    what the lightest and the heaviest assignments need (so memory binds)."""
    rng = random.Random(seed)
    pp, vpp = rng.choice([2, 3]), rng.choice([1, 1, 2])
    num_layers = rng.randint(pp * vpp, 7)
    first = rng.randint(0, num_layers)
    kinds = [(*(rng.randint(1, 30) for _ in range(5)), rng.randint(0, 60)) for _ in range(2)]
    rows = [kinds[0] if i < first else kinds[1] for i in range(num_layers)]
    recompute = rng.choice(["none", "block", "per_stage"])
    mtp = rng.choice([0, 0, 1])
    scale = pp * vpp
    in_flight = [scale * (pp - r) + (scale // 2 if vpp > 1 and r == 0 else 0) for r in range(pp)]
    problem = StageProblem(
        pp=pp,
        vpp=vpp,
        layer_time=tuple(r[0] for r in rows),
        recompute_time=tuple(r[1] if recompute != "none" else 0 for r in rows),
        layer_state=tuple(r[2] for r in rows),
        layer_activation=tuple(r[3] + r[4] for r in rows),
        recompute_saving=tuple(r[4] if recompute != "none" else 0 for r in rows),
        in_flight=tuple(in_flight),
        in_flight_scale=scale,
        rank_time=tuple(rng.randint(0, 40) if r == pp - 1 else 0 for r in range(pp)),
        rank_state=tuple(rng.randint(0, 20) for _ in range(pp)),
        rank_memory=tuple(rng.randint(0, 10) if r == pp - 1 else 0 for r in range(pp)),
        num_mtp=mtp,
        mtp_time=rng.randint(5, 40) * mtp,
        mtp_state=(rng.randint(1, 20) * mtp, rng.randint(20, 40) * mtp),
        layer_transient=tuple(r[5] for r in rows),
        rank_transient=tuple(rng.randint(0, 30) for _ in range(pp)),
        mtp_transient=(rng.randint(0, 20) * mtp, rng.randint(0, 20) * mtp),
        mtp_activation=rng.randint(1, 20) * mtp,
        mtp_memory=rng.randint(1, 10) * mtp,
        working=(working := rng.randint(0, 10) if recompute != "none" else 0),
        # the last rank's working set less what it shares with the logits there
        working_last=rng.choice([None, rng.randint(0, working)]),
        recompute=recompute,
        fixed_recompute=rng.choice([None, None, 1]) if recompute == "block" else None,
        capacity=10**9,
        steps=4.0,
        even_layers=tuple(len(stage_layers_of(num_layers, scale, c)) for c in range(scale)),
    )
    loads = [max(mem for _, mem in _loads(problem, a)) for a in _samples(problem, rng)]
    capacity = rng.randint(int(0.8 * min(loads)), max(loads)) // scale
    steps = [max(rank_step_memory(problem, a)) for a in _samples(problem, rng)]
    capacity = min(capacity, rng.randint(int(0.8 * min(steps)), 2 * max(steps)))
    return problem.model_copy(update={"capacity": capacity})


def stage_layers_of(num_layers: int, chunks: int, chunk: int) -> range:
    model = ModelSpec(name="x", source="t", hidden_size=64, num_layers=num_layers,
                      num_attention_heads=1, num_kv_heads=1, head_dim=64, ffn_hidden_size=64,
                      ffn_activation="gelu", vocab_size=64, max_context=64)  # fmt: skip
    return stage_layers(model, chunks, chunk)


def _samples(problem: StageProblem, rng: random.Random) -> list[Assignment]:
    even = even_assignment(problem)
    return [even, even.model_copy(update={"recompute_layers": (0,) * problem.num_chunks})]


def _loads(problem: StageProblem, assignment: Assignment) -> list[tuple[int, int]]:
    from planner.search.solve.stage_data import rank_loads

    return rank_loads(problem, assignment)


@pytest.mark.parametrize("seed", range(40))
def test_cpsat_partition_equals_brute_force_on_random_tables(seed: int) -> None:
    problem = _random_problem(seed)
    if seed % 4 == 3:  # empty chunks allowed, or two layers in every chunk but the last
        least = 0 if seed % 8 == 3 else 2
        if least * (problem.num_chunks - 1) <= problem.num_layers:
            problem = problem.model_copy(update={"min_chunk_layers": least})
    brute, _ = brute_force_stages(problem)
    solution = StageSolver(problem, CONFIG).solve()
    if brute is None:
        assert solution.status == "INFEASIBLE"
        return
    assert solution.status == "OPTIMAL"
    assert solution.objective == brute
    assert evaluate_assignment(problem, solution.assignment) == brute  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(40))
def test_the_lower_bound_never_passes_the_brute_force_optimum(seed: int) -> None:
    """The cut the solver gets, and the proof that skips a solve, is a true lower bound: with
    memory binding, recomputation and MTP on random tables it stays at or below the optimum."""
    problem = _random_problem(seed)
    brute, _ = brute_force_stages(problem)
    bound = lower_bound(problem)
    if brute is not None and bound is not None:
        assert bound <= brute


@pytest.mark.parametrize("seed", range(40))
def test_the_contiguous_bound_is_the_optimum_when_nothing_else_binds(seed: int) -> None:
    """Without interleaving, recomputation, MTP or a memory limit the min-max recurrence is the
    optimum itself, equal to the brute-force enumeration's (rank times random on every rank)."""
    rng = random.Random(seed)
    problem = _random_problem(seed)
    pp, num_layers = problem.pp, problem.num_layers
    free = problem.model_copy(
        update={
            "vpp": 1,
            "recompute": "none",
            "recompute_time": (0,) * num_layers,
            "recompute_saving": (0,) * num_layers,
            "num_mtp": 0,
            "mtp_time": 0,
            "fixed_recompute": None,
            "working": 0,
            "rank_time": tuple(rng.randint(0, 40) for _ in range(pp)),
            "in_flight": tuple(pp * (pp - r) for r in range(pp)),
            "in_flight_scale": pp,
            "capacity": 10**12,
            "even_layers": tuple(len(stage_layers_of(num_layers, pp, c)) for c in range(pp)),
        }
    )
    brute, _ = brute_force_stages(free)
    assert brute is not None
    assert contiguous_lower_bound(free) == brute


@pytest.mark.parametrize("seed", range(60))
def test_the_recurrence_finds_a_fitting_optimum_whenever_one_recomputes_nothing(seed: int) -> None:
    """Without interleaving, memory binding, MTP and recomputation allowed: the recurrence's
    answer (:func:`_recurrence_solution`), when it gives one, is the brute-force optimum; and
    whenever some split that recomputes nothing fits at the least time any split could reach,
    it gives one (it takes the least memory of the time-optimal splits), as it does whenever
    any split fits and nothing may recompute."""
    import itertools

    from planner.search.solve.stages import _recurrence_solution

    base = _random_problem(seed)
    n, pp = base.num_layers, base.pp
    problem = base.model_copy(update={
        "vpp": 1,
        "in_flight": tuple(pp * (pp - r) for r in range(pp)),
        "in_flight_scale": pp,
        "even_layers": tuple(len(stage_layers_of(n, pp, c)) for c in range(pp)),
        "capacity": base.capacity * (1 + seed % 3),  # binding, looser, loose
    })  # fmt: skip
    brute, _ = brute_force_stages(problem)
    solution = _recurrence_solution(problem)
    if solution is not None:
        assert solution.status == "OPTIMAL" and solution.objective == brute
        assert evaluate_assignment(problem, solution.assignment) == brute  # type: ignore[arg-type]
    bound = contiguous_lower_bound(problem)
    fitting = [
        value
        for cuts in itertools.combinations_with_replacement(range(n + 1), pp - 1)
        for layers in [tuple(b - a for a, b in zip((0, *cuts), (*cuts, n), strict=True))]
        for value in [evaluate_assignment(
            problem, Assignment(chunk_layers=layers, recompute_layers=(0,) * pp, mtp_chunk=pp - 1)
        )]
        if value is not None
    ]  # fmt: skip
    proven = bound in fitting or (problem.recompute == "none" and bool(fitting))
    assert (solution is not None) == proven


def test_the_recurrence_takes_the_time_optimal_split_that_fits() -> None:
    """Four equal layers on two ranks, the last with the loss: 2+2 and 3+1 both take 30, and
    the last rank's logits leave room for one layer's activations only. The even 2+2 does not
    fit, so the recurrence keeps the other time-optimal split, 3+1, by its memory pass."""
    from planner.search.solve.stages import _recurrence_solution

    problem = StageProblem.model_construct(
        pp=2, vpp=1, layer_time=(10,) * 4, recompute_time=(0,) * 4, layer_state=(0,) * 4,
        layer_activation=(1,) * 4, recompute_saving=(0,) * 4, in_flight=(4, 2),
        in_flight_scale=2, rank_time=(0, 10), rank_state=(0, 0), rank_memory=(0, 5),
        num_mtp=0, mtp_time=0, mtp_state=(0, 0), mtp_activation=0, mtp_memory=0, working=0,
        recompute="none", fixed_recompute=None, capacity=6, steps=4.0, min_chunk_layers=1,
        even_layers=(2, 2), layer_transient=(), rank_transient=(), mtp_transient=(0, 0),
    )  # fmt: skip
    even = Assignment(chunk_layers=(2, 2), recompute_layers=(0, 0), mtp_chunk=1)
    assert evaluate_assignment(problem, even) is None  # the even split is over memory
    solution = _recurrence_solution(problem)
    assert solution is not None and solution.assignment is not None
    assert solution.assignment.chunk_layers == (3, 1) and solution.objective == 30
    assert solution.objective == brute_force_stages(problem)[0]
    # with room for both, 3+1 still needs less at its peak (12 against 2+2's 14): kept
    roomy = _recurrence_solution(problem.model_copy(update={"capacity": 100}))
    assert roomy is not None and roomy.assignment is not None
    assert roomy.assignment.chunk_layers == (3, 1)


def test_the_recurrences_split_is_cp_sats_optimum_on_deepseek_v3() -> None:
    """DeepSeek-V3 on PP16 with full recomputation allowed and an MTP module: the recurrence's
    split, which recomputes nothing, attains the optimum CP-SAT proves on the same data."""
    model, cluster = load_model("671B"), load_cluster("hgx_h800x2048")
    layout = Layout(tp=2, pp=16, dp=64, ep=64, recompute="full")
    problem = build_stage_problem(model, cluster, DEEPSEEK[2], layout, recompute="per_stage")
    found = contiguous_partition(problem)
    assert found is not None and found.layers is not None and found.time == found.bound
    value, layers = found.bound, found.layers
    assignment = Assignment(chunk_layers=layers, recompute_layers=(0,) * 16, mtp_chunk=15)
    assert evaluate_assignment(problem, assignment) == value
    proof = CONFIG.model_copy(update={"stage_time_limit_s": 10.0})
    solution = StageSolver(problem, proof).solve()
    assert solution.status == "OPTIMAL" and solution.objective == value


def test_deepseek_v3s_pipeline_split_is_proven_by_the_bound() -> None:
    """DeepSeek-V3 (3 dense, 58 MoE layers) on PP32 without interleaving: the even split meets
    the contiguous bound, so the split is optimal with no CP-SAT model built."""
    model = load_model("671B")
    cluster = load_cluster("hgx_h800x2048")
    layout = Layout(tp=2, pp=32, dp=32, ep=4, etp=2, mbs=1, precision="fp8")
    workload = TrainWorkload(seq_len=4096, global_batch=4096)
    even = score(model, cluster, workload, layout)
    outcome = optimise_pipeline(model, cluster, workload, layout, even=even, config=CONFIG)
    assert outcome.info.solved_by == "bound"
    assert outcome.info.status == "OPTIMAL"
    assert outcome.info.num_variables == 0


def _relaxed_optimum(problem: StageProblem) -> int | None:
    """The rank-load relaxation by enumeration (rank_load_lower_bound's twin): every way to
    share each kind of layer out over the ranks, every count of each kind a rank recomputes
    that some sharing of its layers over its chunks allows (:func:`_chunk_recomputes`: under
    ``block`` N = 0 on every rank, or N >= 1 on every rank, each rank then free to take its own,
    which is the programme's relaxation; its own under ``per_stage``; a pinned N on every rank),
    every rank for the MTP modules, each rank's time and memory written out from the
    StageProblem field docs; the least slowest rank over the assignments that fit."""

    p = problem
    if p.fixed_recompute is not None:
        regimes = [[p.fixed_recompute]]
    elif p.recompute == "block":  # one N for every rank: 0, or (relaxed) any N >= 1 per rank
        regimes = [[0], list(range(1, p.num_layers + 1))]
    else:
        regimes = [list(range(p.num_layers + 1))]  # per_stage: each rank its own; none: 0
    values = [_relaxed_optimum_under(p, ns) for ns in regimes]
    return min((v for v in values if v is not None), default=None)


def _chunk_recomputes(problem: StageProblem, rank: int, held: int, count: int) -> set[int]:
    """How many layers ``rank`` recomputes holding ``held`` decoder layers over its chunks,
    each chunk n_c >= its minimum (``min_chunk_layers``; the last chunk overall may be empty)
    recomputing its first min(N, n_c) (``count`` = N), over every way to size the chunks."""
    import itertools

    p = problem
    chunks = range(rank, p.num_chunks, p.pp)
    least = [p.min_chunk_layers if c < p.num_chunks - 1 else 0 for c in chunks]
    return {
        sum(min(count, n) for n in sizes)
        for sizes in itertools.product(range(held + 1), repeat=len(least))
        if sum(sizes) == held and all(n >= m for n, m in zip(sizes, least, strict=True))
    }


def _relaxed_optimum_under(problem: StageProblem, recompute_counts: list[int]) -> int | None:
    """The relaxation enumerated with each rank's recompute count N one of
    ``recompute_counts`` (ignored when nothing recomputes)."""
    import itertools

    p = problem
    n = p.num_layers
    transient = p.layer_transient or (0,) * n
    rows = list(zip(p.layer_time, p.recompute_time, p.layer_state, p.layer_activation,
                    p.recompute_saving, transient, strict=True))  # fmt: skip
    kinds = sorted(set(rows))
    totals = [rows.count(k) for k in kinds]
    rank_transient = p.rank_transient or (0,) * p.pp

    def shares(total: int) -> list[tuple[int, ...]]:
        return [c for c in itertools.product(range(total + 1), repeat=p.pp) if sum(c) == total]

    def rank_time(r: int, counts: tuple[int, ...], mtp: bool) -> int | None:
        best = None
        redo_ranges = [range(c + 1) if p.recompute != "none" else range(1) for c in counts]
        last = r == p.pp - 1
        working = p.working_last if last and p.working_last is not None else p.working
        counts_n = recompute_counts if p.recompute != "none" else [0]
        reachable = set().union(*(_chunk_recomputes(p, r, sum(counts), n) for n in counts_n))
        for redo in itertools.product(*redo_ranges):
            if sum(redo) not in reachable:
                continue
            time_ = p.rank_time[r] + sum(
                c * k[0] + x * k[1] for c, x, k in zip(counts, redo, kinds, strict=True)
            )
            state = sum(c * k[2] for c, k in zip(counts, kinds, strict=True))
            kept = sum(c * k[3] - x * k[4] for c, x, k in zip(counts, redo, kinds, strict=True))
            held = (
                p.rank_state[r]
                + rank_transient[r]
                + sum(c * (k[2] + k[5]) for c, k in zip(counts, kinds, strict=True))
            )
            memory = p.in_flight_scale * (
                p.rank_state[r] + p.rank_memory[r] + state + working * (sum(redo) > 0)
            )
            if mtp:
                time_ += p.mtp_time
                memory += p.in_flight_scale * (
                    (p.mtp_state[0] if last else p.mtp_state[1]) + p.mtp_memory
                )
                kept += p.mtp_activation
                held += (
                    p.mtp_state[0] + p.mtp_transient[0]
                    if last
                    else p.mtp_state[1] + p.mtp_transient[1]
                )
            memory += p.in_flight[r] * kept
            if memory <= p.in_flight_scale * p.capacity and held <= p.capacity:
                best = time_ if best is None else min(best, time_)
        return best

    mtp_ranks = sorted({c % p.pp for c in p.mtp_chunks}) if p.num_mtp else [None]
    best = None
    for split in itertools.product(*(shares(t) for t in totals)):
        for holder in mtp_ranks:
            times = [rank_time(r, tuple(s[r] for s in split), r == holder) for r in range(p.pp)]
            if any(t is None for t in times):
                continue
            value = max(t for t in times if t is not None)
            best = value if best is None else min(best, value)
    return best


@pytest.mark.parametrize("seed", range(60))
def test_the_rank_load_bound_is_its_relaxation_solved_by_enumeration(seed: int) -> None:
    """The dynamic programme over count vectors equals the relaxation enumerated (random
    tables, memory binding, recomputation, MTP), and it never passes the brute-force optimum of
    the partition itself: a true lower bound."""
    problem = _random_problem(seed)
    bound = rank_load_lower_bound(problem)
    assert bound == _relaxed_optimum(problem)
    brute, _ = brute_force_stages(problem)
    if brute is not None:
        assert bound is not None and bound <= brute


def _one_kind(problem: StageProblem) -> StageProblem:
    """``problem`` with every layer its first layer's kind and no MTP modules."""
    n = problem.num_layers
    transient = problem.layer_transient or (0,) * n
    return problem.model_copy(
        update={
            name: (values[0],) * n
            for name, values in (
                ("layer_time", problem.layer_time),
                ("recompute_time", problem.recompute_time),
                ("layer_state", problem.layer_state),
                ("layer_activation", problem.layer_activation),
                ("recompute_saving", problem.recompute_saving),
                ("layer_transient", transient),
            )
        }
        | {"num_mtp": 0, "mtp_time": 0}
    )


@pytest.mark.parametrize("seed", range(80))
def test_the_layer_count_partition_is_the_brute_force_optimum(seed: int) -> None:
    """One kind of layer, no MTP: the partition by layer and recompute counts per rank equals
    the enumeration of every split and recompute choice (none, block with N free or pinned,
    per stage; memory binding), and its split scores its value."""
    problem = _one_kind(_random_problem(seed))
    brute, _ = brute_force_stages(problem)
    found = uniform_partition(problem)
    if brute is None:
        assert found is None
        return
    assert found is not None
    value, assignment = found
    assert value == brute
    assert evaluate_assignment(problem, assignment) == brute


def test_the_layer_count_partition_keeps_a_layer_on_every_chunk_but_the_last() -> None:
    """Rank 0 is slow before any layer (a large embedding): emptying it would be fastest, but
    every chunk but the last holds a layer (min_chunk_layers), so it keeps one: 100 + 10."""
    problem = _one_kind(_random_problem(0)).model_copy(
        update={
            "pp": 2, "vpp": 1, "layer_time": (10, 10), "recompute_time": (0, 0),
            "layer_state": (0, 0), "layer_activation": (0, 0), "recompute_saving": (0, 0),
            "layer_transient": (0, 0), "rank_time": (100, 0), "rank_state": (0, 0),
            "rank_memory": (0, 0), "rank_transient": (0, 0), "in_flight": (2, 1),
            "in_flight_scale": 1, "recompute": "block", "fixed_recompute": None,
            "working": 0, "capacity": 10, "even_layers": (1, 1),
        }
    )  # fmt: skip
    found = uniform_partition(problem)
    assert found is not None and found[0] == 110 == brute_force_stages(problem)[0]
    assert found[1].chunk_layers == (1, 1)


@pytest.mark.parametrize("recompute", ["block", "per_stage"])
def test_the_layer_count_partition_lets_one_chunk_hold_every_layer(recompute: str) -> None:
    """The last chunk may be empty, so the first can hold all three layers (recomputing them
    all: N = 3) while the slow last rank holds none: 100. Found by review: the recompute counts
    tried stopped at 2, as if every other chunk held a layer, and the split came out at 115."""
    problem = StageProblem(
        pp=2, vpp=1, layer_time=(10,) * 3, recompute_time=(5,) * 3, layer_state=(0,) * 3,
        layer_activation=(10,) * 3, recompute_saving=(10,) * 3, layer_transient=(),
        rank_time=(0, 100), rank_transient=(), rank_state=(0, 0), rank_memory=(0, 0),
        in_flight=(2, 1), in_flight_scale=2, capacity=5, num_mtp=0, mtp_time=0,
        mtp_state=(0, 0), mtp_activation=0, mtp_memory=0, working=0, recompute=recompute,
        fixed_recompute=None, min_chunk_layers=1, steps=4.0, even_layers=(2, 1),
    )  # fmt: skip
    found = uniform_partition(problem)
    assert found is not None and found[0] == 100 == brute_force_stages(problem)[0]
    assert found[1].chunk_layers == (3, 0)


def test_the_layer_count_partition_leaves_mixed_layers_and_mtp_to_the_solver() -> None:
    mixed = _random_problem(3)
    assert len(set(mixed.layer_time)) > 1 or mixed.num_mtp
    assert uniform_partition(mixed) is None
    with_mtp = _one_kind(_random_problem(4)).model_copy(update={"num_mtp": 1, "mtp_time": 5})
    assert uniform_partition(with_mtp) is None


def _mixed_interleaved(seed: int) -> StageProblem:
    """An interleaved problem (vpp 2-3, pp 2-3, up to 10 layers) that recomputes nothing, with
    an MTP module on a third of the seeds, its layers of 2-3 kinds that alternate or fall at random, memory
    binding: the shape the branch and bound takes."""
    rng = random.Random(seed)
    base = _random_problem(seed)
    pp, vpp = rng.choice([2, 3]), rng.choice([2, 3])
    n = rng.randint(pp * vpp - 1, min(10, pp * vpp + 4))
    kinds = [(rng.randint(1, 30), rng.randint(1, 20), rng.randint(1, 30), rng.randint(0, 40))
             for _ in range(rng.choice([2, 3]))]  # fmt: skip
    if rng.random() < 0.5:  # alternating, as gpt-oss's sliding and full attention
        rows = [kinds[i % len(kinds)] for i in range(n)]
    else:
        rows = [rng.choice(kinds) for _ in range(n)]
    scale = pp * vpp
    in_flight = [scale * (pp - r) + (scale // 2 if r == 0 else 0) for r in range(pp)]
    problem = base.model_copy(
        update={
            "pp": pp, "vpp": vpp, "recompute": "none", "fixed_recompute": None,
            "num_mtp": base.num_mtp, "mtp_time": base.mtp_time, "working": 0,
            "layer_time": tuple(r[0] for r in rows), "recompute_time": (0,) * n,
            "layer_state": tuple(r[1] for r in rows), "recompute_saving": (0,) * n,
            "layer_activation": tuple(r[2] for r in rows),
            "layer_transient": tuple(r[3] for r in rows),
            "in_flight": tuple(in_flight), "in_flight_scale": scale,
            "rank_time": tuple(rng.randint(0, 40) if r == pp - 1 else 0 for r in range(pp)),
            "rank_state": tuple(rng.randint(0, 20) for _ in range(pp)),
            "rank_memory": tuple(rng.randint(0, 10) if r == pp - 1 else 0 for r in range(pp)),
            "rank_transient": tuple(rng.randint(0, 30) for _ in range(pp)),
            "min_chunk_layers": rng.choice([0, 1, 1]),
            "even_layers": tuple(len(stage_layers_of(n, scale, c)) for c in range(scale)),
        }
    )  # fmt: skip
    even = even_assignment(problem)
    most = max(mem for _, mem in _loads(problem, even)) // scale
    steps = max(rank_step_memory(problem, even))
    return problem.model_copy(
        update={"capacity": rng.randint(int(0.6 * max(most, steps)), int(1.3 * max(most, steps)))}
    )


@pytest.mark.parametrize("seed", range(120))
def test_the_branch_and_bound_split_is_the_brute_force_optimum(seed: int) -> None:
    """Interleaved, several kinds of layer, nothing recomputed, MTP or not, memory binding: the
    branch and bound's split equals the enumeration of every split, with or without a bound to
    stop at (the brute-force optimum itself, or a lower bound that no split meets) and below the
    even split's value, and it scores its value; with nothing that fits it answers None, and it
    gives up (None) when its node budget is too small to prove anything."""
    problem = _mixed_interleaved(seed)
    brute, _ = brute_force_stages(problem)
    for lower in (None, 0, brute):
        found = branch_and_bound_partition(problem, lower=lower, upper=None)
        if brute is None:
            assert found is None
            continue
        assert found is not None and found[0] == brute
        assert evaluate_assignment(problem, found[1]) == brute
    even = evaluate_assignment(problem, even_assignment(problem))
    if even is not None and brute is not None:
        below = branch_and_bound_partition(problem, lower=None, upper=even + 1)
        assert below is not None and below[0] == brute
        if brute == even:  # nothing faster than the even split: none below its value
            assert branch_and_bound_partition(problem, lower=None, upper=even) is None
    assert branch_and_bound_partition(problem, lower=None, upper=None, max_nodes=0) is None


def test_the_branch_and_bound_leaves_other_shapes_to_the_solver() -> None:
    """No interleaving, or a recompute choice: not its problem (None)."""
    problem = _mixed_interleaved(3)
    for update in ({"vpp": 1, "in_flight_scale": problem.pp}, {"recompute": "block"}):
        assert branch_and_bound_partition(problem.model_copy(update=update), lower=None,
                                          upper=None) is None  # fmt: skip


def test_gpt_oss_interleaved_split_is_proven_by_branch_and_bound() -> None:
    """gpt-oss-120b (sliding and full attention alternate: two kinds of layer) on 64 H100, PP8
    VPP4 with nothing recomputed: the search's best layout. The branch and bound proves the
    split's optimum (CP-SAT reaches the same value in its 1 s limit but cannot close the gap to
    the rank-load bound), and the plan says which method split it."""
    from planner.report.text import estimate_text

    model, cluster = load_model("gpt-oss-120b"), load_cluster("hgx_h100x64")
    workload = TrainWorkload()
    layout = Layout(pp=8, vpp=4, dp=8, ep=8, mbs=1, recompute="none")
    even = score(model, cluster, workload, layout)
    outcome = optimise_pipeline(model, cluster, workload, layout, even=even, config=CONFIG)
    assert outcome.info.solved_by == "branch-and-bound" and outcome.info.status == "OPTIMAL"
    assert outcome.cost is not None and outcome.cost.step_time_s < even.step_time_s
    problem = build_stage_problem(model, cluster, workload, layout,
                                  headroom=CONFIG.memory_headroom)  # fmt: skip
    bound = rank_load_lower_bound(problem)
    assert bound is not None and outcome.info.objective >= outcome.info.best_bound
    solution = StageSolver(problem, CONFIG).solve()  # time-limited: never better than proven
    assert solution.objective >= round(outcome.info.objective / problem.steps / 1e-6) - 1
    plan = engine.estimate(model, cluster, workload, layout, config=CONFIG)
    assert plan.pipeline_split is not None and plan.pipeline_split.method == "branch-and-bound"
    assert plan.pipeline_split.optimised == "the branch-and-bound split"
    assert "pipeline: branch-and-bound split" in estimate_text(plan)


def test_deepseek_v3s_full_recompute_bound_keeps_the_block_methods_one_count() -> None:
    """DeepSeek-V3 FP8 on 2,048 H800, TP2 PP16 VPP3 DP64 EP8 with full recomputation by the
    block method: one count N for every chunk, so with N >= 1 every rank recomputes a layer of
    each chunk, not only the ranks whose memory needs it. Kept in the rank-load bound, the bound
    is what the even counts with the least N that fits reach, so the split is proven with no
    solve (CP-SAT ran to its 1 s limit on it when each rank's recomputation was free); the one
    programme of the split sweep's first tight bound, each rank free to recompute nothing or at
    least a layer per chunk, is looser and still a bound. (At EP4 with expert TP 2, the layout this
    test had before the MoE block's expert-TP collectives were priced, the two no longer meet:
    the bound is not tight on every instance, only a bound.)"""
    model, cluster = load_model("671B"), load_cluster("hgx_h800x2048")
    workload = TrainWorkload(seq_len=4096, global_batch=4096)
    layout = Layout(tp=2, pp=16, vpp=3, dp=64, ep=8, etp=1, mbs=1, recompute="full",
                    precision="fp8")  # fmt: skip
    problem = build_stage_problem(model, cluster, workload, layout,
                                  headroom=CONFIG.memory_headroom)  # fmt: skip
    shared = rank_load_lower_bound(problem)
    start = evaluate_assignment(problem, least_recompute_assignment(problem))
    assert shared is not None and start == shared
    free = rank_load_lower_bound(problem, share_count=False)
    assert free is not None and free < shared
    even = score(model, cluster, workload, layout)
    outcome = optimise_pipeline(model, cluster, workload, layout, even=even, config=CONFIG)
    assert outcome.info.solved_by == "bound" and outcome.info.status == "OPTIMAL"
    assert outcome.info.num_variables == 0


def test_qwen3s_interleaved_block_split_is_solved_by_layer_counts() -> None:
    """Qwen3-235B (94 MoE layers) on 256 B200, TP4 PP4 VPP12 with full recomputation: the
    layer counts give the rank-time optimum (at least as fast as CP-SAT's within its limit, no
    faster than the rank-load bound), but it piles 14 layers into one of the 48 chunks where
    the even split holds 2; re-scored, the pipeline's fill and drain wait on that chunk
    (step.pipeline_bubble_time), so with 4 micro-batches per step it is slower than the even
    split and the search keeps the even one."""
    model, cluster = load_model("qwen3-235b-a22b"), load_cluster("hgx_b200x256")
    workload = TrainWorkload()
    layout = Layout(tp=4, pp=4, vpp=12, dp=16, etp=4, mbs=8, recompute="full")
    even = score(model, cluster, workload, layout)
    outcome = optimise_pipeline(model, cluster, workload, layout, even=even, config=CONFIG)
    assert outcome.info.solved_by == "layer-counts" and outcome.info.num_variables == 0
    problem = build_stage_problem(model, cluster, workload, layout, recompute="block",
                                  headroom=CONFIG.memory_headroom)  # fmt: skip
    found = uniform_partition(problem)
    assert found is not None
    solution = StageSolver(problem, CONFIG).solve()
    assert solution.objective >= found[0] >= (rank_load_lower_bound(problem) or 0)
    chunks = found[1]
    assert max(chunks.chunk_layers) == 14 and max(problem.even_layers) == 2
    split = PipelineSplit(chunk_layers=chunks.chunk_layers,
                          recompute_layers=chunks.recompute_layers)  # fmt: skip
    kept = score(model, cluster, workload, layout, split=split)
    assert kept.breakdown_s["pp_bubble"] > 5 * even.breakdown_s["pp_bubble"]
    assert kept.step_time_s > even.step_time_s and outcome.cost is None


def test_deepseek_v3s_interleaved_split_is_proven_by_the_rank_load_bound() -> None:
    """DeepSeek-V3 (3 dense, 58 MoE layers) on PP16 VPP3 with full recomputation, block method:
    the even counts recomputing one layer per chunk (the solver's start) meet the rank-load
    bound, so they are the optimum with no CP-SAT model built, and a CP-SAT solve with time to
    prove its optimum agrees."""
    model, cluster = load_model("671B"), load_cluster("hgx_h800x2048")
    workload = TrainWorkload(seq_len=4096, global_batch=4096)  # benchmarks/bench_search.py's
    layout = Layout(tp=1, pp=16, vpp=3, dp=128, ep=8, mbs=1, recompute="full", precision="fp8")
    even = score(model, cluster, workload, layout)
    outcome = optimise_pipeline(model, cluster, workload, layout, even=even, config=CONFIG)
    assert outcome.info.solved_by == "bound" and outcome.info.num_variables == 0
    assert outcome.split is not None and outcome.cost is not None
    assert outcome.cost.step_time_s < even.step_time_s
    problem = build_stage_problem(model, cluster, workload, layout, recompute="block",
                                  headroom=CONFIG.memory_headroom)  # fmt: skip
    start = least_recompute_assignment(problem)
    assert outcome.split.chunk_layers == start.chunk_layers
    assert outcome.split.recompute_layers == start.recompute_layers
    assert evaluate_assignment(problem, start) == rank_load_lower_bound(problem)
    proof = CONFIG.model_copy(update={"stage_time_limit_s": 10.0})
    solution = StageSolver(problem, proof).solve()
    # CP-SAT reaches the same objective; whether it also closes its own bound within the limit
    # depends on the data (with the 2026-12-04 fit it no longer does in 10 s): the rank-load bound
    # is the proof either way
    assert solution.status in ("OPTIMAL", "FEASIBLE")
    assert solution.objective == rank_load_lower_bound(problem)
    from planner.report.text import estimate_text

    plan = engine.estimate(model, cluster, workload, layout, config=CONFIG)
    assert plan.pipeline_split is not None and plan.pipeline_split.method == "bound"
    assert plan.pipeline_split.optimised == "the bound-proven split"
    assert "pipeline: bound split" in estimate_text(plan)


@pytest.mark.parametrize("seed", range(40))
def test_least_recompute_start_is_the_best_even_split(seed: int) -> None:
    """The solver's start (least_recompute_assignment) against every recompute choice on the
    even layer counts: one N for all chunks (block) or one N per rank (per_stage), each N
    from 0 to the largest chunk. It fits whenever the even split fits, and no feasible choice
    is faster."""
    import itertools

    problem = _random_problem(seed)
    even = even_assignment(problem)
    start = least_recompute_assignment(problem)
    assert start.chunk_layers == even.chunk_layers
    if evaluate_assignment(problem, even) is None or problem.recompute == "none":
        assert start == even
        return
    layers = even.chunk_layers
    groups = 1 if problem.recompute == "block" else problem.pp
    best = None
    for ns in itertools.product(range(max(layers) + 1), repeat=groups):
        redo = tuple(min(n, ns[c % groups]) for c, n in enumerate(layers))
        value = evaluate_assignment(problem, even.model_copy(update={"recompute_layers": redo}))
        if value is not None and (best is None or value < best):
            best = value
    assert evaluate_assignment(problem, start) == best


TINY_MOE = ModelSpec(
    name="tiny-moe-mla",
    source="test",
    hidden_size=1024,
    num_layers=6,
    num_attention_heads=16,
    num_kv_heads=16,
    head_dim=64,
    ffn_hidden_size=4096,
    ffn_activation="swiglu",
    vocab_size=64000,
    max_context=8192,
    moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=1024, first_dense_layers=2),
)


@pytest.mark.parametrize(
    ("layout", "mtp", "recompute"),
    [
        (Layout(pp=2, dp=4, recompute="full"), 0, "block"),
        (Layout(pp=3, dp=2, ep=2, recompute="full"), 1, "per_stage"),
        (Layout(pp=2, vpp=2, dp=4, ep=4), 1, "block"),
        (Layout(pp=2, dp=4, ep=2, recompute="full", zero=3), 1, "block"),
        (Layout(pp=2, dp=2, ep=2, recompute="full"), 1, "bf16-grads"),
    ],
)
def test_cpsat_partition_equals_brute_force_on_the_cost_model(
    layout: Layout, mtp: int, recompute: str
) -> None:
    """The cost model's tables of a 6-layer MoE (2 dense first) with MTP; memory squeezed to
    between the lightest and heaviest split so that it binds. bf16 gradients give the optimizer
    step its fp32 copy, the second memory bound."""
    grads = "bf16" if recompute == "bf16-grads" else "fp32"
    recompute = "block" if recompute == "bf16-grads" else recompute
    workload = TrainWorkload(
        seq_len=4096, global_batch=32, mtp_num_layers=mtp, grad_reduce_dtype=grads
    )
    problem = build_stage_problem(
        TINY_MOE,
        load_cluster("hgx_h100x8"),
        workload,
        layout,
        recompute=recompute,  # type: ignore[arg-type]
    )
    even = even_assignment(problem)
    loads = [mem for _, mem in _loads(problem, even)]
    squeezed = problem.model_copy(
        update={"capacity": (min(loads) + max(loads)) // 2 // problem.in_flight_scale}
    )
    if grads == "bf16":
        assert any(problem.layer_transient) and any(problem.rank_transient)
        step = max(rank_step_memory(problem, even))
        cases = (problem, squeezed, problem.model_copy(update={"capacity": step - 1}))
    else:
        cases = (problem, squeezed)
    for case in cases:
        brute, _ = brute_force_stages(case)
        solution = StageSolver(case, CONFIG).solve()
        if brute is None:
            assert solution.status == "INFEASIBLE"
            continue
        assert (solution.status, solution.objective) == ("OPTIMAL", brute)


def test_an_explicit_even_split_scores_like_the_default() -> None:
    """The cost model reads an explicit split through the same formulas: the even split given
    explicitly (every layer recomputed) reproduces the default step time and memory."""
    model, cluster = load_model("405B"), load_cluster("hgx_h100x128")
    workload = TrainWorkload(seq_len=4096, global_batch=256)
    layout = Layout(tp=8, pp=16, dp=1, recompute="full")
    counts = tuple(len(stage_layers(model, 16, s)) for s in range(16))
    default = score(model, cluster, workload, layout)
    for split in (PipelineSplit(chunk_layers=counts),
                  PipelineSplit(chunk_layers=counts, recompute_layers=counts)):  # fmt: skip
        explicit = score(model, cluster, workload, layout, split=split)
        assert explicit.step_time_s == pytest.approx(default.step_time_s, rel=1e-12)
        assert explicit.peak_memory.total == pytest.approx(default.peak_memory.total, rel=1e-12)


@pytest.mark.parametrize(
    ("layout", "saved", "schedule"),
    [
        (Layout(pp=2, dp=4, recompute="full"), None, "1f1b"),
        (Layout(pp=2, dp=4, recompute="none"), None, "1f1b"),
        (Layout(pp=2, dp=4, recompute="selective"), ("q", "k", "v"), "1f1b"),
        (Layout(pp=4, dp=2, mbs=2, recompute="selective"), (), "1f1b"),
        (Layout(pp=2, dp=4, recompute="none"), None, "gpipe"),
    ],
)
def test_the_stage_tables_hold_what_stage_memory_holds(
    layout: Layout, saved: tuple[str, ...] | None, schedule: str
) -> None:
    """Each rank's memory in the partition's tables, on the even split, is stage_memory's
    weights + gradients + optimizer state + activations of that stage, to the tables' rounding
    (each entry rounded up to 64 KiB: within 4 MiB here): the recompute working set a save
    list holds on every rank (about 1 GiB here), less what it shares with the logits on the
    last (stage_memory.logits_overlap), included."""
    from planner.cost.stage_memory import stage_memory
    from planner.search.solve.stage_data import MEMORY_QUANTUM_BYTES, rank_loads

    model, cluster = load_model("8B"), load_cluster("hgx_h100x8")
    workload = TrainWorkload(
        seq_len=8192, global_batch=32, saved_tensors=saved, pipeline_schedule=schedule
    )
    choice = "block" if layout.recompute == "full" else "none"
    problem = build_stage_problem(model, cluster, workload, layout, recompute=choice)
    loads = rank_loads(problem, even_assignment(problem))
    micro = workload.global_batch // (layout.dp * layout.mbs)
    for rank, (_, memory) in enumerate(loads):
        held = stage_memory(model, workload, layout, rank, micro)
        expected = held.weights + held.grads + held.optimizer + held.activations
        tabled = memory / problem.in_flight_scale * MEMORY_QUANTUM_BYTES
        assert tabled == pytest.approx(expected, abs=64 * MEMORY_QUANTUM_BYTES)


def test_recomputing_fewer_layers_is_faster_and_holds_more() -> None:
    model, cluster = load_model("405B"), load_cluster("hgx_h100x128")
    workload = TrainWorkload(seq_len=4096, global_batch=256)
    layout = Layout(tp=8, pp=16, dp=1, recompute="full")
    counts = tuple(len(stage_layers(model, 16, s)) for s in range(16))
    every = score(model, cluster, workload, layout, split=PipelineSplit(
        chunk_layers=counts, recompute_layers=counts))  # fmt: skip
    one = score(model, cluster, workload, layout, split=PipelineSplit(
        chunk_layers=counts, recompute_layers=(1,) * 16))  # fmt: skip
    assert one.step_time_s < every.step_time_s
    assert one.peak_memory.total > every.peak_memory.total


DEEPSEEK = ("671B", "hgx_h800x2048", TrainWorkload(seq_len=4096, global_batch=4096,
                                                   mtp_num_layers=1))  # fmt: skip
LLAMA405 = ("405B", "hgx_h100x2048", TrainWorkload(seq_len=8192, global_batch=2048))
MIXED_KINDS = TrainWorkload(seq_len=4096, global_batch=64)
"""A small step for gpt-oss-20b, whose layers alternate sliding and full attention: two kinds,
so its pipeline splits with full recomputation go to CP-SAT (PP2: each solve well inside 0.1 s)."""


@pytest.mark.parametrize(
    ("case", "layout"),
    [
        (DEEPSEEK, Layout(tp=2, pp=16, dp=64, ep=64, recompute="full")),
        (DEEPSEEK, Layout(tp=2, pp=16, vpp=2, dp=64, ep=64, recompute="full")),
        (LLAMA405, Layout(tp=8, pp=16, dp=16, recompute="full")),
    ],
)
def test_the_cpsat_split_gains_over_the_even_split(
    case: tuple[str, str, TrainWorkload], layout: Layout
) -> None:
    """DeepSeek-V3 (61 layers, 3 dense first, MTP and a 129k-vocabulary head on the last stage)
    and Llama 3.1 405B (126 layers on PP16) under full recomputation: the CP-SAT split, re-scored
    by the cost model, is faster than the even split and fits."""
    name, cluster_name, workload = case
    model, cluster = load_model(name), load_cluster(cluster_name)
    even = score(model, cluster, workload, layout)
    # optimality, not the search's 1 s budget per solve, is what this checks: the DeepSeek VPP2
    # split proves optimal in about 1.1 s on two busy cores
    proof = CONFIG.model_copy(update={"stage_time_limit_s": 10.0})
    outcome = optimise_pipeline(model, cluster, workload, layout, even=even, config=proof)
    assert outcome.info.status == "OPTIMAL"
    assert outcome.split is not None and outcome.cost is not None
    assert outcome.cost.step_time_s < even.step_time_s
    assert outcome.info.baseline is not None and outcome.info.objective < outcome.info.baseline
    assert sum(outcome.split.chunk_layers) == model.num_layers


def test_estimate_and_search_carry_the_split_and_it_validates() -> None:
    model, cluster = load_model("671B"), load_cluster("hgx_h800x2048")
    workload = DEEPSEEK[2]
    layout = Layout(tp=2, pp=16, dp=64, ep=64, recompute="full")
    plan = engine.estimate(model, cluster, workload, layout, config=CONFIG)
    # nothing need recompute on this split, so the recurrence's split is optimal: no solve
    assert plan.pipeline_split is not None and plan.pipeline_split.method == "recurrence"
    assert plan.step_time_s < plan.pipeline_split.even_step_time_s
    assert len(plan.pipeline_stages) == 16
    assert sum(s.num_layers for s in plan.pipeline_stages) == 61
    assert sum(s.mtp_layers for s in plan.pipeline_stages) == 1
    assert plan_split(plan) is not None
    assert plan_problems(plan, model, cluster, workload) == []
    even = engine.estimate(model, cluster, workload, layout)
    assert even.pipeline_split is not None and even.pipeline_split.method == "even"
    assert even.step_time_s == pytest.approx(plan.pipeline_split.even_step_time_s)


def test_the_text_report_and_search_json_say_what_the_solver_did() -> None:
    from planner.report.text import estimate_text, search_text

    model, cluster = load_model("671B"), load_cluster("hgx_h800x2048")
    layout = Layout(tp=2, pp=16, dp=64, ep=64, recompute="full")
    text = estimate_text(engine.estimate(model, cluster, DEEPSEEK[2], layout, config=CONFIG))
    assert "pipeline: recurrence split, layers per stage" in text and "even split" in text
    result = engine.search(  # two kinds of layer (gpt-oss alternates sliding windows): CP-SAT
        load_model("gpt-oss-20b"), load_cluster("hgx_h100x8"), MIXED_KINDS,
        fix={"pp": 2, "vpp": 1, "recompute": "full"}, config=CONFIG,
    )  # fmt: skip
    assert result.solver.name == "sort" and "CP-SAT" in result.solver.method
    solved = result.solver.subproblems
    assert solved and all(s.name == "pipeline_stages" for s in solved)
    assert all(s.num_variables > 0 and s.num_constraints > 0 for s in solved)
    assert all(s.best_bound <= s.objective + 1e-9 for s in solved)
    assert "CP-SAT split" in " ".join(search_text(result).split())  # wrapped at 100 columns


_NO_ORTOOLS = """
import sys
import planner
planner.search(model="8B", cluster="hgx_h100x8", fix={"pp": 1})
planner.search(model="8B", cluster="hgx_h100x8", config={"stage_split": "even"})
# the stage solver's module is loaded for every pp > 1 plan; OR-Tools (and pandas) only for a solve
import planner.search.solve.stages  # noqa: F401
assert not any(m.startswith("ortools") for m in sys.modules), "OR-Tools imported"
assert "pandas" not in sys.modules and "numpy.ma" not in sys.modules, "heavy import on the path"
# one kind of layer is split by layer counts; gpt-oss's two kinds need the solver
planner.estimate(model="8B", cluster="hgx_h100x8", layout={"pp": 2, "recompute": "full"})
assert not any(m.startswith("ortools") for m in sys.modules), "OR-Tools imported"
planner.estimate(model="gpt-oss-20b", cluster="hgx_h100x8", layout={"pp": 2, "recompute": "full"})
assert any(m.startswith("ortools") for m in sys.modules), "no CP-SAT solve ran"
"""


def test_ortools_is_imported_only_when_cp_sat_runs() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _NO_ORTOOLS], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_split_keeps_the_searchs_memory_headroom() -> None:
    """The search keeps 5% of usable memory free (SolverConfig.memory_headroom); the CP-SAT
    split must not move a layer into that margin. 8B on 64 TPU v5e: the even split of
    TP2 PP2 DP2 CP8 peaks at 14.7 of 15.75 GiB (93.6%); moving a 17th layer to stage 0 would
    be faster but peak at 15.6 GiB (98.8%), so the winner keeps the even split."""
    from planner.api import search

    plan = search(model="8B", cluster="tpu_v5ex64", top=1).best
    assert plan.memory.peak_gib <= 0.95 * plan.memory.capacity_gib
    result = search(model="70B", cluster="hgx_h100x64", top=3)
    for other in [result.best, *result.alternatives]:
        assert other.memory.peak_gib <= 0.95 * other.memory.capacity_gib


def test_a_time_limited_incumbent_reports_its_partitions_own_time() -> None:
    """A solve stopped by its time limit may hold an objective variable above its partition's
    slowest rank: the outcome reports the partition's time; a partition the data rejects or
    prices above the solver's objective is an InternalError."""
    from planner.errors import InternalError
    from planner.search.solve.stages import tightened

    problem = next(p for p in map(_random_problem, range(40)) if brute_force_stages(p)[0])
    solution = StageSolver(problem, CONFIG).solve()
    own = evaluate_assignment(problem, solution.assignment)  # type: ignore[arg-type]
    loose = solution._replace(status="FEASIBLE", objective=own + 7, best_bound=own + 7)
    fixed = tightened(problem, loose, Layout(pp=problem.pp))
    assert (fixed.objective, fixed.best_bound) == (own, own)
    with pytest.raises(InternalError, match="fails its own data"):
        tightened(problem, solution._replace(objective=own - 1), Layout(pp=problem.pp))


def test_the_split_candidates_solved_side_by_side_equal_the_serial_solves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The split candidates' CP-SAT solves run on threads (engine.split_threads); a solve
    that proves its optimum returns the same split whichever thread runs it, so gpt-oss-20b on
    8 H100 at PP2 with full recompute (five CP-SAT solves, each optimal well inside its second:
    its two kinds of layer leave them to the solver) ranks the same plans with one thread and
    with four."""
    model, cluster = load_model("gpt-oss-20b"), load_cluster("hgx_h100x8")
    workload = MIXED_KINDS

    def without_wall_time(value: object) -> object:
        if isinstance(value, dict):
            return {k: without_wall_time(v) for k, v in value.items() if k != "wall_s"}
        if isinstance(value, list):
            return [without_wall_time(v) for v in value]
        return value

    def plans(threads: int) -> list[object]:
        monkeypatch.setattr(engine, "split_threads", lambda config, jobs: min(threads, jobs))
        fix = {"pp": 2, "vpp": 1, "recompute": "full"}
        result = engine.search(model, cluster, workload, fix=fix, config=CONFIG)
        solves = result.solver.subproblems
        # the five ranked ones, and those the split sweep lifted into the plans
        assert len(solves) >= 5 and all(s.solved_by == "cp-sat" for s in solves)
        assert all(s.status == "OPTIMAL" for s in solves)
        return [
            without_wall_time(p.model_dump(mode="json"))
            for p in [result.best, *result.alternatives]
        ]

    assert plans(4) == plans(1)


def test_a_sweep_worker_solves_its_splits_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A what-if sweep's or a pack's pool process already has a CPU of its own (one process per
    CPU), so its initializer caps the split threads at one; without the cap a process uses every
    CPU it may. (The initializer's SIGINT handler and memory memo are stubbed: this is the test
    process.)"""
    from planner.search import pool

    monkeypatch.setattr(pool, "quiet_worker", lambda: None)
    monkeypatch.setattr(pool, "share_memory_estimates_for_process", lambda: None)
    start_worker = pool.start_worker
    config = SolverConfig()
    try:
        engine.cap_split_threads(None)
        free = engine.split_threads(config, 64)
        start_worker()
        assert engine.split_threads(config, 64) == 1
    finally:
        engine.cap_split_threads(None)
    assert engine.split_threads(config, 64) == free


@pytest.mark.parametrize("seed", range(60))
def test_a_stopped_solve_is_never_worse_than_its_start(seed: int) -> None:
    """Stopped at once (a 1 ms limit), the solver still returns a split no slower than its
    start, the even split with the least recomputation that fits (every variable hinted,
    StageSolver._complete_hint), and its reported bound stays below what it returns."""
    problem = _random_problem(seed)
    start = least_recompute_assignment(problem)
    value = None if start is None else evaluate_assignment(problem, start)
    rushed = SolverConfig(stage_time_limit_s=0.001)
    solution = StageSolver(problem, rushed).solve()
    if value is not None:
        assert solution.assignment is not None
        assert evaluate_assignment(problem, solution.assignment) <= value
        assert solution.best_bound <= solution.objective <= value


def test_the_kept_split_is_no_slower_than_the_solves_start() -> None:
    """gpt-oss-20b on 8 H100, TP2 PP2 VPP2 with full recomputation: the integer objective prices
    the bubble at equal chunks, so CP-SAT's split can lose to its start (the even layer counts
    with the least recomputation that fits) once the cost model prices the slowest chunk; the
    kept split is the faster of the two (here the start: 3.26 s against 3.36 s)."""
    model, cluster = load_model("gpt-oss-20b"), load_cluster("hgx_h100x8")
    workload = engine.resolve_workload(MIXED_KINDS, cluster.accelerator.vendor)
    layout = Layout(tp=2, pp=2, vpp=2, dp=2, ep=2, etp=2, mbs=4, recompute="full")
    even = score(model, cluster, workload, layout)
    outcome = optimise_pipeline(model, cluster, workload, layout, even=even, config=CONFIG)
    problem = build_stage_problem(model, cluster, workload, layout, recompute="block",
                                  headroom=CONFIG.memory_headroom)  # fmt: skip
    start = least_recompute_assignment(problem)
    assert start is not None and outcome.cost is not None and outcome.split is not None
    split = PipelineSplit(chunk_layers=start.chunk_layers, recompute_layers=start.recompute_layers)
    started = score(model, cluster, workload, layout, split=split)
    assert outcome.cost.step_time_s <= started.step_time_s < even.step_time_s


@pytest.mark.parametrize("seed", range(80))
def test_levelled_chunks_keep_every_rule_and_the_slowest_rank(seed: int) -> None:
    """:func:`level_chunks` on every split of random interleaved problems (brute force): its
    split holds every rule, no rank is slower than the bound it was given, and its slowest chunk
    is no slower than the split it started from."""
    problem = _random_problem(seed).model_copy(update={"vpp": 2})
    problem = problem.model_copy(update={"even_layers": tuple(
        len(stage_layers_of(problem.num_layers, problem.num_chunks, c))
        for c in range(problem.num_chunks))})  # fmt: skip
    for assignment in every_assignment(problem):
        value = evaluate_assignment(problem, assignment)
        if value is None:
            continue
        levelled = level_chunks(problem, assignment, value)
        assert evaluate_assignment(problem, levelled) is not None
        assert evaluate_assignment(problem, levelled) <= value
        assert max(chunk_times(problem, levelled)) <= max(chunk_times(problem, assignment))


def test_deepseek_v3s_split_is_no_slower_than_nvidias() -> None:
    """DeepSeek-V3 with its MTP module at PP2 VPP8 on 256 GB300 (NVIDIA's 26.04 MXFP8 config):
    the planner's split is no slower, to the cost model, than the layout NVIDIA's recipe runs,
    'Et*4|(t*4|)*14tmL'. The solve's split alone (each rank balanced, 25 and 21 layers piled
    into the last two chunks) took 16.94 s against the layout's 16.60 s; levelled, 16.32 s."""
    from planner.search.given_split import split_from_layout

    model, cluster = load_model("deepseek-v3"), load_cluster("gb300_nvl72x256")
    workload = engine.resolve_workload(
        TrainWorkload(seq_len=4096, global_batch=4096, precision="mxfp8", mtp_num_layers=1,
                      grad_reduce_dtype="bf16", moe_dispatch_dedup=True, ep_comm_overlap=False,
                      tp_comm_overlap=False, optimizer_state_dtype="bf16", moe_host_sync=True,
                      recompute_modules=("mla_up_proj",)),
        "NVIDIA",
    )  # fmt: skip
    layout = Layout(pp=2, vpp=8, dp=128, ep=32, mbs=2, recompute="selective", precision="mxfp8")
    nvidia = split_from_layout("Et*4|(t*4|)*14tmL", pp=2, num_layers=61, mtp_layers=1)
    given = engine.estimate(model, cluster, workload, layout, split=nvidia)
    planned = engine.estimate(model, cluster, workload, layout, config=SolverConfig())
    assert given.fits and planned.fits
    assert planned.step_time_s <= given.step_time_s


def test_a_split_that_recomputes_nothing_is_labelled_so() -> None:
    """A full-recompute candidate whose solved split recomputes no layer (every rank fits with
    nothing recomputed) is the layout without recomputation: Llama 3 70B on 32 B200 was ranked
    first as "full" with 0,0,0,0 layers recomputed, which pinned as labelled runs 33% slower.
    Every plan of the search is labelled as it runs, each layout once, and the best one pinned
    with its split is the same plan."""
    from planner import api

    result = api.search(model="70B", cluster="hgx_b200x32", top=5)
    plans = [result.best, *result.alternatives]
    assert len({p.layout for p in plans}) == len(plans)
    for plan in plans:
        redo = [s.recompute_layers for s in plan.pipeline_stages]
        assert not (plan.layout.recompute.value == "full" and redo and not any(redo)), plan
    best = result.best
    if best.pipeline_split is not None and best.pipeline_split.method != "even":
        layers = [s.num_layers for s in best.pipeline_stages]
        redo = [s.recompute_layers for s in best.pipeline_stages]
        split = PipelineSplit(
            chunk_layers=tuple(layers),
            recompute_layers=tuple(redo) if best.layout.recompute.value == "full" else None,
        )
        pinned = api.estimate(
            model="70B", cluster="hgx_b200x32", layout=best.layout, pipeline_split=split
        )
        assert pinned.step_time_s == pytest.approx(best.step_time_s, rel=1e-9)


def test_a_solve_stopped_by_its_limit_stops_at_the_same_point_under_load() -> None:
    """DeepSeek-V3 with MTP on 2,048 H800, TP1 PP16 VPP3 EP8 with full recomputation: a split
    CP-SAT does not prove within 0.3 s of limit. The limit counts CP-SAT's deterministic work
    (cpsat.DETERMINISTIC_S_PER_LIMIT_S), so the solve returns the same split and the same
    proven bound alone as with more solves than CPUs competing for them; under the wall-clock
    limit it had before, contended solves stopped earlier with a lower bound (three on two CPUs:
    218,360 against 220,438 quanta, measured 2026-12-06)."""
    import os
    import threading

    model, cluster = load_model("671B"), load_cluster("hgx_h800x2048")
    plain = TrainWorkload(seq_len=4096, global_batch=4096, mtp_num_layers=1)
    workload = engine.resolve_workload(plain, cluster.accelerator.vendor)
    layout = Layout(tp=1, pp=16, vpp=3, dp=128, ep=8, recompute="full")
    problem = build_stage_problem(model, cluster, workload, layout, recompute="block",
                                  headroom=CONFIG.memory_headroom)  # fmt: skip
    config = CONFIG.model_copy(update={"stage_time_limit_s": 0.3})
    alone = StageSolver(problem, config).solve()
    assert alone.status == "FEASIBLE" and alone.best_bound < alone.objective  # stopped by it
    contended: list = []
    threads = [
        threading.Thread(target=lambda: contended.append(StageSolver(problem, config).solve()))
        for _ in range(min(32, (os.cpu_count() or 2) + 2))  # more solves than CPUs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for solution in contended:
        assert (solution.status, solution.objective, solution.best_bound) == (
            alone.status, alone.objective, alone.best_bound,
        )  # fmt: skip
        assert solution.assignment == alone.assignment
