"""Serving mode (issue 6): KV bytes, capacity, decode ceilings, the layout search, the CLI and
the serving validation set. DESIGN.md section 4's serving examples are asserted here."""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
from pathlib import Path

import pytest

from planner.accuracy.serving import (
    run_serving_validation,
)
from planner.accuracy.serving_render import serving_validation_markdown, serving_validation_text
from planner.api import serve_estimate, serve_search
from planner.catalog import load_cluster, load_model
from planner.cli import main
from planner.cost.serving import (
    decode_ceiling_tokens_per_s,
    free_kv_bytes,
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token,
    kv_cache_tokens,
    kv_replication,
    max_concurrent_sequences,
    weight_bytes,
    weight_bytes_per_gpu,
    weight_bytes_read_per_token,
)
from planner.cost.serving_cycle import steady_state, ttft_service_s
from planner.errors import InfeasibleError, SpecError
from planner.search.serving import memory_cost, serve_setup
from planner.search.serving_search import serve_search as engine_serve_search
from planner.specs.formats import NumberFormat
from planner.specs.result import ServeLayout
from planner.specs.solver_config import SolverConfig
from planner.specs.workload import ServeWorkload
from planner.units import GB, MS, GiB, KiB

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "docs" / "accuracy-serving.md"
FP8, BF16, NVFP4 = NumberFormat.FP8, NumberFormat.BF16, NumberFormat.NVFP4
SERVE_PLAN_KEYS = {
    "layout", "weights_gib_per_gpu", "kv_bytes_per_token", "kv_cache_tokens",
    "max_concurrent_sequences", "decode_tokens_per_s_per_sequence", "ttft_s",
    "throughput_tokens_per_s_per_gpu",
}  # fmt: skip


def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def llama70b():  # type: ignore[no-untyped-def]
    return load_model("70B")


# --- KV bytes per token (DESIGN.md section 4; serving-formulas.md 6a) -----------------------


def test_70b_fp8_kv_is_160_kib_per_token(llama70b) -> None:  # type: ignore[no-untyped-def]
    # 2 (K and V) x 80 layers x 8 KV heads x 128 head dim x 1 byte = 163,840 B = 160 KiB
    assert kv_bytes_per_token(llama70b, FP8, 32768) == 163_840 == 160 * KiB
    assert kv_bytes_per_token(llama70b, BF16, 8192) == 320 * KiB


@pytest.mark.parametrize(
    ("model", "fmt", "expected"),
    [
        ("8B", BF16, 131_072),  # 2 x 32 x 8 x 128 x 2 = 128 KiB
        ("405B", BF16, 516_096),  # ISCA'25 table: 516.096 KB
        ("671B", BF16, 70_272),  # MLA: 61 x (512 + 64) x 2 (ISCA'25: 70.272 KB)
        ("671B", FP8, 40_016),  # FlashMLA FP8: 61 x 656 B
    ],
)
def test_kv_bytes_match_the_published_tables(model: str, fmt: NumberFormat, expected: int) -> None:
    assert kv_bytes_per_token(load_model(model), fmt, 8192) == expected


def test_sliding_window_layers_hold_only_the_window() -> None:
    oss = load_model("gpt-oss-120b")
    assert oss.sliding_window is not None and oss.num_sliding_window_layers > 0
    full = 2 * oss.num_kv_heads * oss.head_dim * 2 * oss.num_layers
    short = kv_bytes_per_token(oss, BF16, oss.sliding_window)
    long = kv_bytes_per_token(oss, BF16, 64 * oss.sliding_window)
    assert short == full  # every layer still holds the whole (short) context
    assert long < 0.6 * full  # half the layers stop at the window


