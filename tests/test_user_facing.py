"""What a user reads (issue 21): objectives print what they rank, in their unit; the header says
how many of the cluster's accelerators a plan uses; MFU never passes 100% unexplained; the
step-time target's failure names the best achievable time; search prints the workload; text
reports fit in 100 columns; the API's names are the CLI's; HF configs are named from the config;
``layout show`` is readable text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import planner
from planner.errors import InfeasibleError, SpecError
from planner.report.text import search_text
from planner.report.width import COLUMNS
from tests.test_cli import assert_one_line_error, run_main

SMALL = {"model": "8B", "cluster": "hgx_h100x64"}


def _fits(text: str) -> None:
    wide = [line for line in text.splitlines() if len(line) > COLUMNS]
    assert not wide, f"{len(wide)} lines over {COLUMNS} columns: {wide[0]!r}"


# --- objectives -------------------------------------------------------------------------------


@pytest.mark.parametrize("objective", ["cost", "energy"])
def test_gpus_equal_to_the_cluster_is_the_same_search(objective: str) -> None:
    """The cap's value decides the search, not whether --gpus is given: cost and energy
    consider fewer GPUs either way (before, only when --gpus was passed)."""
    config = {"objective": objective}
    plain = planner.search(**SMALL, config=config, top=3)
    capped = planner.search(**SMALL, config=config, top=3, gpus=64)
    assert plain.best.layout == capped.best.layout
    assert [a.layout for a in plain.alternatives] == [a.layout for a in capped.alternatives]
    assert plain.objective == objective
    time = planner.search(**SMALL, top=1)
    assert time.best.num_gpus == 64 and time.objective == "time"


def test_cost_objective_prints_dollars_for_the_winner_and_every_runner_up() -> None:
    result = planner.search(**SMALL, config={"objective": "cost"}, top=4)
    best = result.best
    assert best.num_gpus < 64  # fewer GPUs win on cost here
    text = search_text(result)
    _fits(text)
    assert f"hgx_h100x64: {best.num_gpus} of 64 x h100_sxm" in " ".join(text.split())
    assert f"(best ${best.usd_per_million_tokens:.3g}/M tokens)" in text
    flat = " ".join(text.split())
    for alt in result.alternatives:
        assert f"${alt.usd_per_million_tokens:.3g}/M tokens" in flat
        assert alt.why_not is not None and "more per million tokens" in alt.why_not
        # the sign is a word: never "-3 s slower" or "(-12%)" after "slower"
        assert not re.search(r"-[\d.]+ ?(s|ms|us) (slower|faster)", alt.why_not)
        assert not re.search(r"slower per step \(-", alt.why_not)
        assert not re.search(r"faster per step \(\+", alt.why_not)


def test_energy_objective_prints_joules() -> None:
    result = planner.search(**SMALL, config={"objective": "energy"}, top=3)
    text = " ".join(search_text(result).split())
    assert f"(best {result.best.joules_per_token:.3g} J/token)" in text
    for alt in result.alternatives:
        assert f"{alt.joules_per_token:.3g} J/token" in text
        assert "J more per token" in (alt.why_not or "")


def test_cli_objective_json_and_text() -> None:
    code, out, err = run_main(["search", "--model", "8B", "--cluster", "hgx_h100x64",
                               "--objective", "cost", "--json", "--top", "2"])  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert data["objective"] == "cost" and data["best"]["usd_per_million_tokens"] > 0
    code, out, _ = run_main(["search", "--model", "8B", "--cluster", "hgx_h100x64",
                             "--objective", "energy", "--top", "2"])  # fmt: skip
    assert code == 0 and "ranked  : by lowest energy per token" in out
    _fits(out)


# --- MFU --------------------------------------------------------------------------------------


def test_nvfp4_mfu_is_against_the_format_peak_and_says_why_bf16_passes_100() -> None:
    plan = planner.estimate(model="70B", cluster="hgx_b200x64", layout={"tp": 4}, precision="nvfp4")
    # against the BF16 peak an nvfp4 plan may pass 100% (its GEMMs run at 4x that rate)
    assert plan.mfu_precision_peak is not None and plan.mfu_precision_peak < 1.0
    assert plan.mfu_precision_peak == pytest.approx(plan.mfu * 2250 / 9000, rel=1e-6)
    code, out, _ = run_main(["estimate", "--model", "70B", "--cluster", "hgx_b200x64",
                             "--tp", "4", "--precision", "nvfp4"])  # fmt: skip
    assert code == 0
    flat = " ".join(out.split())
    assert f"MFU {100 * plan.mfu_precision_peak:.1f}% of the nvfp4 peak" in flat
    assert f"BF16-equivalent {100 * plan.mfu:.1f}%" in flat
    # the why is there exactly when the BF16-equivalent figure passes 100%
    assert (": nvfp4 GEMMs run faster than BF16's peak" in flat) == (plan.mfu > 1.0)
    bf16 = planner.estimate(model="8B", cluster="hgx_h100x8", layout={"tp": 2})
    assert bf16.mfu_precision_peak == pytest.approx(bf16.mfu)


# --- messages ---------------------------------------------------------------------------------


def test_target_step_time_failure_gives_units_and_the_best_achievable_time() -> None:
    with pytest.raises(InfeasibleError) as info:
        planner.search(**SMALL, config={"target_step_time_s": 0.5})
    message = str(info.value)
    match = re.search(r"the fastest that fits on 64 GPUs, (.+), takes ([\d.]+) s per step", message)
    assert match, message
    fastest = planner.search(**SMALL, top=1).best
    assert float(match.group(2)) == pytest.approx(fastest.step_time_s, rel=2e-3)
    assert fastest.layout.short() == match.group(1)
    assert "0.5 s step-time target" in message and "layouts exceeds it" in message


def test_target_step_time_header_names_the_gpus_used_of_the_cluster() -> None:
    result = planner.search(**SMALL, config={"target_step_time_s": 60.0}, top=2)
    used = result.best.num_gpus
    assert used < 64 and result.objective == "target"
    assert result.best.cluster_description.startswith(f"hgx_h100x64: {used} of 64 x ")
    assert "step-time target, then shortest step" in search_text(result)


def test_search_prints_the_workload_and_fits_100_columns() -> None:
    code, out, _ = run_main(["search", "--model", "70B", "--cluster", "hgx_b200x16",
                             "--seq-len", "4096", "--global-batch", "256"])  # fmt: skip
    assert code == 0
    assert "workload: 4,096-token sequences x 256 = 1,048,576 tokens per step" in out
    _fits(out)
    code, out, _ = run_main(["estimate", "--model", "671B", "--cluster", "gb200_nvl72x128",
                             "--pp", "8", "--ep", "16"])  # fmt: skip
    _fits(out)


# --- API names, HF names, show ------------------------------------------------------------------


def test_dir_planner_lists_the_api() -> None:
    names = dir(planner)
    for name in ("search", "estimate", "export", "migrate", "whatif", "placement",
                 "serve_search", "serve_estimate", "load_model", "load_cluster"):  # fmt: skip
        assert name in names, name


def test_api_takes_the_clis_names() -> None:
    serve = planner.serve_search(
        model="70B", cluster="hgx_h200x8", precision="fp8", kv_precision="FP8", context=8192,
        tpot_ms=50, top=1,
    )  # fmt: skip
    assert (
        str(serve.best.layout.precision) == "fp8" and str(serve.best.layout.kv_precision) == "fp8"
    )
    plan = planner.estimate(model="8B", cluster="hgx_h100x8", layout={"tp": 2}, seq_len=4096,
                            grad_reduce="bf16")  # fmt: skip
    assert plan.workload is not None and plan.workload.seq_len == 4096
    assert plan.workload.grad_reduce_dtype == "bf16"
    auto = planner.search(model="8B", cluster="hgx_h100x8", precision="auto", top=1)
    assert str(auto.best.layout.precision) in ("bf16", "fp8")
    with pytest.raises(SpecError, match="unknown argument 'precison'"):
        planner.serve_search(model="70B", cluster="hgx_h200x8", precison="fp8")
    with pytest.raises(SpecError, match="given twice"):
        planner.search(model="8B", cluster="hgx_h100x8", workload={"seq_len": 4096}, seq_len=2048)


def test_hf_config_is_named_from_the_config_or_the_file(tmp_path: Path) -> None:
    from tests.test_hf_import import LLAMA_3_1_70B

    folder = tmp_path / "models"
    folder.mkdir()
    plain = folder / "llama-3.1-405b.json"
    plain.write_text(json.dumps(LLAMA_3_1_70B), encoding="utf-8")
    assert planner.load_model(plain).name == "llama-3.1-405b"
    named = folder / "other.json"
    named.write_text(json.dumps({**LLAMA_3_1_70B, "_name_or_path": "meta-llama/Llama-3.1-70B"}))
    assert planner.load_model(named).name == "meta-llama/Llama-3.1-70B"
    ckpt = tmp_path / "Llama-3.1-70B"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps(LLAMA_3_1_70B), encoding="utf-8")
    assert planner.load_model(ckpt / "config.json").name == "Llama-3.1-70B"


def test_a_bare_config_json_is_named_from_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--model config.json`` run inside the checkpoint folder names the folder, as the path
    ``Llama-3.1-70B/config.json`` does (it was named 'config')."""
    from tests.test_hf_import import LLAMA_3_1_70B

    ckpt = tmp_path / "Llama-3.1-70B"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps(LLAMA_3_1_70B), encoding="utf-8")
    monkeypatch.chdir(ckpt)
    assert planner.load_model("config.json").name == "Llama-3.1-70B"


