"""Hostile input (issue 9; DESIGN.md section 8): every input gets a plan or one clear line.

One table of cases, each asserting the exit code (2 bad input, 1 nothing fits), exactly one line
on stderr naming the offending value and the rule, and no traceback. These are beyond the bad
inputs of tests/test_cli.py (not repeated here). Most run ``planner.cli.main`` in-process; a few
run the installed ``layout`` executable. Files are written under ``tmp_path``; YAML with Python
tags would touch a marker file if it were ever executed.

Also here: the solver's time limit (a tiny one still returns a plan and its gap) and a smoke run
at scale (131,072 GPUs, a 2T-parameter MoE; measured in benchmarks/bench_scale.py).
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from planner.catalog import catalog_root
from planner.search.rank import rank_rows
from tests.test_cli import assert_one_line_error, layout_command, run_exe, run_main

ROOT = Path(__file__).resolve().parents[1]
LLAMA_8B = (ROOT / "models" / "llama3.1-8b.yaml").read_text(encoding="utf-8")
HOPPER = (ROOT / "topologies" / "calibration" / "hopper.yaml").read_text(encoding="utf-8")
H100 = (ROOT / "topologies" / "accelerators" / "h100_sxm.yaml").read_text(encoding="utf-8")
HGX_H100 = (ROOT / "topologies" / "systems" / "hgx_h100.yaml").read_text(encoding="utf-8")


def _serving_bias(overlay: str, value: str) -> str:
    """``overlay`` with the bias of its held-out serving band set to ``value`` (text)."""
    start = overlay.index("    serving:\n", overlay.index("heldout:"))
    head, tail = overlay[:start], overlay[start:]
    return head + re.sub(r"bias: [-+0-9.e]+", f"bias: {value}", tail, count=1)


HF_LLAMA = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}
MARKER = "pwned"
EVIL = f'a: !!python/object/apply:os.system ["touch {{tmp}}/{MARKER}"]\n'
"""A Python-object tag: a safe loader refuses it, an unsafe one would create the marker."""
DEEP = "a: " + "[" * 50_000 + "]" * 50_000 + "\n"
"""Nesting deeper than the parsers' recursion limit."""
OK_CLUSTER = "name: mine\nsystem: hgx_h100\nnum_accelerators: 16\n"
BILLION_LAUGHS = "laughs:\n" + "".join(
    f"  {k}: &{k} [{', '.join([f'*{p}' if p else '1'] * 9)}]\n"
    for p, k in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)
"""9 aliases of 9 aliases ... nine deep: 1 KB of YAML that expands to 9**9 (387 million)
values; PyYAML shares the nodes, but validating or printing them would walk every one."""
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257,
        "n_positions": 1024}  # fmt: skip
YARN_ZERO = {"rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": -24.0}
"""0.1 x -24 x ln 40 + 1 < 0: YaRN's m(s, mscale_all_dim) would divide by a non-positive."""


