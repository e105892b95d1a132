"""The subcommands of ``layout``: each parses its flags, calls the library and prints.

Heavy modules are imported inside the functions so that ``layout --help`` stays instant."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable

from planner.cli.options import (
    _auto_precisions,
    _check_serve_flags,
    _check_train_flags,
    _cluster,
    _edits,
    _parse_bounds,
    _parse_fix,
    _parse_prices,
    _serve_workload,
    _workload,
    _write_placement,
    _write_text,
    given,
    given_split_flags,
    stage_split_fields,
)
from planner.cli.outputs import wrote


def _offload_auto(args: argparse.Namespace, *, searches: bool) -> bool:
    """Whether ``--activation-offload auto`` was given; a command that does not run the layout
    search itself (estimate, migrate, whatif) refuses it rather than ignore it."""
    from planner.cli.options import AUTO
    from planner.errors import SpecError

    auto = getattr(args, "activation_offload", None) == AUTO
    if auto and not searches:
        raise SpecError(
            f"--activation-offload auto is search's and export's: give {args.command} a share "
            "from 0 to 1"
        )
    return auto


def _cmd_search(args: argparse.Namespace) -> int:
    if args.mode == "serve":
        return _cmd_serve(args)
    _check_train_flags(args)
    from planner.api import search
    from planner.catalog.io import validate_spec
    from planner.report.text import search_text
    from planner.specs.solver_config import SolverConfig

    config = validate_spec(
        SolverConfig,
        {
            "solver": args.solver,
            "time_limit_s": args.time_limit,
            "top": min(args.top, 50),
            "objective": args.objective,
            "target_step_time_s": args.target_step_time,
            "offload_as_needed": _offload_auto(args, searches=True),
            "split_sweep_budget": args.split_sweep,
            **stage_split_fields(args.stage_split),
            **(
                {"memory_headroom": args.memory_headroom}
                if args.memory_headroom is not None
                else {}
            ),
        },
        where="search settings",
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
        cluster_state=args.cluster_state,
    )
    print(result.model_dump_json(indent=2) if args.json else search_text(result))
    _write_placement(args, result.best)
    _write_reports(args, result)
    return 0


def _write_reports(args: argparse.Namespace, result: object) -> None:
    """--report FILE of a training search, estimate or migration: .html (or .htm) the page
    with its charts, anything else Markdown, as a serving search writes its reports."""
    from planner.report.migrate_report import migrate_html, migrate_markdown
    from planner.report.search_report import (
        plan_html,
        plan_markdown,
        search_html,
        search_markdown,
    )

    html, markdown = {
        "migrate": (migrate_html, migrate_markdown),
        "estimate": (plan_html, plan_markdown),
    }.get(args.command, (search_html, search_markdown))
    command = shlex.join(["layout", *getattr(args, "argv", [])])
    for path in args.report:
        render = html if path.lower().endswith((".html", ".htm")) else markdown
        _write_text(path, render(result, command=command))  # type: ignore[operator]
        wrote(args.command, path)


def _cmd_estimate(args: argparse.Namespace) -> int:
    if args.mode == "serve":
        return _cmd_serve(args)
    _check_train_flags(args)
    from planner.api import estimate, not_fitting_reason
    from planner.report.text import estimate_text

    _offload_auto(args, searches=False)

    layout = {
        k: getattr(args, k) for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "mbs", "recompute")
    }
    if args.etp is None:  # the framework's default (api.estimate)
        del layout["etp"]
    if args.zero is not None:  # else the framework's default stage (api._as_layout)
        layout["zero"] = args.zero
    if args.dp is not None:
        layout["dp"] = args.dp
    cluster, workload = _cluster(args), _workload(args)
    config = stage_split_fields(args.stage_split)
    plan = estimate(
        model=args.model,
        cluster=cluster,
        workload=workload,
        layout=layout,
        cluster_state=args.cluster_state,
        config=config,
        pipeline_split=given_split_flags(args),
    )
    print(plan.model_dump_json(indent=2) if args.json else estimate_text(plan))
    _write_placement(args, plan)
    _write_reports(args, plan)
    if not plan.fits:
        sys.stderr.write(
            f"layout estimate: does not fit: {not_fitting_reason(plan, args.model, cluster, workload)}\n"
        )
        return 1
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    """``search`` / ``estimate`` with ``--mode serve``."""
    from planner.api import serve_estimate, serve_search
    from planner.errors import SpecError
    from planner.report.serving import serve_estimate_text, serve_search_text
    from planner.specs.solver_config import SolverConfig

    if getattr(args, "placement", None):
        raise SpecError(
            "--placement writes the rank table of a training plan; it does not apply to "
            "--mode serve"
        )
    _check_serve_flags(args)
    if args.command == "estimate" and getattr(args, "report", None):
        raise SpecError(
            "--report of a serving estimate: a serving report is the frontier of a search "
            "(layout search --mode serve --report FILE)"
        )
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
    fix = _parse_fix(args.fix, serve=True)
    result = serve_search(
        model=args.model,
        cluster=cluster,
        workload=workload,
        fix=fix,
        config=config,
        disaggregate=args.disaggregate,
    )
    print(result.model_dump_json(indent=2) if args.json else serve_search_text(result))
    _write_serve_outputs(args, result)
    return 0


def _write_serve_outputs(args: argparse.Namespace, result: object) -> None:
    """--pareto FILE.csv and --report FILE (.html, else Markdown) of a serving search."""
    from planner.report.serving_report import serving_html, serving_markdown
    from planner.search.serving_pareto import pareto_csv

    targets = [("pareto", args.pareto)] if args.pareto else []
    targets += [("report", path) for path in args.report]
    for kind, path in targets:
        if kind == "pareto":
            text = pareto_csv(result.pareto)  # type: ignore[attr-defined]
        elif path.lower().endswith((".html", ".htm")):
            text = serving_html(result)  # type: ignore[arg-type]
        else:
            text = serving_markdown(result)  # type: ignore[arg-type]
        _write_text(path, text)
        wrote(args.command, path)


def _cmd_models(args: argparse.Namespace) -> int:
    from planner.report.catalog import models_listing

    print(models_listing(as_json=args.json))
    return 0


def _cmd_clusters(args: argparse.Namespace) -> int:
    from planner.report.catalog import systems_listing

    print(systems_listing(as_json=args.json))
    return 0


def _cmd_frameworks(args: argparse.Namespace) -> int:
    from planner.report.catalog import frameworks_listing

    print(frameworks_listing(as_json=args.json))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from planner.api import load_cluster
    from planner.report.catalog import cluster_summary

    cluster = load_cluster(args.cluster, edits=_edits(args))
    graph = None
    if args.graphml:  # built before the summary is printed: a refusal prints nothing else
        from planner.topology.graph import graphml_lines

        graph = graphml_lines(cluster)
    print(cluster_summary(cluster, as_json=args.json))
    if graph is not None:
        _write_text(args.graphml, "".join(line + "\n" for line in graph))
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    """A report, not a gate: exit 0 however large the errors (2 only for bad input)."""
    from pathlib import Path

    from planner.accuracy.render import validation_markdown, validation_text
    from planner.accuracy.run import run_validation
    from planner.cli.outputs import write_text_atomic
    from planner.errors import SpecError

    ids = [i.strip() for i in (args.rows or "").split(",") if i.strip()]
    if args.rows is not None and not ids:
        raise SpecError("--rows needs at least one row id, e.g. --rows S1,N4")
    twice = next((i for n, i in enumerate(ids) if i in ids[:n]), None)
    if twice is not None:
        raise SpecError(f"--rows lists {twice} twice: give each row once")
    serving, ids = _serving_validation(args, ids)
    if serving is not None and ids is None:  # serving rows only
        return 0
    from planner.accuracy.rows import expand_cases, load_rows, training_file
    from planner.accuracy.run import select_cases
    from planner.cli.progress import progress, wanted

    total = len(select_cases(expand_cases(load_rows(training_file())), ids or None))
    with progress("validate", total, enabled=wanted(), unit="rows") as update:
        done = iter(range(1, total + 1))
        report = run_validation(
            ids=ids or None, progress=lambda row: update(next(done), item=row.id)
        )
    if args.markdown:
        target = Path(args.markdown)
        write_text_atomic(target, validation_markdown(report))
        wrote("validate", target)
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
    from planner.cli.outputs import write_text_atomic

    write_text_atomic(target, serving_validation_markdown(report))  # type: ignore[arg-type]
    wrote("validate", target)


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
    from planner.cli.progress import progress, wanted
    from planner.report.calibration import calibration_text

    cases = expand_cases(load_rows(training_file()))
    with progress("calibrate --fit", None, enabled=wanted(), unit="families") as update:
        fits = run_calibration(
            cases,
            date=datetime.date.today().isoformat(),
            families=args.family,
            heldout=args.write,  # the written overlay carries fresh out-of-sample bands (minutes)
            progress=lambda done, total, family: update(done, total, item=family),
        )
    if args.write:
        folder = catalog_root() / "topologies" / "calibration"
        folder.mkdir(parents=True, exist_ok=True)
        for fit in fits:
            if not fit.record.efficiency.model_dump(exclude_none=True):
                # too few rows to fit: the transferred priors and the pooled band (widened) apply
                print(
                    f"calibrate: {fit.record.family} not fitted ({len(fit.record.rows)} rows): "
                    "no overlay written",
                    file=sys.stderr,
                )
                continue
            target = folder / f"{fit.record.family}.yaml"
            target.write_text(overlay_yaml(fit.record), encoding="utf-8")
            wrote("calibrate", target)
    if args.json:
        print(json.dumps([f.model_dump(mode="json") for f in fits], indent=2))
    else:
        print(calibration_text(fits))
    return 0


def _cmd_measure(args: argparse.Namespace) -> int:
    """``calibrate --measure``: one line and exit 2 without PyTorch or a GPU (unless --dry-run)."""
    import json
    from pathlib import Path

    from planner.cli.outputs import check_writable, write_text_atomic
    from planner.measure.fit import overlay_yaml
    from planner.measure.render import measured_text
    from planner.measure.run import measure

    fit = measure(accelerator=args.accelerator, dry_run=args.dry_run)
    record = fit.record
    target = Path(args.out or f"{record.fitted_on[0]}-measured.yaml")
    if not args.out:
        check_writable("--out", target)
    write_text_atomic(target, overlay_yaml(record))
    wrote("calibrate", target)
    if args.json:
        print(json.dumps({"out": str(target), **fit.model_dump(mode="json")}, indent=2))
    else:
        print(measured_text(fit, out=str(target)))
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    from planner.api import migrate
    from planner.report.markdown import migrate_text

    _offload_auto(args, searches=False)
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
    _write_reports(args, result)
    return 0


def _cmd_whatif(args: argparse.Namespace) -> int:
    from planner.api import whatif
    from planner.cli.progress import progress, wanted
    from planner.report.markdown import whatif_text

    _offload_auto(args, searches=False)
    renderers = _check_report_targets(args)  # before the sweep: fail in seconds, not after it
    fix = _parse_fix(args.fix)
    workload = _workload(args)
    for knob in _varied_flags(args, fix):  # a default the sweep replaces is not a conflict
        workload.pop(knob, None)
    with progress("whatif", None, enabled=wanted(args.progress), unit="scenarios") as update:
        result = _whatif_with(args, whatif, fix, workload, lambda done, total: update(done, total))
    result = result.model_copy(update={"command": shlex.join(["layout", *args.argv])})  # type: ignore[attr-defined]
    for target, render in renderers:
        _write_text(target, render(result))
        wrote("whatif", target)
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


def _whatif_with(
    args: argparse.Namespace,
    whatif: Callable[..., object],
    fix: dict[str, object],
    workload: dict[str, object],
    progress: Callable[[int, int], None],
) -> object:
    return whatif(
        model=args.model,
        cluster=_cluster(args),
        workload=workload,
        vary=args.vary,
        fix=fix,
        workers=args.workers,
        engine=args.engine,
        tokens=args.tokens,
        steps=args.steps,
        progress=progress,
        max_scenarios=args.max_scenarios,
        note=lambda line: sys.stderr.write(f"layout whatif: note: {line}\n"),
    )


VARY_FLAGS: dict[str, tuple[str, ...]] = {
    "global_batch": ("global_batch", "global_batch_tokens"),
    "ep_overlap": ("ep_overlap",),
    "moe_dispatcher": ("moe_dispatcher",),
    "moe_cuda_graphs": ("moe_cuda_graphs",),
}
"""Flags (destinations) that set what a --vary knob sets, where they are not the knob's name."""


