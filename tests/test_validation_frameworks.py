"""tests/validation/training_frameworks.yaml: published runs on other frameworks and hardware, and
tests/validation/heldout/mlperf.yaml: the MLPerf Training runs that no fit sees.

Loads the file with ``yaml.safe_load`` and checks what the validation loader and leave-one-source-out
rely on: ids unique, each with an alphabetic source prefix not used by training.yaml; a source, a
confidence marker and a lower-case framework; a cluster the catalog resolves, whose accelerator is
the one the row names and whose size is the row's GPU count; layout degrees that multiply to that
count; a positive measured tokens/s per accelerator; and every ``derived`` field present in
``measured``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from planner.catalog import load_cluster

VALIDATION = Path(__file__).resolve().parent / "validation"
ROWS: list[dict] = yaml.safe_load((VALIDATION / "training_frameworks.yaml").read_text())
SHARED_ROWS: list[dict] = yaml.safe_load((VALIDATION / "training.yaml").read_text())
HELDOUT_ROWS: list[dict] = yaml.safe_load((VALIDATION / "heldout" / "mlperf.yaml").read_text())
CALIBRATION = Path(__file__).resolve().parents[1] / "topologies" / "calibration"

#: Row accelerator names (README "Training row schema") -> catalog accelerator names.
ACCELERATORS = {
    "a100-80gb": "a100_80gb",
    "a100-40gb": "a100_40gb",
    "h100-80gb": "h100_sxm",
    "h800-80gb": "h800_sxm",
    "h200-141gb": "h200_sxm",
    "b200-180gb": "b200",
    "gb200-186gb": "gb200",
    "gb300-279gb": "gb300",
    "b300-270gb": "b300",
    "mi250x": "mi250x",
    "mi300x": "mi300x",
    "mi325x": "mi325x",
    "mi350x": "mi350x",
    "mi355x": "mi355x",
    "tpu-v4": "tpu_v4",
    "tpu-v5e": "tpu_v5e",
    "tpu-v5p": "tpu_v5p",
    "tpu-v6e": "tpu_v6e",
}
CONFIDENCE = {"P", "P*", "S", "D", "U"}


def prefix(row_id: str) -> str:
    """The leave-one-source-out group of a row id: its leading letters (planner.accuracy.loso)."""
    match = re.match(r"[A-Za-z]+", row_id)
    assert match, f"row id {row_id!r} has no alphabetic prefix"
    return match.group(0)


def test_file_is_a_list_of_rows_of_a_useful_size() -> None:
    assert isinstance(ROWS, list)
    assert 40 <= len(ROWS) <= 150


def test_ids_are_unique_and_prefixes_are_fresh() -> None:
    ids = [row["id"] for row in ROWS]
    assert len(ids) == len(set(ids))
    shared = {prefix(row["id"]) for row in SHARED_ROWS}
    assert shared >= {"S", "K", "M", "N", "F", "G", "D"}
    for row_id in ids:
        assert re.fullmatch(r"[A-Z]+[0-9]+", row_id), row_id
        assert prefix(row_id) not in shared, f"{row_id}: prefix already used by training.yaml"


def test_breadth_of_frameworks_and_hardware() -> None:
    frameworks = {row["framework"] for row in ROWS}
    accelerators = {row["hardware"]["accelerator"] for row in ROWS}
    assert {"torchtitan", "fsdp", "llm-foundry", "nanotron", "deepspeed", "megatron"} <= frameworks
    assert {"tpu-v4", "mi250x", "a100-80gb", "h100-80gb"} <= accelerators


@pytest.mark.parametrize("row", ROWS + HELDOUT_ROWS, ids=[row["id"] for row in ROWS + HELDOUT_ROWS])
def test_row(row: dict) -> None:
    assert isinstance(row["source"], str) and len(row["source"]) > 20
    assert row["confidence"] in CONFIDENCE
    framework = row["framework"]
    assert isinstance(framework, str) and framework == framework.lower() and framework
    assert isinstance(row.get("settings", {}), dict)

    hardware = row["hardware"]
    count = hardware["count"]
    cluster = load_cluster(row["cluster"])
    assert cluster.num_accelerators == count
    assert cluster.accelerator.name == ACCELERATORS[hardware["accelerator"]]

    layout = row["layout"]
    degrees = layout["tp"] * layout["pp"] * layout["cp"] * layout["dp"]
    assert degrees == count, f"tp*pp*cp*dp = {degrees}, GPUs = {count}"
    ep = layout.get("ep") or 1
    assert (layout["dp"] * layout["tp"] * layout["cp"]) % ep == 0, (
        "EP must live inside dp x tp x cp"
    )
    if layout.get("shard_group"):
        assert layout["fsdp"] and layout["dp"] % layout["shard_group"] == 0
    if layout.get("fsdp"):
        assert layout["zero"] in (2, 3)
    assert layout.get("recompute") in (None, "none", "selective", "full")

    workload = row["workload"]
    assert workload["seq_len"] > 0
    assert workload["global_batch"] is None or workload["global_batch"] > 0

    measured = row["measured"]
    assert measured["tokens_per_s_per_gpu"] > 0
    for field in row["derived"]:
        assert measured.get(field) is not None, f"derived field {field} missing from measured"
    for variant in row.get("variants", []):
        assert variant["measured"]["tokens_per_s_per_gpu"] > 0


def test_heldout_rows_are_fresh_and_never_fitted() -> None:
    """The MLPerf rows are a held-out set: their ids are in neither fitted file and in no
    calibration overlay's ``rows``, and each cites the results repository at a commit."""
    ids = [row["id"] for row in HELDOUT_ROWS]
    assert len(ids) == len(set(ids)) == 139
    fitted_files = {row["id"] for row in ROWS + SHARED_ROWS}
    assert not set(ids) & fitted_files
    assert {prefix(i) for i in ids} == {"MLP", "MLN", "MLG", "MLD", "MLO", "MLH"}
    assert not {prefix(i) for i in ids} & {prefix(i) for i in fitted_files}
    for overlay in CALIBRATION.glob("*.yaml"):
        fitted = yaml.safe_load(overlay.read_text()).get("rows") or []
        assert not set(ids) & set(fitted), overlay.name
    for row in HELDOUT_ROWS:
        if prefix(row["id"]) == "MLG":  # Google's TPU gpt3 runs (v4.1 read through a mirror)
            assert re.search(
                r"training_results_v(3\.1|4\.[01]) at commit [0-9a-f]{40}", row["source"]
            )
            assert row["framework"] in ("maxtext", "pax") and row["precision"] == "int8"
            continue
        # NVIDIA-recipe gpt3 runs on GPUs (v3.0-v4.1; v4.1 read through a mirror)
        if prefix(row["id"]) == "MLH":
            assert re.search(
                r"training_results_v(3\.[01]|4\.[01])[^,]* at commit [0-9a-f]{40}", row["source"]
            )
            assert row["framework"] == "megatron" and row["precision"] == "fp8"
            continue
        assert re.search(
            r"mlcommons/training_results_v5\.[01]( via its fork \S+)? at commit [0-9a-f]{8}"
            # v6.0 through the indexed fork, at the commit that holds mlcommons' content only
            r"|Richardyu114/training_results_v6\.0 .*at commit eabf23a07b2a0c60a289ff871dc3a46fff0d0421",
            row["source"],
        )
        assert row["framework"] == "megatron"
    amd = {row["hardware"]["accelerator"] for row in HELDOUT_ROWS} & {"mi350x", "mi355x"}
    assert amd == {"mi350x", "mi355x"}
    assert not (CALIBRATION / "cdna4.yaml").exists()  # AMD stays on the transferred priors


