"""Alpha-beta costs of collectives over one CommDomain.

Bus-bandwidth factors from NVIDIA/nccl-tests ``doc/PERFORMANCE.md``: all-reduce moves
2(n-1)/n of the buffer through each rank's link, reduce-scatter and all-gather (n-1)/n.
Latency: one alpha per ring step. W is the per-rank, per-direction bandwidth of the group's
bottleneck link and eta the achievable fraction of it (catalog data).
"""

from __future__ import annotations

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


def deduplicated_share(top_k: int, groups: int) -> float:
    """Share of a plain all-to-all's bytes on its bottleneck that a deduplicating dispatch sends
    when each token's top-k experts are spread uniformly over ``groups`` equal groups (the ranks
    of one domain, or the domains a group spans) and the copies bound for one group travel once
    (DeepEP, HybridEP; DeepSeek-V3 arXiv 2412.19437 section 3.2.2): of the k (Z - 1)/Z copies a
    token sends to other groups, Z (1 - ((Z - 1)/Z)^k) (Z - 1)/Z remain, the JAX scaling book's
    ragged all-to-all factor, a share Z (1 - ((Z - 1)/Z)^k) / k. Where a group spans several
    domains the bottleneck (the NIC) carries only the copies that leave the domain, so the
    share applies to them, whatever part of the plain all-to-all stays on NVLink.

    >>> round(deduplicated_share(8, 8), 3), round(deduplicated_share(8, 4), 3)
    (0.656, 0.45)
    >>> deduplicated_share(1, 8), deduplicated_share(8, 1)
    (1.0, 1.0)
    """
    z = groups
    if z <= 1:
        return 1.0
    return z * (1.0 - ((z - 1) / z) ** top_k) / top_k


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
