"""`layout calibrate --measure`: the fit agrees with the cost model by construction, the overlay is
validated by the specs and applied by `--calibration`, and (where PyTorch is installed) the CPU
dry run exercises the whole pipeline. Nothing here needs a GPU; nothing is installed."""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from planner.catalog import (
    apply_cluster_calibration,
    load_accelerator,
    load_calibration_file,
    load_cluster,
    load_system,
)
from planner.cli import main
from planner.cost.comm import all_gather_time, all_to_all_time, ring_all_reduce_time
from planner.cost.compute import matmul_time
from planner.cost.gemm import GemmShape, gemm_time
from planner.errors import SpecError
from planner.measure.fit import attention_flops, fit_measurements, overlay_yaml
from planner.specs.comm import CommDomain
from planner.specs.formats import NumberFormat, bytes_per_value
from planner.specs.hardware import (
    AttentionMeasurement,
    CollectiveMeasurement,
    CopyMeasurement,
    GemmMeasurement,
    MeasurementRecord,
)

PACKAGE = Path(__file__).resolve().parent.parent / "planner"
TRUE = {"bf16": 0.63, "fp8": 0.52, "hbm": 0.86, "overhead_us": 6.5, "attention": 0.58}
LINK_TRUE = (0.77, 9.0)  # scale-up efficiency, per-step latency (us)
SHAPES = [
    (16, 8192, 8192), (128, 8192, 8192), (256, 256, 256), (1024, 1024, 1024),
    (4096, 4096, 4096), (8192, 8192, 8192), (2048, 4096, 28672), (8192, 28672, 8192),
]  # fmt: skip


def _synthetic() -> MeasurementRecord:
    """Measurements an H100 node would report if the cost model were exactly right."""
    acc = load_accelerator("h100_sxm")
    link = load_system("hgx_h100").scale_up
    hbm = acc.hbm_bytes_per_s * TRUE["hbm"]
    gemms = []
    for fmt in ("bf16", "fp8"):
        for m, k, n in SHAPES:
            t = gemm_time(
                GemmShape(name="g", m=m, k=k, n=n, count=1),
                peak_flop_per_s=acc.peak_flop_per_s(NumberFormat(fmt)),
                efficiency=TRUE[fmt],
                bytes_per_value=bytes_per_value(NumberFormat(fmt)),
                hbm_bytes_per_s=hbm,
                kernel_overhead_s=TRUE["overhead_us"] * 1e-6,
                tiling=acc.gemm_tiling,
            )
            tflops = 2 * m * k * n / t / 1e12
            gemms.append(
                GemmMeasurement(format=fmt, m=m, k=k, n=n, time_us=t * 1e6, TFLOP_per_s=tflops)
            )
    copies = [
        CopyMeasurement(buffer_bytes=b, time_us=2 * b / hbm * 1e6, GB_per_s=hbm / 1e9)
        for b in (2**28, 2**30)
    ]
    attention = []
    for seq in (1024, 4096, 8192):
        probe = AttentionMeasurement(
            batch=16384 // seq, heads=32, seq_len=seq, head_dim=128, time_us=1, TFLOP_per_s=1
        )
        t = matmul_time(
            attention_flops(probe),
            peak_flop_per_s=acc.peak_flop_per_s(NumberFormat.BF16),
            efficiency=TRUE["attention"],
        )
        attention.append(probe.model_copy(update={"time_us": t * 1e6}))
    collectives = []
    domain = CommDomain(
        size=8,
        bandwidth_bytes_per_s=link.bytes_per_s,
        latency_s=LINK_TRUE[1] * 1e-6,
        efficiency=LINK_TRUE[0],
        tier="scale_up",
    )
    for op, fn in (
        ("all_reduce", ring_all_reduce_time),
        ("all_gather", all_gather_time),
        ("all_to_all", all_to_all_time),
    ):
        for size in (2**20, 2**24, 2**28, 2**30):
            t = fn(float(size), domain)
            collectives.append(
                CollectiveMeasurement(
                    op=op, ranks=8, message_bytes=size, time_us=t * 1e6, bus_GB_per_s=1.0
                )
            )
    return MeasurementRecord(
        date="2026-11-30T00:00:00+00:00",
        device_name="NVIDIA H100 80GB HBM3 (synthetic)",
        device_count=8,
        backend="cuda",
        accelerator="h100_sxm",
        system="hgx_h100",
        driver_version="550.54.15",
        cuda_version="12.4",
        torch_version="2.13.0",
        duration_s=1.0,
        gemm=gemms,
        attention=attention,
        hbm=copies,
        collectives=collectives,
    )


