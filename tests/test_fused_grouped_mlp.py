"""``--fused-grouped-mlp`` / ``fused_grouped_mlp``: Transformer Engine's fused grouped MLP for MoE
experts as a user-facing setting. It changes the prediction where it runs (an MoE model, mxfp8 or
nvfp4, a compute capability 10.x GPU), is refused in one line where it cannot (a dense model,
another GPU, a pinned precision other than mxfp8 or nvfp4), and the Megatron-LM and
Megatron-Bridge exports set it, with its environment variable, exactly where the prediction
assumed it.
"""

from __future__ import annotations

import json
import shlex

import pytest

import planner
from planner.errors import SpecError
from tests.test_cli import assert_one_line_error, run_main

MOE = ["--model", "gpt-oss-20b", "--fix", "tp=1", "--fix", "pp=1", "--json"]
"""An MoE search with a small structure (fast)."""
ENV = "NVTE_CUTEDSL_FUSED_GROUPED_MLP"


def _best(argv: list[str]) -> dict:
    code, out, err = run_main(argv)
    assert code == 0, err
    return json.loads(out)["best"]


@pytest.mark.parametrize("cluster", ["gb300_nvl72x8", "gb200_nvl72x8"])
def test_the_flag_speeds_up_an_moe_step_on_compute_capability_10(cluster: str) -> None:
    base = ["search", *MOE, "--cluster", cluster, "--precision", "mxfp8"]
    unfused = _best(base)
    fused = _best([*base, "--fused-grouped-mlp"])
    assert fused["workload"]["fused_grouped_mlp"] is True
    assert unfused["workload"]["fused_grouped_mlp"] is False
    assert fused["step_time_s"] < unfused["step_time_s"]


def test_precision_auto_is_not_refused_and_a_bf16_plan_says_it_went_unused() -> None:
    """--precision auto searches bf16 too: not refused; a plan in bf16 warns the setting
    did not apply (its experts priced unfused, as without it)."""
    argv = ["search", *MOE, "--cluster", "gb300_nvl72x8", "--fused-grouped-mlp"]
    best = _best([*argv, "--precision", "auto"])
    assert best["layout"]["precision"] in ("bf16", "fp8", "mxfp8")
    bf16 = _best([*argv, "--precision", "auto", "--fix", "precision=bf16"])
    assert any("fused-grouped-mlp applies to mxfp8 and nvfp4" in w for w in bf16["warnings"])
    plain = _best(["search", *MOE, "--cluster", "gb300_nvl72x8", "--precision", "bf16"])
    assert bf16["step_time_s"] == pytest.approx(plain["step_time_s"])


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--model", "gpt-oss-20b", "--cluster", "hgx_h100x8", "--precision", "fp8"],
         "h100_sxm has compute capability 9.0"),
        (["--model", "gpt-oss-20b", "--cluster", "hgx_h100x8", "--precision", "auto"],
         "h100_sxm has compute capability 9.0"),
        (["--model", "gpt-oss-20b", "--cluster", "mi300xx8", "--precision", "fp8"],
         "mi300x has no CUDA compute capability"),
        (["--model", "8B", "--cluster", "gb300_nvl72x8", "--precision", "mxfp8"],
         "model 'llama3.1-8b' has none"),
        (["--model", "gpt-oss-20b", "--cluster", "gb300_nvl72x8", "--precision", "bf16"],
         "runs only in mxfp8 or nvfp4, not bf16"),
        (["--model", "gpt-oss-20b", "--cluster", "gb300_nvl72x8", "--precision", "fp8"],
         "runs only in mxfp8 or nvfp4, not fp8"),
    ],
)  # fmt: skip
def test_the_flag_is_refused_in_one_line_where_it_cannot_run(argv: list[str], words: str) -> None:
    for command in ("search", "estimate"):
        if command == "estimate" and "auto" in argv:
            continue  # estimate takes no --precision auto
        code, out, err = run_main([command, *argv, "--fused-grouped-mlp"])
        line = assert_one_line_error(code, err, 2)
        assert line.startswith(f"layout {command}: error: --fused-grouped-mlp: ")
        assert words in line and out == ""


