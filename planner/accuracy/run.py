"""Score the validation set: planner prediction vs published tokens/s/GPU, row by row.

A row whose layout is fully stated is scored with ``estimate``; otherwise ``search`` pins what
the source states (tp, pp, dp, cp, ep and any stated vpp/mbs/recompute/zero) and takes the best
plan. Signed error = predicted / measured - 1. Rows the planner cannot evaluate (a SpecError or
InfeasibleError) are kept with their one-line reason and left out of the statistics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from planner.accuracy.band import BandReport, catalog_band_report
from planner.accuracy.rows import (
    REPO_DATA_DIR,
    Case,
    data_date,
    expand_cases,
    is_moe,
    load_rows,
    row_cluster,
    row_profile,
    stated_layout,
    to_model_spec,
    training_file,
    workload_of,
)
from planner.catalog.store import suggest
from planner.errors import InfeasibleError, SpecError, one_line
from planner.search import engine
from planner.specs.base import FrozenSpec
from planner.specs.hardware import ResidualSummary
from planner.specs.layout import Layout
from planner.specs.result import Plan
from planner.specs.solver_config import DEFAULT_MEMORY_HEADROOM, SolverConfig

REPORT_SCHEMA_VERSION = "1.1"
"""Version of the ValidationReport JSON shape (minor bumps are additive)."""
LAYOUT_FIELDS: tuple[str, ...] = ("tp", "pp", "dp", "cp", "ep", "vpp", "mbs", "recompute", "zero")
"""Fields that must all be stated for a row to be estimated rather than searched."""
_SEARCH_CONFIG = SolverConfig(solver="exhaustive", top=1, stage_split="even", memory_headroom=0.0)
"""Published runs split their layers evenly (or as stated) and fit as they ran: the validation
scores the even split and keeps no memory headroom."""
"""The pinned candidate set is small; the exhaustive ranking is exact and deterministic."""


class RowResult(FrozenSpec):
    """One row (or variant) of the validation set, predicted and measured."""

    id: str
    """Row id; ``ROW/variant`` for a variant (``K1/full``)."""
    model: str
    """Model name as the source labels it."""
    cluster: str
    """Planner cluster name."""
    accelerator: str
    """Accelerator family: a100, h100, b200."""
    kind: Literal["dense", "moe"]
    """Dense or mixture-of-experts model."""
    framework: str = "megatron"
    """Framework profile the row runs under (``topologies/frameworks/``)."""
    precision: str
    """Training precision."""
    stated: dict[str, str | int]
    """Layout fields the source states (the rest were searched)."""
    method: Literal["estimate", "search"]
    """How the prediction was made."""
    status: Literal["ok", "not_evaluated"]
    """``ok``: predicted; ``not_evaluated``: the planner rejected the row (see ``reason``)."""
    reason: str | None = None
    """Why the planner could not evaluate the row (one line)."""
    layout: Layout | None = None
    """Layout the prediction is for (searched fields filled in)."""
    predicted_tokens_per_s_per_gpu: float | None = None
    """Planner's tokens/s/GPU."""
    measured_tokens_per_s_per_gpu: float
    """Published tokens/s/GPU."""
    error: float | None = None
    """Signed relative error, predicted / measured - 1."""
    fits: bool | None = None
    """Whether the planner thinks the (estimated) layout fits memory; the real run did."""
    fit_note: str | None = None
    """What the planner says does not fit, when ``fits`` is false."""
    warnings: list[str] = Field(default_factory=list)
    """The plan's own warnings."""
    time_s: float = 0.0
    """Wall time spent on this row (s)."""


class Summary(FrozenSpec):
    """Error statistics over a group of rows (only rows that were evaluated)."""

    group: str
    """``all`` or ``<accelerator> <dense|moe>``."""
    rows: int
    """Rows in the group, evaluated or not."""
    evaluated: int
    """Rows with a prediction (the statistics cover these)."""
    not_evaluated: int
    """Rows the planner could not evaluate."""
    median_abs_error: float | None
    """Median of |predicted / measured - 1|."""
    max_abs_error: float | None
    """Largest |predicted / measured - 1|."""
    bias: float | None
    """Mean signed error (positive = the planner is optimistic)."""
    worst: str | None
    """Id of the row with the largest |error|."""


