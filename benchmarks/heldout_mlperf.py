"""Held-out check on MLPerf Training submissions (run by hand, a few seconds):

    python benchmarks/heldout_mlperf.py [BENCHMARK ...]   (llama31_8b, llama31_405b, gpt3,
                                                           gpt3_gpu, deepseekv3_671b,
                                                           gpt_oss_20b; all)

The rows are tests/validation/heldout/mlperf.yaml (the validation row schema, each with its source
and arithmetic; the settings each config states in recipes.yaml beside it). Nothing is fitted on
them: they are not in the files ``layout calibrate --fit`` reads. Five benchmarks, GPT-3 in two
groups:

- llama31_8b (MLPerf Training v5.1, MLP1-16 and MLP38-60; v6.0, MLP17-37): AMD's MI355X and MI350X and
  GigaComputing's MI355X (AMD's Transformer-Engine-on-ROCm Megatron stack, FP8; no fitted AMD
  family, so the priors are the transferred ones, ``planner/catalog/transfer.py``), NVIDIA's
  GB300/GB200 at 8 GPUs (NVFP4), 72 and 512 GPUs (FP8), and partners' runs: DGX B200 (University
  of Florida, 8 and 256 GPUs), Oracle's B200 over RoCE (64), Dell's and Lenovo's HGX B300 (8; FP8
  and NVFP4), HPE's H200 (64) and Cisco's H100 over Ethernet (64); in v6.0 AMD's MLPerf stack in
  MXFP4 on MI355X and MI350X (8 GPUs, Dell's and MiTAC's too; Cisco's 16 over RoCE), MiTAC's
  MI325X (FP8), NVIDIA's GB300 in NVFP4 (8, 72) and GB200 (1,024), Cisco's H200 (16) and H100
  (64, 128), Cisco's and Dell's HGX B300 in NVFP4 (8, 16); MLP38-60 add the other v5.1 partner
  runs: Cisco's, Dell's and Supermicro's MI350X/MI355X, Cisco's 128 H100, Lambda's GB300 rack,
  Dell, Lenovo, Nebius, Supermicro and other B200/B300 systems at 8-32 GPUs, and the University
  of Florida's and Verda's B200 at 16-128;
- llama31_405b (v5.0, v5.1 and v6.0, MLN rows): NVIDIA's H100 at 512-8,192 GPUs (FP8) and
  GB200/GB300 at 256-2,560 GPUs (FP8 and NVFP4), Nebius's H200 (512, 1,024) and the University of
  Florida's DGX B200 (256, 448); MLN18-25 add NVIDIA's 5,120 GB200, the IBM/CoreWeave/NVIDIA
  Carina GB200 at 512-2,496 and NVIDIA's H100 at 2,432 and 2,560; in v6.0 (NVFP4, full-iteration
  CUDA graphs) NVIDIA's GB300 at 512 and 2,048, CoreWeave's GB300 at 4,096, Azure's GB200 at
  8,192 and HPE's single GB300 rack (72);
- gpt3 (v3.1-v4.1, MLG rows): Google's GPT-3 175B on TPU v5p (512-6,144 chips) and Trillium
  (512-3,072 chips) with MaxText, and on TPU v5e (4,096 chips) with Pax, all int8 (AQT): no TPU
  family is fitted, so the factors are the transferred priors, and the step time is read from
  blocks that include an evaluation pass (each row's notes);
- gpt3_gpu (v3.0-v4.1, MLH rows): the same GPT-3 175B benchmark on NVIDIA GPUs with NVIDIA's NeMo
  recipe (FP8, TP4, PP6-8 with interleaving): NVIDIA's Eos at 512-11,616 H100, Azure's 10,752
  H100, Supermicro's 512 and Oracle's 1,536 and 3,072 H100 (RoCE), NVIDIA's 64-GPU B200
  preview, and v3.0's DGX H100 (512, 768) and CoreWeave H100 (768-3,584; MLH17-21, one
  container release older); these are the largest jobs of the held-out set, up to 1.9 times the largest fitted
  H100 job (6,144 GPUs);
- deepseekv3_671b (v6.0, MLD rows): DeepSeek-V3 in MXFP8 (PP4 x VPP4, EP32, HybridEP, the whole
  iteration and the optimizer in CUDA graphs) on NVIDIA's, CoreWeave's and Google's GB300 and GB200
  NVL72 systems, 256-8,192 GPUs;
- gpt_oss_20b (v6.0, MLO rows): GPT-OSS 20B in MXFP8 on GB300 (4-512 GPUs), GB200, B300 and B200
  from NVIDIA and partners, and in FP8 on Cisco's H100 (64, 128).

Each row is predicted exactly as ``layout validate`` predicts a validation row (its stated layout
pinned, the recipe's settings applied, anything unstated searched), and the summary says how
many fell inside the ± band the planner printed for them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from heldout import print_summary, scored

from planner.accuracy.rows import expand_cases, load_rows
from planner.accuracy.run import predict_case
from planner.errors import InfeasibleError, SpecError, run_script

ROWS_FILE = Path(__file__).resolve().parents[1] / "tests" / "validation" / "heldout" / "mlperf.yaml"
"""The held-out MLPerf rows."""
GROUPS = {
    "MLP": "llama31_8b",
    "MLN": "llama31_405b",
    "MLG": "gpt3",
    "MLD": "deepseekv3_671b",
    "MLO": "gpt_oss_20b",
    "MLH": "gpt3_gpu",
}
"""Benchmark of each row-id prefix."""


def main(argv: list[str] | None = None) -> None:
    """Predict every row (of the benchmarks named, default all) and print one line a row, then
    the summary per benchmark and overall."""
    wanted = set(sys.argv[1:] if argv is None else argv) or set(GROUPS.values())
    unknown = wanted - set(GROUPS.values())
    if unknown:
        raise SpecError(
            f"unknown benchmark {sorted(unknown)[0]!r}; choose from {', '.join(GROUPS.values())}"
        )
    groups: dict[str, tuple[list[float], list[float]]] = {}
    levels: set[float | None] = set()
    for case in expand_cases(load_rows(ROWS_FILE)):
        if GROUPS[case.id[:3]] not in wanted:
            continue
        try:
            plan = predict_case(case)
        except (SpecError, InfeasibleError) as exc:
            print(
                f"{case.id:6s} {case.row.cluster:18s} not evaluated: {' '.join(str(exc).split())}"
            )
            continue
        error, band, scores = scored(plan, case.measured_tokens_per_s_per_gpu)
        levels.add(plan.uncertainty_level)
        group = GROUPS[case.id[:3]]
        for name in (group, "all"):
            errs, bands = groups.setdefault(name, ([], []))
            errs.append(error)
            bands.append(band)
        print(
            f"{case.id:6s} {case.row.cluster:18s} {case.row.precision:5s} "
            f"{plan.layout.short():42s} {scores}"
        )
    for name in (*GROUPS.values(), "all"):
        if name in groups:
            print(f"-- {name}")
            print_summary(*groups[name], levels)


if __name__ == "__main__":
    run_script(main)  # an unknown benchmark name: one line and exit 2
