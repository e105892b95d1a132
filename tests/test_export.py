"""``layout export``: every name each format emits exists in that framework's recorded argument
list (tests/data/framework_args/, with the version checked), the outputs parse (TOML, JSON,
argument lists), the values say what the plan says, and one golden file per format pins the text.
Also the rank placement files and the NVLink-domain check.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

import planner
from planner.api import serve_estimate
from planner.catalog import load_cluster, load_model
from planner.cli import EXPORT_FORMATS
from planner.errors import InternalError, SpecError
from planner.report.export import FORMATS, ExportJob, export, load_plan_file, make_job
from planner.report.export.automodel import own_split
from planner.report.export.job import layer_counts
from planner.report.placement_file import (
    check_domains,
    hostfile,
    placement_csv,
    placement_files,
    placement_records,
)
from planner.search.given_split import layout_stages
from planner.specs.result import Plan
from planner.specs.workload import TrainWorkload
from tests.test_cli import layout_command, run_main

DATA = Path(__file__).parent / "data" / "framework_args"
GOLDEN = Path(__file__).parent / "golden" / "export"
GOLDEN_SUFFIX = {
    "megatron": "sh",
    "bridge": "sh",
    "torchtitan": "toml",
    "deepspeed": "json",
    "maxtext": "yaml",
    "automodel": "yaml",
    "nanotron": "yaml",
    "accelerate": "yaml",
    "vllm": "sh",
    "sglang": "sh",
}

# --- the recorded names ---------------------------------------------------------------------


def framework_names(fmt: str) -> dict[str, set[str] | None]:
    """Name -> allowed values (None = any value) from tests/data/framework_args/<fmt>.txt."""
    names: dict[str, set[str] | None] = {}
    for raw in (DATA / f"{fmt}.txt").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, values = line.partition(" = ")
        names[name.strip()] = set(values.split()) if values else None
    return names


def test_every_format_has_a_name_list_with_its_version() -> None:
    assert set(FORMATS) == set(EXPORT_FORMATS) == set(GOLDEN_SUFFIX)
    for fmt in FORMATS:
        header = (DATA / f"{fmt}.txt").read_text(encoding="utf-8")
        assert re.search(r"# source: .*(tag|commit) \S+", header), fmt
        assert framework_names(fmt), fmt


# --- parsers: the output as the framework would read it -------------------------------------


def _bash_array(text: str, name: str) -> list[str]:
    match = re.search(rf"^{name}=\($(.*?)^\)$", text, flags=re.MULTILINE | re.DOTALL)
    assert match, f"no {name}=( ... ) in the output"
    return shlex.split(match.group(1), comments=True)


def _flag_pairs(tokens: list[str]) -> list[tuple[str, str | None]]:
    """(flag, value or None) for an argparse-style token list."""
    pairs: list[tuple[str, str | None]] = []
    for token in tokens:
        if token.startswith("--"):
            pairs.append((token, None))
        else:
            assert pairs, f"value {token!r} before any flag"
            pairs[-1] = (pairs[-1][0], token)
    return pairs


def _flatten(table: dict[str, object], prefix: str = "") -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += _flatten(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _command(text: str, program: list[str]) -> list[tuple[str, str | None]]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(lines) == 1, lines
    argv = shlex.split(lines[0])
    assert argv[: len(program)] == program
    rest = argv[len(program) :]
    if program[:2] == ["vllm", "serve"]:
        rest = rest[1:]  # the model is positional
    return _flag_pairs(rest)


def parse(fmt: str, text: str) -> list[tuple[str, object]]:
    """(name, value) of everything the output sets, as the framework would read it."""
    if fmt == "megatron":
        return _flag_pairs(_bash_array(text, "MEGATRON_ARGS"))  # type: ignore[return-value]
    if fmt == "bridge":
        items = _bash_array(text, "BRIDGE_OVERRIDES")
        return [tuple(item.split("=", 1)) for item in items]  # type: ignore[misc]
    if fmt == "torchtitan":
        return _flatten(tomllib.loads(text))
    if fmt == "deepspeed":
        return _flatten(json.loads(text))
    if fmt in ("automodel", "nanotron", "accelerate"):  # nested config sections
        return _flatten(yaml.safe_load(text))
    if fmt == "maxtext":  # flat overrides of base.yml, as pyconfig reads them
        return list(yaml.safe_load(text).items())
    if fmt == "vllm":
        return _command(text, ["vllm", "serve"])  # type: ignore[return-value]
    return _command(text, ["python", "-m", "sglang.launch_server"])  # type: ignore[return-value]


def check_names(fmt: str, text: str) -> dict[str, object]:
    """Every emitted name exists in the framework's list, values in its closed sets."""
    known = framework_names(fmt)
    parsed = parse(fmt, text)
    for name, value in parsed:
        assert name in known, f"{fmt}: '{name}' is not in {fmt}.txt"
        allowed = known[name]
        if allowed is not None and isinstance(value, str | int) and not isinstance(value, bool):
            assert str(value).strip("'") in allowed, f"{fmt}: {name}={value} not in {allowed}"
    names = [name for name, _ in parsed]
    assert len(names) == len(set(names)), f"{fmt}: a name is set twice: {names}"
    return dict(parsed)


# --- plans ----------------------------------------------------------------------------------

PLANS: dict[str, tuple[str, str, dict[str, object]]] = {
    # id: (model, cluster, layout)
    "70b_tp4_pp2_vpp2": ("70B", "hgx_b200x16", {"tp": 4, "pp": 2, "vpp": 2, "recompute": "selective"}),
    "405b_uneven_first_last": ("405B", "hgx_b200x128", {"tp": 8, "pp": 16, "vpp": 1}),
    "70b_uneven_custom": ("70B", "hgx_b200x48", {"tp": 8, "pp": 6, "recompute": "full"}),
    "mixtral_ep8_zero3": ("mixtral-8x7b", "hgx_h100x16", {"tp": 2, "ep": 8, "etp": 1, "zero": 3, "mbs": 2}),
    "deepseek_mla_moe": ("671B", "gb200_nvl72x128", {"pp": 8, "ep": 16, "zero": 0}),
    "70b_cp2_zero2": ("70B", "hgx_b200x16", {"tp": 4, "cp": 2, "zero": 2}),
}  # fmt: skip


@pytest.fixture(scope="module")
def plans() -> dict[str, Plan]:
    """The plans with the planner's even split (the CP-SAT split's exports are tested below)."""
    even = {"stage_split": "even"}
    return {
        key: planner.estimate(model=model, cluster=cluster, layout=layout, config=even)
        for key, (model, cluster, layout) in PLANS.items()
    }


def _job(plans: dict[str, Plan], key: str, precision: str | None = None) -> ExportJob:
    plan = plans[key]
    if precision is not None:
        layout = plan.layout.model_copy(update={"precision": precision})
        plan = plan.model_copy(update={"layout": layout})
    return make_job(plan)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("key", sorted(PLANS))
