"""What a training plan's prediction assumes about how the framework runs it, setting by setting.

Three kinds of setting: the workload's fields (:class:`~planner.specs.workload.TrainWorkload`:
batch, precision and the framework settings such as TP overlap or the MoE dispatcher), the
model's rotary embedding (base, scaling, rotated fraction), and what the cost model always
assumes (DP reduction overlapped in buckets, :mod:`planner.cost.step`). Every training export
either sets each relevant one as its framework spells it, or says it in a note
(:func:`note_unexpressed`); ``tests/test_export_settings.py`` walks them for every format, so a
new workload field without an export mapping fails there.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.cost.expert import dispatcher_syncs_host
from planner.cost.sharding import dp_sync_overlapped, reduces_in_buckets, zero3_reshards
from planner.cost.stage import runs_fused_grouped_mlp
from planner.report.export.job import ExportJob, mtp_layers
from planner.specs.formats import NumberFormat
from planner.specs.layout import Recompute
from planner.specs.model import ModelSpec

Words = Callable[[ExportJob], str]
Relevant = Callable[[ExportJob], bool]

MODEL_ROPE = "model.rope"
"""Key of the model's rotary embedding (rope_theta, rope_scaling, rotary_fraction)."""
DP_OVERLAP = "dp_comm_overlap"
"""Key of the data-parallel overlap (``TrainWorkload.dp_comm_overlap``): gradient reduce-scatter
behind the backward and parameter all-gather behind the forward, in buckets, the last bucket
exposed; or, off below ZeRO-3, both after the backward."""


def _on(flag: bool, yes: str, no: str) -> str:
    return yes if flag else no


def _moe(job: ExportJob) -> bool:
    return job.model.moe is not None


def grouped_gemm_tiles_priced(job: ExportJob) -> bool:
    """Whether the prediction priced the framework's grouped-GEMM tiles: an MoE model's grouped
    experts with ``grouped_gemm_tiles`` on an accelerator without a GPU tile model (a GPU's own
    tiles price its grouped GEMMs, :func:`planner.cost.stage._routed_expert_shape`)."""
    workload = job.train[1]
    return (
        _moe(job)
        and workload.moe_expert_compute == "grouped"
        and workload.grouped_gemm_tiles is not None
        and job.cluster.accelerator.gemm_tiling is None
    )


def fused_grouped_mlp_assumed(job: ExportJob) -> bool:
    """Whether the prediction ran the routed experts as Transformer Engine's fused grouped MLP
    (:func:`planner.cost.stage.runs_fused_grouped_mlp`: asked for, an MoE model, mxfp8 or nvfp4,
    a compute capability 10.x GPU); asked for elsewhere, the experts were priced unfused."""
    plan, workload = job.train
    return runs_fused_grouped_mlp(
        job.model, job.cluster.accelerator, workload, plan.layout.precision
    )


def _tp(job: ExportJob) -> bool:
    return job.train[0].layout.tp > 1


def rope_words(model: ModelSpec) -> str:
    """The model's rotary embedding in words.

    >>> from planner.catalog import load_model
    >>> rope_words(load_model("70B"))
    'RoPE base 500000, llama3 scaling x8 from 8192 tokens (low/high frequency factors 1/4)'
    """
    theta = model.rope_theta
    text = f"RoPE base {int(theta) if theta == int(theta) else theta:g}"
    scaling = model.rope_scaling
    if scaling is not None:
        text += f", {scaling.kind} scaling x{scaling.factor:g}"
        if scaling.original_context is not None:
            text += f" from {scaling.original_context} tokens"
        if scaling.low_freq_factor is not None or scaling.high_freq_factor is not None:
            text += (
                f" (low/high frequency factors {scaling.low_freq_factor or 1:g}/"
                f"{scaling.high_freq_factor or 4:g})"
            )
        if scaling.beta_fast is not None or scaling.beta_slow is not None:
            text += f" (beta fast/slow {scaling.beta_fast or 32:g}/{scaling.beta_slow or 1:g})"
    if model.rotary_fraction < 1:
        text += f", rotating {100 * model.rotary_fraction:g}% of each head"
    return text


