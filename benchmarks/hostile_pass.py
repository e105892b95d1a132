"""A hostile pass over ``layout`` and the Python API (issue 17): a few hundred bad, tricky or
legal-but-unusual inputs, each run in a fresh folder, each checked for the "Bad input" contract
of the README (run by hand; tests/test_hostile*.py hold the cases that once failed).

    python benchmarks/hostile_pass.py                 # every case, two at a time
    python benchmarks/hostile_pass.py --only yaml     # one category
    python benchmarks/hostile_pass.py --jobs 4 -v     # more at once, every failure in full

A CLI case passes when: no traceback and no 'internal error'; the exit code is the one expected
(2 bad input, 1 nothing fits, 0 a plan; 'clean' accepts any of them); a failure is exactly one
line on stderr, a success prints only notes and warnings there; no output holds an ESC or BEL
byte or a figure of more than 40 digits; every input file is byte-identical afterwards; no
marker file appears (a command smuggled into a name or a YAML tag would create one); and the
case's own check holds (an export sourced by bash runs nothing). An API case passes when the
call returns or raises exactly SpecError or InfeasibleError with a one-line message.

Categories: injection (names and text into every output format), overwrite (outputs that are
inputs), work (unbounded work), yaml (bombs and YAML 1.1 forms), crash (odd values and paths),
nonsense (accepted but ignored), api (raw exceptions), interrupt (Ctrl-C), pins (legal pins
refused), flags (numbers and digits on the command line).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from planner.cli.options import EXPORT_FORMATS

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = [str(Path(sys.executable).with_name("layout"))]
if not Path(LAYOUT[0]).exists():
    LAYOUT = [sys.executable, "-m", "planner"]
MARKER = "PWNED"
CATALOG = [str(ROOT)]
"""The catalog root of the planner under test (its own models/ and topologies/)."""
LLAMA = (ROOT / "models" / "llama3.1-8b.yaml").read_text(encoding="utf-8")
MIXTRAL = (ROOT / "models" / "mixtral-8x7b.yaml").read_text(encoding="utf-8")
HOPPER = (ROOT / "topologies" / "calibration" / "hopper.yaml").read_text(encoding="utf-8")
H100 = (ROOT / "topologies" / "accelerators" / "h100_sxm.yaml").read_text(encoding="utf-8")
CLUSTER = "name: mine\nsystem: hgx_h100\nnum_accelerators: 8\n"
HF = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}
S8 = ["search", "--model", "8B", "--cluster", "hgx_h100x8"]
E8 = ["estimate", "--model", "8B", "--cluster", "hgx_h100x8"]
SERVE = ["search", "--mode", "serve", "--model", "8B", "--cluster", "hgx_h100x8"]
W8 = ["whatif", "--model", "8B", "--cluster", "hgx_h100x8", "--seq-len", "4096"]
PACK = [
    "pack",
    "--cluster",
    "hgx_h100x16",
    "--job",
    str(ROOT / "examples" / "fleet" / "finetune.yaml"),
]
M8 = ["migrate", "--model", "8B", "--from", "hgx_h100x8", "--to", "hgx_b200x8"]
FORMATS = EXPORT_FORMATS
"""Every format ``layout export`` offers: a new one is covered without an edit here."""

Files = dict[str, "str | bytes | Callable[[Path], None]"]


@dataclass
class Cli:
    """One command line run in a fresh folder ({tmp} in argv is that folder)."""

    id: str
    category: str
    argv: list[str]
    expect: str  # bad | infeasible | ok | clean
    files: Files = field(default_factory=dict)
    words: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()  # files the command may create or replace
    check: Callable[[Path, subprocess.CompletedProcess[str]], str] | None = None
    timeout: float = 90.0
    preexec: Callable[[], None] | None = None
    stdout_ok: bool = False  # bad input may print (whatif's table of invalid scenarios)


@dataclass
class Api:
    """One Python statement; ``expect``: error (SpecError/InfeasibleError), ok, or either."""

    id: str
    category: str
    code: str
    expect: str = "error"


def _files(tmp: Path, files: Files) -> None:
    for name, content in files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content.replace("{tmp}", str(tmp)), encoding="utf-8")


def _digest(tmp: Path) -> dict[str, str]:
    out = {}
    for path in tmp.rglob("*"):
        if path.is_file() and not path.is_symlink():
            out[str(path.relative_to(tmp))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


_NOISE = re.compile(r"^layout [a-z]+: (note|warning): |^wrote |^layout [a-z]+: wrote ")


def run_cli(case: Cli) -> str:
    """'' when the case passes, else why not."""
    with tempfile.TemporaryDirectory(prefix="hostile-") as name:
        tmp = Path(name)
        _files(tmp, case.files)
        before = _digest(tmp)
        argv = [a.replace("{tmp}", str(tmp)).replace("{catalog}", CATALOG[0]) for a in case.argv]
        try:
            proc = subprocess.run(
                [*LAYOUT, *argv],
                capture_output=True,
                text=True,
                timeout=case.timeout,
                cwd=tmp,
                preexec_fn=case.preexec,
                check=False,
                errors="replace",
            )
        except subprocess.TimeoutExpired:
            return f"ran past {case.timeout:.0f} s (unbounded work?)"
        except OSError as exc:  # the case itself cannot be run (an argument over 128 KiB)
            return f"could not start: {exc}"
        return _judge(case, tmp, before, proc)


def _judge(
    case: Cli, tmp: Path, before: dict[str, str], proc: subprocess.CompletedProcess[str]
) -> str:
    err, out, code = proc.stderr, proc.stdout, proc.returncode
    lines = err.splitlines()
    if "Traceback" in err or "internal error" in err:
        return f"crash (exit {code}): {err.strip()[-300:]}"
    expected = {"bad": {2}, "infeasible": {1}, "ok": {0}, "clean": {0, 1, 2}}[case.expect]
    if code not in expected:
        return f"exit {code}, expected {case.expect}: {err.strip()[-300:]}"
    if code in (1, 2) and len(lines) != 1:
        return f"{len(lines)} lines on stderr: {err.strip()[-300:]}"
    if code == 2 and out and not case.stdout_ok:
        return f"bad input printed {len(out)} characters on stdout"
    if code == 0 and any(not _NOISE.match(line) for line in lines):
        return f"a success wrote on stderr: {err.strip()[-300:]}"
    for stream, text in (("stdout", out), ("stderr", err)):
        if "\x1b" in text or "\x07" in text:
            return f"an escape sequence reached {stream}"
        if re.search(r"[0-9]{41,}", text):
            return f"a figure of more than 40 digits on {stream}"
    low = err.lower()
    missing = [w for w in case.words if w.lower() not in low]
    if missing:
        return f"message lacks {missing}: {err.strip()[-300:]}"
    after = _digest(tmp)
    changed = [p for p, h in before.items() if after.get(p) != h and p not in case.outputs]
    if changed:
        return f"input changed or removed: {changed}"
    if any(p.name == MARKER for p in tmp.rglob("*")) or Path(f"/tmp/{MARKER}").exists():
        return "a marker file appeared: something ran"
    if case.check is not None:
        return case.check(tmp, proc)
    return ""


# --- checks -------------------------------------------------------------------------------


def _sourced_safely(tmp: Path, proc: subprocess.CompletedProcess[str]) -> str:
    """The export, sourced by bash, defines its arrays and runs nothing (no marker file)."""
    script = tmp / "export.sh"
    script.write_text(proc.stdout, encoding="utf-8")
    run = subprocess.run(
        ["bash", "-c", f"cd {tmp} && source export.sh"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if any(p.name == MARKER for p in tmp.rglob("*")):
        return "sourcing the export ran a command"
    if run.returncode != 0:
        return f"the export is not valid bash: {run.stderr.strip()[-200:]}"
    return ""


def _toml_parses(tmp: Path, proc: subprocess.CompletedProcess[str]) -> str:
    import tomllib

    try:
        tomllib.loads(proc.stdout)
    except tomllib.TOMLDecodeError as exc:
        return f"the torchtitan export is not TOML: {exc}"
    return ""


def _yaml_parses(tmp: Path, proc: subprocess.CompletedProcess[str]) -> str:
    """A YAML export (maxtext, automodel, nanotron, accelerate) that ran loads as one mapping (a
    name the loader refuses prints nothing on stdout)."""
    import yaml

    if proc.returncode != 0:
        return ""
    try:
        loaded = yaml.safe_load(proc.stdout)
    except yaml.YAMLError as exc:
        return f"the export is not YAML: {exc}"
    return "" if isinstance(loaded, dict) else "the YAML export is not a mapping"


def _json_parses(tmp: Path, proc: subprocess.CompletedProcess[str]) -> str:
    try:
        json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        return f"stdout is not JSON: {exc}"
    return ""


def _report_inert(tmp: Path, proc: subprocess.CompletedProcess[str]) -> str:
    for path in list(tmp.glob("*.html")) + list(tmp.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if "<script>alert" in text or "<img src=x" in text:
            return f"{path.name} carries live markup from a name"
        if path.suffix == ".md" and re.search(r"^#+ evil", text, re.M):
            return f"{path.name}: a name forged a heading"
    return ""


def _hostfile_lines(tmp: Path, proc: subprocess.CompletedProcess[str]) -> str:
    for path in tmp.glob("*.hostfile"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#") and not re.fullmatch(r"\S+ slots=\d+", line):
                return f"hostfile line {line!r}"
    return ""


def _both(*checks: Callable[[Path, subprocess.CompletedProcess[str]], str]):  # type: ignore[no-untyped-def]
    def check(tmp: Path, proc: subprocess.CompletedProcess[str]) -> str:
        return next((r for c in checks if (r := c(tmp, proc))), "")

    return check


# --- cases --------------------------------------------------------------------------------

HOSTILE_NAMES = [
    f"x\ntouch {MARKER}\n",
    f"x; touch {MARKER}",
    f"$(touch {MARKER})",
    f"`touch {MARKER}`",
    "\x1b]0;owned\x07",
    "\x1b[31mred",
    "# evil heading",
    "a|b|c",
    "<script>alert(1)</script>",
    "\u202eevil",
    "x" * 300,
    "a'b",
    'a"b',
    "a\\b",
    "--help",
    "-rf",
    "a (b) = c",
    "x,y",
    "org/model",
    "a:b@c",
    "=x",
    "  padded  ",
    "",
    "\t",
    "名前",
    "x\u200by",
]
"""Names and free text a user file may hold: those outside the name rules are refused at load;
those inside (parentheses, '=', ',', '/', '@', a leading '-') must be quoted wherever written."""


def _yaml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def injection_cases() -> list[Cli]:
    cases: list[Cli] = []
    for i, name in enumerate(HOSTILE_NAMES):
        model = LLAMA.replace("name: llama3.1-8b", f"name: {_yaml_str(name)}")
        files = {"m.yaml": model}
        base = ["--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"]
        for fmt in FORMATS:
            check = {
                "megatron": _sourced_safely,
                "bridge": _sourced_safely,
                "torchtitan": _toml_parses,
                "deepspeed": _json_parses_if_ok,
                "maxtext": _yaml_parses,
                "automodel": _yaml_parses,
                "nanotron": _yaml_parses,
                "accelerate": _yaml_parses,
            }.get(fmt)
            cases.append(
                Cli(
                    f"name{i}-export-{fmt}",
                    "injection",
                    ["export", "--format", fmt, *base],
                    "clean",
                    files,
                    check=check,
                )
            )
        cases.append(Cli(f"name{i}-search-text", "injection", ["search", *base], "clean", files))
        cases.append(
            Cli(
                f"name{i}-search-json",
                "injection",
                ["search", *base, "--json"],
                "clean",
                files,
                check=_json_parses_if_ok,
            )
        )
        migrate = ["migrate", "--model", "{tmp}/m.yaml", "--from", "hgx_h100x8", "--to",
                   "hgx_b200x8"]  # fmt: skip
        for kind, argv in (
            ("search", ["search", *base]),
            ("estimate", ["estimate", *base, "--tp", "2"]),
            ("migrate", migrate),
            ("whatif", ["whatif", *base, "--vary", "nic_gbps=200,400"]),
        ):
            cases.append(
                Cli(
                    f"name{i}-{kind}-reports",
                    "injection",
                    [*argv, "--seq-len", "4096", "--report", "{tmp}/r.html", "--report",
                     "{tmp}/r.md"],
                    "clean",
                    files,
                    outputs=("r.html", "r.md"),
                    check=_report_inert,
                )
            )  # fmt: skip
        cases.append(
            Cli(
                f"name{i}-placement",
                "injection",
                ["search", *base, "--placement", "{tmp}/p.csv"],
                "clean",
                files,
                outputs=("p.csv", "p.hostfile"),
                check=_hostfile_lines,
            )
        )
        cluster = CLUSTER.replace("name: mine", f"name: {_yaml_str(name)}")
        cases.append(
            Cli(
                f"cluster-name{i}-show",
                "injection",
                ["show", "{tmp}/c.yaml"],
                "clean",
                {"c.yaml": cluster},
            )
        )
        cases.append(
            Cli(
                f"cluster-name{i}-export",
                "injection",
                ["export", "--format", "megatron", "--model", "8B", "--cluster", "{tmp}/c.yaml"],
                "clean",
                {"c.yaml": cluster},
                check=_sourced_safely,
            )
        )
    for i, text in enumerate(
        [
            f"$(touch {MARKER})",
            f"x\ntouch {MARKER}",
            "<script>alert(1)</script>",
            "# evil heading",
            "\x1b[2J",
            f"https://huggingface.co/a/b$(touch {MARKER})",
        ]
    ):
        model = LLAMA.replace(
            "source: https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
            f"source: {_yaml_str(text)}",
        )
        for fmt in ("megatron", "vllm", "sglang", "bridge"):
            cases.append(
                Cli(
                    f"source{i}-export-{fmt}",
                    "injection",
                    [
                        "export",
                        "--format",
                        fmt,
                        "--model",
                        "{tmp}/m.yaml",
                        "--cluster",
                        "hgx_h100x8",
                    ],
                    "clean",
                    {"m.yaml": model},
                    check=_sourced_safely if fmt in ("megatron", "bridge") else None,
                )
            )
    # a Hugging Face config in a folder whose name would be a command
    folder = f"x$(touch {MARKER})"
    cases.append(
        Cli(
            "hf-folder-name",
            "injection",
            [
                "export",
                "--format",
                "megatron",
                "--model",
                f"{{tmp}}/{folder}/config.json",
                "--cluster",
                "hgx_h100x8",
            ],
            "clean",
            {f"{folder}/config.json": json.dumps(HF)},
            check=_sourced_safely,
        )
    )
    return cases


def _json_parses_if_ok(tmp: Path, proc: subprocess.CompletedProcess[str]) -> str:
    return _json_parses(tmp, proc) if proc.returncode == 0 else ""


def overwrite_cases() -> list[Cli]:
    cases: list[Cli] = []
    acc_cluster = CLUSTER + "accelerator: ./acc.yaml\n"
    inputs = {
        "m.yaml": LLAMA,
        "c.yaml": acc_cluster,
        "acc.yaml": H100,
        "cal.yaml": HOPPER,
        "l.yaml": "tp: 2\n",
    }
    base = [
        "--model",
        "{tmp}/m.yaml",
        "--cluster",
        "{tmp}/c.yaml",
        "--calibration",
        "{tmp}/cal.yaml",
    ]
    for target in [t for t in inputs if t != "l.yaml"]:  # (l.yaml is migrate's input only)
        for spelling in (
            f"{{tmp}}/{target}",
            f"{{tmp}}/./{target}",
            f"{{tmp}}/sub/../{target}",
            target,
        ):
            files = {**inputs, "sub/.keep": ""}
            cases.append(
                Cli(
                    f"placement-onto-{target}-{spelling[:8]}",
                    "overwrite",
                    ["search", *base, "--placement", spelling],
                    "bad",
                    files,
                )
            )
            cases.append(
                Cli(
                    f"report-onto-{target}-{spelling[:8]}",
                    "overwrite",
                    [
                        "whatif",
                        *base,
                        "--vary",
                        "nic_gbps=400",
                        "--report",
                        spelling.replace(".yaml", ".yaml"),
                    ],
                    "bad",
                    files,
                )
            )
        cases.append(
            Cli(
                f"symlink-onto-{target}",
                "overwrite",
                ["search", *base, "--placement", "{tmp}/link.csv"],
                "bad",
                {**inputs, "link.csv": lambda p, t=target: p.symlink_to(p.parent / t)},
            )
        )
    cases.append(
        Cli(
            "hostfile-onto-cluster",
            "overwrite",
            [
                "search",
                "--model",
                "8B",
                "--cluster",
                "{tmp}/c.csv.hostfile",
                "--placement",
                "{tmp}/c.csv",
            ],
            "bad",
            {"c.csv.hostfile": CLUSTER},  # c.csv's hostfile is c.csv.hostfile
        )
    )
    plan_files = {"p.json": "{plan}"}
    for flag in ("--placement",):
        cases.append(
            Cli(
                "export-placement-onto-plan",
                "overwrite",
                ["export", "--format", "megatron", "--plan", "{tmp}/p.json", flag, "{tmp}/p.json"],
                "bad",
                plan_files,
            )
        )
    cases.append(
        Cli(
            "migrate-layout-is-not-overwritten",
            "overwrite",
            [*M8, "--layout", "{tmp}/l.yaml"],
            "clean",
            {"l.yaml": "tp: 2\n"},
        )
    )
    cases.append(
        Cli(
            "graphml-onto-cluster",
            "overwrite",
            ["show", "{tmp}/c.yaml", "--graphml", "{tmp}/c.yaml"],
            "bad",
            inputs,
        )
    )
    cases.append(
        Cli(
            "graphml-onto-its-accelerator",
            "overwrite",
            ["show", "{tmp}/c.yaml", "--graphml", "{tmp}/acc.yaml"],
            "bad",
            inputs,
        )
    )
    cases.append(
        Cli(
            "markdown-onto-model",
            "overwrite",
            ["validate", "--rows", "S1", "--markdown", "{tmp}/m.yaml"],
            "clean",
            inputs,
            outputs=("m.yaml",),
        )
    )
    cases.append(
        Cli(
            "out-onto-calibration",
            "overwrite",
            [
                "calibrate",
                "--measure",
                "--dry-run",
                "--out",
                "{tmp}/cal.yaml",
                "--accelerator",
                "h100_sxm",
            ],
            "clean",
            inputs,
            outputs=("cal.yaml",),
            timeout=240,
        )
    )
    cases.append(
        Cli(
            "report-twice",
            "overwrite",
            [*W8, "--vary", "nic_gbps=400", "--report", "{tmp}/r.md", "--report", "{tmp}/r.md"],
            "bad",
        )
    )
    cases.append(
        Cli(
            "report-into-catalog",
            "overwrite",
            [*W8, "--vary", "nic_gbps=400", "--report", "{catalog}/models/llama3.1-8b.md"],
            "bad",
        )
    )
    cases.append(Cli("placement-dev-null", "overwrite", [*S8, "--placement", "/dev/null"], "bad"))
    cases.append(
        Cli("placement-dev-stdout", "overwrite", [*S8, "--placement", "/dev/stdout"], "bad")
    )
    cases.append(
        Cli("placement-into-missing", "overwrite", [*S8, "--placement", "{tmp}/no/p.csv"], "bad")
    )
    cases.append(
        Cli(
            "placement-read-only-folder",
            "overwrite",
            [*S8, "--placement", "{tmp}/ro/p.csv"],
            "clean",
            {"ro/.keep": "", "ro": lambda p: p.chmod(0o555)},
        )
    )
    return cases


def _values(n: int, start: int = 100) -> str:
    return ",".join(str(start + i) for i in range(n))


def work_cases() -> list[Cli]:
    cases = [
        Cli(
            "three-lists-of-1000",
            "work",
            [
                *W8,
                "--vary",
                f"nic_gbps={_values(1000)}",
                "--vary",
                f"hbm_gb={_values(1000, 40)}",
                "--vary",
                f"power_cap_w={_values(1000, 400)}",
            ],
            "bad",
            timeout=30,
        ),
        Cli(
            "one-list-of-20000",
            "work",
            [*W8, "--vary", f"nic_gbps={_values(20_000, 101)}"],
            "bad",
            timeout=30,
        ),  # (one argument may hold at most 128 KiB on Linux)
        Cli(
            "max-scenarios-absurd",
            "work",
            [*W8, "--vary", "nic_gbps=400", "--max-scenarios", "9" * 30],
            "bad",
        ),
        Cli(
            "workers-absurd", "work", [*W8, "--vary", "nic_gbps=400", "--workers", "100000"], "bad"
        ),
        Cli("workers-many", "work", [*W8, "--vary", "nic_gbps=400", "--workers", "512"], "ok"),
        Cli("top-huge", "work", [*S8, "--top", "9" * 30], "ok"),
        Cli("fix-repeated-10000", "work", [*S8, *["--fix", "tp=2"] * 10_000], "bad"),
        Cli(
            "report-repeated-500",
            "work",
            [
                *W8,
                "--vary",
                "nic_gbps=400",
                *(a for i in range(500) for a in ("--report", f"{{tmp}}/r{i}.md")),
            ],
            "ok",
            outputs=tuple(f"r{i}.md" for i in range(500)),
            timeout=120,
        ),
        Cli(
            "huge-cluster-tiny-limit",
            "work",
            ["search", "--model", "405B", "--cluster", "hgx_h100x1048576", "--time-limit", "0.01"],
            "clean",
            timeout=120,
        ),
        Cli(
            "yaml-50k-values",
            "work",
            ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"],
            "bad",
            {"m.yaml": "extra: [" + ",".join(["1"] * 60_000) + "]\n"},
            timeout=30,
        ),
        Cli(
            "yaml-15mb-string",
            "work",
            ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"],
            "bad",
            {"m.yaml": LLAMA + "extra: " + "x" * (15 * 2**20) + "\n"},
            timeout=60,
        ),
        Cli(
            "json-deep",
            "work",
            ["search", "--model", "{tmp}/config.json", "--cluster", "hgx_h100x8"],
            "bad",
            {"config.json": "[" * 200_000 + "]" * 200_000},
            timeout=30,
        ),
        Cli(
            "yaml-many-documents",
            "work",
            ["search", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"],
            "bad",
            {"m.yaml": "---\na: 1\n" * 20_000},
            timeout=30,
        ),
        Cli(
            "graphml-huge",
            "work",
            ["show", "hgx_h100x1048576", "--graphml", "{tmp}/g.xml"],
            "bad",
            timeout=60,
        ),
        Cli("show-huge", "work", ["show", "hgx_h100x1048576"], "ok", timeout=60),
        Cli(
            "tpu-huge",
            "work",
            ["search", "--model", "8B", "--cluster", "tpu_v5p_64x64x64"],
            "clean",
            timeout=120,
        ),
        Cli("long-vary-text", "work", [*W8, "--vary", "nic_gbps=" + "1" * 100_000], "bad"),
        Cli(
            "long-model-name",
            "work",
            ["search", "--model", "m" * 100_000, "--cluster", "hgx_h100x8"],
            "bad",
        ),
    ]
    return cases


BILLION = "laughs:\n" + "".join(
    f"  {k}: &{k} [{', '.join([f'*{p}' if p else '1'] * 9)}]\n"
    for p, k in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)
QUADRATIC = "a: &a " + "x" * 100_000 + "\nb: [" + ", ".join(["*a"] * 5000) + "]\n"


def yaml_cases() -> list[Cli]:
    cases: list[Cli] = []
    targets = {
        "model": (["search", "--model", "{tmp}/f.yaml", "--cluster", "hgx_h100x8"], LLAMA),
        "cluster": (["search", "--model", "8B", "--cluster", "{tmp}/f.yaml"], CLUSTER),
        "calibration": ([*S8, "--calibration", "{tmp}/f.yaml"], HOPPER),
        "layout": ([*M8, "--layout", "{tmp}/f.yaml"], "tp: 2\n"),
        "accelerator": (["search", "--model", "8B", "--cluster", "{tmp}/c.yaml"], H100),
    }
    bombs = {
        "billion-laughs": lambda text: BILLION + text,
        "quadratic": lambda text: QUADRATIC + text,
        "self-alias": lambda text: "z: &z [*z]\n" + text,
        "python-tag": lambda text: (
            f'z: !!python/object/apply:os.system ["touch {MARKER}"]\n' + text
        ),
        "python-name": lambda text: "z: !!python/name:os.system\n" + text,
        "custom-tag": lambda text: "z: !evil 1\n" + text,
        "binary": lambda text: "z: !!binary aGVsbG8=\n" + text,
        "set": lambda text: "z: !!set {a}\n" + text,
        "merge": lambda text: "<<: {z: 1}\n" + text,
        "duplicate": lambda text: text + text.splitlines()[-1] + "\n",
        "two-documents": lambda text: text + "---\n" + text,
        "tabs": lambda text: "z:\n\t- 1\n" + text,
        "bom": lambda text: "\ufeff" + text,
        "nul": lambda text: text + "z: a\x00b\n",
        "nested-deep": lambda text: "z: " + "[" * 5000 + "]" * 5000 + "\n" + text,
        "long-key": lambda text: ("k" * 100_000) + ": 1\n" + text,
        "anchor-only": lambda text: "&a\n",
        "not-a-mapping": lambda text: "- 1\n- 2\n",
        "scalar": lambda text: "42\n",
    }
    for target, (argv, text) in targets.items():
        for bomb, make in bombs.items():
            body = make(text)
            files = {"f.yaml": body}
            if target == "accelerator":
                files = {"c.yaml": CLUSTER + "accelerator: ./f.yaml\n", "f.yaml": body}
            expect = "clean" if bomb == "bom" else "bad"  # a BOM may open a YAML stream
            cases.append(Cli(f"{target}-{bomb}", "yaml", argv, expect, files, timeout=30))
    number_forms = [
        "yes",
        "no",
        "on",
        "off",
        "017",
        "0o17",
        "0x20",
        "0b100000",
        "1:00:00",
        "32_0",
        "2025-01-01",
        "2025-01-01 10:00:00",
        ".inf",
        ".nan",
        "~",
        "!!binary MzI=",
        "!!int 040",
        "!!timestamp 2025-01-01",
        "3.2e1",
        "+32",
        "32.0",
    ]
    for form in number_forms:
        ok = form in ("3.2e1", "+32", "32.0")
        cases.append(
            Cli(
                f"model-num_layers-{form}",
                "yaml",
                ["estimate", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8", "--tp", "2"],
                "clean" if ok else "bad",
                {"m.yaml": LLAMA.replace("num_layers: 32", f"num_layers: {form}")},
            )
        )
        cases.append(
            Cli(
                f"cluster-count-{form}",
                "yaml",
                ["show", "{tmp}/c.yaml"],
                "clean" if ok else "bad",
                {"c.yaml": CLUSTER.replace("num_accelerators: 8", f"num_accelerators: {form}")},
            )
        )
    for form in ("yes", "no", "on", "off", "1", "0", "'true'"):
        cases.append(
            Cli(
                f"model-bool-{form}",
                "yaml",
                ["estimate", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"],
                "bad",
                {"m.yaml": LLAMA.replace("tied_embeddings: false", f"tied_embeddings: {form}")},
            )
        )
        cases.append(
            Cli(
                f"cluster-edit-bool-{form}",
                "yaml",
                ["show", "{tmp}/c.yaml"],
                "bad",
                {"c.yaml": CLUSTER + f"edits:\n  rail_optimized: {form}\n"},
            )
        )
    for name in ("no", "on", "1:00", "2025-01-01", "017"):
        cases.append(
            Cli(
                f"name-{name}",
                "yaml",
                ["estimate", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8"],
                "clean",
                {"m.yaml": LLAMA.replace("name: llama3.1-8b", f"name: {name}")},
            )
        )
    hf_bad = {
        "factor-true": {"rope_type": "yarn", "factor": True},
        "factor-text": {"rope_type": "yarn", "factor": "32"},
        "factor-huge": {"rope_type": "yarn", "factor": 1e300},
        "mscale-null-ok": {"rope_type": "yarn", "factor": 4.0, "mscale": None},
        "attention-factor-zero": {"rope_type": "yarn", "attention_factor": 0},
        "scaling-list": ["yarn"],
    }
    for key, scaling in hf_bad.items():
        cases.append(
            Cli(
                f"hf-rope-{key}",
                "yaml",
                ["search", "--model", "{tmp}/config.json", "--cluster", "hgx_h100x8"],
                "clean" if key.endswith("-ok") else "bad",
                {"config.json": json.dumps({**HF, "rope_scaling": scaling})},
            )
        )
    rope_parameters: dict[str, tuple[object, str]] = {  # transformers 5's spelling of the RoPE
        "v5-llama3-ok": ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
                          "rope_theta": 500000.0}, "clean"),
        "per-layer-ok": ({"full_attention": {"rope_theta": 1e6},
                          "sliding_attention": {"rope_theta": 1e4}}, "clean"),
        "per-layer-conflict": ({"a": {"rope_theta": 1e6}, "b": {"rope_theta": 1e4}}, "bad"),
        "list": (["yarn"], "bad"),
        "type-object": ({"rope_type": {"yarn": 1}}, "bad"),
        "theta-contradicts": ({"rope_theta": 1.0}, "bad"),
    }  # fmt: skip
    for key, (params, expect) in rope_parameters.items():
        plain = {k: v for k, v in HF.items() if k not in ("rope_theta", "rope_scaling")}
        base = {**HF, "rope_theta": 500000.0} if key == "theta-contradicts" else plain
        cases.append(
            Cli(
                f"hf-rope-parameters-{key}",
                "yaml",
                ["search", "--model", "{tmp}/config.json", "--cluster", "hgx_h100x8"],
                expect,
                {"config.json": json.dumps({**base, "rope_parameters": params})},
            )
        )
    for key, value in {
        "hidden_size": True,
        "num_hidden_layers": "32",
        "vocab_size": 1e300,
        "num_attention_heads": 0,
        "intermediate_size": -1,
        "max_position_embeddings": 10**30,
        "num_key_value_heads": 5,
    }.items():
        cases.append(
            Cli(
                f"hf-{key}",
                "yaml",
                ["search", "--model", "{tmp}/config.json", "--cluster", "hgx_h100x8"],
                "bad",
                {"config.json": json.dumps({**HF, key: value})},
            )
        )
    for name, text in {
        "nan": '{"best": NaN}',
        "inf": '{"a": Infinity}',
        "dup": '{"a":1,"a":2}',
        "digits": '{"a": ' + "9" * 5000 + "}",
        "bom": "\ufeff{}",
        "empty-obj": "{}",
        "list": "[]",
        "trailing": '{"a": 1},',
    }.items():
        cases.append(
            Cli(
                f"json-{name}",
                "yaml",
                ["search", "--model", "{tmp}/config.json", "--cluster", "hgx_h100x8"],
                "bad",
                {"config.json": text},
            )
        )
        cases.append(
            Cli(
                f"plan-{name}",
                "yaml",
                ["export", "--format", "megatron", "--plan", "{tmp}/p.json"],
                "bad",
                {"p.json": text},
            )
        )
    return cases


def crash_cases() -> list[Cli]:
    cases: list[Cli] = []
    paths = {
        "dev-zero": "/dev/zero",
        "dev-null": "/dev/null",
        "proc": "/proc/self/status",
        "dir": "{tmp}",
        "missing": "{tmp}/missing.yaml",
        "nul-name": "{tmp}/a\\x00b.yaml",
        "long": "{tmp}/" + "a" * 5000 + ".yaml",
        "deep": "{tmp}/" + "a/" * 2000 + "m.yaml",
        "dash": "-",
        "broken-link": "{tmp}/broken.yaml",
        "unreadable": "{tmp}/secret.yaml",
        "binary": "{tmp}/bin.yaml",
        "latin1": "{tmp}/latin.yaml",
        "utf16": "{tmp}/u16.yaml",
    }
    files: Files = {
        "broken.yaml": lambda p: p.symlink_to(p.parent / "nowhere"),
        "secret.yaml": lambda p: (p.write_text(LLAMA), p.chmod(0)),  # type: ignore[func-returns-value]
        "bin.yaml": bytes(range(256)) * 10,
        "latin.yaml": LLAMA.replace("name: llama3.1-8b", "name: caf\xe9").encode("latin-1"),
        "u16.yaml": LLAMA.encode("utf-16"),
    }
    for name, path in paths.items():
        root = os.geteuid() == 0 and name == "unreadable"
        cases.append(
            Cli(
                f"model-path-{name}",
                "crash",
                ["search", "--model", path, "--cluster", "hgx_h100x8"],
                "clean" if root else "bad",
                files,
            )
        )
        cases.append(
            Cli(
                f"cluster-path-{name}",
                "crash",
                ["search", "--model", "8B", "--cluster", path],
                "bad",
                files,
            )
        )
        cases.append(
            Cli(
                f"calibration-path-{name}",
                "crash",
                [*S8, "--calibration", path],
                "clean" if root else "bad",
                files,
            )
        )
        cases.append(
            Cli(
                f"plan-path-{name}",
                "crash",
                ["export", "--format", "vllm", "--plan", path],
                "bad",
                files,
            )
        )
    for cluster in [
        "hgx_h100x²",
        "hgx_h100x٨",
        "hgx_h100x８",
        "hgx_h100x-8",
        "hgx_h100x+8",
        "hgx_h100x8.0",
        "hgx_h100x 8",
        "hgx_h100x0x8",
        "HGX_H100X8",
        "hgx_h100x08",
        "tpu_v5p_0x4x4",
        "tpu_v5p_4x4x4x4",
        "tpu_v5p_1e3x4x4",
        "hgx_h100_2x4",
        "mi300x_1x8",
        "tpu_v4x0",
        "tpu_v4x3",
        "gb200_nvl72x1",
        "x",
        "hgx_h100x8/",
        "../hgx_h100x8",
        "hgx_h100x8\n",
        " hgx_h100x8 ",
    ]:
        cases.append(
            Cli(
                f"cluster-{cluster!r}",
                "crash",
                ["search", "--model", "8B", "--cluster", cluster],
                "clean",
            )
        )
    for model in [
        "8b",
        "8B ",
        "70b",
        "LLAMA3.1-8B",
        "llama3.1-8b.yaml",
        "models/llama3.1-8b",
        "8×B",
        "８B",
        "-8B",
        "",
        "\x00",
    ]:
        if "\x00" in model:
            continue
        cases.append(
            Cli(
                f"model-{model!r}",
                "crash",
                ["search", "--model", model, "--cluster", "hgx_h100x8"],
                "clean",
            )
        )
    fields = {
        "hidden_size": ["0", "-1", "1", "3", "1e9", "4096.5"],
        "num_attention_heads": ["0", "7", "4096"],
        "num_kv_heads": ["0", "3", "64"],
        "head_dim": ["0", "1", "100000"],
        "vocab_size": ["0", "1", "99999999999"],
        "num_layers": ["0", "1", "100000"],
        "ffn_hidden_size": ["0", "1"],
        "max_context": ["0", "1", "1e30"],
        "ffn_activation": ["relu", "'x'", "[]"],
        "position_embedding": ["alibi2"],
        "norm": ["batchnorm"],
    }
    for key, values in fields.items():
        for value in values:
            text = re.sub(rf"^{key}: .*$", f"{key}: {value}", LLAMA, flags=re.M)
            cases.append(
                Cli(
                    f"model-{key}-{value}",
                    "crash",
                    ["estimate", "--model", "{tmp}/m.yaml", "--cluster", "hgx_h100x8", "--tp", "2"],
                    "clean",
                    {"m.yaml": text},
                )
            )
    acc_fields = {
        "hbm_GiB": ["0", "1e300", "-80"],
        "peak_bf16_TFLOP_per_s": ["0", "1e300"],
        "tdp_w": ["0", "1e300"],
    }
    for key, values in acc_fields.items():
        for value in values:
            text = re.sub(rf"^(\s*){key}: .*$", rf"\g<1>{key}: {value}", H100, flags=re.M)
            cases.append(
                Cli(
                    f"accelerator-{key}-{value}",
                    "crash",
                    ["search", "--model", "8B", "--cluster", "{tmp}/c.yaml"],
                    "clean",
                    {"c.yaml": CLUSTER + "accelerator: ./acc.yaml\n", "acc.yaml": text},
                )
            )
    for key, value in {
        "nic_gbps": "1e300",
        "hbm_gb": "1e-300",
        "power_cap_w": "1",
        "domain_size": "3",
        "price_per_gpu_hour": "0",
        "nics_per_gpu": "1e300",
        "bogus": "1",
    }.items():
        cases.append(
            Cli(
                f"cluster-edit-{key}",
                "crash",
                ["show", "{tmp}/c.yaml"],
                "bad",
                {"c.yaml": CLUSTER + f"edits:\n  {key}: {value}\n"},
            )
        )
    return cases


def nonsense_cases() -> list[Cli]:
    flag_values = {  # (--precision is the serving weights' format too)
        "--seq-len": "4096",
        "--global-batch": "64",
        "--global-batch-tokens": "1M",
        "--recompute-modules": "mlp",
        "--recompute-num-layers": "2",
        "--moe-dispatcher": "deepep",
        "--grad-reduce": "bf16",
    }
    switches = ["--ep-overlap", "--moe-cuda-graphs", "--no-sequence-parallel", "--no-tp-overlap"]
    cases: list[Cli] = []
    for flag, value in flag_values.items():
        cases.append(Cli(f"serve{flag}", "nonsense", [*SERVE, flag, value], "bad", words=(flag,)))
        cases.append(
            Cli(
                f"serve-estimate{flag}",
                "nonsense",
                [
                    "estimate",
                    "--mode",
                    "serve",
                    "--model",
                    "8B",
                    "--cluster",
                    "hgx_h100x8",
                    flag,
                    value,
                ],
                "bad",
                words=(flag,),
            )
        )
    for flag in switches:
        cases.append(Cli(f"serve{flag}", "nonsense", [*SERVE, flag], "bad", words=(flag,)))
    for flag, value in {
        "--recompute": "full",
        "--zero": "3",
        "--vpp": "2",
        "--cp": "2",
        "--etp": "2",
        "--mbs": "2",
    }.items():
        cases.append(
            Cli(
                f"serve-estimate{flag}",
                "nonsense",
                [
                    "estimate",
                    "--mode",
                    "serve",
                    "--model",
                    "8B",
                    "--cluster",
                    "hgx_h100x8",
                    flag,
                    value,
                ],
                "bad",
                words=(flag,),
            )
        )
    serve_only = {
        "--context": "4096",
        "--prompt-len": "100",
        "--output-len": "100",
        "--concurrency": "8",
        "--kv-precision": "fp8",
        "--compute-precision": "fp8",
        "--tpot-ms": "30",
        "--ttft-ms": "500",
        "--target-tokens-per-s": "1000",
        "--kv-cache-fraction": "0.5",
    }
    for flag, value in serve_only.items():
        cases.append(Cli(f"train{flag}", "nonsense", [*S8, flag, value], "bad", words=(flag,)))
        cases.append(Cli(f"estimate{flag}", "nonsense", [*E8, flag, value], "bad", words=(flag,)))
    cases.append(Cli("train-attention-dp", "nonsense", [*E8, "--attention-dp", "2"], "bad"))
    for objective in ("cost", "energy"):
        cases.append(
            Cli(
                f"serve-objective-{objective}",
                "nonsense",
                [*SERVE, "--objective", objective],
                "bad",
            )
        )
    for objective in ("time", "latency"):
        cases.append(
            Cli(
                f"serve-objective-{objective}", "nonsense", [*SERVE, "--objective", objective], "ok"
            )
        )
    cases.append(Cli("train-objective-latency", "nonsense", [*S8, "--objective", "latency"], "bad"))
    pipelined = [*E8, "--pp", "2", "--vpp", "2", "--dp", "4", "--mbs", "1", "--global-batch", "16"]
    pipelined += ["--recompute", "full"]  # GPipe holds every micro-batch: few, recomputed
    for schedule, framework, expect in (
        ("zero-bubble", "megatron", "bad"),  # no such schedule in Megatron-LM: one line
        ("dualpipe", "torchtitan", "bad"),
        ("zero-bubble", "torchtitan", "ok"),
        ("gpipe", "megatron", "bad"),
        ("gpipe", "maxtext", "ok"),
        ("1f1b", "maxtext", "bad"),  # MaxText's pipeline is GPipe-like
        ("zerobubble", "torchtitan", "bad"),  # not a choice
    ):
        cases.append(
            Cli(
                f"pipeline-schedule-{schedule}-{framework}",
                "nonsense",
                [*pipelined, "--framework", framework, "--pipeline-schedule", schedule],
                expect,
            )
        )
    knob_flags = {
        "nic_gbps": ["--nic-gbps", "200"],
        "nics_per_gpu": ["--nics-per-gpu", "2"],
        "oversubscription": ["--oversubscription", "2"],
        "rail_optimized": ["--no-rail-optimized"],
        "domain_size": ["--domain-size", "8"],
        "price_per_gpu_hour": ["--price-per-gpu-hour", "3"],
        "hbm_gb": ["--hbm-gb", "96"],
        "hbm_tbps": ["--hbm-tbps", "3"],
        "power_cap_w": ["--power-cap-w", "600"],
        "seq_len": ["--seq-len", "2048"],
        "global_batch": ["--global-batch", "64"],
        "precision": ["--precision", "fp8"],
        "ep_overlap": ["--ep-overlap"],
        "moe_dispatcher": ["--moe-dispatcher", "deepep"],
        "moe_cuda_graphs": ["--moe-cuda-graphs"],
    }
    knob_values = {
        "rail_optimized": "true,false",
        "precision": "bf16,fp8",
        "ep_overlap": "true,false",
        "moe_dispatcher": "alltoall,deepep",
        "moe_cuda_graphs": "true,false",
        "seq_len": "4096",
        "global_batch": "128",
        "domain_size": "4,8",
        "hbm_gb": "80,96",
        "power_cap_w": "500,700",
        "hbm_tbps": "3,4",
    }
    w8 = ["whatif", "--model", "8B", "--cluster", "hgx_h100x8"]
    for knob, flag in knob_flags.items():
        values = knob_values.get(knob, "200,400")
        cases.append(
            Cli(
                f"whatif-vary-{knob}-and-flag",
                "nonsense",
                [*w8, "--vary", f"{knob}={values}", *flag],
                "bad",
                words=(f"--vary {knob}", flag[0]),
            )
        )
    cases.append(
        Cli(
            "whatif-vary-and-fix",
            "nonsense",
            [*w8, "--vary", "precision=fp8", "--fix", "precision=bf16"],
            "bad",
        )
    )
    cases.append(
        Cli(
            "whatif-vary-edit-in-cluster-file",
            "nonsense",
            ["whatif", "--model", "8B", "--cluster", "{tmp}/c.yaml", "--vary", "nic_gbps=200,400"],
            "ok",
            {"c.yaml": CLUSTER + "edits:\n  nic_gbps: 800\n"},
        )
    )
    for flags in (
        ["--fix", "tp=2"],
        ["--time-limit", "5"],
        ["--solver", "exhaustive"],
        ["--precision", "fp8"],
        ["--recompute-modules", "mlp"],
        ["--no-tp-overlap"],
        ["--grad-reduce", "bf16"],
        ["--moe-dispatcher", "deepep"],
    ):
        cases.append(
            Cli(
                f"export-plan{flags[0]}",
                "nonsense",
                ["export", "--format", "megatron", "--plan", "{tmp}/p.json", *flags],
                "bad",
                {"p.json": "{plan}"},
                words=(flags[0],),
            )
        )
    cases.append(
        Cli(
            "export-serve-plan-global-batch",
            "nonsense",
            ["export", "--format", "vllm", "--plan", "{tmp}/s.json", "--global-batch", "8"],
            "bad",
            {"s.json": "{serve-plan}"},
        )
    )
    cases.append(
        Cli(
            "export-plan-ok",
            "nonsense",
            ["export", "--format", "megatron", "--plan", "{tmp}/p.json"],
            "ok",
            {"p.json": "{plan}"},
        )
    )
    for name, edit in {
        "fits": ('"fits": true', '"fits": false'),
        "num-gpus": ('"num_gpus": 8', '"num_gpus": 4096'),
        "peak": ('"peak_gib": ', '"peak_gib": 1'),
        "capacity": ('"capacity_gib": ', '"capacity_gib": 9'),
        "model": ('"model": "llama3.1-8b"', '"model": "llama3.1-70b"'),
        "tp": ('"tp": ', '"tp": 3'),  # tp 1 -> 31, 2 -> 32: more than the 8 GPUs
    }.items():
        cases.append(
            Cli(
                f"tampered-plan-{name}",
                "nonsense",
                ["export", "--format", "megatron", "--plan", "{tmp}/p.json"],
                "bad",
                {"p.json": "{plan}"},
                check=None,
            )
        )
        cases[-1].files = {"p.json": f"{{plan|{edit[0]}|{edit[1]}}}"}
    cases.append(
        Cli(
            "tampered-serve-plan",
            "nonsense",
            ["export", "--format", "vllm", "--plan", "{tmp}/s.json"],
            "bad",
            {"s.json": '{serve-plan|"fits": true|"fits": false}'},
        )
    )
    cases.append(Cli("validate-rows-twice", "nonsense", ["validate", "--rows", "S1,S1"], "bad"))
    cases.append(Cli("validate-rows-case", "nonsense", ["validate", "--rows", "s1"], "clean"))
    cases.append(
        Cli("calibrate-fit-with-out", "nonsense", ["calibrate", "--fit", "--out", "x.yaml"], "bad")
    )
    cases.append(
        Cli(
            "migrate-layout-and-fix",
            "nonsense",
            [*M8, "--layout", "{tmp}/l.yaml", "--fix", "tp=2"],
            "bad",
            {"l.yaml": "tp: 2\n"},
        )
    )
    cases.append(Cli("migrate-price-unknown", "nonsense", [*M8, "--price", "tpu_v4=3"], "bad"))
    cases.append(Cli("search-min-zero-tp", "nonsense", [*S8, "--min", "tp=0"], "bad"))
    cases.append(Cli("search-serve-gpus", "nonsense", [*SERVE, "--gpus", "4"], "bad"))
    cases.append(Cli("estimate-dp-too-many", "nonsense", [*E8, "--dp", "16"], "bad"))
    cases.append(
        Cli(
            "calibration-other-family",
            "nonsense",
            [
                "search",
                "--model",
                "8B",
                "--cluster",
                "hgx_b200x8",
                "--calibration",
                "{tmp}/cal.yaml",
            ],
            "bad",
            {"cal.yaml": HOPPER},
        )
    )
    cases.append(
        Cli(
            "calibration-residual-1e300",
            "nonsense",
            [*S8, "--calibration", "{tmp}/cal.yaml"],
            "bad",
            {"cal.yaml": re.sub(r"median_abs: [0-9.]+", "median_abs: 1e300", HOPPER, count=1)},
        )
    )
    return cases


def flag_cases() -> list[Cli]:
    cases: list[Cli] = []
    numbers = [
        "0",
        "-1",
        "1e300",
        "1e-300",
        "nan",
        "inf",
        "-inf",
        "9" * 400,
        "٣٠",
        "３０",
        "1_0",
        "0x10",
        "1e",
        "",
        " ",
        "1,000",
        "+5",
        "5.",
        ".5",
        "²",
        "1/2",
        "1e308",
    ]
    int_flags = {
        "search": [
            "--seq-len",
            "--global-batch",
            "--top",
            "--gpus",
            "--domain-size",
            "--recompute-num-layers",
        ],
        "estimate": ["--tp", "--pp", "--vpp", "--cp", "--ep", "--etp", "--mbs", "--dp", "--zero"],
        "whatif": ["--workers", "--max-scenarios"],
        "migrate": ["--tokens", "--steps"],
        "pack": ["--workers"],
    }
    float_flags = {
        "search": [
            "--nic-gbps",
            "--nics-per-gpu",
            "--oversubscription",
            "--price-per-gpu-hour",
            "--hbm-gb",
            "--hbm-tbps",
            "--power-cap-w",
            "--time-limit",
            "--target-step-time",
            "--memory-headroom",
        ],
        "serve": [
            "--tpot-ms",
            "--ttft-ms",
            "--target-tokens-per-s",
            "--kv-cache-fraction",
            "--context",
            "--concurrency",
            "--prompt-len",
            "--output-len",
        ],
    }
    bases = {
        "search": S8,
        "estimate": E8,
        "serve": SERVE,
        "migrate": M8,
        "whatif": [*W8, "--vary", "nic_gbps=400"],
        "pack": PACK,
    }
    rng = random.Random(17)
    for group, flags in {**int_flags, **float_flags}.items():
        for flag in flags:
            for value in rng.sample(numbers, 6):
                cases.append(
                    Cli(
                        f"{group}{flag}={value[:12]!r}",
                        "flags",
                        [*bases[group], flag, value],
                        "clean",
                        stdout_ok=True,
                    )
                )
    for knob in (
        "gpus",
        "nic_gbps",
        "seq_len",
        "hbm_gb",
        "power_cap_w",
        "price_per_gpu_hour",
        "rail_optimized",
        "system",
        "precision",
        "moe_dispatcher",
    ):
        for value in rng.sample([*numbers, "true", "maybe", "hgx_b200", "fp8", "x" * 500], 4):
            cases.append(
                Cli(
                    f"vary-{knob}={value[:12]!r}",
                    "flags",
                    [*W8, "--vary", f"{knob}={value}"],
                    "clean",
                    stdout_ok=True,
                )
            )
    for text in [
        "tp=",
        "=2",
        "tp",
        "tp=2=3",
        "TP=2",
        "tp =2",
        "tp= 2",
        "tp=２",
        "tp=2.0",
        "zero=-0",
        "zero=٢",
        "recompute=FULL",
        "precision=BF16",
        "vpp=2",
        "bogus=1",
        "tp=1e3",
    ]:
        cases.append(Cli(f"fix-{text!r}", "flags", [*S8, "--fix", text], "clean"))
    return cases


def pin_cases() -> list[Cli]:
    """Legal pins: each value of each field a layout of 8B on 8 H100s can take, pinned alone."""
    cases: list[Cli] = []
    pins = {
        "tp": [1, 2, 4, 8],
        "pp": [1, 2, 4, 8],
        "dp": [1, 2, 4, 8],
        "cp": [1, 2, 4, 8],
        "mbs": [1, 2, 4],
        "zero": [0, 1, 2, 3],
        "recompute": ["none", "selective", "full"],
        "precision": ["bf16"],
    }
    for key, values in pins.items():
        for value in values:
            cases.append(
                Cli(
                    f"pin-{key}={value}",
                    "pins",
                    [*S8, "--fix", f"{key}={value}"],
                    "clean",
                    check=_pin_is_legal(key, value),
                )
            )
    cases.append(Cli("pin-vpp=2-with-pp=2", "pins", [*S8, "--fix", "pp=2", "--fix", "vpp=2"], "ok"))
    for key, value in {
        "tp": 4,
        "pp": 2,
        "ep": 4,
        "dp": 2,
        "replicas": 2,
        "attention_dp": 2,
    }.items():
        model = "mixtral-8x7b" if key == "ep" else "8B"
        cases.append(
            Cli(
                f"serve-pin-{key}={value}",
                "pins",
                [
                    "search",
                    "--mode",
                    "serve",
                    "--model",
                    model,
                    "--cluster",
                    "hgx_h100x8",
                    "--fix",
                    f"{key}={value}",
                ],
                "ok",
            )
        )
    for ep in (1, 2, 4, 8):
        cases.append(
            Cli(
                f"pin-ep={ep}-mixtral",
                "pins",
                [
                    "search",
                    "--model",
                    "mixtral-8x7b",
                    "--cluster",
                    "hgx_h100x16",
                    "--fix",
                    f"ep={ep}",
                ],
                "clean",
                check=_pin_is_legal("ep", ep, "mixtral-8x7b", "hgx_h100x16"),
            )
        )
    cases.append(Cli("gpus-fewer", "pins", [*S8, "--gpus", "4"], "ok"))
    cases.append(
        Cli(
            "export-gpus-fewer-plan",
            "pins",
            ["export", "--format", "megatron", "--plan", "{tmp}/g.json"],
            "ok",
            {"g.json": "{plan-gpus}"},
        )
    )
    cases.append(Cli("precision-auto", "pins", [*S8, "--precision", "auto"], "ok"))
    cases.append(
        Cli("min-max", "pins", [*S8, "--min", "tp=2", "--max", "tp=4", "--max", "pp=1"], "ok")
    )
    return cases


def _pin_is_legal(key: str, value: object, model: str = "8B", cluster: str = "hgx_h100x8"):  # type: ignore[no-untyped-def]
    """A refused pin (exit 2) must be one that estimate refuses too (or says does not fit)."""

    def check(tmp: Path, proc: subprocess.CompletedProcess[str]) -> str:
        if proc.returncode != 2:
            return ""
        flag = {"recompute": "--recompute", "zero": "--zero"}.get(key, f"--{key}")
        argv = ["estimate", "--model", model, "--cluster", cluster, flag, str(value)]
        if key == "precision":
            argv = ["estimate", "--model", model, "--cluster", cluster, "--precision", str(value)]
        est = subprocess.run(
            [*LAYOUT, *argv], capture_output=True, text=True, timeout=60, check=False
        )
        if est.returncode == 0:
            return f"--fix {key}={value} refused, but estimate fits it: {proc.stderr.strip()}"
        return ""

    return check


def interrupt_cases(n: int) -> list[Cli]:
    rng = random.Random(1700)
    cases = []
    commands = [
        S8,
        [*W8, "--vary", "nic_gbps=100,200,400,800", "--workers", "2"],
        [*PACK, "--workers", "2"],
        ["export", "--format", "megatron", "--model", "8B", "--cluster", "hgx_h100x8"],
        ["validate", "--rows", "S1,S2"],
        [*SERVE],
    ]
    for i in range(n):
        argv = commands[i % len(commands)]
        delay = rng.uniform(0.03, 1.2)
        cases.append(
            Cli(
                f"sigint-{i}-{argv[0]}-{delay:.2f}s",
                "interrupt",
                argv,
                "clean",
                check=_interrupt_ok,
            )
        )
        cases[-1].timeout = delay  # see run_interrupt
    return cases


def _interrupt_ok(tmp: Path, proc: subprocess.CompletedProcess[str]) -> str:
    return ""


def run_interrupt(case: Cli) -> str:
    delay = case.timeout
    with tempfile.TemporaryDirectory(prefix="hostile-") as name:
        proc = subprocess.Popen(
            [*LAYOUT, *case.argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=name,
            start_new_session=True,
        )
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        if proc.returncode == 0 and "Traceback" not in err:
            return ""
        if proc.returncode == 130 and err == "layout: interrupted\n":
            return "" if not list(Path(name).iterdir()) else "a partial file was left"
        return f"exit {proc.returncode}: {err.strip()[-300:]}"


def stderr_cases() -> list[Cli]:
    cases = []
    for state, preexec in (("closed", lambda: os.close(2)), ("full", None)):
        for argv, expect in (
            ([*S8, "--seq-len", "0"], "bad"),
            ([*S8, "--fix", "tp=3"], "bad"),
            (["search", "--model", "405B", "--cluster", "hgx_h100x8"], "infeasible"),
            ([*W8, "--vary", "nic_gbps=400", "--workers", "64"], "ok"),
        ):
            cases.append(
                Cli(f"stderr-{state}-{argv[-1]}", "interrupt", argv, expect, preexec=preexec)
            )
            cases[-1].id += f"|{state}"
    return cases


def run_stderr(case: Cli) -> str:
    state = case.id.rsplit("|", 1)[1]
    sink = open("/dev/full" if state == "full" else os.devnull, "w")  # noqa: SIM115
    with sink:
        proc = subprocess.run(
            [*LAYOUT, *case.argv],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            preexec_fn=case.preexec,
            timeout=120,
            check=False,
        )
    want = {"bad": 2, "infeasible": 1, "ok": 0}[case.expect]
    return "" if proc.returncode == want else f"exit {proc.returncode}, expected {want}"


# --- API cases ------------------------------------------------------------------------------

API_PRELUDE = """
import itertools, json, math, resource, signal, sys, warnings
warnings.simplefilter("ignore")
resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))  # an endless list: MemoryError
def _timeout(signum, frame):
    raise TimeoutError("ran past 60 s (unbounded work?)")