def _varied_flags(args: argparse.Namespace, fix: dict[str, object]) -> list[str]:
    """The knobs of ``--vary``, after checking that no flag sets one of them too: the sweep
    would replace the flag's value in every scenario without a word."""
    from planner.errors import SpecError
    from planner.search.whatif import split_vary

    flags = given(args)
    knobs = [split_vary(text)[0] for text in args.vary]
    for knob in knobs:
        for dest in VARY_FLAGS.get(knob, (knob,)):
            if dest in flags:
                raise SpecError(
                    f"--vary {knob} and {flags[dest]} both set {knob}: the sweep would replace "
                    f"{flags[dest]} in every scenario; give the values in --vary alone"
                )
        if knob in fix:
            raise SpecError(
                f"--vary {knob} and --fix {knob}={fix[knob]} both set {knob}: give the values "
                "in --vary alone"
            )
    return knobs


def _check_report_targets(args: argparse.Namespace) -> list[tuple[str, Callable[..., str]]]:
    """Pre-flight of ``--report``, run before the sweep: each target with its renderer (by
    suffix). Folders, permissions, inputs and repeats are checked for every output flag by
    planner.cli.outputs.check_outputs before any command runs."""
    return [(target, _report_renderer(target)) for target in args.report]


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
    from planner.specs.workload import TrainWorkload

    if args.plan:
        plan = load_plan_file(args.plan)
        _check_plan_flags(args, plan)
        args.cluster = args.cluster or plan.cluster
        if plan.mode == "serve":
            given = _serve_workload(args) if args.mode == "serve" else {}
            workload = _validated_serve_workload(given or {"context": args.seq_len})
        elif plan.workload is not None:  # type: ignore[union-attr]
            _check_train_flags(args)
            workload = _saved_workload(args, plan.workload)  # type: ignore[union-attr]
        else:
            _check_train_flags(args)
            batch = _workload(args).get("global_batch")
            workload = workload_for_plan(plan, seq_len=args.seq_len, global_batch=batch)  # type: ignore[arg-type,assignment]
        model = load_model(args.model or plan.model)
        cluster = _cluster(args)
        if plan.num_gpus < cluster.num_accelerators and plan.mode == "train":  # type: ignore[attr-defined]
            from contextlib import suppress

            from planner.errors import InternalError
            from planner.search.engine import sub_cluster

            with suppress(InternalError):  # the plan's first GPUs of the cluster (--gpus, cost)
                cluster = sub_cluster(cluster, plan.num_gpus)  # type: ignore[arg-type]
        return make_job(plan, model=model, cluster=cluster, workload=workload)  # type: ignore[arg-type]
    if not (args.model and args.cluster):
        raise SpecError("export needs --plan FILE, or --model and --cluster to search")
    if args.mode == "serve":
        if args.format not in ("vllm", "sglang"):
            raise SpecError(
                f"--format {args.format} runs a training job; --mode serve exports to vllm or "
                "sglang"
            )
        return _serve_export_job(args)
    _check_train_flags(args)
    model, cluster, workload = load_model(args.model), _cluster(args), _workload(args)
    config = SolverConfig(
        solver=args.solver,
        time_limit_s=args.time_limit,
        top=1,
        objective=args.objective,
        offload_as_needed=_offload_auto(args, searches=True),
    )
    fix = _parse_fix(args.fix)
    result = search(
        model=model,  # type: ignore[arg-type]
        cluster=cluster,  # type: ignore[arg-type]
        workload=workload,
        fix=fix,
        config=config,
        cluster_state=args.cluster_state,
    )
    # the workload the plan was scored on: the framework profile's defaults resolved
    train = result.best.workload or TrainWorkload(**workload)  # type: ignore[arg-type]
    return make_job(result.best, model=model, cluster=cluster, workload=train)  # type: ignore[arg-type]