SETTINGS: dict[str, tuple[Relevant, Words]] = {
    "seq_len": (lambda j: True, lambda j: f"{j.train[1].seq_len}-token sequences"),
    "global_batch": (
        lambda j: True,
        lambda j: f"a global batch of {j.train[1].global_batch} sequences",
    ),
    "precision": (lambda j: True, lambda j: f"{j.train[0].layout.precision} GEMM inputs"),
    "bf16_wgrad_formats": (
        lambda j: j.train[0].layout.precision in j.train[1].bf16_wgrad_formats,
        lambda j: (
            f"weight-gradient GEMMs in bf16 (forward and input-gradient GEMMs in "
            f"{j.train[0].layout.precision})"
        ),
    ),
    "grad_reduce_dtype": (
        lambda j: True,
        lambda j: f"gradients accumulated and reduced in {j.train[1].grad_reduce_dtype}",
    ),
    "optimizer_state_dtype": (
        lambda j: j.train[1].optimizer_state_dtype != "fp32",
        lambda j: (
            f"Adam's two moments kept in {j.train[1].optimizer_state_dtype} "
            "(Megatron-LM's precision-aware optimizer)"
        ),
    ),
    "sequence_parallel": (
        _tp,
        lambda j: _on(
            j.train[1].sequence_parallel,
            "sequence parallelism (norms and dropouts on T / tp tokens)",
            "no sequence parallelism (norms replicated on every TP rank)",
        ),
    ),
    "tp_comm_overlap": (
        _tp,
        lambda j: _on(
            j.train[1].tp_comm_overlap,
            "TP collectives overlapped with their GEMMs",
            "TP collectives not overlapped (exposed)",
        ),
    ),
    "flash_attention": (
        lambda j: True,
        lambda j: _on(
            j.train[1].flash_attention,
            "fused (flash) attention (scores never stored)",
            "unfused attention (the scores go through HBM and are stored)",
        ),
    ),
    "moe_dispatch_dedup": (
        _moe,
        lambda j: _on(
            j.train[1].moe_dispatch_dedup,
            "a deduplicating MoE dispatcher (DeepEP / HybridEP)",
            "the NCCL all-to-all MoE dispatcher",
        ),
    ),
    "ep_comm_overlap": (
        _moe,
        lambda j: _on(
            j.train[1].ep_comm_overlap,
            "the EP all-to-all overlapped with another micro-batch",
            "the EP all-to-all exposed (not overlapped)",
        ),
    ),
    "cross_entropy": (
        lambda j: True,
        lambda j: {
            "unfused": "an unfused vocab-parallel cross entropy",
            "native": "a fused cross entropy (native implementation)",
            "te": "a fused cross entropy (Transformer Engine kernel on the bf16 logits)",
        }[j.train[1].cross_entropy],
    ),
    "recompute_num_layers": (
        lambda j: j.train[0].layout.recompute is Recompute.FULL,
        lambda j: (
            "full recomputation of every layer"
            if j.train[1].recompute_num_layers is None
            else f"full recomputation of the first {j.train[1].recompute_num_layers} layers "
            "of each pipeline chunk"
        ),
    ),
    "moe_host_sync": (
        _moe,
        lambda j: (
            "experts padded to capacity on the all-to-all dispatcher: its splits follow from "
            "the shapes (no per-layer host sync)"
            if j.train[1].moe_host_sync and not dispatcher_syncs_host(j.train[1])
            else _on(
                j.train[1].moe_host_sync,
                "one host sync per MoE layer and micro-batch (no CUDA graphs over the MoE layers)",
                "MoE layers in CUDA graphs on capacity-padded shapes (no per-layer host sync)",
            )
        ),
    ),
    "pp_host_sync": (
        lambda j: j.train[0].layout.pp > 1,
        lambda j: _on(
            j.train[1].pp_host_sync,
            "pipeline receives that read each tensor's metadata on the host, one host sync per "
            "receive (as Nanotron's do)",
            "pipeline receives posted with known shapes (no host sync)",
        ),
    ),
    "zero1_grad_sync": (
        lambda j: j.train[0].layout.zero == 1 and j.train[0].layout.dp * j.train[0].layout.cp > 1,
        lambda j: (
            "ZeRO-1 gradients reduce-scattered to the ranks that step them"
            if j.train[1].zero1_grad_sync == "reduce_scatter"
            else "ZeRO-1 gradients all-reduced whole after the backward and the parameters "
            "all-gathered after the step, both exposed (as Nanotron's ZeRO-1 does)"
        ),
    ),
    "recompute_modules": (
        lambda j: (
            j.train[0].layout.recompute is Recompute.SELECTIVE and j.train[1].saved_tensors is None
        ),
        lambda j: f"selective recomputation of {', '.join(j.train[1].recompute_modules)}",
    ),
    "expert_load_imbalance": (
        lambda j: _moe(j) and j.train[1].moe_capacity_factor is None,
        lambda j: (
            f"expert load imbalance {j.train[1].expert_load_imbalance:g} (busiest expert rank "
            "over the mean; 1 = balanced routing, as NVIDIA's MoE benchmarks force)"
        ),
    ),
    "framework": (
        lambda j: True,
        lambda j: (
            f"the {j.train[1].framework} framework profile (its kernels, memory behaviour "
            "and the parallelism it supports)"
        ),
    ),
    "moe_capacity_factor": (
        _moe,
        lambda j: (
            "dropless MoE routing (each expert runs the tokens routed to it)"
            if j.train[1].moe_capacity_factor is None
            else f"experts padded to capacity factor {j.train[1].moe_capacity_factor:g} "
            "(overflow tokens dropped)"
        ),
    ),
    "moe_expert_compute": (
        _moe,
        lambda j: (
            "routed experts as grouped GEMMs over the tokens each expert got"
            if j.train[1].moe_expert_compute == "grouped"
            else "routed experts behind GShard's one-hot dispatch and combine einsums into "
            "every expert's capacity slots (their FLOPs priced)"
        ),
    ),
    "moe_routing_group": (
        lambda j: _moe(j) and j.train[1].moe_expert_compute == "einsum",
        lambda j: (
            "capacity slots per sequence (the dispatch einsum's reduction)"
            if j.train[1].moe_routing_group == "sequence"
            else "capacity slots shared by the rank's whole micro-batch (the dispatch einsum's "
            "reduction)"
        ),
    ),
    "grouped_gemm_tiles": (
        grouped_gemm_tiles_priced,
        lambda j: (
            "grouped-GEMM tiles of {} x {} x {} whose rows straddle the experts (each "
            "expert that starts inside a row tile computes it again; priced where the accelerator "
            "has no GPU tile model)".format(*(j.train[1].grouped_gemm_tiles or (0, 0, 0)))
        ),
    ),
    "host_sync_interval": (
        lambda j: j.train[1].host_sync_interval != 1,
        lambda j: (
            "a training loop that never stops the host between steps"
            if j.train[1].host_sync_interval is None
            else f"a training loop that reads the loss on the host once every "
            f"{j.train[1].host_sync_interval} steps (the per-step sync cost paid once in "
            f"{j.train[1].host_sync_interval})"
        ),
    ),
    "saved_tensors": (
        lambda j: (
            j.train[0].layout.recompute is Recompute.SELECTIVE
            and j.train[1].saved_tensors is not None
        ),
        lambda j: (
            "a save list: each layer keeps its input and "
            + (", ".join(j.train[1].saved_tensors or ()) or "nothing else")
            + ", and recomputes the rest"
        ),
    ),
    "cp_comm": (
        lambda j: j.train[0].layout.cp > 1,
        lambda j: {
            "p2p": "context parallelism as a K/V ring (p2p, overlapped with attention)",
            "a2a": "context parallelism as an all-to-all over heads (Ulysses)",
            "a2a+p2p": "context parallelism as an all-to-all inside the scale-up domain and a "
            "K/V ring across",
            "allgather": "context parallelism by all-gathering K/V before attention",
        }[j.train[1].cp_comm],
    ),
    "cp_impl": (
        lambda j: j.train[0].layout.cp > 1,
        lambda j: {
            "te": "context-parallel attention as Transformer Engine runs it (ring forms merged "
            "step by step in fused fp32 kernels; all-gather and all-to-all in one call per chunk)",
            "pytorch": "context-parallel attention as PyTorch's context_parallel runs it "
            "(load-balanced ring steps merged in eager fp32 ops, whatever the rotate method)",
        }[j.train[1].cp_impl],
    ),
    "reshard_after_forward": (
        lambda j: j.train[0].layout.zero == 3,
        lambda j: {
            "default": "ZeRO-3 parameters resharded after each layer's forward unless "
            "pipeline parallel",
            "always": "ZeRO-3 parameters resharded after each layer's forward",
            "never": "ZeRO-3 parameters kept gathered from forward to backward",
        }[j.train[1].reshard_after_forward],
    ),
    "fsdp_gather_unit": (
        lambda j: j.train[0].layout.zero == 3,
        lambda j: {
            "layer": "ZeRO-3 gathering a layer's parameters at a time",
            "weight": "ZeRO-3 gathering weight by weight (one all-gather per weight tensor)",
        }[j.train[1].fsdp_gather_unit],
    ),
    "fsdp2_buffer_copies": (
        lambda j: j.train[0].layout.zero >= 2,
        lambda j: (
            "FSDP2's copies on the compute stream (each all-gather's output split into the "
            "parameters, the gradients copied into the reduce buffer)"
            if j.train[1].fsdp2_buffer_copies
            else "no ZeRO buffer copies on the compute stream (parameters and gradients are "
            "views of the gathered and reduced buffers)"
        ),
    ),
    "weight_cast": (
        lambda j: j.train[0].layout.precision not in (NumberFormat.BF16, NumberFormat.FP16),
        lambda j: {
            "per_step": "low-precision weight copies made once per step and reused by its "
            "micro-batches",
            "per_call": "the weights quantized again on every GEMM call (forward, recomputed "
            "forward, input gradient)",
        }[j.train[1].weight_cast],
    ),
    "pp_grad_sync": (
        lambda j: (
            j.train[0].layout.zero == 3
            and j.train[0].layout.pp > 1
            and not zero3_reshards(j.train[1], j.train[0].layout)
        ),
        lambda j: {
            "step": "ZeRO-3 gradients of each pipeline stage reduced once, after the step's "
            "last backward",
            "round": "ZeRO-3 gradients reduce-scattered after each run of pp contiguous "
            "backwards of a virtual stage, into a sharded accumulator",
        }[j.train[1].pp_grad_sync],
    ),
    "pipeline_schedule": (
        lambda j: j.train[0].layout.pp > 1,
        lambda j: {
            "dualpipe": "the DualPipe schedule (both ends fed, two copies of each stage's "
            "parameters)",
            "zero_bubble": "the zero-bubble schedule (ZB-H1: weight gradients deferred into the "
            "drain)",
            "gpipe": "the GPipe schedule (every micro-batch's forward before the backwards)",
            "1f1b": "the interleaved 1F1B schedule"
            if j.train[0].layout.vpp > 1
            else "the 1F1B schedule",
        }[j.train[1].pipeline_schedule],
    ),
    "ddp_bucket_params": (
        lambda j: j.train[1].ddp_bucket_params is not None and buckets_dp_sync(j),
        lambda j: (
            f"gradient buckets of {j.train[1].ddp_bucket_params:,} parameters, each "
            "reduced (and its parameters gathered) as a collective of its own"
        ),
    ),
    "zero_shard_group": (
        lambda j: j.train[0].layout.zero >= 1 and j.train[1].zero_shard_group is not None,
        lambda j: (
            f"hybrid sharding: ZeRO shards over groups of {j.train[1].zero_shard_group} "
            "data-parallel ranks, replicated across groups"
        ),
    ),
    "fp32_params": (
        lambda j: True,
        lambda j: _on(
            j.train[1].fp32_params,
            "fp32 parameters that are the optimizer's master copy (cast to bf16 for compute)",
            _on(
                j.train[1].master_copy,
                "bf16 parameters with a separate fp32 master copy in the optimizer",
                "bf16 parameters",
            ),
        ),
    ),
    "master_copy": (
        lambda j: not j.train[1].fp32_params,
        lambda j: _on(
            j.train[1].master_copy,
            "an fp32 master copy of the bf16 parameters in the optimizer",
            "no fp32 master copy: the optimizer steps the bf16 parameters in place",
        ),
    ),
    "unsharded_param_layers": (
        lambda j: j.train[0].layout.zero == 3,
        lambda j: (
            f"{j.train[1].unsharded_param_layers:g} layers' parameters gathered at once "
            "under ZeRO-3 (the running layer and the prefetched one)"
        ),
    ),
    "activation_offload_fraction": (
        lambda j: j.train[1].activation_offload_fraction > 0,
        lambda j: (
            f"{100 * j.train[1].activation_offload_fraction:g}% of the saved activations "
            "offloaded to host memory"
        ),
    ),
    "fused_elementwise": (
        lambda j: True,
        lambda j: _on(
            j.train[1].fused_elementwise,
            "fused norm, RoPE and activation kernels",
            "eager (unfused) norm, RoPE and activation kernels, op by op",
        ),
    ),
    "attention_kernel": (
        lambda j: j.train[1].flash_attention,
        lambda j: {
            "vendor": "the vendor's fused attention kernel (cuDNN / FlashAttention-3)",
            "flash2": "FlashAttention-2",
        }[j.train[1].attention_kernel],
    ),
    "activation_memory_overhead": (
        lambda j: j.train[1].activation_memory_overhead > 0,
        lambda j: (
            f"{100 * j.train[1].activation_memory_overhead:g}% allocator overhead on the "
            "stored activations"
        ),
    ),
    "framework_buffers": (
        lambda j: bool(j.train[1].framework_buffers),
        lambda j: (
            "the memory the framework's own code allocates beyond the fused set: "
            + ", ".join(j.train[1].framework_buffers)
        ),
    ),
    "fp8_casts": (
        lambda j: j.train[0].layout.precision == NumberFormat.FP8,
        lambda j: {
            "fused": "low-precision casts fused as Transformer Engine runs them (one quantizing "
            "pass per GEMM input, cast-transposes in the backward)",
            "tensorwise": "torchao's tensorwise dynamic-scaling casts (a scale pass before each "
            "cast, the output gradients cast in the backward, operand layout copies for the "
            "scaled GEMMs)",
            "rowwise": "torchao's rowwise dynamic-scaling casts (as tensorwise, and the weights "
            "cast on every call, their parameters gathered in bf16)",
        }[j.train[1].fp8_casts],
    ),
    "fp8_param_gather": (
        lambda j: (
            str(j.train[0].layout.precision) != "bf16"
            and j.train[0].layout.zero >= 1
            and j.train[0].layout.dp * j.train[0].layout.cp > 1
        ),
        lambda j: _on(
            j.train[1].fp8_param_gather,
            "parameters all-gathered in 8 bits",
            "parameters all-gathered in bf16",
        ),
    ),
    "fused_grouped_mlp": (
        _moe,
        lambda j: _on(
            fused_grouped_mlp_assumed(j),
            "routed experts as Transformer Engine's fused grouped MLP (bias, GLU, probabilities "
            "and cast in the GEMM epilogues)",
            "routed experts as an unfused grouped MLP (separate activation, bias and cast kernels)",
        ),
    ),
    "mtp_num_layers": (
        lambda j: mtp_layers(j)[0] > 0,
        lambda j: f"{mtp_layers(j)[0]} multi-token-prediction module(s)",
    ),
    MODEL_ROPE: (
        lambda j: j.model.position_embedding == "rope",
        lambda j: rope_words(j.model),
    ),
    DP_OVERLAP: (
        lambda j: j.train[0].layout.dp * j.train[0].layout.cp > 1,
        lambda j: (
            "DP gradient reduction overlapped with the backward"
            + (" and parameter gathers with the forward" if j.train[0].layout.zero >= 1 else "")
            + ", in buckets (the last one exposed)"
            if dp_overlapped(j)
            else "DP gradient reduction"
            + (" and parameter gather" if j.train[0].layout.zero >= 1 else "")
            + " after the backward, exposed"
        ),
    ),
}
"""Setting key -> (does the plan use it, the setting in words). Keys are the TrainWorkload
fields (``mode`` aside; :data:`DP_OVERLAP` is one) and :data:`MODEL_ROPE`."""