def test_kv_replication_when_tp_exceeds_kv_heads_and_for_mla(llama70b) -> None:  # type: ignore[no-untyped-def]
    assert kv_replication(llama70b, 8) == 1.0
    assert kv_replication(llama70b, 16) == 2.0  # 8 KV heads over 16 ranks: each head twice
    v3 = load_model("671B")
    assert kv_replication(v3, 8) == 8.0  # MLA: the latent is duplicated on every TP rank
    per_gpu_tp8 = kv_bytes_per_sequence_per_gpu(v3, FP8, 4096, ServeLayout(tp=8))
    per_gpu_adp8 = kv_bytes_per_sequence_per_gpu(v3, FP8, 4096, ServeLayout(tp=8, attention_dp=8))
    assert per_gpu_tp8 == per_gpu_adp8 == kv_bytes_per_token(v3, FP8, 4096) * 4096
    cluster = load_cluster("hgx_h200x16")
    workload = ServeWorkload(precision="fp8", kv_precision="fp8", context=4096)
    tp_only = memory_cost(v3, cluster, workload, ServeLayout(tp=8, pp=2, precision="fp8"))
    with_dp = memory_cost(
        v3, cluster, workload, ServeLayout(tp=8, pp=2, attention_dp=8, precision="fp8")
    )
    assert with_dp.sequences > 4 * tp_only.sequences  # attention DP stops the duplication


# --- weights, capacity and concurrency -----------------------------------------------------


def test_70b_weights_by_precision(llama70b) -> None:  # type: ignore[no-untyped-def]
    # DESIGN.md section 4: BF16 140 GB, FP8 70 GB, FP4 35 GB (embeddings and lm_head stay 16-bit)
    assert weight_bytes(llama70b, BF16) / GB == pytest.approx(141, abs=1.5)
    assert weight_bytes(llama70b, FP8) / GB == pytest.approx(72, abs=2)
    assert weight_bytes(llama70b, NVFP4) / GB == pytest.approx(42, abs=3)
    per_gpu = [weight_bytes_per_gpu(llama70b, FP8, ServeLayout(tp=tp)) for tp in (1, 2, 4, 8)]
    assert per_gpu == sorted(per_gpu, reverse=True)
    assert per_gpu[1] == pytest.approx(per_gpu[0] / 2, rel=0.01)


def test_b200_capacity_arithmetic_of_design_md() -> None:
    # 180 GB - 70 GB FP8 weights - ~10 GB reserve = 100 GB -> ~610,000 tokens -> ~18 at 32k
    free = free_kv_bytes(180e9 - 10e9, 70e9, 0.0, 1.0)
    assert free == 100e9
    tokens = kv_cache_tokens(free, 163_840)
    assert tokens == pytest.approx(610_000, rel=0.001)
    assert max_concurrent_sequences(tokens, 32 * 1024) == 18


def test_b200_capacity_as_the_planner_predicts_it(llama70b) -> None:  # type: ignore[no-untyped-def]
    """The catalog's B200 reports 183,359 MiB (192 GB) and the planner counts 72.7 GB of weights
    (16-bit embeddings and lm_head) and a ~1.8 GB workspace: with the whole free memory for KV
    it predicts ~658,000 tokens and 20 sequences at 32k; at the default KV fraction 0.9,
    ~592,000 tokens and 18 sequences."""
    cluster = load_cluster("hgx_b200x1")
    layout = ServeLayout(precision="fp8", kv_precision="fp8")
    whole = ServeWorkload(precision="fp8", kv_precision="fp8", context=32768, kv_cache_fraction=1.0)
    mem = memory_cost(llama70b, cluster, whole, layout)
    assert mem.tokens == pytest.approx(658_000, rel=0.01)
    assert mem.sequences == 20
    default = memory_cost(
        llama70b, cluster, whole.model_copy(update={"kv_cache_fraction": 0.9}), layout
    )
    assert default.tokens == pytest.approx(592_000, rel=0.01)
    assert default.sequences == 18


def test_h100_fp8_70b_leaves_almost_no_cache(llama70b) -> None:  # type: ignore[no-untyped-def]
    cluster = load_cluster("hgx_h100x1")
    workload = ServeWorkload(precision="fp8", kv_precision="fp8", context=8192)
    mem = memory_cost(llama70b, cluster, workload, ServeLayout(precision="fp8", kv_precision="fp8"))
    assert mem.kv_pool < 0.08 * cluster.accelerator.hbm_bytes  # a few GB of an 80 GB part
    assert mem.sequences <= 4
    with pytest.raises(InfeasibleError, match="the KV cache binds"):
        engine_serve_search(llama70b, cluster, workload.model_copy(update={"context": 65536}))