class ValidationReport(FrozenSpec):
    """The answer of ``layout validate``."""

    schema_version: str = REPORT_SCHEMA_VERSION
    """Version of this JSON shape."""
    data: str
    """Validation file scored."""
    data_date: str
    """Newest date cited by the file's sources (the data's 'as of' date)."""
    metric: str = "tokens_per_s_per_gpu"
    """What is compared."""
    rows: list[RowResult]
    """Per row, file order, variants after their row."""
    overall: Summary
    """Statistics over every evaluated row."""
    families: list[Summary]
    """Statistics per accelerator x dense/MoE."""
    total_time_s: float
    """Wall time of the whole run (s)."""
    band: BandReport | None = None
    """The ± band plans print: its level, the stored held-out band per family and regime, and
    its measured coverage (from the calibration overlays and topologies/trust.yaml)."""


def summarize(group: str, results: Sequence[RowResult]) -> Summary:
    """Median and max |error| and the mean signed error of the evaluated rows."""
    done = [r for r in results if r.status == "ok" and r.error is not None]
    errors = [r.error for r in done]
    if not done:
        return Summary(
            group=group,
            rows=len(results),
            evaluated=0,
            not_evaluated=len(results),
            median_abs_error=None,
            max_abs_error=None,
            bias=None,
            worst=None,
        )
    worst = max(done, key=lambda r: abs(r.error))  # type: ignore[arg-type]
    stats = ResidualSummary.of(errors)  # type: ignore[arg-type]
    return Summary(
        group=group,
        rows=len(results),
        evaluated=len(done),
        not_evaluated=len(results) - len(done),
        median_abs_error=stats.median_abs,
        max_abs_error=stats.max_abs,
        bias=stats.bias,
        worst=worst.id,
    )


def family_summaries(results: Sequence[RowResult]) -> list[Summary]:
    """One Summary per accelerator x dense/MoE that has rows, in a fixed order."""
    groups: dict[tuple[str, str], list[RowResult]] = {}
    for r in results:
        groups.setdefault((r.accelerator, r.kind), []).append(r)
    return [summarize(f"{acc} {kind}", groups[acc, kind]) for acc, kind in sorted(groups)]


def prediction_method(stated: dict[str, object]) -> Literal["estimate", "search"]:
    """``estimate`` when the source states every layout field, else ``search`` over the rest."""
    return "estimate" if all(k in stated for k in LAYOUT_FIELDS) else "search"


def predict_case(case: Case) -> Plan:
    """The plan for one case as validation predicts it: its stated layout pinned, its recipe's
    settings applied, anything unstated searched (raises SpecError or InfeasibleError)."""
    stated = stated_layout(case.row)
    return _predict(case, stated, prediction_method(stated))[0]


def evaluate_case(case: Case) -> RowResult:
    """Predict one case; a SpecError or InfeasibleError becomes a not-evaluated row."""
    row = case.row
    stated = stated_layout(row)
    method = prediction_method(stated)
    base = {
        "id": case.id,
        "model": row.model.name,
        "cluster": row.cluster,
        "accelerator": row.hardware.family,
        "kind": "moe" if is_moe(row) else "dense",
        "framework": row_profile(row),
        "precision": row.precision,
        "stated": stated,
        "method": method,
        "measured_tokens_per_s_per_gpu": case.measured_tokens_per_s_per_gpu,
    }
    start = time.perf_counter()
    try:
        plan, fit_note = _predict(case, stated, method)
    except (SpecError, InfeasibleError) as exc:
        return RowResult(
            **base,
            status="not_evaluated",
            reason=one_line(str(exc)),
            time_s=time.perf_counter() - start,
        )
    predicted = plan.tokens_per_s_per_gpu
    return RowResult(
        **base,
        status="ok",
        layout=plan.layout,
        predicted_tokens_per_s_per_gpu=predicted,
        error=predicted / case.measured_tokens_per_s_per_gpu - 1.0,
        fits=plan.fits,
        fit_note=fit_note or None,
        warnings=list(plan.warnings),
        time_s=time.perf_counter() - start,
    )


