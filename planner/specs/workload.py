"""What the user wants to run: a training job or a serving deployment."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from planner.specs.base import FrozenSpec
from planner.specs.formats import NumberFormat

RecomputeModule = Literal[
    "core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp", "shared_experts", "moe"
]
"""Parts of a layer that selective recomputation can recompute (Megatron-LM
``--recompute-modules``)."""
RECOMPUTE_MODULES: tuple[str, ...] = get_args(RecomputeModule)
"""The names of :data:`RecomputeModule`, in order."""
DEFAULT_RECOMPUTE_MODULES: tuple[RecomputeModule, ...] = ("core_attn",)
"""Megatron-LM's ``--recompute-modules`` default: the attention core (Korthikanti et al. 2022)."""

MoeDispatcher = Literal["alltoall", "deepep", "hybridep"]
"""Megatron's dropless MoE dispatchers by name: the NCCL all-to-all, or a deduplicating one
(the flex dispatcher's DeepEP and HybridEP backends)."""
MOE_DISPATCHERS: tuple[str, ...] = get_args(MoeDispatcher)
"""The names of :data:`MoeDispatcher`, in order."""

CrossEntropyImpl = Literal["unfused", "native", "te"]
"""The loss implementation (``TrainWorkload.cross_entropy``)."""


def moe_framework_fields(
    *,
    moe_dispatcher: str | None = None,
    ep_overlap: bool | None = None,
    moe_cuda_graphs: bool | None = None,
) -> dict[str, object]:
    """TrainWorkload fields for the MoE settings as users and recipes name them (None = not
    given): the dispatcher, the EP all-to-all overlap, and whole-layer CUDA graphs over
    capacity-padded experts (which remove the per-layer host sync).

    >>> moe_framework_fields(moe_dispatcher="deepep", moe_cuda_graphs=True)
    {'moe_dispatch_dedup': True, 'moe_host_sync': False}
    """
    out: dict[str, object] = {}
    if moe_dispatcher is not None:
        out["moe_dispatch_dedup"] = moe_dispatcher != "alltoall"
    if ep_overlap is not None:
        out["ep_comm_overlap"] = ep_overlap
    if moe_cuda_graphs is not None:
        out["moe_host_sync"] = not moe_cuda_graphs
    return out


class TrainWorkload(FrozenSpec):
    """A pre-training (or fine-tuning) step."""

    mode: Literal["train"] = "train"
    """Training."""
    seq_len: PositiveInt = 8192
    """Tokens per sequence T."""
    global_batch: PositiveInt = 512
    """Sequences per optimizer step (global batch size)."""
    precision: NumberFormat = NumberFormat.BF16
    """Format of the GEMM inputs of the transformer's linear layers (attention runs in bf16;
    master weights and optimizer state stay fp32)."""

    grad_reduce_dtype: Literal["fp32", "bf16"] = "fp32"
    """Gradient buffer and reduction dtype. fp32 is Megatron-LM's default for bf16 training
    (6 + 12/d bytes per parameter with the distributed optimizer); NVIDIA's performance recipes
    reduce in bf16 (``grad_reduce_in_fp32 = False``: 4 + 16/d, fp32 main grads kept as shards)."""
    sequence_parallel: bool = True
    """With tp > 1, the norms, dropouts and residual adds run on T / tp tokens per GPU and their
    activations are sharded (Megatron --sequence-parallel, Korthikanti et al. 2022 section 4.2.2);
    False replicates them on every TP rank (sbh(10 + 24/t) instead of 34 sbh / t bytes)."""
    tp_comm_overlap: bool = True
    """Tensor-parallel collectives are pipelined with their GEMMs (Megatron-LM --tp-comm-overlap,
    on in NVIDIA's H100/B200 recipes); False leaves them on the critical path."""
    flash_attention: bool = True
    """Fused (flash) attention: scores are neither stored nor written to HBM. False models the
    unfused path of 2021-22 Megatron (batched score GEMMs over the full square, softmax and
    dropout through HBM, scores stored: Korthikanti et al.'s 5 a s^2 b term)."""
    moe_dispatch_dedup: bool = False
    """MoE only: token copies bound for one remote scale-up domain cross the NIC once and fan out
    over NVLink (DeepEP, Megatron's flex dispatcher); False = plain NCCL all-to-all."""
    ep_comm_overlap: bool = False
    """MoE only: the expert-parallel all-to-all of one micro-batch runs while another
    micro-batch computes (Megatron-LM ``--overlap-moe-expert-parallel-comm`` with
    ``--delay-wgrad-compute``; the forward of one and the backward of another are interleaved,
    as in DeepSeek-V3's DualPipe, arXiv 2412.19437 section 3.2.1); False = exposed."""
    cross_entropy: CrossEntropyImpl = "te"
    """Loss implementation, which sets its HBM traffic over the [tokens, V / tp] logits:
    Megatron-LM's plain vocab-parallel cross entropy (``unfused``, fp32 copies and in-place
    passes), ``--cross-entropy-loss-fusion`` with ``--cross-entropy-fusion-impl native`` (jit-
    fused groups of the same passes) or ``te`` (one kernel on the bf16 logits; Megatron-Bridge's
    recipes)."""
    recompute_num_layers: PositiveInt | None = None
    """With full recomputation, how many layers of each pipeline chunk are recomputed (Megatron
    ``--recompute-method block --recompute-num-layers N``: the first N of each virtual stage;
    the others keep their activations). None = every layer (``uniform``, 1)."""
    moe_host_sync: bool = True
    """MoE only: the dropless token dispatcher synchronises with the host once per MoE layer
    per micro-batch (Megatron's all-to-all and flex dispatchers read the per-expert token counts
    on the CPU, and ``TEGroupedMLP`` turns them into a Python list for its GEMM splits); False
    only when the whole MoE layer runs in a CUDA graph on capacity-padded shapes (full-layer or
    full-iteration graphs). Capturing just the router and preprocessing (``cuda_graph_scope``
    moe_router, moe_preprocess) moves the device-to-host copy but keeps the sync before the
    all-to-all (Megatron-LM ``MoEAlltoAllTokenDispatcher.preprocess``). Costs the
    accelerator's ``moe_sync_overhead_us``."""
    recompute_modules: tuple[RecomputeModule, ...] = DEFAULT_RECOMPUTE_MODULES
    """What a layout with selective recomputation recomputes in the backward pass (Megatron-LM
    ``--recompute-modules``; its default is the attention core, Korthikanti et al. 2022)."""
    expert_load_imbalance: float = Field(default=1.0, ge=1.0, le=8.0)
    """MoE only: tokens on the busiest expert rank over the mean (1 = perfectly balanced, as
    NVIDIA's MoE benchmarks force; real routing is typically 1.1-1.5)."""
    mtp_num_layers: int = Field(default=0, ge=0, le=16)
    """Multi-token-prediction modules trained with the model (DeepSeek-V3: 1; Megatron-LM
    ``--mtp-num-layers``, arXiv 2412.19437 section 2.2): each is one more transformer layer like
    the model's last, a 2D -> D projection, and one more pass of the shared output layer and
    loss, on the pipeline stage that holds it (the last by default). 0 = none."""

    @field_validator("recompute_modules")
    @classmethod
    def _modules_once(cls, modules: tuple[str, ...]) -> tuple[str, ...]:
        if not modules:
            raise ValueError("selective recomputation needs at least one module")
        if len(set(modules)) != len(modules):
            raise ValueError(f"recompute module listed twice in {list(modules)}")
        return modules

    @property
    def tokens_per_step(self) -> int:
        """Tokens per optimizer step (global_batch x seq_len)."""
        return self.global_batch * self.seq_len