@pytest.mark.parametrize("cluster", ["hgx_h100x1024", "tpu_v5p_8x8x16", "gb200_nvl72x144"])
def test_show_is_readable_text(cluster: str) -> None:
    code, out, _ = run_main(["show", cluster])
    assert code == 0
    assert "{" not in out and "[{" not in out and "None" not in out
    _fits(out)
    for section in ("cluster :", "accelerator:", "network (per accelerator", "totals:"):
        assert section in out


# --- migrate --layout takes the tool's own JSON -----------------------------------------------


def test_migrate_layout_takes_estimate_and_search_json(tmp_path: Path) -> None:
    base = ["--model", "70B", "--cluster", "hgx_h200x16"]
    code, out, err = run_main(["estimate", *base, "--tp", "8", "--cp", "2", "--zero", "3",
                               "--recompute", "full", "--json"])  # fmt: skip
    assert code == 0, err
    estimate = tmp_path / "estimate.json"
    estimate.write_text(out, encoding="utf-8")
    code, out, err = run_main(["search", *base, "--json", "--top", "1"])
    assert code == 0, err
    search = tmp_path / "search.json"
    search.write_text(out, encoding="utf-8")
    expected = json.loads(out)["best"]["layout"]
    migrate = ["migrate", "--model", "70B", "--from", "hgx_h200x16", "--to", "hgx_b200x16"]
    for saved, layout in ((estimate, "TP8 PP1 DP1 CP2 mbs1 full zero3 bf16"), (search, None)):
        code, out, err = run_main([*migrate, "--layout", str(saved), "--json"])
        assert code == 0, err
        source = json.loads(out)["from"]["layout"]
        if layout is None:
            assert source == expected
        else:
            assert source["tp"] == 8 and source["cp"] == 2 and source["zero"] == 3
    serve = tmp_path / "serve.json"
    code, out, _ = run_main(["search", "--mode", "serve", "--model", "70B", "--cluster",
                             "hgx_h200x8", "--json", "--top", "1"])  # fmt: skip
    serve.write_text(out, encoding="utf-8")
    code, _, err = run_main([*migrate, "--layout", str(serve)])
    assert code == 2 and "a serving plan" in err
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**json.loads(search.read_text()), "schema_version": "2.0"}))
    code, _, err = run_main([*migrate, "--layout", str(newer)])
    assert code == 2 and "schema_version '2.0'" in err


