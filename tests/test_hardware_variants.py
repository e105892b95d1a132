"""Hardware variants without editing the package (issue 18, item 6): a cluster file that names an
accelerator YAML beside it (or inline), and the what-if edits --hbm-gb, --hbm-tbps and
--power-cap-w on the CLI, in whatif sweeps and in ``load_cluster(edits=...)``.

The numbers are hand-checkable: the H100 sheet (topologies/accelerators/h100_sxm.yaml) says
80 GB, 81,559 MiB exposed, 3.35 TB/s, 989 dense bf16 TFLOP/s and 700 W; the power-cap exponent is
read from topologies/power_cap.yaml here with yaml.safe_load, independently of the loader.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import planner
from planner.api import serve_estimate
from planner.catalog import load_accelerator
from planner.errors import SpecError
from planner.search.whatif import ClusterBase, scenario_cluster
from planner.specs.formats import NumberFormat
from tests.test_cli import assert_one_line_error, run_main

ROOT = Path(__file__).resolve().parents[1]
H100_SHEET = ROOT / "topologies" / "accelerators" / "h100_sxm.yaml"
EXPONENT = yaml.safe_load((ROOT / "topologies" / "power_cap.yaml").read_text())["clock_exponent"]
MIB = 2**20
GIB = 2**30
H100_EXPOSED_MIB = 81559
H100_96_EXPOSED_MIB = 97871  # 81,559 x 96 / 80 = 97,870.8; nvidia-smi on GH200 / H20 96 GB
FITS_AT_96 = {"tp": 1, "pp": 1, "dp": 16, "mbs": 1, "recompute": "none", "zero": 1}
"""8B at 8,192 tokens: ~88.4 GiB per GPU, over 80 GB's 75.0 GiB usable, under 96 GB's 90.9."""
SMALL = {"global_batch": 64, "seq_len": 4096}


def _h100_96gb() -> dict:
    """The catalog H100 sheet as a 96 GB part (the rest unchanged, so the same calibration)."""
    sheet = yaml.safe_load(H100_SHEET.read_text())
    sheet.update(name="h100_96gb", hbm_GB=96.0, hbm_total_MiB=H100_96_EXPOSED_MIB)
    sheet["description"] = "H100 96 GB (test variant)"
    sheet["sources"]["hbm_GB"] = "test: a 96 GB Hopper part"
    return sheet


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding an H100 96 GB accelerator sheet and a 500 W cluster file that names it."""
    folder = tmp_path_factory.mktemp("fleet")
    (folder / "h100_96gb.yaml").write_text(yaml.safe_dump(_h100_96gb()))
    (folder / "h100_96gb_500w.yaml").write_text(
        "name: h100-96gb-500w\nsystem: hgx_h100\nnum_accelerators: 16\n"
        "accelerator: ./h100_96gb.yaml\nedits:\n  power_cap_w: 500\n"
    )
    return folder


def _cluster_file(folder: Path, name: str, accelerator: object, **extra: object) -> Path:
    path = folder / f"{name}.yaml"
    data = {"name": name, "system": "hgx_h100", "num_accelerators": 8, "accelerator": accelerator}
    path.write_text(yaml.safe_dump({**data, **extra}))
    return path


# --- a cluster file with its own accelerator --------------------------------------------------


def test_cluster_file_with_accelerator_file_loads(fleet: Path) -> None:
    cluster = planner.load_cluster(fleet / "h100_96gb_500w.yaml")
    acc, catalog = cluster.accelerator, load_accelerator("h100_sxm")
    assert acc.name == "h100_96gb" and acc.hbm_GB == 96.0
    assert acc.total_memory_bytes == H100_96_EXPOSED_MIB * MIB
    assert acc.tdp_W == 500.0  # the cap is the power the energy figures use
    assert acc.peak_TFLOP_per_s[NumberFormat.BF16] == pytest.approx(989 * (500 / 700) ** EXPONENT)
    assert acc.hbm_bandwidth_GB_per_s == 3350.0  # a cap leaves HBM alone
    # the family's calibration overlay, as the catalog H100 (same priors) gets it
    assert acc.calibration is not None and acc.calibration.family == "hopper"
    assert acc.efficiency == catalog.efficiency
    text = cluster.describe()
    assert "16 x h100_96gb (96 GB, 3.35 TB/s)" in text
    assert f"accelerator h100_96gb from '{fleet / 'h100_96gb.yaml'}'" in text
    assert "power_cap_w=500 (TDP 700 W; FLOP/s peaks x0.894)" in text  # (5/7)^(1/3) = 0.8939


