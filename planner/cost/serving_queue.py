"""Queueing of requests in front of a continuous-batching server: how long a request waits
before its prompt is prefilled, on average and at a percentile.

The model (one replica, Poisson arrivals at rate lambda, uniform request lengths):

1. **Admission** (a free batch slot): the replica runs at most c sequences at once (the KV
   cache or the engine's max batch), and a request holds its slot for its residence time
   R = prefill + OSL x TPOT. That is an M/D/c queue, approximated by Allen-Cunneen:
   W_slot ~ (C_a^2 + C_s^2) / 2 x W(M/M/c) with C_a^2 = 1 (Poisson) and C_s^2 = 0 (uniform
   lengths), W(M/M/c) = C(c, a) / (c mu - lambda), C the Erlang-C probability of waiting,
   a = lambda R the offered load in slots (A. O. Allen, "Probability, Statistics, and Queueing
   Theory", 2nd ed. 1990, section 6; Kleinrock, "Queueing Systems" vol. 1, 1975, eq. 3.40).
2. **Prefill** (the engine's token budget): admitted prompts are prefilled one after another,
   each taking S_p of the engine's prefill capacity, an M/D/1 queue with Pollaczek-Khinchine
   mean wait W_p = rho S_p / (2 (1 - rho)), rho = lambda S_p (Kleinrock eq. 5.105 with
   deterministic service).
3. **Percentiles**: a waiting time is taken as 0 with probability 1 - P_wait and exponential
   otherwise, with the mean that reproduces the mean wait (exact for M/M/c; Kingman's heavy-
   traffic limit for M/G/1, J. F. C. Kingman 1961). P_wait = 1 - (1 - C(c, a)) (1 - rho).

Nothing here is fitted; the service times come from the serving cost model.
"""

from __future__ import annotations

import math

