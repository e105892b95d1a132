"""``layout validate``: the bundled validation set parses into planner specs, the error statistics
are right, the command runs end to end, and docs/accuracy.md is what the command generates.

docs/accuracy.md depends on the cost model: after a change to it, regenerate the file with
``layout validate --markdown docs/accuracy.md`` (or run this file with UPDATE_GOLDEN=1).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from planner.accuracy.render import COMMAND, layout_short, validation_markdown, validation_text
from planner.accuracy.rows import (
    Case,
    TrainingRow,
    expand_cases,
    load_rows,
    stated_layout,
    to_model_spec,
    training_file,
    workload_of,
)
from planner.accuracy.run import (
    RowResult,
    ValidationReport,
    evaluate_case,
    family_summaries,
    run_validation,
    summarize,
    tuned_batch_plan,
)
from planner.catalog import load_model, model_names
from planner.catalog.io import load_list
from planner.cost.params import active_params, total_params
from planner.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "docs" / "accuracy.md"

PUBLISHED_TOTAL_B = {
    "llama-3-8b": 8.03,
    "llama-3.1-8b": 8.03,
    "llama-3-70b": 70.6,
    "llama-3.1-70b": 70.6,
    "llama-2-70b": 69.0,
    "llama-3.1-405b": 405.0,
    "deepseek-v3": 671.0,
    "gpt-oss-120b": 116.83,
    "qwen3-30b-a3b": 30.5,
    "qwen3-235b-a22b": 235.0,
    "mixtral-8x7b": 46.7,
    "mixtral-8x22b": 141.0,
    "nemotron-4-340b": 340.0,
    "nemotron-4-15b": 15.0,
    "gpt3-175b": 175.0,
}
"""Headline total parameters (billions) from each model's paper or model card."""


SHARED_IDS = frozenset(str(item["id"]) for item in load_list(training_file()))
"""Row ids of the shared set (training.yaml); the rest are training_frameworks.yaml's."""


@pytest.fixture(scope="module")
def rows() -> list[TrainingRow]:
    return load_rows(training_file())


@pytest.fixture(scope="module")
def by_id(rows: list[TrainingRow]) -> dict[str, TrainingRow]:
    return {r.id: r for r in rows}


@pytest.fixture(scope="module")
def full_report() -> ValidationReport:
    return run_validation()


def _size_from_name(name: str) -> float | None:
    """sc21-gpt-1.7b -> 1.7e9, rar-gpt-1t -> 1e12 (the GPT-era rows name their size)."""
    match = re.fullmatch(r"(?:sc21|rar|mlm)-gpt-(\d+(?:\.\d+)?)([bt])", name)
    if not match:
        return None
    return float(match.group(1)) * (1e9 if match.group(2) == "b" else 1e12)


# --- the data and its conversion ----------------------------------------------------------


def test_bundled_file_is_the_shared_copy_with_a_header() -> None:
    text = training_file().read_text(encoding="utf-8")
    assert text.startswith("# Copied verbatim from ../shared/validation/training.yaml")
    shared = ROOT.parent / "shared" / "validation" / "training.yaml"
    if shared.exists():  # only in the workspace that holds ../shared
        body = text.split("\n", 3)[3]
        assert body == shared.read_text(encoding="utf-8")


def test_every_row_parses_into_a_plausible_model(rows: list[TrainingRow]) -> None:
    shared = [r for r in rows if r.id in SHARED_IDS]
    assert len(shared) == 59
    for row in shared:
        model = to_model_spec(row)
        total = total_params(model)
        expected = _size_from_name(row.model.name)
        if expected is None:
            expected = PUBLISHED_TOTAL_B[row.model.name] * 1e9
        assert total == pytest.approx(expected, rel=0.05), (row.id, total / 1e9)
        assert model.max_context >= row.workload.seq_len
        assert active_params(model) <= total


FRAMEWORK_ROW_TOTALS_B = {
    "llama-2-7b": 6.74,  # Llama 2 model card / HF config (Meta names it 7B)
    "llama-2-13b": 13.0,
    "llama-2-70b": 69.0,
    "mpt-7b": 6.7,  # MosaicML MPT-7B model card
    "mpt-30b": 29.95,  # MPT-30B model card
    "palm-540b": 540.35,  # PaLM paper, Table 1
    "bloom-176b": 176.25,  # BLOOM paper (arXiv 2211.05100): 176,247M
    "mt-nlg-530b": 530.0,  # MT-NLG paper
    "nemotron-4-15b": 15.7,  # Nemotron-4 15B report: 15.7B (3.2B embedding)
    "llama-3.1-405b": 405.9,
    "deepseek-v3": 671.0,  # without the MTP module (DeepSeek-V3 report)
    "nanotron-bench-80b": 80.0,  # nanotron scripts/scaling_benchmarks.py parameter formula
    "nanotron-bench-80b-gqa8": 70.6,  # its 8-KV-head run: the benchmark CSV's Total Params
}
"""Published totals (billions) of the framework rows' models."""