_WORKLOAD_FLAGS = {
    "seq_len": "--seq-len",
    "global_batch": "--global-batch",
    "grad_reduce_dtype": "--grad-reduce",
    "expert_load_imbalance": "--expert-load-imbalance",
    "moe_capacity_factor": "--moe-capacity-factor",
    "moe_expert_compute": "--moe-expert-compute",
    "optimizer_state_dtype": "--optimizer-state",
    "fp8_param_gather": "--fp8-param-gather",
    "fused_grouped_mlp": "--fused-grouped-mlp",
    "sequence_parallel": "--no-sequence-parallel",
    "tp_comm_overlap": "--tp-overlap / --no-tp-overlap",
    "dp_comm_overlap": "--dp-overlap",
    "recompute_modules": "--recompute-modules",
    "recompute_num_layers": "--recompute-num-layers",
    "saved_tensors": "--saved-tensors",
    "activation_offload_fraction": "--activation-offload",
    "fused_elementwise": "--elementwise",
    "flash_attention": "--attention-kernel",
    "attention_kernel": "--attention-kernel",
    "cross_entropy": "--cross-entropy",
    "zero_shard_group": "--zero-shard-group",
    "ddp_bucket_params": "--ddp-bucket-size",
    "reshard_after_forward": "--reshard-after-forward",
    "fsdp_gather_unit": "--fsdp-gather-unit",
    "fsdp2_buffer_copies": "--fsdp-buffer-copies",
    "weight_cast": "--weight-cast",
    "fp8_casts": "--fp8-casts",
    "host_sync_interval": "--host-sync-interval",
    "pipeline_schedule": "--pipeline-schedule",
    "moe_dispatch_dedup": "--moe-dispatcher",
    "ep_comm_overlap": "--ep-overlap",
    "moe_host_sync": "--moe-cuda-graphs",
    "cp_comm": "--cp-comm",
    "cp_impl": "--cp-impl",
}
"""TrainWorkload field -> the flag that sets it."""


