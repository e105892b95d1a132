"""The CP-SAT pipeline-stage partition against the even split (run by hand; not a timed test).

    python benchmarks/bench_stages.py

For DeepSeek-V3 (61 layers: 3 dense first, 58 MoE, one MTP module and a 129k-vocabulary head
on the last stage), Llama 3.1 405B (126 layers on PP16) and gpt-oss-120b (sliding and full
attention alternating, interleaved: the branch and bound's case), each line scores one layout with the
even split and with the CP-SAT split (both re-scored by the float cost model) and prints the
step time and peak memory of each, the gain, the split, and the solve's size, status and time.
"""

from __future__ import annotations

import time

from planner.catalog import load_cluster, load_model
from planner.search.evaluate import score
from planner.search.solve.stages import optimise_pipeline
from planner.specs.layout import Layout
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import TrainWorkload
from planner.units import GiB

DEEPSEEK_V3 = TrainWorkload(seq_len=4096, global_batch=4096, mtp_num_layers=1)
LLAMA_405B = TrainWorkload(seq_len=8192, global_batch=2048)
CASES: list[tuple[str, str, TrainWorkload, Layout]] = [
    ("671B", "hgx_h800x2048", DEEPSEEK_V3, Layout(tp=1, pp=16, dp=128, ep=64)),
    ("671B", "hgx_h800x2048", DEEPSEEK_V3, Layout(tp=2, pp=16, dp=64, ep=64, recompute="full")),
    ("671B", "hgx_h800x2048", DEEPSEEK_V3, Layout(tp=2, pp=16, vpp=2, dp=64, ep=64)),
    ("671B", "hgx_h800x2048", DEEPSEEK_V3, Layout(tp=2, pp=8, dp=128, ep=64, recompute="full")),
    ("405B", "hgx_h100x16384", LLAMA_405B, Layout(tp=8, pp=16, dp=128, recompute="full")),
    ("405B", "hgx_h100x16384", LLAMA_405B, Layout(tp=8, pp=16, dp=128, recompute="selective")),
    ("405B", "hgx_h100x16384", LLAMA_405B, Layout(tp=8, pp=16, vpp=2, dp=128, recompute="full")),
    ("405B", "hgx_h100x2048", LLAMA_405B, Layout(tp=8, pp=16, dp=16, recompute="full")),
    # two kinds of layer (sliding and full attention alternate), interleaved: branch and bound
    ("gpt-oss-120b", "hgx_h100x64", TrainWorkload(), Layout(pp=8, vpp=4, dp=8, ep=8)),
    ("gpt-oss-120b", "hgx_b200x256", TrainWorkload(), Layout(pp=4, vpp=9, dp=64, ep=8, mbs=2)),
]


def main() -> None:
    """One line per case and recompute choice."""
    for name, cluster_name, workload, layout in CASES:
        model, cluster = load_model(name), load_cluster(cluster_name)
        even = score(model, cluster, workload, layout)
        for recompute in ("block", "per_stage"):
            if recompute == "per_stage" and str(layout.recompute) != "full":
                continue
            config = SolverConfig(stage_recompute=recompute)  # type: ignore[arg-type]
            start = time.perf_counter()
            out = optimise_pipeline(model, cluster, workload, layout, even=even, config=config)
            wall = time.perf_counter() - start
            best = out.cost or even
            gain = 100.0 * (1.0 - best.step_time_s / even.step_time_s)
            split = list(out.split.chunk_layers) if out.split else "even"
            redo = list(out.split.recompute_layers or []) if out.split else ""
            info = out.info
            print(
                f"{name:<12} {layout.short():<38} {recompute:<9} even {even.step_time_s:7.3f} s "
                f"{even.peak_memory.total / GiB:5.1f} GiB -> {best.step_time_s:7.3f} s "
                f"{best.peak_memory.total / GiB:5.1f} GiB ({gain:4.1f}% faster)  "
                f"{info.status} {info.solved_by} {info.num_variables} vars "
                f"{info.num_constraints} cons {info.wall_s:.2f} s (total {wall:.2f} s)"
            )
            print(f"      layers {split} recompute {redo}")


if __name__ == "__main__":
    main()
