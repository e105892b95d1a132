"""Pick a serving plan and print the ``vllm serve`` commands that start its replicas.

    python examples/serve_vllm.py                                 # 70B on hgx_b200x16
    python examples/serve_vllm.py --model 8B --cluster hgx_h100x8 --context 32768

The serving search (``planner.api.serve_search``) chooses TP, PP and the number of replicas; this
prints one command per replica with the GPUs it runs on (CUDA_VISIBLE_DEVICES) and its own port,
using the ``vllm serve`` names of ``layout export --format vllm``. Put a load balancer in front.
"""

from __future__ import annotations

import argparse
import shlex

import planner
from planner.api import serve_search
from planner.errors import run_script


def replica_commands(
    *, model: str, cluster: str, context: int, port: int
) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(comment lines, [(host, argv with its env prefix)]) for every replica of the best plan."""
    result = serve_search(model=model, cluster=cluster, workload={"context": context})
    best = result.best
    export = planner.export(result, format="vllm", workload={"context": context})
    spec = planner.load_cluster(cluster)
    per_node = min(spec.system.accelerators_per_node, spec.accelerators_per_domain)
    width = best.layout.gpus_per_replica
    comments = [f"{best.model} on {best.cluster}: {best.layout.short()}"]
    comments.append(
        f"predicted {best.throughput_tokens_per_s:,.0f} output tokens/s in all, "
        f"TTFT {best.ttft_s * 1000:.0f} ms, {best.decode_tokens_per_s_per_sequence:.0f} "
        "tokens/s per sequence"
    )
    comments += [f"note: {note}" for note in export.notes]
    if width > per_node:  # a replica spans nodes: vLLM runs it over Ray, one command each
        return comments, [("node0", export.args)] * best.layout.replicas
    slots = per_node // width
    commands = []
    for replica in range(best.layout.replicas):
        first = (replica % slots) * width
        devices = ",".join(str(gpu) for gpu in range(first, first + width))
        argv = [f"CUDA_VISIBLE_DEVICES={devices}", *export.args]
        argv += ["--port", str(port + replica % slots)]
        commands.append((f"node{replica // slots}", argv))
    return comments, commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="70B")
    parser.add_argument("--cluster", default="hgx_b200x16")
    parser.add_argument("--context", type=int, default=8192, help="tokens per sequence")
    parser.add_argument("--port", type=int, default=8000, help="first port on each node")
    args = parser.parse_args(argv)
    comments, commands = replica_commands(
        model=args.model, cluster=args.cluster, context=args.context, port=args.port
    )
    for line in comments:
        print(f"# {line}")
    for replica, (host, command) in enumerate(commands):
        print(f"# replica {replica} on {host}")
        print(shlex.join(command))
    return 0


if __name__ == "__main__":
    run_script(main)  # one line and exit 2 on bad input; exit 0 when a reader leaves (| head)
