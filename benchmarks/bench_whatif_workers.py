"""Where a what-if sweep's time goes, and what ``--workers`` buys (run by hand; not a test).

    python benchmarks/bench_whatif_workers.py               # 36 scenarios, workers 1 and 2, 2 rounds
    python benchmarks/bench_whatif_workers.py --workers 1 2 4 --rounds 3

Each run is ``layout whatif`` in a fresh process (its imports included), timed by wall clock
and by the CPU its process tree used (``os.wait4``): the CPU seconds per scenario say what the
work costs, the CPU share (CPU / wall) how much of the machine the sweep got. On a shared
machine the wall-clock speed-up is bounded by that share, not by the code: the script prints
the load average beside every run. It also prints the costs a worker process adds: the bytes
pickled per scenario request and result, and the start-up of a worker under each start method
(fork inherits the parent's imports; spawn re-imports; forkserver with the preload that
``planner.search.pool`` sets up imports once).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import pickle
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

SWEEP = [
    "whatif", "--model", "70B", "--cluster", "hgx_h100x256",
    "--vary", "nic_gbps=200,400,800", "--vary", "oversubscription=1,2,4",
    "--vary", "domain_size=8,16", "--vary", "precision=bf16,fp8", "--json",
]  # fmt: skip
"""36 scenarios: 3 NIC speeds x 3 oversubscriptions x 2 NVLink domain sizes x 2 precisions."""


def load() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def run_cli(workers: int) -> tuple[float, float]:
    """(wall s, CPU s of the process tree) of one sweep."""
    entry = "import sys; from planner.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", entry, *SWEEP, "--workers", str(workers)]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"whatif --workers {workers} failed ({status})")
    return wall, usage.ru_utime + usage.ru_stime


def _worker_start(_: int) -> float:
    start = time.perf_counter()
    import planner.search.whatif  # noqa: F401
    from planner.api import load_cluster, load_model

    load_model("70B")
    load_cluster("hgx_h100x256")
    return time.perf_counter() - start


def start_costs() -> None:
    """Bytes pickled per scenario, and a worker's start-up under each start method (run in a
    fresh interpreter that has not imported the planner, as a spawned worker would be)."""
    import planner.search.whatif as whatif
    from planner.api import load_cluster, load_model
    from planner.specs.workload import TrainWorkload

    request = whatif.ScenarioRequest(
        model=load_model("70B"),
        base=whatif.ClusterBase.of(load_cluster("hgx_h100x256")),
        workload=TrainWorkload(),
        vary={"nic_gbps": 400.0},
    )
    start = time.perf_counter()
    scenario = whatif.run_scenario(request)
    one = time.perf_counter() - start
    print(
        f"one scenario in this process: {one:.2f} s; pickled request {len(pickle.dumps(request)):,} "
        f"bytes, result {len(pickle.dumps(scenario)):,} bytes"
    )


def start_methods() -> None:
    for method in ("fork", "spawn", "forkserver"):
        if method not in mp.get_all_start_methods():
            continue
        ctx = mp.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(["planner.search.whatif", "planner.api"])
        start = time.perf_counter()
        with ProcessPoolExecutor(2, mp_context=ctx) as pool:
            inner = max(pool.map(_worker_start, range(2)))
        print(
            f"  {method:10s}: 2 workers ready after {time.perf_counter() - start:.2f} s "
            f"(imports and catalog in the worker: {inner:.2f} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} usable; load {load()}")
    print("worker start-up (a fresh interpreter):")
    start_methods()
    start_costs()
    results: dict[int, list[tuple[float, float]]] = {n: [] for n in args.workers}
    for _ in range(args.rounds):  # interleaved, so a change in load hits every setting alike
        for n in args.workers:
            wall, cpu = run_cli(n)
            results[n].append((wall, cpu))
            print(
                f"  --workers {n}: {wall:5.1f} s wall, {cpu:5.1f} s CPU "
                f"({cpu / 36:.2f} s per scenario, share {cpu / wall:.2f} CPUs); load {load()}"
            )
    base = min(w for w, _ in results[args.workers[0]])
    for n, runs in results.items():
        best = min(w for w, _ in runs)
        first = args.workers[0]
        print(
            f"--workers {n}: best {best:.1f} s, speed-up {base / best:.2f}x over --workers {first}"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--start":
        start_methods()
    else:
        main()
