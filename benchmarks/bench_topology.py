"""Wall time and peak memory of the topology paths (a script, not a timed test).

Run: ``python benchmarks/bench_topology.py``. Each CLI command runs in a fresh process so its
peak RSS is its own (``os.wait4`` rusage); the in-process part times ``comm_domains`` cold (new
shapes) and warm (cached lookups), which is what the search calls for every candidate.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

COMMANDS = [
    ["show", "hgx_h100x131072", "--json"],
    ["show", "gb200_nvl72x100008", "--json"],
    ["show", "tpu_v5px18432", "--json"],
    ["search", "--model", "70B", "--cluster", "hgx_b200x16", "--json"],
    ["search", "--model", "405B", "--cluster", "hgx_h100x4096", "--json"],
    [
        "search",
        "--model",
        "405B",
        "--cluster",
        "hgx_h100x4096",
        "--oversubscription",
        "4",
        "--json",
    ],
]


def run_cli(args: list[str]) -> tuple[float, float, int]:
    """(wall s, peak RSS MiB, exit code) of ``layout ARGS`` in a fresh process."""
    layout = shutil.which("layout") or os.path.join(os.path.dirname(sys.executable), "layout")
    start = time.perf_counter()
    proc = subprocess.Popen([layout, *args], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def comm_domains_timings() -> list[str]:
    """Cold and warm time per comm_domains call over a sweep of layouts."""
    from planner.catalog import load_cluster
    from planner.specs.layout import Layout
    from planner.topology import comm_domains

    lines = []
    for name in ("hgx_b200x16", "hgx_h100x4096", "hgx_h100x131072", "tpu_v5px18432"):
        cluster = load_cluster(name)
        n = cluster.num_accelerators
        layouts = [
            Layout(tp=tp, pp=pp, dp=n // (tp * pp), ep=min(8, n // (tp * pp)))
            for tp in (1, 2, 4, 8)
            for pp in (1, 2, 4, 8, 16)
            if n % (tp * pp) == 0
        ]
        start = time.perf_counter()
        for layout in layouts:
            comm_domains(cluster, layout)
        cold = (time.perf_counter() - start) / len(layouts)
        start = time.perf_counter()
        for _ in range(100):
            for layout in layouts:
                comm_domains(cluster, layout)
        warm = (time.perf_counter() - start) / (100 * len(layouts))
        lines.append(
            f"comm_domains {name:<18} {len(layouts):>3} layouts: cold {cold * 1e3:7.2f} ms, "
            f"warm {warm * 1e6:6.2f} us per call"
        )
    return lines


def main() -> None:
    """Print one line per measurement."""
    print(f"cpus: {os.cpu_count()}")
    for args in COMMANDS:
        wall, rss, code = run_cli(args)
        print(f"layout {' '.join(args):<78} {wall:6.2f} s  {rss:7.1f} MiB  exit {code}")
    for line in comm_domains_timings():
        print(line)


if __name__ == "__main__":
    main()
