"""Every setting a training prediction assumes is in every training export: set as the framework
spells it, or said in a note where the framework cannot express it (issue 21, item 1).

The test walks :data:`planner.report.export.assumed.SETTINGS` (every TrainWorkload field, the
model's RoPE and the cost model's DP overlap) and, for each format, tries each setting at its
default and at other values on a plan where it matters; :data:`EXPECT` says, per format and
setting, how the output must show the value. A new TrainWorkload field fails
``test_every_workload_field_has_a_mapping_in_every_format`` until it is mapped here and in the
exports.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

import pytest

import planner
from planner.catalog.frameworks import load_framework
from planner.cost.expert import dispatcher_syncs_host
from planner.cost.sharding import keeps_master_remainders, zero3_reshards
from planner.report.export import ExportResult, export, make_job
from planner.report.export.assumed import DP_OVERLAP, MODEL_ROPE, SETTINGS, setting_words
from planner.report.export.job import ExportJob
from planner.specs.result import Plan
from planner.specs.workload import TrainWorkload
from tests.test_export import _bash_array, check_names

FORMATS = (
    "megatron", "bridge", "torchtitan", "deepspeed", "maxtext", "automodel", "nanotron",
    "accelerate",
)  # fmt: skip
"""The training exports (vllm and sglang serve: their settings are the serving plan's)."""

PLANS: dict[str, tuple[str, str, dict[str, object]]] = {
    "dense": ("70B", "hgx_b200x16", {"tp": 4, "pp": 2, "vpp": 2, "recompute": "selective"}),
    "full": ("70B", "hgx_b200x48", {"tp": 8, "pp": 6, "recompute": "full"}),
    "moe": ("mixtral-8x7b", "hgx_h100x16", {"tp": 2, "ep": 8, "zero": 1, "mbs": 1}),
    "moe_tpu": ("mixtral-8x7b", "tpu_v5px128", {"tp": 1, "ep": 8, "zero": 3, "mbs": 1}),
    "zero0": ("8B", "hgx_h100x8", {"tp": 2, "zero": 0}),
    "yarn": ("gpt-oss-120b", "hgx_b200x16", {"ep": 8}),
    "mla": ("671B", "gb200_nvl72x128", {"pp": 8, "ep": 16, "zero": 0}),
    "half_rope": ("nemotron4-340b", "hgx_h100x128", {"tp": 8, "pp": 8, "recompute": "full"}),  # 4K
    "plain_rope": ("mixtral-8x7b", "hgx_h100x16", {"tp": 2, "ep": 8}),
    "cp": ("70B", "hgx_b200x16", {"tp": 4, "cp": 2, "zero": 1}),
    "zero3": ("8B", "hgx_h100x16", {"zero": 3}),
    "zero3pp": ("70B", "hgx_h100x64", {"tp": 8, "pp": 4, "vpp": 2, "zero": 3}),
    "offload": ("8B", "hgx_h100x8", {"tp": 2, "zero": 1, "recompute": "none"}),
}

TORCHTITAN_SAVE_LIST = tuple(load_framework("torchtitan").workload["saved_tensors"])
"""torchtitan's op-level selective AC save list (its framework profile)."""
NANOTRON_BUFFERS = tuple(load_framework("nanotron").workload["framework_buffers"])
"""The buffers Nanotron's own code keeps (its framework profile)."""

VARIANTS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    # setting -> (plan, workload fields) pairs: the default and other values
    "seq_len": [("dense", {}), ("dense", {"seq_len": 4096})],
    "global_batch": [("dense", {}), ("dense", {"global_batch": 256})],
    "precision": [("dense", {"precision": p}) for p in ("bf16", "fp8", "mxfp8", "nvfp4", "mxfp4")],
    "bf16_wgrad_formats": [("dense", {"precision": "int8", "bf16_wgrad_formats": ("int8",)})],
    "grad_reduce_dtype": [("dense", {"grad_reduce_dtype": d}) for d in ("fp32", "bf16")],
    "optimizer_state_dtype": [
        ("dense", {"optimizer_state_dtype": "bf16"}),
        ("zero0", {"optimizer_state_dtype": "bf16"}),
    ],
    "sequence_parallel": [("dense", {"sequence_parallel": v}) for v in (True, False)],
    "tp_comm_overlap": [("dense", {"tp_comm_overlap": v}) for v in (True, False)],
    "flash_attention": [("dense", {"flash_attention": v}) for v in (True, False)],
    "moe_dispatch_dedup": [("moe", {"moe_dispatch_dedup": v}) for v in (False, True)],
    "ep_comm_overlap": [("moe", {"ep_comm_overlap": v}) for v in (False, True)],
    "cross_entropy": [("dense", {"cross_entropy": v}) for v in ("unfused", "native", "te")],
    "recompute_num_layers": [("full", {}), ("full", {"recompute_num_layers": 4})],
    "moe_host_sync": [
        *[("moe", {"moe_host_sync": v}) for v in (True, False)],
        ("moe", {"moe_capacity_factor": 1.0}),  # padded: no sync assumed although it is on
    ],
    "recompute_modules": [
        ("dense", {}),
        ("dense", {"recompute_modules": ("layernorm", "core_attn")}),
    ],
    "expert_load_imbalance": [
        ("moe", {"expert_load_imbalance": 1.3}),
        ("moe", {"expert_load_imbalance": 1.3, "moe_host_sync": False}),
    ],
    "framework": [
        ("dense", {"framework": f}) for f in ("megatron", "torchtitan", "deepspeed", "automodel")
    ],
    "moe_capacity_factor": [("moe", {}), ("moe", {"moe_capacity_factor": 1.25})],
    "moe_expert_compute": [
        ("moe", {}),
        ("moe", {"moe_expert_compute": "einsum", "moe_capacity_factor": 1.25}),
    ],
    # priced (and exported) only where the accelerator has no GPU tile model of its own
    "grouped_gemm_tiles": [("moe_tpu", {"grouped_gemm_tiles": (512, 1024, 1024)})],
    "moe_routing_group": [
        ("moe", {"moe_expert_compute": "einsum", "moe_capacity_factor": 1.0}),
        (
            "moe",
            {
                "moe_expert_compute": "einsum",
                "moe_capacity_factor": 1.0,
                "moe_routing_group": "microbatch",
            },
        ),
    ],
    "saved_tensors": [
        ("dense", {"saved_tensors": TORCHTITAN_SAVE_LIST}),
        ("dense", {"saved_tensors": ("context",)}),
    ],
    "cp_comm": [("cp", {"cp_comm": v}) for v in ("p2p", "a2a", "a2a+p2p", "allgather")],
    "cp_impl": [
        ("cp", {"cp_impl": v, "cp_comm": c})
        for v in ("te", "pytorch")
        for c in ("p2p", "allgather")
    ],
    "reshard_after_forward": [
        ("zero3", {"reshard_after_forward": v}) for v in ("default", "always", "never")
    ],
    "fsdp_gather_unit": [("zero3", {"fsdp_gather_unit": v}) for v in ("layer", "weight")],
    "fsdp2_buffer_copies": [("zero3", {"fsdp2_buffer_copies": v}) for v in (False, True)],
    "weight_cast": [
        ("dense", {"precision": "fp8", "weight_cast": v}) for v in ("per_step", "per_call")
    ],
    "pipeline_schedule": [
        ("dense", {}),
        ("dense", {"pipeline_schedule": "dualpipe"}),
        ("dense", {"pipeline_schedule": "zero_bubble"}),
        ("dense", {"pipeline_schedule": "gpipe"}),
    ],
    "pp_grad_sync": [
        ("zero3pp", {"framework": "torchtitan", "pp_grad_sync": v}) for v in ("step", "round")
    ],
    "zero_shard_group": [("zero3", {"zero_shard_group": 8}), ("cp", {"zero_shard_group": 2})],
    "ddp_bucket_params": [("dense", {"ddp_bucket_params": 40_000_000})],
    "fp32_params": [("dense", {"fp32_params": v}) for v in (False, True)],
    "master_copy": [
        ("dense", {"master_copy": True}),
        ("dense", {"master_copy": False, "optimizer_state_dtype": "bf16"}),
        ("zero3", {"master_copy": False, "optimizer_state_dtype": "bf16"}),
    ],
    "unsharded_param_layers": [("zero3", {}), ("zero3", {"unsharded_param_layers": 3.0})],
    "host_sync_interval": [
        ("dense", {"host_sync_interval": 10}),
        ("dense", {"host_sync_interval": None}),
    ],
    "activation_offload_fraction": [
        ("offload", {"activation_offload_fraction": 0.5}),
        ("dense", {"activation_offload_fraction": 0.5}),
    ],
    "fused_elementwise": [
        ("dense", {"fused_elementwise": True}),
        ("dense", {"fused_elementwise": False}),
        ("zero0", {"fused_elementwise": False, "tp_comm_overlap": False}),
    ],
    "attention_kernel": [("dense", {"attention_kernel": v}) for v in ("vendor", "flash2")],
    "activation_memory_overhead": [("dense", {"activation_memory_overhead": 0.1})],
    "framework_buffers": [
        ("dense", {"framework_buffers": ("mha_qkv_copy", "glu_act", "fp32_logits")}),
        ("zero0", {"framework_buffers": ("ddp_buckets", "tp_gather_buffers")}),
    ],
    "fp8_casts": [
        ("dense", {"precision": "fp8", "fp8_casts": v}) for v in ("fused", "tensorwise", "rowwise")
    ],
    "fp8_param_gather": [
        ("dense", {"precision": "fp8", "fp8_param_gather": False}),
        ("dense", {"precision": "fp8", "fp8_param_gather": True}),
        ("dense", {"precision": "mxfp8", "fp8_param_gather": True}),
    ],
    "fused_grouped_mlp": [
        ("yarn", {}),
        ("yarn", {"precision": "mxfp8", "fused_grouped_mlp": True}),
        ("yarn", {"precision": "nvfp4", "fused_grouped_mlp": True}),
        ("yarn", {"fused_grouped_mlp": True}),  # bf16: the experts run unfused
        ("moe", {"precision": "fp8", "fused_grouped_mlp": True}),  # H100: unfused
    ],
    "mtp_num_layers": [("mla", {"mtp_num_layers": 1})],
    "pp_host_sync": [("dense", {"pp_host_sync": v}) for v in (False, True)],
    "zero1_grad_sync": [("cp", {"zero1_grad_sync": v}) for v in ("reduce_scatter", "all_reduce")],
    MODEL_ROPE: [(p, {}) for p in ("dense", "yarn", "mla", "half_rope", "plain_rope")],
    DP_OVERLAP: [
        ("dense", {}),
        ("zero0", {}),
        ("dense", {"dp_comm_overlap": False}),
        ("zero0", {"dp_comm_overlap": False}),
        ("zero3", {"dp_comm_overlap": False}),  # ZeRO-3 overlaps regardless
        ("cp", {"zero1_grad_sync": "all_reduce"}),  # Nanotron's ZeRO-1: after the backward
    ],
}