def test_whatif_and_migrate_text_fit_100_columns() -> None:
    code, out, _ = run_main(["whatif", "--model", "8B", "--cluster", "hgx_h100x16",
                             "--vary", "nic_gbps=200,400,800", "--vary", "oversubscription=1,2"])  # fmt: skip
    assert code == 0
    _fits(out)
    assert "every layout:" in out  # the words all layouts share, said once above the table
    code, out, _ = run_main(["migrate", "--model", "8B", "--from", "hgx_h100x8", "--to",
                             "hgx_b200x8", "--seq-len", "4096", "--global-batch", "64"])  # fmt: skip
    assert code == 0
    _fits(out)


def test_moe_warning_only_for_settings_the_user_gave() -> None:
    """A dense model under a profile that sets MoE dispatch fields itself (DeepSpeed's
    capacity-padded dispatch has no host sync) gets no MoE warning; the same field given by the
    user does."""
    from planner.catalog.frameworks import load_framework, resolve_workload
    from planner.search.evaluate import unused_settings
    from planner.specs.layout import Layout
    from planner.specs.workload import TrainWorkload

    model = planner.load_model("8B")
    assert load_framework("deepspeed").workload["moe_host_sync"] is False
    profile = resolve_workload({"framework": "deepspeed"})  # capacity-padded einsum dispatch
    assert unused_settings(model, profile, Layout(dp=8)) == []
    given = profile.model_copy(update={"ep_comm_overlap": True})
    assert any("no experts" in w for w in unused_settings(model, given, Layout(dp=8)))
    capacity = TrainWorkload(moe_capacity_factor=1.25)  # the routing settings too
    assert any("no experts" in w for w in unused_settings(model, capacity, Layout(dp=8)))
    assert any(
        "no experts" in w
        for w in unused_settings(model, TrainWorkload(moe_host_sync=False), Layout(dp=8))
    )


def test_fp8_param_gather_the_layout_cannot_use_is_said() -> None:
    """``fp8_param_gather`` on a layout that gathers nothing in 8 bits (ZeRO 0, or a bf16
    candidate of ``--precision auto``) is said in a warning, not silently dropped; on the CLI a
    16-bit ``--precision`` refuses the flag outright."""
    from planner.search.evaluate import unused_settings
    from planner.specs.layout import Layout
    from planner.specs.workload import TrainWorkload

    model = planner.load_model("8B")
    on = TrainWorkload(precision="fp8", fp8_param_gather=True)
    assert unused_settings(model, on, Layout(dp=8, zero=1, precision="fp8")) == []
    assert any(
        "ZeRO 0" in w for w in unused_settings(model, on, Layout(dp=8, zero=0, precision="fp8"))
    )
    assert any("runs bf16" in w for w in unused_settings(model, on, Layout(dp=8, zero=1)))
    code, out, err = run_main(
        ["search", "--model", "8B", "--cluster", "hgx_h100x8", "--fp8-param-gather"]
    )
    line = assert_one_line_error(code, err, 2)
    assert "--precision fp8 or mxfp8" in line and out == ""