@pytest.fixture(scope="module")
def synthetic_fit():
    return fit_measurements(
        _synthetic(), load_accelerator("h100_sxm"), load_system("hgx_h100"), date="2026-11-30"
    )


# --- the fit agrees with the cost model by construction -----------------------------------------


def test_gemm_time_with_fitted_factors_reproduces_the_measurements(synthetic_fit) -> None:
    acc = load_accelerator("h100_sxm")
    eff = synthetic_fit.record.efficiency
    assert eff.gemm is not None and eff.hbm is not None and eff.kernel_overhead_us is not None
    for g in synthetic_fit.record.measurements.gemm:
        predicted = gemm_time(
            GemmShape(name="g", m=g.m, k=g.k, n=g.n, count=1),
            peak_flop_per_s=acc.peak_flop_per_s(g.format),
            efficiency=eff.gemm[g.format],
            bytes_per_value=bytes_per_value(g.format),
            hbm_bytes_per_s=acc.hbm_bytes_per_s * eff.hbm,
            kernel_overhead_s=eff.kernel_overhead_us * 1e-6,
            tiling=acc.gemm_tiling,
        )
        assert predicted == pytest.approx(g.time_us * 1e-6, rel=1e-4), (g.format, g.m, g.k, g.n)
    assert eff.gemm[NumberFormat.BF16] == pytest.approx(TRUE["bf16"], rel=1e-4)
    assert eff.gemm[NumberFormat.FP8] == pytest.approx(TRUE["fp8"], rel=1e-4)
    assert eff.kernel_overhead_us == pytest.approx(TRUE["overhead_us"], rel=1e-3)


def test_attention_hbm_and_link_factors_recover_the_truth(synthetic_fit) -> None:
    rec = synthetic_fit.record
    assert rec.efficiency.hbm == pytest.approx(TRUE["hbm"], rel=1e-5)
    assert rec.efficiency.attention == pytest.approx(TRUE["attention"], rel=1e-5)
    assert rec.efficiency.link_efficiency == {"scale_up": pytest.approx(LINK_TRUE[0], rel=1e-4)}
    assert rec.measurements.link_latency_us["scale_up"] == pytest.approx(LINK_TRUE[1], rel=1e-3)
    assert rec.residuals["all"].max_abs < 1e-4
    assert synthetic_fit.before["all"].max_abs > 0.01  # the catalog priors differ from the truth


def test_fit_keeps_efficiencies_within_the_spec_bounds() -> None:
    """Faster than the peak (a catalog peak below the part's) clamps to 1, never past it."""
    meas = _synthetic()
    fast = [g.model_copy(update={"time_us": g.time_us / 4}) for g in meas.gemm]
    quick = MeasurementRecord.model_validate({**meas.model_dump(), "gemm": fast})
    fit = fit_measurements(quick, load_accelerator("h100_sxm"), None, date="2026-11-30")
    assert all(0 < v <= 1 for v in fit.record.efficiency.gemm.values())
    assert 0 <= fit.record.efficiency.kernel_overhead_us <= 100
    assert fit.record.efficiency.link_efficiency is None  # no system: no link bandwidth


# --- the overlay: written, validated by the specs, applied by --calibration ---------------------


def _write(tmp_path: Path, record, name: str = "my-h100.yaml") -> Path:
    path = tmp_path / name
    path.write_text(overlay_yaml(record), encoding="utf-8")
    return path


