"""The rules a layout must obey on a model, cluster and workload (solver-independent).

Each rule returns a reason code and a sentence naming the values, so that a rejected candidate is
data (counted by reason) and a user-given layout that breaks one is a one-line error.
"""

from __future__ import annotations

import math

from planner.catalog.frameworks import framework_names, load_framework, vendor_rule
from planner.cost.pipeline import runs_combined_1f1b
from planner.cost.stage import FUSED_GROUPED_MLP_FORMATS, FUSED_GROUPED_MLP_SM_MAJOR
from planner.errors import SpecError
from planner.specs.cluster import ClusterSpec
from planner.specs.comm import CommDomain
from planner.specs.hardware import AcceleratorSpec
from planner.specs.layout import Layout, Recompute
from planner.specs.model import ModelSpec
from planner.specs.pipeline import PipelineSplit
from planner.specs.workload import TrainWorkload
from planner.topology.hierarchy import comm_domains, cp_hierarchy_sizes

MAX_GLOBAL_BATCH = 2**24
"""Largest global batch the planner accepts (sequences): 16.8M, 8,000x Llama 3's 2,048."""


def check_workload(model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload) -> None:
    """Raise SpecError when the workload itself cannot run (not a layout problem)."""
    if workload.global_batch > MAX_GLOBAL_BATCH:
        raise SpecError(
            f"global batch {workload.global_batch} sequences exceeds the {MAX_GLOBAL_BATCH:,} "
            "the planner accepts"
        )
    acc = cluster.accelerator
    why = fused_grouped_mlp_rule(model, acc) if workload.fused_grouped_mlp else ""
    if why:  # before the format: mxfp8 on an H100 is this setting's mistake
        raise SpecError(f"{FUSED_GROUPED_MLP} {why}")
    if not acc.supports(workload.precision):
        formats = ", ".join(sorted(str(f) for f in acc.peak_TFLOP_per_s))
        raise SpecError(
            f"precision '{workload.precision}' is not supported by {acc.name} "
            f"(its tensor cores run: {formats})"
        )
    profile = load_framework(workload.framework)
    why = vendor_rule(profile, acc.vendor, acc.name)
    if why:
        raise SpecError(f"framework '{profile.name}' {why}")
    if workload.precision not in profile.training_precisions:
        others = [
            f for f in framework_names()
            if workload.precision in load_framework(f).training_precisions
        ]  # fmt: skip
        hint = f"; --framework {' or '.join(others)} has one" if others else ""
        has = ", ".join(str(f) for f in profile.training_precisions)
        raise SpecError(
            f"framework '{profile.name}' has no {workload.precision} training recipe (its "
            f"precisions: {has}){hint}"
        )
    if workload.activation_offload_fraction > 0 and acc.host_link_GB_per_s is None:
        raise SpecError(
            f"activation offload needs the host-link bandwidth of {acc.name}, which its "
            "accelerator YAML does not give (host_link_GB_per_s)"
        )
    if workload.seq_len > model.max_context:
        hint = (
            "; to plan a context extension, give a model YAML (or config.json) with a larger "
            "max_context (max_position_embeddings)"
            if model.position_embedding != "learned"
            else "; its learned position table holds no more"
        )
        raise SpecError(
            f"seq-len {workload.seq_len} exceeds the {model.max_context}-token context of "
            f"model '{model.name}'{hint}"
        )


FUSED_GROUPED_MLP = "the fused grouped MLP (fused_grouped_mlp, --fused-grouped-mlp)"
"""How the rules below name ``TrainWorkload.fused_grouped_mlp`` in an error: by its field and
its flag (the CLI names the flag alone)."""


