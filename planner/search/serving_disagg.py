"""Disaggregated serving: prefill and decode on separate pools (xPyD), the KV cache of each
prompt sent from a prefill instance to a decode instance (DistServe, Zhong et al., OSDI'24;
Splitwise, Patel et al., ISCA'24; the SGLang and TensorRT-LLM disaggregated servers).

Each candidate layout is scored in both roles, once:

- **prefill instance**: passes of M prompt tokens (the token budget) and no decodes; it
  completes (M / ISL) / t_pass prompts/s; an idle prompt's prefill takes ceil(ISL / M) + pp - 1
  passes;
- **decode instance**: decode-only iterations (no prompt chunks interleaved) at the largest
  batch its KV cache, the token budget and the TPOT target allow; it completes
  B / (t_decode(B) x OSL) requests/s.

A split of x prefill and y decode instances serves min(x c_p, y c_d) requests/s on
x g_p + y g_d GPUs. Over real x and y the best split gives OSL / (g_p / c_p + g_d / c_d) tokens/s
per GPU: an upper bound for every pair of layouts, used to visit the pairs best bound first
and stop once the bound falls below the best whole-number split found (branch and bound, no
cap). The KV cache of a prompt (ISL tokens, every layer) leaves the prefill instance's GPUs in
parallel and crosses the link the cluster graph gives between the two pools: NVLink when both
fit one scale-up domain, else the NIC. TTFT = idle prefill + KV transfer.
"""

from __future__ import annotations

import math

from planner.cost.comm import p2p_time
from planner.cost.serving import kv_bytes_per_sequence
from planner.cost.serving_cycle import idle_prefill_s, steady_state
from planner.cost.serving_time import PassLoad, ServeSetup, stage_pass_time
from planner.search.serving import memory_cost, serve_setup, serve_violations
from planner.search.serving_point import largest_batch
from planner.specs.base import FrozenSpec
from planner.specs.cluster import ClusterSpec
from planner.specs.comm import CommDomain
from planner.specs.model import ModelSpec
from planner.specs.result import DisaggregatedPlan, ServeLayout, ServePlan, ServePool
from planner.specs.workload import ServeWorkload
from planner.topology import group_domain
from planner.topology.flows import P2P
from planner.units import MS


class RoleScore(FrozenSpec):
    """One layout's capability in one role (per instance)."""

    layout: ServeLayout
    """The instance layout (replicas = 1)."""
    requests_per_s: float
    """Requests/s one instance completes at full load."""
    concurrency: int
    """Decode: batch; prefill: prompts per pass (at least 1)."""
    latency_s: float
    """Prefill: idle prefill of one prompt; decode: one decode iteration."""

    @property
    def per_gpu(self) -> float:
        """Requests/s per GPU of the instance."""
        return self.requests_per_s / self.layout.gpus_per_replica


def prefill_score(setup: ServeSetup, workload: ServeWorkload) -> RoleScore:
    """A layout as a prefill instance: full-budget passes of prompts only."""
    budget = workload.max_batch_tokens
    load = PassLoad(
        decode_sequences=0.0, context=1.0, prefill_tokens=budget, prompt_len=workload.prompt_len
    )
    pass_s = stage_pass_time(setup, load).total_s
    prompts = budget / workload.prompt_len
    return RoleScore(
        layout=setup.layout.model_copy(update={"replicas": 1}),
        requests_per_s=prompts / pass_s,
        concurrency=max(1, math.floor(prompts)),
        latency_s=idle_prefill_s(setup, workload),
    )


def decode_score(
    setup: ServeSetup, workload: ServeWorkload, max_sequences: int
) -> RoleScore | None:
    """A layout as a decode instance at the largest batch that meets the TPOT target with no
    prefill interleaved; None when not even one sequence does."""
    upper = min(max_sequences, workload.max_batch_tokens * setup.layout.pp)

    def step(batch: int) -> float:
        return steady_state(setup, workload, batch).decode.total_s

    if workload.tpot_ms is None:
        batch = upper
    else:
        batch = largest_batch(upper, lambda b: step(b) <= workload.tpot_ms * MS)  # type: ignore[operator]
    if batch < 1:
        return None
    decode_s = step(batch)
    return RoleScore(
        layout=setup.layout.model_copy(update={"replicas": 1}),
        requests_per_s=batch / (decode_s * workload.output_len),
        concurrency=batch,
        latency_s=decode_s,
    )


