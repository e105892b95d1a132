"""Fleets (issue 19, item 4): the CP-SAT pack against a brute-force twin, and ``layout pack``
end to end (weights, targets, a mixed pool, bad files, no packing)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest

import planner
from planner.errors import InfeasibleError, SpecError
from planner.search.fleet import FleetProblem, FleetSolver, domain_classes, fleet_value
from planner.specs.solver_config import SolverConfig
from tests.test_cli import assert_one_line_error, run_main

# --- the CP-SAT model and its brute-force twin -------------------------------------------------


def _fits(blocks: list[int], capacity: list[int]) -> bool:
    """Whether the blocks fit the domains (depth-first, largest block first)."""
    blocks = sorted(blocks, reverse=True)
    left = list(capacity)

    def place(i: int) -> bool:
        if i == len(blocks):
            return True
        tried = set()
        for d, room in enumerate(left):
            if room >= blocks[i] and room not in tried:
                tried.add(room)
                left[d] -= blocks[i]
                if place(i + 1):
                    return True
                left[d] += blocks[i]
        return False

    return place(0)


def _brute_force(problem: FleetProblem) -> int | None:
    """The least objective over every choice of one row per job that packs (None: none)."""
    per_job = [
        [r for r, j in enumerate(problem.row_job) if j == job] for job in range(problem.num_jobs)
    ]
    best = None
    for picks in itertools.product(*per_job):
        ok = True
        for q, capacity in enumerate(problem.capacity):
            blocks = [
                problem.row_block[r]
                for r in picks
                if problem.row_partition[r] == q
                for _ in range(problem.row_gpus[r] // problem.row_block[r])
            ]
            if sum(blocks) > sum(capacity) or not _fits(blocks, capacity):
                ok = False
                break
        if ok:
            value = fleet_value(problem, list(picks))
            best = value if best is None else min(best, value)
    return best


def _random_problem(
    rng: np.random.Generator, capacities: list[list[int]], sizes: list[int]
) -> FleetProblem:
    jobs = int(rng.integers(2, 4))
    job, part, gpus, block, cost = [], [], [], [], []
    for j in range(jobs):
        for _ in range(int(rng.integers(1, 4))):
            q = int(rng.integers(len(capacities)))
            b = int(rng.choice(sizes))
            job.append(j)
            part.append(q)
            block.append(b)
            gpus.append(b * int(rng.integers(1, 4)))
            cost.append(int(rng.integers(-50, 50)))
    return FleetProblem(job, part, gpus, block, cost, capacities, jobs)


CASES = [  # (capacities per partition, block sizes)
    ([[8, 8, 8]], [1, 2, 4, 8]),  # a divisibility chain: one class of three domains
    ([[8, 8], [4, 4, 4]], [2, 4]),  # two partitions
    ([[6, 6, 6]], [2, 4]),  # 4 does not divide 6: one class per domain
    ([[72, 72]], [16, 8, 32]),  # TP16 / 32 on NVL72 racks: not a chain into 72
    ([[8, 6, 8]], [2, 4, 8]),  # unequal domains (holes)
]


@pytest.mark.parametrize("seed", range(15))
@pytest.mark.parametrize("case", CASES)
def test_fleet_matches_brute_force(case: tuple[list[list[int]], list[int]], seed: int) -> None:
    capacities, sizes = case
    problem = _random_problem(np.random.default_rng(seed), capacities, sizes)
    expected = _brute_force(problem)
    picks, blocks, info = FleetSolver(problem, SolverConfig()).solve()
    if expected is None:
        assert picks is None and info.status == "INFEASIBLE"
        return
    assert picks is not None and info.status == "OPTIMAL"
    assert fleet_value(problem, picks) == expected == info.objective == info.best_bound
    assert sorted(problem.row_job[r] for r in picks) == list(range(problem.num_jobs))
    for q, capacity in enumerate(problem.capacity):  # the per-domain spread respects capacity
        for d, room in enumerate(capacity):
            used = sum(problem.row_block[r] * n for (r, dd), n in blocks.items()
                       if dd == d and problem.row_partition[r] == q)  # fmt: skip
            assert used <= room
    for r in picks:
        placed = sum(n for (rr, _), n in blocks.items() if rr == r)
        assert placed * problem.row_block[r] == problem.row_gpus[r]


def test_identical_domains_form_one_class_only_for_a_chain() -> None:
    chain = FleetProblem([0, 1], [0, 0], [8, 4], [8, 2], [0, 0], [[8, 8, 8, 8]], 2)
    assert domain_classes(chain, 0) == [[0, 1, 2, 3]]
    racks = FleetProblem([0, 1], [0, 0], [64, 16], [16, 8], [0, 0], [[72, 72]], 2)
    assert domain_classes(racks, 0) == [[0], [1]]


# --- layout pack end to end --------------------------------------------------------------------


def _job(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("jobs")
    return {
        "train": _job(tmp, "train", "model: 8B\nworkload: {global_batch: 256}\nweight: 2\n"),
        "train1": _job(tmp, "train1", "model: 8B\nworkload: {global_batch: 256}\n"),
        "serve": _job(tmp, "serve", "model: 8B\nmode: serve\nworkload: {context: 4096}\n"),
        "fast": _job(
            tmp, "fast", "model: 8B\nworkload: {global_batch: 256}\ntarget: {step_time_s: 20}\n"
        ),
        "rate": _job(
            tmp,
            "rate",
            "model: 8B\nmode: serve\nworkload: {context: 4096}\ntarget: {tokens_per_s: 20000}\n",
        ),
        "huge": _job(
            tmp, "huge", "model: 8B\nworkload: {global_batch: 256}\ntarget: {tokens_per_s: 1e9}\n"
        ),
    }


def _check_disjoint(result: planner.specs.fleet.PackResult) -> None:  # type: ignore[name-defined]
    used: dict[tuple[str, int], int] = {}
    for job in result.jobs:
        assert sum(s.gpus for s in job.allocation) == job.num_gpus == job.plan.num_gpus
        for share in job.allocation:
            key = (job.partition, share.domain)
            used[key] = used.get(key, 0) + share.gpus
    per_domain = {p.name: 8 for p in result.partitions}  # HGX boards
    assert all(v <= per_domain[k[0]] for k, v in used.items())
    assert result.gpus_used == sum(j.num_gpus for j in result.jobs)


def test_pack_weighted_jobs_share_a_cluster(jobs: dict[str, str]) -> None:
    result = planner.pack(cluster="hgx_h100x32", jobs=[jobs["train"], jobs["serve"]])
    _check_disjoint(result)
    assert [j.name for j in result.jobs] == ["train", "serve"]
    assert result.gpus_used <= 32
    assert result.subproblems[0].name == "fleet" and result.subproblems[0].status == "OPTIMAL"
    value = sum((j.weight or 0) * j.share_of_best for j in result.jobs)
    assert result.objective_value == pytest.approx(value)
    # the weight-2 training job gets at least what it would get with weight 1
    even = planner.pack(cluster="hgx_h100x32", jobs=[jobs["train1"], jobs["serve"]])
    assert result.jobs[0].num_gpus >= even.jobs[0].num_gpus


def test_pack_targets_take_the_fewest_gpus(jobs: dict[str, str]) -> None:
    result = planner.pack(cluster="hgx_h100x32", jobs=[jobs["fast"], jobs["rate"]])
    _check_disjoint(result)
    fast, rate = result.jobs
    assert fast.plan.step_time_s <= 20 and rate.tokens_per_s >= 20000
    assert result.objective_value == result.gpus_used
    # one board fewer misses the target: each count is the fewest that meets it
    for job, key in ((fast, "fast"), (rate, "rate")):
        if job.num_gpus > 8:
            with pytest.raises(InfeasibleError, match="misses the target"):
                planner.pack(cluster=f"hgx_h100x{job.num_gpus - 8}", jobs=[jobs[key]])


def test_pack_on_a_mixed_pool(tmp_path: Path, jobs: dict[str, str]) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text("name: mixed\npartitions:\n  - cluster: hgx_h100x16\n"
                    "  - {name: blackwell, cluster: hgx_b200x8}\n", encoding="utf-8")  # fmt: skip
    result = planner.pack(cluster=pool, jobs=[jobs["train"], jobs["serve"]])
    assert [p.name for p in result.partitions] == ["hgx_h100x16", "blackwell"]
    assert {j.partition for j in result.jobs} <= {"hgx_h100x16", "blackwell"}
    for part in result.partitions:
        assert part.gpus_used <= part.gpus_free
    code, out, err = run_main(["pack", "--cluster", str(pool), "--job", jobs["train"],
                               "--job", jobs["serve"], "--json"])  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert data["jobs"][0]["plan"]["mode"] == "train" and data["jobs"][1]["plan"]["mode"] == "serve"
    code, out, err = run_main(["pack", "--cluster", str(pool), "--job", jobs["train"]])
    assert code == 0 and "cp-sat  : fleet" in out


def test_pack_respects_a_cluster_state(tmp_path: Path, jobs: dict[str, str]) -> None:
    state = tmp_path / "state.yaml"
    state.write_text("down: {nodes: [node0]}\ntaken: {nodes: [node2]}\n", encoding="utf-8")
    result = planner.pack(cluster="hgx_h100x32", jobs=[jobs["train"]], cluster_state=state)
    assert result.partitions[0].gpus_free == 16
    assert all(s.domain not in (0, 2) for s in result.jobs[0].allocation)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("model: 8B\nweight: 1\ntarget: {tokens_per_s: 5}\n", "a weight or a target"),
        ("model: 8B\nmode: serve\ntarget: {step_time_s: 5}\n", "applies to training"),
        ("model: 8B\nwieght: 1\n", "unknown key"),
        ("model: 8B\ntarget: {}\n", "exactly one"),
        ("model: 8B\nworkload: {seq_len: -1}\n", "workload"),
        ("model: nosuchmodel\n", "nosuchmodel"),
        ("model: 8B\nweight: true\n", "weight"),
        ("model: 8B\nfix: {tq: 3}\n", "cannot pin 'tq'"),
        ("model: 8B\nworkload: {seq_len: 1000000}\n", "exceeds the 131072-token context"),
        ("model: 8B\npartitions: [elsewhere]\n", "partition 'elsewhere' is not in"),
    ],
)
def test_bad_job_files_are_one_line_exit_2(tmp_path: Path, text: str, words: str) -> None:
    path = _job(tmp_path, "bad", text)
    code, _, err = run_main(["pack", "--cluster", "hgx_h100x8", "--job", path])
    assert words in assert_one_line_error(code, err, 2)
    with pytest.raises(SpecError):
        planner.pack(cluster="hgx_h100x8", jobs=[path])


def test_no_packing_exits_1_naming_the_limit(tmp_path: Path, jobs: dict[str, str]) -> None:
    code, _, err = run_main(["pack", "--cluster", "hgx_h100x8", "--job", jobs["huge"]])
    line = assert_one_line_error(code, err, 1)
    assert "job 'huge'" in line and "misses the target" in line
    big = _job(tmp_path, "big", "model: 70B\nworkload: {global_batch: 512}\n")
    code, _, err = run_main(["pack", "--cluster", "hgx_h100x32", "--job", big, "--job", big])
    line = assert_one_line_error(code, err, 2)  # the same job twice: a duplicate name
    assert "also the name" in line
    other = _job(tmp_path, "big2", "model: 70B\nworkload: {global_batch: 512}\n")
    # 70B needs at least 16 H100s (24 under Megatron's rules: ZeRO-3 without pipeline
    # parallelism): two need twice that, more than the 24 there are
    with pytest.raises(InfeasibleError, match=r"need (\d+) accelerators .* short by") as info:
        planner.pack(cluster="hgx_h100x24", jobs=[big, other])
    need = int(re.search(r"need (\d+) accelerators", str(info.value)).group(1))  # type: ignore[union-attr]
    assert need >= 32 and f"short by {need - 24}" in str(info.value)


TIMINGS = {"wall_s", "solve_time_s", "search_time_s"}
"""Fields of a pack's answer that are wall-clock measurements, not answers."""


