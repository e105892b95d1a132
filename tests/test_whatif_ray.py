"""``layout whatif --engine ray`` against a Ray cluster the test starts on loopback (issue 21,
item 9): the CLI joins it through RAY_ADDRESS, as the README says, and gives the scenarios the
local engine gives. CI installs Ray (.ci/run); without it the test is skipped.

The head runs as ``ray start --head --block`` in a session of its own, and is stopped by
signalling that session's process group: never ``ray stop``, which would stop every Ray
process of the user on the machine."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_cli import untimed

pytest.importorskip("ray")

SWEEP = ["whatif", "--model", "8B", "--cluster", "hgx_h100x16", "--seq-len", "4096",
         "--global-batch", "64", "--vary", "nic_gbps=100,400", "--vary", "rail_optimized=true,false",
         "--json"]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_cli() -> str:
    found = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if found is None:
        pytest.skip("the ray command is not installed")
    return found


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-node Ray cluster on 127.0.0.1 with 2 CPUs; yields its address."""
    port = _free_port()
    temp = tmp_path_factory.mktemp("ray")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    log = temp / "ray-start.log"
    with log.open("wb") as out:
        head = subprocess.Popen(
            [_ray_cli(), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
             f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
             "--disable-usage-stats", f"--temp-dir={temp}"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if head.poll() is not None:  # say why (another Ray head on this host, ...)
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                pytest.fail(f"ray start --head exited with {head.returncode}: {' | '.join(tail)}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            pytest.fail("the Ray head did not listen within 90 s")
        yield address
    finally:
        with contextlib.suppress(ProcessLookupError):  # the head may have exited (above)
            os.killpg(head.pid, signal.SIGTERM)  # this head's session only
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)


def _layout(argv: list[str], env: dict[str, str]) -> dict[str, object]:
    entry = "import sys; from planner.cli import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", entry, *argv], capture_output=True, text=True, env=env,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_cli_whatif_engine_ray_joins_the_cluster_and_matches_local(ray_head: str) -> None:
    env = {**os.environ, "RAY_ADDRESS": ray_head, "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AUTH_MODE": "disabled"}  # fmt: skip
    remote = _layout([*SWEEP, "--engine", "ray"], env)
    local = _layout(SWEEP, {k: v for k, v in env.items() if k != "RAY_ADDRESS"})
    assert len(remote["scenarios"]) == 4  # type: ignore[arg-type]
    assert [s["vary"] for s in remote["scenarios"]] == [  # type: ignore[union-attr]
        s["vary"]
        for s in local["scenarios"]  # type: ignore[union-attr]
    ]
    assert [untimed(s["plan"]) for s in remote["scenarios"]] == [  # type: ignore[union-attr]
        untimed(s["plan"])  # a CP-SAT split's wall time differs from run to run
        for s in local["scenarios"]  # type: ignore[union-attr]
    ]
