"""The calibration transfer to families no published run calibrates (planner/catalog/transfer.py):
each transferred factor is the family's catalog prior times the geometric mean, over the fitted
overlays, of fitted / prior; fitted families keep their own fit."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from planner.catalog.store import (
    fitted_calibrations,
    load_accelerator,
    load_accelerator_prior,
    load_calibration,
)
from planner.specs.formats import NumberFormat

BF16 = NumberFormat.BF16


def _by_hand() -> dict[str, float]:
    """Geometric mean of fitted / prior over the fitted overlays, computed here from the YAML."""
    logs: dict[str, list[float]] = {"gemm": [], "attention": [], "hbm": []}
    for record in fitted_calibrations():
        prior = load_accelerator_prior(record.fitted_on[0]).efficiency
        fit = record.efficiency
        logs["gemm"].append(math.log(fit.gemm[BF16] / prior.gemm[BF16]))
        logs["attention"].append(math.log(fit.attention / prior.attention))
        logs["hbm"].append(math.log(fit.hbm / prior.hbm))
    return {k: math.exp(sum(v) / len(v)) for k, v in logs.items()}


@pytest.mark.parametrize("name", ["tpu_v5e", "tpu_v6e", "mi300x", "mi355x"])
def test_a_family_without_a_fit_takes_its_priors_times_the_mean_ratio(name: str) -> None:
    prior = load_accelerator_prior(name)
    assert load_calibration(prior.family) is None  # no overlay: the transfer applies
    ratios = _by_hand()
    acc = load_accelerator(name)
    for fmt, value in prior.efficiency.gemm.items():
        assert acc.efficiency.gemm[fmt] == pytest.approx(value * ratios["gemm"], abs=1e-4)
    assert acc.efficiency.attention == pytest.approx(
        prior.efficiency.attention * ratios["attention"], abs=1e-4
    )
    assert acc.efficiency.hbm == pytest.approx(prior.efficiency.hbm * ratios["hbm"], abs=1e-4)
    # what the transfer does not carry stays the prior
    assert acc.efficiency.kernel_overhead_us == prior.efficiency.kernel_overhead_us
    assert acc.efficiency.overlap_contention == prior.efficiency.overlap_contention
    assert acc.calibration is not None
    assert acc.calibration.transferred_from == sorted(r.family for r in fitted_calibrations())
    assert acc.calibration.rows == [] and acc.calibration.heldout is None


def test_the_fitted_families_ratios_are_all_below_one() -> None:
    """The premise: every fit sits below its kernel-ceiling prior (so the bare priors of an
    uncalibrated family are optimistic)."""
    assert all(r < 1.0 for r in _by_hand().values())


def test_no_fitted_factor_exceeds_the_kernel_it_is_a_fraction_of() -> None:
    """The fit's ceiling (calibrate.CEILING_FACTORS): GEMM, attention and HBM priors are the
    best kernels measured on the part, so no shipped overlay credits a part with more."""
    for record in fitted_calibrations():
        prior = load_accelerator_prior(record.fitted_on[0]).efficiency
        fit = record.efficiency
        assert fit.attention is not None and fit.attention <= prior.attention + 1e-9
        assert fit.hbm is not None and fit.hbm <= prior.hbm + 1e-9
        for fmt, value in (fit.gemm or {}).items():
            if fmt in prior.gemm:
                assert value <= prior.gemm[fmt] + 1e-9, (record.family, fmt)


def test_a_fitted_family_keeps_its_own_fit() -> None:
    acc = load_accelerator("h100_sxm")
    record = load_calibration("hopper")
    assert record is not None and record.efficiency.gemm is not None
    assert acc.efficiency.gemm[BF16] == record.efficiency.gemm[BF16]
    assert acc.calibration is not None and acc.calibration.transferred_from == []


def test_the_transfer_slows_an_uncalibrated_part_by_the_gemm_ratio() -> None:
    """A GEMM-bound step on TPU v5p: the transferred prediction is slower than the bare priors'
    by about the GEMM ratio (attention and HBM move it a little further)."""
    import planner

    plan = planner.search(model="8B", cluster="tpu_v5px64", fix={"tp": 1}, top=1).best
    assert plan.warnings and any("fit/prior ratios" in w for w in plan.warnings)
    gemm = load_accelerator("tpu_v5p").efficiency.gemm[BF16]
    assert gemm == pytest.approx(load_accelerator_prior("tpu_v5p").efficiency.gemm[BF16]
                                 * _by_hand()["gemm"], abs=1e-4)  # fmt: skip
    assert 0.3 < plan.mfu < gemm


def test_a_users_accelerator_of_a_new_family_gets_the_transfer_too(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A cluster file's own accelerator sheet (issue 18, item 6) of a family no run calibrates
    is priced like a catalog part of such a family: its priors times the mean ratio."""
    import yaml

    import planner

    sheet = yaml.safe_load(
        (Path(__file__).resolve().parents[1] / "topologies/accelerators/mi300x.yaml").read_text()
    )
    sheet.update(name="my_part", family="my_family")
    (tmp_path / "my_part.yaml").write_text(yaml.safe_dump(sheet))
    (tmp_path / "cluster.yaml").write_text(
        "name: mine\nsystem: mi300x\nnum_accelerators: 8\naccelerator: ./my_part.yaml\n"
    )
    acc = planner.load_cluster(tmp_path / "cluster.yaml").accelerator
    prior = sheet["efficiency"]["gemm"]["bf16"]
    assert acc.efficiency.gemm[BF16] == pytest.approx(prior * _by_hand()["gemm"], abs=1e-4)
    assert acc.calibration is not None and acc.calibration.family == "my_family"
    assert acc.calibration.transferred_from