def kv_link(cluster: ClusterSpec, gpus: int) -> CommDomain:
    """The link between a prefill and a decode instance when the two pools take ``gpus`` GPUs:
    inside one scale-up domain when they fit one, else across domains (the NIC): pairs one
    domain apart, among at least the two domains such a pair spans (pools of 10 GPUs on nodes
    of 8 still cross the NIC; among 10 ranks no pair is 8 apart, which read as no link at all).

    >>> from planner.catalog import load_cluster
    >>> kv_link(load_cluster("hgx_h200x16"), 10).bandwidth_bytes_per_s / 1e9
    50.0
    """
    per_domain = cluster.accelerators_per_domain
    if gpus <= per_domain or cluster.num_domains == 1:
        return group_domain(cluster, 2, 1, pattern=P2P, num_ranks=min(gpus, 2))
    return group_domain(cluster, 2, per_domain, pattern=P2P, num_ranks=max(gpus, 2 * per_domain))


def kv_transfer_s(
    setup: ServeSetup, workload: ServeWorkload, prefill: ServeLayout, link: CommDomain
) -> float:
    """One prompt's KV cache (ISL tokens, every layer, in the KV format) sent by the prefill
    instance's GPUs in parallel: (bytes / GPUs) / (W eta) + alpha."""
    total = kv_bytes_per_sequence(setup.model, prefill.kv_precision, workload.prompt_len)
    return p2p_time(total / prefill.gpus_per_replica, link)


class Split(FrozenSpec):
    """x prefill and y decode instances."""

    prefill: int
    """x."""
    decode: int
    """y."""
    tokens_per_s_per_gpu: float
    """Output tokens/s per GPU of the split."""


