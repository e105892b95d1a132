"""Hostile ``layout whatif`` input: the work is bounded before anything runs.

A product of --vary lists over the cap is refused by arithmetic, not by building it; a list may not
repeat a value; no more processes start than cores or scenarios (with a note when --workers asks
for more); the requests are streamed, a few per worker in flight; and --report is checked before
the sweep, never overwriting an input file."""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import time
import tracemalloc
import types
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest

import planner
from planner.catalog import load_cluster, load_model
from planner.cli.options import WHATIF_MAX_SCENARIOS, WHATIF_MAX_SCENARIOS_LIMIT
from planner.errors import SpecError
from planner.search import pool as pool_module
from planner.search import whatif as whatif_module
from planner.search.pool import IN_FLIGHT_PER_WORKER, available_cores, local_processes
from planner.search.whatif import (
    DEFAULT_MAX_SCENARIOS,
    MAX_SCENARIOS_LIMIT,
    ClusterBase,
    ScenarioRequest,
    check_scenario_count,
    run_scenario,
)
from planner.specs.workload import TrainWorkload
from tests.test_cli import assert_one_line_error, run_main, untimed

W8 = ["whatif", "--model", "8B", "--cluster", "hgx_h100x8"]
SMALL_FLAGS = ["--seq-len", "4096", "--global-batch", "64"]
SMALL = {"seq_len": 4096, "global_batch": 64}
"""A workload small enough that 8B plans in a fraction of a second."""
MODEL_YAML = Path(__file__).resolve().parents[1] / "models" / "llama3.1-8b.yaml"


def _values(start: int, n: int = 1000) -> str:
    return ",".join(str(start + i) for i in range(n))


HUGE = ["--vary", f"nic_gbps={_values(100)}", "--vary", f"seq_len={_values(1024)}",
        "--vary", f"global_batch={_values(8)}"]  # fmt: skip
"""Three lists of 1,000 values: 10^9 scenarios."""