def test_every_emitted_name_exists(fmt: str, key: str, plans: dict[str, Plan]) -> None:
    result = export(_job(plans, key), fmt)
    check_names(fmt, result.text)
    assert result.format == fmt
    assert result.framework_version in (DATA / f"{fmt}.txt").read_text(encoding="utf-8") or (
        result.framework_version.split()[0] in (DATA / f"{fmt}.txt").read_text(encoding="utf-8")
    )


@pytest.mark.parametrize("precision", ["fp8", "mxfp8", "nvfp4", "mxfp4"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_low_precision_names_exist(fmt: str, precision: str, plans: dict[str, Plan]) -> None:
    result = export(_job(plans, "70b_tp4_pp2_vpp2", precision), fmt)
    check_names(fmt, result.text)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_golden(fmt: str, plans: dict[str, Plan], golden: Callable[[Path, str], None]) -> None:
    result = export(_job(plans, "70b_tp4_pp2_vpp2"), fmt)
    golden(GOLDEN / f"70b_hgx_b200x16_tp4_pp2_vpp2.{fmt}.{GOLDEN_SUFFIX[fmt]}", result.text)


# --- what the values say ----------------------------------------------------------------------


def test_megatron_values(plans: dict[str, Plan]) -> None:
    args = check_names("megatron", export(_job(plans, "70b_tp4_pp2_vpp2"), "megatron").text)
    assert args["--tensor-model-parallel-size"] == "4"
    assert args["--pipeline-model-parallel-size"] == "2"
    assert args["--num-virtual-stages-per-pipeline-rank"] == "2"
    assert "--sequence-parallel" in args
    assert args["--micro-batch-size"] == "1" and args["--global-batch-size"] == "512"
    assert args["--recompute-granularity"] == "selective"
    assert "--use-distributed-optimizer" in args and "--use-megatron-fsdp" not in args
    assert args["--num-query-groups"] == "8" and args["--vocab-size"] == "128256"


def test_megatron_uneven_first_last(plans: dict[str, Plan]) -> None:
    result = export(_job(plans, "405b_uneven_first_last"), "megatron")
    args = check_names("megatron", result.text)
    assert (
        args["--decoder-first-pipeline-num-layers"],
        args["--decoder-last-pipeline-num-layers"],
    ) == ("7", "7")
    assert any("do not split evenly" in note for note in result.notes)
    assert "# note: 126 layers do not split evenly" in result.text


def _megatron_layout_counts(layout: str) -> list[int]:
    """Transformer layers per chunk of a --pipeline-model-parallel-layout string, its groups and
    repeats unrolled as Megatron-LM's ``parse_str_to_list`` unrolls them."""
    grouped = re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), layout)
    expanded = re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), grouped)
    return [chunk.count("t") for chunk in expanded.split("|")]


def test_megatron_custom_layout_matches_the_planner(plans: dict[str, Plan]) -> None:
    job = _job(plans, "70b_uneven_custom")
    args = check_names("megatron", export(job, "megatron").text)
    counts = _megatron_layout_counts(str(args["--pipeline-model-parallel-layout"]))
    assert counts == layer_counts(job.model, 6) == [13, 14, 14, 13, 13, 13]
    assert str(args["--pipeline-model-parallel-layout"]).startswith("E")
    assert str(args["--pipeline-model-parallel-layout"]).endswith("L")
    assert args["--recompute-granularity"] == "full" and args["--recompute-method"] == "uniform"


def test_megatron_moe_and_mla(plans: dict[str, Plan]) -> None:
    args = check_names("megatron", export(_job(plans, "deepseek_mla_moe"), "megatron").text)
    assert args["--num-experts"] == "256" and args["--expert-model-parallel-size"] == "16"
    assert "--multi-latent-attention" in args and args["--kv-lora-rank"] == "512"
    assert args["--moe-layer-freq"] == "([0]*3+[1]*58)"
    assert "--use-distributed-optimizer" not in args


def test_megatron_routes_deepseek_v3_as_it_does(plans: dict[str, Plan]) -> None:
    """DeepSeek-V3's router (config.json scoring_func sigmoid, topk_method noaux_tc,
    routed_scaling_factor 2.5) is spelled out, not left to Megatron-LM's softmax default; its
    aux-loss-free selection bias is no gate bias to note as unexpressed."""
    result = export(_job(plans, "deepseek_mla_moe"), "megatron")
    args = check_names("megatron", result.text)
    assert args["--moe-router-score-function"] == "sigmoid"
    assert "--moe-router-enable-expert-bias" in args
    assert args["--moe-router-topk-scaling-factor"] == "2.5"
    assert not any("router bias" in note for note in result.notes)
    assert any("--moe-router-bias-update-rate" in note for note in result.notes)


def test_megatron_leaves_gpt_oss_routing_at_softmax() -> None:
    """gpt-oss routes by a softmax over a biased gate (its router's own bias): none of the
    DeepSeek-V3 router flags, and the gate bias stays a note."""
    plan = planner.estimate(
        model="gpt-oss-120b", cluster="hgx_h100x16", layout={"ep": 8},
        config={"stage_split": "even"},
    )  # fmt: skip
    result = export(make_job(plan), "megatron")
    args = check_names("megatron", result.text)
    flags = ("--moe-router-score-function", "--moe-router-enable-expert-bias")
    assert not any(flag in args for flag in (*flags, "--moe-router-topk-scaling-factor"))
    assert any("uses a router bias (on the gate's logits)" in note for note in result.notes)


def test_megatron_notes_the_routing_it_cannot_build(plans: dict[str, Plan]) -> None:
    """An expert bias on softmax scores (ERNIE 4.5) is refused by Megatron-LM's
    TransformerConfig, so it is noted, not set; softmax top-k weights left as they are
    (DeepSeek-V2: x16, norm_topk_prob false) are --moe-router-pre-softmax; sigmoid top-k scores
    left as they are cannot be built (Megatron divides them by their sum), so they are noted."""
    plan = plans["deepseek_mla_moe"]
    v3 = load_model("deepseek-v3")
    assert v3.moe is not None
    softmax = v3.moe.model_copy(
        update={"router_score": "softmax", "router_topk_scale": 16.0, "router_topk_norm": False}
    )
    result = export(make_job(plan, model=v3.model_copy(update={"moe": softmax})), "megatron")
    args = check_names("megatron", result.text)
    assert "--moe-router-score-function" not in args
    assert "--moe-router-enable-expert-bias" not in args
    assert args["--moe-router-topk-scaling-factor"] == "16"
    assert "--moe-router-pre-softmax" in args
    assert any("only with sigmoid scores" in note for note in result.notes)
    v3_args = check_names("megatron", export(make_job(plan, model=v3), "megatron").text)
    assert "--moe-router-pre-softmax" not in v3_args  # DeepSeek-V3 renormalises its top-8
    raw = v3.moe.model_copy(update={"router_topk_norm": False})
    result = export(make_job(plan, model=v3.model_copy(update={"moe": raw})), "megatron")
    assert "--moe-router-pre-softmax" not in check_names("megatron", result.text)
    assert any("divides them by their sum" in note for note in result.notes)