def _saved_workload(args: argparse.Namespace, saved: object) -> object:
    """The workload a saved plan records; a workload flag given with ``--plan`` must say the
    same (the plan was scored on it: another would export settings it did not predict)."""
    from planner.errors import SpecError

    given = _workload(args)
    typed = set(getattr(args, "argv", []))
    for key, value in given.items():
        flag = _WORKLOAD_FLAGS.get(key, key)
        if key == "precision" or (key in ("seq_len", "global_batch") and not any(
            t.startswith(flag) for t in typed
        )):  # fmt: skip
            continue  # precision comes from the plan's layout; defaults were not typed
        if getattr(saved, key) != value:
            raise SpecError(
                f"the plan was made with {key} {getattr(saved, key)!s}, not {value!s}: drop "
                f"{flag} (a saved plan records its workload) or re-run the search"
            )
    return saved


def _validated_serve_workload(fields: dict[str, object]) -> object:
    from planner.catalog.io import validate_spec
    from planner.specs.workload import ServeWorkload

    return validate_spec(ServeWorkload, {"mode": "serve", **fields}, where="serving workload")


def _serve_export_job(args: argparse.Namespace) -> object:
    """``export --mode serve``: the best plan of ``search --mode serve`` with the same flags."""
    from planner.api import load_model, serve_search
    from planner.catalog.engines import default_engine
    from planner.report.export import make_job
    from planner.specs.solver_config import SolverConfig

    model, cluster = load_model(args.model), _cluster(args)
    fields = _serve_workload(args)
    named_engine = "engine" in fields
    # the plan is priced with the engine it is exported to unless --serving-engine says otherwise
    fields.setdefault("engine", args.format)
    workload = _validated_serve_workload(fields)
    config = SolverConfig(solver=args.solver, time_limit_s=args.time_limit, top=1)
    result = serve_search(
        model=model,
        cluster=cluster,
        workload=workload,
        fix=_parse_fix(args.fix, serve=True),
        config=config,  # type: ignore[arg-type]
    )
    job = make_job(result.best, model=model, cluster=cluster, workload=workload)  # type: ignore[arg-type]
    searched = default_engine(cluster.accelerator.vendor)
    if not named_engine and searched != args.format:
        job.origin.append(  # type: ignore[attr-defined]
            f"searched with the {args.format} engine profile, as it is exported to: the layout "
            f"can differ from what 'layout search --mode serve' prints ({searched} profile); "
            f"--serving-engine {searched} exports that one"
        )
    return job