def dp_overlapped(job: ExportJob) -> bool:
    """Whether the prediction overlaps the data-parallel collectives with compute
    (:func:`planner.cost.sharding.dp_sync_overlapped`)."""
    return dp_sync_overlapped(job.train[1], job.train[0].layout)


def buckets_dp_sync(job: ExportJob) -> bool:
    """Whether the prediction reduced the gradients in buckets, each its own collective
    (:func:`planner.cost.sharding.reduces_in_buckets`), over more than one data-parallel rank."""
    layout = job.train[0].layout
    return layout.dp * layout.cp > 1 and reduces_in_buckets(job.train[1], layout)


def express_framework(job: ExportJob, *formats: str) -> None:
    """Mark the framework profile expressed when it is one of ``formats``' frameworks: the
    profile exports to one of them (its ``export_format``), and as its own format, not the
    nearest stack's (``FrameworkSpec.export_is_own``)."""
    from planner.catalog.frameworks import load_framework

    profile = load_framework(job.train[1].framework)
    if profile.export_format in formats and profile.export_is_own:
        job.express("framework")


NATIVE_GATHER_AND_CAST: dict[str, tuple[str, str, str, str]] = {
    "megatron": (
        "layer", "per_step",
        "Megatron-FSDP gathers its parameter buckets module by module",
        "Transformer Engine casts a weight once per step (is_first_microbatch) and reuses it",
    ),
    "deepspeed": (
        "layer", "per_step",
        "ZeRO-3 fetches each submodule's parameters together",
        "Transformer Engine casts a weight once per step and reuses it",
    ),
    "torchtitan": (
        "layer", "per_call",
        "FSDP2 all-gathers each fully_shard unit (a transformer block) at once",
        "torchao's Float8Linear casts the weight on every call (before the all-gather with "
        "enable_fsdp_float8_all_gather)",
    ),
    "automodel": (
        "layer", "per_step",
        "FSDP2 all-gathers each fully_shard unit (a transformer block) at once",
        "AutoModel passes is_first_microbatch to Transformer Engine's linears, which cast a "
        "weight once per step and reuse it (components/models/common/utils.py)",
    ),
    "accelerate": (
        "layer", "per_call",
        "FSDP gathers each wrapped decoder layer at once (TRANSFORMER_BASED_WRAP)",
        "Accelerate's fp8 backends cast the weight on every call (Transformer Engine's modules "
        "without is_first_microbatch, torchao's Float8Linear)",
    ),
    "nanotron": (
        "layer", "per_step",
        "Nanotron has no ZeRO-3: nothing is gathered",
        "Nanotron trains in bf16 here: no weight is cast to 8 bits",
    ),
    "maxtext": (
        "weight", "per_call",
        "XLA all-gathers the weights one tensor at a time",
        "AQT (quantization int8) and Flax's fp8 dot quantize the weight on every call",
    ),
}  # fmt: skip
"""Per export format: the FSDP gather unit and weight-cast timing its framework has natively,
and where each lives when the prediction assumed the other. These are the frameworks' own
behaviours, not their profiles' defaults: the torchtitan profile keeps ``weight_cast`` per_step
and prices torchao's weight casts through ``fp8_casts`` instead (on every call only where the
weights are not gathered in fp8), so its export notes the per-step setting it assumed."""