@pytest.mark.parametrize("context", [2048, 4096, 8192, 32768])
def test_h100_fp8_70b_planner_chooses_tp2(llama70b, context: int) -> None:  # type: ignore[no-untyped-def]
    """DESIGN.md section 4: FP8 on H100 fits one GPU, but 2 in practice. At 2k context TP2 and
    TP1 x PP2 are close (both hold ~230 sequences; within 10% with the fitted factors); from
    4k on TP2 wins outright."""
    workload = ServeWorkload(precision="fp8", kv_precision="fp8", context=context)
    result = engine_serve_search(llama70b, load_cluster("hgx_h100x2"), workload)
    best = result.best
    assert best.layout.gpus_per_replica == 2 and best.layout.replicas == 1
    plans = [best, *result.alternatives]
    tp2 = next(p for p in plans if p.layout.tp == 2)
    single = next(p for p in plans if p.layout.gpus_per_replica == 1)
    assert tp2.throughput_tokens_per_s_per_gpu >= 0.90 * best.throughput_tokens_per_s_per_gpu
    assert single.throughput_tokens_per_s_per_gpu < best.throughput_tokens_per_s_per_gpu / 3
    if context >= 4096:
        assert best.layout.tp == 2
    board = engine_serve_search(llama70b, load_cluster("hgx_h100x8"), workload).best
    assert board.layout.gpus_per_replica >= 2  # never one 80 GB GPU per replica


# --- decode ceilings (DESIGN.md section 4) -------------------------------------------------


def _ceiling(model, cluster: str, fmt: NumberFormat, tp: int = 1) -> float:  # type: ignore[no-untyped-def]
    acc = load_cluster(cluster).accelerator
    read = weight_bytes_read_per_token(model, fmt, ServeLayout(tp=tp))
    return decode_ceiling_tokens_per_s(acc.hbm_bytes_per_s, read) * tp


def test_batch1_decode_bandwidth_ceilings(llama70b) -> None:  # type: ignore[no-untyped-def]
    assert _ceiling(llama70b, "hgx_h100x1", FP8) == pytest.approx(48, rel=0.03)
    assert _ceiling(llama70b, "hgx_h200x1", FP8) == pytest.approx(69, rel=0.03)
    b200 = _ceiling(llama70b, "hgx_b200x1", FP8)
    assert b200 == pytest.approx(110, rel=0.03)
    assert 1 / b200 == pytest.approx(9 * MS, rel=0.05)  # ~9 ms per step (H100 ~21 ms)
    assert 1 / _ceiling(llama70b, "hgx_h100x1", FP8) == pytest.approx(21 * MS, rel=0.03)
    assert 1.6 < _ceiling(llama70b, "hgx_b200x1", NVFP4) / b200 < 2.1  # NVFP4 ~doubles it
    # BF16 over two H100s (6.7 TB/s) ~48 tok/s: the ceiling of one GPU's half of the weights
    assert _ceiling(llama70b, "hgx_h100x2", BF16, tp=2) / 2 == pytest.approx(48, rel=0.03)


def test_predicted_decode_is_below_the_ceiling(llama70b) -> None:  # type: ignore[no-untyped-def]
    plan = serve_estimate(
        model="70B",
        cluster="hgx_b200x1",
        layout={"tp": 1},
        workload={"precision": "fp8", "kv_precision": "fp8", "concurrency": 1},
    )
    assert plan.batch1_ceiling_tokens_per_s == pytest.approx(110, rel=0.03)
    assert 0.4 < plan.decode_tokens_per_s_per_sequence / plan.batch1_ceiling_tokens_per_s < 1.0


# --- time terms: monotonicity ------------------------------------------------------------