def test_activation_offload_flag_trades_host_link_time_for_memory() -> None:
    """MaxText-style host offload from the CLI: Llama 3.1 70B on a v6e-256 slice, FSDP, 8K
    tokens, two sequences per chip and full rematerialisation keeps 80 layer inputs of 2 x 8192
    x 8192 x 2 bytes (20 GiB) and does not fit 31.2 GiB; offloading them (``--activation-offload
    1``) leaves one layer's worth on the chip, fits, and costs host-link time, never less; a tenth
    offloaded does not fit."""
    base = [
        "estimate", "--model", "llama3.1-70b", "--cluster", "tpu_v6ex256", "--framework",
        "maxtext", "--zero", "3", "--mbs", "2", "--seq-len", "8192", "--global-batch", "512",
        "--recompute", "full", "--json",
    ]  # fmt: skip
    code, out, err = run_main(base)
    assert code == 1 and "does not fit" in err
    code, out, err = run_main([*base, "--activation-offload", "1"])
    assert code == 0, err
    plan = json.loads(out)
    kept = plan["memory"]["activations_gib"]
    layer_input_gib = 2 * 8192 * 8192 * 2 / 2**30  # one layer's input, the one being copied
    assert kept < 2 * layer_input_gib + 8.0  # the working layer's transients stay
    assert plan["breakdown_s"]["offload"] > 0
    code, out, err = run_main([*base, "--activation-offload", "0.1"])
    tenth = re.search(r"activations ([0-9.]+)\)", err)  # a tenth of them: 3.6 GiB over
    assert code == 1 and tenth is not None and float(tenth.group(1)) > kept + 9.0
    # a quarter leaves it 1.3 GiB over with the prefetched weight: it fits where XLA's
    # scheduler gives the prefetch up at the memory peak (planner.cost.step.unprefetched_share)
    code, out, err = run_main([*base, "--activation-offload", "0.25"])
    assert code == 0, err
    assert any("gives up its ZeRO-3 prefetch" in w for w in json.loads(out)["warnings"])


def test_saved_tensors_flag_is_a_save_list() -> None:
    """``--saved-tensors`` replaces Megatron's recompute modules with a save list: keeping
    fewer tensors needs less memory and recomputes more; naming none recomputes the layer;
    on a layout without selective recomputation it is said, not dropped."""
    base = ["estimate", "--model", "8B", "--cluster", "hgx_h100x8", "--recompute", "selective",
            "--framework", "maxtext", "--zero", "3", "--json"]  # fmt: skip
    plans = {}
    for saved in ("q,k,v,out,mlp_gate,mlp_up,mlp_down", "q,k,v,out", "none"):
        code, out, err = run_main([*base, "--saved-tensors", saved])
        assert code == 0, err
        plans[saved] = json.loads(out)
    acts = [p["memory"]["activations_gib"] for p in plans.values()]
    steps = [p["step_time_s"] for p in plans.values()]
    assert acts[0] > acts[1] > acts[2]
    assert steps[0] < steps[1] < steps[2]
    code, out, err = run_main(
        ["estimate", "--model", "8B", "--cluster", "hgx_h100x8", "--recompute", "full",
         "--zero", "3", "--saved-tensors", "q,k"]
    )  # fmt: skip
    assert code == 0 and "saved tensors q,k apply to selective recomputation" in out + err
    code, out, err = run_main(
        ["estimate", "--model", "8B", "--cluster", "hgx_h100x8", "--saved-tensors", "q",
         "--recompute-modules", "mlp"]
    )  # fmt: skip
    assert "give one" in assert_one_line_error(code, err, 2)


def test_kernel_flags_say_what_the_api_fields_say() -> None:
    """``--elementwise``, ``--attention-kernel`` and ``--cross-entropy`` set the workload fields
    the Python API takes (torchtitan with torch.compile on is ``fused_elementwise=True``; an
    unfused attention is ``flash_attention=False``): the CLI's step time is the API's."""
    base = ["estimate", "--model", "8B", "--cluster", "hgx_h100x8", "--framework", "torchtitan",
            "--zero", "3", "--recompute", "selective", "--global-batch", "8", "--json"]  # fmt: skip
    cases = [
        (["--elementwise", "fused"], {"fused_elementwise": True}),
        (["--attention-kernel", "vendor"], {"attention_kernel": "vendor"}),
        (["--attention-kernel", "unfused"], {"flash_attention": False}),
        (["--cross-entropy", "te"], {"cross_entropy": "te"}),
        (["--reshard-after-forward", "never"], {"reshard_after_forward": "never"}),
        (["--host-sync-interval", "1"], {"host_sync_interval": 1}),
        (["--host-sync-interval", "never"], {"host_sync_interval": None}),
    ]
    eager = planner.estimate(
        model="8B", cluster="hgx_h100x8", layout={"dp": 8, "zero": 3, "recompute": "selective"},
        workload={"framework": "torchtitan", "global_batch": 8},
    ).step_time_s  # fmt: skip
    for flags, fields in cases:
        code, out, err = run_main([*base, *flags])
        assert code == 0, err
        api = planner.estimate(
            model="8B", cluster="hgx_h100x8", layout={"dp": 8, "zero": 3, "recompute": "selective"},
            workload={"framework": "torchtitan", "global_batch": 8, **fields},
        )  # fmt: skip
        assert json.loads(out)["step_time_s"] == pytest.approx(api.step_time_s, rel=1e-12)
        assert api.step_time_s != pytest.approx(eager, rel=1e-3)  # each one moves the step