def fused_grouped_mlp_rule(model: ModelSpec, acc: AcceleratorSpec) -> str:
    """Why ``fused_grouped_mlp`` cannot run for ``model`` on ``acc`` ('' if it can), as the end
    of a sentence on the fused grouped MLP: it runs routed experts, on compute capability 10.x
    GPUs (:func:`planner.cost.stage.runs_fused_grouped_mlp`). The format is checked apart
    (:func:`fused_grouped_mlp_format_rule`): a search over formats applies it to the
    block-scaled ones only.

    >>> from planner.catalog import load_accelerator, load_model
    >>> fused_grouped_mlp_rule(load_model("gpt-oss-20b"), load_accelerator("gb300"))
    ''
    >>> fused_grouped_mlp_rule(load_model("gpt-oss-20b"), load_accelerator("h100_sxm"))[-35:]
    'h100_sxm has compute capability 9.0'
    >>> fused_grouped_mlp_rule(load_model("8B"), load_accelerator("gb300"))
    "runs routed experts: model 'llama3.1-8b' has none"
    """
    if model.moe is None:
        return f"runs routed experts: model '{model.name}' has none"
    if acc.compute_capability_major != FUSED_GROUPED_MLP_SM_MAJOR:
        has = (
            f"has compute capability {acc.compute_capability}"
            if acc.compute_capability is not None
            else "has no CUDA compute capability"
        )
        parts = ", ".join(fused_grouped_mlp_parts())
        return (
            f"runs only on compute capability {FUSED_GROUPED_MLP_SM_MAJOR}.x GPUs (in the "
            f"catalog: {parts}): {acc.name} {has}"
        )
    return ""


def fused_grouped_mlp_parts() -> list[str]:
    """The catalog accelerators the fused grouped MLP runs on: those whose
    ``compute_capability`` has the major version :data:`FUSED_GROUPED_MLP_SM_MAJOR`.

    >>> fused_grouped_mlp_parts()
    ['b200', 'b300', 'gb200', 'gb300']
    """
    from planner.catalog import load_accelerator
    from planner.catalog.store import accelerator_names

    return [
        name
        for name in accelerator_names()
        if load_accelerator(name).compute_capability_major == FUSED_GROUPED_MLP_SM_MAJOR
    ]


def fused_grouped_mlp_formats(conjunction: str = "or") -> str:
    """The formats the fused grouped MLP runs in, as words.

    >>> fused_grouped_mlp_formats(), fused_grouped_mlp_formats("and")
    ('mxfp8 or nvfp4', 'mxfp8 and nvfp4')
    """
    return f" {conjunction} ".join(str(f) for f in FUSED_GROUPED_MLP_FORMATS)


def fused_grouped_mlp_format_rule(workload: TrainWorkload, flag: str = "precision") -> str:
    """Why ``workload``'s own precision cannot run ``fused_grouped_mlp`` ('' if it can, or if
    the setting is off), as the end of a sentence on the fused grouped MLP. For a precision the
    user pinned: a search over formats (precision ``auto``, ``precisions``, ``--vary
    precision``) is not refused, since the cost model applies the fused MLP to the block-scaled
    formats only. ``flag``: how the fix names the precision (the API's field, the CLI's flag).

    >>> fused_grouped_mlp_format_rule(TrainWorkload(fused_grouped_mlp=True), "--precision")
    'runs only in mxfp8 or nvfp4, not bf16: give --precision mxfp8 or nvfp4 (or auto)'
    """
    if not workload.fused_grouped_mlp or workload.precision in FUSED_GROUPED_MLP_FORMATS:
        return ""
    formats = fused_grouped_mlp_formats()
    return f"runs only in {formats}, not {workload.precision}: give {flag} {formats} (or auto)"


