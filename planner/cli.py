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
    value = float(match.group(1)) * _SUFFIX[match.group(2).upper()]
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


def _add_workload(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="catalog name, alias (70B), YAML or HF config.json"
    )
    p.add_argument(
        "--cluster", required=True, help="<system>x<N> (hgx_b200x16), TPU slice, or YAML"
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
    search = sub.add_parser("search", help="find the best training layout")
    _add_workload(search)
    search.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="pin a layout field (tp, pp, vpp, dp, ep, mbs, recompute, zero); repeatable",
    )
    search.add_argument("--top", type=positive_int, default=5, help="plans to show (default 5)")
    search.add_argument(
        "--time-limit", type=positive_float, default=10.0, help="solver limit, s (default 10)"
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
        choices=("time", "cost", "energy"),
        default="time",
        help="minimise step time (default), $ per token or joules per token",
    )
    search.add_argument(
        "--target-step-time",
        type=positive_float,
        metavar="SECONDS",
        help="find the fewest GPUs whose best layout meets this step time",
    )
    estimate = sub.add_parser("estimate", help="score one given layout")
    _add_workload(estimate)
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
        "--out", metavar="FILE", help="--measure: overlay to write (default <accelerator>-measured.yaml)"
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
    return 0


def _cmd_estimate(args: argparse.Namespace) -> int:
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
    if not plan.fits:
        sys.stderr.write(
            f"layout estimate: does not fit: {not_fitting_reason(plan, args.model, cluster, workload)}\n"
        )
        return 1
    return 0


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

        with open(args.graphml, "w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in graphml_lines(cluster))
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
    report = run_validation(ids=ids or None)
    if args.markdown:
        target = Path(args.markdown)
        try:
            target.write_text(validation_markdown(report), encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"cannot write '{target}': {exc.strerror}") from None
        sys.stderr.write(f"layout validate: wrote {target}\n")
    print(report.model_dump_json(indent=2) if args.json else validation_text(report))
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    import datetime
    import json

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

    return load_cluster(args.cluster, edits=_edits(args))


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
        try:
            number = positive_int(value) if key != "zero" else int(value)
        except (argparse.ArgumentTypeError, ValueError):
            raise SpecError(f"--fix {key}={value}: must be a positive whole number") from None
        if key == "zero" and number not in (0, 1, 2, 3):
            raise SpecError(f"--fix zero={value}: must be 0, 1, 2 or 3")
        out[key] = number
    return out


if __name__ == "__main__":
    raise SystemExit(main())
