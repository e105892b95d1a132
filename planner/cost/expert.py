"""Expert parallelism: the all-to-all that dispatches routed tokens and combines them, its
overlap with another micro-batch's compute, and the dispatcher's host synchronisation."""

from __future__ import annotations

from planner.cost.comm import (
    all_to_all_time,
    deduplicated_share,
    overlapped_exposed_time,
)
from planner.cost.memory import ACTIVATION_BYTES, recomputed_fraction
from planner.specs.comm import CommDomain
from planner.specs.hardware import AcceleratorSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.workload import TrainWorkload
from planner.units import US


def expert_load_factor(workload: TrainWorkload) -> float:
    """Tokens the busiest expert rank processes over its balanced share.

    Dropless routing (``moe_capacity_factor`` None): the routing imbalance,
    ``expert_load_imbalance``. Capacity-padded experts (GShard, Lepikhin et al. 2020, arXiv
    2006.16668 section 2.2; Switch Transformer, Fedus et al. 2021, section 2.2): every expert
    runs exactly capacity = factor x balanced tokens (overflow dropped, the rest padded), so the
    factor, whatever the routing.

    >>> expert_load_factor(TrainWorkload(expert_load_imbalance=1.3))
    1.3
    >>> expert_load_factor(TrainWorkload(expert_load_imbalance=1.3, moe_capacity_factor=1.0))
    1.0
    """
    if workload.moe_capacity_factor is not None:
        return workload.moe_capacity_factor
    return workload.expert_load_imbalance


def ep_comm_per_microbatch(
    model: ModelSpec,
    workload: TrainWorkload,
    layout: Layout,
    num_moe_layers: float,
    ep: CommDomain,
    *,
    recomputed_moe_layers: float | None = None,
) -> float:
    """EP all-to-all: dispatch and combine, forward and backward (and the recomputed forward
    under full recomputation or the ``moe`` recompute module), per MoE layer, scaled by the
    expert load factor (:func:`expert_load_factor`: the busiest rank sets the pace, and padded
    experts send their padding).

    Each rank sends the (ep - 1)/ep remote share of its top-k routed copies (B T k D bf16
    values) over the group's bottleneck link (NCCL all-to-all, Megatron's alltoall dispatcher,
    which permutes one copy per token and expert). With ``workload.moe_dispatch_dedup``
    (DeepEP, HybridEP) a token travels once to each rank that holds any of its experts, and
    that rank sums its experts' outputs before the combine sends the token back once (DeepEP
    ``deep_ep/buffers/legacy.py`` ``get_dispatch_layout``: ``num_tokens_per_rank``, "the number
    of tokens to be sent to each rank", and ``is_token_in_rank``, "whether a token be sent to a
    rank"; deepseek-ai/DeepEP at dd758ca): a group inside one domain sends each token to
    Z (1 - ((Z - 1)/Z)^k) (Z - 1)/Z other ranks for Z = ep, not k (Z - 1)/Z (4.6 of 7 copies at
    EP 8 with top-8, 6.9 of 7.75 at EP 32); a group that spans Z domains sends the copies bound
    for another domain over the NIC once per destination domain and fans them out over NVLink,
    so its NIC, the bottleneck, carries the same share of the copies it carries in NCCL's
    all-to-all (:func:`deduplicated_share`: 0.45 of them over 4 domains with top-8).

    >>> from planner.catalog import load_model
    >>> from planner.specs.comm import CommDomain
    >>> m = load_model("qwen3-30b-a3b")  # 128 experts, top-8, hidden 2,048
    >>> ep = CommDomain(size=8, bandwidth_bytes_per_s=1e11, latency_s=0, efficiency=1,
    ...     tier="scale_up")
    >>> w, lay = TrainWorkload(seq_len=4096), Layout(ep=8, mbs=1, recompute="none")
    >>> plain = ep_comm_per_microbatch(m, w, lay, 1, ep)  # 4 x 4,096 x 2,048 x 2 B x 8 x 7/8
    >>> dedup = ep_comm_per_microbatch(m, w.model_copy(update={"moe_dispatch_dedup": True}),
    ...     lay, 1, ep)
    >>> round(plain * 1e3, 3), round(dedup * 1e3, 3), round(dedup / plain, 3)
    (4.698, 3.083, 0.656)
    """
    moe = model.moe
    if moe is None or ep.size == 1:
        return 0.0
    tokens = layout.mbs * workload.seq_len / layout.cp / layout.tp
    per_copy = ACTIVATION_BYTES * tokens * model.hidden_size * expert_load_factor(workload)
    volume = per_copy * moe.top_k
    if workload.moe_dispatch_dedup:  # once per rank inside a domain, once per domain across
        destinations = ep.num_domains if ep.num_domains > 1 else ep.size
        volume *= deduplicated_share(
            moe.top_k, destinations, router_groups=moe.router_num_groups,
            router_group_topk=moe.router_group_topk,
        )  # fmt: skip
    one_way = all_to_all_time(volume, ep)
    # dispatch + combine forward and backward; full recomputation runs the forward pair again
    # (on the layers it recomputes: ``recomputed_moe_layers`` when an explicit split says how
    # many, else the layout's rule)
    recomputed = recomputed_fraction(workload, layout, num_moe_layers) * num_moe_layers
    if recomputed_moe_layers is not None:  # an explicit pipeline split says which
        recomputed = recomputed_moe_layers
    if layout.recompute is Recompute.SELECTIVE and "moe" in workload.recompute_modules:
        recomputed = num_moe_layers  # the recomputed MoE block dispatches and combines again
    return (4 * num_moe_layers + 2 * recomputed) * one_way


