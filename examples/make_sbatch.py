"""Generate a Slurm sbatch script that runs the best plan with Megatron-LM.

    python examples/make_sbatch.py > train.sbatch                 # 70B on hgx_b200x16
    python examples/make_sbatch.py --model 8B --cluster hgx_h100x8 --partition gpu --time 4:00:00

The script asks Slurm for the plan's nodes and GPUs, starts one torchrun per node with srun
(node rank = SLURM_NODEID, rendezvous on the first node), and passes the Megatron-LM arguments
of ``layout export --format megatron`` (a bash array, names of Megatron-LM core_v0.19.0).
"""

from __future__ import annotations

import argparse
import shlex
from collections import Counter

import planner
from planner.errors import run_script


def sbatch_script(
    *, model: str, cluster: str, megatron: str, partition: str | None, time: str
) -> str:
    """The sbatch script text for the best plan of ``model`` on ``cluster``."""
    result = planner.search(model=model, cluster=cluster)
    best = result.best
    export = planner.export(result, format="megatron")
    per_node = Counter(record.node for record in planner.placement(result))
    nodes, gpus = len(per_node), max(per_node.values())
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={shlex.quote('layout-' + best.model)}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={gpus}",
        "#SBATCH --exclusive",
        f"#SBATCH --time={time}",
    ]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    lines += [
        f"# plan: {best.model} on {best.cluster}: {best.layout.short()}",
        f"# predicted {best.step_time_s:.2f} s per step (layout search)",
        "set -euo pipefail",
        f"MEGATRON_PATH=${{MEGATRON_PATH:-{shlex.quote(megatron)}}}",
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "MASTER_PORT=29500",
    ]
    if best.layout.zero < 2:
        lines.append("export CUDA_DEVICE_MAX_CONNECTIONS=1")
    lines += ["", export.text.rstrip("\n"), ""]
    lines.append(
        f"srun bash -c 'torchrun --nnodes {nodes} --nproc-per-node {gpus} "
        '--node-rank "$SLURM_NODEID" --master-addr "$0" --master-port "$1" '
        '"$2/pretrain_gpt.py" "${@:3}"\' "$MASTER_ADDR" "$MASTER_PORT" "$MEGATRON_PATH" '
        '"${MEGATRON_ARGS[@]}"'
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="70B")
    parser.add_argument("--cluster", default="hgx_b200x16")
    parser.add_argument("--megatron", default="/opt/Megatron-LM", help="Megatron-LM checkout")
    parser.add_argument("--partition", help="Slurm partition")
    parser.add_argument("--time", default="01:00:00", help="Slurm time limit")
    args = parser.parse_args(argv)
    print(
        sbatch_script(
            model=args.model,
            cluster=args.cluster,
            megatron=args.megatron,
            partition=args.partition,
            time=args.time,
        ),
        end="",
    )
    return 0


if __name__ == "__main__":
    run_script(main)  # one line and exit 2 on bad input; exit 0 when a reader leaves (| head)
