"""Hostile names (issue 17, part 1): a user file's name or source must neither run a command when
an export is sourced, nor add a line to a comment, a report or a Markdown heading, nor open
HTML markup, nor reach the terminal as an escape sequence.

Two walls, each tested on its own: (a) the loader refuses such names with one SpecError line
(exit 2 on the CLI); (b) with validation bypassed (``model_copy(update=...)``), every output
quotes them for its format, so the export's structure is that of a benign name's export.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

import planner
from planner.api import serve_estimate
from planner.catalog import load_cluster, load_model
from planner.catalog.io import validate_spec
from planner.errors import SpecError
from planner.report.catalog import cluster_summary
from planner.report.export import FORMATS, ExportJob, export
from planner.report.export.job import workload_for_plan
from planner.report.html import whatif_html
from planner.report.markdown import migrate_text, whatif_markdown, whatif_text
from planner.report.placement_file import hostfile, placement_records
from planner.report.quote import (
    comment_text,
    html_text,
    markdown_text,
    shell_command,
    shell_word,
    terminal_text,
    toml_string,
)
from planner.report.serving import serve_estimate_text
from planner.report.text import estimate_text, search_text
from planner.specs.hardware import AcceleratorSpec, CalibrationRecord
from planner.specs.model import ModelSpec
from planner.specs.result import Plan
from planner.specs.scenarios import MigrateResult, WhatIfResult
from tests.test_cli import assert_one_line_error, run_main

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = "hgx_h100x8"
WORKLOAD = {"seq_len": 4096, "global_batch": 64}

HOSTILE: dict[str, str] = {
    "newline_command": "x\ntouch {marker}\n",
    "carriage_return": "x\rtouch {marker}",
    "command_substitution": "$(touch {marker})",
    "backticks": "`touch {marker}`",
    "single_quote": "x'; touch {marker}; echo '",
    "double_quote": 'x"; touch {marker}; echo "',
    "ansi_color": "\x1b[31mred\x1b[0m",
    "osc_title": "\x1b]0;owned\x07",
    "c1_csi": "x\x9b31m",
    "line_separator": "x\u2028# fake",
    "bidi_override": "safe\u202etxt.hs",
    "markdown_heading": "x\n# Injected heading\n",
    "markdown_link": "[click](https://evil.example)",
    "html_script": "<script>alert(1)</script>",
    "flag": "--trust-remote-code",
}
"""Kind of attack -> a name template (``{marker}`` is a file the attack would create)."""

BENIGN = "benign-model"
SHELL_FORMATS = ("megatron", "bridge", "vllm", "sglang")


@pytest.fixture(scope="module")
def marker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file that must never exist: every hostile name tries to create it."""
    return tmp_path_factory.mktemp("hostile") / "PWNED"


def hostile(kind: str, marker: Path) -> str:
    return HOSTILE[kind].format(marker=marker)


def _no_terminal_controls(text: str) -> None:
    """Only newlines separate lines; no ESC, BEL, C1, separators or bidi characters anywhere."""
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "\r" not in text
    for line in text.split("\n"):
        assert line.isprintable(), repr(line)


# --- (a) the loader refuses hostile names ---------------------------------------------------


def _model_yaml(tmp_path: Path, **fields: str) -> Path:
    data = yaml.safe_load((ROOT / "models" / "llama3.1-8b.yaml").read_text(encoding="utf-8"))
    data.update(fields)
    path = tmp_path / "evil.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_model_name_is_one_line_error(kind: str, tmp_path: Path, marker: Path) -> None:
    path = _model_yaml(tmp_path, name=hostile(kind, marker))
    for command in (["export", "--format", "megatron"], ["estimate"]):
        code, out, err = run_main([*command, "--model", str(path), "--cluster", CLUSTER])
        line = assert_one_line_error(code, err, 2)
        assert out == ""
        assert "name:" in line, line
        _no_terminal_controls(err)
    with pytest.raises(SpecError, match=r"^[^\n]*name: (must|may)[^\n]*$"):
        load_model(path)
    assert not marker.exists()


