"""Scale: plans for 131,072 GPUs and a 2-trillion-parameter MoE, with wall time and peak memory
(run by hand; not a timed test: tests/test_hostile.py only checks that one case completes).

    python benchmarks/bench_scale.py            # every case, one fresh process each
    python benchmarks/bench_scale.py --case 0   # one case, in this process

Each case runs ``planner.cli.main`` in its own Python process, so the peak resident set size
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, KiB on Linux) is that case's alone, imports
included. ``synthetic-moe-2t`` is models/synthetic-moe-2t.yaml (a DeepSeek-V3-style MoE scaled
to 2.009T parameters; not a released model).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import resource
import subprocess
import sys
import time

BIG = ["--cluster", "hgx_h100x131072"]
MOE = ["--model", "synthetic-moe-2t"]
CASES: list[list[str]] = [
    ["search", *MOE, *BIG, "--seq-len", "4096", "--global-batch", "16384", "--precision", "fp8"],
    ["search", *MOE, *BIG, "--seq-len", "8192", "--global-batch", "65536"],
    ["search", *MOE, *BIG, "--seq-len", "4096", "--global-batch", "16384", "--precision", "auto"],
    ["search", *MOE, "--cluster", "gb200_nvl72x131040", "--global-batch", "16380"],
    ["search", "--model", "405B", *BIG, "--global-batch", "16384"],
    ["search", "--mode", "serve", *MOE, *BIG],
    # The two that search many GPU counts (a full enumeration per rung of the size ladder):
    ["search", *MOE, *BIG, "--seq-len", "4096", "--global-batch", "16384", "--target-step-time", "10"],
    ["search", *MOE, *BIG, "--seq-len", "4096", "--global-batch", "16384", "--gpus", "65536"],
]  # fmt: skip


def run_case(index: int) -> dict[str, object]:
    """One case in this process: exit code, wall seconds, peak RSS and the best layout."""
    from planner.cli import main

    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*CASES[index], "--json"])
    wall = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    best = json.loads(out.getvalue())["best"] if code == 0 else None
    return {
        "case": " ".join(CASES[index]),
        "exit": code,
        "wall_s": round(wall, 2),
        "peak_rss_mib": round(peak_mib),
        "layout": best["layout"] if best else err.getvalue().strip(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", type=int, help="run only this case, in this process")
    args = parser.parse_args()
    if args.case is not None:
        print(json.dumps(run_case(args.case)))
        return
    for index in range(len(CASES)):
        done = subprocess.run(
            [sys.executable, __file__, "--case", str(index)],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(done.stdout)
        print(
            f"{row['wall_s']:7.2f} s  {row['peak_rss_mib']:5d} MiB  exit {row['exit']}  "
            f"{row['case']}\n    {row['layout']}"
        )


if __name__ == "__main__":
    main()
