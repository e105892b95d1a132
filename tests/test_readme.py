"""The README's claims, checked against what the tool computes (issue 21, item 10): row counts,
the in-sample accuracy summary and the ± bands come from ``layout validate`` (its Python
equivalent), the aliases, export formats and what-if knobs from the code. A number that moves
(a refit, a new row) fails here until the README says the new one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from planner.accuracy.rows import load_rows, training_file
from planner.accuracy.run import run_validation
from planner.accuracy.serving import (
    engine_profile_of,
    load_serving_rows,
    run_serving_validation,
    serving_file,
)
from planner.catalog import model_aliases
from planner.report.export import megatron
from planner.search import whatif

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
TEXT = " ".join(README.split())  # one line: claims may wrap anywhere
FAMILY = {"A100": "ampere", "H100": "hopper", "B200": "blackwell"}
"""README accelerator -> calibration family of its band."""


def claim(pattern: str) -> re.Match[str]:
    match = re.search(pattern, TEXT)
    assert match, f"the README no longer says /{pattern}/"
    return match


@pytest.fixture(scope="module")
def report():  # type: ignore[no-untyped-def]
    return run_validation()


def pct(value: float) -> str:
    return f"{100 * value:.1f}"


def test_row_counts(report) -> None:  # type: ignore[no-untyped-def]
    m = claim(r"(\d+) training rows, (\d+) published runs of which (\d+) are also scored in a")
    assert int(m.group(1)) == report.overall.rows
    runs = len(load_rows(training_file()))
    assert int(m.group(2)) == runs
    assert int(m.group(3)) == report.overall.rows - runs
    serving = run_serving_validation()
    m = claim(r"(\d+)\s+serving rows \((\d+) TensorRT-LLM")
    assert int(m.group(1)) == serving.overall.rows
    engines = [engine_profile_of(r) for r in load_serving_rows(serving_file())]
    assert int(m.group(2)) == engines.count("tensorrt-llm")


def test_in_sample_summary(report) -> None:  # type: ignore[no-untyped-def]
    m = claim(r"Today, training: median \|error\| ([\d.]+)%, max ([\d.]+)%, bias ([+-][\d.]+)%")
    overall = report.overall
    assert m.group(1) == pct(overall.median_abs_error)
    assert m.group(2) == pct(overall.max_abs_error)
    assert float(m.group(3)) == pytest.approx(100 * overall.bias, abs=0.051)
    families = {f.group: f for f in report.families}
    listed = claim(r"\((A100 dense [^)]*) median\)").group(1)
    for acc, kind, value in re.findall(r"(A100|H100|B200) (dense|MoE) ([\d.]+)%", listed):
        group = f"{acc.lower()} {kind.lower()}"
        assert value == pct(families[group].median_abs_error), group


def test_out_of_sample_summary(report) -> None:  # type: ignore[no-untyped-def]
    """The out-of-sample figures the README leads with: every row, the Megatron-LM rows held
    out by source, and each other framework's never-fitted rows."""
    from planner.accuracy.render import out_of_sample_errors

    errors = out_of_sample_errors(report)
    m = claim(r"Out of sample, training: median \|error\| ([\d.]+)%, max ([\d.]+)%, bias "
              r"([+-][\d.]+)% over (\d+) rows")  # fmt: skip
    values = list(errors.values())
    assert int(m.group(4)) == len(values)
    assert m.group(1) == pct(_median([abs(v) for v in values]))
    assert m.group(2) == pct(max(abs(v) for v in values))
    assert float(m.group(3)) == pytest.approx(100 * sum(values) / len(values), abs=0.051)
    frameworks = {r.id: r.framework for r in report.rows}
    assert report.band is not None
    megatron = [abs(v) for k, v in errors.items()
                if frameworks[k] == "megatron" and k in report.band.errors]  # fmt: skip
    m = claim(r"cross_validate\.py`: (\d+) rows, median ([\d.]+)%, max ([\d.]+)%\)")
    assert (int(m.group(1)), m.group(2), m.group(3)) == (
        len(megatron),
        pct(_median(megatron)),
        pct(max(megatron)),
    )
    names = {"FSDP": "fsdp", "Nanotron": "nanotron", "DeepSpeed": "deepspeed",
             "torchtitan": "torchtitan"}  # fmt: skip
    for name, value, rows in re.findall(r"(FSDP|Nanotron|DeepSpeed|torchtitan) ([\d.]+)%"
                                        r"(?: median)? on (\d+)", TEXT):  # fmt: skip
        own = [abs(v) for k, v in errors.items() if frameworks[k] == names[name]]
        assert (value, int(rows)) == (pct(_median(own)), len(own)), name


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def test_serving_median() -> None:
    serving = run_serving_validation()
    held = {s.group: s for s in serving.heldout}
    m = claim(r"Serving, out of sample\s+first: median ([\d.]+)% over (\d+) published")
    assert m.group(1) == pct(held["all"].median_abs_error)
    assert int(m.group(2)) == held["all"].evaluated
    m = claim(r"\(MoE ([\d.]+)% on (\d+), dense ([\d.]+)% on (\d+), max\s+([\d.]+)%")
    assert (m.group(1), int(m.group(2))) == (pct(held["moe"].median_abs_error), held["moe"].rows)
    assert (m.group(3), int(m.group(4))) == (
        pct(held["dense"].median_abs_error),
        held["dense"].rows,
    )
    assert m.group(5) == f"{100 * held['all'].max_abs_error:.0f}"
    for name, label in (("tensorrt-llm", "TensorRT-LLM"), ("sglang", "SGLang"), ("vllm", "vLLM")):
        m = claim(label + r" ([\d.]+)% on (\d+)")
        assert (m.group(1), int(m.group(2))) == (pct(held[name].median_abs_error), held[name].rows)
    m = claim(r"in sample ([\d.]+)%\. The GPU")
    assert m.group(1) == pct(serving.overall.median_abs_error)