from planner.specs.base import FrozenSpec


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in an M/M/c queue (Erlang C) with c = ``servers`` and
    offered load a = lambda / mu (in servers); 1 when a >= c (unstable). Computed through the
    Erlang-B recursion B_k = a B_{k-1} / (k + a B_{k-1}), C = c B / (c - a (1 - B)), which stays
    finite for thousands of servers.

    >>> round(erlang_c(1, 0.5), 3)  # M/M/1: rho
    0.5
    >>> round(erlang_c(2, 1.0), 4)  # a^2/2 * 2/(2-1) / (1 + a + a^2/2 * 2) = 1/3
    0.3333
    >>> erlang_c(4, 4.0)
    1.0
    """
    if offered_load <= 0:
        return 0.0
    if offered_load >= servers:
        return 1.0
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered_load * blocking / (k + offered_load * blocking)
    return servers * blocking / (servers - offered_load * (1.0 - blocking))


def slot_wait_s(slots: int, rate_per_s: float, residence_s: float) -> tuple[float, float]:
    """(mean wait, probability of waiting) for a free slot: M/D/c by Allen-Cunneen, half the
    M/M/c wait C(c, a) R / (c - a) with a = lambda R; (inf, 1) when a >= c.

    >>> slot_wait_s(1, 0.5, 1.0)  # M/D/1 at rho 0.5: 0.5 x 0.5 x 1 / 0.5
    (0.5, 0.5)
    """
    load = rate_per_s * residence_s
    if load >= slots:
        return math.inf, 1.0
    waits = erlang_c(slots, load)
    return 0.5 * waits * residence_s / (slots - load), waits


def md1_wait_s(rate_per_s: float, service_s: float) -> tuple[float, float]:
    """(mean wait, probability of waiting) of an M/D/1 queue: Pollaczek-Khinchine
    rho S / (2 (1 - rho)) with rho = lambda S; (inf, 1) when rho >= 1.

    >>> md1_wait_s(0.5, 1.0)
    (0.5, 0.5)
    >>> md1_wait_s(0.0, 1.0)
    (0.0, 0.0)
    """
    rho = rate_per_s * service_s
    if rho >= 1.0:
        return math.inf, 1.0
    return rho * service_s / (2.0 * (1.0 - rho)), rho


def wait_quantile_s(mean_wait_s: float, wait_probability: float, quantile: float) -> float:
    """The ``quantile`` of a wait that is 0 with probability 1 - P and exponential otherwise
    (mean wait / P): 0 when q <= 1 - P, else (W / P) ln(P / (1 - q)).

    >>> wait_quantile_s(1.0, 0.5, 0.5)
    0.0
    >>> round(wait_quantile_s(1.0, 1.0, 0.9), 3)  # exponential of mean 1: ln 10
    2.303
    """
    if mean_wait_s <= 0 or wait_probability <= 0 or quantile <= 1.0 - wait_probability:
        return 0.0
    if math.isinf(mean_wait_s):
        return math.inf
    return mean_wait_s / wait_probability * math.log(wait_probability / (1.0 - quantile))


class RequestTimes(FrozenSpec):
    """Latency of one request under a load the replica sustains (seconds)."""

    queue_mean_s: float
    """Mean wait for a slot and for the prefill (s)."""
    ttft_mean_s: float
    """Mean time to first token (s)."""
    ttft_p50_s: float
    """Median time to first token (s)."""
    ttft_p90_s: float
    """90th-percentile time to first token (s)."""
    e2e_mean_s: float
    """Mean end-to-end latency: TTFT + (OSL - 1) x TPOT (s)."""
    e2e_p50_s: float
    """Median end-to-end latency (s)."""
    e2e_p90_s: float
    """90th-percentile end-to-end latency (s)."""


class QueueInputs(FrozenSpec):
    """What the queueing model needs from the cost model, for one replica."""

    rate_per_s: float
    """Poisson arrival rate of requests at the replica (1/s)."""
    slots: int
    """Sequences the replica runs at once at most (c)."""
    residence_s: float
    """Time a request holds its slot: its prefill and OSL decode steps (s)."""
    prefill_service_s: float
    """Engine time one prompt's prefill takes from the token budget (s)."""
    ttft_service_s: float
    """Time to first token once the prompt's prefill starts, incl. the wait for the step in
    progress (s)."""
    decode_s: float
    """(OSL - 1) x TPOT: the rest of the request after its first token (s)."""


def request_times(inputs: QueueInputs) -> RequestTimes | None:
    """Mean, median and 90th-percentile TTFT and end-to-end latency (module docstring); None
    when the arrival rate reaches the replica's capacity (the queue grows without bound).

    >>> t = request_times(QueueInputs(rate_per_s=0.0, slots=8, residence_s=1.0,
    ...     prefill_service_s=0.1, ttft_service_s=0.1, decode_s=0.9))
    >>> t.ttft_p90_s, t.e2e_p50_s
    (0.1, 1.0)
    >>> request_times(QueueInputs(rate_per_s=20.0, slots=8, residence_s=1.0,
    ...     prefill_service_s=0.1, ttft_service_s=0.1, decode_s=0.9)) is None
    True
    """
    slot_w, slot_p = slot_wait_s(inputs.slots, inputs.rate_per_s, inputs.residence_s)
    pre_w, pre_p = md1_wait_s(inputs.rate_per_s, inputs.prefill_service_s)
    if math.isinf(slot_w) or math.isinf(pre_w):
        return None
    mean = slot_w + pre_w
    probability = 1.0 - (1.0 - slot_p) * (1.0 - pre_p)
    p50 = wait_quantile_s(mean, probability, 0.5)
    p90 = wait_quantile_s(mean, probability, 0.9)
    base, rest = inputs.ttft_service_s, inputs.decode_s
    return RequestTimes(
        queue_mean_s=mean,
        ttft_mean_s=base + mean,
        ttft_p50_s=base + p50,
        ttft_p90_s=base + p90,
        e2e_mean_s=base + mean + rest,
        e2e_p50_s=base + p50 + rest,
        e2e_p90_s=base + p90 + rest,
    )