_TUNED_CONFIG = _SEARCH_CONFIG.model_copy(update={"memory_headroom": DEFAULT_MEMORY_HEADROOM})
"""A tuned batch is the planner's choice, made as it would recommend one: with the search's
default memory headroom (a batch that only fits with none would not have been the one kept)."""


def tuned_batch_plan(case: Case, stated: dict[str, object]) -> Plan:
    """The planner's best plan over the local batch sizes a row's recipe lists
    (``RecipeRow.local_batch_sizes``): the stated degrees pinned, global batch = dp x the local
    batch (no gradient accumulation), anything unstated searched; the fastest that fits.
    Raises InfeasibleError when none fits (the smallest batch's reason)."""
    row = case.row
    recipe = row.recipe
    if recipe is None or recipe.local_batch_sizes is None or "dp" not in stated:
        raise SpecError(f"row {row.id}: no local batch sizes to tune over")
    model, cluster = to_model_spec(row), row_cluster(row)
    dp = stated["dp"]
    if not isinstance(dp, int):
        raise SpecError(f"row {row.id}: dp {dp!r} is not a whole number")
    best: Plan | None = None
    first_error: InfeasibleError | None = None
    for local in recipe.local_batch_sizes:
        workload = workload_of(row, global_batch=dp * local)
        try:
            result = engine.search(
                model, cluster, workload, fix={**stated, "mbs": local}, config=_TUNED_CONFIG
            )
        except InfeasibleError as exc:
            first_error = first_error or exc
            continue
        plan = result.best
        if best is None or plan.tokens_per_s_per_gpu > best.tokens_per_s_per_gpu:
            best = plan
    if best is None:
        assert first_error is not None
        raise first_error
    return best


def _predict(
    case: Case, stated: dict[str, object], method: Literal["estimate", "search"]
) -> tuple[Plan, str]:
    row = case.row
    if row.workload.global_batch is None and row.recipe and row.recipe.local_batch_sizes:
        return tuned_batch_plan(case, stated), ""
    model = to_model_spec(row)
    cluster = row_cluster(row)
    workload = workload_of(row)
    if method == "search":
        result = engine.search(model, cluster, workload, fix=stated, config=_SEARCH_CONFIG)
        return result.best, ""
    layout = Layout.model_validate({**stated, "precision": workload.precision})
    plan = engine.estimate(model, cluster, workload, layout)
    return plan, engine.not_fitting_message(plan, model, cluster, workload)


def select_cases(cases: list[Case], ids: Sequence[str] | None) -> list[Case]:
    """Cases named by ``ids`` (a row id selects the row and its variants), in file order."""
    if not ids:
        return cases
    known = [c.id for c in cases]
    for wanted in ids:
        if not any(c == wanted or c.startswith(f"{wanted}/") for c in known):
            raise SpecError(f"unknown validation row '{wanted}'{suggest(wanted, known)}")
    return [c for c in cases if any(c.id == w or c.id.startswith(f"{w}/") for w in ids)]


def run_validation(
    path: Path | None = None,
    *,
    ids: Sequence[str] | None = None,
    progress: Callable[[RowResult], None] | None = None,
) -> ValidationReport:
    """Score every row (or the rows named by ``ids``) of a training validation file (default:
    the bundled one)."""
    start = time.perf_counter()
    path = path or training_file()
    cases = select_cases(expand_cases(load_rows(path)), ids)
    results: list[RowResult] = []
    for case in cases:
        result = evaluate_case(case)
        results.append(result)
        if progress is not None:
            progress(result)
    return ValidationReport(
        data=_display_path(path),
        data_date=data_date(path),
        rows=results,
        overall=summarize("all", results),
        families=family_summaries(results),
        total_time_s=time.perf_counter() - start,
        band=catalog_band_report(),
    )


def _display_path(path: Path) -> str:
    """``tests/validation/training.yaml`` for the bundled file (wherever it is installed)."""
    resolved = path.resolve()
    if resolved == training_file().resolve():
        return "tests/validation/training.yaml"
    try:
        return str(resolved.relative_to(REPO_DATA_DIR.parents[1]))
    except ValueError:
        return str(path)