def test_nothing_fits_names_the_lean_state_that_would_fit() -> None:
    """Mixtral 8x22B (141B parameters) on one node of 8 MI355X: with fp32 Adam moments and
    gradients the unsharded expert state alone passes 288 GB, so nothing fits; the error says
    that bf16 moments and gradients (Megatron-LM's precision-aware optimizer) would fit its
    closest layout, and with those flags the search finds a plan. 70B on 8 H100 gets no such
    hint: bf16 state does not make it fit."""
    flags = ["--model", "mixtral-8x22b", "--cluster", "mi355xx8", "--seq-len", "4096",
             "--global-batch", "64"]  # fmt: skip
    code, _out, err = run_main(["search", *flags])
    line = assert_one_line_error(code, err, 1)
    assert (
        "with --optimizer-state bf16 --grad-reduce bf16 (bf16 Adam moments and gradients)" in line
    )
    hinted = line.split("(bf16 Adam moments and gradients) ")[1]
    needs = float(hinted.split(" needs ")[1].split(" GiB")[0])
    assert needs < 246.0
    code, _out, err = run_main(
        ["search", *flags, "--optimizer-state", "bf16", "--grad-reduce", "bf16"]
    )
    assert code == 0, err
    code, _out, err = run_main(["search", "--model", "70B", "--cluster", "hgx_h100x8"])
    assert "--optimizer-state" not in assert_one_line_error(code, err, 1)


def test_framework_aliases_run_their_profile_and_say_which() -> None:
    """``--framework nemo`` (any case) is the megatron profile, as NeMo and Megatron-Bridge build
    on Megatron-Core: the same plan, recorded under the profile's own name; every alias names a
    profile; an unknown name is still one clear error."""
    from planner.catalog.frameworks import framework_aliases, framework_names, resolve_workload

    assert set(framework_aliases().values()) <= set(framework_names())
    assert resolve_workload({"framework": "NeMo"}) == resolve_workload({"framework": "megatron"})
    assert resolve_workload({"framework": "megatron-bridge"}).framework == "megatron"
    assert resolve_workload({"framework": "fsdp2"}).tp_comm_overlap is False
    base = ["search", "--model", "8B", "--cluster", "hgx_h100x8", "--json"]
    code, nemo, _ = run_main([*base, "--framework", "nemo"])
    assert code == 0
    code, megatron, _ = run_main([*base, "--framework", "megatron"])
    best, same = json.loads(nemo)["best"], json.loads(megatron)["best"]
    assert best["workload"]["framework"] == "megatron"
    assert (best["layout"], best["step_time_s"]) == (same["layout"], same["step_time_s"])
    code, _, err = run_main(["search", "--model", "8B", "--cluster", "hgx_h100x8",
                             "--framework", "nemo3"])  # fmt: skip
    assert code != 0 and "unknown framework 'nemo3'" in err and "\n" not in err.strip()


def test_catalog_names_match_whatever_their_case() -> None:
    """The catalog's model, system, framework and serving-engine names are lower case;
    'Llama3.1-8B', 'HGX_H100x8', 'Megatron' and 'vLLM' name them (each used to be 'unknown
    ...; did you mean' the lower-case spelling), and the plan records the catalog's spelling.
    A name that is wrong in any case is still refused as written."""
    plan = planner.estimate(model="Llama3.1-8B", cluster="HGX_H100X8", layout={"tp": 2},
                            workload={"framework": "Megatron"})  # fmt: skip
    same = planner.estimate(model="llama3.1-8b", cluster="hgx_h100x8", layout={"tp": 2})
    assert (plan.model, plan.cluster, plan.workload.framework) == (
        "llama3.1-8b",
        "hgx_h100x8",
        "megatron",
    )
    assert plan.step_time_s == same.step_time_s
    served = planner.serve_search(model="8B", cluster="hgx_h100x8", workload={"engine": "vLLM"})
    assert served.best.engine.profile == "vllm"
    code, _, err = run_main(["search", "--model", "8B", "--cluster", "HGX_H100x9"])
    assert "nearest valid: 8 and 16" in assert_one_line_error(code, err, 2)  # the name matched
    code, _, err = run_main(["search", "--model", "Llama9-8B", "--cluster", "hgx_h100x8"])
    assert "unknown model 'Llama9-8B'" in assert_one_line_error(code, err, 2)
    code, _, err = run_main(["search", "--model", "8B", "--cluster", "DGX_H100x8"])
    assert "unknown cluster 'DGX_H100x8'" in assert_one_line_error(code, err, 2)