@pytest.fixture
def no_scenario_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if any scenario is planned."""

    def refuse(request: object) -> object:
        raise AssertionError("a scenario ran")

    monkeypatch.setattr(whatif_module, "run_scenario", refuse)


# --- the scenario cap ----------------------------------------------------------------------


def test_cli_constants_match_the_library() -> None:
    assert WHATIF_MAX_SCENARIOS == DEFAULT_MAX_SCENARIOS == 256
    assert WHATIF_MAX_SCENARIOS_LIMIT == MAX_SCENARIOS_LIMIT == 100_000


def test_three_lists_of_1000_are_refused_instantly(no_scenario_runs: None) -> None:
    start = time.perf_counter()
    code, out, err = run_main([*W8, *HUGE])
    elapsed = time.perf_counter() - start
    line = assert_one_line_error(code, err, 2)
    assert elapsed < 5, elapsed
    assert out == ""
    assert "1,000,000,000 scenarios" in line
    assert "1,000 nic_gbps x 1,000 seq_len x 1,000 global_batch" in line
    assert "cap of 256" in line and "--max-scenarios" in line


def test_api_refuses_the_product_before_building_or_parsing_it() -> None:
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(SpecError, match=r"1,000,000,000 scenarios .* cap of 256"):
            planner.whatif(
                model="8B", cluster="hgx_h100x8",
                vary={"nic_gbps": range(100, 1100), "seq_len": range(1024, 2024),
                      "global_batch": range(8, 1008)},
            )  # fmt: skip
        with pytest.raises(SpecError, match="--max-scenarios"):
            planner.whatif(model="8B", cluster="hgx_h100x8", vary=HUGE[1::2])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 5
    assert peak < 20 * 2**20, peak  # a few MB of value texts, not 10^9 requests


def test_count_is_arithmetic_and_the_cap_is_inclusive() -> None:
    assert check_scenario_count({"nic_gbps": 16, "seq_len": 16}, 256) == 256
    with pytest.raises(SpecError, match=r"257 scenarios \(257 gpus\), over the cap of 256"):
        check_scenario_count({"gpus": 257}, 256)
    assert check_scenario_count({"a": 10**6, "b": 10**6, "c": 0}, 1) == 0


def test_max_scenarios_raises_the_cap() -> None:
    sweep = [*W8, *SMALL_FLAGS, "--vary", "nic_gbps=100,200,400", "--json"]
    code, _, err = run_main([*sweep, "--max-scenarios", "2"])
    line = assert_one_line_error(code, err, 2)
    assert "3 scenarios (3 nic_gbps), over the cap of 2" in line and "--max-scenarios" in line
    code, out, err = run_main([*sweep, "--max-scenarios", "3"])
    assert code == 0, err
    assert '"nic_gbps": 400' in out and err == ""
    result = planner.whatif(model="8B", cluster="hgx_h100x8", workload=SMALL,
                            vary=["nic_gbps=100,200,400"], max_scenarios=3)  # fmt: skip
    assert len(result.scenarios) == 3


@pytest.mark.parametrize("cap", ["0", "100001", "1M", "lots"])
def test_cli_max_scenarios_out_of_range(cap: str, no_scenario_runs: None) -> None:
    code, _, err = run_main([*W8, "--vary", "nic_gbps=400", "--max-scenarios", cap])
    line = assert_one_line_error(code, err, 2)
    assert "--max-scenarios" in line


@pytest.mark.parametrize("cap", [0, -1, 100_001, True, 2.5])
def test_api_max_scenarios_out_of_range(cap: object) -> None:
    with pytest.raises(SpecError, match=r"--max-scenarios .*1 to 100,000"):
        planner.whatif(model="8B", cluster="hgx_h100x8", vary=["nic_gbps=400"],
                       max_scenarios=cap)  # type: ignore[arg-type]  # fmt: skip


# --- duplicates ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vary", "needle"),
    [
        ("nic_gbps=400,400.0", "'400.0' repeats nic_gbps=400"),
        ("nic_gbps=200,400,200", "'200' repeats nic_gbps=200"),
        ("rail_optimized=yes,true", "'true' repeats rail_optimized=true"),
        ("precision=bf16,BF16", "'BF16' repeats precision=bf16"),
        ("gpus=8,8", "'8' repeats gpus=8"),
        ("system=hgx_b200,hgx_b200", "repeats system=hgx_b200"),
    ],
)
def test_cli_duplicate_values_are_refused(vary: str, needle: str, no_scenario_runs: None) -> None:
    code, _, err = run_main([*W8, "--vary", vary])
    line = assert_one_line_error(code, err, 2)
    assert needle in line and "give each value once" in line


def test_api_duplicate_values_are_refused() -> None:
    with pytest.raises(SpecError, match=r"'400\.0' repeats nic_gbps=400"):
        planner.whatif(model="8B", cluster="hgx_h100x8", vary=["nic_gbps=400,400.0"])
    with pytest.raises(SpecError, match="repeats nic_gbps=400"):
        planner.whatif(model="8B", cluster="hgx_h100x8", vary={"nic_gbps": [400, 400.0]})
    with pytest.raises(SpecError, match="repeats rail_optimized=false"):
        planner.whatif(model="8B", cluster="hgx_h100x8", vary={"rail_optimized": [False, "no"]})
    with pytest.raises(SpecError, match="given twice"):
        planner.whatif(model="8B", cluster="hgx_h100x8", vary=["gpus=8", "num_gpus=16"])
    with pytest.raises(SpecError, match="repeats seq_len=2048"):  # the library, called directly
        whatif_module.whatif(
            load_model("8B"), load_cluster("hgx_h100x8"), TrainWorkload(**SMALL),
            knobs={"seq_len": [2048, 4096, 2048]},
        )  # fmt: skip


def test_cli_knob_given_twice_is_still_refused(no_scenario_runs: None) -> None:
    code, _, err = run_main([*W8, "--vary", "nic_gbps=200", "--vary", "nic_gbit=400"])
    assert "given twice" in assert_one_line_error(code, err, 2)


# --- workers and cores ---------------------------------------------------------------------


def test_available_cores_is_the_affinity_mask() -> None:
    if hasattr(os, "sched_getaffinity"):
        assert available_cores() == len(os.sched_getaffinity(0))
    assert available_cores() >= 1


def test_processes_never_exceed_cores_or_scenarios(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "available_cores", lambda: 2)
    assert local_processes(1, 10) == (1, None)
    assert local_processes(2, 10) == (2, None)
    assert local_processes(2, 1) == (1, None)  # one scenario: run it here
    processes, note = local_processes(32, 10)
    assert processes == 2 and note is not None and "--workers 32" in note and "2 cores" in note
    assert local_processes(32, 1)[0] == 1
    processes, note = local_processes(8, 10, "ray")
    assert processes == 1 and note is not None and "--engine ray" in note
    assert local_processes(1, 10, "ray") == (1, None)


class _RecordingPool(ProcessPoolExecutor):
    started: ClassVar[list[int]] = []

    def __init__(self, max_workers: int, **options: Any) -> None:
        _RecordingPool.started.append(max_workers)
        super().__init__(max_workers=max_workers, **options)


def test_cli_workers_above_cores_are_clamped_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "available_cores", lambda: 2)
    monkeypatch.setattr(pool_module, "ProcessPoolExecutor", _RecordingPool)
    _RecordingPool.started = []
    sweep = [*W8, *SMALL_FLAGS, "--vary", "nic_gbps=100,200,400", "--json"]
    code, out, err = run_main([*sweep, "--workers", "32"])
    assert code == 0, err
    assert err.splitlines() == [
        "layout whatif: note: --workers 32 is more than the 2 cores available here: "
        "starting at most 2 processes"
    ]
    assert _RecordingPool.started == [2]
    code, serial, err = run_main(sweep)
    assert code == 0 and err == ""

    def scenarios(text: str) -> list[object]:
        import json

        return [s["plan"]["step_time_s"] for s in json.loads(text)["scenarios"]]

    assert scenarios(out) == scenarios(serial)


def test_no_more_processes_than_scenarios(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "available_cores", lambda: 64)
    monkeypatch.setattr(pool_module, "ProcessPoolExecutor", _RecordingPool)
    _RecordingPool.started = []
    code, _, err = run_main([*W8, *SMALL_FLAGS, "--vary", "nic_gbps=100,200", "--workers", "16"])
    assert code == 0 and err == ""  # 16 <= 64 cores: nothing to say
    assert _RecordingPool.started == [2]


def test_api_notes_the_clamp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "available_cores", lambda: 1)
    notes: list[str] = []
    result = planner.whatif(model="8B", cluster="hgx_h100x8", workload=SMALL,
                            vary=["nic_gbps=100,200"], workers=4, note=notes.append)  # fmt: skip
    assert len(result.scenarios) == 2
    assert notes == [
        "--workers 4 is more than the 1 core available here: starting at most 1 process"
    ]
    with pytest.warns(UserWarning, match="--workers 4"):
        planner.whatif(model="8B", cluster="hgx_h100x8", workload=SMALL,
                       vary=["nic_gbps=100"], workers=4)  # fmt: skip


# --- streaming -----------------------------------------------------------------------------


def _requests(n: int, made: list[int]) -> Iterator[ScenarioRequest]:
    model, base = load_model("8B"), ClusterBase.of(load_cluster("hgx_h100x8"))
    workload = TrainWorkload(**SMALL)
    for i in range(n):
        made[0] += 1
        yield ScenarioRequest(model=model, base=base, workload=workload,
                              vary={"nic_gbps": 100 + i})  # fmt: skip


def test_pool_keeps_only_a_few_requests_in_flight() -> None:
    n, processes = 12, 2
    made, ahead = [0], []
    results = whatif_module._run_local(
        _requests(n, made), n, processes, lambda done, total: ahead.append(made[0] - done)
    )
    assert [s.vary["nic_gbps"] for s in results] == [100 + i for i in range(n)]
    assert max(ahead) <= processes * IN_FLIGHT_PER_WORKER
    serial_made: list[int] = [0]
    serial = whatif_module._run_local(_requests(n, serial_made), n, 1, lambda d, t: None)
    assert [untimed(s.model_dump(mode="json")) for s in results] == [
        untimed(s.model_dump(mode="json")) for s in serial
    ]


def test_ray_engine_streams_through_a_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in for ``ray`` (run synchronously): same answer as local, bounded in flight."""
    in_flight: list[int] = []
    live: set[int] = set()

    class Ref:
        def __init__(self, request: ScenarioRequest) -> None:
            self.request = request
            live.add(id(self))
            in_flight.append(len(live))

    def wait(refs: list[Ref], num_returns: int) -> tuple[list[Ref], list[Ref]]:
        return refs[:num_returns], refs[num_returns:]

    def get(ref: Ref) -> object:
        live.discard(id(ref))
        return run_scenario(ref.request)

    fake = types.SimpleNamespace(
        is_initialized=lambda: True,
        cluster_resources=lambda: {"CPU": 1.0},
        remote=lambda fn: types.SimpleNamespace(remote=Ref),
        wait=wait,
        get=get,
    )
    monkeypatch.setitem(sys.modules, "ray", fake)
    vary = ["nic_gbps=100,200,300,400,800", "rail_optimized=true,false"]
    notes: list[str] = []
    remote = planner.whatif(model="8B", cluster="hgx_h100x8", workload=SMALL, vary=vary,
                            engine="ray", workers=3, note=notes.append)  # fmt: skip
    local = planner.whatif(model="8B", cluster="hgx_h100x8", workload=SMALL, vary=vary)
    assert [untimed(s.model_dump(mode="json")) for s in remote.scenarios] == [
        untimed(s.model_dump(mode="json")) for s in local.scenarios
    ]
    assert max(in_flight) <= IN_FLIGHT_PER_WORKER
    assert len(notes) == 1 and "--engine ray" in notes[0]