NATIVE_FP8_CASTS: dict[str, tuple[str, str]] = {
    "megatron": ("fused", "Transformer Engine fuses its casts (cast-transpose kernels)"),
    "deepspeed": ("fused", "DeepSpeed's FP8 runs Transformer Engine's modules"),
    "torchtitan": (
        "tensorwise",
        "torchao's Float8Linear computes each dynamic scale in a pass of its own "
        "(quantize.linear.float8 recipe_name)",
    ),
    "automodel": ("fused", "AutoModel's FP8 runs Transformer Engine's modules (te_fp8)"),
    "accelerate": (
        "fused",
        "fp8_config's backend: Transformer Engine's fused casts (te) or torchao's tensorwise "
        "recipe (ao); torchao's rowwise recipe is the script's (AORecipeKwargs)",
    ),
    "nanotron": ("fused", "Nanotron trains in bf16 here: nothing is quantized"),
    "maxtext": ("fused", "XLA fuses the quantization into the dot's neighbours"),
}
"""Per export format: how its framework quantizes GEMM operands
(``TrainWorkload.fp8_casts``), and where that lives when the prediction assumed the other."""


NATIVE_FSDP2_COPIES: dict[str, tuple[bool, str]] = {
    "megatron": (False, "Megatron-FSDP's parameters are views of its gathered buckets"),
    "deepspeed": (False, "ZeRO-3's parameters are views of its gathered partitions"),
    "torchtitan": (
        True,
        "FSDP2 (fully_shard) copies each all-gather's output into the parameters and the "
        "gradients into its reduce-scatter buffer",
    ),
    "automodel": (
        True,
        "FSDP2 (fully_shard) copies each all-gather's output into the parameters and the "
        "gradients into its reduce-scatter buffer",
    ),
    "accelerate": (
        False,
        "fsdp_version: 1 keeps flat parameters (views of the gathered buffer), 2 (fully_shard) "
        "copies around its collectives",
    ),
    "nanotron": (False, "Nanotron has no ZeRO-2/3"),
    "maxtext": (False, "XLA's gathered weights are the dot operands themselves"),
}
"""Per export format: whether its framework's ZeRO-2/3 makes FSDP2's buffer copies on the
compute stream (``TrainWorkload.fsdp2_buffer_copies``), and where that lives when the prediction
assumed the other."""