SAVED_PLAN_REL_TOL = 1e-3
"""How closely a saved plan's recorded memory must match its layout re-scored by this version
(the JSON keeps 6+ significant digits; a cost-model change moves step time, not the GPU count)."""


PLAN_FIXES: tuple[str, ...] = (
    "fix", "time_limit", "solver", "precision", "recompute_modules", "recompute_num_layers",
    "moe_dispatcher", "ep_overlap", "moe_cuda_graphs", "grad_reduce", "optimizer_state",
    "fp8_param_gather", "fused_grouped_mlp", "expert_load_imbalance", "moe_capacity_factor",
    "moe_expert_compute", "saved_tensors", "activation_offload", "elementwise",
    "attention_kernel", "cross_entropy", "zero_shard_group", "ddp_bucket_size",
    "reshard_after_forward",
    "fsdp_gather_unit", "fsdp_buffer_copies", "weight_cast", "fp8_casts", "host_sync_interval",
    "no_sequence_parallel", "no_tp_overlap", "tp_overlap", "dp_overlap", "pipeline_schedule",
)  # fmt: skip
"""Search and workload flags that a saved plan already settles: with --plan they are refused."""

SERVE_PLAN_FIXES: tuple[str, ...] = (
    "context", "prompt_len", "output_len", "concurrency", "kv_precision", "compute_precision",
    "max_num_tokens", "kv_cache_fraction", "tpot_ms", "ttft_ms", "e2e_ms", "request_rate",
    "target_tokens_per_s", "serving_engine", "routing_skew", "slo_percentile",
)  # fmt: skip
"""Serving workload flags a saved serving plan settles (its engine's settings): refused too."""