signal.signal(signal.SIGALRM, _timeout)
import planner, planner.api as api
from planner.errors import SpecError, InfeasibleError, PlannerError
P = api.estimate(model="8B", cluster="hgx_h100x8", layout={"tp": 2})
R = api.search(model="8B", cluster="hgx_h100x8", top=2)
S = api.serve_search(model="8B", cluster="hgx_h100x8", top=1)
M = P.memory
def run(code):
    signal.alarm(60)
    try:
        exec(code, globals())
        return "ok", ""
    except (SpecError, InfeasibleError) as exc:
        return type(exc).__name__, str(exc)
    except BaseException as exc:
        return "raw:" + type(exc).__name__, str(exc)[:300]
    finally:
        signal.alarm(0)
for case_id, code in json.loads(sys.stdin.read()):
    kind, message = run(code)
    print(json.dumps([case_id, kind, message]), flush=True)
"""


def api_cases() -> list[Api]:
    c: list[Api] = []
    junk = [
        "None",
        "5",
        "5.5",
        "True",
        "'x'",
        "b'x'",
        "[]",
        "{}",
        "[1, 2]",
        "{'a': 1}",
        "object()",
        "float('nan')",
        "10**400",
        "-1",
        "(1, 2)",
        "set()",
        "lambda: 1",
        "iter([1])",
        "Ellipsis",
        "'8B\\n'",
        "'\\x1b[31m'",
    ]
    bases: dict[str, dict[str, str]] = {
        "search": {"model": "'8B'", "cluster": "'hgx_h100x8'"},
        "estimate": {"model": "'8B'", "cluster": "'hgx_h100x8'", "layout": "{'tp': 2}"},
        "serve_search": {"model": "'8B'", "cluster": "'hgx_h100x8'"},
        "serve_estimate": {"model": "'8B'", "cluster": "'hgx_h100x8'", "layout": "{'tp': 2}"},
        "migrate": {"model": "'8B'", "from_cluster": "'hgx_h100x8'", "to_cluster": "'hgx_b200x8'"},
        "whatif": {"model": "'8B'", "cluster": "'hgx_h100x8'", "vary": "{'nic_gbps': [400]}"},
        "export": {"plan": "P", "format": "'megatron'"},
        "placement": {"plan": "P"},
    }
    arguments = {
        "search": [
            "model",
            "cluster",
            "workload",
            "fix",
            "top",
            "config",
            "bounds",
            "precisions",
            "gpus",
        ],
        "estimate": ["model", "cluster", "workload", "layout"],
        "serve_search": ["model", "cluster", "workload", "fix", "top", "config"],
        "serve_estimate": ["model", "cluster", "workload", "layout"],
        "migrate": [
            "model",
            "from_cluster",
            "workload",
            "layout",
            "fix",
            "prices",
            "tokens",
            "steps",
            "config",
        ],
        "whatif": [
            "model",
            "cluster",
            "fix",
            "workers",
            "engine",
            "tokens",
            "steps",
            "progress",
            "config",
            "max_scenarios",
            "note",
            "vary",
        ],
        "export": ["plan", "format", "model", "cluster", "workload"],
        "placement": ["plan", "cluster"],
    }
    rng = random.Random(7)
    for function, args in arguments.items():
        for arg in args:
            for v in rng.sample(junk, 5):
                kwargs = {**bases[function], arg: v}
                if function == "whatif" and arg != "vary":  # small and quick when it runs
                    kwargs["workload"] = "{'seq_len': 2048, 'global_batch': 32}"
                call = ", ".join(f"{k}={value}" for k, value in kwargs.items())
                c.append(Api(f"{function}-{arg}-{v}", "api", f"api.{function}({call})", "either"))
    for v in [
        "None",
        "'nic_gbps=400'",
        "5",
        "{}",
        "{'nic_gbps': 400}",
        "{'nic_gbps': {'a': 1}}",
        "{'nic_gbps': itertools.count(1)}",
        "{'nic_gbps': (x for x in [200, 400])}",
        "[1, 2]",
        "['nic_gbps=400', 'nic_gbps=800']",
        "{'nic_gbps': [400, 400.0]}",
        "{'gpus': [1e300]}",
        "{'bogus': [1]}",
        "{'nic_gbps': [float('nan')]}",
        "{'seq_len': ['2048'], 'global_batch': [32]}",
        "iter(['nic_gbps=400'])",
    ]:
        c.append(
            Api(
                f"whatif-vary-{v}",
                "api",
                f"api.whatif(model='8B', cluster='hgx_h100x8', vary={v})",
                "either",
            )
        )
    for name, update in {
        "fits": "{'fits': False}",
        "fits-text": "{'fits': 'yes'}",
        "num-gpus": "{'num_gpus': 4096}",
        "layout-text": "{'layout': 'tp=2'}",
        "peak": "{'memory': M.model_copy(update={'peak_gib': 500.0})}",
        "weights": "{'memory': M.model_copy(update={'weights_gib': 1.0})}",
        "capacity": "{'memory': M.model_copy(update={'capacity_gib': 500.0})}",
        "cluster": "{'cluster': 'hgx_b200x8'}",
        "model": "{'model': 'llama3.1-70b'}",
        "placement": "{'placement': {}}",
        "tp": "{'layout': P.layout.model_copy(update={'tp': 4})}",
        "step": "{'step_time_s': float('inf')}",
        "mfu": "{'mfu': 5.0}",
    }.items():
        c.append(
            Api(
                f"export-edited-{name}",
                "api",
                f"api.export(P.model_copy(update={update}), format='megatron')",
                "error",
            )
        )
        c.append(
            Api(
                f"placement-edited-{name}",
                "api",
                f"api.placement(P.model_copy(update={update}))",
                "either" if name in ("step", "mfu") else "error",
            )
        )
    for name, update in {
        "fits": "{'fits': False}",
        "num-gpus": "{'num_gpus': 64}",
        "weights": "{'memory': S.best.memory.model_copy(update={'weights_gib': 1.0})}",
        "model": "{'model': 'llama3.1-70b'}",
        "placement": "{'placement': {}}",
    }.items():
        c.append(
            Api(
                f"export-serve-edited-{name}",
                "api",
                f"api.export(S.best.model_copy(update={update}), format='vllm')",
                "error",
            )
        )
    for code in [
        "api.load_model(None)",
        "api.load_model('/dev/zero')",
        "api.load_model('')",
        "api.load_cluster('hgx_h100x8', edits={'nic_gbps': 'fast'})",
        "api.load_cluster('hgx_h100x8', edits={'bogus': 1})",
        "api.load_cluster('hgx_h100x8', edits=[1])",
        "api.load_cluster('hgx_h100_2x4')",
        "api.not_fitting_reason(P, '70B', 'hgx_h100x8', None)",
        "api.not_fitting_reason(None, '8B', 'hgx_h100x8', None)",
        "api.check_plan(P, model=None, cluster=None)",
        "api.estimate(model='8B', cluster='hgx_h100x8', layout={'tp': 2.5})",
        "api.estimate(model='8B', cluster='hgx_h100x8', layout={'tp': 10**400})",
        "api.estimate(model='8B', cluster='hgx_h100x8', layout={'precision': 'fp8'})",
        "api.serve_estimate(model='8B', cluster='hgx_h100x8', layout={'dp': 2, 'replicas': 2})",
        "api.serve_search(model='8B', cluster='hgx_h100x8', fix={'dp': 2, 'replicas': 4})",
        "api.serve_search(model='8B', cluster='hgx_h100x8', workload={'tpot_ms': 1e308})",
        "api.serve_search(model='8B', cluster='hgx_h100x8', workload={'target_tokens_per_s': 1e308})",
        "api.search(model='8B', cluster='hgx_h100x8', workload={'seq_len': 10**300})",
        "api.search(model='8B', cluster='hgx_h100x8', gpus=10**30)",
        "api.search(model='8B', cluster='hgx_h100x8', bounds={'tp': (8, 2)})",
        "api.search(model='8B', cluster='hgx_h100x8', config={'target_step_time_s': 1e300})",
        "api.migrate(model='8B', from_cluster='hgx_h100x8', to_cluster='hgx_b200x8', tokens=1e300)",
        "api.migrate(model='8B', from_cluster='hgx_h100x8', to_cluster='hgx_b200x8', prices={'x': 1})",
        "api.export(R, format='megatron', cluster='hgx_b200x8')",
        "api.placement(S)",
        "api.export(P, format='MEGATRON')",
        "api.export(P, format=None)",
    ]:
        c.append(Api(f"misc-{code[:60]}", "api", code, "error"))
    return c


def run_api(cases: list[Api]) -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", API_PRELUDE],
        input=json.dumps([(a.id, a.code) for a in cases]),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    got = {}
    for line in proc.stdout.splitlines():
        case_id, kind, message = json.loads(line)
        got[case_id] = (kind, message)
    out = {}
    for case in cases:
        if case.id not in got:
            out[case.id] = f"no result (the runner died: {proc.stderr.strip()[-300:]})"
            continue
        kind, message = got[case.id]
        if kind.startswith("raw:"):
            out[case.id] = f"raised {kind[4:]}: {message}"
        elif kind != "ok" and ("\n" in message or not message.strip() or len(message) > 2000):
            out[case.id] = f"{kind} message not one line: {message!r}"
        elif kind != "ok" and re.search(r"[0-9]{41,}", message):
            out[case.id] = f"a figure of more than 40 digits: {message}"
        elif case.expect == "error" and kind == "ok":
            out[case.id] = "accepted"
        else:
            out[case.id] = ""
    return out


# --- driver --------------------------------------------------------------------------------


def _saved_plans() -> dict[str, str]:
    out = {}
    for key, argv in {
        "plan": [*S8, "--json"],
        "serve-plan": [*SERVE, "--json"],
        "plan-gpus": [
            "search",
            "--model",
            "8B",
            "--cluster",
            "hgx_h100x16",
            "--gpus",
            "8",
            "--json",
        ],
    }.items():
        proc = subprocess.run(
            [*LAYOUT, *argv], capture_output=True, text=True, timeout=120, check=True
        )
        out[key] = proc.stdout
    return out


def _fill_plans(cases: list[Cli], plans: dict[str, str]) -> None:
    for case in cases:
        for name, content in list(case.files.items()):
            if isinstance(content, str) and content.startswith("{") and content.endswith("}"):
                inner = content[1:-1]
                key, *edit = inner.split("|")
                if key in plans:
                    text = plans[key]
                    if edit:
                        old, new = edit
                        if old.endswith(": "):  # replace the number after the key
                            text = re.sub(re.escape(old) + r"[0-9.e+-]+", new, text, count=1)
                        else:
                            text = text.replace(old, new, 1)
                    case.files[name] = text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="categories to run")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--interrupts", type=int, default=30)
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument(
        "--layout",
        help="the command to test, e.g. 'python -m planner' with PYTHONPATH set to another "
        "checkout (default: the layout script beside this Python)",
    )
    args = parser.parse_args()
    if args.layout:
        LAYOUT[:] = args.layout.split()
    CATALOG[0] = subprocess.run(
        [sys.executable, "-c", "from planner.catalog import catalog_root; print(catalog_root())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    groups: dict[str, list[Cli]] = {
        "injection": injection_cases(),
        "overwrite": overwrite_cases(),
        "work": work_cases(),
        "yaml": yaml_cases(),
        "crash": crash_cases(),
        "nonsense": nonsense_cases(),
        "flags": flag_cases(),
        "pins": pin_cases(),
    }
    wanted = set(args.only) or {*groups, "api", "interrupt"}
    plans = _saved_plans()
    results: list[tuple[str, str, str]] = []  # (category, id, failure)
    start = time.perf_counter()
    cli = [c for name, cases in groups.items() if name in wanted for c in cases]
    _fill_plans(cli, plans)
    with ThreadPoolExecutor(args.jobs) as pool:
        for case, failure in zip(cli, pool.map(run_cli, cli), strict=True):
            results.append((case.category, case.id, failure))
    if "interrupt" in wanted:
        for case in interrupt_cases(args.interrupts):
            results.append(("interrupt", case.id, run_interrupt(case)))
        for case in stderr_cases():
            results.append(("interrupt", case.id, run_stderr(case)))
    if "api" in wanted:
        cases = api_cases()
        for case_id, failure in run_api(cases).items():
            results.append(("api", case_id, failure))
    totals: Counter[str] = Counter(cat for cat, _, _ in results)
    failed: Counter[str] = Counter(cat for cat, _, f in results if f)
    print(f"{'category':12} {'cases':>6} {'failed':>7}")
    for cat in sorted(totals):
        print(f"{cat:12} {totals[cat]:>6} {failed[cat]:>7}")
    print(
        f"{'all':12} {sum(totals.values()):>6} {sum(failed.values()):>7}   "
        f"({time.perf_counter() - start:.0f} s)"
    )
    for cat, case_id, failure in results:
        if failure:
            text = failure if args.verbose else failure[:240]
            print(f"FAIL [{cat}] {case_id[:70]!r}: {text}")
    return 1 if any(f for _, _, f in results) else 0


if __name__ == "__main__":
    shutil.rmtree(f"/tmp/{MARKER}", ignore_errors=True)
    raise SystemExit(main())
