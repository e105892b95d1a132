"""MoE serving terms: which experts one forward step touches, how many of them sit on the
busiest expert-parallel rank, and the grouped expert GEMM that streams them.

A serving engine runs a MoE layer's routed experts as grouped GEMMs: one kernel for the up (and
gate) projections of every local expert and one for the down projections (vLLM ``fused_moe``,
SGLang / TensorRT-LLM grouped GEMM, DeepGEMM ``m_grouped``), not one kernel per expert. Such a
kernel streams the weights of the experts that received at least one token and multiplies the
tokens routed to them: t = max(FLOPs / (P eta_gemm eta_expert), bytes / (W eta_stream)) + t_kernel.

Routing. Expert i receives a token with probability min(1, k p_i) where p_i is its share of the
router's choices; over T independent tokens it is touched with probability
q_i = 1 - (1 - min(1, k p_i))^T. Uniform routing (p_i = 1/E) gives the expected distinct
experts E (1 - (1 - k/E)^T). Skewed routing is a Zipf law p_i ~ (i + 1)^-s with a stated
exponent s (``ServeWorkload.routing_skew``; s = 0 is uniform): hot experts absorb more tokens, so
fewer distinct experts are touched. Experts are dealt to the ep ranks in popularity order,
round-robin (as a load balancer such as DeepSeek's EPLB places them), so rank 0 holds the most
popular of every group of ep. The slowest rank sets the step: its expected touched experts are
its mean plus Blom's approximation of the expected maximum of ep normal deviates
(Blom 1958: E[max of n] ~ mu + sigma Phi^-1((n - 0.375) / (n + 0.25))), the per-rank count being
a sum of independent Bernoulli(q_i).
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

from planner.specs.base import FrozenSpec

BLOM_ALPHA = 0.375
"""Blom's (1958) plotting-position constant: E[max of n normals] ~ Phi^-1((n - a)/(n + 1 - 2a))."""


@lru_cache(maxsize=64)
def expert_shares(num_experts: int, skew: float) -> tuple[float, ...]:
    """Each expert's share p_i of the router's choices, most popular first: a Zipf law
    p_i ~ (i + 1)^-s normalised to 1 (s = 0: uniform 1/E).

    >>> expert_shares(4, 0.0)
    (0.25, 0.25, 0.25, 0.25)
    >>> [round(p, 3) for p in expert_shares(3, 1.0)]  # 1, 1/2, 1/3 over 11/6
    [0.545, 0.273, 0.182]
    """
    weights = [(i + 1) ** -skew for i in range(num_experts)]
    total = sum(weights)
    return tuple(w / total for w in weights)


def touch_probabilities(num_experts: int, top_k: int, tokens: float, skew: float) -> list[float]:
    """q_i = 1 - (1 - min(1, k p_i))^T: the chance expert i receives at least one of T tokens.

    >>> touch_probabilities(8, 2, 1, 0.0)[0]
    0.25
    """
    if tokens <= 0:
        return [0.0] * num_experts
    return [1.0 - (1.0 - min(1.0, top_k * p)) ** tokens for p in expert_shares(num_experts, skew)]


def experts_touched(num_experts: int, top_k: int, tokens: float, skew: float = 0.0) -> float:
    """Expected distinct experts receiving at least one of ``tokens`` tokens: sum_i q_i;
    uniform routing gives E (1 - (1 - k/E)^T). At one token a layer streams only k experts.

    Qwen3-30B-A3B (E = 128, k = 8) at 16 decode tokens: 128 (1 - (120/128)^16) = 82.4.

    >>> experts_touched(8, 2, 1)
    2.0
    >>> round(experts_touched(128, 8, 16), 1)
    82.4
    >>> experts_touched(128, 8, 16, skew=1.0) < experts_touched(128, 8, 16)
    True
    """
    if skew == 0.0:
        return num_experts * _uniform_touch(num_experts, top_k, tokens)
    return sum(touch_probabilities(num_experts, top_k, tokens, skew))


def _uniform_touch(num_experts: int, top_k: int, tokens: float) -> float:
    """q = 1 - (1 - k/E)^T, every expert alike under uniform routing."""
    return 1.0 - (1.0 - top_k / num_experts) ** tokens if tokens > 0 else 0.0


def blom_max_deviate(n: int) -> float:
    """Expected maximum of n standard normal variables, Blom's approximation
    Phi^-1((n - 0.375) / (n + 0.25)); 0 for n = 1.

    >>> blom_max_deviate(1)
    0.0
    >>> round(blom_max_deviate(8), 2)  # exact E[max of 8 normals] = 1.4236
    1.43
    """
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - BLOM_ALPHA) / (n + 1 - 2 * BLOM_ALPHA))


class RankExperts(FrozenSpec):
    """What the busiest expert-parallel rank runs in one step."""

    experts: float
    """Expected distinct local experts touched (their weights are streamed)."""
    token_copies: float
    """Token copies (token x chosen expert) routed to the rank's experts."""


def busiest_rank_experts(
    num_experts: int, top_k: int, tokens: float, *, ep: int, skew: float = 0.0
) -> RankExperts:
    """Touched experts and routed token copies on the busiest of ``ep`` ranks holding E / ep
    experts each (dealt in popularity order, round-robin; see the module docstring): rank 0's
    mean sum q_i plus Blom's expected-maximum deviate times its standard deviation
    sqrt(sum q_i (1 - q_i)), capped at the E / ep experts it holds; copies T k sum p_i.

    >>> r = busiest_rank_experts(8, 2, 1, ep=1)
    >>> r.experts, r.token_copies
    (2.0, 2.0)
    >>> busiest_rank_experts(256, 8, 16, ep=8).experts > experts_touched(256, 8, 16) / 8
    True
    """
    if skew == 0.0:
        held = num_experts / ep
        q = _uniform_touch(num_experts, top_k, tokens)
        spread = math.sqrt(held * q * (1.0 - q))
        return RankExperts.model_construct(
            experts=min(held, held * q + blom_max_deviate(ep) * spread),
            token_copies=tokens * top_k / ep,
        )
    shares = expert_shares(num_experts, skew)
    touched = touch_probabilities(num_experts, top_k, tokens, skew)
    mine = range(0, num_experts, ep)
    mean = sum(touched[i] for i in mine)
    spread = math.sqrt(sum(touched[i] * (1.0 - touched[i]) for i in mine))
    experts = min(num_experts / ep, mean + blom_max_deviate(ep) * spread)
    copies = tokens * top_k * sum(shares[i] for i in mine)
    return RankExperts(experts=experts, token_copies=copies)


def grouped_gemm_time(
    *,
    flops: float,
    weight_bytes: float,
    activation_bytes: float,
    flop_per_s: float,
    stream_bytes_per_s: float,
    kernel_overhead_s: float,
) -> float:
    """One grouped GEMM launch over the local experts: roofline of its FLOPs and of the bytes
    it streams (the touched experts' weights plus the routed activations), plus one fixed
    kernel cost (not one per expert).

    >>> grouped_gemm_time(flops=0.0, weight_bytes=4e9, activation_bytes=0.0, flop_per_s=1e15,
    ...                   stream_bytes_per_s=4e12, kernel_overhead_s=1e-6)
    0.001001
    """
    if flops <= 0 and weight_bytes <= 0:
        return 0.0
    compute = flops / flop_per_s
    memory = (weight_bytes + activation_bytes) / stream_bytes_per_s
    return max(compute, memory) + kernel_overhead_s