class ServeWorkload(FrozenSpec):
    """A serving deployment: request shape, formats, latency targets and the search objective
    (cost model: :mod:`planner.cost.serving`)."""

    mode: Literal["serve"] = "serve"
    """Serving."""
    context: PositiveInt = 8192
    """Context length each sequence must hold (tokens)."""
    prompt_len: PositiveInt = 1024
    """Prompt tokens per request."""
    output_len: PositiveInt = 1024
    """Generated tokens per request."""
    precision: NumberFormat = NumberFormat.BF16
    """Weight format."""
    kv_precision: NumberFormat = NumberFormat.BF16
    """KV-cache format."""
    compute_precision: NumberFormat | None = None
    """Format of the GEMM inputs (activations); None = the weight format when the tensor cores
    run it, else bf16 (weight-only quantisation, e.g. FP8 weights on A100)."""
    concurrency: PositiveInt | None = None
    """Fixed batch: sequences decoded together per replica; None = the largest that fits the KV
    cache and the latency targets."""
    tpot_ms: PositiveFloat | None = None
    """Target time per output token (decode step latency, ms); None = no target."""
    ttft_ms: PositiveFloat | None = None
    """Target time to first token (ms, without queueing); None = no target."""
    objective: Literal["throughput", "latency"] = "throughput"
    """What the search optimises: output tokens/s per GPU (throughput) or the time per output
    token at the requested concurrency (latency). ``target_tokens_per_s`` overrides both."""
    target_tokens_per_s: PositiveFloat | None = None
    """Aggregate output tokens/s the deployment must sustain: the search then picks the fewest
    GPUs (replicas of the best layout) that reach it; None = use the whole cluster."""
    kv_cache_fraction: float = Field(default=0.9, gt=0, le=1)
    """Fraction of the memory left after weights, activation workspace and the runtime reserve
    that the KV cache may take (TensorRT-LLM ``kv_cache_free_gpu_mem_fraction``, default 0.9;
    NVIDIA's published tables use 0.95)."""
    max_batch_tokens: PositiveInt = 8192
    """Tokens one forward step may carry (prefill chunk + decodes): sizes the activation
    workspace (TensorRT-LLM ``max_num_tokens``, default 8192)."""
    qps: PositiveFloat | None = None
    """Offered request rate (requests/s per replica) for an online estimate; None = saturated
    (the batch is as large as the limits allow)."""

    @model_validator(mode="after")
    def _request_fits_context(self) -> ServeWorkload:
        if self.prompt_len + self.output_len > self.context:
            raise ValueError(
                f"prompt_len + output_len ({self.prompt_len} + {self.output_len}) exceeds "
                f"context ({self.context})"
            )
        return self
