"""Rows of the validation set (``tests/validation/training.yaml``) and their conversion to specs.

The row schema belongs to the shared data set (``tests/validation/README.md``), not to the
planner, so the row wrappers ignore keys they do not use (``extra="ignore"``). Everything they are
converted into (ModelSpec, NumberFormat, pinned layout fields) is a strict planner spec.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt

from planner.catalog.clusters import load_cluster
from planner.catalog.frameworks import (
    framework_names,
    framework_profile_name,
    resolve_workload,
)
from planner.catalog.hf import yarn_attention_factor
from planner.catalog.io import load_list, load_mapping, read_text, validate_spec
from planner.errors import SpecError
from planner.specs.cluster import ClusterEdits, ClusterSpec
from planner.specs.formats import NumberFormat
from planner.specs.model import MLASpec, ModelSpec, MoESpec
from planner.specs.workload import (
    CrossEntropyImpl,
    MoeDispatcher,
    RecomputeModule,
    TrainWorkload,
    moe_framework_fields,
)

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_DATA_DIR = _PACKAGE_DIR.parent / "tests" / "validation"
"""The validation set in a source checkout (copied from ../shared/validation with its sources)."""
WHEEL_DATA_DIR = _PACKAGE_DIR / "_catalog" / "validation"
"""Where a built wheel would carry it (next to the model and topology catalogs)."""

_GPT_ERA_PREFIXES = ("sc21-", "rar-", "mlm-", "gpt3-")
"""Models trained with Megatron's GPT recipe: LayerNorm, learned positions, biases."""
_TIED_PREFIXES = ("sc21-", "rar-", "gpt3-")
"""GPT models whose sources count one shared embedding/output matrix (SC21 eq. 2; the mlm rows'
labelled sizes match untied embeddings, see their notes)."""
_DROPOUT_PREFIXES = ("sc21-", "rar-")
"""Rows from papers that trained with dropout (SC21, RAR)."""
_FAMILY_FLAGS: dict[str, dict[str, bool | float | str]] = {
    "qwen3-": {"qk_norm": True},
    "gpt-oss-": {
        "ffn_activation": "swiglu_oai",  # config.json swiglu_limit 7.0: clamped SwiGLU
        "attention_bias": True,
        "attention_output_bias": True,
        "mlp_bias": True,
        "attention_sinks": True,
        "rope_attention_factor": yarn_attention_factor(32.0),  # config.json rope_scaling
    },
}
"""Architecture details the row schema leaves out, per model-name prefix (as in models/*.yaml)."""
_GROUP_ROUTED_MODELS = ("deepseek-v3",)
"""Catalog models whose rows route as the catalog entry does (group-limited routing, which the
row schema leaves out): a row whose model name starts with one takes its router groups."""