def test_cluster_file_plans_on_the_cli(fleet: Path) -> None:
    path = str(fleet / "h100_96gb_500w.yaml")
    code, out, err = run_main(["search", "--model", "8B", "--cluster", path, "--json"])
    assert code == 0, err
    best = json.loads(out)["best"]
    assert "h100_96gb" in best["cluster_description"]
    assert "power_cap_w=500" in best["cluster_description"]
    tokens = best["tokens_per_s_per_gpu"] * best["num_gpus"] * best["step_time_s"]
    assert best["joules_per_token"] == pytest.approx(
        best["num_gpus"] * 500.0 * best["step_time_s"] / tokens
    )
    code, out, err = run_main(["show", path])
    assert code == 0, err
    assert "accelerator h100_96gb from" in out and "power_cap_w=500" in out


def test_relative_path_is_resolved_against_the_cluster_file(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the cwd holds no accelerator file
    cluster = planner.load_cluster(fleet / "h100_96gb_500w.yaml")
    assert cluster.accelerator.name == "h100_96gb"
    # a sheet in the cwd only is not found: the path is the cluster file's folder's
    (tmp_path / "only_here.yaml").write_text(yaml.safe_dump(_h100_96gb()))
    folder = tmp_path / "clusters"
    folder.mkdir()
    path = _cluster_file(folder, "lost", "only_here.yaml")
    code, _, err = run_main(["show", str(path)])
    line = assert_one_line_error(code, err, 2)
    assert f"{path}: accelerator: file '{folder / 'only_here.yaml'}' does not exist" in line


def test_missing_accelerator_file_is_one_line(tmp_path: Path) -> None:
    path = _cluster_file(tmp_path, "missing", "./nowhere.yaml")
    code, _, err = run_main(["search", "--model", "8B", "--cluster", str(path)])
    line = assert_one_line_error(code, err, 2)
    assert "accelerator: file" in line and "nowhere.yaml' does not exist" in line


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"hbm_GB": -96}, "hbm_GB: Input should be greater than 0"),
        ({"hbm_gib": 96}, "hbm_gib: unknown key"),
        ({"tdp_W": "500 W"}, "tdp_W"),
    ],
)
def test_accelerator_file_with_a_bad_field_is_one_line(
    tmp_path: Path, change: dict, expected: str
) -> None:
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**_h100_96gb(), **change}))
    path = _cluster_file(tmp_path, "bad_cluster", "bad.yaml")
    code, _, err = run_main(["show", str(path)])
    line = assert_one_line_error(code, err, 2)
    assert "bad.yaml" in line and expected in line


def test_inline_accelerator_and_a_name_that_is_the_catalogs(tmp_path: Path) -> None:
    inline = planner.load_cluster(_cluster_file(tmp_path, "inline", _h100_96gb()))
    assert inline.accelerator.hbm_GB == 96.0
    assert "accelerator h100_96gb inline in" in inline.describe()
    shadow = {**_h100_96gb(), "name": "h100_sxm"}
    cluster = planner.load_cluster(_cluster_file(tmp_path, "shadow", shadow))
    assert cluster.accelerator.hbm_GB == 96.0
    assert "not the catalog's h100_sxm" in cluster.describe()  # said, not silently shadowed
    assert load_accelerator("h100_sxm").hbm_GB == 80.0  # the catalog entry is untouched