def test_rows_marked_fit_false_are_in_no_overlay_and_say_why() -> None:
    """A calibrating framework's row with ``fit: false`` (the LS rows: NeMo's long-sequence
    tables; the DGX and DGC rows: DGX Cloud's NeMo tables of two releases, added after the fit;
    MGB1: Megatron-LM's own DeepSeek-V3 run on GB200, published after the fit's sources) is
    an out-of-sample check: no overlay lists it among the rows it was fitted on, and its notes
    give the reason."""
    unfitted = [row for row in ROWS if row.get("fit") is False]
    assert [row["id"] for row in unfitted] == [f"LS{i}" for i in range(1, 18)] + [
        f"DGX{i}" for i in range(1, 7)
    ] + [f"DGC{i}" for i in range(1, 17)] + ["MGB1"]
    fitted_ids: set[str] = set()
    for overlay in CALIBRATION.glob("*.yaml"):
        fitted_ids |= set(yaml.safe_load(overlay.read_text()).get("rows") or [])
    for row in unfitted:
        assert row["framework"] == "megatron"  # a row of a framework that calibrates
        assert row["id"] not in fitted_ids
        assert "Not fitted (fit: false)" in row["notes"]


def test_fit_set_drops_rows_that_opt_out() -> None:
    from planner.accuracy.calibrate import fit_set, prepare
    from planner.accuracy.rows import expand_cases, load_rows

    cases = [c for c in expand_cases(load_rows(VALIDATION / "training_frameworks.yaml"))
             if c.id in ("LS8", "LS9", "NGB1")]  # fmt: skip
    prepared = prepare(cases)
    assert [c.id for c in prepared] == ["NGB1", "LS8", "LS9"]
    assert [c.id for c in fit_set(prepared)] == ["NGB1"]


