"""The argument parser of the ``layout`` CLI (frozen by tests/test_cli.py)."""

from __future__ import annotations

import argparse

from planner.cli.options import (
    EXPORT_FORMATS,
    SCHEMA_KINDS,
    WHATIF_MAX_SCENARIOS,
    WHATIF_MAX_SCENARIOS_LIMIT,
    _add_cluster_edits,
    _add_given_split,
    _add_placement,
    _add_run_length,
    _add_serve,
    _add_stage_split,
    _add_time_limit,
    _add_workload,
    _OneLineParser,
    headroom_share,
    positive_float,
    positive_int,
    ranged,
    sweep_units,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (frozen by tests/test_cli.py)."""
    parser = _OneLineParser(
        prog="layout", description="Parallelism layout search and cluster planner."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    search = sub.add_parser("search", help="find the best training (or --mode serve) layout")
    _add_workload(search)
    _add_placement(search)
    _add_serve(search)
    search.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="pin a layout field (tp, pp, vpp, dp, ep, mbs, recompute, zero); repeatable, or "
        "several at once: --fix tp=2,pp=16",
    )
    search.add_argument("--top", type=positive_int, default=5, help="plans to show (default 5)")
    _add_time_limit(search)
    search.add_argument("--solver", choices=("cp-sat", "exhaustive"), default="cp-sat")
    _add_stage_split(search)
    search.add_argument(
        "--split-sweep",
        type=sweep_units,
        default=3000,
        metavar="N",
        help="work units (about a ms each) for splitting layouts the even split ranks low whose "
        "bound under any split still beats the plans (default 3000; 0 = none; when they run "
        "out the output gives the gap left)",
    )
    search.add_argument(
        "--memory-headroom",
        type=headroom_share,
        metavar="SHARE",
        help="share of usable memory a layout must leave free to be searched, for allocator "
        "fragmentation and the memory model's error (default 0.05; 0 = none; estimate "
        "judges a given layout against all of it)",
    )
    search.add_argument(
        "--max",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="upper bound on a layout degree (tp, pp, vpp, dp, cp, ep, mbs); repeatable, or "
        "comma-separated",
    )
    search.add_argument(
        "--min",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="lower bound on a layout degree; repeatable, or comma-separated",
    )
    search.add_argument(
        "--gpus",
        type=ranged(positive_int, "gpus"),
        help="use at most this many accelerators (fewer may win on cost)",
    )
    search.add_argument(
        "--objective",
        choices=("time", "cost", "energy", "latency"),
        default="time",
        help="minimise step time (default), $ per token or joules per token; serve: "
        "throughput per GPU (default) or latency (time per output token)",
    )
    search.add_argument(
        "--pareto",
        metavar="FILE.csv",
        help="serve: write the throughput-per-GPU vs per-user frontier as CSV",
    )
    search.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FILE",
        help="write a report: .html (self-contained, charts) or .md; train: the ranked layouts, "
        "where each step goes, memory and why the runners-up lose; serve: the frontier; "
        "repeatable",
    )
    search.add_argument(
        "--disaggregate",
        action="store_true",
        help="serve: also search prefill/decode pools (xPyD) and compare",
    )
    search.add_argument(
        "--target-step-time",
        type=ranged(positive_float, "target_step_time_s"),
        metavar="SECONDS",
        help="find the fewest GPUs (counts of whole units on a 1-1.5-2-3 ladder, and the cap) "
        "whose best layout meets this step time",
    )
    estimate = sub.add_parser("estimate", help="score one given layout")
    _add_workload(estimate)
    _add_placement(estimate)
    _add_serve(estimate)
    estimate.add_argument(
        "--attention-dp", type=positive_int, default=1, help="serve: attention DP ranks in tp"
    )
    for dim in ("tp", "pp", "vpp", "cp", "ep", "mbs"):
        estimate.add_argument(
            f"--{dim}", type=positive_int, default=1, help=f"{dim} degree (default 1)"
        )
    estimate.add_argument(
        "--etp",
        type=positive_int,
        help="expert tensor-parallel degree of an MoE model (default: the framework's: tp under "
        "megatron, tp without EP and 1 with it under torchtitan, else 1)",
    )
    estimate.add_argument(
        "--dp", type=positive_int, help="data-parallel degree (default: fill the cluster)"
    )
    estimate.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    estimate.add_argument(
        "--zero",
        type=int,
        choices=(0, 1, 2, 3),
        help="ZeRO stage (default: the framework's: 1 under megatron and deepspeed, 3 under "
        "torchtitan, maxtext and fsdp)",
    )
    _add_stage_split(estimate)
    _add_given_split(estimate)
    estimate.add_argument("--report", action="append", default=[], metavar="FILE",
                          help="write a report: .html (self-contained, charts) or .md; the "
                          "layout's step by term, its memory and the full plan; repeatable")  # fmt: skip
    models = sub.add_parser("models", help="list catalog models")
    models.add_argument("--json", action="store_true")
    clusters = sub.add_parser(
        "clusters", help="list catalog systems (cluster names are <system>x<N>)"
    )
    clusters.add_argument("--json", action="store_true")
    frameworks = sub.add_parser(
        "frameworks", help="list the framework profiles --framework takes, and what each runs"
    )
    frameworks.add_argument("--json", action="store_true")
    show = sub.add_parser("show", help="describe a cluster")
    show.add_argument("cluster", help="<system>x<N> or YAML")
    show.add_argument("--json", action="store_true")
    show.add_argument("--graphml", metavar="FILE", help="also write the cluster graph as GraphML")
    _add_cluster_edits(show)
    validate = sub.add_parser(
        "validate", help="predicted vs measured throughput on the bundled validation set"
    )
    validate.add_argument("--json", action="store_true", help="print JSON on stdout")
    validate.add_argument("--markdown", metavar="FILE", help="also write the Markdown report")
    validate.add_argument(
        "--rows", metavar="ID,ID", help="only these rows (S1,N4; K1 = K1 + variants)"
    )
    validate.add_argument("--serving", action="store_true", help="only the serving rows (V*)")
    calibrate = sub.add_parser(
        "calibrate",
        help="fit the efficiency factors to the validation set (--fit) or measure them (--measure)",
    )
    how = calibrate.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "--fit",
        action="store_true",
        help="fit per accelerator family against the published runs",
    )
    how.add_argument(
        "--measure",
        action="store_true",
        help="measure this machine's GPU(s) with PyTorch (pip install 'layout[calibrate]')",
    )
    calibrate.add_argument(
        "--family",
        action="append",
        default=[],
        help="only this family (hopper, blackwell, ampere); repeatable",
    )
    calibrate.add_argument(
        "--write",
        action="store_true",
        help="write topologies/calibration/<family>.yaml overlays, with fresh held-out bands (minutes)",
    )
    calibrate.add_argument("--json", action="store_true", help="print JSON on stdout")
    calibrate.add_argument(
        "--out",
        metavar="FILE",
        help="--measure: overlay to write (default <accelerator>-measured.yaml)",
    )
    calibrate.add_argument(
        "--dry-run",
        action="store_true",
        help="--measure: run the whole pipeline on the CPU with tiny shapes (not a calibration)",
    )
    calibrate.add_argument(
        "--accelerator",
        help="--measure: catalog accelerator whose peaks to divide by (default: detected; "
        "h100_sxm for --dry-run)",
    )
    _add_migrate(sub)
    _add_whatif(sub)
    _add_export(sub)
    _add_schema(sub)
    _add_pack(sub)
    return parser


def _add_pack(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "pack", help="one layout per job and disjoint placements on a shared cluster (CP-SAT)"
    )
    p.add_argument(
        "--cluster", required=True,
        help="<system>x<N>, a cluster YAML, or a pool YAML of partitions (H100 + B200 ...)",
    )  # fmt: skip
    p.add_argument(
        "--job", action="append", required=True, metavar="FILE",
        help="job YAML: model, mode train/serve, workload, and a weight or a target; repeatable",
    )  # fmt: skip
    p.add_argument(
        "--cluster-state", metavar="FILE", help="GPUs/nodes down or taken (single cluster)"
    )
    _add_time_limit(p)
    p.add_argument("--workers", type=ranged(positive_int, "workers"), default=1,
                   help="local processes for the rows' searches (default 1; at most one per "
                   "available core; the same answer with any number)")  # fmt: skip
    p.add_argument("--progress", action="store_true", help="progress bar on stderr (default: TTY)")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")


def _add_migrate(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("migrate", help="re-plan a model when moving to other hardware")
    _add_workload(p, cluster=False)
    p.add_argument("--from", dest="source", required=True, help="current cluster (<system>x<N>)")
    p.add_argument("--to", dest="target", required=True, help="new cluster (<system>x<N>)")
    pinned = p.add_mutually_exclusive_group()
    pinned.add_argument("--layout", metavar="FILE", help="layout in use now (YAML/JSON fields)")
    pinned.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="pin a field on both sides; repeatable, or comma-separated",
    )
    p.add_argument(
        "--price", action="append", default=[], metavar="C=USD", help="USD per GPU-hour of "
        "cluster or system C (default: catalog); repeatable",
    )  # fmt: skip
    p.add_argument("--report", action="append", default=[], metavar="FILE",
                   help="write a report: .html (self-contained, charts) or .md; the two plans, "
                   "the changes and why, where each step goes, memory; repeatable")  # fmt: skip
    _add_run_length(p)


def _add_whatif(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("whatif", help="re-plan over a grid of cluster and workload knobs")
    _add_workload(p)
    p.add_argument(
        "--vary", action="append", required=True, metavar="KEY=V1,V2",
        help="knob and values (nic_gbps, nics_per_gpu, oversubscription, rail_optimized, "
        "domain_size, price_per_gpu_hour, hbm_gb, hbm_tbps, power_cap_w, system, accelerator, "
        "gpus, precision, seq_len, global_batch); repeatable: the cartesian product is planned",
    )  # fmt: skip
    p.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="pin a layout field; repeatable, or comma-separated",
    )
    p.add_argument("--report", action="append", default=[], metavar="FILE",
                   help="write a report: .html (self-contained, charts) or .md; repeatable")  # fmt: skip
    p.add_argument("--workers", type=ranged(positive_int, "workers"), default=1,
                   help="local processes (default 1; at most one per available core)")  # fmt: skip
    p.add_argument(
        "--max-scenarios", type=positive_int, default=WHATIF_MAX_SCENARIOS, metavar="N",
        help=f"refuse a sweep of more scenarios than N (default {WHATIF_MAX_SCENARIOS}, at most "
        f"{WHATIF_MAX_SCENARIOS_LIMIT:,})",
    )  # fmt: skip
    p.add_argument("--engine", choices=("process", "ray"), default="process",
                   help="process (local cores) or ray (pip install 'layout[ray]'; RAY_ADDRESS)")  # fmt: skip
    p.add_argument("--progress", action="store_true", help="progress bar on stderr (default: TTY)")
    _add_run_length(p)


def _add_export(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    export = sub.add_parser(
        "export", help="framework arguments or config for a plan (search flags or --plan)"
    )
    export.add_argument("--format", required=True, choices=EXPORT_FORMATS)
    export.add_argument(
        "--plan",
        metavar="FILE",
        help="a saved 'search --json' or 'estimate --json' instead of searching ('-' reads "
        "it from standard input); --seq-len must be the plan's (for a serving plan: the "
        "context length)",
    )
    _add_workload(export, required=False)
    export.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="pin a layout field; repeatable, or comma-separated",
    )
    _add_time_limit(export)
    export.add_argument("--solver", choices=("cp-sat", "exhaustive"), default="cp-sat")
    export.add_argument(
        "--objective",
        choices=("time", "cost", "energy", "latency"),
        default="time",
        help="what the search minimises, as for search (serve: throughput or latency)",
    )
    _add_placement(export)
    _add_serve(export)


def _add_schema(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    schema = sub.add_parser("schema", help="JSON Schema of the JSON that layout prints")
    schema.add_argument(
        "--kind",
        choices=SCHEMA_KINDS,
        default="all",
        help="one output's schema (default: all of them, as oneOf)",
    )
