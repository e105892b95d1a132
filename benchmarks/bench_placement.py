"""Placement on the cluster as it is and fleet packing: solve times and what they buy (run by
hand; not a timed test).

    python benchmarks/bench_placement.py

1. CP-SAT placement of a 16,384-GPU job-sized cluster with 1% of the nodes down and a few slow:
   HGX H100 (2,048 eight-GPU boards) and GB200 NVL72 (228 racks, TP16 blocks). Reports the
   model size, the solve time (median of three) and the whole placement (data, solve, order).
2. What the holes cost and what the placement gains over the default rank order (the first
   free GPUs in Megatron order), priced by the cost model on the actual rank -> GPU maps.
3. ``layout pack`` of three jobs on a mixed H100 + B200 pool.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import planner
from planner.catalog import load_cluster
from planner.catalog.cluster_state import load_cluster_state
from planner.search.placement import PlacementSolver, placement_problem, solve_placement
from planner.specs.cluster_state import ClusterState
from planner.specs.solver_config import SolverConfig
from planner.topology.state import apply_state

SEED = 2025
REPEATS = 3


def _state(num_nodes: int, down_share: float, slow: int, rng: np.random.Generator) -> ClusterState:
    nodes = rng.permutation(num_nodes)
    down = sorted(int(k) for k in nodes[: round(down_share * num_nodes)])
    slowed = sorted(int(k) for k in nodes[len(down) : len(down) + slow])
    return load_cluster_state(
        {
            "down": {"nodes": [f"node{k}" for k in down]},
            "slow": {f"node{k}": 0.85 for k in slowed},
        }
    )


def bench_solve(cluster_name: str, ranks: int, block: int) -> None:
    cluster = load_cluster(cluster_name)
    availability = apply_state(
        cluster, _state(cluster.num_nodes, 0.01, 4, np.random.default_rng(SEED))
    )
    problem = placement_problem(availability, ranks, block)
    solves, totals = [], []
    for _ in range(REPEATS):
        start = time.perf_counter()
        placement = solve_placement(availability, ranks, block, SolverConfig())
        totals.append(time.perf_counter() - start)
        assert placement.info is not None
        solves.append(placement.info.solve_time_s)
    info = placement.info
    size = PlacementSolver(problem, SolverConfig())._model.proto
    print(
        f"{cluster_name}: {ranks:,} ranks in blocks of {block}, {int(availability.down.sum()):,} "
        f"GPUs down, 4 slow nodes: {len(problem.nodes):,} node rows -> "
        f"{len(size.variables)} variables, {len(size.constraints)} constraints; {info.status}; "
        f"solve {statistics.median(solves):.3f} s, whole placement {statistics.median(totals):.3f} s"
    )


def bench_costs() -> None:
    cases = [
        ("405B", "hgx_h100x1024", {"global_batch": 1024}),
        ("671B", "gb200_nvl72x576", {"global_batch": 1024}),
    ]
    for model, cluster_name, workload in cases:
        cluster = load_cluster(cluster_name)
        state = _state(cluster.num_nodes, 0.01, 2, np.random.default_rng(SEED))
        start = time.perf_counter()
        result = planner.search(
            model=model, cluster=cluster, workload=workload, cluster_state=state, top=3
        )
        wall = time.perf_counter() - start
        report = result.best.cluster_state
        assert report is not None
        default = report.default_order
        gain = "default order: does not fit"
        if default is not None:
            extra = 100 * (default.step_time_s / report.step_time_s - 1)
            gain = (
                f"default order {default.step_time_s:.3f} s ({extra:+.1f}%, groups across "
                f"domains {default.groups_split}, slowest x{default.speed_factor:g})"
            )
        print(
            f"{model} on {cluster_name} with {report.gpus_down} GPUs down and "
            f"{len(report.slow_nodes)} slow nodes: {result.best.layout.short()} on "
            f"{report.gpus_used} GPUs, {report.step_time_s:.3f} s per step vs "
            f"{report.step_time_s_healthy:.3f} s healthy ({report.holes_cost_pct:+.1f}%); {gain}; "
            f"search + placement {wall:.2f} s"
        )


def bench_pack(folder: str = "/tmp/layout-bench-pack") -> None:
    import os

    os.makedirs(folder, exist_ok=True)
    files = {
        "pool.yaml": "name: mixed\npartitions:\n  - cluster: hgx_h100x128\n"
        "  - cluster: hgx_b200x64\n",
        "pretrain.yaml": "model: 70B\nworkload: {global_batch: 512}\nweight: 2\n",
        "finetune.yaml": "model: 8B\nworkload: {global_batch: 256}\nweight: 1\n",
        "chat.yaml": "model: 70B\nmode: serve\nworkload: {context: 8192, tpot_ms: 50}\n"
        "target: {tokens_per_s: 50000}\n",
    }
    for name, text in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as handle:
            handle.write(text)
    jobs = [os.path.join(folder, f) for f in ("pretrain.yaml", "finetune.yaml", "chat.yaml")]
    start = time.perf_counter()
    result = planner.pack(cluster=os.path.join(folder, "pool.yaml"), jobs=jobs)
    wall = time.perf_counter() - start
    print(f"pack on {result.cluster}: {result.objective} = {result.objective_value:.3f}")
    for job in result.jobs:
        print(
            f"  {job.name}: {job.partition} x{job.num_gpus} {job.plan.layout.short()}: "
            f"{job.tokens_per_s:,.0f} tokens/s ({100 * job.share_of_best:.0f}% of its best)"
        )
    fleet = result.subproblems[0]
    print(
        f"  {result.rows_considered} rows; fleet CP-SAT {fleet.variables} variables, "
        f"{fleet.constraints} constraints, {fleet.status} in {fleet.solve_time_s:.3f} s; "
        f"pack {wall:.1f} s (searches included)"
    )


def main() -> None:
    bench_solve("hgx_h100x16384", 15_360, 8)
    bench_solve("gb200_nvl72x16416", 14_336, 16)
    bench_costs()
    bench_pack()


if __name__ == "__main__":
    main()