def _timeless(value: object) -> object:
    """``value`` (a dumped result) without its wall-clock fields, at any depth."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def test_pack_gives_the_same_answer_with_any_number_of_workers(
    jobs: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows' searches run over a pool of processes (``workers``) and come back in request
    order: the packing is the one a single process finds, but for the solvers' wall times."""
    from planner.search import pool

    monkeypatch.setattr(pool, "available_cores", lambda: 2)  # a pool even on a 1-core runner
    done: list[tuple[int, int]] = []
    notes: list[str] = []

    args = {"cluster": "hgx_h100x16", "jobs": [jobs["train"], jobs["serve"]]}
    one = planner.pack(**args)
    two = planner.pack(
        **args, workers=2, progress=lambda d, t: done.append((d, t)), note=notes.append
    )
    assert _timeless(two.model_dump()) == _timeless(one.model_dump())
    total = done[-1][1]
    assert done == [(i, total) for i in range(1, total + 1)] and not notes
    planner.pack(**args, workers=3, note=notes.append)  # more than the (patched) 2 cores
    assert notes == [
        "--workers 3 is more than the 2 cores available here: starting at most 2 processes"
    ]


@pytest.mark.parametrize(
    ("argument", "value", "words"),
    [
        ("workers", 0, "workers"),
        ("workers", "2", "workers"),
        ("progress", "yes", "progress(done, total)"),
        ("note", 3, "note(line)"),
    ],
)
def test_pack_refuses_bad_worker_arguments_in_one_line(
    jobs: dict[str, str], argument: str, value: object, words: str
) -> None:
    with pytest.raises(SpecError, match=re.escape(words)) as info:
        planner.pack(cluster="hgx_h100x16", jobs=[jobs["train"]], **{argument: value})
    assert "\n" not in str(info.value)


def test_cli_pack_workers(jobs: dict[str, str]) -> None:
    argv = ["pack", "--cluster", "hgx_h100x16", "--job", jobs["train"], "--json"]
    code, out, err = run_main([*argv, "--workers", "2"])
    assert code == 0, err
    assert json.loads(out)["jobs"][0]["name"] == "train"
    code, _, err = run_main([*argv, "--workers", "0"])
    assert code == 2 and "--workers" in err