class RowModel(BaseModel):
    """Base of the row wrappers: frozen, and tolerant of keys the planner does not use."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class MoERow(RowModel):
    """``arch.moe``."""

    experts: PositiveInt
    """Routed experts per MoE layer."""
    top_k: PositiveInt
    """Experts per token."""
    expert_ffn: PositiveInt
    """Intermediate width of one expert."""
    shared_experts: NonNegativeInt = 0
    """Always-active shared experts."""
    first_dense_layers: NonNegativeInt = 0
    """Leading dense layers."""
    layer_step: PositiveInt = 1
    """Every ``layer_step``-th layer after the leading dense ones is MoE (``MoESpec.layer_step``:
    Llama 4 Maverick alternates, 2)."""


class ArchRow(RowModel):
    """``model.arch``: the architecture as the data set spells it."""

    hidden: PositiveInt
    """Model width."""
    layers: PositiveInt
    """Transformer blocks."""
    heads: PositiveInt
    """Query heads."""
    kv_heads: PositiveInt
    """Key/value heads."""
    head_dim: PositiveInt | None = None
    """Per-head dimension (absent for MLA: nope + rope is used)."""
    ffn: NonNegativeInt | None = None
    """Dense FFN width; null when every layer is MoE."""
    ffn_act: Literal["gelu", "swiglu", "relu2"]
    """FFN activation."""
    vocab: PositiveInt
    """Vocabulary size."""
    moe: MoERow | None = None
    """Mixture of experts, if any."""
    attention: Literal["mla"] | None = None
    """``mla`` for multi-head latent attention."""
    kv_lora_rank: PositiveInt | None = None
    """MLA key/value latent rank."""
    q_lora_rank: NonNegativeInt | None = None
    """MLA query latent rank."""
    rope_head_dim: PositiveInt | None = None
    """MLA rotary head dimension."""
    nope_head_dim: PositiveInt | None = None
    """MLA non-rotary head dimension."""
    v_head_dim: PositiveInt | None = None
    """MLA value head dimension."""
    sliding_window: PositiveInt | None = None
    """Sliding-window length (tokens)."""
    sliding_window_layers: NonNegativeInt = 0
    """Layers that use the sliding window."""
    tied_embeddings: bool | None = None
    """Input embedding and output projection shared (None: the model-name rule decides)."""
    bias: bool | None = None
    """Biases on the attention and FFN projections (None: the model-name rule decides)."""
    norm: Literal["layernorm", "rmsnorm"] | None = None
    """Normalisation (None: the model-name rule decides)."""
    position_embedding: Literal["rope", "learned", "alibi"] | None = None
    """Position encoding (None: the model-name rule decides)."""
    parallel_block: bool | None = None
    """Attention and FFN in parallel from one norm (PaLM, MegaScale's PTB)."""
    qk_norm: bool | None = None
    """RMSNorm on the queries and keys (OLMo 2, Qwen3; None: the model-name rule decides)."""


class ModelRow(RowModel):
    """``model``."""

    name: str
    """Model name as the source labels it."""
    arch: ArchRow
    """Architecture."""


class HardwareRow(RowModel):
    """``hardware``."""

    accelerator: str
    """a100-80gb, h100-80gb or b200-180gb."""
    count: PositiveInt
    """Accelerators used."""

    @property
    def family(self) -> str:
        """Accelerator family (``a100``)."""
        return self.accelerator.split("-")[0]


class LayoutRow(RowModel):
    """``layout``; ``None`` = not stated by the source."""

    tp: PositiveInt | None = None
    """Tensor parallel."""
    pp: PositiveInt | None = None
    """Pipeline stages."""
    dp: PositiveInt | None = None
    """Data-parallel replicas."""
    cp: PositiveInt | None = None
    """Context parallel."""
    ep: PositiveInt | None = None
    """Expert parallel."""
    vpp: PositiveInt | None = None
    """Virtual stages per pipeline rank."""
    mbs: PositiveInt | None = None
    """Micro-batch size."""
    recompute: Literal["none", "selective", "full"] | None = None
    """Activation recomputation."""
    zero: int | None = None
    """ZeRO stage."""
    fsdp: bool | None = None
    """Fully sharded data parallel (= ZeRO 3)."""
    recompute_num_layers: PositiveInt | None = None
    """With full recomputation: layers recomputed per pipeline chunk (Megatron block method)."""
    sequence_parallel: bool | None = None
    """Megatron sequence parallelism (TrainWorkload.sequence_parallel; None = on)."""
    shard_group: PositiveInt | None = None
    """Hybrid sharding: ranks one FSDP shard spans (the rest replicate it); None = all."""


class WorkloadRow(RowModel):
    """``workload``."""

    seq_len: PositiveInt
    """Tokens per sequence."""
    global_batch: PositiveInt | None = None
    """Sequences per step (None: not stated; such a row cannot be scored)."""


class MeasuredRow(RowModel):
    """``measured`` (only the fields compared here)."""

    tokens_per_s_per_gpu: PositiveFloat | None = None
    """Training throughput per GPU."""
    step_time_s: PositiveFloat | None = None
    """Seconds per optimizer step."""
    peak_memory_gb: PositiveFloat | None = None
    """Peak device memory per GPU the source printed, in its own unit (the row's notes say which
    counter: allocated or reserved); ``benchmarks/memory_check.py`` compares it."""


class VariantRow(RowModel):
    """One entry of ``variants``: the same run with some settings changed."""

    layout: dict[str, object] = Field(default_factory=dict)
    """Changed layout fields."""
    settings: dict[str, object] = Field(default_factory=dict)
    """Changed framework settings (framework rows)."""
    precision: str | None = None
    """Changed precision."""
    measured: MeasuredRow
    """Its result."""


class RecipeRow(RowModel):
    """Framework settings of a row read from the recipe its source ran
    (``tests/validation/recipes.yaml``); ``None`` = not recorded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    """The recipe: repository, tag, file and config name."""
    vpp: PositiveInt | None = None
    """Virtual stages (the recipe's None = 1)."""
    etp: PositiveInt | None = None
    """Expert tensor parallelism (``expert_tensor_parallel_size``)."""
    mbs: PositiveInt | None = None
    """Micro-batch size."""
    recompute: Literal["none", "selective", "full"] | None = None
    """Recompute granularity."""
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    """Megatron ``--recompute-modules`` with selective granularity."""
    moe_dispatcher: MoeDispatcher | None = None
    """MoE token dispatcher: NCCL all-to-all, or a deduplicating one (DeepEP, HybridEP)."""
    ep_comm_overlap: bool | None = None
    """``overlap_moe_expert_parallel_comm``."""
    tp_comm_overlap: bool | None = None
    """TP-communication overlap (userbuffers)."""
    cross_entropy: CrossEntropyImpl | None = None
    """Loss implementation (``TrainWorkload.cross_entropy``)."""
    profile: str | None = None
    """The framework profile the row runs under when its ``framework`` has none of its own
    (``topologies/frameworks/``); the ``source`` says why."""
    zero: int | None = None
    """ZeRO stage as the planner spells it, where the row's words map to another (Llama 3's
    "FSDP, not resharded after forward" is ZeRO-3 with ``reshard_after_forward: never``)."""
    workload: dict[str, object] | None = None
    """TrainWorkload fields the recipe sets directly (framework rows)."""
    cluster: dict[str, object] | None = None
    """Cluster edits (``ClusterEdits`` fields, as ``--nic-gbps``) where the run's network differs
    from its system's default (the source says which)."""
    local_batch_sizes: tuple[PositiveInt, ...] | None = None
    """Per-rank batch sizes to try where the source tuned its batch and states neither it nor
    the global batch, and its framework had no gradient accumulation (global batch = dp x the
    local batch): validation predicts each and scores the planner's best, as the source kept
    its best (:func:`planner.accuracy.run.tuned_batch_plan`)."""
    cuda_graph_scope: list[str] | None = None
    """CUDA-graph capture scope (Megatron ``cuda_graph_scope``; ``full_layer`` = NeMo's
    ``enable_cuda_graphs``, the whole transformer layer; ``full_iteration``): only a scope in
    :data:`FULL_GRAPH_SCOPES` removes the MoE layer's host sync
    (``TrainWorkload.moe_host_sync``)."""


FULL_GRAPH_SCOPES = frozenset({"full_layer", "full_iteration"})
"""CUDA-graph scopes that capture the whole MoE layer, so its shapes are static and it cannot
synchronise with the host; attn / moe_router / moe_preprocess leave the dispatch and the
experts eager, with their sync."""


def moe_layer_graphed(cuda_graph_scope: list[str] | tuple[str, ...]) -> bool:
    """Whether a Megatron ``cuda_graph_scope`` captures the whole MoE layer (no host sync).

    >>> moe_layer_graphed(["attn", "moe_router", "moe_preprocess"]), moe_layer_graphed(["full_layer"])
    (False, True)
    """
    return bool(FULL_GRAPH_SCOPES & set(cuda_graph_scope))


class TrainingRow(RowModel):
    """One published pre-training run."""

    id: str
    """Row id (``S1``)."""
    source: str
    """Where the numbers come from."""
    confidence: str = ""
    """P, P*, S, D or U (README)."""
    model: ModelRow
    """The model."""
    hardware: HardwareRow
    """The accelerators."""
    framework: str = "megatron"
    """The training framework the run used (framework rows; the shared set is Megatron-LM)."""
    fit: bool = True
    """False keeps a row of a calibrating framework out of every fit: it is then an
    out-of-sample check, as the other frameworks' rows are (``notes`` says why)."""
    settings: dict[str, object] = Field(default_factory=dict)
    """The framework settings the source states, in its own words (recipes.yaml maps them to
    workload fields)."""
    cluster: str
    """Planner cluster name."""
    precision: str
    """bf16, fp8, mxfp8 or nvfp4."""
    layout: LayoutRow
    """The layout as stated."""
    workload: WorkloadRow
    """Sequence length and global batch."""
    measured: MeasuredRow
    """Measured throughput."""
    variants: list[VariantRow] = Field(default_factory=list)
    """Same run with one setting changed."""
    recipe: RecipeRow | None = None
    """Framework settings from ``recipes.yaml`` beside the rows (not a key of the row file)."""


class Case(RowModel):
    """One comparison: a row, or one of its variants, ready to hand to the planner."""

    id: str
    """Row id, ``ROW/variant`` for a variant (``K1/full``)."""
    row: TrainingRow
    """The row (for a variant, with its changes applied)."""
    measured_tokens_per_s_per_gpu: PositiveFloat
    """Measured tokens/s/GPU (from step_time_s when only that is given)."""


def training_file() -> Path:
    """The bundled training validation file (wheel layout first, then the source checkout)."""
    for folder in (WHEEL_DATA_DIR, REPO_DATA_DIR):
        if (folder / "training.yaml").is_file():
            return folder / "training.yaml"
    raise SpecError(
        "the validation set (tests/validation/training.yaml) is not in this installation"
    )


def load_rows(path: Path) -> list[TrainingRow]:
    """The rows of a training validation file, in file order."""
    data = load_list(path)
    rows = [
        validate_spec(TrainingRow, item, where=f"{path.name} row {i}")
        for i, item in enumerate(data)
    ]
    ids = [r.id for r in rows]
    if len(set(ids)) != len(ids):
        raise SpecError(f"'{path}' has duplicate row ids")
    recipes = load_recipes(path.with_name(RECIPES_FILE))
    # An entry for a row this file lacks is ignored: the rows file may be a newer or older copy
    # of the shared set (tests check the bundled pair matches).
    rows = [r.model_copy(update={"recipe": recipes.get(r.id)}) for r in rows]
    companion = path.with_name(FRAMEWORK_ROWS_FILE)
    if path.name != FRAMEWORK_ROWS_FILE and companion.is_file():
        rows += load_rows(companion)
        ids = [r.id for r in rows]
        if len(set(ids)) != len(ids):
            raise SpecError(f"'{companion}' repeats a row id of '{path}'")
    return rows


FRAMEWORK_ROWS_FILE = "training_frameworks.yaml"
"""The project's own rows beside the shared set (other frameworks and hardware; issue 18): read
with it whenever it is there."""

RECIPES_FILE = "recipes.yaml"
"""Framework settings per row id, beside the rows file (optional)."""


def load_recipes(path: Path) -> dict[str, RecipeRow]:
    """Row id -> recipe settings from ``path``; empty when the file does not exist."""
    if not path.is_file():
        return {}
    data = load_mapping(path)
    return {
        str(key): validate_spec(RecipeRow, value, where=f"{path.name} {key}")
        for key, value in data.items()
    }


def data_date(path: Path) -> str:
    """The newest date (YYYY-MM-DD) any source in the file cites: the data's 'as of' date."""
    dates = re.findall(r"\b(20\d\d-[01]\d-[0-3]\d)\b", read_text(path))
    return max(dates) if dates else "undated"


def row_cluster(row: TrainingRow) -> ClusterSpec:
    """The row's cluster, with the edits its recipe records (a thinner network than the system
    YAML's default, e.g.)."""
    edits = row.recipe.cluster if row.recipe is not None and row.recipe.cluster else None
    if edits is None:
        return load_cluster(row.cluster)
    return load_cluster(
        row.cluster, edits=validate_spec(ClusterEdits, edits, where=f"row {row.id}")
    )


def to_model_spec(row: TrainingRow) -> ModelSpec:
    """The planner's ModelSpec for a row's ``model.arch``."""
    name, arch = row.model.name, row.model.arch
    gpt_era = name.startswith(_GPT_ERA_PREFIXES)
    fields: dict[str, object] = {
        "name": name,
        "family": name.split("-")[0],
        "source": f"validation row {row.id}: {row.source}",
        "hidden_size": arch.hidden,
        "num_layers": arch.layers,
        "num_attention_heads": arch.heads,
        "num_kv_heads": arch.kv_heads,
        "ffn_hidden_size": arch.ffn or 0,
        "ffn_activation": arch.ffn_act,
        "vocab_size": arch.vocab,
        "max_context": row.workload.seq_len,
        "tied_embeddings": name.startswith(_TIED_PREFIXES),
        "dropout": name.startswith(_DROPOUT_PREFIXES),
    }
    if gpt_era:
        fields.update(
            position_embedding="learned",
            norm="layernorm",
            attention_bias=True,
            attention_output_bias=True,
            mlp_bias=True,
        )
    for prefix, flags in _FAMILY_FLAGS.items():
        if name.startswith(prefix):
            fields.update(flags)
    fields.update(_arch_flags(arch))
    if arch.attention == "mla":
        if None in (arch.kv_lora_rank, arch.rope_head_dim, arch.nope_head_dim, arch.v_head_dim):
            raise SpecError(f"row {row.id}: MLA needs kv_lora_rank and the rope/nope/v head dims")
        fields["mla"] = MLASpec(
            q_lora_rank=arch.q_lora_rank or 0,
            kv_lora_rank=arch.kv_lora_rank,  # type: ignore[arg-type]
            qk_rope_head_dim=arch.rope_head_dim,  # type: ignore[arg-type]
            qk_nope_head_dim=arch.nope_head_dim,  # type: ignore[arg-type]
            v_head_dim=arch.v_head_dim,  # type: ignore[arg-type]
        )
        fields["head_dim"] = arch.head_dim or arch.nope_head_dim + arch.rope_head_dim  # type: ignore[operator]
    elif arch.head_dim is None:
        raise SpecError(f"row {row.id}: model.arch.head_dim is missing")
    else:
        fields["head_dim"] = arch.head_dim
    if arch.moe is not None:
        fields["moe"] = MoESpec(
            num_experts=arch.moe.experts,
            top_k=arch.moe.top_k,
            expert_ffn_hidden_size=arch.moe.expert_ffn,
            num_shared_experts=arch.moe.shared_experts,
            first_dense_layers=arch.moe.first_dense_layers,
            layer_step=arch.moe.layer_step,
            **_moe_routing(name),
        )
    if arch.sliding_window is not None:
        fields["sliding_window"] = arch.sliding_window
        fields["num_sliding_window_layers"] = arch.sliding_window_layers
    return validate_spec(ModelSpec, fields, where=f"row {row.id} model")


def _moe_routing(name: str) -> dict[str, int | None]:
    """The group-limited routing of a row's experts: its catalog model's
    (:data:`_GROUP_ROUTED_MODELS`: DeepSeek-V3's 4 of 8 groups), else none."""
    from planner.catalog import load_model

    for prefix in _GROUP_ROUTED_MODELS:
        moe = load_model(prefix).moe if name.startswith(prefix) else None
        if moe is not None:
            return {"router_num_groups": moe.router_num_groups,
                    "router_group_topk": moe.router_group_topk}  # fmt: skip
    return {}


def _arch_flags(arch: ArchRow) -> dict[str, object]:
    """ModelSpec fields a framework row's ``arch`` states outright (they win over the
    model-name rules)."""
    out: dict[str, object] = {}
    for key in ("tied_embeddings", "norm", "position_embedding", "parallel_block", "qk_norm"):
        if getattr(arch, key) is not None:
            out[key] = getattr(arch, key)
    if arch.bias is not None:
        out.update(attention_bias=arch.bias, attention_output_bias=arch.bias, mlp_bias=arch.bias)
    return out


UNFUSED_ATTENTION_SOURCES: tuple[str, ...] = ("SC'21", "Reducing Activation Recomputation")
"""Runs that predate fused (flash) attention in Megatron-LM: SC'21 (2021) and Korthikanti et
al. (May 2022) used the unfused softmax path, whose stored scores are the 5 a s^2 b term that
selective recomputation was designed to remove. FlashAttention (Dao et al., arXiv 2205.14135)
reached Megatron-LM as the opt-in ``--use-flash-attn`` on 2022-12-08 (commit d693034ecf); a run
on a commit of that era that does not say it passed the flag states ``flash_attention: false`` in
its recipe (the MegaScale baseline rows)."""


NVIDIA_PERF_RECIPE_SOURCES: tuple[str, ...] = ("NeMo", "Megatron-Bridge", "dgxc-benchmarking")
"""Rows measured with NVIDIA's performance recipes, which reduce gradients in bf16
(``recipe.trainer.plugins.grad_reduce_in_fp32 = False`` in NeMo scripts/performance,
``cfg.ddp.grad_reduce_in_fp32 = False`` in Megatron-Bridge's performance configs)."""


SETTING_FIELDS: dict[str, str] = {
    "use_torch_compile": "fused_elementwise",
    "torch_compile": "fused_elementwise",
    "compile": "fused_elementwise",
}
"""Framework settings a row states as a plain boolean that map one-to-one onto a TrainWorkload
field (``torch.compile`` fuses the elementwise kernels); the free-text settings are mapped per
row in recipes.yaml instead."""

SETTING_WORDS: dict[tuple[str, object], str] = {
    ("use_torch_compile", False): "eager",
    ("use_torch_compile", True): "compiled",
}
"""How a variant's changed setting reads in its case id (``FMS1/eager``)."""

FRAMEWORK_PROFILES: dict[str, str] = {
    "megascale": "megatron",
    "llm-foundry": "fsdp",
    "olmo-core": "torchtitan",
}
"""Row frameworks that run under another stack's profile (``topologies/frameworks/``) and are
no user-facing alias of it: MegaScale is Megatron-LM with its own kernels and overlaps (the row's
arch says what its model changes), llm-foundry trains with PyTorch FSDP through Composer,
OLMo-core wraps its blocks with FSDP2 as torchtitan does (its ``apply_fsdp`` is adapted from
torchtitan's ``parallelize_llama``). Any other row framework is a profile's name or one of its
aliases (``topologies/frameworks/_aliases.yaml``: Pax compiles with the same XLA GSPMD
partitioner as MaxText). A recipe's ``profile`` overrides it for one row."""


def row_profile(row: TrainingRow) -> str:
    """The framework profile a row runs under: its recipe's ``profile``, else
    :data:`FRAMEWORK_PROFILES` of its framework, else the profile its framework names (itself or
    through an alias)."""
    recipe = row.recipe
    profile = recipe.profile if recipe is not None and recipe.profile else None
    profile = profile or FRAMEWORK_PROFILES.get(row.framework)
    named = framework_profile_name(row.framework)
    if profile is None and named in framework_names():
        profile = named
    if profile is None:
        raise SpecError(f"row {row.id}: framework '{row.framework}' has no profile")
    return profile


def workload_of(row: TrainingRow, global_batch: int | None = None) -> TrainWorkload:
    """The planner workload of a row: sequence length, global batch (the row's, or
    ``global_batch`` where the row states none: a tuned batch), precision, its framework's
    profile, and the framework settings its recipe records (``recipes.yaml``)."""
    global_batch = row.workload.global_batch or global_batch
    if global_batch is None:
        raise SpecError(f"row {row.id}: the source states no global batch, so no step to score")
    recipe = row.recipe
    fields: dict[str, object] = {
        "framework": row_profile(row),
        "seq_len": row.workload.seq_len,
        "global_batch": global_batch,
        "precision": precision_of(row),
    }
    if row.framework == "megatron" and not row.settings:
        fields.update(_megatron_era_fields(row))
    for key, value in row.settings.items():
        if key in SETTING_FIELDS and isinstance(value, bool):
            fields[SETTING_FIELDS[key]] = value
    if row.layout.sequence_parallel is False:
        fields["sequence_parallel"] = False
    if row.layout.recompute_num_layers is not None:
        fields["recompute_num_layers"] = row.layout.recompute_num_layers
    if row.layout.shard_group is not None:
        fields["zero_shard_group"] = row.layout.shard_group
    if recipe is not None:
        for name in ("tp_comm_overlap", "recompute_modules", "cross_entropy"):
            if getattr(recipe, name) is not None:
                fields[name] = getattr(recipe, name)
        graphs = None
        if recipe.cuda_graph_scope is not None:
            graphs = moe_layer_graphed(recipe.cuda_graph_scope)
        fields |= moe_framework_fields(
            moe_dispatcher=recipe.moe_dispatcher,
            ep_overlap=recipe.ep_comm_overlap,
            moe_cuda_graphs=graphs,
        )
        fields |= recipe.workload or {}
    return resolve_workload(validate_spec(TrainWorkload, fields, where=f"row {row.id} workload"))


def _megatron_era_fields(row: TrainingRow) -> dict[str, object]:
    """What the shared set's Megatron rows ran by the date of their source: fused attention,
    TP-communication overlap (userbuffers) and overlapped data-parallel reduction from 2023, bf16
    gradient reduction in NVIDIA's performance recipes."""
    flash = not any(marker in row.source for marker in UNFUSED_ATTENTION_SOURCES)
    perf_recipe = any(marker in row.source for marker in NVIDIA_PERF_RECIPE_SOURCES)
    fields: dict[str, object] = {
        "flash_attention": flash,
        # TP-communication overlap (userbuffers) arrived with Transformer Engine in 2023, like
        # fused attention: the same pre-2023 sources ran without it.
        "tp_comm_overlap": flash,
        "grad_reduce_dtype": "bf16" if perf_recipe else "fp32",
        # --overlap-grad-reduce came on 2023-08-16 (commit 2d5220a424): before it, train_step
        # reduced the gradients after forward_backward_func, exposed.
        "dp_comm_overlap": flash,
    }
    if not flash:
        # Megatron's fused cross entropy (2024-06) came after these runs too.
        fields["cross_entropy"] = "unfused"
    return fields


def precision_of(row: TrainingRow) -> NumberFormat:
    """The row's precision as a planner NumberFormat."""
    try:
        return NumberFormat(row.precision.lower())
    except ValueError:
        raise SpecError(f"row {row.id}: unknown precision '{row.precision}'") from None


def stated_layout(row: TrainingRow) -> dict[str, object]:
    """Layout fields the source states, in planner names (null = free; fsdp true = zero 3)."""
    lay = row.layout
    out: dict[str, object] = {
        k: getattr(lay, k)
        for k in ("tp", "pp", "dp", "cp", "ep", "vpp", "mbs", "recompute", "zero")
        if getattr(lay, k) is not None
    }
    if lay.fsdp and lay.zero is None:
        out["zero"] = 3
    if (
        row.framework == "megatron"
        and lay.zero is None
        and any(marker in row.source for marker in UNFUSED_ATTENTION_SOURCES)
    ):
        # plain data parallelism: the distributed optimizer reached Megatron-LM on 2022-02-10
        # (commit 329fe5820f), after SC'21's runs (Korthikanti et al.'s rows are DP 1)
        out["zero"] = 0
    if row.recipe is not None:
        for key in ("vpp", "etp", "mbs", "recompute"):
            value = getattr(row.recipe, key)
            if value is not None:
                out.setdefault(key, value)
        if row.recipe.zero is not None:
            out["zero"] = row.recipe.zero
    return out


def is_moe(row: TrainingRow) -> bool:
    """Whether the row's model has experts."""
    return row.model.arch.moe is not None


def _variant_suffix(variant: VariantRow) -> str:
    parts = [variant.precision] if variant.precision else []
    parts += [SETTING_WORDS.get((k, v), f"{k}={v}") for k, v in variant.settings.items()]
    for key, value in variant.layout.items():
        if key == "sequence_parallel":
            continue
        parts.append(str(value) if key == "recompute" else f"{key}{value}")
    return "-".join(parts) or "variant"


def _measured_tokens(measured: MeasuredRow, row: TrainingRow) -> float | None:
    if measured.tokens_per_s_per_gpu is not None:
        return measured.tokens_per_s_per_gpu
    if measured.step_time_s is not None:
        tokens = row.workload.global_batch * row.workload.seq_len
        return tokens / measured.step_time_s / row.hardware.count
    return None


def expand_cases(rows: list[TrainingRow]) -> list[Case]:
    """Each row, then each of its variants that states a throughput or a step time."""
    cases: list[Case] = []
    for row in rows:
        measured = _measured_tokens(row.measured, row)
        if measured is not None:
            cases.append(Case(id=row.id, row=row, measured_tokens_per_s_per_gpu=measured))
        for variant in row.variants:
            changed = row.model_copy(
                update={
                    "precision": variant.precision or row.precision,
                    "layout": validate_spec(
                        LayoutRow,
                        {**row.layout.model_dump(), **variant.layout},
                        where=f"row {row.id} variant layout",
                    ),
                    "measured": variant.measured,
                    "settings": {**row.settings, **variant.settings},
                    "variants": [],
                }
            )
            measured = _measured_tokens(variant.measured, changed)
            if measured is None:
                continue
            cases.append(
                Case(
                    id=f"{row.id}/{_variant_suffix(variant)}",
                    row=changed,
                    measured_tokens_per_s_per_gpu=measured,
                )
            )
    return cases
