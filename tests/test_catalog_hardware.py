"""The hardware catalog YAML: every file validates, and the DESIGN.md §3/§4 facts hold.

Loads ``topologies/accelerators/*.yaml`` and ``topologies/systems/*.yaml`` directly with
``yaml.safe_load`` and the pydantic models, so it checks the data independently of the catalog
loader. The numbers asserted are hand-checkable from shared/reference/hardware.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.specs.formats import NumberFormat
from planner.specs.hardware import AcceleratorSpec, SystemSpec

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"
ACCELERATOR_DIR = TOPOLOGIES / "accelerators"
SYSTEM_DIR = TOPOLOGIES / "systems"

EXPECTED_ACCELERATORS = {
    "a100_40gb", "a100_80gb", "h100_sxm", "h800_sxm", "h200_sxm", "h20", "gh200", "b200", "gb200",
    "b300", "gb300", "mi250x", "mi300x", "mi325x", "mi350x", "mi355x", "tpu_v4", "tpu_v5e",
    "tpu_v5p", "tpu_v6e", "tpu7x",
}  # fmt: skip
EXPECTED_SYSTEMS = {
    "hgx_a100", "hgx_a100_40g", "hgx_h100", "hgx_h800", "hgx_h200", "hgx_h20", "gh200_quad",
    "hgx_b200", "dgx_b200", "hgx_b300", "gb200_nvl72", "gb300_nvl72", "frontier", "mi300x",
    "mi325x", "mi350x", "mi355x",
    "tpu_v4", "tpu_v5e", "tpu_v5p", "tpu_v6e", "tpu7x",
}  # fmt: skip
BLACKWELL = {"b200", "gb200", "b300", "gb300"}
CDNA4 = {"mi350x", "mi355x"}
FP4_FORMATS = (NumberFormat.NVFP4, NumberFormat.MXFP4)


def _load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path.name}: top level must be a mapping"
    return data


def _accelerators() -> dict[str, AcceleratorSpec]:
    return {
        p.stem: AcceleratorSpec.model_validate(_load(p))
        for p in sorted(ACCELERATOR_DIR.glob("*.yaml"))
    }


def _systems() -> dict[str, SystemSpec]:
    return {p.stem: SystemSpec.model_validate(_load(p)) for p in sorted(SYSTEM_DIR.glob("*.yaml"))}


@pytest.fixture(scope="module")
def accelerators() -> dict[str, AcceleratorSpec]:
    return _accelerators()


@pytest.fixture(scope="module")
def systems() -> dict[str, SystemSpec]:
    return _systems()


# --------------------------------------------------------------------------- schema and names


@pytest.mark.parametrize("path", sorted(ACCELERATOR_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_accelerator_yaml_validates(path: Path) -> None:
    spec = AcceleratorSpec.model_validate(_load(path))
    assert spec.name == path.stem


@pytest.mark.parametrize("path", sorted(SYSTEM_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_system_yaml_validates(path: Path) -> None:
    spec = SystemSpec.model_validate(_load(path))
    assert spec.name == path.stem


@pytest.mark.parametrize(
    "path",
    sorted(ACCELERATOR_DIR.glob("*.yaml")) + sorted(SYSTEM_DIR.glob("*.yaml")),
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_yaml_starts_with_comment_header(path: Path) -> None:
    assert path.read_text().startswith("# ")


def test_catalog_has_every_expected_entry(
    accelerators: dict[str, AcceleratorSpec], systems: dict[str, SystemSpec]
) -> None:
    assert set(accelerators) == EXPECTED_ACCELERATORS
    assert set(systems) == EXPECTED_SYSTEMS


def test_every_system_names_a_catalog_accelerator(
    accelerators: dict[str, AcceleratorSpec], systems: dict[str, SystemSpec]
) -> None:
    for name, system in systems.items():
        assert system.accelerator in accelerators, (
            f"{name}: unknown accelerator {system.accelerator}"
        )


def test_every_source_string_is_non_empty(
    accelerators: dict[str, AcceleratorSpec], systems: dict[str, SystemSpec]
) -> None:
    for name, acc in accelerators.items():
        assert acc.sources, name
        for key, text in acc.sources.items():
            assert text.strip(), f"{name}.sources.{key} is empty"
    for name, system in systems.items():
        assert system.scale_out.source.strip(), f"{name}.scale_out.source is empty"
        for key in ("domain_size", "scale_up", "scale_out", "price_per_gpu_hour_usd"):
            assert system.sources.get(key, "").strip(), f"{name}.sources.{key} is empty"
        for key, text in system.sources.items():
            assert text.strip(), f"{name}.sources.{key} is empty"


# --------------------------------------------------------------------------- DESIGN.md §4 ridge points


def test_ridge_points(accelerators: dict[str, AcceleratorSpec]) -> None:
    bf16, fp8, nvfp4 = NumberFormat.BF16, NumberFormat.FP8, NumberFormat.NVFP4
    # A100 80GB: 312e12 / 2.039e12 = 153 FLOP/byte (DESIGN.md says ~156 with 2.0 TB/s).
    assert accelerators["a100_80gb"].ridge_flop_per_byte(bf16) == pytest.approx(156, rel=0.05)
    # H100 SXM: 989e12 / 3.35e12 = 295.
    assert accelerators["h100_sxm"].ridge_flop_per_byte(bf16) == pytest.approx(295, rel=0.02)
    # B200: DESIGN.md's ~281 uses 8 TB/s; the HGX part exposes 7.68 TB/s -> 293.
    b200 = accelerators["b200"]
    assert 270 <= b200.ridge_flop_per_byte(bf16) <= 300
    assert b200.ridge_flop_per_byte(bf16) == pytest.approx(281 * 8 / 7.68, rel=0.05)
    # B200 HGX FP8 ~580 and FP4 ~1,170 FLOP/byte.
    assert b200.ridge_flop_per_byte(fp8) == pytest.approx(580, rel=0.05)
    assert b200.ridge_flop_per_byte(nvfp4) == pytest.approx(1170, rel=0.05)


# --------------------------------------------------------------------------- DESIGN.md §3 facts


def test_dense_peaks_are_halved_sparse_headlines(accelerators: dict[str, AcceleratorSpec]) -> None:
    bf16 = NumberFormat.BF16
    # H100 datasheet BF16 1,979 TF is with 2:4 sparsity: dense is half.
    assert accelerators["h100_sxm"].peak_TFLOP_per_s[bf16] == pytest.approx(1979 / 2, abs=1)
    # HGX B200 headline 36 PF BF16 is sparse, over 8 GPUs: 36,000 / 8 / 2 = 2,250 TF.
    assert accelerators["b200"].peak_TFLOP_per_s[bf16] == pytest.approx(36_000 / 8 / 2)
    assert accelerators["gb200"].peak_TFLOP_per_s[bf16] == pytest.approx(2500)
    assert accelerators["h200_sxm"].peak_TFLOP_per_s == accelerators["h100_sxm"].peak_TFLOP_per_s
    assert accelerators["a100_80gb"].peak_TFLOP_per_s[bf16] == pytest.approx(312)


def test_memory_and_bandwidth(accelerators: dict[str, AcceleratorSpec]) -> None:
    assert accelerators["h100_sxm"].hbm_GB == 80
    assert accelerators["h200_sxm"].hbm_GB == 141
    assert accelerators["b200"].hbm_GB == 180
    assert accelerators["b200"].hbm_bandwidth_GB_per_s == pytest.approx(7680)
    assert accelerators["gb200"].hbm_GB == 186
    # GiB -> GB where Google gives GiB: 95 GiB (v5p) and 192 GiB (TPU7x).
    assert accelerators["tpu_v5p"].hbm_GB == pytest.approx(95 * 2**30 / 1e9, abs=0.05)
    assert accelerators["tpu7x"].hbm_GB == pytest.approx(192 * 2**30 / 1e9, abs=0.05)
    assert accelerators["h100_sxm"].tdp_W == 700


def test_fp8_is_not_an_ampere_or_tpu_v4_format(accelerators: dict[str, AcceleratorSpec]) -> None:
    for name in ("a100_40gb", "a100_80gb", "tpu_v4", "tpu_v5e"):
        assert not accelerators[name].supports(NumberFormat.FP8), name
        assert not accelerators[name].supports(NumberFormat.MXFP8), name
    for name in ("h100_sxm", "h200_sxm", "b200", "mi300x", "mi355x", "tpu7x"):
        assert accelerators[name].supports(NumberFormat.FP8), name


def test_fp4_only_on_blackwell_and_cdna4(accelerators: dict[str, AcceleratorSpec]) -> None:
    for name, acc in accelerators.items():
        has_nvfp4 = acc.supports(NumberFormat.NVFP4)
        has_mxfp4 = acc.supports(NumberFormat.MXFP4)
        assert has_nvfp4 == (name in BLACKWELL), name
        assert has_mxfp4 == (name in BLACKWELL | CDNA4), name


def test_mxfp8_only_on_blackwell_and_cdna4(accelerators: dict[str, AcceleratorSpec]) -> None:
    for name, acc in accelerators.items():
        assert acc.supports(NumberFormat.MXFP8) == (name in BLACKWELL | CDNA4), name


def test_compute_capabilities(accelerators: dict[str, AcceleratorSpec]) -> None:
    """NVIDIA's CUDA GPU compute capability table (developer.nvidia.com/cuda-gpus): A100 8.0,
    Hopper 9.0, B200/GB200 10.0, B300/GB300 10.3; AMD and TPU parts have none. A capability
    needs its source like every other number."""
    expected = {"a100_40gb": "8.0", "a100_80gb": "8.0", "h100_sxm": "9.0", "h200_sxm": "9.0",
                "h800_sxm": "9.0", "h20": "9.0", "gh200": "9.0", "b200": "10.0", "gb200": "10.0",
                "b300": "10.3", "gb300": "10.3"}  # fmt: skip
    for name, acc in accelerators.items():
        assert acc.compute_capability == expected.get(name), name
    assert accelerators["gb300"].compute_capability_major == 10
    data = accelerators["b200"].model_dump(exclude={"calibration"})
    data["sources"] = {k: v for k, v in data["sources"].items() if k != "compute_capability"}
    with pytest.raises(ValueError, match=r"sources\.compute_capability"):
        AcceleratorSpec.model_validate(data)
    data = accelerators["h100_sxm"].model_dump(exclude={"calibration"})
    data["compute_capability"] = "9"
    with pytest.raises(ValueError, match="compute_capability"):
        AcceleratorSpec.model_validate(data)


def test_no_int8_on_blackwell_ultra(accelerators: dict[str, AcceleratorSpec]) -> None:
    assert not accelerators["b300"].supports(NumberFormat.INT8)
    assert not accelerators["gb300"].supports(NumberFormat.INT8)
    assert accelerators["a100_80gb"].peak_TFLOP_per_s[NumberFormat.INT8] == pytest.approx(624)


def test_nvlink_vs_nic(systems: dict[str, SystemSpec]) -> None:
    h100 = systems["hgx_h100"]
    # NVLink 4 is 900 GB/s bidirectional = 450 GB/s per direction; a 400 Gb/s NIC port carries
    # 50 GB/s per direction. Per direction the ratio is 9x. DESIGN.md's "~18x" divides the
    # bidirectional 900 GB/s by one direction of the port.
    assert h100.scale_up.bandwidth_GB_per_s == 450
    assert h100.scale_out.nic_Gbps == 400
    assert h100.scale_up.bytes_per_s / h100.scale_out.bytes_per_s_per_accelerator == pytest.approx(
        9
    )
    assert 450e9 / (400e9 / 8) == 9
    assert systems["hgx_b200"].scale_up.bandwidth_GB_per_s == 900
    assert systems["hgx_a100"].scale_up.bandwidth_GB_per_s == 300
    assert systems["hgx_h800"].scale_up.bandwidth_GB_per_s == 200


def test_system_shapes(systems: dict[str, SystemSpec]) -> None:
    for name, system in systems.items():
        if name == "gh200_quad":  # four GH200 per node, their GPUs wired all-to-all
            assert (system.domain_size, system.unit_size, system.accelerators_per_node) == (4, 4, 4)
            assert system.kind == "mesh" and system.scale_up.num_links == 3
        elif system.kind in ("nvswitch", "mesh"):
            assert (system.domain_size, system.unit_size, system.accelerators_per_node) == (8, 8, 8)
        elif system.kind == "nvlink_rack":
            assert (system.domain_size, system.unit_size, system.accelerators_per_node) == (
                72,
                4,
                4,
            )
        else:
            assert system.torus is not None, name
            assert system.domain_size == system.torus.max_slice_chips, name
            assert system.unit_size == system.torus.chips_per_host, name
            assert system.scale_up.num_links == 2 * system.torus.num_dims, name
            assert system.scale_out.kind == "dcn" and not system.scale_out.rail_optimized, name
    assert systems["tpu_v4"].torus.max_slice_chips == 3072  # DESIGN.md: tpu_v4x6144 = 2 slices
    assert systems["tpu7x"].torus.max_slice_chips == 9216
    # v5e: 2 x 100 Gb/s per 8-chip host -> 3.125 GB/s per chip.
    assert systems["tpu_v5e"].scale_out.bytes_per_s_per_accelerator == pytest.approx(3.125e9)


# --------------------------------------------------------------------------- physical plausibility


def test_gemm_efficiencies_are_plausible(accelerators: dict[str, AcceleratorSpec]) -> None:
    # Nothing sustains more than ~90% of dense peak on large GEMMs; measured MAMF tops out at
    # ~0.87 (A100, stas00/ml-engineering), which the catalog caps at 0.85.
    for name, acc in accelerators.items():
        for fmt, value in acc.efficiency.gemm.items():
            assert 0.3 <= value <= 0.90, f"{name} gemm.{fmt} = {value}"
            assert acc.supports(fmt), f"{name}: gemm efficiency for unsupported {fmt}"
        assert NumberFormat.BF16 in acc.efficiency.gemm, name
        assert acc.efficiency.attention <= 0.80, name
        assert 0.75 <= acc.efficiency.hbm <= 0.95, name
        assert 0 < acc.efficiency.memory_reserve_GB <= 0.1 * acc.hbm_GB, name
    assert accelerators["a100_80gb"].gemm_efficiency(NumberFormat.BF16) <= 0.85


def test_link_efficiencies_are_plausible(systems: dict[str, SystemSpec]) -> None:
    for name, system in systems.items():
        assert 0.5 <= system.scale_up.efficiency <= 0.95, name
        assert 0.5 <= system.scale_out.efficiency <= 0.98, name
        assert system.price_per_gpu_hour_usd < 20, name
    assert systems["hgx_h100"].scale_up.efficiency == pytest.approx(20.6 / 25, abs=1e-3)
    assert systems["hgx_b200"].scale_up.efficiency == pytest.approx(40.1 / 50, abs=1e-2)


def test_mi350x_is_the_mi355x_at_its_lower_clock(accelerators: dict[str, AcceleratorSpec]) -> None:
    """AMD's MI350X is the MI355X's silicon at 2.2 instead of 2.4 GHz (shared/reference/
    hardware.md section 4): every peak scales by 2.2/2.4, memory is the same."""
    slow, fast = accelerators["mi350x"], accelerators["mi355x"]
    assert slow.family == fast.family == "cdna4"
    for fmt, peak in fast.peak_TFLOP_per_s.items():
        assert slow.peak_TFLOP_per_s[fmt] == pytest.approx(peak * 2.2 / 2.4, abs=0.1), fmt
    assert slow.hbm_GB == fast.hbm_GB and slow.hbm_bandwidth_GB_per_s == fast.hbm_bandwidth_GB_per_s
    assert slow.tdp_W == 1000.0


def test_h20_is_a_compute_poor_hopper(
    accelerators: dict[str, AcceleratorSpec], systems: dict[str, SystemSpec]
) -> None:
    """hardware.md §1: H20 148 TF bf16 / 296 fp8 dense, 96 GB, 4.0 TB/s, 78 SMs, 400 W; NVLink
    at the H100's 450 GB/s per direction (§3). Its ridge point, 148e12 / 4.0e12 = 37 FLOP/byte,
    is an eighth of the H100's 295: decode-like and small-batch work is compute-bound far
    sooner on an H100 than on an H20."""
    h20, h100 = accelerators["h20"], accelerators["h100_sxm"]
    assert (h20.hbm_GB, h20.hbm_bandwidth_GB_per_s, h20.tdp_W) == (96, 4000, 400)
    assert h20.peak_TFLOP_per_s[NumberFormat.BF16] == 148
    assert h20.peak_TFLOP_per_s[NumberFormat.FP8] == 296
    assert h20.ridge_flop_per_byte(NumberFormat.BF16) == pytest.approx(37)
    assert h100.ridge_flop_per_byte(NumberFormat.BF16) / h20.ridge_flop_per_byte(
        NumberFormat.BF16
    ) == pytest.approx(989 / 3.35 / 37, rel=1e-3)
    assert (h20.family, h20.compute_units) == ("hopper", 78)
    assert systems["hgx_h20"].scale_up.bandwidth_GB_per_s == 450
    assert systems["hgx_h20"].accelerator == "h20"


def test_gh200_is_an_h100_with_more_memory_and_a_fast_host_link(
    accelerators: dict[str, AcceleratorSpec], systems: dict[str, SystemSpec]
) -> None:
    """CSCS's Alps GH200 node schematic: 96 GB HBM3 at up to 4,000 GB/s per GPU, NVLink-C2C
    900 GB/s (450 per direction) to the Grace CPU, 150 GB/s between each pair of the node's
    four GPUs, one 200 Gb/s (25 GB/s) Slingshot NIC per GPU. The host link is 450 / 64 = 7x a
    PCIe Gen5 x16 H100's, which is what activation offload rides on."""
    gh200, h100 = accelerators["gh200"], accelerators["h100_sxm"]
    assert gh200.peak_TFLOP_per_s == h100.peak_TFLOP_per_s
    assert (gh200.hbm_GB, gh200.hbm_bandwidth_GB_per_s) == (96, 4000)
    assert gh200.host_link_GB_per_s / h100.host_link_GB_per_s == pytest.approx(450 / 64)
    quad = systems["gh200_quad"]
    per_pair = quad.scale_up.bandwidth_GB_per_s / quad.scale_up.num_links
    assert per_pair == 150
    assert quad.scale_out.nic_Gbps / 8 * quad.scale_out.nics_per_accelerator == 25