def test_tpot_and_ttft_grow_with_load(llama70b) -> None:  # type: ignore[no-untyped-def]
    cluster = load_cluster("hgx_h200x2")
    workload = ServeWorkload(precision="fp8", context=4096)
    setup = serve_setup(llama70b, cluster, workload, ServeLayout(tp=2, precision="fp8"))

    def ttft_at(w: ServeWorkload, b: int) -> float:
        return ttft_service_s(setup, w, steady_state(setup, w, b))

    steps = [steady_state(setup, workload, b).tpot_s for b in (1, 8, 64, 256)]
    assert steps == sorted(steps)
    throughput = [b / s for b, s in zip((1, 8, 64, 256), steps, strict=True)]
    assert throughput == sorted(throughput)
    assert ttft_at(workload, 1) < ttft_at(workload, 256)
    longer = workload.model_copy(update={"prompt_len": 3000})
    assert ttft_at(longer, 1) > ttft_at(workload, 1)


# --- search --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def h200_search() -> dict:
    code, out, err = run_main(
        ["search", "--mode", "serve", "--model", "70B", "--cluster", "hgx_h200x8",
         "--precision", "fp8", "--context", "8192", "--tpot-ms", "50", "--json"]
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out)


def test_design_search_example_json(h200_search: dict) -> None:
    best = h200_search["best"]
    assert set(best) >= SERVE_PLAN_KEYS
    assert {"tp", "pp", "ep", "attention_dp", "replicas"} <= set(best["layout"])
    assert best["layout"]["replicas"] >= 1 and best["num_gpus"] <= 8
    assert best["kv_bytes_per_token"] == 160 * KiB  # FP8 KV follows FP8 weights by default
    assert 0 < best["decode_step_s"] <= 0.050  # meets --tpot-ms 50
    assert best["concurrency"] >= 1 and best["throughput_tokens_per_s_per_gpu"] > 0
    assert best["ttft_s"] > 0
    assert h200_search["search_time_s"] > 0
    assert len(h200_search["alternatives"]) >= 2
    for alt in h200_search["alternatives"]:
        assert alt["why_not"] and "tokens/s/GPU" in alt["why_not"]
        assert alt["throughput_tokens_per_s_per_gpu"] <= best["throughput_tokens_per_s_per_gpu"]


def test_design_search_example_text() -> None:
    code, out, _ = run_main(
        ["search", "--mode", "serve", "--model", "70B", "--cluster", "hgx_h200x8",
         "--precision", "fp8", "--context", "8192", "--tpot-ms", "50"]
    )  # fmt: skip
    assert code == 0
    for word in ("replica", "concurrency", "tokens/s/GPU", "TTFT", "runners-up"):
        assert word in out, word


@pytest.mark.parametrize(
    "extra",
    [{}, {"objective": "latency"}, {"target_tokens_per_s": 5000.0}, {"tpot_ms": 30.0}],
)
def test_sorted_ranking_equals_exhaustive(extra: dict[str, object]) -> None:
    """The numpy sort (search/rank.py) picks the plans the plain exhaustive sort picks."""
    model, cluster = load_model("70B"), load_cluster("hgx_h100x8")
    workload = ServeWorkload(precision="fp8", context=4096, **extra)  # type: ignore[arg-type]
    cp = engine_serve_search(model, cluster, workload, config=SolverConfig(top=3))
    ex = engine_serve_search(
        model, cluster, workload, config=SolverConfig(top=3, solver="exhaustive")
    )
    assert cp.solver.objective_value == pytest.approx(ex.solver.objective_value, rel=1e-9)
    assert [p.layout for p in [cp.best, *cp.alternatives]] == [
        p.layout for p in [ex.best, *ex.alternatives]
    ]


def test_tpot_target_binds_the_batch() -> None:
    model, cluster = load_model("70B"), load_cluster("hgx_h200x8")
    loose = engine_serve_search(model, cluster, ServeWorkload(precision="fp8", context=4096)).best
    tight = engine_serve_search(
        model, cluster, ServeWorkload(precision="fp8", context=4096, tpot_ms=15)
    ).best
    assert tight.decode_step_s <= 0.015
    assert tight.throughput_tokens_per_s_per_gpu < loose.throughput_tokens_per_s_per_gpu
    with pytest.raises(InfeasibleError, match="tpot"):
        engine_serve_search(model, cluster, ServeWorkload(precision="fp8", tpot_ms=1))