def _huge(path: Path) -> None:
    """A 17 MiB text file (over the 16 MiB limit), written in one call."""
    path.write_bytes(b"key: value\n" * (17 * 2**20 // 11 + 1))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


Content = str | bytes | Callable[[Path], None]


@dataclass(frozen=True)
class Case:
    """One hostile input: argv ({tmp} = the test's tmp_path), files to create, expected result."""

    id: str
    argv: list[str]
    code: int
    expect: tuple[str, ...]
    """Substrings of the stderr line (case-insensitive): the offending value and the rule."""
    files: dict[str, Content] = field(default_factory=dict)
    quiet: bool = True
    """Nothing on stdout (False: whatif prints its sweep table, show its summary, first)."""


S8 = ["search", "--model", "8B", "--cluster", "hgx_h100x8"]
SERVE = ["search", "--mode", "serve", "--model", "8B", "--cluster", "hgx_h100x8"]
E8 = ["estimate", "--model", "8B", "--cluster", "hgx_h100x8"]
W8 = ["whatif", "--model", "8B", "--cluster", "hgx_h100x8"]
M8 = ["migrate", "--model", "8B", "--from", "hgx_h100x8", "--to", "hgx_b200x8"]
EXPORT = ["export", "--format", "megatron", "--plan"]

CASES: list[Case] = [
    # --- framework settings ---------------------------------------------------------------
    Case("recompute-modules-empty", [*E8, "--recompute-modules", ""], 2,
         ("--recompute-modules ''", "core_attn")),
    Case("recompute-modules-unknown", [*S8, "--recompute-modules", "attention"], 2,
         ("'attention'", "mla_up_proj")),
    Case("recompute-modules-twice", [*E8, "--recompute-modules", "mlp,mlp"], 2,
         ("listed twice", "mlp")),
    Case("moe-dispatcher-unknown", [*E8, "--moe-dispatcher", "nccl"], 2,
         ("'nccl'", "deepep")),
    # --- names: misspelled or incomplete, with a suggestion -------------------------------
    Case("bare-system", ["search", "--model", "8B", "--cluster", "hgx_h100"], 2,
         ("'hgx_h100'", "add x<N>", "hgx_h100x8")),
    Case("empty-model", ["search", "--model", "", "--cluster", "hgx_h100x8"], 2,
         ("model name is empty",)),
    Case("empty-cluster", ["search", "--model", "8B", "--cluster", " "], 2,
         ("cluster name is empty",)),
    Case("estimate-model-typo", ["estimate", "--model", "mixtrl-8x7b", "--cluster", "hgx_h100x8"],
         2, ("'mixtrl-8x7b'", "did you mean 'mixtral-8x7b'?")),
    Case("migrate-from-typo", ["migrate", "--model", "8B", "--from", "hgx_h10x8", "--to",
                               "hgx_b200x8"], 2, ("'hgx_h10x8'", "did you mean 'hgx_h100x8'?")),
    Case("migrate-to-typo", ["migrate", "--model", "8B", "--from", "hgx_h100x8", "--to",
                             "hgx_b20x8"], 2, ("'hgx_b20x8'", "did you mean 'hgx_b200x8'?")),
    Case("serve-kv-precision-typo", [*SERVE, "--kv-precision", "fp9"], 2,
         ("'fp9'", "did you mean 'fp8'?")),
    Case("whatif-system-typo", [*W8, "--vary", "system=hgx_h10"], 2,
         ("'hgx_h10'", "did you mean 'hgx_h100'?")),
    Case("whatif-precision-typo", [*W8, "--vary", "precision=fp9"], 2,
         ("'fp9'", "did you mean 'fp8'?")),
    Case("whatif-knob-typo", [*W8, "--vary", "nic_gbp=100,200"], 2,
         ("nic_gbp", "did you mean 'nic_gbps'?")),
    Case("fix-precision-conflict", [*S8, "--fix", "precision=fp8"], 2,
         ("--fix precision=fp8", "precision searched is bf16")),
    # --- numbers: zero, negative, fractional, NaN, inf, absurd ----------------------------
    Case("seq-len-inf", [*S8, "--seq-len", "inf"], 2, ("--seq-len", "'inf'", "positive whole")),
    Case("seq-len-1e9", [*S8, "--seq-len", str(10**9)], 2,
         ("--seq-len", "'1000000000'", "from 1 to 16,777,216 tokens")),
    Case("seq-len-1e6", [*S8, "--seq-len", str(10**6)], 2,
         ("seq-len 1000000", "exceeds the 131072-token context", "a larger max_context")),
    Case("global-batch-zero", [*S8, "--global-batch", "0"], 2, ("--global-batch", "'0'")),
    Case("global-batch-absurd", [*S8, "--global-batch", str(10**30)], 2,
         (str(10**30), "from 1 to 16,777,216 sequences")),
    Case("batch-tokens-absurd", [*S8, "--global-batch-tokens", "99999999999999999999G"], 2,
         ("--global-batch-tokens", "from 1 to 281,474,976,710,656 tokens")),
    Case("batch-tokens-over-the-batch", [*S8, "--global-batch-tokens", "1G", "--seq-len", "1"],
         2, ("1,073,741,824 sequences", "from 1 to 16,777,216 sequences")),
    Case("nic-zero", [*S8, "--nic-gbps", "0"], 2, ("--nic-gbps", "'0'", "> 0")),
    Case("nic-negative", [*S8, "--nic-gbps", "-400"], 2, ("--nic-gbps", "'-400'")),
    Case("nic-absurd", [*S8, "--nic-gbps", "1e308"], 2, ("nic_gbps", "100000", "1e+308")),
    Case("nic-tiny", [*S8, "--nic-gbps", "1e-300"], 2, ("nic_gbps", "greater than or equal to 1")),
    Case("nics-per-gpu-absurd", [*S8, "--nics-per-gpu", "1e12"], 2, ("nics_per_gpu", "64")),
    Case("oversubscription-absurd", [*S8, "--oversubscription", "1e12"], 2,
         ("oversubscription", "1000")),
    Case("domain-size-zero", [*S8, "--domain-size", "0"], 2, ("--domain-size", "'0'")),
    Case("domain-size-3", [*S8, "--domain-size", "3"], 2, ("3-GPU units", "nearest valid: 6 and 9")),
    Case("price-absurd", [*S8, "--price-per-gpu-hour", "1e308"], 2,
         ("price_per_gpu_hour", "10000")),
    Case("top-zero", [*S8, "--top", "0"], 2, ("--top", "'0'")),
    Case("time-limit-zero", [*S8, "--time-limit", "0"], 2, ("--time-limit", "'0'", "> 0")),
    Case("time-limit-nan", [*S8, "--time-limit", "nan"], 2, ("--time-limit", "'nan'")),
    Case("time-limit-absurd", [*S8, "--time-limit", "1e12"], 2,
         ("--time-limit", "'1e12'", "3600 s limit")),
    Case("gpus-zero", [*S8, "--gpus", "0"], 2, ("--gpus", "'0'")),
    Case("gpus-over-cluster", [*S8, "--gpus", "16"], 2, ("--gpus 16", "exceeds the 8")),
    Case("target-step-negative", [*S8, "--target-step-time", "-1"], 2,
         ("--target-step-time", "'-1'")),
    Case("target-with-cost", [*S8, "--target-step-time", "20", "--objective", "cost"], 2,
         ("step-time target ranks by the fewest GPUs", "'cost' objective would be ignored")),
    Case("target-step-unreachable", [*S8, "--target-step-time", "1e-9"], 1,
         ("1e-09 s step-time target", "lower bound")),
    Case("fix-tp-zero", [*S8, "--fix", "tp=0"], 2, ("--fix tp=0", "positive whole number")),
    Case("fix-recompute", [*S8, "--fix", "recompute=some"], 2,
         ("recompute=some", "none, selective or full")),
    Case("max-zero-9", [*S8, "--max", "zero=9"], 2, ("--max zero=9", "0, 1, 2 or 3")),
    Case("min-over-max", [*S8, "--min", "tp=8", "--max", "tp=2"], 2,
         ("--min tp=8", "exceeds --max tp=2")),
    Case("gpus-1e12", ["search", "--model", "8B", "--cluster", "hgx_h100x1000000000000"], 2,
         ("1000000000000", "between 1 and 1,048,576")),
    Case("gpus-0", ["search", "--model", "8B", "--cluster", "hgx_h100x0"], 2,
         ("0 accelerators", "at least 1")),
    Case("serve-context-zero", [*SERVE, "--context", "0"], 2, ("--context", "'0'")),
    Case("serve-context-too-long", [*SERVE, "--context", "10000000"], 2,
         ("context 10000000", "131072-token context")),
    Case("serve-concurrency-negative", [*SERVE, "--concurrency", "-3"], 2,
         ("--concurrency", "'-3'")),
    Case("serve-tpot-nan", [*SERVE, "--tpot-ms", "nan"], 2, ("--tpot-ms", "'nan'")),
    Case("serve-kv-fraction", [*SERVE, "--kv-cache-fraction", "2"], 2,
         ("kv_cache_fraction", "less than or equal to 1")),
    Case("serve-target-zero", [*SERVE, "--target-tokens-per-s", "0"], 2,
         ("--target-tokens-per-s", "'0'")),
    Case("serve-time-limit-absurd", [*SERVE, "--time-limit", "1e12"], 2, ("3600 s limit",)),
    Case("serve-prompt-over-context", [*SERVE, "--prompt-len", "9000", "--context", "8192"], 2,
         ("9000", "exceeds context (8192)")),
    Case("serve-tpot-unreachable", [*SERVE, "--tpot-ms", "0.001"], 1,
         ("tpot", "exceeds --tpot-ms 0.001")),
    Case("estimate-tp-zero", [*E8, "--tp", "0"], 2, ("--tp", "'0'")),
    Case("estimate-global-batch-1", [*E8, "--global-batch", "1"], 2,
         ("dp x mbs (8x1 = 8)", "global batch (1 sequences)")),
    Case("migrate-tokens-nan", [*M8, "--tokens", "nan"], 2, ("--tokens", "'nan'")),
    Case("migrate-steps-zero", [*M8, "--steps", "0"], 2, ("--steps", "'0'")),
    Case("migrate-price-nan", [*M8, "--price", "hgx_b200=nan"], 2, ("hgx_b200=nan",)),
    Case("migrate-seq-len-1e9", [*M8, "--seq-len", str(10**9)], 2,
         ("--seq-len", "from 1 to 16,777,216")),
    Case("migrate-global-batch-0", [*M8, "--global-batch", "0"], 2, ("--global-batch", "'0'")),
    Case("whatif-nic-zero", [*W8, "--vary", "nic_gbps=0"], 2,
         ("nic_gbps", "'0'", "from 1 to 100,000")),
    Case("whatif-gpus-fraction", [*W8, "--vary", "gpus=1.5"], 2, ("gpus", "'1.5'", "whole")),
    Case("whatif-workers-zero", [*W8, "--vary", "nic_gbps=400", "--workers", "0"], 2,
         ("--workers", "'0'")),
    Case("whatif-price-absurd", [*W8, "--vary", "price_per_gpu_hour=1e308"], 2,
         ("price_per_gpu_hour", "'1e308'", "at most 10,000 (usd")),
    # --- clusters that do not fill whole scale-up units -----------------------------------
    Case("nvl72-partial-tray", ["search", "--model", "8B", "--cluster", "gb200_nvl72x70"], 2,
         ("70 accelerators", "4-GPU units", "nearest valid: 68 and 72")),
    Case("hgx-below-unit", ["search", "--model", "8B", "--cluster", "hgx_h100x3"], 2,
         ("3 accelerators", "8-GPU units", "nearest valid: 2 and 4")),
    Case("tpu-illegal-slice", ["search", "--model", "8B", "--cluster", "tpu_v5p_3x3x3"], 2,
         ("3x3x3", "not legal")),
    Case("whatif-gpus-12", [*W8, "--vary", "gpus=12"], 2,
         ("gpus=12", "12 accelerators", "nearest valid: 8 and 16"), quiet=False),
    # --- layouts: degrees vs GPU count, heads, KV heads, experts, layers, batch ------------
    Case("fix-tp3", [*S8, "--fix", "tp=3"], 2,
         ("--fix tp=3", "tp (3) must divide the 8 accelerators", "num_kv_heads (8)")),
    Case("fix-dp3", [*S8, "--fix", "dp=3"], 2, ("--fix dp=3", "dp (3) must divide the 8")),
    Case("fix-pp64", [*S8, "--fix", "pp=64"], 2, ("pp (64)", "exceeds the 32 layers")),
    Case("fix-ep-dense", [*S8, "--fix", "ep=2"], 2, ("ep (2)", "has no experts")),
    Case("min-tp16", [*S8, "--min", "tp=16"], 2, ("--min tp=16", "no layout")),
    Case("estimate-mha-heads", ["estimate", "--model", "gpt3-175b", "--cluster", "hgx_h100x64",
                                "--seq-len", "2048", "--tp", "64"], 2,
         ("tp (64)", "num_kv_heads (96)")),
    Case("estimate-mla-heads", ["estimate", "--model", "deepseek-v3", "--cluster", "hgx_h100x256",
                                "--seq-len", "4096", "--tp", "256"], 2,
         ("tp (256)", "num_attention_heads (128)")),
    Case("estimate-experts", ["estimate", "--model", "mixtral-8x7b", "--cluster", "hgx_h100x16",
                              "--ep", "16"], 2, ("ep (16)", "the 8 experts")),
    Case("estimate-layers", [*E8, "--pp", "8", "--vpp", "8"], 2, ("pp x vpp (64)", "32 layers")),
    Case("estimate-batch", [*E8, "--mbs", "3"], 2,
         ("dp x mbs (8x3 = 24)", "global batch (512 sequences)")),
    Case("estimate-cp-seq", [*E8, "--cp", "8", "--seq-len", "12"], 2,
         ("2 x cp (16)", "seq-len 12")),
    Case("estimate-vpp-no-pp", [*E8, "--vpp", "2"], 2, ("vpp > 1", "pp > 1")),
    # --- formats the hardware does not run ---------------------------------------------
    Case("fp8-on-a100-estimate", ["estimate", "--model", "8B", "--cluster", "hgx_a100x8",
                                  "--precision", "fp8"], 2, ("'fp8'", "a100_80gb")),
    Case("fp8-on-a100-migrate", ["migrate", "--model", "8B", "--from", "hgx_a100x8", "--to",
                                 "hgx_h100x8", "--precision", "fp8"], 2, ("'fp8'", "a100_80gb")),
    Case("nvfp4-train-on-h100", [*S8, "--precision", "nvfp4"], 2, ("'nvfp4'", "h100_sxm")),
    Case("mxfp4-train-on-h100", [*E8, "--precision", "mxfp4"], 2, ("'mxfp4'", "h100_sxm")),
    # --- files: malformed, unsafe, unknown keys, empty, directory, huge, binary, deep ------
    Case("cluster-yaml-malformed", ["search", "--model", "8B", "--cluster", "{tmp}/c.yaml"], 2,
         ("cannot parse", "c.yaml"), {"c.yaml": "system: hgx_h100\nnum_accelerators: [\n"}),
    Case("cluster-yaml-unknown-key", ["search", "--model", "8B", "--cluster", "{tmp}/c.yaml"], 2,
         ("bogus", "unknown key"), {"c.yaml": OK_CLUSTER + "bogus: 1\n"}),
    Case("cluster-yaml-python-tag", ["search", "--model", "8B", "--cluster", "{tmp}/c.yaml"], 2,
         ("cannot parse", "python/object/apply"), {"c.yaml": EVIL}),
    Case("cluster-yaml-empty", ["show", "{tmp}/c.yaml"], 2, ("c.yaml", "is empty"),
         {"c.yaml": "  \n"}),
    Case("cluster-directory", ["search", "--model", "8B", "--cluster", "{tmp}/d.yaml"], 2,
         ("d.yaml", "is a directory"), {"d.yaml": lambda p: p.mkdir()}),
    Case("model-yaml-huge", ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"], 2,
         ("m.yaml", "the limit is 16,777,216"), {"m.yaml": _huge}),
    Case("model-yaml-deep", ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"], 2,
         ("m.yaml", "nested too deeply"), {"m.yaml": DEEP}),
    Case("model-json-deep", ["search", "--model", "{tmp}/m.json", "--cluster", "hgx_h100x8"], 2,
         ("m.json", "nested too deeply"), {"m.json": '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"}),
    Case("model-yaml-alias-bomb", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                   "hgx_h100x8"], 2, ("m.yaml", "name: field required"),
         {"m.yaml": "a: &a [1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\n"
                    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c]\n"}),
    Case("model-yaml-nan", ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"], 2,
         ("hidden_size", "finite number"),
         {"m.yaml": LLAMA_8B.replace("hidden_size: 4096", "hidden_size: .nan")}),
    Case("hf-hidden-absurd", ["search", "--model", "{tmp}/config.json", "--cluster",
                              "hgx_h100x8"], 2, ("hidden_size", "exceeds the 1,048,576"),
         {"config.json": json.dumps({**HF_LLAMA, "hidden_size": 10**400})}),
    Case("hf-layers-absurd", ["search", "--model", "{tmp}/config.json", "--cluster",
                              "hgx_h100x8"], 2, ("num_hidden_layers", "exceeds the 16,384"),
         {"config.json": json.dumps({**HF_LLAMA, "num_hidden_layers": 10**18})}),
    # (an unknown model_type, an empty, malformed or non-UTF-8 model file and a directory as
    # --model are in tests/test_cli.py)
    Case("hf-string-size", ["search", "--model", "{tmp}/config.json", "--cluster", "hgx_h100x8"],
         2, ("hidden_size", "'big'", "integer"),
         {"config.json": json.dumps({**HF_LLAMA, "hidden_size": "big"})}),
    Case("calibration-malformed", [*S8, "--calibration", "{tmp}/cal.yaml"], 2,
         ("cannot parse", "cal.yaml"), {"cal.yaml": "family: hopper\nefficiency: {gemm: [\n"}),
    Case("calibration-unknown-key", [*S8, "--calibration", "{tmp}/cal.yaml"], 2,
         ("bogus", "unknown key"), {"cal.yaml": HOPPER + "bogus: 1\n"}),
    Case("calibration-python-tag", [*S8, "--calibration", "{tmp}/cal.yaml"], 2,
         ("cannot parse", "python/object/apply"), {"cal.yaml": EVIL}),
    Case("calibration-non-utf8", [*S8, "--calibration", "{tmp}/cal.yaml"], 2,
         ("cal.yaml", "not UTF-8"), {"cal.yaml": b"family: hopper\n\xff\xfe\n"}),
    Case("plan-malformed", [*EXPORT, "{tmp}/p.json"], 2, ("p.json", "is not JSON"),
         {"p.json": '{"best": '}),
    Case("plan-newer-schema", [*EXPORT, "{tmp}/p.json"], 2,
         ("schema_version '2.0'", "upgrade layout"),
         {"p.json": json.dumps({"schema_version": "2.0", "best": {}})}),
    Case("plan-empty", [*EXPORT, "{tmp}/p.json"], 2, ("p.json", "is empty"), {"p.json": ""}),
    Case("plan-directory", [*EXPORT, "{tmp}/p.json"], 2, ("p.json", "is a directory"),
         {"p.json": lambda p: p.mkdir()}),
    Case("plan-huge", [*EXPORT, "{tmp}/p.json"], 2, ("p.json", "the limit is"), {"p.json": _huge}),
    Case("plan-non-utf8", [*EXPORT, "{tmp}/p.json"], 2, ("p.json", "not UTF-8"),
         {"p.json": b'{"best": "\xff"}'}),
    Case("plan-deep", [*EXPORT, "{tmp}/p.json"], 2, ("p.json", "nested too deeply"),
         {"p.json": "[" * 50_000 + "]" * 50_000}),
    Case("plan-not-a-plan", [*EXPORT, "{tmp}/p.json"], 2, ("p.json", "not a saved"),
         {"p.json": "[1, 2]"}),
    Case("layout-file-string", [*M8, "--layout", "{tmp}/l.yaml"], 2,
         ("tp", "'abc'", "positive whole number"), {"l.yaml": "tp: abc\n"}),
    Case("layout-file-unknown-key", [*M8, "--layout", "{tmp}/l.yaml"], 2,
         ("bogus", "unknown key"), {"l.yaml": "tp: 8\nbogus: 1\n"}),
    Case("layout-file-python-tag", [*M8, "--layout", "{tmp}/l.yaml"], 2,
         ("cannot parse", "python/object/apply"), {"l.yaml": EVIL}),
    Case("graphml-unwritable", ["show", "hgx_h100x8", "--graphml", "{tmp}/no/such/dir/g.xml"], 2,
         ("cannot write", "g.xml"), quiet=False),
    # --- whatif and migrate ----------------------------------------------------------------
    Case("whatif-unknown-knob", [*W8, "--vary", "colour=red"], 2, ("colour=red", "key one of")),
    Case("whatif-empty-values", [*W8, "--vary", "nic_gbps=,,"], 2,
         ("nic_gbps", "at least one value")),
    Case("whatif-seq-too-long", [*W8, "--vary", "seq_len=200000"], 2,
         ("seq_len=200000", "131072-token context"), quiet=False),
    Case("whatif-nothing-fits", ["whatif", "--model", "405B", "--cluster", "hgx_h100x8", "--vary",
                                 "nic_gbps=400"], 1, ("no scenario has a plan", "over by")),
    Case("whatif-system-and-accelerator", [*W8, "--vary", "system=hgx_b200", "--vary",
                                           "accelerator=b200"], 2, ("system", "accelerator")),
    Case("migrate-identical", ["migrate", "--model", "8B", "--from", "hgx_h100x8", "--to",
                               "hgx_h100x8"], 2, ("same cluster", "'hgx_h100x8'")),
    Case("migrate-unknown-cluster", ["migrate", "--model", "8B", "--from", "hgx_h100x8", "--to",
                                     "dgx_z900x8"], 2, ("unknown cluster 'dgx_z900x8'",)),
    Case("export-nothing", ["export", "--format", "megatron"], 2, ("--plan file", "--model")),
    # --- issue 17: alias bombs, duplicate keys, huge numbers, strict types -----------------
    Case("model-yaml-billion-laughs", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                       "hgx_h100x8"], 2, ("m.yaml", "aliases expand", "10,000"),
         {"m.yaml": BILLION_LAUGHS + LLAMA_8B.replace("hidden_size: 4096", "hidden_size: *i")}),
    Case("calibration-billion-laughs", [*S8, "--calibration", "{tmp}/cal.yaml"], 2,
         ("cal.yaml", "aliases expand"), {"cal.yaml": BILLION_LAUGHS + HOPPER}),
    Case("model-yaml-self-alias", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                   "hgx_h100x8"], 2, ("m.yaml", "aliases expand"),
         {"m.yaml": "a: &a [*a]\n"}),
    Case("model-yaml-duplicate-key", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                      "hgx_h100x8"], 2, ("m.yaml", "duplicate key 'hidden_size'"),
         {"m.yaml": LLAMA_8B + "hidden_size: 8192\n"}),
    Case("cluster-yaml-duplicate-key", ["search", "--model", "8B", "--cluster", "{tmp}/c.yaml"],
         2, ("c.yaml", "duplicate key 'num_accelerators'"),
         {"c.yaml": OK_CLUSTER + "num_accelerators: 8\n"}),
    Case("hf-json-duplicate-key", ["search", "--model", "{tmp}/config.json", "--cluster",
                                   "hgx_h100x8"], 2, ("config.json", "duplicate key 'hidden_size'"),
         {"config.json": json.dumps(HF_LLAMA)[:-1] + ', "hidden_size": 8192}'}),
    Case("plan-json-duplicate-key", [*EXPORT, "{tmp}/p.json"], 2,
         ("p.json", "duplicate key 'best'"), {"p.json": '{"best": {}, "best": {}}'}),
    Case("model-yaml-5000-digits", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                    "hgx_h100x8"], 2, ("m.yaml", "more than 4,300 digits"),
         {"m.yaml": LLAMA_8B.replace("hidden_size: 4096", "hidden_size: " + "9" * 5000)}),
    Case("hf-json-5000-digits", ["search", "--model", "{tmp}/config.json", "--cluster",
                                 "hgx_h100x8"], 2, ("config.json", "more than 4,300 digits"),
         {"config.json": json.dumps(HF_LLAMA)[:-1] + ', "vocab_size": ' + "9" * 5000 + "}"}),
    Case("plan-json-5000-digits", [*EXPORT, "{tmp}/p.json"], 2, ("p.json", "4,300 digits"),
         {"p.json": '{"best": ' + "9" * 5000 + "}"}),
    Case("model-yaml-bool-size", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                  "hgx_h100x8"], 2, ("hidden_size", "valid integer", "true"),
         {"m.yaml": LLAMA_8B.replace("hidden_size: 4096", "hidden_size: true")}),
    Case("model-yaml-text-size", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                  "hgx_h100x8"], 2, ("num_layers", "valid integer", "'32'"),
         {"m.yaml": LLAMA_8B.replace("num_layers: 32", "num_layers: '32'")}),
    Case("cluster-yaml-bool-count", ["search", "--model", "8B", "--cluster", "{tmp}/c.yaml"], 2,
         ("num_accelerators", "true"),
         {"c.yaml": OK_CLUSTER.replace("num_accelerators: 16", "num_accelerators: true")}),
    Case("calibration-tiny-gemm", [*S8, "--calibration", "{tmp}/cal.yaml"], 2,
         ("efficiency.gemm.bf16", "[0.01, 1]", "1e-300"),
         {"cal.yaml": re.sub(r"bf16: [0-9.]+", "bf16: 1.0e-300", HOPPER, count=1)}),
    Case("calibration-bool-factor", [*S8, "--calibration", "{tmp}/cal.yaml"], 2,
         ("hbm", "true"), {"cal.yaml": re.sub(r"hbm: [0-9.]+", "hbm: true", HOPPER, count=1)}),
    # --- issue 17: crashes that were 'internal error' --------------------------------------
    Case("cluster-superscript-digit", ["search", "--model", "8B", "--cluster", "hgx_h100x²"], 2,
         ("unknown cluster 'hgx_h100x²'",)),
    Case("cluster-arabic-digits", ["search", "--model", "8B", "--cluster", "hgx_h100x٨"], 2,
         ("unknown cluster",)),
    Case("cluster-5000-digits", ["search", "--model", "8B", "--cluster", "hgx_h100x" + "9" * 5000],
         2, ("5,000 digits", "between 1 and 1,048,576")),
    Case("seq-len-5000-digits", [*S8, "--seq-len", "9" * 5000], 2, ("--seq-len", "positive")),
    Case("hf-gpt2-no-heads", ["search", "--model", "{tmp}/config.json", "--cluster",
                              "hgx_h100x8"], 2, ("n_head", "positive integer", "0"),
         {"config.json": json.dumps(GPT2 | {"n_head": 0})}),
    Case("hf-yarn-zero-scale", ["search", "--model", "{tmp}/config.json", "--cluster",
                                "hgx_h100x8"], 2, ("mscale_all_dim", "must be > 0"),
         {"config.json": json.dumps(HF_LLAMA | {"rope_scaling": YARN_ZERO})}),
    Case("model-path-too-long", ["search", "--model", "{tmp}/" + "m" * 300 + ".yaml", "--cluster",
                                 "hgx_h100x8"], 2, ("cannot read", "file name too long")),
    Case("cluster-path-too-long", ["search", "--model", "8B", "--cluster",
                                   "{tmp}/" + "c" * 300 + ".yaml"], 2, ("file name too long",)),
    Case("calibration-path-too-long", [*S8, "--calibration", "{tmp}/" + "k" * 300 + ".yaml"], 2,
         ("file name too long",)),
    Case("plan-path-too-long", [*EXPORT, "{tmp}/" + "p" * 300 + ".json"], 2,
         ("file name too long",)),
    Case("model-name-too-long", ["search", "--model", "m" * 300, "--cluster", "hgx_h100x8"], 2,
         ("unknown model",)),
    Case("model-name-traversal", ["search", "--model", "../README", "--cluster", "hgx_h100x8"], 2,
         ("model file or folder '../README' does not exist",)),
    Case("placement-path-too-long", [*S8, "--placement", "{tmp}/" + "q" * 300 + ".csv"], 2,
         ("--placement", "too long")),
    # --- issue 17: silent acceptance of nonsense --------------------------------------------
    Case("migrate-tokens-absurd", [*M8, "--tokens", "1" + "0" * 30], 2,
         ("tokens", "less than or equal to 10000000000000000")),
    Case("migrate-steps-absurd", [*M8, "--steps", "1" + "0" * 12], 2,
         ("steps", "less than or equal to 1000000000")),
    Case("serve-placement", [*SERVE, "--placement", "{tmp}/p.csv"], 2,
         ("--placement", "does not apply to --mode serve")),
    Case("estimate-serve-placement", ["estimate", "--mode", "serve", "--model", "8B", "--cluster",
                                      "hgx_h100x8", "--placement", "{tmp}/p.csv"], 2,
         ("--placement", "does not apply to --mode serve")),
    Case("serve-infeasible-names-the-closest", ["search", "--mode", "serve", "--model", "405B",
                                                "--cluster", "hgx_h100x8"], 1,
         ("GPU memory binds", "TP8 PP1", "over by 20.4 GiB")),
    Case("fix-twice", [*S8, "--fix", "tp=2", "--fix", "tp=4"], 2,
         ("--fix tp is given twice", "tp=2 and tp=4")),
    Case("max-twice", [*S8, "--max", "pp=2", "--max", "pp=4"], 2, ("--max pp is given twice",)),
    # one flag listing several pins is read as those pins, so the same checks hold
    Case("fix-listed-twice", [*S8, "--fix", "tp=2,tp=4"], 2,
         ("--fix tp is given twice", "tp=2 and tp=4")),
    Case("fix-list-of-values", [*S8, "--fix", "tp=2,4"], 2,
         ("--fix tp=2,4", "positive whole number")),
    Case("max-listed-below-min", [*S8, "--min", "pp=4", "--max", "pp=2,tp=8"], 2,
         ("--min pp=4 exceeds --max pp=2",)),
    Case("price-twice", [*M8, "--price", "hgx_b200=3", "--price", "hgx_b200=4"], 2,
         ("--price hgx_b200 is given twice",)),
    # --- issue 17: outputs never replace inputs; missing folders fail before the work -------
    Case("placement-is-model", ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8",
                                "--placement", "{tmp}/m.yaml"], 2,
         ("--placement", "is the --model file"), {"m.yaml": LLAMA_8B}),
    Case("placement-hostfile-is-cluster", ["search", "--model", "8B", "--cluster",
                                           "{tmp}/c.csv.hostfile", "--placement", "{tmp}/c.csv"], 2,
         ("c.csv.hostfile", "is the --cluster file"), {"c.csv.hostfile": OK_CLUSTER}),
    Case("placement-is-calibration", [*S8, "--calibration", "{tmp}/cal.yaml", "--placement",
                                      "{tmp}/cal.yaml"], 2, ("is the --calibration file",),
         {"cal.yaml": HOPPER}),
    Case("export-placement-is-plan", [*EXPORT, "{tmp}/p.json", "--placement", "{tmp}/p.json"], 2,
         ("is the --plan file",), {"p.json": '{"best": {}}'}),
    Case("placement-missing-folder", [*S8, "--placement", "{tmp}/no/such/p.csv"], 2,
         ("--placement", "folder", "does not exist")),
    Case("placement-is-a-folder", [*S8, "--placement", "{tmp}/d"], 2,
         ("--placement", "is a directory"), {"d": lambda p: p.mkdir()}),
    Case("markdown-missing-folder", ["validate", "--rows", "S1", "--markdown",
                                     "{tmp}/no/v.md"], 2, ("--markdown", "does not exist")),
    Case("graphml-is-cluster", ["show", "{tmp}/c.yaml", "--graphml", "{tmp}/c.yaml"], 2,
         ("--graphml", "is the --cluster file"), {"c.yaml": OK_CLUSTER}),
    Case("measure-out-missing-folder", ["calibrate", "--measure", "--dry-run", "--out",
                                        "{tmp}/no/o.yaml"], 2, ("--out", "does not exist")),
    # --- issue 17, second pass: what a fresh hostile pass found ------------------------------
    Case("seq-len-overflows-a-float", [*S8, "--seq-len", "9" * 300 + ".0T"], 2,
         ("seq-len", "from 1 to 16,777,216 tokens")),
    Case("top-almost-whole", [*S8, "--top", "1.0000000000000000001"], 2,
         ("--top", "positive whole number")),
    Case("whatif-gpus-inf", [*W8, "--vary", "gpus=inf"], 2, ("gpus", "'inf'", "finite")),
    Case("whatif-seq-nan", [*W8, "--vary", "seq_len=nan"], 2, ("seq_len", "'nan'", "finite")),
    Case("plan-version-5000-digits", [*EXPORT, "{tmp}/p.json"], 2, ("schema_version", "upgrade"),
         {"p.json": json.dumps({"schema_version": "9" * 5000, "best": {}})}),
    Case("placement-into-the-catalog", [*S8, "--placement", "{catalog}/models/llama3.1-8b.yaml"],
         2, ("--placement", "inside the planner's catalog")),
    Case("graphml-into-the-catalog", ["show", "hgx_h100x8", "--graphml",
                                      "{catalog}/topologies/systems/hgx_h100.yaml"], 2,
         ("--graphml", "inside the planner's catalog")),
    Case("placement-is-a-fifo", [*S8, "--placement", "{tmp}/f.csv"], 2,
         ("--placement", "not a regular file"), {"f.csv": _fifo}),
    Case("placement-empty", [*S8, "--placement", ""], 2, ("--placement", "not a file name")),
    Case("placement-trailing-slash", [*S8, "--placement", "{tmp}/newdir/"], 2,
         ("--placement", "not a file name")),
    Case("model-yaml-merge-key", ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"],
         2, ("m.yaml", "merge key"), {"m.yaml": "<<: {hidden_size: 8192}\n" + LLAMA_8B}),
    Case("model-yaml-int-for-bool", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                     "hgx_h100x8"], 2, ("tied_embeddings", "boolean"),
         {"m.yaml": LLAMA_8B.replace("tied_embeddings: false", "tied_embeddings: 1")}),
    Case("model-yaml-500k-values", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                    "hgx_h100x8"], 2, ("m.yaml", "more than 50,000 values"),
         {"m.yaml": "extra: [" + ",".join(["1"] * 60_000) + "]\n"}),
    Case("model-proc-file", ["search", "--model", "/proc/self/status", "--cluster", "hgx_h100x8"],
         2, ("/proc/self/status",)),
    Case("model-twice", ["search", "--model", "8B", "--model", "70B", "--cluster",
                         "hgx_h100x8"], 2, ("--model is given twice",)),
    Case("seq-len-twice-with-equals", [*S8, "--seq-len=4096", "--seq-len", "8192"], 2,
         ("--seq-len is given twice",)),
    Case("switch-and-its-negation", [*S8, "--rail-optimized", "--no-rail-optimized"], 2,
         ("--rail-optimized and --no-rail-optimized are both given",)),
    Case("export-format-twice", ["export", "--format", "megatron", "--format", "vllm", "--model",
                                 "8B", "--cluster", "hgx_h100x8"], 2, ("--format is given twice",)),
    # --- issue 17: control characters never reach the terminal -----------------------------
    Case("model-name-osc", ["search", "--model", "\x1b]0;owned\x07", "--cluster", "hgx_h100x8"],
         2, ("unknown model", "\\x1b]0;owned\\x07")),
    Case("seq-len-ansi", [*S8, "--seq-len", "\x1b[31m8"], 2, ("--seq-len", "\\x1b[31m8")),
    # --- issue 17, third pass: flags accepted but ignored ------------------------------------
    Case("whatif-vary-and-flag", [*W8, "--vary", "nic_gbps=400,800", "--nic-gbps", "200"], 2,
         ("--vary nic_gbps and --nic-gbps", "both set nic_gbps")),
    Case("whatif-vary-and-seq-len", [*W8, "--vary", "seq_len=2048", "--seq-len", "4096"], 2,
         ("--vary seq_len and --seq-len",)),
    Case("whatif-vary-and-precision", [*W8, "--vary", "precision=fp8", "--precision", "bf16"], 2,
         ("--vary precision and --precision",)),
    Case("whatif-vary-and-batch-tokens", [*W8, "--vary", "global_batch=64",
                                          "--global-batch-tokens", "1M"], 2,
         ("--vary global_batch and --global-batch-tokens",)),
    Case("whatif-vary-and-negated-switch", [*W8, "--vary", "rail_optimized=true",
                                            "--no-rail-optimized"], 2,
         ("--vary rail_optimized and --no-rail-optimized",)),
    # a cut-short flag is refused and its full spelling named: argparse's prefix matching read
    # `--zero 1` as --zero-shard-group 1, another setting, silently
    Case("whatif-vary-and-abbreviated-flag", [*W8, "--vary", "ep_overlap=true", "--ep-over"], 2,
         ("unrecognized arguments: --ep-over", "did you mean --ep-overlap?")),
    # context lengths are quoted in binary K: --seq-len 8K is 8,192 tokens, not 8,000
    Case("seq-len-fractional-k", [*S8, "--seq-len", "8.3K"], 2,
         ("'8.3k' is not a whole number of tokens", "8k = 8192")),
    Case("seq-len-zero-k", [*S8, "--seq-len", "0K"], 2, ("'0k' is not a positive whole number",)),
    Case("search-zero-as-a-flag", [*S8, "--zero", "1"], 2,
         ("unrecognized arguments: --zero 1", "--fix zero=1", "'layout estimate' takes --zero")),
    Case("search-tp-as-a-flag", [*S8, "--tp", "2"], 2, ("--fix tp=2",)),
    Case("search-ep-as-a-flag", [*S8, "--ep=8"], 2, ("--fix ep=8",)),
    Case("export-pp-as-a-flag", ["export", "--format", "megatron", "--model", "8B", "--cluster",
                                 "hgx_h100x8", "--pp", "2"], 2, ("--fix pp=2",)),
    Case("estimate-fix", [*E8, "--fix", "tp=2,pp=2"], 2,
         ("unrecognized arguments: --fix tp=2,pp=2", "takes the layout as flags: --tp 2 --pp 2")),
    Case("estimate-abbreviated-flag", [*E8, "--prec", "fp8"], 2,
         ("unrecognized arguments: --prec fp8", "did you mean --precision?")),
    Case("estimate-ambiguous-abbreviation", [*E8, "--cp-", "p2p"], 2,
         ("--cp- could be --cp-comm, --cp-impl",)),
    Case("whatif-vary-and-fix", [*W8, "--vary", "precision=fp8", "--fix", "precision=bf16"], 2,
         ("--vary precision and --fix precision=bf16",)),
    Case("serve-seq-len", [*SERVE, "--seq-len", "4096"], 2,
         ("--seq-len is a training flag", "--mode serve", "--context")),
    Case("serve-seq-len-at-its-default", [*SERVE, "--seq-len", "8192"], 2,
         ("--seq-len is a training flag",)),
    Case("serve-global-batch", [*SERVE, "--global-batch", "64"], 2,
         ("--global-batch is a training flag",)),
    Case("serve-recompute-modules", [*SERVE, "--recompute-modules", "mlp"], 2,
         ("--recompute-modules is a training flag",)),
    Case("serve-grad-reduce", [*SERVE, "--grad-reduce", "bf16"], 2,
         ("--grad-reduce is a training flag",)),
    Case("serve-objective-cost", [*SERVE, "--objective", "cost"], 2,
         ("--objective cost is a training objective", "latency")),
    Case("serve-fix-zero", [*SERVE, "--fix", "zero=1"], 2,
         ("--fix zero", "training field", "--mode serve")),
    Case("serve-fix-dp-and-replicas", [*SERVE, "--fix", "dp=2", "--fix", "replicas=4"], 2,
         ("--fix dp=2 and --fix replicas=4 both pin replicas",)),
    Case("serve-estimate-recompute", ["estimate", "--mode", "serve", "--model", "8B", "--cluster",
                                      "hgx_h100x8", "--recompute", "full"], 2,
         ("--recompute is a training flag",)),
    Case("serve-estimate-zero", ["estimate", "--mode", "serve", "--model", "8B", "--cluster",
                                 "hgx_h100x8", "--zero", "1"], 2, ("--zero is a training flag",)),
    Case("serve-estimate-mbs", ["estimate", "--mode", "serve", "--model", "8B", "--cluster",
                                "hgx_h100x8", "--mbs", "2"], 2, ("--mbs is a training flag",)),
    Case("train-kv-cache-fraction", [*S8, "--kv-cache-fraction", "0.5"], 2,
         ("--kv-cache-fraction is a serving flag", "the mode is train")),
    Case("train-attention-dp-at-its-default", [*E8, "--attention-dp", "1"], 2,
         ("--attention-dp is a serving flag",)),
    Case("train-objective-latency", [*S8, "--objective", "latency"], 2,
         ("--objective latency needs --mode serve",)),
    # --- issue 17, third pass: absurd magnitudes are refused with their range ---------------
    Case("serve-target-absurd", [*SERVE, "--target-tokens-per-s", "1e308"], 2,
         ("--target-tokens-per-s", "'1e308'", "at most 1,000,000,000,000 tokens/s")),
    Case("serve-tpot-absurd", [*SERVE, "--tpot-ms", "1e300"], 2, ("--tpot-ms", "3,600,000 ms")),
    Case("serve-context-absurd", [*SERVE, "--context", "9" * 40], 2,
         ("--context", "from 1 to 16,777,216 tokens")),
    Case("whatif-gpus-absurd", [*W8, "--vary", "gpus=1e300"], 2,
         ("--vary gpus", "'1e300'", "from 1 to 1,048,576 (accelerators)")),
    Case("whatif-nic-absurd", [*W8, "--vary", "nic_gbps=1e300"], 2,
         ("--vary nic_gbps", "from 1 to 100,000 (gb/s")),
    Case("whatif-workers-absurd", [*W8, "--vary", "nic_gbps=400", "--workers", "9" * 30], 2,
         ("--workers", "from 1 to 1,024 processes")),
    Case("gpus-absurd", [*S8, "--gpus", "9" * 30], 2, ("--gpus", "from 1 to 1,048,576")),
    Case("target-step-absurd", [*S8, "--target-step-time", "1e300"], 2,
         ("--target-step-time", "at most 86,400 s")),
    Case("recompute-num-layers-absurd", [*E8, "--recompute", "full", "--recompute-num-layers",
                                         "9" * 30], 2, ("--recompute-num-layers", "16,384 layers")),
    Case("ddp-bucket-size-absurd", [*S8, "--ddp-bucket-size", "9" * 30], 2,
         ("--ddp-bucket-size", "1,000,000,000,000 parameters")),
    Case("ddp-bucket-size-zero", [*E8, "--ddp-bucket-size", "0"], 2,
         ("--ddp-bucket-size", "positive whole number")),
    Case("calibration-residual-absurd", [*S8, "--calibration", "{tmp}/cal.yaml"], 2,
         ("residuals.all.median_abs", "1e+300", "plausible prediction error", "0 to 10"),
         {"cal.yaml": re.sub(r"median_abs: [0-9.]+", "median_abs: 1e300", HOPPER, count=1)}),
    Case("calibration-band-bias-absurd", [*S8, "--calibration", "{tmp}/cal.yaml"], 2,
         ("heldout.bands.serving.bias", "-1e+300", "plausible prediction error"),
         {"cal.yaml": _serving_bias(HOPPER, "-1.0e+300")}),
    Case("calibration-count-absurd", [*S8, "--calibration", "{tmp}/cal.yaml"], 2,
         ("residuals.all.count", "0 to 1,000,000"),
         {"cal.yaml": re.sub(r"count: [0-9]+", "count: " + "9" * 40, HOPPER, count=1)}),
    # --- issue 17, third pass: digits other than 0-9, torus names on GPU systems ------------
    Case("tpot-arabic-digits", [*SERVE, "--tpot-ms", "٣٠"], 2, ("--tpot-ms", "not a number")),
    Case("tpot-full-width-digits", [*SERVE, "--tpot-ms", "３０"], 2, ("--tpot-ms", "not a number")),
    Case("nic-full-width-digits", [*S8, "--nic-gbps", "４００"], 2, ("--nic-gbps", "not a number")),
    Case("time-limit-underscore", [*S8, "--time-limit", "1_0"], 2, ("--time-limit", "not a number")),
    Case("fix-zero-arabic-digit", [*S8, "--fix", "zero=٢"], 2, ("--fix zero=٢", "0, 1, 2 or 3")),
    Case("whatif-arabic-digits", [*W8, "--vary", "nic_gbps=٤٠٠"], 2,
         ("--vary nic_gbps", "not a number")),
    Case("gpu-system-torus-name", ["search", "--model", "8B", "--cluster", "hgx_h100_2x4"], 2,
         ("hgx_h100_2x4", "not a torus", "write 'hgx_h100x8'")),
    Case("nvl72-torus-name", ["show", "gb200_nvl72_8x9"], 2,
         ("gb200_nvl72_8x9", "write 'gb200_nvl72x72'")),
    # --- issue 17, third pass: YAML 1.1 forms are not numbers, booleans or dates ------------
    Case("model-yaml-octal", ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"], 2,
         ("num_layers", "valid integer", "'040'"),
         {"m.yaml": LLAMA_8B.replace("num_layers: 32", "num_layers: 040")}),
    Case("model-yaml-0o-octal", ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"],
         2, ("num_layers", "'0o40'"),
         {"m.yaml": LLAMA_8B.replace("num_layers: 32", "num_layers: 0o40")}),
    Case("model-yaml-sexagesimal", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                    "hgx_h100x8"], 2, ("hidden_size", "'1:08:16'"),
         {"m.yaml": LLAMA_8B.replace("hidden_size: 4096", "hidden_size: 1:08:16")}),
    Case("model-yaml-underscores", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                    "hgx_h100x8"], 2, ("hidden_size", "'4_096'"),
         {"m.yaml": LLAMA_8B.replace("hidden_size: 4096", "hidden_size: 4_096")}),
    Case("model-yaml-yes-for-a-number", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                         "hgx_h100x8"], 2, ("num_layers", "'yes'"),
         {"m.yaml": LLAMA_8B.replace("num_layers: 32", "num_layers: yes")}),
    Case("model-yaml-binary", ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"], 2,
         ("m.yaml", "tag !!binary", "not allowed"),
         {"m.yaml": LLAMA_8B.replace("num_layers: 32", "num_layers: !!binary MzI=")}),
    Case("model-yaml-explicit-int-octal", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                           "hgx_h100x8"], 2, ("m.yaml", "'040'", "plain decimal"),
         {"m.yaml": LLAMA_8B.replace("num_layers: 32", "num_layers: !!int 040")}),
    Case("model-yaml-timestamp-tag", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                      "hgx_h100x8"], 2, ("tag !!timestamp",),
         {"m.yaml": LLAMA_8B.replace("num_layers: 32", "num_layers: !!timestamp 2025-01-01")}),
    Case("model-yaml-date-for-a-number", ["search", "--model", "{tmp}/m.yaml", "--cluster",
                                          "hgx_h100x8"], 2, ("num_layers", "'2025-01-01'"),
         {"m.yaml": LLAMA_8B.replace("num_layers: 32", "num_layers: 2025-01-01")}),
    Case("cluster-yaml-on-for-a-boolean", ["search", "--model", "8B", "--cluster", "{tmp}/c.yaml"],
         2, ("rail_optimized", "'on'"),
         {"c.yaml": OK_CLUSTER + "edits:\n  rail_optimized: on\n"}),
    Case("hf-yarn-factor-true", ["search", "--model", "{tmp}/config.json", "--cluster",
                                 "hgx_h100x8"], 2, ("rope_scaling factor must be a number", "true"),
         {"config.json": json.dumps(HF_LLAMA | {"rope_scaling": {"rope_type": "yarn",
                                                               "factor": True}})}),
    Case("validate-row-twice", ["validate", "--rows", "M1,M1"], 2,
         ("--rows lists M1 twice",)),
    Case("validate-serving-row-twice", ["validate", "--rows", "V1, V1"], 2,
         ("--rows lists V1 twice",)),
    # --- issue 17, third pass: the files a cluster file names are inputs too ----------------
    Case("placement-is-the-cluster-files-accelerator", ["search", "--model", "8B", "--cluster",
                                                        "{tmp}/c.yaml", "--placement",
                                                        "{tmp}/acc.yaml"], 2,
         ("--placement", "is the --cluster file's accelerator file"),
         {"c.yaml": OK_CLUSTER + "accelerator: ./acc.yaml\n", "acc.yaml": H100}),
    Case("graphml-is-the-cluster-files-system", ["show", "{tmp}/c.yaml", "--graphml",
                                                 "{tmp}/sys.yaml"], 2,
         ("--graphml", "is the --cluster file's system file"),
         {"c.yaml": OK_CLUSTER.replace("system: hgx_h100", "system: ./sys.yaml"),
          "sys.yaml": HGX_H100}),
    Case("graphml-too-large-prints-nothing", ["show", "hgx_h100x1048576", "--graphml",
                                              "{tmp}/g.xml"], 2, ("--graphml", "32,768")),
    # --- issue 17, third pass: a long value is cut in every message ------------------------
    Case("whatif-precision-400-digits", [*W8, "--vary", "precision=" + "9" * 400], 2,
         ("--vary precision", "unknown precision", "...")),
    Case("whatif-knob-400-digits", [*W8, "--vary", "9" * 400 + "=1"], 2, ("--vary", "key one of")),
    Case("whatif-rail-400-digits", [*W8, "--vary", "rail_optimized=" + "9" * 400], 2,
         ("rail_optimized", "true or false")),
    Case("fix-tp-400-digits", [*S8, "--fix", "tp=" + "9" * 400], 2, ("--fix tp=", "whole number")),
    Case("fix-400-digit-key", [*S8, "--fix", "9" * 400], 2, ("--fix", "key=value")),
    Case("max-twice-400-digits", [*S8, "--max", "pp=2", "--max", "pp=" + "9" * 400], 2,
         ("--max pp is given twice",)),
    Case("price-400-digits", [*M8, "--price", "9" * 400], 2, ("--price", "cluster=usd")),
    Case("kv-precision-400-digits", [*SERVE, "--kv-precision", "9" * 400], 2,
         ("unknown --kv-precision",)),
    Case("recompute-modules-400-digits", [*S8, "--recompute-modules", "9" * 400], 2,
         ("--recompute-modules",)),
]  # fmt: skip