def test_the_default_framework_follows_the_accelerator_and_a_foreign_one_is_refused() -> None:
    """Without --framework a TPU runs MaxText (Megatron-LM has no TPU backend) and a GPU
    Megatron-LM, and the plan says which; a framework named for accelerators it does not run on
    is one clear error naming one that does (before, Megatron-LM and torchtitan were priced on a
    TPU as if they ran there)."""
    tpu = planner.search(model="8B", cluster="tpu_v5px64", top=1)
    assert tpu.best.workload is not None and tpu.best.workload.framework == "maxtext"
    assert "framework maxtext" in search_text(tpu)
    gpu = planner.search(model="8B", cluster="hgx_h100x8", top=1)
    assert gpu.best.workload is not None and gpu.best.workload.framework == "megatron"
    for framework in ("torchtitan", "megatron"):
        code, _, err = run_main(["search", "--model", "8B", "--cluster", "tpu_v5px64",
                                 "--framework", framework])  # fmt: skip
        line = assert_one_line_error(code, err, 2)
        assert f"framework '{framework}' runs on NVIDIA and AMD accelerators" in line
        assert "tpu_v5p" in line and "--framework maxtext runs there" in line
    with pytest.raises(SpecError, match="not on Google's tpu_v5p"):
        planner.estimate(model="8B", cluster="tpu_v5px64", layout={"dp": 64, "zero": 3},
                         workload={"framework": "nanotron"})  # fmt: skip


def test_a_layout_without_a_zero_stage_takes_its_frameworks_default() -> None:
    """estimate's layout defaulted to ZeRO-1 whatever the framework, so '--framework torchtitan'
    (FSDP: ZeRO 0 or 3) or any TPU estimate (MaxText) without --zero was refused; now an unset
    stage is the framework's (ZeRO-1 under Megatron-LM, full sharding under torchtitan and
    MaxText), and a stated one is kept."""
    from planner.specs.layout import Layout

    def zero(cluster: str, layout: object, **workload: object) -> int:
        plan = planner.estimate(model="8B", cluster=cluster, layout=layout, workload=workload)
        return plan.layout.zero

    assert zero("tpu_v5px64", {"dp": 64}) == 3
    assert zero("hgx_h100x16", {"dp": 16}, framework="torchtitan") == 3
    assert zero("hgx_h100x16", Layout(dp=16), framework="torchtitan") == 3
    assert zero("hgx_h100x16", {"dp": 16}) == 1
    assert zero("hgx_h100x16", {"dp": 16, "zero": 0}, framework="torchtitan") == 0
    code, out, err = run_main(["estimate", "--model", "8B", "--cluster", "tpu_v5px64", "--json"])
    assert code == 0, err
    assert json.loads(out)["layout"]["zero"] == 3