def _check_plan_flags(args: argparse.Namespace, plan: object) -> None:
    """With --plan, a search or workload flag the plan settles would be ignored: refuse it.
    (--seq-len and --global-batch stay: they say which workload the plan was made for.)"""
    from planner.errors import SpecError
    from planner.specs.result import ServePlan

    flags = given(args)
    refused = list(PLAN_FIXES)
    if isinstance(plan, ServePlan):  # a serving plan has a context, no global batch
        refused += ["global_batch", "global_batch_tokens", *SERVE_PLAN_FIXES]
        engine = plan.engine
        if "seq_len" in flags and engine is not None and args.seq_len != engine.max_model_len:
            raise SpecError(
                f"{flags['seq_len']} {args.seq_len}: the saved serving plan was made for "
                f"{engine.max_model_len}-token contexts (give that, or leave it out)"
            )
    for dest in refused:
        if dest in flags:
            raise SpecError(
                f"{flags[dest]} does not apply with --plan: the saved plan settles its layout, "
                "precision and settings (to search, give --model and --cluster without --plan)"
            )


def _check_saved_plan(job: object) -> None:
    """A saved plan is re-validated against the model and cluster it names before it is
    exported (planner.api.check_plan): a hand-edited ``fits``, ``peak_gib`` or ``num_gpus`` is
    an error. The file does not record its workload or cluster edits, so a step time or a
    cluster that differs only warns (pass the same --seq-len / cluster flags)."""
    from planner.api import check_plan

    check_plan(
        job.plan,  # type: ignore[attr-defined]
        model=job.model,  # type: ignore[attr-defined]
        cluster=job.cluster,  # type: ignore[attr-defined]
        workload=job.workload,  # type: ignore[attr-defined]
        warn=lambda line: sys.stderr.write(f"layout export: warning: {line}\n"),
        cli=True,
    )


def _cmd_schema(args: argparse.Namespace) -> int:
    from planner.report.schema import schema_text

    print(schema_text(args.kind), end="")
    return 0


def _cmd_pack(args: argparse.Namespace) -> int:
    """``layout pack``: exit 0 with a packing, 1 when none exists (naming the binding limit),
    2 for a bad job, pool or state file."""
    from planner.api import pack
    from planner.cli.progress import progress, wanted
    from planner.report.fleet import pack_text
    from planner.specs.solver_config import SolverConfig

    with progress("pack", None, enabled=wanted(args.progress), unit="searches") as update:
        result = pack(
            cluster=args.cluster,
            jobs=args.job,
            cluster_state=args.cluster_state,
            config=SolverConfig(time_limit_s=args.time_limit),
            workers=args.workers,
            progress=lambda done, total: update(done, total),
            note=lambda line: sys.stderr.write(f"layout pack: note: {line}\n"),
        )
    print(result.model_dump_json(indent=2) if args.json else pack_text(result))
    return 0