def test_a_prior_near_the_floor_stays_a_plausible_fraction() -> None:
    """A catalog fraction just above the 0.01 an overlay may claim, times a ratio below 1,
    would fall under it; the transfer keeps it at the floor instead of failing to load."""
    from planner.catalog.transfer import transferred_fit
    from planner.specs.hardware import MIN_PLAUSIBLE_FRACTION

    ratios = _by_hand()
    assert ratios["gemm"] < 1 and ratios["attention"] < 1  # the fits sit below their priors
    prior = load_accelerator_prior("mi300x").efficiency.model_copy(
        update={
            "gemm": {BF16: 0.01 / math.sqrt(ratios["gemm"])},
            "attention": 0.01 / math.sqrt(ratios["attention"]),
        }
    )
    fit = transferred_fit(prior, ratios)
    assert fit.gemm == {BF16: MIN_PLAUSIBLE_FRACTION}
    assert fit.attention == MIN_PLAUSIBLE_FRACTION


def test_the_per_step_cost_transfers_where_the_catalog_leaves_it_unknown() -> None:
    """The per-step cost is the training loop's, not the silicon's: an AMD part (catalog: unknown)
    takes the fitted families' mean; a TPU (catalog: 0, XLA's compiled step) keeps its 0."""
    fitted = [r.efficiency.step_overhead_ms for r in fitted_calibrations()]
    assert all(v is not None for v in fitted) and len(fitted) == 3
    mean = round(sum(fitted) / len(fitted), 2)  # type: ignore[arg-type]
    assert load_accelerator_prior("mi355x").efficiency.step_overhead_ms is None
    assert load_accelerator("mi355x").efficiency.step_overhead_ms == pytest.approx(mean)
    assert load_accelerator_prior("tpu_v5e").efficiency.step_overhead_ms == 0.0
    assert load_accelerator("tpu_v5e").efficiency.step_overhead_ms == 0.0


def test_every_fitted_family_carries_one_loop_cost() -> None:
    """``layout calibrate`` fits the per-step cost once for every family (calibrate.fit_families):
    the fitted rows all run Megatron-LM's loop, whose host sync does not depend on the GPU."""
    values = {r.efficiency.step_overhead_ms for r in fitted_calibrations()}
    assert len(values) == 1 and None not in values
    method = fitted_calibrations()[0].method
    assert "the per-step cost one value for every fitted family" in method