def degrees_detail(layout: Layout, num_gpus: int) -> str:
    """Why a layout's degrees do not occupy ``num_gpus`` accelerators, and, when tp x pp x cp
    exceeds them or does not divide them, that no data-parallel degree would (the CLI and the
    API fill dp with the cluster's accelerators over tp x pp x cp when it is not given, rounded
    down).

    >>> degrees_detail(Layout(tp=8, pp=3, dp=2), 64)
    'tp x pp x cp x dp = 8x3x1x2 = 48 but the cluster has 64 accelerators, and no dp fills it: \
tp x pp x cp = 24 does not divide 64 (a cluster of 48 or 72 would take it)'
    >>> degrees_detail(Layout(tp=8, pp=2), 8)
    'tp x pp x cp x dp = 8x2x1x1 = 16 but the cluster has 8 accelerators, and no dp fills it: \
tp x pp x cp = 16 is more than 8'
    >>> degrees_detail(Layout(tp=8, dp=2), 8)
    'tp x pp x cp x dp = 8x1x1x2 = 16 but the cluster has 8 accelerators'
    """
    detail = (
        f"tp x pp x cp x dp = {layout.tp}x{layout.pp}x{layout.cp}x{layout.dp} = "
        f"{layout.num_gpus} but the cluster has {num_gpus} accelerators"
    )
    replica = layout.tp * layout.pp * layout.cp
    if replica > num_gpus:
        return f"{detail}, and no dp fills it: tp x pp x cp = {replica} is more than {num_gpus}"
    if num_gpus % replica:
        below = num_gpus // replica * replica
        return (
            f"{detail}, and no dp fills it: tp x pp x cp = {replica} does not divide {num_gpus} "
            f"(a cluster of {below} or {below + replica} would take it)"
        )
    return detail


def layout_violations(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    num_gpus: int | None = None,
    split: PipelineSplit | None = None,
) -> list[tuple[str, str]]:
    """Every (reason code, detail) the layout breaks, memory excluded (that needs the cost model).

    ``num_gpus``: the accelerators the layout must occupy (default: the whole cluster).
    ``split``: the pipeline split the run gives (:mod:`planner.search.given_split`), which
    decides where the layers go: a chunk of it may hold no decoder layer when it holds the
    embedding or the loss (Megatron-LM's ``--account-for-embedding/loss-in-pipeline-split``
    with one slot a chunk, or a layout string such as ``E|(t|)*126L``), so pp x vpp may then
    exceed the layers by those two slots.
    """
    out: list[tuple[str, str]] = []
    n = num_gpus or cluster.num_accelerators
    if layout.num_gpus != n:
        out.append(("degrees", degrees_detail(layout, n)))
    profile = load_framework(workload.framework)
    replicate_kv = profile.tp_beyond_kv_heads
    for rule in (
        tp_heads_rule(model, layout.tp, replicate_kv=replicate_kv),
        pp_layers_rule(model, layout.pp),
    ):
        if rule:
            out.append(("divisibility", rule))
    out.extend(("framework", rule) for rule in framework_rules(workload, layout))
    if model.moe is not None and layout.tp > 1 and not profile.moe_tensor_parallel:
        out.append(
            (
                "framework",
                f"framework '{profile.name}' runs an MoE model at tp 1 (got tp {layout.tp}): "
                "its MoE tensor parallelism keeps attention and the router replicated and "
                "starts only from a pretrained checkpoint",
            )
        )
    if layout.cp > 1 and workload.cp_comm == "a2a":
        rule = a2a_cp_heads_rule(model, layout.tp, layout.cp, replicate_kv=replicate_kv)
        if rule:
            out.append(("divisibility", rule))
    if layout.cp > 1 and workload.cp_comm == "a2a+p2p":
        rule = hierarchical_cp_rule(model, cluster, workload, layout, replicate_kv=replicate_kv)
        if rule:
            out.append(("divisibility", rule))
    if layout.vpp > 1 and layout.pp == 1:
        out.append(("divisibility", "vpp > 1 needs pp > 1"))
    elif split is None and layout.pp * layout.vpp > model.num_layers:
        # Uneven splits are allowed (Megatron-LM --decoder-first/last-pipeline-num-layers,
        # --account-for-embedding/loss-in-pipeline-split); without a given split every model
        # chunk needs a layer (a given split's chunks are checked by its own rules).
        out.append(
            (
                "divisibility",
                f"pp x vpp ({layout.pp * layout.vpp}) exceeds the {model.num_layers} layers",
            )
        )
    elif (
        layout.pp > 1
        and load_framework(workload.framework).pipeline_equal_stages
        and model.num_layers % (layout.pp * layout.vpp)
    ):
        out.append(
            (
                "divisibility",
                f"framework '{workload.framework}' runs the same layers on every pipeline "
                f"chunk: pp x vpp ({layout.pp * layout.vpp}) must divide the "
                f"{model.num_layers} layers (pipelining only a dividing share of them, as "
                f"MaxText's pipeline_parallel_layers can, is not priced)",
            )
        )
    if workload.seq_len % (2 * layout.cp) and layout.cp > 1:
        out.append(
            ("divisibility", f"2 x cp ({2 * layout.cp}) must divide seq-len {workload.seq_len}")
        )
    out.extend(_batch_and_expert_rules(model, workload, layout))
    return out


