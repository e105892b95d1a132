"""Collective bus bandwidth over the local devices: all-reduce, all-gather and all-to-all over
message sizes, nccl-tests style (NVIDIA/nccl-tests doc/PERFORMANCE.md).

The command launches the ranks itself: ``torch.multiprocessing`` spawns one process per device,
which join a ``torch.distributed`` group through a file store in a temporary folder (no network
port). NCCL (RCCL on ROCm) on GPUs; a dry run uses two gloo ranks on the CPU to exercise the same
path. Rank 0 writes the results as JSON; the parent polls a progress file and stops the ranks at
the deadline. PyTorch is imported inside functions only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

OPS = ("all_reduce", "all_gather", "all_to_all")
"""The collectives measured, in order."""
MAX_ITERS = 50
"""Timed calls per (op, size) at most; 1 GiB messages get 5."""


class CollectiveTimeoutError(RuntimeError):
    """The ranks did not finish before the deadline."""


def bus_factor(op: str, ranks: int) -> float:
    """Bus bandwidth over algorithm bandwidth (nccl-tests): 2(n-1)/n for all-reduce, (n-1)/n for
    all-gather and all-to-all.

    >>> bus_factor("all_reduce", 8)
    1.75
    """
    share = (ranks - 1) / ranks
    return 2.0 * share if op == "all_reduce" else share


def iterations(message_bytes: int) -> int:
    """Timed calls for a message size: the same on every rank (they must agree).

    >>> iterations(2**30), iterations(2**20)
    (5, 50)
    """
    return int(min(MAX_ITERS, max(5, 2**30 * 5 // message_bytes)))


def run_collectives(
    *,
    world_size: int,
    backend: str,
    sizes: Sequence[int],
    timeout_s: float,
    on_progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Spawn ``world_size`` ranks and measure every op at every size; one dict per measurement
    (op, ranks, message_bytes, time_us, bus_GB_per_s). Raises CollectiveTimeoutError past
    ``timeout_s`` and RuntimeError when a rank fails."""
    import tempfile

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="layout-calibrate-") as tmp:
        folder = Path(tmp)
        args = (world_size, backend, str(folder), list(sizes))
        ctx = mp.start_processes(
            _worker, args=args, nprocs=world_size, join=False, start_method="spawn"
        )
        deadline = time.monotonic() + timeout_s
        progress = folder / "progress"
        try:
            while not ctx.join(timeout=0.5):
                if on_progress is not None and progress.exists():
                    on_progress(len(progress.read_text(encoding="utf-8").splitlines()))
                if time.monotonic() > deadline:
                    raise CollectiveTimeoutError(f"collectives took longer than {timeout_s:.0f} s")
        except mp.ProcessRaisedException as exc:
            last = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise RuntimeError(f"a collective rank failed: {last[:200]}") from None
        except mp.ProcessExitedException as exc:
            raise RuntimeError(f"a collective rank exited: {exc}") from None
        finally:
            for process in ctx.processes:
                if process.is_alive():
                    process.terminate()
                process.join(timeout=10)
        return json.loads((folder / "results.json").read_text(encoding="utf-8"))


def _worker(rank: int, world_size: int, backend: str, folder: str, sizes: list[int]) -> None:
    """One rank: join the group, time every (op, size), rank 0 writes the results."""
    import torch
    import torch.distributed as dist

    if backend == "nccl":
        torch.cuda.set_device(rank)
        device, dtype = torch.device("cuda", rank), torch.bfloat16
    else:
        device, dtype = torch.device("cpu"), torch.float32
    root = Path(folder)
    dist.init_process_group(
        backend, init_method=f"file://{root / 'store'}", rank=rank, world_size=world_size
    )
    try:
        results = []
        for op in OPS:
            for size in sizes:
                seconds, num_bytes = _time_op(torch, dist, op, size, device, dtype, world_size)
                if rank == 0:
                    results.append(
                        {
                            "op": op,
                            "ranks": world_size,
                            "message_bytes": num_bytes,
                            "time_us": seconds * 1e6,
                            "bus_GB_per_s": num_bytes / seconds * bus_factor(op, world_size) / 1e9,
                        }
                    )
                    with (root / "progress").open("a", encoding="utf-8") as out:
                        out.write(f"{op} {num_bytes}\n")
        if rank == 0:
            partial = root / "results.json.part"
            partial.write_text(json.dumps(results), encoding="utf-8")
            partial.replace(root / "results.json")
    finally:
        dist.destroy_process_group()


def _time_op(
    torch: Any, dist: Any, op: str, size: int, device: Any, dtype: Any, n: int
) -> tuple[float, int]:
    """(seconds per call on the slowest rank, message bytes actually used)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    numel = max(n, size // itemsize // n * n)
    if op == "all_reduce":
        buf = torch.ones(numel, device=device, dtype=dtype)

        def call() -> None:
            dist.all_reduce(buf)

    elif op == "all_gather":
        out = torch.empty(numel, device=device, dtype=dtype)
        part = torch.ones(numel // n, device=device, dtype=dtype)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

        def call() -> None:
            gather(out, part)

    else:
        send = torch.ones(numel, device=device, dtype=dtype)
        recv = torch.empty_like(send)

        def call() -> None:
            dist.all_to_all_single(recv, send)

    for _ in range(2):
        call()
    iters = iterations(numel * itemsize)
    _sync(torch, device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    _sync(torch, device)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item()), numel * itemsize


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
