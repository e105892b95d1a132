"""The ± band (DESIGN.md section 9): a plan's band is the stored held-out band of its regime
(``heldout:`` in topologies/calibration/<family>.yaml), widened by the factors of
topologies/trust.yaml when it extrapolates; the coverage arithmetic is right. Fast: reads the
stored figures, no leave-one-source-out refits."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import planner
from planner.accuracy.band import band_report, leave_one_out_inside
from planner.api import serve_search
from planner.catalog import load_cluster
from planner.catalog.engines import load_engine
from planner.catalog.store import fitted_calibrations, load_calibration, load_trust
from planner.report.text import plan_lines
from planner.search.trust import family_basis, pooled_basis, serve_band
from planner.specs.trust import BandSummary, HeldoutRecord, band_quantile, coverage

ROOT = Path(__file__).resolve().parent.parent
TRUST = load_trust()
WIDEN = TRUST.widen


def _band(family: str, regime: str) -> float:
    """The stored band of ``regime`` on ``family``, in percent (what a reader finds in the YAML)."""
    record = load_calibration(family)
    assert record is not None and record.heldout is not None
    return 100 * record.heldout.bands[regime].band_abs


def _plan(model: str, cluster: str, layout: dict[str, object], **workload: object):
    return planner.estimate(model=model, cluster=cluster, layout=layout, workload=workload or None)


def test_plan_band_is_the_stored_heldout_band_of_its_regime() -> None:
    dense = _plan("70B", "hgx_h100x64", {"tp": 8, "pp": 4})
    assert dense.uncertainty_pct == pytest.approx(_band("hopper", "dense"))
    assert dense.uncertainty_level == TRUST.level == 0.8
    assert not any("band x" in w for w in dense.warnings)
    moe = _plan("qwen3-30b-a3b", "hgx_b200x8", {"tp": 1, "ep": 8})
    assert moe.uncertainty_pct == pytest.approx(_band("blackwell", "moe"))
    step = next(line for line in plan_lines(dense) if line.startswith("step"))
    assert "(±" in step and "80% band)" in step


def test_band_widens_beyond_the_largest_validated_job() -> None:
    plan = _plan("405B", "hgx_h100x32768", {"tp": 8, "pp": 16})
    largest = load_calibration("hopper").heldout.bands["dense"].max_num_gpus  # type: ignore[union-attr]
    assert plan.num_gpus > largest
    assert plan.uncertainty_pct == pytest.approx(
        _band("hopper", "dense") * WIDEN.beyond_largest_job.factor
    )
    assert any(f"largest validated job ({largest})" in w for w in plan.warnings)


def test_validated_architecture_is_what_the_rows_exercise() -> None:
    # the list in topologies/trust.yaml cannot drift from the validation set
    from planner.accuracy.rows import load_rows, to_model_spec, training_file
    from planner.search.trust import architecture_features

    seen = set()
    for row in load_rows(training_file()):
        seen |= architecture_features(to_model_spec(row))
    assert sorted(seen) == sorted(TRUST.validated_architecture)


def test_band_widens_for_an_architecture_no_run_exercises() -> None:
    # Gemma 3's post-norms: priced, but no validated run has them; its sliding window and q/k
    # norm are validated (gpt-oss, Qwen3)
    plan = _plan("gemma-3-27b", "hgx_h100x64", {"tp": 4})
    assert plan.uncertainty_pct == pytest.approx(
        _band("hopper", "dense") * WIDEN.architecture_without_rows.factor
    )
    assert any("no validated run has post norms" in w for w in plan.warnings)


def test_band_widens_for_a_step_shorter_than_any_validated_run() -> None:
    """Strong scaling: NVIDIA's MLPerf 8B layout on 512 B200 (TP2 CP4, one sequence per 8
    GPUs) predicts a step far shorter than any Blackwell row measured."""
    plan = _plan(
        "8B", "hgx_b200x512", {"tp": 2, "cp": 4, "dp": 64}, global_batch=64, precision="fp8"
    )
    bands = load_calibration("blackwell").heldout.bands  # type: ignore[union-attr]
    shortest = min(b.min_step_s for k, b in bands.items() if k != "serving" and b.min_step_s)
    assert plan.step_time_s < shortest  # the family's shortest step, over its regimes
    assert plan.uncertainty_pct == pytest.approx(
        _band("blackwell", "dense") * WIDEN.shorter_than_shortest_step.factor
    )
    assert any("shorter than any validated run's" in w for w in plan.warnings)
    normal = _plan("8B", "hgx_b200x8", {"tp": 1}, global_batch=128, precision="fp8")
    assert normal.step_time_s >= shortest
    assert not any("shorter than any validated" in w for w in normal.warnings)


def test_band_widens_for_fp4_training_on_b200() -> None:
    plan = _plan("70B", "hgx_b200x64", {"tp": 4, "pp": 2}, precision="nvfp4")
    assert plan.uncertainty_pct == pytest.approx(
        _band("blackwell", "dense") * WIDEN.precision_without_rows.factor
    )
    assert any("nvfp4 training has no validated runs" in w for w in plan.warnings)


@pytest.mark.parametrize("cluster", ["mi300xx64", "tpu_v5px64"])
def test_family_without_rows_takes_the_pooled_band_widened(cluster: str) -> None:
    # without --framework a TPU runs MaxText (no ZeRO-1; not the fitted framework: widened too)
    tpu = cluster.startswith("tpu")
    plan = _plan("8B", cluster, {"tp": 1, "zero": 3} if tpu else {"tp": 1})
    framework = WIDEN.framework_without_rows.factor if tpu else 1.0
    errors = [
        e
        for r in fitted_calibrations()
        if r.heldout is not None
        for e in r.heldout.bands["dense"].errors.values()
    ]
    pooled = 100 * band_quantile(errors, TRUST.level)
    assert plan.uncertainty_pct == pytest.approx(pooled * WIDEN.no_family_rows.factor * framework)
    assert any("catalog priors scaled by the fit/prior ratios of" in w for w in plan.warnings)


def test_moe_on_a_dense_only_family_widens_the_dense_band() -> None:
    plan = _plan("qwen3-30b-a3b", "hgx_a100x64", {"tp": 1, "ep": 8}, seq_len=2048)
    assert plan.uncertainty_pct == pytest.approx(
        _band("ampere", "dense") * WIDEN.no_regime_rows.factor
    )
    longer = _plan("qwen3-30b-a3b", "hgx_a100x64", {"tp": 1, "ep": 8}, seq_len=8192)
    assert longer.uncertainty_pct == pytest.approx(
        plan.uncertainty_pct * WIDEN.beyond_longest_sequence.factor
    )


def test_an_accelerator_without_rows_in_a_validated_family_widens() -> None:
    plan = _plan("70B", "hgx_h200x64", {"tp": 8, "pp": 4})
    assert plan.uncertainty_pct == pytest.approx(
        _band("hopper", "dense") * WIDEN.accelerator_without_rows.factor
    )


def test_a_part_without_rows_of_the_regime_widens() -> None:
    """GB200 has dense rows (NGB1, NGB3) but the Blackwell MoE band comes from B200 runs: an
    MoE plan on GB200 widens as a part without rows would; a dense one does not."""
    moe_band = load_calibration("blackwell").heldout.bands["moe"]  # type: ignore[union-attr]
    assert moe_band.accelerators == ["b200"]
    moe = _plan("qwen3-30b-a3b", "gb200_nvl72x8", {"tp": 1, "ep": 8})
    assert moe.uncertainty_pct == pytest.approx(
        _band("blackwell", "moe") * WIDEN.accelerator_without_rows.factor
    )
    assert any("no validated moe runs on gb200" in w for w in moe.warnings)
    dense = _plan("70B", "gb200_nvl72x64", {"tp": 1, "zero": 3}, precision="fp8")
    assert not any("no validated" in w for w in dense.warnings)
    assert dense.uncertainty_pct == pytest.approx(_band("blackwell", "dense"))
    on_b200 = _plan("qwen3-30b-a3b", "hgx_b200x8", {"tp": 1, "ep": 8})
    assert on_b200.uncertainty_pct == pytest.approx(_band("blackwell", "moe"))


def test_an_overlay_without_heldout_bands_widens_its_in_sample_median() -> None:
    acc = load_cluster("hgx_h100x8").accelerator
    record = acc.calibration.model_copy(update={"heldout": None})  # type: ignore[union-attr]
    basis, steps = family_basis(acc.model_copy(update={"calibration": record}), "dense", TRUST)
    assert basis is not None
    assert basis.band_abs == record.residuals["dense"].median_abs
    assert [f for f, _ in steps] == [WIDEN.in_sample_only.factor]


def test_serving_band_is_the_stored_serving_band_widened() -> None:
    workload = {"precision": "fp8", "kv_precision": "fp8"}
    hopper = serve_search(model="70B", cluster="hgx_h200x8", workload=workload).best
    assert hopper.uncertainty_pct == pytest.approx(
        _band("hopper", "serving") * WIDEN.serving_not_held_out.factor
    )
    assert any("fitted without each row's source" in w for w in hopper.warnings)
    amd = serve_search(model="70B", cluster="mi300xx8", workload=workload).best
    pooled = pooled_basis("serving", TRUST.level)
    assert pooled is not None
    assert amd.uncertainty_pct == pytest.approx(
        100 * pooled.band_abs * WIDEN.no_family_rows.factor * WIDEN.serving_not_held_out.factor
    )
    # every catalog engine has rows today; one without them widens the band
    h200 = load_cluster("hgx_h200x8").accelerator
    bare = load_engine("vllm").model_copy(update={"fitted_on": (), "fit": None})
    assert serve_band(h200, load_engine("vllm")).uncertainty_pct == pytest.approx(
        hopper.uncertainty_pct
    )
    widened_band = serve_band(h200, bare)
    assert widened_band.uncertainty_pct == pytest.approx(
        hopper.uncertainty_pct * WIDEN.engine_without_rows.factor  # type: ignore[operator]
    )
    assert any("vllm engine" in w for w in widened_band.warnings)


def test_stored_heldout_bands_are_never_narrower_than_the_in_sample_median() -> None:
    records = [r for r in fitted_calibrations() if r.heldout is not None]
    assert {r.family for r in records} == {"ampere", "blackwell", "hopper"}
    for record in records:
        assert record.heldout.level == TRUST.level  # type: ignore[union-attr]
        for regime, band in record.heldout.bands.items():  # type: ignore[union-attr]
            assert band.band_abs >= record.residuals[regime].median_abs, (record.family, regime)
            assert band.band_abs >= band.median_abs


def test_band_quantile_and_coverage_on_a_synthetic_set() -> None:
    errors = [0.01, -0.02, 0.03, -0.04, 0.05, 0.06, -0.07, 0.08, 0.09, -0.5]
    band = band_quantile(errors, 0.8)  # ceil(11 x 0.8) = 9th smallest |error|
    assert band == 0.09
    assert coverage(errors, [band] * len(errors)) == 0.9
    assert band_quantile(errors, 0.5) == 0.06  # ceil(5.5) = 6th
    assert band_quantile(errors[:3], 0.8) == 0.03  # too few rows: the largest
    # without each row, the band of the other nine (ceil(10 x 0.8) = 8th) still holds 8 of 10
    assert leave_one_out_inside(errors, 0.8) == 8


def test_band_report_counts_rows_inside_their_band() -> None:
    errors = {f"X{i}": e for i, e in enumerate([0.01, -0.02, 0.03, -0.04, 0.05, -0.5])}
    record = load_calibration("ampere").model_copy(  # type: ignore[union-attr]
        update={
            "family": "synthetic",
            "heldout": HeldoutRecord(
                level=0.8,
                method="synthetic",
                date="2026-01-01",
                bands={"dense": BandSummary.of(errors, 0.8)},
            ),
        }
    )
    (row, pooled) = band_report([record], TRUST.model_copy(update={"level": 0.8})).regimes
    assert row.band_pct == pytest.approx(50.0)  # ceil(7 x 0.8) = 6th of 6: the largest
    assert row.inside == 6 and row.inside_without_row == 5
    assert (pooled.family, pooled.band_pct) == ("pooled", row.band_pct)


def test_a_hand_edited_band_is_refused() -> None:
    band = BandSummary.of({"A": 0.1, "B": 0.2}, 0.8).model_copy(update={"band_abs": 0.05})
    with pytest.raises(ValueError, match="band_abs"):
        HeldoutRecord(level=0.8, method="m", date="2026-01-01", bands={"dense": band})


def test_trust_factors_have_sources_and_ship_in_the_wheel() -> None:
    for name, widening in WIDEN:
        assert widening.factor >= 1.0 and len(widening.source) > 40, name
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    included = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert included["topologies"] == "planner/_catalog/topologies"
    assert (ROOT / "topologies" / "trust.yaml").is_file()


def test_family_widening_holds_the_rows_of_families_without_a_fit() -> None:
    """trust.yaml's ``no_family_rows`` factor is at least the 80% quantile of |error| over the
    band without it of the rows on families no fit calibrates (TPU and AMD: AXLearn, PaLM,
    torchtitan on MI250X), measured with every other widening their plans carry, the framework's
    included (planner/accuracy/sequence_band.py; benchmarks/transfer_calibration.py also prints
    the leave-one-family-out ratio, 1.33, and takes the larger, rounded up to 0.1)."""
    from planner.accuracy.rows import expand_cases, load_rows, training_file
    from planner.accuracy.sequence_band import family_rows_ratios

    spec = load_trust()
    factor = spec.widen.no_family_rows.factor
    ratios = family_rows_ratios(expand_cases(load_rows(training_file())), factor)
    assert len(ratios) == 10
    measured = band_quantile(ratios, spec.level)
    assert measured <= factor < max(measured, 1.33) + 0.1
    # a TPU plan on MaxText is widened once for the framework and once for the transfer
    plan = _plan("8B", "tpu_v5px64", {"tp": 1, "zero": 3})
    widenings = [w for w in plan.warnings if "(band x" in w]
    assert len(widenings) == 2, widenings


def test_sequence_widening_and_its_coverage_are_what_the_long_sequence_rows_measure() -> None:
    """trust.yaml's ``beyond_longest_sequence`` factor is the 80% quantile of |error| over the
    unwidened band of the unfitted rows longer than any validated run (rounded up to 0.1), and its
    ``long_sequence_band`` coverage check is what those rows' plans print today
    (planner/accuracy/sequence_band.py; benchmarks/long_sequence_band.py)."""
    import statistics

    from planner.accuracy.rows import FRAMEWORK_ROWS_FILE, expand_cases, load_rows, training_file
    from planner.accuracy.sequence_band import long_sequence_cases, score_rows, widening_ratios

    spec = load_trust()
    factor = spec.widen.beyond_longest_sequence.factor
    rows = load_rows(training_file().parent / FRAMEWORK_ROWS_FILE)
    scored = score_rows(long_sequence_cases(expand_cases(rows)))
    assert len(scored) == 17
    ratios = widening_ratios(scored, factor)
    assert len(ratios) == 11
    measured = band_quantile(ratios, spec.level)
    assert measured <= factor < measured + 0.1
    check = {c.name: c for c in spec.coverage_checks}["long_sequence_band"]
    errors, bands = [r.error for r in scored], [r.band for r in scored]
    assert check.rows == len(scored)
    assert check.inside == round(coverage(errors, bands) * len(scored))
    assert check.median_band_pct == round(100 * statistics.median(bands), 1)
    assert check.median_abs_error_pct == round(100 * statistics.median(map(abs, errors)), 1)


@pytest.mark.parametrize("name", ["heldout_moe_zoo", "heldout_automodel"])
def test_a_quick_heldout_check_is_what_its_rows_predict_today(name: str) -> None:
    """trust.yaml's coverage check ``name`` is what ``benchmarks/<name>.py`` prints today: every
    row evaluated (a layout that ran must fit), how many inside their band, the median band and
    error (each script runs in a second or two)."""
    import re
    import subprocess
    import sys

    script = ROOT / "benchmarks" / f"{name}.py"
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert "not evaluated" not in out, out
    rows = re.search(r"(\d+) held-out rows: median \|err\| ([\d.]+)%", out)
    inside = re.search(r"inside the printed band: (\d+) of \d+ .* median band ±([\d.]+)%", out)
    assert rows is not None and inside is not None, out
    check = {c.name: c for c in load_trust().coverage_checks}[name]
    assert check.rows == int(rows.group(1))
    assert check.median_abs_error_pct == float(rows.group(2))
    assert check.inside == int(inside.group(1))
    assert check.median_band_pct == float(inside.group(2))


def test_the_pooled_heldout_figure_counts_every_distinct_check_once() -> None:
    """``benchmarks/heldout_pooled.py`` runs each coverage check of trust.yaml that is not a
    subset of another (``heldout_mlperf.py gpt3`` is in ``heldout_mlperf.py``) and pools their
    rows: its per-check and pooled row and inside counts are the stored checks' (the counts
    add up; a row line the parser missed or read twice would not)."""
    import re
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "heldout_pooled.py"), "--jobs", "2"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout  # fmt: skip
    found = {
        m.group(1): (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"^(\S+)\s+(\d+) rows .* inside (\d+) ", out, re.MULTILINE)
    }
    checks = {c.name: c for c in load_trust().coverage_checks}
    pooled = found.pop("pooled")
    assert set(found) < set(checks) and "heldout_mlperf_gpt3" not in found
    for name, (rows, inside) in found.items():
        assert (rows, inside) == (checks[name].rows, checks[name].inside), name
    assert pooled == tuple(map(sum, zip(*found.values(), strict=True)))