def test_an_moe_layout_without_an_etp_takes_its_frameworks_and_says_so() -> None:
    """estimate gave an MoE layout ETP 1 whatever the framework, so Megatron-LM's arguments
    '--tensor-model-parallel-size 2 --expert-model-parallel-size 4' were scored with every
    expert whole on each TP rank, twice the expert weights Megatron-LM holds (it defaults
    --expert-tensor-parallel-size to the TP size: Mixtral 8x22B on 8 MI355X, 402 against 308
    GiB). Now an unstated ETP is the framework's (TP under Megatron-LM and MaxText; TP without
    EP and 1 with it under torchtitan; 1 elsewhere), under Megatron-LM ETP 1 where TP breaks the
    layout's rules, and the plan says which it scored where another could run; a stated one is
    kept, silently, unless the framework cannot run it."""
    from planner.specs.layout import Layout

    def plan(layout: object, **workload: object) -> tuple[int, list[str]]:
        done = planner.estimate(model="mixtral-8x22b", cluster="mi355xx8", layout=layout,
                                workload={"seq_len": 4096, "global_batch": 64, **workload})  # fmt: skip
        return done.layout.etp, [w for w in done.warnings if w.startswith("ETP not stated")]

    etp, said = plan({"tp": 2, "ep": 4, "recompute": "full"})
    assert etp == 2 and "scored at ETP 2" in said[0] and "--etp 1" in said[0]
    assert plan(Layout(tp=2, ep=4, dp=4, recompute="full")) == (etp, said)
    assert plan({"tp": 2, "ep": 4, "etp": 1, "recompute": "full"}) == (1, [])
    assert plan({"tp": 1, "ep": 8, "recompute": "full"}) == (1, [])
    # EP 8 x ETP 2 = 16 does not divide DP 4 x TP 2: ETP 1, the one that runs, and why
    etp, said = plan({"tp": 2, "ep": 8, "recompute": "full"})
    assert etp == 1 and "does not divide DP x CP x TP (8)" in said[0]
    assert plan({"tp": 2, "ep": 1, "recompute": "full"}, framework="torchtitan")[0] == 2
    assert plan({"tp": 2, "ep": 4, "recompute": "full"}, framework="torchtitan") == (1, [])
    assert plan({"tp": 2, "ep": 4, "recompute": "full"}, framework="deepspeed") == (1, [])
    with pytest.raises(SpecError, match="etp must equal tp"):  # torchtitan cannot run it
        plan({"tp": 2, "ep": 1, "etp": 1, "recompute": "full"}, framework="torchtitan")
    # MaxText shards every expert's MLP over the tensor axis: ETP = TP, nothing to say
    tpu = planner.estimate(model="mixtral-8x7b", cluster="tpu_v5p_8x8x8", layout={"tp": 4, "ep": 8})
    assert tpu.layout.etp == 4 and not any("ETP" in w for w in tpu.warnings)
    with pytest.raises(SpecError, match="splits every expert's MLP over the tensor-parallel"):
        planner.estimate(model="mixtral-8x7b", cluster="tpu_v5p_8x8x8",
                         layout={"tp": 4, "ep": 8, "etp": 1})  # fmt: skip
    dense = planner.estimate(model="8B", cluster="hgx_h100x8", layout={"tp": 2})
    assert dense.layout.etp == 1 and not any("ETP" in w for w in dense.warnings)
    code, out, err = run_main(["estimate", "--model", "mixtral-8x22b", "--cluster", "mi355xx8",
                               "--tp", "2", "--ep", "4", "--seq-len", "4096", "--global-batch",
                               "64", "--recompute", "full", "--json"])  # fmt: skip
    assert code == 1 and json.loads(out)["layout"]["etp"] == 2, err  # 308 GiB: does not fit
    code, out, err = run_main(["estimate", "--model", "mixtral-8x22b", "--cluster", "mi355xx8",
                               "--tp", "2", "--ep", "4", "--etp", "1", "--seq-len", "4096",
                               "--global-batch", "64", "--recompute", "full", "--json"])  # fmt: skip
    assert code == 1 and json.loads(out)["layout"]["etp"] == 1, err


def test_every_profile_says_where_it_runs_and_every_vendor_has_defaults_that_run_there() -> None:
    """Each shipped framework and serving engine profile lists its vendors with a source, and
    on every catalog accelerator's vendor the default framework and the default engine are ones
    that run there (a new YAML that breaks this would make the default refuse itself)."""
    from planner.catalog import accelerator_names, load_accelerator
    from planner.catalog.engines import default_engine, engine_names, load_engine
    from planner.catalog.frameworks import default_framework, framework_names, load_framework

    profiles = [load_framework(n) for n in framework_names()]
    engines = [load_engine(n) for n in engine_names()]
    for spec in [*profiles, *engines]:
        assert spec.vendors and spec.sources.get("vendors", "").strip(), spec.name
    vendors = {load_accelerator(n).vendor for n in accelerator_names()}
    for vendor in vendors:
        framework, engine = (
            load_framework(default_framework(vendor)),
            load_engine(default_engine(vendor)),
        )
        assert vendor in framework.vendors and vendor in engine.vendors, vendor