def express_native_gather_and_cast(job: ExportJob, fmt: str) -> dict[str, str]:
    """Mark ``fsdp_gather_unit``, ``weight_cast``, ``fsdp2_buffer_copies`` and ``fp8_casts``
    expressed where the prediction assumed the framework's own behaviour; the note tails for
    where it assumed the other."""
    gather, cast, gather_where, cast_where = NATIVE_GATHER_AND_CAST[fmt]
    copies, copies_where = NATIVE_FSDP2_COPIES[fmt]
    workload = job.train[1]
    if workload.fsdp_gather_unit == gather:
        job.express("fsdp_gather_unit")
    if workload.weight_cast == cast:
        job.express("weight_cast")
    if workload.fsdp2_buffer_copies == copies:
        job.express("fsdp2_buffer_copies")
    casts, casts_where = NATIVE_FP8_CASTS[fmt]
    if workload.fp8_casts == casts:
        job.express("fp8_casts")
    return {
        "fsdp_gather_unit": gather_where,
        "weight_cast": cast_where,
        "fsdp2_buffer_copies": copies_where,
        "fp8_casts": casts_where,
    }


FRAMEWORK_ELSEWHERE = (
    "scored for another framework; run the search with --framework for this one to score it "
    "as it runs here"
)
"""Where the framework setting lives when the export is for another framework."""