def test_heldout_rows_add_up() -> None:
    """Each held-out MLPerf row's arithmetic: tokens/s/GPU = global batch x sequence length /
    step time / GPUs (within 0.2%), the parallel degrees multiply to the GPU count, and the global
    batch is a whole number of micro-batches per data-parallel rank."""
    for row in HELDOUT_ROWS:
        layout, workload, measured = row["layout"], row["workload"], row["measured"]
        gpus = row["hardware"]["count"]
        tokens = workload["global_batch"] * workload["seq_len"] / measured["step_time_s"] / gpus
        assert measured["tokens_per_s_per_gpu"] == pytest.approx(tokens, rel=2e-3), row["id"]
        tp, pp, cp = (layout.get(k) or 1 for k in ("tp", "pp", "cp"))
        assert tp * pp * cp * layout["dp"] == gpus, row["id"]
        if layout.get("mbs"):
            assert workload["global_batch"] % (layout["dp"] * layout["mbs"]) == 0, row["id"]


def test_olmo_core_rows_state_the_scripts_shapes_and_run_as_torchtitan() -> None:
    """OLC rows: OLMo-core's FFN rule (int(8 d / 3), times the multiplier, rounded up to the
    multiple: 7B 10922 -> 11008, Llama 8B int(1.3 x 10922) = 14198 -> 14336), QK-norm on the OLMo
    models only, and the torchtitan profile (OLMo-core's FSDP2 wrapping is torchtitan's)."""
    from planner.accuracy.rows import load_rows, row_profile, to_model_spec

    def ffn(d_model: int, multiplier: float | None, multiple: int) -> int:
        hidden = int(8 * d_model / 3)
        if multiplier is not None:
            hidden = int(multiplier * hidden)
        return multiple * ((hidden + multiple - 1) // multiple)

    rows = {r.id: r for r in load_rows(VALIDATION / "training_frameworks.yaml")}
    expected = {
        "OLC1": (ffn(2048, None, 256), True),
        "OLC2": (ffn(4096, None, 256), True),
        "OLC3": (ffn(4096, 1.3, 1024), False),
        "OLC4": (ffn(5120, None, 256), True),
    }
    assert [expected[k][0] for k in sorted(expected)] == [5632, 11008, 14336, 13824]
    for rid, (width, qk_norm) in expected.items():
        model = to_model_spec(rows[rid])
        assert model.ffn_hidden_size == width, rid
        assert model.qk_norm is qk_norm, rid
        assert model.vocab_size == 100352, rid  # dolma2's 100278 padded to a multiple of 128
        assert row_profile(rows[rid]) == "torchtitan", rid


def megatron_mla_moe_flops_per_token(arch: dict, seq_len: int, *, mtp_layers: int = 0) -> float:
    """Megatron-LM's ``num_floating_point_operations`` per token for an MLA + MoE model
    (megatron/training/training.py at effebd81, the commit MGB1's guide pins; unchanged at the
    2026-08 head): 3 (forward + backward) x 2 (FMA) x [the dense and MoE layers' FFNs (gated:
    3 matrices), routed (top-k) and shared experts, the MLA projections with their LoRA norms
    (+1 per rank), the core attention causal-halved, the logits over the vocabulary; an MTP
    layer counts as one more MoE layer plus its norms and projection]. Written out here rather
    than taken from :func:`planner.cost.compute.model_flops_per_token`: the row's target is
    what the source's own count divides, with its +1 per LoRA rank and padded vocabulary, and
    the planner's count differs from it by 0.3%."""
    h, heads, vocab = arch["hidden"], arch["heads"], arch["vocab"]
    qk, rope, v = arch["nope_head_dim"], arch["rope_head_dim"], arch["v_head_dim"]
    q_rank, kv_rank = arch["q_lora_rank"], arch["kv_lora_rank"]
    moe = arch["moe"]
    dense = moe["first_dense_layers"]
    layers = arch["layers"] + mtp_layers
    moe_layers = layers - dense
    ffn = 3 * (arch["ffn"] * dense + moe["expert_ffn"] * moe["top_k"] * moe_layers)
    ffn += 3 * moe["expert_ffn"] * moe["shared_experts"] * moe_layers
    attention = (
        q_rank * (h + heads * (qk + rope) + 1)
        + kv_rank * (h + heads * (qk + v) + 1)
        + h * rope
        + heads * v * h
        + seq_len * heads * (qk + rope) / 2
        + seq_len * heads * v / 2
    )
    mtp = mtp_layers * (3 * h + 2 * h * h)
    return 6 * (h * ffn + attention * layers + mtp + h * vocab * (mtp_layers + 1))


def test_mgb1_tokens_follow_megatron_lms_own_flop_count() -> None:
    """MGB1's 3,883 tokens/s/GPU is its 970.01 TFLOP/s/GPU over Megatron-LM's FLOPs per token
    (2.4981e11 for DeepSeek-V3 at 4,096 tokens, no MTP); the same count with the MTP layer gives
    Megatron-Bridge's N13 (864 TFLOP/s at 3,328 tokens/s/GPU) to 0.2%."""
    row = next(r for r in ROWS if r["id"] == "MGB1")
    arch, seq_len = row["model"]["arch"], row["workload"]["seq_len"]
    flops = megatron_mla_moe_flops_per_token(arch, seq_len)
    assert flops == pytest.approx(2.4981e11, rel=1e-4)
    measured = row["measured"]
    assert measured["tokens_per_s_per_gpu"] == pytest.approx(
        measured["tflops_per_gpu"] * 1e12 / flops, rel=1e-4
    )
    n13 = next(r for r in SHARED_ROWS if r["id"] == "N13")
    with_mtp = megatron_mla_moe_flops_per_token(n13["model"]["arch"], 4096, mtp_layers=1)
    printed = n13["measured"]["tflops_per_gpu"] * 1e12 / n13["measured"]["tokens_per_s_per_gpu"]
    assert printed == pytest.approx(with_mtp, rel=0.002)