def test_framework_rows_parse_into_models_of_their_published_size(
    rows: list[TrainingRow],
) -> None:
    """training_frameworks.yaml (the project's rows): each model the table names has its
    published parameter count within 2%."""
    checked = set()
    for row in rows:
        expected = FRAMEWORK_ROW_TOTALS_B.get(row.model.name)
        if row.id in SHARED_IDS or expected is None:
            continue
        total = total_params(to_model_spec(row))
        assert total == pytest.approx(expected * 1e9, rel=0.02), (row.id, total / 1e9)
        checked.add(row.model.name)
    assert checked == set(FRAMEWORK_ROW_TOTALS_B)


@pytest.mark.parametrize(
    ("row_id", "size"), [("S1", 1.7e9), ("S5", 39.1e9), ("S10", 1008e9), ("K4", 1e12)]
)
def test_sc21_and_rar_sizes_match_their_names(
    by_id: dict[str, TrainingRow], row_id: str, size: float
) -> None:
    assert total_params(to_model_spec(by_id[row_id])) == pytest.approx(size, rel=0.05)


def test_rows_agree_with_the_catalog_where_names_match(rows: list[TrainingRow]) -> None:
    catalog = set(model_names())
    checked = 0
    for row in rows:
        if row.model.name in catalog:
            ours = total_params(to_model_spec(row))
            theirs = total_params(load_model(row.model.name))
            assert ours == pytest.approx(theirs, rel=0.005), row.id
            checked += 1
    assert checked >= 3  # deepseek-v3, gpt-oss-120b, qwen3-*, gpt3-175b


def test_gpt_era_conventions(by_id: dict[str, TrainingRow]) -> None:
    sc21 = to_model_spec(by_id["S1"])
    assert (sc21.norm, sc21.position_embedding, sc21.dropout) == ("layernorm", "learned", True)
    assert sc21.attention_bias and sc21.mlp_bias and sc21.tied_embeddings
    assert sc21.ffn_activation == "gelu"
    mlm = to_model_spec(by_id["M1"])
    assert mlm.norm == "layernorm" and not mlm.dropout and not mlm.tied_embeddings
    llama = to_model_spec(by_id["N4"])
    assert (llama.norm, llama.position_embedding, llama.ffn_activation) == (
        "rmsnorm",
        "rope",
        "swiglu",
    )
    assert not llama.attention_bias and not llama.dropout
    assert to_model_spec(by_id["F7"]).ffn_activation == "relu2"
    # Megatron-LM's own DDP reduced gradients after the backward until --overlap-grad-reduce
    # (2023-08); SC'21's 1.7B-18B runs used PyTorch DDP instead (run_table_1.sh DDP=torch)
    assert not workload_of(by_id["S5"]).dp_comm_overlap
    assert not workload_of(by_id["K1"]).dp_comm_overlap
    assert workload_of(by_id["M1"]).dp_comm_overlap and workload_of(by_id["N4"]).dp_comm_overlap


def test_mla_moe_and_sliding_window(by_id: dict[str, TrainingRow]) -> None:
    dsv3 = to_model_spec(by_id["N12"])
    assert dsv3.attention_kind == "mla" and dsv3.mla is not None
    assert (dsv3.mla.kv_lora_rank, dsv3.mla.q_lora_rank, dsv3.mla.qk_rope_head_dim) == (
        512,
        1536,
        64,
    )
    assert dsv3.head_dim == 192  # nope 128 + rope 64 (the row gives no head_dim)
    assert dsv3.moe is not None and dsv3.moe.first_dense_layers == 3
    assert dsv3.moe.num_shared_experts == 1 and dsv3.ffn_hidden_size == 18432
    oss = to_model_spec(by_id["N15"])
    assert oss.ffn_hidden_size == 0 and oss.moe is not None and oss.moe.top_k == 4
    assert (oss.sliding_window, oss.num_sliding_window_layers) == (128, 18)


def test_stated_layout(by_id: dict[str, TrainingRow]) -> None:
    assert stated_layout(by_id["N1"]) == {
        "tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "mbs": 1, "recompute": "full", "zero": 3,
    }  # fmt: skip
    s1 = stated_layout(by_id["S1"])
    # the row's table leaves them out; the recipe (run_table_1.sh) states them
    assert (s1["mbs"], s1["vpp"]) == (16, 1)
    assert s1["recompute"] == "full"
    assert "mbs" not in stated_layout(by_id["M1"])  # the Megatron-LM table: chosen by search
    # SC'21 ran plain data parallelism: the distributed optimizer came to Megatron-LM in 2022
    assert s1["zero"] == 0 and "zero" not in stated_layout(by_id["M1"])