def relevant_settings(job: ExportJob) -> list[str]:
    """The settings ``job``'s prediction depends on, in :data:`SETTINGS` order."""
    return [key for key, (relevant, _) in SETTINGS.items() if relevant(job)]


def setting_words(job: ExportJob, key: str) -> str:
    """Setting ``key`` of ``job`` in words."""
    return SETTINGS[key][1](job)


def note_unexpressed(job: ExportJob, framework: str, where: dict[str, str] | None = None) -> None:
    """A note for every relevant setting the render did not set (``job.expressed``): the
    prediction assumes it, and the output cannot say it; ``where[key]`` says where the setting
    lives instead (default: that the framework's output has no setting for it)."""
    where = {
        "framework": FRAMEWORK_ELSEWHERE,
        "activation_memory_overhead": "an allowance of the cost model for the caching "
        "allocator, not a framework setting",
        "framework_buffers": "the framework profile's own code (Nanotron's), not a setting of "
        "this output",
        **(where or {}),
    }
    if not job.train[1].pp_host_sync:  # every export format's framework receives so natively
        job.express("pp_host_sync")
    if job.train[1].zero1_grad_sync == "reduce_scatter":  # every ZeRO-1 export reduce-scatters
        job.express("zero1_grad_sync")
    if not fused_grouped_mlp_assumed(job):  # every framework's grouped MLP runs so natively
        job.express("fused_grouped_mlp")
    for key in relevant_settings(job):
        if key not in job.expressed:
            tail = where.get(key, f"{framework} has no setting for it here")
            job.note(f"the prediction assumes {setting_words(job, key)}: {tail}")