def test_latency_objective_prefers_wide_tp() -> None:
    model, cluster = load_model("70B"), load_cluster("hgx_h200x8")
    best = engine_serve_search(
        model, cluster, ServeWorkload(precision="fp8", objective="latency")
    ).best
    assert best.layout.tp == 8 and best.concurrency == 1


def test_target_load_picks_the_fewest_gpus() -> None:
    model, cluster = load_model("70B"), load_cluster("hgx_h200x8")
    result = engine_serve_search(
        model, cluster, ServeWorkload(precision="fp8", context=4096, target_tokens_per_s=6000)
    )
    best = result.best
    assert best.throughput_tokens_per_s >= 6000
    assert best.num_gpus < 8
    assert all(a.num_gpus >= best.num_gpus for a in result.alternatives)
    with pytest.raises(InfeasibleError, match="target"):
        engine_serve_search(model, cluster, ServeWorkload(precision="fp8", target_tokens_per_s=1e7))


def test_moe_mla_search_uses_attention_dp_and_ep() -> None:
    result = serve_search(
        model="671B",
        cluster="hgx_h200x16",
        workload={"precision": "fp8", "kv_precision": "fp8", "context": 8192},
        top=3,
    )
    best = result.best
    assert best.layout.ep > 1 and best.layout.attention_dp > 1
    assert best.kv_replication == 1.0


def test_pins_and_estimate_api() -> None:
    result = serve_search(
        model="70B", cluster="hgx_h200x8", workload={"precision": "fp8"}, fix={"tp": 4}, top=2
    )
    assert result.best.layout.tp == 4
    with pytest.raises(SpecError, match="pinnable"):
        serve_search(model="70B", cluster="hgx_h200x8", workload={}, fix={"mbs": 2})
    plan = serve_estimate(model="70B", cluster="hgx_h200x8", layout={"tp": 2, "dp": 2},
                          workload={"precision": "fp8"})  # fmt: skip
    assert plan.layout.replicas == 2 and plan.num_gpus == 4
    with pytest.raises(SpecError, match="KV heads"):
        serve_estimate(model="70B", cluster="hgx_h200x8", layout={"tp": 3}, workload={})


# --- CLI: exit codes and one-line errors ---------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["--precision", "fp9"], 2, "did you mean 'fp8'"),
        (["--kv-precision", "fp7"], 2, "kv-precision"),
        (["--prompt-len", "9000", "--output-len", "1000", "--context", "8192"], 2, "exceeds"),
        (["--context", "300000"], 2, "context"),
        (["--context", "131072", "--cluster", "hgx_h100x1"], 1, "KV cache"),
        (["--tpot-ms", "0.5"], 1, "tpot"),
    ],
)
def test_serve_errors_are_one_line(argv: list[str], code: int, needle: str) -> None:
    defaults = {"--model": "70B", "--cluster": "hgx_h200x8", "--precision": "fp8"}
    base = ["search", "--mode", "serve"]
    for flag, value in defaults.items():
        if flag not in argv:  # a flag given twice is itself an error (issue 17)
            base += [flag, value]
    got, _, err = run_main(base + argv)
    assert got == code, err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_serve_flags_need_serve_mode() -> None:
    code, _, err = run_main(
        ["search", "--model", "70B", "--cluster", "hgx_h200x8", "--tpot-ms", "50"]
    )
    assert code == 2 and "--mode serve" in err


def test_estimate_serve_json() -> None:
    code, out, err = run_main(
        ["estimate", "--mode", "serve", "--model", "70B", "--cluster", "hgx_h200x8",
         "--precision", "fp8", "--kv-precision", "fp8", "--tp", "2", "--dp", "4", "--json"]
    )  # fmt: skip
    assert code == 0, err
    plan = json.loads(out)
    assert set(plan) >= SERVE_PLAN_KEYS
    assert plan["kv_bytes_per_token"] == 160 * KiB
    assert plan["layout"]["replicas"] == 4 and plan["mode"] == "serve"
    assert plan["weights_gib_per_gpu"] == pytest.approx(72.66e9 / 2 / GiB, rel=0.02)