def test_bands_and_coverage(report) -> None:  # type: ignore[no-untyped-def]
    band = report.band
    assert band is not None
    regimes = {(r.family, r.regime): r for r in band.regimes}
    listed = claim(r"predictions of their regime \(([^)]*)\)").group(1)
    found = re.findall(r"(A100|H100|B200) (dense|MoE) ±([\d.]+)%", listed)
    assert len(found) == 5
    for acc, kind, value in found:
        assert value == f"{regimes[(FAMILY[acc], kind.lower())].band_pct:.1f}", (acc, kind)
    serving = claim(r"serving ±([\d.]+)% on Hopper").group(1)
    assert serving == f"{regimes[('hopper', 'serving')].band_pct:.1f}"
    families = [r for r in band.regimes if r.family != "pooled" and r.regime != "serving"]
    inside = sum(r.inside_without_row for r in families)
    rows = sum(r.rows for r in families)
    m = claim(r"Coverage: (\d+)% of the training rows fall inside the band recomputed")
    assert int(m.group(1)) == round(100 * inside / rows)
    checks = {c.name: c for c in band.checks}
    m = claim(r"(\d+) of (\d+) rows of the 26\.04\.01 set")
    blackwell = checks["heldout_blackwell_2604"]
    assert (int(m.group(1)), int(m.group(2))) == (blackwell.inside, blackwell.rows)
    m = claim(r"and (\d+) of (\d+) of the\s+26\.06-26\.08 set")
    later = checks["heldout_bridge_2606"]
    assert (int(m.group(1)), int(m.group(2))) == (later.inside, later.rows)
    m = claim(r"heldout_blackwell_2604\.py`, (\d+) runs\): median ([\d.]+)%")
    assert int(m.group(1)) == blackwell.rows
    assert float(m.group(2)) == blackwell.median_abs_error_pct
    m = claim(r"heldout_bridge_2606\.py`, (\d+) runs[^)]*\): median ([\d.]+)%")
    assert (int(m.group(1)), float(m.group(2))) == (later.rows, later.median_abs_error_pct)
    mlperf = checks["heldout_mlperf"]
    m = claim(r"heldout_mlperf\.py`, (\d+) runs:[\s\S]*?median ([\d.]+)%, (\d+) of (\d+) inside")
    assert (int(m.group(1)), float(m.group(2))) == (mlperf.rows, mlperf.median_abs_error_pct)
    assert (int(m.group(3)), int(m.group(4))) == (mlperf.inside, mlperf.rows)


def test_aliases_formats_and_knobs() -> None:
    aliases = claim(r"aliases \(((?:`\w+`(?:, )?)+)\)").group(1)
    for alias in re.findall(r"`(\w+)`", aliases):
        assert alias.lower() in model_aliases(), alias
    assert f"Megatron-LM `{megatron.VERSION.split()[0]}`" in TEXT
    knobs = claim(r"re-plans every combination of the knobs \(([^)]*)\)").group(1)
    named = set(re.findall(r"\b[a-z_]+\b", knobs)) - {"and", "for", "models"}
    assert named == set(whatif.KNOBS), sorted(named ^ set(whatif.KNOBS))
    m = claim(r"a sweep of more than (\d+) scenarios")
    assert int(m.group(1)) == whatif.DEFAULT_MAX_SCENARIOS
    m = claim(r"\(at most ([\d,]+);")
    assert int(m.group(1).replace(",", "")) == whatif.MAX_SCENARIOS_LIMIT
