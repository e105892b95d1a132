"""Shared by the held-out benchmarks (``heldout_*.py``): predict published runs the calibration
has never seen, each with its stated layout, and print predicted vs measured tokens/s/GPU."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import planner
from planner.accuracy.rows import moe_layer_graphed
from planner.api import not_fitting_reason
from planner.errors import InfeasibleError, SpecError
from planner.specs.result import Plan
from planner.specs.trust import coverage
from planner.specs.workload import TrainWorkload

Row = tuple[str, str, str, dict[str, object], dict[str, object], float]
"""(id, model, cluster, workload fields, layout fields, measured tokens/s/GPU). The layout's
``pipeline_split`` (a Megatron-LM layout string or a dict of its split flags, as
``planner.estimate`` takes them) is the split the run used, scored as given; without one the
planner splits the layers itself."""


def step_tokens_per_s_per_gpu(global_batch: int, seq_len: int, step_s: float, gpus: int) -> float:
    """A published step time as tokens/s/GPU: global_batch x seq_len tokens over ``gpus`` GPUs
    in ``step_s`` seconds.

    >>> step_tokens_per_s_per_gpu(512, 4096, 8.0, 256)
    1024.0
    """
    return global_batch * seq_len / (step_s * gpus)


def host_sync_by_graph_scope(workload: dict[str, object]) -> dict[str, object]:
    """``workload`` with its ``cuda_graph_scope`` (the run's Megatron setting) replaced by the
    ``moe_host_sync`` that scope implies, as for the validation rows
    (:func:`planner.accuracy.rows.moe_layer_graphed`: only a whole-layer or full-iteration
    graph removes the MoE layer's host sync)."""
    fields = dict(workload)
    scope = fields.pop("cuda_graph_scope")
    fields["moe_host_sync"] = not moe_layer_graphed(scope)  # type: ignore[arg-type]
    return fields


def predict_row(row: Row, framework: dict[str, object]) -> Plan:
    """The plan of one row with its published layout (ZeRO-1, the distributed optimizer, unless
    the layout states its ZeRO stage; expert tensor parallelism 1, as every one of these configs
    sets ``expert_tensor_parallel_size``)
    on top of the ``framework`` settings its release shares, under the pipeline split it ran
    when it gives one. SpecError or InfeasibleError (with the reason) when the planner cannot
    evaluate it or it does not fit."""
    _, model, cluster, workload, layout, _ = row
    spec = TrainWorkload.model_validate({**framework, **workload})
    fields = {k: v for k, v in layout.items() if k != "pipeline_split"}
    if "pipeline_split" in layout:  # the split the run used
        plan = planner.estimate(
            model=model,
            cluster=cluster,
            workload=spec,
            layout={"zero": 1, "etp": 1, **fields},
            pipeline_split=layout["pipeline_split"],  # type: ignore[arg-type]
        )
    else:
        plan = planner.search(
            model=model, cluster=cluster, workload=spec, fix={"zero": 1, "etp": 1, **fields}, top=1
        ).best
    if not plan.fits:
        raise InfeasibleError(not_fitting_reason(plan, model, cluster, spec) or "does not fit")
    return plan


def predict_rows(
    rows: Sequence[Row], framework: dict[str, object], *, id_width: int, layout_width: int
) -> None:
    """Predict each row (:func:`predict_row`) and print one line a row and the summary (median
    |error|, max, signed mean), and how many rows fell inside the ± band the planner printed
    for them (its coverage, to compare with the band's stated level). A row the planner cannot
    evaluate prints its reason and stays out of the statistics."""
    errors: list[float] = []
    bands: list[float] = []
    levels: set[float | None] = set()
    for row in rows:
        row_id, cluster, measured = row[0], row[2], row[5]
        try:
            plan = predict_row(row, framework)
        except (SpecError, InfeasibleError) as exc:
            reason = " ".join(str(exc).split())
            print(
                f"{row_id:{id_width}s} {cluster:16s} not evaluated: {type(exc).__name__}: {reason}"
            )
            continue
        error, band, scores = scored(plan, measured)
        errors.append(error)
        bands.append(band)
        levels.add(plan.uncertainty_level)
        print(f"{row_id:{id_width}s} {cluster:16s} {plan.layout.short():{layout_width}s} {scores}")
    print_summary(errors, bands, levels)


def scored(plan: Plan, measured: float) -> tuple[float, float, str]:
    """(error = predicted / measured - 1, the plan's ± band as a fraction, the row's words:
    predicted and measured tokens/s/GPU, the error, the band and OUTSIDE when it misses)."""
    error = plan.tokens_per_s_per_gpu / measured - 1.0
    band = (plan.uncertainty_pct or 0.0) / 100.0
    words = (
        f"predicted {plan.tokens_per_s_per_gpu:8,.0f}  measured {measured:8,.0f}  {error:+6.1%}"
        f"  band ±{band:.1%}{'' if abs(error) <= band else '  OUTSIDE'}"
    )
    return error, band, words


def print_summary(
    errors: Sequence[float], bands: Sequence[float], levels: set[float | None]
) -> None:
    """The held-out summary: median |error|, max, signed mean, and how many rows fell inside
    the ± band the planner printed for them (its coverage, to compare with the band's level)."""
    if not errors:
        print("0 held-out rows evaluated")
        return
    print(
        f"{len(errors)} held-out rows: median |err| {statistics.median(map(abs, errors)):.1%}, "
        f"max {max(map(abs, errors)):.1%}, bias {statistics.fmean(errors):+.1%}"
    )
    inside = round(coverage(errors, bands) * len(errors))
    level = ", ".join("none" if v is None else f"{v:.0%}" for v in sorted(levels, key=str))
    print(
        f"inside the printed band: {inside} of {len(errors)} ({coverage(errors, bands):.0%}; "
        f"band level {level}), median band ±{statistics.median(bands):.1%}"
    )
