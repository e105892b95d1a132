"""Cluster names -> ClusterSpec (DESIGN.md section 8, cluster-name rule), by hand-checkable cases.

N accelerators are spread evenly over the fewest scale-up domains that hold them; each domain's
share is whole units (8-GPU HGX board, 4-GPU NVL72 tray); below one unit N must divide it. TPU
names pick the most cubic legal slice, or several equal slices beyond the largest one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.catalog import load_cluster, load_system, parse_cluster_name
from planner.catalog.clusters import domain_split, legal_slice_shapes, most_cubic
from planner.errors import SpecError
from planner.specs.cluster import ClusterEdits


@pytest.mark.parametrize(
    ("name", "num_domains", "per_domain", "accelerator"),
    [
        ("hgx_b200x16", 2, 8, "b200"),  # two 8-GPU boards
        ("hgx_h200x1", 1, 1, "h200_sxm"),  # part of one board (1 divides 8)
        ("hgx_b200x4", 1, 4, "b200"),  # half a board
        ("hgx_h100x1024", 128, 8, "h100_sxm"),
        ("gb200_nvl72x128", 2, 64, "gb200"),  # two racks of 16 trays
        ("gb200_nvl72x144", 2, 72, "gb200"),  # two full racks
        ("gb200_nvl72x72", 1, 72, "gb200"),  # one full rack
        ("gb200_nvl72x4", 1, 4, "gb200"),  # one tray
        ("mi300xx8", 1, 8, "mi300x"),  # the system name itself ends in x
    ],
)
def test_gpu_cluster_names(name: str, num_domains: int, per_domain: int, accelerator: str) -> None:
    cluster = load_cluster(name)
    assert cluster.num_domains == num_domains
    assert cluster.accelerators_per_domain == per_domain
    assert cluster.num_accelerators == num_domains * per_domain
    assert cluster.accelerator.name == accelerator
    assert cluster.slice_shape is None
    assert cluster.name == name


def test_hgx_h100x12_names_8_and_16() -> None:
    with pytest.raises(SpecError) as info:
        load_cluster("hgx_h100x12")
    message = str(info.value)
    assert "8" in message and "16" in message
    assert "nearest valid: 8 and 16" in message


@pytest.mark.parametrize(
    "name",
    [
        "hgx_h100x3",  # below one board, 3 does not divide 8
        "hgx_h100x20",  # 2 boards of 10 (not whole boards)
        "gb200_nvl72x6",  # above one 4-GPU tray but not whole trays
        "gb200_nvl72x146",  # 2 racks of 73 (over a rack, not whole trays)
        "hgx_h100x0",
    ],
)
def test_counts_that_break_the_rule(name: str) -> None:
    with pytest.raises(SpecError):
        load_cluster(name)


def test_domain_split_by_hand() -> None:
    hgx = load_system("hgx_b200")
    nvl = load_system("gb200_nvl72")
    assert domain_split(hgx, 16) == (2, 8)
    assert domain_split(hgx, 1) == (1, 1)
    assert domain_split(hgx, 4) == (1, 4)
    assert domain_split(hgx, 3) is None
    assert domain_split(hgx, 12) is None
    assert domain_split(nvl, 128) == (2, 64)
    assert domain_split(nvl, 144) == (2, 72)
    assert domain_split(nvl, 216) == (3, 72)
    assert domain_split(nvl, 6) is None
    assert domain_split(nvl, 2) == (1, 2)
    # racks run 64 of 72 GPUs when the job does not fill them: 2,560 = 40 x 64 (MLPerf v5.1)
    assert domain_split(nvl, 2560) == (40, 64)
    assert domain_split(nvl, 100) is None  # 5 x 20 would leave most of every rack idle
    assert domain_split(nvl, 70) is None  # 2 x 35 is not whole 4-GPU trays


def test_parse_cluster_name() -> None:
    assert parse_cluster_name("hgx_b200x16") == ("hgx_b200", 16, None)
    assert parse_cluster_name("mi300xx8") == ("mi300x", 8, None)
    assert parse_cluster_name("gb200_nvl72x144") == ("gb200_nvl72", 144, None)
    assert parse_cluster_name("tpu_v5p_8x8x16") == ("tpu_v5p", 1024, (8, 8, 16))
    assert parse_cluster_name("tpu_v4x64") == ("tpu_v4", 64, None)


# --- TPU slices ----------------------------------------------------------------------------


def test_tpu_v4x64_is_a_4x4x4_cube() -> None:
    cluster = load_cluster("tpu_v4x64")
    assert cluster.slice_shape == (4, 4, 4)
    assert (cluster.num_domains, cluster.accelerators_per_domain) == (1, 64)


def test_tpu_v4x6144_is_two_slices() -> None:
    system = load_system("tpu_v4")
    assert system.torus is not None
    assert system.torus.max_slice_chips == 3072  # the catalog's largest v4 slice
    cluster = load_cluster("tpu_v4x6144")
    assert cluster.num_domains == 2
    assert cluster.accelerators_per_domain == 3072
    assert cluster.slice_shape is not None
    assert sorted(cluster.slice_shape) == [12, 16, 16]  # 3072 = 12 x 16 x 16, axes <= 16


def test_tpu_v5p_explicit_shape() -> None:
    cluster = load_cluster("tpu_v5p_8x8x16")
    assert cluster.num_accelerators == 1024
    assert cluster.slice_shape == (8, 8, 16)
    assert cluster.num_domains == 1


def test_tpu_v5e_256_is_16x16() -> None:
    cluster = load_cluster("tpu_v5ex256")
    assert cluster.slice_shape == (16, 16)
    assert cluster.num_accelerators == 256


# Google Cloud accelerator types: v4-N, v5p-N and tpu7x-N count TensorCores (2 per chip), v5e-N
# (v5litepod-N) and v6e-N chips; the shape each names is Google's default topology, as MaxText's
# MaxText/accelerator_to_spec_map.py and xpk's system_characteristics.py list them
@pytest.mark.parametrize(
    ("name", "system", "chips", "shape"),
    [
        ("v4-8", "tpu_v4", 4, (1, 2, 2)),  # 2x2x1
        ("v4-128", "tpu_v4", 64, (4, 4, 4)),
        ("v4-4096", "tpu_v4", 2048, (8, 16, 16)),
        ("v5p-256", "tpu_v5p", 128, (4, 4, 8)),
        ("v5p-640", "tpu_v5p", 320, (4, 4, 20)),
        ("v5p-1920", "tpu_v5p", 960, (4, 12, 20)),
        ("v5p-6912", "tpu_v5p", 3456, (12, 12, 24)),
        ("v5p-12288", "tpu_v5p", 6144, (16, 16, 24)),
        ("v5litepod-256", "tpu_v5e", 256, (16, 16)),
        ("v5e-128", "tpu_v5e", 128, (8, 16)),
        ("v6e-256", "tpu_v6e", 256, (16, 16)),
        ("v6e-32", "tpu_v6e", 32, (4, 8)),
        ("tpu7x-128", "tpu7x", 64, (4, 4, 4)),  # xpk: tpu7x-4x4x4 is device type tpu7x-128
    ],
)
def test_google_cloud_accelerator_types(
    name: str, system: str, chips: int, shape: tuple[int, ...]
) -> None:
    assert parse_cluster_name(name) == (system, chips, None)
    cluster = load_cluster(name)
    assert cluster.name == name and cluster.system.name == system
    assert cluster.num_accelerators == chips and cluster.num_domains == 1
    assert tuple(sorted(cluster.slice_shape or ())) == shape


def test_google_cloud_accelerator_type_errors() -> None:
    with pytest.raises(SpecError, match="counts TensorCores, 2 per chip"):
        load_cluster("v5p-255")
    with pytest.raises(SpecError, match="did you mean 'v5p-256'"):
        load_cluster("tpu_v5p-256")
    assert load_cluster("V6E-64").num_accelerators == 64  # catalog names are lower case


@pytest.mark.parametrize("name", ["tpu_v5p_3x3x3", "tpu_v5p_4x4x5", "tpu_v4x5000"])
def test_illegal_tpu_shapes(name: str) -> None:
    with pytest.raises(SpecError):
        load_cluster(name)


def test_legal_slice_shapes_and_most_cubic() -> None:
    v4 = load_system("tpu_v4")
    shapes = legal_slice_shapes(v4, 64)
    assert (4, 4, 4) in shapes
    assert (1, 8, 8) in shapes and (2, 4, 8) in shapes
    assert all(a in (1, 2) or a % 4 == 0 for s in shapes for a in s)
    assert most_cubic(shapes) == (4, 4, 4)
    assert legal_slice_shapes(v4, 27) == []  # 3x3x3: 3 is not 1, 2 or a multiple of 4
    v5e = load_system("tpu_v5e")
    assert most_cubic(legal_slice_shapes(v5e, 256)) == (16, 16)
    assert legal_slice_shapes(load_system("hgx_h100"), 8) == []  # not a torus


# --- typos and unknown systems -------------------------------------------------------------


def test_typo_suggests_the_system() -> None:
    with pytest.raises(SpecError) as info:
        load_cluster("hgx_b20x16")
    assert "did you mean 'hgx_b200" in str(info.value)
    assert "did you mean 'hgx_b200x16'?" in str(info.value)  # DESIGN.md section 8 wording


def test_unknown_system() -> None:
    with pytest.raises(SpecError) as info:
        load_cluster("quantum_widgetx8")
    assert "unknown cluster 'quantum_widgetx8'" in str(info.value)


# --- what-if edits -------------------------------------------------------------------------


def test_fabric_edits() -> None:
    base = load_cluster("hgx_h100x16")
    edited = load_cluster("hgx_h100x16", edits=ClusterEdits(nic_gbps=800, oversubscription=2))
    assert base.fabric.nic_Gbps == 400
    assert edited.fabric.nic_Gbps == 800
    assert edited.fabric.oversubscription == 2
    assert set(edited.edits) == {"nic_gbps", "oversubscription"}
    assert float(edited.edits["nic_gbps"]) == 800
    assert float(edited.edits["oversubscription"]) == 2
    assert base.edits == {}
    assert "2:1 oversubscribed" in edited.describe()


def test_domain_size_edit() -> None:
    cluster = load_cluster("hgx_h100x16", edits=ClusterEdits(domain_size=16))
    assert cluster.system.domain_size == 16
    assert (cluster.num_domains, cluster.accelerators_per_domain) == (1, 16)
    assert cluster.edits == {"domain_size": "16"}
    nvl36 = load_cluster("gb200_nvl72x144", edits=ClusterEdits(domain_size=36))
    assert (nvl36.num_domains, nvl36.accelerators_per_domain) == (4, 36)


def test_describe_states_what_it_resolved_to() -> None:
    text = load_cluster("hgx_b200x16").describe()
    assert "16 x b200" in text
    assert "hgx_b200" in text
    assert "2 nvswitch domain(s) of 8" in text
    assert "4x4x4" in load_cluster("tpu_v4x64").describe()


def test_cluster_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "my_cluster.yaml"
    path.write_text(
        "name: lab\nsystem: hgx_h100\nnum_accelerators: 32\n"
        "edits:\n  nic_gbps: 800\n  rail_optimized: false\n"
    )
    cluster = load_cluster(path)
    assert cluster.name == "lab"
    assert cluster.system.name == "hgx_h100"
    assert (cluster.num_domains, cluster.accelerators_per_domain) == (4, 8)
    assert cluster.fabric.nic_Gbps == 800
    assert cluster.fabric.rail_optimized is False
    # edits given to load_cluster override the file's
    again = load_cluster(str(path), edits=ClusterEdits(nic_gbps=200))
    assert again.fabric.nic_Gbps == 200
    assert again.fabric.rail_optimized is False


def test_cluster_yaml_with_unknown_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: lab\nsystem: hgx_h100\nnum_accelerators: 8\ngpus: 8\n")
    with pytest.raises(SpecError, match="unknown key"):
        load_cluster(path)