# --- serving validation set ----------------------------------------------------------------


@pytest.fixture(scope="module")
def serving_report():  # type: ignore[no-untyped-def]
    return run_serving_validation()


def test_serving_validation_held_out(serving_report) -> None:  # type: ignore[no-untyped-def]
    """The planner's end-to-end predictions against the 93 published serving rows (49
    TensorRT-LLM: 17 shared, 32 MoE and under-load rows the project added; 32 vLLM and 12 SGLang),
    out of sample first: each row predicted with its engine's figures fitted without its
    source document, median |error| 12.1% (2026-12-02, seventh session; TensorRT-LLM 9.0%,
    SGLang 11.2%, vLLM 40.0%: each engine as before, the pooled median moved with the training
    refit that the GEMM tile model and the shared per-step cost brought, docs/calibration.md;
    10.8% in the third session); in sample 6.4%. Before the engine figures (no serving row fitted) the
    TensorRT-LLM median was 24.7% and the vLLM / SGLang rows' (TensorRT-LLM's figures) 68.5% /
    39.4%, every regime too fast. Max 156% (V10, a 2023 TensorRT-LLM 0.5 static batch).
    2026-12-05: V68-V93 added (six more GPUStack performance-lab pages: 23 vLLM rows, 3 SGLang
    rows, the first A100 serving rows): held out 14.5% (TensorRT-LLM 8.4%, SGLang 18.1% on 12,
    vLLM 20.3% on 32), in sample 9.9%. The bounds below guard against regressions from the
    figures measured on the 93 rows (they were 12.5% and 8% on the 67); the targets are the
    strict xfails that follow."""
    overall = serving_report.overall
    assert overall.rows == 93 and overall.evaluated == 93
    held = {s.group: s for s in serving_report.heldout}
    assert held["all"].evaluated == 93 and held["all"].median_abs_error <= 0.15
    assert overall.median_abs_error <= 0.105
    assert held["all"].median_abs_error >= overall.median_abs_error  # out of sample is worse
    assert held["tensorrt-llm"].rows == 49 and held["tensorrt-llm"].median_abs_error <= 0.10
    regimes = {s.group: s for s in serving_report.regimes}
    assert regimes["moe"].rows == 47
    assert serving_report.ttft.evaluated >= 10  # TTFT under load on published rows
    errors = [abs(r.error) for r in serving_report.rows if r.error is not None]
    assert statistics.median(errors) == overall.median_abs_error
    text = serving_validation_text(serving_report)
    assert "median |err|" in text and "V1" in text
    assert text.index("held out") < text.index("in sample")


@pytest.mark.xfail(
    strict=True,
    reason="held out 10.8% since the third 2026-12-02 session (9.5-9.8% before): the serving "
    "GPU terms are the training fit's; the Hopper refit after the memory changes moved its bf16 "
    "GEMM factor from 0.6125 to 0.600, and the engines' refits on top moved SGLang's figures "
    "(245 + 1.5 -> 200 + 0 us) and vLLM's (130 + 8 -> 130 + 0.5 us): TensorRT-LLM 8.0 -> 8.3%, "
    "SGLang 10.8 -> 11.3%, vLLM 41.3 -> 44.7%, and rows near the median crossed 10%; 11.7% "
    "after the 2026-12-04 refit (Hopper HBM 0.72 -> 0.71 and the engines refitted on top: SGLang "
    "10.9%, vLLM 41.5%, MoE rows 9.1 -> 10.7%)",
)
def test_serving_validation_held_out_median_within_10_percent(serving_report) -> None:  # type: ignore[no-untyped-def]
    """The serving issue's target: out of sample, median |error| within 10% over the 93 rows."""
    held = {s.group: s for s in serving_report.heldout}
    assert held["all"].median_abs_error <= 0.10


