"""The GEMMs of one transformer layer, their shapes after sharding, and their time.

A layer's linear work is a handful of GEMMs (Megatron-LM's column/row-parallel split, Shoeybi et
al. 2019, arXiv 1909.08053, section 3): QKV and FFN up/gate are split over tp along their output
dimension, the attention output and FFN down projections along their input dimension. Routed
experts are split over ep (whole experts per rank) and etp (each expert's FFN width).

GEMM time (roofline with a per-kernel fixed cost, Williams et al. 2009; the fixed cost models
launch latency):
    t = max(2 m k n / (P eta_gemm w(m, n)), bpv (m k + k n + m n) / (W_hbm eta_hbm)) + t_kernel
where w is the shape's tile and wave efficiency on a GPU (:func:`wave_efficiency`; 1 without a
tile model): why a TP8 shard of a large layer reaches a lower fraction of peak than the whole
layer. The backward pass runs two GEMMs of the same FLOPs with other output shapes
(:func:`gemm_backward_times`).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

from planner.cost.params import layer_norms
from planner.specs.hardware import GemmTiling
from planner.specs.layout import Layout
from planner.specs.model import CLAMPED_ACTIVATIONS, ModelSpec
from planner.specs.workload import TrainWorkload


class GemmShape(NamedTuple):
    """One GEMM of a layer for one micro-batch on one GPU: (m x k) @ (k x n), ``count`` times.

    A plain tuple, not a spec: the cost model makes hundreds of thousands of them from numbers
    it computed (a serving search's frontier prices every layer kind at every batch it tries),
    and none of them is read from a user's file or written out."""

    name: str
    """Which projection (qkv, out, up, down, expert_up, expert_down, ...)."""
    m: float
    """Rows: tokens through it on this GPU."""
    k: float
    """Reduction dimension."""
    n: float
    """Output columns on this GPU."""
    count: float
    """How many such GEMMs (local experts) run per layer."""

    @property
    def flops(self) -> float:
        """Forward FLOPs of all ``count`` GEMMs: 2 m k n x count."""
        return 2.0 * self.m * self.k * self.n * self.count


def attention_gemms(model: ModelSpec, tokens: float, tp: int) -> list[GemmShape]:
    """QKV (column-parallel) and output (row-parallel) projections; MLA's latent down
    projections are replicated across tp (DeepSeek-V2 arXiv 2405.04434 eqs. 37-47)."""
    d, heads = model.hidden_size, model.num_attention_heads
    if model.mla is not None:
        mla = model.mla
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        down = (mla.q_lora_rank or 0) + mla.kv_lora_rank + mla.qk_rope_head_dim
        q_in = mla.q_lora_rank or d
        return [
            GemmShape(name="mla_down", m=tokens, k=d, n=down, count=1),
            GemmShape(name="q_up", m=tokens, k=q_in, n=heads * qk / tp, count=1),
            GemmShape(
                name="kv_up",
                m=tokens,
                k=mla.kv_lora_rank,
                n=heads * (mla.qk_nope_head_dim + mla.v_head_dim) / tp,
                count=1,
            ),
            GemmShape(name="out", m=tokens, k=heads * mla.v_head_dim / tp, n=d, count=1),
        ]
    q_dim = heads * model.head_dim
    kv_dim = model.num_kv_heads * model.head_dim
    return [
        GemmShape(name="qkv", m=tokens, k=d, n=(q_dim + 2 * kv_dim) / tp, count=1),
        GemmShape(name="out", m=tokens, k=q_dim / tp, n=d, count=1),
    ]


ROUTED_EXPERT_PREFIX = "expert_"
"""Name prefix of a routed expert's GEMMs (``expert_up``, ``expert_down``): the GEMMs whose rows
are the tokens routed to this rank's experts (:func:`routed_token_share`)."""


def is_routed_expert(gemm: GemmShape) -> bool:
    """Whether ``gemm`` is one of a routed expert's GEMMs (:data:`ROUTED_EXPERT_PREFIX`)."""
    return gemm.name.startswith(ROUTED_EXPERT_PREFIX)


def ffn_gemms(
    model: ModelSpec, tokens: float, width: float, *, prefix: str, count: float
) -> list[GemmShape]:
    """Up (+gate, fused as one 2F-wide GEMM when gated) and down projections of width ``width``."""
    up = 2 * width if model.gated_ffn else width
    return [
        GemmShape(name=f"{prefix}up", m=tokens, k=model.hidden_size, n=up, count=count),
        GemmShape(name=f"{prefix}down", m=tokens, k=width, n=model.hidden_size, count=count),
    ]


def routed_token_share(tp: int, etp: int) -> float:
    """Share of its tensor-parallel group's tokens that one rank sends to the routed experts and
    that its experts' GEMMs see from each expert-parallel peer: etp / tp.

    Megatron-Core's MoE parallel folding (``expert_tensor_parallel_size`` apart from
    ``tensor_model_parallel_size``): with tp > 1 the tokens reach the MoE layer sequence-parallel,
    T / tp on each rank (Megatron warns that expert and tensor parallelism need sequence
    parallelism, ``megatron/core/model_parallel_config.py``), each rank all-to-alls its own
    shard over the expert-parallel group, and ``dispatch_postprocess`` all-gathers what arrives
    over the expert-tensor-parallel group only (``self.tp_group = pg_collection.expt_tp``,
    ``megatron/core/transformer/moe/token_dispatcher.py``). An expert then sees
    ep x (T / tp) x etp x top_k / E tokens at width F / etp, so a rank's routed-expert FLOPs are
    T top_k 3 D F / tp whatever etp is: etp = 1 beside tp = 2 halves the rows, not the work.

    >>> routed_token_share(2, 1), routed_token_share(4, 4), routed_token_share(4, 2)
    (0.5, 1.0, 0.5)
    """
    return etp / tp


def layer_gemms(
    model: ModelSpec, tokens: float, *, moe_layer: bool, tp: int, ep: int, etp: int
) -> list[GemmShape]:
    """Every GEMM of one layer for ``tokens`` tokens on one GPU (tokens = micro-batch x T / cp).

    A routed expert on this rank sees ep x tokens x (etp / tp) x top_k / E tokens (balanced
    routing, :func:`routed_token_share`) at width F / etp, and the rank holds E / ep experts;
    shared experts and the router run on every token (split over tp).

    >>> from planner.catalog import load_model
    >>> def expert_flops(etp: int) -> float:
    ...     gemms = layer_gemms(load_model("deepseek-v3"), 4096, moe_layer=True, tp=2, ep=64,
    ...                         etp=etp)
    ...     return sum(2 * g.m * g.k * g.n * g.count for g in gemms if is_routed_expert(g))
    >>> expert_flops(1) == expert_flops(2)  # 4096 x 8 x 3 x 7168 x 2048 x 2 / tp 2
    True
    >>> round(expert_flops(1) / 1e12, 3)
    1.443
    """
    gemms = attention_gemms(model, tokens, tp)
    moe = model.moe
    if not moe_layer or moe is None:
        return gemms + ffn_gemms(model, tokens, model.ffn_hidden_size / tp, prefix="", count=1)
    gemms.append(
        GemmShape(name="router", m=tokens, k=model.hidden_size, n=moe.num_experts, count=1)
    )
    per_expert = ep * tokens * routed_token_share(tp, etp) * moe.top_k / moe.num_experts
    gemms += ffn_gemms(
        model,
        per_expert,
        moe.expert_ffn_hidden_size / etp,
        prefix=ROUTED_EXPERT_PREFIX,
        count=moe.num_experts / ep,
    )
    if moe.num_shared_experts:
        width = moe.shared_expert_width
        gemms += ffn_gemms(
            model, tokens, moe.num_shared_experts * width / tp, prefix="shared_", count=1
        )
    return gemms


def einsum_dispatch_gemms(
    model: ModelSpec,
    tokens: float,
    *,
    group_tokens: float,
    local_group_tokens: float,
    capacity_factor: float,
    tp: int,
) -> list[GemmShape]:
    """GShard's dispatch and combine einsums of one MoE layer on one device (Lepikhin et al.,
    arXiv 2006.16668, section 2.2 and Algorithm 1; MaxText ``RoutedMoE.dense_matmul`` with
    ``capacity_factor`` > 0, MaxText/layers/moe.py): each routing group of ``group_tokens``
    tokens (one sequence in MaxText, ``generate_masks``) gives every expert C = ceil(group x
    top_k / E) x capacity_factor slots; ``BSM,BSEC -> EBCM`` multiplies the one-hot dispatch
    mask into the slots, a (E C) x S x D GEMM per group, and ``EBCM,BSEC -> BSM`` gathers the
    expert outputs back with the gate weights, S x (E C) x D. Both run over every expert's
    every slot whatever the routing, 2 S E C D FLOPs each per group: about 2 group x top_k x
    capacity_factor x D per token, a cost that grows with the group (quadratic in the sequence).
    ``tokens`` = this device's tokens of the micro-batch, in groups of ``local_group_tokens``
    (the sequence over context parallelism: the einsum contracts the local part); the hidden
    dimension is split over tp.

    >>> from planner.cost.params import _tiny
    >>> from planner.specs.model import MoESpec
    >>> m = _tiny().model_copy(update={"moe": MoESpec(num_experts=4, top_k=2,
    ...                                               expert_ffn_hidden_size=128)})
    >>> [(g.name, g.m, g.k, g.n, g.count) for g in einsum_dispatch_gemms(  # C = 64 x 1.25 = 80
    ...     m, 256, group_tokens=128, local_group_tokens=128, capacity_factor=1.25, tp=1)]
    [('moe_dispatch', 320.0, 128, 64.0, 2.0), ('moe_combine', 128, 320.0, 64.0, 2.0)]
    """
    if model.moe is None:
        return []
    slots = einsum_slots(model, group_tokens, capacity_factor)
    width, groups = model.hidden_size / tp, tokens / local_group_tokens
    return [
        GemmShape(name="moe_dispatch", m=slots, k=local_group_tokens, n=width, count=groups),
        GemmShape(name="moe_combine", m=local_group_tokens, k=slots, n=width, count=groups),
    ]


class EinsumDispatch(NamedTuple):
    """How a workload's GShard einsum dispatch groups the tokens (``TrainWorkload.
    moe_expert_compute`` ``einsum``): what :func:`einsum_dispatch_gemms` and the masks' memory
    read."""

    capacity_factor: float
    """Expert capacity over the balanced share (``moe_capacity_factor``)."""
    group_tokens: float
    """Tokens of one routing group, whose copies share the slots (the capacity's basis)."""
    local_group_tokens: float
    """Of them on this device (the dispatch einsum's reduction)."""


def einsum_dispatch(workload: TrainWorkload, layout: Layout) -> EinsumDispatch | None:
    """The einsum dispatch of ``workload`` on ``layout``, or None for grouped GEMMs: a group of
    one sequence (``moe_routing_group`` ``sequence``, MaxText), split over context parallelism;
    or of the rank's whole micro-batch (``microbatch``, DeepSpeed-MoE).

    >>> w = TrainWorkload(seq_len=4096, moe_capacity_factor=1.0, moe_expert_compute="einsum")
    >>> einsum_dispatch(w, Layout(mbs=2, cp=2))
    EinsumDispatch(capacity_factor=1.0, group_tokens=4096.0, local_group_tokens=2048.0)
    >>> w = w.model_copy(update={"moe_routing_group": "microbatch"})
    >>> einsum_dispatch(w, Layout(mbs=2, cp=2))
    EinsumDispatch(capacity_factor=1.0, group_tokens=4096.0, local_group_tokens=4096.0)
    """
    capacity = workload.moe_capacity_factor
    if workload.moe_expert_compute != "einsum" or capacity is None:
        return None
    local = layout.mbs * workload.seq_len / layout.cp
    if workload.moe_routing_group == "sequence":
        return EinsumDispatch(capacity, float(workload.seq_len), local / layout.mbs)
    return EinsumDispatch(capacity, local, local)


def einsum_slots(model: ModelSpec, group_tokens: float, capacity_factor: float) -> float:
    """Capacity slots of every expert together for one routing group of ``group_tokens``:
    E x C with C = ceil(group x top_k / E) x capacity_factor, at least the factor (MaxText
    ``generate_masks``; DeepSpeed's ``top2gating`` sizes it from 2 x tokens / E the same way).

    >>> from planner.cost.params import _tiny
    >>> from planner.specs.model import MoESpec
    >>> m = _tiny().model_copy(update={"moe": MoESpec(num_experts=4, top_k=2,
    ...                                               expert_ffn_hidden_size=128)})
    >>> einsum_slots(m, 128, 1.25)  # 4 experts x 64 x 1.25
    320.0
    """
    moe = model.moe
    if moe is None:
        return 0.0
    per_expert = math.ceil(group_tokens * moe.top_k / moe.num_experts) * capacity_factor
    return moe.num_experts * float(int(max(per_expert, capacity_factor)))


EINSUM_DISPATCH_GEMMS = frozenset({"moe_dispatch", "moe_combine"})
"""The dispatch and combine einsums (:func:`einsum_dispatch_gemms`): activations times masks,
no weights."""


def grouped_tile_rows(rows: float, groups: float, tile_rows: int) -> float:
    """Rows a grouped GEMM kernel computes when its row tiles straddle the groups (MaxText's
    megablox ``gmm``, MaxText/kernels/megablox/gmm.py ``make_group_metadata``): the ``rows``
    (padded to a tile multiple, as MaxText's ``sparse_matmul`` pads them) fill ceil(rows /
    tile) tiles, and each of the ``groups`` - 1 later groups that starts inside a tile visits
    that tile once more and computes it in full; the kernel's bound, tiles + groups - 1, is
    reached when no group starts on a tile boundary, as routed token counts almost never do.
    A GEMM of fewer rows than a tile runs one tile of its own size (MaxText passes
    min(tile, rows)).

    >>> grouped_tile_rows(16384, 8, 512)  # 32 tiles and 7 revisits
    19968
    >>> grouped_tile_rows(300, 4, 512)  # one tile of 300 rows, revisited by 3 groups
    1200
    """
    tile = min(tile_rows, rows)
    return tile * (math.ceil(rows / tile) + max(0, math.ceil(groups) - 1))


def padded_to_tiles(size: float, tile: int) -> float:
    """``size`` rounded up to whole tiles; one tile of its own size when smaller than a tile.

    >>> padded_to_tiles(3584, 1024), padded_to_tiles(512, 1024)
    (4096, 512)
    """
    return size if size <= tile else tile * math.ceil(size / tile)


@lru_cache(maxsize=65536)
def wave_efficiency(rows: float, cols: float, tiling: GemmTiling, *, groups: float = 1) -> float:
    """Share of the machine's tile slots a GEMM with a ``rows`` x ``cols`` output keeps busy.

    The library covers the output with tiles of ``tile_rows`` x ``tile_cols`` (either way
    round, whichever wastes less) and runs them in waves of one tile per compute unit
    (NVIDIA, "Matrix Multiplication Background User's Guide", Deep Learning Performance
    documentation: tile quantization and wave quantization). Two losses multiply: the padding
    of the edge tiles (tile quantization), and the idle units of the last wave (wave
    quantization). ``groups`` equal GEMMs of one grouped kernel (MoE experts) share the waves.
    A GEMM whose tiles do not fill one wave is split along its reduction dimension (split-K)
    into as many parts as fill it; the partial sums' reduction is not priced.

    >>> h100 = GemmTiling(132, 128, 256)
    >>> round(wave_efficiency(4096, 8192, h100), 3)  # 32 x 32 tiles = 7.76 waves of 132
    0.97
    >>> b200 = GemmTiling(74, 256, 128)  # SM pairs: 2-SM MMA tiles
    >>> round(wave_efficiency(4096, 1280, b200), 3)  # 160 tiles in 3 waves of 74: 160 / 222
    0.721
    """
    if rows <= 0 or cols <= 0:
        return 1.0
    units = tiling.compute_units
    best = 0.0
    for tile_r, tile_c in (
        (tiling.tile_rows, tiling.tile_cols),
        (tiling.tile_cols, tiling.tile_rows),
    ):
        along_r, along_c = math.ceil(rows / tile_r), math.ceil(cols / tile_c)
        padding = rows * cols / (along_r * tile_r * along_c * tile_c)
        tiles = along_r * along_c * max(1, math.ceil(groups))
        work = tiles * max(1, units // tiles)  # split-K fills one wave
        waves = math.ceil(work / units)
        best = max(best, padding * work / (waves * units))
    return best


class GemmRoofline(NamedTuple):
    """What one GEMM's time needs from the part in one format (:func:`gemm_time`)."""

    peak_flop_per_s: float
    """Dense peak in the format."""
    efficiency: float
    """Fraction of it a GEMM whose tiles fill every wave reaches."""
    bytes_per_value: float
    """Bytes per operand value."""
    hbm_bytes_per_s: float
    """Effective HBM bandwidth."""
    kernel_overhead_s: float
    """Fixed cost per kernel."""
    tiling: GemmTiling | None = None
    """Tile and wave model (None: none)."""


def _pass_time(rows: float, cols: float, gemm: GemmShape, roof: GemmRoofline) -> float:
    """One pass's ``gemm.count`` GEMMs of 2 m k n FLOPs each, writing a ``rows`` x ``cols``
    output: roofline + fixed cost (module docstring)."""
    if gemm.count == 0 or gemm.m == 0:
        return 0.0
    flops = 2.0 * gemm.m * gemm.k * gemm.n
    efficiency = roof.efficiency
    if roof.tiling is not None:
        efficiency *= wave_efficiency(rows, cols, roof.tiling, groups=gemm.count)
    num_bytes = roof.bytes_per_value * (gemm.m * gemm.k + gemm.k * gemm.n + gemm.m * gemm.n)
    compute = flops / (roof.peak_flop_per_s * efficiency)
    memory = num_bytes / roof.hbm_bytes_per_s
    return gemm.count * (max(compute, memory) + roof.kernel_overhead_s)


def gemm_time(
    gemm: GemmShape,
    *,
    peak_flop_per_s: float,
    efficiency: float,
    bytes_per_value: float,
    hbm_bytes_per_s: float,
    kernel_overhead_s: float,
    tiling: GemmTiling | None = None,
) -> float:
    """Forward time of ``gemm``: roofline of compute and HBM traffic plus a fixed per-kernel cost;
    with ``tiling``, the compute at the (m x n) output's :func:`wave_efficiency`.

    >>> g = GemmShape(name="x", m=4096, k=8192, n=8192, count=1)
    >>> round(gemm_time(g, peak_flop_per_s=1e15, efficiency=0.5, bytes_per_value=2,
    ...                 hbm_bytes_per_s=1e12, kernel_overhead_s=0.0) * 1e3, 3)  # 0.55 TFLOP
    1.1
    """
    roof = GemmRoofline(
        peak_flop_per_s, efficiency, bytes_per_value, hbm_bytes_per_s, kernel_overhead_s, tiling
    )
    return _pass_time(gemm.m, gemm.n, gemm, roof)


def gemm_backward_times(gemm: GemmShape, roof: GemmRoofline) -> tuple[float, float]:
    """(input-gradient, weight-gradient) times of ``gemm``'s backward: dX = dY W^T writes an
    m x k output, dW = X^T dY a k x n one, each 2 m k n FLOPs over the forward's operands
    (Narayanan et al. 2021, arXiv 2104.04473, section 5.1: backward = 2 x forward FLOPs).
    Without a tile model each is the forward's time.

    >>> g = GemmShape(name="qkv", m=4096, k=8192, n=1280, count=1)
    >>> roof = GemmRoofline(1e15, 1.0, 2, 1e13, 0.0)
    >>> [round(t * 1e6, 1) for t in gemm_backward_times(g, roof)]  # 86 GFLOP each
    [85.9, 85.9]
    >>> b200 = roof._replace(tiling=GemmTiling(74, 256, 128))
    >>> [round(t * 1e6, 1) for t in gemm_backward_times(g, b200)]  # 1024, 320 tiles of 256 x 128
    [86.9, 99.3]
    """
    return _pass_time(gemm.m, gemm.k, gemm, roof), _pass_time(gemm.k, gemm.n, gemm, roof)


FUSED_ROPE_BYTES_PER_VALUE = 4.0
"""Forward HBM bytes per rotated bf16 query/key value of a fused RoPE kernel: read and write
once. Backward moves twice as much, as every memory-bound kernel here."""

NORM_BYTES_PER_HIDDEN = 4.0
"""Bytes per hidden unit of one norm, reading and writing D bf16 values."""

RESIDUAL_BYTES_PER_HIDDEN = 12.0
"""Bytes per hidden unit of a layer's two residual adds, each reading 2 D and writing D bf16
values (a parallel block's three-way add into the residual is counted the same)."""


def norm_bytes_per_token(model: ModelSpec) -> float:
    """Forward HBM bytes per token of one layer's norms: 4 D each, two per layer or one in a
    parallel block, twice as many with post-norms (:func:`planner.cost.params.layer_norms`).

    >>> from planner.cost.params import _tiny
    >>> norm_bytes_per_token(_tiny())  # 2 x 4 x 64
    512.0
    """
    return NORM_BYTES_PER_HIDDEN * layer_norms(model) * model.hidden_size


def norm_residual_bytes_per_token(model: ModelSpec) -> float:
    """Of :func:`elementwise_bytes_per_token`, the norms and the two residual adds (12 D): the
    kernels sequence parallelism splits over TP ranks and plain TP repeats on every rank."""
    return norm_bytes_per_token(model) + RESIDUAL_BYTES_PER_HIDDEN * model.hidden_size


PERMUTE_BYTES_PER_ROUTED_VALUE = 4.0
"""HBM bytes per routed value of the MoE token permutation: the permute writes each of a token's
top-k copies once (2 bytes, bf16) and the unpermute reads it back (2 bytes); the once-per-token
read and write (4 / top-k bytes) are left out."""


def elementwise_bytes_per_token(
    model: ModelSpec, *, moe_layer: bool, fused_mlp: bool = False
) -> float:
    """HBM bytes per token moved forward by one layer's memory-bound kernels (bf16 values).

    Two norms (read + write D each: 8 D bytes; one in a parallel block), two residual adds (read
    2 D, write D: 12 D), rotary on queries and keys when the model uses RoPE (read + write:
    4 (q + kv) bytes), the FFN activation (gated: read
    2F write F; plain: read F write F; x k for routed experts): these are the non-GEMM kernels of
    a Megatron/TE layer that stream activations through HBM (Korthikanti et al. 2022 count the
    same tensors as activations). Backward moves about twice as much (gradients + saved inputs).
    ``fused_mlp``: the routed experts' activation runs in their GEMMs' epilogues
    (:func:`planner.cost.stage.runs_fused_grouped_mlp`), so only the shared experts' is a pass.

    >>> from planner.catalog import load_model
    >>> m = load_model("gpt-oss-20b")  # 4 routed copies of a gated 2,880-wide activation
    >>> elementwise_bytes_per_token(m, moe_layer=True) - elementwise_bytes_per_token(
    ...     m, moe_layer=True, fused_mlp=True) == 6 * 4 * 2880
    True
    """
    d = model.hidden_size
    q = model.num_attention_heads * model.head_dim
    kv = model.num_kv_heads * model.head_dim
    bytes_ = norm_residual_bytes_per_token(model)
    if model.position_embedding == "rope":
        bytes_ += FUSED_ROPE_BYTES_PER_VALUE * (q + kv)
    moe = model.moe
    if moe_layer and moe is not None:
        width = 0 if fused_mlp else moe.top_k * moe.expert_ffn_hidden_size
        width += moe.num_shared_experts * (moe.shared_expert_width)
        bytes_ += PERMUTE_BYTES_PER_ROUTED_VALUE * d * moe.top_k
    else:
        width = model.ffn_hidden_size
    bytes_ += (6.0 if model.gated_ffn else 4.0) * width
    return bytes_


EAGER_NORM_BYTES_PER_VALUE = 36.0
"""Forward HBM bytes per normalised bf16 value of an eager (unfused, uncompiled) PyTorch RMSNorm
as the reference Llama code writes it (Hugging Face ``LlamaRMSNorm``; ``nn.RMSNorm`` decomposed
on CUDA): ``to(float32)`` (read 2, write 4), ``pow(2)`` (4 + 4), ``mean`` (read 4), ``x *
rsqrt(.)`` (4 + 4), ``to(bfloat16)`` (4 + 2), ``weight *`` (2 + 2). A fused kernel moves 4."""

EAGER_ROPE_BYTES_PER_VALUE = 22.0
"""Forward HBM bytes per rotated bf16 value of eager RoPE (``q * cos + rotate_half(q) * sin``:
two multiplies (2 + 2 each), ``rotate_half``'s negate and ``cat`` (4 + 4 over the two halves), the
add (4 + 2)); a fused kernel moves 4."""

EAGER_GATED_ACTIVATION_BYTES_PER_VALUE = 10.0
"""Forward HBM bytes per F value of an eager SwiGLU (``silu(gate)`` read 2 write 2, ``* up`` read
4 write 2); the fused kernel moves 6 (read 2F, write F)."""

EAGER_BIAS_BYTES_PER_VALUE = 1.0
"""Forward-equivalent HBM bytes per output value of a linear layer's bias in eager PyTorch
beyond a fused framework's. The forward adds it in the GEMM's epilogue: ``F.linear`` with a bias
calls ``addmm``, which on CUDA >= 11.4 runs cuBLASLt ``gemm_and_bias`` whenever the bias is a
contiguous vector (pytorch/pytorch ``aten/src/ATen/native/cuda/Blas.cpp``,
``addmm_out_cuda_impl``, ``useLtInterface``), so no extra pass. The backward's bias gradient is
its own reduction, ``grad_output.sum(0)``, reading the output gradient once (2 bytes): 1 byte
here, as every memory-bound kernel's backward is counted as twice its forward."""


def eager_extra_bytes_per_token(model: ModelSpec, *, moe_layer: bool) -> float:
    """Forward HBM bytes per token one layer's elementwise work moves in eager PyTorch (no
    ``torch.compile``, no fused kernels) beyond the fused kernels of
    :func:`elementwise_bytes_per_token`: an RMSNorm, RoPE and a gated activation op by op
    (:data:`EAGER_NORM_BYTES_PER_VALUE` and the constants beside it) and the biases' gradient
    reductions (:data:`EAGER_BIAS_BYTES_PER_VALUE`); the backward moves about twice as much, as
    every memory-bound kernel here. Residual adds, a plain activation and LayerNorm (PyTorch's
    native ``layer_norm`` kernel reads and writes each value once, ``aten/src/ATen/native/cuda/
    layer_norm_kernel.cu``) are one kernel either way.

    >>> from planner.cost.params import _tiny
    >>> eager_extra_bytes_per_token(_tiny(), moe_layer=False)  # 32 x 2 x 64 + 18 x 128 + 4 x 128
    6912.0
    """
    d = model.hidden_size
    extra = 0.0
    if model.norm == "rmsnorm":  # LayerNorm is one native kernel in eager PyTorch too
        extra += (EAGER_NORM_BYTES_PER_VALUE - NORM_BYTES_PER_HIDDEN) * layer_norms(model) * d
    if model.position_embedding == "rope":
        rotated = (model.num_attention_heads + model.num_kv_heads) * model.head_dim
        extra += (EAGER_ROPE_BYTES_PER_VALUE - FUSED_ROPE_BYTES_PER_VALUE) * rotated
    moe = model.moe
    if moe_layer and moe is not None:
        width = (
            moe.top_k * moe.expert_ffn_hidden_size
            + moe.num_shared_experts * moe.shared_expert_width
        )
    else:
        width = model.ffn_hidden_size
    if model.gated_ffn:
        extra += (EAGER_GATED_ACTIVATION_BYTES_PER_VALUE - 6.0) * width
    if model.mlp_bias:
        extra += EAGER_BIAS_BYTES_PER_VALUE * ((2 if model.gated_ffn else 1) * width + d)
    if model.attention_bias or model.attention_output_bias:
        q = model.num_attention_heads * model.head_dim
        kv = model.num_kv_heads * model.head_dim
        biased = (q + 2 * kv if model.attention_bias else 0) + (
            d if model.attention_output_bias else 0
        )
        extra += EAGER_BIAS_BYTES_PER_VALUE * biased
    return extra


UNFUSED_ROPE_BYTES_PER_VALUE = (24.0, 26.0)
"""(forward, backward) HBM bytes per rotated bf16 value of Megatron-LM's unfused RoPE
(``_apply_rotary_pos_emb_bshd``): forward ``neg`` + ``cat`` (rotate half), two ``mul``, one
``add`` and the closing ``cat`` move 12 values; backward two ``mul``, ``neg``, the chunk's
``cat``, the gradient ``add`` and the slice's zero-fill and copy move 13. Of these,
:func:`elementwise_bytes_per_token` already counts the fused kernel's
:data:`FUSED_ROPE_BYTES_PER_VALUE` forward and twice that backward."""

EXPERT_BIAS_BYTES_PER_VALUE = (12.0, 12.0)
"""(forward, backward) HBM bytes per routed output value of Megatron-LM's expert-output bias,
added by ``TEGroupedMLP._apply_bias`` in an eager loop over the local experts as
``cat([t + b * p])`` in bf16: forward ``b * p`` (write 2), ``t + .`` (read 4, write 2), ``cat``
(read 2, write 2); backward the two broadcast gradients ``g * p`` and ``g * b`` (read 2, write
2 each) and their reductions (read 2 each)."""

EXPERT_BIAS_KERNELS_PER_EXPERT = (2, 4)
"""(forward, backward) kernels ``_apply_bias`` launches per local expert (see above)."""

EXPERT_BIAS_CAT_KERNELS = 1
"""The one ``cat`` that joins ``_apply_bias``'s per-expert results (see above)."""

UNFUSED_ROPE_KERNELS = (6, 7)
"""(forward, backward) kernels of the unfused RoPE per rotated tensor (see above)."""

CLAMPED_GLU_BYTES_PER_VALUE = (16.0, 30.0)
"""(forward, backward) HBM bytes per routed output value (one of the F of each half) of the
clamps Megatron-LM applies before its fused quick-GEGLU (``weighted_bias_quick_geglu_impl`` in
``megatron/core/fusions/fused_bias_geglu.py``, commit 2edffadb, with
``activation_func_clamp_value``): forward ``clamp`` of the gate half and of the linear half (read
2, write 2 bytes each) and the ``cat`` that rejoins them (read 4, write 4); backward PyTorch's
``clamp_backward``, a ``where`` over a boolean mask (gate half: ``le`` read 2 write 1, ``where``
read 1 + 2 write 2; linear half: ``ge`` and ``le`` 3 each, ``logical_and_`` 3, ``where`` 5) and
the chunk's gradient ``cat`` (read 4, write 4). The fused activation itself is
:func:`elementwise_bytes_per_token`'s."""

CLAMPED_GLU_KERNELS = (3, 7)
"""(forward, backward) kernels of those clamps (see above)."""


def unfused_kernel_bytes_per_token(
    model: ModelSpec, *, moe_layer: bool, fused_mlp: bool = False
) -> tuple[float, float]:
    """(forward, backward) HBM bytes per token that one layer's unfused framework kernels move
    beyond the fused ones :func:`elementwise_bytes_per_token` counts: RoPE with a YaRN attention
    factor (Megatron-LM ``apply_rotary_pos_emb`` falls back to the unfused path when
    ``mscale != 1``) on queries and keys, the expert-output biases of a biased MoE
    (``mlp_bias``), applied per routed copy, and the input clamps of a clamped expert activation
    (:data:`planner.specs.model.CLAMPED_ACTIVATIONS`, :data:`CLAMPED_GLU_BYTES_PER_VALUE`).
    ``fused_mlp``: the experts run as Transformer Engine's fused grouped MLP
    (:func:`planner.cost.stage.runs_fused_grouped_mlp`), whose GEMM epilogues add the biases and
    apply the clamped GLU, so only the RoPE is left.

    gpt-oss-120b: RoPE on (64 + 8) x 64 = 4,608 values, (24 - 4) and (26 - 8) bytes each; biases
    on 4 x 2,880 routed values, 12 bytes each way; clamps on the same 11,520 values, 16 and 30
    bytes: 92,160 + 138,240 + 184,320 and 82,944 + 138,240 + 345,600.

    >>> from planner.catalog import load_model
    >>> unfused_kernel_bytes_per_token(load_model("gpt-oss-120b"), moe_layer=True)
    (414720.0, 566784.0)
    >>> unfused_kernel_bytes_per_token(load_model("gpt-oss-120b"), moe_layer=True, fused_mlp=True)
    (92160.0, 82944.0)
    """
    groups = _unfused_kernel_groups(
        model, moe_layer=moe_layer, local_experts=0.0, fused_mlp=fused_mlp
    )
    forward = backward = 0.0
    for group_forward, group_backward, _ in groups:
        forward += group_forward
        backward += group_backward
    return forward, backward


def unfused_kernel_launches(
    model: ModelSpec, *, moe_layer: bool, local_experts: float, fused_mlp: bool = False
) -> float:
    """(forward + backward) kernel launches of the unfused kernels of
    :func:`unfused_kernel_bytes_per_token` in one layer, each paying the fixed per-kernel cost."""
    launches = 0.0
    for _, _, group_launches in _unfused_kernel_groups(
        model, moe_layer=moe_layer, local_experts=local_experts, fused_mlp=fused_mlp
    ):
        launches += group_launches
    return launches


def _unfused_kernel_groups(
    model: ModelSpec, *, moe_layer: bool, local_experts: float, fused_mlp: bool = False
) -> list[tuple[float, float, float]]:
    """(forward bytes per token, backward bytes per token, launches) of each group of unfused
    kernels one layer runs (:func:`unfused_kernel_bytes_per_token` lists them; ``fused_mlp``
    drops the experts' biases and clamps, which the fused grouped MLP runs in its epilogues)."""
    groups = []
    if model.rope_attention_factor != 1.0 and model.position_embedding == "rope":
        rotated = (model.num_attention_heads + model.num_kv_heads) * model.head_dim
        groups.append(
            (
                (UNFUSED_ROPE_BYTES_PER_VALUE[0] - FUSED_ROPE_BYTES_PER_VALUE) * rotated,
                (UNFUSED_ROPE_BYTES_PER_VALUE[1] - 2.0 * FUSED_ROPE_BYTES_PER_VALUE) * rotated,
                2 * sum(UNFUSED_ROPE_KERNELS),
            )
        )
    if not moe_layer or model.moe is None or fused_mlp:
        return groups
    if model.mlp_bias:
        routed = model.moe.top_k * model.hidden_size
        groups.append(
            (
                EXPERT_BIAS_BYTES_PER_VALUE[0] * routed,
                EXPERT_BIAS_BYTES_PER_VALUE[1] * routed,
                local_experts * sum(EXPERT_BIAS_KERNELS_PER_EXPERT) + EXPERT_BIAS_CAT_KERNELS,
            )
        )
    if model.ffn_activation in CLAMPED_ACTIVATIONS:
        routed_ffn = model.moe.top_k * model.moe.expert_ffn_hidden_size
        groups.append(
            (
                CLAMPED_GLU_BYTES_PER_VALUE[0] * routed_ffn,
                CLAMPED_GLU_BYTES_PER_VALUE[1] * routed_ffn,
                sum(CLAMPED_GLU_KERNELS),
            )
        )
    return groups