# --- --report pre-flight -------------------------------------------------------------------


def test_report_to_a_missing_folder_fails_before_the_sweep(
    tmp_path: Path, no_scenario_runs: None
) -> None:
    target = tmp_path / "out" / "dir" / "missing" / "r.html"
    start = time.perf_counter()
    code, out, err = run_main(
        [*W8, "--vary", "nic_gbps=100,200,400,800", "--progress", "--report", str(target)]
    )
    line = assert_one_line_error(code, err, 2)
    assert time.perf_counter() - start < 5
    assert "does not exist" in line and "missing" in line
    assert "scenarios" not in err and out == ""  # no progress bar: nothing ran
    assert not target.parent.exists()


def test_report_to_a_folder_or_twice_is_refused(tmp_path: Path, no_scenario_runs: None) -> None:
    folder = tmp_path / "r.html"
    folder.mkdir()
    code, _, err = run_main([*W8, "--vary", "nic_gbps=400", "--report", str(folder)])
    assert "is a directory, not a file" in assert_one_line_error(code, err, 2)
    twice = str(tmp_path / "r.md")
    code, _, err = run_main([*W8, "--vary", "nic_gbps=400", "--report", twice, "--report", twice])
    assert "given twice" in assert_one_line_error(code, err, 2)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write anywhere")
