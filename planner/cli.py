"""The ``layout`` command line (layer L6): parse, call the library, print. Heavy modules (the
solver, numpy, pydantic specs) are imported inside the subcommand functions so that
``layout --help`` stays instant."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

EXIT_BAD_INPUT = 2
_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}


class _OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def positive_int(text: str) -> int:
    """An integer >= 1, with an optional K/M/B/T suffix (``16M`` = 16,000,000)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMBGT]?)\s*", text, flags=re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive whole number")
    digits, scale = match.group(1), _SUFFIX[match.group(2).upper()]
    if digits.isdigit():  # exact: float() would round 10**30 to 1000000000000000019884624838656
        value: float = int(digits) * scale
    else:
        value = float(digits) * scale
    if value != int(value) or value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive whole number")
    return int(value)


def batch_tokens(text: str) -> int:
    """Tokens per step; K/M/G suffixes are binary as batch sizes are quoted in ML papers
    (Llama 3's "16M tokens" = 2,048 sequences x 8,192 = 16,777,216)."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text, flags=re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive whole number of tokens")
    value = (
        int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2).upper()]
    )
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive whole number of tokens")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be a finite number > 0")
    return value


MAX_TIME_LIMIT_S = 3600.0
"""Largest --time-limit (SolverConfig.time_limit_s)."""


def time_limit(text: str) -> float:
    """Seconds for one solve: a finite number > 0 and at most an hour."""
    value = positive_float(text)
    if value > MAX_TIME_LIMIT_S:
        raise argparse.ArgumentTypeError(f"'{text}' s exceeds the {MAX_TIME_LIMIT_S:g} s limit")
    return value


def _add_cluster_edits(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster edits (what-if knobs)")
    g.add_argument("--nic-gbps", type=positive_float, help="NIC line rate, Gb/s")
    g.add_argument("--nics-per-gpu", type=positive_float, help="scale-out NICs per accelerator")
    g.add_argument(
        "--oversubscription", type=positive_float, help="spine taper, e.g. 2 for 2:1 (>= 1)"
    )
    g.add_argument(
        "--rail-optimized",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="rail-optimized (default from the system) or top-of-rack wiring",
    )
    g.add_argument("--domain-size", type=positive_int, help="accelerators per scale-up domain")
    g.add_argument("--price-per-gpu-hour", type=positive_float, help="USD per accelerator-hour")


def _add_workload(
    p: argparse.ArgumentParser, *, cluster: bool = True, required: bool = True
) -> None:
    p.add_argument(
        "--model", required=required, help="catalog name, alias (70B), YAML or HF config.json"
    )
    if cluster:  # migrate names two clusters instead (--from, --to)
        p.add_argument(
            "--cluster", required=required, help="<system>x<N> (hgx_b200x16), TPU slice, or YAML"
        )
    p.add_argument(
        "--seq-len", type=positive_int, default=8192, help="tokens per sequence (default 8192)"
    )
    batch = p.add_mutually_exclusive_group()
    batch.add_argument("--global-batch", type=positive_int, help="sequences per step (default 512)")
    batch.add_argument(
        "--global-batch-tokens",
        type=batch_tokens,
        help="tokens per step; K/M/G are binary: 16M = 2048 x 8192",
    )
    p.add_argument(
        "--precision", default="bf16", help="bf16 | fp8 | mxfp8 | nvfp4 | mxfp4 (default bf16)"
    )
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    if not cluster:
        return
    p.add_argument(
        "--calibration",
        metavar="FILE",
        help="calibration overlay for the cluster's accelerator (layout calibrate --measure)",
    )
    _add_cluster_edits(p)


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
        help="pin a layout field (tp, pp, vpp, dp, ep, mbs, recompute, zero); repeatable",
    )
    search.add_argument("--top", type=positive_int, default=5, help="plans to show (default 5)")
    search.add_argument(
        "--time-limit", type=time_limit, default=10.0, help="solver limit, s (default 10)"
    )
    search.add_argument("--solver", choices=("cp-sat", "exhaustive"), default="cp-sat")
    search.add_argument(
        "--max",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="upper bound on a layout degree (tp, pp, vpp, dp, cp, ep, mbs); repeatable",
    )
    search.add_argument(
        "--min",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="lower bound on a layout degree; repeatable",
    )
    search.add_argument(
        "--gpus",
        type=positive_int,
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
        "--target-step-time",
        type=positive_float,
        metavar="SECONDS",
        help="find the fewest GPUs whose best layout meets this step time",
    )
    estimate = sub.add_parser("estimate", help="score one given layout")
    _add_workload(estimate)
    _add_placement(estimate)
    _add_serve(estimate)
    estimate.add_argument(
        "--attention-dp", type=positive_int, default=1, help="serve: attention DP ranks in tp"
    )
    for dim in ("tp", "pp", "vpp", "cp", "ep", "etp", "mbs"):
        estimate.add_argument(
            f"--{dim}", type=positive_int, default=1, help=f"{dim} degree (default 1)"
        )
    estimate.add_argument(
        "--dp", type=positive_int, help="data-parallel degree (default: fill the cluster)"
    )
    estimate.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    estimate.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=1)
    models = sub.add_parser("models", help="list catalog models")
    models.add_argument("--json", action="store_true")
    clusters = sub.add_parser(
        "clusters", help="list catalog systems (cluster names are <system>x<N>)"
    )
    clusters.add_argument("--json", action="store_true")
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
        "--write", action="store_true", help="write topologies/calibration/<family>.yaml overlays"
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``layout`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    from planner.errors import InfeasibleError, PlannerError, one_line

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "search": _cmd_search,
        "estimate": _cmd_estimate,
        "models": _cmd_models,
        "clusters": _cmd_clusters,
        "show": _cmd_show,
        "validate": _cmd_validate,
        "calibrate": _cmd_calibrate,
        "migrate": _cmd_migrate,
        "whatif": _cmd_whatif,
        "export": _cmd_export,
        "schema": _cmd_schema,
    }
    try:
        return handlers[args.command](args)
    except InfeasibleError as exc:
        sys.stderr.write(f"layout {args.command}: {one_line(str(exc))}\n")
        return exc.exit_code
    except PlannerError as exc:
        sys.stderr.write(f"layout {args.command}: error: {one_line(str(exc))}\n")
        return exc.exit_code
    except BrokenPipeError:  # e.g. `layout models | head`: the reader left; not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("layout: interrupted\n")
        return 130
    except Exception as exc:
        sys.stderr.write(
            f"layout {args.command}: internal error: {type(exc).__name__}: "
            f"{one_line(str(exc))[:300]}\n"
        )
        return EXIT_BAD_INPUT


def _cmd_search(args: argparse.Namespace) -> int:
    if args.mode == "serve":
        return _cmd_serve(args)
    _check_train_flags(args)
    from planner.api import search
    from planner.report.text import search_text
    from planner.specs.solver_config import SolverConfig

    config = SolverConfig(
        solver=args.solver,
        time_limit_s=args.time_limit,
        top=min(args.top, 50),
        objective=args.objective,
        target_step_time_s=args.target_step_time,
    )
    workload = _workload(args)
    precisions = None
    if args.precision.lower() == "auto":
        precisions = _auto_precisions(args)
        workload["precision"] = precisions[0]
    result = search(
        model=args.model,
        cluster=_cluster(args),
        workload=workload,
        fix=_parse_fix(args.fix),
        config=config,
        bounds=_parse_bounds(args.min, args.max),
        precisions=precisions,
        gpus=args.gpus,
    )
    print(result.model_dump_json(indent=2) if args.json else search_text(result))
    _write_placement(args, result.best)
    return 0


def _cmd_estimate(args: argparse.Namespace) -> int:
    if args.mode == "serve":
        return _cmd_serve(args)
    _check_train_flags(args)
    from planner.api import estimate, not_fitting_reason
    from planner.report.text import estimate_text

    layout = {
        k: getattr(args, k)
        for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "mbs", "recompute", "zero")
    }
    if args.dp is not None:
        layout["dp"] = args.dp
    cluster, workload = _cluster(args), _workload(args)
    plan = estimate(model=args.model, cluster=cluster, workload=workload, layout=layout)
    print(plan.model_dump_json(indent=2) if args.json else estimate_text(plan))
    _write_placement(args, plan)
    if not plan.fits:
        sys.stderr.write(
            f"layout estimate: does not fit: {not_fitting_reason(plan, args.model, cluster, workload)}\n"
        )
        return 1
    return 0


def _add_serve(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("serving (--mode serve)")
    g.add_argument("--mode", choices=("train", "serve"), default="train", help="default train")
    g.add_argument("--context", type=positive_int, help="KV tokens per sequence (default: "
                   "prompt + output when given, else 8192)")  # fmt: skip
    g.add_argument("--prompt-len", type=positive_int, help="prompt tokens (default 1024)")
    g.add_argument("--output-len", type=positive_int, help="output tokens (default 1024)")
    g.add_argument("--concurrency", type=positive_int, help="sequences per replica (default: max)")
    g.add_argument("--kv-precision", help="KV-cache format (default bf16)")
    g.add_argument("--compute-precision", help="GEMM format (default: the weights' if native)")
    g.add_argument("--tpot-ms", type=positive_float, help="time per output token target, ms")
    g.add_argument("--ttft-ms", type=positive_float, help="time to first token target, ms")
    g.add_argument("--target-tokens-per-s", type=positive_float, help="fewest GPUs for this load")
    g.add_argument("--kv-cache-fraction", type=positive_float,
                   help="share of free memory for KV (default 0.9)")  # fmt: skip


def _cmd_serve(args: argparse.Namespace) -> int:
    """``search`` / ``estimate`` with ``--mode serve``."""
    from planner.api import serve_estimate, serve_search
    from planner.errors import SpecError
    from planner.report.serving import serve_estimate_text, serve_search_text
    from planner.specs.solver_config import SolverConfig

    cluster, workload = _cluster(args), _serve_workload(args)
    if args.command == "estimate":
        layout = {"tp": args.tp, "pp": args.pp, "ep": args.ep, "attention_dp": args.attention_dp}
        if args.dp is not None:
            layout["replicas"] = args.dp
        plan = serve_estimate(model=args.model, cluster=cluster, workload=workload, layout=layout)
        print(plan.model_dump_json(indent=2) if args.json else serve_estimate_text(plan))
        return 0
    unused = [f for f in ("min", "max", "gpus", "target_step_time") if getattr(args, f)]
    if unused:
        raise SpecError(f"--{unused[0].replace('_', '-')} does not apply to --mode serve")
    config = SolverConfig(solver=args.solver, time_limit_s=args.time_limit, top=min(args.top, 50))
    fix = _parse_fix(args.fix)
    result = serve_search(
        model=args.model, cluster=cluster, workload=workload, fix=fix, config=config
    )
    print(result.model_dump_json(indent=2) if args.json else serve_search_text(result))
    return 0


def _check_train_flags(args: argparse.Namespace) -> None:
    """Serving flags without --mode serve are a mistake, not something to ignore."""
    from planner.errors import SpecError

    serve_only = ("context", "prompt_len", "output_len", "concurrency", "kv_precision")
    serve_only += ("compute_precision", "tpot_ms", "ttft_ms", "target_tokens_per_s")
    given = [k for k in (*serve_only, "kv_cache_fraction") if getattr(args, k) is not None]
    if getattr(args, "objective", None) == "latency":
        given.insert(0, "objective latency")
    if getattr(args, "attention_dp", 1) != 1:
        given.append("attention_dp")
    if given:
        raise SpecError(f"--{given[0].replace('_', '-')} needs --mode serve")


def _serve_workload(args: argparse.Namespace) -> dict[str, object]:
    from planner.catalog.store import suggest
    from planner.errors import SpecError
    from planner.specs.formats import NumberFormat

    names = [str(f) for f in NumberFormat]
    formats = ("precision", "kv_precision", "compute_precision")
    for key, text in ((k, getattr(args, k)) for k in formats if getattr(args, k)):
        if text.lower() not in names:
            flag = "--" + key.replace("_", "-")
            raise SpecError(f"unknown {flag} '{text}'{suggest(text, names)} ({', '.join(names)})")
    flags = ("prompt_len", "output_len", "concurrency", "tpot_ms", "ttft_ms")
    flags += ("target_tokens_per_s", "kv_cache_fraction", "context")
    out: dict[str, object] = {k: getattr(args, k) for k in flags if getattr(args, k) is not None}
    out.update({k: getattr(args, k).lower() for k in formats if getattr(args, k)})
    if args.context is None and (args.prompt_len or args.output_len):
        out["context"] = (args.prompt_len or 1024) + (args.output_len or 1024)
    if getattr(args, "objective", "time") == "latency":
        out["objective"] = "latency"
    return out


def _cmd_models(args: argparse.Namespace) -> int:
    from planner.report.catalog import models_listing

    print(models_listing(as_json=args.json))
    return 0


def _cmd_clusters(args: argparse.Namespace) -> int:
    from planner.report.catalog import systems_listing

    print(systems_listing(as_json=args.json))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from planner.api import load_cluster
    from planner.report.catalog import cluster_summary

    cluster = load_cluster(args.cluster, edits=_edits(args))
    print(cluster_summary(cluster, as_json=args.json))
    if args.graphml:
        from planner.topology.graph import graphml_lines

        _write_text(args.graphml, "".join(line + "\n" for line in graphml_lines(cluster)))
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    """A report, not a gate: exit 0 however large the errors (2 only for bad input)."""
    from pathlib import Path

    from planner.accuracy.render import validation_markdown, validation_text
    from planner.accuracy.run import run_validation
    from planner.errors import SpecError

    ids = [i.strip() for i in (args.rows or "").split(",") if i.strip()]
    if args.rows is not None and not ids:
        raise SpecError("--rows needs at least one row id, e.g. --rows S1,N4")
    serving, ids = _serving_validation(args, ids)
    if serving is not None and ids is None:  # serving rows only
        return 0
    report = run_validation(ids=ids or None)
    if args.markdown:
        target = Path(args.markdown)
        try:
            target.write_text(validation_markdown(report), encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"cannot write '{target}': {exc.strerror}") from None
        sys.stderr.write(f"layout validate: wrote {target}\n")
        if serving is not None and not args.rows:
            _write_serving_markdown(serving, target.with_name(f"{target.stem}-serving.md"))
    if serving is None:
        print(report.model_dump_json(indent=2) if args.json else validation_text(report))
    elif args.json:
        import json

        data = {**report.model_dump(mode="json"), "serving": serving.model_dump(mode="json")}
        print(json.dumps(data, indent=2))
    else:
        from planner.accuracy.serving_render import serving_validation_text

        print(validation_text(report) + "\n\n" + serving_validation_text(serving))
    return 0


def _serving_validation(
    args: argparse.Namespace, ids: list[str]
) -> tuple[object, list[str] | None]:
    """Run the serving rows asked for: (report or None, training ids left; None = none left).
    ``--serving`` or serving-only ``--rows`` print here; otherwise the caller adds the report."""
    from pathlib import Path

    from planner.accuracy.serving import load_serving_rows, run_serving_validation, serving_file
    from planner.accuracy.serving_render import serving_validation_text

    known = {r.id for r in load_serving_rows(serving_file())}
    serving_ids = [i for i in ids if i in known]
    training_ids = [i for i in ids if i not in known]
    if ids and not serving_ids and not args.serving:
        return None, training_ids
    if args.serving and training_ids:
        return run_serving_validation(ids=training_ids), None  # raises: unknown serving row
    report = run_serving_validation(ids=serving_ids or None)
    if not args.serving and (not ids or training_ids):
        return report, training_ids
    if args.markdown:
        _write_serving_markdown(report, Path(args.markdown))
    print(report.model_dump_json(indent=2) if args.json else serving_validation_text(report))
    return report, None


def _write_serving_markdown(report: object, target: object) -> None:
    from planner.accuracy.serving_render import serving_validation_markdown
    from planner.errors import SpecError

    try:
        target.write_text(serving_validation_markdown(report), encoding="utf-8")  # type: ignore[attr-defined]
    except OSError as exc:
        raise SpecError(f"cannot write '{target}': {exc.strerror}") from None
    sys.stderr.write(f"layout validate: wrote {target}\n")


def _cmd_calibrate(args: argparse.Namespace) -> int:
    import datetime
    import json

    from planner.errors import SpecError

    mode, other = ("--measure", "--fit") if args.measure else ("--fit", "--measure")
    only = {"--measure": ("out", "dry_run", "accelerator"), "--fit": ("family", "write")}
    for key in only[other]:
        if getattr(args, key):
            raise SpecError(f"--{key.replace('_', '-')} goes with {other}, not {mode}")
    if args.measure:
        return _cmd_measure(args)

    from planner.accuracy.calibrate import overlay_yaml, run_calibration
    from planner.accuracy.rows import expand_cases, load_rows, training_file
    from planner.catalog import catalog_root
    from planner.report.calibration import calibration_text

    cases = expand_cases(load_rows(training_file()))
    fits = run_calibration(cases, date=datetime.date.today().isoformat(), families=args.family)
    if args.write:
        folder = catalog_root() / "topologies" / "calibration"
        folder.mkdir(parents=True, exist_ok=True)
        for fit in fits:
            target = folder / f"{fit.record.family}.yaml"
            target.write_text(overlay_yaml(fit.record), encoding="utf-8")
            sys.stderr.write(f"layout calibrate: wrote {target}\n")
    if args.json:
        print(json.dumps([f.model_dump(mode="json") for f in fits], indent=2))
    else:
        print(calibration_text(fits))
    return 0


def _cmd_measure(args: argparse.Namespace) -> int:
    """``calibrate --measure``: one line and exit 2 without PyTorch or a GPU (unless --dry-run)."""
    import json
    from pathlib import Path

    from planner.errors import SpecError
    from planner.measure.fit import overlay_yaml
    from planner.measure.render import measured_text
    from planner.measure.run import measure

    fit = measure(accelerator=args.accelerator, dry_run=args.dry_run)
    record = fit.record
    target = Path(args.out or f"{record.fitted_on[0]}-measured.yaml")
    try:
        target.write_text(overlay_yaml(record), encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot write '{target}': {exc.strerror}") from None
    sys.stderr.write(f"layout calibrate: wrote {target}\n")
    if args.json:
        print(json.dumps({"out": str(target), **fit.model_dump(mode="json")}, indent=2))
    else:
        print(measured_text(fit, out=str(target)))
    return 0


def _edits(args: argparse.Namespace) -> dict[str, object]:
    keys = (
        "nic_gbps",
        "nics_per_gpu",
        "oversubscription",
        "rail_optimized",
        "domain_size",
        "price_per_gpu_hour",
    )
    return {k: getattr(args, k) for k in keys if getattr(args, k) is not None}


def _cluster(args: argparse.Namespace) -> object:
    from planner.api import load_cluster

    cluster = load_cluster(args.cluster, edits=_edits(args))
    if getattr(args, "calibration", None):
        from planner.catalog import apply_cluster_calibration

        cluster = apply_cluster_calibration(cluster, args.calibration)
    return cluster


def _workload(args: argparse.Namespace) -> dict[str, object]:
    from planner.errors import SpecError

    auto = args.command == "search" and args.precision.lower() == "auto"
    precision = "bf16" if auto else _precision(args.precision)
    workload: dict[str, object] = {"seq_len": args.seq_len, "precision": precision}
    if args.global_batch_tokens is not None:
        if args.global_batch_tokens % args.seq_len:
            raise SpecError(
                f"--global-batch-tokens {args.global_batch_tokens} is not a whole number "
                f"of {args.seq_len}-token sequences"
            )
        workload["global_batch"] = args.global_batch_tokens // args.seq_len
    elif args.global_batch is not None:
        workload["global_batch"] = args.global_batch
    return workload


def _auto_precisions(args: argparse.Namespace) -> list[str]:
    """--precision auto: bf16 and the 8-bit training formats the accelerator runs (FP4 training
    is opt-in: ask for nvfp4 or mxfp4 by name)."""
    acc = _cluster(args).accelerator  # type: ignore[attr-defined]
    return [f for f in ("bf16", "fp8", "mxfp8") if acc.supports(f)]


def _parse_bounds(mins: list[str], maxs: list[str]) -> dict[str, tuple[int | None, int | None]]:
    from planner.errors import SpecError

    allowed = ("tp", "pp", "vpp", "dp", "cp", "ep", "etp", "mbs", "zero")
    bounds: dict[str, list[int | None]] = {}
    for flag, items, side in (("--min", mins, 0), ("--max", maxs, 1)):
        for item in items:
            key, sep, value = item.partition("=")
            key = key.strip().lower()
            if not sep or key not in allowed:
                raise SpecError(
                    f"{flag} '{item}' must be KEY=VALUE with KEY one of {', '.join(allowed)}"
                )
            try:
                number = positive_int(value) if key != "zero" else int(value)
            except (argparse.ArgumentTypeError, ValueError):
                raise SpecError(f"{flag} {key}={value}: must be a whole number") from None
            if key == "zero" and number not in (0, 1, 2, 3):
                raise SpecError(f"{flag} zero={value}: must be 0, 1, 2 or 3")
            bounds.setdefault(key, [None, None])[side] = number
    for key, (low, high) in bounds.items():
        if low is not None and high is not None and low > high:
            raise SpecError(f"--min {key}={low} exceeds --max {key}={high}")
    return {k: (v[0], v[1]) for k, v in bounds.items()}


def _precision(text: str) -> str:
    from planner.catalog.store import suggest
    from planner.errors import SpecError
    from planner.specs.formats import TRAINING_FORMATS

    names = [str(f) for f in TRAINING_FORMATS]
    if text.lower() not in names:
        raise SpecError(
            f"unknown training precision '{text}'{suggest(text, names)} (one of: {', '.join(names)})"
        )
    return text.lower()


def _parse_fix(items: list[str]) -> dict[str, object]:
    from planner.errors import SpecError
    from planner.search.space import PINNABLE

    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep or key not in PINNABLE:
            raise SpecError(
                f"--fix '{item}' must be KEY=VALUE with KEY one of {', '.join(PINNABLE)}"
            )
        if key == "recompute":
            if value not in ("none", "selective", "full"):
                raise SpecError(f"--fix recompute={value}: must be none, selective or full")
            out[key] = value
            continue
        if key == "precision":
            out[key] = _precision(value)
            continue
        try:
            number = positive_int(value) if key != "zero" else int(value)
        except (argparse.ArgumentTypeError, ValueError):
            raise SpecError(f"--fix {key}={value}: must be a positive whole number") from None
        if key == "zero" and number not in (0, 1, 2, 3):
            raise SpecError(f"--fix zero={value}: must be 0, 1, 2 or 3")
        out[key] = number
    return out


# --- migrate and whatif (re-planning; DESIGN.md sections 1 and 8) ----------------------------


def _add_run_length(p: argparse.ArgumentParser) -> None:
    run = p.add_mutually_exclusive_group()
    run.add_argument(
        "--tokens", type=positive_int, help="time to train this many tokens (15T = 15e12)"
    )
    run.add_argument("--steps", type=positive_int, help="time to train this many steps")


def _add_migrate(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("migrate", help="re-plan a model when moving to other hardware")
    _add_workload(p, cluster=False)
    p.add_argument("--from", dest="source", required=True, help="current cluster (<system>x<N>)")
    p.add_argument("--to", dest="target", required=True, help="new cluster (<system>x<N>)")
    pinned = p.add_mutually_exclusive_group()
    pinned.add_argument("--layout", metavar="FILE", help="layout in use now (YAML/JSON fields)")
    pinned.add_argument(
        "--fix", action="append", default=[], metavar="KEY=VALUE", help="pin a field on both sides"
    )
    p.add_argument(
        "--price", action="append", default=[], metavar="C=USD", help="USD per GPU-hour of "
        "cluster or system C (default: catalog); repeatable",
    )  # fmt: skip
    _add_run_length(p)


def _add_whatif(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("whatif", help="re-plan over a grid of cluster and workload knobs")
    _add_workload(p)
    p.add_argument(
        "--vary", action="append", required=True, metavar="KEY=V1,V2",
        help="knob and values (nic_gbps, nics_per_gpu, oversubscription, rail_optimized, "
        "domain_size, price_per_gpu_hour, system, accelerator, gpus, precision, seq_len, "
        "global_batch); repeatable: the cartesian product is planned",
    )  # fmt: skip
    p.add_argument(
        "--fix", action="append", default=[], metavar="KEY=VALUE", help="pin a layout field"
    )
    p.add_argument("--report", action="append", default=[], metavar="FILE",
                   help="write a report: .html (self-contained, charts) or .md; repeatable")  # fmt: skip
    p.add_argument("--workers", type=positive_int, default=1, help="local processes (default 1)")
    p.add_argument("--engine", choices=("process", "ray"), default="process",
                   help="process (local cores) or ray (pip install 'layout[ray]'; RAY_ADDRESS)")  # fmt: skip
    p.add_argument("--progress", action="store_true", help="progress bar on stderr (default: TTY)")
    _add_run_length(p)


def _cmd_migrate(args: argparse.Namespace) -> int:
    from planner.api import migrate
    from planner.report.markdown import migrate_text

    result = migrate(
        model=args.model,
        from_cluster=args.source,
        to_cluster=args.target,
        workload=_workload(args),
        layout=args.layout,
        fix=_parse_fix(args.fix),
        prices=_parse_prices(args.price),
        tokens=args.tokens,
        steps=args.steps,
    )
    print(result.model_dump_json(indent=2, by_alias=True) if args.json else migrate_text(result))
    return 0


def _cmd_whatif(args: argparse.Namespace) -> int:
    from planner.api import whatif
    from planner.report.markdown import whatif_text

    renderers = [(target, _report_renderer(target)) for target in args.report]
    result = whatif(
        model=args.model,
        cluster=_cluster(args),  # type: ignore[arg-type]
        workload=_workload(args),
        vary=args.vary,
        fix=_parse_fix(args.fix),
        workers=args.workers,
        engine=args.engine,
        tokens=args.tokens,
        steps=args.steps,
        progress=_progress_bar if args.progress or sys.stderr.isatty() else None,
    )
    for target, render in renderers:
        _write_text(target, render(result))
        sys.stderr.write(f"layout whatif: wrote {target}\n")
    print(result.model_dump_json(indent=2) if args.json else whatif_text(result))
    if any(s.plan is not None for s in result.scenarios):
        return 0
    # No plan at all: one line naming the first scenario's reason; 2 when every scenario is
    # bad input (an illegal knob value), else 1 (nothing fits).
    first = result.scenarios[0]
    vary = ",".join(
        f"{k}={v}" if len(str(v)) <= 20 else f"{k}={float(v):.6g}"  # type: ignore[arg-type]
        for k, v in first.vary.items()
    )
    invalid = all(s.status == "invalid" for s in result.scenarios)
    word = "error: no scenario is valid" if invalid else "no scenario has a plan"
    sys.stderr.write(f"layout whatif: {word}; {vary}: {first.error}\n")
    return 2 if invalid else 1


def _progress_bar(done: int, total: int) -> None:
    """A one-line progress bar on stderr, redrawn in place."""
    width = 30
    filled = width * done // max(1, total)
    sys.stderr.write(f"\rwhatif [{'#' * filled}{'.' * (width - filled)}] {done}/{total} scenarios")
    sys.stderr.write("\n" if done >= total else "")
    sys.stderr.flush()


def _report_renderer(target: str) -> Callable[..., str]:
    from planner.errors import SpecError
    from planner.report.html import whatif_html
    from planner.report.markdown import whatif_markdown

    suffix = os.path.splitext(target)[1].lower()
    if suffix in (".html", ".htm"):
        return whatif_html
    if suffix in (".md", ".markdown"):
        return whatif_markdown
    raise SpecError(f"--report '{target}': the file name must end in .html or .md")


def _write_text(target: str, text: str) -> None:
    from planner.errors import SpecError

    try:
        with open(target, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise SpecError(f"cannot write '{target}': {exc.strerror}") from None


def _parse_prices(items: list[str]) -> dict[str, float]:
    from planner.errors import SpecError

    prices: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            prices[name.strip()] = positive_float(value.strip().lstrip("$").removesuffix("/h"))
        except argparse.ArgumentTypeError:
            sep = ""
        if not sep or not name.strip():
            raise SpecError(f"--price '{item}' must be CLUSTER=USD_PER_GPU_HOUR, e.g. hgx_b200=4.5")
    return prices


EXPORT_FORMATS = ("megatron", "bridge", "torchtitan", "deepspeed", "vllm", "sglang")
"""``layout export --format`` choices (planner.report.export.FORMATS, checked by a test)."""


SCHEMA_KINDS = ("all", "search", "plan", "serve-search", "serve-plan", "migrate", "whatif")
SCHEMA_KINDS += ("validate", "validate-serving", "export", "placement")
"""``layout schema --kind`` choices (planner.report.schema.OUTPUTS, checked by a test)."""


def _add_placement(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--placement",
        metavar="FILE",
        help="write the rank placement: FILE (.csv, else JSON lines) and FILE.hostfile",
    )


def _add_export(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    export = sub.add_parser(
        "export", help="framework arguments or config for a plan (search flags or --plan)"
    )
    export.add_argument("--format", required=True, choices=EXPORT_FORMATS)
    export.add_argument(
        "--plan",
        metavar="FILE",
        help="a saved 'search --json' or 'estimate --json' instead of searching; --seq-len "
        "must be the plan's (for a serving plan: the context length)",
    )
    _add_workload(export, required=False)
    export.add_argument(
        "--fix", action="append", default=[], metavar="KEY=VALUE", help="pin a layout field"
    )
    export.add_argument(
        "--time-limit", type=time_limit, default=10.0, help="solver limit, s (default 10)"
    )
    export.add_argument("--solver", choices=("cp-sat", "exhaustive"), default="cp-sat")
    _add_placement(export)


def _add_schema(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    schema = sub.add_parser("schema", help="JSON Schema of the JSON that layout prints")
    schema.add_argument(
        "--kind",
        choices=SCHEMA_KINDS,
        default="all",
        help="one output's schema (default: all of them, as oneOf)",
    )


def _cmd_export(args: argparse.Namespace) -> int:
    """The export on stdout (its JSON envelope with --json), notes on stderr."""
    from planner.report.export import export

    job = _export_job(args)
    if args.plan:
        _check_saved_plan(job)
    result = export(job, args.format)  # type: ignore[arg-type]
    print(result.model_dump_json(indent=2) if args.json else result.text.rstrip("\n"))
    for note in result.notes:
        sys.stderr.write(f"layout export: note: {note}\n")
    _write_placement(args, job.plan)  # type: ignore[attr-defined]
    return 0


def _export_job(args: argparse.Namespace) -> object:
    """The plan to export: loaded from --plan, or the best of a search with the given flags."""
    from planner.api import load_model, search
    from planner.errors import SpecError
    from planner.report.export import load_plan_file, make_job, workload_for_plan
    from planner.specs.solver_config import SolverConfig
    from planner.specs.workload import ServeWorkload, TrainWorkload

    if args.plan:
        plan = load_plan_file(args.plan)
        args.cluster = args.cluster or plan.cluster
        batch = _workload(args).get("global_batch")
        workload = (
            ServeWorkload(context=args.seq_len)
            if plan.mode == "serve"
            else workload_for_plan(plan, seq_len=args.seq_len, global_batch=batch)  # type: ignore[arg-type]
        )
        model = load_model(args.model or plan.model)
        return make_job(plan, model=model, cluster=_cluster(args), workload=workload)  # type: ignore[arg-type]
    if not (args.model and args.cluster):
        raise SpecError("export needs --plan FILE, or --model and --cluster to search")
    model, cluster, workload = load_model(args.model), _cluster(args), _workload(args)
    config = SolverConfig(solver=args.solver, time_limit_s=args.time_limit, top=1)
    fix = _parse_fix(args.fix)
    result = search(model=model, cluster=cluster, workload=workload, fix=fix, config=config)  # type: ignore[arg-type]
    train = TrainWorkload(**workload)  # type: ignore[arg-type]
    return make_job(result.best, model=model, cluster=cluster, workload=train)  # type: ignore[arg-type]


def _check_saved_plan(job: object) -> None:
    """A saved plan does not record its workload or cluster edits: re-score it and warn when
    --seq-len / --global-batch or the cluster flags do not reproduce it."""
    from planner.api import estimate
    from planner.specs.result import Plan

    plan, cluster = job.plan, job.cluster  # type: ignore[attr-defined]
    if not isinstance(plan, Plan):
        return
    if cluster.describe() != plan.cluster_description:
        sys.stderr.write(
            f"layout export: warning: the plan was made on '{plan.cluster_description}'; "
            "pass the same --cluster and cluster-edit flags\n"
        )
        return
    again = estimate(model=job.model, cluster=cluster, layout=plan.layout, workload=job.workload)  # type: ignore[attr-defined]
    if not math.isclose(again.step_time_s, plan.step_time_s, rel_tol=1e-6):
        sys.stderr.write(
            f"layout export: warning: re-scoring the plan with --seq-len {job.workload.seq_len} "  # type: ignore[attr-defined]
            f"gives {again.step_time_s:.4g} s per step, not {plan.step_time_s:.4g} s: pass the "
            "--seq-len the plan was made with (or it predates this version's cost model)\n"
        )


def _cmd_schema(args: argparse.Namespace) -> int:
    from planner.report.schema import schema_text

    print(schema_text(args.kind), end="")
    return 0


def _write_placement(args: argparse.Namespace, plan: object) -> None:
    """--placement FILE: the per-rank table and the hostfile, after the NVLink-domain check."""
    if not getattr(args, "placement", None):
        return
    from planner.errors import SpecError
    from planner.report.placement_file import placement_files
    from planner.specs.result import Plan

    if not isinstance(plan, Plan):
        raise SpecError("--placement needs a training plan")
    args.cluster = args.cluster or plan.cluster
    files = placement_files(args.placement, plan, _cluster(args))  # type: ignore[arg-type]
    for target, text in files.items():
        try:
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"cannot write '{target}': {exc.strerror}") from None
        sys.stderr.write(f"layout {args.command}: wrote {target}\n")


if __name__ == "__main__":
    raise SystemExit(main())