def test_variants_become_rows(rows: list[TrainingRow]) -> None:
    cases = {c.id: c for c in expand_cases(rows)}
    assert len([c for c in cases if c.split("/")[0] in SHARED_IDS]) == 65
    k1 = cases["K1/full"]
    assert k1.row.layout.recompute == "full" and k1.row.layout.tp == 8
    assert k1.measured_tokens_per_s_per_gpu == 721.1
    assert cases["K1"].row.layout.recompute == "selective"
    n2 = cases["N2/mxfp8"]
    assert n2.row.precision == "mxfp8" and n2.measured_tokens_per_s_per_gpu == 29521


def test_step_time_converts_to_tokens_per_gpu(by_id: dict[str, TrainingRow]) -> None:
    row = by_id["D1"]
    data = row.model_dump()
    data["measured"] = {"step_time_s": 19.78}
    data["variants"] = [{"precision": "fp8", "measured": {"step_time_s": 12.37}}]
    cases = expand_cases([TrainingRow.model_validate(data)])
    # 256 x 8192 / 19.78 / 512 = 207.1 (the row's own arithmetic)
    assert cases[0].measured_tokens_per_s_per_gpu == pytest.approx(207.1, abs=0.05)
    assert cases[1].id == "D1/fp8"
    assert cases[1].measured_tokens_per_s_per_gpu == pytest.approx(331.1, abs=0.05)


# --- statistics -----------------------------------------------------------------------------


def _result(rid: str, error: float | None, acc: str = "h100", kind: str = "dense") -> RowResult:
    measured = 100.0
    return RowResult(
        id=rid,
        model="m",
        cluster="c",
        accelerator=acc,
        kind=kind,  # type: ignore[arg-type]
        precision="bf16",
        stated={},
        method="search",
        status="ok" if error is not None else "not_evaluated",
        reason=None if error is not None else "does not fit",
        predicted_tokens_per_s_per_gpu=None if error is None else measured * (1 + error),
        measured_tokens_per_s_per_gpu=measured,
        error=error,
    )


def test_summary_statistics_by_hand() -> None:
    results = [
        _result("a", 0.10),
        _result("b", -0.20),
        _result("c", 0.40, acc="b200"),
        _result("d", None),
        _result("e", -0.05, kind="moe"),
    ]
    s = summarize("all", results)
    assert (s.rows, s.evaluated, s.not_evaluated) == (5, 4, 1)
    assert s.median_abs_error == pytest.approx(0.15)  # |e| = .05 .10 .20 .40
    assert s.max_abs_error == pytest.approx(0.40) and s.worst == "c"
    assert s.bias == pytest.approx((0.10 - 0.20 + 0.40 - 0.05) / 4)
    families = {f.group: f for f in family_summaries(results)}
    assert list(families) == ["b200 dense", "h100 dense", "h100 moe"]
    h100 = families["h100 dense"]
    assert (h100.rows, h100.evaluated, h100.not_evaluated) == (3, 2, 1)
    assert h100.median_abs_error == pytest.approx(0.15)
    assert h100.bias == pytest.approx(-0.05)
    empty = summarize("none", [_result("x", None)])
    assert empty.evaluated == 0 and empty.median_abs_error is None and empty.bias is None


# --- running rows -------------------------------------------------------------------------


def _case(row: TrainingRow, layout: dict[str, object]) -> Case:
    data = row.model_dump()
    data["layout"] = {**data["layout"], **layout}
    changed = TrainingRow.model_validate(data)
    return Case(id=row.id, row=changed, measured_tokens_per_s_per_gpu=1000.0)


def test_fully_stated_layout_is_estimated(by_id: dict[str, TrainingRow]) -> None:
    result = evaluate_case(_case(by_id["N1"], {"vpp": 1}))
    assert result.method == "estimate" and result.status == "ok"
    assert result.layout is not None and result.layout.zero == 3
    assert result.error == pytest.approx(result.predicted_tokens_per_s_per_gpu / 1000.0 - 1)


def test_partly_stated_layout_is_searched_with_pins(by_id: dict[str, TrainingRow]) -> None:
    result = evaluate_case(_case(by_id["M1"], {}))
    assert result.method == "search" and result.status == "ok"
    lay = result.layout
    assert lay is not None and (lay.tp, lay.pp, lay.dp) == (1, 1, 48)
    assert layout_short(result).startswith("TP1 PP1 DP48 mbs")
    assert "*" in layout_short(result)  # mbs, recompute and zero were searched