def best_split(
    prefill: RoleScore, decode: RoleScore, workload: ServeWorkload, num_gpus: int
) -> Split | None:
    """The whole-number x, y >= 1 with x g_p + y g_d <= N that maximise output tokens/s per
    GPU; for each x only the y either side of the balance x c_p / c_d can be best."""
    gp, gd = prefill.layout.gpus_per_replica, decode.layout.gpus_per_replica
    best: Split | None = None
    for x in range(1, (num_gpus - gd) // gp + 1):
        room = (num_gpus - x * gp) // gd
        balance = x * prefill.requests_per_s / decode.requests_per_s
        for y in {max(1, math.floor(balance)), max(1, math.ceil(balance))}:
            y = min(y, room)
            if y < 1:
                continue
            rate = min(x * prefill.requests_per_s, y * decode.requests_per_s)
            value = rate * workload.output_len / (x * gp + y * gd)
            if best is None or value > best.tokens_per_s_per_gpu:
                best = Split(prefill=x, decode=y, tokens_per_s_per_gpu=value)
    return best


def bound_tokens_per_s_per_gpu(
    prefill: RoleScore, decode: RoleScore, workload: ServeWorkload
) -> float:
    """OSL / (g_p / c_p + g_d / c_d): no whole-number split of the pair does better."""
    return workload.output_len / (1.0 / prefill.per_gpu + 1.0 / decode.per_gpu)


class RoleSetups(FrozenSpec):
    """The candidates of both roles, with their setups (by layout)."""

    prefill: list[tuple[RoleScore, ServeSetup]]
    """Prefill candidates."""
    decode: list[tuple[RoleScore, ServeSetup]]
    """Decode candidates."""


def role_candidates(
    model: ModelSpec, cluster: ClusterSpec, workload: ServeWorkload, layouts: list[ServeLayout]
) -> RoleSetups:
    """Every distinct instance layout (one replica) that breaks no rule and holds its weights
    and workspace, scored as a prefill instance, and as a decode instance when its KV cache
    holds a full-context sequence and one sequence meets the TPOT target."""
    seen: set[tuple[int, int, int, int]] = set()
    prefill: list[tuple[RoleScore, ServeSetup]] = []
    decode: list[tuple[RoleScore, ServeSetup]] = []
    for layout in layouts:
        key = (layout.tp, layout.pp, layout.ep, layout.attention_dp)
        one = layout.model_copy(update={"replicas": 1})
        if key in seen or serve_violations(model, cluster, one):
            continue
        seen.add(key)
        mem = memory_cost(model, cluster, workload, one)
        if mem.weights + mem.workspace > mem.capacity or mem.sequences_at_mean < 1:
            continue
        setup = serve_setup(model, cluster, workload, one)
        prefill.append((prefill_score(setup, workload), setup))
        if mem.sequences >= 1:
            score = decode_score(setup, workload, mem.sequences)
            if score is not None:
                decode.append((score, setup))
    return RoleSetups(prefill=prefill, decode=decode)


def disaggregate(
    cluster: ClusterSpec,
    workload: ServeWorkload,
    roles: RoleSetups,
    aggregated: ServePlan,
) -> DisaggregatedPlan | None:
    """The best xPyD split of the candidates that meets the TTFT target (branch and bound over
    layout pairs, module docstring), compared with the aggregated ``aggregated``; None when no
    pair fits the cluster."""
    pairs = sorted(
        ((p, d) for p in roles.prefill for d in roles.decode),
        key=lambda pd: -bound_tokens_per_s_per_gpu(pd[0][0], pd[1][0], workload),
    )
    best: tuple[Split, tuple[RoleScore, ServeSetup], RoleScore, float, CommDomain] | None = None
    for (pre, setup), (dec, _) in pairs:
        if best is not None and bound_tokens_per_s_per_gpu(pre, dec, workload) <= (
            best[0].tokens_per_s_per_gpu
        ):
            break
        split = best_split(pre, dec, workload, cluster.num_accelerators)
        if split is None:
            continue
        used = split.prefill * pre.layout.gpus_per_replica
        used += split.decode * dec.layout.gpus_per_replica
        link = kv_link(cluster, used)
        transfer = kv_transfer_s(setup, workload, pre.layout, link)
        if workload.ttft_ms is not None and pre.latency_s + transfer > workload.ttft_ms * MS:
            continue
        if best is None or split.tokens_per_s_per_gpu > best[0].tokens_per_s_per_gpu:
            best = (split, (pre, setup), dec, transfer, link)
    if best is None:
        return None
    split, (pre, _), dec, transfer, link = best
    return _plan(workload, split, (pre, dec), (transfer, link), aggregated)


def _pool(role: str, score: RoleScore, instances: int) -> ServePool:
    return ServePool(
        role=role,  # type: ignore[arg-type]
        layout=score.layout.model_copy(update={"replicas": instances}),
        instances=instances,
        num_gpus=instances * score.layout.gpus_per_replica,
        concurrency=score.concurrency,
        requests_per_s=instances * score.requests_per_s,
    )


def _plan(
    workload: ServeWorkload,
    split: Split,
    scores: tuple[RoleScore, RoleScore],
    transfer: tuple[float, CommDomain],
    aggregated: ServePlan,
) -> DisaggregatedPlan:
    pre, dec = scores
    prefill, decode = _pool("prefill", pre, split.prefill), _pool("decode", dec, split.decode)
    gpus = prefill.num_gpus + decode.num_gpus
    rate = min(prefill.requests_per_s, decode.requests_per_s)
    per_gpu = rate * workload.output_len / gpus
    agg = aggregated.throughput_tokens_per_s_per_gpu
    speedup = per_gpu / agg if agg else 0.0
    slower = "prefill" if prefill.requests_per_s < decode.requests_per_s else "decode"
    if speedup > 1.0:
        verdict = (
            f"disaggregated {split.prefill}P{split.decode}D serves {speedup:.2f}x the tokens/s "
            f"per GPU of the aggregated plan: decode runs without prompt chunks in its steps"
        )
    else:
        verdict = (
            f"aggregated serving wins ({1 / speedup if speedup else math.inf:.2f}x the tokens/s "
            f"per GPU of the best {split.prefill}P{split.decode}D split, bound by its {slower} "
            "pool)"
        )
    seconds, link = transfer
    return DisaggregatedPlan(
        prefill=prefill,
        decode=decode,
        num_gpus=gpus,
        kv_transfer_s=seconds,
        kv_link=link.description or link.tier,
        ttft_s=pre.latency_s + seconds,
        tpot_s=dec.latency_s,
        throughput_tokens_per_s=rate * workload.output_len,
        throughput_tokens_per_s_per_gpu=per_gpu,
        aggregated_tokens_per_s_per_gpu=agg,
        speedup=speedup,
        verdict=verdict,
    )