def test_report_to_a_read_only_folder_is_refused(tmp_path: Path, no_scenario_runs: None) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        code, _, err = run_main([*W8, "--vary", "nic_gbps=400", "--report", str(folder / "r.md")])
    finally:
        folder.chmod(0o700)
    assert "not writable" in assert_one_line_error(code, err, 2)


def test_report_equal_to_the_model_file_is_refused(tmp_path: Path, no_scenario_runs: None) -> None:
    model = tmp_path / "model.md"  # a model YAML under a report's name: loaded by content
    shutil.copyfile(MODEL_YAML, model)
    before = model.read_bytes()
    for target in (model, tmp_path / "link.md"):
        if target != model:
            target.symlink_to(model)
        code, out, err = run_main(
            ["whatif", "--model", str(model), "--cluster", "hgx_h100x8", "--vary", "nic_gbps=400",
             "--report", str(target)]
        )  # fmt: skip
        line = assert_one_line_error(code, err, 2)
        assert "is the --model file" in line and out == ""
        assert model.read_bytes() == before


def test_report_still_written_after_a_good_sweep(tmp_path: Path) -> None:
    target = tmp_path / "r.md"
    code, out, err = run_main(
        [*W8, *SMALL_FLAGS, "--vary", "nic_gbps=200,400", "--report", str(target)]
    )
    assert code == 0, err
    assert err == f"layout whatif: wrote {target}\n"
    assert "nic_gbps=400" in target.read_text(encoding="utf-8") and "\n400 " in out  # knob columns


def test_cartesian_order_is_kept_by_the_stream() -> None:
    result = planner.whatif(model="8B", cluster="hgx_h100x8", workload={"global_batch": 64},
                            vary=["nic_gbps=100,400", "seq_len=2048,4096", "rail_optimized=on,off"],
                            workers=2)  # fmt: skip
    expected = [
        {"nic_gbps": n, "seq_len": t, "rail_optimized": r}
        for n, t, r in itertools.product((100, 400), (2048, 4096), (True, False))
    ]
    assert [s.vary for s in result.scenarios] == expected