def test_bridge_values(plans: dict[str, Plan]) -> None:
    text = export(_job(plans, "405b_uneven_first_last"), "bridge").text
    values = check_names("bridge", text)
    assert values["model.num_layers_in_first_pipeline_stage"] == "7"
    assert values["model.virtual_pipeline_model_parallel_size"] == "null"
    zero3 = check_names("bridge", export(_job(plans, "mixtral_ep8_zero3"), "bridge").text)
    assert zero3["ddp.use_megatron_fsdp"] == "true" and zero3["dist.use_megatron_fsdp"] == "true"
    custom = check_names("bridge", export(_job(plans, "70b_uneven_custom"), "bridge").text)
    layout = str(custom["model.pipeline_model_parallel_layout"]).strip("'")
    assert _megatron_layout_counts(layout) == [13, 14, 14, 13, 13, 13]


def test_torchtitan_values(plans: dict[str, Plan]) -> None:
    for key, plan in plans.items():
        job = make_job(plan)
        table = tomllib.loads(export(job, "torchtitan").text)
        par, train = table["parallelism"], table["training"]
        degrees = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
        degrees *= par["tensor_parallel_degree"] * par["pipeline_parallel_degree"]
        assert degrees * par["context_parallel_degree"] == plan.num_gpus, key
        dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
        assert train["global_batch_size"] % (train["local_batch_size"] * dp) == 0, key
        if "module_fqns_per_model_part" in par:
            parts = par["module_fqns_per_model_part"]
            layers = [name for part in parts for name in part if name.startswith("layers.")]
            assert layers == [f"layers.{i}" for i in range(job.model.num_layers)], key
            assert parts[0][0] == "tok_embeddings" and parts[-1][-1] == "output", key


def test_torchtitan_names_its_release(plans: dict[str, Plan]) -> None:
    text = export(_job(plans, "70b_tp4_pp2_vpp2"), "torchtitan").text
    assert "v0.2.2" in text and "TOML" in text
    assert tomllib.loads(text)["parallelism"]["pipeline_parallel_schedule"] == "Interleaved1F1B"


def test_deepspeed_batch_arithmetic_and_nearest_zero(plans: dict[str, Plan]) -> None:
    for key, plan in plans.items():
        config = json.loads(export(make_job(plan), "deepspeed").text)
        per_step = config["train_micro_batch_size_per_gpu"] * config["gradient_accumulation_steps"]
        assert per_step * plan.layout.dp == config["train_batch_size"], key
    fsdp_pp = planner.estimate(  # Llama 3's layout: FSDP inside pipeline stages (torchtitan)
        model="405B",
        cluster="hgx_b200x128",
        layout={"tp": 8, "pp": 16, "zero": 3},
        workload={"framework": "torchtitan"},
    )
    result = export(make_job(fsdp_pp), "deepspeed")
    assert json.loads(result.text)["zero_optimization"]["stage"] == 1  # pipeline engine: < 2
    assert any("ZeRO-3 -> 1" in note for note in result.notes)


def test_serving_exports_from_a_serving_plan() -> None:
    plan = serve_estimate(
        model="70B", cluster="hgx_b200x16", layout={"tp": 4, "replicas": 4}, workload={}
    )
    job = make_job(plan)
    vllm = check_names("vllm", export(job, "vllm").text)
    assert vllm["--tensor-parallel-size"] == "4" and vllm["--pipeline-parallel-size"] == "1"
    # the context the prediction sized the KV cache for: the default request's 1024 + 1024
    assert vllm["--max-model-len"] == "2048"
    sglang = check_names("sglang", export(job, "sglang").text)
    assert sglang["--tp-size"] == "4" and sglang["--context-length"] == "2048"
    assert "best effort" not in export(job, "vllm").text
    with pytest.raises(SpecError, match="needs a training plan"):
        export(job, "megatron")