def test_an_edited_hbm_with_a_stale_driver_total_is_refused(tmp_path: Path) -> None:
    """A copy of the H100 sheet with hbm_GB 96 but the 80 GB part's driver total would plan at
    75 GiB usable (the total decides allocation): refused, both figures named."""
    stale = {**_h100_96gb(), "hbm_total_MiB": H100_EXPOSED_MIB}
    (tmp_path / "stale.yaml").write_text(yaml.safe_dump(stale))
    code, _, err = run_main(["show", str(_cluster_file(tmp_path, "stale_cluster", "stale.yaml"))])
    line = assert_one_line_error(code, err, 2)
    assert "hbm_total_MiB 81,559" in line and "hbm_GB 96" in line and "98,304 MiB" in line


@pytest.mark.parametrize(
    ("sheet", "expected"),
    [
        ("systems/hgx_h100.yaml", "is a system file, not a cluster file"),
        ("accelerators/h100_sxm.yaml", "is an accelerator file, not a cluster file"),
    ],
)
def test_a_system_or_accelerator_file_given_as_the_cluster(
    tmp_path: Path, sheet: str, expected: str
) -> None:
    """--cluster given a catalog-shaped system or accelerator file says what a cluster file
    holds, rather than listing the cluster fields the file lacks."""
    path = tmp_path / "mine.yaml"
    path.write_text((ROOT / "topologies" / sheet).read_text())
    code, _, err = run_main(["show", str(path)])
    line = assert_one_line_error(code, err, 2)
    assert f"'mine.yaml' {expected}" in line and "num_accelerators: 64" in line


def test_a_system_file_naming_an_accelerator_file_points_at_the_cluster_file(
    tmp_path: Path,
) -> None:
    system = yaml.safe_load((ROOT / "topologies" / "systems" / "hgx_h100.yaml").read_text())
    system.update(name="lab_board", accelerator="h100_96gb.yaml")
    (tmp_path / "lab_board.yaml").write_text(yaml.safe_dump(system))
    path = tmp_path / "lab.yaml"
    path.write_text("name: lab\nsystem: lab_board.yaml\nnum_accelerators: 16\n")
    code, _, err = run_main(["show", str(path)])
    line = assert_one_line_error(code, err, 2)
    assert "a system names a catalog accelerator" in line
    assert "named in the cluster file (accelerator: h100_96gb.yaml" in line


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("$(touch /tmp/x)", "accelerator: may hold only letters"),
        (5, "accelerator: must be a catalog name, a YAML path or a mapping, not int"),
        ("h100_sxmm", "accelerator: unknown accelerator 'h100_sxmm'; did you mean 'h100_sxm'?"),
    ],
)
def test_a_bad_accelerator_value_is_one_line(tmp_path: Path, value: object, expected: str) -> None:
    path = _cluster_file(tmp_path, "odd", value)
    code, _, err = run_main(["show", str(path)])
    line = assert_one_line_error(code, err, 2)
    assert f"{path}: {expected}" in line


def test_system_file_beside_the_cluster_file(tmp_path: Path) -> None:
    system = yaml.safe_load((ROOT / "topologies" / "systems" / "hgx_h100.yaml").read_text())
    (tmp_path / "lab_board.yaml").write_text(yaml.safe_dump({**system, "name": "lab_board"}))
    path = tmp_path / "lab.yaml"
    path.write_text("name: lab\nsystem: lab_board.yaml\nnum_accelerators: 16\n")
    cluster = planner.load_cluster(path)
    assert cluster.system.name == "lab_board" and cluster.accelerator.name == "h100_sxm"
    assert f"system lab_board from '{tmp_path / 'lab_board.yaml'}'" in cluster.describe()


# --- --hbm-gb ---------------------------------------------------------------------------------


