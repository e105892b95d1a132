"""The ``beyond_longest_sequence`` widening (``topologies/trust.yaml``) measured on NeMo's
long-sequence tables (the LS rows, which no fit uses: ``TrainingRow.fit`` false),
and the coverage of the band those rows' plans print (``python benchmarks/long_sequence_band.py``;
DESIGN.md section 9, issue 18 item 7).

Each row is predicted as ``layout validate`` predicts it. For a row longer than any validated run
of its family (its plan carries the sequence widening's warning), the band the plan would print
without the widening is its band over the factor; the split-conformal quantile of |error| over
that band (:func:`planner.specs.trust.band_quantile`) is the factor that band needs to hold the
level's share of such rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from planner.accuracy.loso import source_of
from planner.accuracy.rows import Case
from planner.accuracy.run import predict_case
from planner.search.trust import BEYOND_LONGEST_SEQUENCE
from planner.specs.result import Plan


class ScoredRow(NamedTuple):
    """One unfitted row: its case, plan, error (predicted / measured - 1) and printed band
    (fraction), and whether the plan carries the sequence widening."""

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


def score_rows(cases: Sequence[Case]) -> list[ScoredRow]:
    """Predict each case (raises SpecError or InfeasibleError as ``predict_case`` does)."""
    out = []
    for case in cases:
        plan = predict_case(case)
        out.append(
            ScoredRow(
                case=case,
                plan=plan,
                error=plan.tokens_per_s_per_gpu / case.measured_tokens_per_s_per_gpu - 1.0,
                band=(plan.uncertainty_pct or 0.0) / 100.0,
                beyond=any(BEYOND_LONGEST_SEQUENCE in w for w in plan.warnings),
            )
        )
    return out


def widening_ratios(rows: Sequence[ScoredRow], factor: float) -> list[float]:
    """|error| over the band each plan would print without the sequence widening (``factor``),
    for the rows it widened.

    >>> widening_ratios([ScoredRow(None, None, 0.3, 0.15, True),  # type: ignore[arg-type]
    ...                  ScoredRow(None, None, 0.1, 0.1, False)], 1.5)
    [3.0]
    """
    return [abs(r.error) / (r.band / factor) for r in rows if r.beyond and r.band > 0]
