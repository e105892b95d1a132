"""Independent searches over local cores: a what-if sweep's scenarios, a pack's candidate rows.

One picklable request per search, one top-level function that answers it; the same function
runs in this process (one worker) or over a ``concurrent.futures.ProcessPoolExecutor``, and the
answers always come back in request order, so the result never depends on the worker count.
No more processes start than there are cores or requests; requests are made lazily and only a
few per worker are in flight, so memory grows with the answers kept, not with the requests.
"""

from __future__ import annotations

import itertools
import multiprocessing
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing.context import BaseContext
from typing import TypeVar

from planner.interrupt import quiet_worker
from planner.search import engine
from planner.search.engine import available_cores
from planner.search.space import share_memory_estimates_for_process, shared_memory_estimates

Request = TypeVar("Request")
Answer = TypeVar("Answer")

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each request is answered."""

IN_FLIGHT_PER_WORKER = 4
"""Requests submitted ahead per process (or Ray CPU): enough to keep each busy, few enough that
the requests never pile up in memory."""

WORKER_PRELOAD = ("planner.search.whatif", "planner.search.fleet", "planner.api")
"""Modules a forkserver imports once, so that its workers start with them loaded."""


def no_progress(done: int, total: int) -> None:
    """Default progress callback: nothing."""


def warn_note(line: str) -> None:
    """Default note callback: a UserWarning at the caller of the caller of the API function that
    was handed no ``note`` (the CLI prints its notes on stderr instead)."""
    warnings.warn(line, stacklevel=4)


def local_processes(workers: int, count: int, engine: str = "process") -> tuple[int, str | None]:
    """Processes to start for ``workers`` asked and ``count`` requests: never more than the
    cores or the requests; with a one-line note when the cores (or Ray) overrule ``workers``.

    >>> local_processes(1, 10)
    (1, None)
    """
    if engine == "ray":
        note = None
        if workers > 1:
            note = (
                f"--workers {workers} does not apply to --engine ray: Ray runs the scenarios "
                "over its cluster's CPUs"
            )
        return 1, note
    cores = available_cores()
    note = None
    if workers > cores:
        note = (
            f"--workers {workers} is more than the {cores} {'core' if cores == 1 else 'cores'} "
            f"available here: starting at most {cores} {'process' if cores == 1 else 'processes'}"
        )
    return max(1, min(workers, cores, count)), note


def worker_context() -> BaseContext:
    """The start method of the pool's processes: the platform's default when it is fork (the
    workers inherit this process's imports and catalog caches: no start-up cost), else the
    forkserver with :data:`WORKER_PRELOAD` imported once in the server (where fork is not the
    default: macOS, Python 3.14+), else spawn (Windows: each worker imports the planner)."""
    default = (
        multiprocessing.get_start_method(allow_none=True)
        or (multiprocessing.get_all_start_methods()[0])
    )
    if default == "fork":
        return multiprocessing.get_context("fork")
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(WORKER_PRELOAD))
        return context
    return multiprocessing.get_context()


def start_worker() -> None:
    """Initializer of a pool's process: Ctrl-C ends it at once and quietly
    (:func:`planner.interrupt.quiet_worker`), its searches share memory estimates across the
    requests it answers (space.MemoryMemo), and it solves pipeline splits one at a time
    (:func:`planner.search.engine.cap_split_threads`)."""
    quiet_worker()
    share_memory_estimates_for_process()
    engine.cap_split_threads(1)  # the pool already runs one process per CPU


def in_order(results: Sequence[Answer | None]) -> list[Answer]:
    out = [r for r in results if r is not None]
    assert len(out) == len(results)  # internal: every index was filled exactly once
    return out


def run_local(
    answer: Callable[[Request], Answer],
    requests: Iterator[Request],
    count: int,
    processes: int,
    progress: ProgressCallback,
) -> list[Answer]:
    """``answer`` each of ``count`` requests here (``processes`` <= 1, sharing memory
    estimates) or over a pool of ``processes`` (``answer`` a module-level function, requests
    and answers picklable), at most :data:`IN_FLIGHT_PER_WORKER` per process submitted ahead;
    answers in request order, never None. An exception in a worker is raised here, after the
    pool has stopped (the few requests in flight run to their end)."""
    results: list[Answer | None] = [None] * count
    if processes <= 1:
        with shared_memory_estimates():
            for done, request in enumerate(requests, start=1):
                results[done - 1] = answer(request)
                progress(done, count)
        return in_order(results)
    source = enumerate(requests)
    # Under spawn or forkserver a calling script needs the usual `if __name__ == "__main__":`
    # guard (the `layout` entry point has it).
    pool = ProcessPoolExecutor(
        max_workers=processes, mp_context=worker_context(), initializer=start_worker
    )
    try:
        pending: dict[Future[Answer], int] = {}

        def submit(n: int) -> None:
            for i, request in itertools.islice(source, n):
                pending[pool.submit(answer, request)] = i

        submit(processes * IN_FLIGHT_PER_WORKER)
        done = 0
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                results[pending.pop(future)] = future.result()
                done += 1
                progress(done, count)
            submit(len(finished))
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # only the few in flight still run
        raise
    pool.shutdown(wait=True)
    return in_order(results)