def test_overlay_round_trips_and_applies_to_the_cluster(synthetic_fit, tmp_path) -> None:
    path = _write(tmp_path, synthetic_fit.record)
    assert load_calibration_file(path) == synthetic_fit.record
    base = load_cluster("hgx_h100x16")
    cluster = apply_cluster_calibration(base, path)
    eff = cluster.accelerator.efficiency
    assert eff.gemm[NumberFormat.BF16] == pytest.approx(TRUE["bf16"], rel=1e-4)
    assert eff.hbm == pytest.approx(TRUE["hbm"], rel=1e-5)
    assert eff.attention == pytest.approx(TRUE["attention"], rel=1e-5)
    assert eff.expert_gemm == base.accelerator.efficiency.expert_gemm  # not measured: kept
    assert cluster.system.scale_up.efficiency == pytest.approx(LINK_TRUE[0], rel=1e-4)
    assert cluster.fabric == base.fabric
    record = cluster.accelerator.calibration
    assert record is not None and record.measurements is not None
    # the family's end-to-end error band stays; the kernel residuals sit beside it
    assert record.residuals["all"] == base.accelerator.calibration.residuals["all"]
    assert "gemm" in record.residuals


def test_calibration_flag_changes_the_estimate(synthetic_fit, tmp_path, capsys) -> None:
    slow = synthetic_fit.record.model_copy(
        update={
            "efficiency": synthetic_fit.record.efficiency.model_copy(
                update={"gemm": {NumberFormat.BF16: 0.3}}
            )
        }
    )
    path = _write(tmp_path, slow)
    argv = ["estimate", "--model", "8B", "--cluster", "hgx_h100x8", "--tp", "8", "--json"]
    assert main(argv) == 0
    before = json.loads(capsys.readouterr().out)["step_time_s"]
    assert main([*argv, "--calibration", str(path)]) == 0
    after = json.loads(capsys.readouterr().out)["step_time_s"]
    assert after > 1.3 * before


