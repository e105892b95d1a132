"""The operating point of one serving layout: the concurrency it runs at and the latencies there.

Saturated (no request rate): the largest batch the KV cache, the token budget and the targets
allow (binary search: TPOT, TTFT and end-to-end latency all grow with the batch), or the batch
the user fixes. Under a request rate (Poisson arrivals spread over the replicas): the
concurrency that Little's law gives, n = lambda x R(n), capped by the slots, and the request
latencies with queueing (:mod:`planner.cost.serving_queue`). Targets apply to the mean time
per output token and to TTFT and end-to-end latency at ``slo_percentile``.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.cost.serving_cycle import (
    SteadyState,
    prefill_service_s,
    steady_state,
    ttft_service_s,
)
from planner.cost.serving_queue import QueueInputs, RequestTimes, request_times
from planner.cost.serving_time import ServeSetup
from planner.specs.base import FrozenSpec
from planner.specs.workload import ServeWorkload
from planner.units import MS

ONLINE_ITERATIONS = 40
"""Most evaluations of Little's law's right-hand side for an offered request rate."""
ONLINE_TOLERANCE = 1e-9
"""Relative error left at which Little's law's fixed point is taken as found."""
TARGETS: tuple[tuple[str, str], ...] = (
    ("tpot_ms", "TPOT"),
    ("ttft_ms", "TTFT"),
    ("e2e_ms", "end-to-end latency"),
)
"""(workload field, words) of each latency target."""


class OperatingPoint(FrozenSpec):
    """A layout at its chosen concurrency."""

    concurrency: int
    """Sequences decoded together per replica."""
    limit: str
    """What bounds the concurrency (reason code)."""
    state: SteadyState
    """Decode iteration and interleaved prefill at this concurrency."""
    ttft_s: float
    """Time to first token of a prompt joining this batch, without queueing (s)."""
    times: RequestTimes
    """Request latencies (with queueing under a request rate)."""
    rate_per_replica: float | None = None
    """Poisson arrivals at one replica (1/s); None = saturated."""
    warnings: tuple[str, ...] = ()
    """What the point assumes that the user should know."""


def mean_context(workload: ServeWorkload) -> float:
    """Mean context of a decoding sequence: ISL + OSL / 2 (tokens).

    >>> mean_context(ServeWorkload(prompt_len=1000, output_len=500, context=2000))
    1250.0
    """
    return workload.prompt_len + workload.output_len / 2


def point_times(
    setup: ServeSetup, workload: ServeWorkload, concurrency: float, rate: float | None, slots: int
) -> tuple[SteadyState, float, RequestTimes | None]:
    """(steady state, no-queue TTFT, request latencies) at ``concurrency``; latencies are None
    when ``rate`` reaches what the replica sustains."""
    state = steady_state(setup, workload, concurrency)
    ttft = ttft_service_s(setup, workload, state)
    decode = (workload.output_len - 1) * state.tpot_s
    inputs = QueueInputs(
        rate_per_s=rate or 0.0,
        slots=max(1, slots),
        residence_s=ttft + decode,
        prefill_service_s=prefill_service_s(workload, state) if rate else 0.0,
        ttft_service_s=ttft,
        decode_s=decode,
    )
    return state, ttft, request_times(inputs)


def target_value_s(name: str, state: SteadyState, times: RequestTimes, percentile: int) -> float:
    """The achieved figure a target named ``name`` (tpot_ms, ttft_ms, e2e_ms) is compared with."""
    if name == "tpot_ms":
        return state.tpot_s
    kind = "ttft" if name == "ttft_ms" else "e2e"
    return getattr(times, f"{kind}_p{percentile}_s")


def _missed(
    workload: ServeWorkload, state: SteadyState, times: RequestTimes | None
) -> tuple[str, str] | None:
    """(target field, words) of the first target the point misses; None when all are met."""
    for name, words in TARGETS:
        target = getattr(workload, name)
        if target is None:
            continue
        if times is None or target_value_s(name, state, times, workload.slo_percentile) > (
            target * MS
        ):
            return name, words
    return None


def largest_batch(upper: int, ok: Callable[[int], bool]) -> int:
    """Largest b in [1, upper] with ok(b), for ok monotone (true then false); 0 if none.

    >>> largest_batch(100, lambda b: b * b <= 50)
    7
    """
    if upper < 1 or not ok(1):
        return 0
    low, high = 1, upper
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if ok(mid) else (low, mid - 1)
    return low


def _online_concurrency(
    setup: ServeSetup, workload: ServeWorkload, rate: float, upper: int
) -> float:
    """Little's law's concurrency: the least n with n = F(n) = min(slots, max(1, lambda x
    (TTFT + OSL x TPOT(n)))), F growing with n (:func:`least_fixed_point`)."""

    def offered(n: float) -> float:
        state = steady_state(setup, workload, n)
        busy = ttft_service_s(setup, workload, state) + workload.output_len * state.tpot_s
        return min(float(upper), max(1.0, rate * busy))

    return least_fixed_point(offered)


def least_fixed_point(
    f: Callable[[float], float],
    *,
    evaluations: int = ONLINE_ITERATIONS,
    tolerance: float = ONLINE_TOLERANCE,
) -> float:
    """The least fixed point of an increasing ``f`` that maps [1, cap] into itself (its own
    clamps hold the cap; Little's law's are the slots and one sequence), by the iteration
    n <- f(n) from n = 1: each iterate stays below the least fixed point (n <= n* gives f(n) <=
    f(n*) = n*) and above the one before (f(n) >= n below n*), so it climbs to n* and never past
    it, whatever the slope (no damping is needed, and none can overshoot into a larger fixed
    point). It converges linearly, at the ratio rho of successive steps; it stops once the error
    left, step x rho / (1 - rho) for a linear iteration, is under ``tolerance`` of n, or after
    ``evaluations`` calls of f (near saturation, rho close to 1), returning the last iterate.

    >>> round(least_fixed_point(lambda n: min(100.0, 1 + 0.5 * n)), 6)  # n = 1 + n / 2
    2.0
    >>> least_fixed_point(lambda n: 100.0), least_fixed_point(lambda n: 1.0)
    (100.0, 1.0)
    >>> # fixed points at 2, 5 + 5 ** 0.5 and the cap 20: the least
    >>> round(least_fixed_point(lambda n: min(20.0, 1 + n / 2 + max(0.0, n - 4) ** 2 / 4)), 6)
    2.0
    """
    n, step = 1.0, None
    for _ in range(evaluations):
        value = f(n)
        if value <= n:  # a fixed point (f(n) >= n holds below the least one)
            return n
        new_step = value - n
        n = value
        if step is not None and new_step < step:
            rho = new_step / step
            if new_step * rho / (1.0 - rho) <= tolerance * n:
                return n
        step = new_step
    return n


def capacity_requests_per_s(setup: ServeSetup, workload: ServeWorkload, slots: int) -> float:
    """Requests/s one replica completes when all ``slots`` are busy: slots / residence."""
    state = steady_state(setup, workload, slots)
    residence = ttft_service_s(setup, workload, state) + workload.output_len * state.tpot_s
    return slots / residence


def operating_point(
    setup: ServeSetup,
    workload: ServeWorkload,
    *,
    max_sequences: int,
    sequences_at_mean: int,
    replicas: int = 1,
) -> OperatingPoint | tuple[str, str] | tuple[str, str, float]:
    """The concurrency this layout runs at, or (reason code, detail) when no batch meets the
    limits. ``max_sequences`` and ``sequences_at_mean`` are the sequences one replica's KV cache
    holds at full and at mean context; ``replicas`` share the request rate."""
    lay = setup.layout
    upper, limit = max_sequences, "kv_cache"
    budget = workload.max_batch_tokens * lay.pp
    if budget < upper:
        upper, limit = budget, "max_batch_tokens"
    warnings: list[str] = []
    if workload.concurrency is not None:
        if workload.concurrency > max_sequences:
            if workload.concurrency > sequences_at_mean:
                return "kv_cache", (
                    f"{lay.short()}: {workload.concurrency} sequences exceed the "
                    f"{sequences_at_mean} the "
                    f"KV cache holds even at their mean context of {mean_context(workload):,.0f} "
                    "tokens"
                )
            warnings.append(
                f"{workload.concurrency} sequences exceed the {max_sequences} the KV cache holds "
                f"at the full {workload.context:,}-token context: run at their mean context of "
                f"{mean_context(workload):,.0f} tokens (engines admit by actual length and may "
                "preempt when outputs run long)"
            )
        upper, limit = workload.concurrency, "requested"
    elif workload.objective == "latency" and workload.target_tokens_per_s is None:
        upper, limit = 1, "requested"
    if workload.request_rate is not None:
        return _loaded_point(setup, workload, upper, replicas, warnings)
    if not any(getattr(workload, name) is not None for name, _ in TARGETS):
        best = upper
    else:
        best = largest_batch(
            upper, lambda b: _missed(workload, *_saturated(setup, workload, b)) is None
        )
    if best == 0:
        state, times = _saturated(setup, workload, 1)
        name, words = _missed(workload, state, times) or ("tpot_ms", "TPOT")
        value = target_value_s(name, state, times, workload.slo_percentile)  # type: ignore[arg-type]
        pct = "" if name == "tpot_ms" else f" p{workload.slo_percentile}"
        target_ms = getattr(workload, name)
        return (
            name.removesuffix("_ms"),
            f"{lay.short()}: {words}{pct} {value / MS:,.1f} ms at one sequence exceeds "
            f"--{name.replace('_', '-')} {target_ms:g}",
            value / (target_ms * MS) - 1.0,  # how far over: the message names the closest
        )
    if best < upper:
        missed = _missed(workload, *_saturated(setup, workload, best + 1))
        upper, limit = best, missed[0].removesuffix("_ms") if missed else limit
    state, ttft, times = point_times(setup, workload, upper, None, upper)
    assert times is not None
    return OperatingPoint(
        concurrency=upper,
        limit=limit,
        state=state,
        ttft_s=ttft,
        times=times,
        warnings=tuple(warnings),
    )


def _saturated(
    setup: ServeSetup, workload: ServeWorkload, batch: int
) -> tuple[SteadyState, RequestTimes]:
    state, _, times = point_times(setup, workload, batch, None, batch)
    assert times is not None
    return state, times


def _loaded_point(
    setup: ServeSetup, workload: ServeWorkload, slots: int, replicas: int, warnings: list[str]
) -> OperatingPoint | tuple[str, str, float]:
    """The point under a Poisson request rate shared by ``replicas``; a rejection carries how
    far over its limit the layout is (offered / sustainable - 1, achieved / target - 1)."""
    assert workload.request_rate is not None
    rate = workload.request_rate / replicas
    lay = setup.layout
    if workload.concurrency is not None:
        concurrency = float(workload.concurrency)
    else:
        concurrency = _online_concurrency(setup, workload, rate, slots)
    state, ttft, times = point_times(setup, workload, concurrency, rate, slots)
    if times is None:
        capacity = capacity_requests_per_s(setup, workload, slots)
        return (
            "request_rate",
            f"{lay.short()}: {replicas} "
            f"{'replicas sustain' if replicas != 1 else 'replica sustains'} at most "
            f"{capacity * replicas:,.2f} requests/s ({slots} sequences each), "
            f"{workload.request_rate:g} offered",
            workload.request_rate / (capacity * replicas) - 1.0,
        )
    missed = _missed(workload, state, times)
    if missed is not None:
        name, words = missed
        value = target_value_s(name, state, times, workload.slo_percentile)
        pct = "" if name == "tpot_ms" else f" p{workload.slo_percentile}"
        target = getattr(workload, name)
        return (
            name.removesuffix("_ms"),
            f"{lay.short()} at {workload.request_rate:g} requests/s over {replicas} "
            f"replica{'s' if replicas != 1 else ''}: {words}{pct} {value / MS:,.1f} ms exceeds "
            f"--{name.replace('_', '-')} {target:g}",
            value / (target * MS) - 1.0,
        )
    return OperatingPoint(
        concurrency=max(1, round(concurrency)),
        limit="request_rate",
        state=state,
        ttft_s=ttft,
        times=times,
        rate_per_replica=rate,
        warnings=tuple(warnings),
    )