def test_the_api_takes_the_setting_and_refuses_it_with_spec_errors() -> None:
    moe = {"model": "gpt-oss-20b", "layout": {"ep": 8}}
    fused = planner.estimate(
        cluster="gb300_nvl72x8", precision="mxfp8", fused_grouped_mlp=True, **moe
    )  # type: ignore[arg-type]
    plain = planner.estimate(cluster="gb300_nvl72x8", precision="mxfp8", **moe)  # type: ignore[arg-type]
    assert fused.step_time_s < plain.step_time_s and fused.workload.fused_grouped_mlp  # type: ignore[union-attr]
    same = planner.estimate(
        cluster="gb300_nvl72x8",
        workload={"precision": "mxfp8", "fused_grouped_mlp": True},
        **moe,  # type: ignore[arg-type]
    )
    assert same.step_time_s == fused.step_time_s
    cases = [
        ({"cluster": "hgx_h100x8", "precision": "fp8"}, moe, "h100_sxm has compute capability 9.0"),
        ({"cluster": "gb300_nvl72x8", "precision": "bf16"}, moe, "not bf16"),
        ({"cluster": "gb300_nvl72x8", "precision": "mxfp8"}, {"model": "8B", "layout": {}},
         "model 'llama3.1-8b' has none"),
    ]  # fmt: skip
    for settings, spec, words in cases:
        with pytest.raises(SpecError, match=words):
            planner.estimate(fused_grouped_mlp=True, **settings, **spec)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="not bf16"):
        planner.search(model="gpt-oss-20b", cluster="gb300_nvl72x8", fused_grouped_mlp=True)
    result = planner.search(
        model="gpt-oss-20b", cluster="gb300_nvl72x8", precision="auto", fused_grouped_mlp=True,
        fix={"tp": 1, "pp": 1}, top=1,
    )  # fmt: skip
    assert result.best.workload.fused_grouped_mlp  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("precision", "flag", "applies"),
    [("mxfp8", True, True), ("nvfp4", True, True), ("mxfp8", False, False)],
)
def test_the_megatron_and_bridge_exports_set_it_where_the_prediction_assumed_it(
    precision: str, flag: bool, applies: bool
) -> None:
    argv = ["--model", "gpt-oss-20b", "--cluster", "gb300_nvl72x8", "--precision", precision]
    argv += ["--fix", "tp=1", "--fix", "pp=1"] + (["--fused-grouped-mlp"] if flag else [])
    code, out, err = run_main(["export", "--format", "megatron", *argv])
    assert code == 0, err
    words = shlex.split(out, comments=True)
    assert ("--use-transformer-engine-op-fuser" in words) is applies
    assert (f"export {ENV}=1" in out.splitlines()) is applies and (ENV in out) is applies
    code, out, err = run_main(["export", "--format", "bridge", *argv])
    assert code == 0, err
    assert ("model.use_transformer_engine_op_fuser=true" in out) is applies
    assert (f"export {ENV}=1" in out.splitlines()) is applies
    code, out, err = run_main(["export", "--format", "megatron", "--json", *argv])
    assert code == 0, err
    assert json.loads(out)["env"] == ({ENV: "1"} if applies else {})


def test_a_plan_where_it_does_not_apply_exports_no_fuser() -> None:
    """Asked for, but the plan runs bf16 (a searched precision): the prediction priced the
    experts unfused, so neither export sets the fuser or its variable; torchtitan, which cannot
    express the fused MLP, says so only where the prediction assumed it."""
    argv = ["--model", "gpt-oss-20b", "--cluster", "gb300_nvl72x8", "--fused-grouped-mlp"]
    argv += ["--fix", "tp=1", "--fix", "pp=1"]
    result = planner.search(
        model="gpt-oss-20b", cluster="gb300_nvl72x8", precision="auto", fused_grouped_mlp=True,
        fix={"tp": 1, "pp": 1, "precision": "bf16"}, top=1,
    )  # fmt: skip
    for fmt in ("megatron", "bridge"):
        exported = planner.export(result, format=fmt)
        assert ENV not in exported.text and exported.env == {}
        assert not any("op_fuser" in a or "op-fuser" in a for a in exported.args)
    titan = planner.export(result, format="torchtitan")
    assert not any("fused grouped MLP" in n for n in titan.notes)
    code, _, err = run_main(["export", "--format", "torchtitan", *argv, "--precision", "mxfp8"])
    assert code == 0 and "Transformer Engine's fused grouped MLP" in err


def test_whatif_sweeping_the_precision_is_not_refused() -> None:
    code, out, err = run_main(
        ["whatif", "--model", "gpt-oss-20b", "--cluster", "gb300_nvl72x8", "--fused-grouped-mlp",
         "--vary", "precision=bf16,mxfp8", "--fix", "tp=1", "--fix", "pp=1", "--json"]
    )  # fmt: skip
    assert code == 0, err
    scenarios = json.loads(out)["scenarios"]
    assert [s["status"] for s in scenarios] == ["ok", "ok"]