def test_hbm_gb_96_adds_16_gb_and_a_layout_fits() -> None:
    base = planner.load_cluster("hgx_h100x16")
    big = planner.load_cluster("hgx_h100x16", edits={"hbm_gb": 96})
    assert big.accelerator.hbm_GB - base.accelerator.hbm_GB == 16.0
    # the exposed memory scales alike: 81,559 MiB x 96 / 80 = 97,871 MiB, +16,312 MiB
    assert big.accelerator.hbm_total_MiB == H100_96_EXPOSED_MIB
    small_plan = planner.estimate(model="8B", cluster=base, layout=FITS_AT_96)
    big_plan = planner.estimate(model="8B", cluster=big, layout=FITS_AT_96)
    gained = big_plan.memory.capacity_gib - small_plan.memory.capacity_gib
    assert gained == pytest.approx((H100_96_EXPOSED_MIB - H100_EXPOSED_MIB) / 1024)  # 15.93 GiB
    assert big_plan.memory.peak_gib == small_plan.memory.peak_gib
    assert not small_plan.fits and big_plan.fits
    assert big_plan.step_time_s == small_plan.step_time_s  # capacity alone changes no time
    assert "hbm_gb=96 (was 80 GB)" in big_plan.cluster_description


# --- --hbm-tbps -------------------------------------------------------------------------------


def test_hbm_tbps_scales_memory_bound_terms_with_one_over_bandwidth() -> None:
    """Batch-1 decode of 8B on one H100 is memory-bound: its time is a + b / W (the weights and
    KV streamed at W, plus kernel overheads and nothing else), so halving W twice adds b/W, then
    2 b/W; the batch-1 ceiling W / weight bytes halves exactly."""
    plans = [
        serve_estimate(
            model="8B",
            cluster=planner.load_cluster("hgx_h100x8", edits={"hbm_tbps": tbps}),
            layout={"tp": 1},
            workload={"concurrency": 1},
        )
        for tbps in (3.35, 1.675, 0.8375)
    ]
    steps = [p.decode_iteration_s for p in plans]  # decode only: the prompt chunks are not
    assert steps[2] - steps[1] == pytest.approx(2 * (steps[1] - steps[0]), rel=1e-9)
    ceilings = [p.batch1_ceiling_tokens_per_s for p in plans]
    assert ceilings[1] == pytest.approx(ceilings[0] / 2, rel=1e-12)
    assert ceilings[2] == pytest.approx(ceilings[0] / 4, rel=1e-12)


def test_hbm_tbps_halves_the_optimizer_step() -> None:
    """The optimizer step streams its state at the HBM bandwidth: bytes / (W eta) exactly."""
    full = planner.estimate(model="8B", cluster="hgx_h100x16", layout=FITS_AT_96)
    half_cluster = planner.load_cluster("hgx_h100x16", edits={"hbm_tbps": 1.675})
    half = planner.estimate(model="8B", cluster=half_cluster, layout=FITS_AT_96)
    assert half.breakdown_s["optimizer"] == pytest.approx(2 * full.breakdown_s["optimizer"])
    assert "hbm_tbps=1.675 (was 3.35 TB/s)" in half.cluster_description


# --- --power-cap-w ----------------------------------------------------------------------------


def test_power_cap_at_tdp_changes_nothing() -> None:
    rated = planner.load_cluster("hgx_h100x16")
    capped = planner.load_cluster("hgx_h100x16", edits={"power_cap_w": 700})
    assert capped.accelerator.peak_TFLOP_per_s == rated.accelerator.peak_TFLOP_per_s
    assert capped.accelerator.tdp_W == 700.0
    one = planner.estimate(model="8B", cluster=rated, layout=FITS_AT_96)
    two = planner.estimate(model="8B", cluster=capped, layout=FITS_AT_96)
    assert (one.step_time_s, one.joules_per_token) == (two.step_time_s, two.joules_per_token)
    assert "power_cap_w=700 (TDP 700 W; FLOP/s peaks x1.000)" in capped.describe()


