"""Plan a Hugging Face checkpoint's architecture from its config.json: the parameter count the
planner computes from it, the best layout on a cluster as torchtitan runs it, the band and what
widened it, and the torchtitan job-config settings.

    python examples/plan_hf_config.py --config path/to/config.json --cluster hgx_h100x64
    python examples/plan_hf_config.py --config gemma-2-9b/config.json --cluster hgx_b200x16 \\
        --seq-len 8192 --expert-load-imbalance 1.2

The config's ``model_type`` picks the mapping (``layout search --help`` names them; multimodal
wrappers such as Gemma 3's, Llama 4's and Qwen-VL's are refused: pass their ``text_config``;
a config saved by transformers 5, its RoPE in ``rope_parameters``, reads as one saved by 4). A
MoE model's
``--expert-load-imbalance`` is the busiest expert rank's tokens over the balanced share (1 =
the forced balance of NVIDIA's benchmarks, the planner's default).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import planner
from planner.catalog import load_model
from planner.cost.params import active_params, total_params
from planner.errors import run_script


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path, help="a config.json file")
    parser.add_argument("--cluster", default="hgx_h100x64")
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--expert-load-imbalance", type=float, default=None)
    args = parser.parse_args(argv)
    spec = load_model(str(args.config))  # the same import `--model config.json` runs
    moe = spec.moe
    kind = "dense" if moe is None else f"MoE {moe.num_experts}e top-{moe.top_k}"
    print(
        f"# {spec.name} ({spec.family}, {kind}): {total_params(spec) / 1e9:.2f}B parameters, "
        f"{active_params(spec) / 1e9:.2f}B active per token"
    )
    # scored as torchtitan runs it (FSDP2, SDPA, torch.compile), since that is what it exports to
    settings: dict[str, object] = {"seq_len": args.seq_len, "framework": "torchtitan"}
    if args.expert_load_imbalance is not None:
        settings["expert_load_imbalance"] = args.expert_load_imbalance
    result = planner.search(model=spec, cluster=args.cluster, **settings)
    best = result.best
    print(f"# {args.cluster}: {best.layout.short()}")
    print(
        f"# predicted {best.step_time_s:.2f} s/step (±{best.uncertainty_pct:.0f}%), "
        f"{best.tokens_per_s_per_gpu:,.0f} tokens/s/GPU"
    )
    for warning in best.warnings:
        print(f"# warning: {warning}")
    print(planner.export(result, format="torchtitan", model=spec).text)  # its notes included
    return 0


if __name__ == "__main__":
    run_script(main)  # one line and exit 2 on bad input; exit 0 when a reader leaves (| head)
