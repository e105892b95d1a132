"""What ``layout pack --workers`` buys on the example pool (run by hand; not a test).

    python benchmarks/bench_pack_workers.py                       # workers 1 and 2, 2 rounds
    python benchmarks/bench_pack_workers.py --workers 1 2 4 --rounds 3

A pack runs one search per job, partition and legal GPU count (the example pool's three jobs on
128 H100 + 64 B200: 42 searches) and then one small CP-SAT model; the searches are what the
workers share out (``planner/search/pool.py``). Each run is ``layout pack`` in a fresh process
(its imports included), timed by wall clock and by the CPU its process tree used
(``os.wait4``), with the load average beside it: on a shared machine the wall-clock speed-up is
bounded by the CPU share the run got, not by the code. Every run's packing must be the first
run's (compared without the timing fields), or the script stops.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "examples" / "fleet"
PACK = [
    "pack", "--cluster", str(FLEET / "pool.yaml"),
    "--job", str(FLEET / "pretrain.yaml"), "--job", str(FLEET / "finetune.yaml"),
    "--job", str(FLEET / "chat.yaml"), "--json",
]  # fmt: skip
TIMINGS = {"wall_s", "solve_time_s", "search_time_s"}
"""Fields of the answer that are wall-clock measurements."""


def load() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def timeless(value: object) -> object:
    """``value`` without its wall-clock fields, at any depth."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def run_cli(workers: int) -> tuple[float, float, object]:
    """(wall s, CPU s of the process tree, the packing without its timings) of one pack."""
    entry = "import sys; from planner.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", entry, *PACK, "--workers", str(workers)]
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if status != 0:
            raise SystemExit(f"pack --workers {workers} failed ({status})")
        out.seek(0)
        answer = timeless(json.loads(out.read()))
    return wall, usage.ru_utime + usage.ru_stime, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"cores available: {len(os.sched_getaffinity(0))}")
    first = None
    for _ in range(args.rounds):
        for workers in args.workers:
            wall, cpu, answer = run_cli(workers)
            if first is None:
                first = answer
            elif answer != first:
                raise SystemExit(f"pack --workers {workers} packed differently from the first run")
            print(
                f"workers {workers}: wall {wall:5.2f} s  CPU {cpu:5.2f} s  "
                f"(CPU share {cpu / wall:.2f}; load {load()})"
            )


if __name__ == "__main__":
    main()
