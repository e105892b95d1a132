"""Alpha-beta costs of collectives over one CommDomain.

Bus-bandwidth factors from NVIDIA/nccl-tests ``doc/PERFORMANCE.md``: all-reduce moves
2(n-1)/n of the buffer through each rank's link, reduce-scatter and all-gather (n-1)/n.
Latency: one alpha per ring step. W is the per-rank, per-direction bandwidth of the group's
bottleneck link and eta the achievable fraction of it (catalog data).
"""

from __future__ import annotations

from math import comb

from planner.specs.comm import CommDomain


def ring_all_reduce_time(message_bytes: float, domain: CommDomain) -> float:
    """Ring all-reduce of S bytes over n ranks: 2(n-1)/n * S / (W eta) + 2(n-1) alpha.

    >>> from planner.specs.comm import CommDomain
    >>> one = CommDomain(size=1, bandwidth_bytes_per_s=1, latency_s=0, efficiency=1, tier="local")
    >>> ring_all_reduce_time(1e9, one)
    0.0
    >>> eight = CommDomain(size=8, bandwidth_bytes_per_s=1e9, latency_s=0, efficiency=1,
    ...                    tier="scale_up")
    >>> ring_all_reduce_time(8e9, eight)  # 2 * 7/8 * 8 s
    14.0
    """
    n = domain.size
    if n == 1 or message_bytes <= 0:
        return 0.0  # nothing to reduce: no collective is launched
    steps = 2 * (n - 1)
    return steps / n * message_bytes / domain.effective_bytes_per_s + steps * domain.latency_s


def reduce_scatter_time(message_bytes: float, domain: CommDomain) -> float:
    """Reduce-scatter of an S-byte buffer over n ranks: (n-1)/n * S / (W eta) + (n-1) alpha.

    >>> from planner.specs.comm import CommDomain
    >>> d = CommDomain(size=4, bandwidth_bytes_per_s=1e9, latency_s=0, efficiency=1, tier="scale_up")
    >>> reduce_scatter_time(4e9, d)
    3.0
    >>> reduce_scatter_time(0.0, d)  # an empty buffer (a dense model's expert gradients)
    0.0
    """
    n = domain.size
    if n == 1 or message_bytes <= 0:
        return 0.0  # nothing to move: no collective is launched
    return (n - 1) / n * message_bytes / domain.effective_bytes_per_s + (n - 1) * domain.latency_s


def all_gather_time(message_bytes: float, domain: CommDomain) -> float:
    """All-gather into an S-byte buffer over n ranks: same cost as reduce-scatter.

    >>> from planner.specs.comm import CommDomain
    >>> d = CommDomain(size=2, bandwidth_bytes_per_s=1e9, latency_s=0, efficiency=1, tier="scale_up")
    >>> all_gather_time(2e9, d)
    1.0
    """
    return reduce_scatter_time(message_bytes, domain)


def all_to_all_time(local_bytes: float, domain: CommDomain) -> float:
    """All-to-all where each rank holds S_local bytes: (n-1)/n * S_local / (W eta) + (n-1) alpha.

    Each rank keeps 1/n of its buffer and sends the rest (nccl-tests PERFORMANCE.md).

    >>> from planner.specs.comm import CommDomain
    >>> d = CommDomain(size=4, bandwidth_bytes_per_s=1e9, latency_s=0, efficiency=1, tier="scale_up")
    >>> all_to_all_time(4e9, d)
    3.0
    """
    return reduce_scatter_time(local_bytes, domain)


def p2p_time(message_bytes: float, domain: CommDomain) -> float:
    """Point-to-point send of S bytes to a neighbour: S / (W eta) + alpha.

    >>> from planner.specs.comm import CommDomain
    >>> one = CommDomain(size=1, bandwidth_bytes_per_s=1, latency_s=0, efficiency=1, tier="local")
    >>> p2p_time(1e6, one)
    0.0
    """
    if domain.size == 1:
        return 0.0
    return message_bytes / domain.effective_bytes_per_s + domain.latency_s


