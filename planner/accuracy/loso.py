"""Out-of-sample errors for the ± band (DESIGN.md section 9): leave one source out, refit the
family's efficiency factors on its other sources, predict the held-out rows.

A source is a row id's letter prefix (S: SC'21, K: Korthikanti et al., M: Megatron-LM H100
table, N: Megatron-Bridge, F and G: NeMo tables, D: DGX Cloud recipes), so rows that share a
publication, and with it a software stack and a way of measuring, are held out together. The
in-sample residuals of ``layout calibrate --fit`` (median 4%) are errors on rows the factors were
fitted on; these are the errors a new run can expect, and the bands are their quantiles.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from planner.accuracy.calibrate import PreparedCase, fit_families, predict
from planner.catalog.store import load_trust
from planner.specs.trust import BandSummary, HeldoutRecord

REGIMES = ("dense", "moe")
"""Training regimes with their own band. A context-length class is not one: a single row
(F11, 64K tokens) is longer than 8K, so long context is an extrapolation (``trust.yaml``)."""
METHOD = (
    "leave one source out (a source = the row ids' letter prefix): refit every family's factors "
    "and the shared per-step cost with `calibrate.fit_families` on the other sources, predict "
    "the held-out rows with their "
    "layouts fixed; band = split-conformal quantile of |error| at the level (specs/trust.py "
    "band_quantile). serving: the bundled serving rows, each predicted with the engine's "
    "overheads fitted without its source (topologies/engines/*.yaml fit.heldout_errors)"
)
"""What ``heldout.method`` says."""


SOURCE_GROUPS: dict[str, str] = {"NGB": "N", "DGX": "D", "DMX": "D"}
"""Row-id prefixes that name the same source as another prefix: NGB (the GB200/GB300 rows of
training_frameworks.yaml) comes from the Megatron-Bridge performance archive the N rows come
from; DGX and DMX (NeMo's and MaxText's READMEs of DGX Cloud benchmarking v25.04) from the
release the D rows' README belongs to. Rows of one group are held out together."""


def source_of(row_id: str) -> str:
    """The source group of a validation row id.

    >>> source_of("K1/full"), source_of("N21"), source_of("NGB3"), source_of("DGX5/fp8")
    ('K', 'N', 'N', 'D')
    """
    match = re.match(r"[A-Za-z]+", row_id)
    prefix = match.group(0) if match else row_id
    return SOURCE_GROUPS.get(prefix, prefix)


def loso_errors(grouped: Mapping[str, Sequence[PreparedCase]]) -> dict[str, float]:
    """Row id -> held-out error (predicted / measured - 1) of every family's cases, each source
    predicted by the factors fitted without it (:func:`planner.accuracy.calibrate.fit_families`:
    every family refitted, since they share the per-step cost). A family its removal leaves too
    few rows to fit (:func:`planner.accuracy.calibrate.fittable`) is predicted with its catalog
    priors and the refitted per-step cost: the out-of-sample prediction for a family with one
    source."""
    cases = [c for rows in grouped.values() for c in rows]
    out: dict[str, float] = {}
    for source in sorted({source_of(c.id) for c in cases}):
        train = {f: [c for c in rows if source_of(c.id) != source] for f, rows in grouped.items()}
        fits = fit_families({f: rows for f, rows in train.items() if rows})
        loop_ms = next(iter(fits.values())).step_overhead_ms if fits else None
        for family, rows in grouped.items():
            for case in rows:
                if source_of(case.id) != source:
                    continue
                eff = fits.get(family)
                if eff is None:
                    prior = case.cluster.accelerator.efficiency
                    step = prior.step_overhead_ms if prior.step_overhead_ms is not None else loop_ms
                    eff = prior.model_copy(update={"step_overhead_ms": step})
                out[case.id] = predict(case, eff) / case.measured - 1.0
    return {c.id: out[c.id] for c in cases if c.id in out}


def envelope(cases: Sequence[PreparedCase]) -> dict[str, object]:
    """What a regime's rows validate: largest job, longest sequence, shortest measured
    step, precisions, framework profiles, and the accelerators they ran on."""
    return {
        "max_num_gpus": max(c.layout.num_gpus for c in cases),
        "max_seq_len": max(c.workload.seq_len for c in cases),
        "min_step_s": min(
            c.workload.tokens_per_step / c.layout.num_gpus / c.measured for c in cases
        ),
        "formats": sorted({c.layout.precision for c in cases}, key=str),
        "frameworks": sorted({c.workload.framework for c in cases}),
        "accelerators": sorted({c.cluster.accelerator.name for c in cases}),
    }


def heldout_record(
    cases: Sequence[PreparedCase],
    errors: Mapping[str, float],
    serving: Mapping[str, float],
    *,
    date: str,
) -> HeldoutRecord:
    """The ``heldout:`` block of one family's overlay: a band per training regime from the
    held-out ``errors`` (:func:`loso_errors`), and one from the serving rows' errors ``serving``
    (row id -> error)."""
    level = load_trust().level
    bands = {}
    for regime in REGIMES:
        rows = [c for c in cases if c.kind == regime and c.id in errors]
        if rows:
            bands[regime] = BandSummary.of(
                {c.id: errors[c.id] for c in rows}, level, envelope=envelope(rows)
            )
    if serving:
        bands["serving"] = BandSummary.of(serving, level)
    return HeldoutRecord(level=level, method=METHOD, date=date, bands=bands)