def test_vllm_sglang_rows_are_fitted_and_held_out_by_source(serving_report) -> None:  # type: ignore[no-untyped-def]
    """V50-V93: published vLLM (32 rows, 9 sources) and SGLang (12 rows, 7 sources) runs, each
    engine's figures (with its compute efficiency) fitted on its own rows; their held-out
    errors come from the fit records. SGLang holds out at 11.1%; vLLM's sources (DeepSeek-R1 on
    vLLM 0.11, gpt-oss-120b MXFP4 on 0.10, Llama 70B on 0.6) disagree, and it holds out at
    40.8% (68.5% with TensorRT-LLM's figures). 2026-12-05, with V68-V93 (GPUStack Qwen3, gpt-oss
    and A100 pages): vLLM 20.3% on 32 rows; SGLang 18.1% on 12 (its three Qwen3-14B-FP8 rows on
    one H100 come out 32-60% fast and pull its fit). 2026-12-06, after the training refit that
    followed two recipe corrections (docs/calibration.md, forty-fourth session): vLLM 23.1%,
    SGLang 18.5%; 2026-12-07, after the refit that followed the deduplicating dispatchers'
    copies (forty-sixth session): vLLM 19.7%, SGLang 19.0%. The bounds guard those figures
    (SGLang's was 15% on 9 rows; vLLM's 45%, then 22, now 24)."""
    held = {s.group: s for s in serving_report.heldout}
    assert (held["vllm"].rows, held["sglang"].rows) == (32, 12)
    assert held["sglang"].median_abs_error <= 0.19
    assert held["vllm"].median_abs_error <= 0.24
    for r in serving_report.rows:
        if r.engine in ("vllm", "sglang"):
            assert r.status == "ok" and r.origin == "project"
            assert r.heldout_error is not None


def test_shared_serving_rows_within_13_percent(serving_report) -> None:  # type: ignore[no-untyped-def]
    held = [abs(r.heldout_error) for r in serving_report.rows if r.origin == "shared"]
    assert len(held) == 17 and statistics.median(held) <= 0.13


def test_moe_serving_rows_held_out_count_and_guard(serving_report) -> None:  # type: ignore[no-untyped-def]
    """The MoE rows, held out, every engine: 15.2% on 47 rows since the refit after the combined
    1F1B's unpaired passes (2026-12-06, fortieth session: Blackwell's HBM factor 0.861 -> 0.833;
    14.9% before it, 14.1% when V68-V93 came in on 2026-12-05, 10.7% on 31 before; 14.1% again
    after the forty-sixth session's refit); the guard is the 15.2% plus a point."""
    held = [abs(r.heldout_error) for r in serving_report.rows if r.moe]  # type: ignore[arg-type]
    assert len(held) == 47 and statistics.median(held) <= 0.162


@pytest.mark.xfail(
    strict=True,
    reason="the issue-20 target, median <= 12% on the MoE rows held out, is not met since the "
    "GPUStack rows V68-V93 joined: 14.1% on 47 rows (10.7% on 31 before)",
)
def test_moe_serving_rows_within_12_percent(serving_report) -> None:  # type: ignore[no-untyped-def]
    """The issue-20 target (median <= 12% including MoE rows), held out, every engine."""
    held = [abs(r.heldout_error) for r in serving_report.rows if r.moe]  # type: ignore[arg-type]
    assert statistics.median(held) <= 0.12


def test_serving_validation_reproduces_the_h100_cliff(serving_report) -> None:  # type: ignore[no-untyped-def]
    by_id = {r.id: r for r in serving_report.rows}
    assert by_id["V5"].concurrency < by_id["V1"].concurrency / 5  # 80 GB vs 141 GB
    assert by_id["V5"].predicted < by_id["V1"].predicted / 5