def test_serving_from_a_training_plan_says_best_effort(plans: dict[str, Plan]) -> None:
    result = export(_job(plans, "70b_tp4_pp2_vpp2"), "vllm")
    assert "best effort" in result.text
    assert result.args[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B"]


# --- saved plans and the CLI ----------------------------------------------------------------


def _saved(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_load_plan_file_versions(tmp_path: Path, plans: dict[str, Plan]) -> None:
    data = json.loads(plans["70b_tp4_pp2_vpp2"].model_dump_json())
    newer_minor = {**data, "schema_version": "1.99", "added_later": 1}
    newer_minor["memory"] = {**data["memory"], "added_later_too": 2}
    assert load_plan_file(_saved(tmp_path, newer_minor)).layout.tp == 4
    with pytest.raises(SpecError, match=r"schema_version '2\.0'"):
        load_plan_file(_saved(tmp_path, {**data, "schema_version": "2.0"}))


def test_cli_export_from_search_and_from_plan(tmp_path: Path) -> None:
    code, out, err = run_main(["search", "--model", "70B", "--cluster", "hgx_b200x16", "--json"])
    assert code == 0, err
    saved = _saved(tmp_path, json.loads(out))
    for fmt in FORMATS:
        code, text, err = run_main(["export", "--format", fmt, "--plan", str(saved)])
        assert code == 0, err
        assert "warning" not in err, err
        check_names(fmt, text)
    code, text, err = run_main(
        ["export", "--format", "deepspeed", "--model", "70B", "--cluster", "hgx_b200x16"]
    )
    assert code == 0, err
    assert json.loads(text)["train_batch_size"] == 512


def test_cli_export_refuses_a_newer_major_in_one_line(tmp_path: Path) -> None:
    saved = _saved(tmp_path, {"schema_version": "2.0", "layout": {}})
    code, _, err = run_main(["export", "--format", "megatron", "--plan", str(saved)])
    assert code == 2
    assert len(err.splitlines()) == 1 and "schema_version '2.0'" in err


def test_cli_export_warns_when_seq_len_does_not_reproduce(
    tmp_path: Path, plans: dict[str, Plan]
) -> None:
    data = json.loads(plans["70b_tp4_pp2_vpp2"].model_dump_json())
    data.pop("workload")  # a plan saved before schema 1.3 does not record its workload
    saved = _saved(tmp_path, data)
    code, _, err = run_main(
        ["export", "--format", "megatron", "--plan", str(saved), "--seq-len", "4096"]
    )
    assert code == 0
    assert "warning: re-scoring the plan with --seq-len 4096" in err
    # a 1.3 plan records it: another --seq-len (or framework flag) is an error, the same is not
    recorded = _saved(tmp_path, json.loads(plans["70b_tp4_pp2_vpp2"].model_dump_json()))
    argv = ["export", "--format", "megatron", "--plan", str(recorded)]
    code, _, err = run_main([*argv, "--seq-len", "4096"])
    assert code == 2 and "the plan was made with seq_len 8192, not 4096: drop --seq-len" in err
    code, _, err = run_main([*argv, "--grad-reduce", "bf16"])
    assert code == 2 and "--grad-reduce does not apply with --plan" in err  # the plan settles it
    code, out, err = run_main([*argv, "--seq-len", "8192"])
    assert code == 0 and "warning" not in err and "--seq-length 8192" in out


def test_cli_export_needs_a_plan_or_a_model() -> None:
    code, _, err = run_main(["export", "--format", "vllm"])
    assert code == 2 and "needs --plan FILE" in err


# --- rank placement -------------------------------------------------------------------------


def test_placement_records_follow_torchrun_and_megatron_order(plans: dict[str, Plan]) -> None:
    plan = plans["70b_tp4_pp2_vpp2"]
    records = placement_records(plan, planner.load_cluster("hgx_b200x16"))
    assert [r.rank for r in records] == list(range(16))
    assert all(r.node == r.rank // 8 and r.gpu == r.local_rank == r.rank % 8 for r in records)
    assert [r.tp_index for r in records[:4]] == [0, 1, 2, 3]  # TP innermost
    assert {r.pp_index for r in records[:8]} == {0} and {r.pp_index for r in records[8:]} == {1}
    assert all(r.dp_index == (r.rank // 4) % 2 for r in records)
    lines = check_domains(plan, records)
    assert lines[0] == "tp: 4 of 4 group(s) inside one scale-up domain"


def test_nvlink_check_catches_a_group_that_leaves_its_domain(plans: dict[str, Plan]) -> None:
    plan = planner.estimate(model="70B", cluster="hgx_b200x16", layout={"tp": 8, "pp": 2})
    assert plan.placement["tp"].within_domain
    check_domains(plan, placement_records(plan, planner.load_cluster("hgx_b200x16")))
    # the same plan laid on 4-GPU NVLink domains: its TP groups of 8 leave their domain
    small = planner.load_cluster("hgx_b200x16", edits={"domain_size": 4})
    with pytest.raises(InternalError, match="tp groups inside one scale-up domain"):
        check_domains(plan, placement_records(plan, small))
    entry = plan.placement["tp"].model_copy(update={"within_domain": False})
    unclaimed = plan.model_copy(update={"placement": {**plan.placement, "tp": entry}})
    assert check_domains(unclaimed, placement_records(plan, small))[0].startswith("tp: 0 of 2")


def test_nvlink_check_on_nvl72_and_ep(plans: dict[str, Plan]) -> None:
    moe = plans["mixtral_ep8_zero3"]
    records = placement_records(moe, planner.load_cluster("hgx_h100x16"))
    ep_lines = [line for line in check_domains(moe, records) if line.startswith("ep:")]
    # Megatron-Core MoE parallel folding: EP groups are etp (= 1) apart, so EP8 fills a board
    assert ep_lines == ["ep: 2 of 2 group(s) inside one scale-up domain"]
    assert moe.placement["ep"].within_domain
    inner = planner.estimate(model="mixtral-8x7b", cluster="hgx_h100x16", layout={"ep": 8})
    assert inner.placement["ep"].within_domain
    inner_records = placement_records(inner, planner.load_cluster("hgx_h100x16"))
    assert "ep: 2 of 2 group(s) inside one scale-up domain" in check_domains(inner, inner_records)
    rack = planner.estimate(model="70B", cluster="gb200_nvl72x128", layout={"tp": 8, "pp": 2})
    rack_records = placement_records(rack, planner.load_cluster("gb200_nvl72x128"))
    assert rack.placement["tp"].within_domain
    assert check_domains(rack, rack_records)[0].startswith("tp: 16 of 16")
    assert rack_records[-1].node == 31 and rack_records[-1].gpu == 3  # 4-GPU trays
    assert {r.domain for r in rack_records} == {0, 1}


def test_placement_files_csv_jsonl_and_hostfile(tmp_path: Path, plans: dict[str, Plan]) -> None:
    plan, cluster = plans["70b_tp4_pp2_vpp2"], planner.load_cluster("hgx_b200x16")
    files = placement_files(tmp_path / "ranks.csv", plan, cluster)
    assert set(files) == {tmp_path / "ranks.csv", tmp_path / "ranks.csv.hostfile"}
    jsonl = placement_files(tmp_path / "ranks.jsonl", plan, cluster)
    assert set(jsonl) == {tmp_path / "ranks.jsonl", tmp_path / "ranks.jsonl.hostfile"}
    rows = list(csv.DictReader(io.StringIO(files[tmp_path / "ranks.csv"])))
    assert len(rows) == 16 and rows[5]["host"] == "node0" and rows[12]["gpu"] == "4"
    jsonl = placement_files(tmp_path / "ranks.jsonl", plan, cluster)[tmp_path / "ranks.jsonl"]
    assert [json.loads(line)["rank"] for line in jsonl.splitlines()] == list(range(16))
    host = hostfile(plan, placement_records(plan, cluster))
    assert host.splitlines()[-2:] == ["node0 slots=8", "node1 slots=8"]
    assert "# node1: CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in host
    assert placement_csv(placement_records(plan, cluster)).count("\n") == 17


@pytest.mark.parametrize("command", ["estimate", "export"])
def test_cli_placement_flag(command: str, tmp_path: Path) -> None:
    target = tmp_path / "placement.csv"
    argv = [command, "--model", "70B", "--cluster", "hgx_b200x16", "--placement", str(target)]
    argv += ["--tp", "8", "--pp", "2"] if command == "estimate" else ["--format", "megatron"]
    code, _, err = run_main(argv)
    assert code == 0, err
    assert f"wrote {target}" in err
    assert target.read_text().count("\n") == 17
    assert (tmp_path / "placement.csv.hostfile").exists()


# --- examples/: run each as a user would and check what it prints ---------------------------

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run_example(*argv: str, env: dict[str, str] | None = None) -> str:
    import os
    import subprocess
    import sys

    command = [sys.executable, *argv] if argv[0].endswith(".py") else ["bash", *argv]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_example_launch_torchrun_prints_a_runnable_command() -> None:
    out = _run_example(str(EXAMPLES / "launch_torchrun.py"))
    assert out.startswith("# llama3.1-70b on hgx_b200x16:")
    commands = [shlex.split(line) for line in out.splitlines() if not line.startswith("#")]
    assert len(commands) == 2  # two 8-GPU boards
    torchrun = framework_names("torchrun")
    for node, argv in enumerate(commands):
        start = argv.index("torchrun")
        script = argv.index("pretrain_gpt.py")
        pairs = dict(_flag_pairs(argv[start + 1 : script]))
        assert set(pairs) <= set(torchrun)
        assert pairs["--nnodes"] == "2" and pairs["--nproc-per-node"] == "8"
        assert pairs["--node-rank"] == str(node) and pairs["--master-addr"] == "node0"
        megatron = framework_names("megatron")
        assert {flag for flag, _ in _flag_pairs(argv[script + 1 :])} <= set(megatron)
        assert "--tensor-model-parallel-size" in argv and "--global-batch-size" in argv


def test_example_plan_fleet_move_prints_both_plans_changes_and_the_sweep() -> None:
    out = _run_example(str(EXAMPLES / "plan_fleet_move.py"), "--model", "8B", "--source",
                       "hgx_h100x8", "--target", "hgx_b200x8", "--nic-gbps", "200,400")  # fmt: skip
    lines = out.splitlines()
    assert lines[0] == "# llama3.1-8b: hgx_h100x8 -> hgx_b200x8"
    assert lines[1].startswith("hgx_h100x8: TP") and lines[2].startswith("hgx_b200x8: TP")
    speedup = next(line for line in lines if line.startswith("speed-up "))
    assert float(speedup.split()[1].rstrip("x")) > 1.0
    assert [line.split(":")[0] for line in lines[-2:]] == ["nic_gbps=200", "nic_gbps=400"]
    assert all("per M tokens" in line for line in (lines[1], lines[2], *lines[-2:]))


def test_example_plan_fleet_move_writes_the_two_reports(tmp_path: Path) -> None:
    move, sweep = tmp_path / "move.html", tmp_path / "nics.md"
    out = _run_example(str(EXAMPLES / "plan_fleet_move.py"), "--model", "8B", "--source",
                       "hgx_h100x8", "--target", "hgx_b200x8", "--nic-gbps", "200,400",
                       "--report", str(move), "--report", str(sweep))  # fmt: skip
    assert out.splitlines()[-2:] == [f"wrote {move}", f"wrote {sweep}"]
    page = move.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 3
    assert "nic_gbps=200" in sweep.read_text(encoding="utf-8")


def test_example_make_sbatch_is_valid_bash_with_the_plan(tmp_path: Path) -> None:
    import subprocess

    script = _run_example(str(EXAMPLES / "make_sbatch.py"), "--partition", "gpu")
    path = tmp_path / "train.sbatch"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    directives = dict(
        line.removeprefix("#SBATCH ").split("=", 1)
        for line in script.splitlines()
        if line.startswith("#SBATCH ") and "=" in line
    )
    assert directives["--nodes"] == "2" and directives["--gpus-per-node"] == "8"
    assert directives["--partition"] == "gpu"
    check_names("megatron", script)
    assert "srun bash -c" in script and '"${MEGATRON_ARGS[@]}"' in script


def test_example_serve_vllm_prints_one_command_per_replica() -> None:
    out = _run_example(str(EXAMPLES / "serve_vllm.py"), "--model", "8B", "--cluster", "hgx_h100x8")
    lines = out.splitlines()
    commands = [shlex.split(line) for line in lines if not line.startswith("#")]
    replicas = int(re.search(r" x(\d+) ", lines[0]).group(1))  # type: ignore[union-attr]
    assert len(commands) == replicas
    devices = [argv[0].removeprefix("CUDA_VISIBLE_DEVICES=") for argv in commands]
    used = [gpu for group in devices for gpu in group.split(",")]
    assert len(used) == len(set(used)) <= 8  # replicas on one node never share a GPU
    vllm = framework_names("vllm")
    for argv in commands:
        assert argv[1:3] == ["vllm", "serve"]
        assert {flag for flag, _ in _flag_pairs(argv[4:])} <= set(vllm)


def test_example_export_plan_sh(tmp_path: Path) -> None:
    import shutil
    import sys

    layout = Path(sys.executable).with_name("layout")
    executable = str(layout) if layout.exists() else shutil.which("layout")
    assert executable, "the layout executable is not installed"
    out = tmp_path / "out"
    _run_example(
        str(EXAMPLES / "export_plan.sh"), "8B", "hgx_h100x8", str(out), env={"LAYOUT": executable}
    )
    for fmt, suffix in GOLDEN_SUFFIX.items():
        name = {"torchtitan": "torchtitan.toml", "maxtext": "maxtext.yaml"}.get(
            fmt, f"{fmt}.{suffix}"
        )
        check_names(fmt, (out / name).read_text())
    assert (out / "ranks.csv").read_text().count("\n") == 9
    assert (out / "ranks.csv.hostfile").read_text().splitlines()[-1] == "node0 slots=8"


# --- the optimised pipeline split (issue 19): CP-SAT's and the recurrence's --------------------


@pytest.fixture(scope="module")
def split_plans() -> dict[str, Plan]:
    """Plans whose layers the planner split: DeepSeek-V3 with its MTP module (the recurrence),
    Llama 3.1 405B on PP16 with full recomputation (CP-SAT: one recompute count, and per-stage
    recompute counts)."""
    dsv3 = {"seq_len": 4096, "global_batch": 4096, "mtp_num_layers": 1}
    llama = {"seq_len": 8192, "global_batch": 2048}
    cases = {
        "dsv3_mtp": ("671B", "hgx_h800x2048", dsv3, {"tp": 1, "pp": 16, "ep": 64}, "block"),
        "405b_block": ("405B", "hgx_h100x2048", llama, {"tp": 8, "pp": 16, "recompute": "full"},
                       "block"),
        "405b_per_stage": ("405B", "hgx_h100x2048", llama,
                           {"tp": 8, "pp": 16, "recompute": "full"}, "per_stage"),
    }  # fmt: skip
    return {
        key: planner.estimate(model=model, cluster=cluster, workload=workload, layout=layout,
                              config={"stage_recompute": recompute})
        for key, (model, cluster, workload, layout, recompute) in cases.items()
    }  # fmt: skip


def _split_job(plan: Plan) -> ExportJob:
    workload = TrainWorkload(
        seq_len=4096 if plan.model == "deepseek-v3" else 8192,
        global_batch=4096 if plan.model == "deepseek-v3" else 2048,
        mtp_num_layers=1 if plan.model == "deepseek-v3" else 0,
    )
    return ExportJob(plan=plan, model=load_model(plan.model), cluster=load_cluster(plan.cluster),
                     workload=workload)  # fmt: skip


def test_megatron_spells_the_optimised_split_with_mtp(split_plans: dict[str, Plan]) -> None:
    plan = split_plans["dsv3_mtp"]  # no interleaving, no recompute: the recurrence's split
    assert plan.pipeline_split is not None and plan.pipeline_split.method == "recurrence"
    result = export(_split_job(plan), "megatron")
    args = check_names("megatron", result.text)
    layout = str(args["--pipeline-model-parallel-layout"])
    assert _megatron_layout_counts(layout) == [s.num_layers for s in plan.pipeline_stages]
    mtp_stage = next(s.stage for s in plan.pipeline_stages if s.mtp_layers)
    assert (
        "m" in layout_stages(layout)[mtp_stage] and layout.startswith("E") and layout.endswith("L")
    )
    assert args["--mtp-num-layers"] == "1"
    assert any("the min-max recurrence's split" in note for note in result.notes)


def test_megatron_spells_one_recompute_count(split_plans: dict[str, Plan]) -> None:
    plan = split_plans["405b_block"]
    redo = {s.recompute_layers for s in plan.pipeline_stages}
    args = check_names("megatron", export(_split_job(plan), "megatron").text)
    assert args["--recompute-method"] == "block" and len(redo) == 1
    assert args["--recompute-num-layers"] == str(redo.pop())
    counts = [s.num_layers for s in plan.pipeline_stages]
    if len(set(counts[1:-1])) == 1:
        assert args["--decoder-first-pipeline-num-layers"] == str(counts[0])
        assert args["--decoder-last-pipeline-num-layers"] == str(counts[-1])


def test_per_stage_recompute_is_noted_not_silently_changed(split_plans: dict[str, Plan]) -> None:
    plan = split_plans["405b_per_stage"]
    redo = [s.recompute_layers for s in plan.pipeline_stages]
    result = export(_split_job(plan), "megatron")
    args = check_names("megatron", result.text)
    if len(set(redo)) > 1:
        assert args["--recompute-num-layers"] == str(max(redo))
        assert any("cannot be spelled" in note for note in result.notes)


def test_torchtitan_lists_the_cpsat_split(split_plans: dict[str, Plan]) -> None:
    plan = split_plans["dsv3_mtp"]
    result = export(_split_job(plan), "torchtitan")
    parts = tomllib.loads(result.text)["parallelism"]["module_fqns_per_model_part"]
    layers = [sum(name.startswith("layers.") for name in part) for part in parts]
    assert layers == [s.num_layers for s in plan.pipeline_stages]
    assert any("multi-token" in note for note in result.notes)


def test_example_plan_hf_config_plans_a_gemma_2_config(tmp_path: Path) -> None:
    from tests.test_hf_import import GEMMA_2_9B

    config = tmp_path / "config.json"
    config.write_text(json.dumps(GEMMA_2_9B))
    out = _run_example(str(EXAMPLES / "plan_hf_config.py"), "--config", str(config),
                       "--cluster", "hgx_h100x16")  # fmt: skip
    lines = out.splitlines()
    # the checkpoint's 9,241,705,984 parameters (tests/test_hf_import.py), Gemma 2's post-norms
    # in the band's warnings, and a job config torchtitan reads
    assert "(gemma2, dense): 9.24B parameters" in lines[0]
    assert any("no validated run has post norms" in line for line in lines)
    body = "\n".join(line for line in lines if not line.startswith("#"))
    sections = tomllib.loads(body)
    assert sections["parallelism"]["data_parallel_shard_degree"] >= 1
    assert sections["training"]["seq_len"] == 8192


def test_maxtext_carves_expert_parallelism_from_the_data_parallel_ranks() -> None:
    """MaxText's expert mesh axis shards the batch (base.yml: activation_batch over data, fsdp,
    fsdp_transpose, expert), so ep must divide dp: its searches offer no other layout, and a
    plan that folds experts over context parallelism (Megatron-LM's MoE folding) is refused by
    the MaxText export in one line instead of failing inside it (it divided by dp // ep = 0)."""
    from planner.catalog.frameworks import resolve_workload
    from planner.search.rules import framework_rules

    result = planner.search(model="qwen3-30b-a3b", cluster="hgx_h100x8",
                            workload={"framework": "maxtext"}, top=5)  # fmt: skip
    for plan in [result.best, *result.alternatives]:
        assert plan.layout.dp % plan.layout.ep == 0
    folded = {"tp": 1, "dp": 2, "cp": 4, "ep": 8, "zero": 1, "recompute": "full"}
    plan = planner.estimate(model="qwen3-30b-a3b", cluster="hgx_h100x8", layout=folded)
    assert framework_rules(resolve_workload({"framework": "maxtext"}), plan.layout)
    with pytest.raises(SpecError, match=r"ep \(8\) must divide dp \(2\)") as caught:
        planner.export(plan, format="maxtext")
    assert "\n" not in str(caught.value)


def test_automodel_export_of_its_deepseek_v3_benchmark_matches_the_published_config() -> None:
    """NeMo AutoModel's DeepSeek-V3 benchmark on 256 H100 (the held-out row AM1's layout,
    examples/llm_benchmark/deepseek/deepseek_v3_te_deepep.yaml at 36044ad3d: GBS 256, LBS 4, PP 4,
    EP 64, activation checkpointing, interleaved 1F1B, two layers a virtual stage, TE attention,
    linear and RMSNorm, grouped experts, MaskedCrossEntropy without the fp32 upcast), planned
    under --framework automodel: the export sets those values, the split as AutoModel deals it
    itself (ceil(61 / 2) = 31 stages rounded up to 32 = pp x vpp: 29 of two layers, 3 of one),
    and says nothing of another framework."""
    split = "Ett|" + "tt|" * 28 + "t|t|tL"
    layout = {"tp": 1, "pp": 4, "vpp": 8, "ep": 64, "mbs": 1, "recompute": "full", "zero": 3}
    plan = planner.estimate(model="deepseek-v3", cluster="hgx_h100x256", layout=layout,
                            pipeline_split=split, seq_len=4096, global_batch=256,
                            framework="automodel")  # fmt: skip
    result = planner.export(plan, format="automodel")
    names = check_names("automodel", result.text)
    published = {
        "step_scheduler.global_batch_size": 256,
        "step_scheduler.local_batch_size": 4,  # 256 / dp 64: one pipeline schedule per step
        "distributed.strategy": "fsdp2",
        "distributed.tp_size": 1,
        "distributed.cp_size": 1,
        "distributed.pp_size": 4,
        "distributed.ep_size": 64,
        "distributed.activation_checkpointing": True,
        "distributed.pipeline.pp_schedule": "interleaved1f1b",
        "distributed.pipeline.pp_microbatch_size": 1,
        "distributed.pipeline.layers_per_stage": 2,
        "distributed.pipeline.round_virtual_stages_to_pp_multiple": "up",
        "distributed.pipeline.scale_grads_in_schedule": False,
        "distributed.moe.reshard_after_forward": False,
        "model.config.pretrained_model_name_or_path": "deepseek-ai/DeepSeek-V3",
        "model.backend.attn": "te",
        "model.backend.linear": "te",
        "model.backend.rms_norm": "te",
        "model.backend.experts": "torch_mm",
        "loss_fn.fp32_upcast": False,
        # torch.optim.Adam in the config: the moments in the bf16 parameters' dtype, no master
        "optimizer.master_weights": False,
        "optimizer.exp_avg_dtype": "torch.bfloat16",
    }
    assert {key: names.get(key) for key in published} == published
    # the config's HybridEP and this DeepEP both send a token once to each rank of its experts
    assert names["model.backend.dispatcher"] == "deepep"
    assert not any("another framework" in note for note in result.notes)
    assert own_split(61, 4, [2] * 29 + [1] * 3) == (2, "up")


def test_automodel_export_of_its_llama_benchmark_matches_the_published_config() -> None:
    """NeMo AutoModel's Llama 3.1 70B benchmark on 64 H100 (the held-out row AM7's layout,
    examples/llm_benchmark/llama3_3/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml at
    36044ad3d: GBS 128, LBS 1, CP 2, FSDP over the other 32, activation checkpointing,
    enable_compile, gradients reduced every micro-batch, attn_implementation sdpa 'required for
    cp>1'), planned under --framework automodel: the export sets those values."""
    layout = {"tp": 1, "pp": 1, "cp": 2, "mbs": 1, "recompute": "full", "zero": 3}
    plan = planner.estimate(model="70B", cluster="hgx_h100x64", layout=layout, seq_len=8192,
                            global_batch=128, framework="automodel", attention_kernel="flash2")  # fmt: skip
    names = check_names("automodel", planner.export(plan, format="automodel").text)
    published = {
        "step_scheduler.global_batch_size": 128,
        "step_scheduler.local_batch_size": 1,
        "distributed.dp_size": 32,
        "distributed.tp_size": 1,
        "distributed.cp_size": 2,
        "distributed.pp_size": 1,
        "distributed.activation_checkpointing": True,
        "distributed.enable_compile": True,
        "distributed.defer_fsdp_grad_sync": False,
        "model.attn_implementation": "sdpa",
    }
    assert {key: names.get(key) for key in published} == published


def test_automodel_runs_moe_models_at_tp_1() -> None:
    """AutoModel's custom MoE models keep attention and the router replicated under TP, refuse
    sequence parallelism and async TP, and start only from a pretrained checkpoint: its profile
    refuses TP on an MoE model (in one line naming the limit), and a Megatron-LM plan with TP 2
    exported to it sets both off and says the prediction assumed them."""
    layout = {"tp": 2, "ep": 8, "zero": 3, "recompute": "full"}
    with pytest.raises(SpecError, match=r"runs an MoE model at tp 1 \(got tp 2\)") as caught:
        planner.estimate(model="mixtral-8x7b", cluster="hgx_h100x16", layout=layout,
                         framework="automodel")  # fmt: skip
    assert "\n" not in str(caught.value)
    best = planner.search(model="mixtral-8x7b", cluster="hgx_h100x16",
                          workload={"framework": "automodel"}, top=3)  # fmt: skip
    assert all(p.layout.tp == 1 for p in [best.best, *best.alternatives])
    plan = planner.estimate(model="mixtral-8x7b", cluster="hgx_h100x16", layout=layout)
    result = planner.export(plan, format="automodel")
    names = check_names("automodel", result.text)
    assert names["distributed.tp_size"] == 2
    assert names["distributed.sequence_parallel"] is False
    assert names["distributed.enable_async_tensor_parallel"] is False
    [note] = [n for n in result.notes if "tensor parallelism on an MoE model" in n]
    assert "sequence parallelism (norms and dropouts on T / tp tokens)" in note


def test_automodel_export_lists_modules_where_automodel_would_split_otherwise() -> None:
    """Llama 3.1 70B at PP 2 on the split CP-SAT chose (41 and 39 layers, AutoModel would deal
    40 and 40): every chunk's module names, the embedding first and the head last, the rotary
    table on both; a ZeRO-1 plan made for Megatron-LM gets FSDP2's nearest, ZeRO-2, in a note."""
    plan = planner.estimate(model="70B", cluster="hgx_b200x16", layout={"tp": 4, "pp": 2})
    counts = [stage.num_layers for stage in plan.pipeline_stages]
    result = planner.export(plan, format="automodel")
    names = check_names("automodel", result.text)
    parts = names["distributed.pipeline.module_fqns_per_model_part"]
    assert counts != [40, 40] and [len(p) for p in parts] == [counts[0] + 2, counts[1] + 3]
    assert parts[0][:2] == ["model.embed_tokens", "model.layers.0"]
    assert parts[1][-3:] == ["model.norm", "lm_head", "model.rotary_emb"]
    assert names["distributed.reshard_after_forward"] is False
    assert any("ZeRO-1 is set as its nearest, ZeRO-2" in note for note in result.notes)
    assert any("scored for another framework" in note for note in result.notes)


@pytest.mark.parametrize(
    ("schedule", "vpp", "name", "said"),
    [
        ("1f1b", 1, "1f1b", False),
        ("1f1b", 2, "interleaved1f1b", False),
        ("gpipe", 1, "gpipe", False),
        ("gpipe", 2, "loopedbfs", False),
        ("zero_bubble", 2, "interleavedzerobubble", False),
        ("zero_bubble", 1, "1f1b", True),  # torch has no single-stage zero-bubble schedule
        ("dualpipe", 1, "1f1b", True),
    ],
)
def test_automodel_pipeline_schedule_fits_the_stages_a_rank_holds(
    schedule: str, vpp: int, name: str, said: bool
) -> None:
    """AutoModel runs a single-stage schedule with one stage a rank and a looped one with
    several, and refuses the other pairings (calculate_virtual_stages)."""
    layout = {"tp": 4, "pp": 2, "vpp": vpp}
    plan = planner.estimate(
        model="70B", cluster="hgx_b200x16", layout=layout, config={"stage_split": "even"}
    )
    workload = TrainWorkload(seq_len=8192, global_batch=512, pipeline_schedule=schedule)
    result = export(make_job(plan, workload=workload), "automodel")
    names = check_names("automodel", result.text)
    assert names["distributed.pipeline.pp_schedule"] == name
    assert names["distributed.pipeline.layers_per_stage"] == 80 // (2 * vpp)
    assert any("schedule" in note for note in result.notes) == said


def test_nanotron_export_of_a_nanotron_plan_matches_its_benchmark_config() -> None:
    """A plan scored under --framework nanotron exports the settings of Nanotron's scaling
    benchmarks (examples/config_tiny_llama_bench.yaml as scripts/scaling_benchmarks.py edits
    it: REDUCE_SCATTER with async TP, the 1F1B engine, the fp32 gradient accumulator, bf16,
    the loss logged every step) with its degrees and batch, and says nothing of another
    framework; the split is Nanotron's own (it places the blocks itself)."""
    layout = {"tp": 2, "pp": 2, "mbs": 4, "zero": 1}
    plan = planner.estimate(model="8B", cluster="hgx_h100x8", layout=layout, seq_len=4096,
                            global_batch=128, framework="nanotron")  # fmt: skip
    result = planner.export(plan, format="nanotron")
    names = check_names("nanotron", result.text)
    assert {key: names.get(key) for key in (
        "parallelism.dp", "parallelism.tp", "parallelism.pp", "parallelism.pp_engine",
        "parallelism.tp_mode", "parallelism.tp_linear_async_communication",
        "parallelism.recompute_layer", "tokens.sequence_length", "tokens.micro_batch_size",
        "tokens.batch_accumulation_per_replica", "optimizer.zero_stage",
        "optimizer.accumulate_grad_in_fp32", "model.dtype", "logging.iteration_step_info_interval",
    )} == {
        "parallelism.dp": 2, "parallelism.tp": 2, "parallelism.pp": 2,
        "parallelism.pp_engine": "1f1b", "parallelism.tp_mode": "REDUCE_SCATTER",
        "parallelism.tp_linear_async_communication": True, "parallelism.recompute_layer": False,
        "tokens.sequence_length": 4096, "tokens.micro_batch_size": 4,
        "tokens.batch_accumulation_per_replica": 16, "optimizer.zero_stage": 1,
        "optimizer.accumulate_grad_in_fp32": True, "model.dtype": "bfloat16",
        "logging.iteration_step_info_interval": 1,
    }  # fmt: skip
    assert names["model.model_config.num_hidden_layers"] == 32
    assert not any("another framework" in note for note in result.notes)
    assert not any("places the blocks" in note for note in result.notes)


def test_nanotron_folds_context_parallelism_into_its_replicas() -> None:
    """Nanotron has no context parallelism: a CP 2 plan exports dp x cp replicas, so the config
    runs on the plan's GPUs with its global batch, and says so."""
    plan = planner.estimate(model="8B", cluster="hgx_h100x8", layout={"tp": 1, "pp": 2, "cp": 2})
    result = planner.export(plan, format="nanotron")
    names = check_names("nanotron", result.text)
    dp, tp, pp = (int(names[f"parallelism.{k}"]) for k in ("dp", "tp", "pp"))  # type: ignore[arg-type]
    assert (dp, dp * tp * pp) == (plan.layout.dp * 2, 8)
    per_replica = int(names["tokens.micro_batch_size"]) * int(
        names["tokens.batch_accumulation_per_replica"]
    )  # type: ignore[arg-type]
    assert dp * per_replica == 512
    assert any("folded into dp" in note for note in result.notes)


def test_deepspeed_says_where_the_plan_puts_its_layers() -> None:
    """DeepSpeed's PipelineModule takes no list of stage boundaries and its checkpointing takes
    every layer, so its own profile scores the even split (no split is searched), and a plan
    made for another framework with its own split (Llama 3 70B on 16 H200 under Megatron-LM:
    uneven stages, two layers recomputed per stage) says both in the DeepSpeed export's notes,
    with the even split's step time the user gets without them."""
    own = planner.search(
        model="70B", cluster="hgx_h200x16", workload={"framework": "deepspeed"}, fix={"pp": 4}
    )
    for plan in [own.best, *own.alternatives]:
        assert plan.pipeline_split is not None and plan.pipeline_split.method == "even"
    from planner.specs.pipeline import PipelineSplit

    plan = planner.estimate(
        model="70B",
        cluster="hgx_h200x16",
        layout={"pp": 4, "dp": 4, "recompute": "full"},
        pipeline_split=PipelineSplit(chunk_layers=(18, 21, 21, 20), recompute_layers=(2,) * 4),
    )
    assert plan.pipeline_split is not None and plan.pipeline_split.method == "given"
    counts = [s.num_layers for s in plan.pipeline_stages]
    notes = export(make_job(plan), "deepspeed").notes
    placed = [n for n in notes if f"places {counts} decoder layers" in n]
    assert placed and f"{plan.pipeline_split.even_step_time_s:.4g} s" in placed[0]
    redo = [s.recompute_layers for s in plan.pipeline_stages]
    if plan.layout.recompute.value == "full" and redo != counts:
        assert any(f"recompute the first {redo} layers" in n for n in notes)


def test_accelerate_export_of_fsdp_plans_is_their_launch_config() -> None:
    """Plans scored under --framework fsdp (FSDP1) and fsdp2 (fully_shard) export Accelerate's
    FSDP launch config: FSDP1's FULL_SHARD with the backward prefetch, FSDP2's resharding and its
    hybrid sharding as parallelism_config (8 x 2 over 16 H100), the processes over two nodes,
    bf16 and eager (the profiles' uncompiled kernels); neither says it was scored for another
    framework, and both say the batch the script must set: 2 micro-batches of 1 x 4,096 tokens
    (32 sequences over 16 GPUs)."""
    common = {"model": "8B", "cluster": "hgx_h100x16", "seq_len": 4096, "global_batch": 32}
    fsdp1 = planner.estimate(**common, layout={"zero": 3, "mbs": 1}, framework="fsdp")
    names = check_names("accelerate", planner.export(fsdp1, format="accelerate").text)
    assert {k: v for k, v in names.items() if not k.startswith("fsdp_config.fsdp_")} == {
        "compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP",
        "mixed_precision": "bf16", "num_machines": 2, "num_processes": 16, "machine_rank": 0,
        "main_training_function": "main", "rdzv_backend": "static", "same_network": True,
        "use_cpu": False,
    }  # fmt: skip
    assert names["fsdp_config.fsdp_version"] == 1
    assert names["fsdp_config.fsdp_sharding_strategy"] == "FULL_SHARD"
    assert names["fsdp_config.fsdp_backward_prefetch"] == "BACKWARD_PRE"
    assert names["fsdp_config.fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    fsdp2 = planner.estimate(
        **common, layout={"zero": 3, "mbs": 1}, framework="fsdp2",
        workload={"zero_shard_group": 8},
    )  # fmt: skip
    result = planner.export(fsdp2, format="accelerate")
    names = check_names("accelerate", result.text)
    assert names["fsdp_config.fsdp_version"] == 2
    assert names["fsdp_config.fsdp_reshard_after_forward"] is True
    assert names["parallelism_config.parallelism_config_dp_replicate_size"] == 2
    assert names["parallelism_config.parallelism_config_dp_shard_size"] == 8
    assert "dynamo_config.dynamo_backend" not in names
    for plan in (fsdp1, fsdp2):
        notes = planner.export(plan, format="accelerate").notes
        assert not any("another framework" in note for note in notes)
        assert any("per_device_train_batch_size 1 x gradient_accumulation_steps 2" in note
                   for note in notes)  # fmt: skip
    ddp = planner.estimate(  # ZeRO-0 under FSDP2's profile: DDP (fits a B200's 180 GB)
        **{**common, "cluster": "hgx_b200x16"}, layout={"zero": 0, "mbs": 1}, framework="fsdp2"
    )
    names = check_names("accelerate", planner.export(ddp, format="accelerate").text)
    assert names["distributed_type"] == "MULTI_GPU" and "fsdp_config.fsdp_version" not in names


def test_cli_export_reads_a_piped_plan(tmp_path: Path, plans: dict[str, Plan]) -> None:
    """``layout search --json ... | layout export --plan - ...``: the plan from standard input
    exports as the same plan saved to a file does, through a real pipe."""
    text = plans["70b_tp4_pp2_vpp2"].model_dump_json()
    saved = _saved(tmp_path, json.loads(text))
    code, from_file, err = run_main(["export", "--format", "megatron", "--plan", str(saved)])
    assert code == 0, err
    argv = [*layout_command(), "export", "--format", "megatron", "--plan", "-"]
    piped = subprocess.run(argv, input=text, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.rstrip("\n") == from_file.rstrip("\n")


@pytest.mark.parametrize(
    ("data", "tty", "words"),
    [
        (b"", False, "standard input is empty"),
        (b"  \n", False, "standard input is empty"),
        (b"\xff\xfe{}", False, "standard input is not UTF-8 text (byte 0)"),
        (b"{}", False, "'<stdin>' is not a saved 'layout search --json'"),
        (b"{", False, "plan '<stdin>' is not JSON"),
        (b"{}", True, "reads standard input, but it is a terminal"),
    ],
    ids=["empty", "blank", "binary", "not-a-plan", "not-json", "terminal"],
)
def test_cli_export_refuses_bad_standard_input_in_one_line(
    monkeypatch: pytest.MonkeyPatch, data: bytes, tty: bool, words: str
) -> None:
    class Stdin(io.TextIOWrapper):
        def isatty(self) -> bool:
            return tty

    monkeypatch.setattr("sys.stdin", Stdin(io.BytesIO(data), encoding="utf-8"))
    code, out, err = run_main(["export", "--format", "megatron", "--plan", "-"])
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and words in err, err


def test_cli_export_refuses_standard_input_over_the_size_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("planner.catalog.io.MAX_FILE_BYTES", 10)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"{" * 11), encoding="utf-8"))
    code, _, err = run_main(["export", "--format", "megatron", "--plan", "-"])
    assert code == 2 and "standard input is over 10 bytes, the limit" in err, err
