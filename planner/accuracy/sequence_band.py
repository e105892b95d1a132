"""Widenings of ``topologies/trust.yaml`` measured on rows no fit uses, and the coverage of the
bands their plans print (DESIGN.md section 9, issue 18 item 7):

* ``beyond_longest_sequence`` on NeMo's long-sequence tables (the LS rows, ``TrainingRow.fit``
  false; ``python benchmarks/long_sequence_band.py``);
* ``no_family_rows`` on the rows of accelerator families no published run calibrates (TPU and
  AMD; ``python benchmarks/transfer_calibration.py``, beside its leave-one-family-out check).

Each row is predicted as ``layout validate`` predicts it. For a row whose plan carries the
widening's warning, the band the plan would print without the widening is its band over the
factor; the split-conformal quantile of |error| over that band
(:func:`planner.specs.trust.band_quantile`) is the factor that band needs to hold the level's
share of such rows, given every other widening the plan carries (a framework without rows, a
precision without rows, ...), which stays in the band it is measured against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from planner.accuracy.loso import source_of
from planner.accuracy.rows import Case
from planner.accuracy.run import predict_case
from planner.catalog import load_cluster
from planner.catalog.store import fitted_calibrations
from planner.search.trust import BEYOND_LONGEST_SEQUENCE, POOLED_FAMILY_BAND
from planner.specs.result import Plan


class ScoredRow(NamedTuple):
    """One unfitted row: its case, plan, error (predicted / measured - 1) and printed band
    (fraction), and whether the plan carries the widening measured (:func:`score_rows`)."""

    case: Case
    plan: Plan
    error: float
    band: float
    beyond: bool


LONG_SEQUENCE_SOURCE = "LS"
"""Source group (:func:`planner.accuracy.loso.source_of`) of NeMo's long-sequence tables."""


def long_sequence_cases(cases: Sequence[Case]) -> list[Case]:
    """The cases of NeMo's long-sequence tables, rows no fit uses (``TrainingRow.fit`` false;
    the other unfitted Megatron-LM rows, DGX Cloud's at 2K-4K tokens, measure no widening)."""
    return [c for c in cases if not c.row.fit and source_of(c.id) == LONG_SEQUENCE_SOURCE]


def unfitted_family_cases(cases: Sequence[Case]) -> list[Case]:
    """The cases on accelerators of a family no published run calibrates (no fitted overlay in
    ``topologies/calibration/``: TPU and AMD today), which no fit sees."""
    fitted = {r.family for r in fitted_calibrations()}
    return [c for c in cases if load_cluster(c.row.cluster).accelerator.family not in fitted]


def score_rows(cases: Sequence[Case], widening: str = BEYOND_LONGEST_SEQUENCE) -> list[ScoredRow]:
    """Predict each case (raises SpecError or InfeasibleError as ``predict_case`` does);
    ``beyond``: its plan carries the warning with the words ``widening`` (the sequence
    widening's by default, :data:`POOLED_FAMILY_BAND` for a family without rows)."""
    out = []
    for case in cases:
        plan = predict_case(case)
        out.append(
            ScoredRow(
                case=case,
                plan=plan,
                error=plan.tokens_per_s_per_gpu / case.measured_tokens_per_s_per_gpu - 1.0,
                band=(plan.uncertainty_pct or 0.0) / 100.0,
                beyond=any(widening in w for w in plan.warnings),
            )
        )
    return out


def family_rows_ratios(cases: Sequence[Case], factor: float) -> list[float]:
    """|error| over the band without the ``no_family_rows`` widening (``factor``) of every
    training case on a family no published run calibrates (:func:`unfitted_family_cases`)."""
    scored = score_rows(unfitted_family_cases(cases), POOLED_FAMILY_BAND)
    return widening_ratios(scored, factor)


def widening_ratios(rows: Sequence[ScoredRow], factor: float) -> list[float]:
    """|error| over the band each plan would print without the widening (``factor``), for the
    rows it widened.

    >>> widening_ratios([ScoredRow(None, None, 0.3, 0.15, True),  # type: ignore[arg-type]
    ...                  ScoredRow(None, None, 0.1, 0.1, False)], 1.5)
    [3.0]
    """
    return [abs(r.error) / (r.band / factor) for r in rows if r.beyond and r.band > 0]