def test_power_cap_500_w_scales_the_flops_peaks_by_the_yaml_exponent() -> None:
    rated = planner.load_cluster("hgx_h100x16")
    capped = planner.load_cluster("hgx_h100x16", edits={"power_cap_w": 500})
    scale = (500 / 700) ** EXPONENT  # 1/3: 0.8939, so bf16 989 -> 884.1 TFLOP/s
    assert scale == pytest.approx(0.8939, abs=1e-4)
    for fmt, peak in rated.accelerator.peak_TFLOP_per_s.items():
        assert capped.accelerator.peak_TFLOP_per_s[fmt] == pytest.approx(peak * scale)
    assert capped.accelerator.hbm_bandwidth_GB_per_s == rated.accelerator.hbm_bandwidth_GB_per_s
    assert capped.accelerator.total_memory_bytes == rated.accelerator.total_memory_bytes
    one = planner.estimate(model="8B", cluster=rated, layout=FITS_AT_96)
    two = planner.estimate(model="8B", cluster=capped, layout=FITS_AT_96)
    # compute slows by at most 1 / scale (memory-bound kernels do not slow at all)
    ratio = two.breakdown_s["compute"] / one.breakdown_s["compute"]
    assert 1.0 < ratio <= 1 / scale + 1e-9
    tokens = two.tokens_per_s * two.step_time_s
    assert two.joules_per_token == pytest.approx(two.num_gpus * 500 * two.step_time_s / tokens)


# --- out of range -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--hbm-gb", "0.5"], "hbm_gb: Input should be greater than or equal to 1"),
        (["--hbm-gb", "5000"], "hbm_gb: Input should be less than or equal to 4096"),
        (["--hbm-gb", "0"], "must be a finite number > 0"),
        (["--hbm-gb", "4"], "leaves no memory for tensors on h100_sxm"),
        (["--hbm-tbps", "0.05"], "hbm_tbps: Input should be greater than or equal to 0.1"),
        (["--hbm-tbps", "250"], "hbm_tbps: Input should be less than or equal to 100"),
        (["--power-cap-w", "800"], "power_cap_w 800 W exceeds the 700 W TDP of h100_sxm"),
        (["--power-cap-w", "100"], "below 25% of the 700 W TDP of h100_sxm (175 W)"),
        (["--power-cap-w", "nan"], "must be a finite number > 0"),
    ],
)
def test_out_of_range_values_are_one_line_errors(flags: list[str], expected: str) -> None:
    for command in (["show", "hgx_h100x8"], ["search", "--model", "8B", "--cluster", "hgx_h100x8"]):
        code, _, err = run_main([*command, *flags])
        assert expected in assert_one_line_error(code, err, 2)


def test_api_edits() -> None:
    cluster = planner.load_cluster("hgx_h100x8", edits={"hbm_gb": 96, "power_cap_w": 600.0})
    assert cluster.accelerator.hbm_GB == 96.0 and cluster.accelerator.tdp_W == 600.0
    with pytest.raises(SpecError, match="cluster edits: hbm_gb"):
        planner.load_cluster("hgx_h100x8", edits={"hbm_gb": "96"})  # strict: no text numbers
    with pytest.raises(SpecError, match="exceeds the 1000 W TDP of b200"):
        planner.load_cluster("hgx_b200x8", edits={"power_cap_w": 1200})


def test_cluster_file_edits_and_flags_merge(fleet: Path) -> None:
    cluster = planner.load_cluster(fleet / "h100_96gb_500w.yaml", edits={"hbm_tbps": 2.4})
    assert cluster.accelerator.hbm_bandwidth_GB_per_s == 2400.0
    assert cluster.accelerator.tdp_W == 500.0  # the file's cap stays
    assert "hbm_tbps=2.4 (was 3.35 TB/s)" in cluster.describe()


# --- whatif and export ------------------------------------------------------------------------


def test_whatif_sweep_over_hbm_gb() -> None:
    result = planner.whatif(model="8B", cluster="hgx_h100x16", workload=SMALL,
                            vary=["hbm_gb=80,96"])  # fmt: skip
    low, high = result.scenarios
    assert low.status == high.status == "ok"
    assert low.plan is not None and high.plan is not None
    gained = high.plan.memory.capacity_gib - low.plan.memory.capacity_gib
    assert gained == pytest.approx((H100_96_EXPOSED_MIB - H100_EXPOSED_MIB) / 1024)
    assert "hbm_gb=96 (was 80 GB)" in high.plan.cluster_description