class Case:
    """One export of one variant: the parsed names, the raw text and the notes."""

    def __init__(self, fmt: str, job: ExportJob, result: ExportResult, key: str) -> None:
        self.fmt, self.job, self.result, self.key = fmt, job, result, key
        self.names = check_names(fmt, result.text)
        self.w: TrainWorkload = job.train[1]
        self.layout = job.train[0].layout

    def said(self) -> bool:
        """A note says the setting in the words of planner.report.export.assumed."""
        words = setting_words(self.job, self.key)
        return any(words in note for note in self.result.notes)

    def has(self, name: str, value: object = None) -> bool:
        if name not in self.names:
            return False
        return value is None or str(self.names[name]).strip("'") == str(value)

    def tokens(self) -> list[str]:
        return _bash_array(self.result.text, "MEGATRON_ARGS")


Check = Callable[[Case], bool]


def _precision_megatron(c: Case) -> bool:
    p = str(c.layout.precision)
    return {
        "bf16": c.has("--bf16") and not c.has("--fp8-format") and not c.has("--fp4-format"),
        "fp8": c.has("--fp8-format", "hybrid") and c.has("--fp8-recipe", "tensorwise"),
        "mxfp8": c.has("--fp8-recipe", "mxfp8"),
        "nvfp4": c.has("--fp4-recipe", "nvfp4"),
        "mxfp4": any("mxfp4" in n for n in c.result.notes),
    }[p]


def _precision_bridge(c: Case) -> bool:
    p = str(c.layout.precision)
    recipe = {"bf16": "bf16_mixed", "fp8": "bf16_with_fp8_current_scaling_mixed",
              "mxfp8": "bf16_with_mxfp8_mixed", "nvfp4": "bf16_with_nvfp4_mixed"}  # fmt: skip
    if p in recipe:
        return c.has("mixed_precision", recipe[p])
    return any(p in n for n in c.result.notes)


def _precision_torchtitan(c: Case) -> bool:
    p = str(c.layout.precision)
    converters = c.names.get("model.converters") or []
    if p == "bf16":
        return not converters
    family = {"fp8": "float8", "mxfp8": "mx"}.get(p)
    if family is None:
        return any(p in n for n in c.result.notes)
    return f"quantize.linear.{family}" in converters  # type: ignore[operator]


def _rope_megatron(c: Case) -> bool:
    m = c.job.model
    ok = c.has("--rotary-base", int(m.rope_theta))
    if m.rotary_fraction < 1:
        ok &= c.has("--rotary-percent", f"{m.rotary_fraction:g}")
    s = m.rope_scaling
    if s is not None and s.kind == "llama3":
        ok &= c.has("--use-rope-scaling") and c.has("--rope-scaling-factor", f"{s.factor:g}")
    if s is not None and s.kind == "yarn":
        ok &= c.has("--rotary-scaling-factor", f"{s.factor:g}")
        if m.mla is None:
            ok &= c.has("--position-embedding-type", "yarn")
            ok &= c.has("--yarn-original-max-position-embeddings", s.original_context)
        else:
            ok &= c.has("--rope-type", "yarn") and c.has("--mscale-all-dim", "1")
    return ok


def _rope_bridge(c: Case) -> bool:
    m = c.job.model
    ok = c.has("model.rotary_base", int(m.rope_theta))
    if m.rotary_fraction < 1:
        ok &= c.has("model.rotary_percent", f"{m.rotary_fraction:g}")
    s = m.rope_scaling
    if s is not None and s.kind == "llama3":
        ok &= c.has("model.rope_scaling", "true") and c.has("model.rope_scaling_factor", "8")
    if s is not None and s.kind == "yarn":
        prefix = "model.yarn_" if m.mla is None else "model."
        ok &= c.has(f"{prefix}rotary_scaling_factor", f"{s.factor:g}")
    return ok


def _recompute_modules_megatron(c: Case) -> bool:
    tokens = c.tokens()
    if c.w.recompute_modules == ("core_attn",):  # Megatron's default: not repeated
        return "--recompute-modules" not in tokens
    i = tokens.index("--recompute-modules")
    return tuple(tokens[i + 1 : i + 1 + len(c.w.recompute_modules)]) == c.w.recompute_modules


def _dp_on(c: Case) -> bool:
    """The prediction overlaps the DP collectives (always at ZeRO-3; never when ZeRO-1
    all-reduces its whole gradient buffer after the backward)."""
    whole_buffer = c.layout.zero == 1 and c.w.zero1_grad_sync == "all_reduce"
    return (c.w.dp_comm_overlap and not whole_buffer) or c.layout.zero >= 3


def _dp_megatron(c: Case) -> bool:
    if not _dp_on(c):  # Megatron-LM reduces after the backward without the flags
        return not c.has("--overlap-grad-reduce") and not c.has("--overlap-param-gather")
    return c.has("--overlap-grad-reduce") and c.has("--overlap-param-gather") == (
        c.layout.zero >= 1
    )


def _dp_bridge(c: Case) -> bool:
    on = "true" if _dp_on(c) else "false"
    return c.has("ddp.overlap_grad_reduce", on) and c.has("ddp.overlap_param_gather", on) == (
        c.layout.zero >= 1
    )


def _precision_aware(*flags: tuple[str, ...]) -> Check:
    """bf16 moments as Megatron Core's precision-aware optimizer (``flags``: its enable flag
    and the two moment dtypes, as the format spells them), which needs the distributed
    optimizer (ZeRO-1/2); without it a note says so (fp32, the default, is not relevant)."""

    def check(c: Case) -> bool:
        on = all(c.has(*flag) for flag in flags)
        return on if c.layout.zero in (1, 2) else c.said() and not on

    return check


def _default_or_said(default: Callable[[Case], bool]) -> Check:
    """The framework does it by default when ``default`` holds (no setting needed); else a
    note says it."""
    return lambda c: default(c) or c.said()


def _full_words(c: Case) -> str:
    n = c.w.recompute_num_layers
    return "every layer" if n is None else f"first {n} layers"


def _said(c: Case) -> bool:
    return c.said()


def _native(value: Callable[[Case], bool]) -> Check:
    """The framework does it without a setting exactly when ``value`` holds: no note then, a
    note otherwise."""
    return lambda c: c.said() != value(c)


def _framework(*formats: str) -> Check:
    """A plan scored for this format's framework says nothing; one scored for another says so,
    and so does one whose profile only borrows the format (``export_is_own`` false)."""

    def own(c: Case) -> bool:
        profile = load_framework(c.w.framework)
        return profile.export_format in formats and profile.export_is_own

    return _native(own)


def _instances(c: Case) -> int:
    return c.layout.dp * c.layout.cp // (c.w.zero_shard_group or 1)


def _cp_sizes_ok(c: Case, name: str) -> bool:
    if c.w.cp_comm != "a2a+p2p":
        return name not in c.names
    if c.fmt == "megatron":
        tokens = c.tokens()
        i = tokens.index(name)
        sizes = [int(tokens[i + 1]), int(tokens[i + 2])]
    else:
        sizes = [int(v) for v in str(c.names[name]).strip("[]").split(",")]
    return sizes[0] * sizes[1] == c.layout.cp and sizes[0] > 1


_MCORE_CP = {"p2p": "p2p", "a2a": "a2a", "a2a+p2p": "a2a+p2p", "allgather": "all_gather"}