def test_layout_validate_serving_rows_json() -> None:
    code, out, err = run_main(["validate", "--rows", "V1,V13", "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert [r["id"] for r in data["rows"]] == ["V1", "V13"]
    assert data["rows"][1]["metric"] == "itl_ms"


def test_docs_accuracy_serving_md_is_generated(serving_report) -> None:  # type: ignore[no-untyped-def]
    """docs/accuracy-serving.md is written next to docs/accuracy.md by
    `layout validate --markdown docs/accuracy.md` (or UPDATE_GOLDEN=1 pytest)."""
    generated = serving_validation_markdown(serving_report)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(generated, encoding="utf-8")
    assert GOLDEN.exists(), "docs/accuracy-serving.md is missing: run layout validate --markdown"
    assert GOLDEN.read_text(encoding="utf-8") == generated, "docs/accuracy-serving.md is stale"


def test_serving_plans_carry_the_band_of_their_family() -> None:
    """DESIGN.md section 9: the band is the family's stored serving band (the 80% quantile of
    its serving rows' |error|, ``heldout.bands.serving``), widened by topologies/trust.yaml
    because those rows are not held out from the serving model; tests/test_band.py pins it."""
    workload = {"precision": "fp8", "kv_precision": "fp8"}
    hopper = serve_search(model="70B", cluster="hgx_h200x8", workload=workload).best
    record = load_cluster("hgx_h200x8").accelerator.calibration
    assert record is not None and record.heldout is not None
    band = record.heldout.bands["serving"]
    assert band.count >= 10 and band.band_abs >= record.residuals["serving"].median_abs
    assert hopper.uncertainty_pct is not None and hopper.uncertainty_level == 0.8
    assert hopper.uncertainty_pct > 100 * band.band_abs
    assert not any("serving run" in w for w in hopper.warnings)
    blackwell = serve_search(model="70B", cluster="hgx_b200x8", workload=workload).best
    stored = load_cluster("hgx_b200x8").accelerator.calibration
    assert stored is not None and stored.heldout is not None
    b200 = stored.heldout.bands["serving"]  # its own serving rows' band, widened
    assert blackwell.uncertainty_pct is not None
    assert blackwell.uncertainty_pct > 100 * b200.band_abs
    assert any("serving band" in w for w in blackwell.warnings)
    amd = serve_search(model="70B", cluster="mi300xx8", workload=workload).best
    assert amd.uncertainty_pct is not None and amd.uncertainty_pct > hopper.uncertainty_pct
    assert any("no published serving runs" in w for w in amd.warnings)


def test_serving_weights_take_the_heaviest_stage() -> None:
    """DeepSeek-V3's three leading dense layers make the first stage the lightest: the fullest
    stage at PP 2 is the last 31 blocks (all MoE), not the first 31."""
    from planner.cost.serving import _layer_weight_bytes, weight_bytes_per_gpu

    model = load_model("671B")
    layout = ServeLayout(tp=4, pp=2, precision="fp8")
    first = sum(_layer_weight_bytes(model, i, layout, NumberFormat.FP8) for i in range(31))
    last = sum(_layer_weight_bytes(model, i, layout, NumberFormat.FP8) for i in range(30, 61))
    assert last > first
    per_gpu = weight_bytes_per_gpu(model, NumberFormat.FP8, layout)
    vocab_and_norms = per_gpu - last
    assert 0 < vocab_and_norms < 2e9


def test_the_default_engine_follows_the_accelerator_and_a_foreign_one_is_refused() -> None:
    """TensorRT-LLM runs on NVIDIA GPUs only: without --serving-engine an AMD GPU or a TPU
    serves with vLLM (the plan says so), and TensorRT-LLM named there is one line naming the
    engines that do run (before, TensorRT-LLM's overheads were priced on a TPU)."""
    tpu = serve_search(model="8B", cluster="tpu_v5px16", top=1)
    assert tpu.best.engine is not None and tpu.best.engine.profile == "vllm"
    gpu = serve_search(model="8B", cluster="hgx_h100x8", top=1)
    assert gpu.best.engine is not None and gpu.best.engine.profile == "tensorrt-llm"
    with pytest.raises(SpecError, match="--serving-engine sglang or vllm runs there") as caught:
        serve_search(model="8B", cluster="mi300xx8", serving_engine="tensorrt-llm")
    assert "not on AMD's mi300x" in str(caught.value) and "\n" not in str(caught.value)