def test_overlay_for_another_family_is_refused(synthetic_fit, tmp_path) -> None:
    path = _write(tmp_path, synthetic_fit.record)
    with pytest.raises(SpecError, match="hopper family"):
        apply_cluster_calibration(load_cluster("hgx_b200x8"), path)
    code = main(["search", "--model", "8B", "--cluster", "hgx_b200x8", "--calibration", str(path)])
    assert code == 2


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["measurements"].update(backend="cpu"), "dry_run"),
        (lambda d: d["efficiency"].update(link_efficiency={"scale_up": 1.5}), "link_efficiency"),
        (lambda d: d["measurements"].update(accelerator="b200"), "fitted_on"),
        (lambda d: d["measurements"]["gemm"][0].update(time_us=-1), "time_us"),
        (lambda d: d["measurements"]["collectives"][0].update(op="broadcast"), "op"),
        (lambda d: d["measurements"].update(extra_key=1), "unknown key"),
    ],
)
def test_bad_overlays_are_one_line_spec_errors(synthetic_fit, tmp_path, edit, message) -> None:
    data = synthetic_fit.record.model_dump(mode="json")
    edit(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(SpecError, match=message) as err:
        load_calibration_file(path)
    assert "\n" not in str(err.value)


# --- the command line --------------------------------------------------------------------------


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.skipif(_has_gpu(), reason="a GPU is visible: --measure would really measure")
def test_measure_without_a_gpu_says_so_and_exits_2(capsys) -> None:
    assert main(["calibrate", "--measure", "--out", "never-written.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("layout calibrate: error: ")
    assert "GPU" in err or "PyTorch" in err
    assert not Path("never-written.yaml").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["calibrate"], "one of the arguments --fit --measure is required"),
        (["calibrate", "--fit", "--measure"], "not allowed with"),
        (["calibrate", "--fit", "--dry-run"], "--dry-run goes with --measure"),
        (["calibrate", "--fit", "--out", "x.yaml"], "--out goes with --measure"),
        (["calibrate", "--measure", "--write"], "--write goes with --fit"),
        (["calibrate", "--measure", "--family", "hopper"], "--family goes with --fit"),
    ],
)
def test_calibrate_flag_combinations(argv, message, capsys) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_measure_package_imports_torch_lazily() -> None:
    for path in (PACKAGE / "measure").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.split(".")[0] == "torch" for n in names), path.name
    code = (
        "import sys, planner.cli, planner.measure.run, planner.measure.render, "
        "planner.measure.collectives, planner.measure.probes; "
        "sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --- the CPU dry run: the whole pipeline (needs PyTorch; CI installs the CPU wheel) ------------


def test_dry_run_writes_an_overlay_that_loads_and_applies(tmp_path, capsys) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "my-h100.yaml"
    code = main(["calibrate", "--measure", "--dry-run", "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    printed = json.loads(captured.out)
    assert printed["out"] == str(out)
    record = load_calibration_file(out)
    meas = record.measurements
    assert meas is not None and meas.dry_run and meas.backend == "cpu"
    assert meas.accelerator == "h100_sxm" and record.family == "hopper"
    assert {g.format for g in meas.gemm} >= {NumberFormat.BF16}
    assert meas.attention and meas.hbm
    assert meas.collectives, meas.skipped  # two gloo ranks stand in for NCCL
    assert {c.op for c in meas.collectives} == {"all_reduce", "all_gather", "all_to_all"}
    eff = record.efficiency
    assert eff.gemm and eff.attention and eff.hbm and eff.kernel_overhead_us is not None
    assert eff.link_efficiency and "scale_up" in eff.link_efficiency
    # the overlay's own residuals are those of gemm_time with the fitted factors
    acc = load_accelerator("h100_sxm")
    errors = []
    for g in meas.gemm:
        t = gemm_time(
            GemmShape(name="g", m=g.m, k=g.k, n=g.n, count=1),
            peak_flop_per_s=acc.peak_flop_per_s(g.format),
            efficiency=eff.gemm[g.format],
            bytes_per_value=bytes_per_value(g.format),
            hbm_bytes_per_s=acc.hbm_bytes_per_s * eff.hbm,
            kernel_overhead_s=eff.kernel_overhead_us * 1e-6,
            tiling=acc.gemm_tiling,
        )
        errors.append(abs(t / (g.time_us * 1e-6) - 1))
    assert max(errors) == pytest.approx(record.residuals["gemm"].max_abs, rel=1e-3)
    assert "DRY RUN" not in captured.out  # JSON only on stdout
    assert "note:" in captured.err and "measuring" not in captured.err  # no bar off a terminal
    # a dry run's factors are a CPU's (~1e-6 of an H100's peak): --calibration refuses it
    # rather than print a 500,000 s step (issue 17)
    with pytest.raises(SpecError, match="dry-run"):
        apply_cluster_calibration(load_cluster("hgx_h100x8"), out)
    argv = ["estimate", "--model", "8B", "--cluster", "hgx_h100x8", "--tp", "8", "--json"]
    assert main([*argv, "--calibration", str(out)]) == 2
    assert "dry-run" in capsys.readouterr().err
    assert record.dry_run


def test_collectives_past_the_deadline_are_stopped() -> None:
    pytest.importorskip("torch")
    from planner.measure.collectives import CollectiveTimeoutError, run_collectives

    with pytest.raises(CollectiveTimeoutError):
        run_collectives(world_size=2, backend="gloo", sizes=[2**20], timeout_s=0.01)


def test_a_probe_the_device_refuses_is_skipped_not_fatal(monkeypatch) -> None:
    pytest.importorskip("torch")
    import planner.measure.probes as probes
    from planner.measure.run import DRY_RUN, measure

    real = probes.gemm_seconds

    def flaky(torch, device, fmt, m, k, n, **kw):
        if m == 64:
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(torch, device, fmt, m, k, n, **kw)

    monkeypatch.setattr(probes, "gemm_seconds", flaky)
    grid = replace(DRY_RUN, gemm=((32, 32, 32), (64, 64, 64)), collective_sizes=())
    fit = measure(dry_run=True, grid=grid, stream=io.StringIO())
    meas = fit.record.measurements
    assert {g.m for g in meas.gemm} == {32}
    assert any("out of memory" in note for note in meas.skipped)
