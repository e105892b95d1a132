"""TP collectives overlap their GEMMs only inside one scale-up domain (planner.cost.stage.
tp_overlap_reaches): Transformer Engine's userbuffers map every TP peer's buffer by CUDA IPC on one
host or by fabric handles inside a multi-node NVLink domain, so a TP group that crosses a NIC runs
its collectives in line. The cost model prices it so, the plan says why, and every export leaves
the overlap off instead of writing a flag the framework cannot honour."""

from __future__ import annotations

from pathlib import Path

import pytest

import planner
from planner.specs.result import Plan

ACROSS = {"tp": 16, "pp": 4, "dp": 1, "mbs": 1, "recompute": "full"}
"""TP 16 over pairs of HGX H100 nodes of 8: every TP group crosses the NIC."""


def _plan(cluster: str, overlap: bool) -> Plan:
    return planner.estimate(
        model="gpt3-175b",
        cluster=cluster,
        layout=ACROSS,
        seq_len=2048,
        global_batch=16,
        workload={"tp_comm_overlap": overlap},
    )


def test_tp_across_nodes_prices_its_collectives_in_line() -> None:
    """On HGX nodes of 8, TP 16's collectives cost the same with the overlap asked for as
    without it; inside a GB200 NVL72 rack (64 GPUs of one NVLink domain) the overlap is priced
    (its exposed chunk, contention and the split GEMMs' extra kernels, which at TP 16 cost more
    than the overlap hides)."""
    on, off = _plan("hgx_h100x64", True), _plan("hgx_h100x64", False)
    assert on.placement["tp"].within_domain is False
    assert on.breakdown_s["tp_comm"] == pytest.approx(off.breakdown_s["tp_comm"], rel=1e-12)
    assert on.step_time_s == pytest.approx(off.step_time_s, rel=1e-12)
    rack_on, rack_off = _plan("gb200_nvl72x64", True), _plan("gb200_nvl72x64", False)
    assert rack_on.placement["tp"].within_domain is True
    assert rack_on.breakdown_s["tp_comm"] != pytest.approx(rack_off.breakdown_s["tp_comm"])


def test_the_plan_says_why_and_only_where_it_applies() -> None:
    says = [w for w in _plan("hgx_h100x64", True).warnings if w.startswith("TP 16 spans")]
    assert len(says) == 1 and "priced in line" in says[0]
    assert not [w for w in _plan("hgx_h100x64", False).warnings if w.startswith("TP 16 spans")]
    assert not [w for w in _plan("gb200_nvl72x64", True).warnings if w.startswith("TP 16 spans")]


@pytest.mark.parametrize(
    ("fmt", "off", "on"),
    [
        ("megatron", None, "--tp-comm-overlap"),
        ("bridge", "comm_overlap.tp_comm_overlap=false", "comm_overlap.tp_comm_overlap=true"),
        (
            "torchtitan",
            "enable_async_tensor_parallel = false",
            "enable_async_tensor_parallel = true",
        ),
    ],
)
def test_exports_leave_the_overlap_off_across_domains(fmt: str, off: str | None, on: str) -> None:
    across = planner.export(_plan("hgx_h100x64", True), format=fmt)
    assert on not in (across.args if fmt == "megatron" else across.text)  # (a note names it)
    assert off is None or off in across.text
    assert any("left off: TP 16's groups span scale-up domains" in n for n in across.notes)
    inside = planner.export(_plan("gb200_nvl72x64", True), format=fmt)
    assert on in inside.text
    assert not any("span scale-up domains" in n for n in inside.notes)


def test_the_search_no_longer_prefers_tp_across_nodes_for_overlap_it_cannot_run(
    tmp_path: Path,
) -> None:
    """Megatron-LM's 462B model of its scaling table (TP 8 as published) on 6,144 H100: with the
    overlap priced across nodes the search picked TP 16 over two nodes; in line, TP 8 wins."""
    model = tmp_path / "mlm-gpt-462b.yaml"
    model.write_text(
        "name: mlm-gpt-462b\n"
        "source: Megatron-LM README scaling table (tests/validation/training.yaml, M9)\n"
        "hidden_size: 18432\nnum_layers: 112\nnum_attention_heads: 144\nnum_kv_heads: 144\n"
        "head_dim: 128\nffn_hidden_size: 73728\nffn_activation: gelu\nvocab_size: 131072\n"
        "max_context: 4096\n",
        encoding="utf-8",
    )
    best = planner.search(
        model=model, cluster="hgx_h100x6144", seq_len=4096, global_batch=3072, top=1
    ).best
    assert best.layout.tp <= 8
