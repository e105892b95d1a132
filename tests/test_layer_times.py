"""One transformer layer's time under recomputation and sequence parallelism against the
per-layer table of Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models" (MLSys 2023, arXiv 2205.05198, Table 4): their 22B GPT (h 6144, 48 layers, 64 heads), TP8,
micro-batch 4 of 2,048 tokens on A100, forward + backward of one layer in ms. Nothing is fitted
on the table (the K rows' iteration times are in the Ampere fit; these per-layer splits are not).

The planner's layer is its compute and TP communication per step over the 48 layers (the
logits' share included, under 1%). The ratios between settings are what the table pins; the
absolute times move with every refit of the Ampere factors, so they are held to 20%.
docs/calibration.md, "the memory-bound backward kernel by kernel", discusses the gap that is
left: sequence parallelism saves 0.6 ms measured and about 2 ms in the planner.
"""

from __future__ import annotations

import pytest

from planner.accuracy.rows import expand_cases, load_rows, training_file
from planner.accuracy.run import predict_case

MEASURED_MS = {  # (recompute, sequence parallel) -> forward + backward of one layer (Table 4)
    ("none", False): 7.7 + 11.9,
    ("none", True): 7.2 + 11.8,
    ("full", False): 7.7 + 19.5,
    ("selective", False): 7.7 + 13.2,
    ("selective", True): 7.2 + 13.1,
}


@pytest.fixture(scope="module")
def layer_ms() -> dict[tuple[str, bool], float]:
    """The planner's per-layer ms of K1 (the paper's 22B run) under each setting of the table."""
    base = next(c for c in expand_cases(load_rows(training_file())) if c.id == "K1")
    out = {}
    for recompute, sp in MEASURED_MS:
        layout = base.row.layout.model_copy(
            update={"recompute": recompute, "sequence_parallel": sp}
        )
        case = base.model_copy(update={"row": base.row.model_copy(update={"layout": layout})})
        plan = predict_case(case)
        per_step = plan.breakdown_s["compute"] + plan.breakdown_s["tp_comm"]
        out[(recompute, sp)] = 1e3 * per_step / base.row.model.arch.layers  # one micro-batch
    return out


def test_each_setting_within_20_percent(layer_ms: dict[tuple[str, bool], float]) -> None:
    for key, measured in MEASURED_MS.items():
        assert layer_ms[key] == pytest.approx(measured, rel=0.2), key


@pytest.mark.parametrize(
    ("recompute", "tolerance"),
    [
        ("full", 0.06),  # runs the forward again: 27.2 / 19.6 = 1.39 measured
        ("selective", 0.04),  # redoes only the attention core: 20.9 / 19.6 = 1.07 measured
    ],
)
def test_recomputation_costs_what_the_paper_measured(
    layer_ms: dict[tuple[str, bool], float], recompute: str, tolerance: float
) -> None:
    measured = MEASURED_MS[(recompute, False)] / MEASURED_MS[("none", False)]
    predicted = layer_ms[(recompute, False)] / layer_ms[("none", False)]
    assert predicted == pytest.approx(measured, abs=tolerance)
    assert layer_ms[("none", False)] < layer_ms[("selective", False)] < layer_ms[("full", False)]


def test_sequence_parallelism_is_cheaper_but_not_by_more_than_a_tenth(
    layer_ms: dict[tuple[str, bool], float],
) -> None:
    """Measured, sequence parallelism saves 3% of a layer (19.6 -> 19.0 ms); the planner saves
    more (its norms' backward at twice the forward, and no second gather of the inputs for the
    weight gradients), about 9% today. Held to under 12% so that the gap cannot grow unseen."""
    for recompute in ("none", "selective"):
        saving = 1.0 - layer_ms[(recompute, True)] / layer_ms[(recompute, False)]
        assert 0.0 < saving < 0.12, recompute