def _offload(flag: str, value: object = None) -> Check:
    def check(c: Case) -> bool:
        if c.layout.pp > 1 or str(c.layout.recompute) != "none":
            return any("refuses CPU activation offloading" in n for n in c.result.notes)
        return c.has(flag, value) and not c.said()

    return check


def _eight_bit(c: Case) -> bool:
    return str(c.layout.precision) in ("fp8", "mxfp8")


FUSED_MLP_ENV = "NVTE_CUTEDSL_FUSED_GROUPED_MLP"


def _fused_mlp(c: Case) -> bool:
    """The prediction ran the experts as TE's fused grouped MLP: asked for, mxfp8 or nvfp4, a
    compute capability 10.x GPU (the plans here are all MoE where it is varied)."""
    block_scaled = str(c.layout.precision) in ("mxfp8", "nvfp4")
    return (
        c.w.fused_grouped_mlp
        and block_scaled
        and c.job.cluster.accelerator.compute_capability_major == 10
    )


def _op_fuser(name: str, value: object = None) -> Check:
    """TE's op fuser set (``name``) with its environment variable, exactly when the prediction
    ran the fused grouped MLP."""

    def check(c: Case) -> bool:
        env = c.result.env == {FUSED_MLP_ENV: "1"}
        exported = f"export {FUSED_MLP_ENV}=1" in c.result.text.splitlines()
        if _fused_mlp(c):
            return c.has(name, value) and env and exported and not c.said()
        return not c.has(name) and not c.result.env and FUSED_MLP_ENV not in c.result.text

    return check


def _cp_method(name: str, ring: str, allgather: str) -> Check:
    """The framework's K/V exchange setting ``name`` names the ring (p2p) or the all-gather by
    its own words; the all-to-all forms are said in a note."""
    words = {"p2p": ring, "allgather": allgather}
    return lambda c: c.has(name, words[c.w.cp_comm]) if c.w.cp_comm in words else c.said()


def _maxtext_batch(c: Case) -> bool:
    """per_device_batch_size x devices x gradient_accumulation_steps = the global batch."""
    per_device = float(c.names["per_device_batch_size"])  # type: ignore[arg-type]
    steps = int(c.names["gradient_accumulation_steps"])  # type: ignore[call-overload]
    return abs(per_device * c.layout.num_gpus * steps - c.w.global_batch) < 1e-6


def _maxtext_precision(c: Case) -> bool:
    p = str(c.layout.precision)
    if p == "bf16":
        return "quantization" not in c.names
    if p in ("fp8", "int8"):
        return c.has("quantization", p)
    return any(p in n for n in c.result.notes)


def _maxtext_fsdp(c: Case) -> int:
    return int(c.names["ici_fsdp_parallelism"]) * int(c.names["dcn_fsdp_parallelism"])  # type: ignore[call-overload]


def _maxtext_rope(c: Case) -> bool:
    m = c.job.model
    if m.position_embedding != "rope":
        return c.said()
    ok = c.has("rope_max_timescale", int(m.rope_theta))
    s = m.rope_scaling
    if m.rotary_fraction < 1 or m.mla is not None or (s is not None and s.kind == "linear"):
        return ok and c.said()
    if s is not None:
        ok &= c.has("rope_type", {"llama3": "llama3.1", "yarn": "yarn"}[s.kind])
    return ok and not c.said()


def _automodel_precision(c: Case) -> bool:
    """Transformer Engine's FP8 recipe for fp8 and mxfp8 (te_fp8); bf16 for the rest, said."""
    p = str(c.layout.precision)
    recipe = {"fp8": "current", "mxfp8": "mxfp8"}.get(p)
    if recipe is not None:
        return c.has("model.backend.te_fp8.recipe", recipe)
    set_none = "model.backend.te_fp8.recipe" not in c.names
    return set_none and (p == "bf16" or any(p in n for n in c.result.notes))


