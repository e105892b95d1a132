"""Pick a training plan and print the torchrun command lines that start it with Megatron-LM.

    python examples/launch_torchrun.py                          # 70B on hgx_b200x16
    python examples/launch_torchrun.py --model 8B --cluster hgx_h100x8 --hosts gpu-a

Prints one command per node (run each on its node, from a Megatron-LM checkout; the argument
names are those of Megatron-LM core_v0.19.0). Ranks follow the planner's placement: rank r runs
on node r // gpus_per_node as local rank r % gpus_per_node, as torchrun assigns them.
"""

from __future__ import annotations

import argparse
import shlex
from collections import Counter

import planner
from planner.errors import run_script
from planner.specs.result import SearchResult


def torchrun_commands(
    result: SearchResult, *, hosts: list[str], script: str, port: int
) -> list[list[str]]:
    """One torchrun argv per node for the best plan of ``result``."""
    export = planner.export(result, format="megatron")
    records = planner.placement(result)
    per_node = Counter(record.node for record in records)
    nodes = sorted(per_node)
    if len(hosts) < len(nodes):
        hosts = [*hosts, *(f"node{i}" for i in nodes[len(hosts) :])]
    env = [] if result.best.layout.zero >= 2 else ["CUDA_DEVICE_MAX_CONNECTIONS=1"]
    commands = []
    for node in nodes:
        command = [*env, "torchrun", "--nnodes", str(len(nodes))]
        command += ["--nproc-per-node", str(per_node[node]), "--node-rank", str(node)]
        command += ["--master-addr", hosts[0], "--master-port", str(port)]
        commands.append([*command, script, *export.args])
    return commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="70B")
    parser.add_argument("--cluster", default="hgx_b200x16")
    parser.add_argument("--hosts", default="", help="comma-separated host names, node 0 first")
    parser.add_argument("--script", default="pretrain_gpt.py", help="Megatron-LM entry point")
    parser.add_argument("--port", type=int, default=29500, help="rendezvous port on node 0")
    args = parser.parse_args(argv)
    result = planner.search(model=args.model, cluster=args.cluster)
    best = result.best
    print(f"# {best.model} on {best.cluster}: {best.layout.short()}")
    print(
        f"# predicted {best.step_time_s:.2f} s/step, {best.tokens_per_s_per_gpu:,.0f} tokens/s/GPU"
    )
    for note in planner.export(result, format="megatron").notes:
        print(f"# note: {note}")
    hosts = [h for h in args.hosts.split(",") if h]
    for node, command in enumerate(
        torchrun_commands(result, hosts=hosts, script=args.script, port=args.port)
    ):
        print(f"# node {node}")
        print(shlex.join(command))
    return 0


if __name__ == "__main__":
    run_script(main)  # one line and exit 2 on bad input; exit 0 when a reader leaves (| head)