def hierarchical_cp_rule(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainWorkload,
    layout: Layout,
    *,
    replicate_kv: bool = False,
) -> str:
    """Why hierarchical ``a2a+p2p`` context parallelism cannot run ``layout`` ('' if it can).
    Its all-to-all runs over the CP ranks of one scale-up domain, as many as the domain holds
    and the heads allow (:func:`planner.topology.hierarchy.cp_hierarchy_sizes` with
    :func:`cp_a2a_heads`: on an NVL72 rack Llama 3 70B's CP 8 at TP 2 runs as 4 x 2, its 4 KV
    heads a rank); it is refused only where the domain has room for an all-to-all but the heads
    split over none, which is the point-to-point ring alone (``--cp-comm p2p``), not a2a+p2p.

    >>> from planner.catalog import load_cluster, load_model
    >>> w = TrainWorkload(cp_comm="a2a+p2p")
    >>> hierarchical_cp_rule(load_model("70B"), load_cluster("gb200_nvl72x64"), w,
    ...                      Layout(tp=2, cp=8, dp=4))
    ''
    >>> print(hierarchical_cp_rule(load_model("70B"), load_cluster("gb200_nvl72x64"), w,
    ...                            Layout(tp=8, cp=8)))  # doctest: +ELLIPSIS
    hierarchical a2a+p2p ... (up to 8 here), but a TP rank's heads split none of them ... p2p
    """
    per_domain = cluster.accelerators_per_domain
    heads = cp_a2a_heads(model, workload, layout.tp)
    inner, _ = cp_hierarchy_sizes(layout, per_domain, heads)
    room, _ = cp_hierarchy_sizes(layout, per_domain)
    if inner > 1 or room == 1:
        return ""
    rule = a2a_cp_heads_rule(
        model, layout.tp, room, replicate_kv=replicate_kv, group="its all-to-all group"
    )
    return (
        f"hierarchical a2a+p2p context parallelism runs its all-to-all over the CP ranks of one "
        f"scale-up domain (up to {room} here), but a TP rank's heads split none of them over "
        f"more than one rank ({rule}); without the all-to-all it is the ring of --cp-comm p2p"
    )


