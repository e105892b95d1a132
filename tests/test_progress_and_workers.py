"""Long work shows progress on a terminal and stays quiet in pipes; a sweep's processes share
memory estimates across scenarios without changing an answer (issue 21, item 7; the timings
are benchmarks/bench_whatif_workers.py's, not a test's)."""

from __future__ import annotations

import itertools
import multiprocessing

import pytest

import planner.search.whatif as whatif
from planner.api import load_cluster, load_model
from planner.cli import progress as progress_module
from planner.cli.progress import progress
from planner.search import pool, space
from planner.specs.workload import TrainWorkload
from tests.test_cli import run_main


def _requests() -> list[whatif.ScenarioRequest]:
    base = whatif.ClusterBase.of(load_cluster("hgx_h100x64"))
    knobs = {"nic_gbps": [200.0, 800.0], "domain_size": [8, 16], "precision": ["bf16", "fp8"]}
    return [
        whatif.ScenarioRequest(
            model=load_model("mixtral-8x7b"),
            base=base,
            workload=TrainWorkload(),
            vary=dict(zip(knobs, values, strict=True)),
        )
        for values in itertools.product(*knobs.values())
    ]


def test_shared_memory_estimates_change_no_answer() -> None:
    requests = _requests()
    plain = [whatif.run_scenario(r) for r in requests]
    with space.shared_memory_estimates():
        shared = [whatif.run_scenario(r) for r in requests]
        tables = space._MEMO.tables if space._MEMO is not None else {}
        assert len(tables) == 2  # one table per precision: the NIC and domain knobs share it
    assert space._MEMO is None  # the block ends the sharing
    assert [s.plan for s in shared] == [s.plan for s in plain]


def test_the_memo_is_bounded() -> None:
    memo = space.MemoryMemo()
    model = load_model("8B")
    for batch in range(1, memo.MAX_WORKLOADS + 3):
        memo.table(model, TrainWorkload(global_batch=batch))
    assert len(memo.tables) == memo.MAX_WORKLOADS


def test_workers_start_by_fork_where_it_is_the_default() -> None:
    context = pool.worker_context()
    default = multiprocessing.get_start_method(allow_none=True) or "fork"
    if default == "fork":
        assert context.get_start_method() == "fork"
    else:
        assert context.get_start_method() in ("forkserver", "spawn")


def test_progress_is_quiet_unless_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    with progress("validate", 3, enabled=False, unit="rows") as update:
        update(1, item="S1")
    assert capsys.readouterr().err == ""
    with progress("validate", 3, enabled=True, unit="rows") as update:
        update(1, item="S1")
        update(3, item="K1/full\x1b[2J")
    err = capsys.readouterr().err
    assert "validate" in err and "3/3" in err and "rows" in err
    assert "\x1b[2J" not in err  # an item from a user file cannot clear the screen


def test_validate_and_calibrate_show_progress_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress_module, "wanted", lambda flag=False: True)
    code, _, err = run_main(["validate", "--rows", "S1,K1"])
    assert code == 0 and "validate" in err and "3/3" in err  # K1 and K1/full
    code, _, err = run_main(["validate", "--rows", "S1"])
    assert "1/1 rows" in err
    monkeypatch.setattr(progress_module, "wanted", lambda flag=False: False)
    code, _, err = run_main(["validate", "--rows", "S1"])
    assert code == 0 and err == ""