def test_whatif_keeps_a_cluster_files_accelerator(fleet: Path) -> None:
    code, out, err = run_main([
        "whatif", "--model", "8B", "--cluster", str(fleet / "h100_96gb_500w.yaml"),
        "--global-batch", "64", "--seq-len", "4096", "--vary", "power_cap_w=400,800", "--json",
    ])  # fmt: skip
    assert code == 0, err
    capped, over = json.loads(out)["scenarios"]
    assert "h100_96gb" in capped["plan"]["cluster_description"]
    assert "power_cap_w=400" in capped["plan"]["cluster_description"]
    assert over["status"] == "invalid" and "exceeds the 700 W TDP of h100_96gb" in over["error"]


def test_a_scenarios_power_cap_replaces_the_base_cap() -> None:
    """Edits start from the rated hardware: 600 W after a 500 W base is 600 W, not both."""
    base = ClusterBase.of(planner.load_cluster("hgx_h100x8", edits={"power_cap_w": 500}))
    cluster = scenario_cluster(base, {"power_cap_w": 600})
    peak = cluster.accelerator.peak_TFLOP_per_s[NumberFormat.BF16]
    assert peak == pytest.approx(989 * (600 / 700) ** EXPONENT)
    assert cluster.accelerator.tdp_W == 600.0


def test_export_notes_the_changed_hardware() -> None:
    code, _, err = run_main([
        "export", "--format", "megatron", "--model", "8B", "--cluster", "hgx_h100x16",
        "--hbm-gb", "96", "--time-limit", "5",
    ])  # fmt: skip
    assert code == 0, err
    assert "note: planned for cluster 'hgx_h100x16' as changed from the catalog" in err
    assert "hbm_gb=96 (was 80 GB)" in err
    plan = planner.estimate(model="8B", cluster="hgx_h100x16", layout={"tp": 2})
    assert not any(
        "changed from the catalog" in n for n in planner.export(plan, format="megatron").notes
    )


def test_migrate_prices_a_cluster_file_with_edits(fleet: Path) -> None:
    """--price on a cluster file whose edits hold a power cap: the cap and the price both hold."""
    result = planner.migrate(model="8B", from_cluster=fleet / "h100_96gb_500w.yaml",
                             to_cluster="hgx_h100x16", workload=SMALL,
                             prices={"h100-96gb-500w": 3.0})  # fmt: skip
    assert result.from_economics.price_per_gpu_hour_usd == 3.0
    assert result.from_economics.tdp_W == 500.0 and result.to_economics.tdp_W == 700.0


def test_catalog_96_gb_hoppers_fit_what_an_h100_cannot() -> None:
    """The catalog's H20 and GH200 sheets (96 GB, 97,871 MiB exposed, as the 96 GB H100 sheet
    above) hold FITS_AT_96 where the 80 GB H100 does not. The same 8B layout computes
    989 / 148 = 6.7x slower on the H20 at most (its memory-bound kernels lose only 3.35 / 4.0)
    and a little faster on the GH200 (H100 tensor cores, 4.0 TB/s against 3.35)."""
    for name in ("h20", "gh200"):
        assert load_accelerator(name).total_memory_bytes == H100_96_EXPOSED_MIB * MIB
    assert not planner.estimate(model="8B", cluster="hgx_h100x16", layout=FITS_AT_96).fits
    assert planner.estimate(model="8B", cluster="hgx_h20x16", layout=FITS_AT_96).fits
    assert planner.estimate(model="8B", cluster="gh200_quadx16", layout=FITS_AT_96).fits
    layout = {"tp": 1, "dp": 8, "mbs": 1, "recompute": "selective"}
    compute = {
        c: planner.estimate(model="8B", cluster=c, layout=layout, **SMALL).breakdown_s["compute"]
        for c in ("hgx_h100x8", "hgx_h20x8", "gh200_quadx8")
    }
    assert 989 / 148 * 3.35 / 4.0 < compute["hgx_h20x8"] / compute["hgx_h100x8"] < 989 / 148
    assert 3.35 / 4.0 < compute["gh200_quadx8"] / compute["hgx_h100x8"] < 1.0