def dispatcher_syncs_host(workload: TrainWorkload) -> bool:
    """Whether the MoE token dispatcher waits for the device once per layer: the workload's
    ``moe_host_sync``, except with the experts padded to capacity (``moe_capacity_factor``) on
    the all-to-all dispatcher. There every split follows from the shapes: Megatron-LM's
    ``MoEAlltoAllTokenDispatcher.preprocess`` under ``--moe-pad-expert-input-to-capacity``
    builds the per-expert counts as host tensors of the capacity (``torch.full``) and leaves
    ``cuda_sync_point`` at ``no_sync``, where the dropless path (and dropping without padding)
    copies the device's counts to the host and synchronises before the all-to-all (or the
    first permutation). A deduplicating dispatcher (DeepEP, HybridEP) cannot pad, so it keeps
    its sync.

    >>> padded = TrainWorkload(moe_capacity_factor=1.0)
    >>> dispatcher_syncs_host(TrainWorkload()), dispatcher_syncs_host(padded)
    (True, False)
    >>> dispatcher_syncs_host(padded.model_copy(update={"moe_dispatch_dedup": True}))
    True
    """
    padded = workload.moe_capacity_factor is not None and not workload.moe_dispatch_dedup
    return workload.moe_host_sync and not padded


def moe_sync_time(acc: AcceleratorSpec, workload: TrainWorkload, num_moe_layers: float) -> float:
    """Host-synchronisation time of one micro-batch's MoE layers: the accelerator's fitted
    ``moe_sync_overhead_us`` per MoE layer (forward + backward) when the dispatcher reads the
    per-expert token counts on the host (:func:`dispatcher_syncs_host`: Megatron-LM's dropless
    all-to-all and flex dispatchers do, to size the all-to-all and the grouped GEMM's per-expert
    splits, unless the preprocessing is captured in a CUDA graph or the experts are padded to
    capacity).

    >>> from planner.catalog import load_accelerator
    >>> moe_sync_time(load_accelerator("h100_sxm"), TrainWorkload(moe_host_sync=False), 12)
    0.0
    >>> moe_sync_time(load_accelerator("h100_sxm"), TrainWorkload(moe_capacity_factor=1.0), 12)
    0.0
    """
    if not dispatcher_syncs_host(workload) or num_moe_layers == 0:
        return 0.0
    return num_moe_layers * acc.efficiency.moe_sync_overhead_us * US


def exposed_moe_sync_time(sync_s: float, hidden_per_layer_s: float, num_moe_layers: float) -> float:
    """What the MoE dispatcher's host syncs of one micro-batch (``sync_s``,
    :func:`moe_sync_time`) leave exposed when ``hidden_per_layer_s`` of queued device work
    runs through each: num_moe x max(0, sync per layer - hidden per layer).

    Under Megatron-LM's combined 1F1B (``--overlap-moe-expert-parallel-comm``,
    ``TrainWorkload.ep_comm_overlap``) each MoE layer runs the forward of one micro-batch
    beside the backward of another in a fixed order
    (``megatron/core/models/common/model_chunk_schedule_plan.py``,
    ``TransformerLayerSchedulePlan.run``): the forward's attention, router and dispatch
    preprocessing, whose token counts start their copy to the host, then the other
    micro-batch's expert MLP backward, then the forward's dispatch, where the host waits for the
    counts (``cuda_sync_point`` before_ep_alltoall; DeepEP's dispatch waits for its notify
    kernel at the same place). The host waits on the copy stream only, so the expert backward
    already queued keeps the device busy through the wait and the relaunch after it; only the
    part of the sync that outlasts it idles the device.

    >>> exposed_moe_sync_time(12 * 4e-3, 3e-3, 12)  # 12 layers: 4 ms syncs, 3 ms hidden each
    0.012
    >>> exposed_moe_sync_time(12 * 4e-3, 5e-3, 12), exposed_moe_sync_time(0.0, 5e-3, 12)
    (0.0, 0.0)
    """
    if sync_s <= 0.0 or num_moe_layers <= 0:
        return sync_s
    return num_moe_layers * max(0.0, sync_s / num_moe_layers - hidden_per_layer_s)


def ep_exposed_per_microbatch(
    comm_s: float, *, compute_s: float, workload: TrainWorkload, contention: float
) -> float:
    """Exposed part of a micro-batch's EP all-to-all: all of it, or with
    ``workload.ep_comm_overlap`` what outlasts the other micro-batch's forward and backward
    compute it runs under, plus the contention fraction of the overlapped time
    (:func:`overlapped_exposed_time`).

    >>> w = TrainWorkload(ep_comm_overlap=True)
    >>> ep_exposed_per_microbatch(1.0, compute_s=3.0, workload=w, contention=0.1)
    0.1
    """
    if not workload.ep_comm_overlap:
        return comm_s
    return overlapped_exposed_time(comm_s, compute_s, contention)