def _automodel_hsdp(c: Case) -> bool:
    """HSDP (dp_replicate_size) where the shard group is cp x a divisor above 1 of dp (AutoModel
    refuses a replicate degree of dp); said otherwise."""
    group = c.w.zero_shard_group or 0
    shard, rest = divmod(group, c.layout.cp)
    if rest or shard < 2 or c.layout.dp % shard:
        return c.said() and "distributed.dp_replicate_size" not in c.names
    return c.has("distributed.dp_replicate_size", c.layout.dp // shard) and not c.said()


def _automodel_pytorch_cp(c: Case) -> bool:
    """AutoModel runs PyTorch's context parallelism (around SDPA): always for a dense model
    (Hugging Face's attention interface), for an MoE model where the plan asks for it."""
    return c.job.model.moe is None or c.w.cp_impl == "pytorch"


def _automodel_rope(c: Case) -> bool:
    """The Hugging Face config (model.config) carries the RoPE; without one a note says it."""
    hub = c.job.hf_model_id
    if hub is None:
        return c.said()
    return c.has("model.config.pretrained_model_name_or_path", hub) and not c.said()


def _nanotron_batch(c: Case) -> bool:
    """dp x micro_batch_size x batch_accumulation_per_replica = the global batch."""
    n = c.names
    replicas = int(n["parallelism.dp"])  # type: ignore[arg-type]
    per = int(n["tokens.micro_batch_size"]) * int(n["tokens.batch_accumulation_per_replica"])  # type: ignore[arg-type]
    return replicas * per == c.w.global_batch


def _nanotron_rope(c: Case) -> bool:
    """The Llama config's rope_theta carries the RoPE when it is plain; a note otherwise."""
    m = c.job.model
    plain = "model.model_config.rope_theta" in c.names
    plain = plain and m.rope_scaling is None and m.rotary_fraction == 1
    return c.said() != plain


def _maxtext_saved(c: Case) -> bool:
    keys = {"q": "query_proj", "k": "key_proj", "v": "value_proj", "context": "context",
            "out": "out_proj", "mlp_gate": "mlpwi_0", "mlp_up": "mlpwi_1", "mlp_down": "mlpwo"}  # fmt: skip
    saved = set(c.w.saved_tensors or ())
    if c.names.get("remat_policy") == "minimal":
        return saved == set(keys)
    return c.has("remat_policy", "custom") and all(
        c.names[key] in (("device", "offload") if name in saved else ("remat",))
        for name, key in keys.items()
    )


def _precision_accelerate(c: Case) -> bool:
    """bf16 and fp8 are Accelerate's mixed precision (fp8 through fp8_config's backend); any
    other format is said, with bf16 set."""
    p = str(c.layout.precision)
    if p in ("bf16", "fp8"):
        return c.has("mixed_precision", p) and not c.said()
    return c.has("mixed_precision", "bf16") and c.said()


def _hybrid_accelerate(c: Case) -> bool:
    """FSDP1's node-sized hybrid sharding or FSDP2's parallelism_config shard size; a note
    otherwise."""
    set_ = (
        c.has("fsdp_config.fsdp_sharding_strategy", "HYBRID_SHARD")
        or c.has("fsdp_config.fsdp_sharding_strategy", "HYBRID_SHARD_ZERO2")
        or c.has("parallelism_config.parallelism_config_dp_shard_size", c.w.zero_shard_group)
    )
    return set_ != c.said()


def _reshard_accelerate(c: Case) -> bool:
    """Resharding after the forward: FSDP1's FULL_SHARD (else SHARD_GRAD_OP), FSDP2's bool."""
    reshards = c.layout.zero >= 3 and zero3_reshards(c.w, c.layout)
    if "fsdp_config.fsdp_reshard_after_forward" in c.names:
        return c.names["fsdp_config.fsdp_reshard_after_forward"] is reshards
    strategy = c.names.get("fsdp_config.fsdp_sharding_strategy")
    return strategy in (("FULL_SHARD", "HYBRID_SHARD") if reshards
                        else ("SHARD_GRAD_OP", "HYBRID_SHARD_ZERO2"))  # fmt: skip


def _dp_accelerate(c: Case) -> bool:
    """FSDP1 (BACKWARD_PRE), FSDP2 and DDP overlap their collectives with the backward
    natively: said when the prediction did not."""
    if c.names.get("fsdp_config.fsdp_version") == 1:
        prefetch = c.has("fsdp_config.fsdp_backward_prefetch", "BACKWARD_PRE")
        return prefetch and c.said() != _dp_on(c)
    return c.said() != _dp_on(c)


def _fp8_gather_accelerate(c: Case) -> bool:
    """torchao's backend under FSDP2 sets its float8 all-gather; otherwise a note."""
    if "fp8_config.enable_fsdp_float8_all_gather" in c.names:
        return c.has("fp8_config.enable_fsdp_float8_all_gather", c.w.fp8_param_gather) and not (
            c.said()
        )
    return c.said()


def _recompute_accelerate(c: Case) -> bool:
    """fsdp_activation_checkpointing recomputes every wrapped layer; a count is said."""
    if "fsdp_config.fsdp_activation_checkpointing" not in c.names:  # DDP: the script's
        return c.said()
    return c.names["fsdp_config.fsdp_activation_checkpointing"] is True and (
        (c.w.recompute_num_layers is None) != c.said()
    )


PYTORCH_MOE: dict[str, Check] = {
    # torchtitan's and AutoModel's dropless MoE: the dispatch reads the routed counts on the
    # host (a sync per MoE layer by default; a capacity-padded prediction assumed none), grouped
    # expert GEMMs, no capacity, the load and the tiles not settings
    "moe_host_sync": _default_or_said(lambda c: dispatcher_syncs_host(c.w)),
    "expert_load_imbalance": _said,
    "moe_expert_compute": _native(lambda c: c.w.moe_expert_compute == "grouped"),
    "grouped_gemm_tiles": _said,
    "moe_routing_group": _said,
    "moe_capacity_factor": _native(lambda c: c.w.moe_capacity_factor is None),
}
"""The MoE expectations the two PyTorch-native exports share."""


EXPECT: dict[str, dict[str, Check]] = {
    "megatron": {
        # Megatron-LM reads the gradient norm on the host every step: no setting
        "host_sync_interval": _said,
        "seq_len": lambda c: c.has("--seq-length", c.w.seq_len),
        "global_batch": lambda c: c.has("--global-batch-size", c.w.global_batch),
        "precision": _precision_megatron,
        "grad_reduce_dtype": lambda c: (
            c.has("--grad-reduce-in-bf16")
            if c.w.grad_reduce_dtype == "bf16"
            else c.has("--accumulate-allreduce-grads-in-fp32")
        ),
        "optimizer_state_dtype": _precision_aware(
            ("--use-precision-aware-optimizer",),
            ("--exp-avg-dtype", "bf16"),
            ("--exp-avg-sq-dtype", "bf16"),
        ),
        "sequence_parallel": lambda c: c.has("--sequence-parallel") == c.w.sequence_parallel,
        "tp_comm_overlap": lambda c: c.has("--tp-comm-overlap") == c.w.tp_comm_overlap,
        "flash_attention": lambda c: c.has(
            "--attention-backend", "fused" if c.w.flash_attention else "local"
        ),
        "moe_dispatch_dedup": lambda c: c.has(
            "--moe-token-dispatcher-type", "flex" if c.w.moe_dispatch_dedup else "alltoall"
        ),
        "ep_comm_overlap": lambda c: (
            c.has("--overlap-moe-expert-parallel-comm") == c.w.ep_comm_overlap
        ),
        "cross_entropy": lambda c: (
            not c.has("--cross-entropy-loss-fusion")
            if c.w.cross_entropy == "unfused"
            else c.has("--cross-entropy-fusion-impl", c.w.cross_entropy)
        ),
        "recompute_num_layers": lambda c: (
            c.has("--recompute-method", "uniform")
            if c.w.recompute_num_layers is None
            else c.has("--recompute-method", "block")
            and c.has("--recompute-num-layers", c.w.recompute_num_layers)
        ),
        "moe_host_sync": lambda c: c.has("--cuda-graph-impl") != c.w.moe_host_sync,
        "recompute_modules": _recompute_modules_megatron,
        "expert_load_imbalance": lambda c: (
            c.said()
            if c.w.moe_host_sync
            else c.has("--moe-expert-capacity-factor", f"{c.w.expert_load_imbalance:g}")
        ),
        "framework": _framework("megatron"),
        "moe_expert_compute": _native(lambda c: c.w.moe_expert_compute == "grouped"),
        "grouped_gemm_tiles": _said,
        "moe_routing_group": _said,
        "moe_capacity_factor": lambda c: (
            c.has("--moe-expert-capacity-factor", f"{c.w.moe_capacity_factor:g}")
            and c.has("--moe-pad-expert-input-to-capacity")
            if c.w.moe_capacity_factor
            else not c.has("--moe-expert-capacity-factor")
        ),
        "saved_tensors": _said,
        "cp_impl": _native(lambda c: c.w.cp_impl == "te"),
        "cp_comm": lambda c: (
            c.has("--cp-comm-type", _MCORE_CP[c.w.cp_comm])
            and _cp_sizes_ok(c, "--hierarchical-context-parallel-sizes")
        ),
        "reshard_after_forward": _said,
        "pp_grad_sync": _said,
        "pipeline_schedule": _native(lambda c: c.w.pipeline_schedule == "1f1b"),
        "zero_shard_group": lambda c: c.has("--num-distributed-optimizer-instances", _instances(c)),
        "ddp_bucket_params": lambda c: c.has("--ddp-bucket-size", c.w.ddp_bucket_params),
        "master_copy": _native(lambda c: c.w.master_copy),
        "fp32_params": _native(lambda c: not c.w.fp32_params),
        "unsharded_param_layers": _said,
        "activation_offload_fraction": _offload("--cpu-offloading-num-layers"),
        "fused_elementwise": _native(lambda c: c.w.fused_elementwise),
        "attention_kernel": lambda c: c.has(
            "--attention-backend", "flash" if c.w.attention_kernel == "flash2" else "fused"
        ),
        "activation_memory_overhead": _said,
        "framework_buffers": _said,
        "bf16_wgrad_formats": _said,
        "fp8_param_gather": lambda c: (
            c.has("--fp8-param-gather") == c.w.fp8_param_gather and _eight_bit(c)
        ),
        "fused_grouped_mlp": _op_fuser("--use-transformer-engine-op-fuser"),
        "mtp_num_layers": lambda c: c.has("--mtp-num-layers", c.w.mtp_num_layers),
        "pp_host_sync": _native(lambda c: not c.w.pp_host_sync),
        "zero1_grad_sync": _native(lambda c: c.w.zero1_grad_sync == "reduce_scatter"),
        MODEL_ROPE: _rope_megatron,
        DP_OVERLAP: _dp_megatron,
        "fsdp_gather_unit": _native(lambda c: c.w.fsdp_gather_unit == "layer"),
        "fsdp2_buffer_copies": _native(lambda c: c.w.fsdp2_buffer_copies is False),
        "weight_cast": _native(lambda c: c.w.weight_cast == "per_step"),
        "fp8_casts": _native(lambda c: c.w.fp8_casts == "fused"),
    },
    "bridge": {
        "host_sync_interval": _said,
        "seq_len": lambda c: (
            c.has("dataset.seq_length", c.w.seq_len) and c.has("model.seq_length", c.w.seq_len)
        ),
        "global_batch": lambda c: c.has("train.global_batch_size", c.w.global_batch),
        "precision": _precision_bridge,
        "grad_reduce_dtype": lambda c: c.has(
            "ddp.grad_reduce_in_fp32", "true" if c.w.grad_reduce_dtype == "fp32" else "false"
        ),
        "optimizer_state_dtype": _precision_aware(
            ("optimizer.use_precision_aware_optimizer", "true"),
            ("optimizer.exp_avg_dtype", "torch.bfloat16"),
            ("optimizer.exp_avg_sq_dtype", "torch.bfloat16"),
        ),
        "sequence_parallel": lambda c: c.has(
            "model.sequence_parallel", "true" if c.w.sequence_parallel else "false"
        ),
        "tp_comm_overlap": lambda c: c.has(
            "comm_overlap.tp_comm_overlap", "true" if c.w.tp_comm_overlap else "false"
        ),
        "flash_attention": lambda c: c.has(
            "model.attention_backend", "fused" if c.w.flash_attention else "local"
        ),
        "moe_dispatch_dedup": lambda c: c.has(
            "model.moe_token_dispatcher_type", "flex" if c.w.moe_dispatch_dedup else "alltoall"
        ),
        "ep_comm_overlap": lambda c: (
            c.has("comm_overlap.overlap_moe_expert_parallel_comm") == c.w.ep_comm_overlap
        ),
        "cross_entropy": lambda c: (
            c.has("model.cross_entropy_loss_fusion", "false")
            if c.w.cross_entropy == "unfused"
            else c.has("model.cross_entropy_fusion_impl", c.w.cross_entropy)
        ),
        "recompute_num_layers": lambda c: (
            c.has("model.recompute_method", "uniform")
            if c.w.recompute_num_layers is None
            else c.has("model.recompute_num_layers", c.w.recompute_num_layers)
        ),
        "moe_host_sync": lambda c: c.has("model.cuda_graph_impl") != c.w.moe_host_sync,
        "recompute_modules": lambda c: (
            not c.has("model.recompute_modules")
            if c.w.recompute_modules == ("core_attn",)
            else c.has("model.recompute_modules", f"[{','.join(c.w.recompute_modules)}]")
        ),
        "expert_load_imbalance": lambda c: (
            c.said()
            if c.w.moe_host_sync
            else c.has("model.moe_expert_capacity_factor", f"{c.w.expert_load_imbalance:g}")
        ),
        "framework": _framework("megatron"),
        "moe_expert_compute": _native(lambda c: c.w.moe_expert_compute == "grouped"),
        "grouped_gemm_tiles": _said,
        "moe_routing_group": _said,
        "moe_capacity_factor": lambda c: (
            c.has("model.moe_expert_capacity_factor", f"{c.w.moe_capacity_factor:g}")
            and c.has("model.moe_pad_expert_input_to_capacity", "true")
            if c.w.moe_capacity_factor
            else not c.has("model.moe_expert_capacity_factor")
        ),
        "saved_tensors": _said,
        "cp_impl": _native(lambda c: c.w.cp_impl == "te"),
        "cp_comm": lambda c: (
            c.has("model.cp_comm_type", _MCORE_CP[c.w.cp_comm])
            and _cp_sizes_ok(c, "model.hierarchical_context_parallel_sizes")
        ),
        "reshard_after_forward": _said,
        "pp_grad_sync": _said,
        "pipeline_schedule": _native(lambda c: c.w.pipeline_schedule == "1f1b"),
        "zero_shard_group": lambda c: c.has(
            "ddp.num_distributed_optimizer_instances", _instances(c)
        ),
        "ddp_bucket_params": lambda c: c.has("ddp.bucket_size", c.w.ddp_bucket_params),
        "master_copy": _native(lambda c: c.w.master_copy),
        "fp32_params": _native(lambda c: not c.w.fp32_params),
        "unsharded_param_layers": _said,
        "activation_offload_fraction": _offload("model.cpu_offloading", "true"),
        "fused_elementwise": _native(lambda c: c.w.fused_elementwise),
        "attention_kernel": lambda c: c.has(
            "model.attention_backend", "flash" if c.w.attention_kernel == "flash2" else "fused"
        ),
        "activation_memory_overhead": _said,
        "framework_buffers": _said,
        "bf16_wgrad_formats": _said,
        "fp8_param_gather": lambda c: c.has(
            "mixed_precision.fp8_param_gather", "true" if c.w.fp8_param_gather else "false"
        ),
        "fused_grouped_mlp": _op_fuser("model.use_transformer_engine_op_fuser", "true"),
        "mtp_num_layers": lambda c: c.has("model.mtp_num_layers", c.w.mtp_num_layers),
        "pp_host_sync": _native(lambda c: not c.w.pp_host_sync),
        "zero1_grad_sync": _native(lambda c: c.w.zero1_grad_sync == "reduce_scatter"),
        MODEL_ROPE: _rope_bridge,
        DP_OVERLAP: _dp_bridge,
        "fsdp_gather_unit": _native(lambda c: c.w.fsdp_gather_unit == "layer"),
        "fsdp2_buffer_copies": _native(lambda c: c.w.fsdp2_buffer_copies is False),
        "weight_cast": _native(lambda c: c.w.weight_cast == "per_step"),
        "fp8_casts": _native(lambda c: c.w.fp8_casts == "fused"),
    },
    "torchtitan": {
        # its loop reads the loss on logging steps only: metrics.log_freq
        "host_sync_interval": lambda c: (
            c.said()
            if c.w.host_sync_interval is None
            else c.has("metrics.log_freq", c.w.host_sync_interval) and not c.said()
        ),
        "seq_len": lambda c: c.has("training.seq_len", c.w.seq_len),
        "global_batch": lambda c: c.has("training.global_batch_size", c.w.global_batch),
        "precision": _precision_torchtitan,
        "grad_reduce_dtype": lambda c: (
            c.has("training.mixed_precision_reduce", "float32")
            if c.w.grad_reduce_dtype == "fp32"
            else c.said()
        ),
        "optimizer_state_dtype": _native(lambda c: c.w.optimizer_state_dtype == "fp32"),
        # torchtitan's TP plans always shard the norms (sequence parallel)
        "sequence_parallel": _default_or_said(lambda c: c.w.sequence_parallel),
        "tp_comm_overlap": lambda c: (
            c.names.get("parallelism.enable_async_tensor_parallel") is c.w.tp_comm_overlap
            and (c.has("compile.enable") or not c.w.tp_comm_overlap)
        ),
        # SDPA picks flash or cuDNN kernels: fused attention is its default
        "flash_attention": _default_or_said(lambda c: c.w.flash_attention),
        "moe_dispatch_dedup": lambda c: c.has(
            "parallelism.expert_parallel_comm_backend",
            "deepep" if c.w.moe_dispatch_dedup else "standard",
        ),
        "ep_comm_overlap": _said,
        # its loss upcasts the logits and calls cross_entropy: the planner's unfused
        "cross_entropy": _native(lambda c: c.w.cross_entropy == "unfused"),
        "recompute_num_layers": lambda c: (
            c.has("activation_checkpoint.mode", "full")
            if c.w.recompute_num_layers is None
            else c.said()
        ),
        "recompute_modules": lambda c: (
            c.has("activation_checkpoint.selective_ac_option", "op") and c.said()
        ),
        **PYTORCH_MOE,
        "framework": _framework("torchtitan"),
        "saved_tensors": lambda c: (
            c.has("activation_checkpoint.selective_ac_option", "op")
            and c.said() != (c.w.saved_tensors == TORCHTITAN_SAVE_LIST)
        ),
        "cp_impl": _native(lambda c: c.w.cp_impl == "pytorch"),
        "cp_comm": _cp_method(
            "parallelism.context_parallel_rotate_method", "alltoall", "allgather"
        ),
        "pp_grad_sync": _said,
        "reshard_after_forward": lambda c: c.has(
            "parallelism.fsdp_reshard_after_forward", c.w.reshard_after_forward
        ),
        "pipeline_schedule": lambda c: (
            c.said()
            if c.w.pipeline_schedule in ("dualpipe", "gpipe")
            else not c.said()
            and c.has(
                "parallelism.pipeline_parallel_schedule",
                "InterleavedZeroBubble"
                if c.w.pipeline_schedule == "zero_bubble"
                else "Interleaved1F1B"
                if c.layout.vpp > 1
                else "1F1B",
            )
        ),
        "ddp_bucket_params": _said,
        "zero_shard_group": lambda c: (
            c.has("parallelism.data_parallel_shard_degree", c.w.zero_shard_group // c.layout.cp)
            and c.has("parallelism.data_parallel_replicate_degree", _instances(c))
        ),
        "master_copy": _said,
        "fp32_params": _native(lambda c: c.w.fp32_params),
        "unsharded_param_layers": _native(lambda c: c.w.unsharded_param_layers == 2.0),
        "activation_offload_fraction": _said,
        "fused_elementwise": lambda c: (
            c.names.get("compile.enable") is True
            if c.w.fused_elementwise
            else (c.names.get("compile.enable") is False) != c.said()
        ),
        "attention_kernel": _native(lambda c: c.w.attention_kernel == "flash2"),
        "activation_memory_overhead": _said,
        "framework_buffers": _said,
        "bf16_wgrad_formats": _said,
        "fp8_param_gather": lambda c: (
            c.names.get("quantize.linear.float8.enable_fsdp_float8_all_gather")
            is c.w.fp8_param_gather
            if str(c.layout.precision) == "fp8"
            else c.said() == c.w.fp8_param_gather
        ),
        "fused_grouped_mlp": _native(lambda c: not _fused_mlp(c)),
        "mtp_num_layers": _said,
        "pp_host_sync": _native(lambda c: not c.w.pp_host_sync),
        "zero1_grad_sync": _native(lambda c: c.w.zero1_grad_sync == "reduce_scatter"),
        MODEL_ROPE: _said,
        # FSDP2 and DDP overlap their collectives with compute by default: said when not
        DP_OVERLAP: _default_or_said(_dp_on),
        "fsdp_gather_unit": _native(lambda c: c.w.fsdp_gather_unit == "layer"),
        "fsdp2_buffer_copies": _native(lambda c: c.w.fsdp2_buffer_copies is True),
        "weight_cast": _native(lambda c: c.w.weight_cast == "per_call"),
        "fp8_casts": _native(lambda c: c.w.fp8_casts in ("tensorwise", "rowwise")),
    },
    "deepspeed": {
        "host_sync_interval": _said,
        "seq_len": _said,
        "global_batch": lambda c: c.has("train_batch_size", c.w.global_batch),
        "precision": lambda c: (
            c.has("bf16.enabled")
            if str(c.layout.precision) == "bf16"
            else any(str(c.layout.precision) in n for n in c.result.notes)
        ),
        "grad_reduce_dtype": lambda c: (
            c.has("communication_data_type", c.w.grad_reduce_dtype)
            and c.has("data_types.grad_accum_dtype", c.w.grad_reduce_dtype)
        ),
        "optimizer_state_dtype": _native(lambda c: c.w.optimizer_state_dtype == "fp32"),
        "sequence_parallel": _said,
        "tp_comm_overlap": _said,
        "flash_attention": _said,
        "moe_dispatch_dedup": _said,
        "ep_comm_overlap": _said,
        "cross_entropy": _said,
        "recompute_num_layers": lambda c: any(_full_words(c) in n for n in c.result.notes),
        "moe_host_sync": _said,
        "recompute_modules": lambda c: any(
            ", ".join(c.w.recompute_modules) in n for n in c.result.notes
        ),
        "expert_load_imbalance": _said,
        "framework": _framework("deepspeed"),
        "moe_capacity_factor": _said,
        "moe_expert_compute": _native(lambda c: c.w.moe_expert_compute == "einsum"),
        "grouped_gemm_tiles": _said,
        "moe_routing_group": _native(lambda c: c.w.moe_routing_group == "microbatch"),
        "saved_tensors": _said,
        "cp_impl": _said,
        "cp_comm": _said,
        "reshard_after_forward": _said,
        "pp_grad_sync": _said,
        "pipeline_schedule": _native(
            lambda c: c.w.pipeline_schedule == "1f1b" and c.layout.vpp == 1
        ),
        "ddp_bucket_params": _said,
        "zero_shard_group": lambda c: (
            c.has("zero_optimization.mics_shard_size", c.w.zero_shard_group)
            if c.layout.zero == 3
            else c.said()
        ),
        "master_copy": _native(lambda c: c.w.master_copy),
        "fp32_params": _native(lambda c: not c.w.fp32_params),
        "unsharded_param_layers": lambda c: c.has("zero_optimization.stage3_max_live_parameters"),
        "activation_offload_fraction": _said,
        "fused_elementwise": _said,
        "attention_kernel": _said,
        "activation_memory_overhead": _said,
        "framework_buffers": _said,
        "bf16_wgrad_formats": _said,
        "fp8_param_gather": _native(lambda c: not c.w.fp8_param_gather),
        "fused_grouped_mlp": _native(lambda c: not _fused_mlp(c)),
        "mtp_num_layers": _said,
        "pp_host_sync": _native(lambda c: not c.w.pp_host_sync),
        "zero1_grad_sync": _native(lambda c: c.w.zero1_grad_sync == "reduce_scatter"),
        MODEL_ROPE: _said,
        DP_OVERLAP: lambda c: c.names.get("zero_optimization.overlap_comm") is _dp_on(c),
        "fsdp_gather_unit": _native(lambda c: c.w.fsdp_gather_unit == "layer"),
        "fsdp2_buffer_copies": _native(lambda c: c.w.fsdp2_buffer_copies is False),
        "weight_cast": _native(lambda c: c.w.weight_cast == "per_step"),
        "fp8_casts": _native(lambda c: c.w.fp8_casts == "fused"),
    },
    "maxtext": {
        # JAX dispatches the next step before the last ends: never stopping is native
        "host_sync_interval": _native(lambda c: c.w.host_sync_interval is None),
        "seq_len": lambda c: c.has("max_target_length", c.w.seq_len),
        "global_batch": _maxtext_batch,
        "precision": _maxtext_precision,
        "grad_reduce_dtype": lambda c: c.has(
            "grad_dtype", "float32" if c.w.grad_reduce_dtype == "fp32" else "bfloat16"
        ),
        "optimizer_state_dtype": _native(lambda c: c.w.optimizer_state_dtype == "fp32"),
        "sequence_parallel": _said,
        "tp_comm_overlap": lambda c: (
            any("LIBTPU_INIT_ARGS" in n for n in c.result.notes)
            if c.w.tp_comm_overlap
            else c.said()
        ),
        "flash_attention": lambda c: c.has(
            "attention", "cudnn_flash_te" if c.w.flash_attention else "dot_product"
        ),
        "moe_dispatch_dedup": _said,
        "ep_comm_overlap": _said,
        "cross_entropy": _said,
        "recompute_num_layers": lambda c: (
            c.has("remat_policy", "full") and (c.w.recompute_num_layers is None) != c.said()
        ),
        # static shapes: the dispatch never waits on the host
        "moe_host_sync": _native(lambda c: not c.w.moe_host_sync),
        "recompute_modules": lambda c: c.has("remat_policy", "minimal") and c.said(),
        "expert_load_imbalance": _said,
        "framework": _framework("maxtext"),
        "moe_capacity_factor": lambda c: c.has("capacity_factor", c.w.moe_capacity_factor or -1.0),
        "moe_expert_compute": lambda c: (
            c.has("sparse_matmul", c.w.moe_expert_compute == "grouped") and not c.said()
        ),
        "moe_routing_group": _native(lambda c: c.w.moe_routing_group == "sequence"),
        "grouped_gemm_tiles": lambda c: (
            all(
                c.has(f"{gemm}_tile_fwd_{dim}", size)
                for gemm in ("wi", "wo")
                for dim, size in (("batch_seq", 512), ("embed_dim", 1024), ("mlp_dim", 1024))
            )
            and c.has("megablox", True)
            and not c.said()
        ),
        "saved_tensors": _maxtext_saved,
        "cp_impl": _native(lambda c: c.w.cp_impl == "te"),
        "cp_comm": _cp_method("context_parallel_strategy", "ring", "all_gather"),
        "pp_grad_sync": _said,
        "reshard_after_forward": _said,
        "pipeline_schedule": _native(lambda c: c.w.pipeline_schedule == "gpipe"),
        "ddp_bucket_params": _said,
        "zero_shard_group": lambda c: (
            _maxtext_fsdp(c) * c.layout.ep == c.w.zero_shard_group
            if c.layout.zero == 3
            else c.said()
        ),
        "master_copy": _native(lambda c: c.w.fp32_params or not c.w.master_copy),
        "fp32_params": lambda c: c.has(
            "weight_dtype", "float32" if c.w.fp32_params else "bfloat16"
        ),
        "unsharded_param_layers": _said,
        "activation_offload_fraction": lambda c: "offload" in c.names.values() or c.said(),
        "fused_elementwise": _said,
        "attention_kernel": _native(lambda c: c.w.attention_kernel == "vendor"),
        "activation_memory_overhead": _said,
        "framework_buffers": _said,
        "bf16_wgrad_formats": lambda c: c.has("quantization_local_shard_count", 0),
        "fp8_param_gather": _native(lambda c: not c.w.fp8_param_gather),
        "fused_grouped_mlp": _native(lambda c: not _fused_mlp(c)),
        "mtp_num_layers": lambda c: c.has("mtp_num_layers", c.w.mtp_num_layers),
        "pp_host_sync": _native(lambda c: not c.w.pp_host_sync),
        "zero1_grad_sync": _native(lambda c: c.w.zero1_grad_sync == "reduce_scatter"),
        MODEL_ROPE: _maxtext_rope,
        # XLA overlaps the data-parallel collectives with compute: said when not
        DP_OVERLAP: _default_or_said(_dp_on),
        "fsdp_gather_unit": _native(lambda c: c.w.fsdp_gather_unit == "weight"),
        "fsdp2_buffer_copies": _native(lambda c: c.w.fsdp2_buffer_copies is False),
        "weight_cast": _native(lambda c: c.w.weight_cast == "per_call"),
        "fp8_casts": _native(lambda c: c.w.fp8_casts == "fused"),
    },
    "automodel": {
        # its loop reads the loss on the host every step
        "host_sync_interval": _native(lambda c: c.w.host_sync_interval == 1),
        "seq_len": lambda c: (
            c.said() and (c.layout.pp == 1 or c.has("distributed.pipeline.pp_seq_len", c.w.seq_len))
        ),
        "global_batch": lambda c: c.has("step_scheduler.global_batch_size", c.w.global_batch),
        "precision": _automodel_precision,
        "grad_reduce_dtype": lambda c: c.has(
            "distributed.mp_policy.reduce_dtype",
            "float32" if c.w.grad_reduce_dtype == "fp32" else "bfloat16",
        ),
        "optimizer_state_dtype": lambda c: c.has(
            "optimizer.exp_avg_dtype",
            f"torch.{'bfloat16' if c.w.optimizer_state_dtype == 'bf16' else 'float32'}",
        ),
        "sequence_parallel": lambda c: (
            c.names.get("distributed.sequence_parallel") is c.w.sequence_parallel
        ),
        "tp_comm_overlap": lambda c: (
            c.names.get("distributed.enable_async_tensor_parallel") is c.w.tp_comm_overlap
            and (c.names.get("distributed.enable_compile") is True or not c.w.tp_comm_overlap)
        ),
        # the backend's attention (MoE models) and Hugging Face's (dense models, only there)
        "flash_attention": lambda c: (
            all(
                str(c.names[key]) in (("te", "sdpa") if c.w.flash_attention else ("eager",))
                for key in ("model.backend.attn", "model.attn_implementation")
                if key in c.names
            )
            and ("model.attn_implementation" in c.names) == (c.job.model.moe is None)
        ),
        "moe_dispatch_dedup": lambda c: c.has(
            "model.backend.dispatcher", "deepep" if c.w.moe_dispatch_dedup else "torch"
        ),
        "ep_comm_overlap": _said,
        # MaskedCrossEntropy: fp32-upcast logits (unfused) or the bf16 logits (the nearest)
        "cross_entropy": lambda c: (
            c.names.get("loss_fn.fp32_upcast") is (c.w.cross_entropy == "unfused")
            and c.said() == (c.w.cross_entropy == "native")
        ),
        "recompute_num_layers": lambda c: (
            c.names.get("distributed.activation_checkpointing") is True
            and (c.w.recompute_num_layers is None) != c.said()
        ),
        "recompute_modules": lambda c: (
            c.has("distributed.activation_checkpointing", "selective") and c.said()
        ),
        **PYTORCH_MOE,
        "framework": _framework("automodel"),
        "saved_tensors": lambda c: (
            c.has("distributed.activation_checkpointing", "selective")
            and c.said() != (c.w.saved_tensors == TORCHTITAN_SAVE_LIST)
        ),
        # its dense models run PyTorch's CP around SDPA; its MoE models the backend's
        "cp_impl": lambda c: (
            c.has("model.backend.attn", "sdpa" if _automodel_pytorch_cp(c) else "te")
            and c.said() != (c.w.cp_impl == "pytorch" or not _automodel_pytorch_cp(c))
        ),
        # Transformer Engine's CP rings K/V; PyTorch's, as AutoModel sets it, all-gathers them
        "cp_comm": _native(
            lambda c: c.w.cp_comm == ("allgather" if _automodel_pytorch_cp(c) else "p2p")
        ),
        "pp_grad_sync": lambda c: (
            c.names.get("distributed.defer_fsdp_grad_sync") is True and not c.said()
            if c.w.pp_grad_sync == "step"
            else c.said()
        ),
        "reshard_after_forward": lambda c: (
            "distributed.reshard_after_forward" not in c.names
            if c.w.reshard_after_forward == "default"
            else c.names.get("distributed.reshard_after_forward")
            is (c.w.reshard_after_forward == "always")
        ),
        "pipeline_schedule": lambda c: (
            c.said() and c.has("distributed.pipeline.pp_schedule", "interleaved1f1b")
            if c.w.pipeline_schedule == "dualpipe"
            else not c.said()
            and c.has(
                "distributed.pipeline.pp_schedule",
                {"zero_bubble": "interleavedzerobubble", "gpipe": "loopedbfs"}.get(
                    c.w.pipeline_schedule, "interleaved1f1b"
                ),
            )
        ),
        "ddp_bucket_params": _said,
        "zero_shard_group": _automodel_hsdp,
        "master_copy": lambda c: (
            c.names.get("optimizer.master_weights") is (c.w.master_copy and not c.w.fp32_params)
            and c.names.get("optimizer.store_param_remainders")
            is keeps_master_remainders(c.w, c.layout)
        ),
        "fp32_params": lambda c: c.has(
            "model.torch_dtype", "float32" if c.w.fp32_params else "bfloat16"
        ),
        "unsharded_param_layers": _native(lambda c: c.w.unsharded_param_layers == 2.0),
        "activation_offload_fraction": _said,
        "fused_elementwise": lambda c: (
            c.names.get("distributed.enable_compile") is True
            if c.w.fused_elementwise
            else (c.names.get("distributed.enable_compile") is False) != c.said()
        ),
        # a dense model: Transformer Engine's attention injected (attn_implementation te)
        "attention_kernel": lambda c: (
            c.has("model.attn_implementation", "te" if c.w.attention_kernel == "vendor" else "sdpa")
            and not c.said()
        ),
        "activation_memory_overhead": _said,
        "framework_buffers": _said,
        "bf16_wgrad_formats": _said,
        "fp8_param_gather": _native(lambda c: not c.w.fp8_param_gather),
        "fused_grouped_mlp": _native(lambda c: not _fused_mlp(c)),
        "mtp_num_layers": _said,
        "pp_host_sync": _native(lambda c: not c.w.pp_host_sync),
        "zero1_grad_sync": _native(lambda c: c.w.zero1_grad_sync == "reduce_scatter"),
        MODEL_ROPE: _automodel_rope,
        # FSDP2 prefetches its gathers and overlaps its reduce-scatters: said when not
        DP_OVERLAP: _default_or_said(_dp_on),
        "fsdp_gather_unit": _native(lambda c: c.w.fsdp_gather_unit == "layer"),
        "fsdp2_buffer_copies": _native(lambda c: c.w.fsdp2_buffer_copies is True),
        # AutoModel hands Transformer Engine is_first_microbatch: one weight cast per step
        "weight_cast": _native(lambda c: c.w.weight_cast == "per_step"),
        "fp8_casts": _native(lambda c: c.w.fp8_casts == "fused"),
    },
    "nanotron": {
        "host_sync_interval": lambda c: (
            c.said()
            if c.w.host_sync_interval is None
            else c.has("logging.iteration_step_info_interval", c.w.host_sync_interval)
            and not c.said()
        ),
        "seq_len": lambda c: c.has("tokens.sequence_length", c.w.seq_len),
        "global_batch": _nanotron_batch,
        "precision": lambda c: not c.said() if str(c.layout.precision) == "bf16" else c.said(),
        "grad_reduce_dtype": lambda c: (
            c.names.get("optimizer.accumulate_grad_in_fp32") is (c.w.grad_reduce_dtype == "fp32")
        ),
        "optimizer_state_dtype": _native(lambda c: c.w.optimizer_state_dtype == "fp32"),
        "sequence_parallel": lambda c: c.has(
            "parallelism.tp_mode", "REDUCE_SCATTER" if c.w.sequence_parallel else "ALL_REDUCE"
        ),
        # its async TP (on with sequence parallelism, as its benchmarks run) starts the
        # column-parallel GEMM early only: priced as no overlap, said when one was assumed
        "tp_comm_overlap": lambda c: (
            c.names.get("parallelism.tp_linear_async_communication") is c.w.sequence_parallel
            and c.said() == c.job.tp_overlap_runs
        ),
        "flash_attention": _native(lambda c: c.w.flash_attention),
        "moe_dispatch_dedup": _said,
        "ep_comm_overlap": _said,
        "cross_entropy": _native(lambda c: c.w.cross_entropy == "unfused"),
        "recompute_num_layers": lambda c: (
            c.names.get("parallelism.recompute_layer") is True
            and (c.w.recompute_num_layers is None) != c.said()
        ),
        "moe_host_sync": _default_or_said(lambda c: dispatcher_syncs_host(c.w)),
        "recompute_modules": lambda c: (
            c.names.get("parallelism.recompute_layer") is False and c.said()
        ),
        "expert_load_imbalance": _said,
        "framework": _framework("nanotron"),
        "moe_expert_compute": _said,
        "grouped_gemm_tiles": _said,
        "moe_routing_group": _said,
        "moe_capacity_factor": _said,
        "saved_tensors": _said,
        "cp_impl": _said,
        "cp_comm": _said,
        "pp_grad_sync": _said,
        "reshard_after_forward": _said,
        # one stage a rank: 1F1B or all-forward-all-backward (GPipe's order)
        "pipeline_schedule": lambda c: (
            c.said()
            if c.layout.vpp > 1 or c.w.pipeline_schedule not in ("1f1b", "gpipe")
            else not c.said()
            and c.has(
                "parallelism.pp_engine", "afab" if c.w.pipeline_schedule == "gpipe" else "1f1b"
            )
        ),
        "ddp_bucket_params": lambda c: (
            c.has("model.ddp_bucket_cap_mb", round(c.w.ddp_bucket_params * 2 / 2**20))
            and not c.said()
        ),
        "zero_shard_group": _said,
        "master_copy": _native(lambda c: c.w.master_copy),
        "fp32_params": _native(lambda c: not c.w.fp32_params and c.w.master_copy),
        "unsharded_param_layers": _said,
        "activation_offload_fraction": _said,
        "fused_elementwise": _native(lambda c: c.w.fused_elementwise),
        "attention_kernel": _native(lambda c: c.w.attention_kernel == "flash2"),
        "activation_memory_overhead": _said,
        "framework_buffers": _native(lambda c: c.w.framework_buffers == NANOTRON_BUFFERS),
        "bf16_wgrad_formats": _said,
        "fp8_param_gather": _native(lambda c: not c.w.fp8_param_gather),
        "fused_grouped_mlp": _native(lambda c: not _fused_mlp(c)),
        "mtp_num_layers": _said,
        "pp_host_sync": lambda c: not c.said(),
        "zero1_grad_sync": _native(lambda c: c.w.zero1_grad_sync == "all_reduce"),
        MODEL_ROPE: _nanotron_rope,
        # ZeRO-0's DDP overlaps; ZeRO-1 with the fp32 accumulator reduces after the backward
        DP_OVERLAP: _native(
            lambda c: _dp_on(c) == (c.layout.zero == 0 or c.w.grad_reduce_dtype != "fp32")
        ),
        "fsdp_gather_unit": _native(lambda c: c.w.fsdp_gather_unit == "layer"),
        "fsdp2_buffer_copies": _native(lambda c: c.w.fsdp2_buffer_copies is False),
        "weight_cast": _native(lambda c: c.w.weight_cast == "per_step"),
        "fp8_casts": _native(lambda c: c.w.fp8_casts == "fused"),
    },
    "accelerate": {
        # the launch config holds the processes, precision, compile and FSDP; the rest is the
        # training script's, said in notes
        "host_sync_interval": _said,
        "seq_len": _said,
        "global_batch": _said,
        "precision": _precision_accelerate,
        "bf16_wgrad_formats": _said,
        "grad_reduce_dtype": _native(lambda c: c.w.grad_reduce_dtype == "bf16"),
        "optimizer_state_dtype": _said,
        "sequence_parallel": _said,
        "tp_comm_overlap": _said,
        "flash_attention": _said,
        "moe_dispatch_dedup": _said,
        "ep_comm_overlap": _said,
        "cross_entropy": _said,
        "recompute_num_layers": _recompute_accelerate,
        "moe_host_sync": _said,
        "pp_host_sync": _native(lambda c: not c.w.pp_host_sync),
        "zero1_grad_sync": _native(lambda c: c.w.zero1_grad_sync == "reduce_scatter"),
        "recompute_modules": _said,
        "expert_load_imbalance": _said,
        "framework": _framework("accelerate"),
        "moe_capacity_factor": _said,
        "moe_expert_compute": _said,
        "moe_routing_group": _said,
        "grouped_gemm_tiles": _said,
        "saved_tensors": _said,
        "cp_comm": _said,
        "cp_impl": _said,
        "reshard_after_forward": _reshard_accelerate,
        "fsdp_gather_unit": _native(lambda c: c.w.fsdp_gather_unit == "layer"),
        # the FSDP version is the one with (2) or without (1) the copies
        "fsdp2_buffer_copies": lambda c: (
            c.has("fsdp_config.fsdp_version", 2 if c.w.fsdp2_buffer_copies else 1) and not c.said()
        ),
        "weight_cast": _native(lambda c: c.w.weight_cast == "per_call"),
        "pp_grad_sync": _said,
        "pipeline_schedule": _said,
        "ddp_bucket_params": _said,
        "zero_shard_group": _hybrid_accelerate,
        "fp32_params": _said,
        "master_copy": _said,
        "unsharded_param_layers": _native(
            lambda c: c.w.unsharded_param_layers == 2.0 and c.layout.zero >= 3
        ),
        "activation_offload_fraction": _said,
        "fused_elementwise": lambda c: (
            (
                c.has("dynamo_config.dynamo_backend", "INDUCTOR")
                if c.w.fused_elementwise
                else "dynamo_config.dynamo_backend" not in c.names
            )
            and not c.said()
        ),
        "attention_kernel": _said,
        "activation_memory_overhead": _said,
        "framework_buffers": _said,
        "fp8_casts": lambda c: (
            c.has("fp8_config.backend", {"fused": "te", "tensorwise": "ao"}[c.w.fp8_casts])
            and not c.said()
            if c.w.fp8_casts in ("fused", "tensorwise")
            else c.has("fp8_config.backend", "ao") and c.said()
        ),
        "fp8_param_gather": _fp8_gather_accelerate,
        "fused_grouped_mlp": _native(lambda c: not _fused_mlp(c)),
        "mtp_num_layers": _said,
        MODEL_ROPE: _said,
        DP_OVERLAP: _dp_accelerate,
    },
}


FRAMEWORK_OF = {"zero3pp": "torchtitan", "moe_tpu": "maxtext"}
"""Plans not run under Megatron-LM: ZeRO-3 under PP (torchtitan), a TPU (MaxText)."""


@pytest.fixture(scope="module")
def plans() -> dict[str, Plan]:
    even = {"stage_split": "even"}  # the layout's own recomputation on every stage
    return {
        key: planner.estimate(
            model=model,
            cluster=cluster,
            layout=layout,
            seq_len=_seq_len(key),
            config=even,
            framework=FRAMEWORK_OF.get(key, "megatron"),
        )
        for key, (model, cluster, layout) in PLANS.items()
    }


def _seq_len(plan_id: str) -> int:
    return 4096 if plan_id == "half_rope" else 8192  # Nemotron-4's context is 4,096


def test_every_workload_field_has_a_mapping_in_every_format() -> None:
    """SETTINGS names every TrainWorkload field, and every format maps every setting."""
    fields = set(TrainWorkload.model_fields) - {"mode"}
    assert fields <= set(SETTINGS), f"no words for {sorted(fields - set(SETTINGS))}"
    assert set(SETTINGS) == set(VARIANTS)
    for fmt in FORMATS:
        missing = set(SETTINGS) - set(EXPECT[fmt])
        assert not missing, f"{fmt}: no export mapping for {sorted(missing)}"


def _export(
    plan: Plan, plan_id: str, fields: dict[str, Any], fmt: str
) -> tuple[ExportJob, ExportResult]:
    fields = dict(fields)
    precision = fields.pop("precision", None)
    if precision is not None:
        layout = plan.layout.model_copy(update={"precision": precision})
        plan = plan.model_copy(update={"layout": layout})
    if plan_id == "moe_tpu":  # Megatron-LM does not run on a TPU
        fields.setdefault("framework", "maxtext")
    workload = TrainWorkload(
        seq_len=fields.pop("seq_len", _seq_len(plan_id)),
        global_batch=fields.pop("global_batch", 512),
        precision=plan.layout.precision,
        **fields,
    )
    job = make_job(plan, workload=workload)
    return job, export(job, fmt)


CASES = [(fmt, key, i) for fmt in FORMATS for key in SETTINGS for i in range(len(VARIANTS[key]))]


@pytest.mark.parametrize(("fmt", "key", "index"), CASES)
def test_the_export_sets_or_says_each_setting(
    fmt: str, key: str, index: int, plans: dict[str, Plan]
) -> None:
    plan_id, fields = VARIANTS[key][index]
    job, result = _export(plans[plan_id], plan_id, fields, fmt)
    case = Case(fmt, job, result, key)
    assert SETTINGS[key][0](job), f"{key} is not relevant to plan {plan_id}: pick another"
    assert EXPECT[fmt][key](case), (
        f"{fmt} does not show {key}={fields or 'default'} ({setting_words(job, key)}):\n"
        + result.text
        + "\nnotes: "
        + "; ".join(result.notes)
    )


def test_job_scripts_carry_the_megatron_settings() -> None:
    """The sbatch example embeds the Megatron export: its TP and DP overlap flags too."""
    import examples.make_sbatch as make_sbatch

    script = make_sbatch.sbatch_script(
        model="70B", cluster="hgx_b200x16", megatron="/opt/m", partition=None, time="1:00:00"
    )
    words = shlex.split(script, comments=True)
    assert "--tp-comm-overlap" in words or "--tensor-model-parallel-size" in words
    assert "--overlap-grad-reduce" in words and "--rotary-base" in words


def test_cli_export_mode_serve_exports_the_serving_plan() -> None:
    """``export --mode serve`` takes search's serving flags and exports that search's best
    plan; a training format with --mode serve is one line and exit 2."""
    import json

    from tests.test_cli import run_main

    flags = ["--mode", "serve", "--model", "70B", "--cluster", "hgx_h200x8", "--precision", "fp8"]
    flags += ["--tpot-ms", "50"]
    # export --format vllm prices with the vllm engine profile: search the same way
    code, out, _ = run_main(["search", *flags, "--serving-engine", "vllm", "--json"])
    assert code == 0
    best = json.loads(out)["best"]
    code, out, err = run_main(["export", "--format", "vllm", *flags])
    assert code == 0, err
    argv = shlex.split(out, comments=True)
    assert argv[:2] == ["vllm", "serve"]
    layout = best["layout"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == str(layout["tp"])
    assert argv[argv.index("--pipeline-parallel-size") + 1] == str(layout["pp"])
    assert argv[argv.index("--max-num-seqs") + 1] == str(best["concurrency"])
    code, out, err = run_main(["export", "--format", "sglang", *flags])
    assert code == 0 and "--tp-size" in out
    code, _, err = run_main(["export", "--format", "megatron", *flags])
    assert code == 2 and "vllm or sglang" in err and len(err.splitlines()) == 1
    code, _, err = run_main(["export", "--format", "vllm", *flags[2:], "--context", "4096"])
    assert code == 2 and "--context is a serving flag: it needs --mode serve" in err


def test_a_plan_exports_the_settings_it_was_scored_with() -> None:
    """The plan records its workload (schema 1.3): exporting it, from the API or a saved JSON,
    sets what it was scored on, not the defaults."""
    import json
    import tempfile
    from pathlib import Path

    from tests.test_cli import run_main

    result = planner.search(model="8B", cluster="hgx_h100x8", seq_len=4096, grad_reduce="bf16",
                            workload={"tp_comm_overlap": False}, top=1)  # fmt: skip
    args = planner.export(result, format="megatron").args
    assert args[args.index("--seq-length") + 1] == "4096"
    assert "--grad-reduce-in-bf16" in args and "--tp-comm-overlap" not in args
    with tempfile.TemporaryDirectory() as folder:
        saved = Path(folder) / "plan.json"
        saved.write_text(json.dumps(json.loads(result.model_dump_json())), encoding="utf-8")
        code, out, err = run_main(["export", "--format", "bridge", "--plan", str(saved)])
    assert code == 0, err
    assert "ddp.grad_reduce_in_fp32=false" in out and "dataset.seq_length=4096" in out


def test_cli_export_scores_with_the_framework_profile() -> None:
    """``export --framework torchtitan`` searches and exports as torchtitan runs the plan: the
    plan's recorded workload (the profile's defaults) is what the export carries, so nothing
    of Megatron-LM's defaults is left to a note."""
    import json

    from tests.test_cli import run_main

    flags = ["--model", "70B", "--cluster", "hgx_h100x64", "--framework", "torchtitan"]
    code, out, _ = run_main(["search", *flags, "--json", "--top", "1"])
    assert code == 0
    layout = json.loads(out)["best"]["layout"]
    code, out, err = run_main(["export", "--format", "torchtitan", *flags])
    assert code == 0, err
    assert f"TP{layout['tp']} PP{layout['pp']}" in out  # the search's best, in the header
    assert "fp32 master copy" not in err and "Transformer Engine" not in err
    assert "framework profile" not in err  # scored for torchtitan, exported to torchtitan
    code, _, err = run_main(["export", "--format", "megatron", *flags])
    assert code == 0 and "the torchtitan framework profile" in err