def a2a_head_groups(model: ModelSpec, tp: int, *, replicate_kv: bool = False) -> int:
    """The all-to-all group sizes that can split a TP rank's heads (those
    :func:`a2a_cp_heads_rule` lets run) are the divisors of this count: the greatest common
    divisor of the rank's query heads and KV heads (a KV replica where the framework
    replicates them); 1 where tp does not divide the heads, which the TP rules refuse first.

    >>> from planner.catalog import load_model
    >>> a2a_head_groups(load_model("70B"), 2), a2a_head_groups(load_model("70B"), 1)
    (4, 8)
    >>> a2a_head_groups(load_model("70B"), 16), a2a_head_groups(load_model("70B"), 16, replicate_kv=True)
    (1, 1)
    """
    queries = model.num_attention_heads
    if queries % tp or (kv_heads(model) < tp and not replicate_kv):
        return 1
    return math.gcd(queries // tp, rank_kv_heads(model, tp))


def kv_heads(model: ModelSpec) -> int:
    """Heads with keys and values of their own: the KV heads, or with MLA every attention head.

    >>> from planner.catalog import load_model
    >>> kv_heads(load_model("70B")), kv_heads(load_model("671B"))
    (8, 128)
    """
    return model.num_attention_heads if model.mla is not None else model.num_kv_heads


def rank_kv_heads(model: ModelSpec, tp: int) -> int:
    """KV heads one TP rank holds: :func:`kv_heads` over tp, or one replica where tp exceeds
    them.

    >>> from planner.catalog import load_model
    >>> rank_kv_heads(load_model("70B"), 2), rank_kv_heads(load_model("70B"), 16)
    (4, 1)
    """
    kv = kv_heads(model)
    return kv // tp if kv >= tp else 1


def cp_a2a_heads(model: ModelSpec, workload: TrainWorkload, tp: int) -> int | None:
    """What :func:`planner.topology.comm_domains` sizes hierarchical context parallelism by
    (``cp_heads``): under ``a2a+p2p`` the head groups of :func:`a2a_head_groups` with the
    framework's KV replication, so the all-to-all level is the largest that splits them; None
    otherwise (no level to size)."""
    if workload.cp_comm != "a2a+p2p":
        return None
    replicate_kv = load_framework(workload.framework).tp_beyond_kv_heads
    return a2a_head_groups(model, tp, replicate_kv=replicate_kv)


def workload_domains(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainWorkload, layout: Layout
) -> dict[str, CommDomain]:
    """The CommDomains ``layout``'s micro-batches are priced on
    (:func:`planner.topology.comm_domains`), hierarchical context parallelism's levels sized by
    the model's heads (:func:`cp_a2a_heads`)."""
    return comm_domains(cluster, layout, cp_a2a_heads(model, workload, layout.tp))


def a2a_cp_heads_rule(
    model: ModelSpec, tp: int, cp: int, *, replicate_kv: bool = False, group: str = "cp"
) -> str:
    """Why all-to-all context parallelism (``cp_comm`` a2a, DeepSpeed-Ulysses) cannot run at
    ``tp`` x ``cp`` ('' if it can): it trades the sequence split for a head split of the
    queries, keys and values a TP rank holds, so cp must divide each: Transformer Engine's
    ``AttnFuncWithCPAndQKVOA2A`` asserts ``q.shape[-2] % cp_size == 0 and k.shape[-2] %
    cp_size == 0`` ('The number of attention heads needs to be divisible by CP size!'), and
    DeepSpeed's ``_SeqAllToAll`` the same of every tensor it scatters. A rank's KV heads are
    kv / tp, or one replica where the framework replicates them (``replicate_kv``); with MLA
    every attention head has its own keys and values. ``group``: what the sentences call the
    all-to-all's ranks (hierarchical ``a2a+p2p`` runs it over part of cp).

    >>> from planner.catalog import load_model
    >>> a2a_cp_heads_rule(load_model("70B"), 2, 8)  # 64 query heads, 8 KV heads
    "all-to-all context parallelism splits a TP rank's heads over cp (8), but a rank holds 4 KV \
heads (num_kv_heads 8 over tp 2)"
    >>> a2a_cp_heads_rule(load_model("70B"), 2, 4), a2a_cp_heads_rule(load_model("70B"), 1, 8)
    ('', '')
    >>> a2a_cp_heads_rule(load_model("70B"), 16, 2)  # tp beyond the KV heads, none replicated
    "all-to-all context parallelism splits a TP rank's KV heads over cp (2), but tp (16) exceeds \
num_kv_heads (8) and the framework does not replicate them"
    """
    queries = model.num_attention_heads
    if queries % (tp * cp):
        return (
            f"all-to-all context parallelism splits the heads: tp x {group} ({tp * cp}) must "
            f"divide num_attention_heads ({queries})"
        )
    kv = kv_heads(model)
    if kv < tp and not replicate_kv:
        return (  # tp_heads_rule refuses it first; said here too for a caller on its own
            f"all-to-all context parallelism splits a TP rank's KV heads over {group} ({cp}), "
            f"but tp ({tp}) exceeds num_kv_heads ({kv}) and the framework does not replicate them"
        )
    per_rank = rank_kv_heads(model, tp)
    if per_rank % cp:
        return (
            f"all-to-all context parallelism splits a TP rank's heads over {group} ({cp}), but a "
            f"rank holds {per_rank} KV heads (num_kv_heads {kv} over tp {tp})"
        )
    return ""


def tp_heads_rule(model: ModelSpec, tp: int, *, replicate_kv: bool = False) -> str:
    """Why ``tp`` cannot split the attention heads ('' if it can): the KV heads, or with MLA the
    attention heads (its keys and values are per head). With ``replicate_kv`` (a framework
    profile's ``tp_beyond_kv_heads``) tp may exceed the KV heads when it divides the query heads
    and is a multiple of the KV heads: each rank then holds a replica of its query heads' KV
    head.

    >>> from planner.catalog import load_model
    >>> tp_heads_rule(load_model("8B"), 16)
    "tp (16) must divide num_kv_heads (8) of model 'llama3.1-8b'"
    >>> tp_heads_rule(load_model("8B"), 16, replicate_kv=True)
    ''
    """
    heads, what = (model.num_kv_heads, "num_kv_heads") if model.mla is None else (
        model.num_attention_heads, "num_attention_heads")  # fmt: skip
    if not heads % tp:
        return ""
    queries = model.num_attention_heads
    if replicate_kv and model.mla is None and tp > heads and not tp % heads and not queries % tp:
        return ""
    if replicate_kv and model.mla is None:
        return (
            f"tp ({tp}) must divide num_kv_heads ({heads}), or be a multiple of it dividing "
            f"num_attention_heads ({queries}), of model '{model.name}'"
        )
    return f"tp ({tp}) must divide {what} ({heads}) of model '{model.name}'"


def framework_rules(workload: TrainWorkload, layout: Layout) -> list[str]:
    """What the workload's framework profile cannot run of ``layout`` (each a sentence naming
    the profile's limit): a ZeRO stage it lacks or cannot combine with pipeline parallelism,
    pipeline, interleaving, context or expert parallelism it does not offer, or a context-
    parallel algorithm it lacks.

    >>> from planner.specs.workload import TrainWorkload
    >>> [rule] = framework_rules(TrainWorkload(framework="deepspeed"), Layout(pp=2, dp=4, zero=2))
    >>> rule.split("; ")
    ["framework 'deepspeed' cannot combine ZeRO-2 with pipeline parallelism (at most ZeRO-1)", \
'--framework automodel or maxtext or torchtitan can']
    """
    profile = load_framework(workload.framework)
    name = f"framework '{profile.name}'"
    out = []
    if layout.zero not in profile.zero_stages:
        stages = ", ".join(str(z) for z in profile.zero_stages)
        out.append(f"{name} has no ZeRO-{layout.zero} (its stages: {stages})")
    elif layout.pp > 1 and layout.zero > profile.max_zero_with_pp:
        others = [
            f for f in framework_names()
            if layout.zero <= load_framework(f).max_zero_with_pp
        ]  # fmt: skip
        hint = f"; --framework {' or '.join(others)} can" if others else ""
        out.append(
            f"{name} cannot combine ZeRO-{layout.zero} with pipeline parallelism "
            f"(at most ZeRO-{profile.max_zero_with_pp}){hint}"
        )
    group = workload.zero_shard_group
    if group is not None and (layout.dp * layout.cp) % group:
        out.append(f"the ZeRO shard group ({group}) must divide dp x cp ({layout.dp * layout.cp})")
    schedule = workload.pipeline_schedule
    if layout.pp > 1 and schedule not in profile.pipeline_schedules:
        others = [
            f for f in framework_names() if schedule in load_framework(f).pipeline_schedules
        ]  # fmt: skip
        hint = f"; --framework {' or '.join(others)} can" if others else ""
        kinds = ", ".join(profile.pipeline_schedules)
        out.append(f"{name} has no {schedule} pipeline schedule (it has: {kinds}){hint}")
    if schedule == "dualpipe" and layout.pp > 1 and layout.pp % 2:
        out.append(f"DualPipe needs an even pp (got {layout.pp})")
    if schedule == "zero_bubble" and layout.pp > 1 and layout.vpp < 2:
        # torchtitan runs ScheduleInterleavedZeroBubble, a multi-stage schedule, with two or
        # more stages per rank (FrameworkSpec.pipeline_schedules' source)
        out.append(
            f"the zero_bubble schedule runs two or more virtual stages per rank (vpp >= 2, "
            f"got {layout.vpp})"
        )
    out += ep_overlap_rules(workload, layout)
    if layout.tp > 1 and not profile.tensor_parallel:
        out.append(f"{name} has no tensor parallelism")
    if layout.pp > 1 and not profile.pipeline:
        out.append(f"{name} has no pipeline parallelism")
    elif layout.vpp > 1 and not profile.interleaved_pipeline:
        out.append(f"{name} has no interleaved (virtual-stage) pipeline schedule")
    if layout.cp > 1 and not profile.context_parallel:
        out.append(f"{name} has no context parallelism")
    elif layout.cp > 1 and workload.cp_comm not in profile.context_parallel:
        kinds = ", ".join(profile.context_parallel)
        out.append(f"{name} has no '{workload.cp_comm}' context parallelism (it has: {kinds})")
    if (layout.ep > 1 or layout.etp > 1) and not profile.expert_parallel:
        out.append(f"{name} has no expert parallelism")
    elif profile.expert_parallel_ranks == "dp" and layout.dp % layout.ep:
        out.append(
            f"{name} carves expert parallelism from the data-parallel ranks: ep ({layout.ep}) "
            f"must divide dp ({layout.dp})"
        )
    return out


def ep_overlap_rules(workload: TrainWorkload, layout: Layout) -> list[str]:
    """What the EP all-to-all overlap (``ep_comm_overlap`` under the 1F1B schedule: Megatron-LM's
    combined 1F1B, ``--overlap-moe-expert-parallel-comm``) cannot run of an expert-parallel
    ``layout``: Megatron-LM's TransformerConfig asserts a virtual pipeline when pp > 1 and no
    full recomputation (``megatron/core/transformer/transformer_config.py``, ``__post_init__``).

    >>> w = TrainWorkload(ep_comm_overlap=True)
    >>> ep_overlap_rules(w, Layout(pp=2, vpp=2, ep=2)), len(ep_overlap_rules(w, Layout(pp=2, ep=2)))
    ([], 1)
    >>> ep_overlap_rules(TrainWorkload(), Layout(pp=2, ep=2)), ep_overlap_rules(w, Layout(pp=2))
    ([], [])
    """
    if not runs_combined_1f1b(workload, layout.ep):
        return []  # without expert parallelism the setting is unused (and said so)
    out = []
    if layout.pp > 1 and layout.vpp < 2:
        out.append(
            f"the EP all-to-all overlap (combined 1F1B) needs an interleaved pipeline when pp > 1 "
            f"(vpp >= 2, got pp {layout.pp} vpp {layout.vpp})"
        )
    if layout.recompute is Recompute.FULL:
        out.append(EP_OVERLAP_FULL_RECOMPUTE)
    return out


EP_OVERLAP_FULL_RECOMPUTE = (
    "the EP all-to-all overlap (combined 1F1B) cannot run with full recomputation"
)
""":func:`ep_overlap_rules`' sentence for full recomputation, which the search also gives when
a pinned ``recompute=full`` leaves an expert-parallel structure nothing to try."""


def pp_layers_rule(model: ModelSpec, pp: int) -> str:
    """Why ``pp`` stages cannot each get a layer ('' if they can)."""
    return f"pp ({pp}) exceeds the {model.num_layers} layers" if pp > model.num_layers else ""


def ep_experts_rule(model: ModelSpec, ep: int) -> str:
    """Why ``ep`` cannot split the routed experts evenly ('' if it can, or without experts)."""
    experts = model.moe.num_experts if model.moe is not None else 0
    return f"ep ({ep}) must divide the {experts} experts" if experts and experts % ep else ""


def expert_grid_rule(*, ep: int, etp: int, dp: int, cp: int, tp: int) -> str:
    """Why ``ep`` x ``etp`` ranks cannot tile the data-, context- and tensor-parallel ranks
    ('' if they can): Megatron-Core's MoE parallel folding carves the expert grid out of
    dp x cp x tp, so ep x etp must divide it.

    >>> expert_grid_rule(ep=8, etp=2, dp=4, cp=1, tp=2), expert_grid_rule(ep=4, etp=2, dp=4, cp=1, tp=2)
    ('ep x etp must divide dp x cp x tp', '')
    """
    return "ep x etp must divide dp x cp x tp" if (dp * cp * tp) % (ep * etp) else ""


def _batch_and_expert_rules(
    model: ModelSpec, workload: TrainWorkload, layout: Layout
) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    per_step = layout.dp * layout.mbs
    if workload.global_batch % per_step:
        out.append(
            (
                "batch",
                f"dp x mbs ({layout.dp}x{layout.mbs} = {per_step}) must divide the "
                f"global batch ({workload.global_batch} sequences)",
            )
        )
    elif layout.vpp > 1 and (workload.global_batch // per_step) % layout.pp:
        out.append(
            (
                "batch",
                f"interleaving needs micro-batches ({workload.global_batch // per_step})"
                f" divisible by pp ({layout.pp})",
            )
        )
    if model.moe is None and (layout.ep > 1 or layout.etp > 1):
        out.append(("divisibility", f"ep/etp > 1 but model '{model.name}' has no experts"))
    if model.moe is not None:
        if rule := ep_experts_rule(model, layout.ep):
            out.append(("divisibility", rule))
        grid = expert_grid_rule(
            ep=layout.ep, etp=layout.etp, dp=layout.dp, cp=layout.cp, tp=layout.tp
        )
        if grid:
            out.append(("divisibility", grid))
        if rule := expert_tp_rule(workload, layout):
            out.append(("framework", rule))
    return out


def expert_tp_rule(workload: TrainWorkload, layout: Layout) -> str:
    """Why the framework cannot run an MoE ``layout``'s expert tensor parallelism ('' if it
    can): torchtitan (FrameworkSpec.expert_tensor_parallel_default ``tp_without_ep``) splits
    the routed experts over the TP ranks whenever there is no expert parallelism, and with it
    runs ETP 1 or ETP = TP only (its apply_moe_ep_tp and Parallelism.expert_tensor_parallel_degree);
    MaxText (``tp_only``) always splits them over the tensor axis.

    >>> w = TrainWorkload(framework="torchtitan")
    >>> expert_tp_rule(w, Layout(tp=2, dp=4))[:60]
    "framework 'torchtitan' splits the routed experts over the TP"
    >>> expert_tp_rule(w, Layout(tp=2, etp=2, dp=4)), expert_tp_rule(w, Layout(tp=2, ep=4, dp=4))
    ('', '')
    >>> expert_tp_rule(TrainWorkload(), Layout(tp=2, dp=4))  # Megatron-LM: any ETP
    ''
    >>> expert_tp_rule(TrainWorkload(framework="maxtext"), Layout(tp=4, ep=8, dp=8))[:42]
    "framework 'maxtext' splits every expert's "
    """
    profile = load_framework(workload.framework)
    rule = profile.expert_tensor_parallel_default
    if rule not in ("tp_without_ep", "tp_only") or layout.tp == 1:
        return ""
    name = f"framework '{profile.name}'"
    if rule == "tp_only" and layout.etp != layout.tp:
        return (
            f"{name} splits every expert's MLP over the tensor-parallel ranks: etp must equal tp "
            f"({layout.tp}) (got etp {layout.etp})"
        )
    if layout.ep == 1 and layout.etp != layout.tp:
        return (
            f"{name} splits the routed experts over the TP ranks without expert parallelism: "
            f"etp must equal tp ({layout.tp}) when ep is 1 (got etp {layout.etp})"
        )
    if layout.etp not in (1, layout.tp):
        return f"{name} runs etp 1 or etp = tp ({layout.tp}), not {layout.etp}"
    return ""