@pytest.mark.parametrize(
    "field", ["newline_command", "ansi_color", "osc_title", "bidi_override", "line_separator"]
)
def test_control_characters_in_family_and_source_are_refused(field: str, tmp_path: Path) -> None:
    for key in ("family", "source"):
        path = _model_yaml(tmp_path, **{key: HOSTILE[field].format(marker="m")})
        with pytest.raises(SpecError) as info:
            load_model(path)
        message = str(info.value)
        assert f"{key}: must be one line of printable text" in message
        assert "\n" not in message and "\x1b" not in message and "\u202e" not in message


def test_rule_names_the_character_and_position_without_writing_it(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_model(_model_yaml(tmp_path, name="ok\x1b]0;t\x07"))
    assert "U+001B (ESCAPE) at position 2" in str(info.value)
    with pytest.raises(SpecError, match=r"'\$' at position 0 is not allowed"):
        load_model(_model_yaml(tmp_path, name="$(id)"))
    with pytest.raises(SpecError, match="at most 128 characters, got 129"):
        load_model(_model_yaml(tmp_path, name="m" * 129))
    with pytest.raises(SpecError, match="at most 4,000 characters"):
        load_model(_model_yaml(tmp_path, source="s" * 4001))
    with pytest.raises(SpecError, match="must not be empty"):
        load_model(_model_yaml(tmp_path, name="  "))


def test_free_text_may_hold_quotes_and_markup(tmp_path: Path) -> None:
    """A source is prose ('"8B"', '<URL>'): printable punctuation is fine, only its output is
    quoted."""
    source = 'Llama card, "8B" <https://example.com> $x `y` #z'
    assert load_model(_model_yaml(tmp_path, name="my-8b", source=source)).source == source


@pytest.mark.parametrize("kind", ["newline_command", "command_substitution", "osc_title"])
def test_hostile_cluster_file_is_one_line_error(kind: str, tmp_path: Path, marker: Path) -> None:
    for field in ("name", "system"):
        values = {"name": "lab", "system": "hgx_h100", field: hostile(kind, marker)}
        path = tmp_path / "cluster.yaml"
        path.write_text(yaml.safe_dump({**values, "num_accelerators": 8}), encoding="utf-8")
        code, _, err = run_main(["estimate", "--model", "8B", "--cluster", str(path)])
        line = assert_one_line_error(code, err, 2)
        assert f"{field}:" in line, line
        _no_terminal_controls(err)
    assert not marker.exists()


def test_hostile_hardware_and_calibration_fields_are_refused() -> None:
    accelerator = yaml.safe_load(
        (ROOT / "topologies" / "accelerators" / "h100_sxm.yaml").read_text(encoding="utf-8")
    )
    for key, value in [
        ("name", "h100\nrm -rf ~"),
        ("vendor", "\x1b[2J"),
        ("description", "x\u202ey"),
        ("sources", {**accelerator["sources"], "hbm_GB": "datasheet\n# forged"}),
    ]:
        with pytest.raises(SpecError, match=rf"{key}[.\w]*: must be one line"):
            validate_spec(AcceleratorSpec, {**accelerator, key: value}, where="acc.yaml")
    calibration = yaml.safe_load(
        (ROOT / "topologies" / "calibration" / "hopper.yaml").read_text(encoding="utf-8")
    )
    with pytest.raises(SpecError, match=r"family: may hold only"):
        validate_spec(CalibrationRecord, {**calibration, "family": "$(id)"}, where="cal.yaml")
    with pytest.raises(SpecError, match=r"method: must be one line"):
        validate_spec(CalibrationRecord, {**calibration, "method": "fit\n\x1b[0m"}, where="c")


def test_hostile_saved_plan_is_one_line_error(tmp_path: Path, marker: Path) -> None:
    plan = planner.estimate(model="8B", cluster=CLUSTER, layout={"tp": 2}, workload=WORKLOAD)
    data = json.loads(plan.model_dump_json())
    for field in ("model", "cluster", "cluster_description"):
        saved = tmp_path / "plan.json"
        saved.write_text(json.dumps({**data, field: hostile("newline_command", marker)}))
        code, out, err = run_main(["export", "--format", "megatron", "--plan", str(saved)])
        assert_one_line_error(code, err, 2)
        assert out == "" and field in err, err
    assert not marker.exists()


def test_hugging_face_import_derives_a_valid_name(tmp_path: Path) -> None:
    folder = tmp_path / "x\n$(touch PWNED)`id`\x1b]0;t\x07"  # a folder name: no "/"
    folder.mkdir()
    config = {
        "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 1000,
        "max_position_embeddings": 2048,
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    spec = load_model(folder / "config.json")
    assert spec.name == ModelSpec.model_validate(spec.model_dump()).name  # valid as loaded
    assert spec.name == "x__(touch PWNED)_id___0_t_"


# --- (b) validation bypassed: every output quotes --------------------------------------------


@pytest.fixture(scope="module")
def base_plan() -> Plan:
    return planner.estimate(
        model="8B", cluster=CLUSTER, layout={"tp": 2, "pp": 2}, workload=WORKLOAD
    )


def bypassed_job(plan: Plan, name: str) -> ExportJob:
    """An export job whose model, plan and cluster carry ``name`` unvalidated."""
    model = load_model("8B").model_copy(
        update={"name": name, "source": name, "family": name, "hub_id": name}
    )
    cluster = load_cluster(CLUSTER).model_copy(update={"name": name})
    plan = plan.model_copy(update={"model": name, "cluster": name, "cluster_description": name})
    return ExportJob(
        plan=plan, model=model, cluster=cluster, workload=workload_for_plan(plan, seq_len=4096)
    )


def _comment_mask(text: str) -> list[bool]:
    return [line.lstrip().startswith("#") for line in text.splitlines()]


def _bash(script: str, cwd: Path) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a bash script in a UTF-8 locale; output decoded strictly
    and without newline translation (a carriage return stays one)."""
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    run = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, timeout=30, check=False
    )
    return run.returncode, run.stdout.decode("utf-8"), run.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("fmt", SHELL_FORMATS)
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_shell_exports_never_run_a_hostile_name(
    fmt: str, kind: str, base_plan: Plan, marker: Path, tmp_path: Path
) -> None:
    name = hostile(kind, marker)
    result = export(bypassed_job(base_plan, name), fmt)
    benign = export(bypassed_job(base_plan, BENIGN), fmt)
    text = result.text
    _no_terminal_controls(text)
    assert _comment_mask(text) == _comment_mask(benign.text)  # one comment line per line
    assert len(text.splitlines()) == len(benign.text.splitlines())
    assert all(note.isprintable() for note in result.notes)  # the CLI prints them on stderr
    script = tmp_path / "export.sh"
    script.write_text(text, encoding="utf-8")
    code, _, err = _bash(f"bash -n {shell_word(str(script))}", tmp_path)
    assert code == 0, err
    # Source it with the launchers stubbed: each writes the arguments it got, NUL-separated.
    stub = "printf '%s\\0' \"$@\" > argv.bin"
    dump = {"megatron": "MEGATRON_ARGS", "bridge": "BRIDGE_OVERRIDES"}.get(fmt)
    tail = f'set -- "${{{dump}[@]}}"; {stub}' if dump else ""
    code, _, err = _bash(
        f"vllm() {{ {stub}; }}; python() {{ {stub}; }}; source ./export.sh; {tail}", tmp_path
    )
    assert code == 0, err
    assert not marker.exists(), f"{fmt} export ran the name of kind {kind}"
    argv = (tmp_path / "argv.bin").read_bytes().decode("utf-8").split("\0")[:-1]
    assert argv == (result.args[1:] if fmt in ("vllm", "sglang") else result.args)
    if fmt == "vllm":  # the model id is one whole argument, never a flag
        assert argv[1] == (f"./{name}" if name.startswith("-") else name)


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_toml_json_and_yaml_exports_keep_their_structure(
    kind: str, base_plan: Plan, marker: Path
) -> None:
    job = bypassed_job(base_plan, hostile(kind, marker))
    benign = bypassed_job(base_plan, BENIGN)
    toml = export(job, "torchtitan").text
    _no_terminal_controls(toml)
    assert _comment_mask(toml) == _comment_mask(export(benign, "torchtitan").text)
    assert tomllib.loads(toml) == tomllib.loads(export(benign, "torchtitan").text)
    deepspeed = export(job, "deepspeed").text
    _no_terminal_controls(deepspeed)
    assert json.loads(deepspeed) == json.loads(export(benign, "deepspeed").text)
    for fmt in ("maxtext", "nanotron", "accelerate"):  # YAML with the name in comments only
        text = export(job, fmt).text
        _no_terminal_controls(text)
        assert _comment_mask(text) == _comment_mask(export(benign, fmt).text), fmt
        assert yaml.safe_load(text) == yaml.safe_load(export(benign, fmt).text), fmt
    automodel = export(job, "automodel").text
    _no_terminal_controls(automodel)
    assert _comment_mask(automodel) == _comment_mask(export(benign, "automodel").text)
    loaded = yaml.safe_load(automodel)
    assert loaded == yaml.safe_load(export(benign, "automodel").text) | {"model": loaded["model"]}
    assert loaded["model"]["config"]["pretrained_model_name_or_path"] == job.model.hub_id


def test_every_format_is_covered() -> None:
    assert set(FORMATS) == {
        *SHELL_FORMATS,
        "torchtitan",
        "deepspeed",
        "maxtext",
        "automodel",
        "nanotron",
        "accelerate",
    }


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostfile_keeps_one_comment_per_line(kind: str, base_plan: Plan, marker: Path) -> None:
    job = bypassed_job(base_plan, hostile(kind, marker))
    plan = job.train[0]
    text = hostfile(plan, placement_records(plan, load_cluster(CLUSTER)))
    _no_terminal_controls(text)
    lines = text.splitlines()
    assert [line for line in lines if not line.startswith("#")] == ["node0 slots=8"]


@pytest.fixture(scope="module")
def sweep() -> WhatIfResult:
    return planner.whatif(model="8B", cluster=CLUSTER, workload=WORKLOAD, vary=["nic_gbps=200,400"])


def _bypassed_sweep(sweep: WhatIfResult, name: str) -> WhatIfResult:
    return sweep.model_copy(update={"model": name, "cluster": name, "cluster_description": name})


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_markdown_report_has_no_injected_heading_or_markup(
    kind: str, sweep: WhatIfResult, marker: Path
) -> None:
    name = hostile(kind, marker)
    md = whatif_markdown(_bypassed_sweep(sweep, name))
    benign = whatif_markdown(_bypassed_sweep(sweep, BENIGN))
    _no_terminal_controls(md)
    headings = [line for line in md.splitlines() if line.lstrip().startswith("#")]
    assert headings[1:] == [line for line in benign.splitlines() if line.startswith("#")][1:]
    assert headings[0].startswith("# What-if: ")
    assert len(md.splitlines()) == len(benign.splitlines())
    assert not re.search(r"(?<!\\)[\[<`*]", md), "an unescaped link, tag, code span or emphasis"
    if kind == "markdown_heading":
        assert "\\# Injected heading" in md


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)


def _tags(html: str) -> set[str]:
    parser = _Tags()
    parser.feed(html)
    parser.close()
    return parser.tags


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_html_report_has_no_raw_markup(kind: str, sweep: WhatIfResult, marker: Path) -> None:
    html = whatif_html(_bypassed_sweep(sweep, hostile(kind, marker)))
    _no_terminal_controls(html)
    assert "<script" not in html.lower()
    assert _tags(html) == _tags(whatif_html(_bypassed_sweep(sweep, BENIGN)))
    if kind == "html_script":
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.fixture(scope="module")
def terminal_inputs(base_plan: Plan, sweep: WhatIfResult) -> dict[str, object]:
    """One result of each kind the terminal reports render."""
    return {
        "search": planner.search(model="8B", cluster=CLUSTER, workload=WORKLOAD),
        "serve": serve_estimate(
            model="8B", cluster=CLUSTER, layout={"tp": 1, "replicas": 8}, workload={}
        ),
        "migrate": planner.migrate(
            model="8B", from_cluster=CLUSTER, to_cluster="hgx_b200x8", workload=WORKLOAD
        ),
        "sweep": sweep,
    }


def terminal_texts(inputs: dict[str, object], plan: Plan, name: str) -> dict[str, str]:
    """Every terminal report, with ``name`` (unvalidated) as the model and cluster."""
    job = bypassed_job(plan, name)
    bypassed = job.train[0]
    search, serve, migrate, sweep = (inputs[k] for k in ("search", "serve", "migrate", "sweep"))
    assert isinstance(migrate, MigrateResult) and isinstance(sweep, WhatIfResult)
    moved = {"from_plan": bypassed, "to_plan": bypassed, "model": name}
    return {
        "estimate": estimate_text(bypassed),
        "search": search_text(search.model_copy(update={"best": bypassed})),  # type: ignore[attr-defined]
        "serve": serve_estimate_text(
            serve.model_copy(update={"model": name, "cluster_description": name})  # type: ignore[attr-defined]
        ),
        "whatif": whatif_text(_bypassed_sweep(sweep, name)),
        "migrate": migrate_text(migrate.model_copy(update=moved)),
        "cluster": cluster_summary(job.cluster, as_json=False),
    }


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_terminal_reports_have_no_escape_bytes_or_forged_lines(
    kind: str, base_plan: Plan, terminal_inputs: dict[str, object], marker: Path
) -> None:
    name = hostile(kind, marker)
    texts = terminal_texts(terminal_inputs, base_plan, name)
    benign = terminal_texts(terminal_inputs, base_plan, BENIGN)
    for report, text in texts.items():
        _no_terminal_controls(text)
        # Lines past 100 columns are wrapped into indented continuations, so a longer name may
        # add indented lines; the labelled (unindented) lines are the benign report's, in order:
        # nothing forged a 'step' or 'model' line.
        lines, expected = _labelled(text), _labelled(benign[report])
        assert len(lines) == len(expected), report
        labels = [line.split(" ")[0] for line in lines]
        assert labels == [line.split(" ")[0] for line in expected], report
        assert " ".join(terminal_text(name).split()) in " ".join(text.split()), report


def _labelled(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith(" ")]


# --- the quoting helpers on their own ---------------------------------------------------------

ODD = [*HOSTILE.values(), "", "plain", "tab\there", "back\\slash", "emoji 🚀", "\U0001f600\x00x"]


@pytest.mark.parametrize("value", [v.replace("\x00", "") for v in ODD])
def test_shell_word_round_trips_through_bash(value: str, tmp_path: Path) -> None:
    word = shell_word(value.format(marker=tmp_path / "PWNED"))
    assert "\n" not in word and word.isprintable()
    code, out, err = _bash(f"printf '%s' {word}", tmp_path)
    assert code == 0 and out == value.format(marker=tmp_path / "PWNED"), err
    assert not (tmp_path / "PWNED").exists()
    assert shell_command(["a", value]) == f"a {shell_word(value)}"


@pytest.mark.parametrize("value", ODD)
def test_toml_string_round_trips(value: str) -> None:
    quoted = toml_string(value)
    assert quoted.isprintable()
    assert tomllib.loads(f"k = {quoted}")["k"] == value


@pytest.mark.parametrize("value", ODD)
def test_line_helpers_are_one_printable_line(value: str) -> None:
    for helper in (terminal_text, comment_text, markdown_text, html_text):
        out = helper(value)
        assert out.isprintable() and "\n" not in out, (helper.__name__, out)
    assert "<" not in html_text(value) and ">" not in html_text(value)
    assert "<" not in markdown_text(value).replace("\\<", "")


def test_helpers_leave_catalog_names_as_written() -> None:
    for name in ("llama3.1-8b", "hgx_h100x8", "tpu_v5p_8x8x16", "meta-llama/Llama-3.1-8B"):
        for helper in (terminal_text, comment_text, markdown_text, html_text, shell_word):
            assert helper(name) == name
    assert markdown_text("_lead and trail_") == "\\_lead and trail\\_"