def _materialise(case: Case, tmp: Path) -> list[str]:
    for name, content in case.files.items():
        path = tmp / name
        if callable(content):
            content(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content.replace("{tmp}", str(tmp)), encoding="utf-8")
    catalog = str(catalog_root())
    return [a.replace("{tmp}", str(tmp)).replace("{catalog}", catalog) for a in case.argv]


def test_table_has_at_least_40_distinct_cases() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    assert len({(tuple(c.argv), tuple(c.files.items())) for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile_input(case: Case, tmp_path: Path) -> None:
    argv = _materialise(case, tmp_path)
    code, out, err = run_main(argv)
    line = assert_one_line_error(code, err, case.code).lower()
    for text in case.expect:
        assert text.lower() in line, f"{text!r} not in {line!r}"
    assert re.search(r"[0-9]{41,}", line) is None, line  # a value is cut, a range stated
    if case.code == 2 and case.quiet:
        assert out == ""  # bad input prints no half-made result
    assert not (tmp_path / MARKER).exists()  # nothing in a YAML file ever ran


EXE_CASES = [
    c
    for c in CASES
    if c.id in ("cluster-yaml-python-tag", "price-absurd", "plan-newer-schema", "whatif-gpus-12")
]


@pytest.mark.parametrize("case", EXE_CASES, ids=lambda c: c.id)
def test_hostile_input_through_the_executable(case: Case, tmp_path: Path) -> None:
    argv = _materialise(case, tmp_path)
    proc = run_exe(argv)
    line = assert_one_line_error(proc.returncode, proc.stderr, case.code).lower()
    assert all(text.lower() in line for text in case.expect), line
    assert not (tmp_path / MARKER).exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_is_refused_not_read(tmp_path: Path) -> None:
    """Reading a FIFO blocks for ever: the executable (with a timeout as the guard) refuses it."""
    _fifo(tmp_path / "cal.yaml")
    _fifo(tmp_path / "p.json")
    for argv in (
        [*S8, "--calibration", str(tmp_path / "cal.yaml")],
        [*EXPORT, str(tmp_path / "p.json")],
    ):
        proc = run_exe(argv)
        assert "not a regular file" in assert_one_line_error(proc.returncode, proc.stderr, 2)


# --- the solver's time limit -------------------------------------------------------------


def test_tiny_time_limit_returns_a_plan_and_its_gap() -> None:
    """A 1 ms limit: the search still answers quickly, with the solver's status and bound."""
    start = time.perf_counter()
    argv = ["search", "--model", "70B", "--cluster", "hgx_h100x64", "--time-limit", "0.001"]
    code, out, err = run_main([*argv, "--json"])
    assert time.perf_counter() - start < 60
    assert code == 0, err
    data = json.loads(out)
    solver, best = data["solver"], data["best"]
    assert solver["status"] in ("OPTIMAL", "FEASIBLE")
    assert 0 <= solver["best_bound"] <= solver["objective"] + 1e-9
    assert solver["objective"] == pytest.approx(best["step_time_s"], abs=2e-6)
    code, out, _ = run_main(argv)
    assert code == 0
    if solver["status"] == "FEASIBLE":
        assert "time limit hit" in out and "gap" in out


def test_tiny_time_limit_serving() -> None:
    code, out, err = run_main([*SERVE, "--time-limit", "0.001", "--json"])
    assert code == 0, err
    assert json.loads(out)["best"]["fits"] is True


def test_objectives_beyond_64_bits_are_ranked() -> None:
    """The ranking is a sort: integer costs past int64 are sorted as Python integers."""
    costs = [2**62, 2**61, 2**70]
    assert rank_rows(costs, [("tp", 1), ("tp", 2), ("tp", 4)], 3) == [1, 0, 2]


# --- scale: 131,072 GPUs and a 2-trillion-parameter MoE (timed in benchmarks/) -------------


def test_scale_smoke_2t_moe_on_131072_gpus() -> None:
    """Completes with a plan; the guards are generous (bench_scale.py measures ~7 s, ~200 MiB)."""
    start = time.perf_counter()
    argv = ["search", "--model", "synthetic-moe-2t", "--cluster", "hgx_h100x131072"]
    argv += ["--seq-len", "4096", "--global-batch", "16384", "--precision", "fp8", "--json"]
    code, out, err = run_main(argv)
    elapsed = time.perf_counter() - start
    assert code == 0, err
    best = json.loads(out)["best"]
    assert best["num_gpus"] == 131072 and best["fits"] is True
    assert elapsed < 180
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert peak_kib * (1024 if sys.platform != "darwin" else 1) < 8 * 2**30


# --- issue 17: outputs, standard output, saved plans, Ctrl-C ------------------------------


def test_an_output_equal_to_an_input_leaves_the_input_intact(tmp_path: Path) -> None:
    """Each output flag pointed at each input file: exit 2, one line, the input byte-identical."""
    model, cluster, cal = tmp_path / "m.yaml", tmp_path / "c.yaml", tmp_path / "cal.yaml"
    model.write_text(LLAMA_8B, encoding="utf-8")
    cluster.write_text(OK_CLUSTER, encoding="utf-8")
    cal.write_text(HOPPER, encoding="utf-8")
    base = ["search", "--model", str(model), "--cluster", str(cluster), "--calibration", str(cal)]
    for target in (model, cluster, cal):
        before = target.read_bytes()
        for flag in ("--placement",):
            code, out, err = run_main([*base, flag, str(target)])
            assert "it would be overwritten" in assert_one_line_error(code, err, 2)
            assert out == "" and target.read_bytes() == before
        code, _, err = run_main(
            ["whatif", "--model", str(model), "--cluster", str(cluster), "--vary",
             "nic_gbps=400", "--report", str(target.with_suffix(".md"))]
        )  # fmt: skip
        assert code in (0, 2) and target.read_bytes() == before


def test_an_output_into_a_missing_folder_fails_before_the_search(tmp_path: Path) -> None:
    start = time.perf_counter()
    argv = ["search", "--model", "405B", "--cluster", "hgx_h100x16384"]
    code, out, err = run_main([*argv, "--placement", str(tmp_path / "no" / "p.csv")])
    assert "does not exist" in assert_one_line_error(code, err, 2)
    assert out == "" and time.perf_counter() - start < 1.0  # the 16,384-GPU search never ran


def test_written_outputs_are_whole_and_keep_the_umask(tmp_path: Path) -> None:
    """Written through a temporary file and a rename: no temporary left, mode as `open` gives."""
    target = tmp_path / "p.csv"
    code, _, err = run_main([*S8, "--placement", str(target)])
    assert code == 0, err
    assert target.read_text(encoding="utf-8").startswith("schema_version,rank,")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "p.csv.hostfile"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_standard_output_is_an_error_not_a_lost_plan() -> None:
    for argv in ([*S8, "--json"], ["models"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run(
                [*layout_command(), *argv], stdout=full, stderr=subprocess.PIPE, text=True,
                timeout=60, check=False,
            )  # fmt: skip
        line = assert_one_line_error(proc.returncode, proc.stderr, 2)
        assert "cannot write to standard output" in line and "No space left" in line


def test_a_closed_standard_output_is_an_error() -> None:
    proc = subprocess.run(
        [*layout_command(), "models"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, timeout=60, check=False, preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert "standard output is closed" in assert_one_line_error(proc.returncode, proc.stderr, 2)


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        ({"fits": False}, "fits=false"),
        ({"memory": {"peak_gib": 500.0}}, "peak 500 GiB"),
        ({"num_gpus": 4096}, "num_gpus 4096"),
        ({"memory": "5 GiB less activation"}, "same step time but"),
    ],
)
def test_a_tampered_saved_plan_is_refused(tmp_path: Path, edit: dict, expect: str) -> None:
    """A saved plan is re-validated against the model and cluster it names before an export."""
    code, out, err = run_main([*S8, "--json"])
    assert code == 0, err
    data = json.loads(out)
    best = data["best"]
    for key, value in edit.items():
        if isinstance(value, dict):
            best["memory"].update(value)
        elif key == "memory":  # consistent in itself: peak and parts both 5 GiB lower
            best["memory"]["peak_gib"] -= 5.0
            best["memory"]["activations_gib"] -= 5.0
        else:
            best[key] = value
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = run_main([*EXPORT, str(path)])
    assert expect in assert_one_line_error(code, err, 2)
    assert out == ""


def only_notes(err: str) -> bool:
    """Whether stderr holds nothing but the export's notes (what the plan needs of the launch,
    e.g. Megatron-FSDP's checkpoint format for a ZeRO-2 winner): no error, no warning."""
    return all(line.startswith("layout export: note: ") for line in err.splitlines() if line)


def test_an_untouched_saved_plan_still_exports(tmp_path: Path) -> None:
    code, out, err = run_main([*S8, "--json"])
    assert code == 0, err
    path = tmp_path / "p.json"
    path.write_text(out, encoding="utf-8")
    code, out, err = run_main([*EXPORT, str(path)])
    assert code == 0 and only_notes(err) and "--tensor-model-parallel-size" in out


_INTERRUPT_AFTER_A_SOLVE = """
import os, signal, sys
import planner
planner.estimate(model="8B", cluster="hgx_h100x8", layout={"pp": 2, "recompute": "full"})
# CP-SAT has split the pipeline once
try:
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(100):
        planner.search(model="8B", cluster="hgx_h100x8")
    sys.exit(3)  # the interrupt never arrived
except KeyboardInterrupt:
    sys.exit(0)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_after_a_solve_raises_keyboard_interrupt_in_the_api() -> None:
    """OR-Tools used to leave SIGINT at SIG_DFL after its first solve: the interpreter died."""
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_AFTER_A_SOLVE], capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-500:])


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_in_the_cli_prints_one_line_and_exits_130(tmp_path: Path) -> None:
    """A sweep of searches interrupted after the first solves: one line, exit 130, no report
    and no temporary file left."""
    report = tmp_path / "r.html"
    # 30 scenarios, about 11 s on a 2-core machine: the interrupt lands mid-sweep (with 15, about
    # 6.6 s, the sweep could finish and write its report just before the signal)
    argv = ["whatif", "--model", "405B", "--cluster", "hgx_h100x16384", "--vary",
            "nic_gbps=100,200,400,800,1600", "--vary", "oversubscription=1,1.5,2,2.5,3,4",
            "--report", str(report)]  # fmt: skip
    proc = subprocess.Popen(
        [*layout_command(), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(6.0)  # imports, then at least one 16,384-GPU search
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:  # a very fast machine finished the sweep first
        pytest.skip("the sweep finished before the interrupt")
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "layout: interrupted" and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


# --- issue 17, third pass: flags that --plan or --mode would ignore -----------------------


@pytest.fixture(scope="module")
def saved_plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A saved training search and a saved serving search of 8B on hgx_h100x8."""
    folder = tmp_path_factory.mktemp("plans")
    out = {}
    for mode, argv in (("train", S8), ("serve", SERVE)):
        code, text, err = run_main([*argv, "--json"])
        assert code == 0, err
        out[mode] = folder / f"{mode}.json"
        out[mode].write_text(text, encoding="utf-8")
    return out


@pytest.mark.parametrize(
    ("mode", "flags", "named"),
    [
        ("train", ["--fix", "tp=2"], "--fix"),
        ("train", ["--time-limit", "5"], "--time-limit"),
        ("train", ["--solver", "exhaustive"], "--solver"),
        ("train", ["--precision", "fp8"], "--precision"),
        ("train", ["--precision", "bf16"], "--precision"),  # even the plan's own
        ("train", ["--recompute-modules", "mlp"], "--recompute-modules"),
        ("train", ["--no-tp-overlap"], "--no-tp-overlap"),
        ("train", ["--tp-overlap"], "--tp-overlap"),
        ("train", ["--dp-overlap", "off"], "--dp-overlap"),
        ("train", ["--optimizer-state", "bf16"], "--optimizer-state"),
        ("train", ["--fp8-param-gather"], "--fp8-param-gather"),
        ("train", ["--fused-grouped-mlp"], "--fused-grouped-mlp"),
        ("train", ["--saved-tensors", "q,k"], "--saved-tensors"),
        ("train", ["--activation-offload", "0.5"], "--activation-offload"),
        ("train", ["--elementwise", "eager"], "--elementwise"),
        ("train", ["--attention-kernel", "flash2"], "--attention-kernel"),
        ("train", ["--cross-entropy", "unfused"], "--cross-entropy"),
        ("train", ["--zero-shard-group", "8"], "--zero-shard-group"),
        ("train", ["--ddp-bucket-size", "40000000"], "--ddp-bucket-size"),
        ("train", ["--reshard-after-forward", "never"], "--reshard-after-forward"),
        ("train", ["--host-sync-interval", "never"], "--host-sync-interval"),
        ("serve", ["--global-batch", "64"], "--global-batch"),
        ("serve", ["--fix", "tp=1"], "--fix"),
    ],
)
def test_export_plan_refuses_the_flags_the_plan_settles(
    saved_plans: dict[str, Path], mode: str, flags: list[str], named: str
) -> None:
    code, out, err = run_main([*EXPORT, str(saved_plans[mode]), *flags])
    line = assert_one_line_error(code, err, 2)
    assert f"{named} does not apply with --plan" in line and out == ""


def test_export_plan_keeps_the_flags_that_say_its_workload(saved_plans: dict[str, Path]) -> None:
    """--seq-len and --global-batch say which workload the plan was made for: still accepted."""
    code, out, err = run_main(
        [*EXPORT, str(saved_plans["train"]), "--seq-len", "8192", "--global-batch", "512"]
    )
    assert code == 0 and only_notes(err) and "--tensor-model-parallel-size" in out


@pytest.mark.parametrize("pin", ["replicas=2", "attention_dp=2", "dp=2", "tp=4"])
def test_serving_pins_are_legal_on_the_cli(pin: str) -> None:
    """The serving fields (replicas, attention_dp) were refused as 'not a training field'."""
    code, out, err = run_main([*SERVE, "--fix", pin, "--json"])
    assert code == 0, err
    layout = json.loads(out)["best"]["layout"]
    key, value = pin.split("=")
    assert layout[{"dp": "replicas"}.get(key, key)] == int(value)


def test_a_saved_plan_on_fewer_gpus_than_its_cluster_exports(tmp_path: Path) -> None:
    """A --gpus plan uses the first N accelerators: re-scoring it on the whole cluster refused
    it ('tp x pp x cp x dp = 8 but the cluster has 16')."""
    code, out, err = run_main(["search", "--model", "8B", "--cluster", "hgx_h100x16", "--gpus",
                               "8", "--json"])  # fmt: skip
    assert code == 0, err
    path = tmp_path / "p.json"
    path.write_text(out, encoding="utf-8")
    code, out, err = run_main([*EXPORT, str(path), "--placement", str(tmp_path / "r.csv")])
    assert code == 0 and "--tensor-model-parallel-size" in out, err
    assert len((tmp_path / "r.csv").read_text(encoding="utf-8").splitlines()) == 1 + 8


# --- issue 17, third pass: Ctrl-C during imports, standard error closed or full -----------


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("delay_s", [0.08, 0.15, 0.25, 0.35, 0.5])
def test_ctrl_c_at_any_moment_is_one_line_and_130(delay_s: float) -> None:
    """SIGINT to the process group (as a terminal sends it) while the modules load or the
    search runs: exit 130 and the one line, or the plan if it came first; never a traceback,
    an ImportError or death by the signal."""
    proc = subprocess.Popen(
        [*layout_command(), *S8], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    time.sleep(delay_s)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        assert err == "" and "layout" in out
    else:
        assert (proc.returncode, err) == (130, "layout: interrupted\n")


_INTERRUPTED_IMPORT = """
import os, signal, sys, time
from planner import interrupt
interrupt.watch()
sys.path.insert(0, sys.argv[1])
try:
    import halfway  # SIGINT lands inside its import
    time.sleep(2)
    sys.exit(3)  # the interrupt was lost
except KeyboardInterrupt:
    sys.exit(0 if sys.modules["halfway"].done and interrupt.seen() else 4)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_an_interrupt_inside_an_import_waits_for_the_import(tmp_path: Path) -> None:
    """Raised inside an import, a KeyboardInterrupt can leave a half-initialised extension
    module (ImportError, or a traceback it prints itself): it is raised once the import is done."""
    (tmp_path / "halfway.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(0.05)\n"
        "done = True\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT, str(tmp_path)], capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-500:])


_INTERRUPTED_SCRIPT = """
import gc, multiprocessing, os, signal, sys, time
from planner import interrupt
interrupt.watch()
{setup}
try:
{trigger}
    time.sleep(2)
    sys.exit(3)  # the interrupt was lost
except KeyboardInterrupt:
    sys.exit(0 if interrupt.seen() else 4)
"""
"""A script whose ``trigger`` raises SIGINT inside a callback ``setup`` defines: it exits 0 when
the KeyboardInterrupt came after the callback, 3 when it was lost, 4 when the watcher missed it."""


def _assert_interrupt_raised_after(setup: str, trigger: str) -> None:
    """Run :data:`_INTERRUPTED_SCRIPT` in a fresh interpreter: the KeyboardInterrupt came after
    the callback, and Python printed no "Exception ignored" traceback for it."""
    script = _INTERRUPTED_SCRIPT.format(setup=setup, trigger=trigger)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-500:])
    assert "Exception ignored" not in proc.stderr


_FORK_CALLBACK = """
def lands_in_the_fork():  # an at-fork callback, as logging's lock release is
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)
os.register_at_fork(after_in_parent=lands_in_the_fork)
"""
_FORK = """
    worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0.01,))
    worker.start()
    worker.join()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and fork")
def test_an_interrupt_inside_a_fork_waits_for_the_fork() -> None:
    """Raised inside an at-fork callback (the hostile pass's what-if with two workers, where
    SIGINT landed in logging's lock release as the pool forked), a KeyboardInterrupt is ignored
    with a printed traceback and the run goes on: it is raised once the fork is done."""
    _assert_interrupt_raised_after(_FORK_CALLBACK, _FORK)


_FINALIZER_CALLBACK = """
class Pipe:  # as multiprocessing's Connection, closed in its finalizer when a pool ends
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
"""
_FINALIZE = """
    Pipe()
    gc.collect()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_an_interrupt_inside_a_finalizer_waits_for_it() -> None:
    """Raised inside ``__del__`` (the hostile pass's what-if with two workers, where SIGINT
    landed in a Connection's finalizer as the pool closed), a KeyboardInterrupt is ignored with
    a printed traceback and the run exits 0: it is raised once the finalizer is done."""
    _assert_interrupt_raised_after(_FINALIZER_CALLBACK, _FINALIZE)


_WEAKREF_CALLBACK = """
import weakref
class Held:
    pass
held = Held()
def lands_in_the_callback(ref):  # a weakref callback: Python ignores what it raises
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)
watcher = weakref.ref(held, lands_in_the_callback)
"""
_DROP = """
    del held
    gc.collect()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_an_interrupt_python_cannot_raise_is_raised_after() -> None:
    """Raised where Python can only print an exception and go on (a weakref callback here; the
    hostile pass saw an export interrupted at 0.37 s print a KeyboardInterrupt traceback and exit
    0, from no import, fork or finalizer), the interrupt reaches sys.unraisablehook, which now
    raises it again a moment later instead of letting it be lost."""
    _assert_interrupt_raised_after(_WEAKREF_CALLBACK, _DROP)


def test_any_error_after_an_interrupt_is_reported_as_the_interrupt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An extension interrupted while it loads raises ImportError('initialization failed'):
    after a SIGINT, whatever the exception, the command prints the one line and exits 130."""
    from planner import interrupt

    def interrupted_import(args: object) -> int:
        interrupt._State.seen = True  # as the handler records it
        raise ImportError("initialization failed")

    monkeypatch.setattr("planner.cli._cmd_models", interrupted_import)
    code, out, err = run_main(["models"])
    assert (code, out, err) == (130, "", "layout: interrupted\n")


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        ([*S8, "--seq-len", "0"], 2),  # refused by argparse
        ([*S8, "--fix", "tp=3"], 2),  # refused by the planner
        (["search", "--model", "405B", "--cluster", "hgx_h100x8"], 1),  # nothing fits
        ([*S8], 0),
    ],
)
@pytest.mark.parametrize("stderr", ["closed", "full"])
def test_exit_codes_do_not_depend_on_standard_error(
    argv: list[str], code: int, stderr: str
) -> None:
    """`2>&-` made bad input exit 1 (writing to a missing stderr raised); `2>/dev/full` too."""
    if stderr == "full" and not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    with open("/dev/full" if stderr == "full" else os.devnull, "w") as sink:
        proc = subprocess.run(
            [*layout_command(), *argv], stdout=subprocess.DEVNULL, stderr=sink, timeout=60,
            check=False, preexec_fn=(lambda: os.close(2)) if stderr == "closed" else None,
        )  # fmt: skip
    assert proc.returncode == code


def test_a_sequence_past_a_learned_position_table_says_it_cannot_grow() -> None:
    """A rotary model's context can be extended (the refusal says how); a learned position
    table holds exactly max_context positions, and the refusal says so instead."""
    from planner.catalog import load_cluster, load_model
    from planner.errors import SpecError
    from planner.search.rules import check_workload
    from planner.specs.workload import TrainWorkload

    gpt = load_model("llama3.1-8b").model_copy(
        update={"position_embedding": "learned", "max_context": 2048}
    )
    with pytest.raises(SpecError, match="learned position table holds no more"):
        check_workload(gpt, load_cluster("hgx_h100x8"), TrainWorkload(seq_len=4096))