def test_rejected_row_is_reported_not_dropped(by_id: dict[str, TrainingRow]) -> None:
    result = evaluate_case(_case(by_id["S1"], {"tp": 3}))  # 3 does not divide 24 heads
    assert result.status == "not_evaluated" and result.error is None
    assert result.reason and "\n" not in result.reason
    assert summarize("x", [result]).not_evaluated == 1


def test_tuned_batch_row_scores_the_best_listed_local_batch(by_id: dict[str, TrainingRow]) -> None:
    # PF1's source tuned its batch without gradient accumulation (recipes.yaml): each listed
    # local batch b is a run of global batch dp x b; the row scores the fastest that fits
    row = by_id["PF1"]
    assert row.workload.global_batch is None and row.recipe is not None
    assert row.recipe.local_batch_sizes is not None
    case = Case(id="PF1", row=row, measured_tokens_per_s_per_gpu=960.0)
    stated = stated_layout(row)
    best = tuned_batch_plan(case, stated)
    assert best.layout.mbs in row.recipe.local_batch_sizes
    assert best.workload is not None
    assert best.workload.global_batch == best.layout.dp * best.layout.mbs  # no accumulation
    one = row.recipe.model_copy(update={"local_batch_sizes": (1,)})
    only_one = case.model_copy(update={"row": row.model_copy(update={"recipe": one})})
    single = tuned_batch_plan(only_one, stated)
    assert single.layout.mbs == 1
    assert best.tokens_per_s_per_gpu >= single.tokens_per_s_per_gpu
    result = evaluate_case(case)
    assert result.status == "ok"
    assert result.predicted_tokens_per_s_per_gpu == pytest.approx(best.tokens_per_s_per_gpu)
    # without the recipe's list the row states no batch and stays unscored
    bare = case.model_copy(update={"row": row.model_copy(update={"recipe": None})})
    assert evaluate_case(bare).status == "not_evaluated"


def test_unknown_row_id_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="unknown validation row 'S99'"):
        run_validation(ids=["S99"])


def test_full_run_covers_every_row(full_report: ValidationReport) -> None:
    total = len(expand_cases(load_rows(training_file())))  # shared + framework rows, variants
    assert len(full_report.rows) == total
    assert [r.id for r in full_report.rows][:2] == ["S1", "S2"]
    for r in full_report.rows:
        if r.status == "ok":
            assert r.predicted_tokens_per_s_per_gpu and r.predicted_tokens_per_s_per_gpu > 0
        else:
            assert r.reason
    overall = full_report.overall
    assert overall.evaluated + overall.not_evaluated == total
    assert overall.evaluated >= 0.9 * total  # most rows must be predictable
    assert sum(f.rows for f in full_report.families) == total
    text = validation_text(full_report)
    assert "median |err|" in text and "S1" in text


# --- the command ----------------------------------------------------------------------------


def _layout_exe() -> list[str]:
    script = Path(sys.executable).with_name("layout")
    return [str(script)] if script.exists() else [sys.executable, "-m", "planner"]


def test_layout_validate_json_end_to_end() -> None:
    proc = subprocess.run(
        [*_layout_exe(), "validate", "--rows", "S1,N4", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [r["id"] for r in data["rows"]] == ["S1", "N4"]
    assert {"overall", "families", "schema_version", "data_date"} <= set(data)
    for r in data["rows"]:
        assert r["measured_tokens_per_s_per_gpu"] > 0
        assert r["status"] in ("ok", "not_evaluated")
    assert data["overall"]["rows"] == 2


def test_layout_validate_bad_row_is_one_line_exit_2() -> None:
    proc = subprocess.run(
        [*_layout_exe(), "validate", "--rows", "S1,Q7"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Q7" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_layout_validate_writes_markdown(tmp_path: Path) -> None:
    from planner.cli import main

    target = tmp_path / "acc.md"
    assert main(["validate", "--rows", "K1", "--markdown", str(target)]) == 0
    text = target.read_text(encoding="utf-8")
    assert "| K1 |" in text and "| K1/full |" in text and COMMAND in text


def test_docs_accuracy_md_is_generated(full_report: ValidationReport) -> None:
    """docs/accuracy.md must be exactly what `layout validate --markdown docs/accuracy.md`
    writes today. After a cost-model change, regenerate it (or run with UPDATE_GOLDEN=1)."""
    generated = validation_markdown(full_report)
    assert full_report.data_date in generated
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(generated, encoding="utf-8")
    assert GOLDEN.exists(), f"docs/accuracy.md is missing: run `{COMMAND}`"
    assert GOLDEN.read_text(encoding="utf-8") == generated, (
        f"docs/accuracy.md is stale: run `{COMMAND}` (or UPDATE_GOLDEN=1 pytest "
        "tests/test_accuracy.py) and commit the result"
    )