def deduplicated_share(
    top_k: int, destinations: int, *, router_groups: int = 1, router_group_topk: int | None = None
) -> float:
    """Share of a plain all-to-all's bytes on its bottleneck that a deduplicating dispatch sends
    when each token's top-k experts are spread over Z = ``destinations`` equal ones (the ranks
    of one domain, or the domains a group spans) and the copies bound for one destination
    travel once (DeepEP, HybridEP; DeepSeek-V3 arXiv 2412.19437 section 3.2.2): of the
    k (Z - 1)/Z copies a token sends to other destinations, D (Z - 1)/Z remain, D being the
    destinations its k experts fall on (:func:`expected_destinations`), a share D / k. Where a
    group spans several domains the bottleneck (the NIC) carries only the copies that leave the
    domain, so the share applies to them, whatever part of the plain all-to-all stays on NVLink.
    Group-limited routing (``router_groups``, ``router_group_topk``) draws the experts from
    fewer destinations.

    >>> round(deduplicated_share(8, 8), 3), round(deduplicated_share(8, 4), 3)
    (0.656, 0.45)
    >>> deduplicated_share(1, 8), deduplicated_share(8, 1)
    (1.0, 1.0)
    >>> round(deduplicated_share(8, 8, router_groups=8, router_group_topk=4), 3)  # 8 nodes
    0.45
    """
    if destinations <= 1:
        return 1.0
    reached = expected_destinations(
        top_k, destinations, router_groups=router_groups, router_group_topk=router_group_topk
    )
    return reached / top_k


def expected_destinations(
    top_k: int, destinations: int, *, router_groups: int = 1, router_group_topk: int | None = None
) -> float:
    """Expected number of the ``destinations`` Z (equal blocks of consecutive experts: the ranks
    or domains of an expert-parallel group, as Megatron-LM and DeepEP lay experts out) that a
    token's top-k experts fall on, each expert drawn uniformly (with replacement) from the
    experts its routing allows.

    Without groups: Z (1 - (1 - 1/Z)^k), the JAX scaling book's ragged all-to-all count.
    Group-limited routing (DeepSeek-V2's device-limited and DeepSeek-V3's node-limited routing,
    arXiv 2405.04434 section 2.2.2 and 2412.19437 section 2.1.2; Megatron-LM
    ``moe_router_num_groups`` / ``moe_router_group_topk``) picks M of the G groups first and the
    k experts among theirs, so a destination is hit only through a picked group:

    - G a multiple of Z (a destination holds G/Z whole groups): c of its groups are picked with
      the hypergeometric probability of c among M drawn from G, and then it is hit with
      probability 1 - (1 - c/M)^k;
    - Z a multiple of G (a group spans Z/G destinations): its group is picked with probability
      M/G, and then it is hit with probability 1 - (1 - G/(M Z))^k.

    Other ratios (neither divides the other) are priced without the limit, which can only count
    more destinations. DeepSeek-V3's 8 groups choose 4 (top-8): over 8 nodes a token reaches
    3.60 of them where an unlimited router reaches 5.25.

    >>> round(expected_destinations(8, 8), 2), round(expected_destinations(8, 8,
    ...     router_groups=8, router_group_topk=4), 2)
    (5.25, 3.6)
    >>> round(expected_destinations(8, 4, router_groups=8, router_group_topk=4), 2)  # 2 groups each
    2.91
    >>> round(expected_destinations(8, 32, router_groups=8, router_group_topk=4), 2)  # in a rack
    6.45
    >>> expected_destinations(8, 4, router_groups=8, router_group_topk=8) == expected_destinations(8, 4)
    True
    """
    z, k = destinations, top_k
    g, m = router_groups, router_group_topk if router_group_topk is not None else router_groups
    if g <= 1 or m >= g or (g % z and z % g):
        return z * (1.0 - (1.0 - 1.0 / z) ** k)
    if g % z == 0:  # a destination holds g/z whole groups
        held = g // z
        hit = sum(
            comb(held, c) * comb(g - held, m - c) / comb(g, m) * (1.0 - (1.0 - c / m) ** k)
            for c in range(1, min(held, m) + 1)
        )
        return z * hit
    return z * (m / g) * (1.0 - (1.0 - g / (m * z)) ** k)


def overlapped_exposed_time(comm_s: float, compute_s: float, contention: float) -> float:
    """Time a communication adds when it runs concurrently with ``compute_s`` of work: the part
    that outlasts the compute, plus the slowdown of the overlapped part (communication kernels
    take SMs and HBM bandwidth from the compute they hide behind; ``contention`` is that fraction,
    an accelerator efficiency factor).

    >>> overlapped_exposed_time(1.0, 3.0, 0.0)
    0.0
    >>> overlapped_exposed_time(3.0, 1.0, 0.5)
    2.5
    """
    return max(0.0, comm_s - compute_s) + contention * min(comm_s, compute_s)