def test_a_profile_that_extends_another_states_only_its_differences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsdp2.yaml extends fsdp: its workload and sources merge over fsdp's key by key, its other
    fields replace fsdp's. A base that is unknown, not a name, or loops back is one SpecError
    naming the file."""
    from planner.catalog import frameworks
    from planner.errors import SpecError

    fsdp, fsdp2 = frameworks.load_framework("fsdp"), frameworks.load_framework("fsdp2")
    assert fsdp2.workload == {**fsdp.workload, "fsdp2_buffer_copies": True}
    assert fsdp2.zero_stages == fsdp.zero_stages and set(fsdp2.sources) >= set(fsdp.sources)
    assert fsdp2.sources["zero_stages"] != fsdp.sources["zero_stages"]  # restated for FSDP2

    files = {
        "a": "extends: b\nname: a\n",
        "b": "extends: a\nname: b\n",
        "c": "extends: nowhere\nname: c\n",
        "d": "extends: [fsdp]\nname: d\n",
    }
    for stem, text in files.items():
        (tmp_path / f"{stem}.yaml").write_text(text, encoding="utf-8")
    real = frameworks.catalog_file
    monkeypatch.setattr(
        frameworks, "catalog_file",
        lambda folder, name: tmp_path / f"{name}.yaml" if name in files else real(folder, name),
    )  # fmt: skip
    for stem, named, words in (
        ("a", "b", "loops back (a -> b -> a)"),  # the file whose extends closes the loop
        ("c", "c", "which is no framework"),
        ("d", "d", "expected the name of a framework profile"),
    ):
        with pytest.raises(SpecError, match=re.escape(words)) as caught:
            frameworks.framework_mapping(stem)
        assert f"{named}.yaml" in str(caught.value) and "\n" not in str(caught.value)


def test_a_batch_smaller_than_the_cluster_says_what_it_forces() -> None:
    """256 sequences on 1,024 GPUs: data parallelism stops at 256, so every layout spreads a
    sequence over at least 4 GPUs; the plan says so, and stops saying it at 1,024 sequences."""
    small = planner.search(model="8B", cluster="hgx_h100x1024", global_batch=256, top=1).best
    said = [w for w in small.warnings if "global batch" in w]
    assert len(said) == 1 and "at least 4 GPUs" in said[0]
    split = small.layout.tp * small.layout.pp * small.layout.cp
    assert split >= 4 and f"TP x PP x CP = {split}" in said[0]
    enough = planner.search(model="8B", cluster="hgx_h100x1024", global_batch=1024, top=1).best
    assert not any("global batch" in w for w in enough.warnings)


def test_tpu_plans_count_chips_and_gpu_plans_count_gpus() -> None:
    """A TPU plan's reports say chips (the catalog's ``device_noun``); the JSON keys keep
    ``gpu`` whatever the part, and a migration across the two says 'accelerator'."""
    from planner.report.markdown import migrate_text
    from planner.report.serving import serve_plan_lines

    workload = {"seq_len": 4096, "global_batch": 256}
    tpu = planner.search(model="8B", cluster="tpu_v5px64", workload=workload)
    assert tpu.best.device_noun == "chip"
    text = search_text(tpu)
    assert "(64 chips)" in text and "tokens/s/chip" in text and "per chip-hour" in text
    assert "GPU" not in text.split("runners-up")[0]  # the headline, cost and memory lines
    assert json.loads(tpu.best.model_dump_json())["tokens_per_s_per_gpu"] > 0
    gpu = planner.search(model="8B", cluster="hgx_h100x64", workload=workload)
    assert gpu.best.device_noun == "GPU" and "(64 GPUs)" in search_text(gpu)
    moved = migrate_text(
        planner.migrate(
            model="8B", from_cluster="hgx_h100x64", to_cluster="tpu_v5px64", workload=workload
        )
    )
    assert "tokens/s/accelerator " in moved and "tokens/s/GPU" not in moved
    served = "\n".join(serve_plan_lines(planner.serve_search(model="8B", cluster="tpu_v6ex8").best))
    assert re.search(r"\(8 chips, \d per replica\)", served) and "memory/chip:" in served


def test_a_tpu_whatif_report_counts_chip_hours() -> None:
    """A sweep of TPU slices prices chip-hours in its Markdown and HTML reports; the knob keeps
    its name (``gpus``), which is the CLI's."""
    from planner.report.html import whatif_html
    from planner.report.markdown import whatif_markdown

    result = planner.whatif(
        model="8B", cluster="tpu_v5px64", vary=["gpus=32,64"], tokens=1e12,
        workload={"seq_len": 4096, "global_batch": 256},
    )  # fmt: skip
    markdown, html = whatif_markdown(result), whatif_html(result)
    assert "| chip-hours |" in markdown and "per chip-hour" in markdown
    assert "chip-hours" in html and "64 chips" in html
    assert "GPU" not in markdown.replace("gpus=", "")


def test_tpu_cluster_state_and_pack_lines_count_chips(tmp_path: Path) -> None:
    """A cluster state on a TPU slice says chips free, chips placed and the first free chips;
    ``layout pack`` names each partition's accelerators by its own noun and the total by the
    noun of the partitions it used ('accelerator' only when it used GPUs and chips)."""
    from planner.report.fleet import pack_text
    from planner.report.text import state_lines

    state = tmp_path / "state.yaml"
    state.write_text("cluster: tpu_v5px64\ndown:\n  nodes: [node3]\n")
    plan = planner.search(
        model="8B", cluster="tpu_v5px64", cluster_state=state,
        workload={"seq_len": 4096, "global_batch": 240},
    ).best  # fmt: skip
    lines = "\n".join(state_lines(plan))
    assert "60 of 64 chips free (4 down, 0 taken)" in lines
    assert "first free chips in Megatron order" in lines and "GPU" not in lines
    assert re.search(r"placed  : 60 chips on 15 nodes in 1 domain;", lines)
    pool = tmp_path / "pool.yaml"
    pool.write_text("name: mix\npartitions:\n  - cluster: tpu_v5px64\n  - cluster: hgx_h100x8\n")
    job = tmp_path / "train.yaml"
    job.write_text("model: 8B\nworkload: {seq_len: 4096, global_batch: 256}\nweight: 1\n")
    text = pack_text(planner.pack(cluster=pool, jobs=[job]))  # the slice is the faster part
    assert "64 of 64 free chips used" in text and "0 of 8 free GPUs used" in text
    assert "64 chips  TP" in text and "pack    : 64 chips used;" in text
    again = tmp_path / "train2.yaml"
    again.write_text(job.read_text())
    both = pack_text(planner.pack(cluster=pool, jobs=[job, again]))
    assert "8 GPUs  TP" in both and "pack    : 72 accelerators used;" in both
