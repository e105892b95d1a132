"""XLA's ZeRO-3 prefetch yields to memory (planner.cost.step.prefetch_yields_to_memory): its
latency-hiding scheduler, over its memory limit, schedules what frees memory before it starts the
next asynchronous all-gather, so a step that fits only without the prefetched weight at its
memory peak runs there with one gathered weight, its gathers and reductions in line.

The case is Google's MLPerf v4.1 GPT-3 175B run on 512 Trillium chips (tests/validation/heldout/
mlperf.yaml, MLG8: fsdp 256 x data 2, 3 sequences of 2,048 per chip, full remat, int8), which ran
in 31.25 GiB per chip and which the planner refused, needing 33.9 GiB with the prefetch."""

from __future__ import annotations

import re

import pytest

import planner
from planner.api import not_fitting_reason
from planner.catalog import load_cluster, load_model
from planner.cost.step import estimate_memory, unprefetched_share
from planner.errors import InfeasibleError
from planner.specs.layout import Layout
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import TrainWorkload
from planner.units import GiB

LAYOUT = {"tp": 1, "pp": 1, "dp": 512, "mbs": 3, "recompute": "full", "zero": 3}
WORKLOAD = {"framework": "maxtext", "zero_shard_group": 256}


def _plan(**workload: object) -> planner.Plan:
    return planner.estimate(
        model="gpt3-175b",
        cluster="tpu_v6ex512",
        layout=LAYOUT,
        seq_len=2048,
        global_batch=1536,
        precision="int8",
        workload={**WORKLOAD, **workload},
    )


def test_the_share_is_the_excess_over_the_activations() -> None:
    """Activations of 16 GiB rise over the forward and fall over the backward; a peak 2 GiB
    over the limit is over it while they exceed 14 GiB: the last eighth of the forward layers
    and the first eighth of the backward ones."""
    assert unprefetched_share(34 * GiB, 30 * GiB, 16 * GiB, 32 * GiB) == pytest.approx(0.125)
    assert unprefetched_share(30 * GiB, 26 * GiB, 16 * GiB, 32 * GiB) == 0.0
    assert unprefetched_share(40 * GiB, 36 * GiB, 16 * GiB, 32 * GiB) is None


def test_mlperf_gpt3_on_512_trillium_fits_as_it_ran() -> None:
    plan = _plan()
    usable = load_cluster("tpu_v6ex512").accelerator.usable_memory_bytes
    assert plan.fits
    assert plan.memory.peak_gib == pytest.approx(usable / GiB)  # the scheduler fills it
    assert any("gives up its ZeRO-3 prefetch" in w for w in plan.warnings)
    # the share from the memory with the prefetch, by hand
    workload = TrainWorkload.model_validate(
        {**plan.workload.model_dump(), "unsharded_param_layers": 2.0}
    )
    layout = Layout(**LAYOUT, precision="int8")
    full = max(estimate_memory(load_model("gpt3-175b"), workload, layout)[1], key=lambda m: m.total)
    share = (full.total - usable) / full.activations
    assert 0.1 < share < 0.25
    assert f"on {share:.0%} of the layer passes" in " ".join(plan.warnings)


def test_the_passes_without_prefetch_cost_their_collectives() -> None:
    """With one gathered weight by rule (nothing to give up) the layout fits and hides every
    gather behind the compute; giving the prefetch up on a share of the passes exposes that
    share of the gathers and reductions, and nothing else changes."""
    adapted, lean = _plan(), _plan(unsharded_param_layers=1.0)
    assert lean.fits and not any("prefetch" in w for w in lean.warnings)
    assert adapted.breakdown_s["dp_comm"] > lean.breakdown_s["dp_comm"] + 0.3
    assert adapted.breakdown_s["compute"] == pytest.approx(lean.breakdown_s["compute"])


def test_a_framework_that_prefetches_by_rule_still_does_not_fit() -> None:
    """PyTorch FSDP gathers a layer at a time and prefetches the next whatever the memory: the
    same layout under a layer gather unit stays over the limit."""
    assert not _plan(fsdp_gather_unit="layer").fits


def test_a_search_with_headroom_does_not_count_on_it() -> None:
    """The scheduler fills memory to the limit: a search that keeps memory free refuses the
    layout, one that keeps none (the validation's) accepts it."""
    common = {
        "model": "gpt3-175b",
        "cluster": "tpu_v6ex512",
        "seq_len": 2048,
        "global_batch": 1536,
        "precision": "int8",
        "fix": LAYOUT,
        "workload": WORKLOAD,
        "top": 1,
    }
    with pytest.raises(InfeasibleError):
        planner.search(**common)
    best = planner.search(**common, config=SolverConfig(memory_headroom=0.0)).best
    assert best.fits and any("gives up its ZeRO-3 prefetch" in w for w in best.warnings)


def test_a_refusal_says_what_giving_up_the_prefetch_would_leave() -> None:
    """Llama 3.1 70B on a v6e-256 slice, 2 x 8K tokens per chip, a tenth of the activations
    offloaded: over with the prefetched weight and still over without it, by less; the refusal
    gives both figures."""
    workload = {"framework": "maxtext", "activation_offload_fraction": 0.1}
    layout = {"tp": 1, "pp": 1, "dp": 256, "mbs": 2, "recompute": "full", "zero": 3}
    plan = planner.estimate(model="llama3.1-70b", cluster="tpu_v6ex256", layout=layout,
                            seq_len=8192, global_batch=512, workload=workload)  # fmt: skip
    assert not plan.fits
    reason = not_fitting_reason(plan, "llama3.1-70b", "tpu_v6ex256",
                                        {**workload, "seq_len": 8192, "global_batch": 512})  # fmt: skip
    over, lean = (
        float(x) for x in re.findall(r"over by ([0-9.]+) GiB \(([0-9.]+) GiB where", reason)[0]
    )
    assert 0.0 < lean < over
